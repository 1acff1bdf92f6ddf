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

/* int4 (codec_int4.c), element 2i in the low nibble of byte i, counted over the whole tensor.
 *
 * One pass: warp w quantizes scale blocks 2w and 2w + 1. Two blocks start on an even element
 * (2w·block) and end on one or at n, so every byte the warp writes holds two of its own elements,
 * at any block size; a pair that straddles the two blocks takes each element's own factor. The
 * warp reads its span once for the absmaxes and again, from cache, to pack it. Blocks larger
 * than S_INT4_ONE_PASS_MAX take two kernels instead (scales, then a pack with one thread per
 * byte), since a single warp per pair of huge blocks would serialize the whole tensor. */
#define S_INT4_ONE_PASS_MAX 8192

__device__ static inline unsigned d_q4(float v, float inv) {
  return (unsigned)(int)d_min(d_max(rintf(__fmul_rn(v, inv)), -7.0f), 7.0f) & 0xfu;
}

/* absmax of x[from, to) over the warp; every lane gets it (NaN-free, so the order is free). */
__device__ static inline float d_warp_absmax(const float *x, size_t from, size_t to,
                                             unsigned lane) {
  float amax = 0.0f;
  for (size_t j = from + lane; j < to; j += 32) amax = d_max(fabsf(x[j]), amax);
  for (int off = 16; off > 0; off >>= 1)
    amax = d_max(__shfl_xor_sync(0xffffffffu, amax, off), amax);
  return amax;
}

__global__ static void k_int4_encode(const float *x, size_t n, size_t block, size_t nb,
                                     uint8_t *out) {
  size_t b0 = 2 * ((blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32);
  unsigned lane = threadIdx.x % 32;
  if (b0 >= nb) return; /* b0 is the same for the whole warp */
  size_t i0 = b0 * block, split = n - i0 < block ? n : i0 + block;
  size_t end = n - split < block ? n : split + block;
  float a0 = d_warp_absmax(x, i0, split, lane), a1 = d_warp_absmax(x, split, end, lane);
  float inv0 = a0 > 0 ? __fdiv_rn(7.0f, a0) : 0.0f, inv1 = a1 > 0 ? __fdiv_rn(7.0f, a1) : 0.0f;
  uint8_t *packed = out + nb * sizeof(float);
  for (size_t e = i0 + 2 * lane; e < end; e += 64) {
    unsigned lo = d_q4(x[e], e < split ? inv0 : inv1);
    unsigned hi = e + 1 < end ? d_q4(x[e + 1], e + 1 < split ? inv0 : inv1) : 0;
    packed[e / 2] = (uint8_t)(lo | hi << 4);
  }
  if (lane == 0) {
    ((float *)out)[b0] = __fdiv_rn(a0, 7.0f);
    if (b0 + 1 < nb) ((float *)out)[b0 + 1] = __fdiv_rn(a1, 7.0f);
  }
}

/* The two-kernel form for large blocks: warp w writes block w's scale and factor inv[w]. */
__global__ static void k_int4_scales(const float *x, size_t n, size_t block, size_t nb,
                                     float *scales, float *inv) {
  size_t b = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32;
  unsigned lane = threadIdx.x % 32;
  if (b >= nb) return;
  size_t i0 = b * block, m = n - i0 < block ? n - i0 : block;
  float amax = d_warp_absmax(x, i0, i0 + m, lane);
  if (lane == 0) {
    scales[b] = __fdiv_rn(amax, 7.0f);
    inv[b] = amax > 0 ? __fdiv_rn(7.0f, amax) : 0.0f;
  }
}

__global__ static void k_int4_pack(const float *x, size_t n, size_t block, const float *inv,
                                   uint8_t *packed) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (2 * i >= n) return;
  unsigned lo = d_q4(x[2 * i], inv[2 * i / block]);
  unsigned hi = 2 * i + 1 < n ? d_q4(x[2 * i + 1], inv[(2 * i + 1) / block]) : 0;
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
    if (block <= S_INT4_ONE_PASS_MAX) {
      k_int4_encode<<<s_blocks((nb + 1) / 2 * 32, 256), 256>>>(x, n, block, nb, out);
      break;
    }
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
 * counts whose atomics give exact, order-free totals. The level's bin is chosen on the device
 * (k_topk_select) and the selection's state stays there, so the encode is a chain of kernels on
 * the default stream with no copy to the host. The output is then the CPU's s_emit: in index
 * order, every key above t and the first `ties` keys equal to t, placed by two exclusive scans
 * (ranks among the equal keys, then positions of the kept ones). */

/* The selection between levels: the key bits chosen so far, and how many keys under them are
 * still to be taken (after the last level: t and ties). */
typedef struct {
  uint32_t prefix;
  unsigned need;
} s_topk_sel;

__device__ static inline uint32_t d_key(float f) {
  return __float_as_uint(f) & 0x7fffffffu;
}

__global__ static void k_topk_init(s_topk_sel *sel, unsigned k) {
  sel->prefix = 0, sel->need = k;
}

/* hist[(key >> shift) & mask] counts the keys whose bits above `top` are the prefix's. */
__global__ static void k_topk_hist(const float *x, size_t n, const s_topk_sel *sel, int top,
                                   int shift, uint32_t mask, unsigned *hist) {
  __shared__ unsigned sh[2048];
  uint32_t match = (uint32_t)((uint64_t)sel->prefix >> top);
  for (uint32_t b = threadIdx.x; b <= mask; b += blockDim.x) sh[b] = 0;
  __syncthreads();
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    uint32_t key = d_key(x[i]);
    if ((uint32_t)((uint64_t)key >> top) == match) atomicAdd(&sh[(key >> shift) & mask], 1u);
  }
  __syncthreads();
  for (uint32_t b = threadIdx.x; b <= mask; b += blockDim.x)
    if (sh[b]) atomicAdd(&hist[b], sh[b]);
}

