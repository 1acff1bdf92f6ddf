/* test_acsgd — AC-SGD activation compression: the quantizer's error bound, sender and receiver
 * caches that stay bitwise equal when fed only message bytes, the delta path beating direct
 * quantization on slowly changing activations, the mmap-backed cache, the cache bound under
 * both overflow policies, malformed messages refused without touching the cache, and the cache
 * checkpoint: ends restored from a saved record continue with the very bytes of ends that never
 * stopped (under eviction), and a truncated, damaged or mismatched record is refused. */
#include "compress/acsgd.h"
#include "common/common.h"
#include "common/rng.h"
#include "common/testing.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum { ROWS = 16, COLS = 48, N = ROWS * COLS };

static void s_fill_normal(wt_rng *rng, float *x, size_t n, double scale) {
  for (size_t i = 0; i < n; i++) x[i] = (float)(scale * wt_rng_normal(rng));
}

static acsgd_options s_opts(int bits, size_t max_samples) {
  acsgd_options o = {.bits = bits,
                     .delta = 1,
                     .rows = ROWS,
                     .cols = COLS,
                     .max_samples = max_samples,
                     .overflow = ACSGD_OVERFLOW_REFUSE};
  return o;
}

/* Every element is within step/2 of its input, step = (row max - row min) / (2^b - 1). */
static void test_quantizer_bounds(void) {
  wt_rng rng;
  wt_rng_seed(&rng, 1);
  float x[N], y[N];
  uint8_t payload[acsgd_payload_bytes(ROWS, COLS, 8)];
  const int widths[] = {2, 4, 8};
  for (int w = 0; w < 3; w++) {
    int bits = widths[w];
    s_fill_normal(&rng, x, N, 3.0);
    x[5] = 0; // a constant row below checks step = 0
    for (int j = 0; j < COLS; j++) x[(ROWS - 1) * COLS + j] = 1.25f;
    WT_TEST_REQUIRE(acsgd_quantize_rows(x, ROWS, COLS, bits, payload) == WT_OK, "%s",
                    wt_last_error());
    WT_TEST_REQUIRE(acsgd_dequantize_rows(payload, ROWS, COLS, bits, y, 0) == WT_OK, "decode");
    double worst = 0;
    for (int i = 0; i < ROWS; i++) {
      float mn = x[i * COLS], mx = x[i * COLS];
      for (int j = 0; j < COLS; j++)
        mn = fminf(mn, x[i * COLS + j]), mx = fmaxf(mx, x[i * COLS + j]);
      double half_step = 0.5 * (mx - mn) / ((1 << bits) - 1);
      for (int j = 0; j < COLS; j++) {
        double err = fabs((double)x[i * COLS + j] - y[i * COLS + j]);
        worst = fmax(worst, err / (half_step + 1e-30));
        WT_TEST_ASSERT(err <= half_step * (1 + 1e-5) + 1e-6 * fabs(mx - mn) + 1e-7,
                       "%d bits row %d col %d: err %g > step/2 %g", bits, i, j, err, half_step);
      }
    }
    // The bound is tight: some element should come close to it on random data.
    WT_TEST_ASSERT(worst > 0.5, "%d bits: worst error only %.3f of step/2", bits, worst);
    for (int j = 0; j < COLS; j++)
      WT_TEST_ASSERT(y[(ROWS - 1) * COLS + j] == 1.25f, "constant row decoded exactly");
  }
  // Scales that are NaN, negative, or so large that decoding overflows are refused.
  WT_TEST_REQUIRE(acsgd_quantize_rows(x, ROWS, COLS, 4, payload) == WT_OK, "encode");
  const float bad_scales[][2] = {{NAN, 1}, {0, -1}, {3e38f, 3e38f}, {0, INFINITY}};
  for (size_t k = 0; k < WT_ARRAY_LEN(bad_scales); k++) {
    uint8_t copy[sizeof payload];
    memcpy(copy, payload, sizeof payload);
    memcpy(copy + 8 * 3, bad_scales[k], 8);
    memcpy(y, x, sizeof y);
    WT_TEST_ASSERT(acsgd_dequantize_rows(copy, ROWS, COLS, 4, y, 1) == WT_ECORRUPT, "scale %zu", k);
    WT_TEST_ASSERT(memcmp(y, x, sizeof y) == 0, "refused scales wrote nothing");
  }
  x[7] = NAN;
  WT_TEST_ASSERT(acsgd_quantize_rows(x, ROWS, COLS, 4, payload) == WT_EINVAL, "NaN refused");
  WT_TEST_ASSERT(acsgd_quantize_rows(x, ROWS, COLS, 3, payload) == WT_EINVAL, "3 bits refused");
}

