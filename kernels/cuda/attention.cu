/* attention — causal multi-head self-attention, one thread per (batch, head, query row).
 *
 * This is the readable GPU path (the reference the fused kernels of a later issue will be tested
 * against), not a flash-attention kernel. The backward runs in two passes so that no two threads
 * ever add into the same gradient row: pass 1 (per query row) writes d(pre-softmax scores) into
 * the scratch and accumulates dq; pass 2 (per key row) sums dk and dv over the query rows. */
#include "kernels/cuda/cuda_internal.cuh"

__global__ static void k_attention_forward(float *out, float *att, const float *qkv, int B, int T,
                                           int C, int NH) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= B * NH * T) return;
  int t = idx % T, bh = idx / T, h = bh % NH, b = bh / NH;
  int hs = C / NH;
  float scale = rsqrtf((float)hs);
  size_t row = 3 * (size_t)C;
  const float *base = qkv + (size_t)b * T * row + (size_t)h * hs;
  const float *q = base + t * row;
  float *p = att + ((size_t)bh * T + t) * T;
  float maxv = -INFINITY;
  for (int t2 = 0; t2 <= t; t2++) {
    const float *k = base + C + t2 * row;
    float s = 0.0f;
    for (int i = 0; i < hs; i++) s += q[i] * k[i];
    p[t2] = s * scale;
    maxv = fmaxf(maxv, p[t2]);
  }
  float sum = 0.0f;
  for (int t2 = 0; t2 <= t; t2++) {
    p[t2] = expf(p[t2] - maxv);
    sum += p[t2];
  }
  float inv = 1.0f / sum;
  for (int t2 = 0; t2 <= t; t2++) p[t2] *= inv;
  for (int t2 = t + 1; t2 < T; t2++) p[t2] = 0.0f;
  float *y = out + ((size_t)b * T + t) * C + (size_t)h * hs;
  for (int i = 0; i < hs; i++) {
    float acc = 0.0f;
    for (int t2 = 0; t2 <= t; t2++) acc += p[t2] * base[2 * C + t2 * row + i];
    y[i] = acc;
  }
}

/* Pass 1: ds (B,NH,T,T) = scale · p ∘ (dp − Σ p·dp) with dp = dy · v; dq += ds · k. */
__global__ static void k_attention_backward_query(float *dqkv, float *ds, const float *dout,
                                                  const float *qkv, const float *att, int B, int T,
                                                  int C, int NH) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= B * NH * T) return;
  int t = idx % T, bh = idx / T, h = bh % NH, b = bh / NH;
  int hs = C / NH;
  float scale = rsqrtf((float)hs);
  size_t row = 3 * (size_t)C;
  const float *base = qkv + (size_t)b * T * row + (size_t)h * hs;
  const float *p = att + ((size_t)bh * T + t) * T;
  const float *dy = dout + ((size_t)b * T + t) * C + (size_t)h * hs;
  float *d = ds + ((size_t)bh * T + t) * T;
  float dot = 0.0f;
  for (int t2 = 0; t2 <= t; t2++) {
    const float *v = base + 2 * C + t2 * row;
    float dp = 0.0f;
    for (int i = 0; i < hs; i++) dp += dy[i] * v[i];
    d[t2] = dp;
    dot += p[t2] * dp;
  }
  for (int t2 = 0; t2 <= t; t2++) d[t2] = p[t2] * (d[t2] - dot) * scale;
  float *dq = dqkv + (size_t)b * T * row + t * row + (size_t)h * hs;
  for (int i = 0; i < hs; i++) {
    float acc = 0.0f;
    for (int t2 = 0; t2 <= t; t2++) acc += d[t2] * base[C + t2 * row + i];
    dq[i] += acc;
  }
}

/* Pass 2: for key row t2, dk += Σ_{t≥t2} ds[t][t2] q[t] and dv += Σ_{t≥t2} p[t][t2] dy[t]. */
__global__ static void k_attention_backward_key(float *dqkv, const float *ds, const float *dout,
                                                const float *qkv, const float *att, int B, int T,
                                                int C, int NH) {
  int idx = blockIdx.x * blockDim.x + threadIdx.x;
  if (idx >= B * NH * T) return;
  int t2 = idx % T, bh = idx / T, h = bh % NH, b = bh / NH;
  int hs = C / NH;
  size_t row = 3 * (size_t)C;
  const float *base = qkv + (size_t)b * T * row + (size_t)h * hs;
  float *dk = dqkv + (size_t)b * T * row + t2 * row + C + (size_t)h * hs;
  float *dv = dk + C;
  for (int i = 0; i < hs; i++) {
    float ak = 0.0f, av = 0.0f;
    for (int t = t2; t < T; t++) {
      size_t at = ((size_t)bh * T + t) * T + t2;
      ak += ds[at] * base[t * row + i];
      av += att[at] * dout[((size_t)b * T + t) * C + (size_t)h * hs + i];
    }
    dk[i] += ak;
    dv[i] += av;
  }
}

void kernels_cuda_attention_forward(float *out, float *att, const float *qkv, int B, int T, int C,
                                    int NH) {
  int n = B * NH * T;
  k_attention_forward<<<wt_cuda_blocks(n, 128), 128>>>(out, att, qkv, B, T, C, NH);
  WT_CUDA_CHECK(cudaGetLastError());
}

void kernels_cuda_attention_backward(float *dqkv, float *scratch, const float *dout,
                                     const float *qkv, const float *att, int B, int T, int C,
                                     int NH) {
  int n = B * NH * T;
  k_attention_backward_query<<<wt_cuda_blocks(n, 128), 128>>>(dqkv, scratch, dout, qkv, att, B, T,
                                                              C, NH);
  k_attention_backward_key<<<wt_cuda_blocks(n, 128), 128>>>(dqkv, scratch, dout, qkv, att, B, T, C,
                                                            NH);
  WT_CUDA_CHECK(cudaGetLastError());
}
