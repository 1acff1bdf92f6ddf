/* fuzz_randk — libFuzzer target for the randk decoder (and the wire format); see fuzz_codec.h. */
#define FUZZ_CODEC "randk"
#include "compress/fuzz/fuzz_codec.h"
