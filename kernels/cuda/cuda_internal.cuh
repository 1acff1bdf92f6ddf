/* cuda_internal — private helpers of the CUDA back end: launch geometry, error checks, the
 * cuBLAS handle. Every op runs on the default stream and is deterministic: no atomics, every
 * reduction has one fixed order (a gradient of a layer must not depend on the launch). */
#ifndef WT_KERNELS_CUDA_INTERNAL_CUH
#define WT_KERNELS_CUDA_INTERNAL_CUH

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

extern "C" {
#include "kernels/kernels.h"
}

/* A failing CUDA call inside a kernel back end is a device or programming fault, not input
 * from outside: report file:line and stop (the CPU back ends cannot fail at all). */
#define WT_CUDA_CHECK(call)                                                                        \
  do {                                                                                             \
    cudaError_t wt_err_ = (call);                                                                  \
    if (wt_err_ != cudaSuccess) {                                                                  \
      fprintf(stderr, "%s:%d: CUDA error: %s\n", __FILE__, __LINE__, cudaGetErrorString(wt_err_)); \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

#define WT_CUBLAS_CHECK(call)                                                                      \
  do {                                                                                             \
    cublasStatus_t wt_st_ = (call);                                                                \
    if (wt_st_ != CUBLAS_STATUS_SUCCESS) {                                                         \
      fprintf(stderr, "%s:%d: cuBLAS error %d\n", __FILE__, __LINE__, (int)wt_st_);                \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

static inline unsigned wt_cuda_blocks(size_t n, unsigned threads) {
  return (unsigned)((n + threads - 1) / threads);
}

/* Device scratch buffers of the back end, one per user, each grown on demand and kept for the
 * process. The default stream orders their users, so one buffer serves every call of its op. */
typedef enum {
  WT_SCRATCH_BF16_A,    /* bf16 copy of a GEMM's A input (matmul.cu) */
  WT_SCRATCH_BF16_B,    /* bf16 copy of a GEMM's B input */
  WT_SCRATCH_BF16_C,    /* bf16 copy of a third input (an output gradient) */
  WT_SCRATCH_PADDED,    /* a linear layer's output or output gradient, OC padded (matmul.cu) */
  WT_SCRATCH_PADDED_W,  /* its weight, padded */
  WT_SCRATCH_PADDED_DW, /* its weight gradient, padded */
  WT_SCRATCH_ENCODER,   /* the encoder backward's sort of the tokens (encoder.cu) */
  WT_SCRATCH_DBIAS,     /* a bias (gradient) for a cuBLASLt epilogue, aligned (matmul.cu) */
  WT_SCRATCH_ADAMW,     /* the tensor list of one multi-tensor AdamW launch (adamw.cu) */
  WT_SCRATCH_COUNT
} wt_cuda_scratch_slot;
void *wt_cuda_scratch(wt_cuda_scratch_slot slot, size_t bytes);

/* Which kernels the back end runs, read once from WANTRAIN_CUDA_KERNELS (docs/performance.md):
 *   plain (default)  separate bias, GELU, cross-entropy and per-tensor AdamW kernels
 *   fused            cuBLASLt epilogues for bias and GELU, the bias gradient in the weight
 *                    gradient's GEMM, softmax + cross-entropy forward and backward in one pass,
 *                    one AdamW launch for every tensor
 * Both compute the same ops to the tests' tolerances. plain is the default because it is the
 * set the gpu tests have passed on a GPU; fused is opt-in until they pass on it too. An unknown
 * value is reported once and runs plain. */
int wt_cuda_fused(void);

/* The process-wide cuBLAS handle, created on first use (pedantic fp32 math until
 * kernels_set_precision chooses TF32 or bf16 tensor cores). */
cublasHandle_t kernels_cuda_cublas_handle(void);

/* Column-major, strided-batched C = alpha op(A) op(B) + beta C in fp32 buffers for attention,
 * computed at the back end's precision, TF32 for bf16 (matmul.cu). */
void kernels_cuda_gemm_batched(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                               float alpha, const float *A, int lda, long long sa, const float *B,
                               int ldb, long long sb, float beta, float *C, int ldc, long long sc,
                               int batch);
/* The same with a device array of pointers per matrix (cublasGemmBatchedEx): batch members at
 * any addresses, e.g. the heads of an interleaved (B, T, 3, NH, hs) buffer. */
void kernels_cuda_gemm_ptrs(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            float alpha, float *const *A, int lda, float *const *B, int ldb,
                            float beta, float *const *C, int ldc, int batch);
/* The table's device and precision entries (memory.cu, matmul.cu; kernels.h has the contract). */
extern "C" int kernels_cuda_select(int dev, int *count, char *why, size_t why_len);
extern "C" void kernels_cuda_set_precision(kernels_precision p);

/* Sum over a block of 32*k threads; every thread gets the result. Fixed order. */
__device__ inline float wt_block_sum(float x, float *shared) {
  for (int off = 16; off > 0; off >>= 1) x += __shfl_xor_sync(0xffffffffu, x, off);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  __syncthreads();
  if (lane == 0) shared[warp] = x;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < nwarps; w++) total += shared[w];
  return total;
}

__device__ inline float wt_block_max(float x, float *shared) {
  for (int off = 16; off > 0; off >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, off));
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
  __syncthreads();
  if (lane == 0) shared[warp] = x;
  __syncthreads();
  float m = shared[0];
  for (int w = 1; w < nwarps; w++) m = fmaxf(m, shared[w]);
  return m;
}

/* Per-op entry points (one .cu file per op pair); the table in cuda_table.cu. */
void kernels_cuda_encoder_forward(float *out, const int *tokens, const float *wte, const float *wpe,
                                  int B, int T, int C);
void kernels_cuda_encoder_backward(float *dwte, float *dwpe, const float *dout, const int *tokens,
                                   int B, int T, int C);
void kernels_cuda_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                                    const float *weight, const float *bias, int N, int C);
void kernels_cuda_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                                     const float *inp, const float *weight, const float *mean,
                                     const float *rstd, int N, int C);
