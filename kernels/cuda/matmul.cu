/* matmul — cuBLAS sgemm with the row-major ↔ column-major mapping written out once.
 *
 * A row-major (r, c) buffer is the column-major (c, r) matrix with leading dimension c, so
 * every product below is computed as its transpose: out^T = W' · inp^T. Gradients accumulate
 * (beta = 1). Bias sums run one thread per output column over the rows in order. */
#include "kernels/cuda/cuda_internal.cuh"

static cublasHandle_t s_handle;

cublasHandle_t kernels_cuda_cublas_handle(void) {
  if (!s_handle) {
    WT_CUBLAS_CHECK(cublasCreate(&s_handle));
    WT_CUBLAS_CHECK(cublasSetMathMode(s_handle, CUBLAS_PEDANTIC_MATH));
  }
  return s_handle;
}

__global__ static void k_add_bias(float *out, const float *bias, int N, int OC) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < (size_t)N * OC) out[i] += bias[i % OC];
}

__global__ static void k_bias_backward(float *dbias, const float *dout, int N, int OC) {
  int o = blockIdx.x * blockDim.x + threadIdx.x;
  if (o >= OC) return;
  float s = 0.0f;
  for (int row = 0; row < N; row++) s += dout[(size_t)row * OC + o];
  dbias[o] += s;
}

void kernels_cuda_matmul_forward(float *out, const float *inp, const float *weight,
                                 const float *bias, int N, int C, int OC, kernels_wlayout layout) {
  const float one = 1.0f, zero = 0.0f;
  cublasHandle_t h = kernels_cuda_cublas_handle();
  if (layout == KERNELS_W_IN_OUT) /* W row-major (C, OC) = col-major (OC, C), ld OC */
    WT_CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, OC, N, C, &one, weight, OC, inp, C,
                                &zero, out, OC));
  else /* W row-major (OC, C) = col-major (C, OC), ld C: transpose it */
    WT_CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, &one, weight, C, inp, C,
                                &zero, out, OC));
  if (bias) {
    size_t n = (size_t)N * OC;
    k_add_bias<<<wt_cuda_blocks(n, 256), 256>>>(out, bias, N, OC);
    WT_CUDA_CHECK(cudaGetLastError());
  }
}

void kernels_cuda_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                                  const float *inp, const float *weight, int N, int C, int OC,
                                  kernels_wlayout layout) {
  const float one = 1.0f;
  cublasHandle_t h = kernels_cuda_cublas_handle();
  if (layout == KERNELS_W_IN_OUT) {
    /* dinp (N,C) += dout (N,OC) @ W^T;  dW (C,OC) += inp^T @ dout */
    if (dinp)
      WT_CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, C, N, OC, &one, weight, OC, dout, OC,
                                  &one, dinp, C));
    WT_CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, OC, C, N, &one, dout, OC, inp, C, &one,
                                dweight, OC));
  } else {
    /* dinp (N,C) += dout (N,OC) @ W;  dW (OC,C) += dout^T @ inp */
    if (dinp)
      WT_CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC, &one, weight, C, dout, OC,
                                  &one, dinp, C));
    WT_CUBLAS_CHECK(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, C, OC, N, &one, inp, C, dout, OC, &one,
                                dweight, C));
  }
  if (dbias) {
    k_bias_backward<<<wt_cuda_blocks(OC, 128), 128>>>(dbias, dout, N, OC);
    WT_CUDA_CHECK(cudaGetLastError());
  }
}