/* Drives `epochs` passes over `samples` samples whose activations drift by `drift` per visit;
 * returns the mean squared error of what the receiver sees. The receiver gets only bytes. */
static double s_run_cut(acsgd_sender *snd, acsgd_receiver *rcv, int samples, int epochs,
                        double drift, uint64_t seed, int *identical) {
  wt_rng rng;
  wt_rng_seed(&rng, seed);
  float *base = wt_xmalloc((size_t)samples * N * sizeof(float));
  s_fill_normal(&rng, base, (size_t)samples * N, 1.0);
  uint8_t *msg = wt_xmalloc(acsgd_msg_bytes(ROWS, COLS, 8));
  float recon[N], got[N];
  double se = 0;
  size_t count = 0;
  *identical = 1;
  for (int ep = 0; ep < epochs; ep++) {
    for (int s = 0; s < samples; s++) {
      float *a = base + (size_t)s * N;
      for (int i = 0; i < N; i++) a[i] += (float)(drift * wt_rng_normal(&rng));
      size_t len;
      uint64_t id = 1000 + (uint64_t)s * 7; // sparse ids exercise the index
      WT_TEST_REQUIRE(acsgd_sender_encode(snd, id, a, msg, acsgd_msg_bytes(ROWS, COLS, 8), &len,
                                          recon) == WT_OK,
                      "%s", wt_last_error());
      size_t used;
      WT_TEST_REQUIRE(acsgd_receiver_decode(rcv, msg, len, got, N, &used, NULL) == WT_OK, "%s",
                      wt_last_error());
      WT_TEST_ASSERT(used == len, "consumed %zu of %zu", used, len);
      if (memcmp(recon, got, sizeof got) != 0) *identical = 0;
      const float *cs = acsgd_sender_cached(snd, id), *cr = acsgd_receiver_cached(rcv, id);
      if ((cs == NULL) != (cr == NULL) || (cs && memcmp(cs, cr, sizeof got) != 0)) *identical = 0;
      for (int i = 0; i < N; i++) se += ((double)got[i] - a[i]) * ((double)got[i] - a[i]);
      count += N;
    }
  }
  free(base);
  free(msg);
  return se / (double)count;
}

static void test_caches_identical_and_delta_helps(void) {
  const int widths[] = {2, 4, 8};
  for (int w = 0; w < 3; w++) {
    acsgd_options o = s_opts(widths[w], 64);
    acsgd_sender *snd = acsgd_sender_new(&o);
    acsgd_receiver *rcv = acsgd_receiver_new(&o);
    WT_TEST_REQUIRE(snd && rcv, "%s", wt_last_error());
    int same;
    double mse_delta = s_run_cut(snd, rcv, 12, 20, 0.01, 7, &same);
    WT_TEST_ASSERT(same, "%d bits: sender and receiver caches differ", widths[w]);
    acsgd_stats st = acsgd_sender_stats(snd), rt = acsgd_receiver_stats(rcv);
    WT_TEST_ASSERT(st.first == 12 && st.delta == 12 * 19 && st.plain == 0, "first %llu delta %llu",
                   (unsigned long long)st.first, (unsigned long long)st.delta);
    WT_TEST_ASSERT(rt.bytes == st.bytes && rt.messages == st.messages, "receiver counters");
    acsgd_sender_destroy(&snd);
    acsgd_receiver_destroy(&rcv);
    WT_TEST_ASSERT(snd == NULL && rcv == NULL, "destroy clears the pointer");

    o.delta = 0; // the baseline: direct quantization, same bits, same data
    snd = acsgd_sender_new(&o);
    rcv = acsgd_receiver_new(&o);
    double mse_direct = s_run_cut(snd, rcv, 12, 20, 0.01, 7, &same);
    WT_TEST_ASSERT(acsgd_sender_stats(snd).plain == 240, "baseline sends PLAIN only");
    // Deltas are ~100x smaller than activations, so their quantization error is far smaller.
    WT_TEST_ASSERT(mse_delta < 0.1 * mse_direct, "%d bits: delta mse %g vs direct %g", widths[w],
                   mse_delta, mse_direct);
    printf("  %d bits: mse delta %.3g direct %.3g\n", widths[w], mse_delta, mse_direct);
    acsgd_sender_destroy(&snd);
    acsgd_receiver_destroy(&rcv);
  }
}

