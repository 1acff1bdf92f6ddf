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
#include "compress/randk_draw.h"

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

/* int4 (codec_int4.c): warp w finds block w's absmax, writing its scale into the payload and
 * the factor qmax/absmax into inv[w]; then one thread per payload byte quantizes elements 2i
 * and 2i+1 with their own blocks' factors (blocks need not be even) and packs them, element
 * 2i in the low nibble. */
__global__ static void k_int4_scales(const float *x, size_t n, size_t block, size_t nb,
                                     float *scales, float *inv) {
  size_t b = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32;
  unsigned lane = threadIdx.x % 32;
  if (b >= nb) return;
  size_t i0 = b * block, m = n - i0 < block ? n - i0 : block;
  float amax = 0.0f;
  for (size_t j = lane; j < m; j += 32) amax = d_max(fabsf(x[i0 + j]), amax);
  for (int off = 16; off > 0; off >>= 1)
    amax = d_max(__shfl_xor_sync(0xffffffffu, amax, off), amax);
  if (lane == 0) {
    scales[b] = __fdiv_rn(amax, 7.0f);
    inv[b] = amax > 0 ? __fdiv_rn(7.0f, amax) : 0.0f;
  }
}

__device__ static inline unsigned d_q4(const float *x, size_t e, size_t block, const float *inv) {
  float v = rintf(__fmul_rn(x[e], inv[e / block]));
  return (unsigned)(int)d_min(d_max(v, -7.0f), 7.0f) & 0xfu;
}

__global__ static void k_int4_pack(const float *x, size_t n, size_t block, const float *inv,
                                   uint8_t *packed) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (2 * i >= n) return;
  unsigned lo = d_q4(x, 2 * i, block, inv), hi = 2 * i + 1 < n ? d_q4(x, 2 * i + 1, block, inv) : 0;
  packed[i] = (uint8_t)(lo | hi << 4);
}

__global__ static void k_int4_decode(const uint8_t *in, size_t n, size_t block, size_t nb,
                                     float alpha, int add, float *y) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i >= n) return;
  unsigned v = (in[nb * sizeof(float) + i / 2] >> (4 * (i % 2))) & 0xfu;
  int8_t q = (int8_t)((int)(v ^ 8) - 8);
  float scale = ((const float *)in)[i / block];
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

/* A device buffer of at least `bytes`, grown on demand and kept for the process (the default
 * stream orders its users); NULL when cudaMalloc fails, its error left for s_status. */
static void *s_scratch(size_t bytes) {
  static void *buf;
  static size_t cap;
  if (bytes > cap) {
    cudaFree(buf);
    buf = NULL, cap = 0;
    if (cudaMalloc(&buf, bytes) != cudaSuccess) return NULL;
    cap = bytes;
  }
  return buf;
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
  case COMPRESS_CODEC_INT4: {
    float *inv = (float *)s_scratch(nb * sizeof(float));
    if (!inv) break; /* reported below */
    k_int4_scales<<<s_blocks(nb * 32, 256), 256>>>(x, n, block, nb, (float *)out, inv);
    k_int4_pack<<<s_blocks((n + 1) / 2, 256), 256>>>(x, n, block, inv, out + nb * sizeof(float));
    break;
  }
  case COMPRESS_CODEC_SIGN:
    k_sign_scales<<<s_blocks(nb * 32, 256), 256>>>(x, n, block, nb, (float *)out);
    k_sign_bits<<<s_blocks((n + 7) / 8, 256), 256>>>(x, n, out + nb * sizeof(float));
    break;
  default:
    snprintf(why, why_len, "codec id %d has no GPU kernels", id);
    return -1;
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
  case COMPRESS_CODEC_INT4:
    k_int4_decode<<<s_blocks(n, 256), 256>>>(in, n, block, nb, alpha, add, y);
    break;
  case COMPRESS_CODEC_SIGN:
    k_sign_decode<<<s_blocks(n, 256), 256>>>(in, n, block, nb, alpha, add, y);
    break;
  default:
    snprintf(why, why_len, "codec id %d has no GPU kernels", id);
    return -1;
  }
  return s_status(why, why_len);
}

extern "C" int compress_cuda_add(float *r, const float *g, size_t n, char *why, size_t why_len) {
  k_add<<<s_blocks(n, 256), 256>>>(r, g, n);
  return s_status(why, why_len);
}

