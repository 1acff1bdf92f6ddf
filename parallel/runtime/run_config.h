/* run_config — one training run, described once: the model, the data, the optimizer and its
 * schedule, the pipeline and its schedule, how replicas synchronise, the activation codec,
 * checkpoints, sites, and the device and precision.
 *
 * Every entry point reads this struct through the same option rows (PARALLEL_RUN_*_OPTIONS,
 * built on common/config.h's wt_option): `wantrain train` the rows that apply to one process,
 * `wantrain launch` and the coordinator all of them. So a flag has one name, one bound, one
 * default and one help line everywhere, and the JSON form (parallel_run_config_to_json /
 * _from_json: one key per option, as a --config file takes them) is what the coordinator sends
 * its peers in each epoch, so a peer trains exactly what the operator set.
 *
 * Contract:
 *  - parallel_run_config_default gives every option's default; a parser or a JSON object
 *    changes what it names.
 *  - parallel_run_config_check is the one validator: it applies the sync preset (sync.grad_ef
 *    becomes "on" or "off") and refuses a run that cannot train, naming the option
 *    ("batch 10 is not a multiple of replicas x micro-batches = 4"). Library messages name
 *    options, not flags: the command-line tools print them as they are, since the JSON keys
 *    and the flags share their names.
 *  - parallel_run_config_stateful is the one rule for "this run keeps state across steps".
 *
 * This header and run_config.c need only the model's shape (model/gpt.h's configuration
 * functions) and the sync presets (compress/preset.h): their library (wt_run_config) links
 * neither kernels nor codecs, so the coordinator can use it.
 *
 *   parallel_run_config run = parallel_run_config_default();
 *   run.stages = 2, run.replicas = 2;
 *   WT_CHECK(parallel_run_config_check(&run));
 *   char *json = parallel_run_config_to_json(&run);   // the epoch's "train" object
 *   ... on the peer: parallel_run_config_from_json(obj, "epoch 3", &run) ...
 */
#ifndef WT_PARALLEL_RUN_CONFIG_H
#define WT_PARALLEL_RUN_CONFIG_H

#include "common/config.h"   /* defines: wt_option, WT_CONFIG_STR_MAX */
#include "compress/preset.h" /* defines: compress_sync_args, COMPRESS_SYNC_OPTIONS */
#include "model/gpt.h"       /* defines: gpt_config, gpt_moe_options, GPT_MOE_OPTIONS */

#include <stddef.h>

struct cJSON;

#define PARALLEL_RUN_MAX_RANKS 64 /* stages, replicas, and the ranks of a site, each at most */

