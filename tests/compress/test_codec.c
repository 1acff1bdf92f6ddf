/* test_codec — every codec against its documented error bound, the SIMD paths against the
 * portable ones bit for bit, and the decoders against payloads of the wrong shape.
 *
 * Tolerances: the bounds are the codecs' own (fp16 2^-11 relative, bf16 2^-8, int8/int4
 * scale/2 with nearest-even and scale with stochastic rounding); the extra 1e-5 relative slack
 * on the blockwise bounds covers x * (127 / absmax) differing from x / (absmax / 127) by an ulp.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compress/codec.h"
#include "common/common.h"
#include "common/rng.h"
#include "common/testing.h"
#ifdef _OPENMP
#include <omp.h>
#endif

static const char *s_all[] = {"fp32", "fp16", "bf16", "int8", "int4", "topk", "randk", "sign"};

static compress_codec *s_codec(const char *name, size_t block, double k_frac, int stochastic,
                               uint64_t seed) {
  compress_params p = compress_params_default();
  p.block = block;
  p.k_frac = k_frac;
  p.stochastic = stochastic;
  p.seed = seed;
  compress_codec *c = compress_codec_new(name, &p);
  WT_TEST_REQUIRE(c != NULL, "codec %s: %s", name, wt_last_error());
  return c;
}

/* Gaussian values whose scale changes every 50 elements over six decades, so blocks differ. */
static float *s_randn(size_t n, uint64_t seed) {
  wt_rng rng;
  wt_rng_seed(&rng, seed);
  float *x = wt_xmalloc((n ? n : 1) * sizeof *x), scale = 1;
  for (size_t i = 0; i < n; i++) {
    if (i % 50 == 0) scale = powf(10.0f, (float)(6 * wt_rng_double(&rng) - 3));
    x[i] = (float)wt_rng_normal(&rng) * scale;
  }
  return x;
}

/* Sprinkles the values that break careless code: NaN, ±inf, ±0, subnormals, huge. */
static void s_add_specials(float *x, size_t n) {
  const float sp[] = {NAN, -NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1e-40f, -1e-45f, 3e38f, 65520};
  for (size_t j = 0; j < WT_ARRAY_LEN(sp) && j * 97 < n; j++) x[j * 97] = sp[j];
}

static uint8_t *s_encode(const compress_codec *c, const float *x, size_t n, size_t *len) {
  size_t cap = compress_codec_max_size(c, n);
  uint8_t *buf = wt_xmalloc(cap ? cap : 1);
  int rc = compress_codec_encode(c, x, n, buf, cap, len);
  WT_TEST_REQUIRE(rc == WT_OK, "%s encode: %s", compress_codec_name(c), wt_last_error());
  return buf;
}

static float *s_roundtrip(const compress_codec *c, const float *x, size_t n) {
  size_t len;
  uint8_t *buf = s_encode(c, x, n, &len);
  float *y = wt_xmalloc((n ? n : 1) * sizeof *y);
  int rc = compress_codec_decode(c, buf, len, y, n);
  WT_TEST_REQUIRE(rc == WT_OK, "%s decode: %s", compress_codec_name(c), wt_last_error());
  free(buf);
  return y;
}

