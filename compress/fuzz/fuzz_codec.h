/* fuzz_codec — the body shared by the per-codec libFuzzer targets (fuzz_<codec>.c defines
 * FUZZ_CODEC and includes this file).
 *
 * One input is read three ways, so a single corpus exercises the whole decode surface:
 *   bytes [0,2) element count n (mod 4097), [2,4) block size (mod 300; 0 = default), rest = body;
 *   1. body as a raw payload of the codec: decode and decode_add into exactly n floats;
 *   2. body as a framed wire message: peek, then decode into exactly the announced n floats;
 *   3. body as float32 values: encode, then decode the result, which must succeed.
 * ASan/UBSan catch any out-of-bounds access or undefined behaviour; a failure of step 3 aborts.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/codec.h"
#include "common/common.h"

#define FUZZ_MAX_WIRE_N (1u << 20) /* decode no larger tensors than this from a header */

static void s_fuzz_raw(const compress_codec *c, const uint8_t *body, size_t len, size_t n) {
  float *y = malloc((n ? n : 1) * sizeof *y); // exactly n: ASan flags any write past it
  if (compress_codec_decode(c, body, len, y, n) == WT_OK)
    compress_codec_decode_add(c, body, len, 0.5f, y, n);
  free(y);
}

static void s_fuzz_wire(const uint8_t *body, size_t len) {
  compress_wire_info info;
  if (compress_wire_peek(body, len, &info) != WT_OK || info.n > FUZZ_MAX_WIRE_N) return;
  float *y = calloc(info.n ? info.n : 1, sizeof *y);
  compress_wire_decode(body, len, y, (size_t)info.n);
  free(y);
}

static void s_fuzz_encode(const compress_codec *c, const uint8_t *body, size_t len) {
  size_t n = len / sizeof(float), cap = compress_codec_max_size(c, n), got = 0;
  float *x = malloc((n ? n : 1) * sizeof *x), *y = malloc((n ? n : 1) * sizeof *y);
  uint8_t *buf = malloc(cap ? cap : 1);
  if (n) memcpy(x, body, n * sizeof *x);
  if (compress_codec_encode(c, x, n, buf, cap, &got) != WT_OK ||
      compress_codec_decode(c, buf, got, y, n) != WT_OK) {
    fprintf(stderr, "%s: own encoding of %zu floats failed: %s\n", FUZZ_CODEC, n, wt_last_error());
    abort();
  }
  free(x), free(y), free(buf);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 4) return 0;
  size_t n = (size_t)(data[0] | data[1] << 8) % 4097,
         block = (size_t)(data[2] | data[3] << 8) % 300;
  compress_params p = compress_params_default();
  p.block = block;
  p.k_frac = 0.05;
  compress_codec *c = NULL;
  c = compress_codec_new(FUZZ_CODEC, &p);
  if (!c) abort(); // a build error, not input
  s_fuzz_raw(c, data + 4, size - 4, n);
  s_fuzz_wire(data + 4, size - 4);
  s_fuzz_encode(c, data + 4, size - 4);
  compress_codec_destroy(&c);
  return 0;
}
