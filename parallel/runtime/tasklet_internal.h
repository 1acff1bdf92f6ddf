/* tasklet_internal — the tasklet's state, shared by tasklet.c (setup, hooks, the run) and
 * tasklet_checkpoint.c (per-stage checkpoints and the run manifest). Not part of the API. */
#ifndef WT_PARALLEL_TASKLET_INTERNAL_H
#define WT_PARALLEL_TASKLET_INTERNAL_H

#include "compress/codec.h"
#include "compress/ef.h"
#include "kernels/kernels.h"
#include "parallel/collectives/collectives.h"
#include "parallel/runtime/diloco.h"
#include "parallel/runtime/pipeline.h"
#include "parallel/datacenter/site.h"
#include "parallel/runtime/tasklet.h"
#include "parallel/runtime/zero.h"

/* The sparse sync encoded on a GPU (tasklet_device_sync.c); all NULL on the host path. */
typedef struct {
  int decided;           /* the first sync chose the path */
  uint8_t *payload;      /* (cap) device: this replica's encoded gradient */
  uint8_t *payload_host; /* (cap) host_alloc: its copy for the all-gather */
  float *residual;       /* (n) device: the error feedback residual, mirrored in k->sef */
  float *sum_host;       /* (n) host_alloc: the decoded average */
  size_t cap;
} parallel_tasklet_dsync;

typedef struct {
  parallel_tasklet_config cfg;
  trainer_config train; /* the stage's (parallel_tasklet_trainer_config, layers and back end set) */
  parallel_comm *world; /* borrowed */
  parallel_comm *dp;    /* this stage's replicas */
  parallel_comm *pipe;  /* this replica's stages */
  trainer *t;
  parallel_pipeline *pipeline;
  parallel_site *site;   /* the stage's TP ranks (site_ranks > 1), or NULL */
  compress_codec *codec; /* gradient codec, or NULL */
  int sparse;            /* topk / randk: all-gathered */
  parallel_ef *ef;       /* compressed ring residuals */
  compress_ef *sef;      /* sparse sender residual */
  parallel_tasklet_dsync dsync;
  diloco *outer;          /* DiLoCo, or NULL */
  parallel_zero *zero;    /* ZeRO-1, or NULL */
  const kernels_ops *ops; /* the stage's back end */
  int holds_cuda;         /* this tasklet counts as the process's one on the CUDA back end */
  float *grads_host;      /* the reduced gradient on the host, between reduce and ZeRO's update */
  float *params_host;     /* ZeRO-1 on a device: the parameters' host copy (ops->host_alloc) */
  double t_start;         /* wt_now_s() when the run began (run.time_limit) */

  /* the robust sync (robust not "none", R > 1; else NULL), its evidence of this step in replica
   * order, and whether it ran in this step */
  parallel_robust *robust;
  parallel_robust_report robust_report;
  int robust_ran;
  /* spot checks (tasklet_spot.c): on when spot_row is set; the contribution of the replica this
   * tasklet checks in this step (n floats), and the check's result */
  float *spot_row;
  int spot_target; /* the replica checked in this step, -1: none */
  /* this replica's private check plan (parallel_tasklet_spot_drawn): the window of syncs it
   * was drawn for (+1; 0: none yet), the sync it checks at and the replica it checks */
  long spot_window, spot_plan_sync;
  int spot_plan_target;
  struct parallel_spot_round *spot_round; /* DiLoCo round checks (tasklet_spot_round.c), or NULL */
  parallel_tasklet_spot spot;
  int spot_ran;
  /* activation checks (a pipeline): rows × T × C floats each (spot_act_n, 0: off) — the kept
   * copy of what this stage sent (or, checking, the target's input), the next stage's copy of
   * the target's output, and the recomputed output; host memory of the stage's back end */
  float *spot_act[3];
  size_t spot_act_n;
  /* The run binding (tasklet.h): the run's id (0 until the first checkpoint or the resume sets
   * it), this run's binding text ("" until made) and the changes resumes recorded (a JSON
   * array, "" for none), which every manifest carries on. */
  uint64_t run_id;
  char binding[PARALLEL_RUN_BINDING_MAX];
  char run_changes[PARALLEL_RUN_BINDING_MAX];
  int stop; /* world rank 0 asked every tasklet to stop after this step */
  /* wall time of each part of the steps so far (parallel_tasklet_result) */
  double pipeline_s, tied_s, reduce_s, norm_s;
} parallel_tasklet;

/* run_tasklet.c: the run's option values as the runtime takes them — the trainer config without
 * its model (parallel_run_trainer_config's other fields), the schedule, and error feedback
 * (sync.grad_ef; "auto" is on). */
