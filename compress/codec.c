/* codec — the codec registry, parameter checks and the compress_codec handle.
 *
 * The handle only pairs an ops table with normalised parameters; every size and content check
 * on payloads lives in the codec files, so calling an ops table directly is just as safe.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "compress/codec.h"
#include "compress/codec_internal.h"
#include "common/common.h"

struct compress_codec {
  const compress_codec_ops *ops;
  compress_params params;
};

/* The one registration point: a codec exists once it is listed here. */
static const compress_codec_ops *const s_registry[] = {
    &compress_fp32_ops, &compress_fp16_ops, &compress_bf16_ops,  &compress_int8_ops,
    &compress_int4_ops, &compress_topk_ops, &compress_randk_ops, &compress_sign_ops,
};

static atomic_int s_simd = 1;

int compress_simd_enabled(void) {
  return atomic_load_explicit(&s_simd, memory_order_relaxed);
}

int compress_codec_set_simd(int enable) {
  return atomic_exchange(&s_simd, enable ? 1 : 0);
}

const char *compress_codec_names(void) {
  return "fp32|fp16|bf16|int8|int4|topk|randk|sign";
}

const compress_codec_ops *compress_codec_ops_by_name(const char *name) {
  for (size_t i = 0; name && i < WT_ARRAY_LEN(s_registry); i++)
    if (strcmp(s_registry[i]->name, name) == 0) return s_registry[i];
  return NULL;
}

const compress_codec_ops *compress_codec_ops_by_id(int id) {
  for (size_t i = 0; i < WT_ARRAY_LEN(s_registry); i++)
    if ((int)s_registry[i]->id == id) return s_registry[i];
  return NULL;
}

compress_params compress_params_default(void) {
  compress_params p = {COMPRESS_DEFAULT_BLOCK, COMPRESS_DEFAULT_K_FRAC, 0, 0};
  return p;
}

int compress_params_normalize(compress_params *p) {
  if (p->block == 0) p->block = COMPRESS_DEFAULT_BLOCK;
  if (p->k_frac == 0) p->k_frac = COMPRESS_DEFAULT_K_FRAC;
  if (!(p->k_frac > 0 && p->k_frac <= 1)) // also refuses NaN
    return wt_fail(WT_EINVAL, "codec params: k_frac %g is outside (0, 1]; use e.g. 0.01 for 1%%",
                   p->k_frac);
  if (p->stochastic != 0 && p->stochastic != 1)
    return wt_fail(WT_EINVAL, "codec params: stochastic must be 0 or 1, not %d", p->stochastic);
  return WT_OK;
}

static compress_codec *s_codec_make(const compress_codec_ops *ops, const compress_params *params) {
  compress_params p = params ? *params : compress_params_default();
  if (compress_params_normalize(&p) != WT_OK) return NULL;
  compress_codec *self = wt_xcalloc(1, sizeof *self);
  self->ops = ops;
  self->params = p;
  return self;
}

compress_codec *compress_codec_new(const char *name, const compress_params *params) {
  const compress_codec_ops *ops = compress_codec_ops_by_name(name);
  if (!ops) {
    wt_fail(WT_ENOTFOUND, "unknown codec '%s'; choose one of %s", name ? name : "(null)",
            compress_codec_names());
    return NULL;
  }
  return s_codec_make(ops, params);
}

compress_codec *compress_codec_new_by_id(int id, const compress_params *params) {
  const compress_codec_ops *ops = compress_codec_ops_by_id(id);
  if (!ops) {
    wt_fail(WT_ENOTFOUND, "unknown codec id %d; known codecs are %s", id, compress_codec_names());
    return NULL;
  }
  return s_codec_make(ops, params);
}

void compress_codec_destroy(compress_codec **self_p) {
  if (!self_p || !*self_p) return;
  free(*self_p);
  *self_p = NULL;
}

const char *compress_codec_name(const compress_codec *self) {
  return self->ops->name;
}
compress_codec_id compress_codec_get_id(const compress_codec *self) {
  return self->ops->id;
}
const compress_codec_ops *compress_codec_get_ops(const compress_codec *self) {
  return self->ops;
}
const compress_params *compress_codec_params(const compress_codec *self) {
  return &self->params;
}
void compress_codec_set_seed(compress_codec *self, uint64_t seed) {
  self->params.seed = seed;
}

size_t compress_codec_max_size(const compress_codec *self, size_t n) {
  return self->ops->max_size(n, &self->params);
}

int compress_codec_encode(const compress_codec *self, const float *x, size_t n, void *out,
                          size_t cap, size_t *len) {
  *len = 0;
  return self->ops->encode(x, n, &self->params, out, cap, len);
}

int compress_codec_decode(const compress_codec *self, const void *in, size_t len, float *y,
                          size_t n) {
  return self->ops->decode(in, len, n, &self->params, y);
}

int compress_codec_decode_add(const compress_codec *self, const void *in, size_t len, float alpha,
                              float *y, size_t n) {
  return self->ops->decode_add(in, len, n, &self->params, alpha, y);
}

size_t compress_topk_count(size_t n, double k_frac) {
  if (n == 0) return 0;
  double k = ceil(k_frac * (double)n);
  if (!(k >= 1)) return 1; // also NaN
  return k >= (double)n ? n : (size_t)k;
}