static void test_registry(void) {
  for (size_t i = 0; i < WT_ARRAY_LEN(s_all); i++) {
    const compress_codec_ops *ops = compress_codec_ops_by_name(s_all[i]);
    WT_TEST_ASSERT(ops && strcmp(ops->name, s_all[i]) == 0, "lookup %s", s_all[i]);
    WT_TEST_ASSERT(ops && compress_codec_ops_by_id(ops->id) == ops, "id lookup %s", s_all[i]);
    WT_TEST_ASSERT(strstr(compress_codec_names(), s_all[i]), "names lists %s", s_all[i]);
  }
  WT_TEST_ASSERT(!compress_codec_new("zip", NULL) && wt_last_status() == WT_ENOTFOUND, "unknown");
  WT_TEST_ASSERT(strstr(wt_last_error(), "int8"), "message lists codecs: %s", wt_last_error());
  WT_TEST_ASSERT(!compress_codec_new_by_id(99, NULL) && wt_last_status() == WT_ENOTFOUND,
                 "unknown id");
  compress_params p = compress_params_default();
  p.k_frac = 1.5;
  WT_TEST_ASSERT(!compress_codec_new("topk", &p) && wt_last_status() == WT_EINVAL, "k_frac > 1");
  p.k_frac = NAN;
  WT_TEST_ASSERT(!compress_codec_new("topk", &p) && wt_last_status() == WT_EINVAL, "k_frac NaN");
  compress_codec *c = compress_codec_new_by_id(COMPRESS_CODEC_SIGN, NULL);
  WT_TEST_ASSERT(c != NULL, "by id");
  WT_TEST_ASSERT(compress_codec_params(c)->block == 64, "default block");
  compress_codec_destroy(&c);
  WT_TEST_ASSERT(c == NULL, "destroy clears the pointer");
  WT_TEST_ASSERT(compress_topk_count(1000, 0.01) == 10 && compress_topk_count(5, 0.01) == 1 &&
                     compress_topk_count(0, 0.5) == 0 && compress_topk_count(7, 1.0) == 7,
                 "topk_count");
}

/* The value of a finite half, computed independently of the codec. */
static double s_half_value(uint16_t h) {
  int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double v = e == 0 ? ldexp(m, -24) : ldexp(1024 + m, e - 25);
  return h & 0x8000 ? -v : v;
}

static void test_fp16(void) {
  compress_codec *c = s_codec("fp16", 0, 0, 0, 0);
  // Every half decodes exactly (NaNs to NaN): encode all 65536 codes via their float values.
  size_t n = 65536;
  uint16_t *codes = wt_xmalloc(n * 2);
  for (size_t i = 0; i < n; i++) codes[i] = (uint16_t)i;
  float *y = wt_xmalloc(n * sizeof *y);
  WT_TEST_REQUIRE(compress_codec_decode(c, codes, n * 2, y, n) == WT_OK, "%s", wt_last_error());
  int bad = 0;
  for (size_t i = 0; i < n && bad < 5; i++) {
    int nan = ((i >> 10) & 0x1f) == 31 && (i & 0x3ff);
    int inf = ((i >> 10) & 0x1f) == 31 && !(i & 0x3ff);
    int ok = nan   ? isnan(y[i])
             : inf ? isinf(y[i]) && !!signbit(y[i]) == !!(i & 0x8000)
                   : (double)y[i] == s_half_value((uint16_t)i);
    if (!ok) bad++;
    WT_TEST_ASSERT(ok, "half %04zx decoded to %g", i, y[i]);
  }
  // Midpoints between neighbouring finite halves round to the even one; just off them, to the
  // nearer one (round-to-nearest-even).
  size_t m = 0x7bff;
  float *x = wt_xmalloc(3 * m * sizeof *x);
  for (size_t h = 0; h < m; h++) {
    double a = s_half_value((uint16_t)h), b = s_half_value((uint16_t)(h + 1)), mid = (a + b) / 2;
    x[3 * h] = (float)mid;
    x[3 * h + 1] = nextafterf((float)mid, 0);
    x[3 * h + 2] = nextafterf((float)mid, INFINITY);
  }
  size_t len;
  uint8_t *enc = s_encode(c, x, 3 * m, &len);
  bad = 0;
  for (size_t h = 0; h < m && bad < 5; h++) {
    uint16_t got[3];
    memcpy(got, enc + 6 * h, 6);
    uint16_t even = (uint16_t)(h % 2 == 0 ? h : h + 1);
    int ok = got[0] == even && got[1] == h && got[2] == h + 1;
    if (!ok) bad++;
    WT_TEST_ASSERT(ok, "half %04zx: midpoint->%04x below->%04x above->%04x", h, got[0], got[1],
                   got[2]);
  }
  free(enc);
  free(x);
  // Relative error of normal-range values is at most 2^-11.
  wt_rng rng;
  wt_rng_seed(&rng, 11);
  n = 100000;
  x = wt_xmalloc(n * sizeof *x);
  for (size_t i = 0; i < n; i++) {
    float v = ldexpf(1.0f + wt_rng_float(&rng), (int)wt_rng_below(&rng, 30) - 14);
    x[i] = fminf(v, 65504.0f) * (i % 2 ? -1.0f : 1.0f);
  }
  float *r = s_roundtrip(c, x, n);
  wt_test_allclose(r, x, n, 0, ldexp(1, -11), "fp16 normal range");
  free(r);
  free(x);
  free(y);
  free(codes);
  compress_codec_destroy(&c);
}

