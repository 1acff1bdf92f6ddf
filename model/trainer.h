/* trainer — the training step, in pieces that `wantrain train`, the distributed runtime
 * (parallel/runtime/tasklet.h) and tools/compress-experiments all compose; no second copy of the
 * step.
 *
 * One trainer owns a model stage (layers [first_layer, last_layer); the whole model by default),
 * its optimizer and a position in a data set it borrows. trainer_step does one optimizer step
 * on a global batch of B sequences of T tokens:
 *
 *   draw the global batch (B windows) from the data position        — every tasklet draws it
 *   zero gradients
 *   hooks.grads: accumulate this trainer's gradients for its rows   — default: for each of m
 *     micro-batches of B/(R·m) rows of slice `replica`: forward, backward with loss_scale 1/m
 *   hooks.sync: make the gradient the one to apply                  — default: identity
 *   hooks.norm: the global squared gradient norm and the step's loss — default: this stage's
 *   trainer_apply: refuse non-finite loss/norm; lr from the warmup + cosine schedule; clip
 *     factor from the global norm; hooks.update (default: AdamW or SGD on the whole buffer)
 *
 * The hooks are where a distributed step differs: a pipeline executor as `grads`, the tied
 * embedding exchange and a data-parallel all-reduce (plain, compressed, ZeRO-1's reduce-scatter,
 * or nothing between DiLoCo rounds) as `sync`, an all-gather of per-stage norms as `norm`,
 * ZeRO-1's shard update + parameter all-gather as `update`. With no hooks and R = 1 the step is
 * exactly the single-process step.
 *
 * The global batch is drawn once and then split, so changing m (or R) changes only float
 * rounding, never which data is seen. Everything is deterministic from the seed: a run saved with
 * trainer_save and continued with trainer_resume produces bitwise the same losses as one that
 * never stopped. A step that fails (a hook error, a non-finite loss) leaves the data position
 * where it was, so the step can be retried.
 *
 * The free functions below (trainer_micro_grads, trainer_grad_sq_norm, trainer_apply) are the
 * same pieces for callers that hold their own stages and optimizers.
 */
#ifndef WT_TRAINER_H
#define WT_TRAINER_H

#include "model/checkpoint.h"
#include "model/data.h"
#include "model/gpt.h"
#include "model/optim.h"

typedef struct {
  gpt_config model;   /* vocab_size must equal the data set's; max_seq is T */
  int batch;          /* B: global batch, sequences per optimizer step */
  int micro_batches;  /* m: micro-batches per replica; B must be a multiple of R·m */
  long steps;         /* total steps (the cosine schedule's horizon) */
  int val_batches;    /* micro-batches of validation windows averaged by trainer_val_loss */
  optim_config optim; /* lr, schedule, weight decay, clip, kind; total_steps set from steps */
  uint64_t seed;      /* weights and data order */
  /* A part of a distributed run; all zero for the whole model on one process. */
  int first_layer, last_layer; /* this stage's layers [first, last); 0, 0 = all */
  int replicas, replica;       /* R (0 = 1) equal row slices of the global batch; this one's */
  int external_optimizer;      /* 1: no optimizer here; hooks.update applies the step (ZeRO-1) */
  /* The kernels back end the stage and optimizer run on (kernels_for_device); NULL = the CPU.
   * On a GPU, params/grads/optimizer state live on the device; the hooks see device buffers
   * through gpt_stage_params/grads and host copies through gpt_stage_*_host. */
  const struct kernels_ops *kernels;
} trainer_config;

/* What one step measured. */
typedef struct {
  long step;       /* 1-based number of the step just taken */
  float loss;      /* mean training cross-entropy (nats) over the global batch */
  float lr;        /* learning rate used */
  float grad_norm; /* global gradient norm before clipping */
  double seconds;  /* wall time of the step */
} trainer_step_info;

typedef struct trainer trainer;

/* How a distributed step differs from the local one (see the top). Every hook may be NULL.
 * A hook returns WT_OK or an error status (with wt_fail's message); the step then stops, its
 * data position is restored, and trainer_step returns that status. */
typedef struct {
  void *ctx;
  /* Accumulates (+=) this stage's gradients for its rows of the global batch: inputs/targets
   * (rows, T) are slice `replica` of the batch. *loss receives the mean loss of those rows
   * (meaningful on the last stage; any value elsewhere). */
  int (*grads)(void *ctx, trainer *t, const int *inputs, const int *targets, int rows, float *loss);
  /* Makes the accumulated gradient the one to apply (tied wte exchange, data-parallel reduce). */
  int (*sync)(void *ctx, trainer *t);
  /* The global squared gradient norm and the step's mean loss, from this stage's loss. */
  int (*norm)(void *ctx, trainer *t, float local_loss, double *sq, float *loss);
  /* Applies the update with learning rate lr and gradient factor grad_scale (clipping). */
  int (*update)(void *ctx, trainer *t, float lr, float grad_scale);
} trainer_hooks;

