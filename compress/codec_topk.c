/* codec_topk — sparsification: keep k values and their indices (topk and randk share a layout).
 *
 * topk keeps the k largest |x|. The threshold is found by a radix select on the 31 magnitude
 * bits of each float (11 + 10 + 10 bits, one histogram pass each), so the cost is O(n) whatever
 * the data, and nothing is sorted. A last pass emits, in index order, every element above the
 * threshold and the lowest-index elements equal to it until k are taken: deterministic ties and
 * strictly increasing indices, which the decoder insists on. NaNs count as the largest
 * magnitudes (their bits are above infinity's).
 *
 * randk keeps k indices drawn uniformly without replacement (Floyd's algorithm over a bitmap)
 * from the seed, so peers that share a seed pick the same coordinates.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "codec_internal.h"
#include "rng.h"

#define S_BINS 2048 /* histogram size of the widest radix level */

static inline uint32_t s_key(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  return u & 0x7fffffffu; // |f| as an integer: orders like the magnitude
}

/* hist[(key >> shift) & mask] counts the keys of v[0..m) with key >> match_shift == match. */
static void s_histogram(const float *v, size_t m, int match_shift, uint32_t match, int shift,
                        uint32_t mask, uint64_t *hist) {
  memset(hist, 0, (mask + 1) * sizeof *hist);
#pragma omp parallel if (m >= COMPRESS_OMP_MIN)
  {
    // Four interleaved counters per bin: runs of equal digits (common, values cluster) would
    // otherwise chain every increment on the previous store. uint32 suffices: m <= UINT32_MAX.
    uint32_t local[4][S_BINS];
    memset(local, 0, sizeof local);
#pragma omp for schedule(static) nowait
    for (size_t i = 0; i < m; i++) {
      uint32_t key = s_key(v[i]);
      if ((uint32_t)((uint64_t)key >> match_shift) == match) local[i & 3][(key >> shift) & mask]++;
    }
#pragma omp critical
    for (uint32_t b = 0; b <= mask; b++)
      hist[b] += (uint64_t)local[0][b] + local[1][b] + local[2][b] + local[3][b];
  }
}

/* One radix level (11 + 10 + 10 bits, from the top): among keys sharing *prefix above this
 * level, picks the digit holding the *need-th largest, adds it to *prefix and subtracts what the
 * higher digits hold from *need. Returns how many keys carry the chosen digit. */
static uint64_t s_level(const float *v, size_t m, int level, uint32_t *prefix, size_t *need) {
  static const int shifts[3] = {20, 10, 0}, widths[3] = {11, 10, 10};
  uint64_t hist[S_BINS];
  int shift = shifts[level], top = shift + widths[level];
  uint32_t mask = (1u << widths[level]) - 1, d = mask;
  s_histogram(v, m, top, (uint32_t)((uint64_t)*prefix >> top), shift, mask, hist);
  for (; hist[d] < *need; d--) *need -= hist[d]; // the sum of all bins is >= *need
  *prefix |= d << shift;
  return hist[d];
}

/* Emits, in order, the entries of v[0..m) above key t and the first `ties` equal to it;
 * idx == NULL means v's own positions. */
static size_t s_emit(const float *v, const uint32_t *idx, size_t m, uint32_t t, size_t ties,
                     uint8_t *out, size_t k, size_t j);

/* Fast path for the usual case: after the first level, the elements that can still be chosen
 * (those whose top digit is >= the chosen one) are few, so one pass gathers them in index
 * order and the remaining levels and the emit run on that short list. Returns 0 (nothing
 * written) when too many elements qualify, e.g. when most values are equal. */
static int s_topk_gathered(const float *x, size_t n, size_t k, uint32_t prefix, size_t need,
                           uint64_t candidates, uint8_t *out) {
  size_t g = (k - need) + (size_t)candidates, j = 0;
  if (g > n / 8) return 0;
  uint32_t *gidx = wt_xmalloc((g + 1) * sizeof *gidx);
  float *gval = wt_xmalloc((g + 1) * sizeof *gval);
  for (size_t i = 0; i < n; i++)
    if (s_key(x[i]) >= prefix) gidx[j] = (uint32_t)i, gval[j++] = x[i];
  for (int level = 1; level < 3; level++) s_level(gval, g, level, &prefix, &need);
  s_emit(gval, gidx, g, prefix, need, out, k, 0);
  free(gidx);
  free(gval);
  return 1;
}
static size_t s_topk_max_size(size_t n, const compress_params *p) {
  return compress_topk_count(n, p->k_frac) * (sizeof(uint32_t) + sizeof(float));
}

static int s_check_n(const char *codec, size_t n) {
  if (n > UINT32_MAX)
    return wt_fail(WT_EINVAL, "%s: %zu elements do not fit 32-bit indices; compress the tensor "
                              "in chunks of at most %u", codec, n, UINT32_MAX);
  return WT_OK;
}

static void s_put(uint8_t *out, size_t k, size_t j, uint32_t index, float value) {
  memcpy(out + j * sizeof index, &index, sizeof index);
  memcpy(out + k * sizeof index + j * sizeof value, &value, sizeof value);
}

