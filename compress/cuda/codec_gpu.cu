/* codec_gpu — CUDA kernels of the GPU codecs (compress/codec_gpu.h): the CPU codecs' arithmetic
 * element for element, so the bytes are the same.
 *
 * What keeps them bitwise equal: the 16-bit conversions are the CPU's integer algorithms on
 * the bits; products and quotients use the _rn intrinsics, which nvcc never contracts into an
 * FMA; decode_add is fmaf(alpha, v, y), one rounding as on the CPU; absmax is a max (any order
 * gives the same value; NaNs are skipped as the CPU's a > b ? a : b skips them); sign's block
 * mean sums 16 interleaved lanes in order and then the lanes 0..15, exactly the CPU's grouping.
 * One warp handles one scale block (int8, sign); every output byte has one writer. */
#include <cuda_runtime.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "compress/codec.h"

/* ---- 16-bit conversions (compress/codec_fp16.c, codec_bf16.c) ---------------------------- */

__device__ static inline uint16_t d_f2h(float f) {
  uint32_t x = __float_as_uint(f);
  uint16_t sign = (uint16_t)((x >> 16) & 0x8000);
  uint32_t ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return sign | 0x7e00 | (uint16_t)((ax >> 13) & 0x3ff); /* NaN, quieted */
  if (ax >= 0x477ff000u) return sign | 0x7c00; /* >= 65520 rounds to infinity */
  if (ax < 0x38800000u) { /* half subnormal or zero: the FPU rounds at the bottom bits */
    float a = __fadd_rn(__uint_as_float(ax), 0.5f);
    return sign | (uint16_t)(__float_as_uint(a) - 0x3f000000u);
  }
  uint32_t odd = (ax >> 13) & 1;
  ax += 0xc8000fffu + odd; /* rebias the exponent and round to nearest even */
  return sign | (uint16_t)(ax >> 13);
}

__device__ static inline float d_h2f(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, x;
  if (exp == 0) {
    x = __float_as_uint(__fmul_rn((float)mant, 0x1.0p-24f)) | sign; /* exact */
  } else if (exp == 31) {
    x = sign | 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0);
  } else {
    x = sign | ((exp + 112) << 23) | (mant << 13);
  }
  return __uint_as_float(x);
}

__device__ static inline uint16_t d_f2bf(float f) {
  uint32_t x = __float_as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x0040); /* quiet the NaN */
  return (uint16_t)((x + 0x7fffu + ((x >> 16) & 1)) >> 16);
}

__device__ static inline float d_bf2f(uint16_t h) {
  return __uint_as_float((uint32_t)h << 16);
}

/* a > b ? a : b: a NaN `a` yields b (codec_quant.c's s_max). */
__device__ static inline float d_max(float a, float b) {
  return a > b ? a : b;
}
__device__ static inline float d_min(float a, float b) {
  return a < b ? a : b;
}

__device__ static inline float d_out(float v, float alpha, int add, const float *y, size_t i) {
  return add ? fmaf(alpha, v, y[i]) : v;
}

/* ---- element codecs ------------------------------------------------------------------------ */

__global__ static void k_half_encode(const float *x, size_t n, uint16_t *out, int bf) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) out[i] = bf ? d_f2bf(x[i]) : d_f2h(x[i]);
}

__global__ static void k_half_decode(const uint16_t *in, size_t n, float alpha, int add, float *y,
                                     int bf) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = d_out(bf ? d_bf2f(in[i]) : d_h2f(in[i]), alpha, add, y, i);
}

__global__ static void k_fp32_decode_add(const float *in, size_t n, float alpha, float *y) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = fmaf(alpha, in[i], y[i]);
}

/* int8: warp w quantizes scale block w. Payload: nb float scales, then n int8. */
__global__ static void k_int8_encode(const float *x, size_t n, size_t block, size_t nb,
                                     uint8_t *out) {
  size_t b = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32;
  unsigned lane = threadIdx.x % 32;
  if (b >= nb) return; /* b is the same for the whole warp */
  size_t i0 = b * block, m = n - i0 < block ? n - i0 : block;
  float amax = 0.0f;
  for (size_t j = lane; j < m; j += 32) amax = d_max(fabsf(x[i0 + j]), amax);
  for (int off = 16; off > 0; off >>= 1)
    amax = d_max(__shfl_xor_sync(0xffffffffu, amax, off), amax); /* NaN-free: order-free */
  const float qmax = 127.0f;
  float inv = amax > 0 ? __fdiv_rn(qmax, amax) : 0.0f;
  int8_t *q = (int8_t *)(out + nb * sizeof(float));
  for (size_t j = lane; j < m; j += 32) {
    float v = rintf(__fmul_rn(x[i0 + j], inv));
    q[i0 + j] = (int8_t)d_min(d_max(v, -qmax), qmax); /* the clamp maps NaN to -qmax */
  }
  if (lane == 0) ((float *)out)[b] = __fdiv_rn(amax, qmax);
}

__global__ static void k_int8_decode(const uint8_t *in, size_t n, size_t block, size_t nb,
                                     float alpha, int add, float *y) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i >= n) return;
  float scale = ((const float *)in)[i / block];
  int8_t q = ((const int8_t *)(in + nb * sizeof(float)))[i];
  y[i] = d_out(__fmul_rn((float)q, scale), alpha, add, y, i);
}

