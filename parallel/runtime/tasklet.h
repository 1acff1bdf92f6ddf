/* tasklet — the per-process entry point of distributed training: one pipeline stage of one
 * data-parallel replica, run for a number of steps over a world communicator handed in.
 * `wantrain launch` runs one per process, `peerd` one per train epoch, and the tests run S × R
 * of them as threads over the in-process transport. A tasklet's config is the run's
 * (parallel_tasklet_config_from_run, run_config.h) plus its seat and wiring.
 *
 * Contract:
 *  - World layout: S stages × R replicas = parallel_comm_size(world) ranks; the tasklet of stage
 *    s, replica r is world rank s·R + r (the index of assign_plan.device).
 *  - Numbers: without compression, R × S tasklets compute what trainer_step computes on one
 *    process with micro_batches = R·m, up to float rounding; on a device back end that computes
 *    as the CPU does, bit for bit the CPU path.
 *  - Failures: every wait is bounded by the transport's deadline; a tasklet that fails returns
 *    its error, naming the stage, replica and step, and its peers' next receive from it fails at
 *    once, so a failure spreads instead of leaving anyone waiting.
 *  - Checkpoints (run.checkpoint_dir set): every run.checkpoint_every steps and at the end, one
 *    directory per stage and a manifest, bound to the run (below); resume continues
 *    bit-exactly or refuses a run that would continue differently.
 *  - Devices: the stage lives where its kernels back end keeps it; one tasklet per process on a
 *    GPU (a second one at the same time is refused, WT_ENOTSUP).
 *
 * docs/runtime.md describes how a step runs (the hooks, the schedules, the data-parallel
 * reduce, the norm exchange), the checkpoint files, the device copies and sites.
 *
 *   parallel_tasklet_config c;
 *   WT_CHECK(parallel_tasklet_config_from_run(&run, s, r, data, &c));
 *   parallel_tasklet_result res;
 *   int rc = parallel_tasklet_run(&c, world, &res);  // world: S·R ranks, this one s·R + r
 */
#ifndef WT_PARALLEL_TASKLET_H
#define WT_PARALLEL_TASKLET_H

#include "assign/schedule.h"
#include "model/checkpoint.h"
#include "model/data.h"
#include "model/trainer.h"
#include "parallel/collectives/collectives.h" /* defines: parallel_robust_report */
#include "parallel/runtime/run_config.h"
#include "parallel/transport/comm.h"

#include <stdint.h>

struct parallel_site_link; /* parallel/datacenter/site.h */

#define PARALLEL_TASKLET_DEVICE_MAX 32

/* A spot check (docs/trust.md): replica `checker` recomputed replica `target`'s gradient of
 * this step (or, DiLoCo, its round) on its rows and compared it with the contribution `target`
 * sent. */
typedef struct {
  int checker, target;
  int failed;        /* 1: outside the tolerance (PARALLEL_TASKLET_SPOT_*) */
  double cosine;     /* of the contribution to the recomputed gradient */
  double norm_ratio; /* |contribution| / |recomputed| */
  /* through a codec (tasklet_spot.c): |contribution - recomputed| / |recomputed|, and the most
   * it may be (PARALLEL_TASKLET_SPOT_CODEC_K × the codec's rounding of the recomputed gradient
   * + PARALLEL_TASKLET_SPOT_REL); 0, 0 without one */
  double rel_error, bound;
  double seconds; /* the check's wall time: the recompute and the comparison */
} parallel_tasklet_spot;

#define PARALLEL_TASKLET_SPOT_COSINE 0.99 /* a contribution passes at this cosine or more ... */
#define PARALLEL_TASKLET_SPOT_NORM 0.05   /* ... and a norm ratio within 1 ± this */
/* Through a codec a contribution passes within this many times the codec's own rounding of the
 * recomputed gradient (one rounding of g + e, the residual e one rounding more, and margin
 * for the gradient's change since the step before), plus PARALLEL_TASKLET_SPOT_REL of it. */
#define PARALLEL_TASKLET_SPOT_CODEC_K 4.0
#define PARALLEL_TASKLET_SPOT_REL 0.05

/* What one step reported (to on_step). loss is the step's mean loss over the whole global
 * batch, the same on every tasklet. */
