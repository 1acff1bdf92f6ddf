/* test_codec_ef — error feedback: nothing is lost over steps (sent + residual == sum of inputs),
 * the residual stays bounded while the inputs pile up, and the residual's checkpoint round-trips
 * and refuses damage.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compress/codec.h"
#include "common/common.h"
#include "compress/ef.h"
#include "common/rng.h"
#include "common/testing.h"

static double s_norm(const double *v, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; i++) s += v[i] * v[i];
  return sqrt(s);
}

/* T steps of the same gradient plus noise through codec `name` with EF (use_ef) or without.
 * Returns |sum sent - sum g| / |sum g|; checks conservation when EF is on. */
static double s_run(const char *name, double k_frac, int use_ef, int steps) {
  size_t n = 4000;
  compress_params p = compress_params_default();
  p.k_frac = k_frac;
  compress_codec *codec = NULL;
  codec = compress_codec_new(name, &p);
  WT_TEST_REQUIRE(codec != NULL, "%s", wt_last_error());
  compress_ef *ef = NULL;
  ef = compress_ef_new(n);
  wt_rng rng;
  wt_rng_seed(&rng, 99);
  float *base = wt_xmalloc(n * 4), *g = wt_xmalloc(n * 4), *sent = wt_xmalloc(n * 4);
  double *sum_g = wt_xcalloc(n, 8), *sum_sent = wt_xcalloc(n, 8), *diff = wt_xmalloc(n * 8);
  for (size_t i = 0; i < n; i++) base[i] = (float)wt_rng_normal(&rng) * (i % 3 ? 1.0f : 0.01f);
  size_t cap = compress_codec_max_size(codec, n), len;
  uint8_t *buf = wt_xmalloc(cap);
  for (int t = 0; t < steps; t++) {
    compress_codec_set_seed(codec, (uint64_t)t);
    for (size_t i = 0; i < n; i++) g[i] = base[i] + 0.5f * (float)wt_rng_normal(&rng);
    int rc = use_ef ? compress_ef_encode(ef, codec, g, buf, cap, &len)
                    : compress_codec_encode(codec, g, n, buf, cap, &len);
    WT_TEST_REQUIRE(rc == WT_OK, "%s step %d: %s", name, t, wt_last_error());
    WT_TEST_REQUIRE(compress_codec_decode(codec, buf, len, sent, n) == WT_OK, "decode");
    for (size_t i = 0; i < n; i++) sum_g[i] += g[i], sum_sent[i] += sent[i];
  }
  const float *r = compress_ef_residual(ef);
  if (use_ef) { // conservation: sum sent + residual == sum of inputs (float rounding only)
    for (size_t i = 0; i < n; i++) diff[i] = sum_sent[i] + r[i] - sum_g[i];
    double rel = s_norm(diff, n) / s_norm(sum_g, n);
    WT_TEST_ASSERT(rel < 1e-4, "%s: sent + residual misses the inputs by %.2e", name, rel);
  }
  for (size_t i = 0; i < n; i++) diff[i] = sum_sent[i] - sum_g[i];
  double err = s_norm(diff, n) / s_norm(sum_g, n);
  free(buf), free(base), free(g), free(sent), free(sum_g), free(sum_sent), free(diff);
  compress_ef_destroy(&ef);
  compress_codec_destroy(&codec);
  return err;
}

static void test_convergence(void) {
  const char *names[] = {"topk", "sign", "randk", "int4", "int8", "fp16"};
  for (size_t c = 0; c < WT_ARRAY_LEN(names); c++) {
    double short_run = s_run(names[c], 0.1, 1, 50), long_run = s_run(names[c], 0.1, 1, 400);
    // The residual is bounded, so the relative gap shrinks like 1/T.
    WT_TEST_ASSERT(long_run < 0.05 && long_run < short_run,
                   "%s with EF: gap %.4f after 50 steps,"
                   " %.4f after 400",
                   names[c], short_run, long_run);
  }
  // Control: without EF top-k (10%) and sign lose much of the signal, so the test above can fail.
  double no_ef_topk = s_run("topk", 0.1, 0, 400), no_ef_sign = s_run("sign", 0.1, 0, 400);
  WT_TEST_ASSERT(no_ef_topk > 0.3 && no_ef_sign > 0.1, "control without EF: topk %.3f sign %.3f",
                 no_ef_topk, no_ef_sign);
}

/* The framed variant updates the residual exactly as the raw one does, and its message decodes
 * to what was subtracted. Also an empty tensor works. */
static void test_wire_and_empty(void) {
  size_t n = 1000, len1, len2;
  compress_ef *a = NULL, *b = NULL, *empty = NULL;
  a = compress_ef_new(n);
  b = compress_ef_new(n);
  compress_codec *codec = NULL;
  codec = compress_codec_new("topk", NULL);
  float *g = wt_xmalloc(n * 4), *sent = wt_xmalloc(n * 4);
  wt_rng rng;
  wt_rng_seed(&rng, 8);
  size_t cap = compress_wire_max_size(codec, n);
  uint8_t *raw = wt_xmalloc(cap), *msg = wt_xmalloc(cap);
  for (int step = 0; step < 3; step++) {
    for (size_t i = 0; i < n; i++) g[i] = (float)wt_rng_normal(&rng);
    WT_TEST_REQUIRE(compress_ef_encode(a, codec, g, raw, cap, &len1) == WT_OK, "raw");
    WT_TEST_REQUIRE(compress_ef_wire_encode(b, codec, g, msg, cap, &len2) == WT_OK, "%s",
                    wt_last_error());
    WT_TEST_ASSERT(len2 == len1 + COMPRESS_WIRE_HEADER_SIZE, "framed size");
    WT_TEST_ASSERT(memcmp(compress_ef_residual(a), compress_ef_residual(b), n * 4) == 0,
                   "step %d: residuals differ", step);
    WT_TEST_ASSERT(compress_wire_decode(msg, len2, sent, n) == WT_OK, "%s", wt_last_error());
  }
  WT_TEST_ASSERT(compress_ef_wire_encode(b, codec, g, msg, len2 - 1, &len2) == WT_EINVAL, "cap");
  empty = compress_ef_new(0);
  size_t len = 1;
  WT_TEST_ASSERT(compress_ef_encode(empty, codec, NULL, raw, cap, &len) == WT_OK && len == 0,
                 "empty tensor: %s", wt_last_error());
  compress_ef_destroy(&empty);
  free(g), free(sent), free(raw), free(msg);
  compress_codec_destroy(&codec);
  compress_ef_destroy(&a);
  compress_ef_destroy(&b);
}

