/* layernorm — one block per row for the row statistics and the input gradient; the weight and
 * bias gradients in two fixed-order passes over row chunks (no atomics). */
#include "kernels/cuda/cuda_internal.cuh"

#define LN_THREADS 256

__global__ static void k_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                                           const float *weight, const float *bias, int C) {
  __shared__ float shared[LN_THREADS / 32];
  const float *x = inp + (size_t)blockIdx.x * C;
  float s = 0.0f;
  for (int i = threadIdx.x; i < C; i += blockDim.x) s += x[i];
  float m = wt_block_sum(s, shared) / C;
  float v = 0.0f;
  for (int i = threadIdx.x; i < C; i += blockDim.x) v += (x[i] - m) * (x[i] - m);
  float r = rsqrtf(wt_block_sum(v, shared) / C + 1e-5f);
  float *y = out + (size_t)blockIdx.x * C;
  for (int i = threadIdx.x; i < C; i += blockDim.x) y[i] = (x[i] - m) * r * weight[i] + bias[i];
  if (threadIdx.x == 0) {
    mean[blockIdx.x] = m;
    rstd[blockIdx.x] = r;
  }
}

__global__ static void k_layernorm_backward_input(float *dinp, const float *dout, const float *inp,
                                                  const float *weight, const float *mean,
                                                  const float *rstd, int C) {
  __shared__ float shared[LN_THREADS / 32];
  size_t row = blockIdx.x;
  const float *x = inp + row * C, *dy = dout + row * C;
  float m = mean[row], r = rstd[row];
  float a = 0.0f, b = 0.0f;
  for (int i = threadIdx.x; i < C; i += blockDim.x) {
    float dnorm = weight[i] * dy[i];
    a += dnorm;
    b += dnorm * (x[i] - m) * r;
  }
  float dnorm_mean = wt_block_sum(a, shared) / C;
  float dnorm_norm_mean = wt_block_sum(b, shared) / C;
  for (int i = threadIdx.x; i < C; i += blockDim.x) {
    float norm = (x[i] - m) * r;
    float dnorm = weight[i] * dy[i];
    dinp[row * C + i] += (dnorm - dnorm_mean - norm * dnorm_norm_mean) * r;
  }
}

/* The weight and bias gradients in two passes, no atomics: pass 1 gives every (chunk of
 * LN_ROWS rows, column) one thread that sums its rows in order into a partial; pass 2 gives
 * every column one thread that adds the partials in chunk order. (One thread per column over
 * all N rows leaves most of the GPU idle when C is 768 and N is 16k.) */
#define LN_ROWS 256

__global__ static void k_layernorm_params_partial(float *part, const float *dout, const float *inp,
                                                  const float *mean, const float *rstd, int N,
                                                  int C) {
  int i = blockIdx.x * blockDim.x + threadIdx.x, chunk = blockIdx.y;
  if (i >= C) return;
  int lo = chunk * LN_ROWS, hi = min(N, lo + LN_ROWS);
  float dw = 0.0f, db = 0.0f;
  for (int row = lo; row < hi; row++) {
    float dy = dout[(size_t)row * C + i];
    dw += dy * (inp[(size_t)row * C + i] - mean[row]) * rstd[row];
    db += dy;
  }
  part[(size_t)chunk * 2 * C + i] = dw;
  part[(size_t)chunk * 2 * C + C + i] = db;
}

__global__ static void k_layernorm_params_sum(float *dweight, float *dbias, const float *part,
                                              int chunks, int C) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= C) return;
  float dw = 0.0f, db = 0.0f;
  for (int c = 0; c < chunks; c++) {
    dw += part[(size_t)c * 2 * C + i];
    db += part[(size_t)c * 2 * C + C + i];
  }
  dweight[i] += dw;
  dbias[i] += db;
}

/* Device scratch for the partials (grown on demand, kept for the process). */
static float *s_partials(size_t n) {
  static float *buf;
  static size_t cap;
  if (n > cap) {
    if (buf) WT_CUDA_CHECK(cudaFree(buf));
    WT_CUDA_CHECK(cudaMalloc(&buf, n * sizeof(float)));
    cap = n;
  }
  return buf;
}

void kernels_cuda_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                                    const float *weight, const float *bias, int N, int C) {
  k_layernorm_forward<<<N, LN_THREADS>>>(out, mean, rstd, inp, weight, bias, C);
  WT_CUDA_CHECK(cudaGetLastError());
}

void kernels_cuda_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                                     const float *inp, const float *weight, const float *mean,
                                     const float *rstd, int N, int C) {
  k_layernorm_backward_input<<<N, LN_THREADS>>>(dinp, dout, inp, weight, mean, rstd, C);
  int chunks = (N + LN_ROWS - 1) / LN_ROWS;
  float *part = s_partials((size_t)chunks * 2 * C);
  dim3 grid(wt_cuda_blocks(C, 128), chunks);
  k_layernorm_params_partial<<<grid, 128>>>(part, dout, inp, mean, rstd, N, C);
  k_layernorm_params_sum<<<wt_cuda_blocks(C, 128), 128>>>(dweight, dbias, part, chunks, C);
  WT_CUDA_CHECK(cudaGetLastError());
}
