/* tasklet_spot — spot checks (docs/trust.md): on average once in spot_check_every steps of a
 * stage one replica (the checker) recomputes part of another replica's (the target's) step and
 * compares it with what the target sent. For gradient checks (and tasklet_spot_round.c's DiLoCo
 * round checks) each replica draws privately, with randombytes, when it checks and whom
 * (parallel_tasklet_spot_drawn), so no target can know in advance; the checker alone learns the
 * verdict and reports it (on_step's spot), and the coordinator counts a failure only when two
 * checkers agree. A gradient check needs every replica of the stage to hold the same weights
 * while the step's passes run: a synchronous run, with a robust sync (the run's trust machinery
 * is on).
 *
 * Gradient checks, one stage: the checker recomputes the target's whole step — all its
 * micro-batches, whose sum is its contribution — from its rows of the global batch, which every
 * replica draws alike, and compares it with the contribution the robust all-gather made visible.
 * Raw, or through a codec whose rounding a recompute bounds (parallel_tasklet_spot_judge).
 *
 * Activation checks, a pipeline: for each cut s -> s+1, the checker, a replica of stage s,
 * recomputes the target's forward of one sampled micro-batch and compares it with what the
 * target's next stage received (it sends its copy to the checker). The forward's input is the
 * micro-batch's tokens on stage 0, else what the target's previous stage sent (that stage keeps
 * a copy and sends it to the checker): the target's own word enters nowhere. Who checks whom
 * here, and which micro-batch, follow from the seed, the step and the stage, so the neighbours
 * know without a message what to keep and send. Only with act_codec none (a lossy codec's
 * decoded activations are not the forward's output) and no site. Either neighbour could lie
 * about what crossed its cut; docs/trust.md says what that allows. */
#include "parallel/runtime/tasklet_internal.h"

#include "common/common.h"
#include "common/rng.h"

#include <math.h>
#include <sodium.h> /* defines: randombytes_uniform */
#include <stdlib.h>
#include <string.h>

/* World tags of the activation checks' copies (tasklet.c's S_TAG_NORM, S_TAG_VAL are 1, 2). */
#define S_TAG_SPOT_OUT 3 /* what the target's next stage received, to the checker */
#define S_TAG_SPOT_IN 4  /* what the target's previous stage sent, to the checker */

static int s_checks(const parallel_tasklet *k) {
  const parallel_tasklet_config *c = &k->cfg;
  return c->run.spot_check_every > 0 && k->robust && c->run.replicas >= 2 && !c->run.sync.diloco;
}

/* A codec whose rounding is bounded by a fraction of each value's block scale (fp16, bf16,
 * int8, int4): what it sends, Q(g + e) with e the rounding of the step before, stays within a
 * few roundings of g, so a recompute of g bounds it. Sign, top-k and rand-k leave most of g in
 * the sender's residual, which no one else knows: nothing is checked there. */
int parallel_tasklet_spot_codec_bounded(const compress_codec *codec) {
  const compress_codec_id id = compress_codec_get_id(codec);
  return id == COMPRESS_CODEC_FP32 || id == COMPRESS_CODEC_FP16 || id == COMPRESS_CODEC_BF16 ||
         id == COMPRESS_CODEC_INT8 || id == COMPRESS_CODEC_INT4;
}

static int s_applies(const parallel_tasklet *k) {
  return s_checks(k) && k->cfg.run.stages == 1 &&
         (!k->codec || parallel_tasklet_spot_codec_bounded(k->codec));
}

static int s_applies_act(const parallel_tasklet *k) {
  return s_checks(k) && k->cfg.run.stages > 1 && !strcmp(k->cfg.run.act_codec, "none") && !k->site;
}

/* This replica's own check plan (docs/trust.md): once per window of N·R syncs (N =
 * spot_check_every; a sync is a step, or a DiLoCo round) it draws with randombytes one sync of
 * the window and one of the other replicas, and checks that replica at that sync. The draw is
 * this tasklet's alone and touches no training state, so no replica can know in advance when it
 * is checked, and a run with checks still trains bitwise as one without. Returns 1 when this
 * tasklet checks at `sync`, with the replica in *target. */
