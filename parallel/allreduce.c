/* allreduce — the plain ring all-reduce on float32 buffers: reduce-scatter, then all-gather
 * (geometry and rounding are explained in collectives.h). */
#include "parallel/collectives.h"
#include "parallel/frame_internal.h"

#include "common/common.h"

#include <stdlib.h>
#include <string.h>

static int s_mod(int a, int p) {
  return ((a % p) + p) % p;
}

void parallel_chunk_range(size_t n, int world, int chunk, size_t *off, size_t *len) {
  size_t p = (size_t)world, base = n / p, rem = n % p, i = (size_t)chunk;
  *off = i * base + WT_MIN(i, rem);
  *len = base + (i < rem ? 1 : 0);
}

int parallel_chunk_owner(int chunk, int world) {
  return s_mod(chunk - 1, world);
}

/* Scratch for one ring phase: a send frame and a receive frame, each big enough for the
 * largest chunk. */
typedef struct {
  uint8_t *send, *recv;
  size_t cap;
} s_ring_bufs;

static s_ring_bufs s_bufs_new(size_t n, int world) {
  size_t off, len;
  parallel_chunk_range(n, world, 0, &off, &len); /* chunk 0 is the longest */
  s_ring_bufs b = {NULL, NULL, PARALLEL_FRAME_HEADER + len * sizeof(float)};
  b.send = wt_xmalloc(b.cap);
  b.recv = wt_xmalloc(b.cap);
  return b;
}

static void s_bufs_free(s_ring_bufs *b) {
  free(b->send);
  free(b->recv);
}

/* One ring step: send chunk `send_c` to the right, receive chunk `recv_c` from the left; on
 * success *payload points at recv_c's bytes (checked to be exactly its length in floats). */
static int s_ring_step(parallel_comm *c, s_ring_bufs *b, parallel_frame_kind kind, uint32_t seq,
                       const float *x, size_t n, int send_c, int recv_c, const uint8_t **payload) {
  int r = parallel_comm_rank(c), p = parallel_comm_size(c);
  size_t off, len;
  parallel_chunk_range(n, p, send_c, &off, &len);
  parallel_frame_id sid = {kind, seq, (uint32_t)send_c};
  WT_CHECK(parallel_frame_send(c, s_mod(r + 1, p), sid, x + off, len * sizeof(float), b->send));
  parallel_chunk_range(n, p, recv_c, &off, &len);
  parallel_frame_id rid = {kind, seq, (uint32_t)recv_c};
  const uint8_t *data = NULL;
  size_t bytes = 0;
  WT_CHECK(parallel_frame_recv(c, s_mod(r - 1, p), rid, b->recv, b->cap, &data, &bytes));
  if (bytes != len * sizeof(float))
    return wt_fail(WT_ECORRUPT, "all-reduce: rank %d got %zu bytes for chunk %d, expected %zu", r,
                   bytes, recv_c, len * sizeof(float));
  *payload = data;
  return WT_OK;
}

static int s_reduce_scatter(parallel_comm *c, float *x, size_t n, parallel_op op, uint32_t seq) {
  int r = parallel_comm_rank(c), p = parallel_comm_size(c), rc = WT_OK;
  s_ring_bufs b = s_bufs_new(n, p);
  for (int s = 0; s < p - 1 && rc == WT_OK; s++) {
    int recv_c = s_mod(r - s - 1, p);
    const uint8_t *in = NULL;
    rc = s_ring_step(c, &b, PARALLEL_FRAME_RS, seq, x, n, s_mod(r - s, p), recv_c, &in);
    if (rc != WT_OK) break;
    size_t off, len;
    parallel_chunk_range(n, p, recv_c, &off, &len);
    for (size_t i = 0; i < len; i++) {
      float v; /* memcpy, not a cast: the payload is bytes (compiles to a plain load) */
      memcpy(&v, in + i * sizeof v, sizeof v);
      x[off + i] += v;
    }
  }
  s_bufs_free(&b);
  if (rc == WT_OK && op == PARALLEL_OP_AVG && p > 1) {
    size_t off, len;
    parallel_chunk_range(n, p, s_mod(r + 1, p), &off, &len);
    for (size_t i = 0; i < len; i++) x[off + i] /= (float)p;
  }
  return rc;
}

static int s_allgather(parallel_comm *c, float *x, size_t n, uint32_t seq) {
  int r = parallel_comm_rank(c), p = parallel_comm_size(c), rc = WT_OK;
  s_ring_bufs b = s_bufs_new(n, p);
  for (int s = 0; s < p - 1 && rc == WT_OK; s++) {
    int recv_c = s_mod(r - s, p);
    const uint8_t *in = NULL;
    rc = s_ring_step(c, &b, PARALLEL_FRAME_AG, seq, x, n, s_mod(r + 1 - s, p), recv_c, &in);
    if (rc != WT_OK) break;
    size_t off, len;
    parallel_chunk_range(n, p, recv_c, &off, &len);
    memcpy(x + off, in, len * sizeof(float));
  }
  s_bufs_free(&b);
  return rc;
}

int parallel_reduce_scatter(parallel_comm *c, float *x, size_t n, parallel_op op) {
  return s_reduce_scatter(c, x, n, op, parallel_comm_next_seq(c));
}

int parallel_allgather_chunks(parallel_comm *c, float *x, size_t n) {
  return s_allgather(c, x, n, parallel_comm_next_seq(c));
}

int parallel_allreduce(parallel_comm *c, float *x, size_t n, parallel_op op) {
  uint32_t seq = parallel_comm_next_seq(c); /* taken first so ranks stay in step on failure */
  WT_CHECK(s_reduce_scatter(c, x, n, op, seq));
  return s_allgather(c, x, n, seq);
}
