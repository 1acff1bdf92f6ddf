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
 * nothing to any sum.
 *
 * With the fused kernels (wt_cuda_fused) the linear layers run through cuBLASLt instead: the
 * bias add, and GELU for matmul_gelu_forward, are epilogues of the forward GEMM, and the bias
 * gradient is the BGRADA/BGRADB epilogue of the weight-gradient GEMM (the reduction over the N
 * rows that the GEMM already reads), written to scratch and added to dbias, since an epilogue
 * writes rather than accumulates. Split-K schemes that reduce in place are excluded, so a
 * shape always takes the same algorithm and the same order of sums. A shape cuBLASLt has no
 * algorithm for runs the plain way, and says so once. */
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <pthread.h>
#include <string.h>

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

void kernels_cuda_gemm_ptrs(cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                            float alpha, float *const *A, int lda, float *const *B, int ldb,
                            float beta, float *const *C, int ldc, int batch) {
  cublasComputeType_t ct =
      s_precision == KERNELS_PREC_BF16 ? CUBLAS_COMPUTE_32F_FAST_TF32 : s_compute();
  WT_CUBLAS_CHECK(cublasGemmBatchedEx(
      kernels_cuda_cublas_handle(), ta, tb, m, n, k, &alpha, (const void *const *)A, CUDA_R_32F,
      lda, (const void *const *)B, CUDA_R_32F, ldb, &beta, (void *const *)C, CUDA_R_32F, ldc, batch,
      ct, CUBLAS_GEMM_DEFAULT));
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

/* The bf16 copy of a linear layer's input at bf16 precision: `kept` when the caller kept one
 * (matmul_forward_keep wrote it), else a fresh rounding in scratch; NULL at other precisions. */
static const __nv_bfloat16 *s_input16(const float *inp, const void *kept, size_t n) {
  if (s_precision != KERNELS_PREC_BF16) return NULL;
  return kept && wt_cuda_fused() ? (const __nv_bfloat16 *)kept : s_bf16(WT_SCRATCH_BF16_B, inp, n);
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

/* ---- cuBLASLt ---- */

#define WT_LT_WORKSPACE (32u << 20) /* what cuBLASLt's Hopper kernels ask for */

static cublasLtHandle_t s_lt;
static void *s_lt_workspace;
static pthread_once_t s_lt_once = PTHREAD_ONCE_INIT;

static void s_lt_init(void) {
  WT_CUBLAS_CHECK(cublasLtCreate(&s_lt));
  WT_CUDA_CHECK(cudaMalloc(&s_lt_workspace, WT_LT_WORKSPACE));
}

/* One cuBLASLt GEMM, column-major like the rest of this file:
 * C (m x n, ld ldc) = op(A) op(B) + beta C, with epilogue `epi`: bias (m) for _BIAS and
 * _GELU_AUX_BIAS, which also write the pre-activation to aux (ld ldc); the bias gradient
 * (m for BGRADA, n for BGRADB) written to `bias`. A and B are bf16 (A16/B16) at bf16 precision,
 * else fp32. */
typedef struct {
  cublasOperation_t ta, tb;
  int m, n, k;
  const float *A;
  const __nv_bfloat16 *A16;
  int lda;
  const float *B;
  const __nv_bfloat16 *B16;
  int ldb;
  float beta;
  float *C;
  int ldc;
  cublasLtEpilogue_t epi;
  void *bias;
  float *aux;
} wt_lt_gemm;

/* The largest power of two, at most 256, that divides p's address. */
static uint32_t s_alignment(const void *p) {
  uint32_t a = 256;
  while (a > 1 && ((uintptr_t)p & (a - 1))) a >>= 1;
  return a;
}

static void s_lt_set(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t attr, const void *v,
                     size_t bytes) {
  WT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d, attr, v, bytes));
}

/* What decides cuBLASLt's choice of algorithm for a GEMM: the device, the shape, transposes,
 * leading dimensions, epilogue, types and the alignments of every pointer. */
typedef struct {
  int v[17];
} wt_lt_key;

