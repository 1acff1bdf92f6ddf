# bench-tokenizer — GPT-2 BPE encode (cold and warm piece cache) and decode throughput, MB/s.
add_executable(bench-tokenizer ${CMAKE_SOURCE_DIR}/bench/bench_tokenizer.c)
target_compile_definitions(bench-tokenizer PRIVATE WT_SOURCE_DIR="${CMAKE_SOURCE_DIR}")
target_link_libraries(bench-tokenizer PRIVATE wt_tokenizer wt_common)
