/* fuzz_topk — libFuzzer target for the topk decoder (and the wire format); see fuzz_codec.h. */
#define FUZZ_CODEC "topk"
#include "compress/fuzz/fuzz_codec.h"