typedef struct {
  /* the model */
  int seq, layers, channels, heads;
  gpt_moe_options moe; /* 0 experts: the dense model */
  /* the data */
  char data[WT_CONFIG_STR_MAX], data_sha256[WT_CONFIG_STR_MAX];
  /* the optimizer and its schedule: batch is the GLOBAL batch B (sequences per step), split
   * over the replicas in micro_batches m PER REPLICA (B a multiple of R·m) */
  int steps, batch, micro_batches, warmup;
  double lr, min_lr, weight_decay, grad_clip;
  char optimizer[WT_CONFIG_STR_MAX]; /* adamw|sgd */
  long long seed;                    /* of the weights and the data order */
  int val_every;     /* validation loss every N steps and after the last (0: after the last only),
                        computed by replica 0's pipeline and sent to every tasklet */
  int val_batches;   /* the batches of the validation split it averages */
  double time_limit; /* 0, or stop (after validating and checkpointing) after the step in which
                        world rank 0 had run this many seconds (since parallel_tasklet_run began);
                        rank 0's decision travels with the step's norm exchange, so every tasklet
                        stops after the same step */
  /* the pipeline: S stages x R replicas, its schedule */
  int stages, replicas;
  char schedule[WT_CONFIG_STR_MAX]; /* 1f1b|gpipe */
  int act_slots; /* activation slots per stage: 0 = one per micro-batch in flight (no forward
                    recomputed); k >= 1 bounds them, recomputing the rest (pipeline.h) */
  /* how replicas synchronise (the gradient codec none|fp16|bf16|int8|int4|sign|topk|randk, error
   * feedback for the lossy ones, DiLoCo: 0 synchronous, H >= 1 an outer Nesterov SGD step every
   * H steps), and what crosses a pipeline cut */
  compress_sync_args sync;
  int zero; /* 1: ZeRO-1 optimizer-state sharding (needs grad codec none, no DiLoCo) */
  char robust[WT_CONFIG_STR_MAX];    /* the sync's aggregate: none (the ring's mean) or a
                                        PARALLEL_ROBUST_NAMES kind (collectives.h; not with ZeRO-1) */
  int trust_flags;                   /* flagged syncs that exclude a peer (0: never excluded) */
  char act_codec[WT_CONFIG_STR_MAX]; /* none|delta2|delta4|delta8|direct8 */
  /* with robust: a replica recomputes part of another's step or DiLoCo round, on average once
   * in N syncs (0: off; tasklet_spot.c says what is checked where) */
  int spot_check_every;
  /* checkpoints: "" = none; every checkpoint_every steps (0 = only at the end) and at the end,
   * keep of them per stage (>= 1) */
  char checkpoint_dir[WT_CONFIG_STR_MAX];
  int checkpoint_every, keep;
  int site_ranks; /* 0 or 1: each stage runs on its gpt_stage; t > 1: on a site of t tensor-
                     parallel ranks (parallel/datacenter/site.h: threads of the process, or the
                     processes of a declared site; the stage keeps the parameters, optimizer and
                     everything that crosses the WAN). A dense model: heads must be a multiple of
                     t / site_cp; an MoE model runs the t ranks as expert-parallel ranks (site.h),
                     so the experts and the micro-batch rows must be multiples of t and site_cp 1.
                     The device must be a host back end (WT_ENOTSUP on a GPU: the CUDA back end's
                     state is process-wide). Each forward whose backward is not the next pass is
                     recomputed (act_slots is then 1). With site_cp = c > 1 the t ranks are
                     t / c TP × c CP (below). Where a stage runs: it may differ between tasklets */
  int site_cp;    /* 0 or 1: no context parallelism in the site; c > 1: each sequence split over
                     c of the site_ranks (ring attention, parallel/datacenter/cp.h): site_ranks a
                     multiple of c, heads of site_ranks / c, seq of 2c. A stage without a site
                     (site_ranks <= 1) ignores it: one device has no sequence to split */
  /* the device and the matmuls' precision */
  char device[WT_CONFIG_STR_MAX], precision[WT_CONFIG_STR_MAX];
  int tf32;
} parallel_run_config;

/* The option rows, in groups, for a parallel_run_config member `m` of `type` (`m` is a member
 * path such as run., or nothing for the struct itself; a group names only its own fields, so a
 * command whose struct has those fields under the same names may use it too, as `wantrain`'s
 * do). The MoE rows are model/gpt.h's GPT_MOE_OPTIONS. Defaults are the run's; bounds are what
 * the runtime can take. */
// clang-format off
#define PARALLEL_RUN_F(type, m, field) offsetof(type, m field)
#define PARALLEL_RUN_MODEL_OPTIONS(type, m)                                                        \
  {"seq", WT_OPT_INT, PARALLEL_RUN_F(type, m, seq), 2, 65536, "64",                                \
   "sequence length T (the model's context)", 0},                                                  \
  {"layers", WT_OPT_INT, PARALLEL_RUN_F(type, m, layers), 1, 4096, "2", "transformer blocks L", 0},\
  {"channels", WT_OPT_INT, PARALLEL_RUN_F(type, m, channels), 1, 65536, "64", "model width C", 0}, \
  {"heads", WT_OPT_INT, PARALLEL_RUN_F(type, m, heads), 1, 4096, "4",                              \
   "attention heads (must divide channels)", 0}
#define PARALLEL_RUN_DATA_OPTIONS(type, m)                                                         \
  {"data", WT_OPT_STRING, PARALLEL_RUN_F(type, m, data), 0, 0, "synthetic",                        \
   "corpus: synthetic, a text file, an llm.c .bin shard, or an http(s)/file URL", 0},              \
  {"data-sha256", WT_OPT_STRING, PARALLEL_RUN_F(type, m, data_sha256), 0, 0, "",                   \
   "expected SHA-256 of the data file", 0}
