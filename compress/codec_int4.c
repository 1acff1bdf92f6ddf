/* codec_int4 — stub (being implemented): refuses with WT_ENOTSUP. */
#include "codec_internal.h"

static size_t s_max_size(size_t n, const compress_params *p) {
  (void)p;
  return 4 * n;
}
static int s_encode(const float *x, size_t n, const compress_params *p, uint8_t *out, size_t cap,
                    size_t *len) {
  (void)x, (void)n, (void)p, (void)out, (void)cap, (void)len;
  return wt_fail(WT_ENOTSUP, "int4: not implemented yet");
}
static int s_decode(const uint8_t *in, size_t len, size_t n, const compress_params *p, float *y) {
  (void)in, (void)len, (void)n, (void)p, (void)y;
  return wt_fail(WT_ENOTSUP, "int4: not implemented yet");
}
static int s_decode_add(const uint8_t *in, size_t len, size_t n, const compress_params *p,
                        float alpha, float *y) {
  (void)in, (void)len, (void)n, (void)p, (void)y, (void)alpha;
  return wt_fail(WT_ENOTSUP, "int4: not implemented yet");
}
const compress_codec_ops compress_int4_ops = {"int4", COMPRESS_CODEC_INT4, s_max_size, s_encode,
                                              s_decode, s_decode_add};
