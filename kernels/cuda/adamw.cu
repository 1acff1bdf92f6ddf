/* adamw — the AdamW update of kernels.h, one thread per element, PyTorch's order of operations. */
#include "kernels/cuda/cuda_internal.cuh"

__global__ static void k_adamw(float *param, const float *grad, float *m, float *v, size_t n,
                               float lr, float b1, float b2, float eps, float wd, float bc1,
                               float bc2, float grad_scale) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i >= n) return;
  float g = grad[i] * grad_scale;
  float p = param[i] * (1.0f - lr * wd);
  float mi = b1 * m[i] + (1.0f - b1) * g;
  float vi = b2 * v[i] + (1.0f - b2) * g * g;
  m[i] = mi;
  v[i] = vi;
  param[i] = p - (lr / bc1) * mi / (sqrtf(vi) / sqrtf(bc2) + eps);
}

void kernels_cuda_adamw_update(float *param, const float *grad, float *m, float *v, size_t n,
                               float lr, float b1, float b2, float eps, float wd, float bc1,
                               float bc2, float grad_scale) {
  k_adamw<<<wt_cuda_blocks(n, 256), 256>>>(param, grad, m, v, n, lr, b1, b2, eps, wd, bc1, bc2,
                                           grad_scale);
  WT_CUDA_CHECK(cudaGetLastError());
}
