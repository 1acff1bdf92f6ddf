/* allreduce_compressed — the ring all-reduce with every chunk encoded by a codec, and two-stage
 * error feedback (sender residual per chunk in the reduce-scatter, owner residual before the
 * all-gather); why two stages is explained in collectives.h. */
#include "parallel/collectives/collectives.h"
#include "parallel/collectives/frame_internal.h"

#include "common/common.h"

#include <stdlib.h>

static int s_mod(int a, int p) {
  return ((a % p) + p) % p;
}

typedef struct {
  parallel_comm *c;
  const compress_codec *codec;
  float *x;
  size_t n;
  parallel_ef *ef; /* NULL: no error feedback */
  uint32_t seq;
  int r, p;
  uint8_t *a, *b; /* two frame buffers; a payload is encoded in place after the header */
  size_t cap;
} s_ring;

/* Encodes chunk `chunk` of x (plus its residual) into the payload area of buf. */
static int s_encode_chunk(s_ring *g, int chunk, uint8_t *buf, size_t *len) {
  size_t off, n;
  parallel_chunk_range(g->n, g->p, chunk, &off, &n);
  uint8_t *out = buf + PARALLEL_FRAME_HEADER;
  size_t cap = g->cap - PARALLEL_FRAME_HEADER;
  if (g->ef)
    return compress_ef_encode(parallel_ef_chunk(g->ef, chunk), g->codec, g->x + off, out, cap, len);
  return compress_codec_encode(g->codec, g->x + off, n, out, cap, len);
}

/* Receives chunk `chunk` from the left neighbour; add = 1: x += decoded, 0: x = decoded.
 * *bytes receives the payload length (the payload stays in buf, after the header). */
static int s_recv_chunk(s_ring *g, parallel_frame_kind kind, int chunk, uint8_t *buf, int add,
                        size_t *bytes) {
  parallel_frame_id id = {kind, g->seq, (uint32_t)chunk};
  const uint8_t *payload = NULL;
  size_t off, n;
  WT_CHECK(parallel_frame_recv(g->c, s_mod(g->r - 1, g->p), id, buf, g->cap, &payload, bytes));
  parallel_chunk_range(g->n, g->p, chunk, &off, &n);
  if (add) return compress_codec_decode_add(g->codec, payload, *bytes, 1.0f, g->x + off, n);
  return compress_codec_decode(g->codec, payload, *bytes, g->x + off, n);
}

static int s_send_frame(s_ring *g, parallel_frame_kind kind, int chunk, uint8_t *buf, size_t len) {
  parallel_frame_id id = {kind, g->seq, (uint32_t)chunk};
  return parallel_frame_send(g->c, s_mod(g->r + 1, g->p), id, buf + PARALLEL_FRAME_HEADER, len,
                             buf);
}

/* Stage 1: in step s send chunk r-s (partial sum + sender residual), add chunk r-s-1 in. */
static int s_reduce_scatter(s_ring *g) {
  for (int s = 0; s < g->p - 1; s++) {
    size_t len = 0, got = 0;
    WT_CHECK(s_encode_chunk(g, s_mod(g->r - s, g->p), g->a, &len));
    WT_CHECK(s_send_frame(g, PARALLEL_FRAME_CRS, s_mod(g->r - s, g->p), g->a, len));
    WT_CHECK(s_recv_chunk(g, PARALLEL_FRAME_CRS, s_mod(g->r - s - 1, g->p), g->b, 1, &got));
  }
  return WT_OK;
}

/* Stage 2: the owner encodes its full chunk once (with its own residual) and keeps exactly what
 * it sends; the all-gather then forwards those bytes unchanged, each rank decoding them. */
static int s_allgather(s_ring *g, parallel_op op) {
  int own = s_mod(g->r + 1, g->p);
  size_t off, n, len = 0;
  parallel_chunk_range(g->n, g->p, own, &off, &n);
  if (op == PARALLEL_OP_AVG)
    for (size_t i = 0; i < n; i++) g->x[off + i] /= (float)g->p;
  WT_CHECK(s_encode_chunk(g, own, g->a, &len));
  WT_CHECK(compress_codec_decode(g->codec, g->a + PARALLEL_FRAME_HEADER, len, g->x + off, n));
  for (int s = 0; s < g->p - 1; s++) {
    WT_CHECK(s_send_frame(g, PARALLEL_FRAME_CAG, s_mod(g->r + 1 - s, g->p), g->a, len));
    WT_CHECK(s_recv_chunk(g, PARALLEL_FRAME_CAG, s_mod(g->r - s, g->p), g->b, 0, &len));
    /* What we received is what we forward next: its payload already sits after a header. */
    uint8_t *t = g->a;
    g->a = g->b;
    g->b = t;
  }
  return WT_OK;
}

int parallel_allreduce_compressed(parallel_comm *c, const compress_codec *codec, float *x, size_t n,
                                  parallel_op op, parallel_ef *ef) {
  s_ring g = {c,
              codec,
              x,
              n,
              ef,
              parallel_comm_next_seq(c),
              parallel_comm_rank(c),
              parallel_comm_size(c),
              NULL,
              NULL,
              0};
  if (ef &&
      (parallel_ef_size(ef) != n || parallel_ef_world(ef) != g.p || parallel_ef_rank(ef) != g.r))
    return wt_fail(WT_EMISMATCH,
                   "compressed all-reduce: residuals were made for n=%zu world=%d "
                   "rank=%d, called with n=%zu world=%d rank=%d; reset them (parallel_ef_new)",
                   parallel_ef_size(ef), parallel_ef_world(ef), parallel_ef_rank(ef), n, g.p, g.r);
  if (g.p == 1) return WT_OK; /* nothing travels, so nothing is compressed */
  size_t off, len0;
  parallel_chunk_range(n, g.p, 0, &off, &len0); /* chunk 0 is the longest */
  g.cap = PARALLEL_FRAME_HEADER + compress_codec_max_size(codec, len0);
  g.a = wt_xmalloc(g.cap);
  g.b = wt_xmalloc(g.cap);
  int rc = s_reduce_scatter(&g);
  if (rc == WT_OK) rc = s_allgather(&g, op);
  free(g.a);
  free(g.b);
  return rc;
}
