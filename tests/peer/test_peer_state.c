/* test_peer_state — the stage state peerd keeps between epochs and hands to a replacement
 * (parallel/tasklet.h's state_in / state_out blobs), on 2 x 2 tasklets over the in-process
 * transport:
 *   - a run stopped after 3 of 8 steps leaves one blob per tasklet at step 3, and the two
 *     replicas of a stage hold the same bytes (what lets any replica stand in for another);
 *   - a run started from those blobs, each tasklet from the OTHER replica's blob, continues
 *     bitwise as the run that never stopped;
 *   - a blob of another stage, a truncated or damaged one, a blob together with resume, and a
 *     blob for a ZeRO-1 run are refused with a message. */
#include "common/common.h"
#include "common/testing.h"
#include "parallel/comm.h"
#include "parallel/tasklet.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { STEPS = 8, STOP = 3, W = 4 };

typedef struct {
  parallel_tasklet_config base;
  const void *in[W]; /* per rank: the blob to start from, or NULL */
  size_t in_bytes[W];
  void *out[W]; /* per rank: the blob left behind */
  size_t out_bytes[W];
  float loss[W][STEPS];
  int rcs[W];
  char err[W][512];
} s_run;

static data_set *s_data;

static void s_on_step(void *arg, const parallel_tasklet_step *st) {
  s_run *r = arg;
  long i = st->info.step - 1;
  if (i >= 0 && i < STEPS) r->loss[st->stage * 2 + st->replica][i] = st->info.loss;
}

static int s_rank(parallel_comm *world, void *arg) {
  s_run *r = arg;
  int w = parallel_comm_rank(world);
  parallel_tasklet_config c = r->base;
  c.stage = w / 2, c.replica = w % 2;
  c.on_step = s_on_step, c.on_step_arg = r;
  c.state_in = r->in[w], c.state_in_bytes = r->in_bytes[w];
  c.state_out = &r->out[w], c.state_out_bytes = &r->out_bytes[w];
  int rc = parallel_tasklet_run(&c, world, NULL);
  r->rcs[w] = rc;
  snprintf(r->err[w], sizeof r->err[w], "%s", rc == WT_OK ? "" : wt_last_error());
  return rc;
}

static int s_go(s_run *r) {
  for (int w = 0; w < W; w++)
    for (int i = 0; i < STEPS; i++) r->loss[w][i] = NAN;
  parallel_inproc_group *g = parallel_inproc_group_new(W);
  parallel_inproc_group_set_timeout(g, 30);
  int rc = parallel_inproc_run(g, s_rank, r, NULL);
  parallel_inproc_group_destroy(&g);
  return rc;
}

static void s_free(s_run *r) {
  for (int w = 0; w < W; w++) free(r->out[w]), r->out[w] = NULL;
}

static parallel_tasklet_config s_config(void) {
  parallel_tasklet_config c = parallel_tasklet_config_default();
  c.stages = 2, c.replicas = 2, c.schedule = ASSIGN_SCHEDULE_1F1B;
  snprintf(c.act_codec, sizeof c.act_codec, "direct8"); /* the demo's codec: stateless */
  c.train = (trainer_config){
      .model = {.vocab_size = 64, .max_seq = 16, .n_layer = 2, .n_head = 2, .channels = 16},
      .batch = 8,
      .micro_batches = 2,
      .steps = STEPS,
      .val_batches = 1,
      .seed = 5};
  c.train.optim = optim_config_default();
  c.train.optim.lr = 3e-3f;
  c.train.optim.warmup_steps = 2;
  c.data = s_data;
  return c;
}

static void test_handover_is_bitwise(void) {
  static s_run full, part, rest;
  memset(&full, 0, sizeof full);
  full.base = s_config();
  WT_TEST_REQUIRE(s_go(&full) == WT_OK, "the full run failed: %s", full.err[0]);

  memset(&part, 0, sizeof part);
  part.base = s_config();
  part.base.stop_after = STOP;
  WT_TEST_REQUIRE(s_go(&part) == WT_OK, "the stopped run failed: %s", part.err[0]);
  for (int w = 0; w < W; w++) {
    int stage = -1;
    long step = -1;
    WT_TEST_REQUIRE(part.out[w], "rank %d left no state", w);
    WT_TEST_ASSERT(parallel_tasklet_state_info(part.out[w], part.out_bytes[w], &stage, &step) ==
                           WT_OK &&
                       stage == w / 2 && step == STOP,
                   "rank %d's blob: stage %d step %ld", w, stage, step);
  }
  for (int s = 0; s < 2; s++)
    WT_TEST_ASSERT(part.out_bytes[2 * s] == part.out_bytes[2 * s + 1] &&
                       memcmp(part.out[2 * s], part.out[2 * s + 1], part.out_bytes[2 * s]) == 0,
                   "the replicas of stage %d hold different states", s);

  memset(&rest, 0, sizeof rest);
  rest.base = s_config();
  for (int w = 0; w < W; w++) /* each tasklet starts from the other replica's state */
    rest.in[w] = part.out[w ^ 1], rest.in_bytes[w] = part.out_bytes[w ^ 1];
  WT_TEST_REQUIRE(s_go(&rest) == WT_OK, "the handed-over run failed: %s", rest.err[0]);
  for (int i = STOP; i < STEPS; i++)
    for (int w = 0; w < W; w++)
      WT_TEST_ASSERT(rest.loss[w][i] == full.loss[0][i], "step %d rank %d: %.9g, unbroken %.9g",
                     i + 1, w, rest.loss[w][i], full.loss[0][i]);
  WT_TEST_ASSERT(isnan(rest.loss[0][STOP - 1]), "the handed-over run repeated step %d", STOP);
  s_free(&full), s_free(&rest);

  /* refusals: every tasklet gets a bad start, so the whole run stops at once */
  static s_run bad;
  const char *want[] = {"this tasklet is stage", "no WTSTATE1 header", "does not match its size",
                        "not both", "--zero 0"};
  for (int k = 0; k < 5; k++) {
    memset(&bad, 0, sizeof bad);
    bad.base = s_config();
    unsigned char *copy[W] = {0};
    for (int w = 0; w < W; w++) {
      int from = k == 0 ? (w + 2) % W : w; /* case 0: the other stage's state */
      size_t n = part.out_bytes[from];
      copy[w] = wt_xmalloc(n);
      memcpy(copy[w], part.out[from], n);
      if (k == 1) copy[w][0] ^= 0x20; /* damaged magic */
      if (k == 2) n -= 4;             /* truncated */
      bad.in[w] = copy[w], bad.in_bytes[w] = n;
    }
    if (k == 3) {
      bad.base.resume = 1;
      snprintf(bad.base.checkpoint_dir, sizeof bad.base.checkpoint_dir, "/nonexistent");
    }
    if (k == 4) bad.base.zero = 1;
    WT_TEST_ASSERT(s_go(&bad) != WT_OK, "case %d was accepted", k);
    WT_TEST_ASSERT(strstr(bad.err[0], want[k]), "case %d: '%s' does not say '%s'", k, bad.err[0],
                   want[k]);
    for (int w = 0; w < W; w++) free(copy[w]);
    s_free(&bad);
  }
  s_free(&part);
}

int main(void) {
  data_synth_config sc = data_synth_default();
  sc.n_tokens = 10000;
  s_data = data_set_synthetic(&sc);
  WT_TEST_REQUIRE(s_data, "%s", wt_last_error());
  test_handover_is_bitwise();
  data_set_destroy(&s_data);
  return wt_test_finish("test_peer_state");
}
