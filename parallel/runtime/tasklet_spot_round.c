/* tasklet_spot_round — spot checks of DiLoCo rounds (docs/trust.md). A replica's contribution at
 * outer step k is Δ = θ_outer − θ_inner after H inner steps on its rows, from θ_outer and its
 * optimizer state at the round's start, which only it holds. So that a checker can recompute a
 * round without taking the target's word for that state, every replica commits, at every outer
 * step, a digest (BLAKE2b-256) of its optimizer state to every other replica, before any of them
 * learns whether it is checked. A checker of round k (its private draw, tasklet_spot.c) asks
 * the target, after the outer step, for its states at the round's start and end; it accepts
 * them only if they match the digests committed at rounds k − 1 and k, recomputes the H inner
 * steps from θ_outer and the start state on the target's rows of the global batches (every
 * replica draws them alike), and compares the recomputed Δ with the contribution the robust
 * all-gather delivered and the recomputed end state with the one sent. A liar must therefore
 * fake some round's transition (Δ or state), which a check of that round catches; the first
 * round of a fresh run starts from the zero state every replica holds. The recompute runs on
 * the checker's own stage and optimizer, saved and restored around it, so its own training is
 * bitwise unchanged. */
#include "parallel/runtime/tasklet_internal.h"

#include "common/bytes.h" /* defines: wt_put_le64 */
#include "common/common.h"

#include <sodium.h> /* defines: crypto_generichash */
#include <stdlib.h>
#include <string.h>

/* World tags (tasklet.c: 1, 2; tasklet_spot.c's activation checks: 3, 4). */
#define S_TAG_COMMIT 5 /* every outer step, to every other replica: digest + "I check you" */
#define S_TAG_STATE 6  /* to a checker that asked: the round's start and end states */

#define S_DIGEST crypto_generichash_BYTES /* 32 */
#define S_COMMIT (S_DIGEST + 1)

struct parallel_spot_round {
  size_t n;              /* parameters */
  int ns;                /* optimizer state buffers (AdamW: m, v) */
  size_t sn;             /* ns · n */
  float *start;          /* (sn) this replica's optimizer state at the round's start */
  float *theirs;         /* (2 sn) the target's start and end states, as it sent them */
  float *end;            /* (sn) this replica's state at the round's end */
  float *outer;          /* (n) θ_outer at the round's start (only when checking) */
  float *delta;          /* (n) the target's contribution, as the all-gather delivered it */
  float *mine;           /* (n) the recomputed Δ */
  float *save;           /* (n + sn) this replica's parameters and state around a recompute */
  int *inputs, *targets; /* (B, T) one global batch */
  long start_step;       /* trainer steps done at the round's start */
  long start_optim;      /* the optimizer's step count there */
  data_position start_pos;
  uint8_t (*commit)[S_DIGEST]; /* (R) each replica's digest of its state at this round's start */
  uint8_t *committed;          /* (R) 1: commit[r] holds one */
  int target;                  /* the replica this tasklet checks this round, -1: none */
};

static int s_applies(const parallel_tasklet *k) {
  const parallel_tasklet_config *c = &k->cfg;
  return c->run.spot_check_every > 0 && k->robust && c->run.replicas >= 2 && c->run.sync.diloco &&
         c->run.stages == 1 && !k->site && trainer_optim(k->t) &&
         (!k->codec || parallel_tasklet_spot_codec_bounded(k->codec));
}

/* The digest of an optimizer state (sn floats) at trainer step `step`. */
static void s_digest(const float *state, size_t sn, long step, uint8_t out[S_DIGEST]) {
  crypto_generichash_state h;
  uint8_t le[8];
  wt_put_le64(le, (uint64_t)step);
  crypto_generichash_init(&h, NULL, 0, S_DIGEST);
  crypto_generichash_update(&h, le, sizeof le);
  crypto_generichash_update(&h, (const unsigned char *)state, sizeof(float) * sn);
  crypto_generichash_final(&h, out, S_DIGEST);
}