/* The heuristic's algorithm for a key, asked once per key and kept (a query costs tens of
 * microseconds of host time, per GEMM otherwise). Returns 1 with *algo, or 0 when cuBLASLt has
 * none. The cache is shared by the process's threads. */
static int s_lt_algo(const wt_lt_key *key, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t la,
                     cublasLtMatrixLayout_t lb, cublasLtMatrixLayout_t lc,
                     cublasLtMatmulPreference_t pref, cublasLtMatmulAlgo_t *algo) {
  enum { CACHE = 256 };
  static struct {
    wt_lt_key key;
    cublasLtMatmulAlgo_t algo;
    int ok;
  } cache[CACHE];
  static int n_cached;
  static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < n_cached; i++)
    if (memcmp(&cache[i].key, key, sizeof *key) == 0) {
      *algo = cache[i].algo;
      int ok = cache[i].ok;
      pthread_mutex_unlock(&lock);
      return ok;
    }
  cublasLtMatmulHeuristicResult_t heur;
  int found = 0;
  cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(s_lt, desc, la, lb, lc, lc, pref, 1, &heur, &found);
  int ok = st == CUBLAS_STATUS_SUCCESS && found > 0;
  if (ok) *algo = heur.algo;
  if (n_cached < CACHE) { /* a full cache only means asking again */
    cache[n_cached].key = *key, cache[n_cached].ok = ok;
    if (ok) cache[n_cached].algo = heur.algo;
    n_cached++;
  }
  pthread_mutex_unlock(&lock);
  return ok;
}

/* Runs g; returns 0, or -1 when cuBLASLt has no algorithm for it (nothing was computed). */
static int s_lt_gemm(const wt_lt_gemm *g) {
  pthread_once(&s_lt_once, s_lt_init);
  int bf16 = s_precision == KERNELS_PREC_BF16;
  cudaDataType_t in_type = bf16 ? CUDA_R_16BF : CUDA_R_32F;
  cublasComputeType_t ct = bf16 ? CUBLAS_COMPUTE_32F : s_compute();
  cublasLtMatmulDesc_t desc;
  WT_CUBLAS_CHECK(cublasLtMatmulDescCreate(&desc, ct, CUDA_R_32F));
  s_lt_set(desc, CUBLASLT_MATMUL_DESC_TRANSA, &g->ta, sizeof g->ta);
  s_lt_set(desc, CUBLASLT_MATMUL_DESC_TRANSB, &g->tb, sizeof g->tb);
  s_lt_set(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &g->epi, sizeof g->epi);
  if (g->bias) {
    cudaDataType_t bias_type = CUDA_R_32F;
    s_lt_set(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &g->bias, sizeof g->bias);
    s_lt_set(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &bias_type, sizeof bias_type);
  }
  if (g->aux) {
    int64_t ld = g->ldc;
    s_lt_set(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &g->aux, sizeof g->aux);
    s_lt_set(desc, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld);
  }
  int a_rows = g->ta == CUBLAS_OP_N ? g->m : g->k, a_cols = g->ta == CUBLAS_OP_N ? g->k : g->m;
  int b_rows = g->tb == CUBLAS_OP_N ? g->k : g->n, b_cols = g->tb == CUBLAS_OP_N ? g->n : g->k;
  cublasLtMatrixLayout_t la, lb, lc;
  WT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&la, in_type, a_rows, a_cols, g->lda));
  WT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lb, in_type, b_rows, b_cols, g->ldb));
  WT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, g->m, g->n, g->ldc));
  cublasLtMatmulPreference_t pref;
  WT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  uint64_t ws = WT_LT_WORKSPACE;
  uint32_t schemes = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE | CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE;
  WT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  WT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(
      pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes, sizeof schemes));
  /* cuBLASLt assumes 256-byte aligned matrices unless told otherwise; weights are views into
   * the flat parameter buffer, aligned to 4 bytes at least */
  const void *A = bf16 ? (const void *)g->A16 : (const void *)g->A;
  const void *B = bf16 ? (const void *)g->B16 : (const void *)g->B;
  uint32_t align[4] = {s_alignment(A), s_alignment(B), s_alignment(g->C), s_alignment(g->C)};
  static const cublasLtMatmulPreferenceAttributes_t align_attr[4] = {
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
  for (int i = 0; i < 4; i++)
    WT_CUBLAS_CHECK(
        cublasLtMatmulPreferenceSetAttribute(pref, align_attr[i], &align[i], sizeof align[i]));
  int device = 0;
  WT_CUDA_CHECK(cudaGetDevice(&device));
  wt_lt_key key = {{device, g->ta, g->tb, g->m, g->n, g->k, g->lda, g->ldb, g->ldc, (int)g->epi,
                    bf16, (int)ct, (int)align[0], (int)align[1], (int)align[2],
                    g->bias ? (int)s_alignment(g->bias) : 0,
                    g->aux ? (int)s_alignment(g->aux) : 0}};
  cublasLtMatmulAlgo_t algo;
  int ok = s_lt_algo(&key, desc, la, lb, lc, pref, &algo);
  if (ok) {
    const float one = 1.0f;
    WT_CUBLAS_CHECK(cublasLtMatmul(s_lt, desc, &one, A, la, B, lb, &g->beta, g->C, lc, g->C, lc,
                                   &algo, s_lt_workspace, WT_LT_WORKSPACE, 0));
  }
  cublasLtMatmulPreferenceDestroy(pref);
  cublasLtMatrixLayoutDestroy(lc);
  cublasLtMatrixLayoutDestroy(lb);
  cublasLtMatrixLayoutDestroy(la);
  cublasLtMatmulDescDestroy(desc);
  return ok ? 0 : -1;
}

