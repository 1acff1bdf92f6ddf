/* test_trust — tasklets that lie (liar.h) against the robust sync (--robust), 4 replicas of a
 * tiny model over the in-process transport:
 *  - honest replicas under a robust aggregate train like the ring, are never flagged, and end
 *    with bitwise the same stage;
 *  - each lie of a contribution (nan, scale, flip, noise, zero, stale) is flagged from the step
 *    it starts (stale: the step after, its first repeat), on every step after it, never an
 *    honest replica; the run trains as the honest one and the replicas stay identical;
 *  - the same lies through the plain ring ruin the run (the test could fail);
 *  - DiLoCo's outer step flags a liar at its first outer step;
 *  - corrupted activations to the next stage: the robust sync runs through them, flagging no
 *    honest replica;
 *  - spot checks: on an honest run they all pass and change nothing (the same stage bitwise as
 *    without them); a drift liar (its gradient plus noise of half its norm) fails every check
 *    of it from the step it starts lying, no honest replica fails one;
 *  - spot checks through int8 and int4 with error feedback: honest ones pass within the codec's
 *    bound and change nothing, drift fails them; none are made through top-k;
 *  - activation spot checks in pipelines of 2 and 3 stages: on an honest run they all pass and
 *    change nothing; corrupted activations fail every check of their sender from the step it
 *    starts, and no honest replica's. */
#include "common/testing.h"
#include "model/trainer.h"
#include "tests/trust/liar.h"

#include <stdio.h>

enum { STEPS = 10, FROM = 3, LONG_STEPS = 40 };

static data_set *s_data;

static parallel_tasklet_config s_config(int stages, const char *robust) {
  parallel_tasklet_config c = parallel_tasklet_config_default();
  c.run.stages = stages, c.run.replicas = 4;
  snprintf(c.run.schedule, sizeof c.run.schedule, "1f1b");
  c.run.seq = 16, c.run.layers = 2, c.run.heads = 2, c.run.channels = 32; /* V 64: the data's */
  c.run.batch = 32, c.run.micro_batches = 1, c.run.val_batches = 1, c.run.seed = 5;
  c.run.steps = STEPS;
  h_run_optim_default(&c.run);
  c.run.lr = 1e-2f;
  c.data = s_data;
  snprintf(c.run.robust, sizeof c.run.robust, "%s", robust);
  return c;
}

static float s_final(const lr_run *h) {
  return h->loss[STEPS - 1];
}

/* Runs `lie` on replica 3 of stage `liar_stage` from step FROM; REQUIREs success when want_ok. */
static lr_run s_h; /* the last run (large: a static) */

static lr_run *s_run(parallel_tasklet_config c, liar_kind lie, int liar_stage, int want_ok) {
  lr_run *hp = &s_h;
#define h (*hp)
  lr_free(&h);
  memset(&h, 0, sizeof h);
  h.base = c, h.lie = lie, h.liars = 1, h.liar_stage = liar_stage, h.from = FROM;
  h.keep_state = !c.run.sync.diloco && !strcmp(c.run.sync.grad_codec, "none"); /* hand-over rule */
  int rc = lr_run_all(&h);
  if (want_ok)
    WT_TEST_REQUIRE(rc == WT_OK, "lie %s, robust %s: %s", liar_names[lie], c.run.robust, h.err[0]);
#undef h
  return hp;
}

static void s_check_identical(const lr_run *h, const char *what) {
  for (int r = 1; r < 4; r++)
    WT_TEST_ASSERT(h->state_bytes[r] == h->state_bytes[0] &&
                       !memcmp(h->state[r], h->state[0], h->state_bytes[0]),
                   "%s: replica %d's stage differs from replica 0's", what, r);
}

