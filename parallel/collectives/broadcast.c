/* broadcast — root's bytes to every rank over a binomial tree (ceil(log2 world) levels),
 * pipelined in pieces: a rank forwards each piece to its children as soon as it has it, so the
 * levels of the tree stream at once instead of one whole buffer after another. */
#include "parallel/collectives/collectives.h"
#include "parallel/collectives/frame_internal.h"

#include "common/common.h"

#include <assert.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* Bytes of one piece: the ring's piece size (frame_internal.h). */
#define S_PIECE_BYTES (PARALLEL_RING_PIECE_FLOATS * sizeof(float))

int parallel_broadcast(parallel_comm *c, void *buf, size_t bytes, int root) {
  int r = parallel_comm_rank(c), p = parallel_comm_size(c);
  assert(root >= 0 && root < p);
  uint32_t seq = parallel_comm_next_seq(c);
  if (p == 1) return WT_OK;
  int vr = (r - root + p) % p; /* rank relative to the root, which is 0 */
  /* In the round of `mask`, ranks below mask pass the data mask ranks on: this rank receives in
   * the round of its highest set bit (`low`; none for the root) and sends in every later round. */
  int low = 1;
  while (low * 2 <= vr) low *= 2;
  size_t pieces = bytes > S_PIECE_BYTES ? (bytes + S_PIECE_BYTES - 1) / S_PIECE_BYTES : 1;
  if (pieces > INT_MAX) return wt_fail(WT_EINVAL, "broadcast: %zu bytes is too large", bytes);
  size_t cap = PARALLEL_FRAME_HEADER + WT_MIN(bytes, S_PIECE_BYTES);
  uint8_t *scratch = wt_xmalloc(cap);
  int rc = WT_OK;
  for (size_t k = 0; k < pieces && rc == WT_OK; k++) {
    size_t off, len;
    parallel_chunk_range(bytes, (int)pieces, (int)k, &off, &len);
    parallel_frame_id id = {PARALLEL_FRAME_BCAST, seq, (uint32_t)k};
    if (vr > 0) {
      const uint8_t *data = NULL;
      size_t got = 0;
      void *held = NULL;
      rc = parallel_frame_recv_view(c, (vr - low + root) % p, id, scratch, cap, &data, &got, &held);
      if (rc == WT_OK && got != len)
        rc = wt_fail(WT_ECORRUPT, "broadcast: rank %d got %zu bytes of piece %zu, expected %zu", r,
                     got, k, len);
      if (rc == WT_OK && len) memcpy((uint8_t *)buf + off, data, len);
      parallel_comm_release(c, held);
    }
    for (int mask = vr > 0 ? low * 2 : 1; mask < p && rc == WT_OK; mask <<= 1)
      if (vr + mask < p)
        rc = parallel_frame_send_copy(c, (vr + mask + root) % p, id, (uint8_t *)buf + off, len);
  }
  free(scratch);
  return rc;
}