typedef struct {
  int stage, replica;
  trainer_step_info info;  /* step, loss, lr, global grad norm, seconds */
  float val_loss;          /* validation loss after this step, NAN when none was taken */
  uint64_t bytes_pipeline; /* bytes this tasklet sent to its pipeline neighbours so far */
  uint64_t bytes_data;     /* ... to its data-parallel group (gradients, ZeRO, DiLoCo) */
  uint64_t bytes_control;  /* ... for norms, losses, checkpoint agreement */
  double compute_s;        /* this tasklet's forward / backward seconds so far (pipeline.h) */
  /* The robust sync's evidence of this step (robust not "none"; DiLoCo: steps with an outer
   * step), the same on every replica of the stage, with rank[r] the contribution of REPLICA r;
   * NULL when the step had no robust sync. Valid during the callback */
  const parallel_robust_report *robust;
  /* The spot check this tasklet made in this step (it was the checker), or NULL */
  const parallel_tasklet_spot *spot;
} parallel_tasklet_step;

/* Tests only (tests/trust's liar harness): sees this tasklet's contribution to the data-parallel
 * sync — its gradient, or DiLoCo's pseudo-gradient θ_outer − θ_inner — just before it is sent,
 * and may change it. `step` is the step being taken (1-based). */
typedef void (*parallel_tasklet_tamper_fn)(void *arg, long step, float *contribution, size_t n);

typedef void (*parallel_tasklet_step_fn)(void *arg, const parallel_tasklet_step *step);

typedef struct {
  /* The run (run_config.h): S x R, the schedule, the model, the GLOBAL batch B in micro-batches
   * m PER REPLICA, steps, optimizer, seed, the sync, ZeRO, the activation codec and slots, the
   * site's shape, checkpoints, validation, the time limit. The same on every tasklet but where a
   * stage runs (site_ranks may differ; run.device is the launcher's, the tasklet's is `device`).
   * The runtime reads it as it is (parallel_run_config_check is the caller's; sync.grad_ef
   * "auto" counts as on) and derives the stage's trainer config from it
   * (parallel_run_trainer_config, for the data set's vocabulary). */
  parallel_run_config run;
  int stage, replica;          /* this tasklet */
  int first_layer, last_layer; /* this stage's layers; 0, 0 = an even split of run.layers */
  const data_set *data;        /* borrowed; the same corpus on every tasklet */
  struct parallel_site_link *site_link;     /* borrowed, NULL: the site's ranks are threads of this
                         process; else rank 0's link to a declared site of run.site_ranks processes
                         (parallel/datacenter/site.h: parallel_site_new_linked) */
  char device[PARALLEL_TASKLET_DEVICE_MAX]; /* the kernels back end the stage runs on, a
                    kernels_for_device name (cpu, cuda, cuda:N) resolved by parallel_tasklet_run
                    in its own thread (a GPU is a thread's current device); "" = `kernels`
                    (NULL: the CPU). parallel_tasklet_config_default fills in the process default
                    (parallel_tasklet_set_default_device). See "Devices" above */
  const struct kernels_ops *kernels; /* with device "": the back end to run on (a test's own),
                                        NULL = the CPU */
  const int *dp_ring; /* R entries: this stage's replicas in the order of its data-parallel ring,
                         starting with replica 0 (netsim_ring_order's order, so that the
                         simulated ring is the one that runs; borrowed for the run);
                         NULL = 0, 1, ..., R-1 */
  int resume;         /* 1: continue from run.checkpoint_dir's manifest */
  long resume_step;   /* with resume and private_dir: continue from this step's stage checkpoint
                         (and .state) in run.checkpoint_dir, whatever its manifest names (a
                         shard fetched from another peer comes without one) */
  int private_dir;    /* 1: run.checkpoint_dir is this tasklet's own (a peer's data directory,
                         no file system shared): every tasklet, not only world rank 0, writes
                         the manifest there */
  int owner_prunes;   /* 1: the tasklet removes none of the checkpoints it wrote: the directory's
                         owner prunes them (a peer's store keeps the step the coordinator pins,
                         peer/shards.h); 0: it keeps the newest run.keep (at least 2) */
  uint64_t run_id;    /* the run's id, recorded in every stage checkpoint and the manifest (the
                         run binding, below); 0 = one derived from the bound settings. A resume
                         keeps the id its manifest records and ignores this one */
  long stop_after;    /* 0, or stop (after checkpointing) once this many steps are
                         done in total: a run cut short and resumed later */
  parallel_tasklet_step_fn on_step; /* called after every step, may be NULL */
  void *on_step_arg;
  parallel_tasklet_tamper_fn test_tamper;     /* NULL, except in tests/trust's liar harness */
  parallel_tasklet_tamper_fn test_tamper_act; /* the same for the activations each micro-batch
                                                 sends to the next stage (NULL elsewhere) */
  parallel_tasklet_tamper_fn test_tamper_state; /* the same for a DiLoCo replica's first
                                                   optimizer state buffer (AdamW's m) at each
                                                   outer step, before it is committed */
  void *test_tamper_arg;
  /* In-memory state hand-over (peerd moves a stage between processes with it; see
   * parallel_tasklet_state_* below). state_in: start from this state blob instead of fresh
   * weights (resume must be 0). state_out: when the run returns, successful or not, *state_out
   * receives a malloc'd blob of the stage at its last completed step (NULL when the tasklet never
   * got that far); the caller frees it. Both need the checkpoints' stateless options, or a run
   * with live recovery (parallel_run_config_live_recovery: DiLoCo), whose blob carries the
   * outer state too (below, "the state hand-over"). */
  const void *state_in;
  size_t state_in_bytes;
  void **state_out;
  size_t *state_out_bytes;
  /* DiLoCo only. state_in_replica = 1: state_in is another replica's, so this tasklet replaces a
   * lost replica: it takes the outer weights and momentum, starts its inner steps from the outer
   * weights (not the other replica's inner ones) with zero residuals. start_step > 0: start at
   * that step (at or past the blob's, in the same outer round): the batches of the steps between
   * are drawn and dropped, so every replica reads the same data from there on. */
  int state_in_replica;
  long start_step;
} parallel_tasklet_config;

