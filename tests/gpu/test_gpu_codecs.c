/* test_gpu_codecs — the GPU codecs write and read the CPU codecs' wire bytes, so GPU and CPU
 * peers interoperate. Exits 77 (skipped) without a CUDA device. For fp32, fp16, bf16, int8 and
 * int4 (nearest-even), sign, topk and randk, at block sizes 64, 100 (ragged last block) and n
 * (one scale), and int4 also at odd blocks (pairs across two blocks) on both sides of its
 * one-pass limit (7, 8191, 8192, 8193), on random values mixed with the awkward ones (NaN, ±inf,
 * ±0, float and half subnormals, values that round to half infinity, exact rounding ties):
 *   - GPU encode gives bitwise the CPU's payload on finite and infinite inputs, and a payload
 *     that decodes to the same floats (NaNs compared as NaNs) where the input holds NaNs: the
 *     payload bits of a NaN that went through arithmetic are the hardware's (x86 keeps the
 *     operand's, CUDA writes its canonical NaN), so they are not part of the wire contract;
 *   - GPU decode of the CPU's payload, and decode_add with alpha = -0.37, give bitwise the CPU's
 *     results (NaNs compared as NaNs);
 *   - the CPU decodes the GPU's payload (cross-decoding) to the same floats;
 *   - a payload of the wrong length is refused (WT_ECORRUPT) and y is left alone;
 *   - error feedback: three steps on finite gradients give the CPU's payloads and residual, bit
 *     for bit (an infinite gradient turns the residual into NaNs: inf - inf);
 *   - topk: the same k indices and values as the CPU's radix select, ties included, at several
 *     k; an index out of order is refused;
 *   - randk: the CPU's index list (compress/randk_draw.h, drawn on the device) at one segment,
 *     a segment and one, a ragged last segment and 2^22 elements, at k = 1% and k = n;
 *   - AC-SGD's row quantizer at 2, 4 and 8 bits: the CPU's payload and decodes (add or not),
 *     a NaN row and a negative step refused;
 *   - stochastic rounding, which has no GPU kernels, is refused with WT_ENOTSUP. */
#include <cuda_runtime.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "common/rng.h"
#include "common/testing.h"
#include "compress/acsgd.h"
#include "compress/codec.h"
#include "compress/codec_gpu.h"
#include "compress/ef.h"

static void *s_dev(size_t bytes) {
  void *d = NULL;
  WT_TEST_REQUIRE(cudaMalloc(&d, bytes ? bytes : 4) == cudaSuccess, "cudaMalloc %zu", bytes);
  return d;
}
static void s_h2d(void *d, const void *h, size_t bytes) {
  WT_TEST_REQUIRE(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice) == cudaSuccess, "h2d");
}
static void s_d2h(void *h, const void *d, size_t bytes) {
  WT_TEST_REQUIRE(cudaMemcpy(h, d, bytes, cudaMemcpyDeviceToHost) == cudaSuccess, "d2h");
}

/* Bitwise equality, except that any NaN equals any NaN (payload bits of a decoded NaN are the
 * codecs' business and both sides quiet them the same way, but a NaN compare is the contract). */
static int s_same_floats(const float *a, const float *b, size_t n, const char *what) {
  for (size_t i = 0; i < n; i++) {
    if (isnan(a[i]) && isnan(b[i])) continue;
    if (memcmp(&a[i], &b[i], sizeof(float)) != 0) {
      WT_TEST_ASSERT(0, "%s: element %zu: GPU %.9g (0x%08x) vs CPU %.9g", what, i, (double)a[i],
                     *(const unsigned *)&a[i], (double)b[i]);
      return 0;
    }
  }
  return 1;
}

/* A copy of x with every NaN (and, if `finite`, every infinity) replaced by 0.5. */
static float *s_without_nan(const float *x, size_t n, int finite) {
  float *y = wt_xmalloc(n * sizeof(float));
  for (size_t i = 0; i < n; i++) y[i] = isnan(x[i]) || (finite && isinf(x[i])) ? 0.5f : x[i];
  return y;
}

