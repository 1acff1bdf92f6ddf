/* attention — causal multi-head self-attention as cuBLAS batched GEMMs around one softmax
 * kernel (llm.c's first CUDA version), deterministic: every reduction has a fixed order.
 *
 * Forward: q, k, v are gathered from qkv (B,T,3,NH,hs) into (B,NH,T,hs); att = scale · q kᵀ for
 * every (b, h) in one strided-batched GEMM, written straight into the saved probabilities
 * buffer; the softmax kernel turns each row into causal probabilities (zeros above the
 * diagonal, as the ops contract says); y = att v; y is scattered back to (B,T,C).
 * Backward: datt = dy vᵀ, dv = attᵀ dy, the softmax backward (scaled, in the scratch buffer),
 * dq = dpre k, dk = dpreᵀ q, and the three are added into dqkv.
 *
 * The permuted q/k/v/y and their gradients live in a scratch buffer of the back end (7·B·T·C
 * floats, grown on demand and kept for the process), not in the ops' arguments.
 *
 * With the fused kernels (wt_cuda_fused) nothing is permuted: each (b, h) is one GEMM of a
 * pointer-array batch whose matrices are read and written where they are, head h of row t at
 * qkv + (b T + t) 3C + h hs (leading dimension 3C) and at out/dout + (b T + t) C + h hs
 * (leading dimension C); the gradients of q, k and v are accumulated straight into dqkv
 * (beta = 1). The T×T probabilities are still materialised (see docs/performance.md). */
#include "kernels/cuda/cuda_internal.cuh"

/* Device scratch of at least n floats (grown on demand; the stream orders its users). */
static float *s_scratch(size_t n) {
  static float *buf;
  static size_t cap;
  if (n > cap) {
    if (buf) WT_CUDA_CHECK(cudaFree(buf));
    WT_CUDA_CHECK(cudaMalloc(&buf, n * sizeof(float)));
    cap = n;
  }
  return buf;
}

/* qkv (B,T,3,NH,hs) -> q, k, v (B,NH,T,hs). */
__global__ static void k_permute(float *q, float *k, float *v, const float *qkv, int B, int T,
                                 int NH, int hs) {
  size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  size_t total = (size_t)B * NH * T * hs;
  if (idx >= total) return;
  int i = (int)(idx % hs), t = (int)(idx / hs % T), h = (int)(idx / ((size_t)hs * T) % NH);
  size_t b = idx / ((size_t)hs * T * NH), C = (size_t)NH * hs;
  size_t src = (b * T + t) * 3 * C + (size_t)h * hs + i;
  q[idx] = qkv[src];
  k[idx] = qkv[src + C];
  v[idx] = qkv[src + 2 * C];
}

/* y (B,NH,T,hs) -> out (B,T,NH,hs). */
__global__ static void k_unpermute(float *out, const float *y, int B, int T, int NH, int hs) {
  size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (idx >= (size_t)B * NH * T * hs) return;
  int i = (int)(idx % hs), t = (int)(idx / hs % T), h = (int)(idx / ((size_t)hs * T) % NH);
  size_t b = idx / ((size_t)hs * T * NH), C = (size_t)NH * hs;
  out[(b * T + t) * C + (size_t)h * hs + i] = y[idx];
}

/* x (B,T,NH,hs) -> y (B,NH,T,hs): the inverse of k_unpermute. */
__global__ static void k_gather_heads(float *y, const float *x, int B, int T, int NH, int hs) {
  size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (idx >= (size_t)B * NH * T * hs) return;
  int i = (int)(idx % hs), t = (int)(idx / hs % T), h = (int)(idx / ((size_t)hs * T) % NH);
  size_t b = idx / ((size_t)hs * T * NH), C = (size_t)NH * hs;
  y[idx] = x[(b * T + t) * C + (size_t)h * hs + i];
}

/* dqkv (B,T,3,NH,hs) += dq, dk, dv (B,NH,T,hs); each element has exactly one writer. */
__global__ static void k_unpermute_add(float *dqkv, const float *dq, const float *dk,
                                       const float *dv, int B, int T, int NH, int hs) {
  size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (idx >= (size_t)B * NH * T * hs) return;
  int i = (int)(idx % hs), t = (int)(idx / hs % T), h = (int)(idx / ((size_t)hs * T) % NH);
  size_t b = idx / ((size_t)hs * T * NH), C = (size_t)NH * hs;
  size_t dst = (b * T + t) * 3 * C + (size_t)h * hs + i;
  dqkv[dst] += dq[idx];
  dqkv[dst + C] += dk[idx];
  dqkv[dst + 2 * C] += dv[idx];
}

