/* attention — causal multi-head self-attention on the fast CPU path.
 *
 * Work is split over (batch, head) pairs, which write disjoint columns of the outputs, so no
 * reduction crosses threads. Inside a pair every output row is a sum of weighted contiguous
 * rows (keys and values are first transposed to (hs, T) where needed), kept in vector registers
 * across the sum and accumulated in a fixed order, never reassociated: results do not depend
 * on threads or on buffer alignment. At GPT-2 sizes
 * (T <= 1024, hs = 64) this is a few percent of a step, so per-head sgemm calls do not pay. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cpu/cpu_internal.h"
#include "common/common.h"
#include "kernels/cpu/fastmath_internal.h"

/* dst (hs, T) = the hs columns at src + col of T rows of stride `stride`. */
static void s_transpose(float *dst, const float *src, size_t stride, int T, int hs) {
  for (int t = 0; t < T; t++)
    for (int i = 0; i < hs; i++) dst[(size_t)i * T + t] = src[(size_t)t * stride + i];
}

/* How many of a row's T columns to compute when t + 1 are needed: rounded up to whole vectors
 * of 8, so the sums over a row need no scalar remainder (which, at T = 64, cost more than
 * their vector part). Every column is its own sum in the same order, so the extra columns
 * change nothing in the needed ones; callers overwrite or ignore them. */
static inline int s_padded(int t, int T) {
  int len = (t + 8) & ~7;
  return len < T ? len : T;
}

/* out[0..len) = (add ? out : 0) + sum over i of w[i] * rows[i][0..len), each column summed in
 * order of i, exactly as n axpys into the row would, but 8 to 64 columns at a time in
 * registers: the axpys loaded and stored the row once per i. */
static void s_rows_dot(float *restrict out, const float *restrict w, const float *restrict rows,
                       size_t stride, int n, int len, int add) {
  int c = 0;
  for (; c + 64 <= len; c += 64) { /* 8 vector chains: two FMA ports times 4 cycles latency */
    float acc[64];
    for (int k = 0; k < 64; k++) acc[k] = add ? out[c + k] : 0.0f;
    for (int i = 0; i < n; i++)
      for (int k = 0; k < 64; k++) acc[k] += w[i] * rows[(size_t)i * stride + c + k];
    for (int k = 0; k < 64; k++) out[c + k] = acc[k];
  }
  for (; c + 32 <= len; c += 32) {
    float acc[32];
    for (int k = 0; k < 32; k++) acc[k] = add ? out[c + k] : 0.0f;
    for (int i = 0; i < n; i++)
      for (int k = 0; k < 32; k++) acc[k] += w[i] * rows[(size_t)i * stride + c + k];
    for (int k = 0; k < 32; k++) out[c + k] = acc[k];
  }
  for (; c + 8 <= len; c += 8) {
    float acc[8];
    for (int k = 0; k < 8; k++) acc[k] = add ? out[c + k] : 0.0f;
    for (int i = 0; i < n; i++)
      for (int k = 0; k < 8; k++) acc[k] += w[i] * rows[(size_t)i * stride + c + k];
    for (int k = 0; k < 8; k++) out[c + k] = acc[k];
  }
  for (; c < len; c++) {
    float acc = add ? out[c] : 0.0f;
    for (int i = 0; i < n; i++) acc += w[i] * rows[(size_t)i * stride + c];
    out[c] = acc;
  }
}

/* One query row: s[0..t] = scale * q . K[t2]; p = softmax(s); zeros after t. */
static void s_softmax_row(float *p, const float *q, const float *kt, int t, int T, int hs,
                          float scale) {
  s_rows_dot(p, q, kt, (size_t)T, hs, s_padded(t, T), 0);
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

void kernels_cpu_attention_forward(float *out, float *att, const float *qkv, int B, int T, int C,
                                   int NH) {
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
        /* y = sum over t2 <= t of p[t2] v[t2] */
        s_rows_dot(out + ((size_t)b * T + t) * C + (size_t)h * hs, p, base + 2 * C, row, t + 1, hs,
                   0);
      }
    }
    free(kt);
  }
}

/* ds (T, T) for one head, row t: ds[t2] = p[t2] (dp[t2] - p . dp) scale for t2 <= t, where
 * dp[t2] = dy[t] . v[t2] (the gradient of the scores before the softmax). */
static void s_dscores(float *ds, const float *att, const float *vt, const float *dout, size_t ldy,
                      int T, int hs, float scale) {
  for (int t = 0; t < T; t++) {
    float *d = ds + (size_t)t * T;
    const float *p = att + (size_t)t * T;
    s_rows_dot(d, dout + t * ldy, vt, (size_t)T, hs, s_padded(t, T), 0);
    double dot = 0;
    for (int t2 = 0; t2 <= t; t2++) dot += p[t2] * d[t2];
    float fdot = (float)dot;
    for (int t2 = 0; t2 <= t; t2++) d[t2] = p[t2] * (d[t2] - fdot) * scale;
  }
}

/* dst[t2] += sum over t >= t2 (ascending) of m[t][t2] * src[t], for every t2: the gradient of
 * keys (m = ds, src = q) and values (m = att, src = dy). col gathers a column of m. */
static void s_cols_accumulate(float *dst, size_t ldd, const float *m, const float *src, size_t lds,
                              float *col, int T, int hs) {
  for (int t2 = 0; t2 < T; t2++) {
    for (int t = t2; t < T; t++) col[t - t2] = m[(size_t)t * T + t2];
    s_rows_dot(dst + t2 * ldd, col, src + t2 * lds, lds, T - t2, hs, 1);
  }
}

/* Sums are taken in the order the per-row loop of the reference takes them (dq over keys t2,
 * dk and dv over queries t, each ascending), so only the loop nest changed: every gradient row
 * is accumulated in registers in one go instead of one axpy per (t, t2) pair. */
void kernels_cpu_attention_backward(float *dqkv, float *scratch, const float *dout,
                                    const float *qkv, const float *att, int B, int T, int C,
                                    int NH) {
  int hs = C / NH;
  float scale = 1.0f / sqrtf((float)hs);
  size_t row = (size_t)3 * C;
#pragma omp parallel
  {
    float *vt = wt_xmalloc(sizeof(float) * (size_t)hs * T), *col = wt_xmalloc(sizeof(float) * T);
#pragma omp for schedule(static)
    for (int bh = 0; bh < B * NH; bh++) {
      int b = bh / NH, h = bh % NH;
      size_t off = (size_t)b * T * row + (size_t)h * hs;
      const float *base = qkv + off, *p = att + (size_t)bh * T * T;
      const float *dy = dout + (size_t)b * T * C + (size_t)h * hs;
      float *ds = scratch + (size_t)bh * T * T, *dhead = dqkv + off;
      s_transpose(vt, base + 2 * C, row, T, hs);
      s_dscores(ds, p, vt, dy, (size_t)C, T, hs, scale);
      for (int t = 0; t < T; t++) /* dq[t] += sum over t2 <= t of ds[t][t2] k[t2] */
        s_rows_dot(dhead + t * row, ds + (size_t)t * T, base + C, row, t + 1, hs, 1);
      s_cols_accumulate(dhead + C, row, ds, base, row, col, T, hs);        /* dk */
      s_cols_accumulate(dhead + 2 * C, row, p, dy, (size_t)C, col, T, hs); /* dv */
    }
    free(vt);
    free(col);
  }
}
