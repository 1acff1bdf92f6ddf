/* allgatherv — every rank's byte buffer (sizes may differ) to every rank, around the ring:
 * first the sizes, so that every receiver knows exactly how long each message must be. */
#include "parallel/collectives.h"
#include "parallel/frame_internal.h"

#include "common/common.h"

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

/* Ring pass of the blocks: step s sends rank (r-s)'s block and receives rank (r-s-1)'s. */
static int s_pass_blocks(parallel_comm *c, uint32_t seq, uint8_t *out, const size_t *offsets,
                         size_t max_one) {
  int r = parallel_comm_rank(c), p = parallel_comm_size(c), rc = WT_OK;
  size_t cap = PARALLEL_FRAME_HEADER + max_one;
  uint8_t *send = wt_xmalloc(cap), *recv = wt_xmalloc(cap);
  for (int s = 0; s < p - 1 && rc == WT_OK; s++) {
    int send_r = s_mod(r - s, p), recv_r = s_mod(r - s - 1, p);
    parallel_frame_id sid = {PARALLEL_FRAME_GATHERV, seq, (uint32_t)send_r};
    size_t send_len = offsets[send_r + 1] - offsets[send_r];
    rc = parallel_frame_send(c, s_mod(r + 1, p), sid, out + offsets[send_r], send_len, send);
    if (rc != WT_OK) break;
    parallel_frame_id rid = {PARALLEL_FRAME_GATHERV, seq, (uint32_t)recv_r};
    const uint8_t *data = NULL;
    size_t got = 0, want = offsets[recv_r + 1] - offsets[recv_r];
    rc = parallel_frame_recv(c, s_mod(r - 1, p), rid, recv, cap, &data, &got);
    if (rc == WT_OK && got != want)
      rc = wt_fail(WT_ECORRUPT,
                   "all-gather-v: rank %d got %zu bytes of rank %d's buffer, which "
                   "announced %zu",
                   r, got, recv_r, want);
    if (rc == WT_OK && got) memcpy(out + offsets[recv_r], data, got);
  }
  free(send);
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
