/* experiments — PRIVATE header of the compress-experiments tool (tools/compress-experiments).
 *
 * The tool trains a small GPT under one compression setting and prints ONE JSON line with the
 * result, so a script can sweep settings and docs/compression.md can tabulate them:
 *
 *   dp      synchronous data parallelism: `workers` ranks, each its own micro-batch per step,
 *           gradients averaged through parallel/ collectives over the in-process transport with
 *           a gradient codec (none, fp16, bf16, int8 one-scale / blockwise, top-k, sign), with or
 *           without error feedback, under AdamW or SGD with momentum;
 *   diloco  DiLoCo (Douillard et al. 2023): each worker takes H local AdamW steps, then the
 *           workers average their pseudo-gradients (fp32 or any codec, with or without error
 *           feedback) and an outer SGD step (Nesterov momentum, or plain averaging with lr 1
 *           and momentum 0) moves the shared weights; optionally streaming (Douillard et al.
 *           2025): parameter fragments synchronised at staggered times, results arriving
 *           a few steps late and merged into the weights trained meanwhile;
 *   acsgd   a 2-stage pipeline split at layer `cut`: the activation crosses the cut through the
 *           AC-SGD sender/receiver (delta or direct quantization, or uncompressed), the gradient
 *           back is quantized directly; a small training subset repeated for several epochs.
 *
 * Every run uses the same seed for weights and data, so rows of one table differ only by the
 * compression setting. Replicas of synchronous DP are identical by construction (the collectives
 * give every rank the same bytes), so one copy of the parameters stands for all of them; each
 * worker's gradient is computed on it in turn and the collective runs on one thread per rank.
 */
#ifndef WT_TOOLS_EXPERIMENTS_H
#define WT_TOOLS_EXPERIMENTS_H

#include "compress/codec.h"
#include "common/config.h"
#include "model/data.h"
#include "model/gpt.h"
#include "model/optim.h"
#include "parallel/transport/comm.h"

#include <cjson/cJSON.h>

typedef struct {
  char experiment[WT_CONFIG_STR_MAX]; /* dp | diloco | acsgd */
  char data[WT_CONFIG_STR_MAX];       /* "synthetic" or a text file */
  int steps;                          /* dp: optimizer steps; diloco: inner steps per worker */
  int workers;
  int layers, channels, heads, seq, batch;
  char codec[WT_CONFIG_STR_MAX];
  int ef;
  char optimizer[WT_CONFIG_STR_MAX];
  double lr;          /* 0: the optimizer's default below */
  double momentum;    /* SGD */
  int local_momentum; /* dp + SGD: each worker applies momentum before compressing (see dp.c) */
  double clip;        /* global gradient-norm clip; 0 = off */
  int warmup;
  int H; /* diloco: inner steps between synchronisations */
  double outer_lr, outer_momentum;
  int fragments;      /* diloco: streaming fragments synchronised at staggered times */
  int overlap;        /* diloco: inner steps a sync's result takes to arrive (0 = at once) */
  double merge_alpha; /* diloco with overlap: θ = α·θ + (1 − α)·θ_outer on arrival */
  int eval_every;     /* dp, diloco: validation loss every N steps into "val_curve"; 0 = off */
  char data_order[WT_CONFIG_STR_MAX]; /* dp, diloco: worker | global (see exp_next_batch) */
  char acsgd[WT_CONFIG_STR_MAX];      /* none | direct | delta */
  int bits;                           /* acsgd: activation bits */
  int grad_bits;                      /* acsgd: bits of the gradient sent back */
  int cut;
  int subset, epochs;
  char cache_path[WT_CONFIG_STR_MAX];
  char checkpoint[WT_CONFIG_STR_MAX]; /* cut-stats: a stage directory holding layers [0, cut) */
  int cache_samples;                  /* cut-stats: the delta cache's bound, samples */
  int eval_batches;
  long long seed;
  int threads;                    /* OpenMP threads of the model's kernels */
  char config[WT_CONFIG_STR_MAX]; /* the --config file, if any */
} exp_config;