static size_t s_emit(const float *v, const uint32_t *idx, size_t m, uint32_t t, size_t ties,
                     uint8_t *out, size_t k, size_t j) {
  for (size_t i = 0; i < m && j < k; i++) {
    uint32_t key = s_key(v[i]);
    if (key > t || (key == t && ties > 0 && ties--))
      s_put(out, k, j++, idx ? idx[i] : (uint32_t)i, v[i]);
  }
  return j;
}

static int s_topk_encode(const float *x, size_t n, const compress_params *p, uint8_t *out,
                         size_t cap, size_t *len) {
  size_t need = s_topk_max_size(n, p), k = compress_topk_count(n, p->k_frac);
  WT_CHECK(compress_check_cap("topk", need, cap));
  WT_CHECK(s_check_n("topk", n));
  if (k > 0) {
    uint32_t prefix = 0;
    size_t need = k;
    uint64_t candidates = s_level(x, n, 0, &prefix, &need);
    if (!s_topk_gathered(x, n, k, prefix, need, candidates, out)) {
      for (int level = 1; level < 3; level++) s_level(x, n, level, &prefix, &need);
      s_emit(x, NULL, n, prefix, need, out, k, 0);
    }
  }
  *len = need;
  return WT_OK;
}

static int s_randk_encode(const float *x, size_t n, const compress_params *p, uint8_t *out,
                          size_t cap, size_t *len) {
  size_t need = s_topk_max_size(n, p), k = compress_topk_count(n, p->k_frac);
  WT_CHECK(compress_check_cap("randk", need, cap));
  WT_CHECK(s_check_n("randk", n));
  uint64_t *bitmap = wt_xcalloc((n + 63) / 64 + 1, sizeof *bitmap);
  wt_rng rng;
  wt_rng_seed(&rng, p->seed);
  for (size_t j = n - k; j < n; j++) { // Floyd: k distinct picks with k draws
    size_t r = (size_t)wt_rng_below(&rng, (uint64_t)j + 1);
    size_t pick = (bitmap[r / 64] >> (r % 64)) & 1 ? j : r;
    bitmap[pick / 64] |= 1ull << (pick % 64);
  }
  size_t j = 0;
  for (size_t w = 0; w < (n + 63) / 64; w++)
    for (uint64_t bits = bitmap[w]; bits; bits &= bits - 1) {
      size_t i = w * 64 + (size_t)__builtin_ctzll(bits);
      s_put(out, k, j++, (uint32_t)i, x[i]);
    }
  free(bitmap);
  *len = need;
  return WT_OK;
}

/* Checks a payload completely before anything is written: k <= n, indices increasing, < n. */
static int s_check_payload(const uint8_t *in, size_t len, size_t n, size_t *k) {
  if (len % 8 != 0 || len / 8 > n)
    return wt_fail(WT_ECORRUPT, "topk decode: payload of %zu bytes cannot hold index/value pairs "
                                "for a %zu-element tensor; the message is damaged", len, n);
  *k = len / 8;
  uint64_t prev = 0;
  for (size_t j = 0; j < *k; j++) {
    uint32_t idx;
    memcpy(&idx, in + j * sizeof idx, sizeof idx);
    if (idx >= n || (j > 0 && idx <= prev))
      return wt_fail(WT_ECORRUPT, "topk decode: index %u at position %zu is %s; the message is "
                                  "damaged", idx, j, idx >= n ? "out of range" : "out of order");
    prev = idx;
  }
  return WT_OK;
}

static int s_topk_decode_any(const uint8_t *in, size_t len, size_t n, float alpha, int add,
                             float *y) {
  size_t k = 0;
  WT_CHECK(s_check_payload(in, len, n, &k));
  if (!add) memset(y, 0, n * sizeof *y);
  for (size_t j = 0; j < k; j++) {
    uint32_t idx;
    float v;
    memcpy(&idx, in + j * sizeof idx, sizeof idx);
    memcpy(&v, in + k * sizeof idx + j * sizeof v, sizeof v);
    y[idx] = add ? fmaf(alpha, v, y[idx]) : v;
  }
  return WT_OK;
}

static int s_topk_decode(const uint8_t *in, size_t len, size_t n, const compress_params *p,
                         float *y) {
  (void)p;
  return s_topk_decode_any(in, len, n, 1.0f, 0, y);
}

static int s_topk_decode_add(const uint8_t *in, size_t len, size_t n, const compress_params *p,
                             float alpha, float *y) {
  (void)p;
  return s_topk_decode_any(in, len, n, alpha, 1, y);
}

const compress_codec_ops compress_topk_ops = {
    .name = "topk",
    .id = COMPRESS_CODEC_TOPK,
    .max_size = s_topk_max_size,
    .encode = s_topk_encode,
    .decode = s_topk_decode,
    .decode_add = s_topk_decode_add,
};

const compress_codec_ops compress_randk_ops = {
    .name = "randk",
    .id = COMPRESS_CODEC_RANDK,
    .max_size = s_topk_max_size,
    .encode = s_randk_encode,
    .decode = s_topk_decode,
    .decode_add = s_topk_decode_add,
};
