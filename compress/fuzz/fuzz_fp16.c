/* fuzz_fp16 — libFuzzer target for the fp16 decoder (and the wire format); see fuzz_codec.h. */
#define FUZZ_CODEC "fp16"
#include "compress/fuzz/fuzz_codec.h"