static void test_bf16(void) {
  compress_codec *c = s_codec("bf16", 0, 0, 0, 0);
  wt_rng rng;
  wt_rng_seed(&rng, 12);
  size_t n = 30000;
  float *x = wt_xmalloc(n * sizeof *x);
  uint16_t *want = wt_xmalloc(n * 2);
  for (size_t i = 0; i < n; i += 3) {                   // midpoint, just below, just above
    uint32_t hi = (uint32_t)wt_rng_below(&rng, 0x7f7f); // finite, below the largest
    uint32_t bits[3] = {(hi << 16) | 0x8000, (hi << 16) | 0x7fff, (hi << 16) | 0x8001};
    uint16_t w[3] = {(uint16_t)(hi % 2 ? hi + 1 : hi), (uint16_t)hi, (uint16_t)(hi + 1)};
    for (int j = 0; j < 3; j++) memcpy(&x[i + j], &bits[j], 4), want[i + j] = w[j];
  }
  size_t len;
  uint8_t *enc = s_encode(c, x, n, &len);
  WT_TEST_ASSERT(memcmp(enc, want, n * 2) == 0, "bf16 rounds to nearest even");
  free(enc);
  // NaNs whose payload lives only in the low bits must not round into infinity.
  uint32_t nanbits[4] = {0x7f800001, 0xff800001, 0x7fc00000, 0x7fffffff};
  float nans[4], back[4];
  memcpy(nans, nanbits, sizeof nans);
  float *r = s_roundtrip(c, nans, 4);
  memcpy(back, r, sizeof back);
  for (int j = 0; j < 4; j++) WT_TEST_ASSERT(isnan(back[j]), "NaN %08x kept NaN", nanbits[j]);
  free(r);
  for (size_t i = 0; i < n; i++)
    x[i] = ldexpf(1.0f + wt_rng_float(&rng), (int)wt_rng_below(&rng, 200) - 100);
  r = s_roundtrip(c, x, n);
  wt_test_allclose(r, x, n, 0, ldexp(1, -8), "bf16 relative error");
  free(r);
  free(x);
  free(want);
  compress_codec_destroy(&c);
}

/* |x - decoded| within each block <= bound_frac * absmax / qmax. */
static void s_check_blockwise(const char *name, float qmax, size_t block, int stochastic,
                              size_t n) {
  compress_codec *c = s_codec(name, block, 0, stochastic, 77);
  float *x = s_randn(n, 5 + block);
  float *y = s_roundtrip(c, x, n);
  size_t b = block > n ? n : block;
  double frac = stochastic ? 1.0 : 0.5, worst = 0;
  for (size_t i0 = 0; i0 < n; i0 += b) {
    double amax = 0;
    for (size_t i = i0; i < i0 + b && i < n; i++) amax = fmax(amax, fabs(x[i]));
    double bound = frac * amax / qmax * (1 + 1e-5);
    for (size_t i = i0; i < i0 + b && i < n; i++) {
      double err = fabs((double)y[i] - x[i]);
      worst = fmax(worst, bound > 0 ? err / bound : err);
      if (!(err <= bound)) {
        WT_TEST_ASSERT(err <= bound, "%s block %zu sr=%d: x[%zu]=%g got %g err %g > bound %g", name,
                       block, stochastic, i, x[i], y[i], err, bound);
        i0 = n; // one report per configuration
        break;
      }
    }
  }
  free(x);
  free(y);
  compress_codec_destroy(&c);
}