#define PARALLEL_RUN_STEPS_OPTIONS(type, m)                                                        \
  {"steps", WT_OPT_INT, PARALLEL_RUN_F(type, m, steps), 1, 1e9, "300",                             \
   "optimizer steps in total", 0},                                                                 \
  {"batch", WT_OPT_INT, PARALLEL_RUN_F(type, m, batch), 1, 65536, "16",                            \
   "global batch: sequences per step, split over the replicas", 0},                                \
  {"micro-batches", WT_OPT_INT, PARALLEL_RUN_F(type, m, micro_batches), 1, 65536, "1",             \
   "micro-batches per replica per step (the pipeline's m)", 0},                                    \
  {"val-every", WT_OPT_INT, PARALLEL_RUN_F(type, m, val_every), 0, 1e9, "50",                      \
   "validate every N steps and after the last (0 = after the last only)", 0},                      \
  {"val-batches", WT_OPT_INT, PARALLEL_RUN_F(type, m, val_batches), 1, 1e6, "8",                   \
   "micro-batches per validation", 0}
#define PARALLEL_RUN_LIMIT_OPTIONS(type, m)                                                        \
  {"time-limit", WT_OPT_FLOAT, PARALLEL_RUN_F(type, m, time_limit), 0, 1e9, "0",                   \
   "stop every tasklet after the step in which this many seconds passed, validating and "         \
   "checkpointing (0 = none)", 0}
#define PARALLEL_RUN_OPTIM_OPTIONS(type, m)                                                        \
  {"lr", WT_OPT_FLOAT, PARALLEL_RUN_F(type, m, lr), 0, 10, "3e-3", "peak learning rate", 0},       \
  {"min-lr", WT_OPT_FLOAT, PARALLEL_RUN_F(type, m, min_lr), 0, 10, "3e-4",                         \
   "learning rate at the end of the cosine", 0},                                                   \
  {"warmup", WT_OPT_INT, PARALLEL_RUN_F(type, m, warmup), 0, 1e9, "20", "linear warmup steps", 0}, \
  {"weight-decay", WT_OPT_FLOAT, PARALLEL_RUN_F(type, m, weight_decay), 0, 10, "0.0",              \
   "decoupled weight decay", 0},                                                                   \
  {"grad-clip", WT_OPT_FLOAT, PARALLEL_RUN_F(type, m, grad_clip), 0, 1e9, "1.0",                   \
   "max gradient norm (0 = off)", 0},                                                              \
  {"optimizer", WT_OPT_CHOICE, PARALLEL_RUN_F(type, m, optimizer), 0, 0, "adamw", "update rule",   \
   "adamw|sgd"},                                                                                   \
  {"seed", WT_OPT_INT64, PARALLEL_RUN_F(type, m, seed), 0, 9e15, "1",                              \
   "seed of weights and data order", 0}
#define PARALLEL_RUN_PIPELINE_OPTIONS(type, m)                                                     \
  {"stages", WT_OPT_INT, PARALLEL_RUN_F(type, m, stages), 1, PARALLEL_RUN_MAX_RANKS, "1",          \
   "pipeline stages S", 0},                                                                        \
  {"replicas", WT_OPT_INT, PARALLEL_RUN_F(type, m, replicas), 1, PARALLEL_RUN_MAX_RANKS, "1",      \
   "data-parallel replicas R (S x R tasklets)", 0},                                                \
  {"schedule", WT_OPT_CHOICE, PARALLEL_RUN_F(type, m, schedule), 0, 0, "1f1b",                     \
   "pipeline schedule", "1f1b|gpipe"},                                                             \
  {"act-slots", WT_OPT_INT, PARALLEL_RUN_F(type, m, act_slots), 0, GPT_MAX_SLOTS, "0",             \
   "activation slots per stage (0 = one per micro-batch in flight; fewer recompute forwards)", 0}
/* (`wantrain launch`, whose sync rows are its own, takes this row alone) */
#define PARALLEL_RUN_ROBUST_OPTION(type, m)                                                        \
  {"robust", WT_OPT_CHOICE, PARALLEL_RUN_F(type, m, robust), 0, 0, "none",                         \
   "aggregate of the data-parallel sync: none = the ring's mean; else every replica's "           \
   "contribution is all-gathered (R/2 x the ring's bytes), liars are detected and left out, and " \
   "the rest combined robustly (docs/trust.md)", "none|trimmed-mean|median|centered-clip"}
