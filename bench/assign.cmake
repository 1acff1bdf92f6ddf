# bench-assign — solvers on the paper's world-wide scenario, on 1024 devices (cost curve) and on
# generated worlds of 64 to 10,000 devices (--scale).
add_executable(bench-assign ${CMAKE_SOURCE_DIR}/bench/bench_assign.c)
target_link_libraries(bench-assign PRIVATE wt_netsim wt_assign wt_common)