/* What a run did. */
typedef struct {
  long steps_done;     /* optimizer steps completed in total (resumed ones included) */
  int time_limited;    /* 1: the run stopped early at run.time_limit */
  float last_val_loss; /* the last validation loss (NAN if none was taken) */
  float last_loss;     /* the last step's mean loss (NAN if no step ran) */
  double seconds;      /* wall time of parallel_tasklet_run */
  double compute_s;    /* of it, in forward / backward passes */
  long recomputes;     /* forward passes run again for a backward (pipeline.h) */
  /* Where the steps' time went: the pipeline's passes and transfers, the tied embedding's
   * exchange, the data-parallel reduce, and the (norm share, loss) exchange between all. */
  double pipeline_s, tied_s, reduce_s, norm_s;
  uint64_t bytes_pipeline, bytes_data, bytes_control; /* sent by this tasklet */
  uint64_t bytes_site; /* sent between the ranks of its site, all ranks together (0: no site) */
} parallel_tasklet_result;

/* The run at parallel_run_config_default, no seat or wiring (stage and replica 0, no callbacks,
 * no resume), device the process default ("" until set). */
parallel_tasklet_config parallel_tasklet_config_default(void);

/* Sets the device that parallel_tasklet_config_default names from now on, for a program whose
 * tasklet configs are built elsewhere (peerd: one tasklet per process). Checks the name with
 * kernels_for_device in the calling thread first and returns its status — WT_EINVAL for a
 * malformed name, WT_ENOTSUP for a build without CUDA or a GPU that is not there, each with
 * kernels_for_device's message — changing nothing on failure. Call it before any tasklet
 * starts. */
int parallel_tasklet_set_default_device(const char *name);

/* ---- from a run description (run_config.h) ------------------------------------------------- */

/* The trainer's config of the run for a corpus of `vocab` tokens: the model (MoE options
 * applied, validated), batch, micro-batches, steps, validation batches, seed and the optimizer
 * (min-lr capped at lr). Returns WT_OK or WT_EINVAL naming the option (*tc unchanged). */
int parallel_run_trainer_config(const parallel_run_config *run, int vocab, trainer_config *tc);

/* Tasklet (stage, replica)'s config of the run over `data` (borrowed): the run copied, the seat
 * set, everything else parallel_tasklet_config_default's (the device, resume, state hand-over,
 * callbacks and dp_ring are the caller's to set). Checks that the run makes a trainer config for
 * the data: returns WT_OK or parallel_run_trainer_config's error. */
int parallel_tasklet_config_from_run(const parallel_run_config *run, int stage, int replica,
                                     const data_set *data, parallel_tasklet_config *cfg);

/* Checks a config against itself and a world size: ranges, S·R = world_size, B divisible by
 * R·m, layer ranges, codec names, ZeRO with a codec or DiLoCo. Returns WT_OK or WT_EINVAL
 * naming the field and what to do. */
int parallel_tasklet_config_validate(const parallel_tasklet_config *cfg, int world_size);

/* Runs the tasklet for cfg->run.steps steps (fewer with stop_after) over world (borrowed; its
 * rank must be cfg->stage·R + cfg->replica). Fills *result (may be NULL). Returns WT_OK, or the
 * first error (a bad config, a transport error or deadline, a corrupt message, a checkpoint
 * error, a diverged loss), with wt_last_error() naming the stage, replica and step. */
