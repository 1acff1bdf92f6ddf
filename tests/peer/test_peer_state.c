/* test_peer_state — the stage state peerd keeps between epochs and hands to a replacement
 * (parallel/runtime/tasklet.h's state_in / state_out blobs), on 2 x 2 tasklets over the in-process
 * transport:
 *   - a run stopped after 3 of 8 steps leaves one blob per tasklet at step 3, and the two
 *     replicas of a stage hold the same bytes (what lets any replica stand in for another);
 *   - a run started from those blobs, each tasklet from the OTHER replica's blob, continues
 *     bitwise as the run that never stopped;
 *   - a blob of another stage, a truncated or damaged one, a blob together with resume, and a
 *     blob for a ZeRO-1 run are refused with a message;
 *   - peerd's hand-over (peer_state_exchange) between four ranks, two of which hold the state of
 *     the stage they no longer serve, so they send and receive at once: everyone gets its stage's
 *     exact bytes; a byte flipped on the way is refused by the SHA-256 check; a peer asked for a
 *     step it does not hold refuses;
 *   - DiLoCo (H = 4, stopped mid-round at step 6): the replicas' blobs differ (inner weights) but
 *     have done the same outer steps; tasklets started from their own blobs go on bitwise as the
 *     unbroken run; a replacement started from another replica's blob trains on and, after the
 *     next outer step, holds its replica's weights; a replica one step behind keeps its state and
 *     skips the step; a start at the run's last step takes the pending outer step and saves the
 *     final checkpoint; a start across an outer step is refused. */
#include "common/common.h"
#include "common/testing.h"
#include "parallel/transport/comm.h"
#include "parallel/runtime/tasklet.h"
#include "peer/peer_internal.h"
#include "tests/runtime/optim_defaults.h"

#include <cjson/cJSON.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum { STEPS = 8, STOP = 3, W = 4 };

typedef struct {
  parallel_tasklet_config base;
  const void *in[W]; /* per rank: the blob to start from, or NULL */
  size_t in_bytes[W];
  int replica_in[W]; /* per rank: in[] is another replica's (DiLoCo: a replacement) */
  long start[W];     /* per rank: the step to start at (DiLoCo), 0: the blob's */
  void *out[W];      /* per rank: the blob left behind */
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
  c.state_in_replica = r->replica_in[w], c.start_step = r->start[w];
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
  c.run.stages = 2, c.run.replicas = 2;
  snprintf(c.run.schedule, sizeof c.run.schedule, "1f1b");
  snprintf(c.run.act_codec, sizeof c.run.act_codec, "direct8"); /* the demo's codec: stateless */
  c.run.seq = 16, c.run.layers = 2, c.run.heads = 2, c.run.channels = 16; /* V 64: the data's */
  c.run.batch = 8, c.run.micro_batches = 2, c.run.val_batches = 1, c.run.seed = 5;
  c.run.steps = STEPS;
  h_run_optim_default(&c.run);
  c.run.lr = 3e-3f;
  c.run.warmup = 2;
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
      snprintf(bad.base.run.checkpoint_dir, sizeof bad.base.run.checkpoint_dir, "/nonexistent");
    }
    if (k == 4) bad.base.run.zero = 1;
    WT_TEST_ASSERT(s_go(&bad) != WT_OK, "case %d was accepted", k);
    WT_TEST_ASSERT(strstr(bad.err[0], want[k]), "case %d: '%s' does not say '%s'", k, bad.err[0],
                   want[k]);
    for (int w = 0; w < W; w++) free(copy[w]);
    s_free(&bad);
  }
  s_free(&part);
}

/* ---- peerd's hand-over ------------------------------------------------------------------ */

