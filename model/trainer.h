/* trainer — the body of the training loop shared by `wantrain train`, the tests and benchmarks.
 *
 * One trainer owns a whole model (one gpt_stage over all layers), its optimizer and a position
 * in a data set it borrows. trainer_step does one optimizer step on a global batch of B
 * sequences of T tokens:
 *
 *   draw the global batch (B windows) from the data position
 *   zero gradients
 *   for each of m micro-batches of B/m rows: forward, backward with loss_scale 1/m
 *     (gradients accumulate, so the step sees the gradient of the mean loss over all B rows)
 *   clip the global gradient norm; lr from the warmup + cosine schedule; AdamW or SGD update
 *
 * The global batch is drawn once and then split, so changing m changes only float rounding,
 * never which data is seen. Everything is deterministic from the seed: a run saved with
 * trainer_save and continued with trainer_resume produces bitwise the same losses as one that
 * never stopped.
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
  int micro_batches;  /* m: B must be a multiple of m */
  long steps;         /* total steps (the cosine schedule's horizon) */
  int val_batches;    /* micro-batches of validation windows averaged by trainer_val_loss */
  optim_config optim; /* lr, schedule, weight decay, clip, kind; total_steps set from steps */
  uint64_t seed;      /* weights and data order */
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

/* Builds the model (initialised from cfg->seed), optimizer and data position. `data` is borrowed
 * and must outlive the trainer. Returns NULL with wt_last_error() set on a bad config (B not a
 * multiple of m, vocab mismatch, corpus too short for T, ...). */
trainer *trainer_new(const trainer_config *cfg, const data_set *data);
void trainer_destroy(trainer **self_p);

/* One optimizer step (see above). Returns WT_OK, or WT_EINVAL if the loss or gradient is not
 * finite (the step is not applied; the message says to lower --lr). */
int trainer_step(trainer *t, trainer_step_info *info);

/* Mean validation loss (nats) over cfg->val_batches micro-batches of the validation split;
 * forward only, does not touch gradients or the data position. */
int trainer_val_loss(trainer *t, float *loss);

/* Optimizer steps completed (restored by trainer_resume). */
long trainer_steps_done(const trainer *t);

/* Saves a checkpoint of the current state into run directory dir (see checkpoint_save), with
 * train_json (may be NULL) recorded as the effective config. */
int trainer_save(trainer *t, const char *dir, int keep, const char *train_json);

/* Restores model, optimizer, step and data position from a checkpoint (run or step directory).
 * Returns checkpoint_load's status; on failure the trainer is unchanged. */
int trainer_resume(trainer *t, const char *path);

gpt_stage *trainer_model(trainer *t);
const trainer_config *trainer_get_config(const trainer *t);

/* FLOPs of one training step (forward + backward, ~6 per parameter per token plus attention)
 * for B sequences of T tokens; what benchmarks divide by time. */
double trainer_flops_per_step(const gpt_config *cfg, int B, int T);

#endif
