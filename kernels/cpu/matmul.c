/* matmul — out = inp @ W + bias through OpenBLAS sgemm (row-major). Bias is broadcast into the
 * output first and sgemm adds the product (beta = 1), as PyTorch's addmm does. */
#include <cblas.h>

#include "kernels/cpu/backends.h"

void cpu_matmul_forward(float *out, const float *inp, const float *weight, const float *bias, int N,
                        int C, int OC, kernels_wlayout layout) {
  float beta = 0.0f;
  if (bias) {
#pragma omp parallel for schedule(static)
    for (int n = 0; n < N; n++)
      for (int o = 0; o < OC; o++) out[(size_t)n * OC + o] = bias[o];
    beta = 1.0f;
  }
  int in_out = layout == KERNELS_W_IN_OUT;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, in_out ? CblasNoTrans : CblasTrans, N, OC, C, 1.0f, inp,
              C, weight, in_out ? OC : C, beta, out, OC);
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

void cpu_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                         const float *inp, const float *weight, int N, int C, int OC,
                         kernels_wlayout layout) {
  int in_out = layout == KERNELS_W_IN_OUT;
  if (dinp) /* dinp (N,C) += dout (N,OC) @ W^T */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, in_out ? CblasTrans : CblasNoTrans, N, C, OC, 1.0f,
                dout, OC, weight, in_out ? OC : C, 1.0f, dinp, C);
  if (in_out) /* dW (C,OC) += inp^T @ dout */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, C, OC, N, 1.0f, inp, C, dout, OC, 1.0f,
                dweight, OC);
  else /* dW (OC,C) += dout^T @ inp */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f,
                dweight, C);
  if (dbias) s_bias_grad(dbias, dout, N, OC);
}