void parallel_run_trainer_fields(const parallel_run_config *run, trainer_config *tc);
assign_schedule_kind parallel_run_schedule(const parallel_run_config *run);
int parallel_run_grad_ef(const parallel_run_config *run);
/* The stage's trainer config: the run's for c->data's vocabulary, with this tasklet's replica,
 * ZeRO-1's external optimizer and c->kernels; the layers and device are setup's. Returns WT_OK
 * or parallel_run_trainer_config's error. */
int parallel_tasklet_trainer_config(const parallel_tasklet_config *c, trainer_config *tc);

int parallel_tasklet_setup(parallel_tasklet *k, const parallel_tasklet_config *cfg,
                           parallel_comm *world);
void parallel_tasklet_teardown(parallel_tasklet *k);
int parallel_tasklet_train(parallel_tasklet *k, parallel_tasklet_result *res);

/* Saves this stage's checkpoint (replica 0) and, once every stage has, the manifest (world rank
 * 0); every tasklet takes part in the agreement. Returns WT_OK or the first error. */
int parallel_tasklet_checkpoint(parallel_tasklet *k);

/* Loads the step the manifest names into this tasklet. */
int parallel_tasklet_resume(parallel_tasklet *k);

/* tasklet_spot.c: spot checks. _init allocates what a run with checks needs (none: nothing);
 * _before_sync, before the step's robust sync, asks it to keep the checked replica's
 * contribution when this tasklet checks in this step; _after_sync, with g the synced gradient
 * (n floats, on the host), recomputes that replica's gradient, compares and restores g. */
void parallel_tasklet_spot_init(parallel_tasklet *k);
void parallel_tasklet_spot_before_sync(parallel_tasklet *k, long step);
int parallel_tasklet_spot_after_sync(parallel_tasklet *k, float *g, size_t n);
/* _act_before, before the step's passes, keeps what this stage sends of a micro-batch a
 * checker of the next stage needs; _act_after, after them, sends this tasklet's copies to the
 * checkers that need them and, when it checks in this step, recomputes and compares. */
void parallel_tasklet_spot_act_before(parallel_tasklet *k, long step);
int parallel_tasklet_spot_act_after(parallel_tasklet *k, long step);
void parallel_tasklet_spot_free(parallel_tasklet *k);
/* This tasklet's private draw: 1 when it checks at sync `sync` (a step, or a DiLoCo round
 * numbered from 1), the replica it checks in *target. */
int parallel_tasklet_spot_drawn(parallel_tasklet *k, long sync, int *target);
/* 1 for a codec whose rounding a recompute bounds (fp32, fp16, bf16, int8, int4). */
int parallel_tasklet_spot_codec_bounded(const compress_codec *codec);
/* Fills sp's cosine, norm_ratio (and through a codec rel_error, bound) and failed for a
 * contribution `theirs` against the recomputed `mine`, n floats each (docs/trust.md's table). */
void parallel_tasklet_spot_judge(const compress_codec *codec, const float *theirs,
                                 const float *mine, size_t n, parallel_tasklet_spot *sp);

/* tasklet_spot_round.c: spot checks of DiLoCo rounds (one stage, a robust sync). _init
 * allocates what they need (none: nothing) and takes the first round's start; _before, before
 * outer step `round` (from 1), keeps θ_outer and the target's contribution when this tasklet
 * checks that round; _after, after it: every replica commits a digest of its optimizer state
 * and tells each other whether it checks it, sends its round's start and end state to whoever
 * asked, and the checker recomputes the round from the committed start and compares. */
void parallel_tasklet_spot_round_init(parallel_tasklet *k);
void parallel_tasklet_spot_round_before(parallel_tasklet *k, long round);
int parallel_tasklet_spot_round_after(parallel_tasklet *k, long round);
void parallel_tasklet_spot_round_free(parallel_tasklet *k);

/* tasklet_state.c: the stage as a state blob (tasklet.h), malloc'd into *out; and back. */
/* tasklet_device_sync.c: the sparse sync of device gradient g[0..n) encoded on the device.
 * Returns 1 when it ran (g holds the average), 0 when this tasklet syncs on the host, or an
 * error status. The residual's mirror in k->sef: _down before saving it, _up after loading. */
int parallel_tasklet_device_sync(parallel_tasklet *k, float *g, size_t n);
void parallel_tasklet_device_sync_residual_down(parallel_tasklet *k);
void parallel_tasklet_device_sync_residual_up(parallel_tasklet *k);
void parallel_tasklet_device_sync_free(parallel_tasklet *k);

int parallel_tasklet_state_save(parallel_tasklet *k, void **out, size_t *bytes);
int parallel_tasklet_state_load(parallel_tasklet *k, const void *blob, size_t bytes);
/* Moves a DiLoCo stage forward to `step` (config start_step) without training: draws and drops
 * the batches in between. Refused (WT_EINVAL) across an outer step. */
int parallel_tasklet_state_advance(parallel_tasklet *k, long step);

#endif
