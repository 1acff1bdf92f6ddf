/* randk_draw — randk's index generator, one definition for the CPU codec and the CUDA kernel.
 *
 * Everything here is `static inline` and marked __host__ __device__ under nvcc, so
 * compress/codec_topk.c and compress/cuda/codec_gpu.cu compile the same arithmetic and a GPU
 * encode puts the CPU's bytes on the wire.
 *
 * The draw: the n elements are cut into segments of COMPRESS_RANDK_SEGMENT (the last one
 * shorter). Segment s spans [start, end) and keeps floor(k·end/n) − floor(k·start/n) indices,
 * drawn uniformly without replacement by Floyd's algorithm over a 2,048-bit bitmap from its own
 * xoshiro256** stream (seeded through splitmix64 from seed ^ s·φ, common/rng.c's generator), and
 * writes them, in increasing order, from position floor(k·start/n) of the index list. Every
 * segment is independent of the others, so a GPU thread draws one segment with no host round
 * trip; the whole list is still exactly k distinct indices in increasing order, and every
 * element is kept with probability k/n to within 1/segment. A tensor of at most one segment is
 * one Floyd draw over [0, n), uniform over all k-subsets.
 *
 * Usage (what compress_randk_indices does):
 *   for (size_t s = 0; s < compress_randk_segments(n); s++)
 *     compress_randk_segment(n, k, seed, s, idx);
 */
#ifndef WT_COMPRESS_RANDK_DRAW_H
#define WT_COMPRESS_RANDK_DRAW_H

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define COMPRESS_RANDK_FN __host__ __device__ static inline
#else
#define COMPRESS_RANDK_FN static inline
#endif

#define COMPRESS_RANDK_SEGMENT 2048 /* elements per segment: its bitmap is 32 words */

/* xoshiro256** seeded by splitmix64: bit for bit common/rng.c's wt_rng (tests/compress checks). */
typedef struct {
  uint64_t s[4];
} compress_randk_rng;

COMPRESS_RANDK_FN uint64_t compress_randk_splitmix(uint64_t *x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

COMPRESS_RANDK_FN void compress_randk_rng_seed(compress_randk_rng *r, uint64_t seed) {
  uint64_t x = seed;
  for (int i = 0; i < 4; i++) r->s[i] = compress_randk_splitmix(&x);
}

COMPRESS_RANDK_FN uint64_t compress_randk_rotl(uint64_t x, int k) {
  return (x << k) | (x >> (64 - k));
}

COMPRESS_RANDK_FN uint64_t compress_randk_rng_u64(compress_randk_rng *r) {
  uint64_t *s = r->s;
  uint64_t result = compress_randk_rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = compress_randk_rotl(s[3], 45);
  return result;
}

/* Uniform in [0, m), m > 0: rejection of the top partial range, as wt_rng_below. */
COMPRESS_RANDK_FN uint64_t compress_randk_rng_below(compress_randk_rng *r, uint64_t m) {
  uint64_t limit = UINT64_MAX - UINT64_MAX % m, x;
  do x = compress_randk_rng_u64(r);
  while (x >= limit);
  return x % m;
}

COMPRESS_RANDK_FN int compress_randk_ctz(uint64_t v) { /* v != 0 */
#ifdef __CUDA_ARCH__
  return __ffsll((long long)v) - 1;
#else
  return __builtin_ctzll(v);
#endif
}

COMPRESS_RANDK_FN size_t compress_randk_segments(size_t n) {
  return (n + COMPRESS_RANDK_SEGMENT - 1) / COMPRESS_RANDK_SEGMENT;
}

/* Position in the index list where segment s starts: floor(k·start/n). n <= UINT32_MAX and
 * k <= n, so the product fits 64 bits. */
COMPRESS_RANDK_FN size_t compress_randk_offset(size_t n, size_t k, size_t s) {
  uint64_t start = (uint64_t)s * COMPRESS_RANDK_SEGMENT;
  if (start > n) start = n;
  return n ? (size_t)((uint64_t)k * start / n) : 0;
}

/* Draws segment s of the index list into idx[offset(s) .. offset(s + 1)); needs
 * 0 < n <= UINT32_MAX, k <= n and s < compress_randk_segments(n). */
COMPRESS_RANDK_FN void compress_randk_segment(size_t n, size_t k, uint64_t seed, size_t s,
                                              uint32_t *idx) {
  size_t start = s * COMPRESS_RANDK_SEGMENT, len = n - start;
  if (len > COMPRESS_RANDK_SEGMENT) len = COMPRESS_RANDK_SEGMENT;
  size_t at = compress_randk_offset(n, k, s), take = compress_randk_offset(n, k, s + 1) - at;
  uint64_t bitmap[COMPRESS_RANDK_SEGMENT / 64] = {0};
  compress_randk_rng rng;
  compress_randk_rng_seed(&rng, seed ^ ((uint64_t)s * 0x9E3779B97F4A7C15ull));
  for (size_t j = len - take; j < len; j++) { /* Floyd: `take` distinct picks, one draw each */
    size_t r = (size_t)compress_randk_rng_below(&rng, (uint64_t)j + 1);
    size_t pick = (bitmap[r / 64] >> (r % 64)) & 1 ? j : r;
    bitmap[pick / 64] |= 1ull << (pick % 64);
  }
  for (size_t w = 0; w < (len + 63) / 64; w++)
    for (uint64_t bits = bitmap[w]; bits; bits &= bits - 1)
      idx[at++] = (uint32_t)(start + w * 64 + (size_t)compress_randk_ctz(bits));
}

#endif
