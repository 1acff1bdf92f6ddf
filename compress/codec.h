/* codec — gradient codecs on flat float32 buffers, and their self-describing wire format.
 *
 * A codec turns n floats into a byte payload and back. Every codec fills one
 * compress_codec_ops table; codec.c holds the one registry, so a codec is found by name
 * ("int8") or by its numeric id (the id travels in the wire header). Users normally hold a
 * compress_codec: the ops plus a parameter set (block size, k fraction, rounding, seed).
 *
 *   compress_params p = compress_params_default();
 *   p.block = 128;
 *   compress_codec *c = NULL;
 *   WT_CHECK_NEW(c, compress_codec_new("int8", &p));
 *   size_t cap = compress_codec_max_size(c, n), len = 0;
 *   uint8_t *buf = wt_xmalloc(cap);
 *   WT_CHECK(compress_codec_encode(c, grad, n, buf, cap, &len));       // raw payload
 *   WT_CHECK(compress_codec_decode_add(c, buf, len, 1.0f / world, sum, n)); // sum += dec/world
 *   compress_codec_destroy(&c);
 *
 * Codecs (payload layouts are little-endian; B = block size, nb = ceil(n / B)):
 *   fp32   the identity: n float32.                                            4n bytes
 *   fp16   IEEE binary16, round-to-nearest-even (F16C where the CPU has it).    2n bytes
 *   bf16   bfloat16, round-to-nearest-even, NaN stays NaN.                      2n bytes
 *   int8   blockwise absmax: nb float32 scales (absmax/127), then n int8 in [-127, 127].
 *   int4   blockwise absmax: nb float32 scales (absmax/7), then ceil(n/2) bytes, two
 *          values in [-7, 7] per byte (element 2i in the low nibble).
 *   sign   1 bit per value: nb float32 scales (mean |x| of the block), then ceil(n/8) bytes,
 *          bit i%8 of byte i/8 set when x[i] is negative (signbit). Decodes to ±scale.
 *   topk   the k = compress_topk_count(n, k_frac) largest |x|: k uint32 indices, strictly
 *          increasing, then the k float32 values. Ties at the threshold go to the lowest
 *          indices, so the result is deterministic. Selection is O(n), never a sort: a
 *          radix select on |x|'s bits, over the ~1% of elements above a bound taken from a
 *          sample when that bound lets at least k through. NaNs rank above infinity.
 *   randk  k indices drawn uniformly without replacement from `seed`, same layout as topk
 *          (the values are sent unscaled; multiply by n/k for an unbiased estimate).
 *
 * Block size B = n gives one scale for the whole tensor. The payload depends only on the
 * input and the parameters, never on the thread count or on whether SIMD code ran.
 *
 * Decoding never trusts its input: a payload whose length does not match (n, B), or a topk
 * payload with an index out of range or out of order, returns WT_ECORRUPT with a message and
 * writes nothing to y. Non-finite floats inside a payload are just values.
 *
 * Only compress_codec_set_seed changes a handle; encode/decode on one handle may run from
 * several threads at once. The codecs use OpenMP over blocks for large n, and write outputs of
 * 64 MiB or more with non-temporal stores (they would not stay in cache anyway).
 */
#ifndef WT_COMPRESS_CODEC_H
#define WT_COMPRESS_CODEC_H

#include <stddef.h>
#include <stdint.h>

/* Numeric ids; they travel in the wire header, so never renumber. */
typedef enum {
  COMPRESS_CODEC_FP32 = 1,
  COMPRESS_CODEC_FP16 = 2,
  COMPRESS_CODEC_BF16 = 3,
  COMPRESS_CODEC_INT8 = 4,
  COMPRESS_CODEC_INT4 = 5,
  COMPRESS_CODEC_TOPK = 6,
  COMPRESS_CODEC_RANDK = 7,
  COMPRESS_CODEC_SIGN = 8,
} compress_codec_id;

#define COMPRESS_DEFAULT_BLOCK 64
#define COMPRESS_DEFAULT_K_FRAC 0.01

typedef struct {
  size_t block;   /* int8/int4/sign: elements per scale; 0 = 64; >= n = one scale */
  double k_frac;  /* topk/randk: fraction of elements kept, (0, 1]; 0 = 0.01 */
  int stochastic; /* int8/int4: 1 = stochastic rounding (unbiased), 0 = nearest-even */
  uint64_t seed;  /* stochastic rounding and randk: same seed + input = same bytes */
} compress_params;

/* The table every codec fills (one per codec, registered in codec.c). The functions take
 * parameters already normalised by compress_params_normalize. `decode` overwrites y[0..n);
 * `decode_add` does y[i] += alpha * decoded[i] (topk/randk touch only the sent indices).
 * All return WT_OK or a wt_status with a message (wt_fail). */
typedef struct compress_codec_ops {
  const char *name;
  compress_codec_id id;
  size_t (*max_size)(size_t n, const compress_params *p);
  int (*encode)(const float *x, size_t n, const compress_params *p, uint8_t *out, size_t cap,
                size_t *len);
  int (*decode)(const uint8_t *in, size_t len, size_t n, const compress_params *p, float *y);
  int (*decode_add)(const uint8_t *in, size_t len, size_t n, const compress_params *p, float alpha,
                    float *y);
} compress_codec_ops;

typedef struct compress_codec compress_codec; /* opaque: ops + params */

/* Default parameters: block 64, k_frac 0.01, nearest-even rounding, seed 0. */
compress_params compress_params_default(void);

