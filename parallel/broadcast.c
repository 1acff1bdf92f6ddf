/* broadcast — root's bytes to every rank over a binomial tree (ceil(log2 world) rounds). */
#include "parallel/collectives.h"
#include "parallel/frame_internal.h"

#include "common/common.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

int parallel_broadcast(parallel_comm *c, void *buf, size_t bytes, int root) {
  int r = parallel_comm_rank(c), p = parallel_comm_size(c);
  assert(root >= 0 && root < p);
  uint32_t seq = parallel_comm_next_seq(c);
  int vr = (r - root + p) % p; /* rank relative to the root, which is 0 */
  size_t cap = PARALLEL_FRAME_HEADER + bytes;
  uint8_t *scratch = wt_xmalloc(cap);
  int rc = WT_OK;
  /* In the round of `mask`, ranks below mask already have the data and pass it mask ranks on. */
  for (int mask = 1; mask < p && rc == WT_OK; mask <<= 1) {
    parallel_frame_id id = {PARALLEL_FRAME_BCAST, seq, (uint32_t)mask};
    if (vr < mask && vr + mask < p) {
      rc = parallel_frame_send(c, (vr + mask + root) % p, id, buf, bytes, scratch);
    } else if (vr >= mask && vr < 2 * mask) {
      const uint8_t *data = NULL;
      size_t got = 0;
      rc = parallel_frame_recv(c, (vr - mask + root) % p, id, scratch, cap, &data, &got);
      if (rc == WT_OK && got != bytes)
        rc = wt_fail(WT_ECORRUPT, "broadcast: rank %d got %zu bytes, expected %zu", r, got, bytes);
      if (rc == WT_OK && bytes) memcpy(buf, data, bytes);
    }
  }
  free(scratch);
  return rc;
}
