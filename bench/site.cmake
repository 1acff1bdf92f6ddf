# bench-site — a pipeline stage on a site of t tensor-parallel ranks against one gpt_stage: the
# time of a forward + backward, the bytes between the ranks and the fixed cost of one site call.
if(TARGET wt_parallel)
  add_executable(bench-site ${CMAKE_SOURCE_DIR}/bench/bench_site.c)
  target_link_libraries(bench-site PRIVATE wt_parallel wt_model wt_kernels wt_common m)
endif()
