/* test_runtime_zmq — tasklets as separate processes over the ZeroMQ transport (CurveZMQ on
 * loopback, ephemeral ports; parallel_zmq_fork_run):
 *   - 2 stages x 2 replicas, SGD, 1F1B: every step's loss within a relative 1e-5 of one process
 *     and bitwise equal to the same run as threads over the in-process transport;
 *   - a process killed in step 4 (it exits after the update, before that step's checkpoint):
 *     every other process returns an error well within its deadline; a new set of processes
 *     resumes from the manifest's step (2) and continues bitwise as the run that never
 *     stopped;
 *   - 1 stage x 4 replicas with dp_ring = {0, 2, 1, 3}: the gradient bytes each process sends go
 *     to its successor on that ring (the transport's per-link counters), and the losses still
 *     match one process. */
#include "model/trainer.h"
#include "parallel/transport/zmq.h"
#include "tests/runtime/runtime_harness.h"

#include <unistd.h>

enum { S = 2, R = 2, STEPS = 6 };

static data_set *s_data;
static char s_tmp[512];

typedef struct {
  parallel_tasklet_config base;
  int die_rank; /* this process exits in step die_step (after the step's update); -1 none */
  long die_step;
  const char *tag; /* file name prefix for the losses */
} s_job;

static void s_on_step(void *arg, const parallel_tasklet_step *st) {
  const s_job *j = arg;
  int w = st->stage * R + st->replica;
  char path[700];
  snprintf(path, sizeof path, "%s/%s-%d.txt", s_tmp, j->tag, w);
  FILE *f = fopen(path, "a");
  if (f) fprintf(f, "%ld %a\n", st->info.step, st->info.loss), fclose(f);
  if (w == j->die_rank && st->info.step == j->die_step) _exit(3); /* a process dies */
}

static int s_process(parallel_comm *world, void *arg) {
  s_job *j = arg;
  parallel_tasklet_config c = j->base;
  int w = parallel_comm_rank(world);
  c.stage = w / R, c.replica = w % R;
  c.on_step = s_on_step, c.on_step_arg = j;
  return parallel_tasklet_run(&c, world, NULL);
}

/* Losses the processes wrote for `tag`, rank w; NAN where a step is missing. */
static void s_read_losses(const char *tag, int w, float *loss) {
  for (int i = 0; i < STEPS; i++) loss[i] = NAN;
  char path[700], line[128];
  snprintf(path, sizeof path, "%s/%s-%d.txt", s_tmp, tag, w);
  FILE *f = fopen(path, "r");
  while (f && fgets(line, sizeof line, f)) {
    long step;
    float v;
    if (sscanf(line, "%ld %a", &step, &v) == 2 && step >= 1 && step <= STEPS) loss[step - 1] = v;
  }
  if (f) fclose(f);
}

static parallel_tasklet_config s_config(void) {
  parallel_tasklet_config c = parallel_tasklet_config_default();
  c.run.stages = S, c.run.replicas = R;
  snprintf(c.run.schedule, sizeof c.run.schedule, "1f1b");
  c.run.seq = 16, c.run.layers = 2, c.run.heads = 2, c.run.channels = 16; /* V 64: the data's */
  c.run.batch = 8, c.run.micro_batches = 2, c.run.val_batches = 1, c.run.seed = 21;
  c.run.steps = STEPS;
  h_run_optim_default(&c.run);
  snprintf(c.run.optimizer, sizeof c.run.optimizer, "sgd");
  c.run.lr = 0.05f;
  c.run.grad_clip = 0.5f;
  c.data = s_data;
  return c;
}

static int s_fork(s_job *j) {
  parallel_zmq_config z = parallel_zmq_config_default();
  z.timeout_s = 20;
  int rcs[S * R];
  return parallel_zmq_fork_run(S * R, &z, s_process, j, rcs);
}

static void test_equivalence(void) {
  s_job j = {.base = s_config(), .die_rank = -1, .tag = "equiv"};
  WT_TEST_REQUIRE(s_fork(&j) == WT_OK, "the processes failed");
  static h_run threads;
  h_init(&threads, &j.base);
  WT_TEST_REQUIRE(h_run_all(&threads) == WT_OK, "%s", threads.err[0]);
  trainer_config tc;
  WT_TEST_REQUIRE(parallel_run_trainer_config(&j.base.run, data_set_vocab_size(s_data), &tc) ==
                      WT_OK,
                  "%s", wt_last_error());
  tc.micro_batches = R * tc.micro_batches;
  trainer *t = trainer_new(&tc, s_data);
  WT_TEST_REQUIRE(t, "%s", wt_last_error());
  float loss[STEPS];
  for (int w = 0; w < S * R; w++) {
    s_read_losses("equiv", w, loss);
    for (int i = 0; i < STEPS; i++)
      WT_TEST_ASSERT(loss[i] == threads.loss[0][i], "process %d step %d: %.9g, threads %.9g", w,
                     i + 1, loss[i], threads.loss[0][i]);
  }
  for (int i = 0; i < STEPS; i++) {
    trainer_step_info info;
    WT_TEST_REQUIRE(trainer_step(t, &info) == WT_OK, "%s", wt_last_error());
    WT_TEST_CLOSE(loss[i], info.loss, 0, 1e-5, "processes vs one process");
  }
  trainer_destroy(&t);
}