#include <cub/cub.cuh>

#define S_SELECT_THREADS 1024 /* two bins each: the widest level's 2,048 */

/* One block: suffix sums of the histogram (a block scan over the bins from the top down) find
 * the bin d where the count of larger keys first reaches `need`; exactly one thread sees it
 * cross and moves the selection into that bin. */
__global__ static void k_topk_select(const unsigned *hist, uint32_t mask, int shift,
                                     s_topk_sel *sel) {
  typedef cub::BlockScan<unsigned, S_SELECT_THREADS> scan_t;
  __shared__ typename scan_t::TempStorage tmp;
  unsigned need = sel->need, item[2], upto[2];
  for (int i = 0; i < 2; i++) {
    uint32_t r = 2 * threadIdx.x + i; /* bin mask - r: the r-th from the top */
    item[i] = r <= mask ? hist[mask - r] : 0;
  }
  scan_t(tmp).InclusiveSum(item, upto);
  __syncthreads(); /* every thread has read sel before one writes it */
  for (int i = 0; i < 2; i++) {
    unsigned above = upto[i] - item[i]; /* keys in the bins above this one */
    if (above < need && upto[i] >= need) {
      sel->prefix |= (mask - (2 * threadIdx.x + i)) << shift;
      sel->need = need - above;
    }
  }
}

__global__ static void k_topk_equal(const float *x, size_t n, const s_topk_sel *sel,
                                    unsigned *flag) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) flag[i] = d_key(x[i]) == sel->prefix;
}

/* flag[i] = kept; rank holds each element's rank among the keys equal to t. */
__global__ static void k_topk_keep(const float *x, size_t n, const s_topk_sel *sel,
                                   const unsigned *rank, unsigned *flag) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i >= n) return;
  uint32_t key = d_key(x[i]), t = sel->prefix;
  flag[i] = key > t || (key == t && rank[i] < sel->need);
}

__global__ static void k_topk_emit(const float *x, size_t n, size_t k, const unsigned *flag,
                                   const unsigned *pos, uint8_t *out) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i >= n || !flag[i]) return;
  ((uint32_t *)out)[pos[i]] = (uint32_t)i;
  ((float *)(out + k * sizeof(uint32_t)))[pos[i]] = x[i];
}

