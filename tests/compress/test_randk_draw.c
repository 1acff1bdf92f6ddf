/* test_randk_draw — randk's shared generator (compress/randk_draw.h, which the CUDA kernel
 * compiles too) against common/rng.c and against the CPU codec's bytes.
 *
 * What a GPU peer relies on: the header's xoshiro256** is wt_rng bit for bit; the CPU codec's
 * payload is exactly the list the header's segments draw (so a kernel running those segments
 * sends the same bytes; tests/gpu/test_gpu_codecs compares the two on a device); a tensor of one
 * segment is the plain Floyd draw over [0, n) written here from wt_rng; every list has k
 * distinct increasing indices, each segment its share floor(k·end/n) − floor(k·start/n), and
 * over many seeds every element is picked about k/n of the time.
 */
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "common/rng.h"
#include "common/testing.h"
#include "compress/codec.h"
#include "compress/randk_draw.h"

static compress_codec *s_randk(double k_frac, uint64_t seed) {
  compress_params p = compress_params_default();
  p.k_frac = k_frac;
  p.seed = seed;
  compress_codec *c = compress_codec_new("randk", &p);
  WT_TEST_REQUIRE(c != NULL, "randk: %s", wt_last_error());
  return c;
}

/* The codec's payload for x[0..n): k indices, then k values. */
static uint8_t *s_encode(const compress_codec *c, const float *x, size_t n, size_t *len) {
  size_t cap = compress_codec_max_size(c, n);
  uint8_t *out = wt_xmalloc(cap);
  WT_TEST_REQUIRE(compress_codec_encode(c, x, n, out, cap, len) == WT_OK, "randk encode: %s",
                  wt_last_error());
  return out;
}

static float *s_ramp(size_t n) {
  float *x = wt_xmalloc(n * sizeof *x);
  for (size_t i = 0; i < n; i++) x[i] = (float)i * 0.5f - 7.0f;
  return x;
}

static void test_generator_is_wt_rng(void) {
  static const uint64_t seeds[] = {0, 1, 7, 0x9E3779B97F4A7C15ull, ~0ull};
  for (size_t s = 0; s < WT_ARRAY_LEN(seeds); s++) {
    wt_rng ref;
    compress_randk_rng ours;
    wt_rng_seed(&ref, seeds[s]);
    compress_randk_rng_seed(&ours, seeds[s]);
    int same = 1;
    for (int i = 0; i < 1000; i++) same &= wt_rng_u64(&ref) == compress_randk_rng_u64(&ours);
    for (uint64_t m = 1; m < 5000; m += 7) /* small and odd bounds, where rejection matters */
      same &= wt_rng_below(&ref, m) == compress_randk_rng_below(&ours, m);
    same &=
        wt_rng_below(&ref, (1ull << 63) + 1) == compress_randk_rng_below(&ours, (1ull << 63) + 1);
    WT_TEST_ASSERT(same, "seed %llu: the header's generator is wt_rng",
                   (unsigned long long)seeds[s]);
  }
}

/* Floyd's algorithm over [0, n) from one wt_rng stream, indices in increasing order. */
static void s_floyd(size_t n, size_t k, uint64_t seed, uint32_t *idx) {
  unsigned char *taken = wt_xcalloc(n, 1);
  wt_rng rng;
  wt_rng_seed(&rng, seed);
  for (size_t j = n - k; j < n; j++) {
    size_t r = (size_t)wt_rng_below(&rng, (uint64_t)j + 1);
    taken[taken[r] ? j : r] = 1;
  }
  for (size_t i = 0, j = 0; i < n; i++)
    if (taken[i]) idx[j++] = (uint32_t)i;
  free(taken);
}

static void test_one_segment_is_floyd(void) {
  static const size_t ns[] = {1, 5, 1000, COMPRESS_RANDK_SEGMENT};
  for (size_t t = 0; t < WT_ARRAY_LEN(ns); t++) {
    size_t n = ns[t], len = 0;
    compress_codec *c = s_randk(0.05, 42 + t);
    size_t k = compress_topk_count(n, 0.05);
    float *x = s_ramp(n);
    uint8_t *out = s_encode(c, x, n, &len);
    uint32_t *want = wt_xmalloc(k * sizeof *want);
    s_floyd(n, k, 42 + t, want);
    WT_TEST_ASSERT(len == 8 * k && memcmp(out, want, k * sizeof *want) == 0,
                   "n %zu: one segment is Floyd's draw over [0, n)", n);
    free(want), free(out), free(x);
    compress_codec_destroy(&c);
  }
}

