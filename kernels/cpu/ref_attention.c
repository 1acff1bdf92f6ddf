/* ref_attention — reference causal multi-head self-attention, forward and backward, written
 * as the textbook formulas: S = Q K^T / sqrt(hs), P = softmax(S masked), Y = P V. */
#include <math.h>

#include "kernels/cpu/cpu_internal.h"

void kernels_ref_attention_forward(float *out, float *att, const float *qkv, int B, int T, int C,
                                   int NH) {
  int hs = C / NH;
  double scale = 1.0 / sqrt((double)hs);
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++)
      for (int t = 0; t < T; t++) {
        const float *q = qkv + ((size_t)b * T + t) * 3 * C + h * hs;
        float *p = att + (((size_t)b * NH + h) * T + t) * T;
        double maxv = -INFINITY, sum = 0;
        double s[T]; /* T is small in tests; the reference favours clarity */
        for (int t2 = 0; t2 <= t; t2++) {
          const float *k = qkv + ((size_t)b * T + t2) * 3 * C + C + h * hs;
          double dot = 0;
          for (int i = 0; i < hs; i++) dot += (double)q[i] * k[i];
          s[t2] = dot * scale;
          if (s[t2] > maxv) maxv = s[t2];
        }
        for (int t2 = 0; t2 <= t; t2++) sum += exp(s[t2] - maxv);
        for (int t2 = 0; t2 < T; t2++) p[t2] = t2 <= t ? (float)(exp(s[t2] - maxv) / sum) : 0.0f;
        float *y = out + ((size_t)b * T + t) * C + h * hs;
        for (int i = 0; i < hs; i++) {
          double acc = 0;
          for (int t2 = 0; t2 <= t; t2++)
            acc += (double)p[t2] * qkv[((size_t)b * T + t2) * 3 * C + 2 * C + h * hs + i];
          y[i] = (float)acc;
        }
      }
}

void kernels_ref_attention_backward(float *dqkv, float *scratch, const float *dout,
                                    const float *qkv, const float *att, int B, int T, int C,
                                    int NH) {
  (void)scratch;
  int hs = C / NH;
  double scale = 1.0 / sqrt((double)hs);
  for (int b = 0; b < B; b++)
    for (int h = 0; h < NH; h++)
      for (int t = 0; t < T; t++) {
        const float *p = att + (((size_t)b * NH + h) * T + t) * T;
        const float *dy = dout + ((size_t)b * T + t) * C + h * hs;
        const float *q = qkv + ((size_t)b * T + t) * 3 * C + h * hs;
        float *dq = dqkv + ((size_t)b * T + t) * 3 * C + h * hs;
        double dp[T], dot_pdp = 0;
        for (int t2 = 0; t2 <= t; t2++) {
          const float *v = qkv + ((size_t)b * T + t2) * 3 * C + 2 * C + h * hs;
          float *dv = dqkv + ((size_t)b * T + t2) * 3 * C + 2 * C + h * hs;
          double acc = 0;
          for (int i = 0; i < hs; i++) {
            acc += (double)dy[i] * v[i];
            dv[i] += p[t2] * dy[i];
          }
          dp[t2] = acc;
          dot_pdp += p[t2] * acc;
        }
        for (int t2 = 0; t2 <= t; t2++) {
          double ds = p[t2] * (dp[t2] - dot_pdp) * scale; /* softmax backward, then the scale */
          const float *k = qkv + ((size_t)b * T + t2) * 3 * C + C + h * hs;
          float *dk = dqkv + ((size_t)b * T + t2) * 3 * C + C + h * hs;
          for (int i = 0; i < hs; i++) {
            dq[i] += (float)(ds * k[i]);
            dk[i] += (float)(ds * q[i]);
          }
        }
      }
}