int parallel_tasklet_run(const parallel_tasklet_config *cfg, parallel_comm *world,
                         parallel_tasklet_result *result);

/* ---- the state hand-over ---------------------------------------------------------------------

   A state blob holds what a checkpoint holds for one stage — parameters, optimizer state and its
   step count, the steps done and the data position — as little-endian bytes behind a 64-byte
   header (magic "WTSTATE1", stage, layer range, steps, sizes). Every replica of a stage at the
   same step holds the same blob, so a tasklet started from another replica's blob continues
   bit-exactly. Blobs are made by the same build: the data position is its raw bytes.

   In a DiLoCo run the parameters are the replica's inner ones, and a DiLoCo record follows
   (diloco_save: θ_outer, momentum, outer steps done, residuals); the header counts the outer
   steps done. The replicas' blobs then differ, but their outer parts agree after every outer
   step. A blob at an outer-step boundary whose outer step failed has one outer step fewer than
   its step asks for: a tasklet started from it takes that outer step first, with the other
   replicas of its stage (who are in the same place). */

/* Reads the header of a blob: its stage and steps done, and (outer may be NULL) the outer steps
 * it has done (-1 without DiLoCo). Returns WT_OK or WT_ECORRUPT (too short, wrong magic, sizes
 * that do not add up to `bytes`). */
int parallel_tasklet_state_info(const void *blob, size_t bytes, int *stage, long *step);
int parallel_tasklet_state_outer(const void *blob, size_t bytes, long *outer);

/* ---- the run binding -------------------------------------------------------------------------

   What ties a run directory's checkpoints to one run: the run id and, as strings, every setting
   that changes the run's arithmetic — seed, data (token count, tokenizer, CRC-32 of the tokens),
   stages, replicas, batch, micro-batches, schedule, model, optimizer and its hyperparameters,
   the gradient and activation codecs with error feedback, DiLoCo, the robust aggregate — and steps
   (the lr schedule's horizon); all of them the same on every tasklet of the run. Each stage
   checkpoint records it (state.json's "train") and so does the manifest ("run"). A resume refuses a
   stage checkpoint whose binding is not the manifest's (a stage directory from another run) and a
   run whose bound settings differ from the recorded ones; steps may change (a run extended or
   shortened): the resume says so and the manifest records it. What a run may change freely (it
   never changes the numbers, or only validation and bookkeeping): ZeRO-1, activation slots,
   validation, checkpoint interval and count, stop_after, time limit, deadlines, and where a stage
   runs (device, site ranks: placement may differ between tasklets and between epochs).
   docs/runtime.md has the list. */

#define PARALLEL_RUN_BINDING_MAX 2048

/* cfg's binding as JSON text (one object of strings, malloc'd; the caller frees it), with
 * run_id, or one derived from the other fields when run_id is 0. cfg->data may be NULL (then
 * the data field is "none"). Never fails. */
char *parallel_run_binding(const parallel_tasklet_config *cfg, uint64_t run_id);

/* Checks that a run recorded with binding `was` may continue with binding `now` (run ids are
 * not compared: a resume is a new launch of the same run). Returns WT_OK, writing into notes
 * (may be NULL) what changed that may ("steps was 20, this run asks 40", "" when nothing did);
 * WT_EMISMATCH naming the first bound field that differs, both values and what to do
 * ("<what>: batch was 8, this run asks 16; resume with --batch 8 or start a new run
 * directory"); WT_ECORRUPT when `was` is not a binding. */
int parallel_run_binding_check(const char *what, const char *was, const char *now, char *notes,
                               size_t notes_size);

/* The run id a binding records (0 when it records none or is not a binding). */
uint64_t parallel_run_binding_id(const char *binding);

/* ---- a multi-stage run as one model (wantrain eval / sample) ------------------------------- */

/* 1 if path is a multi-stage run directory (it holds manifest.json). */
int parallel_run_is_multistage(const char *path);

/* As checkpoint_read_config and checkpoint_load (model/checkpoint.h, no optimizer), for either a
 * single-process checkpoint or a multi-stage run directory: then every stage's checkpoint at the
 * step the manifest names is verified and its tensors are copied into `model`, which must be a
 * whole model of the run's config; *meta is stage 0's. Returns checkpoint_load's statuses, or
 * WT_ECORRUPT for a malformed manifest, a stage at another step or layers no stage holds; the
 * model is unchanged on failure. */
int parallel_run_read_config(const char *path, gpt_config *cfg, checkpoint_meta *meta);
int parallel_run_load_model(const char *path, gpt_stage *model, checkpoint_meta *meta);

#endif
