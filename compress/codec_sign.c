/* codec_sign — 1 bit per value plus one scale per block (signSGD with a magnitude).
 *
 * Per block the scale is mean |x|; element i decodes to -scale if its sign bit was set and
 * +scale otherwise. Bits are counted over the whole tensor: bit i%8 of byte i/8.
 *
 * The block sum is defined as 16 interleaved partial sums (lane j takes elements j, j+16, ...
 * of the block) added lane 0 to 15, so that the AVX-512 path (one lane per partial sum) and the
 * portable one give the same scale bit for bit.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "compress/codec_internal.h"

#define S_CHUNK 16384 /* about this many elements per OpenMP work item */

static float s_lanes_sum(const float lanes[16]) {
  float s = 0;
  for (int j = 0; j < 16; j++) s += lanes[j];
  return s;
}

static float s_mean_abs_portable(const float *x, size_t m) {
  float lanes[16] = {0};
  for (size_t i = 0; i < m; i++) lanes[i % 16] += fabsf(x[i]);
  return s_lanes_sum(lanes) / (float)m;
}

static void s_bits_portable(const float *x, size_t m, uint8_t *bits) {
  memset(bits, 0, (m + 7) / 8);
  for (size_t i = 0; i < m; i++)
    if (signbit(x[i])) bits[i / 8] |= (uint8_t)(1u << (i % 8));
}

__attribute__((target("avx512f,avx512dq"))) static float s_mean_abs_avx512(const float *x,
                                                                           size_t m) {
  __m512 acc = _mm512_setzero_ps();
  for (size_t i = 0; i < m; i += 16) {
    __mmask16 k = m - i >= 16 ? 0xffff : (__mmask16)((1u << (m - i)) - 1);
    acc = _mm512_add_ps(acc, _mm512_abs_ps(_mm512_maskz_loadu_ps(k, x + i)));
  }
  float lanes[16];
  _mm512_storeu_ps(lanes, acc);
  return s_lanes_sum(lanes) / (float)m;
}

/* Sign bits of x[0..m); m is a multiple of 8 except for the tensor's last work item. */
__attribute__((target("avx512f,avx512dq"))) static void s_bits_avx512(const float *x, size_t m,
                                                                      uint8_t *bits) {
  size_t i = 0;
  for (; i + 16 <= m; i += 16) {
    uint16_t k = (uint16_t)_mm512_movepi32_mask(_mm512_castps_si512(_mm512_loadu_ps(x + i)));
    memcpy(bits + i / 8, &k, sizeof k);
  }
  s_bits_portable(x + i, m - i, bits + i / 8);
}

/* Decodes x[0..m) of one block starting at element i0 (bits are tensor-global). */
__attribute__((target("avx512f,avx512dq"))) static void s_decode_avx512(const uint8_t *bits,
                                                                        size_t i0, size_t m,
                                                                        float scale, float alpha,
                                                                        int add, float *y) {
  __m512 pos = _mm512_set1_ps(scale), neg = _mm512_set1_ps(-scale), a = _mm512_set1_ps(alpha);
  for (size_t i = 0; i < m; i += 16) {
    size_t g = i0 + i, cnt = WT_MIN((size_t)16, m - i); // bits [g, g+cnt): at most 3 bytes
    uint32_t w = 0;
    for (size_t b = g / 8; b <= (g + cnt - 1) / 8; b++) w |= (uint32_t)bits[b] << (8 * (b - g / 8));
    __mmask16 k = cnt == 16 ? 0xffff : (__mmask16)((1u << cnt) - 1);
    __mmask16 s = (__mmask16)(w >> (g % 8)) & k;
    __m512 v = _mm512_mask_blend_ps(s, pos, neg);
    if (add) v = _mm512_fmadd_ps(a, v, _mm512_maskz_loadu_ps(k, y + i));
    _mm512_mask_storeu_ps(y + i, k, v);
  }
}

static void s_decode_portable(const uint8_t *bits, size_t i0, size_t m, float scale, float alpha,
                              int add, float *y) {
  for (size_t i = 0; i < m; i++) {
    size_t g = i0 + i;
    float v = (bits[g / 8] >> (g % 8)) & 1 ? -scale : scale;
    y[i] = add ? fmaf(alpha, v, y[i]) : v;
  }
}