typedef enum { WT_LT_BIAS, WT_LT_GELU, WT_LT_BGRAD, WT_LT_KINDS } wt_lt_kind;

/* Reports, once per kind of epilogue, that cuBLASLt had no algorithm for a shape and the
 * separate kernels run instead (the result is the same; only the speed differs). */
static void s_lt_fallback(wt_lt_kind kind, int N, int C, int OC) {
  static const char *const names[WT_LT_KINDS] = {"bias", "bias + GELU", "bias gradient"};
  static int said[WT_LT_KINDS];
  if (said[kind]) return;
  said[kind] = 1;
  fprintf(stderr,
          "kernels/cuda: cuBLASLt has no algorithm for the %s epilogue of a %dx%d -> %d "
          "linear layer; running the separate kernels for it\n",
          names[kind], N, C, OC);
}

__global__ static void k_add_vec(float *y, const float *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += x[i];
}

/* out (N,OC) = inp @ W + bias through one cuBLASLt GEMM; with pre, out = gelu(that) and pre
 * = that. The bias epilogue needs a bias: without one (and without GELU) the caller uses the
 * plain GEMM. Returns -1, computing nothing, when cuBLASLt has no algorithm. */
static int s_lt_forward(float *out, float *pre, const float *inp, const void *kept,
                        const float *weight, const float *bias, int N, int C, int OC,
                        kernels_wlayout layout) {
  wt_lt_gemm g = {};
  g.A = weight, g.A16 = s_bf16_if(WT_SCRATCH_BF16_A, weight, (size_t)C * OC);
  g.B = inp, g.B16 = s_input16(inp, kept, (size_t)N * C);
  g.ta = layout == KERNELS_W_IN_OUT ? CUBLAS_OP_N : CUBLAS_OP_T, g.tb = CUBLAS_OP_N;
  g.m = OC, g.n = N, g.k = C, g.lda = layout == KERNELS_W_IN_OUT ? OC : C, g.ldb = C;
  g.beta = 0.0f, g.C = out, g.ldc = OC;
  g.bias = (void *)bias;
  if (bias && ((uintptr_t)bias & 15)) { /* an epilogue reads the bias in 16-byte vectors */
    g.bias = wt_cuda_scratch(WT_SCRATCH_DBIAS, (size_t)OC * sizeof(float));
    WT_CUDA_CHECK(
        cudaMemcpyAsync(g.bias, bias, (size_t)OC * sizeof(float), cudaMemcpyDeviceToDevice));
  }
  if (pre) {
    g.epi = bias ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_AUX;
    g.aux = pre;
  } else {
    g.epi = CUBLASLT_EPILOGUE_BIAS;
  }
  return s_lt_gemm(&g);
}