/* Builds the model (initialised from cfg->seed), optimizer and data position. `data` is borrowed
 * and must outlive the trainer. Returns NULL with wt_last_error() set on a bad config (B not a
 * multiple of m, vocab mismatch, corpus too short for T, ...). */
trainer *trainer_new(const trainer_config *cfg, const data_set *data);
void trainer_destroy(trainer **self_p);

/* Sets the hooks (copied); NULL restores the local step. A partial stage (not the whole model)
 * needs hooks.grads, and external_optimizer needs hooks.update. */
void trainer_set_hooks(trainer *t, const trainer_hooks *hooks);

/* One optimizer step (see above). Returns WT_OK, or WT_EINVAL if the loss or gradient is not
 * finite (the step is not applied; the message says to lower --lr), or a hook's status. */
int trainer_step(trainer *t, trainer_step_info *info);

/* Mean validation loss (nats) over cfg->val_batches micro-batches of the validation split;
 * forward only, does not touch gradients or the data position. Whole models only (WT_EINVAL). */
int trainer_val_loss(trainer *t, float *loss);

/* Optimizer steps completed (restored by trainer_resume). */
long trainer_steps_done(const trainer *t);

/* Saves a checkpoint of the current state into run directory dir (see checkpoint_save), with
 * train_json (may be NULL) recorded as the effective config. */
int trainer_save(trainer *t, const char *dir, int keep, const char *train_json);

/* Where the next step's batch comes from, and setting it together with the steps done (for a
 * caller that writes and reads its checkpoints itself, e.g. one per pipeline stage). */
data_position trainer_data_position(const trainer *t);
void trainer_set_progress(trainer *t, long step, const data_position *pos);

/* Restores model, optimizer, step and data position from a checkpoint (run or step directory).
 * Returns checkpoint_load's status; on failure the trainer is unchanged. */
int trainer_resume(trainer *t, const char *path);

gpt_stage *trainer_model(trainer *t);
/* The optimizer (NULL with external_optimizer), the data set and the config, all owned elsewhere
 * or by the trainer. */
optim *trainer_optim(trainer *t);
const data_set *trainer_data(const trainer *t);
/* The global batch of the step being taken (drawn at its start; batch rows of max_seq tokens
 * each, replica r's rows from r·batch/R on): every replica draws the same one. */
void trainer_batch(const trainer *t, const int **inputs, const int **targets);
const trainer_config *trainer_get_config(const trainer *t);

/* Rows per micro-batch: B / (R·m). */
int trainer_micro_rows(const trainer *t);

/* ---- the pieces, for callers that hold their own stages and optimizers -------------------- */

/* Forward + backward of one micro-batch on a whole-model stage: tokens/targets (B, T), the
 * gradients accumulate with loss_scale (1/m for m accumulated micro-batches); *loss receives the
 * micro-batch's mean loss. Returns gpt_stage_forward / backward's status. */
int trainer_micro_grads(gpt_stage *s, const int *tokens, const int *targets, int B, int T,
                        float loss_scale, float *loss);

/* Squared L2 norm of a stage's gradient as its share of the model's global norm: a last stage
 * that is not also the first leaves out its copy of the tied wte (the first stage counts it;
 * optim.h). Deterministic, in double. */
double trainer_grad_sq_norm(gpt_stage *s);

/* The same share over the flat range [lo, hi) of the gradient buffer only (a ZeRO-1 shard or a
 * ring chunk): summing it over a partition of [0, n) in order gives a fixed grouping, the same
 * for the sharded and the unsharded update. */
double trainer_grad_sq_norm_range(gpt_stage *s, size_t lo, size_t hi);

/* The update of a step whose gradients are final: refuses a non-finite loss or sq (WT_EINVAL,
 * "step <step+1> ... lower --lr"), takes the learning rate of 0-based `step` from opt's
 * schedule and the clip factor of the global squared norm sq, and runs optim_step on
 * params/grads (the buffers opt was made for). *lr (may be NULL) receives the rate used. */
int trainer_apply(optim *opt, float *params, const float *grads, long step, double sq, float loss,
                  float *lr);

/* FLOPs of one training step (forward + backward, ~6 per parameter per token plus attention)
 * for B sequences of T tokens; what benchmarks divide by time. An MoE block counts the k
 * experts each token runs and its router (not the capacity's padding rows). */
double trainer_flops_per_step(const gpt_config *cfg, int B, int T);

#endif
