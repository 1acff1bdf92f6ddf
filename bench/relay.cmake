# bench-relay — a sealed pair wired directly, through an outbox and through a relay (zmq.h
# "Reachability", parallel/transport/zmq_relay.h): streaming rate and small-message round trip.
if(TARGET wt_transport)
  add_executable(bench-relay ${CMAKE_SOURCE_DIR}/bench/bench_relay.c)
  target_link_libraries(bench-relay PRIVATE wt_transport wt_common)
endif()
