# bench-assign — solvers on the paper's world-wide scenario and on 1024 devices (cost curve).
if(TARGET wt_netsim)
  add_executable(bench-assign ${CMAKE_SOURCE_DIR}/bench/bench_assign.c)
  target_link_libraries(bench-assign PRIVATE wt_netsim wt_assign wt_common)
endif()
