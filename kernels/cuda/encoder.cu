/* encoder — token + position embedding on the GPU.
 *
 * The backward is deterministic without atomics and adds in the CPU back end's order (rows in
 * (b, t) order), so its sums are bitwise the CPU's: dwpe has one thread per (t, c) adding the
 * B rows of position t; for dwte the positions are sorted by token with a stable radix sort
 * (CUB), which keeps each token's positions in (b, t) order, and one block per distinct token
 * adds its rows channel by channel. */
#include <cub/cub.cuh>

#include "kernels/cuda/cuda_internal.cuh"

__global__ static void k_encoder_forward(float *out, const int *tokens, const float *wte,
                                         const float *wpe, int B, int T, int C) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i >= (size_t)B * T * C) return;
  int c = (int)(i % C);
  size_t bt = i / C;
  int t = (int)(bt % T);
  out[i] = wte[(size_t)tokens[bt] * C + c] + wpe[(size_t)t * C + c];
}

__global__ static void k_iota(int *x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = i;
}

/* dwpe[t][c] += dout[b][t][c] for b = 0..B-1 in order. */
__global__ static void k_wpe_backward(float *dwpe, const float *dout, int B, int T, int C) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i >= (size_t)T * C) return;
  float acc = dwpe[i];
  for (int b = 0; b < B; b++) acc += dout[(size_t)b * T * C + i];
  dwpe[i] = acc;
}

/* Block (r, y): distinct token r (of *runs), channels y·blockDim.x + threadIdx.x (+ strides);
 * adds the rows pos[start[r] ..] in their sorted, (b, t) order. */
__global__ static void k_wte_backward(float *dwte, const float *dout, const int *pos,
                                      const int *token, const int *count, const int *start,
                                      const int *runs, int C) {
  int r = blockIdx.x;
  if (r >= *runs) return;
  size_t row = (size_t)token[r] * C;
  int s = start[r], e = s + count[r];
  for (int c = blockIdx.y * blockDim.x + threadIdx.x; c < C; c += gridDim.y * blockDim.x) {
    float acc = dwte[row + c];
    for (int j = s; j < e; j++) acc += dout[(size_t)pos[j] * C + c];
    dwte[row + c] = acc;
  }
}

void kernels_cuda_encoder_forward(float *out, const int *tokens, const float *wte, const float *wpe,
                                  int B, int T, int C) {
  size_t n = (size_t)B * T * C;
  k_encoder_forward<<<wt_cuda_blocks(n, 256), 256>>>(out, tokens, wte, wpe, B, T, C);
  WT_CUDA_CHECK(cudaGetLastError());
}

void kernels_cuda_encoder_backward(float *dwte, float *dwpe, const float *dout, const int *tokens,
                                   int B, int T, int C) {
  int n = B * T;
  k_wpe_backward<<<wt_cuda_blocks((size_t)T * C, 256), 256>>>(dwpe, dout, B, T, C);
  WT_CUDA_CHECK(cudaGetLastError());
  /* scratch: iota, sorted tokens, sorted positions, run tokens, run counts, run starts, the
   * number of runs, then CUB's temporary storage */
  size_t sort_bytes = 0, rle_bytes = 0, scan_bytes = 0;
  int *nil = NULL;
  WT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(NULL, sort_bytes, nil, nil, nil, nil, n));
  WT_CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(NULL, rle_bytes, nil, nil, nil, nil, n));
  WT_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(NULL, scan_bytes, nil, nil, n));
  size_t tmp_bytes = sort_bytes > rle_bytes ? sort_bytes : rle_bytes;
  if (scan_bytes > tmp_bytes) tmp_bytes = scan_bytes;
  size_t ints = 6 * (size_t)n + 32; /* 32: the run count, padded to keep tmp aligned */
  int *iota = (int *)wt_cuda_scratch(WT_SCRATCH_ENCODER, ints * sizeof(int) + tmp_bytes);
  int *keys = iota + n, *pos = keys + n, *token = pos + n, *count = token + n, *start = count + n;
  int *runs = start + n;
  void *tmp = runs + 32;
  k_iota<<<wt_cuda_blocks(n, 256), 256>>>(iota, n);
  WT_CUDA_CHECK(cudaMemsetAsync(count, 0, (size_t)n * sizeof(int))); /* the scan reads all n */
  WT_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(tmp, sort_bytes, tokens, keys, iota, pos, n));
  WT_CUDA_CHECK(cub::DeviceRunLengthEncode::Encode(tmp, rle_bytes, keys, token, count, runs, n));
  WT_CUDA_CHECK(cub::DeviceScan::ExclusiveSum(tmp, scan_bytes, count, start, n));
  dim3 grid((unsigned)n, wt_cuda_blocks(C, 256));
  k_wte_backward<<<grid, 256>>>(dwte, dout, pos, token, count, start, runs, C);
  WT_CUDA_CHECK(cudaGetLastError());
}
