/* codec_int4 — blockwise absmax quantization to 4 bits, two values per byte.
 *
 * Per block: scale = absmax / 7, q = round(x * 7 / absmax) in [-7, 7] (codec_quant.c), stored
 * as a two's-complement nibble; element 2i is the low nibble of byte i, 2i+1 the high one,
 * counted over the whole tensor (blocks need not be even). Rounding as in int8: nearest-even
 * errs by at most scale/2, stochastic by less than scale and without bias.
 *
 * Work items quantize a run of blocks into a small int8 buffer and then pack it; each starts
 * on an even element, so no two threads share a byte.
 */
#include <stdlib.h>
#include <string.h>

#include "compress/codec_internal.h"

#define S_CHUNK 16384 /* about this many elements per OpenMP work item */
#define S_QMAX 7.0f

static size_t s_int4_max_size(size_t n, const compress_params *p) {
  return compress_nblocks(n, compress_block_of(n, p)) * sizeof(float) + (n + 1) / 2;
}

/* Blocks per work item: even, so every item starts on an even element. */
static size_t s_per(size_t block) {
  return WT_MAX((size_t)2, (S_CHUNK / block) & ~(size_t)1);
}

static void s_pack(const int8_t *q, size_t m, uint8_t *packed) {
  for (size_t i = 0; i + 1 < m; i += 2)
    packed[i / 2] = (uint8_t)((q[i] & 0xf) | (q[i + 1] & 0xf) << 4);
  if (m % 2) packed[m / 2] = (uint8_t)(q[m - 1] & 0xf); // the tensor's odd last element
}

/* Sign-extends a nibble v in [0, 15] without a branch, so the loop below vectorizes. */
static inline int8_t s_sext4(unsigned v) {
  return (int8_t)((int)(v ^ 8) - 8);
}

static void s_unpack(const uint8_t *packed, size_t m, int8_t *q) {
  for (size_t i = 0; i + 1 < m; i += 2) {
    q[i] = s_sext4(packed[i / 2] & 0xfu);
    q[i + 1] = s_sext4(packed[i / 2] >> 4);
  }
  if (m % 2) q[m - 1] = s_sext4(packed[m / 2] & 0xfu);
}

static int s_int4_encode(const float *x, size_t n, const compress_params *p, uint8_t *out,
                         size_t cap, size_t *len) {
  size_t need = s_int4_max_size(n, p), block = compress_block_of(n, p);
  WT_CHECK(compress_check_cap("int4", need, cap));
  size_t nb = compress_nblocks(n, block), per = s_per(block), chunks = (nb + per - 1) / per;
  uint8_t *packed = out + nb * sizeof(float);
  int simd = compress_quant_simd();
#pragma omp parallel for if (n >= COMPRESS_OMP_MIN) schedule(static)
  for (size_t c = 0; c < chunks; c++) {
    size_t b1 = WT_MIN(nb, (c + 1) * per), i0 = c * per * block, m = WT_MIN(n, b1 * block) - i0;
    int8_t *q = wt_xmalloc(m);
    for (size_t b = c * per; b < b1; b++) {
      size_t j = b * block;
      float scale =
          compress_quant_block(x + j, WT_MIN(block, n - j), S_QMAX, p, j, simd, q + (j - i0));
      memcpy(out + b * sizeof scale, &scale, sizeof scale);
    }
    s_pack(q, m, packed + i0 / 2);
    free(q);
  }
  *len = need;
  return WT_OK;
}

static int s_int4_decode_any(const uint8_t *in, size_t len, size_t n, const compress_params *p,
                             float alpha, int add, float *y) {
  WT_CHECK(compress_check_len("int4", len, s_int4_max_size(n, p), n));
  size_t block = compress_block_of(n, p), nb = compress_nblocks(n, block);
  size_t per = s_per(block), chunks = (nb + per - 1) / per;
  const uint8_t *packed = in + nb * sizeof(float);
  int simd = compress_quant_simd();
  int stream = simd && !add && compress_stream_wanted(n * sizeof(float)); // past the caches
#pragma omp parallel for if (n >= COMPRESS_OMP_MIN) schedule(static)
  for (size_t c = 0; c < chunks; c++) {
    size_t b1 = WT_MIN(nb, (c + 1) * per), i0 = c * per * block, m = WT_MIN(n, b1 * block) - i0;
    int8_t *q = wt_xmalloc(m);
    float *piece = stream ? wt_xmalloc(m * sizeof *piece) : NULL;
    s_unpack(packed + i0 / 2, m, q);
    for (size_t b = c * per; b < b1; b++) {
      size_t j = b * block;
      float scale, *dst = stream ? piece + (j - i0) : y + j;
      memcpy(&scale, in + b * sizeof scale, sizeof scale);
      compress_dequant_block(q + (j - i0), WT_MIN(block, n - j), scale, alpha, add, simd, dst);
    }
    if (stream) compress_stream_store(y + i0, piece, m * sizeof *y);
    free(piece);
    free(q);
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
