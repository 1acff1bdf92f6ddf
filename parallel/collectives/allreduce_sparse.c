/* allreduce_sparse — the all-reduce for sparse codecs (top-k, rand-k): each rank encodes its
 * vector once (error feedback at the sender), the encoded vectors are all-gathered, and every
 * rank sums them in rank order, so all ranks hold identical bytes. */
#include "parallel/collectives/collectives.h"

#include "common/common.h"

#include <stdlib.h>
#include <string.h>

int parallel_allreduce_sparse_payload(parallel_comm *c, const compress_codec *codec,
                                      const uint8_t *mine, size_t len, float *x, size_t n,
                                      parallel_op op) {
  int p = parallel_comm_size(c);
  size_t cap = compress_codec_max_size(codec, n);
  uint8_t *all = NULL;
  size_t *offsets = wt_xcalloc((size_t)p + 1, sizeof *offsets);
  /* Every rank has the same codec and n, so no honest message exceeds cap. */
  int rc = parallel_allgatherv(c, mine, len, cap * (size_t)p, &all, offsets);
  if (rc == WT_OK) {
    float alpha = op == PARALLEL_OP_AVG ? 1.0f / (float)p : 1.0f;
    memset(x, 0, n * sizeof(float));
    for (int r = 0; r < p && rc == WT_OK; r++)
      rc = compress_codec_decode_add(codec, all + offsets[r], offsets[r + 1] - offsets[r], alpha, x,
                                     n);
  }
  free(all);
  free(offsets);
  return rc;
}

int parallel_allreduce_sparse(parallel_comm *c, const compress_codec *codec, float *x, size_t n,
                              parallel_op op, compress_ef *ef) {
  if (ef && compress_ef_size(ef) != n)
    return wt_fail(WT_EMISMATCH, "sparse all-reduce: residual has %zu elements, tensor %zu",
                   compress_ef_size(ef), n);
  size_t cap = compress_codec_max_size(codec, n), len = 0;
  uint8_t *mine = wt_xmalloc(cap ? cap : 1);
  int rc = ef ? compress_ef_encode(ef, codec, x, mine, cap, &len)
              : compress_codec_encode(codec, x, n, mine, cap, &len);
  if (rc == WT_OK) rc = parallel_allreduce_sparse_payload(c, codec, mine, len, x, n, op);
  free(mine);
  return rc;
}
