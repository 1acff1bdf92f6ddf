/* acsgd — activation compression for a pipeline cut (AC-SGD, Wang et al. 2022).
 *
 * A pipeline cut sends each micro-batch's activations forward and their gradients back. Over a
 * WAN that traffic dominates, and plain low-bit quantization of activations hurts convergence.
 * AC-SGD observes that the activation of one training sample changes slowly between its visits
 * (epochs), so both sides of the cut keep, per sample, the last activation that crossed, and the
 * sender quantizes only the change:
 *
 *     delta = a - cache[sample];  q = Q_b(delta);  cache[sample] += D(q)   (on BOTH sides)
 *
 * The receiver uses cache[sample] as the activation. Because both sides apply the same decode
 * of the same bytes with the same code (acsgd_dequantize_rows), their caches stay bitwise equal,
 * and the error of what the receiver sees is that of quantizing the (small) delta, not the
 * activation. The first visit of a sample is a delta against a zero cache. Backward activation
 * gradients are quantized directly (no cache): acsgd_quant_encode / acsgd_quant_decode.
 *
 * Quantizer Q_b (b = 2, 4 or 8 bits): one row is one token's C-vector; each row has its own
 * affine range [lo, hi] with step = (hi - lo) / (2^b - 1), codes round to nearest, so every
 * element's error is at most step/2 (2^b levels: 2 bits give 4 levels, not 3).
 *
 * Message (one per sample; little-endian; self-describing, checked field by field):
 *     off  size  field
 *       0     4  magic "ACSG"
 *       4     1  version (1)
 *       5     1  kind: 1 FIRST (store into slot), 2 DELTA (add to slot), 3 PLAIN (no cache)
 *       6     1  bits (2, 4 or 8)
 *       7     1  reserved, 0
 *       8     8  sample id (the sample's index in the data set)
 *      16     4  rows            20  4  cols
 *      24     4  cache slot (0xFFFFFFFF for PLAIN)
 *      28     4  CRC-32 (zlib) of header bytes [0, 28) followed by the payload
 *      32     8  payload bytes = rows*8 + ceil(rows*cols*bits/8)
 *      40        payload: rows × (float lo, float step), then the packed codes, row-major,
 *                low bits first
 * A message whose fields disagree with each other, with the receiver's shape or cache, with its
 * CRC or with the bytes actually present is refused with WT_ECORRUPT / WT_EMISMATCH before
 * anything is read or written out of bounds, and the receiver's cache is left unchanged. The
 * CRC catches damaged codes, which no field check could (every code value is in range), before
 * they silently desynchronise the two caches.
 *
 * Cache bound and overflow. The cache holds at most `capacity` samples, the smaller of
 * max_samples and max_bytes / (rows*cols*4). The SENDER decides everything and writes its
 * decision into the message (kind + slot); the receiver only follows it, so both sides apply the
 * same rule by construction and a disagreement is detected (a DELTA naming a slot that holds
 * another sample is refused). When a new sample arrives and every slot is taken:
 *   ACSGD_OVERFLOW_REFUSE  the sample is not cached: it travels as a PLAIN quantized activation
 *                          on every visit (what the paper's bounded variant does for new data);
 *   ACSGD_OVERFLOW_EVICT   the least recently sent sample's slot is reused (FIRST into it);
 *                          that sample starts over with a FIRST message when it next comes.
 * The cache lives on the heap, or in a file created at cache_path and mapped with mmap
 * (MAP_SHARED) when it is larger than memory should hold; the file is sparse until written.
 *
 * Use (each side of the cut holds one end made with the same options):
 *
 *   acsgd_options o = {.bits = 4, .delta = 1, .rows = T, .cols = C, .max_samples = n_train,
 *                      .overflow = ACSGD_OVERFLOW_EVICT, .cache_path = NULL};
 *   acsgd_sender *snd = acsgd_sender_new(&o);           // stage k-1
 *   acsgd_receiver *rcv = acsgd_receiver_new(&o);        // stage k
 *   size_t cap = acsgd_msg_bytes(T, C, o.bits), len;
 *   WT_CHECK(acsgd_sender_encode(snd, sample_id, act, buf, cap, &len, NULL));   // send buf
 *   WT_CHECK(acsgd_receiver_decode(rcv, buf, len, act_in, T * C, NULL, NULL));  // on arrival
 *   WT_CHECK(acsgd_quant_encode(grad, T, C, 8, sample_id, buf, cap8, &len));     // backward
 *   WT_CHECK(acsgd_quant_decode(buf, len, grad_out, T * C, NULL));
 *
 * tools/compress-experiments/acsgd_run.c is a complete 2-stage training loop built on this.
 *
 * Functions fed bytes from outside return a wt_status.
 */