static void test_blockwise(void) {
  size_t blocks[] = {64, 1, 7, 100, 4096, 1 << 30};
  for (size_t i = 0; i < WT_ARRAY_LEN(blocks); i++)
    for (int sr = 0; sr <= 1; sr++) {
      s_check_blockwise("int8", 127, blocks[i], sr, 10007);
      s_check_blockwise("int4", 7, blocks[i], sr, 10007);
    }
  s_check_blockwise("int8", 127, 64, 0, 1 << 20); // the multi-threaded path
}

/* Stochastic rounding is unbiased: averaged over seeds the error goes to zero, while nearest-
 * even rounding keeps a fixed error on the same data. */
static void s_check_unbiased(const char *name, float qmax) {
  size_t n = 512, seeds = 400;
  float *x = s_randn(n, 3);
  double *sum = wt_xcalloc(n, sizeof *sum);
  for (size_t s = 0; s < seeds; s++) {
    compress_codec *c = s_codec(name, 64, 0, 1, 1000 + s);
    float *y = s_roundtrip(c, x, n);
    for (size_t i = 0; i < n; i++) sum[i] += (double)y[i] - x[i];
    free(y);
    compress_codec_destroy(&c);
  }
  compress_codec *rne = s_codec(name, 64, 0, 0, 0);
  float *yr = s_roundtrip(rne, x, n);
  double bias_sr = 0, bias_rne = 0; // mean |error| / scale, per element
  for (size_t i0 = 0; i0 < n; i0 += 64) {
    double amax = 0;
    for (size_t i = i0; i < i0 + 64; i++) amax = fmax(amax, fabs(x[i]));
    double scale = amax / qmax;
    for (size_t i = i0; i < i0 + 64; i++) {
      bias_sr += fabs(sum[i] / (double)seeds) / scale / (double)n;
      bias_rne += fabs((double)yr[i] - x[i]) / scale / (double)n;
    }
  }
  // Per element the SR error has std <= scale/2, so its mean over 400 seeds has std <= 0.025
  // scale and E|mean| <= 0.02; the nearest-even error averages about 0.25 scale.
  WT_TEST_ASSERT(bias_sr < 0.03, "%s stochastic rounding bias %.4f scale", name, bias_sr);
  WT_TEST_ASSERT(bias_rne > 0.1, "%s control: nearest-even error %.4f scale", name, bias_rne);
  free(yr);
  free(sum);
  free(x);
  compress_codec_destroy(&rne);
}

/* Sorted magnitudes, for the top-k reference. */
static int s_cmp_desc(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return x < y ? 1 : x > y ? -1 : 0;
}

static void s_check_topk(const float *x, size_t n, double k_frac) {
  compress_codec *c = s_codec("topk", 0, k_frac, 0, 0);
  size_t k = compress_topk_count(n, k_frac), len;
  uint8_t *enc = s_encode(c, x, n, &len);
  WT_TEST_REQUIRE(len == 8 * k, "topk payload %zu bytes for k=%zu", len, k);
  float *mag = wt_xmalloc(n * sizeof *mag);
  for (size_t i = 0; i < n; i++) mag[i] = fabsf(x[i]);
  qsort(mag, n, sizeof *mag, s_cmp_desc);
  float kth = mag[k - 1];
  size_t above = 0; // elements strictly above the k-th largest magnitude must all be kept
  for (size_t i = 0; i < n; i++) above += fabsf(x[i]) > kth;
  const uint32_t *idx = (const uint32_t *)enc;
  float *val = wt_xmalloc(4 * k); // the payload's value half, copied out (it may be unaligned)
  memcpy(val, enc + 4 * k, 4 * k);
  unsigned char *kept = wt_xcalloc(n, 1);
  size_t n_above = 0, last_tie = 0, bad = 0;
  for (size_t j = 0; j < k && bad < 3; j++) {
    int ok = idx[j] < n && (j == 0 || idx[j] > idx[j - 1]) && val[j] == x[idx[j]] &&
             fabsf(val[j]) >= kth;
    if (!ok) bad++;
    WT_TEST_ASSERT(ok, "topk entry %zu: index %u value %g (k-th magnitude %g)", j, idx[j], val[j],
                   kth);
    if (ok) kept[idx[j]] = 1, n_above += fabsf(val[j]) > kth;
    if (ok && fabsf(val[j]) == kth) last_tie = idx[j];
  }
  WT_TEST_ASSERT(n_above == above, "topk kept %zu of the %zu values above the threshold", n_above,
                 above);
  // Ties go to the lowest indices: no untaken tie may come before the last taken one.
  for (size_t i = 0; i < last_tie; i++)
    if (fabsf(x[i]) == kth && !kept[i]) {
      WT_TEST_ASSERT(0, "topk skipped tie at %zu but took one at %zu", i, last_tie);
      break;
    }
  float *y = wt_xmalloc(n * sizeof *y);
  WT_TEST_ASSERT(compress_codec_decode(c, enc, len, y, n) == WT_OK, "%s", wt_last_error());
  for (size_t i = 0; i < n; i++)
    if (y[i] != (kept[i] ? x[i] : 0.0f)) {
      WT_TEST_ASSERT(0, "topk decode at %zu: %g", i, y[i]);
      break;
    }
  free(y);
  free(kept);
  free(mag);
  free(val);
  free(enc);
  compress_codec_destroy(&c);
}

