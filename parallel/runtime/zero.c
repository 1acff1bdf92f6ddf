/* zero — ZeRO-1: the shard optimizer and its two collectives (zero.h). */
#include "parallel/runtime/zero.h"

#include "common/common.h"
#include "parallel/collectives/collectives.h"

#include <stdlib.h>

struct parallel_zero {
  parallel_comm *dp;
  size_t n, off, len; /* whole buffer; this rank's shard */
  optim *opt;         /* over the shard, or NULL when it is empty */
};

parallel_zero *parallel_zero_new(const optim_config *cfg, const gpt_tensor_info *tensors,
                                 int n_tensors, parallel_comm *dp) {
  if (optim_config_validate(cfg) != WT_OK) return NULL;
  parallel_zero *z = wt_xcalloc(1, sizeof *z);
  z->dp = dp;
  for (int i = 0; i < n_tensors; i++) z->n = WT_MAX(z->n, tensors[i].offset + tensors[i].numel);
  int R = parallel_comm_size(dp), r = parallel_comm_rank(dp);
  parallel_chunk_range(z->n, R, (r + 1) % R, &z->off, &z->len); /* the chunk r owns */
  /* The pieces of the tensors that fall in the shard, offsets relative to its start. */
  gpt_tensor_info *pieces = wt_xcalloc((size_t)n_tensors, sizeof *pieces);
  int np = 0;
  for (int i = 0; i < n_tensors; i++) {
    size_t lo = WT_MAX(tensors[i].offset, z->off);
    size_t hi = WT_MIN(tensors[i].offset + tensors[i].numel, z->off + z->len);
    if (lo >= hi) continue;
    pieces[np] = tensors[i];
    pieces[np].offset = lo - z->off;
    pieces[np].numel = hi - lo;
    np++;
  }
  if (np > 0 && !(z->opt = optim_new(cfg, pieces, np))) parallel_zero_destroy(&z);
  free(pieces);
  return z;
}

void parallel_zero_destroy(parallel_zero **self_p) {
  if (!self_p || !*self_p) return;
  optim_destroy(&(*self_p)->opt);
  free(*self_p);
  *self_p = NULL;
}

void parallel_zero_shard(const parallel_zero *z, size_t *off, size_t *len) {
  *off = z->off;
  *len = z->len;
}

optim *parallel_zero_optim(parallel_zero *z) {
  return z->opt;
}

int parallel_zero_reduce(parallel_zero *z, float *grads) {
  return parallel_reduce_scatter(z->dp, grads, z->n, PARALLEL_OP_AVG);
}

int parallel_zero_update(parallel_zero *z, float *params, const float *grads, float lr,
                         float grad_scale) {
  if (z->opt) WT_CHECK(optim_step(z->opt, params + z->off, grads + z->off, lr, grad_scale));
  return parallel_allgather_chunks(z->dp, params, z->n);
}
