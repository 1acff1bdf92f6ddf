/* codec_fp16 — IEEE binary16 with round-to-nearest-even.
 *
 * The F16C path (vcvtps2ph / vcvtph2ps) and the portable bit-manipulation path give the same
 * bits for every input, NaNs included (quieted, top payload bits kept), so peers with and
 * without F16C agree; tests/compress checks that bitwise.
 */
#include <cpuid.h>
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "compress/codec_internal.h"

/* float -> half, round-to-nearest-even, by integer arithmetic on the bits. */
static inline uint16_t s_f2h(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
  uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return sign | 0x7e00 | (uint16_t)((ax >> 13) & 0x3ff); // NaN, quieted
  if (ax >= 0x477ff000u) return sign | 0x7c00; // >= 65520 rounds to infinity
  if (ax < 0x38800000u) {                      // half subnormal or zero
    // Adding 0.5f puts the half-subnormal bits at the bottom of the float's mantissa and lets
    // the FPU do the nearest-even rounding.
    float a, magic = 0.5f;
    memcpy(&a, &ax, sizeof a);
    a += magic;
    uint32_t r;
    memcpy(&r, &a, sizeof r);
    return sign | (uint16_t)(r - 0x3f000000u);
  }
  uint32_t odd = (ax >> 13) & 1;
  ax += 0xc8000fffu + odd; // rebias exponent (-112 << 23, mod 2^32) and round to nearest even
  return sign | (uint16_t)(ax >> 13);
}

/* half -> float, exact (NaNs are quieted, as vcvtph2ps does). */
static inline float s_h2f(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, x;
  if (exp == 0) {
    float v = (float)mant * 0x1.0p-24f; // subnormal (or zero): exact in float
    memcpy(&x, &v, sizeof x);
    x |= sign;
  } else if (exp == 31) {
    x = sign | 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0);
  } else {
    x = sign | ((exp + 112) << 23) | (mant << 13);
  }
  float f;
  memcpy(&f, &x, sizeof f);
  return f;
}

static void s_encode_portable(const float *x, size_t m, uint8_t *out) {
  for (size_t i = 0; i < m; i++) {
    uint16_t h = s_f2h(x[i]);
    memcpy(out + 2 * i, &h, sizeof h);
  }
}

static void s_decode_portable(const uint8_t *in, size_t m, float alpha, int add, float *y) {
  for (size_t i = 0; i < m; i++) {
    uint16_t h;
    memcpy(&h, in + 2 * i, sizeof h);
    y[i] = add ? fmaf(alpha, s_h2f(h), y[i]) : s_h2f(h);
  }
}

__attribute__((target("f16c,avx2,fma"))) static void s_encode_f16c(const float *x, size_t m,
                                                                   uint8_t *out) {
  size_t i = 0;
  for (; i + 8 <= m; i += 8) {
    __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128((__m128i *)(out + 2 * i), h);
  }
  s_encode_portable(x + i, m - i, out + 2 * i);
}

__attribute__((target("f16c,avx2,fma"))) static void s_decode_f16c(const uint8_t *in, size_t m,
                                                                   float alpha, int add, float *y) {
  size_t i = 0;
  __m256 a = _mm256_set1_ps(alpha);
  for (; i + 8 <= m; i += 8) {
    __m256 v = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(in + 2 * i)));
    if (add) v = _mm256_fmadd_ps(a, v, _mm256_loadu_ps(y + i));
    _mm256_storeu_ps(y + i, v);
  }
  s_decode_portable(in + 2 * i, m - i, alpha, add, y + i);
}

/* F16C by CPUID (leaf 1, ECX bit 29): clang's __builtin_cpu_supports does not know "f16c".
 * The avx2 check also covers the OS saving the YMM registers. */
static int s_use_f16c(void) {
  unsigned a, b, c = 0, d;
  int f16c = __get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1);
  return compress_simd_enabled() && f16c && __builtin_cpu_supports("avx2") &&
         __builtin_cpu_supports("fma");
}

static size_t s_fp16_max_size(size_t n, const compress_params *p) {
  (void)p;
  return 2 * n;
}

/* The element kernels this CPU runs (SIMD unless unavailable or turned off). */
static compress_half_kernels s_kernels(void) {
  int simd = s_use_f16c();
  return (compress_half_kernels){"fp16", simd ? s_encode_f16c : s_encode_portable,
                                 simd ? s_decode_f16c : s_decode_portable, simd};
}

static int s_fp16_encode(const float *x, size_t n, const compress_params *p, uint8_t *out,
                         size_t cap, size_t *len) {
  (void)p;
  compress_half_kernels k = s_kernels();
  return compress_half_encode(&k, x, n, out, cap, len);
}

static int s_fp16_decode_any(const uint8_t *in, size_t len, size_t n, float alpha, int add,
                             float *y) {
  compress_half_kernels k = s_kernels();
  return compress_half_decode(&k, in, len, n, alpha, add, y);
}

static int s_fp16_decode(const uint8_t *in, size_t len, size_t n, const compress_params *p,
                         float *y) {
  (void)p;
  return s_fp16_decode_any(in, len, n, 1.0f, 0, y);
}

static int s_fp16_decode_add(const uint8_t *in, size_t len, size_t n, const compress_params *p,
                             float alpha, float *y) {
  (void)p;
  return s_fp16_decode_any(in, len, n, alpha, 1, y);
}

const compress_codec_ops compress_fp16_ops = {
    .name = "fp16",
    .id = COMPRESS_CODEC_FP16,
    .max_size = s_fp16_max_size,
    .encode = s_fp16_encode,
    .decode = s_fp16_decode,
    .decode_add = s_fp16_decode_add,
};
