/* codec_gpu — argument and payload checks for the GPU codecs, then the CUDA kernels
 * (compress/cuda) when this build has them. */
#include "compress/codec_gpu.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <stdint.h>

#include "compress/acsgd.h"
#include "compress/codec_internal.h"

#ifdef WT_COMPRESS_HAVE_CUDA
/* compress/cuda/codec_gpu.cu: 0, or -1 with `why` set to the CUDA error. */
int compress_cuda_encode(int id, const float *x, size_t n, size_t block, uint8_t *out, char *why,
                         size_t why_len);
int compress_cuda_decode(int id, const uint8_t *in, size_t n, size_t block, float alpha, int add,
                         float *y, char *why, size_t why_len);
int compress_cuda_add(float *r, const float *g, size_t n, char *why, size_t why_len);
int compress_cuda_topk_encode(const float *x, size_t n, size_t k, uint8_t *out, char *why,
                              size_t why_len);
int compress_cuda_randk_encode(const float *x, size_t n, size_t k, uint64_t seed, uint8_t *out,
                               char *why, size_t why_len);
int compress_cuda_acsgd_quantize(const float *x, int rows, int cols, int bits, uint8_t *payload,
                                 int *bad, char *why, size_t why_len);
int compress_cuda_acsgd_dequantize(const uint8_t *payload, int rows, int cols, int bits, float *out,
                                   int add, char *why, size_t why_len);
int compress_cuda_copy_to_host(void *dst, const void *src, size_t bytes, char *why, size_t why_len);
int compress_cuda_topk_decode(const uint8_t *in, size_t k, size_t n, float alpha, int add, float *y,
                              size_t *bad, char *why, size_t why_len);
int compress_cuda_is_device_memory(const void *p);
#endif

int compress_gpu_is_device_memory(const void *p) {
#ifdef WT_COMPRESS_HAVE_CUDA
  return p && compress_cuda_is_device_memory(p);
#else
  (void)p;
  return 0;
#endif
}

int compress_gpu_supported(const compress_codec *c) {
#ifdef WT_COMPRESS_HAVE_CUDA
  const compress_params *p = compress_codec_params(c);
  switch (compress_codec_get_id(c)) {
  case COMPRESS_CODEC_FP32:
  case COMPRESS_CODEC_FP16:
  case COMPRESS_CODEC_BF16:
  case COMPRESS_CODEC_SIGN:
  case COMPRESS_CODEC_TOPK:
  case COMPRESS_CODEC_RANDK:
    return 1;
  case COMPRESS_CODEC_INT8:
  case COMPRESS_CODEC_INT4:
    return !p->stochastic;
  default:
    return 0;
  }
#else
  (void)c;
  return 0;
#endif
}

static int s_check(const compress_codec *c, const void *a, const void *b) {
  if (!compress_gpu_supported(c)) {
#ifdef WT_COMPRESS_HAVE_CUDA
    return wt_fail(WT_ENOTSUP,
                   "codec %s%s has no GPU implementation yet; copy the tensor to the host and "
                   "use compress_codec_encode/decode",
                   compress_codec_name(c),
                   compress_codec_params(c)->stochastic ? " with stochastic rounding" : "");
#else
    return wt_fail(WT_ENOTSUP, "this build has no CUDA codecs (configure with -DWANTRAIN_CUDA=ON); "
                               "use compress_codec_encode/decode on host buffers");
#endif
  }
  if (((uintptr_t)a | (uintptr_t)b) & 3)
    return wt_fail(WT_EINVAL, "GPU codec %s: buffers must be 4-byte aligned device memory",
                   compress_codec_name(c));
  return WT_OK;
}