#ifndef WT_ACSGD_H
#define WT_ACSGD_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define ACSGD_HEADER_BYTES 40
#define ACSGD_NO_SLOT 0xFFFFFFFFu

typedef enum { ACSGD_FIRST = 1, ACSGD_DELTA = 2, ACSGD_PLAIN = 3 } acsgd_kind;
typedef enum { ACSGD_OVERFLOW_REFUSE = 0, ACSGD_OVERFLOW_EVICT = 1 } acsgd_overflow;

typedef struct {
  int bits;                /* 2, 4 or 8 */
  int delta;               /* 1: AC-SGD delta against the cache; 0: plain quantization only */
  int rows, cols;          /* shape of one sample's activation: (T, C) */
  size_t max_samples;      /* cache bound in samples (0: no bound by count) */
  size_t max_bytes;        /* cache bound in bytes (0: no bound by bytes); with delta, at least
                              one of the two must be set */
  acsgd_overflow overflow; /* what to do with a new sample when the cache is full */
  const char *cache_path;  /* NULL: heap; else this file is created (truncated) and mmapped.
                              Copied; the caller may free it after _new. */
} acsgd_options;

/* Header fields of one message, as parsed by acsgd_msg_parse. */
typedef struct {
  acsgd_kind kind;
  int bits;
  uint64_t sample_id;
  int rows, cols;
  uint32_t slot;
  size_t payload_bytes;
  size_t total_bytes; /* header + payload */
} acsgd_msg_info;

/* What a sender has done so far. */
typedef struct {
  uint64_t messages, first, delta, plain, evictions;
  uint64_t bytes;              /* all message bytes produced */
  size_t cached_samples;       /* slots in use now */
  size_t capacity_samples;     /* slots the bound allows */
  size_t cache_bytes_used;     /* cached_samples × rows × cols × 4 */
  size_t cache_bytes_capacity; /* capacity_samples × rows × cols × 4 */
} acsgd_stats;

/* ---- quantizer (stateless) ------------------------------------------------------------------ */

/* Payload bytes for `rows` × `cols` values at `bits`: rows*8 + ceil(rows*cols*bits/8). */
size_t acsgd_payload_bytes(int rows, int cols, int bits);

/* Header + payload: the buffer size one message of this shape needs. */
size_t acsgd_msg_bytes(int rows, int cols, int bits);

/* Quantizes x (rows, cols) into payload (acsgd_payload_bytes long). Returns WT_EINVAL if bits is
 * not 2/4/8 or x holds a NaN or Inf (a diverged model, reported rather than sent). */
int acsgd_quantize_rows(const float *x, int rows, int cols, int bits, uint8_t *payload);

/* Decodes payload into out (rows, cols): out = D(q) when add == 0, out += D(q) when add != 0.
 * Both sides of a cut call exactly this function, which is what keeps their caches bitwise
 * equal. Returns WT_ECORRUPT if a row's lo/step is not finite or step < 0. */
int acsgd_dequantize_rows(const uint8_t *payload, int rows, int cols, int bits, float *out,
                          int add);

/* ---- messages ----------------------------------------------------------------------------- */

/* Parses and checks the header of the message at the start of buf (len bytes available; more
 * messages may follow). Returns WT_OK and fills info, or WT_ECORRUPT naming the bad field
 * (magic, version, kind, bits, shape, slot, payload length, truncation, CRC). */