static void test_topk(void) {
  double fracs[] = {0.01, 0.001, 0.1, 0.5, 1.0};
  float *x = s_randn(100003, 21);
  for (size_t f = 0; f < WT_ARRAY_LEN(fracs); f++) s_check_topk(x, 100003, fracs[f]);
  // Heavy ties: magnitudes from a handful of values, signs mixed.
  wt_rng rng;
  wt_rng_seed(&rng, 22);
  for (size_t i = 0; i < 100003; i++)
    x[i] = (float)wt_rng_below(&rng, 5) * (wt_rng_below(&rng, 2) ? 1.0f : -1.0f);
  for (size_t f = 0; f < WT_ARRAY_LEN(fracs); f++) s_check_topk(x, 100003, fracs[f]);
  for (size_t i = 0; i < 1000; i++) x[i] = 0.5f; // all equal
  s_check_topk(x, 1000, 0.3);
  s_check_topk(x, 1, 0.01);
  free(x);
  size_t nb = 1 << 21;
  float *big = s_randn(nb, 23); // large enough for the sampled path and the threaded histogram
  s_check_topk(big, nb, 0.01);
  // Large values exactly where a sparse evenly spread sample looks (the first 64 of every
  // n/512), too few for k: the sampled bound lets fewer than k through, and the exact fallback
  // must still find them all.
  for (size_t i = 0; i < nb; i++)
    big[i] = (i % (nb / 512) < 64 ? 10.0f : 0.001f) * (1 + big[i] * 1e-3f);
  s_check_topk(big, nb, 0.05);
  free(big);
}

static void test_randk(void) {
  size_t n = 1000, len1, len2, len3;
  float *x = s_randn(n, 31);
  compress_codec *a = s_codec("randk", 0, 0.05, 0, 7), *b = s_codec("randk", 0, 0.05, 0, 7);
  uint8_t *e1 = s_encode(a, x, n, &len1), *e2 = s_encode(b, x, n, &len2);
  WT_TEST_ASSERT(len1 == 400 && len1 == len2 && memcmp(e1, e2, len1) == 0, "same seed, same k");
  compress_codec_set_seed(b, 8);
  uint8_t *e3 = s_encode(b, x, n, &len3);
  WT_TEST_ASSERT(memcmp(e1, e3, len1) != 0, "another seed picks other indices");
  const uint32_t *idx = (const uint32_t *)e1;
  float val[50];
  memcpy(val, e1 + 200, sizeof val);
  for (size_t j = 0; j < 50; j++)
    WT_TEST_ASSERT(idx[j] < n && (j == 0 || idx[j] > idx[j - 1]) && val[j] == x[idx[j]],
                   "randk entry %zu", j);
  // Uniform: over 2000 seeds each index is picked 100 times on average (sd ~ 9.7).
  unsigned *hits = wt_xcalloc(n, sizeof *hits);
  for (uint64_t s = 0; s < 2000; s++) {
    compress_codec_set_seed(b, s);
    size_t len;
    uint8_t *e = s_encode(b, x, n, &len);
    for (size_t j = 0; j < 50; j++) hits[((const uint32_t *)e)[j]]++;
    free(e);
  }
  unsigned lo = ~0u, hi = 0;
  for (size_t i = 0; i < n; i++) lo = WT_MIN(lo, hits[i]), hi = WT_MAX(hi, hits[i]);
  WT_TEST_ASSERT(lo > 55 && hi < 145, "randk picks between %u and %u times (want ~100)", lo, hi);
  free(hits);
  free(e1);
  free(e2);
  free(e3);
  free(x);
  compress_codec_destroy(&a);
  compress_codec_destroy(&b);
}

