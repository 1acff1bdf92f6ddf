/* diloco_run — DiLoCo: `workers` replicas (one gpt_stage each) take H inner AdamW (or SGD) steps
 * on their own micro-batches, then average their pseudo-gradients through parallel/runtime/diloco.h
 * (fp32 ring, or compressed with --codec, error feedback with --ef) over the in-process
 * transport, one thread per rank, and take the outer (Nesterov) step. --steps counts inner steps
 * per worker, so a run sees exactly the tokens of a synchronous dp run with the same --steps.
 *
 * Streaming DiLoCo (Douillard et al. 2025) with --fragments F: the flat parameter buffer is cut
 * into F contiguous slices of (nearly) equal size, each with its own outer optimizer (its own
 * θ_outer, momentum and error-feedback residuals). Slice f synchronises when
 * step % H == f·H/F, so every slice still syncs once per H steps but at staggered times, and one
 * sync moves 1/F of the bytes. With --overlap τ the sync's result arrives τ inner steps later,
 * as if the all-reduce ran in the background while training went on: the pseudo-gradient is
 * taken from a snapshot at the sync step, and when the new θ_outer arrives each replica merges
 * it into the weights it trained meanwhile, θ = α·θ + (1 − α)·θ_outer (--merge-alpha α).
 * After the last step every slice is synchronised once more (pending results first), so the run
 * ends with one model. */
#include "tools/compress-experiments/experiments.h"

#include "common/common.h"
#include "model/trainer.h"
#include "parallel/runtime/diloco.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  const exp_config *cfg;
  int W, F;
  gpt_stage **s;  /* [worker] */
  gpt_stage *avg; /* the replicas' mean, for the validation curve */
  optim **opt;    /* [worker]: inner optimizers */
  diloco **outer; /* [worker * F + fragment]: every replica runs the same outer steps */
  float **snap;   /* [worker * F + fragment]: the fragment at its sync step (overlap only) */
  size_t *off;    /* (F + 1): fragment f is params[off[f], off[f + 1]) */
  int *go;        /* (F): fragments the next parallel run synchronises */
  int use_snap;   /* the next run works on the snapshots */
  long *due;      /* (F): inner step at which a pending result merges; -1 none */
  data_position *pos;
  optim_config oc;
  compress_codec *codec;
  parallel_inproc_group *g;
  int *in, *tg;
  double peak_sync_bytes; /* most bytes rank 0 sent in one synchronisation event */
  int rounds;             /* synchronisation events of fragment 0 */
} s_run;

static float *s_frag(s_run *r, int w, int f) {
  size_t n;
  return r->use_snap ? r->snap[w * r->F + f] : gpt_stage_params(r->s[w], &n) + r->off[f];
}

static int s_rank_outer(parallel_comm *c, void *arg) {
  s_run *r = arg;
  int w = parallel_comm_rank(c);
  exp_threads_apply(r->cfg);
  for (int f = 0; f < r->F; f++)
    if (r->go[f]) WT_CHECK(diloco_outer_step(r->outer[w * r->F + f], c, s_frag(r, w, f)));
  return WT_OK;
}

/* Runs the outer steps of the fragments flagged in r->go on every rank; `peak`: count its bytes
 * towards peak_bytes_per_sync (the final sync of all fragments at once does not). */
static int s_sync(s_run *r, int use_snap, int peak) {
  r->use_snap = use_snap;
  parallel_comm *c0 = parallel_inproc_group_comm(r->g, 0);
  double b0 = (double)parallel_comm_bytes_sent(c0);
  int rc = parallel_inproc_run(r->g, s_rank_outer, r, NULL);
  if (peak)
    r->peak_sync_bytes = WT_MAX(r->peak_sync_bytes, (double)parallel_comm_bytes_sent(c0) - b0);
  if (r->go[0]) r->rounds++;
  return rc;
}