static void test_honest(float ring) {
  const char *kinds[] = {"trimmed-mean", "median", "centered-clip"};
  for (int i = 0; i < 3; i++) {
    lr_run *h = s_run(s_config(1, kinds[i]), LIAR_HONEST, 0, 1);
    WT_TEST_ASSERT(h->robust_syncs[0] == STEPS, "%s: %d robust syncs", kinds[i],
                   h->robust_syncs[0]);
    for (int r = 0; r < 4; r++)
      WT_TEST_ASSERT(!h->flagged[0][r], "%s: honest replica %d flagged %d times (%#x)", kinds[i], r,
                     h->flagged[0][r], h->flags[0][r]);
    WT_TEST_ASSERT(fabsf(s_final(h) - ring) < 0.1f, "%s: honest loss %.4f, the ring's %.4f",
                   kinds[i], s_final(h), ring);
    s_check_identical(h, kinds[i]);
    printf("honest, %-13s: loss %.4f (ring %.4f)\n", kinds[i], s_final(h), ring);
  }
}

static void test_lies(float ring) {
  static const struct {
    liar_kind lie;
    uint32_t flag;
  } lies[] = {
      {LIAR_NAN, PARALLEL_ROBUST_FLAG_NONFINITE}, {LIAR_SCALE, PARALLEL_ROBUST_FLAG_NORM},
      {LIAR_FLIP, PARALLEL_ROBUST_FLAG_COSINE},   {LIAR_NOISE, PARALLEL_ROBUST_FLAG_COSINE},
      {LIAR_ZERO, PARALLEL_ROBUST_FLAG_ZERO},     {LIAR_STALE, PARALLEL_ROBUST_FLAG_REPLAY}};
  for (int i = 0; i < (int)WT_ARRAY_LEN(lies); i++) {
    const char *name = liar_names[lies[i].lie];
    lr_run *h = s_run(s_config(1, "median"), lies[i].lie, 0, 1);
    const long first = lies[i].lie == LIAR_STALE ? FROM + 1 : FROM;
    WT_TEST_ASSERT(h->first_flag[0][3] == first, "%s: the liar first flagged at step %ld, want %ld",
                   name, h->first_flag[0][3], first);
    WT_TEST_ASSERT(h->flagged[0][3] == STEPS - first + 1, "%s: the liar flagged %d times, want %ld",
                   name, h->flagged[0][3], STEPS - first + 1);
    WT_TEST_ASSERT(h->flags[0][3] & lies[i].flag, "%s: flags %#x, want %#x", name, h->flags[0][3],
                   lies[i].flag);
    for (int r = 0; r < 3; r++)
      WT_TEST_ASSERT(!h->flagged[0][r], "%s: honest replica %d flagged (%#x)", name, r,
                     h->flags[0][r]);
    WT_TEST_ASSERT(fabsf(s_final(h) - ring) < 0.15f, "%s: loss %.4f against the honest %.4f", name,
                   s_final(h), ring);
    s_check_identical(h, name);
    printf("lie %-5s, median: loss %.4f, flagged from step %ld\n", name, s_final(h),
           h->first_flag[0][3]);
  }
  /* Through the ring the same liars harm the run: NaN makes it fail; x1000 (clipped to the
   * norm limit, so the step follows the liar's own gradient alone) trains worse. */
  lr_run *h = s_run(s_config(1, "none"), LIAR_NAN, 0, 0);
  WT_TEST_ASSERT(h->rcs[0] != WT_OK || !isfinite(s_final(h)), "nan through the ring: loss %.4f",
                 s_final(h));
  h = s_run(s_config(1, "none"), LIAR_SCALE, 0, 0);
  WT_TEST_ASSERT(h->rcs[0] != WT_OK || !(s_final(h) < ring + 0.1f),
                 "scale through the ring: loss %.4f, honest %.4f", s_final(h), ring);
}