#define PARALLEL_RUN_SYNC_OPTIONS(type, m)                                                         \
  COMPRESS_SYNC_OPTIONS(type, m sync),                                                             \
  {"zero", WT_OPT_INT, PARALLEL_RUN_F(type, m, zero), 0, 1, "0",                                   \
   "1 = ZeRO-1 optimizer-state sharding", 0},                                                      \
  PARALLEL_RUN_ROBUST_OPTION(type, m),                                                             \
  {"trust-flags", WT_OPT_INT, PARALLEL_RUN_F(type, m, trust_flags), 0, 1e9, "5",                   \
   "with --robust: a peer whose contributions were left out of this many syncs, and of at least " \
   "a quarter of those it took part in, is excluded from the run (0 = never)", 0},                \
  {"spot-check-every", WT_OPT_INT, PARALLEL_RUN_F(type, m, spot_check_every), 0, 1e9, "10",       \
   "with --robust: on average once in this many syncs (steps, or DiLoCo rounds) a replica "     \
   "recomputes part of another's step and compares it with what that one sent: its gradient "    \
   "or its DiLoCo round (one stage; grad-codec none, fp16, bf16, int8 or int4) or a "             \
   "micro-batch's activations (a pipeline, act-codec none) (0 = off)", 0},                        \
  {"act-codec", WT_OPT_CHOICE, PARALLEL_RUN_F(type, m, act_codec), 0, 0, "none",                   \
   "activation compression across pipeline cuts", "none|delta2|delta4|delta8|direct8"}
#define PARALLEL_RUN_CHECKPOINT_OPTIONS(type, m)                                                   \
  {"checkpoint-dir", WT_OPT_STRING, PARALLEL_RUN_F(type, m, checkpoint_dir), 0, 0, "",             \
   "where checkpoints go (none if empty)", 0},                                                     \
  {"checkpoint-every", WT_OPT_INT, PARALLEL_RUN_F(type, m, checkpoint_every), 0, 1e9, "0",         \
   "save every N steps (0 = only at the end)", 0},                                                 \
  {"keep", WT_OPT_INT, PARALLEL_RUN_F(type, m, keep), 1, 1000, "2",                                \
   "checkpoints kept (per stage)", 0}
#define PARALLEL_RUN_SITE_OPTIONS(type, m)                                                         \
  {"site-ranks", WT_OPT_INT, PARALLEL_RUN_F(type, m, site_ranks), 1, PARALLEL_RUN_MAX_RANKS, "1",  \
   "run every stage on a site of this many ranks: site-ranks / site-cp tensor-parallel ranks, a "  \
   "divisor of heads (an MoE model: site-ranks expert-parallel ranks, a divisor of moe-experts "  \
   "and of each micro-batch's rows)", 0},                                                          \
  {"site-cp", WT_OPT_INT, PARALLEL_RUN_F(type, m, site_cp), 1, PARALLEL_RUN_MAX_RANKS, "1",        \
   "context parallelism inside each site: split every sequence over this many of its ranks "       \
   "(ring attention; site-ranks a multiple of it, seq of twice it)", 0}
#define PARALLEL_RUN_DEVICE_OPTIONS(type, m)                                                       \
  {"device", WT_OPT_STRING, PARALLEL_RUN_F(type, m, device), 0, 0, "cpu",                          \
   "kernels back end: cpu, or cuda:N for GPU N (CUDA builds)", 0},                                 \
  {"precision", WT_OPT_CHOICE, PARALLEL_RUN_F(type, m, precision), 0, 0, "fp32",                   \
   "matmul precision; bf16: bf16 tensor-core inputs, fp32 weights, optimizer and loss (GPU)",      \
   "fp32|bf16"},                                                                                   \
  {"tf32", WT_OPT_FLAG, PARALLEL_RUN_F(type, m, tf32), 0, 1, "0",                                  \
   "fp32 matmuls on TF32 tensor cores (GPU)", 0}