static float *s_input(size_t n, uint64_t seed) {
  wt_rng rng;
  wt_rng_seed(&rng, seed);
  float *x = wt_xmalloc(n * sizeof(float));
  for (size_t i = 0; i < n; i++) x[i] = (float)wt_rng_normal(&rng) * 0.01f;
  static const float special[] = {
      NAN,   -NAN,           INFINITY, -INFINITY, 0.0f,      -0.0f,          1e-40f, -3e-42f,
      6e-8f, -2.9802322e-8f, 65519.0f, 65520.0f,  -70000.0f, 1.00048828125f, 3.0f,   -127.5f};
  for (size_t k = 0; k < sizeof special / sizeof *special && 7 * k < n; k++)
    x[7 * k + 3] = special[k]; /* spread over the first blocks */
  return x;
}

static void s_check_codec(const char *name, size_t block, size_t n) {
  compress_params p = compress_params_default();
  p.block = block;
  compress_codec *c = NULL;
  WT_TEST_REQUIRE((c = compress_codec_new(name, &p)) != NULL, "%s", wt_last_error());
  char what[96];
  snprintf(what, sizeof what, "%s block %zu n %zu", name, block, n);
  WT_TEST_ASSERT(compress_gpu_supported(c), "%s runs on the GPU", what);
  size_t cap = compress_codec_max_size(c, n), len_c = 0, len_g = 0;
  float *x = s_input(n, 77 + n + block);
  uint8_t *pc = wt_xmalloc(cap), *pg = wt_xmalloc(cap);
  WT_TEST_REQUIRE(compress_codec_encode(c, x, n, pc, cap, &len_c) == WT_OK, "%s", wt_last_error());
  float *dx = s_dev(n * 4), *dy = s_dev(n * 4);
  uint8_t *dp = s_dev(cap);
  s_h2d(dx, x, n * 4);
  { /* bytes, on the input without its NaNs */
    float *xf = s_without_nan(x, n, 0);
    WT_TEST_REQUIRE(compress_codec_encode(c, xf, n, pc, cap, &len_c) == WT_OK, "%s",
                    wt_last_error());
    s_h2d(dx, xf, n * 4);
    WT_TEST_REQUIRE(compress_gpu_encode(c, dx, n, dp, cap, &len_g) == WT_OK, "%s", wt_last_error());
    s_d2h(pg, dp, cap);
    WT_TEST_ASSERT(len_g == len_c && memcmp(pg, pc, len_c) == 0, "%s: GPU payload = CPU payload",
                   what);
    free(xf);
  }
  WT_TEST_REQUIRE(compress_codec_encode(c, x, n, pc, cap, &len_c) == WT_OK, "%s", wt_last_error());
  s_h2d(dx, x, n * 4);
  WT_TEST_REQUIRE(compress_gpu_encode(c, dx, n, dp, cap, &len_g) == WT_OK, "%s", wt_last_error());
  s_d2h(pg, dp, cap);
  WT_TEST_ASSERT(len_g == len_c, "%s: GPU payload length = CPU payload length", what);
  /* Decode the CPU's bytes on the GPU. */
  float *yc = wt_xmalloc(n * 4), *yg = wt_xmalloc(n * 4), *base = s_input(n, 5 + n);
  s_h2d(dp, pc, len_c);
  WT_TEST_REQUIRE(compress_codec_decode(c, pc, len_c, yc, n) == WT_OK, "%s", wt_last_error());
  WT_TEST_REQUIRE(compress_gpu_decode(c, dp, len_c, dy, n) == WT_OK, "%s", wt_last_error());
  s_d2h(yg, dy, n * 4);
  snprintf(what, sizeof what, "%s block %zu decode", name, block);
  s_same_floats(yg, yc, n, what);
  /* decode_add onto the same base. */
  memcpy(yc, base, n * 4);
  s_h2d(dy, base, n * 4);
  WT_TEST_REQUIRE(compress_codec_decode_add(c, pc, len_c, -0.37f, yc, n) == WT_OK, "add");
  WT_TEST_REQUIRE(compress_gpu_decode_add(c, dp, len_c, -0.37f, dy, n) == WT_OK, "%s",
                  wt_last_error());
  s_d2h(yg, dy, n * 4);
  snprintf(what, sizeof what, "%s block %zu decode_add", name, block);
  s_same_floats(yg, yc, n, what);
  /* The CPU decodes the GPU's bytes (of the input with NaNs) to what it decodes its own to. */
  WT_TEST_REQUIRE(compress_codec_decode(c, pg, len_g, yc, n) == WT_OK, "%s", wt_last_error());
  WT_TEST_REQUIRE(compress_codec_decode(c, pc, len_c, yg, n) == WT_OK, "%s", wt_last_error());
  snprintf(what, sizeof what, "%s block %zu cross-decode", name, block);
  s_same_floats(yc, yg, n, what);
  /* A truncated payload is refused before anything is written. */
  s_h2d(dy, base, n * 4);
  WT_TEST_ASSERT(compress_gpu_decode(c, dp, len_c - 4, dy, n) == WT_ECORRUPT,
                 "%s: a short payload is refused", name);
  s_d2h(yg, dy, n * 4);
  WT_TEST_ASSERT(memcmp(yg, base, n * 4) == 0, "%s: a refused payload writes nothing", name);
  cudaFree(dx), cudaFree(dy), cudaFree(dp);
  free(x), free(pc), free(pg), free(yc), free(yg), free(base);
  compress_codec_destroy(&c);
}

