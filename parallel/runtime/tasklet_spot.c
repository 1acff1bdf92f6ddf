/* tasklet_spot — spot checks of the robust sync's contributions (docs/trust.md). Every
 * spot_check_every steps one replica of the stage (the checker) recomputes another replica's
 * (the target's) gradient of the step and compares it with the contribution the target sent,
 * which the robust all-gather made visible to every replica.
 *
 * Sound only where the recompute gives the target's contribution back: a synchronous run
 * (every replica holds the same weights at the sync), one stage (the whole model is local, so
 * the target's whole step — all its micro-batches, whose sum is its contribution — is
 * recomputed from its rows of the global batch, which every replica draws alike), the
 * contribution sent as raw fp32 (grad_codec none) and a robust sync (else no contribution is
 * visible). Elsewhere no check is made. Who checks whom follows from the seed and the step, so
 * every replica agrees without a message; the checker alone learns the verdict and reports it
 * (on_step's spot), and the coordinator counts a failure only when two checkers agree. */
#include "parallel/runtime/tasklet_internal.h"

#include "common/common.h"
#include "common/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int s_applies(const parallel_tasklet *k) {
  const parallel_tasklet_config *c = &k->cfg;
  return c->run.spot_check_every > 0 && k->robust && c->run.stages == 1 && c->run.replicas >= 2 &&
         !c->run.sync.diloco && !k->codec;
}

/* The checker and target replicas of step `step`, or 0 when no check is due. */
static int s_pair(const parallel_tasklet *k, long step, int *checker, int *target) {
  const int R = k->cfg.run.replicas;
  if (!k->spot_row || step % k->cfg.run.spot_check_every != 0) return 0;
  wt_rng rng;
  wt_rng_seed(&rng, (uint64_t)k->cfg.run.seed ^ (0x5b07c4ec3ull * (uint64_t)step));
  *target = (int)wt_rng_below(&rng, (uint64_t)R);
  *checker = (*target + 1 + (int)wt_rng_below(&rng, (uint64_t)(R - 1))) % R;
  return 1;
}

/* The data-parallel rank of replica r (dp_ring: the replica at each rank). */
static int s_dp_rank(const parallel_tasklet *k, int r) {
  if (!k->cfg.dp_ring) return r;
  for (int i = 0; i < k->cfg.run.replicas; i++)
    if (k->cfg.dp_ring[i] == r) return i;
  return -1;
}

void parallel_tasklet_spot_init(parallel_tasklet *k) {
  k->spot_target = -1;
  if (!s_applies(k)) return;
  size_t n;
  gpt_stage_grads(trainer_model(k->t), &n);
  k->spot_row = wt_xmalloc(sizeof(float) * (n + 1));
}

void parallel_tasklet_spot_free(parallel_tasklet *k) {
  free(k->spot_row);
  k->spot_row = NULL;
}

void parallel_tasklet_spot_before_sync(parallel_tasklet *k, long step) {
  int checker, target;
  k->spot_target = -1, k->spot_ran = 0;
  if (!s_pair(k, step, &checker, &target) || checker != k->cfg.replica) return;
  k->spot_target = target;
  parallel_robust_keep_next(k->robust, s_dp_rank(k, target), k->spot_row);
}

/* The cosine of a to b and |a| / |b|, in double. */
static void s_compare(const float *a, const float *b, size_t n, double *cosine, double *ratio) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < n; i++)
    ab += (double)a[i] * b[i], aa += (double)a[i] * a[i], bb += (double)b[i] * b[i];
  *cosine = aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : (aa == bb ? 1 : 0);
  *ratio = bb > 0 ? sqrt(aa / bb) : (aa > 0 ? INFINITY : 1);
}

int parallel_tasklet_spot_after_sync(parallel_tasklet *k, float *g, size_t n) {
  const int target = k->spot_target;
  k->spot_target = -1;
  /* a contribution the sync already left out is evidence enough (and may not have decoded) */
  if (target < 0 || k->robust_report.rank[target].flags) return WT_OK;
  const int R = k->cfg.run.replicas, T = k->cfg.run.seq;
  const size_t rows = (size_t)(k->cfg.run.batch / R);
  const int *inputs, *targets;
  trainer_batch(k->t, &inputs, &targets);
  gpt_stage *s = trainer_model(k->t);
  const double t0 = wt_now_s();
  float *synced = wt_xmalloc(sizeof(float) * (n + 1)), loss;
  memcpy(synced, g, sizeof(float) * n);
  gpt_stage_zero_grad(s);
  int rc = parallel_pipeline_run(k->pipeline, inputs + (size_t)target * rows * T,
                                 targets + (size_t)target * rows * T, &loss);
  if (rc == WT_OK) {
    size_t m;
    const float *mine = gpt_stage_grads_host(s, &m);
    parallel_tasklet_spot *sp = &k->spot;
    *sp = (parallel_tasklet_spot){.checker = k->cfg.replica, .target = target};
    s_compare(k->spot_row, mine, WT_MIN(m, n), &sp->cosine, &sp->norm_ratio);
    sp->failed = !(sp->cosine >= PARALLEL_TASKLET_SPOT_COSINE &&
                   fabs(sp->norm_ratio - 1) <= PARALLEL_TASKLET_SPOT_NORM);
    k->spot_ran = 1;
    sp->seconds = wt_now_s() - t0;
    if (sp->failed)
      WT_WARN("stage %d step %ld: spot check by replica %d: replica %d's contribution is not its "
              "gradient: cosine %.4f (at least %.2f), norm ratio %.4f (1 ± %.2f)",
              k->cfg.stage, trainer_steps_done(k->t) + 1, k->cfg.replica, target, sp->cosine,
              PARALLEL_TASKLET_SPOT_COSINE, sp->norm_ratio, PARALLEL_TASKLET_SPOT_NORM);
  }
  memcpy(g, synced, sizeof(float) * n);
  free(synced);
  return rc;
}