/* A cache in a file gives the same messages and reconstructions as one on the heap. */
static void test_mmap_cache(void) {
  char dir[256], path[300];
  wt_test_tmpdir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/acsgd.cache", dir);
  acsgd_options heap = s_opts(4, 8), file = heap;
  file.cache_path = path;
  acsgd_sender *a = acsgd_sender_new(&heap), *b = acsgd_sender_new(&file);
  acsgd_receiver *rb = acsgd_receiver_new(&heap);
  WT_TEST_REQUIRE(a && b && rb, "%s", wt_last_error());
  struct stat st;
  WT_TEST_ASSERT(stat(path, &st) == 0 && (size_t)st.st_size == 8 * N * sizeof(float),
                 "cache file sized for 8 samples");
  wt_rng rng;
  wt_rng_seed(&rng, 3);
  size_t cap = acsgd_msg_bytes(ROWS, COLS, 4);
  uint8_t *ma = malloc(cap), *mb = malloc(cap);
  float x[N], ra[N], rb_out[N];
  int same = 1;
  for (int step = 0; step < 60; step++) {
    s_fill_normal(&rng, x, N, 1.0 + step % 3);
    size_t la, lb;
    uint64_t id = (uint64_t)(step % 6);
    WT_TEST_REQUIRE(acsgd_sender_encode(a, id, x, ma, cap, &la, ra) == WT_OK, "heap");
    WT_TEST_REQUIRE(acsgd_sender_encode(b, id, x, mb, cap, &lb, NULL) == WT_OK, "file");
    WT_TEST_REQUIRE(acsgd_receiver_decode(rb, mb, lb, rb_out, N, NULL, NULL) == WT_OK, "decode");
    if (la != lb || memcmp(ma, mb, la) || memcmp(ra, rb_out, sizeof ra)) same = 0;
    if (memcmp(acsgd_sender_cached(a, id), acsgd_sender_cached(b, id), sizeof x)) same = 0;
  }
  WT_TEST_ASSERT(same, "file-backed cache diverged from the heap one");
  acsgd_sender_destroy(&b);
  acsgd_sender_destroy(&a);
  acsgd_receiver_destroy(&rb);
  free(ma);
  free(mb);
  remove(path);
  remove(dir);
  file.cache_path = "/nonexistent-dir/x.cache";
  WT_TEST_ASSERT(acsgd_sender_new(&file) == NULL, "unwritable cache path refused");
}

/* At most `capacity` samples are cached; REFUSE sends the rest PLAIN, EVICT recycles the LRU. */
static void test_bounded_memory(void) {
  for (int policy = 0; policy < 2; policy++) {
    acsgd_options o = s_opts(8, 0);
    o.max_bytes = 3 * N * sizeof(float) + 100; // room for 3 samples, not 4
    o.overflow = policy ? ACSGD_OVERFLOW_EVICT : ACSGD_OVERFLOW_REFUSE;
    acsgd_sender *snd = acsgd_sender_new(&o);
    acsgd_receiver *rcv = acsgd_receiver_new(&o);
    WT_TEST_REQUIRE(snd && rcv, "%s", wt_last_error());
    int same;
    s_run_cut(snd, rcv, 5, 4, 0.01, 11, &same); // 5 samples cycling through room for 3
    acsgd_stats st = acsgd_sender_stats(snd);
    WT_TEST_ASSERT(same, "policy %d: caches differ", policy);
    WT_TEST_ASSERT(st.capacity_samples == 3 && st.cached_samples == 3, "holds %zu of %zu",
                   st.cached_samples, st.capacity_samples);
    WT_TEST_ASSERT(st.cache_bytes_used == 3 * N * sizeof(float) &&
                       st.cache_bytes_used <= o.max_bytes,
                   "bytes used %zu", st.cache_bytes_used);
    if (policy == 0) {
      // Samples 0..2 are cached at once; 3 and 4 never are.
      WT_TEST_ASSERT(st.first == 3 && st.delta == 9 && st.plain == 8 && st.evictions == 0,
                     "refuse: first %llu delta %llu plain %llu", (unsigned long long)st.first,
                     (unsigned long long)st.delta, (unsigned long long)st.plain);
    } else {
      // Cycling 5 samples through 3 LRU slots: every visit evicts the sample needed 2 later.
      WT_TEST_ASSERT(st.first == 20 && st.evictions == 17 && st.plain == 0,
                     "evict: first %llu evictions %llu", (unsigned long long)st.first,
                     (unsigned long long)st.evictions);
    }
    acsgd_sender_destroy(&snd);
    acsgd_receiver_destroy(&rcv);
  }
  acsgd_options o = s_opts(8, 0);
  WT_TEST_ASSERT(acsgd_sender_new(&o) == NULL, "a delta cache without a bound is refused");
  o.max_bytes = 10;
  WT_TEST_ASSERT(acsgd_sender_new(&o) == NULL, "a bound smaller than one sample is refused");
}

