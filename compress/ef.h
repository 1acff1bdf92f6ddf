/* ef — error feedback around any codec: what compression drops this step is sent later.
 *
 * One compress_ef per tensor holds the residual r (n floats, starts at zero). Each step
 *   v = g + r;   payload = encode(v);   r = v - decode(payload)
 * so the sum of everything decoded over the steps equals the sum of the inputs minus the
 * current residual, which stays bounded: biased codecs (topk, sign) still converge.
 *
 *   compress_ef *ef = NULL;
 *   compress_ef *ef = compress_ef_new(n);
 *   WT_CHECK(compress_ef_encode(ef, codec, grad, buf, cap, &len));      // raw payload
 *   WT_CHECK(compress_ef_save(ef, file));                                // with the checkpoint
 *   compress_ef_destroy(&ef);
 *
 * Checkpoint format (little-endian): magic "WTEF", u32 version (1), u64 n, n float32, then a
 * CRC-32 (zlib) of everything before it. Loading refuses a wrong magic, version, size or
 * checksum and leaves the residual unchanged.
 */
#ifndef WT_COMPRESS_EF_H
#define WT_COMPRESS_EF_H

#include <stddef.h>
#include <stdio.h>

#include "compress/codec.h"

typedef struct compress_ef compress_ef; /* opaque: the residual of one tensor */

/* Creates a zero residual for a tensor of n floats. The caller owns it and frees it with
 * compress_ef_destroy. Never NULL (allocation failure aborts: n is the program's own). */
compress_ef *compress_ef_new(size_t n);

/* Frees the residual and sets *self_p = NULL; NULL or *NULL is a no-op. */
void compress_ef_destroy(compress_ef **self_p);

/* Number of elements, and the residual itself (owned by self; valid until destroy). */
size_t compress_ef_size(const compress_ef *self);
const float *compress_ef_residual(const compress_ef *self);
/* The residual for writing: where a copy kept elsewhere (a device's) is mirrored in before a
 * save and read back after a load. */
float *compress_ef_residual_data(compress_ef *self);

/* Sets the residual to zero (e.g. when the tensor's owner changes). */
void compress_ef_reset(compress_ef *self);

/* One step: encodes g + r with codec into out[0..cap) as a raw payload (compress_ef_encode) or
 * a framed wire message (compress_ef_wire_encode), *len receives its size, and r becomes what
 * was not sent. g has compress_ef_size(self) elements. Returns WT_OK, or WT_EINVAL when cap is
 * below the codec's max size (plus the wire header) or n is too large for the codec; r is then
 * unchanged. */
int compress_ef_encode(compress_ef *self, const compress_codec *codec, const float *g, void *out,
                       size_t cap, size_t *len);
int compress_ef_wire_encode(compress_ef *self, const compress_codec *codec, const float *g,
                            void *out, size_t cap, size_t *len);

/* Bytes a checkpoint of this residual takes. */
size_t compress_ef_saved_size(const compress_ef *self);

/* Writes the checkpoint into buf[0..cap) (*len receives its size) or to an open FILE*.
 * Returns WT_OK, WT_EINVAL (cap too small) or WT_EIO (write failed). */
int compress_ef_save_buffer(const compress_ef *self, void *buf, size_t cap, size_t *len);
int compress_ef_save(const compress_ef *self, FILE *f);

/* Reads a checkpoint into self; its n must equal compress_ef_size(self). Returns WT_OK,
 * WT_ECORRUPT (truncated, wrong magic or checksum), WT_EMISMATCH (other version or size) or
 * WT_EIO. On any error the residual is unchanged. */
int compress_ef_load_buffer(compress_ef *self, const void *buf, size_t len);
int compress_ef_load(compress_ef *self, FILE *f);

#endif
