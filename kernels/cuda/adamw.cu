/* adamw — the AdamW update of kernels.h, one thread per element, PyTorch's order of operations.
 *
 * adamw_update_tensors runs every tensor in one launch (with the fused kernels): blocks are
 * numbered across the tensors, each finds its tensor by a binary search over the tensors' first
 * blocks. The tensor list lives in device scratch and is uploaded only when it changes (the
 * optimizer passes the same list every step). */
#include <string.h>

#include "kernels/cuda/cuda_internal.cuh"

#define ADAMW_THREADS 256

__device__ inline void s_adamw_one(float *param, const float *grad, float *m, float *v, size_t i,
                                   float lr, float b1, float b2, float eps, float wd, float bc1,
                                   float bc2, float grad_scale) {
  float g = grad[i] * grad_scale;
  float p = param[i] * (1.0f - lr * wd);
  float mi = b1 * m[i] + (1.0f - b1) * g;
  float vi = b2 * v[i] + (1.0f - b2) * g * g;
  m[i] = mi;
  v[i] = vi;
  param[i] = p - (lr / bc1) * mi / (sqrtf(vi) / sqrtf(bc2) + eps);
}

__global__ static void k_adamw(float *param, const float *grad, float *m, float *v, size_t n,
                               float lr, float b1, float b2, float eps, float wd, float bc1,
                               float bc2, float grad_scale) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) s_adamw_one(param, grad, m, v, i, lr, b1, b2, eps, wd, bc1, bc2, grad_scale);
}

void kernels_cuda_adamw_update(float *param, const float *grad, float *m, float *v, size_t n,
                               float lr, float b1, float b2, float eps, float wd, float bc1,
                               float bc2, float grad_scale) {
  if (n == 0) return;
  k_adamw<<<wt_cuda_blocks(n, ADAMW_THREADS), ADAMW_THREADS>>>(param, grad, m, v, n, lr, b1, b2,
                                                               eps, wd, bc1, bc2, grad_scale);
  WT_CUDA_CHECK(cudaGetLastError());
}

/* A tensor of the launch: its range, decay, and the first block (of the whole grid) it owns. */
typedef struct {
  size_t offset, numel;
  float wd;
  unsigned first_block;
} wt_adamw_span;

__global__ static void k_adamw_tensors(float *param, const float *grad, float *m, float *v,
                                       const wt_adamw_span *spans, int n_spans, float lr, float b1,
                                       float b2, float eps, float bc1, float bc2,
                                       float grad_scale) {
  int lo = 0, hi = n_spans - 1; /* the last span whose first block is <= this block */
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (spans[mid].first_block <= blockIdx.x)
      lo = mid;
    else
      hi = mid - 1;
  }
  const wt_adamw_span sp = spans[lo];
  size_t j = (size_t)(blockIdx.x - sp.first_block) * blockDim.x + threadIdx.x;
  if (j < sp.numel)
    s_adamw_one(param, grad, m, v, sp.offset + j, lr, b1, b2, eps, sp.wd, bc1, bc2, grad_scale);
}

/* The device copy of the span list for `tensors` (uploaded when it differs from the last one);
 * *blocks receives the grid size. Returns NULL when there is nothing to update. */
static const wt_adamw_span *s_spans(const kernels_adamw_tensor *tensors, int n, unsigned *blocks) {
  static wt_adamw_span *last; /* host copy of what the device holds */
  static int n_last;
  wt_adamw_span *spans = (wt_adamw_span *)calloc((size_t)n, sizeof *spans);
  if (!spans) {
    fprintf(stderr, "kernels/cuda: out of host memory for %d AdamW tensors\n", n);
    abort();
  }
  size_t total = 0;
  int k = 0;
  for (int i = 0; i < n; i++) {
    if (tensors[i].numel == 0) continue; /* owns no block: would break the search */
    spans[k] = (wt_adamw_span){tensors[i].offset, tensors[i].numel, tensors[i].wd, (unsigned)total};
    total += wt_cuda_blocks(tensors[i].numel, ADAMW_THREADS);
    k++;
  }
  if (total > 0x7fffffffu) { /* gridDim.x's limit: 2^31 - 1 blocks of 256 elements */
    fprintf(stderr, "kernels/cuda: %zu AdamW blocks exceed one launch\n", total);
    abort();
  }
  *blocks = (unsigned)total;
  void *dev = wt_cuda_scratch(WT_SCRATCH_ADAMW, (size_t)(k ? k : 1) * sizeof *spans);
  if (k != n_last || memcmp(spans, last, (size_t)k * sizeof *spans) != 0) {
    WT_CUDA_CHECK(cudaMemcpy(dev, spans, (size_t)k * sizeof *spans, cudaMemcpyHostToDevice));
    free(last);
    last = spans, n_last = k;
  } else {
    free(spans);
  }
  return k ? (const wt_adamw_span *)dev : NULL;
}

void kernels_cuda_adamw_update_tensors(float *param, const float *grad, float *m, float *v,
                                       const kernels_adamw_tensor *tensors, int n_tensors, float lr,
                                       float b1, float b2, float eps, float bc1, float bc2,
                                       float grad_scale) {
  if (!wt_cuda_fused()) {
    for (int i = 0; i < n_tensors; i++) {
      size_t off = tensors[i].offset;
      kernels_cuda_adamw_update(param + off, grad + off, m + off, v + off, tensors[i].numel, lr, b1,
                                b2, eps, tensors[i].wd, bc1, bc2, grad_scale);
    }
    return;
  }
  unsigned blocks = 0;
  const wt_adamw_span *spans = s_spans(tensors, n_tensors, &blocks);
  if (!spans) return;
  int n_spans = 0;
  for (int i = 0; i < n_tensors; i++) n_spans += tensors[i].numel > 0;
  k_adamw_tensors<<<blocks, ADAMW_THREADS>>>(param, grad, m, v, spans, n_spans, lr, b1, b2, eps,
                                             bc1, bc2, grad_scale);
  WT_CUDA_CHECK(cudaGetLastError());
}