static void test_checkpoint(void) {
  size_t n = 777, len;
  compress_ef *a = NULL, *b = NULL, *other = NULL;
  a = compress_ef_new(n);
  b = compress_ef_new(n);
  other = compress_ef_new(n + 1);
  compress_codec *codec = NULL;
  codec = compress_codec_new("sign", NULL);
  float *g = wt_xmalloc(n * 4);
  wt_rng rng;
  wt_rng_seed(&rng, 5);
  for (size_t i = 0; i < n; i++) g[i] = (float)wt_rng_normal(&rng);
  size_t cap = compress_codec_max_size(codec, n);
  uint8_t *out = wt_xmalloc(cap);
  WT_TEST_REQUIRE(compress_ef_encode(a, codec, g, out, cap, &len) == WT_OK, "step");
  // Too small an output buffer: refused and the residual is unchanged.
  float *before = wt_xmalloc(n * 4);
  memcpy(before, compress_ef_residual(a), n * 4);
  WT_TEST_ASSERT(compress_ef_encode(a, codec, g, out, cap - 1, &len) == WT_EINVAL, "cap");
  WT_TEST_ASSERT(memcmp(before, compress_ef_residual(a), n * 4) == 0, "residual kept");
  // Buffer round trip.
  size_t size = compress_ef_saved_size(a);
  uint8_t *buf = wt_xmalloc(size + 1);
  WT_TEST_REQUIRE(compress_ef_save_buffer(a, buf, size, &len) == WT_OK && len == size, "save");
  WT_TEST_ASSERT(compress_ef_load_buffer(b, buf, len) == WT_OK, "%s", wt_last_error());
  WT_TEST_ASSERT(memcmp(compress_ef_residual(a), compress_ef_residual(b), n * 4) == 0, "equal");
  // Damage: truncated, padded, flipped byte, wrong magic, another tensor's size.
  compress_ef_reset(b);
  WT_TEST_ASSERT(compress_ef_load_buffer(b, buf, len - 1) == WT_ECORRUPT, "truncated");
  WT_TEST_ASSERT(compress_ef_load_buffer(b, buf, 10) == WT_ECORRUPT, "header only");
  WT_TEST_ASSERT(compress_ef_load_buffer(b, buf, len + 1) == WT_ECORRUPT, "padded");
  buf[100] ^= 0x10;
  WT_TEST_ASSERT(compress_ef_load_buffer(b, buf, len) == WT_ECORRUPT, "flipped");
  WT_TEST_ASSERT(strstr(wt_last_error(), "checksum"), "%s", wt_last_error());
  buf[100] ^= 0x10;
  buf[0] = 'Z';
  WT_TEST_ASSERT(compress_ef_load_buffer(b, buf, len) == WT_ECORRUPT, "magic");
  buf[0] = 'W';
  WT_TEST_ASSERT(compress_ef_load_buffer(other, buf, len) == WT_EMISMATCH, "size");
  WT_TEST_ASSERT(compress_ef_residual(b)[0] == 0.0f, "refused loads left b at zero");
  // FILE round trip, with something after the residual in the same stream.
  FILE *f = tmpfile();
  WT_TEST_REQUIRE(f != NULL, "tmpfile");
  WT_TEST_ASSERT(compress_ef_save(a, f) == WT_OK, "save file");
  fputs("tail", f);
  rewind(f);
  WT_TEST_ASSERT(compress_ef_load(b, f) == WT_OK, "%s", wt_last_error());
  WT_TEST_ASSERT(memcmp(compress_ef_residual(a), compress_ef_residual(b), n * 4) == 0, "file eq");
  char tail[5] = {0};
  WT_TEST_ASSERT(fread(tail, 1, 4, f) == 4 && strcmp(tail, "tail") == 0, "stream position");
  fclose(f);
  f = tmpfile();
  WT_TEST_REQUIRE(f != NULL, "tmpfile");
  WT_TEST_ASSERT(fwrite(buf, 1, 50, f) == 50, "write");
  rewind(f);
  WT_TEST_ASSERT(compress_ef_load(b, f) == WT_ECORRUPT, "truncated file");
  fclose(f);
  free(buf), free(out), free(g), free(before);
  compress_codec_destroy(&codec);
  compress_ef_destroy(&a);
  compress_ef_destroy(&b);
  compress_ef_destroy(&other);
  WT_TEST_ASSERT(a == NULL, "destroy clears");
}

int main(void) {
  test_convergence();
  test_wire_and_empty();
  test_checkpoint();
  return wt_test_finish("test_codec_ef");
}