/* ---- topk: radix select on the GPU, the CPU's exact selection ------------------------------
 *
 * The threshold t is the k-th largest key (|x| as the integer of its 31 low bits, NaN above
 * infinity) and `ties` how many elements equal to t are kept; any exact radix select finds the
 * same pair, so the three levels below (11 + 10 + 10 bits, as on the CPU) use integer histogram
 * counts whose atomics give exact, order-free totals. The output is then the CPU's s_emit: in
 * index order, every key above t and the first `ties` keys equal to t, placed by two exclusive
 * scans (ranks among the equal keys, then positions of the kept ones). */

__device__ static inline uint32_t d_key(float f) {
  return __float_as_uint(f) & 0x7fffffffu;
}

__global__ static void k_topk_hist(const float *x, size_t n, int match_shift, uint32_t match,
                                   int shift, uint32_t mask, unsigned *hist) {
  __shared__ unsigned sh[2048];
  for (uint32_t b = threadIdx.x; b <= mask; b += blockDim.x) sh[b] = 0;
  __syncthreads();
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    uint32_t key = d_key(x[i]);
    if ((uint32_t)((uint64_t)key >> match_shift) == match)
      atomicAdd(&sh[(key >> shift) & mask], 1u);
  }
  __syncthreads();
  for (uint32_t b = threadIdx.x; b <= mask; b += blockDim.x)
    if (sh[b]) atomicAdd(&hist[b], sh[b]);
}

__global__ static void k_topk_equal(const float *x, size_t n, uint32_t t, unsigned *flag) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) flag[i] = d_key(x[i]) == t;
}

/* flag[i] = kept; rank holds each element's rank among the keys equal to t. */
__global__ static void k_topk_keep(const float *x, size_t n, uint32_t t, unsigned ties,
                                   const unsigned *rank, unsigned *flag) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i >= n) return;
  uint32_t key = d_key(x[i]);
  flag[i] = key > t || (key == t && rank[i] < ties);
}

__global__ static void k_topk_emit(const float *x, size_t n, size_t k, const unsigned *flag,
                                   const unsigned *pos, uint8_t *out) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i >= n || !flag[i]) return;
  ((uint32_t *)out)[pos[i]] = (uint32_t)i;
  ((float *)(out + k * sizeof(uint32_t)))[pos[i]] = x[i];
}

#include <cub/cub.cuh>

/* Exclusive prefix sum of n unsigned (n <= INT_MAX, checked by the caller). */
static cudaError_t s_exclusive_sum(const unsigned *in, unsigned *out, size_t n) {
  size_t bytes = 0;
  cudaError_t err = cub::DeviceScan::ExclusiveSum(nullptr, bytes, in, out, (int)n);
  void *tmp = NULL;
  if (err == cudaSuccess) err = cudaMalloc(&tmp, bytes ? bytes : 1);
  if (err == cudaSuccess) err = cub::DeviceScan::ExclusiveSum(tmp, bytes, in, out, (int)n);
  if (tmp) cudaFree(tmp);
  return err;
}

extern "C" int compress_cuda_topk_encode(const float *x, size_t n, size_t k, uint8_t *out,
                                         char *why, size_t why_len) {
  static const int shifts[3] = {20, 10, 0}, widths[3] = {11, 10, 10};
  unsigned *hist = NULL, *flag = NULL, *scan = NULL, h[2048];
  cudaError_t err = cudaMalloc(&hist, sizeof h);
  if (err == cudaSuccess) err = cudaMalloc(&flag, n * sizeof(unsigned));
  if (err == cudaSuccess) err = cudaMalloc(&scan, n * sizeof(unsigned));
  uint32_t prefix = 0;
  size_t need = k;
  for (int level = 0; level < 3 && err == cudaSuccess; level++) {
    int shift = shifts[level], top = shift + widths[level];
    uint32_t mask = (1u << widths[level]) - 1, d = mask;
    cudaMemset(hist, 0, sizeof h);
    unsigned grid = s_blocks(n, 256) < 4096 ? s_blocks(n, 256) : 4096;
    k_topk_hist<<<grid, 256>>>(x, n, top, (uint32_t)((uint64_t)prefix >> top), shift, mask, hist);
    err = cudaMemcpy(h, hist, (mask + 1) * sizeof(unsigned), cudaMemcpyDeviceToHost);
    if (err != cudaSuccess) break;
    for (; h[d] < need; d--) need -= h[d]; /* the bins hold >= need keys in all */
    prefix |= d << shift;
  }
  if (err == cudaSuccess) {
    k_topk_equal<<<s_blocks(n, 256), 256>>>(x, n, prefix, flag);
    err = s_exclusive_sum(flag, scan, n);
  }
  if (err == cudaSuccess) {
    k_topk_keep<<<s_blocks(n, 256), 256>>>(x, n, prefix, (unsigned)need, scan, flag);
    err = s_exclusive_sum(flag, scan, n);
  }
  if (err == cudaSuccess) k_topk_emit<<<s_blocks(n, 256), 256>>>(x, n, k, flag, scan, out);
  if (err == cudaSuccess) err = cudaGetLastError();
  cudaFree(hist), cudaFree(flag), cudaFree(scan);
  if (err == cudaSuccess) return 0;
  snprintf(why, why_len, "%s", cudaGetErrorString(err));
  return -1;
}

