/* test_runtime_fail — a tasklet that fails makes every other tasklet return an error, fast:
 *   - crash: one tasklet's link fails mid-run (transport deadline 60 s): every tasklet returns
 *     an error within a few seconds, long before the deadline, because the failed rank leaves
 *     and each peer's next receive from it fails at once;
 *   - stall: one tasklet stops answering (sleeps 6 s, deadline 1 s): the others give up with a
 *     deadline error well before it wakes, naming the peer they waited for;
 *   - a bad config is refused before anything is sent. */
#include "model/trainer.h"
#include "tests/runtime/runtime_harness.h"

static data_set *s_data;

static parallel_tasklet_config s_config(int S, int R) {
  parallel_tasklet_config c = parallel_tasklet_config_default();
  c.run.stages = S, c.run.replicas = R;
  snprintf(c.run.schedule, sizeof c.run.schedule, "1f1b");
  c.run.seq = 16, c.run.layers = 4, c.run.heads = 2, c.run.channels = 16; /* V 64: the data's */
  c.run.batch = 8, c.run.micro_batches = 2, c.run.val_batches = 1, c.run.seed = 3;
  c.run.steps = 1000; /* far more than the failure lets run */
  h_run_optim_default(&c.run);
  c.data = s_data;
  return c;
}

static void test_crash(int S, int R, int victim) {
  static h_run h;
  parallel_tasklet_config c = s_config(S, R);
  h_init(&h, &c);
  h.timeout_s = 60;
  h.fail_rank = victim;
  h.fail_after = 40;
  WT_TEST_ASSERT(h_run_all(&h) != WT_OK, "the run failed");
  double latest = 0;
  for (int w = 0; w < S * R; w++) {
    WT_TEST_ASSERT(h.rcs[w] != WT_OK, "%dx%d rank %d returned OK", S, R, w);
    WT_TEST_ASSERT(strstr(h.err[w], "tasklet stage"), "rank %d: %s", w, h.err[w]);
    latest = fmax(latest, h.returned_s[w]);
  }
  WT_TEST_ASSERT(strstr(h.err[victim], "injected"), "the victim says why: %s", h.err[victim]);
  WT_TEST_ASSERT(latest < 10, "%dx%d: the last tasklet returned after %.1f s", S, R, latest);
  printf("crash of rank %d in %dx%d after %ld steps: all %d returned within %.3f s; rank 0: %s\n",
         victim, S, R, h.steps[victim], S * R, latest, h.err[0]);
}

static void test_stall(void) {
  static h_run h;
  parallel_tasklet_config c = s_config(2, 2);
  h_init(&h, &c);
  h.timeout_s = 1;
  h.stall_rank = 2;
  h.stall_s = 6;
  WT_TEST_ASSERT(h_run_all(&h) != WT_OK, "the run failed");
  for (int w = 0; w < 4; w++) {
    WT_TEST_ASSERT(h.rcs[w] != WT_OK, "rank %d returned OK", w);
    if (w != 2)
      WT_TEST_ASSERT(h.returned_s[w] < 5, "rank %d waited %.1f s for the stalled rank", w,
                     h.returned_s[w]);
  }
  printf("stall of rank 2 (6 s, deadline 1 s): others returned at %.2f %.2f %.2f s; rank 0: %s\n",
         h.returned_s[0], h.returned_s[1], h.returned_s[3], h.err[0]);
}

static void test_bad_config(void) {
  parallel_tasklet_config c = s_config(2, 2);
  WT_TEST_ASSERT(parallel_tasklet_config_validate(&c, 3) != WT_OK &&
                     strstr(wt_last_error(), "world of 3"),
                 "world size: %s", wt_last_error());
  snprintf(c.run.sync.grad_codec, sizeof c.run.sync.grad_codec, "int3");
  WT_TEST_ASSERT(parallel_tasklet_config_validate(&c, 4) != WT_OK &&
                     strstr(wt_last_error(), "int3"),
                 "codec: %s", wt_last_error());
  c = s_config(2, 2);
  snprintf(c.run.act_codec, sizeof c.run.act_codec, "delta3");
  WT_TEST_ASSERT(parallel_tasklet_config_validate(&c, 4) != WT_OK, "act codec");
  c = s_config(2, 2);
  c.run.zero = 1;
  snprintf(c.run.sync.grad_codec, sizeof c.run.sync.grad_codec, "int8");
  WT_TEST_ASSERT(parallel_tasklet_config_validate(&c, 4) != WT_OK &&
                     strstr(wt_last_error(), "--zero"),
                 "zero + codec: %s", wt_last_error());
  c = s_config(8, 1);
  WT_TEST_ASSERT(parallel_tasklet_config_validate(&c, 8) != WT_OK &&
                     strstr(wt_last_error(), "4 layers"),
                 "more stages than layers: %s", wt_last_error());
  c = s_config(2, 2);
  c.run.time_limit = -1;
  WT_TEST_ASSERT(parallel_tasklet_config_validate(&c, 4) != WT_OK &&
                     strstr(wt_last_error(), "--time-limit"),
                 "negative time limit: %s", wt_last_error());
}

int main(void) {
  data_synth_config sc = data_synth_default();
  sc.n_tokens = 10000;
  s_data = data_set_synthetic(&sc);
  WT_TEST_REQUIRE(s_data, "%s", wt_last_error());
  test_crash(2, 2, 1);
  test_crash(4, 1, 2);
  test_crash(1, 4, 3);
  test_stall();
  test_bad_config();
  data_set_destroy(&s_data);
  return wt_test_finish("test_runtime_fail");
}
