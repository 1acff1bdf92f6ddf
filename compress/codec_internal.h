/* codec_internal — what the codec files share and users of codec.h do not need: the registered
 * ops tables, block arithmetic, size checks, the SIMD switch and the counter-based hash used for
 * stochastic rounding. Payloads are little-endian, and so is every CPU this builds for.
 */
#ifndef WT_COMPRESS_CODEC_INTERNAL_H
#define WT_COMPRESS_CODEC_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "compress/codec.h"
#include "common/common.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "compress payloads are little-endian and copied with memcpy: port the codecs first"
#endif

extern const compress_codec_ops compress_fp32_ops;
extern const compress_codec_ops compress_fp16_ops;
extern const compress_codec_ops compress_bf16_ops;
extern const compress_codec_ops compress_int8_ops;
extern const compress_codec_ops compress_int4_ops;
extern const compress_codec_ops compress_topk_ops;
extern const compress_codec_ops compress_randk_ops;
extern const compress_codec_ops compress_sign_ops;

/* Below this many elements OpenMP's fork/join costs more than it saves. */
#define COMPRESS_OMP_MIN 65536

/* Outputs of at least this many bytes are written with non-temporal stores (codec_stream.c):
 * they cannot stay in cache anyway, and skipping the read-for-ownership saves memory traffic. */
#ifndef COMPRESS_STREAM_MIN /* overridable to measure what streaming buys */
#define COMPRESS_STREAM_MIN ((size_t)64 << 20)
#endif
/* Elements a kernel decodes into its own buffer before streaming it out (16 KiB floats). */
#define COMPRESS_STREAM_PIECE 4096

/* Whether an output of out_bytes should be streamed (large, and the CPU has AVX-512). */
int compress_stream_wanted(size_t out_bytes);
/* Copies bytes from src (a kernel's cache-resident buffer) to dst with non-temporal stores. */
void compress_stream_store(void *dst, const void *src, size_t bytes);

/* The two 16-bit codecs (fp16, bf16) differ only in their element kernels: the chunking over
 * OpenMP, the streaming of large outputs and the size checks are shared (codec_half.c). */
typedef struct {
  const char *name;                                       /* for error messages */
  void (*encode)(const float *x, size_t m, uint8_t *out); /* m elements -> 2m bytes */
  void (*decode)(const uint8_t *in, size_t m, float alpha, int add, float *y);
  int simd; /* the kernels are the SIMD ones: large outputs may then be streamed */
} compress_half_kernels;

int compress_half_encode(const compress_half_kernels *k, const float *x, size_t n, uint8_t *out,
                         size_t cap, size_t *len);
int compress_half_decode(const compress_half_kernels *k, const uint8_t *in, size_t len, size_t n,
                         float alpha, int add, float *y);

/* Whether SIMD paths may run (compress_codec_set_simd); each path also checks the CPU. */
int compress_simd_enabled(void);

/* The effective block size for n elements (>= 1, <= n when n > 0) and the number of blocks. */
static inline size_t compress_block_of(size_t n, const compress_params *p) {
  size_t b = p->block ? p->block : COMPRESS_DEFAULT_BLOCK;
  return n > 0 && b > n ? n : b;
}
static inline size_t compress_nblocks(size_t n, size_t block) {
  return (n + block - 1) / block;
}

/* Refusals with the codec's name in the message. */
static inline int compress_check_cap(const char *codec, size_t need, size_t cap) {
  if (cap < need)
    return wt_fail(WT_EINVAL,
                   "%s encode: output buffer holds %zu bytes but %zu are needed; "
                   "size it with compress_codec_max_size",
                   codec, cap, need);
  return WT_OK;
}
static inline int compress_check_len(const char *codec, size_t len, size_t want, size_t n) {
  if (len != want)
    return wt_fail(WT_ECORRUPT,
                   "%s decode: payload is %zu bytes but %zu elements need %zu; the "
                   "message is truncated, padded or for another tensor",
                   codec, len, n, want);
  return WT_OK;
}

/* A stateless 64-bit mix (splitmix64's finaliser): hash(seed, i) gives every element its own
 * reproducible random number, whatever the thread that handles it. */
static inline uint64_t compress_hash64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

/* Absmax quantization of one block (codec_quant.c), shared by int8 and int4. `simd` comes from
 * compress_quant_simd() (AVX-512 usable and allowed); both paths give identical results.
 * compress_quant_block writes q[0..m) in [-qmax, qmax] and returns the block's scale (absmax /
 * qmax); `first` is x[0]'s index in the tensor, which seeds stochastic rounding.
 * compress_dequant_block writes y = q * scale, or y = fmaf(alpha, q * scale, y) when add. */
int compress_quant_simd(void);
float compress_quant_block(const float *x, size_t m, float qmax, const compress_params *p,
                           uint64_t first, int simd, int8_t *q);
void compress_dequant_block(const int8_t *q, size_t m, float scale, float alpha, int add, int simd,
                            float *y);

/* randk's k distinct indices of [0, n) from seed (compress/randk_draw.h, segment by segment),
 * written in increasing order into idx[0..k) (codec_topk.c; the GPU kernel draws the same). */
void compress_randk_indices(size_t n, size_t k, uint64_t seed, uint32_t *idx);

/* Uniform float in [0, 1) for element i under seed (24 random bits). */
static inline float compress_uniform(uint64_t seed, uint64_t i) {
  return (float)(compress_hash64(seed ^ (i * 0xd1b54a32d192ed03ull)) >> 40) * 0x1.0p-24f;
}

#endif
