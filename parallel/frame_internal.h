/* frame_internal — the envelope every collective message travels in; shared by the
 * collectives' .c files only (the wire layout is documented in docs/parallel.md).
 *
 * A 32-byte header, then the payload:
 *   offset size field
 *    0     4    magic "WTPC"
 *    4     1    version (1)
 *    5     1    kind: which collective phase sent it (parallel_frame_kind)
 *    6     2    reserved, 0
 *    8     4    sequence number of the collective call (parallel_comm_next_seq)
 *   12     4    index: chunk index (ring phases) or source rank (gathers)
 *   16     8    payload length in bytes
 *   24     4    CRC-32 (zlib) of header bytes [0, 24) followed by the payload
 *   28     4    reserved, 0
 * Little-endian. The receiver knows the kind, sequence and index it expects, so a message from
 * a peer that is running another collective, a truncated or extended message and a flipped bit
 * are all refused with WT_ECORRUPT before any of it is used.
 */
#ifndef WT_PARALLEL_FRAME_INTERNAL_H
#define WT_PARALLEL_FRAME_INTERNAL_H

#include "parallel/comm.h"

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
 * bytes; the payload is copied after the header there. Returns the transport's status. */
int parallel_frame_send(parallel_comm *c, int peer, parallel_frame_id id, const void *payload,
                        size_t bytes, uint8_t *scratch);

/* Receives one frame from peer into buf[0..cap) and validates it against `id`; on success
 * *payload points into buf (after the header) and *bytes is its length. Returns WT_OK,
 * WT_ECORRUPT (bad magic, version, kind, sequence, index, length or checksum: the message names
 * the peer and what was wrong) or the transport's status. */
int parallel_frame_recv(parallel_comm *c, int peer, parallel_frame_id id, uint8_t *buf, size_t cap,
                        const uint8_t **payload, size_t *bytes);

#endif
