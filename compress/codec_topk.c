/* codec_topk — sparsification: keep k values and their indices (topk and randk share a layout).
 *
 * topk keeps the k largest |x|. The threshold is found by a radix select on the 31 magnitude
 * bits of each float (11 + 10 + 10 bits, one histogram pass each), so the cost is O(n) whatever
 * the data, and nothing is sorted. A last pass emits, in index order, every element above the
 * threshold and the lowest-index elements equal to it until k are taken: deterministic ties and
 * strictly increasing indices, which the decoder insists on. NaNs count as the largest
 * magnitudes (their bits are above infinity's).
 *
 * randk keeps k indices drawn from the seed (compress/randk_draw.h: Floyd's algorithm per
 * 2,048-element segment, the GPU codec's generator too), so peers that share a seed pick the
 * same coordinates.
 */
#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compress/codec_internal.h"
#include "compress/randk_draw.h"

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

static int s_use_avx512(void) {
  return compress_simd_enabled() && __builtin_cpu_supports("avx512f");
}

/* The candidates of the fast paths: elements (in index order) whose key is >= some bound. */
typedef struct {
  uint32_t *idx;
  float *val;
  size_t len, cap, max; // max: give up beyond this many (the full-pass method is then cheaper)
} s_list;

/* Makes room for `more` entries; 0 if that would pass list->max. */
static int s_list_reserve(s_list *l, size_t more) {
  if (l->len + more <= l->cap) return 1;
  if (l->len + more > l->max + 16) return 0;
  l->cap = WT_MAX(l->len + more, 2 * l->cap);
  l->idx = wt_xrealloc(l->idx, l->cap, sizeof *l->idx);
  l->val = wt_xrealloc(l->val, l->cap, sizeof *l->val);
  return 1;
}

/* Appends x[i] for every i in [0, n) with key >= lo; 16 at a time, a tail left to the caller.
 * Returns how far it got, or (size_t)-1 when the list would pass its max. */
__attribute__((target("avx512f"))) static size_t s_gather_avx512(const float *x, size_t n,
                                                                 uint32_t lo, s_list *l) {
  __m512i mag = _mm512_set1_epi32(0x7fffffff), thr = _mm512_set1_epi32((int)lo);
  __m512i idx = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512i step = _mm512_set1_epi32(16);
  size_t i = 0;
  for (; i + 16 <= n; i += 16, idx = _mm512_add_epi32(idx, step)) {
    __m512i v = _mm512_loadu_si512(x + i);
    __mmask16 k = _mm512_cmpge_epu32_mask(_mm512_and_si512(v, mag), thr);
    if (k) { // rare: a percent or so of the elements
      if (!s_list_reserve(l, 16)) return (size_t)-1;
      _mm512_mask_compressstoreu_epi32(l->idx + l->len, k, idx);
      _mm512_mask_compressstoreu_epi32(l->val + l->len, k, v);
      l->len += (size_t)__builtin_popcount(k);
    }
  }
  return i;
}

/* Gathers every element with key >= lo into l. Returns 0 if there are more than l->max. */
static int s_gather(const float *x, size_t n, uint32_t lo, s_list *l) {
  size_t i = s_use_avx512() ? s_gather_avx512(x, n, lo, l) : 0;
  if (i == (size_t)-1) return 0;
  for (; i < n; i++)
    if (s_key(x[i]) >= lo) {
      if (!s_list_reserve(l, 1)) return 0;
      l->idx[l->len] = (uint32_t)i, l->val[l->len++] = x[i];
    }
  return 1;
}

static void s_put(uint8_t *out, size_t k, size_t j, uint32_t index, float value) {
  memcpy(out + j * sizeof index, &index, sizeof index);
  memcpy(out + k * sizeof index + j * sizeof value, &value, sizeof value);
}

/* Emits, in order, the entries of v[0..m) above key t and the first `ties` equal to it;
 * idx == NULL means v's own positions. */
static void s_emit(const float *v, const uint32_t *idx, size_t m, uint32_t t, size_t ties,
                   uint8_t *out, size_t k) {
  for (size_t i = 0, j = 0; i < m && j < k; i++) {
    uint32_t key = s_key(v[i]);
    if (key > t || (key == t && ties > 0 && ties--))
      s_put(out, k, j++, idx ? idx[i] : (uint32_t)i, v[i]);
  }
}

/* Exact top-k of a candidate list that holds all of them (levels from `level` on). */
static void s_list_topk(s_list *l, int level, uint32_t prefix, size_t need, uint8_t *out,
                        size_t k) {
  for (; level < 3; level++) s_level(l->val, l->len, level, &prefix, &need);
  s_emit(l->val, l->idx, l->len, prefix, need, out, k);
}

/* Fastest path (large n): a histogram of an evenly spread sample of the top digits picks a
 * bound that a bit more than k elements should pass; one pass gathers those, and the exact
 * selection runs on them. Exact whenever at least k pass, which is checked: returns 0 (nothing
 * written) when fewer than k or more than n/16 pass. */
