/* allgatherv — every rank's byte buffer (sizes may differ) to every rank, around the ring:
 * first the sizes, so that every receiver knows exactly how long each message must be, then
 * the blocks in pipelined pieces. */
#include "parallel/collectives/collectives.h"
#include "parallel/collectives/frame_internal.h"

#include "common/common.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static int s_mod(int a, int p) {
  return ((a % p) + p) % p;
}

/* Ring all-gather of one u64 per rank into sizes[world]. */
static int s_gather_sizes(parallel_comm *c, uint32_t seq, uint64_t *sizes) {
  int r = parallel_comm_rank(c), p = parallel_comm_size(c);
  uint8_t send[PARALLEL_FRAME_HEADER + 8], recv[PARALLEL_FRAME_HEADER + 8];
  for (int s = 0; s < p - 1; s++) {
    int send_r = s_mod(r - s, p), recv_r = s_mod(r - s - 1, p);
    uint8_t le[8];
    for (int i = 0; i < 8; i++) le[i] = (uint8_t)(sizes[send_r] >> (8 * i));
    parallel_frame_id sid = {PARALLEL_FRAME_SIZES, seq, (uint32_t)send_r};
    WT_CHECK(parallel_frame_send(c, s_mod(r + 1, p), sid, le, 8, send));
    parallel_frame_id rid = {PARALLEL_FRAME_SIZES, seq, (uint32_t)recv_r};
    const uint8_t *data = NULL;
    size_t got = 0;
    WT_CHECK(parallel_frame_recv(c, s_mod(r - 1, p), rid, recv, sizeof recv, &data, &got));
    if (got != 8)
      return wt_fail(WT_ECORRUPT, "all-gather-v: rank %d got a %zu-byte size from rank %d", r, got,
                     s_mod(r - 1, p));
    sizes[recv_r] = 0;
    for (int i = 0; i < 8; i++) sizes[recv_r] |= (uint64_t)data[i] << (8 * i);
  }
  return WT_OK;
}

/* Offsets from sizes, refusing a total above max_total (every rank sees the same sizes, so every
 * rank refuses alike and nobody is left waiting). Returns the largest single size in *max_one. */
static int s_offsets(const uint64_t *sizes, int p, size_t max_total, size_t *offsets,
                     size_t *max_one) {
  uint64_t total = 0;
  *max_one = 0;
  for (int i = 0; i < p; i++) {
    offsets[i] = (size_t)total;
    if (sizes[i] > max_total || total + sizes[i] > max_total)
      return wt_fail(WT_EMISMATCH,
                     "all-gather-v: rank %d announced %llu bytes; the total would "
                     "exceed the limit of %zu bytes",
                     i, (unsigned long long)sizes[i], max_total);
    total += sizes[i];
    *max_one = WT_MAX(*max_one, (size_t)sizes[i]);
  }
  offsets[p] = (size_t)total;
  return WT_OK;
}

/* Ring pass of the blocks, pipelined like the ring all-reduce (allreduce.c): every block is cut
 * into K pieces of at most PARALLEL_RING_PIECE_FLOATS × 4 bytes (K from the longest block;
 * shorter blocks have empty pieces at the end), and unit u = step·K + piece of the call runs as
 * one stream: step s sends rank (r−s)'s block and receives rank (r−s−1)'s, whose piece i is what
 * step s+1 sends, so unit u+K can leave as soon as unit u has arrived. A rank keeps up to two
 * units in flight, so the transport moves the next piece while this rank stores the last. */
#define S_PIECE (PARALLEL_RING_PIECE_FLOATS * sizeof(float))

static void s_piece(const size_t *offsets, int block, int piece, size_t *off, size_t *len) {
  size_t b_len = offsets[block + 1] - offsets[block], start = (size_t)piece * S_PIECE;
  *off = offsets[block] + WT_MIN(start, b_len);
  *len = start < b_len ? WT_MIN(S_PIECE, b_len - start) : 0;
}

static int s_pass_blocks(parallel_comm *c, uint32_t seq, uint8_t *out, const size_t *offsets,
                         size_t max_one) {
  int r = parallel_comm_rank(c), p = parallel_comm_size(c), rc = WT_OK;
  size_t k = max_one > S_PIECE ? (max_one + S_PIECE - 1) / S_PIECE : 1;
  if (k > (size_t)(UINT32_MAX / (uint32_t)p) || k > (size_t)INT_MAX / (size_t)p)
    return wt_fail(WT_EINVAL, "all-gather-v: a block of %zu bytes is too many pieces", max_one);
  const int K = (int)k, units = (p - 1) * K, ahead = WT_MIN(2, K) - 1;
  size_t cap = PARALLEL_FRAME_HEADER + S_PIECE;
  uint8_t *recv = wt_xmalloc(cap);
  int sent = 0;
  for (int u = 0; u < units && rc == WT_OK; u++) {
    while (rc == WT_OK && sent < units && sent <= u + ahead) {
      int step = sent / K, piece = sent % K, block = s_mod(r - step, p);
      size_t off, len;
      s_piece(offsets, block, piece, &off, &len);
      parallel_frame_id sid = {PARALLEL_FRAME_GATHERV, seq, (uint32_t)(block * K + piece)};
      rc = parallel_frame_send_copy(c, s_mod(r + 1, p), sid, out + off, len);
      sent++;
    }
    if (rc != WT_OK) break;
    int step = u / K, piece = u % K, block = s_mod(r - step - 1, p);
    size_t off, want;
    s_piece(offsets, block, piece, &off, &want);
    parallel_frame_id rid = {PARALLEL_FRAME_GATHERV, seq, (uint32_t)(block * K + piece)};
    const uint8_t *data = NULL;
    size_t got = 0;
    void *held = NULL;
    rc = parallel_frame_recv_view(c, s_mod(r - 1, p), rid, recv, cap, &data, &got, &held);
    if (rc == WT_OK && got != want)
      rc = wt_fail(WT_ECORRUPT,
                   "all-gather-v: rank %d got %zu bytes of piece %d of rank %d's buffer, which "
                   "announced %zu",
                   r, got, piece, block, offsets[block + 1] - offsets[block]);
    if (rc == WT_OK && got) memcpy(out + off, data, got);
    parallel_comm_release(c, held);
  }
  free(recv);
  return rc;
}

int parallel_allgatherv(parallel_comm *c, const void *mine, size_t bytes, size_t max_total,
                        uint8_t **out, size_t *offsets) {
  int r = parallel_comm_rank(c), p = parallel_comm_size(c);
  uint32_t seq = parallel_comm_next_seq(c);
  *out = NULL;
  uint64_t *sizes = wt_xcalloc((size_t)p, sizeof *sizes);
  sizes[r] = bytes;
  size_t max_one = 0;
  int rc = s_gather_sizes(c, seq, sizes);
  if (rc == WT_OK) rc = s_offsets(sizes, p, max_total, offsets, &max_one);
  free(sizes);
  if (rc != WT_OK) return rc;
  uint8_t *buf = wt_xmalloc(offsets[p] ? offsets[p] : 1);
  if (bytes) memcpy(buf + offsets[r], mine, bytes);
  rc = s_pass_blocks(c, seq, buf, offsets, max_one);
  if (rc != WT_OK) {
    free(buf);
    return rc;
  }
  *out = buf;
  return WT_OK;
}