static int s_use_avx512(void) {
  return compress_simd_enabled() && __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512dq");
}

static size_t s_sign_max_size(size_t n, const compress_params *p) {
  return compress_nblocks(n, compress_block_of(n, p)) * sizeof(float) + (n + 7) / 8;
}

static int s_sign_encode(const float *x, size_t n, const compress_params *p, uint8_t *out,
                         size_t cap, size_t *len) {
  size_t need = s_sign_max_size(n, p), block = compress_block_of(n, p);
  WT_CHECK(compress_check_cap("sign", need, cap));
  size_t nb = compress_nblocks(n, block);
  // Work items of a multiple of 8 blocks start on a byte of bits, so no byte is shared.
  size_t per = WT_MAX((size_t)8, (S_CHUNK / block) & ~(size_t)7), chunks = (nb + per - 1) / per;
  uint8_t *bits = out + nb * sizeof(float);
  int simd = s_use_avx512();
#pragma omp parallel for if (n >= COMPRESS_OMP_MIN) schedule(static)
  for (size_t c = 0; c < chunks; c++) {
    size_t b1 = WT_MIN(nb, (c + 1) * per), i0 = c * per * block, i1 = WT_MIN(n, b1 * block);
    for (size_t b = c * per; b < b1; b++) {
      size_t j = b * block, m = WT_MIN(block, n - j);
      float scale = simd ? s_mean_abs_avx512(x + j, m) : s_mean_abs_portable(x + j, m);
      memcpy(out + b * sizeof scale, &scale, sizeof scale);
    }
    if (simd)
      s_bits_avx512(x + i0, i1 - i0, bits + i0 / 8);
    else
      s_bits_portable(x + i0, i1 - i0, bits + i0 / 8);
  }
  *len = need;
  return WT_OK;
}

static int s_sign_decode_any(const uint8_t *in, size_t len, size_t n, const compress_params *p,
                             float alpha, int add, float *y) {
  WT_CHECK(compress_check_len("sign", len, s_sign_max_size(n, p), n));
  size_t block = compress_block_of(n, p), nb = compress_nblocks(n, block);
  const uint8_t *bits = in + nb * sizeof(float);
  int simd = s_use_avx512();
  // Large outputs go block run by block run through a cached buffer, then past the caches.
  size_t per = WT_MAX((size_t)1, COMPRESS_STREAM_PIECE / block), chunks = (nb + per - 1) / per;
  int stream =
      simd && !add && block <= COMPRESS_STREAM_PIECE && compress_stream_wanted(n * sizeof(float));
#pragma omp parallel for if (n >= COMPRESS_OMP_MIN) schedule(static)
  for (size_t c = 0; c < chunks; c++) {
    size_t b1 = WT_MIN(nb, (c + 1) * per), i0 = c * per * block;
    float piece[COMPRESS_STREAM_PIECE];
    for (size_t b = c * per; b < b1; b++) {
      size_t j = b * block, m = WT_MIN(block, n - j);
      float scale, *dst = stream ? &piece[j - i0] : &y[j];
      memcpy(&scale, in + b * sizeof scale, sizeof scale);
      if (simd)
        s_decode_avx512(bits, j, m, scale, alpha, add, dst);
      else
        s_decode_portable(bits, j, m, scale, alpha, add, dst);
    }
    if (stream) compress_stream_store(y + i0, piece, (WT_MIN(n, b1 * block) - i0) * sizeof *y);
  }
  return WT_OK;
}

static int s_sign_decode(const uint8_t *in, size_t len, size_t n, const compress_params *p,
                         float *y) {
  return s_sign_decode_any(in, len, n, p, 1.0f, 0, y);
}

static int s_sign_decode_add(const uint8_t *in, size_t len, size_t n, const compress_params *p,
                             float alpha, float *y) {
  return s_sign_decode_any(in, len, n, p, alpha, 1, y);
}

const compress_codec_ops compress_sign_ops = {
    .name = "sign",
    .id = COMPRESS_CODEC_SIGN,
    .max_size = s_sign_max_size,
    .encode = s_sign_encode,
    .decode = s_sign_decode,
    .decode_add = s_sign_decode_add,
};
