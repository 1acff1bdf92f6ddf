/* allreduce — the plain ring all-reduce on float32 buffers: reduce-scatter, then all-gather
 * (geometry and rounding are explained in collectives.h), pipelined in pieces.
 *
 * Each ring step moves one chunk of n/world floats. Sending a whole chunk and then waiting for a
 * whole one would leave the link idle while the receiver checks and reduces, and the CPU idle
 * while the link moves the bytes. So every chunk is cut into K pieces of at most
 * PARALLEL_RING_PIECE_FLOATS and the (step, piece) units of the call run as one stream: unit
 * u = step·K + piece. The piece a rank sends in step s+1 is the piece it received and reduced in
 * step s, so unit u+K can leave as soon as unit u is done; a rank keeps up to two units in flight
 * (it sends unit u+1 before it reduces unit u), so the transport moves the next piece while this
 * rank adds the last one. Every element still gets exactly the adds of the unpipelined ring, in
 * the same order (chunk c: rank c's value, + rank c+1's, …, + rank c−1's), so the result does
 * not depend on the piece size. Received pieces are reduced straight from the receive buffer. */
#include "parallel/collectives/collectives.h"
#include "parallel/collectives/frame_internal.h"

#include "common/common.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* Units in flight per link: the one being reduced and the next one. More would not overlap more
 * (one reduction at a time) and would ask more of the transport's queue. */
#define S_WINDOW 2

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

/* One ring run: steps [first, last) of the 2(p−1) steps of an all-reduce; steps below p−1
 * reduce (reduce-scatter), the others copy (all-gather). */
typedef struct {
  parallel_comm *c;
  float *x;
  size_t n;
  parallel_op op;
  uint32_t seq;
  int r, p, first, last, pieces; /* pieces per chunk (K) */
  uint8_t *recv;                 /* a frame (header + the largest piece), for a transport that
                                    copies received messages out */
  size_t cap;
} s_ring;

/* The chunk rank r sends in step s (in step s it receives the chunk it sends in step s+1). */
static int s_send_chunk(const s_ring *g, int s) {
  return s < g->p - 1 ? s_mod(g->r - s, g->p) : s_mod(g->r + 1 - (s - (g->p - 1)), g->p);
}

/* Unit u's step, chunk and element range [*off, *off + *len) of x, as sent or as received. */
static void s_unit(const s_ring *g, int u, int sending, int *step, int *chunk, size_t *off,
                   size_t *len) {
  *step = g->first + u / g->pieces;
  *chunk = s_send_chunk(g, sending ? *step : *step + 1);
  size_t c_off, c_len, p_off;
  parallel_chunk_range(g->n, g->p, *chunk, &c_off, &c_len);
  parallel_chunk_range(c_len, g->pieces, u % g->pieces, &p_off, len);
  *off = c_off + p_off;
}

static parallel_frame_id s_id(const s_ring *g, int step, int chunk, int u) {
  parallel_frame_kind kind = step < g->p - 1 ? PARALLEL_FRAME_RS : PARALLEL_FRAME_AG;
  return (parallel_frame_id){kind, g->seq, (uint32_t)(chunk * g->pieces + u % g->pieces)};
}

static int s_send_unit(s_ring *g, int u) {
  int step, chunk;
  size_t off, len;
  s_unit(g, u, 1, &step, &chunk, &off, &len);
  return parallel_frame_send_copy(g->c, s_mod(g->r + 1, g->p), s_id(g, step, chunk, u), g->x + off,
                                  len * sizeof(float));
}

static void s_apply(const s_ring *g, int step, float *x, const uint8_t *in, size_t len);

/* Receives unit u from the left and adds it in (reduce-scatter; the last step also scales for
 * AVG, which makes this rank's owned chunk final) or copies it in (all-gather). */
static int s_recv_unit(s_ring *g, int u) {
  int step, chunk;
  size_t off, len, bytes = 0;
  s_unit(g, u, 0, &step, &chunk, &off, &len);
  const uint8_t *in = NULL;
  void *held = NULL;
  WT_CHECK(parallel_frame_recv_view(g->c, s_mod(g->r - 1, g->p), s_id(g, step, chunk, u), g->recv,
                                    g->cap, &in, &bytes, &held));
  int rc =
      bytes == len * sizeof(float)
          ? WT_OK
          : wt_fail(WT_ECORRUPT, "all-reduce: rank %d got %zu bytes for chunk %d, expected %zu",
                    g->r, bytes, chunk, len * sizeof(float));
  if (rc == WT_OK) s_apply(g, step, g->x + off, in, len);
  parallel_comm_release(g->c, held);
  return rc;
}