int parallel_tasklet_spot_drawn(parallel_tasklet *k, long sync, int *target) {
  const int R = k->cfg.run.replicas;
  if (sync < 1 || R < 2 || k->cfg.run.spot_check_every < 1) return 0;
  const long W = WT_MIN((long)k->cfg.run.spot_check_every * R, (long)UINT32_MAX);
  const long window = (sync - 1) / W;
  if (k->spot_window != window + 1) {
    k->spot_window = window + 1;
    k->spot_plan_sync = window * W + 1 + (long)randombytes_uniform((uint32_t)W);
    k->spot_plan_target = (k->cfg.replica + 1 + (int)randombytes_uniform((uint32_t)(R - 1))) % R;
  }
  *target = k->spot_plan_target;
  return k->spot_plan_sync == sync;
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
  if (sodium_init() < 0) WT_WARN("libsodium did not initialise; randombytes falls back lazily");
  if (s_applies_act(k)) {
    size_t n;
    parallel_pipeline_received(k->pipeline, 0, &n);
    int ok = 1;
    for (int i = 0; i < 3; i++) ok &= (k->spot_act[i] = k->ops->host_alloc(sizeof(float) * n)) != 0;
    k->spot_act_n = n;
    if (!ok) {
      WT_WARN("stage %d replica %d: no host memory for the activation spot checks' %zu floats; "
              "none are made",
              k->cfg.stage, k->cfg.replica, 3 * n);
      parallel_tasklet_spot_free(k);
    }
  }
  if (!s_applies(k)) return;
  size_t n;
  gpt_stage_grads(trainer_model(k->t), &n);
  k->spot_row = wt_xmalloc(sizeof(float) * (n + 1));
}

void parallel_tasklet_spot_free(parallel_tasklet *k) {
  free(k->spot_row);
  k->spot_row = NULL;
  for (int i = 0; i < 3; i++) {
    if (k->spot_act[i]) k->ops->host_free(k->spot_act[i]);
    k->spot_act[i] = NULL;
  }
  k->spot_act_n = 0;
}

void parallel_tasklet_spot_before_sync(parallel_tasklet *k, long step) {
  int target;
  k->spot_target = -1; /* spot_ran: reset with the step (parallel_tasklet_spot_act_before) */
  if (!k->spot_row || !parallel_tasklet_spot_drawn(k, step, &target)) return;
  k->spot_target = target;
  parallel_robust_keep_next(k->robust, s_dp_rank(k, target), k->spot_row);
}

/* |a - b| / |b|, in double (0 for two zeros). */
static double s_rel_error(const float *a, const float *b, size_t n) {
  double dd = 0, bb = 0;
  for (size_t i = 0; i < n; i++) {
    const double d = (double)a[i] - b[i];
    dd += d * d, bb += (double)b[i] * b[i];
  }
  return bb > 0 ? sqrt(dd / bb) : (dd > 0 ? INFINITY : 0);
}

/* The codec's own rounding of g: |Q(g) - g| / |g|, the scale a compressed contribution's
 * distance to the recomputed gradient is judged on. */
static double s_codec_error(const compress_codec *codec, const float *g, size_t n) {
  const size_t cap = compress_codec_max_size(codec, n);
  void *msg = wt_xmalloc(cap + 1);
  float *q = wt_xmalloc(sizeof(float) * (n + 1));
  size_t len = 0;
  double e = INFINITY;
  if (compress_codec_encode(codec, g, n, msg, cap, &len) == WT_OK &&
      compress_codec_decode(codec, msg, len, q, n) == WT_OK)
    e = s_rel_error(q, g, n);
  free(msg), free(q);
  return e;
}