/* The option table (main.c). */
extern const wt_option exp_options[];

/* ---- shared helpers (common.c) ---------------------------------------------------------- */

/* Applies cfg->threads to the OpenMP team size of the calling thread (each rank thread of the
 * in-process collectives starts with the runtime's default otherwise). */
void exp_threads_apply(const exp_config *cfg);

/* Opens cfg->data ("synthetic" builds the built-in Markov corpus). NULL with wt_last_error(). */
data_set *exp_data_open(const exp_config *cfg);

/* The model shape from cfg and the data's vocabulary. */
gpt_config exp_model_config(const exp_config *cfg, const data_set *d);

/* The optimizer from cfg: AdamW (lr 3e-3 by default) or SGD with momentum (lr 0.3 by default),
 * warmup then cosine to 10% over total_steps, clip cfg->clip, weight decay 0 for SGD, and no
 * optimizer momentum when the workers apply it themselves (--local-momentum). */
optim_config exp_optim_config(const exp_config *cfg, long total_steps);

/* Where worker w's training batches come from. --data-order worker: its own stream, seeded
 * seed·1000 + w. --data-order global: the way `wantrain launch` (model/trainer.h) draws them —
 * every worker draws the whole global batch of workers × batch windows from one stream seeded
 * by --seed and trains on its slice w — so that an in-process run and the multi-process runtime
 * see the same windows in the same order. */
void exp_data_position_init(const exp_config *cfg, int w, data_position *pos);

/* Worker w's next batch (batch × seq windows) into inputs / targets, advancing *pos. */
void exp_next_batch(const exp_config *cfg, const data_set *d, data_position *pos, int w,
                    int *inputs, int *targets);

/* Mean validation loss of the model split over n_stages stages (1 or 2; activations passed
 * exactly) over cfg->eval_batches fixed batches. Returns NAN if a forward fails. */
double exp_eval_loss(gpt_stage **stages, int n_stages, const data_set *d, const exp_config *cfg);

/* The codec for --codec `name` on tensors of n floats: *out is NULL for "none"; *sparse is 1
 * for top-k (all-gathered, not ring-reduced). Returns WT_OK or the codec module's error. */
int exp_codec_new(const char *name, size_t n, compress_codec **out, int *sparse);

/* The update of one stage through the trainer's apply step (model/trainer.h: scheduled lr, clip
 * by the global norm sq_total). A non-finite loss or norm skips the update and returns WT_OK:
 * the caller sees the loss, stops and reports the run as diverged. */
int exp_optim_step(optim *opt, gpt_stage *s, double sq_total, double loss);

/* Adds the traffic fields to a result: bytes_per_worker_per_step (mean over the ranks of g of
 * what each sent, over `steps`), bytes_per_worker_per_token (per token a worker trained on),
 * and fraction_of_fp32_sync: those bytes over the fp32 ring all-reduce of n floats every step,
 * 2·(W−1)/W·4n — synchronous fp32 data parallelism's traffic for the same model. */
void exp_add_bytes(cJSON *result, const exp_config *cfg, parallel_inproc_group *g, long steps,
                   size_t n);

/* Appends [step, loss] to a "val_curve" array. */
void exp_curve_add(cJSON *curve, long step, double loss);

/* A JSON object with the fields every run reports (experiment, data, model shape, seed). The
 * caller adds its own and prints it with exp_print. */
cJSON *exp_result_new(const exp_config *cfg);
void exp_print(cJSON *result);

/* ---- the three experiments; each returns WT_OK after printing its JSON line ------------- */
int exp_run_dp(const exp_config *cfg);
int exp_run_diloco(const exp_config *cfg);
int exp_run_acsgd(const exp_config *cfg);
int exp_run_cut_stats(const exp_config *cfg); /* cut_stats.c */

#endif
