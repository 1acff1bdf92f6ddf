/* zero — ZeRO-1 (Rajbhandari et al. 2020, stage 1) for one pipeline stage's data-parallel group:
 * the optimizer state is partitioned, each replica keeping 1/R of it.
 *
 * One step on each of the R replicas of the group, after the gradients are accumulated:
 *   parallel_zero_reduce   reduce-scatter the gradient (average): this replica now holds the
 *                          reduced values of its shard only (ring chunk (rank+1) mod R,
 *                          collectives.h's ownership)
 *   (the caller computes the global norm from the shards, trainer_grad_sq_norm_range)
 *   parallel_zero_update   AdamW / SGD on the shard's parameters with its shard of the state,
 *                          then all-gather the parameters so every replica holds all of them
 * The two collectives are the two halves of the ring all-reduce, so ZeRO-1 puts exactly the
 * all-reduce's bytes on the wire (the all-gather moves parameters instead of gradients), and
 * the update is elementwise over the same reduced gradient, so the parameters are bitwise those
 * of the unsharded update (tests/runtime/test_zero.c checks both).
 *
 * Shards cut through tensors; each piece keeps its tensor's weight-decay flag.
 */
#ifndef WT_PARALLEL_ZERO_H
#define WT_PARALLEL_ZERO_H

#include "model/gpt.h"
#include "model/optim.h"
#include "parallel/transport/comm.h"

#include <stddef.h>

typedef struct parallel_zero parallel_zero;

/* The shard optimizer of this rank of `dp` (borrowed; must outlive the result) for a flat
 * buffer of tensors (n_tensors entries, e.g. gpt_stage_tensors). Returns NULL with
 * wt_last_error() set on a bad optimizer config. */
parallel_zero *parallel_zero_new(const optim_config *cfg, const gpt_tensor_info *tensors,
                                 int n_tensors, parallel_comm *dp);
void parallel_zero_destroy(parallel_zero **self_p);

/* This rank's shard: [*off, *off + *len) of the flat buffer. */
void parallel_zero_shard(const parallel_zero *z, size_t *off, size_t *len);

/* The shard's optimizer (owned by z; NULL when the shard is empty, i.e. fewer elements than
 * ranks), for checkpoints. */
optim *parallel_zero_optim(parallel_zero *z);

/* Reduce-scatter (average) of grads (n floats, the whole stage) over the group. Returns WT_OK or
 * the collective's status. */
int parallel_zero_reduce(parallel_zero *z, float *grads);

/* Updates the shard of params from the shard of grads (learning rate lr, gradient factor
 * grad_scale, as optim_step), then all-gathers params. Returns WT_OK or the optimizer's /
 * collective's status. */
int parallel_zero_update(parallel_zero *z, float *params, const float *grads, float lr,
                         float grad_scale);

#endif