static void test_sign(void) {
  size_t blocks[] = {64, 1, 10, 1000, 1 << 30}, n = 10007;
  float *x = s_randn(n, 41);
  for (size_t k = 0; k < WT_ARRAY_LEN(blocks); k++) {
    compress_codec *c = s_codec("sign", blocks[k], 0, 0, 0);
    float *y = s_roundtrip(c, x, n);
    size_t b = WT_MIN(blocks[k], n);
    for (size_t i0 = 0; i0 < n; i0 += b) {
      size_t m = WT_MIN(b, n - i0);
      double mean = 0;
      for (size_t i = i0; i < i0 + m; i++) mean += fabs(x[i]) / (double)m;
      int ok = 1;
      for (size_t i = i0; i < i0 + m && ok; i++) {
        double want = x[i] < 0 ? -mean : mean; // float sum order: 1e-5 relative slack
        ok = fabs(y[i] - want) <= 1e-5 * mean;
        WT_TEST_ASSERT(ok, "sign block %zu: x[%zu]=%g got %g want %g", blocks[k], i, x[i], y[i],
                       want);
      }
      if (!ok) break;
    }
    free(y);
    compress_codec_destroy(&c);
  }
  free(x);
}

/* The SIMD paths give the same bytes and floats as the portable ones, specials included. */
static void test_simd_equal(void) {
  size_t sizes[] = {1, 15, 17, 10007, (1 << 20) + 5};
  for (size_t s = 0; s < WT_ARRAY_LEN(sizes); s++) {
    size_t n = sizes[s];
    float *x = s_randn(n, 50 + s);
    s_add_specials(x, n);
    for (size_t c = 0; c < WT_ARRAY_LEN(s_all); c++) {
      size_t block = s % 2 ? 64 : 100;
      compress_codec *codec = s_codec(s_all[c], block, 0.01, 0, 9);
      size_t l1, l2;
      compress_codec_set_simd(1);
      uint8_t *e1 = s_encode(codec, x, n, &l1);
      float *y1 = s_roundtrip(codec, x, n), *a1 = wt_xmalloc(n * sizeof(float));
      memcpy(a1, x, n * sizeof(float));
      WT_TEST_REQUIRE(compress_codec_decode_add(codec, e1, l1, -0.37f, a1, n) == WT_OK, "add");
      compress_codec_set_simd(0);
      uint8_t *e2 = s_encode(codec, x, n, &l2);
      float *y2 = s_roundtrip(codec, x, n), *a2 = wt_xmalloc(n * sizeof(float));
      memcpy(a2, x, n * sizeof(float));
      WT_TEST_REQUIRE(compress_codec_decode_add(codec, e1, l1, -0.37f, a2, n) == WT_OK, "add");
      compress_codec_set_simd(1);
      WT_TEST_ASSERT(l1 == l2 && memcmp(e1, e2, l1) == 0, "%s n=%zu: SIMD encode differs", s_all[c],
                     n);
      WT_TEST_ASSERT(memcmp(y1, y2, n * sizeof(float)) == 0, "%s n=%zu: SIMD decode differs",
                     s_all[c], n);
      WT_TEST_ASSERT(memcmp(a1, a2, n * sizeof(float)) == 0, "%s n=%zu: SIMD decode_add differs",
                     s_all[c], n);
      free(e1), free(e2), free(y1), free(y2), free(a1), free(a2);
      compress_codec_destroy(&codec);
    }
    free(x);
  }
}