int compress_gpu_encode(const compress_codec *c, const float *x, size_t n, void *out, size_t cap,
                        size_t *len) {
  WT_CHECK(s_check(c, x, out));
  size_t need = compress_codec_max_size(c, n);
  WT_CHECK(compress_check_cap(compress_codec_name(c), need, cap));
#ifdef WT_COMPRESS_HAVE_CUDA
  char why[256];
  size_t block = compress_block_of(n, compress_codec_params(c));
  if (compress_codec_get_id(c) == COMPRESS_CODEC_RANDK) { /* the CPU's draw, on the device */
    if (n > UINT32_MAX)
      return wt_fail(WT_EINVAL, "randk: %zu elements do not fit 32-bit indices", n);
    size_t k = compress_topk_count(n, compress_codec_params(c)->k_frac);
    if (k &&
        compress_cuda_randk_encode(x, n, k, compress_codec_params(c)->seed, out, why, sizeof why))
      return wt_fail(WT_EIO, "GPU codec randk encode: CUDA error: %s", why);
    *len = need;
    return WT_OK;
  }
  if (compress_codec_get_id(c) == COMPRESS_CODEC_TOPK) {
    if (n > INT_MAX) /* the scans count in int */
      return wt_fail(WT_EINVAL, "GPU topk: %zu elements are more than %d; compress in chunks", n,
                     INT_MAX);
    size_t k = compress_topk_count(n, compress_codec_params(c)->k_frac);
    if (k && compress_cuda_topk_encode(x, n, k, out, why, sizeof why))
      return wt_fail(WT_EIO, "GPU codec topk encode: CUDA error: %s", why);
    *len = need;
    return WT_OK;
  }
  if (n && compress_cuda_encode(compress_codec_get_id(c), x, n, block, out, why, sizeof why))
    return wt_fail(WT_EIO, "GPU codec %s encode: CUDA error: %s", compress_codec_name(c), why);
#endif
  *len = need;
  return WT_OK;
}

/* topk payloads carry their own k (any k <= n, as the CPU decoder accepts); every index is
 * checked on the GPU before y is touched. */
static int s_topk_decode(const void *in, size_t len, float alpha, int add, float *y, size_t n) {
  if (len % 8 != 0 || len / 8 > n)
    return wt_fail(WT_ECORRUPT,
                   "topk decode: payload of %zu bytes cannot hold index/value pairs for a "
                   "%zu-element tensor; the message is damaged",
                   len, n);
#ifdef WT_COMPRESS_HAVE_CUDA
  char why[256];
  size_t bad = 0;
  int rc = compress_cuda_topk_decode(in, len / 8, n, alpha, add, y, &bad, why, sizeof why);
  if (rc > 0)
    return wt_fail(WT_ECORRUPT,
                   "topk decode: index at position %zu is out of range or out of order; the "
                   "message is damaged",
                   bad);
  if (rc < 0) return wt_fail(WT_EIO, "GPU codec topk decode: CUDA error: %s", why);
#else
  (void)in, (void)alpha, (void)add, (void)y;
#endif
  return WT_OK;
}

static int s_decode(const compress_codec *c, const void *in, size_t len, float alpha, int add,
                    float *y, size_t n) {
  WT_CHECK(s_check(c, in, y));
  if (compress_codec_get_id(c) == COMPRESS_CODEC_TOPK ||
      compress_codec_get_id(c) == COMPRESS_CODEC_RANDK) /* one layout */
    return s_topk_decode(in, len, alpha, add, y, n);
  WT_CHECK(compress_check_len(compress_codec_name(c), len, compress_codec_max_size(c, n), n));
#ifdef WT_COMPRESS_HAVE_CUDA
  char why[256];
  size_t block = compress_block_of(n, compress_codec_params(c));
  if (n &&
      compress_cuda_decode(compress_codec_get_id(c), in, n, block, alpha, add, y, why, sizeof why))
    return wt_fail(WT_EIO, "GPU codec %s decode: CUDA error: %s", compress_codec_name(c), why);
#else
  (void)alpha, (void)add;
#endif
  return WT_OK;
}

int compress_gpu_decode(const compress_codec *c, const void *in, size_t len, float *y, size_t n) {
  return s_decode(c, in, len, 1.0f, 0, y, n);
}

int compress_gpu_decode_add(const compress_codec *c, const void *in, size_t len, float alpha,
                            float *y, size_t n) {
  return s_decode(c, in, len, alpha, 1, y, n);
}