static int s_topk_sampled(const float *x, size_t n, size_t k, uint8_t *out) {
  enum { RUNS = 512, RUN = 64 }; // 32 Ki sampled elements in runs of a cache line pair
  if (n < 64 * RUNS * RUN) return 0;
  uint64_t hist[S_BINS] = {0};
  for (size_t r = 0; r < RUNS; r++)
    for (size_t i = r * (n / RUNS); i < r * (n / RUNS) + RUN; i++) hist[s_key(x[i]) >> 20]++;
  double expect = (double)k * RUNS * RUN / (double)n; // sampled elements in the top k
  double want = 1.25 * expect + 4 * sqrt(expect) + 8; // margin so that >= k pass, usually
  uint64_t above = 0;
  uint32_t d = S_BINS - 1;
  for (; d > 0 && (double)(above + hist[d]) < want; d--) above += hist[d];
  s_list l = {NULL, NULL, 0, 0, n / 16};
  int ok = s_gather(x, n, d << 20, &l) && l.len >= k;
  if (ok) s_list_topk(&l, 0, 0, k, out, k);
  free(l.idx);
  free(l.val);
  return ok;
}

static size_t s_topk_max_size(size_t n, const compress_params *p) {
  return compress_topk_count(n, p->k_frac) * (sizeof(uint32_t) + sizeof(float));
}

static int s_check_n(const char *codec, size_t n) {
  if (n > UINT32_MAX)
    return wt_fail(WT_EINVAL,
                   "%s: %zu elements do not fit 32-bit indices; compress the tensor "
                   "in chunks of at most %u",
                   codec, n, UINT32_MAX);
  return WT_OK;
}

/* The exact top-k of x in O(n): the sampled path, else a full first radix level followed by a
 * gather of the few candidates, else (most values alike) all three levels over x. */
static void s_topk(const float *x, size_t n, size_t k, uint8_t *out) {
  if (s_topk_sampled(x, n, k, out)) return;
  uint32_t prefix = 0;
  size_t need = k;
  uint64_t candidates = s_level(x, n, 0, &prefix, &need);
  s_list l = {NULL, NULL, 0, 0, n / 8};
  if ((k - need) + candidates <= l.max && s_gather(x, n, prefix, &l)) {
    s_list_topk(&l, 1, prefix, need, out, k);
  } else {
    for (int level = 1; level < 3; level++) s_level(x, n, level, &prefix, &need);
    s_emit(x, NULL, n, prefix, need, out, k);
  }
  free(l.idx);
  free(l.val);
}

static int s_topk_encode(const float *x, size_t n, const compress_params *p, uint8_t *out,
                         size_t cap, size_t *len) {
  size_t need = s_topk_max_size(n, p), k = compress_topk_count(n, p->k_frac);
  WT_CHECK(compress_check_cap("topk", need, cap));
  WT_CHECK(s_check_n("topk", n));
  if (k > 0) s_topk(x, n, k, out);
  *len = need;
  return WT_OK;
}

void compress_randk_indices(size_t n, size_t k, uint64_t seed, uint32_t *idx) {
  if (n == 0 || k == 0) return;
  ptrdiff_t segments = (ptrdiff_t)compress_randk_segments(n);
#pragma omp parallel for if (n >= COMPRESS_OMP_MIN) schedule(static)
  for (ptrdiff_t s = 0; s < segments; s++) compress_randk_segment(n, k, seed, (size_t)s, idx);
}

static int s_randk_encode(const float *x, size_t n, const compress_params *p, uint8_t *out,
                          size_t cap, size_t *len) {
  size_t need = s_topk_max_size(n, p), k = compress_topk_count(n, p->k_frac);
  WT_CHECK(compress_check_cap("randk", need, cap));
  WT_CHECK(s_check_n("randk", n));
  uint32_t *idx = wt_xmalloc((k ? k : 1) * sizeof *idx);
  compress_randk_indices(n, k, p->seed, idx);
  for (size_t j = 0; j < k; j++) s_put(out, k, j, idx[j], x[idx[j]]);
  free(idx);
  *len = need;
  return WT_OK;
}

/* Checks a payload completely before anything is written: k <= n, indices increasing, < n. */
static int s_check_payload(const uint8_t *in, size_t len, size_t n, size_t *k) {
  if (len % 8 != 0 || len / 8 > n)
    return wt_fail(WT_ECORRUPT,
                   "topk decode: payload of %zu bytes cannot hold index/value pairs "
                   "for a %zu-element tensor; the message is damaged",
                   len, n);
  *k = len / 8;
  uint64_t prev = 0;
  for (size_t j = 0; j < *k; j++) {
    uint32_t idx;
    memcpy(&idx, in + j * sizeof idx, sizeof idx);
    if (idx >= n || (j > 0 && idx <= prev))
      return wt_fail(WT_ECORRUPT,
                     "topk decode: index %u at position %zu is %s; the message is "
                     "damaged",
                     idx, j, idx >= n ? "out of range" : "out of order");
    prev = idx;
  }
  return WT_OK;
}

static int s_topk_decode_any(const uint8_t *in, size_t len, size_t n, float alpha, int add,
                             float *y) {
  size_t k = 0;
  WT_CHECK(s_check_payload(in, len, n, &k));
  if (!add && n) memset(y, 0, n * sizeof *y);
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