/* θ = α·θ + (1 − α)·θ_outer for fragment f on every replica (θ_outer is in the snapshot). */
static void s_merge(s_run *r, int f) {
  const float a = (float)r->cfg->merge_alpha;
  for (int w = 0; w < r->W; w++) {
    size_t n;
    float *p = gpt_stage_params(r->s[w], &n) + r->off[f];
    const float *o = r->snap[w * r->F + f];
    for (size_t i = 0; i < r->off[f + 1] - r->off[f]; i++) p[i] = a * p[i] + (1 - a) * o[i];
  }
}

/* After inner step t (1-based): start the syncs due now, and merge results that arrive now. */
static int s_after_step(s_run *r, long t) {
  const exp_config *cfg = r->cfg;
  const int tau = cfg->overlap;
  int any = 0;
  for (int f = 0; f < r->F; f++) {
    r->go[f] = t % cfg->H == (long)f * cfg->H / r->F;
    any |= r->go[f];
  }
  if (!any && tau == 0) return WT_OK;
  if (tau == 0) return s_sync(r, 0, 1);
  for (int f = 0; f < r->F; f++) // the averaged result of a sync started τ steps ago arrives
    if (r->due[f] == t) s_merge(r, f), r->due[f] = -1;
  if (!any) return WT_OK;
  for (int f = 0; f < r->F; f++) {
    if (!r->go[f]) continue;
    for (int w = 0; w < r->W; w++) {
      size_t n;
      memcpy(r->snap[w * r->F + f], gpt_stage_params(r->s[w], &n) + r->off[f],
             (r->off[f + 1] - r->off[f]) * sizeof(float));
    }
    r->due[f] = t + tau;
  }
  // The arithmetic of the background all-reduce happens now on the snapshot; only its use waits.
  return s_sync(r, 1, 1);
}

/* The end of the run: pending results merge, then every fragment syncs once more (θ = θ_outer). */
static int s_final_sync(s_run *r) {
  for (int f = 0; f < r->F; f++) {
    if (r->due[f] >= 0) s_merge(r, f), r->due[f] = -1;
    r->go[f] = 1;
  }
  return s_sync(r, 0, 0);
}

/* One inner step of worker w on its own next micro-batch; *loss receives its loss. */
static int s_inner_step(s_run *r, const data_set *d, int w, double *loss) {
  const int B = r->cfg->batch, T = r->cfg->seq;
  gpt_stage *s = r->s[w];
  gpt_stage_zero_grad(s);
  exp_next_batch(r->cfg, d, &r->pos[w], w, r->in, r->tg);
  float l;
  WT_CHECK(trainer_micro_grads(s, r->in, r->tg, B, T, 1.0f, &l));
  *loss = l;
  return exp_optim_step(r->opt[w], s, trainer_grad_sq_norm(s), l);
}

static int s_check(const exp_config *cfg, size_t n) {
  if (cfg->fragments > cfg->H || (size_t)cfg->fragments > n)
    return wt_fail(WT_EINVAL, "--fragments %d must be at most --H %d and the parameter count",
                   cfg->fragments, cfg->H);
  if (cfg->overlap >= cfg->H)
    return wt_fail(WT_EINVAL,
                   "--overlap %d must be below --H %d (a fragment's result must "
                   "arrive before its next sync starts)",
                   cfg->overlap, cfg->H);
  return WT_OK;
}

