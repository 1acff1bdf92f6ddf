/* ef — error feedback: the residual of one tensor, its update, and its checkpoint.
 *
 * The update runs in place on the residual: r += g; encode(r); r -= decode(payload), the last
 * step being a decode_add with alpha = -1 (one fused multiply-add, so exactly r - decoded).
 * That needs no second buffer of n floats per tensor.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "common/bytes.h" // defines: wt_crc32 (zlib), little-endian fields

#include "compress/codec_internal.h"
#include "compress/ef.h"

#define S_MAGIC "WTEF"
#define S_VERSION 1u
#define S_HEADER 16 /* magic, version, n */

struct compress_ef {
  size_t n;
  float *r; // (n,) what earlier steps did not send
};

compress_ef *compress_ef_new(size_t n) {
  compress_ef *self = wt_xcalloc(1, sizeof *self);
  self->n = n;
  self->r = wt_xcalloc(n ? n : 1, sizeof(float));
  return self;
}

void compress_ef_destroy(compress_ef **self_p) {
  if (!self_p || !*self_p) return;
  free((*self_p)->r);
  free(*self_p);
  *self_p = NULL;
}

size_t compress_ef_size(const compress_ef *self) {
  return self->n;
}
const float *compress_ef_residual(const compress_ef *self) {
  return self->r;
}
float *compress_ef_residual_data(compress_ef *self) {
  return self->r;
}
void compress_ef_reset(compress_ef *self) {
  memset(self->r, 0, self->n * sizeof(float));
}

typedef int (*s_encode_fn)(const compress_codec *, const float *, size_t, void *, size_t, size_t *);

static int s_ef_step(compress_ef *self, const compress_codec *codec, const float *g, void *out,
                     size_t cap, size_t *len, s_encode_fn encode, size_t header) {
  *len = 0;
  const size_t n = self->n;
  float *r = self->r;
  // Refuse before r changes: undoing r += g later would not give back r's exact bits.
  WT_CHECK(compress_check_cap("ef", header + compress_codec_max_size(codec, n), cap));
  if (compress_codec_get_id(codec) == COMPRESS_CODEC_TOPK ||
      compress_codec_get_id(codec) == COMPRESS_CODEC_RANDK) {
    if (n > UINT32_MAX)
      return wt_fail(WT_EINVAL, "ef: %s carries 32-bit indices; split the %zu-element tensor",
                     compress_codec_name(codec), n);
  }
#pragma omp parallel for if (n >= COMPRESS_OMP_MIN) schedule(static)
  for (size_t i = 0; i < n; i++) r[i] += g[i];
  WT_CHECK(encode(codec, r, n, out, cap, len));
  // Our own payload cannot be corrupt: this only subtracts what was sent.
  return compress_codec_decode_add(codec, (const uint8_t *)out + header, *len - header, -1.0f, r,
                                   n);
}

int compress_ef_encode(compress_ef *self, const compress_codec *codec, const float *g, void *out,
                       size_t cap, size_t *len) {
  return s_ef_step(self, codec, g, out, cap, len, compress_codec_encode, 0);
}

int compress_ef_wire_encode(compress_ef *self, const compress_codec *codec, const float *g,
                            void *out, size_t cap, size_t *len) {
  return s_ef_step(self, codec, g, out, cap, len, compress_wire_encode, COMPRESS_WIRE_HEADER_SIZE);
}

/* ---- checkpoint ---------------------------------------------------------------------------- */

static uint32_t s_crc(const uint8_t *p, size_t len) { return wt_crc32(0, p, len); }

size_t compress_ef_saved_size(const compress_ef *self) {
  return S_HEADER + self->n * sizeof(float) + 4;
}

int compress_ef_save_buffer(const compress_ef *self, void *buf, size_t cap, size_t *len) {
  size_t need = compress_ef_saved_size(self);
  *len = 0;
  if (cap < need)
    return wt_fail(WT_EINVAL,
                   "ef save: buffer holds %zu bytes but the residual needs %zu; size "
                   "it with compress_ef_saved_size",
                   cap, need);
  uint8_t *p = buf;
  uint32_t version = S_VERSION;
  uint64_t n = self->n;
  memcpy(p, S_MAGIC, 4);
  memcpy(p + 4, &version, 4);
  memcpy(p + 8, &n, 8);
  memcpy(p + S_HEADER, self->r, self->n * sizeof(float));
  uint32_t crc = s_crc(p, need - 4);
  memcpy(p + need - 4, &crc, 4);
  *len = need;
  return WT_OK;
}

int compress_ef_load_buffer(compress_ef *self, const void *buf, size_t len) {
  const uint8_t *p = buf;
  if (len < S_HEADER + 4)
    return wt_fail(WT_ECORRUPT,
                   "ef load: %zu bytes is too short for a residual checkpoint; the "
                   "file is truncated",
                   len);
  if (memcmp(p, S_MAGIC, 4) != 0)
    return wt_fail(WT_ECORRUPT, "ef load: bad magic (want \"WTEF\"); this is not an error-"
                                "feedback residual");
  uint32_t version, crc;
  uint64_t n;
  memcpy(&version, p + 4, 4);
  memcpy(&n, p + 8, 8);
  if (version != S_VERSION)
    return wt_fail(WT_EMISMATCH, "ef load: version %u, this build reads %u", version, S_VERSION);
  if (n != self->n)
    return wt_fail(WT_EMISMATCH,
                   "ef load: checkpoint holds %llu elements but the tensor has "
                   "%zu; it belongs to another tensor",
                   (unsigned long long)n, self->n);
  if (len != compress_ef_saved_size(self))
    return wt_fail(WT_ECORRUPT,
                   "ef load: %zu bytes but %zu elements need %zu; the checkpoint "
                   "is truncated or padded",
                   len, self->n, compress_ef_saved_size(self));
  memcpy(&crc, p + len - 4, 4);
  if (crc != s_crc(p, len - 4))
    return wt_fail(WT_ECORRUPT, "ef load: checksum mismatch; the residual checkpoint is corrupt "
                                "— restore it, or reset the residual to zero");
  memcpy(self->r, p + S_HEADER, self->n * sizeof(float));
  return WT_OK;
}

int compress_ef_save(const compress_ef *self, FILE *f) {
  size_t need = compress_ef_saved_size(self), len = 0;
  uint8_t *buf = wt_xmalloc(need);
  int rc = compress_ef_save_buffer(self, buf, need, &len);
  if (rc == WT_OK && fwrite(buf, 1, len, f) != len)
    rc = wt_fail(WT_EIO, "ef save: writing %zu bytes failed (disk full?)", len);
  free(buf);
  return rc;
}

int compress_ef_load(compress_ef *self, FILE *f) {
  // Read exactly one residual's bytes: the stream may go on with other checkpoint parts.
  size_t want = compress_ef_saved_size(self);
  uint8_t *buf = wt_xmalloc(want);
  size_t got = fread(buf, 1, want, f);
  int rc = WT_OK;
  if (ferror(f))
    rc = wt_fail(WT_EIO, "ef load: reading the residual checkpoint failed");
  else
    rc = compress_ef_load_buffer(self, buf, got);
  free(buf);
  return rc;
}