/* EVICT under random traffic: both ends agree, and the cache holds exactly the `cap` most
 * recently sent samples (checks the LRU rule and the index's deletions). */
static void test_lru_random_traffic(void) {
  enum { IDS = 120, CAP = 50, VISITS = 1500 };
  acsgd_options o = s_opts(2, CAP);
  o.overflow = ACSGD_OVERFLOW_EVICT;
  acsgd_sender *snd = acsgd_sender_new(&o);
  acsgd_receiver *rcv = acsgd_receiver_new(&o);
  wt_rng rng;
  wt_rng_seed(&rng, 21);
  uint64_t ids[IDS];
  long last_use[IDS];
  for (int i = 0; i < IDS; i++) ids[i] = wt_rng_u64(&rng), last_use[i] = -1; // sparse 64-bit ids
  size_t cap = acsgd_msg_bytes(ROWS, COLS, 2), len;
  uint8_t *msg = malloc(cap);
  float x[N], out[N];
  for (long v = 0; v < VISITS; v++) {
    int k = (int)wt_rng_below(&rng, v < 300 ? IDS : IDS / 2); // later, a hot half
    s_fill_normal(&rng, x, N, 1.0);
    WT_TEST_REQUIRE(acsgd_sender_encode(snd, ids[k], x, msg, cap, &len, NULL) == WT_OK, "enc");
    WT_TEST_REQUIRE(acsgd_receiver_decode(rcv, msg, len, out, N, NULL, NULL) == WT_OK, "%s",
                    wt_last_error());
    last_use[k] = v;
  }
  long sorted[IDS];
  memcpy(sorted, last_use, sizeof sorted);
  for (int i = 0; i < IDS; i++) // selection of the CAP-th largest last use
    for (int j = i + 1; j < IDS; j++)
      if (sorted[j] > sorted[i]) {
        long t = sorted[i];
        sorted[i] = sorted[j], sorted[j] = t;
      }
  int agree = 1, lru = 1;
  for (int i = 0; i < IDS; i++) {
    const float *a = acsgd_sender_cached(snd, ids[i]), *b = acsgd_receiver_cached(rcv, ids[i]);
    if ((a == NULL) != (b == NULL) || (a && memcmp(a, b, sizeof x))) agree = 0;
    int want = last_use[i] >= 0 && last_use[i] >= sorted[CAP - 1];
    if ((a != NULL) != want) lru = 0;
  }
  WT_TEST_ASSERT(agree, "sender and receiver caches differ under eviction");
  WT_TEST_ASSERT(lru, "the cache does not hold exactly the %d most recently sent samples", CAP);
  WT_TEST_ASSERT(acsgd_sender_stats(snd).cached_samples == CAP, "cache full");
  acsgd_sender_destroy(&snd);
  acsgd_receiver_destroy(&rcv);
  free(msg);
}

/* Returns the receiver's verdict on a copy of msg with `len` bytes and byte `at` xor'ed. */
static int s_decode_damaged(acsgd_receiver *r, const uint8_t *msg, size_t len, size_t at,
                            uint8_t xor_with) {
  uint8_t *copy = malloc(len ? len : 1);
  memcpy(copy, msg, len);
  if (at < len) copy[at] ^= xor_with;
  float out[N];
  int rc = acsgd_receiver_decode(r, copy, len, out, N, NULL, NULL);
  free(copy);
  return rc;
}

