/* matmul — cuBLAS GEMMs with the row-major ↔ column-major mapping written out once, and the
 * back end's matmul precision.
 *
 * A row-major (r, c) buffer is the column-major (c, r) matrix with leading dimension c, so
 * every product below is computed as its transpose: out^T = W' · inp^T. Gradients accumulate
 * (beta = 1). The bias gradient is a GEMV of dout^T with a vector of ones (cuBLAS reduces in a
 * fixed order: no atomics, deterministic).
 *
 * Precision (kernels_set_precision): buffers are always fp32; the GEMMs' compute type is
 * CUBLAS_COMPUTE_32F (pedantic fp32), _FAST_TF32 (tensor cores, TF32 inputs) or _FAST_16BF
 * (tensor cores, inputs rounded to bf16), all accumulating in fp32. The attention GEMMs use the
 * same compute type. */
#include "kernels/cuda/cuda_internal.cuh"

static cublasHandle_t s_handle;
static kernels_precision s_precision = KERNELS_PREC_FP32;

cublasHandle_t kernels_cuda_cublas_handle(void) {
  if (!s_handle) {
    WT_CUBLAS_CHECK(cublasCreate(&s_handle));
    WT_CUBLAS_CHECK(cublasSetMathMode(s_handle, CUBLAS_PEDANTIC_MATH));
  }
  return s_handle;
}

extern "C" void kernels_cuda_set_precision(kernels_precision p) {
  s_precision = p;
  WT_CUBLAS_CHECK(cublasSetMathMode(kernels_cuda_cublas_handle(), p == KERNELS_PREC_FP32
                                                                      ? CUBLAS_PEDANTIC_MATH
                                                                      : CUBLAS_DEFAULT_MATH));
}

static cublasComputeType_t s_compute(void) {
  switch (s_precision) {
  case KERNELS_PREC_TF32: return CUBLAS_COMPUTE_32F_FAST_TF32;
  case KERNELS_PREC_BF16: return CUBLAS_COMPUTE_32F_FAST_16BF;
  default: return CUBLAS_COMPUTE_32F;
  }
}

void kernels_cuda_gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                       float alpha, const float *A, int lda, const float *B, int ldb, float beta,
                       float *C, int ldc) {
  WT_CUBLAS_CHECK(cublasGemmEx(kernels_cuda_cublas_handle(), ta, tb, m, n, k, &alpha, A,
                               CUDA_R_32F, lda, B, CUDA_R_32F, ldb, &beta, C, CUDA_R_32F, ldc,
                               s_compute(), CUBLAS_GEMM_DEFAULT));
}

void kernels_cuda_gemm_batched(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                               float alpha, const float *A, int lda, long long sa, const float *B,
                               int ldb, long long sb, float beta, float *C, int ldc, long long sc,
                               int batch) {
  WT_CUBLAS_CHECK(cublasGemmStridedBatchedEx(kernels_cuda_cublas_handle(), ta, tb, m, n, k,
                                             &alpha, A, CUDA_R_32F, lda, sa, B, CUDA_R_32F, ldb,
                                             sb, &beta, C, CUDA_R_32F, ldc, sc, batch,
                                             s_compute(), CUBLAS_GEMM_DEFAULT));
}

__global__ static void k_add_bias(float *out, const float *bias, int N, int OC) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < (size_t)N * OC) out[i] += bias[i % OC];
}

__global__ static void k_fill(float *x, float v, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) x[i] = v;
}

/* A device vector of at least n ones (grown on demand, kept for the process). */
static const float *s_ones(size_t n) {
  static float *ones;
  static size_t cap;
  if (n > cap) {
    if (ones) WT_CUDA_CHECK(cudaFree(ones));
    WT_CUDA_CHECK(cudaMalloc(&ones, n * sizeof(float)));
    k_fill<<<wt_cuda_blocks(n, 256), 256>>>(ones, 1.0f, n);
    WT_CUDA_CHECK(cudaGetLastError());
    cap = n;
  }
  return ones;
}

void kernels_cuda_matmul_forward(float *out, const float *inp, const float *weight,
                                 const float *bias, int N, int C, int OC, kernels_wlayout layout) {
  if (layout == KERNELS_W_IN_OUT) /* W row-major (C, OC) = col-major (OC, C), ld OC */
    kernels_cuda_gemm(CUBLAS_OP_N, CUBLAS_OP_N, OC, N, C, 1.0f, weight, OC, inp, C, 0.0f, out, OC);
  else /* W row-major (OC, C) = col-major (C, OC), ld C: transpose it */
    kernels_cuda_gemm(CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, 1.0f, weight, C, inp, C, 0.0f, out, OC);
  if (bias) {
    size_t n = (size_t)N * OC;
    k_add_bias<<<wt_cuda_blocks(n, 256), 256>>>(out, bias, N, OC);
    WT_CUDA_CHECK(cudaGetLastError());
  }
}

void kernels_cuda_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                                  const float *inp, const float *weight, int N, int C, int OC,
                                  kernels_wlayout layout) {
  if (layout == KERNELS_W_IN_OUT) {
    /* dinp (N,C) += dout (N,OC) @ W^T;  dW (C,OC) += inp^T @ dout */
    if (dinp)
      kernels_cuda_gemm(CUBLAS_OP_T, CUBLAS_OP_N, C, N, OC, 1.0f, weight, OC, dout, OC, 1.0f, dinp,
                        C);
    kernels_cuda_gemm(CUBLAS_OP_N, CUBLAS_OP_T, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dweight,
                      OC);
  } else {
    /* dinp (N,C) += dout (N,OC) @ W;  dW (OC,C) += dout^T @ inp */
    if (dinp)
      kernels_cuda_gemm(CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC, 1.0f, weight, C, dout, OC, 1.0f, dinp,
                        C);
    kernels_cuda_gemm(CUBLAS_OP_N, CUBLAS_OP_T, C, OC, N, 1.0f, inp, C, dout, OC, 1.0f, dweight, C);
  }
  if (dbias) { /* dbias (OC) += dout^T (OC, N) · 1: col-major dout is (OC, N), ld OC */
    const float one = 1.0f;
    WT_CUBLAS_CHECK(cublasSgemv(kernels_cuda_cublas_handle(), CUBLAS_OP_N, OC, N, &one, dout, OC,
                                s_ones((size_t)N), 1, &one, dbias, 1));
  }
}