static void test_diloco(void) {
  parallel_tasklet_config c = s_config(1, "trimmed-mean");
  c.run.sync.diloco = 3;
  lr_run *h = s_run(c, LIAR_SCALE, 0, 1);
  WT_TEST_ASSERT(h->robust_syncs[0] == 4, "DiLoCo H=3 over 10 steps: %d outer steps",
                 h->robust_syncs[0]);
  WT_TEST_ASSERT(h->first_flag[0][3] == 3 && (h->flags[0][3] & PARALLEL_ROBUST_FLAG_NORM),
                 "DiLoCo: the liar first flagged at step %ld (%#x), want 3", h->first_flag[0][3],
                 h->flags[0][3]);
  for (int r = 0; r < 3; r++)
    WT_TEST_ASSERT(!h->flagged[0][r], "DiLoCo: honest replica %d flagged", r);
}

/* Noise instead of stage 0's activations: replica 3 of stage 1 computes gradients of garbage
 * and sends them back. Its gradients still point much like the others' (both mostly follow the
 * unigram statistics early on), so the data-parallel sync flags them only now and then: this lie
 * is for spot checks, which recompute a stage's forward (docs/trust.md). What is asserted is that
 * the robust sync runs through it and flags no honest replica of the receiving stage. */
static void test_activations(float ring2) {
  lr_run *h = s_run(s_config(2, "median"), LIAR_ACT, 0, 1);
  WT_TEST_ASSERT(h->robust_syncs[1] == STEPS, "activations: %d robust syncs at stage 1",
                 h->robust_syncs[1]);
  for (int r = 0; r < 3; r++)
    WT_TEST_ASSERT(!h->flagged[1][r], "activations: honest replica %d of stage 1 flagged", r);
  printf("lie act, median: loss %.4f (honest %.4f); stage 1 flagged replica 3 %d times, "
         "stage 0 %d times\n",
         s_final(h), ring2, h->flagged[1][3], h->flagged[0][3]);
}

static void test_spot_checks(void) {
  parallel_tasklet_config c = s_config(1, "median");
  lr_run *h = s_run(c, LIAR_HONEST, 0, 1);
  void *plain = wt_xmalloc(h->state_bytes[0]);
  const size_t plain_bytes = h->state_bytes[0];
  memcpy(plain, h->state[0], plain_bytes);
  c.run.spot_check_every = 2;
  h = s_run(c, LIAR_HONEST, 0, 1);
  int checks = 0, failed = 0;
  for (int r = 0; r < 4; r++) checks += h->spot_checks[0][r], failed += h->spot_failed[0][r];
  /* each replica checks once in every window of N·R = 8 steps: 4 in steps 1-8, up to 4 more in
   * 9-10, at steps of its own draw */
  WT_TEST_ASSERT(checks >= 4 && checks <= 8 && !failed,
                 "honest: %d checks (want 4 to 8), %d failed", checks, failed);
  WT_TEST_ASSERT(h->spot_honest_min_cos >= PARALLEL_TASKLET_SPOT_COSINE,
                 "honest: lowest cosine %.6f", h->spot_honest_min_cos);
  WT_TEST_ASSERT(h->state_bytes[0] == plain_bytes && !memcmp(h->state[0], plain, plain_bytes),
                 "spot checks changed the training");
  s_check_identical(h, "spot checks");
  printf("spot checks, honest: %d checks, lowest cosine %.6f, largest norm deviation %.2e\n",
         checks, h->spot_honest_min_cos, h->spot_honest_max_dev);
  free(plain);
  c.run.spot_check_every = 1;
  c.run.steps = LONG_STEPS; /* the checks fall where the checkers drew them: give them room */
  h = s_run(c, LIAR_DRIFT, 0, 1);
  WT_TEST_ASSERT(h->spot_failed[0][3] > 0 && !h->spot_liar_passed &&
                     h->first_spot_fail[0][3] >= FROM,
                 "drift: the liar failed %d of %d checks (%d passed while it lied), first at "
                 "step %ld (lies from %d)",
                 h->spot_failed[0][3], h->spot_checks[0][3], h->spot_liar_passed,
                 h->first_spot_fail[0][3], FROM);
  for (int r = 0; r < 3; r++)
    WT_TEST_ASSERT(!h->spot_failed[0][r], "drift: honest replica %d failed %d checks", r,
                   h->spot_failed[0][r]);
  printf("lie drift, median: loss %.4f; the liar failed %d of %d spot checks, its contribution "
         "left out of %d syncs\n",
         h->loss[LONG_STEPS - 1], h->spot_failed[0][3], h->spot_checks[0][3], h->flagged[0][3]);
}

