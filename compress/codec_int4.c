/* codec_int4 — blockwise absmax quantization to 4 bits, two values per byte.
 *
 * Per block: scale = absmax / 7, q = round(x * 7 / absmax) in [-7, 7], stored as a two's-
 * complement nibble; element 2i is the low nibble of byte i, 2i+1 the high one, counted over
 * the whole tensor (blocks need not be even). Rounding as in int8: nearest-even errs by at most
 * scale/2, stochastic by less than scale and without bias. Portable C only: int4 is for the
 * slowest links, where the codec is never the bottleneck.
 */
#include <math.h>
#include <string.h>

#include "codec_internal.h"

#define S_CHUNK 16384 /* about this many elements per OpenMP work item */
#define S_QMAX 7.0f

static inline float s_max(float a, float b) { return a > b ? a : b; }
static inline float s_min(float a, float b) { return a < b ? a : b; }

static inline void s_put_nibble(uint8_t *packed, size_t i, int q) {
  uint8_t v = (uint8_t)(q & 0xf), shift = (uint8_t)((i & 1) * 4);
  packed[i / 2] = (uint8_t)((packed[i / 2] & ~(0xf << shift)) | (v << shift));
}

static inline int s_get_nibble(const uint8_t *packed, size_t i) {
  int v = (packed[i / 2] >> ((i & 1) * 4)) & 0xf;
  return v >= 8 ? v - 16 : v; // sign-extend
}

static size_t s_int4_max_size(size_t n, const compress_params *p) {
  return compress_nblocks(n, compress_block_of(n, p)) * sizeof(float) + (n + 1) / 2;
}

static void s_encode_block(const float *x, size_t i0, size_t m, const compress_params *p,
                           float *scale_out, uint8_t *packed) {
  float amax = 0;
  for (size_t i = 0; i < m; i++) amax = s_max(fabsf(x[i0 + i]), amax); // skips NaN
  float inv = amax > 0 ? S_QMAX / amax : 0;
  *scale_out = amax / S_QMAX;
  for (size_t i = i0; i < i0 + m; i++) {
    float v = x[i] * inv;
    v = p->stochastic ? floorf(v + compress_uniform(p->seed, i)) : rintf(v);
    s_put_nibble(packed, i, (int)s_min(s_max(v, -S_QMAX), S_QMAX));
  }
}

static int s_int4_encode(const float *x, size_t n, const compress_params *p, uint8_t *out,
                         size_t cap, size_t *len) {
  size_t need = s_int4_max_size(n, p), block = compress_block_of(n, p);
  WT_CHECK(compress_check_cap("int4", need, cap));
  size_t nb = compress_nblocks(n, block);
  // An even number of blocks per work item, so no two threads share a byte of nibbles.
  size_t per = WT_MAX((size_t)2, (S_CHUNK / block) & ~(size_t)1), chunks = (nb + per - 1) / per;
  uint8_t *packed = out + nb * sizeof(float);
  if (n % 2) packed[n / 2] = 0; // the unused high nibble of the last byte
#pragma omp parallel for if (n >= COMPRESS_OMP_MIN) schedule(static)
  for (size_t c = 0; c < chunks; c++) {
    for (size_t b = c * per; b < WT_MIN(nb, (c + 1) * per); b++) {
      float scale;
      s_encode_block(x, b * block, WT_MIN(block, n - b * block), p, &scale, packed);
      memcpy(out + b * sizeof scale, &scale, sizeof scale);
    }
  }
  *len = need;
  return WT_OK;
}

static int s_int4_decode_any(const uint8_t *in, size_t len, size_t n, const compress_params *p,
                             float alpha, int add, float *y) {
  WT_CHECK(compress_check_len("int4", len, s_int4_max_size(n, p), n));
  size_t block = compress_block_of(n, p), nb = compress_nblocks(n, block);
  const uint8_t *packed = in + nb * sizeof(float);
#pragma omp parallel for if (n >= COMPRESS_OMP_MIN) schedule(static)
  for (size_t b = 0; b < nb; b++) {
    float scale;
    memcpy(&scale, in + b * sizeof scale, sizeof scale);
    for (size_t i = b * block; i < WT_MIN(n, (b + 1) * block); i++) {
      float v = (float)s_get_nibble(packed, i) * scale;
      y[i] = add ? fmaf(alpha, v, y[i]) : v;
    }
  }
  return WT_OK;
}

static int s_int4_decode(const uint8_t *in, size_t len, size_t n, const compress_params *p,
                         float *y) {
  return s_int4_decode_any(in, len, n, p, 1.0f, 0, y);
}

static int s_int4_decode_add(const uint8_t *in, size_t len, size_t n, const compress_params *p,
                             float alpha, float *y) {
  return s_int4_decode_any(in, len, n, p, alpha, 1, y);
}

const compress_codec_ops compress_int4_ops = {
    .name = "int4",
    .id = COMPRESS_CODEC_INT4,
    .max_size = s_int4_max_size,
    .encode = s_int4_encode,
    .decode = s_int4_decode,
    .decode_add = s_int4_decode_add,
};