/* A transport that flips one byte of every state blob (tag 9102) it sends. */
static int s_flip_send(void *ctx, int peer, int tag, const void *buf, size_t bytes) {
  if (tag != 9102) return parallel_comm_send(ctx, peer, tag, buf, bytes);
  unsigned char *copy = wt_xmalloc(bytes);
  memcpy(copy, buf, bytes);
  copy[bytes / 2] ^= 1;
  int rc = parallel_comm_send(ctx, peer, tag, copy, bytes);
  free(copy);
  return rc;
}
static int s_flip_recv(void *ctx, int peer, int tag, void *buf, size_t cap, size_t *got) {
  return parallel_comm_recv(ctx, peer, tag, buf, cap, got);
}
static const parallel_transport_ops s_flip_ops = {
    .name = "flip", .send = s_flip_send, .recv = s_flip_recv};

typedef struct {
  peer_held held[W];
  long step;     /* asked for */
  int flip_rank; /* this rank's blobs are damaged on the way, -1: none */
  const void *got[W];
  size_t got_bytes[W];
  int owned[W], rcs[W];
  char err[W][512];
} s_exchange;

static int s_exchange_rank(parallel_comm *world, void *arg) {
  s_exchange *x = arg;
  int w = parallel_comm_rank(world);
  /* world rank w serves stage w / 2; ranks 1 and 3 hold the other stage's state (they were moved)
   * and hand it to rank 3 and ranks 0, 1: both send, then receive */
  cJSON *from = cJSON_CreateIntArray((const int[]){3, 3, 2, 1}, W);
  parallel_comm *use = world, *flip = NULL;
  if (w == x->flip_rank) use = flip = parallel_comm_new(&s_flip_ops, world, w, W);
  x->rcs[w] = peer_state_exchange(&x->held[w], use, from, w / 2, x->step, 0, &x->got[w],
                                  &x->got_bytes[w], &x->owned[w]);
  snprintf(x->err[w], sizeof x->err[w], "%s", x->rcs[w] == WT_OK ? "" : wt_last_error());
  parallel_comm_destroy(&flip);
  cJSON_Delete(from);
  return x->rcs[w];
}

static void s_exchange_go(s_exchange *x) {
  parallel_inproc_group *g = parallel_inproc_group_new(W);
  parallel_inproc_group_set_timeout(g, 5);
  parallel_inproc_run(g, s_exchange_rank, x, NULL);
  parallel_inproc_group_destroy(&g);
}

static void test_peer_exchange(void) {
  static s_run part;
  memset(&part, 0, sizeof part);
  part.base = s_config();
  part.base.stop_after = STOP;
  WT_TEST_REQUIRE(s_go(&part) == WT_OK, "the stopped run failed: %s", part.err[0]);
  const int holds[W] = {-1, 1, 1, 0}; /* the stage each rank holds; rank 0 nothing */
  static s_exchange x;
  for (int k = 0; k < 3; k++) {
    memset(&x, 0, sizeof x);
    x.step = k == 2 ? STOP + 1 : STOP;
    x.flip_rank = k == 1 ? 3 : -1;
    for (int w = 0; w < W; w++)
      if (holds[w] >= 0)
        x.held[w] = (peer_held){.blob = part.out[2 * holds[w]],
                                .bytes = part.out_bytes[2 * holds[w]],
                                .stage = holds[w],
                                .step = STOP};
    s_exchange_go(&x);
    for (int w = 0; w < W; w++) {
      const void *want = part.out[2 * (w / 2)];
      size_t n = part.out_bytes[2 * (w / 2)];
      if (k == 0)
        WT_TEST_ASSERT(x.rcs[w] == WT_OK && x.got_bytes[w] == n && !memcmp(x.got[w], want, n) &&
                           x.owned[w] == (w != 2),
                       "rank %d: rc %d (%s), %zu bytes, owned %d", w, x.rcs[w], x.err[w],
                       x.got_bytes[w], x.owned[w]);
      if (k == 1 && (w == 0 || w == 1))
        WT_TEST_ASSERT(x.rcs[w] == WT_ECORRUPT && strstr(x.err[w], "SHA-256 mismatch"),
                       "rank %d took a damaged state: rc %d (%s)", w, x.rcs[w], x.err[w]);
      if (k == 2 && w != 0)
        WT_TEST_ASSERT(x.rcs[w] != WT_OK && strstr(x.err[w], "expects this peer to hold"),
                       "rank %d asked for step %d: rc %d (%s)", w, STOP + 1, x.rcs[w], x.err[w]);
      if (x.owned[w]) free((void *)x.got[w]);
    }
  }
  s_free(&part);
}