/* The first position j whose index is out of range or not above the previous one. */
__global__ static void k_topk_check(const uint32_t *idx, size_t k, size_t n,
                                    unsigned long long *first_bad) {
  size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (j >= k) return;
  if (idx[j] >= n || (j > 0 && idx[j] <= idx[j - 1])) atomicMin(first_bad, (unsigned long long)j);
}

/* Indices are strictly increasing (checked), so every y element has at most one writer. */
__global__ static void k_topk_scatter(const uint8_t *in, size_t k, float alpha, int add, float *y) {
  size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (j >= k) return;
  uint32_t i = ((const uint32_t *)in)[j];
  float v = ((const float *)(in + k * sizeof(uint32_t)))[j];
  y[i] = add ? fmaf(alpha, v, y[i]) : v;
}

/* 0: decoded; 1: damaged payload, *bad = the first bad position (nothing written); -1: CUDA. */
extern "C" int compress_cuda_topk_decode(const uint8_t *in, size_t k, size_t n, float alpha,
                                         int add, float *y, size_t *bad, char *why,
                                         size_t why_len) {
  unsigned long long *d_bad = NULL, h_bad = ~0ull;
  cudaError_t err = cudaMalloc(&d_bad, sizeof h_bad);
  if (err == cudaSuccess) err = cudaMemcpy(d_bad, &h_bad, sizeof h_bad, cudaMemcpyHostToDevice);
  if (err == cudaSuccess && k) {
    k_topk_check<<<s_blocks(k, 256), 256>>>((const uint32_t *)in, k, n, d_bad);
    err = cudaMemcpy(&h_bad, d_bad, sizeof h_bad, cudaMemcpyDeviceToHost);
  }
  if (d_bad) cudaFree(d_bad);
  if (err == cudaSuccess && h_bad != ~0ull) {
    *bad = (size_t)h_bad;
    return 1;
  }
  if (err == cudaSuccess && !add) err = cudaMemset(y, 0, n * sizeof(float));
  if (err == cudaSuccess && k) {
    k_topk_scatter<<<s_blocks(k, 256), 256>>>(in, k, alpha, add, y);
    err = cudaGetLastError();
  }
  if (err == cudaSuccess) return 0;
  snprintf(why, why_len, "%s", cudaGetErrorString(err));
  return -1;
}

/* randk: thread s draws segment s of the index list (compress/randk_draw.h, the CPU codec's
 * generator), writes its indices into the payload's index part and gathers their values. */
__global__ static void k_randk(const float *x, size_t n, size_t k, uint64_t seed,
                               size_t segments, uint8_t *out) {
  size_t s = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (s >= segments) return;
  uint32_t *idx = (uint32_t *)out;
  float *val = (float *)(out + k * sizeof(uint32_t));
  compress_randk_segment(n, k, seed, s, idx);
  for (size_t j = compress_randk_offset(n, k, s); j < compress_randk_offset(n, k, s + 1); j++)
    val[j] = x[idx[j]];
}

extern "C" int compress_cuda_randk_encode(const float *x, size_t n, size_t k, uint64_t seed,
                                          uint8_t *out, char *why, size_t why_len) {
  size_t segments = compress_randk_segments(n);
  k_randk<<<s_blocks(segments, 128), 128>>>(x, n, k, seed, segments, out);
  return s_status(why, why_len);
}

/* ---- AC-SGD's per-row affine quantizer (compress/acsgd_quant.c) -----------------------------
 * A warp per row finds lo and hi (min and max: order-free) and flags a non-finite value; one
 * thread per code byte quantizes the 8/bits codes it holds (a code never straddles bytes):
 * t = (x - lo) / step, q = min(max(floor(t + 0.5), 0), levels). Decoding is lo + q·step (the
 * product rounded before the sum, as the CPU keeps it), added to out when add. */