/* The cosine of a to b and |a| / |b|, in double. */
static void s_compare(const float *a, const float *b, size_t n, double *cosine, double *ratio) {
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < n; i++)
    ab += (double)a[i] * b[i], aa += (double)a[i] * a[i], bb += (double)b[i] * b[i];
  *cosine = aa > 0 && bb > 0 ? ab / sqrt(aa * bb) : (aa == bb ? 1 : 0);
  *ratio = bb > 0 ? sqrt(aa / bb) : (aa > 0 ? INFINITY : 1);
}

void parallel_tasklet_spot_judge(const compress_codec *codec, const float *theirs,
                                 const float *mine, size_t n, parallel_tasklet_spot *sp) {
  s_compare(theirs, mine, n, &sp->cosine, &sp->norm_ratio);
  sp->failed = !(sp->cosine >= PARALLEL_TASKLET_SPOT_COSINE &&
                 fabs(sp->norm_ratio - 1) <= PARALLEL_TASKLET_SPOT_NORM);
  if (codec) { /* a rounded contribution: its distance on the scale of the codec's rounding */
    sp->rel_error = s_rel_error(theirs, mine, n);
    sp->bound =
        PARALLEL_TASKLET_SPOT_CODEC_K * s_codec_error(codec, mine, n) + PARALLEL_TASKLET_SPOT_REL;
    sp->failed = !(sp->rel_error <= sp->bound);
  }
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
    parallel_tasklet_spot_judge(k->codec, k->spot_row, mine, WT_MIN(m, n), sp);
    k->spot_ran = 1;
    sp->seconds = wt_now_s() - t0;
    if (sp->failed && k->codec)
      WT_WARN("stage %d step %ld: spot check by replica %d: replica %d's contribution is not its "
              "gradient through %s: off by %.4f of its norm (at most %.4f)",
              k->cfg.stage, trainer_steps_done(k->t) + 1, k->cfg.replica, target,
              compress_codec_name(k->codec), sp->rel_error, sp->bound);
    else if (sp->failed)
      WT_WARN("stage %d step %ld: spot check by replica %d: replica %d's contribution is not its "
              "gradient: cosine %.4f (at least %.2f), norm ratio %.4f (1 ± %.2f)",
              k->cfg.stage, trainer_steps_done(k->t) + 1, k->cfg.replica, target, sp->cosine,
              PARALLEL_TASKLET_SPOT_COSINE, sp->norm_ratio, PARALLEL_TASKLET_SPOT_NORM);
  }
  memcpy(g, synced, sizeof(float) * n);
  free(synced);
  return rc;
}

/* ---- activation checks ---------------------------------------------------------------------- */

/* The target, checker and micro-batch of cut `stage` -> stage+1 at `step`, or 0 when none is
 * due (the last stage sends nothing). */
static int s_act_pair(const parallel_tasklet *k, long step, int stage, int *checker, int *target,
                      int *micro_batch) {
  const int R = k->cfg.run.replicas;
  if (!k->spot_act_n || stage < 0 || stage >= k->cfg.run.stages - 1 ||
      step % k->cfg.run.spot_check_every != 0)
    return 0;
  wt_rng rng;
  wt_rng_seed(&rng, (uint64_t)k->cfg.run.seed ^ (0x5b07c4ec3ull * (uint64_t)step) ^
                        (0x9e3779b97f4a7c15ull * (uint64_t)(stage + 1)));
  *target = (int)wt_rng_below(&rng, (uint64_t)R);
  *checker = (*target + 1 + (int)wt_rng_below(&rng, (uint64_t)(R - 1))) % R;
  *micro_batch = (int)wt_rng_below(&rng, (uint64_t)k->train.micro_batches);
  return 1;
}

void parallel_tasklet_spot_act_before(parallel_tasklet *k, long step) {
  int checker, target, j;
  k->spot_ran = 0;
  /* this tasklet's stage feeds the checked stage: keep what it sends of the micro-batch */
  if (s_act_pair(k, step, k->cfg.stage + 1, &checker, &target, &j) && target == k->cfg.replica)
    parallel_pipeline_keep_sent(k->pipeline, j, k->spot_act[0]);
}