/* ---- DiLoCo: live recovery ------------------------------------------------------------- */

enum { H = 4 };

static parallel_tasklet_config s_diloco_config(void) {
  parallel_tasklet_config c = s_config();
  c.run.sync.diloco = H;
  return c;
}

/* The parameters of a blob (after the 64-byte header and the data position). */
static const float *s_params(const void *blob, size_t *n) {
  const unsigned char *b = blob;
  size_t pos = 0, count = 0;
  memcpy(&pos, b + 48, 4), memcpy(&count, b + 40, 8);
  *n = count;
  return (const float *)(b + 64 + pos);
}

static void s_stop_at(s_run *r, long step) {
  memset(r, 0, sizeof *r);
  r->base = s_diloco_config();
  r->base.stop_after = step;
  WT_TEST_REQUIRE(s_go(r) == WT_OK, "the DiLoCo run stopped at %ld failed: %s", step, r->err[0]);
}

static void test_diloco_live(void) {
  static s_run full, at6, at5, rest;
  memset(&full, 0, sizeof full);
  full.base = s_diloco_config();
  WT_TEST_REQUIRE(s_go(&full) == WT_OK, "the full DiLoCo run failed: %s", full.err[0]);
  s_stop_at(&at6, 6);
  for (int w = 0; w < W; w++) {
    long outer = -2;
    WT_TEST_ASSERT(parallel_tasklet_state_outer(at6.out[w], at6.out_bytes[w], &outer) == WT_OK &&
                       outer == 1,
                   "rank %d's blob at step 6 has done %ld outer steps, expected 1", w, outer);
  }
  size_t n0, n1;
  const float *p0 = s_params(at6.out[2], &n0), *p1 = s_params(at6.out[3], &n1);
  WT_TEST_ASSERT(n0 == n1 && memcmp(p0, p1, n0 * 4), "the replicas' inner weights agree mid-round");

  /* survivors: each tasklet from its own state goes on exactly as the run that never stopped */
  memset(&rest, 0, sizeof rest);
  rest.base = s_diloco_config();
  for (int w = 0; w < W; w++) rest.in[w] = at6.out[w], rest.in_bytes[w] = at6.out_bytes[w];
  WT_TEST_REQUIRE(s_go(&rest) == WT_OK, "the run from its own states failed: %s", rest.err[0]);
  for (int i = 6; i < STEPS; i++)
    for (int w = 0; w < W; w++)
      WT_TEST_ASSERT(rest.loss[w][i] == full.loss[w][i], "step %d rank %d: %.9g, unbroken %.9g",
                     i + 1, w, rest.loss[w][i], full.loss[w][i]);
  WT_TEST_ASSERT(isnan(rest.loss[0][5]), "the survivors trained step 6 again");
  s_free(&rest);

  /* a replacement: rank 3 starts from rank 2's state, as a new replica; after the outer step at
   * step 8 both replicas of stage 1 hold the same weights again */
  memset(&rest, 0, sizeof rest);
  rest.base = s_diloco_config();
  for (int w = 0; w < W; w++) rest.in[w] = at6.out[w], rest.in_bytes[w] = at6.out_bytes[w];
  rest.in[3] = at6.out[2], rest.in_bytes[3] = at6.out_bytes[2], rest.replica_in[3] = 1;
  WT_TEST_REQUIRE(s_go(&rest) == WT_OK, "the run with a replacement failed: %s", rest.err[3]);
  for (int w = 0; w < W; w++)
    WT_TEST_ASSERT(isfinite(rest.loss[w][STEPS - 1]), "rank %d: no final loss", w);
  p0 = s_params(rest.out[2], &n0), p1 = s_params(rest.out[3], &n1);
  WT_TEST_ASSERT(n0 == n1 && !memcmp(p0, p1, n0 * 4),
                 "after the outer step the replacement's weights differ from its replica's");
  s_free(&rest);

  /* replica 1 stopped a step earlier: it keeps its own state and skips step 6's batch */
  s_stop_at(&at5, 5);
  memset(&rest, 0, sizeof rest);
  rest.base = s_diloco_config();
  for (int w = 0; w < W; w++) {
    s_run *from = w % 2 ? &at5 : &at6;
    rest.in[w] = from->out[w], rest.in_bytes[w] = from->out_bytes[w], rest.start[w] = 6;
  }
  WT_TEST_REQUIRE(s_go(&rest) == WT_OK, "the run that skips a step failed: %s", rest.err[1]);
  WT_TEST_ASSERT(isnan(rest.loss[1][5]) && isfinite(rest.loss[1][6]),
                 "replica 1 trained step 6 instead of skipping it");
  s_free(&rest);

  /* started at the run's last step (8, an outer-step boundary) from states of step 7: the
   * tasklets take that outer step and save the final checkpoint, training nothing */
  static s_run at7;
  s_stop_at(&at7, 7);
  char dir[] = "/tmp/wt-peer-state-XXXXXX";
  WT_TEST_REQUIRE(mkdtemp(dir), "cannot make a temporary directory");
  memset(&rest, 0, sizeof rest);
  rest.base = s_diloco_config();
  snprintf(rest.base.run.checkpoint_dir, sizeof rest.base.run.checkpoint_dir, "%s", dir);
  for (int w = 0; w < W; w++)
    rest.in[w] = at7.out[w], rest.in_bytes[w] = at7.out_bytes[w], rest.start[w] = STEPS;
  WT_TEST_REQUIRE(s_go(&rest) == WT_OK, "the start at the last step failed: %s", rest.err[0]);
  for (int w = 0; w < W; w++) {
    long outer = -1;
    parallel_tasklet_state_outer(rest.out[w], rest.out_bytes[w], &outer);
    WT_TEST_ASSERT(outer == 2 && isnan(rest.loss[w][STEPS - 1]),
                   "rank %d: %ld outer steps after the start at step %d (expected 2), a step "
                   "trained: %d",
                   w, outer, STEPS, !isnan(rest.loss[w][STEPS - 1]));
  }
  p0 = s_params(rest.out[0], &n0), p1 = s_params(rest.out[1], &n1);
  WT_TEST_ASSERT(n0 == n1 && !memcmp(p0, p1, n0 * 4), "stage 0's replicas differ after it");
  char manifest[128];
  snprintf(manifest, sizeof manifest, "%s/manifest.json", dir);
  FILE *mf = fopen(manifest, "r");
  WT_TEST_ASSERT(mf != NULL, "no final checkpoint manifest in %s", dir);
  if (mf) fclose(mf);
  char rm[160];
  snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
  WT_TEST_ASSERT(system(rm) == 0, "cannot remove %s", dir);
  s_free(&rest), s_free(&at7);

  /* refused: a state of step 3 cannot start at step 6, the outer step of step 4 lies between */
  static s_run at3;
  s_stop_at(&at3, 3);
  memset(&rest, 0, sizeof rest);
  rest.base = s_diloco_config();
  for (int w = 0; w < W; w++)
    rest.in[w] = at3.out[w], rest.in_bytes[w] = at3.out_bytes[w], rest.start[w] = 6;
  WT_TEST_ASSERT(s_go(&rest) != WT_OK && strstr(rest.err[0], "an outer step it has not taken"),
                 "a start across an outer step: '%s'", rest.err[0]);
  s_free(&rest), s_free(&at3), s_free(&at5), s_free(&at6), s_free(&full);
}

int main(void) {
  data_synth_config sc = data_synth_default();
  sc.n_tokens = 10000;
  s_data = data_set_synthetic(&sc);
  WT_TEST_REQUIRE(s_data, "%s", wt_last_error());
  test_handover_is_bitwise();
  test_peer_exchange();
  test_diloco_live();
  data_set_destroy(&s_data);
  return wt_test_finish("test_peer_state");
}
