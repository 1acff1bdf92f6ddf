/* comm — the transport-independent communicator: rank/size, byte counters, barrier. */
#include "parallel/transport/comm.h"

#include "common/common.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

struct parallel_comm {
  const parallel_transport_ops *ops;
  void *ctx;
  int rank, size;
  uint64_t bytes_sent, msgs_sent;
  uint32_t seq;
};

/* The barrier's tag; a reserved value so user messages can never be mistaken for it. */
#define S_TAG_BARRIER (PARALLEL_TAG_RESERVED + 1)

parallel_comm *parallel_comm_new(const parallel_transport_ops *ops, void *ctx, int rank, int size) {
  assert(ops && ops->send && ops->recv);
  if (size < 1 || rank < 0 || rank >= size) {
    wt_fail(WT_EINVAL, "communicator: rank %d out of range for size %d", rank, size);
    return NULL;
  }
  parallel_comm *c = wt_xcalloc(1, sizeof *c);
  c->ops = ops;
  c->ctx = ctx;
  c->rank = rank;
  c->size = size;
  return c;
}

void parallel_comm_destroy(parallel_comm **self_p) {
  if (!self_p || !*self_p) return;
  parallel_comm *c = *self_p;
  if (c->ops->destroy) c->ops->destroy(c->ctx);
  free(c);
  *self_p = NULL;
}

int parallel_comm_rank(const parallel_comm *c) {
  return c->rank;
}
int parallel_comm_size(const parallel_comm *c) {
  return c->size;
}
const parallel_transport_ops *parallel_comm_ops(const parallel_comm *c) {
  return c->ops;
}
void *parallel_comm_ctx(const parallel_comm *c) {
  return c->ctx;
}
int parallel_comm_integrity(const parallel_comm *c) {
  return c->ops->integrity ? c->ops->integrity(c->ctx) : 0;
}

int parallel_comm_send(parallel_comm *c, int peer, int tag, const void *buf, size_t bytes) {
  assert(peer >= 0 && peer < c->size && peer != c->rank);
  WT_CHECK(c->ops->send(c->ctx, peer, tag, buf, bytes));
  c->bytes_sent += bytes;
  c->msgs_sent++;
  return WT_OK;
}

int parallel_comm_recv(parallel_comm *c, int peer, int tag, void *buf, size_t cap, size_t *got) {
  assert(peer >= 0 && peer < c->size && peer != c->rank);
  return c->ops->recv(c->ctx, peer, tag, buf, cap, got);
}

int parallel_comm_send_owned(parallel_comm *c, int peer, int tag, void *buf, size_t bytes) {
  assert(peer >= 0 && peer < c->size && peer != c->rank);
  int rc;
  if (c->ops->send_owned) {
    rc = c->ops->send_owned(c->ctx, peer, tag, buf, bytes);
  } else {
    rc = c->ops->send(c->ctx, peer, tag, buf, bytes);
    free(buf);
  }
  WT_CHECK(rc);
  c->bytes_sent += bytes;
  c->msgs_sent++;
  return WT_OK;
}

int parallel_comm_recv_view(parallel_comm *c, int peer, int tag, void *buf, size_t cap,
                            const void **data, size_t *got, void **handle) {
  assert(peer >= 0 && peer < c->size && peer != c->rank);
  *handle = NULL;
  if (c->ops->recv_view) return c->ops->recv_view(c->ctx, peer, tag, buf, cap, data, got, handle);
  *data = buf;
  return c->ops->recv(c->ctx, peer, tag, buf, cap, got);
}

int parallel_comm_send_gather(parallel_comm *c, int peer, int tag, const void *head,
                              size_t head_bytes, const void *body, size_t body_bytes) {
  assert(peer >= 0 && peer < c->size && peer != c->rank);
  if (!c->ops->send_gather) {
    uint8_t *buf = wt_xmalloc(WT_MAX(head_bytes + body_bytes, (size_t)1));
    if (head_bytes) memcpy(buf, head, head_bytes);
    if (body_bytes) memcpy(buf + head_bytes, body, body_bytes);
    return parallel_comm_send_owned(c, peer, tag, buf, head_bytes + body_bytes);
  }
  WT_CHECK(c->ops->send_gather(c->ctx, peer, tag, head, head_bytes, body, body_bytes));
  c->bytes_sent += head_bytes + body_bytes;
  c->msgs_sent++;
  return WT_OK;
}

void parallel_comm_release(parallel_comm *c, void *handle) {
  if (handle && c->ops->release) c->ops->release(c->ctx, handle);
}

int parallel_comm_barrier(parallel_comm *c) {
  /* Dissemination barrier: in round k each rank signals rank+2^k and waits for rank-2^k; after
   * ceil(log2 size) rounds every rank has transitively heard from every other. */
  for (int dist = 1; dist < c->size; dist *= 2) {
    int to = (c->rank + dist) % c->size;
    int from = (c->rank - dist % c->size + c->size) % c->size;
    uint8_t token = (uint8_t)dist, got_token = 0;
    size_t got = 0;
    WT_CHECK(parallel_comm_send(c, to, S_TAG_BARRIER, &token, 1));
    WT_CHECK(parallel_comm_recv(c, from, S_TAG_BARRIER, &got_token, 1, &got));
    if (got != 1 || got_token != token)
      return wt_fail(WT_ECORRUPT, "barrier: rank %d got a malformed token from rank %d", c->rank,
                     from);
  }
  return WT_OK;
}

uint64_t parallel_comm_bytes_sent(const parallel_comm *c) {
  return c->bytes_sent;
}
uint64_t parallel_comm_msgs_sent(const parallel_comm *c) {
  return c->msgs_sent;
}

void parallel_comm_reset_counters(parallel_comm *c) {
  c->bytes_sent = 0;
  c->msgs_sent = 0;
}

void parallel_comm_reset_seq(parallel_comm *c) {
  c->seq = 0;
}

uint32_t parallel_comm_next_seq(parallel_comm *c) {
  return c->seq++;
}
