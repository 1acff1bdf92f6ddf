/* codec_int8 — blockwise absmax quantization to int8 (the arithmetic is in codec_quant.c).
 *
 * Per block of B elements: scale = absmax / 127, q = round(x * 127 / absmax) in [-127, 127],
 * decoded as q * scale. Nearest-even rounding errs by at most scale/2; stochastic rounding by
 * less than scale, and is unbiased.
 */
#include <string.h>

#include "compress/codec_internal.h"

#define S_CHUNK 16384 /* about this many elements per OpenMP work item */
#define S_QMAX 127.0f

static size_t s_int8_max_size(size_t n, const compress_params *p) {
  return compress_nblocks(n, compress_block_of(n, p)) * sizeof(float) + n;
}

static int s_int8_encode(const float *x, size_t n, const compress_params *p, uint8_t *out,
                         size_t cap, size_t *len) {
  size_t need = s_int8_max_size(n, p), block = compress_block_of(n, p);
  WT_CHECK(compress_check_cap("int8", need, cap));
  size_t nb = compress_nblocks(n, block), per = WT_MAX((size_t)1, S_CHUNK / block);
  size_t chunks = (nb + per - 1) / per;
  int8_t *q = (int8_t *)(out + nb * sizeof(float));
  int simd = compress_quant_simd();
#pragma omp parallel for if (n >= COMPRESS_OMP_MIN) schedule(static)
  for (size_t c = 0; c < chunks; c++) {
    for (size_t b = c * per; b < WT_MIN(nb, (c + 1) * per); b++) {
      size_t i0 = b * block;
      float scale =
          compress_quant_block(x + i0, WT_MIN(block, n - i0), S_QMAX, p, i0, simd, q + i0);
      memcpy(out + b * sizeof scale, &scale, sizeof scale);
    }
  }
  *len = need;
  return WT_OK;
}

static int s_int8_decode_any(const uint8_t *in, size_t len, size_t n, const compress_params *p,
                             float alpha, int add, float *y) {
  WT_CHECK(compress_check_len("int8", len, s_int8_max_size(n, p), n));
  size_t block = compress_block_of(n, p), nb = compress_nblocks(n, block);
  const int8_t *q = (const int8_t *)(in + nb * sizeof(float));
  int simd = compress_quant_simd();
  // Large outputs go block run by block run through a cached buffer, then past the caches.
  size_t per = WT_MAX((size_t)1, COMPRESS_STREAM_PIECE / block), chunks = (nb + per - 1) / per;
  int stream =
      simd && !add && block <= COMPRESS_STREAM_PIECE && compress_stream_wanted(n * sizeof(float));
#pragma omp parallel for if (n >= COMPRESS_OMP_MIN) schedule(static)
  for (size_t c = 0; c < chunks; c++) {
    size_t b1 = WT_MIN(nb, (c + 1) * per), i0 = c * per * block;
    float piece[COMPRESS_STREAM_PIECE];
    for (size_t b = c * per; b < b1; b++) {
      size_t j = b * block;
      float scale, *dst = stream ? &piece[j - i0] : &y[j];
      memcpy(&scale, in + b * sizeof scale, sizeof scale);
      compress_dequant_block(q + j, WT_MIN(block, n - j), scale, alpha, add, simd, dst);
    }
    if (stream) compress_stream_store(y + i0, piece, (WT_MIN(n, b1 * block) - i0) * sizeof *y);
  }
  return WT_OK;
}

static int s_int8_decode(const uint8_t *in, size_t len, size_t n, const compress_params *p,
                         float *y) {
  return s_int8_decode_any(in, len, n, p, 1.0f, 0, y);
}

static int s_int8_decode_add(const uint8_t *in, size_t len, size_t n, const compress_params *p,
                             float alpha, float *y) {
  return s_int8_decode_any(in, len, n, p, alpha, 1, y);
}

const compress_codec_ops compress_int8_ops = {
    .name = "int8",
    .id = COMPRESS_CODEC_INT8,
    .max_size = s_int8_max_size,
    .encode = s_int8_encode,
    .decode = s_int8_decode,
    .decode_add = s_int8_decode_add,
};