__device__ inline float s_warp_max(float x) {
  for (int off = 16; off > 0; off >>= 1) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, off));
  return x;
}
__device__ inline float s_warp_sum(float x) {
  for (int off = 16; off > 0; off >>= 1) x += __shfl_xor_sync(0xffffffffu, x, off);
  return x;
}

/* One warp per row (bh, t) of att (B·NH·T rows of T): scores (already scaled) in, causal
 * probabilities out, zeros above the diagonal. */
__global__ static void k_softmax_forward(float *att, int rows, int T) {
  int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= rows) return;
  int t = row % T;
  float *p = att + (size_t)row * T;
  float m = -INFINITY;
  for (int j = lane; j <= t; j += 32) m = fmaxf(m, p[j]);
  m = s_warp_max(m);
  float sum = 0.0f;
  for (int j = lane; j <= t; j += 32) {
    float e = expf(p[j] - m);
    p[j] = e;
    sum += e;
  }
  float inv = 1.0f / s_warp_sum(sum);
  for (int j = lane; j < T; j += 32) p[j] = j <= t ? p[j] * inv : 0.0f;
}

/* One warp per row: d (in: dL/dp, out: dL/dscores·scale) = scale · p ∘ (dp − Σ p·dp). */
__global__ static void k_softmax_backward(float *d, const float *att, int rows, int T,
                                          float scale) {
  int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= rows) return;
  int t = row % T;
  const float *p = att + (size_t)row * T;
  float *dp = d + (size_t)row * T;
  float dot = 0.0f;
  for (int j = lane; j <= t; j += 32) dot += p[j] * dp[j];
  dot = s_warp_sum(dot);
  for (int j = lane; j < T; j += 32) dp[j] = j <= t ? scale * p[j] * (dp[j] - dot) : 0.0f;
}

/* ptrs[b NH + h] = base + b·batch_stride + h·head_stride, for B·NH heads. */
__global__ static void k_head_ptrs(float **ptrs, float *base, int B, int NH, long long batch_stride,
                                   long long head_stride) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= B * NH) return;
  ptrs[i] = base + (i / NH) * batch_stride + (i % NH) * head_stride;
}

/* Device pointer tables of the in-place path, one per matrix role, each B·NH long: set 0 for
 * the inputs, set 1 for the backward's gradients (both are read by the same queued GEMMs). */
enum { PTR_Q, PTR_K, PTR_V, PTR_ATT, PTR_Y, PTR_ROLES };

static float **s_ptr_tables(int BH, int set) {
  static float **tables;
  static int cap;
  if (BH > cap) {
    if (tables) WT_CUDA_CHECK(cudaFree(tables));
    WT_CUDA_CHECK(cudaMalloc(&tables, 2 * (size_t)PTR_ROLES * BH * sizeof(float *)));
    cap = BH;
  }
  return tables + (size_t)set * PTR_ROLES * cap;
}

static float **s_fill(float **tables, int role, const float *base, int B, int NH,
                      long long batch_stride, long long head_stride) {
  float **p = tables + (size_t)role * B * NH;
  k_head_ptrs<<<wt_cuda_blocks((size_t)B * NH, 128), 128>>>(p, (float *)base, B, NH, batch_stride,
                                                            head_stride);
  WT_CUDA_CHECK(cudaGetLastError());
  return p;
}

/* The tables for qkv's q, k, v (and their gradients in dqkv, the same offsets), att, and
 * y = out (or dy = dout). */
static float **s_head_tables(const float *qkv, const float *att, const float *y, int B, int T,
                             int C, int NH) {
  int hs = C / NH;
  float **t = s_ptr_tables(B * NH, 0);
  long long row3 = 3LL * C * T, row1 = (long long)C * T;
  s_fill(t, PTR_Q, qkv, B, NH, row3, hs);
  s_fill(t, PTR_K, qkv + C, B, NH, row3, hs);
  s_fill(t, PTR_V, qkv + 2 * C, B, NH, row3, hs);
  s_fill(t, PTR_ATT, att, B, NH, (long long)NH * T * T, (long long)T * T);
  s_fill(t, PTR_Y, y, B, NH, row1, hs);
  return t;
}

