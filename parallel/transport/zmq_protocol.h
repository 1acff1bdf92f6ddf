/* zmq_protocol — the framing header of every message the ZeroMQ transport
 * (parallel/transport/zmq.h) puts on the wire: constants, the decoded struct, and the encoder /
 * decoder / checker that the transport, its tests and the fuzz target
 * (parallel/transport/fuzz/fuzz_zmq_frame.c) share. The full specification, with the reasons for
 * each field, is docs/protocol.md.
 *
 * One ZeroMQ multipart message per transport message:
 *   frame 0: the 56-byte header below, in the clear (the associated data of the seal);
 *   frames 1..k: the payload, cut into k ≥ 0 parts (k = 0 for an empty payload) whose lengths
 *     add up to the header's length field; each part sealed in place (same length) on a
 *     sealed link, so the sender paces a large message part by part (WAN emulation);
 *   frame k+1, sealed links only: the trailer, max(k, 1) authentication tags of
 *     PARALLEL_ZMQ_TAG_BYTES, the tag of part i at i × PARALLEL_ZMQ_TAG_BYTES (the one tag of
 *     an empty payload seals nothing but the header). A hello's trailer is its MAC.
 * Or, for an unpaced payload over 1 MiB, one ZeroMQ message per 1 MiB part (a *chunk*; the
 * last one may be shorter): ZeroMQ hands a
 * multipart message to its I/O thread, and to the receiver, only whole, so a chunk is the unit
 * in which sealing overlaps sending and opening overlaps receiving. Each chunk is the header
 * (flags CHUNK, FIRST on the first chunk; the whole payload's length; the counter of this
 * chunk), one non-empty part, and on a sealed link a trailer of one tag. A link's chunks of one
 * payload come back to back and in order.
 *
 *   offset size field
 *    0     4    magic "WTZM"
 *    4     1    version (PARALLEL_ZMQ_VERSION)
 *    5     1    kind (parallel_zmq_kind)
 *    6     1    codec id: 0 = raw bytes, else a compress_codec_id (1..PARALLEL_ZMQ_CODEC_MAX)
 *    7     1    flags: SEALED, CHUNK, FIRST (below); other bits 0
 *    8     8    run id
 *   16     4    epoch (the assignment version; a message from another epoch is refused)
 *   20     4    source rank
 *   24     4    tag (the transport op's int tag, two's complement)
 *   28     4    step
 *   32     4    micro-batch
 *   36     4    tensor id
 *   40     8    payload length in bytes (≤ PARALLEL_ZMQ_MAX_PAYLOAD)
 *   48     8    counter: the nonce of part 0 (part i uses counter + i) under the link's key
 *                (of a chunk: its part's nonce); 0 on plaintext links and in a hello
 * Little-endian. Integrity and authenticity come from the seal (zmq_aead.h: per link and
 * direction keys from crypto_kx over the ranks' X25519 keys and both processes' session
 * randoms); this header says what the bytes are and lets the receiver refuse a message that
 * does not belong to its run, epoch or group before any crypto runs.
 */
#ifndef WT_PARALLEL_ZMQ_PROTOCOL_H
#define WT_PARALLEL_ZMQ_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>

#define PARALLEL_ZMQ_MAGIC "WTZM"
#define PARALLEL_ZMQ_VERSION 2
#define PARALLEL_ZMQ_HEADER_BYTES 56
#define PARALLEL_ZMQ_TAG_BYTES 16     /* one authentication tag in a trailer */
#define PARALLEL_ZMQ_FLAG_SEALED 0x01 /* flags bit 0: parts are sealed and a trailer follows */
#define PARALLEL_ZMQ_FLAG_CHUNK 0x02  /* bit 1: one chunk (one part) of a larger payload */
#define PARALLEL_ZMQ_FLAG_FIRST 0x04  /* bit 2: with CHUNK, the payload's first chunk */
#define PARALLEL_ZMQ_CODEC_MAX 8      /* the highest compress_codec_id */
#define PARALLEL_ZMQ_MAX_PAYLOAD ((uint64_t)1 << 36) /* 64 GiB: a guard, not a limit of use */

typedef enum {
  PARALLEL_ZMQ_KIND_DATA = 1,       /* a collective or generic point-to-point message */
  PARALLEL_ZMQ_KIND_ACTIVATION = 2, /* pipeline: activations going forward */
  PARALLEL_ZMQ_KIND_ACT_GRAD = 3,   /* pipeline: gradients of activations going back */
  PARALLEL_ZMQ_KIND_CONTROL = 4,    /* small control messages of the runtime */
  PARALLEL_ZMQ_KIND_BYE = 5,        /* the sender is closing: no more messages will come */
  PARALLEL_ZMQ_KIND_HELLO = 6,      /* a sealed link's session random (zmq_aead.h) */
} parallel_zmq_kind;
#define PARALLEL_ZMQ_KIND_MAX 6

typedef struct {
  uint8_t version, kind, codec, flags;
  uint64_t run_id;
  uint32_t epoch;
  int32_t src_rank;
  int32_t tag;
  uint32_t step, micro_batch, tensor_id;
  uint64_t length;
  uint64_t counter;
} parallel_zmq_header;

/* Writes h into out[0..PARALLEL_ZMQ_HEADER_BYTES) (magic and version are written from the
 * constants, whatever h->version holds). */
void parallel_zmq_header_encode(const parallel_zmq_header *h, uint8_t *out);

/* Parses n bytes as a header. Returns NULL and fills *h when the bytes are a well-formed header
 * of this protocol version (size, magic, version, kind, codec, flags, length bound); otherwise
 * returns a static string naming the first problem ("bad magic", a version that says which
 * side to upgrade, ...). Never reads past
 * buf[n-1]. */
const char *parallel_zmq_header_decode(const uint8_t *buf, size_t n, parallel_zmq_header *h);

/* What a receiver expects of every message: its run, epoch and group size. */
typedef struct {
  uint64_t run_id;
  uint32_t epoch;
  int size; /* group size: the source rank must be in [0, size) */
  int self; /* the receiver's rank: a message claiming to come from it is refused */
} parallel_zmq_expect;

/* Checks a decoded header against the receiver's expectations and the bytes that actually
 * arrived after it (payload_bytes: the length, or for a chunk 1..length); a hello's epoch is not
 * checked (its session outlives an assignment). Returns NULL when it may be used, else a static
 * string naming the problem ("wrong run id", "length does not match the payload", ...). */
const char *parallel_zmq_header_check(const parallel_zmq_header *h, const parallel_zmq_expect *e,
                                      uint64_t payload_bytes);

#endif