#define PARALLEL_RUN_OPTIONS(type, m)                                                              \
  PARALLEL_RUN_MODEL_OPTIONS(type, m), GPT_MOE_OPTIONS(type, m moe),                               \
  PARALLEL_RUN_DATA_OPTIONS(type, m), PARALLEL_RUN_STEPS_OPTIONS(type, m),                         \
  PARALLEL_RUN_LIMIT_OPTIONS(type, m),                                                             \
  PARALLEL_RUN_OPTIM_OPTIONS(type, m), PARALLEL_RUN_PIPELINE_OPTIONS(type, m),                     \
  PARALLEL_RUN_SYNC_OPTIONS(type, m), PARALLEL_RUN_CHECKPOINT_OPTIONS(type, m),                    \
  PARALLEL_RUN_SITE_OPTIONS(type, m), PARALLEL_RUN_DEVICE_OPTIONS(type, m)
// clang-format on

/* The option table of the struct itself (every row above, then the terminator). Static. */
const wt_option *parallel_run_options(void);

/* Every option at its default. */
parallel_run_config parallel_run_config_default(void);

/* The one validator (see the top). Applies the sync preset in place, then checks: the model's
 * shape (heads divide channels, the MoE options against layers), min-lr <= lr, stages <= layers,
 * batch a multiple of replicas x micro-batches, ZeRO-1 only with plain synchronous sync and R > 1
 * and a robust aggregate not with ZeRO-1,
 * the site's shape (site-cp dividing site-ranks, seq a multiple of 2 x site-cp, heads of the
 * site's TP ranks; an MoE site: site-cp 1, moe-experts and each micro-batch's rows multiples of
 * site-ranks). Returns WT_OK, or WT_EINVAL / WT_ENOTFOUND (an unknown preset) with a message
 * naming the options; *run keeps its values up to the failing check. */
int parallel_run_config_check(parallel_run_config *run);

/* 1 when the run keeps state across steps that an in-memory hand-over of a stage cannot carry:
 * DiLoCo's outer state, error-feedback residuals around a lossy gradient codec, delta
 * activation caches, ZeRO-1's optimizer state sharded over the replicas. For a checked run
 * (sync.grad_ef resolved; "auto" counts as on). */
int parallel_run_config_stateful(const parallel_run_config *run);

/* The one rule for "a lost member is replaced from a live replica, nobody rolls back": 1 for a
 * DiLoCo run without ZeRO-1. Its replicas share the outer weights and momentum after every outer
 * step, so a replacement starts from a live replica's outer state (zero residuals, fresh
 * activation caches) and the survivors go on from their own state; every other stateful run
 * resumes from its checkpoint. */
int parallel_run_config_live_recovery(const parallel_run_config *run);

/* The one exclusion rule (docs/trust.md): 1 when a peer whose contributions the robust sync left
 * out of `flagged` of the `syncs` it took part in is excluded from the run: robust on,
 * trust-flags > 0, flagged >= trust-flags and 4 · flagged >= syncs. */
int parallel_run_config_excludes(const parallel_run_config *run, long flagged, long syncs);

/* The spot checks' exclusion rule: 1 when a peer failed spot checks made by `checkers`
 * different peers (robust on, spot checks on, trust-flags > 0, checkers >= 2: one lying checker
 * cannot exclude an honest peer alone). */
int parallel_run_config_spot_excludes(const parallel_run_config *run, int checkers);

/* The model of the run for a corpus of `vocab` tokens: gpt_config with the MoE options applied,
 * validated. Returns WT_OK or WT_EINVAL naming the option (*out unchanged on failure). */
int parallel_run_config_model(const parallel_run_config *run, int vocab, gpt_config *out);

/* The run as one JSON object, one key per option (malloc'd, the caller frees it). */
char *parallel_run_config_to_json(const parallel_run_config *run);

/* *run = the defaults, then every key of `object` (a cJSON object) applied, as a --config file
 * would be; `origin` names the source in messages ("epoch 4"). An unknown key, a value of the
 * wrong type or out of bounds is refused: WT_EINVAL naming the key (*run unchanged). */
int parallel_run_config_from_json(const struct cJSON *object, const char *origin,
                                  parallel_run_config *run);

#endif
