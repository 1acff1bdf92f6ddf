/* matmul — cuBLAS GEMMs with the row-major ↔ column-major mapping written out once, and the
 * back end's matmul precision.
 *
 * A row-major (r, c) buffer is the column-major (c, r) matrix with leading dimension c, so
 * every product below is computed as its transpose: out^T = W' · inp^T. Gradients accumulate
 * (beta = 1). The bias gradient is a GEMV of dout^T with a vector of ones (cuBLAS reduces in a
 * fixed order: no atomics, deterministic).
 *
 * Precision (kernels_set_precision): buffers are always fp32 and every GEMM accumulates in
 * fp32. fp32 is pedantic CUBLAS_COMPUTE_32F; TF32 is _FAST_TF32 (tensor cores, inputs rounded
 * to TF32 inside cuBLAS). bf16 rounds the linear layers' inputs to bf16 (round to nearest even)
 * into scratch copies, each input once per call, and multiplies those on bf16 tensor cores
 * (asking cuBLAS for _FAST_16BF on fp32 inputs runs its TF32 kernels instead). The attention
 * GEMMs run at TF32 in bf16 mode: their inputs include the (B, NH, T, T) probabilities, and
 * rounding those into a copy moves more bytes than the bf16 product saves.
 *
 * An OC that is not a multiple of 8 (the LM head's: OC = vocab = 50257) keeps cuBLAS off its
 * Hopper kernels, 3-5x slower at that size. Such a layer runs as one of OC padded to a multiple
 * of 64, on scratch copies: the weight and its gradient with zero rows (or columns) added, the
 * output gradient with zero columns, the output with its extra columns dropped. The zeros add
 * nothing to any sum. */
#include <cuda_bf16.h>

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
  case KERNELS_PREC_TF32:
    return CUBLAS_COMPUTE_32F_FAST_TF32;
  default:
    return CUBLAS_COMPUTE_32F;
  }
}

__global__ static void k_to_bf16(__nv_bfloat16 *y, const float *x, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = __float2bfloat16_rn(x[i]);
}

/* Four floats per thread: the conversion is bound by memory, and 16-byte loads reach it. */
__global__ static void k_to_bf16_x4(__nv_bfloat162 *y, const float4 *x, size_t n4) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i >= n4) return;
  float4 v = x[i];
  y[2 * i] = __floats2bfloat162_rn(v.x, v.y);
  y[2 * i + 1] = __floats2bfloat162_rn(v.z, v.w);
}

/* A bf16 copy of x's first n floats in scratch `slot`. */
static const __nv_bfloat16 *s_bf16(wt_cuda_scratch_slot slot, const float *x, size_t n) {
  __nv_bfloat16 *y = (__nv_bfloat16 *)wt_cuda_scratch(slot, n * sizeof *y);
  size_t done = 0;
  if (((uintptr_t)x & 15) == 0) { /* y is cudaMalloc'd: aligned */
    size_t n4 = n / 4;
    if (n4)
      k_to_bf16_x4<<<wt_cuda_blocks(n4, 256), 256>>>((__nv_bfloat162 *)y, (const float4 *)x, n4);
    done = 4 * n4;
  }
  if (done < n) k_to_bf16<<<wt_cuda_blocks(n - done, 256), 256>>>(y + done, x + done, n - done);
  WT_CUDA_CHECK(cudaGetLastError());
  return y;
}

void kernels_cuda_gemm_batched(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                               float alpha, const float *A, int lda, long long sa, const float *B,
                               int ldb, long long sb, float beta, float *C, int ldc, long long sc,
                               int batch) {
  cublasComputeType_t ct =
      s_precision == KERNELS_PREC_BF16 ? CUBLAS_COMPUTE_32F_FAST_TF32 : s_compute();
  WT_CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      kernels_cuda_cublas_handle(), ta, tb, m, n, k, &alpha, A, CUDA_R_32F, lda, sa, B, CUDA_R_32F,
      ldb, sb, &beta, C, CUDA_R_32F, ldc, sc, batch, ct, CUBLAS_GEMM_DEFAULT));
}

/* A linear layer's GEMM: at bf16 precision on the bf16 copies A16/B16 (made by the caller,
 * once per input), else on the fp32 A/B at the back end's compute type. */
