/* codec_bf16 — bfloat16 (the top 16 bits of a float32), round-to-nearest-even.
 *
 * Integer arithmetic on the bits in both paths (portable and AVX2), not vcvtneps2bf16: that
 * instruction flushes subnormals to zero, and the two paths must give identical bytes. A NaN
 * stays a (quiet) NaN instead of rounding into infinity.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "compress/codec_internal.h"

static inline uint16_t s_f2bf(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x0040); // quiet the NaN
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1)) >> 16); // carries into exponent: RNE
}

static inline float s_bf2f(uint16_t h) {
  uint32_t x = (uint32_t)h << 16;
  float f;
  memcpy(&f, &x, sizeof f);
  return f;
}

static void s_encode_portable(const float *x, size_t m, uint8_t *out) {
  for (size_t i = 0; i < m; i++) {
    uint16_t h = s_f2bf(x[i]);
    memcpy(out + 2 * i, &h, sizeof h);
  }
}

static void s_decode_portable(const uint8_t *in, size_t m, float alpha, int add, float *y) {
  for (size_t i = 0; i < m; i++) {
    uint16_t h;
    memcpy(&h, in + 2 * i, sizeof h);
    y[i] = add ? fmaf(alpha, s_bf2f(h), y[i]) : s_bf2f(h);
  }
}

/* 8 floats -> 8 bf16 in the low 16 bits of each 32-bit lane. */
__attribute__((target("avx2,fma"))) static inline __m256i s_round8(__m256i v) {
  __m256i one = _mm256_set1_epi32(1), bias = _mm256_set1_epi32(0x7fff);
  __m256i odd = _mm256_and_si256(_mm256_srli_epi32(v, 16), one);
  __m256i r = _mm256_srli_epi32(_mm256_add_epi32(v, _mm256_add_epi32(bias, odd)), 16);
  __m256i abs = _mm256_and_si256(v, _mm256_set1_epi32(0x7fffffff));
  __m256i nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7f800000));
  __m256i q = _mm256_or_si256(_mm256_srli_epi32(v, 16), _mm256_set1_epi32(0x40));
  return _mm256_blendv_epi8(r, q, nan);
}

__attribute__((target("avx2,fma"))) static void s_encode_avx2(const float *x, size_t m,
                                                              uint8_t *out) {
  size_t i = 0;
  for (; i + 16 <= m; i += 16) {
    __m256i a = s_round8(_mm256_loadu_si256((const __m256i *)(x + i)));
    __m256i b = s_round8(_mm256_loadu_si256((const __m256i *)(x + i + 8)));
    // packus interleaves 128-bit lanes; the permute puts a's 8 values before b's.
    __m256i p = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xd8);
    _mm256_storeu_si256((__m256i *)(out + 2 * i), p);
  }
  s_encode_portable(x + i, m - i, out + 2 * i);
}

__attribute__((target("avx2,fma"))) static void s_decode_avx2(const uint8_t *in, size_t m,
                                                              float alpha, int add, float *y) {
  size_t i = 0;
  __m256 a = _mm256_set1_ps(alpha);
  for (; i + 8 <= m; i += 8) {
    __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(in + 2 * i)));
    __m256 v = _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
    if (add) v = _mm256_fmadd_ps(a, v, _mm256_loadu_ps(y + i));
    _mm256_storeu_ps(y + i, v);
  }
  s_decode_portable(in + 2 * i, m - i, alpha, add, y + i);
}

static int s_use_avx2(void) {
  return compress_simd_enabled() && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

static size_t s_bf16_max_size(size_t n, const compress_params *p) {
  (void)p;
  return 2 * n;
}

/* The element kernels this CPU runs (SIMD unless unavailable or turned off). */
static compress_half_kernels s_kernels(void) {
  int simd = s_use_avx2();
  return (compress_half_kernels){"bf16", simd ? s_encode_avx2 : s_encode_portable,
                                 simd ? s_decode_avx2 : s_decode_portable, simd};
}

static int s_bf16_encode(const float *x, size_t n, const compress_params *p, uint8_t *out,
                         size_t cap, size_t *len) {
  (void)p;
  compress_half_kernels k = s_kernels();
  return compress_half_encode(&k, x, n, out, cap, len);
}

static int s_bf16_decode_any(const uint8_t *in, size_t len, size_t n, float alpha, int add,
                             float *y) {
  compress_half_kernels k = s_kernels();
  return compress_half_decode(&k, in, len, n, alpha, add, y);
}

static int s_bf16_decode(const uint8_t *in, size_t len, size_t n, const compress_params *p,
                         float *y) {
  (void)p;
  return s_bf16_decode_any(in, len, n, 1.0f, 0, y);
}

static int s_bf16_decode_add(const uint8_t *in, size_t len, size_t n, const compress_params *p,
                             float alpha, float *y) {
  (void)p;
  return s_bf16_decode_any(in, len, n, alpha, 1, y);
}

const compress_codec_ops compress_bf16_ops = {
    .name = "bf16",
    .id = COMPRESS_CODEC_BF16,
    .max_size = s_bf16_max_size,
    .encode = s_bf16_encode,
    .decode = s_bf16_decode,
    .decode_add = s_bf16_decode_add,
};
