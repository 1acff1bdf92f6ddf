/* zmq_protocol — encodes and validates the ZeroMQ transport's framing header
 * (layout in zmq_protocol.h and docs/protocol.md). */
#include "parallel/transport/zmq_protocol.h"

#include "common/bytes.h" // defines: little-endian field access

#include <string.h>

void parallel_zmq_header_encode(const parallel_zmq_header *h, uint8_t *out) {
  memcpy(out, PARALLEL_ZMQ_MAGIC, 4);
  out[4] = PARALLEL_ZMQ_VERSION;
  out[5] = h->kind;
  out[6] = h->codec;
  out[7] = h->flags;
  wt_put_le64(out + 8, h->run_id);
  wt_put_le32(out + 16, h->epoch);
  wt_put_le32(out + 20, (uint32_t)h->src_rank);
  wt_put_le32(out + 24, (uint32_t)h->tag);
  wt_put_le32(out + 28, h->step);
  wt_put_le32(out + 32, h->micro_batch);
  wt_put_le32(out + 36, h->tensor_id);
  wt_put_le64(out + 40, h->length);
  wt_put_le64(out + 48, h->counter);
}

const char *parallel_zmq_header_decode(const uint8_t *buf, size_t n, parallel_zmq_header *h) {
  if (n != PARALLEL_ZMQ_HEADER_BYTES) return "header frame has the wrong size";
  if (memcmp(buf, PARALLEL_ZMQ_MAGIC, 4) != 0) return "bad magic (not a wantrain message)";
  if (buf[4] < PARALLEL_ZMQ_VERSION)
    return "protocol version older than this build's 2 (upgrade the sending peer)";
  if (buf[4] > PARALLEL_ZMQ_VERSION)
    return "protocol version newer than this build's 2 (upgrade this peer)";
  if (buf[5] < 1 || buf[5] > PARALLEL_ZMQ_KIND_MAX) return "unknown message kind";
  if (buf[6] > PARALLEL_ZMQ_CODEC_MAX) return "unknown codec id";
  const uint8_t known =
      PARALLEL_ZMQ_FLAG_SEALED | PARALLEL_ZMQ_FLAG_CHUNK | PARALLEL_ZMQ_FLAG_FIRST;
  if (buf[7] & ~known) return "unknown flags";
  if ((buf[7] & PARALLEL_ZMQ_FLAG_FIRST) && !(buf[7] & PARALLEL_ZMQ_FLAG_CHUNK))
    return "flag FIRST without CHUNK";
  if ((buf[7] & PARALLEL_ZMQ_FLAG_CHUNK) &&
      (buf[5] == PARALLEL_ZMQ_KIND_HELLO || buf[5] == PARALLEL_ZMQ_KIND_BYE))
    return "a hello or goodbye in chunks";
  uint64_t length = wt_get_le64(buf + 40);
  if (length > PARALLEL_ZMQ_MAX_PAYLOAD) return "payload length beyond the protocol's bound";
  h->version = buf[4];
  h->kind = buf[5];
  h->codec = buf[6];
  h->flags = buf[7];
  h->run_id = wt_get_le64(buf + 8);
  h->epoch = wt_get_le32(buf + 16);
  h->src_rank = (int32_t)wt_get_le32(buf + 20);
  h->tag = (int32_t)wt_get_le32(buf + 24);
  h->step = wt_get_le32(buf + 28);
  h->micro_batch = wt_get_le32(buf + 32);
  h->tensor_id = wt_get_le32(buf + 36);
  h->length = length;
  h->counter = wt_get_le64(buf + 48);
  return NULL;
}

const char *parallel_zmq_header_check(const parallel_zmq_header *h, const parallel_zmq_expect *e,
                                      uint64_t payload_bytes) {
  if (h->run_id != e->run_id) return "wrong run id (a process of another run)";
  /* A hello sets up the session of two processes, which outlives an assignment. */
  if (h->epoch != e->epoch && h->kind != PARALLEL_ZMQ_KIND_HELLO)
    return "wrong epoch (a process of another assignment)";
  if (h->src_rank < 0 || h->src_rank >= e->size) return "source rank outside the group";
  if (h->src_rank == e->self) return "source rank is the receiver's own rank";
  if (h->flags & PARALLEL_ZMQ_FLAG_CHUNK) {
    if (payload_bytes == 0 || payload_bytes > h->length)
      return "a chunk empty or longer than its payload";
  } else if (h->length != payload_bytes) {
    return "length does not match the payload";
  }
  return NULL;
}
