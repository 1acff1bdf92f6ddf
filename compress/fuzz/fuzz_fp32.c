/* fuzz_fp32 — libFuzzer target for the fp32 decoder (and the wire format); see fuzz_codec.h. */
#define FUZZ_CODEC "fp32"
#include "compress/fuzz/fuzz_codec.h"
