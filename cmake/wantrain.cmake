# Helpers shared by the module CMakeLists.

# wt_add_test(NAME name SOURCES a.c ... LIBS lib ... [LABELS unit|integration|gpu] [TIMEOUT s]
#             [ARGS ...])
# Builds one test program into build/bin/tests/ and registers it with ctest. A test that exits
# 77 is reported as skipped (a gpu test on a machine without a GPU, a missing shared/ fixture).
# Tests run with OMP_WAIT_POLICY=PASSIVE: ctest runs several at once on few cores, where
# OpenMP threads that spin while idle slow every program down (kernels/kernels.h).
function(wt_add_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LIBS;LABELS;ARGS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  if(NOT T_LABELS)
    set(T_LABELS unit)
  endif()
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} wt_common)
  set_target_properties(${T_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin/tests)
  add_test(NAME ${T_NAME} COMMAND ${T_NAME} ${T_ARGS} WORKING_DIRECTORY ${CMAKE_BINARY_DIR})
  set_tests_properties(${T_NAME} PROPERTIES TIMEOUT ${T_TIMEOUT} LABELS "${T_LABELS}"
    SKIP_RETURN_CODE 77
    ENVIRONMENT "WT_SOURCE_DIR=${CMAKE_SOURCE_DIR};WT_SHARED_DIR=${CMAKE_SOURCE_DIR}/../shared;WT_BIN_DIR=${CMAKE_BINARY_DIR}/bin;OMP_WAIT_POLICY=PASSIVE")
endfunction()
