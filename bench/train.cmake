# bench-train — fwd+bwd+update time per step and GFLOP/s for the GPT-2 124M shape and the
# default small config, beside the CPU back end's sgemm and the CPU's FMA peak measured in the
# same run.
add_executable(bench-train ${CMAKE_SOURCE_DIR}/bench/bench_train.c)
target_link_libraries(bench-train PRIVATE wt_model wt_kernels wt_common m)
if(OpenMP_C_FOUND)
  target_link_libraries(bench-train PRIVATE OpenMP::OpenMP_C)
endif()
