/* fuzz_sign — libFuzzer target for the sign decoder (and the wire format); see fuzz_codec.h. */
#define FUZZ_CODEC "sign"
#include "compress/fuzz/fuzz_codec.h"