static size_t s_align(size_t bytes) {
  return (bytes + 255) & ~(size_t)255;
}

/* n <= INT_MAX and 0 < k <= n (checked by the caller). The scratch (histogram, selection,
 * flags, scan, cub's temporary storage) is one s_scratch buffer, so nothing here allocates
 * once it has grown. */
extern "C" int compress_cuda_topk_encode(const float *x, size_t n, size_t k, uint8_t *out,
                                         char *why, size_t why_len) {
  static const int shifts[3] = {20, 10, 0}, widths[3] = {11, 10, 10};
  size_t scan_bytes = 0;
  cudaError_t err = cub::DeviceScan::ExclusiveSum(nullptr, scan_bytes, (const unsigned *)NULL,
                                                  (unsigned *)NULL, (int)n);
  size_t hist_at = 0, sel_at = hist_at + s_align(2048 * sizeof(unsigned));
  size_t flag_at = sel_at + s_align(sizeof(s_topk_sel)), scan_at = flag_at + s_align(n * 4);
  size_t tmp_at = scan_at + s_align(n * 4), total = tmp_at + s_align(scan_bytes ? scan_bytes : 1);
  uint8_t *base = err == cudaSuccess ? (uint8_t *)s_scratch(total) : NULL;
  if (!base) {
    snprintf(why, why_len, "no device memory for topk's %zu bytes of scratch: %s", total,
             cudaGetErrorString(err == cudaSuccess ? cudaGetLastError() : err));
    return -1;
  }
  unsigned *hist = (unsigned *)(base + hist_at), *flag = (unsigned *)(base + flag_at);
  unsigned *scan = (unsigned *)(base + scan_at);
  s_topk_sel *sel = (s_topk_sel *)(base + sel_at);
  void *tmp = base + tmp_at;
  k_topk_init<<<1, 1>>>(sel, (unsigned)k);
  unsigned grid = s_blocks(n, 256) < 4096 ? s_blocks(n, 256) : 4096;
  for (int level = 0; level < 3; level++) {
    uint32_t mask = (1u << widths[level]) - 1;
    cudaMemsetAsync(hist, 0, (mask + 1) * sizeof(unsigned));
    k_topk_hist<<<grid, 256>>>(x, n, sel, shifts[level] + widths[level], shifts[level], mask, hist);
    k_topk_select<<<1, S_SELECT_THREADS>>>(hist, mask, shifts[level], sel);
  }
  k_topk_equal<<<s_blocks(n, 256), 256>>>(x, n, sel, flag);
  err = cub::DeviceScan::ExclusiveSum(tmp, scan_bytes, flag, scan, (int)n);
  if (err == cudaSuccess) {
    k_topk_keep<<<s_blocks(n, 256), 256>>>(x, n, sel, scan, flag);
    err = cub::DeviceScan::ExclusiveSum(tmp, scan_bytes, flag, scan, (int)n);
  }
  if (err == cudaSuccess) k_topk_emit<<<s_blocks(n, 256), 256>>>(x, n, k, flag, scan, out);
  if (err != cudaSuccess) {
    snprintf(why, why_len, "%s", cudaGetErrorString(err));
    return -1;
  }
  return s_status(why, why_len);
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
__global__ static void k_randk(const float *x, size_t n, size_t k, uint64_t seed, size_t segments,
                               uint8_t *out) {
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

extern "C" int compress_cuda_is_device_memory(const void *p) {
  cudaPointerAttributes a;
  if (cudaPointerGetAttributes(&a, p) != cudaSuccess) {
    (void)cudaGetLastError(); /* not CUDA's memory, or no device: not an error to keep */
    return 0;
  }
  return a.type == cudaMemoryTypeDevice || a.type == cudaMemoryTypeManaged;
}

extern "C" int compress_cuda_copy_to_host(void *dst, const void *src, size_t bytes, char *why,
                                          size_t why_len) {
  cudaError_t err = cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost);
  if (err == cudaSuccess) return 0;
  snprintf(why, why_len, "%s", cudaGetErrorString(err));
  return -1;
}
