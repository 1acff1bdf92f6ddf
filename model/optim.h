/* optim — AdamW and SGD with momentum over a stage's flat parameter buffer, global-norm gradient
 * clipping that works across pipeline stages, and the warmup + cosine learning-rate schedule.
 *
 * A training step with clipping, for one stage or several (split training equals unsplit only if
 * the squared norm is summed over ALL stages — and for the tied wte, counted once per stage copy
 * exactly as the unsplit model would count it: see below):
 *
 *   double sq = 0;
 *   for each stage s: sq += optim_grad_sq_norm(grads_s, n_s);      // (+ remote stages' sums)
 *   float scale = optim_clip_scale(&cfg, sq);                        // 1, or clip / norm
 *   float lr = optim_lr_at(&cfg, optim_step_count(opt_s));
 *   for each stage s: optim_step(opt_s, params_s, grads_s, lr, scale);
 *
 * Tied embedding: when the two ends of the model are in different stages, both hold a copy of
 * the (summed) wte gradient; the unsplit model has only one. So a caller summing norms over
 * stages must count that copy once: on the last stage, sum optim_grad_sq_norm over the parts of
 * the buffer before and after the wte range that gpt_stage_tied_grad points to.
 * The sums are in double; a different grouping of the per-stage sums changes the total by
 * ~1e-16 relative, far below what rounds the float clip factor differently in practice.
 *
 * Optimizer state is a few flat float buffers the size of the parameters (AdamW: m and v; SGD:
 * the momentum buffer) plus a step count; a checkpoint saves them with optim_state and restores
 * them by writing into the same buffers and calling optim_set_step_count.
 *
 * Everything is deterministic: the same inputs give bitwise the same state on every run.
 */
#ifndef WT_OPTIM_H
#define WT_OPTIM_H

#include <stddef.h>

#include "kernels/kernels.h"
#include "model/gpt.h"

typedef enum { OPTIM_ADAMW = 0, OPTIM_SGD = 1 } optim_kind;

typedef struct {
  optim_kind kind;
  float lr;                /* peak learning rate */
  float min_lr;            /* floor of the cosine decay */
  int warmup_steps;        /* linear warmup from lr/warmup_steps to lr over this many steps */
  long total_steps;        /* cosine decays to min_lr at this step; 0 = constant lr after warmup */
  float weight_decay;      /* decoupled (AdamW) / L2 (SGD); only tensors with weight_decay = 1 */
  float beta1, beta2, eps; /* AdamW */
  float momentum;          /* SGD */
  float grad_clip;         /* max global gradient L2 norm; 0 = no clipping */
} optim_config;

/* Defaults: AdamW lr 3e-4, min_lr 0, no warmup, constant, wd 0.1, betas (0.9, 0.95), eps 1e-8,
 * momentum 0.9, clip 1.0. */
optim_config optim_config_default(void);

/* Returns WT_OK, or WT_EINVAL naming the bad field (negative lr, beta outside [0,1), ...). */
int optim_config_validate(const optim_config *cfg);

typedef struct optim optim;

/* An optimizer for a flat buffer described by `tensors` (n_tensors entries, e.g. from
 * gpt_stage_tensors): their weight_decay flags choose where decay applies, and the buffer size is
 * the end of the last tensor. State starts at zero, step count 0. Returns NULL with
 * wt_last_error() set on a bad config. The caller owns the result (optim_destroy). */
optim *optim_new(const optim_config *cfg, const gpt_tensor_info *tensors, int n_tensors);
/* The same with its state in the memory of back end `ops` and the update run by its
 * adamw_update (a CUDA table: state and update on the GPU; the params/grads passed to
 * optim_step must then be that back end's buffers too, e.g. a stage made with
 * gpt_stage_new_on). SGD runs on host back ends only (WT_ENOTSUP on a device). */
optim *optim_new_on(const optim_config *cfg, const gpt_tensor_info *tensors, int n_tensors,
                    const kernels_ops *ops);
void optim_destroy(optim **self_p);

/* The back end the optimizer was made on. */
const kernels_ops *optim_kernels(const optim *opt);

const optim_config *optim_get_config(const optim *opt);

/* Sum of squares of n gradient values in host memory, accumulated in double in a fixed order
 * (deterministic). */
double optim_grad_sq_norm(const float *grads, size_t n);
/* The same for a buffer of back end `ops` (its sq_norm: on a GPU, a device reduction in a
 * fixed order, summed in double). */
double optim_grad_sq_norm_on(const kernels_ops *ops, const float *grads, size_t n);

/* The factor to multiply gradients by so that their global norm sqrt(total_sq) is at most
 * cfg->grad_clip (PyTorch clip_grad_norm_: clip / (norm + 1e-6) when that is below 1), or 1 when
 * clipping is off or not needed. */
float optim_clip_scale(const optim_config *cfg, double total_sq);

/* Learning rate for 0-based `step`: linear warmup (lr * (step+1) / warmup_steps), then cosine
 * from lr to min_lr over [warmup_steps, total_steps), then min_lr. */
float optim_lr_at(const optim_config *cfg, long step);

/* One update of params from grads * grad_scale with learning rate lr; increments the step
 * count. params/grads are the buffers the optimizer was made for (n elements). Returns WT_OK,
 * or WT_EINVAL for a non-finite lr or grad_scale (nothing is changed then). */
int optim_step(optim *opt, float *params, const float *grads, float lr, float grad_scale);

/* State buffers for checkpoints: i = 0 is AdamW's m or SGD's momentum, i = 1 AdamW's v.
 * Returns the buffer (owned by opt) and its length in *n, or NULL for i out of range. */
int optim_num_states(const optim *opt);
float *optim_state(optim *opt, int i, size_t *n);
/* State buffers are the back end's memory (device memory on a GPU). For checkpoints:
 * optim_state_host returns buffer i in host memory (the buffer itself on a host back end; a
 * copy owned by opt, refreshed by this call, on a device); after writing into that copy,
 * optim_state_upload(opt, i) puts it back (nothing to do on a host back end). */
float *optim_state_host(optim *opt, int i, size_t *n);
void optim_state_upload(optim *opt, int i);

/* Steps taken (AdamW's bias correction uses it). Restore it together with the state. */
long optim_step_count(const optim *opt);
void optim_set_step_count(optim *opt, long step);

#endif