/* The weight gradient's GEMM with the bias gradient as its epilogue: dweight += (as s_backward)
 * and dbias += sum over rows of dout. Returns -1, computing nothing, without an algorithm. */
static int s_lt_dweight_dbias(float *dweight, float *dbias, const float *dout,
                              const __nv_bfloat16 *d16, const float *inp, const __nv_bfloat16 *x16,
                              int N, int C, int OC, kernels_wlayout layout) {
  float *db = (float *)wt_cuda_scratch(WT_SCRATCH_DBIAS, (size_t)OC * sizeof(float));
  wt_lt_gemm g = {};
  g.ta = CUBLAS_OP_N, g.tb = CUBLAS_OP_T, g.k = N, g.beta = 1.0f, g.C = dweight, g.bias = db;
  if (layout == KERNELS_W_IN_OUT) { /* dW (OC x C) = dout (OC x N) · inpᵀ: dbias reduces A */
    g.m = OC, g.n = C, g.A = dout, g.A16 = d16, g.lda = OC, g.B = inp, g.B16 = x16, g.ldb = C;
    g.ldc = OC, g.epi = CUBLASLT_EPILOGUE_BGRADA;
  } else { /* dW (C x OC) = inp (C x N) · doutᵀ: dbias reduces B */
    g.m = C, g.n = OC, g.A = inp, g.A16 = x16, g.lda = C, g.B = dout, g.B16 = d16, g.ldb = OC;
    g.ldc = C, g.epi = CUBLASLT_EPILOGUE_BGRADB;
  }
  if (s_lt_gemm(&g) != 0) return -1;
  k_add_vec<<<wt_cuda_blocks((size_t)OC, 256), 256>>>(dbias, db, OC);
  WT_CUDA_CHECK(cudaGetLastError());
  return 0;
}

/* ---- the ops ---- */
static void s_forward(float *out, const float *inp, const void *kept, const float *weight, int N,
                      int C, int OC, kernels_wlayout layout) {
  const __nv_bfloat16 *w16 = s_bf16_if(WT_SCRATCH_BF16_A, weight, (size_t)C * OC);
  const __nv_bfloat16 *x16 = s_input16(inp, kept, (size_t)N * C);
  if (layout == KERNELS_W_IN_OUT) /* W row-major (C, OC) = col-major (OC, C), ld OC */
    s_linear_gemm(CUBLAS_OP_N, CUBLAS_OP_N, OC, N, C, weight, w16, OC, inp, x16, C, 0.0f, out, OC);
  else /* W row-major (OC, C) = col-major (C, OC), ld C: transpose it */
    s_linear_gemm(CUBLAS_OP_T, CUBLAS_OP_N, OC, N, C, weight, w16, C, inp, x16, C, 0.0f, out, OC);
}

/* matmul_forward with the input's bf16 copy `kept` (NULL: rounded here when needed). */
static void s_matmul_forward(float *out, const float *inp, const void *kept, const float *weight,
                             const float *bias, int N, int C, int OC, kernels_wlayout layout) {
  int OCp = s_aligned_oc(OC);
  if (bias && OCp == OC && N > 0 && C > 0 && wt_cuda_fused()) {
    if (s_lt_forward(out, NULL, inp, kept, weight, bias, N, C, OC, layout) == 0) return;
    s_lt_fallback(WT_LT_BIAS, N, C, OC);
  }
  if (OCp == OC) {
    s_forward(out, inp, kept, weight, N, C, OC, layout);
  } else {
    float *w = (float *)wt_cuda_scratch(WT_SCRATCH_PADDED_W, (size_t)OCp * C * 4);
    float *o = (float *)wt_cuda_scratch(WT_SCRATCH_PADDED, (size_t)N * OCp * 4);
    s_pad_weight(w, weight, C, OC, OCp, layout);
    s_forward(o, inp, kept, w, N, C, OCp, layout);
    WT_CUDA_CHECK(cudaMemcpy2DAsync(out, (size_t)OC * 4, o, (size_t)OCp * 4, (size_t)OC * 4, N,
                                    cudaMemcpyDeviceToDevice));
  }
  if (bias) {
    size_t n = (size_t)N * OC;
    k_add_bias<<<wt_cuda_blocks(n, 256), 256>>>(out, bias, N, OC);
    WT_CUDA_CHECK(cudaGetLastError());
  }
}

