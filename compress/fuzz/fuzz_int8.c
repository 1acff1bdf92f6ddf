/* fuzz_int8 — libFuzzer target for the int8 decoder (and the wire format); see fuzz_codec.h. */
#define FUZZ_CODEC "int8"
#include "compress/fuzz/fuzz_codec.h"
