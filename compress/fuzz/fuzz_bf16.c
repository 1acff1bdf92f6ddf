/* fuzz_bf16 — libFuzzer target for the bf16 decoder (and the wire format); see fuzz_codec.h. */
#define FUZZ_CODEC "bf16"
#include "compress/fuzz/fuzz_codec.h"
