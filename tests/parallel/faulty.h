/* faulty — a test transport that wraps a communicator and damages one chosen message that
 * this rank sends (flip a header or payload bit, truncate, extend, empty), to check that the
 * collectives refuse it cleanly on the receiving rank. Header-only; for tests. */
#ifndef WT_TESTS_PARALLEL_FAULTY_H
#define WT_TESTS_PARALLEL_FAULTY_H

#include "parallel/transport/comm.h"

#include "common/common.h"

#include <stdlib.h>
#include <string.h>

typedef enum { S_FLIP_HEADER, S_FLIP_PAYLOAD, S_TRUNCATE, S_EXTEND, S_DROP_TO_EMPTY } s_damage;

typedef struct {
  parallel_comm *inner; /* the in-process communicator underneath */
  int victim_msg;       /* which of this rank's sends to damage (0-based), -1 none */
  s_damage damage;
  int sent;
  int integrity; /* what this rank's transport claims (parallel_transport_ops.integrity) */
} s_faulty_ctx;

static int s_faulty_send(void *vctx, int peer, int tag, const void *buf, size_t bytes) {
  s_faulty_ctx *f = vctx;
  if (f->sent++ != f->victim_msg) return parallel_comm_send(f->inner, peer, tag, buf, bytes);
  uint8_t *copy = wt_xmalloc(bytes + 16);
  memcpy(copy, buf, bytes);
  size_t len = bytes;
  switch (f->damage) {
  case S_FLIP_HEADER:
    copy[13] ^= 0x01;
    break; /* the chunk index */
  case S_FLIP_PAYLOAD:
    copy[bytes - 1] ^= 0x40;
    break;
  case S_TRUNCATE:
    len = bytes - 3;
    break;
  case S_EXTEND:
    memset(copy + bytes, 0xAB, 16), len = bytes + 16;
    break;
  case S_DROP_TO_EMPTY:
    len = 0;
    break;
  }
  int rc = parallel_comm_send(f->inner, peer, tag, copy, len);
  free(copy);
  return rc;
}

static int s_faulty_recv(void *vctx, int peer, int tag, void *buf, size_t cap, size_t *got) {
  s_faulty_ctx *f = vctx;
  return parallel_comm_recv(f->inner, peer, tag, buf, cap, got);
}

static int s_faulty_integrity(void *vctx) {
  return ((s_faulty_ctx *)vctx)->integrity;
}

static const parallel_transport_ops s_faulty_ops = {.name = "faulty",
                                                    .send = s_faulty_send,
                                                    .recv = s_faulty_recv,
                                                    .integrity = s_faulty_integrity};

#endif