static void test_kill_and_resume(void) {
  s_job straight = {.base = s_config(), .die_rank = -1, .tag = "straight"};
  WT_TEST_REQUIRE(s_fork(&straight) == WT_OK, "the straight run failed");
  s_job killed = {.base = s_config(), .die_rank = 1, .die_step = 4, .tag = "killed"};
  snprintf(killed.base.run.checkpoint_dir, sizeof killed.base.run.checkpoint_dir, "%s/ckpt", s_tmp);
  killed.base.run.checkpoint_every = 2;
  double t0 = wt_now_s();
  WT_TEST_ASSERT(s_fork(&killed) != WT_OK, "a run with a dead process fails");
  double took = wt_now_s() - t0;
  WT_TEST_ASSERT(took < 15, "the others gave up after %.1f s (deadline 20 s)", took);
  s_job resumed = {.base = killed.base, .die_rank = -1, .tag = "resumed"};
  resumed.base.resume = 1;
  WT_TEST_REQUIRE(s_fork(&resumed) == WT_OK, "the resumed run failed");
  float a[STEPS], b[STEPS];
  s_read_losses("straight", 0, a);
  for (int w = 0; w < S * R; w++) {
    s_read_losses("resumed", w, b);
    WT_TEST_ASSERT(isnan(b[1]) && !isnan(b[2]), "rank %d resumed from step 2", w);
    for (int i = 2; i < STEPS; i++)
      WT_TEST_ASSERT(a[i] == b[i], "rank %d step %d: resumed %.9g, straight %.9g", w, i + 1, b[i],
                     a[i]);
  }
  printf("killed process 1 in step 4: the run ended in %.2f s; resumed from step 2 bitwise\n",
         took);
}

/* ---- the data-parallel ring follows dp_ring -------------------------------------------------- */

enum { RING_R = 4 };
static const int s_ring[RING_R] = {0, 2, 1, 3};

static int s_process_ring(parallel_comm *world, void *arg) {
  parallel_tasklet_config c = *(const parallel_tasklet_config *)arg;
  int w = parallel_comm_rank(world);
  c.stage = 0, c.replica = w;
  c.dp_ring = s_ring;
  parallel_tasklet_result res;
  int rc = parallel_tasklet_run(&c, world, &res);
  char path[700];
  snprintf(path, sizeof path, "%s/ring-%d.txt", s_tmp, w);
  FILE *f = fopen(path, "w");
  if (!f) return WT_EIO;
  fprintf(f, "%a\n", res.last_loss);
  for (int peer = 0; peer < RING_R; peer++)
    fprintf(f, "%llu\n", (unsigned long long)parallel_zmq_link_stats_get(world, peer).bytes_sent);
  fclose(f);
  return rc;
}

static parallel_tasklet_config s_ring_config(void) {
  parallel_tasklet_config c = s_config();
  c.run.stages = 1, c.run.replicas = RING_R;
  return c;
}

static void s_ring_run(void) {
  parallel_tasklet_config c = s_ring_config();
  parallel_zmq_config z = parallel_zmq_config_default();
  z.timeout_s = 20;
  int rcs[RING_R];
  WT_TEST_REQUIRE(parallel_zmq_fork_run(RING_R, &z, s_process_ring, &c, rcs) == WT_OK,
                  "the ring run failed");
}

static void s_ring_check(void) {
  parallel_tasklet_config c = s_ring_config();
  trainer_config tc;
  WT_TEST_REQUIRE(parallel_run_trainer_config(&c.run, data_set_vocab_size(s_data), &tc) == WT_OK,
                  "%s", wt_last_error());
  tc.micro_batches = RING_R * tc.micro_batches;
  trainer *t = trainer_new(&tc, s_data);
  WT_TEST_REQUIRE(t, "%s", wt_last_error());
  trainer_step_info info;
  for (int i = 0; i < STEPS; i++) WT_TEST_REQUIRE(trainer_step(t, &info) == WT_OK, "step");
  trainer_destroy(&t);
  for (int pos = 0; pos < RING_R; pos++) {
    int w = s_ring[pos], next = s_ring[(pos + 1) % RING_R];
    char path[700];
    snprintf(path, sizeof path, "%s/ring-%d.txt", s_tmp, w);
    FILE *f = fopen(path, "r");
    WT_TEST_REQUIRE(f, "process %d wrote no counters", w);
    float loss = NAN;
    unsigned long long sent[RING_R] = {0};
    int ok = fscanf(f, "%a", &loss) == 1;
    for (int p = 0; p < RING_R; p++) ok = ok && fscanf(f, "%llu", &sent[p]) == 1;
    fclose(f);
    WT_TEST_REQUIRE(ok, "process %d: unreadable counters", w);
    WT_TEST_CLOSE(loss, info.loss, 0, 1e-5, "ring-ordered processes vs one process");
    for (int p = 0; p < RING_R; p++)
      if (p != w && p != next)
        WT_TEST_ASSERT(sent[next] > 10 * sent[p],
                       "process %d sent %llu bytes to its ring successor %d but %llu to %d", w,
                       sent[next], next, sent[p], p);
  }
}

int main(void) {
  wt_test_tmpdir(s_tmp, sizeof s_tmp);
  data_synth_config sc = data_synth_default();
  sc.n_tokens = 10000;
  s_data = data_set_synthetic(&sc);
  WT_TEST_REQUIRE(s_data, "%s", wt_last_error());
  /* libgomp is not fork-safe: a child forked after this process ran OpenMP regions can block in
   * its first one. So every fork-only run comes first, and the references this process
   * computes itself (threads, one process) come after the last fork. */
  test_kill_and_resume();
  s_ring_run();
  test_equivalence(); /* forks once, then computes its references here */
  s_ring_check();
  data_set_destroy(&s_data);
  if (!wt_test_failures) {
    char rm[700];
    snprintf(rm, sizeof rm, "rm -rf '%s'", s_tmp);
    if (system(rm) != 0) fprintf(stderr, "could not remove %s\n", s_tmp);
  }
  return wt_test_finish("test_runtime_zmq");
}