/* Spot checks through a gradient codec with error feedback: a contribution is Q(g + e), judged
 * by its distance to the recomputed g on the scale of the codec's own rounding. int8 and int4:
 * honest checks pass and change nothing, drift fails every check of it; top-k (most of g left
 * in the sender's residual) is not checked. */
static void test_spot_codecs(void) {
  const char *codecs[] = {"int8", "int4"};
  for (int i = 0; i < 2; i++) {
    parallel_tasklet_config c = s_config(1, "median");
    snprintf(c.run.sync.grad_codec, sizeof c.run.sync.grad_codec, "%s", codecs[i]);
    lr_run *h = s_run(c, LIAR_HONEST, 0, 1);
    float plain[STEPS]; /* the loss curve: a stage blob is not made with error feedback */
    memcpy(plain, h->loss, sizeof plain);
    c.run.spot_check_every = 1;
    h = s_run(c, LIAR_HONEST, 0, 1);
    int checks = 0, failed = 0;
    for (int r = 0; r < 4; r++) checks += h->spot_checks[0][r], failed += h->spot_failed[0][r];
    WT_TEST_ASSERT(checks >= 8 && checks <= 12 && !failed,
                   "%s, honest: %d checks (want 8 to 12: one per replica every 4 steps), %d failed",
                   codecs[i], checks, failed);
    WT_TEST_ASSERT(h->spot_honest_max_use > 0 && h->spot_honest_max_use < 1,
                   "%s, honest: at most %.3f of the bound used", codecs[i], h->spot_honest_max_use);
    WT_TEST_ASSERT(!memcmp(h->loss, plain, sizeof plain), "%s: spot checks changed the training",
                   codecs[i]);
    const double honest_use = h->spot_honest_max_use;
    c.run.steps = LONG_STEPS;
    h = s_run(c, LIAR_DRIFT, 0, 1);
    /* int8's bound (about 0.1 of the norm) is far below drift's 0.5: every check fails. int4's
     * (about 0.5, four of its roundings) is at drift's own size: most checks fail, from more
     * than one checker, and now and then one passes */
    const int strict = !strcmp(codecs[i], "int8");
    WT_TEST_ASSERT(h->spot_failed[0][3] > 0 &&
                       (strict ? !h->spot_liar_passed
                               : h->spot_liar_passed < h->spot_failed[0][3] &&
                                     h->spot_second_checker[0][3] > 0),
                   "%s, drift: the liar failed %d of %d checks, %d passed while it lied", codecs[i],
                   h->spot_failed[0][3], h->spot_checks[0][3], h->spot_liar_passed);
    for (int r = 0; r < 3; r++)
      WT_TEST_ASSERT(!h->spot_failed[0][r], "%s, drift: honest replica %d failed %d checks",
                     codecs[i], r, h->spot_failed[0][r]);
    printf("%s: honest checks used at most %.3f of their bound; drift failed %d of %d checks (%d "
           "passed while it lied)\n",
           codecs[i], honest_use, h->spot_failed[0][3], h->spot_checks[0][3], h->spot_liar_passed);
  }
  parallel_tasklet_config c = s_config(1, "median");
  snprintf(c.run.sync.grad_codec, sizeof c.run.sync.grad_codec, "topk");
  c.run.spot_check_every = 1;
  lr_run *h = s_run(c, LIAR_HONEST, 0, 1);
  int checks = 0;
  for (int r = 0; r < 4; r++) checks += h->spot_checks[0][r];
  WT_TEST_ASSERT(checks == 0, "topk: %d spot checks made, want none", checks);
}