static void test_malformed_refused(void) {
  acsgd_options o = s_opts(4, 4);
  acsgd_sender *snd = acsgd_sender_new(&o);
  acsgd_receiver *rcv = acsgd_receiver_new(&o);
  wt_rng rng;
  wt_rng_seed(&rng, 5);
  float x[N], out[N];
  size_t cap = acsgd_msg_bytes(ROWS, COLS, 4), len;
  uint8_t *msg = malloc(cap);
  s_fill_normal(&rng, x, N, 1.0);
  acsgd_sender_encode(snd, 42, x, msg, cap, &len, NULL);
  WT_TEST_REQUIRE(acsgd_receiver_decode(rcv, msg, len, out, N, NULL, NULL) == WT_OK, "first");
  float before[N];
  memcpy(before, acsgd_receiver_cached(rcv, 42), sizeof before);
  s_fill_normal(&rng, x, N, 1.0);
  acsgd_sender_encode(snd, 42, x, msg, cap, &len, NULL); // a DELTA for sample 42

  for (size_t cut = 0; cut < len; cut += 37) // every truncation
    WT_TEST_ASSERT(s_decode_damaged(rcv, msg, cut, len, 0) == WT_ECORRUPT, "truncated at %zu", cut);
  const size_t header_bytes[] = {0, 4, 5, 6, 7, 16, 20, 24, 28, 32, 36};
  for (size_t i = 0; i < WT_ARRAY_LEN(header_bytes); i++) {
    int rc = s_decode_damaged(rcv, msg, len, header_bytes[i], 0x41);
    WT_TEST_ASSERT(rc == WT_ECORRUPT || rc == WT_EMISMATCH, "garbled header byte %zu: rc %d",
                   header_bytes[i], rc);
  }
  // A well-formed DELTA from a sender whose cache differs (sample 7 in slot 0, where this
  // receiver holds 42) is a desynchronisation: refused, not applied.
  acsgd_sender *other = acsgd_sender_new(&o);
  uint8_t *alien = malloc(cap);
  size_t alen;
  acsgd_sender_encode(other, 7, x, alien, cap, &alen, NULL);
  acsgd_sender_encode(other, 7, x, alien, cap, &alen, NULL);
  WT_TEST_ASSERT(acsgd_receiver_decode(rcv, alien, alen, out, N, NULL, NULL) == WT_EMISMATCH,
                 "delta for a sample the slot does not hold");
  acsgd_sender_destroy(&other);
  free(alien);
  WT_TEST_ASSERT(memcmp(before, acsgd_receiver_cached(rcv, 42), sizeof before) == 0,
                 "refused messages left the cache unchanged");
  WT_TEST_ASSERT(acsgd_receiver_decode(rcv, msg, len, out, N / 2, NULL, NULL) == WT_EMISMATCH,
                 "too small an output buffer");
  WT_TEST_ASSERT(acsgd_receiver_decode(rcv, msg, len, out, N, NULL, NULL) == WT_OK,
                 "the intact message still decodes: %s", wt_last_error());

  // PLAIN messages (backward gradients) go through the stateless pair.
  WT_TEST_REQUIRE(acsgd_quant_encode(x, ROWS, COLS, 2, 9, msg, cap, &len) == WT_OK, "plain");
  acsgd_msg_info info;
  WT_TEST_ASSERT(acsgd_quant_decode(msg, len, out, N, &info) == WT_OK && info.sample_id == 9 &&
                     info.kind == ACSGD_PLAIN && info.bits == 2,
                 "plain decode");
  WT_TEST_ASSERT(acsgd_quant_decode(msg, len - 1, out, N, NULL) == WT_ECORRUPT, "plain truncated");
  WT_TEST_ASSERT(acsgd_quant_encode(x, ROWS, COLS, 2, 9, msg, 10, &len) == WT_EINVAL, "small buf");
  acsgd_sender_destroy(&snd);
  acsgd_receiver_destroy(&rcv);
  free(msg);
}

/* Random traffic over more samples than the cache holds, so eviction and LRU order matter. */
static void s_traffic(acsgd_sender *snd, acsgd_receiver *rcv, wt_rng *rng, int visits,
                      const uint64_t *ids, int n_ids, uint8_t *msg, size_t cap, uint8_t *log,
                      size_t *log_len) {
  float x[N], out[N];
  size_t len;
  for (int v = 0; v < visits; v++) {
    int k = (int)wt_rng_below(rng, (uint64_t)n_ids);
    s_fill_normal(rng, x, N, 1.0);
    WT_TEST_REQUIRE(acsgd_sender_encode(snd, ids[k], x, msg, cap, &len, NULL) == WT_OK, "enc");
    WT_TEST_REQUIRE(acsgd_receiver_decode(rcv, msg, len, out, N, NULL, NULL) == WT_OK, "%s",
                    wt_last_error());
    if (log) memcpy(log + *log_len, msg, len), *log_len += len;
    if (log) memcpy(log + *log_len, out, sizeof out), *log_len += sizeof out;
  }
}