/* This tasklet's optimizer state, all buffers one after the other, into out (sn floats). */
static void s_state_get(parallel_tasklet *k, float *out) {
  optim *opt = trainer_optim(k->t);
  const size_t n = k->spot_round->n;
  for (int i = 0; i < k->spot_round->ns; i++) {
    size_t m;
    memcpy(out + (size_t)i * n, optim_state_host(opt, i, &m), sizeof(float) * n);
  }
}

static void s_state_set(parallel_tasklet *k, const float *in) {
  optim *opt = trainer_optim(k->t);
  const size_t n = k->spot_round->n;
  for (int i = 0; i < k->spot_round->ns; i++) {
    size_t m;
    memcpy(optim_state_host(opt, i, &m), in + (size_t)i * n, sizeof(float) * n);
    optim_state_upload(opt, i);
  }
}

/* The next round starts here: its step, data position and this replica's state. */
static void s_take_start(parallel_tasklet *k) {
  struct parallel_spot_round *sr = k->spot_round;
  sr->start_step = trainer_steps_done(k->t);
  sr->start_optim = optim_step_count(trainer_optim(k->t));
  sr->start_pos = trainer_data_position(k->t);
  s_state_get(k, sr->start);
}

void parallel_tasklet_spot_round_init(parallel_tasklet *k) {
  if (!s_applies(k)) return;
  const int R = k->cfg.run.replicas;
  const trainer_config *tc = trainer_get_config(k->t);
  struct parallel_spot_round *sr = wt_xcalloc(1, sizeof *sr);
  gpt_stage_params_host(trainer_model(k->t), &sr->n);
  sr->ns = optim_num_states(trainer_optim(k->t));
  sr->sn = (size_t)sr->ns * sr->n;
  sr->start = wt_xmalloc(sizeof(float) * (sr->sn + 1));
  sr->theirs = wt_xmalloc(sizeof(float) * (2 * sr->sn + 1));
  sr->end = wt_xmalloc(sizeof(float) * (sr->sn + 1));
  sr->outer = wt_xmalloc(sizeof(float) * sr->n);
  sr->delta = wt_xmalloc(sizeof(float) * sr->n);
  sr->mine = wt_xmalloc(sizeof(float) * sr->n);
  sr->save = wt_xmalloc(sizeof(float) * (sr->n + sr->sn));
  sr->inputs = wt_xmalloc(sizeof(int) * (size_t)tc->batch * tc->model.max_seq);
  sr->targets = wt_xmalloc(sizeof(int) * (size_t)tc->batch * tc->model.max_seq);
  sr->commit = wt_xcalloc((size_t)R, S_DIGEST);
  sr->committed = wt_xcalloc((size_t)R, 1);
  sr->target = -1;
  k->spot_round = sr;
  s_take_start(k);
  /* a fresh run: every replica starts from the same (zero) state, so its digest is known to all;
   * a resumed or joined one has no commitment until its first outer step */
  if (sr->start_step == 0) {
    uint8_t d[S_DIGEST];
    s_digest(sr->start, sr->sn, 0, d);
    for (int r = 0; r < R; r++) memcpy(sr->commit[r], d, S_DIGEST), sr->committed[r] = 1;
  }
}

void parallel_tasklet_spot_round_free(parallel_tasklet *k) {
  struct parallel_spot_round *sr = k->spot_round;
  if (!sr) return;
  free(sr->start), free(sr->theirs), free(sr->end), free(sr->outer), free(sr->delta),
      free(sr->mine);
  free(sr->save), free(sr->inputs), free(sr->targets), free(sr->commit), free(sr->committed);
  free(sr);
  k->spot_round = NULL;
}

/* The data-parallel rank of replica r (dp_ring: the replica at each rank). */
static int s_dp_rank(const parallel_tasklet *k, int r) {
  if (!k->cfg.dp_ring) return r;
  for (int i = 0; i < k->cfg.run.replicas; i++)
    if (k->cfg.dp_ring[i] == r) return i;
  return -1;
}