/* The check schedule is each checker's own draw (randombytes): two runs with the same seed check
 * different steps and replicas, and train bitwise alike, since the draw touches no state. */
static void test_spot_unpredictable(void) {
  parallel_tasklet_config c = s_config(1, "median");
  c.run.spot_check_every = 1;
  lr_run *h = s_run(c, LIAR_HONEST, 0, 1);
  static unsigned char first[LR_MAX_STEPS][LR_MAX_RANKS];
  memcpy(first, h->spot_plan, sizeof first);
  void *plain = wt_xmalloc(h->state_bytes[0]);
  const size_t plain_bytes = h->state_bytes[0];
  memcpy(plain, h->state[0], plain_bytes);
  h = s_run(c, LIAR_HONEST, 0, 1);
  int differ = 0, checks = 0;
  for (int i = 0; i < STEPS; i++)
    for (int r = 0; r < 4; r++)
      differ += first[i][r] != h->spot_plan[i][r], checks += !!first[i][r];
  WT_TEST_ASSERT(differ > 0, "two runs of seed %llu checked the same replicas at the same steps",
                 (unsigned long long)c.run.seed);
  WT_TEST_ASSERT(checks >= 8, "%d checks in the first run, want at least 8", checks);
  WT_TEST_ASSERT(h->state_bytes[0] == plain_bytes && !memcmp(h->state[0], plain, plain_bytes),
                 "two runs with different check draws trained differently");
  printf("spot schedule: two runs of one seed, %d checks, %d (step, checker) cells differ\n",
         checks, differ);
  free(plain);
}

/* Spot checks of DiLoCo rounds (H = 2, a check per round per stage on average): honest rounds
 * all pass and leave the training bitwise as without checks; a drifting liar fails every check
 * of a round it lied in, from two checkers (the exclusion rule); one that goes on from a false
 * optimizer state (`moments`: its end state is not its round's), flip and noise are caught, by
 * the robust sync or by a check, and never pass a check. */
static void test_spot_diloco(void) {
  parallel_tasklet_config c = s_config(1, "trimmed-mean");
  c.run.sync.diloco = 2, c.run.steps = 2 * LONG_STEPS;
  lr_run *h = s_run(c, LIAR_HONEST, 0, 1);
  static float plain[2 * LONG_STEPS];
  memcpy(plain, h->loss, sizeof plain);
  c.run.spot_check_every = 1;
  h = s_run(c, LIAR_HONEST, 0, 1);
  int checks = 0, failed = 0;
  for (int r = 0; r < 4; r++) checks += h->spot_checks[0][r], failed += h->spot_failed[0][r];
  WT_TEST_ASSERT(checks >= 16 && !failed, "DiLoCo, honest: %d checks (want 16 or more), %d failed",
                 checks, failed);
  WT_TEST_ASSERT(h->spot_honest_min_cos >= PARALLEL_TASKLET_SPOT_COSINE,
                 "DiLoCo, honest: lowest cosine %.6f", h->spot_honest_min_cos);
  WT_TEST_ASSERT(!memcmp(h->loss, plain, sizeof plain), "DiLoCo: spot checks changed the training");
  printf("DiLoCo spot checks, honest: %d checks, lowest cosine %.6f, largest norm deviation "
         "%.2e, %.1f ms a check\n",
         checks, h->spot_honest_min_cos, h->spot_honest_max_dev,
         1e3 * h->spot_seconds / WT_MAX(1, checks));
  const liar_kind lies[] = {LIAR_DRIFT, LIAR_MOMENTS, LIAR_FLIP, LIAR_NOISE};
  for (int i = 0; i < 4; i++) {
    const char *name = liar_names[lies[i]];
    h = s_run(c, lies[i], 0, 1);
    WT_TEST_ASSERT(!h->spot_liar_passed, "DiLoCo %s: %d checks of a lying round passed", name,
                   h->spot_liar_passed);
    WT_TEST_ASSERT(h->spot_failed[0][3] + h->flagged[0][3] > 0,
                   "DiLoCo %s: neither a check nor the robust sync caught the liar", name);
    if (lies[i] == LIAR_DRIFT)
      WT_TEST_ASSERT(h->spot_second_checker[0][3] > 0 && !h->flagged[0][3],
                     "DiLoCo drift: failures from %d checkers, flagged %d times",
                     __builtin_popcount(h->spot_fail_checkers[0][3]), h->flagged[0][3]);
    for (int r = 0; r < 3; r++)
      WT_TEST_ASSERT(!h->spot_failed[0][r] && !h->flagged[0][r],
                     "DiLoCo %s: honest replica %d failed %d checks, flagged %d", name, r,
                     h->spot_failed[0][r], h->flagged[0][r]);
    printf("DiLoCo %s: the liar failed %d of %d checks (first at step %ld, two checkers by step "
           "%ld), left out of %d of %d outer syncs\n",
           name, h->spot_failed[0][3], h->spot_checks[0][3], h->first_spot_fail[0][3],
           h->spot_second_checker[0][3], h->flagged[0][3], h->robust_syncs[0]);
  }
}

