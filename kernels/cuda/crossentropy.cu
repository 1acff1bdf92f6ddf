/* crossentropy — softmax + cross-entropy fused with the logits, one block per row. */
#include "kernels/cuda/cuda_internal.cuh"

#define CE_THREADS 256

__global__ static void k_crossentropy_forward(float *losses, float *lse, const float *logits,
                                              const int *targets, int V) {
  __shared__ float shared[CE_THREADS / 32];
  const float *z = logits + (size_t)blockIdx.x * V;
  float m = -INFINITY;
  for (int v = threadIdx.x; v < V; v += blockDim.x) m = fmaxf(m, z[v]);
  m = wt_block_max(m, shared);
  float s = 0.0f;
  for (int v = threadIdx.x; v < V; v += blockDim.x) s += expf(z[v] - m);
  float l = m + logf(wt_block_sum(s, shared));
  if (threadIdx.x == 0) {
    lse[blockIdx.x] = l;
    losses[blockIdx.x] = l - z[targets[blockIdx.x]];
  }
}

__global__ static void k_crossentropy_backward(float *dlogits, const float *logits,
                                               const float *lse, const int *targets, float dloss,
                                               int V) {
  size_t row = blockIdx.x;
  for (int v = threadIdx.x; v < V; v += blockDim.x) {
    float p = expf(logits[row * V + v] - lse[row]);
    dlogits[row * V + v] = (p - (v == targets[row] ? 1.0f : 0.0f)) * dloss;
  }
}

void kernels_cuda_crossentropy_forward(float *losses, float *lse, const float *logits,
                                       const int *targets, int N, int V) {
  k_crossentropy_forward<<<N, CE_THREADS>>>(losses, lse, logits, targets, V);
  WT_CUDA_CHECK(cudaGetLastError());
}

void kernels_cuda_crossentropy_backward(float *dlogits, const float *logits, const float *lse,
                                        const int *targets, float dloss, int N, int V) {
  k_crossentropy_backward<<<N, CE_THREADS>>>(dlogits, logits, lse, targets, dloss, V);
  WT_CUDA_CHECK(cudaGetLastError());
}
