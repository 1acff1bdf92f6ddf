/* codec_bf16 — bfloat16 (the top 16 bits of a float32), round-to-nearest-even.
 *
 * Integer arithmetic on the bits in both paths (portable and AVX2), not vcvtneps2bf16: that
 * instruction flushes subnormals to zero, and the two paths must give identical bytes. A NaN
 * stays a (quiet) NaN instead of rounding into infinity.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "codec_internal.h"

#define S_CHUNK 16384 /* elements per OpenMP work item */

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

static int s_bf16_encode(const float *x, size_t n, const compress_params *p, uint8_t *out,
                         size_t cap, size_t *len) {
  WT_CHECK(compress_check_cap("bf16", s_bf16_max_size(n, p), cap));
  int simd = s_use_avx2(), stream = simd && compress_stream_wanted(2 * n);
  size_t chunks = (n + S_CHUNK - 1) / S_CHUNK;
#pragma omp parallel for if (n >= COMPRESS_OMP_MIN) schedule(static)
  for (size_t c = 0; c < chunks; c++) {
    size_t i0 = c * S_CHUNK, m = WT_MIN((size_t)S_CHUNK, n - i0);
    if (stream) { // piece by piece through a cached buffer, then past the caches
      uint8_t piece[2 * COMPRESS_STREAM_PIECE];
      for (size_t j = i0; j < i0 + m; j += COMPRESS_STREAM_PIECE) {
        size_t pm = WT_MIN((size_t)COMPRESS_STREAM_PIECE, i0 + m - j);
        s_encode_avx2(x + j, pm, piece);
        compress_stream_store(out + 2 * j, piece, 2 * pm);
      }
    } else if (simd) {
      s_encode_avx2(x + i0, m, out + 2 * i0);
    } else {
      s_encode_portable(x + i0, m, out + 2 * i0);
    }
  }
  *len = 2 * n;
  return WT_OK;
}

static int s_bf16_decode_any(const uint8_t *in, size_t len, size_t n, const compress_params *p,
                             float alpha, int add, float *y) {
  WT_CHECK(compress_check_len("bf16", len, s_bf16_max_size(n, p), n));
  int simd = s_use_avx2(), stream = simd && !add && compress_stream_wanted(n * sizeof(float));
  size_t chunks = (n + S_CHUNK - 1) / S_CHUNK;
#pragma omp parallel for if (n >= COMPRESS_OMP_MIN) schedule(static)
  for (size_t c = 0; c < chunks; c++) {
    size_t i0 = c * S_CHUNK, m = WT_MIN((size_t)S_CHUNK, n - i0);
    if (stream) {
      float piece[COMPRESS_STREAM_PIECE];
      for (size_t j = i0; j < i0 + m; j += COMPRESS_STREAM_PIECE) {
        size_t pm = WT_MIN((size_t)COMPRESS_STREAM_PIECE, i0 + m - j);
        s_decode_avx2(in + 2 * j, pm, alpha, 0, piece);
        compress_stream_store(y + j, piece, pm * sizeof(float));
      }
    } else if (simd) {
      s_decode_avx2(in + 2 * i0, m, alpha, add, y + i0);
    } else {
      s_decode_portable(in + 2 * i0, m, alpha, add, y + i0);
    }
  }
  return WT_OK;
}

static int s_bf16_decode(const uint8_t *in, size_t len, size_t n, const compress_params *p,
                         float *y) {
  return s_bf16_decode_any(in, len, n, p, 1.0f, 0, y);
}

static int s_bf16_decode_add(const uint8_t *in, size_t len, size_t n, const compress_params *p,
                             float alpha, float *y) {
  return s_bf16_decode_any(in, len, n, p, alpha, 1, y);
}

const compress_codec_ops compress_bf16_ops = {
    .name = "bf16",
    .id = COMPRESS_CODEC_BF16,
    .max_size = s_bf16_max_size,
    .encode = s_bf16_encode,
    .decode = s_bf16_decode,
    .decode_add = s_bf16_decode_add,
};
