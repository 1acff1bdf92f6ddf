# bench-robust — the robust all-reduce's bytes, compute and wall time against the ring.
if(TARGET wt_parallel)
  add_executable(bench-robust ${CMAKE_SOURCE_DIR}/bench/bench_robust.c)
  target_link_libraries(bench-robust PRIVATE wt_parallel wt_common)
endif()