/* sign: warp w writes scale w = (Σ_{j<16} lane_j) / m with lane_j = Σ |x[i0 + j + 16k]| in k
 * order (codec_sign.c's grouping); the bits come from k_sign_bits. */
__global__ static void k_sign_scales(const float *x, size_t n, size_t block, size_t nb,
                                     float *scales) {
  size_t b = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32;
  unsigned lane = threadIdx.x % 32;
  if (b >= nb) return;
  size_t i0 = b * block, m = n - i0 < block ? n - i0 : block;
  float acc = 0.0f;
  if (lane < 16)
    for (size_t j = lane; j < m; j += 16) acc = __fadd_rn(acc, fabsf(x[i0 + j]));
  float total = 0.0f;
  for (int j = 0; j < 16; j++) {
    float v = __shfl_sync(0xffffffffu, acc, j);
    total = __fadd_rn(total, v);
  }
  if (lane == 0) scales[b] = __fdiv_rn(total, (float)m);
}

/* One thread per payload byte: bit e%8 of byte e/8 is signbit(x[e]). */
__global__ static void k_sign_bits(const float *x, size_t n, uint8_t *bits) {
  size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (k >= (n + 7) / 8) return;
  unsigned v = 0;
  for (size_t e = 8 * k; e < 8 * k + 8 && e < n; e++)
    if (signbit(x[e])) v |= 1u << (e % 8);
  bits[k] = (uint8_t)v;
}

__global__ static void k_sign_decode(const uint8_t *in, size_t n, size_t block, size_t nb,
                                     float alpha, int add, float *y) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i >= n) return;
  float scale = ((const float *)in)[i / block];
  const uint8_t *bits = in + nb * sizeof(float);
  float v = (bits[i / 8] >> (i % 8)) & 1 ? -scale : scale;
  y[i] = d_out(v, alpha, add, y, i);
}

/* r += g, the residual update of error feedback (ef.c: a plain float add). */
__global__ static void k_add(float *r, const float *g, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) r[i] = __fadd_rn(r[i], g[i]);
}

/* ---- entry points (compress/codec_gpu.c) --------------------------------------------------- */

static unsigned s_blocks(size_t n, unsigned threads) {
  return (unsigned)((n + threads - 1) / threads);
}

static int s_status(char *why, size_t why_len) {
  cudaError_t err = cudaGetLastError();
  if (err == cudaSuccess) return 0;
  snprintf(why, why_len, "%s", cudaGetErrorString(err));
  return -1;
}

extern "C" int compress_cuda_encode(int id, const float *x, size_t n, size_t block, uint8_t *out,
                                    char *why, size_t why_len) {
  size_t nb = (n + block - 1) / block;
  switch (id) {
  case COMPRESS_CODEC_FP32:
    cudaMemcpyAsync(out, x, n * sizeof(float), cudaMemcpyDeviceToDevice);
    break;
  case COMPRESS_CODEC_FP16:
  case COMPRESS_CODEC_BF16:
    k_half_encode<<<s_blocks(n, 256), 256>>>(x, n, (uint16_t *)out, id == COMPRESS_CODEC_BF16);
    break;
  case COMPRESS_CODEC_INT8:
    k_int8_encode<<<s_blocks(nb * 32, 256), 256>>>(x, n, block, nb, out);
    break;
  case COMPRESS_CODEC_SIGN:
    k_sign_scales<<<s_blocks(nb * 32, 256), 256>>>(x, n, block, nb, (float *)out);
    k_sign_bits<<<s_blocks((n + 7) / 8, 256), 256>>>(x, n, out + nb * sizeof(float));
    break;
  default: snprintf(why, why_len, "codec id %d has no GPU kernels", id); return -1;
  }
  return s_status(why, why_len);
}

extern "C" int compress_cuda_decode(int id, const uint8_t *in, size_t n, size_t block, float alpha,
                                    int add, float *y, char *why, size_t why_len) {
  size_t nb = (n + block - 1) / block;
  switch (id) {
  case COMPRESS_CODEC_FP32:
    if (add)
      k_fp32_decode_add<<<s_blocks(n, 256), 256>>>((const float *)in, n, alpha, y);
    else
      cudaMemcpyAsync(y, in, n * sizeof(float), cudaMemcpyDeviceToDevice);
    break;
  case COMPRESS_CODEC_FP16:
  case COMPRESS_CODEC_BF16:
    k_half_decode<<<s_blocks(n, 256), 256>>>((const uint16_t *)in, n, alpha, add, y,
                                             id == COMPRESS_CODEC_BF16);
    break;
  case COMPRESS_CODEC_INT8:
    k_int8_decode<<<s_blocks(n, 256), 256>>>(in, n, block, nb, alpha, add, y);
    break;
  case COMPRESS_CODEC_SIGN:
    k_sign_decode<<<s_blocks(n, 256), 256>>>(in, n, block, nb, alpha, add, y);
    break;
  default: snprintf(why, why_len, "codec id %d has no GPU kernels", id); return -1;
  }
  return s_status(why, why_len);
}

extern "C" int compress_cuda_add(float *r, const float *g, size_t n, char *why, size_t why_len) {
  k_add<<<s_blocks(n, 256), 256>>>(r, g, n);
  return s_status(why, why_len);
}
