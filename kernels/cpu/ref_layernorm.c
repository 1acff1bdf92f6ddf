/* ref_layernorm — reference LayerNorm (eps 1e-5), forward and backward, row by row. */
#include <math.h>

#include "kernels/cpu/cpu_internal.h"

void kernels_ref_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                                   const float *weight, const float *bias, int N, int C) {
  for (int i = 0; i < N; i++) {
    const float *x = inp + (size_t)i * C;
    double m = 0, v = 0;
    for (int c = 0; c < C; c++) m += x[c];
    m /= C;
    for (int c = 0; c < C; c++) v += (x[c] - m) * (x[c] - m);
    v /= C; /* biased variance, as torch.nn.LayerNorm */
    float s = (float)(1.0 / sqrt(v + 1e-5));
    for (int c = 0; c < C; c++)
      out[(size_t)i * C + c] = (float)((x[c] - m) * s) * weight[c] + bias[c];
    mean[i] = (float)m;
    rstd[i] = s;
  }
}

void kernels_ref_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                                    const float *inp, const float *weight, const float *mean,
                                    const float *rstd, int N, int C) {
  for (int i = 0; i < N; i++) {
    const float *x = inp + (size_t)i * C, *dy = dout + (size_t)i * C;
    /* dL/dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * weight */
    double sum_g = 0, sum_gx = 0;
    for (int c = 0; c < C; c++) {
      double xhat = (x[c] - mean[i]) * rstd[i];
      sum_g += dy[c] * weight[c];
      sum_gx += dy[c] * weight[c] * xhat;
    }
    for (int c = 0; c < C; c++) {
      double xhat = (x[c] - mean[i]) * rstd[i];
      double g = dy[c] * weight[c];
      dinp[(size_t)i * C + c] += (float)((g - sum_g / C - xhat * sum_gx / C) * rstd[i]);
      dweight[c] += (float)(dy[c] * xhat);
      dbias[c] += dy[c];
    }
  }
}