/* Three error-feedback steps on the CPU (compress_ef) and on the GPU: the same payloads and
 * the same residual, bit for bit. */
static void test_error_feedback(const char *name) {
  const size_t n = 50001;
  compress_codec *c = NULL;
  WT_TEST_REQUIRE((c = compress_codec_new(name, NULL)) != NULL, "%s", wt_last_error());
  compress_ef *ef = NULL;
  ef = compress_ef_new(n);
  size_t cap = compress_codec_max_size(c, n), lc, lg;
  uint8_t *pc = wt_xmalloc(cap), *pg = wt_xmalloc(cap), *dp = s_dev(cap);
  float *dr = s_dev(n * 4), *dg = s_dev(n * 4), *r = wt_xmalloc(n * 4);
  WT_TEST_REQUIRE(cudaMemset(dr, 0, n * 4) == cudaSuccess, "memset");
  for (int step = 0; step < 3; step++) {
    float *g0 = s_input(n, 300 + (uint64_t)step), *g = s_without_nan(g0, n, 1);
    free(g0);
    s_h2d(dg, g, n * 4);
    WT_TEST_REQUIRE(compress_ef_encode(ef, c, g, pc, cap, &lc) == WT_OK, "%s", wt_last_error());
    WT_TEST_REQUIRE(compress_gpu_ef_encode(c, dr, dg, n, dp, cap, &lg) == WT_OK, "%s",
                    wt_last_error());
    s_d2h(pg, dp, lg);
    WT_TEST_ASSERT(lg == lc && memcmp(pg, pc, lc) == 0, "ef %s step %d: same payload", name, step);
    s_d2h(r, dr, n * 4);
    char what[64];
    snprintf(what, sizeof what, "ef %s step %d residual", name, step);
    s_same_floats(r, compress_ef_residual(ef), n, what);
    free(g);
  }
  cudaFree(dp), cudaFree(dr), cudaFree(dg);
  free(pc), free(pg), free(r);
  compress_ef_destroy(&ef);
  compress_codec_destroy(&c);
}

/* topk: the CPU's exact selection (ties to the lowest indices) on data with many equal
 * magnitudes, at several k; a payload with an index out of order is refused untouched. */
static void test_topk(void) {
  const size_t n = 200003;
  float *x = s_input(n, 4242);
  for (size_t i = 0; i < n; i += 3) x[i] = (i % 2 ? 0.5f : -0.5f); /* a third tie */
  static const double fracs[] = {0.01, 0.2, 0.5, 1.0, 1e-6};
  float *dx = s_dev(n * 4), *dy = s_dev(n * 4);
  s_h2d(dx, x, n * 4);
  for (size_t f = 0; f < sizeof fracs / sizeof *fracs; f++) {
    compress_params p = compress_params_default();
    p.k_frac = fracs[f];
    compress_codec *c = NULL;
    WT_TEST_REQUIRE((c = compress_codec_new("topk", &p)) != NULL, "%s", wt_last_error());
    size_t cap = compress_codec_max_size(c, n), lc, lg;
    uint8_t *pc = wt_xmalloc(cap), *pg = wt_xmalloc(cap), *dp = s_dev(cap);
    WT_TEST_REQUIRE(compress_codec_encode(c, x, n, pc, cap, &lc) == WT_OK, "%s", wt_last_error());
    WT_TEST_REQUIRE(compress_gpu_encode(c, dx, n, dp, cap, &lg) == WT_OK, "%s", wt_last_error());
    s_d2h(pg, dp, lg);
    WT_TEST_ASSERT(lg == lc && memcmp(pg, pc, lc) == 0, "topk k_frac %g: same payload", fracs[f]);
    float *yc = wt_xmalloc(n * 4), *yg = wt_xmalloc(n * 4);
    s_h2d(dp, pc, lc);
    WT_TEST_REQUIRE(compress_codec_decode(c, pc, lc, yc, n) == WT_OK, "decode");
    WT_TEST_REQUIRE(compress_gpu_decode(c, dp, lc, dy, n) == WT_OK, "%s", wt_last_error());
    s_d2h(yg, dy, n * 4);
    s_same_floats(yg, yc, n, "topk decode");
    if (lc >= 16) { /* swap the first two indices: out of order */
      memcpy(pg, pc + 4, 4), memcpy(pg + 4, pc, 4);
      s_h2d(dp, pg, 8);
      WT_TEST_ASSERT(compress_gpu_decode_add(c, dp, lc, 1.0f, dy, n) == WT_ECORRUPT,
                     "an index out of order is refused");
      s_d2h(yc, dy, n * 4);
      WT_TEST_ASSERT(memcmp(yc, yg, n * 4) == 0, "a refused topk payload writes nothing");
    }
    cudaFree(dp);
    free(pc), free(pg), free(yc), free(yg);
    compress_codec_destroy(&c);
  }
  cudaFree(dx), cudaFree(dy);
  free(x);
  test_error_feedback("topk");
}

