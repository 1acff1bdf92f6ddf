# bench-collectives — ring all-reduce over the ZeroMQ transport (shaped vs its bound, unshaped
# vs plain ZeroMQ streams measured in the same run).
if(TARGET wt_parallel)
  add_executable(bench-collectives ${CMAKE_SOURCE_DIR}/bench/bench_collectives.c)
  target_link_libraries(bench-collectives PRIVATE wt_parallel wt_common)
endif()