void kernels_cuda_matmul_forward(float *out, const float *inp, const float *weight,
                                 const float *bias, int N, int C, int OC, kernels_wlayout layout);
void kernels_cuda_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                                  const float *inp, const float *weight, int N, int C, int OC,
                                  kernels_wlayout layout);
void kernels_cuda_attention_forward(float *out, float *att, const float *qkv, int B, int T, int C,
                                    int NH);
void kernels_cuda_attention_backward(float *dqkv, float *scratch, const float *dout,
                                     const float *qkv, const float *att, int B, int T, int C,
                                     int NH);
void kernels_cuda_gelu_forward(float *out, const float *inp, size_t n);
void kernels_cuda_gelu_backward(float *dinp, const float *inp, const float *dout, size_t n);
void kernels_cuda_residual_forward(float *out, const float *a, const float *b, size_t n);
void kernels_cuda_residual_backward(float *da, float *db, const float *dout, size_t n);
void kernels_cuda_crossentropy_forward(float *losses, float *lse, const float *logits,
                                       const int *targets, int N, int V);
void kernels_cuda_crossentropy_backward(float *dlogits, const float *logits, const float *lse,
                                        const int *targets, float dloss, int N, int V);
void kernels_cuda_adamw_update(float *param, const float *grad, float *m, float *v, size_t n,
                               float lr, float b1, float b2, float eps, float wd, float bc1,
                               float bc2, float grad_scale);
void kernels_cuda_matmul_gelu_forward(float *out, float *pre, void *inp_bf16, const float *inp,
                                      const float *weight, const float *bias, int N, int C, int OC,
                                      kernels_wlayout layout);
void kernels_cuda_matmul_forward_keep(float *out, void *inp_bf16, const float *inp,
                                      const float *weight, const float *bias, int N, int C, int OC,
                                      kernels_wlayout layout);
void kernels_cuda_matmul_backward_kept(float *dinp, float *dweight, float *dbias, const float *dout,
                                       const float *inp, const void *inp_bf16, const float *weight,
                                       int N, int C, int OC, kernels_wlayout layout);
void kernels_cuda_crossentropy_forward_backward(float *losses, float *lse, float *dlogits,
                                                const float *logits, const int *targets,
                                                float dloss, int N, int V);
void kernels_cuda_adamw_update_tensors(float *param, const float *grad, float *m, float *v,
                                       const kernels_adamw_tensor *tensors, int n_tensors, float lr,
                                       float b1, float b2, float eps, float bc1, float bc2,
                                       float grad_scale);
void *kernels_cuda_alloc(size_t bytes);
void kernels_cuda_free(void *p);
void kernels_cuda_upload(void *dst, const void *src, size_t bytes);
void kernels_cuda_download(void *dst, const void *src, size_t bytes);
void kernels_cuda_copy(void *dst, const void *src, size_t bytes);
void kernels_cuda_zero(void *p, size_t bytes);
double kernels_cuda_sq_norm(const float *x, size_t n);
double kernels_cuda_mem_total(void);
void *kernels_cuda_host_alloc(size_t bytes);
void kernels_cuda_host_free(void *p);
void kernels_cuda_download_async(void *dst, const void *src, size_t bytes);
void kernels_cuda_upload_async(void *dst, const void *src, size_t bytes);
void kernels_cuda_copy_wait(void);

#endif