/* randk: the device draws the CPU's list, whatever the number of segments and k. */
static void test_randk_sizes(void) {
  static const size_t ns[] = {5, 2048, 2049, 100003, (size_t)1 << 22};
  static const double fracs[] = {0.01, 1.0};
  for (size_t t = 0; t < sizeof ns / sizeof *ns; t++)
    for (size_t f = 0; f < 2; f++) {
      size_t n = ns[t];
      compress_params p = compress_params_default();
      p.k_frac = fracs[f];
      p.seed = 1000 + t;
      compress_codec *c = NULL;
      WT_TEST_REQUIRE((c = compress_codec_new("randk", &p)) != NULL, "%s", wt_last_error());
      size_t cap = compress_codec_max_size(c, n), lc = 0, lg = 0;
      float *x = s_input(n, 99 + t), *dx = s_dev(n * 4);
      uint8_t *pc = wt_xmalloc(cap), *pg = wt_xmalloc(cap), *dp = s_dev(cap);
      s_h2d(dx, x, n * 4);
      WT_TEST_REQUIRE(compress_codec_encode(c, x, n, pc, cap, &lc) == WT_OK, "%s", wt_last_error());
      WT_TEST_REQUIRE(compress_gpu_encode(c, dx, n, dp, cap, &lg) == WT_OK, "%s", wt_last_error());
      s_d2h(pg, dp, lg);
      /* compared as bits: NaN values are gathered, not computed, so their bits survive */
      WT_TEST_ASSERT(lg == lc && memcmp(pg, pc, lc) == 0, "randk n %zu k_frac %g: same payload", n,
                     fracs[f]);
      cudaFree(dx), cudaFree(dp);
      free(x), free(pc), free(pg);
      compress_codec_destroy(&c);
    }
}