/* The copies this tasklet holds of what crossed a checked stage's cuts, to its checker. */
static int s_act_send(parallel_tasklet *k, long step) {
  const int R = k->cfg.run.replicas, s = k->cfg.stage, me = k->cfg.replica;
  const size_t bytes = sizeof(float) * k->spot_act_n;
  int checker, target, j;
  if (s_act_pair(k, step, s - 1, &checker, &target, &j) && target == me) {
    size_t n;
    const float *got = parallel_pipeline_received(k->pipeline, j, &n);
    WT_CHECK(parallel_comm_send(k->world, (s - 1) * R + checker, S_TAG_SPOT_OUT, got, bytes));
  }
  if (s_act_pair(k, step, s + 1, &checker, &target, &j) && target == me)
    WT_CHECK(
        parallel_comm_send(k->world, (s + 1) * R + checker, S_TAG_SPOT_IN, k->spot_act[0], bytes));
  return WT_OK;
}

static int s_act_recv(parallel_tasklet *k, int from, int tag, float *into) {
  size_t got = 0, bytes = sizeof(float) * k->spot_act_n;
  WT_CHECK(parallel_comm_recv(k->world, from, tag, into, bytes, &got));
  if (got != bytes)
    return wt_fail(WT_ECORRUPT,
                   "stage %d spot check: world rank %d sent %zu bytes of activations, not %zu",
                   k->cfg.stage, from, got, bytes);
  return WT_OK;
}

/* As the checker: the target's forward of micro-batch j, recomputed on its input, against what
 * its next stage received. */
static int s_act_check(parallel_tasklet *k, long step, int target, int j) {
  const int R = k->cfg.run.replicas, s = k->cfg.stage, T = k->cfg.run.seq;
  const int rows = trainer_micro_rows(k->t);
  float *in = k->spot_act[0], *theirs = k->spot_act[1], *mine = k->spot_act[2];
  WT_CHECK(s_act_recv(k, (s + 1) * R + target, S_TAG_SPOT_OUT, theirs));
  if (s > 0) WT_CHECK(s_act_recv(k, (s - 1) * R + target, S_TAG_SPOT_IN, in));
  const int *inputs, *targets;
  trainer_batch(k->t, &inputs, &targets); /* the global batch: replica r's rows are its r-th part */
  const int *tokens = inputs + ((size_t)target * k->train.micro_batches + (size_t)j) * rows * T;
  const double t0 = wt_now_s();
  WT_CHECK(gpt_stage_forward(trainer_model(k->t), s == 0 ? tokens : NULL, s == 0 ? NULL : in, NULL,
                             rows, T, mine));
  parallel_tasklet_spot *sp = &k->spot;
  *sp = (parallel_tasklet_spot){.checker = k->cfg.replica, .target = target};
  s_compare(theirs, mine, k->spot_act_n, &sp->cosine, &sp->norm_ratio);
  sp->failed = !(sp->cosine >= PARALLEL_TASKLET_SPOT_COSINE &&
                 fabs(sp->norm_ratio - 1) <= PARALLEL_TASKLET_SPOT_NORM);
  sp->seconds = wt_now_s() - t0;
  k->spot_ran = 1;
  if (sp->failed)
    WT_WARN("stage %d step %ld: spot check by replica %d: replica %d's activations of "
            "micro-batch %d are not its forward: cosine %.4f (at least %.2f), norm ratio %.4f "
            "(1 ± %.2f)",
            s, step, k->cfg.replica, target, j, sp->cosine, PARALLEL_TASKLET_SPOT_COSINE,
            sp->norm_ratio, PARALLEL_TASKLET_SPOT_NORM);
  return WT_OK;
}

int parallel_tasklet_spot_act_after(parallel_tasklet *k, long step) {
  int checker, target, j;
  if (!k->spot_act_n) return WT_OK;
  WT_CHECK(s_act_send(k, step)); /* sends first: they never wait, so no order deadlocks */
  if (s_act_pair(k, step, k->cfg.stage, &checker, &target, &j) && checker == k->cfg.replica)
    return s_act_check(k, step, target, j);
  return WT_OK;
}