/* Outputs of 64 MiB and more leave through non-temporal stores in pieces; the bytes must not
 * change, also at unaligned addresses (compared with the portable path, which stores plainly). */
static void test_streamed_outputs(void) {
  const char *names[] = {"fp16", "bf16", "int8", "int4", "sign"};
  size_t n = ((size_t)16 << 20) + 37;
  wt_rng rng;
  wt_rng_seed(&rng, 81);
  float *x = wt_xmalloc(n * sizeof *x), *y1 = wt_xmalloc((n + 1) * 4),
        *y2 = wt_xmalloc((n + 1) * 4);
  for (size_t i = 0; i < n; i++) x[i] = (wt_rng_float(&rng) - 0.5f) * (float)(1 + i % 1000);
  for (size_t c = 0; c < WT_ARRAY_LEN(names); c++) {
    compress_codec *codec = s_codec(names[c], 100, 0, 0, 0);
    size_t cap = compress_codec_max_size(codec, n), l1 = 0, l2 = 0;
    uint8_t *e1 = wt_xmalloc(cap + 1), *e2 = wt_xmalloc(cap + 1);
    compress_codec_set_simd(1);
    int ok = compress_codec_encode(codec, x, n, e1 + 1, cap, &l1) == WT_OK &&
             compress_codec_decode(codec, e1 + 1, l1, y1 + 1, n) == WT_OK;
    compress_codec_set_simd(0);
    ok = ok && compress_codec_encode(codec, x, n, e2 + 1, cap, &l2) == WT_OK &&
         compress_codec_decode(codec, e2 + 1, l2, y2 + 1, n) == WT_OK;
    compress_codec_set_simd(1);
    WT_TEST_ASSERT(ok, "%s: %s", names[c], wt_last_error());
    WT_TEST_ASSERT(l1 == l2 && memcmp(e1 + 1, e2 + 1, l1) == 0, "%s: streamed encode differs",
                   names[c]);
    WT_TEST_ASSERT(memcmp(y1 + 1, y2 + 1, n * 4) == 0, "%s: streamed decode differs", names[c]);
    free(e1), free(e2);
    compress_codec_destroy(&codec);
  }
  free(x), free(y1), free(y2);
}

/* The payload does not depend on how many threads encode it (codec.h promises this): 1, 2
 * and 3 threads (an uneven split) give the same bytes and decoded floats. */
static void test_thread_count(void) {
#ifdef _OPENMP
  size_t n = (1 << 20) + 333;
  float *x = s_randn(n, 91);
  for (size_t c = 0; c < WT_ARRAY_LEN(s_all); c++) {
    compress_codec *codec = s_codec(s_all[c], 100, 0.01, 1, 5); // stochastic where it applies
    size_t l1, l3;
    omp_set_num_threads(1);
    uint8_t *e1 = s_encode(codec, x, n, &l1);
    float *y1 = s_roundtrip(codec, x, n);
    for (int threads = 2; threads <= 3; threads++) {
      omp_set_num_threads(threads);
      uint8_t *e3 = s_encode(codec, x, n, &l3);
      float *y3 = s_roundtrip(codec, x, n);
      WT_TEST_ASSERT(l1 == l3 && memcmp(e1, e3, l1) == 0, "%s: %d threads encode differently",
                     s_all[c], threads);
      WT_TEST_ASSERT(memcmp(y1, y3, n * 4) == 0, "%s: %d threads decode differently", s_all[c],
                     threads);
      free(e3), free(y3);
    }
    free(e1), free(y1);
    compress_codec_destroy(&codec);
  }
  omp_set_num_threads(omp_get_num_procs());
  free(x);
#else
  printf("test_thread_count: built without OpenMP, nothing to compare\n");
#endif
}

