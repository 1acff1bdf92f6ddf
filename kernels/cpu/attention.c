/* attention — causal multi-head self-attention on the fast CPU path.
 *
 * Work is split over (batch, head) pairs, which write disjoint columns of the outputs, so no
 * reduction crosses threads. Inside a pair every inner loop is an axpy over contiguous memory
 * (keys and values are first transposed to (hs, T)), which the compiler vectorises without
 * reassociating sums: results do not depend on threads or on buffer alignment. At GPT-2 sizes
 * (T <= 1024, hs = 64) this is a few percent of a step, so per-head sgemm calls — which would
 * fight OpenBLAS' own threads inside this parallel loop — do not pay. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backends.h"
#include "common.h"
#include "fastmath.h"

/* dst (hs, T) = the hs columns at src + col of T rows of stride `stride`. */
static void s_transpose(float *dst, const float *src, size_t stride, int T, int hs) {
  for (int t = 0; t < T; t++)
    for (int i = 0; i < hs; i++) dst[(size_t)i * T + t] = src[(size_t)t * stride + i];
}

/* y += a x over n floats; restrict tells the compiler the rows do not overlap, so it
 * vectorises without run-time alias checks (which it gives up on with six pointers). */
static inline void s_axpy(float *restrict y, const float *restrict x, float a, int n) {
  for (int i = 0; i < n; i++) y[i] += a * x[i];
}

/* One query row: s[0..t] = scale * q . K[t2]; p = softmax(s); zeros after t. */
static void s_softmax_row(float *p, const float *q, const float *kt, int t, int T, int hs,
                          float scale) {
  for (int t2 = 0; t2 <= t; t2++) p[t2] = 0.0f;
  for (int i = 0; i < hs; i++) s_axpy(p, kt + (size_t)i * T, q[i], t + 1);
  float maxv = -INFINITY;
  for (int t2 = 0; t2 <= t; t2++) {
    p[t2] *= scale;
    maxv = p[t2] > maxv ? p[t2] : maxv;
  }
  for (int t2 = 0; t2 <= t; t2++) p[t2] = wt_fast_expf(p[t2] - maxv);
  double sum = 0;
  for (int t2 = 0; t2 <= t; t2++) sum += p[t2];
  float inv = (float)(1.0 / sum);
  for (int t2 = 0; t2 <= t; t2++) p[t2] *= inv;
  for (int t2 = t + 1; t2 < T; t2++) p[t2] = 0.0f;
}

void cpu_attention_forward(float *out, float *att, const float *qkv, int B, int T, int C, int NH) {
  int hs = C / NH;
  float scale = 1.0f / sqrtf((float)hs);
  size_t row = (size_t)3 * C;
#pragma omp parallel
  {
    float *kt = wt_xmalloc(sizeof(float) * (size_t)hs * T);
#pragma omp for schedule(static)
    for (int bh = 0; bh < B * NH; bh++) {
      int b = bh / NH, h = bh % NH;
      const float *base = qkv + (size_t)b * T * row + (size_t)h * hs;
      s_transpose(kt, base + C, row, T, hs);
      for (int t = 0; t < T; t++) {
        float *p = att + ((size_t)bh * T + t) * T;
        s_softmax_row(p, base + t * row, kt, t, T, hs, scale);
        float *y = out + ((size_t)b * T + t) * C + (size_t)h * hs;
        for (int i = 0; i < hs; i++) y[i] = 0.0f;
        for (int t2 = 0; t2 <= t; t2++) s_axpy(y, base + 2 * C + t2 * row, p[t2], hs);
      }
    }
    free(kt);
  }
}

/* Gradient of one query row t of one head; dp is T floats of scratch. */
static void s_backward_row(float *dhead, float *dp, const float *base, const float *vt,
                           const float *p, const float *dy, int t, int T, int hs, int C, size_t row,
                           float scale) {
  for (int t2 = 0; t2 <= t; t2++) dp[t2] = 0.0f;
  for (int i = 0; i < hs; i++) s_axpy(dp, vt + (size_t)i * T, dy[i], t + 1); /* dy . v[t2] */
  double dot = 0;
  for (int t2 = 0; t2 <= t; t2++) dot += p[t2] * dp[t2];
  float fdot = (float)dot;
  const float *q = base + t * row;
  float *dq = dhead + t * row;
  for (int t2 = 0; t2 <= t; t2++) {
    float ds = p[t2] * (dp[t2] - fdot) * scale, pv = p[t2];
    const float *k = base + C + t2 * row;
    float *dk = dhead + C + t2 * row, *dv = dhead + 2 * C + t2 * row;
    s_axpy(dq, k, ds, hs);
    s_axpy(dk, q, ds, hs);
    s_axpy(dv, dy, pv, hs);
  }
}

void cpu_attention_backward(float *dqkv, float *scratch, const float *dout, const float *qkv,
                            const float *att, int B, int T, int C, int NH) {
  int hs = C / NH;
  float scale = 1.0f / sqrtf((float)hs);
  size_t row = (size_t)3 * C;
#pragma omp parallel
  {
    float *vt = wt_xmalloc(sizeof(float) * (size_t)hs * T);
#pragma omp for schedule(static)
    for (int bh = 0; bh < B * NH; bh++) {
      int b = bh / NH, h = bh % NH;
      size_t off = (size_t)b * T * row + (size_t)h * hs;
      s_transpose(vt, qkv + off + 2 * C, row, T, hs);
      for (int t = 0; t < T; t++)
        s_backward_row(dqkv + off, scratch + ((size_t)bh * T + t) * T, qkv + off, vt,
                       att + ((size_t)bh * T + t) * T,
                       dout + ((size_t)b * T + t) * C + (size_t)h * hs, t, T, hs, C, row, scale);
    }
    free(vt);
  }
}