static void s_linear_gemm(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                          const float *A, const __nv_bfloat16 *A16, int lda, const float *B,
                          const __nv_bfloat16 *B16, int ldb, float beta, float *C, int ldc) {
  const float one = 1.0f;
  cublasHandle_t h = kernels_cuda_cublas_handle();
  if (s_precision == KERNELS_PREC_BF16)
    WT_CUBLAS_CHECK(cublasGemmEx(h, ta, tb, m, n, k, &one, A16, CUDA_R_16BF, lda, B16, CUDA_R_16BF,
                                 ldb, &beta, C, CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F,
                                 CUBLAS_GEMM_DEFAULT));
  else
    WT_CUBLAS_CHECK(cublasGemmEx(h, ta, tb, m, n, k, &one, A, CUDA_R_32F, lda, B, CUDA_R_32F, ldb,
                                 &beta, C, CUDA_R_32F, ldc, s_compute(), CUBLAS_GEMM_DEFAULT));
}

/* At bf16 precision, a bf16 copy of x's n floats in scratch `slot`; else NULL. */
static const __nv_bfloat16 *s_bf16_if(wt_cuda_scratch_slot slot, const float *x, size_t n) {
  return s_precision == KERNELS_PREC_BF16 ? s_bf16(slot, x, n) : NULL;
}

/* OC, or OC rounded up to a multiple of 64 when it is not a multiple of 8. */
static int s_aligned_oc(int OC) {
  return OC % 8 ? (OC + 63) / 64 * 64 : OC;
}

/* dst (OC -> OCp padded, zeros in the padding) <- src, for a weight-shaped (C, OC) or (OC, C)
 * row-major buffer by layout. */
static void s_pad_weight(float *dst, const float *src, int C, int OC, int OCp,
                         kernels_wlayout layout) {
  if (layout == KERNELS_W_OUT_IN) { /* OC rows of C: append zero rows */
    WT_CUDA_CHECK(cudaMemcpyAsync(dst, src, (size_t)OC * C * 4, cudaMemcpyDeviceToDevice));
    WT_CUDA_CHECK(cudaMemsetAsync(dst + (size_t)OC * C, 0, (size_t)(OCp - OC) * C * 4));
  } else { /* C rows of OC: widen each row */
    WT_CUDA_CHECK(cudaMemcpy2DAsync(dst, (size_t)OCp * 4, src, (size_t)OC * 4, (size_t)OC * 4, C,
                                    cudaMemcpyDeviceToDevice));
    WT_CUDA_CHECK(cudaMemset2DAsync(dst + OC, (size_t)OCp * 4, 0, (size_t)(OCp - OC) * 4, C));
  }
}

