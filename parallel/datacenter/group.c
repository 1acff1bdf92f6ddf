/* group — the host table of group collectives (the ring of collectives.h over a parallel_comm,
 * host buffers) and the dispatch every parallel layer calls (group.h). */
#include "parallel/datacenter/group.h"

#include "common/common.h"

#include <stdlib.h>
#include <string.h>

static int s_host_allreduce(void *ctx, float *x, size_t n, parallel_op op) {
  return parallel_allreduce(ctx, x, n, op);
}

static int s_host_reduce_scatter(void *ctx, float *x, size_t n, parallel_op op) {
  return parallel_reduce_scatter(ctx, x, n, op);
}

static int s_host_allgather(void *ctx, float *x, size_t n) {
  return parallel_allgather_chunks(ctx, x, n);
}

/* Receives exactly `bytes` from `from`, or WT_ECORRUPT naming the peer. */
static int s_recv_exact(parallel_comm *c, int from, int tag, void *buf, size_t bytes) {
  size_t got = 0;
  int rc = parallel_comm_recv(c, from, tag, buf, bytes, &got);
  if (rc != WT_OK && rc != WT_EMISMATCH) return rc; /* EMISMATCH: longer than expected */
  if (rc == WT_EMISMATCH || got != bytes)
    return wt_fail(WT_ECORRUPT,
                   "group: rank %d got a message of another size than %zu bytes from "
                   "rank %d",
                   parallel_comm_rank(c), bytes, from);
  return WT_OK;
}

/* The transport sends a copy, so send-then-receive cannot deadlock and recv may alias send. */
static int s_host_sendrecv(void *ctx, int tag, const void *send, int to, void *recv, int from,
                           size_t bytes) {
  parallel_comm *c = ctx;
  if (to >= 0) WT_CHECK(parallel_comm_send(c, to, tag, send, bytes));
  if (from >= 0) WT_CHECK(s_recv_exact(c, from, tag, recv, bytes));
  return WT_OK;
}

static int s_host_alltoall(void *ctx, int tag, const void *send, void *recv, size_t bytes) {
  parallel_comm *c = ctx;
  int rank = parallel_comm_rank(c), P = parallel_comm_size(c);
  memcpy((char *)recv + (size_t)rank * bytes, (const char *)send + (size_t)rank * bytes, bytes);
  for (int i = 1; i < P; i++) {
    int to = (rank + i) % P;
    WT_CHECK(parallel_comm_send(c, to, tag, (const char *)send + (size_t)to * bytes, bytes));
  }
  for (int i = 1; i < P; i++) {
    int from = (rank - i + P) % P;
    WT_CHECK(s_recv_exact(c, from, tag, (char *)recv + (size_t)from * bytes, bytes));
  }
  return WT_OK;
}

static void *s_host_alloc(size_t bytes) {
  return wt_xcalloc(bytes ? bytes : 1, 1);
}

static void s_host_free(void *p) {
  free(p);
}

static int s_host_copy(void *dst, const void *src, size_t bytes) {
  if (dst != src) memmove(dst, src, bytes);
  return WT_OK;
}

static int s_host_zero(void *p, size_t bytes) {
  memset(p, 0, bytes);
  return WT_OK;
}

static const parallel_group_ops s_host = {
    .name = "host",
    .device_buffers = 0,
    .allreduce = s_host_allreduce,
    .reduce_scatter = s_host_reduce_scatter,
    .allgather = s_host_allgather,
    .sendrecv = s_host_sendrecv,
    .alltoall = s_host_alltoall,
    .alloc = s_host_alloc,
    .free = s_host_free,
    .copy = s_host_copy,
    .zero = s_host_zero,
    .upload = s_host_copy,
    .download = s_host_copy,
};

const parallel_group_ops *parallel_group_host_ops(void) {
  return &s_host;
}

int parallel_group_allreduce(const parallel_group_comm *g, float *x, size_t n, parallel_op op) {
  return g->ops->allreduce(g->ctx, x, n, op);
}

int parallel_group_reduce_scatter(const parallel_group_comm *g, float *x, size_t n,
                                  parallel_op op) {
  return g->ops->reduce_scatter(g->ctx, x, n, op);
}

int parallel_group_allgather(const parallel_group_comm *g, float *x, size_t n) {
  return g->ops->allgather(g->ctx, x, n);
}

int parallel_group_sendrecv(const parallel_group_comm *g, int tag, const void *send, int to,
                            void *recv, int from, size_t bytes) {
  return g->ops->sendrecv(g->ctx, tag, send, to, recv, from, bytes);
}

int parallel_group_alltoall(const parallel_group_comm *g, int tag, const void *send, void *recv,
                            size_t block_bytes) {
  return g->ops->alltoall(g->ctx, tag, send, recv, block_bytes);
}

float *parallel_group_alloc(const parallel_group_comm *g, size_t n_floats) {
  return g->ops->alloc((n_floats ? n_floats : 1) * sizeof(float));
}

void parallel_group_free(const parallel_group_comm *g, void *p) {
  if (p) g->ops->free(p);
}

int parallel_group_copy(const parallel_group_comm *g, void *dst, const void *src, size_t bytes) {
  return bytes ? g->ops->copy(dst, src, bytes) : WT_OK;
}

int parallel_group_zero(const parallel_group_comm *g, void *p, size_t bytes) {
  return bytes ? g->ops->zero(p, bytes) : WT_OK;
}

int parallel_group_upload(const parallel_group_comm *g, void *dst, const void *src, size_t bytes) {
  return bytes ? g->ops->upload(dst, src, bytes) : WT_OK;
}

int parallel_group_download(const parallel_group_comm *g, void *dst, const void *src,
                            size_t bytes) {
  return bytes ? g->ops->download(dst, src, bytes) : WT_OK;
}