void parallel_tasklet_spot_round_before(parallel_tasklet *k, long round) {
  struct parallel_spot_round *sr = k->spot_round;
  int target;
  if (!sr) return;
  sr->target = -1;
  /* the start taken at setup is not this round's when the run resumed or joined since: no
   * replica's start is committed until this round's outer step */
  if (trainer_steps_done(k->t) - sr->start_step > k->cfg.run.sync.diloco)
    memset(sr->committed, 0, (size_t)k->cfg.run.replicas);
  if (!parallel_tasklet_spot_drawn(k, round, &target) || !sr->committed[target]) return;
  sr->target = target;
  memcpy(sr->outer, diloco_theta_outer(k->outer, NULL), sizeof(float) * sr->n);
  parallel_robust_keep_next(k->robust, s_dp_rank(k, target), sr->delta);
}

/* Every replica's digest of its end state to every other, with whether it checks that one;
 * *asked[r] = 1 when replica r checks this one. A malformed commitment leaves r uncommitted. */
static int s_exchange(parallel_tasklet *k, const uint8_t mine[S_DIGEST], uint8_t (*got)[S_DIGEST],
                      uint8_t *ok, uint8_t *asked) {
  const struct parallel_spot_round *sr = k->spot_round;
  const int R = k->cfg.run.replicas, base = k->cfg.stage * R, me = k->cfg.replica;
  uint8_t msg[S_COMMIT];
  memcpy(msg, mine, S_DIGEST);
  for (int r = 0; r < R; r++) { /* sends first: they never wait, so no order deadlocks */
    if (r == me) continue;
    msg[S_DIGEST] = r == sr->target;
    WT_CHECK(parallel_comm_send(k->world, base + r, S_TAG_COMMIT, msg, sizeof msg));
  }
  for (int r = 0; r < R; r++) {
    size_t len = 0;
    asked[r] = ok[r] = 0;
    if (r == me) continue;
    WT_CHECK(parallel_comm_recv(k->world, base + r, S_TAG_COMMIT, msg, sizeof msg, &len));
    if (len != sizeof msg || msg[S_DIGEST] > 1) {
      WT_WARN("stage %d: replica %d sent a spot-check commitment of %zu bytes (flag %u), not %zu; "
              "its next round is not checked",
              k->cfg.stage, r, len, len == sizeof msg ? msg[S_DIGEST] : 0u, sizeof msg);
      continue;
    }
    memcpy(got[r], msg, S_DIGEST);
    ok[r] = 1, asked[r] = msg[S_DIGEST];
  }
  return WT_OK;
}

/* This replica's share of the squared gradient norm, summed chunk by chunk as tasklet.c's norm
 * hook does for a stage without ZeRO, so a recomputed step clips alike. */
static double s_sq_share(parallel_tasklet *k, gpt_stage *s) {
  size_t n, off, len;
  gpt_stage_grads(s, &n);
  double sq = 0;
  for (int c = 0; c < k->cfg.run.replicas; c++) {
    parallel_chunk_range(n, k->cfg.run.replicas, c, &off, &len);
    sq += trainer_grad_sq_norm_range(s, off, off + len);
  }
  return sq;
}

/* The target's H inner steps, from θ_outer and its start state, on the checker's stage; the
 * recomputed Δ goes to sr->mine and the end state is left in the optimizer for the caller. */
static int s_inner_steps(parallel_tasklet *k, int target, long end_step) {
  struct parallel_spot_round *sr = k->spot_round;
  const trainer_config *tc = trainer_get_config(k->t);
  const int R = k->cfg.run.replicas, B = tc->batch, T = tc->model.max_seq;
  const size_t off = (size_t)target * (size_t)(B / R) * T;
  gpt_stage *s = trainer_model(k->t);
  optim *opt = trainer_optim(k->t);
  size_t n;
  memcpy(gpt_stage_params_host(s, &n), sr->outer, sizeof(float) * sr->n);
  gpt_stage_params_upload(s);
  s_state_set(k, sr->theirs);
  optim_set_step_count(opt, sr->start_optim);
  data_position pos = sr->start_pos;
  for (long step = sr->start_step; step < end_step; step++) {
    float loss = 0;
    data_set_next_batch(trainer_data(k->t), &pos, B, T, sr->inputs, sr->targets);
    gpt_stage_zero_grad(s);
    WT_CHECK(parallel_pipeline_run(k->pipeline, sr->inputs + off, sr->targets + off, &loss));
    float *params = gpt_stage_params(s, &n), *grads = gpt_stage_grads(s, &n);
    WT_CHECK(trainer_apply(opt, params, grads, step, s_sq_share(k, s), loss, NULL));
  }
  const float *theta = gpt_stage_params_host(s, &n);
  for (size_t i = 0; i < sr->n; i++) sr->mine[i] = sr->outer[i] - theta[i];
  return WT_OK;
}