/* Fills zeros with defaults and checks ranges. Returns WT_OK, or WT_EINVAL naming the bad
 * field (k_frac outside (0, 1], stochastic not 0/1). */
int compress_params_normalize(compress_params *p);

/* Registry lookups. Return the codec's static table (never free it), or NULL if unknown. */
const compress_codec_ops *compress_codec_ops_by_name(const char *name);
const compress_codec_ops *compress_codec_ops_by_id(int id);

/* "fp32|fp16|bf16|int8|int4|topk|randk|sign": for WT_OPT_CHOICE tables and messages. Static. */
const char *compress_codec_names(void);

/* Creates a codec handle; params may be NULL (defaults). The caller owns it and frees it with
 * compress_codec_destroy. Returns NULL with wt_last_error() set on failure: wt_last_status() is
 * WT_ENOTFOUND for an unknown name or id (the message lists the known ones), WT_EINVAL for bad
 * params. */
compress_codec *compress_codec_new(const char *name, const compress_params *params);
compress_codec *compress_codec_new_by_id(int id, const compress_params *params);

/* Frees the handle and sets *self_p = NULL; NULL or *NULL is a no-op. */
void compress_codec_destroy(compress_codec **self_p);

const char *compress_codec_name(const compress_codec *self);
compress_codec_id compress_codec_get_id(const compress_codec *self);
const compress_codec_ops *compress_codec_get_ops(const compress_codec *self);

/* The normalised parameters the handle uses (owned by the handle). */
const compress_params *compress_codec_params(const compress_codec *self);

/* Changes the seed for stochastic rounding / randk (e.g. per step). Not thread-safe. */
void compress_codec_set_seed(compress_codec *self, uint64_t seed);

/* Upper bound on the payload size for n elements (exact for every codec but topk/randk, where
 * it is exact for the handle's k_frac). */
size_t compress_codec_max_size(const compress_codec *self, size_t n);

/* Encodes x[0..n) into out[0..cap); *len receives the payload size. Returns WT_OK, or WT_EINVAL
 * if cap < the size needed or n is too large for the codec (topk/randk: n <= UINT32_MAX). */
int compress_codec_encode(const compress_codec *self, const float *x, size_t n, void *out,
                          size_t cap, size_t *len);

/* Decodes a payload of len bytes into y[0..n) (overwrites; topk/randk zero the rest). Returns
 * WT_OK or WT_ECORRUPT (length or content does not fit n and the block size). */
int compress_codec_decode(const compress_codec *self, const void *in, size_t len, float *y,
                          size_t n);

/* y[i] = fmaf(alpha, decoded[i], y[i]): one rounding, the same bits on every code path
 * (compress_ef uses alpha = -1 to subtract exactly what was sent). Same checks as decode. For
 * both, nothing is written to y unless the whole payload is valid. */
int compress_codec_decode_add(const compress_codec *self, const void *in, size_t len, float alpha,
                              float *y, size_t n);

/* k for topk/randk: ceil(k_frac * n) clamped to [1, n] (0 when n == 0). */
size_t compress_topk_count(size_t n, double k_frac);

/* Lets tests and benchmarks switch the SIMD code paths off (0) or back on (1, the default; they
 * run only where the CPU supports them). Returns the previous setting. Process-wide. */
int compress_codec_set_simd(int enable);

/* ---- wire format ---------------------------------------------------------------------------
 * A framed, self-describing message: a 32-byte header, then the payload.
 *   offset size field
 *    0     4    magic "WTCZ"
 *    4     1    version (COMPRESS_WIRE_VERSION)
 *    5     1    codec id
 *    6     2    flags (0; reserved)
 *    8     8    element count n
 *   16     4    block size (effective: min(block, n); 1 for codecs without blocks)
 *   20     8    payload length in bytes
 *   28     4    CRC-32 (zlib) of header bytes [0, 28) followed by the payload
 * All integers little-endian. The decoder checks magic, version, codec, count (must equal the
 * caller's n), length (must equal the buffer: truncated and oversized buffers are refused) and
 * the checksum before it touches y. */
#define COMPRESS_WIRE_MAGIC "WTCZ"
#define COMPRESS_WIRE_VERSION 1
#define COMPRESS_WIRE_HEADER_SIZE 32

typedef struct {
  compress_codec_id codec;
  uint64_t n;
  uint32_t block;
  uint64_t payload_len;
} compress_wire_info;

/* Header + largest payload for n elements with this codec. */
size_t compress_wire_max_size(const compress_codec *self, size_t n);

/* Encodes x[0..n) as a framed message into out[0..cap); *len receives its size. Returns WT_OK
 * or WT_EINVAL (cap too small, n too large). */
int compress_wire_encode(const compress_codec *self, const float *x, size_t n, void *out,
                         size_t cap, size_t *len);

/* Checks a framed message (header fields, length, checksum) and describes it. Returns WT_OK,
 * WT_ECORRUPT (truncated, wrong magic, bad length or checksum) or WT_EMISMATCH (a version or
 * codec this build does not know). */
int compress_wire_peek(const void *buf, size_t len, compress_wire_info *info);

/* Checks the message as compress_wire_peek does, requires its count to equal n (WT_EMISMATCH
 * otherwise), then decodes with the codec named in the header into y[0..n) (overwrite) or
 * adds alpha * decoded to y. Nothing is written to y unless every check passed. */
int compress_wire_decode(const void *buf, size_t len, float *y, size_t n);
int compress_wire_decode_add(const void *buf, size_t len, float alpha, float *y, size_t n);

#endif