/* The codec's payload against the header's segments, and the list's shape. */
static void s_check_list(size_t n, double k_frac, uint64_t seed) {
  compress_codec *c = s_randk(k_frac, seed);
  size_t k = compress_topk_count(n, k_frac), len = 0;
  float *x = s_ramp(n);
  uint8_t *out = s_encode(c, x, n, &len);
  const uint32_t *idx = (const uint32_t *)out;
  uint32_t *want = wt_xmalloc(k * sizeof *want);
  for (size_t s = 0; s < compress_randk_segments(n); s++)
    compress_randk_segment(n, k, seed, s, want);
  WT_TEST_ASSERT(len == 8 * k && memcmp(idx, want, k * sizeof *want) == 0,
                 "n %zu k %zu: the codec's indices are the header's segments", n, k);
  size_t bad = k;
  for (size_t j = 0; j < k && bad == k; j++) {
    float v;
    memcpy(&v, out + (k + j) * sizeof *idx, sizeof v); /* value j follows the k indices */
    if (idx[j] >= n || (j && idx[j] <= idx[j - 1]) || v != x[idx[j]]) bad = j;
  }
  WT_TEST_ASSERT(bad == k, "n %zu k %zu: entry %zu is out of order, out of range or wrong", n, k,
                 bad);
  size_t seg = COMPRESS_RANDK_SEGMENT, j = 0, wrong = 0;
  for (size_t start = 0; start < n; start += seg) { /* each segment holds its share */
    size_t end = WT_MIN(n, start + seg), got = 0;
    for (; j < k && idx[j] < end; j++) got++;
    wrong += got != (size_t)((uint64_t)k * end / n - (uint64_t)k * start / n);
  }
  WT_TEST_ASSERT(wrong == 0, "n %zu k %zu: %zu segments hold other than their share", n, k, wrong);
  free(want), free(out), free(x);
  compress_codec_destroy(&c);
}

static void test_lists(void) {
  s_check_list(100003, 0.01, 3); /* a ragged last segment */
  s_check_list(100003, 1.0, 4);  /* k = n: every index once */
  s_check_list(3 * COMPRESS_RANDK_SEGMENT, 0.5, 5);
  s_check_list(COMPRESS_RANDK_SEGMENT + 1, 0.001, 6); /* k = 3 over two segments */
  s_check_list(1 << 20, 0.01, 7);                     /* parallel segments (OpenMP) */
}

/* Over 2000 seeds, each of n = 5000 elements (three segments) is kept ~100 times at k = 250;
 * sd ~ 9.7, and the segments' shares differ from k/n by at most 1/2048. */
static void test_uniform_over_seeds(void) {
  size_t n = 5000, k = 250;
  float *x = s_ramp(n);
  unsigned *hits = wt_xcalloc(n, sizeof *hits);
  for (uint64_t s = 0; s < 2000; s++) {
    compress_codec *c = s_randk((double)k / (double)n, s);
    size_t len = 0;
    uint8_t *out = s_encode(c, x, n, &len);
    for (size_t j = 0; j < k; j++) hits[((const uint32_t *)out)[j]]++;
    free(out);
    compress_codec_destroy(&c);
  }
  unsigned lo = ~0u, hi = 0;
  for (size_t i = 0; i < n; i++) lo = WT_MIN(lo, hits[i]), hi = WT_MAX(hi, hits[i]);
  WT_TEST_ASSERT(lo > 55 && hi < 145, "picked between %u and %u times (want ~100)", lo, hi);
  free(hits), free(x);
}

int main(void) {
  test_generator_is_wt_rng();
  test_one_segment_is_floyd();
  test_lists();
  test_uniform_over_seeds();
  return wt_test_finish("test_randk_draw");
}
