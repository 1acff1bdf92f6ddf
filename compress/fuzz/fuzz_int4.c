/* fuzz_int4 — libFuzzer target for the int4 decoder (and the wire format); see fuzz_codec.h. */
#define FUZZ_CODEC "int4"
#include "compress/fuzz/fuzz_codec.h"
