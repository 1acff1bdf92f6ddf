/* codec_fp32 — the identity codec: n float32 as they are. The baseline that compressed runs are
 * compared with, and what a collective uses when compression is off.
 */
#include <math.h>
#include <string.h>

#include "compress/codec_internal.h"

static size_t s_fp32_max_size(size_t n, const compress_params *p) {
  (void)p;
  return n * sizeof(float);
}

static int s_fp32_encode(const float *x, size_t n, const compress_params *p, uint8_t *out,
                         size_t cap, size_t *len) {
  WT_CHECK(compress_check_cap("fp32", s_fp32_max_size(n, p), cap));
  if (n) memcpy(out, x, n * sizeof(float)); // x may be NULL when n == 0
  *len = n * sizeof(float);
  return WT_OK;
}

static int s_fp32_decode(const uint8_t *in, size_t len, size_t n, const compress_params *p,
                         float *y) {
  WT_CHECK(compress_check_len("fp32", len, s_fp32_max_size(n, p), n));
  if (len) memcpy(y, in, len);
  return WT_OK;
}

static int s_fp32_decode_add(const uint8_t *in, size_t len, size_t n, const compress_params *p,
                             float alpha, float *y) {
  WT_CHECK(compress_check_len("fp32", len, s_fp32_max_size(n, p), n));
#pragma omp parallel for if (n >= COMPRESS_OMP_MIN) schedule(static)
  for (size_t i = 0; i < n; i++) {
    float v;
    memcpy(&v, in + i * sizeof v, sizeof v); // the payload may be unaligned
    y[i] = fmaf(alpha, v, y[i]);
  }
  return WT_OK;
}

const compress_codec_ops compress_fp32_ops = {
    .name = "fp32",
    .id = COMPRESS_CODEC_FP32,
    .max_size = s_fp32_max_size,
    .encode = s_fp32_encode,
    .decode = s_fp32_decode,
    .decode_add = s_fp32_decode_add,
};