/* AC-SGD's row quantizer: the CPU's payload and decodes, and its refusals. */
static void test_acsgd_rows(void) {
  const int rows = 37, cols = 100;
  size_t n = (size_t)rows * cols;
  float *x = s_input(n, 9), *base = s_input(n, 10);
  for (size_t i = 0; i < n; i++)
    if (!isfinite(x[i])) x[i] = 0.25f;                   /* finite rows; a NaN row is tried below */
  for (int j = 0; j < cols; j++) x[3 * cols + j] = 1.5f; /* a constant row: step 0 */
  float *dx = s_dev(n * 4), *dy = s_dev(n * 4), *yc = wt_xmalloc(n * 4), *yg = wt_xmalloc(n * 4);
  s_h2d(dx, x, n * 4);
  static const int bits[] = {2, 4, 8};
  for (int b = 0; b < 3; b++) {
    size_t len = acsgd_payload_bytes(rows, cols, bits[b]);
    uint8_t *pc = wt_xmalloc(len), *pg = wt_xmalloc(len), *dp = s_dev(len);
    WT_TEST_REQUIRE(acsgd_quantize_rows(x, rows, cols, bits[b], pc) == WT_OK, "%s",
                    wt_last_error());
    WT_TEST_REQUIRE(compress_gpu_acsgd_quantize_rows(dx, rows, cols, bits[b], dp) == WT_OK, "%s",
                    wt_last_error());
    s_d2h(pg, dp, len);
    WT_TEST_ASSERT(memcmp(pg, pc, len) == 0, "acsgd %d bits: GPU payload = CPU payload", bits[b]);
    for (int add = 0; add < 2; add++) {
      memcpy(yc, base, n * 4);
      s_h2d(dy, base, n * 4);
      WT_TEST_REQUIRE(acsgd_dequantize_rows(pc, rows, cols, bits[b], yc, add) == WT_OK, "cpu");
      WT_TEST_REQUIRE(compress_gpu_acsgd_dequantize_rows(dp, rows, cols, bits[b], dy, add) == WT_OK,
                      "%s", wt_last_error());
      s_d2h(yg, dy, n * 4);
      char what[64];
      snprintf(what, sizeof what, "acsgd %d bits decode (add %d)", bits[b], add);
      s_same_floats(yg, yc, n, what); /* base holds NaNs: added to, they stay NaNs */
    }
    float neg = -1.0f; /* row 2's step < 0: a damaged message, refused untouched */
    s_h2d(dp + 2 * 8 + 4, &neg, 4);
    s_h2d(dy, base, n * 4);
    WT_TEST_ASSERT(compress_gpu_acsgd_dequantize_rows(dp, rows, cols, bits[b], dy, 1) ==
                           WT_ECORRUPT &&
                       strstr(wt_last_error(), "row 2"),
                   "a negative step is refused: %s", wt_last_error());
    s_d2h(yg, dy, n * 4);
    WT_TEST_ASSERT(memcmp(yg, base, n * 4) == 0, "a refused acsgd message writes nothing");
    cudaFree(dp);
    free(pc), free(pg);
  }
  x[5 * cols + 7] = NAN;
  s_h2d(dx, x, n * 4);
  uint8_t *dp = s_dev(acsgd_payload_bytes(rows, cols, 8));
  WT_TEST_ASSERT(compress_gpu_acsgd_quantize_rows(dx, rows, cols, 8, dp) == WT_EINVAL &&
                     strstr(wt_last_error(), "row 5 holds a NaN"),
                 "a NaN row is refused: %s", wt_last_error());
  WT_TEST_ASSERT(compress_gpu_acsgd_quantize_rows(dx, rows, cols, 3, dp) == WT_EINVAL,
                 "3 bits refused");
  cudaFree(dp), cudaFree(dx), cudaFree(dy);
  free(x), free(base), free(yc), free(yg);
}

static void test_unsupported(void) {
  static const char *names[] = {"int8", "int4"};
  float *d = s_dev(1024 * 4);
  compress_params p = compress_params_default();
  p.stochastic = 1;
  for (size_t i = 0; i < 2; i++) {
    compress_codec *c = NULL;
    WT_TEST_REQUIRE((c = compress_codec_new(names[i], &p)) != NULL, "%s", wt_last_error());
    WT_TEST_ASSERT(!compress_gpu_supported(c), "stochastic %s stays on the host", names[i]);
    size_t len;
    WT_TEST_ASSERT(compress_gpu_encode(c, d, 16, d + 64, 4096, &len) == WT_ENOTSUP &&
                       strstr(wt_last_error(), "no GPU implementation"),
                   "stochastic %s is refused: %s", names[i], wt_last_error());
    compress_codec_destroy(&c);
  }
  cudaFree(d);
}

int main(void) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    printf("test_gpu_codecs: no CUDA device; skipped\n");
    return WT_TEST_SKIP;
  }
  static const char *codecs[] = {"fp32", "fp16", "bf16", "int8", "int4", "sign", "topk", "randk"};
  const size_t n = 100003; /* not a multiple of 8, 64 or 100 */
  for (size_t i = 0; i < sizeof codecs / sizeof *codecs; i++) {
    s_check_codec(codecs[i], 64, n);
    s_check_codec(codecs[i], 100, n);
    s_check_codec(codecs[i], n, n);
    s_check_codec(codecs[i], 64, 5); /* fewer elements than a block */
  }
  static const size_t int4_blocks[] = {7, 8191, 8192, 8193};
  for (size_t i = 0; i < sizeof int4_blocks / sizeof *int4_blocks; i++)
    s_check_codec("int4", int4_blocks[i], n);
  test_randk_sizes();
  test_error_feedback("sign");
  test_error_feedback("int8");
  test_error_feedback("bf16");
  test_error_feedback("randk");
  test_error_feedback("int4");
  test_topk();
  test_acsgd_rows();
  test_unsupported();
  return wt_test_finish("test_gpu_codecs");
}