void kernels_cuda_matmul_forward(float *out, const float *inp, const float *weight,
                                 const float *bias, int N, int C, int OC, kernels_wlayout layout) {
  s_matmul_forward(out, inp, NULL, weight, bias, N, C, OC, layout);
}

/* The input's bf16 copy for the backward, made at every precision: the backward may run at
 * bf16 after a forward at another precision, and must not read a stale copy. The plain kernels
 * keep none (NULL), and their backward rounds again. */
static const void *s_keep(void *inp_bf16, const float *inp, size_t n) {
  if (!wt_cuda_fused()) return NULL;
  __nv_bfloat16 *y = (__nv_bfloat16 *)inp_bf16;
  size_t done = 0;
  if (((uintptr_t)inp & 15) == 0 && ((uintptr_t)y & 3) == 0) {
    size_t n4 = n / 4;
    if (n4)
      k_to_bf16_x4<<<wt_cuda_blocks(n4, 256), 256>>>((__nv_bfloat162 *)y, (const float4 *)inp, n4);
    done = 4 * n4;
  }
  if (done < n) k_to_bf16<<<wt_cuda_blocks(n - done, 256), 256>>>(y + done, inp + done, n - done);
  WT_CUDA_CHECK(cudaGetLastError());
  return inp_bf16;
}

void kernels_cuda_matmul_forward_keep(float *out, void *inp_bf16, const float *inp,
                                      const float *weight, const float *bias, int N, int C, int OC,
                                      kernels_wlayout layout) {
  const void *kept = s_keep(inp_bf16, inp, (size_t)N * C);
  s_matmul_forward(out, inp, kept, weight, bias, N, C, OC, layout);
}

static void s_backward(float *dinp, float *dweight, const float *dout, const float *inp,
                       const void *kept, const float *weight, int N, int C, int OC,
                       kernels_wlayout layout) {
  const __nv_bfloat16 *d16 = s_bf16_if(WT_SCRATCH_BF16_C, dout, (size_t)N * OC);
  const __nv_bfloat16 *x16 = s_input16(inp, kept, (size_t)N * C);
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

/* matmul_backward with the bias gradient in the weight gradient's GEMM (OC a multiple of 8).
 * Returns -1, computing nothing, when cuBLASLt has no algorithm for it. */
static int s_lt_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                         const float *inp, const void *kept, const float *weight, int N, int C,
                         int OC, kernels_wlayout layout) {
  const __nv_bfloat16 *d16 = s_bf16_if(WT_SCRATCH_BF16_C, dout, (size_t)N * OC);
  const __nv_bfloat16 *x16 = s_input16(inp, kept, (size_t)N * C);
  if (s_lt_dweight_dbias(dweight, dbias, dout, d16, inp, x16, N, C, OC, layout) != 0) return -1;
  if (!dinp) return 0;
  const __nv_bfloat16 *w16 = s_bf16_if(WT_SCRATCH_BF16_A, weight, (size_t)C * OC);
  if (layout == KERNELS_W_IN_OUT) /* dinp (N,C) += dout (N,OC) @ W^T */
    s_linear_gemm(CUBLAS_OP_T, CUBLAS_OP_N, C, N, OC, weight, w16, OC, dout, d16, OC, 1.0f, dinp,
                  C);
  else /* dinp (N,C) += dout (N,OC) @ W */
    s_linear_gemm(CUBLAS_OP_N, CUBLAS_OP_N, C, N, OC, weight, w16, C, dout, d16, OC, 1.0f, dinp, C);
  return 0;
}

