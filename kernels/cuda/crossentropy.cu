/* crossentropy — softmax + cross-entropy fused with the logits, one block per row.
 *
 * Plain kernels: the forward reads a row twice (its max, then the sum of exponentials) and the
 * backward reads it again to write dlogits. The fused kernels (wt_cuda_fused) find the max and
 * the sum in one read (an online softmax: each thread keeps a running max and rescales its sum
 * when the max grows), and crossentropy_forward_backward writes dlogits in the same launch, so
 * the (N, V) logits are read once from memory and, while the block's row is still in L2, once
 * more to write the gradient. Rows of a fused block are wide (1024 threads), which keeps the
 * rows in flight few enough for L2. Every sum has one fixed order (deterministic). */
#include "kernels/cuda/cuda_internal.cuh"

#define CE_THREADS 256
#define CE_FUSED_THREADS 1024

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

/* One read of the row: losses and lse as k_crossentropy_forward; with dlogits non-NULL also
 * dlogits = (softmax - onehot) * dloss, as k_crossentropy_backward. */
__global__ static void __launch_bounds__(CE_FUSED_THREADS)
    k_crossentropy_fused(float *losses, float *lse, float *dlogits, const float *logits,
                         const int *targets, float dloss, int V) {
  __shared__ float shared[CE_FUSED_THREADS / 32];
  size_t row = blockIdx.x;
  const float *z = logits + row * V;
  float m = -INFINITY, s = 0.0f; /* this thread's running max and sum of exp(z - m) */
  for (int v = threadIdx.x; v < V; v += blockDim.x) {
    float x = z[v];
    if (x > m) {
      s = s * expf(m - x) + 1.0f; /* m = -inf on the first element: s is 0, stays finite */
      m = x;
    } else {
      s += expf(x - m);
    }
  }
  float row_max = wt_block_max(m, shared);
  float mine = m == -INFINITY ? 0.0f : s * expf(m - row_max); /* a thread with no elements */
  float l = row_max + logf(wt_block_sum(mine, shared));
  int target = targets[row];
  if (threadIdx.x == 0) {
    lse[row] = l;
    losses[row] = l - z[target];
  }
  if (!dlogits) return;
  float *d = dlogits + row * V;
  for (int v = threadIdx.x; v < V; v += blockDim.x)
    d[v] = (expf(z[v] - l) - (v == target ? 1.0f : 0.0f)) * dloss;
}

void kernels_cuda_crossentropy_forward(float *losses, float *lse, const float *logits,
                                       const int *targets, int N, int V) {
  if (wt_cuda_fused())
    k_crossentropy_fused<<<N, CE_FUSED_THREADS>>>(losses, lse, NULL, logits, targets, 0.0f, V);
  else
    k_crossentropy_forward<<<N, CE_THREADS>>>(losses, lse, logits, targets, V);
  WT_CUDA_CHECK(cudaGetLastError());
}

void kernels_cuda_crossentropy_backward(float *dlogits, const float *logits, const float *lse,
                                        const int *targets, float dloss, int N, int V) {
  k_crossentropy_backward<<<N, CE_THREADS>>>(dlogits, logits, lse, targets, dloss, V);
  WT_CUDA_CHECK(cudaGetLastError());
}

void kernels_cuda_crossentropy_forward_backward(float *losses, float *lse, float *dlogits,
                                                const float *logits, const int *targets,
                                                float dloss, int N, int V) {
  if (!wt_cuda_fused()) {
    kernels_cuda_crossentropy_forward(losses, lse, logits, targets, N, V);
    kernels_cuda_crossentropy_backward(dlogits, logits, lse, targets, dloss, N, V);
    return;
  }
  k_crossentropy_fused<<<N, CE_FUSED_THREADS>>>(losses, lse, dlogits, logits, targets, dloss, V);
  WT_CUDA_CHECK(cudaGetLastError());
}