__global__ static void k_acsgd_range(const float *x, int rows, int cols, unsigned levels,
                                     float *scales, unsigned long long *first_bad) {
  size_t r = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32;
  unsigned lane = threadIdx.x % 32;
  if (r >= (size_t)rows) return;
  const float *row = x + r * cols;
  float mn = row[0], mx = row[0];
  int bad = 0;
  for (int j = lane; j < cols; j += 32) {
    float v = row[j];
    bad |= !isfinite(v);
    mn = v < mn ? v : mn;
    mx = v > mx ? v : mx;
  }
  for (int off = 16; off > 0; off >>= 1) {
    float a = __shfl_xor_sync(0xffffffffu, mn, off), b = __shfl_xor_sync(0xffffffffu, mx, off);
    mn = a < mn ? a : mn;
    mx = b > mx ? b : mx;
    bad |= __shfl_xor_sync(0xffffffffu, bad, off);
  }
  if (lane) return;
  if (bad) atomicMin(first_bad, (unsigned long long)r);
  scales[2 * r] = mn;
  scales[2 * r + 1] = __fdiv_rn(__fsub_rn(mx, mn), (float)levels);
}

__global__ static void k_acsgd_codes(const float *x, size_t total, int cols, int bits,
                                     const float *scales, uint8_t *codes) {
  size_t b = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  size_t per = 8 / bits;
  if (b * per >= total) return;
  float levels = (float)((1u << bits) - 1u);
  unsigned byte = 0;
  for (size_t c = 0; c < per && b * per + c < total; c++) {
    size_t k = b * per + c, r = k / cols;
    float lo = scales[2 * r], step = scales[2 * r + 1];
    float t = step > 0 ? __fdiv_rn(__fsub_rn(x[k], lo), step) : 0.0f;
    unsigned q = (unsigned)fminf(fmaxf(floorf(__fadd_rn(t, 0.5f)), 0.0f), levels);
    byte |= q << (c * bits);
  }
  codes[b] = (uint8_t)byte;
}

__global__ static void k_acsgd_decode(const uint8_t *payload, size_t total, int rows, int cols,
                                      int bits, float *out, int add) {
  size_t k = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (k >= total) return;
  const float *scales = (const float *)payload;
  const uint8_t *codes = payload + (size_t)rows * 2 * sizeof(float);
  size_t r = k / cols, bit = k * (size_t)bits;
  unsigned q = (codes[bit >> 3] >> (bit & 7)) & ((1u << bits) - 1u);
  float v = __fadd_rn(scales[2 * r], __fmul_rn((float)q, scales[2 * r + 1]));
  out[k] = add ? __fadd_rn(out[k], v) : v;
}

/* 0: done; 1: row *bad holds a NaN or Inf (payload unspecified); -1: CUDA error. */
extern "C" int compress_cuda_acsgd_quantize(const float *x, int rows, int cols, int bits,
                                            uint8_t *payload, int *bad, char *why, size_t why_len) {
  unsigned long long *d_bad = NULL, h_bad = ~0ull;
  size_t total = (size_t)rows * cols, nbytes = (total * bits + 7) / 8;
  cudaError_t err = cudaMalloc(&d_bad, sizeof h_bad);
  if (err == cudaSuccess) err = cudaMemcpy(d_bad, &h_bad, sizeof h_bad, cudaMemcpyHostToDevice);
  if (err == cudaSuccess) {
    k_acsgd_range<<<s_blocks((size_t)rows * 32, 256), 256>>>(x, rows, cols, (1u << bits) - 1u,
                                                             (float *)payload, d_bad);
    err = cudaMemcpy(&h_bad, d_bad, sizeof h_bad, cudaMemcpyDeviceToHost);
  }
  if (d_bad) cudaFree(d_bad);
  if (err == cudaSuccess && h_bad != ~0ull) {
    *bad = (int)h_bad;
    return 1;
  }
  if (err == cudaSuccess) {
    k_acsgd_codes<<<s_blocks(nbytes, 256), 256>>>(x, total, cols, bits, (const float *)payload,
                                                  payload + (size_t)rows * 2 * sizeof(float));
    err = cudaGetLastError();
  }
  if (err == cudaSuccess) return 0;
  snprintf(why, why_len, "%s", cudaGetErrorString(err));
  return -1;
}

extern "C" int compress_cuda_acsgd_dequantize(const uint8_t *payload, int rows, int cols, int bits,
                                              float *out, int add, char *why, size_t why_len) {
  size_t total = (size_t)rows * cols;
  k_acsgd_decode<<<s_blocks(total, 256), 256>>>(payload, total, rows, cols, bits, out, add);
  return s_status(why, why_len);
}

extern "C" int compress_cuda_copy_to_host(void *dst, const void *src, size_t bytes, char *why,
                                          size_t why_len) {
  cudaError_t err = cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost);
  if (err == cudaSuccess) return 0;
  snprintf(why, why_len, "%s", cudaGetErrorString(err));
  return -1;
}
