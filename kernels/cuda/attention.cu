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
 * floats, grown on demand and kept for the process), not in the ops' arguments. */
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

void kernels_cuda_attention_forward(float *out, float *att, const float *qkv, int B, int T, int C,
                                    int NH) {
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
