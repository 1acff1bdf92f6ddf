/* ref_encoder — reference token + position embedding, forward and backward. */
#include "kernels/cpu/cpu_internal.h"

void kernels_ref_encoder_forward(float *out, const int *tokens, const float *wte, const float *wpe,
                                 int B, int T, int C) {
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++) {
      float *o = out + ((size_t)b * T + t) * C;
      const float *e = wte + (size_t)tokens[b * T + t] * C, *p = wpe + (size_t)t * C;
      for (int c = 0; c < C; c++) o[c] = e[c] + p[c];
    }
}

void kernels_ref_encoder_backward(float *dwte, float *dwpe, const float *dout, const int *tokens,
                                  int B, int T, int C) {
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++) {
      const float *d = dout + ((size_t)b * T + t) * C;
      float *de = dwte + (size_t)tokens[b * T + t] * C, *dp = dwpe + (size_t)t * C;
      for (int c = 0; c < C; c++) {
        de[c] += d[c];
        dp[c] += d[c];
      }
    }
}