static int s_setup(s_run *r, const data_set *d) {
  const exp_config *cfg = r->cfg;
  const int W = cfg->workers, F = cfg->fragments;
  gpt_config gc = exp_model_config(cfg, d);
  size_t n = gpt_config_num_params(&gc);
  WT_CHECK(s_check(cfg, n));
  r->W = W, r->F = F;
  r->oc = exp_optim_config(cfg, cfg->steps);
  r->s = wt_xcalloc(W, sizeof *r->s);
  r->opt = wt_xcalloc(W, sizeof *r->opt);
  r->outer = wt_xcalloc((size_t)W * F, sizeof *r->outer);
  r->snap = wt_xcalloc((size_t)W * F, sizeof *r->snap);
  r->off = wt_xcalloc(F + 1, sizeof *r->off);
  r->go = wt_xcalloc(F, sizeof *r->go);
  r->due = wt_xcalloc(F, sizeof *r->due);
  r->pos = wt_xcalloc(W, sizeof *r->pos);
  for (int f = 0; f <= F; f++) r->off[f] = n * (size_t)f / (size_t)F;
  for (int f = 0; f < F; f++) r->due[f] = -1;
  int sparse;
  WT_CHECK(exp_codec_new(cfg->codec, n, &r->codec, &sparse));
  diloco_config dc = diloco_config_default();
  dc.lr = (float)cfg->outer_lr;
  dc.momentum = (float)cfg->outer_momentum;
  dc.codec = r->codec;
  dc.error_feedback = cfg->ef;
  dc.sparse = sparse;
  for (int w = 0; w < W; w++) {
    r->s[w] = gpt_stage_new(&gc, 0, gc.n_layer, cfg->batch, cfg->seq);
    if (!r->s[w]) return WT_EINVAL;
    gpt_stage_init_weights(r->s[w], (uint64_t)cfg->seed); // the same θ on every replica
    r->opt[w] = optim_new(&r->oc, gpt_stage_tensor(r->s[w], 0), gpt_stage_num_tensors(r->s[w]));
    if (!r->opt[w]) return WT_EINVAL;
    float *p = gpt_stage_params(r->s[w], &n);
    for (int f = 0; f < F; f++) {
      size_t nf = r->off[f + 1] - r->off[f];
      diloco *o = r->outer[w * F + f] = diloco_new(nf, &dc);
      if (!o) return WT_EINVAL;
      diloco_init(o, p + r->off[f]);
      if (cfg->overlap > 0) r->snap[w * F + f] = wt_xmalloc(nf * sizeof(float));
    }
    exp_data_position_init(cfg, w, &r->pos[w]); // as in dp
  }
  r->avg = gpt_stage_new(&gc, 0, gc.n_layer, cfg->batch, cfg->seq);
  r->g = parallel_inproc_group_new(W);
  r->in = wt_xmalloc(sizeof(int) * cfg->batch * cfg->seq);
  r->tg = wt_xmalloc(sizeof(int) * cfg->batch * cfg->seq);
  return r->g && r->avg ? WT_OK : WT_EINVAL;
}

static void s_teardown(s_run *r) {
  for (int w = 0; w < r->cfg->workers && r->s; w++) {
    gpt_stage_destroy(&r->s[w]);
    optim_destroy(&r->opt[w]);
    for (int f = 0; f < r->F; f++) {
      diloco_destroy(&r->outer[w * r->F + f]);
      free(r->snap[w * r->F + f]);
    }
  }
  gpt_stage_destroy(&r->avg);
  free(r->s), free(r->opt), free(r->outer), free(r->snap), free(r->off), free(r->go);
  free(r->due), free(r->pos), free(r->in), free(r->tg);
  compress_codec_destroy(&r->codec);
  parallel_inproc_group_destroy(&r->g);
}

/* Validation loss of the replicas' mean (the model a full plain-average sync would give). */
static double s_eval_mean(s_run *r, const data_set *d) {
  size_t n;
  float *a = gpt_stage_params(r->avg, &n);
  memset(a, 0, n * sizeof(float));
  for (int w = 0; w < r->W; w++) {
    const float *p = gpt_stage_params(r->s[w], &n);
    for (size_t i = 0; i < n; i++) a[i] += p[i] / (float)r->W;
  }
  return exp_eval_loss(&r->avg, 1, d, r->cfg);
}

