/* codec_int8 — blockwise absmax quantization to int8.
 *
 * Per block of B elements: scale = absmax / 127, q = round(x * 127 / absmax) in [-127, 127],
 * decoded as q * scale. Nearest-even rounding errs by at most scale/2; stochastic rounding
 * (floor(v + u), u uniform from a hash of (seed, index)) by less than scale, and is unbiased.
 *
 * The AVX-512 path (nearest-even only) does exactly the portable arithmetic in 16 lanes, NaN
 * handling included: max(a, b) returns b when either is NaN, in both paths.
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "codec_internal.h"

#define S_CHUNK 16384 /* about this many elements per OpenMP work item */
#define S_QMAX 127.0f

/* a > b ? a : b, so a NaN `a` yields b: the semantics of vmaxps(a, b). */
static inline float s_max(float a, float b) { return a > b ? a : b; }
static inline float s_min(float a, float b) { return a < b ? a : b; }

static float s_absmax_portable(const float *x, size_t m) {
  float amax = 0;
  for (size_t i = 0; i < m; i++) amax = s_max(fabsf(x[i]), amax);
  return amax;
}

static void s_quant_portable(const float *x, size_t m, float inv, int stochastic, uint64_t seed,
                             uint64_t first, int8_t *q) {
  for (size_t i = 0; i < m; i++) {
    float v = x[i] * inv;
    v = stochastic ? floorf(v + compress_uniform(seed, first + i)) : rintf(v);
    q[i] = (int8_t)s_min(s_max(v, -S_QMAX), S_QMAX); // clamp also maps NaN to -127
  }
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) static float s_absmax_avx512(const float *x,
                                                                         size_t m) {
  __m512 acc = _mm512_setzero_ps();
  for (size_t i = 0; i < m; i += 16) {
    __mmask16 k = m - i >= 16 ? 0xffff : (__mmask16)((1u << (m - i)) - 1);
    __m512 v = _mm512_abs_ps(_mm512_maskz_loadu_ps(k, x + i));
    acc = _mm512_max_ps(v, acc);
  }
  float lanes[16], amax = 0;
  _mm512_storeu_ps(lanes, acc);
  for (int j = 0; j < 16; j++) amax = s_max(lanes[j], amax); // max is order-free (no NaNs)
  return amax;
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) static void s_quant_avx512(const float *x, size_t m,
                                                                       float inv, int8_t *q) {
  __m512 vinv = _mm512_set1_ps(inv), lo = _mm512_set1_ps(-S_QMAX), hi = _mm512_set1_ps(S_QMAX);
  for (size_t i = 0; i < m; i += 16) {
    __mmask16 k = m - i >= 16 ? 0xffff : (__mmask16)((1u << (m - i)) - 1);
    __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), vinv);
    v = _mm512_roundscale_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    v = _mm512_min_ps(_mm512_max_ps(v, lo), hi);
    _mm512_mask_cvtsepi32_storeu_epi8(q + i, k, _mm512_cvtps_epi32(v));
  }
}

__attribute__((target("avx512f,avx512bw,avx512vl"))) static void s_dequant_avx512(const int8_t *q,
                                                                         size_t m, float scale,
                                                                         float alpha, int add,
                                                                         float *y) {
  __m512 s = _mm512_set1_ps(scale), a = _mm512_set1_ps(alpha);
  for (size_t i = 0; i < m; i += 16) {
    __mmask16 k = m - i >= 16 ? 0xffff : (__mmask16)((1u << (m - i)) - 1);
    __m128i b = _mm_maskz_loadu_epi8(k, q + i);
    __m512 v = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(b)), s);
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

static int s_use_avx512(void) {
  return compress_simd_enabled() && __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
}

static size_t s_int8_max_size(size_t n, const compress_params *p) {
  return compress_nblocks(n, compress_block_of(n, p)) * sizeof(float) + n;
}

/* Encodes blocks [b0, b1): the unit of work one thread takes. */
static void s_encode_blocks(const float *x, size_t n, size_t block, size_t b0, size_t b1,
                            const compress_params *p, int simd, uint8_t *scales, int8_t *q) {
  for (size_t b = b0; b < b1; b++) {
    size_t i0 = b * block, m = WT_MIN(block, n - i0);
    float amax = simd ? s_absmax_avx512(x + i0, m) : s_absmax_portable(x + i0, m);
    float scale = amax / S_QMAX, inv = amax > 0 ? S_QMAX / amax : 0;
    memcpy(scales + b * sizeof scale, &scale, sizeof scale);
    if (simd && !p->stochastic) s_quant_avx512(x + i0, m, inv, q + i0);
    else s_quant_portable(x + i0, m, inv, p->stochastic, p->seed, i0, q + i0);
  }
}

static int s_int8_encode(const float *x, size_t n, const compress_params *p, uint8_t *out,
                         size_t cap, size_t *len) {
  size_t need = s_int8_max_size(n, p), block = compress_block_of(n, p);
  WT_CHECK(compress_check_cap("int8", need, cap));
  size_t nb = compress_nblocks(n, block), per = WT_MAX((size_t)1, S_CHUNK / block);
  size_t chunks = (nb + per - 1) / per;
  int8_t *q = (int8_t *)(out + nb * sizeof(float));
  int simd = s_use_avx512();
#pragma omp parallel for if (n >= COMPRESS_OMP_MIN) schedule(static)
  for (size_t c = 0; c < chunks; c++)
    s_encode_blocks(x, n, block, c * per, WT_MIN(nb, (c + 1) * per), p, simd, out, q);
  *len = need;
  return WT_OK;
}

static int s_int8_decode_any(const uint8_t *in, size_t len, size_t n, const compress_params *p,
                             float alpha, int add, float *y) {
  WT_CHECK(compress_check_len("int8", len, s_int8_max_size(n, p), n));
  size_t block = compress_block_of(n, p), nb = compress_nblocks(n, block);
  const int8_t *q = (const int8_t *)(in + nb * sizeof(float));
  int simd = s_use_avx512();
#pragma omp parallel for if (n >= COMPRESS_OMP_MIN) schedule(static)
  for (size_t b = 0; b < nb; b++) {
    size_t i0 = b * block, m = WT_MIN(block, n - i0);
    float scale;
    memcpy(&scale, in + b * sizeof scale, sizeof scale);
    if (simd) s_dequant_avx512(q + i0, m, scale, alpha, add, y + i0);
    else s_dequant_portable(q + i0, m, scale, alpha, add, y + i0);
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
