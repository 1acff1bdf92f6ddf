/* elementwise — GELU (tanh approximation, GPT-2's gelu_new) and the residual add. */
#include "kernels/cuda/cuda_internal.cuh"

#define GELU_K 0.7978845608028654f /* sqrt(2/pi) */

__global__ static void k_gelu_forward(float *out, const float *inp, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = inp[i];
  out[i] = 0.5f * x * (1.0f + tanhf(GELU_K * (x + 0.044715f * x * x * x)));
}

__global__ static void k_gelu_backward(float *dinp, const float *inp, const float *dout, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i >= n) return;
  float x = inp[i];
  float th = tanhf(GELU_K * (x + 0.044715f * x * x * x));
  float du = GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
  dinp[i] += (0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du) * dout[i];
}

__global__ static void k_residual_forward(float *out, const float *a, const float *b, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}

__global__ static void k_residual_backward(float *da, float *db, const float *dout, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i >= n) return;
  da[i] += dout[i];
  db[i] += dout[i];
}

void kernels_cuda_gelu_forward(float *out, const float *inp, size_t n) {
  k_gelu_forward<<<wt_cuda_blocks(n, 256), 256>>>(out, inp, n);
  WT_CUDA_CHECK(cudaGetLastError());
}

void kernels_cuda_gelu_backward(float *dinp, const float *inp, const float *dout, size_t n) {
  k_gelu_backward<<<wt_cuda_blocks(n, 256), 256>>>(dinp, inp, dout, n);
  WT_CUDA_CHECK(cudaGetLastError());
}

void kernels_cuda_residual_forward(float *out, const float *a, const float *b, size_t n) {
  k_residual_forward<<<wt_cuda_blocks(n, 256), 256>>>(out, a, b, n);
  WT_CUDA_CHECK(cudaGetLastError());
}

void kernels_cuda_residual_backward(float *da, float *db, const float *dout, size_t n) {
  k_residual_backward<<<wt_cuda_blocks(n, 256), 256>>>(da, db, dout, n);
  WT_CUDA_CHECK(cudaGetLastError());
}