int acsgd_msg_parse(const void *buf, size_t len, acsgd_msg_info *info);

/* Stateless PLAIN message (backward gradients, the no-delta baseline): quantizes x (rows, cols)
 * into out (capacity cap bytes). *written receives the message length. Returns WT_EINVAL for a
 * bad argument, too small a buffer, or non-finite x. */
int acsgd_quant_encode(const float *x, int rows, int cols, int bits, uint64_t sample_id, void *out,
                       size_t cap, size_t *written);

/* Decodes a PLAIN message into out (capacity out_cap floats). info (may be NULL) receives the
 * header. Returns WT_ECORRUPT for a malformed message, WT_EMISMATCH for a non-PLAIN one or one
 * larger than out_cap. */
int acsgd_quant_decode(const void *msg, size_t len, float *out, size_t out_cap,
                       acsgd_msg_info *info);

/* ---- sender / receiver -------------------------------------------------------------------- */

typedef struct acsgd_sender acsgd_sender;
typedef struct acsgd_receiver acsgd_receiver;

/* Create the two ends of a cut with the same options (they must agree; the receiver checks each
 * message against its own shape and bound). Return NULL with wt_last_error() set on bad options
 * or when the cache file cannot be created or mapped. */
acsgd_sender *acsgd_sender_new(const acsgd_options *opts);
void acsgd_sender_destroy(acsgd_sender **self_p);
acsgd_receiver *acsgd_receiver_new(const acsgd_options *opts);
void acsgd_receiver_destroy(acsgd_receiver **self_p);

/* Encodes one sample's activation a (rows, cols) into out (cap bytes, at least acsgd_msg_bytes)
 * and updates the sender's cache. *written receives the message length. If recon is not NULL it
 * receives what the receiver will reconstruct (rows × cols floats). Returns WT_EINVAL for a bad
 * argument, a small buffer or non-finite a; the cache is unchanged on failure. */
int acsgd_sender_encode(acsgd_sender *s, uint64_t sample_id, const float *a, void *out, size_t cap,
                        size_t *written, float *recon);

/* Decodes the message at the start of msg (len bytes) into out (rows × cols floats, out_cap
 * capacity), updating the receiver's cache. *consumed (may be NULL) receives the message length
 * so that several messages can be read from one buffer; info (may be NULL) the header.
 * Returns WT_ECORRUPT for a malformed message, WT_EMISMATCH for one that does not fit this
 * receiver (shape, bits, slot beyond the bound, a DELTA for a sample its slot does not hold).
 * On failure the cache is unchanged. */
int acsgd_receiver_decode(acsgd_receiver *r, const void *msg, size_t len, float *out,
                          size_t out_cap, size_t *consumed, acsgd_msg_info *info);

/* Checkpoint of either end's delta cache (the slots in use, their samples, LRU ticks and
 * activations; a small header and a CRC-32), so that a resumed run continues bitwise. Load into
 * an end made with the same options: it replaces the cache's contents. A no-op (nothing
 * written, nothing read) without delta. Returns WT_OK, WT_EIO on a write error, WT_ECORRUPT for
 * a truncated or damaged record, WT_EMISMATCH for one of another shape; on failure to load the
 * cache is left empty. */
int acsgd_sender_save(const acsgd_sender *s, FILE *f);
int acsgd_sender_load(acsgd_sender *s, FILE *f);
int acsgd_receiver_save(const acsgd_receiver *r, FILE *f);
int acsgd_receiver_load(acsgd_receiver *r, FILE *f);

/* Counters and cache memory of either end (the receiver counts the messages it accepted). */
acsgd_stats acsgd_sender_stats(const acsgd_sender *s);
acsgd_stats acsgd_receiver_stats(const acsgd_receiver *r);

/* The cached activation of sample_id on either side (rows × cols floats, owned by the cache;
 * valid until the next encode/decode), or NULL if it is not cached. For tests and debugging. */
const float *acsgd_sender_cached(const acsgd_sender *s, uint64_t sample_id);
const float *acsgd_receiver_cached(const acsgd_receiver *r, uint64_t sample_id);

#endif
