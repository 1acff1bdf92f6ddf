/* codec_quant — absmax quantization of one block to signed integers in [-qmax, qmax], shared by
 * int8 (qmax 127) and int4 (qmax 7), and its inverse.
 *
 * scale = absmax / qmax; q = round(x * (qmax / absmax)), nearest-even or stochastic (floor of
 * v + u, u uniform from a hash of (seed, index)). The AVX-512 path (nearest-even) does exactly
 * the portable arithmetic in 16 lanes, NaN handling included: max(a, b) returns b when either
 * is NaN, in both paths, so a NaN input never becomes the scale and quantizes to -qmax.
 */
#include <immintrin.h>
#include <math.h>

#include "compress/codec_internal.h"

/* a > b ? a : b, so a NaN `a` yields b: the semantics of vmaxps(a, b). */
static inline float s_max(float a, float b) {
  return a > b ? a : b;
}
static inline float s_min(float a, float b) {
  return a < b ? a : b;
}

static float s_absmax_portable(const float *x, size_t m) {
  float amax = 0;
  for (size_t i = 0; i < m; i++) amax = s_max(fabsf(x[i]), amax);
  return amax;
}

static void s_quant_portable(const float *x, size_t m, float inv, float qmax, int stochastic,
                             uint64_t seed, uint64_t first, int8_t *q) {
  for (size_t i = 0; i < m; i++) {
    float v = x[i] * inv;
    v = stochastic ? floorf(v + compress_uniform(seed, first + i)) : rintf(v);
    q[i] = (int8_t)s_min(s_max(v, -qmax), qmax); // the clamp also maps NaN to -qmax
  }
}

#define S_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))

static inline S_AVX512 __mmask16 s_tail_mask(size_t left) {
  return left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
}

static S_AVX512 float s_absmax_avx512(const float *x, size_t m) {
  __m512 acc = _mm512_setzero_ps();
  for (size_t i = 0; i < m; i += 16)
    acc = _mm512_max_ps(_mm512_abs_ps(_mm512_maskz_loadu_ps(s_tail_mask(m - i), x + i)), acc);
  return _mm512_reduce_max_ps(acc); // lanes hold no NaN, so the order of the max is free
}

static S_AVX512 void s_quant_avx512(const float *x, size_t m, float inv, float qmax, int8_t *q) {
  __m512 vinv = _mm512_set1_ps(inv), lo = _mm512_set1_ps(-qmax), hi = _mm512_set1_ps(qmax);
  for (size_t i = 0; i < m; i += 16) {
    __mmask16 k = s_tail_mask(m - i);
    __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), vinv);
    v = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
    _mm512_mask_cvtsepi32_storeu_epi8(q + i, k, _mm512_cvtps_epi32(v));
  }
}

static S_AVX512 void s_dequant_avx512(const int8_t *q, size_t m, float scale, float alpha, int add,
                                      float *y) {
  __m512 s = _mm512_set1_ps(scale), a = _mm512_set1_ps(alpha);
  for (size_t i = 0; i < m; i += 16) {
    __mmask16 k = s_tail_mask(m - i);
    __m512i w = _mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(k, q + i));
    __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(w), s);
    if (add) v = _mm512_fmadd_ps(a, v, _mm512_maskz_loadu_ps(k, y + i));
    _mm512_mask_storeu_ps(y + i, k, v);
  }
}

static void s_dequant_portable(const int8_t *q, size_t m, float scale, float alpha, int add,
                               float *y) {
  for (size_t i = 0; i < m; i++) {
    float v = (float)q[i] * scale;
    y[i] = add ? fmaf(alpha, v, y[i]) : v;
  }
}

int compress_quant_simd(void) {
  return compress_simd_enabled() && __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
}

float compress_quant_block(const float *x, size_t m, float qmax, const compress_params *p,
                           uint64_t first, int simd, int8_t *q) {
  float amax = simd ? s_absmax_avx512(x, m) : s_absmax_portable(x, m);
  float inv = amax > 0 ? qmax / amax : 0;
  if (simd && !p->stochastic)
    s_quant_avx512(x, m, inv, qmax, q);
  else
    s_quant_portable(x, m, inv, qmax, p->stochastic, p->seed, first, q);
  return amax / qmax;
}

void compress_dequant_block(const int8_t *q, size_t m, float scale, float alpha, int add, int simd,
                            float *y) {
  if (simd)
    s_dequant_avx512(q, m, scale, alpha, add, y);
  else
    s_dequant_portable(q, m, scale, alpha, add, y);
}