/* decode_add(alpha) == fmaf(alpha, decode, y) element by element. */
static void test_decode_add(void) {
  size_t n = 5003;
  float *x = s_randn(n, 61), *y0 = s_randn(n, 62);
  for (size_t c = 0; c < WT_ARRAY_LEN(s_all); c++) {
    compress_codec *codec = s_codec(s_all[c], 64, 0.1, 0, 3);
    size_t len;
    uint8_t *e = s_encode(codec, x, n, &len);
    float *d = s_roundtrip(codec, x, n), *y = wt_xmalloc(n * sizeof *y);
    memcpy(y, y0, n * sizeof *y);
    WT_TEST_REQUIRE(compress_codec_decode_add(codec, e, len, 0.25f, y, n) == WT_OK, "add");
    for (size_t i = 0; i < n; i++)
      if (y[i] != fmaf(0.25f, d[i], y0[i])) {
        WT_TEST_ASSERT(0, "%s decode_add at %zu: %g vs %g", s_all[c], i, y[i],
                       fmaf(0.25f, d[i], y0[i]));
        break;
      }
    free(e), free(d), free(y);
    compress_codec_destroy(&codec);
  }
  free(x), free(y0);
}

/* Payloads of the wrong length, and top-k indices out of range or order, are refused without
 * touching the output. */
static void test_bad_payloads(void) {
  size_t n = 1000;
  float *x = s_randn(n, 71), *y = wt_xmalloc((n + 1) * sizeof *y);
  for (size_t c = 0; c < WT_ARRAY_LEN(s_all); c++) {
    compress_codec *codec = s_codec(s_all[c], 64, 0.01, 0, 0);
    size_t len;
    uint8_t *e = s_encode(codec, x, n, &len);
    for (size_t i = 0; i <= n; i++) y[i] = 42.0f;
    WT_TEST_ASSERT(compress_codec_decode(codec, e, len - 1, y, n) == WT_ECORRUPT, "%s short",
                   s_all[c]);
    int sparse = strcmp(s_all[c], "topk") == 0 || strcmp(s_all[c], "randk") == 0;
    if (!sparse) // a sparse payload is valid for any larger tensor
      WT_TEST_ASSERT(compress_codec_decode(codec, e, len, y, n + 1) == WT_ECORRUPT, "%s wrong n",
                     s_all[c]);
    WT_TEST_ASSERT(compress_codec_decode_add(codec, e, len + 3, 1, y, n) == WT_ECORRUPT, "%s long",
                   s_all[c]);
    size_t small = 0;
    WT_TEST_ASSERT(compress_codec_encode(codec, x, n, e, len - 1, &small) == WT_EINVAL,
                   "%s cap too small", s_all[c]);
    int untouched = 1;
    for (size_t i = 0; i <= n; i++) untouched &= y[i] == 42.0f;
    WT_TEST_ASSERT(untouched, "%s: a refused payload wrote to y", s_all[c]);
    free(e);
    compress_codec_destroy(&codec);
  }
  compress_codec *tk = s_codec("topk", 0, 0.01, 0, 0);
  size_t len;
  uint8_t *e = s_encode(tk, x, n, &len);
  uint32_t *idx = (uint32_t *)e, save = idx[5];
  idx[5] = idx[4]; // out of order
  WT_TEST_ASSERT(compress_codec_decode(tk, e, len, y, n) == WT_ECORRUPT, "topk order");
  idx[5] = (uint32_t)n; // out of range
  WT_TEST_ASSERT(compress_codec_decode_add(tk, e, len, 1, y, n) == WT_ECORRUPT, "topk range");
  WT_TEST_ASSERT(y[0] == 42.0f && y[n] == 42.0f, "refused topk payload wrote to y");
  idx[5] = save;
  WT_TEST_ASSERT(compress_codec_decode(tk, e, len, y, n) == WT_OK, "restored payload decodes");
  free(e);
  compress_codec_destroy(&tk);
  free(x), free(y);
}

int main(void) {
  test_registry();
  for (int simd = 1; simd >= 0; simd--) { // the reference checks hold for both code paths
    compress_codec_set_simd(simd);
    test_fp16();
    test_bf16();
    test_blockwise();
    test_sign();
    test_topk();
  }
  compress_codec_set_simd(1);
  s_check_unbiased("int8", 127);
  s_check_unbiased("int4", 7);
  test_randk();
  test_simd_equal();
  test_streamed_outputs();
  test_thread_count();
  test_decode_add();
  test_bad_payloads();
  return wt_test_finish("test_codec");
}