static void test_checkpoint(void) {
  enum { IDS = 40, CAP = 16, VISITS = 200 };
  acsgd_options o = s_opts(4, CAP);
  o.overflow = ACSGD_OVERFLOW_EVICT;
  acsgd_sender *snd = acsgd_sender_new(&o), *snd2 = acsgd_sender_new(&o);
  acsgd_receiver *rcv = acsgd_receiver_new(&o), *rcv2 = acsgd_receiver_new(&o);
  WT_TEST_REQUIRE(snd && snd2 && rcv && rcv2, "%s", wt_last_error());
  wt_rng rng;
  wt_rng_seed(&rng, 5);
  uint64_t ids[IDS];
  for (int i = 0; i < IDS; i++) ids[i] = wt_rng_u64(&rng);
  size_t cap = acsgd_msg_bytes(ROWS, COLS, 4), la = 0, lb = 0;
  uint8_t *msg = malloc(cap);
  s_traffic(snd, rcv, &rng, VISITS, ids, IDS, msg, cap, NULL, NULL);
  FILE *f = tmpfile();
  WT_TEST_REQUIRE(f, "tmpfile");
  WT_TEST_REQUIRE(acsgd_sender_save(snd, f) == WT_OK && acsgd_receiver_save(rcv, f) == WT_OK,
                  "%s", wt_last_error());
  long size = ftell(f);
  rewind(f);
  WT_TEST_REQUIRE(acsgd_sender_load(snd2, f) == WT_OK && acsgd_receiver_load(rcv2, f) == WT_OK,
                  "%s", wt_last_error());
  /* The same traffic into both pairs: identical messages and reconstructions. */
  size_t log_cap = (size_t)VISITS * (cap + N * sizeof(float));
  uint8_t *a = malloc(log_cap), *b = malloc(log_cap);
  wt_rng r1 = rng, r2 = rng;
  s_traffic(snd, rcv, &r1, VISITS, ids, IDS, msg, cap, a, &la);
  s_traffic(snd2, rcv2, &r2, VISITS, ids, IDS, msg, cap, b, &lb);
  WT_TEST_ASSERT(la == lb && !memcmp(a, b, la), "restored ends continue bitwise");
  WT_TEST_ASSERT(acsgd_sender_stats(snd2).delta > 0, "the restored cache was used");
  /* Truncated, damaged and mismatched records. */
  uint8_t *rec = malloc((size_t)size);
  rewind(f);
  WT_TEST_REQUIRE(fread(rec, 1, (size_t)size, f) == (size_t)size, "read back");
  fclose(f);
  FILE *t = fmemopen(rec, (size_t)size / 4, "rb");
  WT_TEST_ASSERT(acsgd_sender_load(snd2, t) == WT_ECORRUPT, "a truncated record: %s",
                 wt_last_error());
  int empty = 1;
  for (int i = 0; i < IDS; i++) empty &= acsgd_sender_cached(snd2, ids[i]) == NULL;
  WT_TEST_ASSERT(empty, "a refused record leaves the cache empty");
  fclose(t);
  const size_t at = 44 + 16 * CAP + 100; /* in the activations, after the slot table */
  rec[at] ^= 4;
  t = fmemopen(rec, (size_t)size, "rb");
  WT_TEST_ASSERT(acsgd_sender_load(snd2, t) == WT_ECORRUPT && strstr(wt_last_error(), "CRC"),
                 "a damaged record: %s", wt_last_error());
  fclose(t);
  rec[at] ^= 4;
  acsgd_options other = o;
  other.max_samples = CAP + 1;
  acsgd_sender *snd3 = acsgd_sender_new(&other);
  t = fmemopen(rec, (size_t)size, "rb");
  WT_TEST_ASSERT(acsgd_sender_load(snd3, t) == WT_EMISMATCH, "another bound: %s", wt_last_error());
  fclose(t);
  acsgd_sender_destroy(&snd), acsgd_sender_destroy(&snd2), acsgd_sender_destroy(&snd3);
  acsgd_receiver_destroy(&rcv), acsgd_receiver_destroy(&rcv2);
  free(msg), free(a), free(b), free(rec);
}

int main(void) {
  test_quantizer_bounds();
  test_caches_identical_and_delta_helps();
  test_mmap_cache();
  test_bounded_memory();
  test_lru_random_traffic();
  test_malformed_refused();
  test_checkpoint();
  return wt_test_finish("test_acsgd");
}