/* Adds a received piece in (reduce-scatter; its last step also scales for AVG) or copies it. */
static void s_apply(const s_ring *g, int step, float *x, const uint8_t *in, size_t len) {
  size_t bytes = len * sizeof(float);
  if (step >= g->p - 1) {
    memcpy(x, in, bytes);
    return;
  }
  /* memcpy, not a cast: the payload is bytes (compiles to a plain load) */
  for (size_t i = 0; i < len; i++) {
    float v;
    memcpy(&v, in + i * sizeof v, sizeof v);
    x[i] += v;
  }
  if (g->op == PARALLEL_OP_AVG && step == g->p - 2) /* the rounded sum, divided once */
    for (size_t i = 0; i < len; i++) x[i] /= (float)g->p;
}

static int s_ring_run(parallel_comm *c, float *x, size_t n, parallel_op op, uint32_t seq, int first,
                      int last, size_t piece_floats) {
  int p = parallel_comm_size(c);
  if (p == 1 || first >= last) return WT_OK;
  size_t off, longest;
  parallel_chunk_range(n, p, 0, &off, &longest); /* chunk 0 is the longest */
  size_t k = longest > piece_floats ? (longest + piece_floats - 1) / piece_floats : 1;
  if (k > (size_t)INT_MAX / (size_t)(2 * p)) /* units and piece indices must fit an int */
    return wt_fail(WT_EINVAL, "all-reduce: %zu floats in pieces of %zu is too many pieces", n,
                   piece_floats);
  s_ring g = {c, x, n, op, seq, parallel_comm_rank(c), p, first, last, (int)k, NULL, 0};
  size_t piece_max = (longest + k - 1) / k;
  g.cap = PARALLEL_FRAME_HEADER + piece_max * sizeof(float);
  g.recv = wt_xmalloc(g.cap);
  /* Unit u+K depends on unit u, so with K == 1 only one unit can be in flight. */
  int units = (last - first) * g.pieces, ahead = WT_MIN(S_WINDOW, g.pieces) - 1, sent = 0;
  int rc = WT_OK;
  for (int u = 0; u < units && rc == WT_OK; u++) {
    while (rc == WT_OK && sent < units && sent <= u + ahead) rc = s_send_unit(&g, sent++);
    if (rc == WT_OK) rc = s_recv_unit(&g, u);
  }
  free(g.recv);
  return rc;
}

int parallel_ring_allreduce(parallel_comm *c, float *x, size_t n, parallel_op op,
                            size_t piece_floats, int halves) {
  uint32_t seq = parallel_comm_next_seq(c); /* taken first so ranks stay in step on failure */
  int p = parallel_comm_size(c);
  int first = halves & PARALLEL_RING_REDUCE_SCATTER ? 0 : p - 1;
  int last = halves & PARALLEL_RING_ALLGATHER ? 2 * (p - 1) : p - 1;
  return s_ring_run(c, x, n, op, seq, first, last, WT_MAX(piece_floats, (size_t)1));
}

int parallel_reduce_scatter(parallel_comm *c, float *x, size_t n, parallel_op op) {
  return parallel_ring_allreduce(c, x, n, op, PARALLEL_RING_PIECE_FLOATS,
                                 PARALLEL_RING_REDUCE_SCATTER);
}

int parallel_allgather_chunks(parallel_comm *c, float *x, size_t n) {
  return parallel_ring_allreduce(c, x, n, PARALLEL_OP_SUM, PARALLEL_RING_PIECE_FLOATS,
                                 PARALLEL_RING_ALLGATHER);
}

int parallel_allreduce(parallel_comm *c, float *x, size_t n, parallel_op op) {
  return parallel_ring_allreduce(c, x, n, op, PARALLEL_RING_PIECE_FLOATS,
                                 PARALLEL_RING_REDUCE_SCATTER | PARALLEL_RING_ALLGATHER);
}
