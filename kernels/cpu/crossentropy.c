/* crossentropy — softmax + cross-entropy fused with the logits, rows in parallel. The forward
 * keeps only each row's log-sum-exp; the backward recomputes the probabilities from it instead
 * of storing a (N, V) softmax, which for GPT-2's V = 50257 would be another logits-sized array. */
#include <math.h>
#ifdef __AVX__
#include <immintrin.h>
#endif

#include "kernels/cpu/cpu_internal.h"
#include "kernels/cpu/fastmath_internal.h"

/* The row's maximum. With AVX, two vectors of running maxima: one running maximum is a serial
 * chain of compares, and the compiler does not vectorise that reduction by itself. Max is exact,
 * so the grouping does not change the result; NaN logits are skipped as in the scalar loop
 * (vmaxps returns its second operand when the first is NaN). */
static float s_row_max(const float *z, int V) {
  float maxv = -INFINITY;
  int v = 0;
#ifdef __AVX__
  __m256 m0 = _mm256_set1_ps(-INFINITY), m1 = m0;
  for (; v + 16 <= V; v += 16) {
    m0 = _mm256_max_ps(_mm256_loadu_ps(z + v), m0);
    m1 = _mm256_max_ps(_mm256_loadu_ps(z + v + 8), m1);
  }
  float m[8];
  _mm256_storeu_ps(m, _mm256_max_ps(m0, m1));
  for (int k = 0; k < 8; k++) maxv = m[k] > maxv ? m[k] : maxv;
#endif
  for (; v < V; v++) maxv = z[v] > maxv ? z[v] : maxv;
  return maxv;
}

/* Sum of n floats in double, the order fixed by n alone: with AVX in four vectors of four
 * running sums, so the adds do not wait on each other. */
static double s_sum_double(const float *e, int n) {
  double sum = 0;
  int v = 0;
#ifdef __AVX__
  __m256d a[4] = {_mm256_setzero_pd(), _mm256_setzero_pd(), _mm256_setzero_pd(),
                  _mm256_setzero_pd()};
  for (; v + 16 <= n; v += 16)
    for (int k = 0; k < 4; k++)
      a[k] = _mm256_add_pd(a[k], _mm256_cvtps_pd(_mm_loadu_ps(e + v + 4 * k)));
  double lanes[4];
  _mm256_storeu_pd(lanes, _mm256_add_pd(_mm256_add_pd(a[0], a[1]), _mm256_add_pd(a[2], a[3])));
  sum = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
#endif
  for (; v < n; v++) sum += e[v];
  return sum;
}

/* sum over the row of exp(z - maxv) in double: V terms, and the loss is compared against
 * PyTorch. Blocked, because a single running double sum is a dependent add per logit (13M per
 * GPT-2 124M step). */
static double s_row_sumexp(const float *z, int V, float maxv) {
  enum { BLOCK = 256 };
  float e[BLOCK]; /* exps a block at a time: that loop vectorises on its own */
  double sum = 0;
  for (int v0 = 0; v0 < V; v0 += BLOCK) {
    int len = V - v0 < BLOCK ? V - v0 : BLOCK;
    for (int i = 0; i < len; i++) e[i] = wt_fast_expf(z[v0 + i] - maxv);
    sum += s_sum_double(e, len);
  }
  return sum;
}

void kernels_cpu_crossentropy_forward(float *losses, float *lse, const float *logits,
                                      const int *targets, int N, int V) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    const float *z = logits + (size_t)n * V;
    float maxv = s_row_max(z, V);
    float l = maxv + (float)log(s_row_sumexp(z, V, maxv));
    lse[n] = l;
    losses[n] = l - z[targets[n]];
  }
}

void kernels_cpu_crossentropy_backward(float *dlogits, const float *logits, const float *lse,
                                       const int *targets, float dloss, int N, int V) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    const float *z = logits + (size_t)n * V;
    float *dz = dlogits + (size_t)n * V;
    float l = lse[n];
    for (int v = 0; v < V; v++) dz[v] = wt_fast_expf(z[v] - l) * dloss;
    dz[targets[n]] -= dloss;
  }
}