/* Compares the target's end state (sent) with the recomputed one, buffer by buffer, by cosine
 * and norm ratio; returns the worst buffer's verdict in *cosine, *ratio. */
static int s_state_matches(parallel_tasklet *k, const float *sent, double *cosine, double *ratio) {
  struct parallel_spot_round *sr = k->spot_round;
  optim *opt = trainer_optim(k->t);
  int ok = 1;
  *cosine = 1, *ratio = 1;
  for (int i = 0; i < sr->ns; i++) {
    size_t m;
    parallel_tasklet_spot v = {0};
    parallel_tasklet_spot_judge(NULL, sent + (size_t)i * sr->n, optim_state_host(opt, i, &m), sr->n,
                                &v);
    if (v.failed || v.cosine < *cosine) *cosine = v.cosine, *ratio = v.norm_ratio;
    ok &= !v.failed;
  }
  return ok;
}

/* As the checker of `target`: its states (start, end) against its commitments, then the
 * recompute. Own parameters and state are saved and put back whatever happens. */
static void s_check(parallel_tasklet *k, int target, long round, const uint8_t end_commit[S_DIGEST],
                    int end_ok) {
  struct parallel_spot_round *sr = k->spot_round;
  const long end_step = trainer_steps_done(k->t);
  parallel_tasklet_spot *sp = &k->spot;
  *sp = (parallel_tasklet_spot){.checker = k->cfg.replica, .target = target};
  uint8_t d0[S_DIGEST], d1[S_DIGEST];
  s_digest(sr->theirs, sr->sn, sr->start_step, d0);
  s_digest(sr->theirs + sr->sn, sr->sn, end_step, d1);
  k->spot_ran = 1;
  if (memcmp(d0, sr->commit[target], S_DIGEST) || !end_ok || memcmp(d1, end_commit, S_DIGEST)) {
    sp->failed = 1;
    WT_WARN("stage %d round %ld: spot check by replica %d: replica %d sent a state that is not "
            "the one it committed (%s)",
            k->cfg.stage, round, k->cfg.replica, target,
            memcmp(d0, sr->commit[target], S_DIGEST) ? "at the round's start" : "at its end");
    return;
  }
  const double t0 = wt_now_s();
  gpt_stage *s = trainer_model(k->t);
  optim *opt = trainer_optim(k->t);
  size_t n;
  memcpy(sr->save, gpt_stage_params_host(s, &n), sizeof(float) * sr->n);
  s_state_get(k, sr->save + sr->n);
  const long optim_steps = optim_step_count(opt);
  double state_cos = 0, state_ratio = 0;
  int rc = s_inner_steps(k, target, end_step), state_ok = 0;
  if (rc == WT_OK) {
    parallel_tasklet_spot_judge(k->codec, sr->delta, sr->mine, sr->n, sp);
    state_ok = s_state_matches(k, sr->theirs + sr->sn, &state_cos, &state_ratio);
  }
  memcpy(gpt_stage_params_host(s, &n), sr->save, sizeof(float) * sr->n);
  gpt_stage_params_upload(s);
  s_state_set(k, sr->save + sr->n);
  optim_set_step_count(opt, optim_steps);
  sp->seconds = wt_now_s() - t0;
  if (rc != WT_OK) { /* the committed state itself does not train (non-finite): a lie */
    sp->failed = 1;
    WT_WARN("stage %d round %ld: spot check by replica %d: replica %d's round does not "
            "recompute from its committed state: %s",
            k->cfg.stage, round, k->cfg.replica, target, wt_last_error());
    return;
  }
  if (sp->failed && k->codec)
    WT_WARN("stage %d round %ld: spot check by replica %d: replica %d's contribution is not its "
            "round through %s: off by %.4f of its norm (at most %.4f)",
            k->cfg.stage, round, k->cfg.replica, target, compress_codec_name(k->codec),
            sp->rel_error, sp->bound);
  else if (sp->failed)
    WT_WARN("stage %d round %ld: spot check by replica %d: replica %d's contribution is not its "
            "round: cosine %.4f (at least %.2f), norm ratio %.4f (1 ± %.2f)",
            k->cfg.stage, round, k->cfg.replica, target, sp->cosine, PARALLEL_TASKLET_SPOT_COSINE,
            sp->norm_ratio, PARALLEL_TASKLET_SPOT_NORM);
  if (!state_ok) {
    sp->failed = 1;
    WT_WARN("stage %d round %ld: spot check by replica %d: replica %d's end state is not its "
            "round's: cosine %.4f, norm ratio %.4f",
            k->cfg.stage, round, k->cfg.replica, target, state_cos, state_ratio);
  }
}