/* A DiLoCo run cut short and resumed: its first round after the resume starts from a state
 * no replica committed, so it is not checked; later rounds are, and an honest run fails none. */
static void test_spot_diloco_resume(void) {
  char dir[256], copy[300], cmd[1024];
  WT_TEST_REQUIRE(wt_test_tmpdir(dir, sizeof dir), "no scratch directory");
  parallel_tasklet_config c = s_config(1, "trimmed-mean");
  c.run.sync.diloco = 2, c.run.steps = LONG_STEPS, c.run.spot_check_every = 1;
  snprintf(c.run.checkpoint_dir, sizeof c.run.checkpoint_dir, "%s/ck", dir);
  c.run.checkpoint_every = 10, c.stop_after = 20;
  lr_run *h = s_run(c, LIAR_HONEST, 0, 1);
  int before = 0;
  for (int r = 0; r < 4; r++) before += h->spot_checks[0][r];
  /* three resumes of the same checkpoint, each drawing afresh: a check of the first round
   * after it (which must not be made from the stale start) falls in one of them with 97% */
  c.stop_after = 0, c.resume = 1;
  snprintf(copy, sizeof copy, "%s/resumed", dir);
  snprintf(c.run.checkpoint_dir, sizeof c.run.checkpoint_dir, "%s", copy);
  int checks = 0, failed = 0;
  for (int i = 0; i < 3; i++) {
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s/ck' '%s'", copy, dir, copy);
    WT_TEST_REQUIRE(system(cmd) == 0, "%s failed", cmd);
    h = s_run(c, LIAR_HONEST, 0, 1);
    WT_TEST_ASSERT(h->res[0].steps_done == LONG_STEPS, "resumed to step %ld", h->res[0].steps_done);
    for (int r = 0; r < 4; r++) checks += h->spot_checks[0][r], failed += h->spot_failed[0][r];
  }
  WT_TEST_ASSERT(before > 0 && checks > 0 && !failed,
                 "DiLoCo resumed: %d checks before, %d after, %d failed", before, checks, failed);
  printf("DiLoCo resumed at step 20, three times: %d round checks before, %d after, none failed\n",
         before, checks);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

/* The spot checks of the activations stage s sends: a pipeline of `stages` (a layer each),
 * 2 micro-batches, checks every step. Honest: every check passes (the recompute is bitwise what
 * was sent) and changes nothing; `act` at replica 3 of stage liar_stage fails every check of
 * it from the step it starts lying, and no honest replica fails one. */
static void test_spot_activations(int stages, int liar_stage) {
  parallel_tasklet_config c = s_config(stages, "median");
  c.run.layers = WT_MAX(2, stages), c.run.micro_batches = 2;
  lr_run *h = s_run(c, LIAR_HONEST, 0, 1);
  void *plain[LR_MAX_RANKS]; /* every stage's, replica 0 */
  size_t plain_bytes[LR_MAX_RANKS];
  for (int s = 0; s < stages; s++) {
    plain_bytes[s] = h->state_bytes[4 * s];
    plain[s] = wt_xmalloc(plain_bytes[s]);
    memcpy(plain[s], h->state[4 * s], plain_bytes[s]);
  }
  c.run.spot_check_every = 1;
  h = s_run(c, LIAR_HONEST, 0, 1);
  for (int s = 0; s < stages; s++) {
    WT_TEST_ASSERT(h->state_bytes[4 * s] == plain_bytes[s] &&
                       !memcmp(h->state[4 * s], plain[s], plain_bytes[s]),
                   "%d stages: activation checks changed stage %d's training", stages, s);
    free(plain[s]);
    int checks = 0, failed = 0;
    for (int r = 0; r < 4; r++) checks += h->spot_checks[s][r], failed += h->spot_failed[s][r];
    const int want = s < stages - 1 ? STEPS : 0; /* the last stage sends no activations */
    WT_TEST_ASSERT(checks == want && !failed,
                   "%d stages, honest: stage %d made %d checks (want "
                   "%d), %d failed",
                   stages, s, checks, want, failed);
  }
  WT_TEST_ASSERT(h->spot_honest_min_cos >= PARALLEL_TASKLET_SPOT_COSINE,
                 "%d stages, honest: lowest cosine %.6f", stages, h->spot_honest_min_cos);
  printf("%d stages, honest: activation checks all passed, lowest cosine %.6f, largest norm "
         "deviation %.2e, %.2f ms per check\n",
         stages, h->spot_honest_min_cos, h->spot_honest_max_dev,
         1e3 * h->spot_seconds / WT_MAX(1, h->spot_honest));
  h = s_run(c, LIAR_ACT, liar_stage, 1);
  const int *failed = h->spot_failed[liar_stage];
  WT_TEST_ASSERT(failed[3] > 0 && !h->spot_liar_passed && h->first_spot_fail[liar_stage][3] >= FROM,
                 "%d stages, act at stage %d: the liar failed %d of %d checks (%d passed while it "
                 "lied), first at step %ld (lies from %d)",
                 stages, liar_stage, failed[3], h->spot_checks[liar_stage][3], h->spot_liar_passed,
                 h->first_spot_fail[liar_stage][3], FROM);
  for (int s = 0; s < stages; s++)
    for (int r = 0; r < 4; r++)
      WT_TEST_ASSERT(!h->spot_failed[s][r] || (s == liar_stage && r == 3),
                     "%d stages, act: honest replica %d of stage %d failed %d checks", stages, r, s,
                     h->spot_failed[s][r]);
  printf("%d stages, act at stage %d: the liar failed %d of %d checks, from step %ld\n", stages,
         liar_stage, failed[3], h->spot_checks[liar_stage][3], h->first_spot_fail[liar_stage][3]);
}

int main(void) {
  data_synth_config sc = data_synth_default();
  sc.n_tokens = 20000;
  s_data = data_set_synthetic(&sc);
  WT_TEST_REQUIRE(s_data, "%s", wt_last_error());
  const float ring = s_final(s_run(s_config(1, "none"), LIAR_HONEST, 0, 1));
  test_honest(ring);
  test_lies(ring);
  test_diloco();
  test_activations(s_final(s_run(s_config(2, "none"), LIAR_HONEST, 0, 1)));
  test_spot_checks();
  test_spot_codecs();
  test_spot_unpredictable();
  test_spot_diloco();
  test_spot_diloco_resume();
  test_spot_activations(2, 0);
  test_spot_activations(3, 1); /* the forward's input comes from the liar's previous stage */
  lr_free(&s_h);
  data_set_destroy(&s_data);
  if (wt_test_failures) fprintf(stderr, "%d failure(s)\n", wt_test_failures);
  return wt_test_failures ? 1 : 0;
}
