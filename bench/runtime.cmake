# bench-runtime — S x R tasklets (threads, in-process transport) against one process: loss
# agreement over a long run, and compute seconds per stage (activation recomputation).
if(TARGET wt_parallel)
  add_executable(bench-runtime ${CMAKE_SOURCE_DIR}/bench/bench_runtime.c)
  target_link_libraries(bench-runtime PRIVATE wt_parallel wt_model wt_common m)
endif()