/* The backward's gradient tables: dq, dk, dv in dqkv, datt in scratch (set 1). */
static float **s_grad_tables(float *dqkv, float *datt, int B, int T, int C, int NH) {
  int hs = C / NH;
  float **t = s_ptr_tables(B * NH, 1);
  long long row3 = 3LL * C * T;
  s_fill(t, PTR_Q, dqkv, B, NH, row3, hs);
  s_fill(t, PTR_K, dqkv + C, B, NH, row3, hs);
  s_fill(t, PTR_V, dqkv + 2 * C, B, NH, row3, hs);
  s_fill(t, PTR_ATT, datt, B, NH, (long long)NH * T * T, (long long)T * T);
  return t;
}

static void s_forward_in_place(float *out, float *att, const float *qkv, int B, int T, int C,
                               int NH) {
  int hs = C / NH, BH = B * NH, rows = BH * T;
  float **t = s_head_tables(qkv, att, out, B, T, C, NH);
  float **q = t + PTR_Q * BH, **k = t + PTR_K * BH, **v = t + PTR_V * BH;
  float **a = t + PTR_ATT * BH, **y = t + PTR_Y * BH;
  /* att (T2 x T) = scale kᵀ q, k and q (hs x T) with leading dimension 3C */
  kernels_cuda_gemm_ptrs(CUBLAS_OP_T, CUBLAS_OP_N, T, T, hs, rsqrtf((float)hs), k, 3 * C, q, 3 * C,
                         0.0f, a, T, BH);
  k_softmax_forward<<<wt_cuda_blocks((size_t)rows * 32, 256), 256>>>(att, rows, T);
  WT_CUDA_CHECK(cudaGetLastError());
  /* y (hs x T, leading dimension C: straight into out) = v · att */
  kernels_cuda_gemm_ptrs(CUBLAS_OP_N, CUBLAS_OP_N, hs, T, T, 1.0f, v, 3 * C, a, T, 0.0f, y, C, BH);
}

static void s_backward_in_place(float *dqkv, float *scratch, const float *dout, const float *qkv,
                                const float *att, int B, int T, int C, int NH) {
  int hs = C / NH, BH = B * NH, rows = BH * T;
  float **t = s_head_tables(qkv, att, dout, B, T, C, NH);
  float **q = t + PTR_Q * BH, **k = t + PTR_K * BH, **v = t + PTR_V * BH;
  float **a = t + PTR_ATT * BH, **dy = t + PTR_Y * BH;
  /* the gradients' tables: dqkv at qkv's offsets, datt (scratch) at att's */
  float **g = s_grad_tables(dqkv, scratch, B, T, C, NH);
  float **dq = g + PTR_Q * BH, **dk = g + PTR_K * BH, **dv = g + PTR_V * BH;
  float **datt = g + PTR_ATT * BH;
  /* datt (T2 x T) = vᵀ dy */
  kernels_cuda_gemm_ptrs(CUBLAS_OP_T, CUBLAS_OP_N, T, T, hs, 1.0f, v, 3 * C, dy, C, 0.0f, datt, T,
                         BH);
  /* dv (hs x T2) += dy attᵀ */
  kernels_cuda_gemm_ptrs(CUBLAS_OP_N, CUBLAS_OP_T, hs, T, T, 1.0f, dy, C, a, T, 1.0f, dv, 3 * C,
                         BH);
  k_softmax_backward<<<wt_cuda_blocks((size_t)rows * 32, 256), 256>>>(scratch, att, rows, T,
                                                                      rsqrtf((float)hs));
  WT_CUDA_CHECK(cudaGetLastError());
  /* dq (hs x T) += k dpre;  dk (hs x T2) += q dpreᵀ */
  kernels_cuda_gemm_ptrs(CUBLAS_OP_N, CUBLAS_OP_N, hs, T, T, 1.0f, k, 3 * C, datt, T, 1.0f, dq,
                         3 * C, BH);
  kernels_cuda_gemm_ptrs(CUBLAS_OP_N, CUBLAS_OP_T, hs, T, T, 1.0f, q, 3 * C, datt, T, 1.0f, dk,
                         3 * C, BH);
}

