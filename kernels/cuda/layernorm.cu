/* layernorm — one block per row for the row statistics and the input gradient; one thread per
 * column for the weight and bias gradients (a fixed row order, no atomics). */
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

__global__ static void k_layernorm_backward_params(float *dweight, float *dbias, const float *dout,
                                                   const float *inp, const float *mean,
                                                   const float *rstd, int N, int C) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= C) return;
  float dw = 0.0f, db = 0.0f;
  for (int row = 0; row < N; row++) {
    float dy = dout[(size_t)row * C + i];
    dw += dy * (inp[(size_t)row * C + i] - mean[row]) * rstd[row];
    db += dy;
  }
  dweight[i] += dw;
  dbias[i] += db;
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
  k_layernorm_backward_params<<<wt_cuda_blocks(C, 128), 128>>>(dweight, dbias, dout, inp, mean,
                                                               rstd, N, C);
  WT_CUDA_CHECK(cudaGetLastError());
}