/* The inverse for a gradient: dst (OC) <- the first OC of src (OCp). */
static void s_unpad_weight(float *dst, const float *src, int C, int OC, int OCp,
                           kernels_wlayout layout) {
  if (layout == KERNELS_W_OUT_IN)
    WT_CUDA_CHECK(cudaMemcpyAsync(dst, src, (size_t)OC * C * 4, cudaMemcpyDeviceToDevice));
  else
    WT_CUDA_CHECK(cudaMemcpy2DAsync(dst, (size_t)OC * 4, src, (size_t)OCp * 4, (size_t)OC * 4, C,
                                    cudaMemcpyDeviceToDevice));
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

static void s_forward(float *out, const float *inp, const float *weight, int N, int C, int OC,
                      kernels_wlayout layout) {
  const __nv_bfloat16 *w16 = s_bf16_if(WT_SCRATCH_BF16_A, weight, (size_t)C * OC);
  const __nv_bfloat16 *x16 = s_bf16_if(WT_SCRATCH_BF16_B, inp, (size_t)N * C);
  if (layout == KERNELS_W_IN_OUT) /* W row-major (C, OC) = col-major (OC, C), ld OC */
    s_linear_gemm(CUBLAS_OP_N, CUBLAS_OP_N, OC, N, C, weight, w16, OC, inp, x16, C, 0.0f, out, OC);
  else /* W row-major (OC, C) = col-major (C, OC), ld C: transpose it */
    s_linear_gemm(CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, weight, w16, C, inp, x16, C, 0.0f, out, OC);
}

void kernels_cuda_matmul_forward(float *out, const float *inp, const float *weight,
                                 const float *bias, int N, int C, int OC, kernels_wlayout layout) {
  int OCp = s_aligned_oc(OC);
  if (OCp == OC) {
    s_forward(out, inp, weight, N, C, OC, layout);
  } else {
    float *w = (float *)wt_cuda_scratch(WT_SCRATCH_PADDED_W, (size_t)OCp * C * 4);
    float *o = (float *)wt_cuda_scratch(WT_SCRATCH_PADDED, (size_t)N * OCp * 4);
    s_pad_weight(w, weight, C, OC, OCp, layout);
    s_forward(o, inp, w, N, C, OCp, layout);
    WT_CUDA_CHECK(cudaMemcpy2DAsync(out, (size_t)OC * 4, o, (size_t)OCp * 4, (size_t)OC * 4, N,
                                    cudaMemcpyDeviceToDevice));
  }
  if (bias) {
    size_t n = (size_t)N * OC;
    k_add_bias<<<wt_cuda_blocks(n, 256), 256>>>(out, bias, N, OC);
    WT_CUDA_CHECK(cudaGetLastError());
  }
}

static void s_backward(float *dinp, float *dweight, const float *dout, const float *inp,
                       const float *weight, int N, int C, int OC, kernels_wlayout layout) {
  const __nv_bfloat16 *d16 = s_bf16_if(WT_SCRATCH_BF16_C, dout, (size_t)N * OC);
  const __nv_bfloat16 *x16 = s_bf16_if(WT_SCRATCH_BF16_B, inp, (size_t)N * C);
  const __nv_bfloat16 *w16 = dinp ? s_bf16_if(WT_SCRATCH_BF16_A, weight, (size_t)C * OC) : NULL;
  if (layout == KERNELS_W_IN_OUT) {
    /* dinp (N,C) += dout (N,OC) @ W^T;  dW (C,OC) += inp^T @ dout */
    if (dinp)
      s_linear_gemm(CUBLAS_OP_T, CUBLAS_OP_N, C, N, OC, weight, w16, OC, dout, d16, OC, 1.0f, dinp,
                    C);
    s_linear_gemm(CUBLAS_OP_N, CUBLAS_OP_T, OC, C, N, dout, d16, OC, inp, x16, C, 1.0f, dweight,
                  OC);
  } else {
    /* dinp (N,C) += dout (N,OC) @ W;  dW (OC,C) += dout^T @ inp */
    if (dinp)
      s_linear_gemm(CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC, weight, w16, C, dout, d16, OC, 1.0f, dinp,
                    C);
    s_linear_gemm(CUBLAS_OP_N, CUBLAS_OP_T, C, OC, N, inp, x16, C, dout, d16, OC, 1.0f, dweight, C);
  }
}

void kernels_cuda_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                                  const float *inp, const float *weight, int N, int C, int OC,
                                  kernels_wlayout layout) {
  int OCp = s_aligned_oc(OC);
  if (OCp == OC) {
    s_backward(dinp, dweight, dout, inp, weight, N, C, OC, layout);
  } else {
    float *w = (float *)wt_cuda_scratch(WT_SCRATCH_PADDED_W, (size_t)OCp * C * 4);
    float *dw = (float *)wt_cuda_scratch(WT_SCRATCH_PADDED_DW, (size_t)OCp * C * 4);
    float *d = (float *)wt_cuda_scratch(WT_SCRATCH_PADDED, (size_t)N * OCp * 4);
    s_pad_weight(w, weight, C, OC, OCp, layout);
    s_pad_weight(dw, dweight, C, OC, OCp, layout);
    WT_CUDA_CHECK(cudaMemcpy2DAsync(d, (size_t)OCp * 4, dout, (size_t)OC * 4, (size_t)OC * 4, N,
                                    cudaMemcpyDeviceToDevice));
    WT_CUDA_CHECK(cudaMemset2DAsync(d + OC, (size_t)OCp * 4, 0, (size_t)(OCp - OC) * 4, N));
    s_backward(dinp, dw, d, inp, w, N, C, OCp, layout);
    s_unpad_weight(dweight, dw, C, OC, OCp, layout);
  }
  if (dbias) { /* dbias (OC) += dout^T (OC, N) · 1: col-major dout is (OC, N), ld OC */
    const float one = 1.0f;
    WT_CUBLAS_CHECK(cublasSgemv(kernels_cuda_cublas_handle(), CUBLAS_OP_N, OC, N, &one, dout, OC,
                                s_ones((size_t)N), 1, &one, dbias, 1));
  }
}