void kernels_cuda_attention_forward(float *out, float *att, const float *qkv, int B, int T, int C,
                                    int NH) {
  if (wt_cuda_fused()) {
    s_forward_in_place(out, att, qkv, B, T, C, NH);
    return;
  }
  int hs = C / NH, BH = B * NH, rows = BH * T;
  size_t n = (size_t)B * T * C;
  long long sqkv = (long long)T * hs, satt = (long long)T * T;
  float *q = s_scratch(7 * n), *k = q + n, *v = k + n, *y = v + n;
  k_permute<<<wt_cuda_blocks(n, 256), 256>>>(q, k, v, qkv, B, T, NH, hs);
  WT_CUDA_CHECK(cudaGetLastError());
  /* att[t][t2] = scale Σ_i q[t][i] k[t2][i]: column-major (T2 x T) = kᵀ-as-(T2 x hs) · q. */
  kernels_cuda_gemm_batched(CUBLAS_OP_T, CUBLAS_OP_N, T, T, hs, rsqrtf((float)hs), k, hs, sqkv, q,
                            hs, sqkv, 0.0f, att, T, satt, BH);
  k_softmax_forward<<<wt_cuda_blocks((size_t)rows * 32, 256), 256>>>(att, rows, T);
  WT_CUDA_CHECK(cudaGetLastError());
  /* y[t][i] = Σ_t2 att[t][t2] v[t2][i]: column-major (hs x T) = v (hs x T2) · att (T2 x T). */
  kernels_cuda_gemm_batched(CUBLAS_OP_N, CUBLAS_OP_N, hs, T, T, 1.0f, v, hs, sqkv, att, T, satt,
                            0.0f, y, hs, sqkv, BH);
  k_unpermute<<<wt_cuda_blocks(n, 256), 256>>>(out, y, B, T, NH, hs);
  WT_CUDA_CHECK(cudaGetLastError());
}

void kernels_cuda_attention_backward(float *dqkv, float *scratch, const float *dout,
                                     const float *qkv, const float *att, int B, int T, int C,
                                     int NH) {
  if (wt_cuda_fused()) {
    s_backward_in_place(dqkv, scratch, dout, qkv, att, B, T, C, NH);
    return;
  }
  int hs = C / NH, BH = B * NH, rows = BH * T;
  size_t n = (size_t)B * T * C;
  long long sqkv = (long long)T * hs, satt = (long long)T * T;
  float *q = s_scratch(7 * n), *k = q + n, *v = k + n, *dy = v + n;
  float *dq = dy + n, *dk = dq + n, *dv = dk + n;
  k_permute<<<wt_cuda_blocks(n, 256), 256>>>(q, k, v, qkv, B, T, NH, hs);
  k_gather_heads<<<wt_cuda_blocks(n, 256), 256>>>(dy, dout, B, T, NH, hs);
  WT_CUDA_CHECK(cudaGetLastError());
  float *datt = scratch;
  /* datt[t][t2] = Σ_i dy[t][i] v[t2][i] (the forward's score product with dy for q). */
  kernels_cuda_gemm_batched(CUBLAS_OP_T, CUBLAS_OP_N, T, T, hs, 1.0f, v, hs, sqkv, dy, hs, sqkv,
                            0.0f, datt, T, satt, BH);
  /* dv[t2][i] = Σ_t att[t][t2] dy[t][i]: column-major (hs x T2) = dy (hs x T) · attᵀ. */
  kernels_cuda_gemm_batched(CUBLAS_OP_N, CUBLAS_OP_T, hs, T, T, 1.0f, dy, hs, sqkv, att, T, satt,
                            0.0f, dv, hs, sqkv, BH);
  k_softmax_backward<<<wt_cuda_blocks((size_t)rows * 32, 256), 256>>>(datt, att, rows, T,
                                                                      rsqrtf((float)hs));
  WT_CUDA_CHECK(cudaGetLastError());
  /* dq[t][i] = Σ_t2 dpre[t][t2] k[t2][i];  dk[t2][i] = Σ_t dpre[t][t2] q[t][i]. */
  kernels_cuda_gemm_batched(CUBLAS_OP_N, CUBLAS_OP_N, hs, T, T, 1.0f, k, hs, sqkv, datt, T, satt,
                            0.0f, dq, hs, sqkv, BH);
  kernels_cuda_gemm_batched(CUBLAS_OP_N, CUBLAS_OP_T, hs, T, T, 1.0f, q, hs, sqkv, datt, T, satt,
                            0.0f, dk, hs, sqkv, BH);
  k_unpermute_add<<<wt_cuda_blocks(n, 256), 256>>>(dqkv, dq, dk, dv, B, T, NH, hs);
  WT_CUDA_CHECK(cudaGetLastError());
}