/* matmul_backward with the input's bf16 copy `kept` (NULL: rounded here when needed). */
static void s_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                              const float *inp, const void *kept, const float *weight, int N, int C,
                              int OC, kernels_wlayout layout) {
  int OCp = s_aligned_oc(OC);
  if (dbias && OCp == OC && N > 0 && C > 0 && wt_cuda_fused()) {
    if (s_lt_backward(dinp, dweight, dbias, dout, inp, kept, weight, N, C, OC, layout) == 0) return;
    s_lt_fallback(WT_LT_BGRAD, N, C, OC);
  }
  if (OCp == OC) {
    s_backward(dinp, dweight, dout, inp, kept, weight, N, C, OC, layout);
  } else {
    float *w = (float *)wt_cuda_scratch(WT_SCRATCH_PADDED_W, (size_t)OCp * C * 4);
    float *dw = (float *)wt_cuda_scratch(WT_SCRATCH_PADDED_DW, (size_t)OCp * C * 4);
    float *d = (float *)wt_cuda_scratch(WT_SCRATCH_PADDED, (size_t)N * OCp * 4);
    s_pad_weight(w, weight, C, OC, OCp, layout);
    s_pad_weight(dw, dweight, C, OC, OCp, layout);
    WT_CUDA_CHECK(cudaMemcpy2DAsync(d, (size_t)OCp * 4, dout, (size_t)OC * 4, (size_t)OC * 4, N,
                                    cudaMemcpyDeviceToDevice));
    WT_CUDA_CHECK(cudaMemset2DAsync(d + OC, (size_t)OCp * 4, 0, (size_t)(OCp - OC) * 4, N));
    s_backward(dinp, dw, d, inp, kept, w, N, C, OCp, layout);
    s_unpad_weight(dweight, dw, C, OC, OCp, layout);
  }
  if (dbias) { /* dbias (OC) += dout^T (OC, N) · 1: col-major dout is (OC, N), ld OC */
    const float one = 1.0f;
    WT_CUBLAS_CHECK(cublasSgemv(kernels_cuda_cublas_handle(), CUBLAS_OP_N, OC, N, &one, dout, OC,
                                s_ones((size_t)N), 1, &one, dbias, 1));
  }
}

void kernels_cuda_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                                  const float *inp, const float *weight, int N, int C, int OC,
                                  kernels_wlayout layout) {
  s_matmul_backward(dinp, dweight, dbias, dout, inp, NULL, weight, N, C, OC, layout);
}

void kernels_cuda_matmul_backward_kept(float *dinp, float *dweight, float *dbias, const float *dout,
                                       const float *inp, const void *inp_bf16, const float *weight,
                                       int N, int C, int OC, kernels_wlayout layout) {
  s_matmul_backward(dinp, dweight, dbias, dout, inp, inp_bf16, weight, N, C, OC, layout);
}

void kernels_cuda_matmul_gelu_forward(float *out, float *pre, void *inp_bf16, const float *inp,
                                      const float *weight, const float *bias, int N, int C, int OC,
                                      kernels_wlayout layout) {
  const void *kept = inp_bf16 ? s_keep(inp_bf16, inp, (size_t)N * C) : NULL;
  /* the GELU epilogue's aux output needs a leading dimension divisible by 8 */
  if (OC % 8 == 0 && OC > 0 && N > 0 && C > 0 && wt_cuda_fused()) {
    if (s_lt_forward(out, pre, inp, kept, weight, bias, N, C, OC, layout) == 0) return;
    s_lt_fallback(WT_LT_GELU, N, C, OC);
  }
  s_matmul_forward(pre, inp, kept, weight, bias, N, C, OC, layout);
  kernels_cuda_gelu_forward(out, pre, (size_t)N * OC);
}
