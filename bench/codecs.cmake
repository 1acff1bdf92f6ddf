# bench-codecs — encode + decode throughput of every gradient codec beside memcpy.
add_executable(bench-codecs ${CMAKE_SOURCE_DIR}/bench/bench_codecs.c)
target_link_libraries(bench-codecs PRIVATE wt_compress wt_kernels wt_common PkgConfig::WT_zlib m)