int compress_gpu_ef_encode(const compress_codec *c, float *r, const float *g, size_t n, void *out,
                           size_t cap, size_t *len) {
  *len = 0;
  WT_CHECK(s_check(c, r, g));
  WT_CHECK(s_check(c, out, out));
  WT_CHECK(compress_check_cap("ef", compress_codec_max_size(c, n), cap));
#ifdef WT_COMPRESS_HAVE_CUDA
  char why[256];
  if (n && compress_cuda_add(r, g, n, why, sizeof why))
    return wt_fail(WT_EIO, "GPU error feedback: CUDA error: %s", why);
#endif
  WT_CHECK(compress_gpu_encode(c, r, n, out, cap, len));
  return compress_gpu_decode_add(c, out, *len, -1.0f, r, n); /* our own payload: valid */
}

/* ---- AC-SGD rows ---------------------------------------------------------------------------- */

static int s_acsgd_shape(int rows, int cols, int bits) {
  if ((bits != 2 && bits != 4 && bits != 8) || rows <= 0 || cols <= 0)
    return wt_fail(WT_EINVAL, "acsgd: cannot quantize %dx%d at %d bits (bits must be 2, 4 or 8)",
                   rows, cols, bits);
#ifndef WT_COMPRESS_HAVE_CUDA
  return wt_fail(WT_ENOTSUP, "this build has no CUDA codecs (configure with -DWANTRAIN_CUDA=ON); "
                             "use acsgd_quantize_rows on host buffers");
#else
  return WT_OK;
#endif
}

int compress_gpu_acsgd_quantize_rows(const float *x, int rows, int cols, int bits,
                                     uint8_t *payload) {
  WT_CHECK(s_acsgd_shape(rows, cols, bits));
  if (((uintptr_t)x | (uintptr_t)payload) & 3)
    return wt_fail(WT_EINVAL, "GPU acsgd: buffers must be 4-byte aligned device memory");
#ifdef WT_COMPRESS_HAVE_CUDA
  char why[256];
  int bad = -1,
      rc = compress_cuda_acsgd_quantize(x, rows, cols, bits, payload, &bad, why, sizeof why);
  if (rc > 0)
    return wt_fail(WT_EINVAL, "acsgd: row %d holds a NaN or Inf; the model has diverged", bad);
  if (rc < 0) return wt_fail(WT_EIO, "GPU acsgd quantize: CUDA error: %s", why);
#endif
  return WT_OK;
}

int compress_gpu_acsgd_dequantize_rows(const uint8_t *payload, int rows, int cols, int bits,
                                       float *out, int add) {
  WT_CHECK(s_acsgd_shape(rows, cols, bits));
  if (((uintptr_t)out | (uintptr_t)payload) & 3)
    return wt_fail(WT_EINVAL, "GPU acsgd: buffers must be 4-byte aligned device memory");
#ifdef WT_COMPRESS_HAVE_CUDA
  /* The row scales come to the host and are checked there, with the CPU's words, before any
   * kernel writes to out. */
  float *sc = wt_xmalloc((size_t)rows * 2 * sizeof(float));
  char why[256];
  int rc =
      compress_cuda_copy_to_host(sc, payload, (size_t)rows * 2 * sizeof(float), why, sizeof why);
  for (int i = 0; rc == 0 && i < rows; i++) {
    float lo = sc[2 * i], step = sc[2 * i + 1];
    float top = lo + (float)((1u << bits) - 1u) * step;
    if (!isfinite(lo) || !isfinite(step) || step < 0 || !isfinite(top)) {
      free(sc);
      return wt_fail(WT_ECORRUPT,
                     "acsgd message: row %d has scale (lo %g, step %g); the message is corrupt", i,
                     (double)lo, (double)step);
    }
  }
  free(sc);
  if (rc == 0)
    rc = compress_cuda_acsgd_dequantize(payload, rows, cols, bits, out, add, why, sizeof why);
  if (rc) return wt_fail(WT_EIO, "GPU acsgd dequantize: CUDA error: %s", why);
#else
  (void)add;
#endif
  return WT_OK;
}
