/* layernorm — LayerNorm (eps 1e-5) on the fast CPU path: rows in parallel for the activations;
 * the parameter gradients split channels across threads and walk rows in order, so they do not
 * depend on the thread count. */
#include <math.h>

#include "kernels/cpu/cpu_internal.h"

void kernels_cpu_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                                   const float *weight, const float *bias, int N, int C) {
#pragma omp parallel for schedule(static)
  for (int i = 0; i < N; i++) {
    const float *x = inp + (size_t)i * C;
    float *y = out + (size_t)i * C;
    double m = 0, v = 0; /* double: C-long sums without cancellation trouble, and cheap here */
    for (int c = 0; c < C; c++) m += x[c];
    m /= C;
    for (int c = 0; c < C; c++) v += (x[c] - m) * (x[c] - m);
    float mf = (float)m, s = (float)(1.0 / sqrt(v / C + 1e-5));
    for (int c = 0; c < C; c++) y[c] = (x[c] - mf) * s * weight[c] + bias[c];
    mean[i] = mf;
    rstd[i] = s;
  }
}

void kernels_cpu_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                                    const float *inp, const float *weight, const float *mean,
                                    const float *rstd, int N, int C) {
#pragma omp parallel
  {
#pragma omp for schedule(static)
    for (int i = 0; i < N; i++) {
      const float *x = inp + (size_t)i * C, *dy = dout + (size_t)i * C;
      float *dx = dinp + (size_t)i * C;
      float mu = mean[i], rs = rstd[i];
      double sum_g = 0, sum_gx = 0;
      for (int c = 0; c < C; c++) {
        float g = dy[c] * weight[c];
        sum_g += g;
        sum_gx += g * ((x[c] - mu) * rs);
      }
      float mg = (float)(sum_g / C), mgx = (float)(sum_gx / C);
      for (int c = 0; c < C; c++) dx[c] += (dy[c] * weight[c] - mg - (x[c] - mu) * rs * mgx) * rs;
    }
    int nt = 1, id = 0;
#ifdef _OPENMP
    nt = omp_get_num_threads(), id = omp_get_thread_num();
#endif
    int c0 = (int)((long)C * id / nt), c1 = (int)((long)C * (id + 1) / nt);
    for (int i = 0; i < N; i++) {
      const float *x = inp + (size_t)i * C, *dy = dout + (size_t)i * C;
      float mu = mean[i], rs = rstd[i];
      for (int c = c0; c < c1; c++) {
        dweight[c] += dy[c] * ((x[c] - mu) * rs);
        dbias[c] += dy[c];
      }
    }
  }
}
