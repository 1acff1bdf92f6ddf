/* frame_internal — the envelope every collective message travels in; shared by the
 * collectives' .c files only (the wire layout is documented in docs/parallel.md).
 *
 * A 32-byte header, then the payload:
 *   offset size field
 *    0     4    magic "WTPC"
 *    4     1    version (3)
 *    5     1    kind: which collective phase sent it (parallel_frame_kind)
 *    6     1    flags: bit 0 set = the CRC covers the payload too; other bits 0
 *    7     1    reserved, 0
 *    8     4    sequence number of the collective call (parallel_comm_next_seq)
 *   12     4    index: piece index (ring phases: chunk × pieces per chunk + piece), step
 *                (broadcast) or source rank (gathers)
 *   16     8    payload length in bytes
 *   24     4    CRC32C (Castagnoli) of header bytes [0, 24), then the payload when flag bit 0
 *                is set
 *   28     4    reserved, 0
 * Little-endian. The receiver knows the kind, sequence and index it expects, so a message from
 * a peer that is running another collective, a truncated or extended message and a flipped bit
 * are all refused with WT_ECORRUPT before any of it is used.
 *
 * What the CRC is for: a transport that does not guarantee integrity (the in-process one, a
 * plaintext --insecure ZeroMQ link, whose only protection is TCP's 16-bit checksum) could hand
 * over damaged bytes, and a reduction would silently mix them into the model. On a sealed
 * ZeroMQ link every part already carries an AEAD tag checked before delivery
 * (parallel_comm_integrity), so there the payload CRC would be a second pass over every byte
 * that cannot catch anything: the sender then checksums the header only. The header is always
 * checked (it is what routes the bytes); a receiver whose own link lacks integrity refuses a
 * frame whose CRC leaves the payload out. The checksum is CRC32C, which SSE4.2 computes with one
 * instruction per 8 bytes (zlib's CRC-32 ran at ~3.6 GB/s here; a byte-wise fallback keeps
 * other CPUs correct).
 */
#ifndef WT_PARALLEL_FRAME_INTERNAL_H
#define WT_PARALLEL_FRAME_INTERNAL_H

#include "parallel/collectives/collectives.h"
#include "parallel/transport/comm.h"

#include <stddef.h>
#include <stdint.h>

#define PARALLEL_FRAME_HEADER 32

typedef enum {
  PARALLEL_FRAME_RS = 1,      /* plain reduce-scatter chunk (float32) */
  PARALLEL_FRAME_AG = 2,      /* plain all-gather chunk (float32) */
  PARALLEL_FRAME_BCAST = 3,   /* broadcast bytes */
  PARALLEL_FRAME_SIZES = 4,   /* all-gather-v: one rank's byte count (u64) */
  PARALLEL_FRAME_GATHERV = 5, /* all-gather-v: one rank's bytes */
  PARALLEL_FRAME_CRS = 6,     /* compressed reduce-scatter chunk (codec payload) */
  PARALLEL_FRAME_CAG = 7,     /* compressed all-gather chunk (codec payload) */
} parallel_frame_kind;

/* What a receiver expects of the next frame. */
typedef struct {
  parallel_frame_kind kind;
  uint32_t seq;
  uint32_t index;
} parallel_frame_id;

/* Sends header + payload to peer as one message. `scratch` must hold PARALLEL_FRAME_HEADER +
 * bytes; the payload is copied after the header there (no copy when it already lies there).
 * Returns the transport's status. */
int parallel_frame_send(parallel_comm *c, int peer, parallel_frame_id id, const void *payload,
                        size_t bytes, uint8_t *scratch);

/* The same from a payload anywhere, with the header beside it (parallel_comm_send_gather): the
 * transport reads both where they are (a sealed link seals them into its frame, a plaintext one
 * copies them), so the caller may change payload at once. */
int parallel_frame_send_copy(parallel_comm *c, int peer, parallel_frame_id id, const void *payload,
                             size_t bytes);

/* Receives one frame from peer into buf[0..cap) and validates it against `id`; on success
 * *payload points into buf (after the header) and *bytes is its length. Returns WT_OK,
 * WT_ECORRUPT (bad magic, version, kind, sequence, index, length or checksum: the message names
 * the peer and what was wrong) or the transport's status. */
int parallel_frame_recv(parallel_comm *c, int peer, parallel_frame_id id, uint8_t *buf, size_t cap,
                        const uint8_t **payload, size_t *bytes);

/* As parallel_frame_recv, but the frame may stay in the transport's memory
 * (parallel_comm_recv_view): *payload points into it or into scratch[0..cap); give it back with
 * parallel_comm_release(c, *handle) once read (*handle is NULL when scratch holds it, and after
 * a failure). */
int parallel_frame_recv_view(parallel_comm *c, int peer, parallel_frame_id id, uint8_t *scratch,
                             size_t cap, const uint8_t **payload, size_t *bytes, void **handle);

/* ---- the plain ring (allreduce.c) ------------------------------------------------------------ */

/* Largest piece of a ring chunk in one message: 256 KiB, the transport's part size, small enough
 * that a piece's frame stays in cache between the copy, the checksum and the reduction. The ring
 * keeps up to two pieces in flight per link, so a transport must queue at least two such frames
 * per link to make progress (both transports queue 64 MiB by default). */
#define PARALLEL_RING_PIECE_FLOATS ((size_t)65536)

#define PARALLEL_RING_REDUCE_SCATTER 1
#define PARALLEL_RING_ALLGATHER 2

/* parallel_allreduce (both halves), parallel_reduce_scatter or parallel_allgather_chunks (one
 * half), with chunks cut into pieces of at most piece_floats (≥ 1) floats. The result does not
 * depend on piece_floats (the tests check this bitwise against the unpipelined summation order);
 * only the number of messages does. */
int parallel_ring_allreduce(parallel_comm *c, float *x, size_t n, parallel_op op,
                            size_t piece_floats, int halves);

#endif