int parallel_tasklet_spot_round_after(parallel_tasklet *k, long round) {
  struct parallel_spot_round *sr = k->spot_round;
  if (!sr) return WT_OK;
  const int R = k->cfg.run.replicas, base = k->cfg.stage * R, me = k->cfg.replica;
  const long end_step = trainer_steps_done(k->t);
  /* a contribution the sync already left out is evidence enough (and may not have decoded) */
  if (sr->target >= 0 && k->robust_report.rank[sr->target].flags) sr->target = -1;
  const int target = sr->target;
  uint8_t mine[S_DIGEST], (*got)[S_DIGEST] = wt_xcalloc((size_t)R, S_DIGEST);
  uint8_t *ok = wt_xcalloc((size_t)R, 1), *asked = wt_xcalloc((size_t)R, 1);
  float *end = sr->end;
  if (k->cfg.test_tamper_state) { /* the liar harness: this replica goes on from a false state */
    size_t m;
    optim *opt = trainer_optim(k->t);
    float *first = optim_state_host(opt, 0, &m);
    k->cfg.test_tamper_state(k->cfg.test_tamper_arg, end_step, first, m);
    optim_state_upload(opt, 0);
  }
  s_state_get(k, end);
  s_digest(end, sr->sn, end_step, mine);
  int rc = s_exchange(k, mine, got, ok, asked);
  for (int r = 0; r < R && rc == WT_OK; r++) {
    if (!asked[r]) continue;
    rc = parallel_comm_send(k->world, base + r, S_TAG_STATE, sr->start, sizeof(float) * sr->sn);
    if (rc == WT_OK)
      rc = parallel_comm_send(k->world, base + r, S_TAG_STATE, end, sizeof(float) * sr->sn);
  }
  if (rc == WT_OK && target >= 0) {
    size_t len0 = 0, len1 = 0;
    const size_t bytes = sizeof(float) * sr->sn;
    rc = parallel_comm_recv(k->world, base + target, S_TAG_STATE, sr->theirs, bytes, &len0);
    if (rc == WT_OK)
      rc = parallel_comm_recv(k->world, base + target, S_TAG_STATE, sr->theirs + sr->sn, bytes,
                              &len1);
    if (rc == WT_OK && (len0 != bytes || len1 != bytes)) {
      k->spot = (parallel_tasklet_spot){.checker = me, .target = target, .failed = 1};
      k->spot_ran = 1;
      WT_WARN("stage %d round %ld: spot check by replica %d: replica %d sent %zu and %zu bytes of "
              "state, not %zu",
              k->cfg.stage, round, me, target, len0, len1, bytes);
    } else if (rc == WT_OK) {
      s_check(k, target, round, got[target], ok[target]);
    }
  }
  for (int r = 0; r < R; r++) {
    if (r == me)
      memcpy(sr->commit[r], mine, S_DIGEST), sr->committed[r] = 1;
    else
      memcpy(sr->commit[r], got[r], S_DIGEST), sr->committed[r] = ok[r];
  }
  free(got), free(ok), free(asked);
  sr->target = -1;
  if (rc == WT_OK) s_take_start(k);
  return rc;
}
