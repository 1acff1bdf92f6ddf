# bench-collectives — ring all-reduce over the ZeroMQ transport, sealed and insecure, beside a lone
# pair over plain ZeroMQ, CurveZMQ and the transport (scripts/bench-collectives.sh adds Open MPI).
if(TARGET wt_parallel)
  add_executable(bench-collectives ${CMAKE_SOURCE_DIR}/bench/bench_collectives.c)
  target_link_libraries(bench-collectives PRIVATE wt_parallel wt_common)
endif()
