/* test_codec_wire — the framed message: round trips for every codec, and refusal of truncated,
 * padded, mislabelled and damaged messages (every single-bit flip) without touching the output.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "compress/codec.h"
#include "common/common.h"
#include "common/rng.h"
#include "common/testing.h"

static const char *s_all[] = {"fp32", "fp16", "bf16", "int8", "int4", "topk", "randk", "sign"};

static float *s_randn(size_t n, uint64_t seed) {
  wt_rng rng;
  wt_rng_seed(&rng, seed);
  float *x = wt_xmalloc(n * sizeof *x);
  for (size_t i = 0; i < n; i++) x[i] = (float)wt_rng_normal(&rng);
  return x;
}

/* Every codec: a framed message decodes to what the raw payload decodes to, with the header
 * describing it; the block size travels, so the receiver needs no parameters. */
static void test_roundtrip(void) {
  size_t n = 3001;
  float *x = s_randn(n, 1), *want = wt_xmalloc(n * sizeof *want), *got = wt_xmalloc(n * 4);
  for (size_t c = 0; c < WT_ARRAY_LEN(s_all); c++) {
    compress_params p = compress_params_default();
    p.block = 100;
    p.k_frac = 0.05;
    compress_codec *codec = NULL;
    codec = compress_codec_new(s_all[c], &p);
    WT_TEST_REQUIRE(codec != NULL, "%s", wt_last_error());
    size_t cap = compress_wire_max_size(codec, n), len = 0, plen = 0;
    uint8_t *msg = wt_xmalloc(cap), *raw = wt_xmalloc(cap);
    WT_TEST_REQUIRE(compress_wire_encode(codec, x, n, msg, cap, &len) == WT_OK, "%s",
                    wt_last_error());
    WT_TEST_REQUIRE(compress_codec_encode(codec, x, n, raw, cap, &plen) == WT_OK, "raw");
    WT_TEST_ASSERT(len == plen + COMPRESS_WIRE_HEADER_SIZE, "%s: framed size", s_all[c]);
    WT_TEST_ASSERT(memcmp(msg + COMPRESS_WIRE_HEADER_SIZE, raw, plen) == 0, "%s payload", s_all[c]);
    compress_wire_info info;
    WT_TEST_ASSERT(compress_wire_peek(msg, len, &info) == WT_OK, "%s peek", s_all[c]);
    WT_TEST_ASSERT(info.codec == compress_codec_get_id(codec) && info.n == n &&
                       info.payload_len == plen,
                   "%s header fields", s_all[c]);
    compress_codec_decode(codec, raw, plen, want, n);
    WT_TEST_ASSERT(compress_wire_decode(msg, len, got, n) == WT_OK, "%s: %s", s_all[c],
                   wt_last_error());
    WT_TEST_ASSERT(memcmp(got, want, n * 4) == 0, "%s: wire decode differs", s_all[c]);
    memcpy(got, x, n * 4);
    WT_TEST_ASSERT(compress_wire_decode_add(msg, len, 2.0f, got, n) == WT_OK, "add");
    for (size_t i = 0; i < n; i++)
      if (got[i] != fmaf(2.0f, want[i], x[i])) {
        WT_TEST_ASSERT(0, "%s wire decode_add at %zu", s_all[c], i);
        break;
      }
    // Too small an output buffer is refused.
    WT_TEST_ASSERT(compress_wire_encode(codec, x, n, msg, len - 1, &plen) == WT_EINVAL, "cap");
    WT_TEST_ASSERT(compress_wire_encode(codec, x, n, msg, 10, &plen) == WT_EINVAL, "cap<header");
    free(msg), free(raw);
    compress_codec_destroy(&codec);
  }
  free(x), free(want), free(got);
}

static int s_untouched(const float *y, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (y[i] != 7.0f) return 0;
  return 1;
}

static void test_refusals(void) {
  size_t n = 200;
  float *x = s_randn(n, 2), *y = wt_xmalloc((n + 1) * sizeof *y);
  for (size_t i = 0; i <= n; i++) y[i] = 7.0f;
  compress_codec *codec = NULL;
  codec = compress_codec_new("int8", NULL);
  WT_TEST_REQUIRE(codec != NULL, "int8");
  size_t cap = compress_wire_max_size(codec, n) + 16, len;
  uint8_t *msg = wt_xmalloc(cap), *bad = wt_xmalloc(cap);
  WT_TEST_REQUIRE(compress_wire_encode(codec, x, n, msg, cap, &len) == WT_OK, "encode");
  // Truncated anywhere, and padded.
  for (size_t cut = 0; cut < len; cut += (cut < 40 ? 1 : 37))
    WT_TEST_ASSERT(compress_wire_decode(msg, cut, y, n) == WT_ECORRUPT, "truncated to %zu", cut);
  memcpy(bad, msg, len);
  bad[len] = 0;
  WT_TEST_ASSERT(compress_wire_decode(bad, len + 1, y, n) == WT_ECORRUPT, "padded");
  WT_TEST_ASSERT(strstr(wt_last_error(), "truncated or padded"), "%s", wt_last_error());
  // Wrong magic, version, codec id; wrong element count for this tensor.
  memcpy(bad, msg, len);
  bad[0] = 'X';
  WT_TEST_ASSERT(compress_wire_decode(bad, len, y, n) == WT_ECORRUPT, "magic");
  WT_TEST_ASSERT(strstr(wt_last_error(), "magic"), "%s", wt_last_error());
  memcpy(bad, msg, len);
  bad[4] = 9;
  WT_TEST_ASSERT(compress_wire_decode(bad, len, y, n) == WT_EMISMATCH, "version");
  memcpy(bad, msg, len);
  bad[5] = 200;
  WT_TEST_ASSERT(compress_wire_decode(bad, len, y, n) == WT_EMISMATCH, "codec id");
  WT_TEST_ASSERT(compress_wire_decode(msg, len, y, n - 1) == WT_EMISMATCH, "count");
  WT_TEST_ASSERT(strstr(wt_last_error(), "another tensor"), "%s", wt_last_error());
  // Every single-bit flip anywhere in the message is caught (CRC-32 detects all of them).
  size_t missed = 0;
  for (size_t bit = 0; bit < 8 * len; bit++) {
    memcpy(bad, msg, len);
    bad[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    if (compress_wire_decode_add(bad, len, 1.0f, y, n) == WT_OK) missed++;
  }
  WT_TEST_ASSERT(missed == 0, "%zu of %zu bit flips were decoded", missed, 8 * len);
  WT_TEST_ASSERT(s_untouched(y, n + 1), "a refused message wrote to y");
  // The original still decodes.
  WT_TEST_ASSERT(compress_wire_decode(msg, len, y, n) == WT_OK, "%s", wt_last_error());
  free(msg), free(bad), free(x), free(y);
  compress_codec_destroy(&codec);
}

int main(void) {
  test_roundtrip();
  test_refusals();
  return wt_test_finish("test_codec_wire");
}