static void s_report(s_run *r, const data_set *d, double val0, double train, int steps,
                     int diverged, cJSON *curve, double t0) {
  const exp_config *cfg = r->cfg;
  cJSON *j = exp_result_new(cfg);
  cJSON_AddStringToObject(j, "codec", cfg->codec);
  cJSON_AddBoolToObject(j, "ef", cfg->ef);
  cJSON_AddStringToObject(j, "optimizer", cfg->optimizer);
  cJSON_AddNumberToObject(j, "lr", r->oc.lr);
  cJSON_AddNumberToObject(j, "H", cfg->H);
  cJSON_AddNumberToObject(j, "outer_lr", cfg->outer_lr);
  cJSON_AddNumberToObject(j, "outer_momentum", cfg->outer_momentum);
  cJSON_AddNumberToObject(j, "fragments", cfg->fragments);
  cJSON_AddNumberToObject(j, "overlap", cfg->overlap);
  cJSON_AddNumberToObject(j, "merge_alpha", cfg->overlap > 0 ? cfg->merge_alpha : 0);
  cJSON_AddNumberToObject(j, "workers", cfg->workers);
  cJSON_AddNumberToObject(j, "steps", steps);
  cJSON_AddNumberToObject(j, "rounds", r->rounds);
  cJSON_AddNumberToObject(j, "tokens", (double)steps * cfg->workers * cfg->batch * cfg->seq);
  size_t n = r->off[r->F];
  cJSON_AddNumberToObject(j, "params", (double)n);
  cJSON_AddStringToObject(j, "reduce",
                          "parallel/runtime/diloco.h over parallel/ collectives, in-process");
  cJSON_AddBoolToObject(j, "diverged", diverged);
  cJSON_AddNumberToObject(j, "initial_val_loss", val0);
  cJSON_AddNumberToObject(j, "final_val_loss", diverged ? NAN : exp_eval_loss(r->s, 1, d, cfg));
  cJSON_AddNumberToObject(j, "final_train_loss", train);
  exp_add_bytes(j, cfg, r->g, steps, n);
  // What rank 0 sent in its largest synchronisation during the run (not the final one).
  cJSON_AddNumberToObject(j, "peak_bytes_per_sync", r->peak_sync_bytes);
  if (curve) cJSON_AddItemToObject(j, "val_curve", curve);
  cJSON_AddNumberToObject(j, "wall_s", wt_now_s() - t0);
  exp_print(j);
}

int exp_run_diloco(const exp_config *cfg) {
  double t0 = wt_now_s();
  data_set *d = exp_data_open(cfg);
  if (!d) return WT_EINVAL;
  s_run r = {.cfg = cfg};
  int rc = s_setup(&r, d), diverged = 0, steps = 0;
  double train = 0, val0 = rc == WT_OK ? exp_eval_loss(r.s, 1, d, cfg) : NAN;
  cJSON *curve = cfg->eval_every > 0 ? cJSON_CreateArray() : NULL;
  for (int step = 0; rc == WT_OK && step < cfg->steps && !diverged; step++, steps++) {
    double mean = 0, loss = 0;
    for (int w = 0; rc == WT_OK && w < cfg->workers; w++) {
      rc = s_inner_step(&r, d, w, &loss);
      mean += loss / cfg->workers;
    }
    diverged = !isfinite(mean) || mean > 1e3;
    if (step >= cfg->steps - 10) train += mean / WT_MIN(10, cfg->steps);
    if (rc == WT_OK && !diverged && step + 1 < cfg->steps) rc = s_after_step(&r, step + 1);
    if (curve && !diverged && (step + 1) % cfg->eval_every == 0 && step + 1 < cfg->steps)
      exp_curve_add(curve, step + 1, s_eval_mean(&r, d));
  }
  // Synchronise after the last step so the result is one model.
  if (rc == WT_OK && !diverged) rc = s_final_sync(&r);
  if (curve && !diverged && rc == WT_OK) exp_curve_add(curve, steps, exp_eval_loss(r.s, 1, d, cfg));
  if (rc == WT_OK)
    s_report(&r, d, val0, diverged ? NAN : train, steps, diverged, curve, t0);
  else
    cJSON_Delete(curve);
  s_teardown(&r);
  data_set_destroy(&d);
  return rc;
}
