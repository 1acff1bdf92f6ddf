/* matmul — out = inp @ W + bias through sgemm (row-major, kernels_cpu_sgemm). Bias is broadcast
 * into the output first and sgemm adds the product (beta = 1), as PyTorch's addmm does. */
#include "kernels/cpu/cpu_internal.h"

void kernels_cpu_matmul_forward(float *out, const float *inp, const float *weight,
                                const float *bias, int N, int C, int OC, kernels_wlayout layout) {
  float beta = 0.0f;
  if (bias) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
      for (int o = 0; o < OC; o++) out[(size_t)n * OC + o] = bias[o];
    beta = 1.0f;
  }
  int in_out = layout == KERNELS_W_IN_OUT;
  kernels_cpu_sgemm(0, !in_out, N, OC, C, inp, C, weight, in_out ? OC : C, beta, out, OC);
}

/* dbias sums columns of dout; threads own column ranges and walk rows in order. */
static void s_bias_grad(float *dbias, const float *dout, int N, int OC) {
#pragma omp parallel
  {
    int nt = 1, id = 0;
#ifdef _OPENMP
    nt = omp_get_num_threads(), id = omp_get_thread_num();
#endif
    int o0 = (int)((long)OC * id / nt), o1 = (int)((long)OC * (id + 1) / nt);
    for (int n = 0; n < N; n++)
      for (int o = o0; o < o1; o++) dbias[o] += dout[(size_t)n * OC + o];
  }
}

void kernels_cpu_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                                 const float *inp, const float *weight, int N, int C, int OC,
                                 kernels_wlayout layout) {
  int in_out = layout == KERNELS_W_IN_OUT;
  if (dinp) /* dinp (N,C) += dout (N,OC) @ W^T */
    kernels_cpu_sgemm(0, in_out, N, C, OC, dout, OC, weight, in_out ? OC : C, 1.0f, dinp, C);
  if (in_out) /* dW (C,OC) += inp^T @ dout */
    kernels_cpu_sgemm(1, 0, C, OC, N, inp, C, dout, OC, 1.0f, dweight, OC);
  else /* dW (OC,C) += dout^T @ inp */
    kernels_cpu_sgemm(1, 0, OC, C, N, dout, OC, inp, C, 1.0f, dweight, C);
  if (dbias) s_bias_grad(dbias, dout, N, OC);
}
