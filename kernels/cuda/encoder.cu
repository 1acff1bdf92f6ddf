/* encoder — token + position embedding on the GPU. The backward gives each channel one thread
 * that walks the (b, t) rows in order, so repeated tokens accumulate in the same order as the
 * CPU back end and the result is deterministic without atomics. */
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

__global__ static void k_encoder_backward(float *dwte, float *dwpe, const float *dout,
                                          const int *tokens, int B, int T, int C) {
  int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  for (int b = 0; b < B; b++)
    for (int t = 0; t < T; t++) {
      float d = dout[((size_t)b * T + t) * C + c];
      dwte[(size_t)tokens[(size_t)b * T + t] * C + c] += d;
      dwpe[(size_t)t * C + c] += d;
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
  k_encoder_backward<<<wt_cuda_blocks(C, 128), 128>>>(dwte, dwpe, dout, tokens, B, T, C);
  WT_CUDA_CHECK(cudaGetLastError());
}
