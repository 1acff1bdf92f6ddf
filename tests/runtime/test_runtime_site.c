/* test_runtime_site — tasklets whose stage runs on a site of tensor-parallel ranks
 * (parallel_tasklet_config.site_ranks, parallel/datacenter/site.h) in a 2-stage × 2-replica run
 * over the in-process transport:
 *   - GPipe and 1F1B with two of the four tasklets as sites (of 2 and 4 ranks, one per stage,
 *     in different replicas), and 1F1B with sites of 2 and 4 everywhere, each also with context
 *     parallelism c = 2 in the sites (site_cp: 1 × 2 and 2 × 2 ranks): every step's loss and the
 * validation loss equal the run without sites within 1e-4 relative (TP rounds its split sums
 * differently; a lost gradient or a stale weight is off by far more after a few AdamW steps); the
 * sites sent bytes between their ranks and, in GPipe, recomputed forwards (one slot);
 *   - a site run checkpointed after 3 steps and resumed continues bitwise as the site run that
 *     never stopped (a site's numbers are deterministic), and its checkpoint resumes without
 *     sites within 1e-4;
 *   - a site tasklet whose link dies mid-run ends every tasklet with an error, none hangs;
 *   - the MoE model (E = 4, top-2, a capacity that drops nothing, no aux loss) with every
 *     tasklet a site of 2 expert-parallel ranks, GPipe and 1F1B: every step's loss and the
 *     validation loss equal the run without sites within 1e-4 relative;
 *   - a site degree that does not divide the heads, a GPU count that is not a multiple of the CP
 *     degree, a sequence that does not split into 2c chunks, an MoE site with CP, with a GPU
 *     count that does not divide the experts or the micro-batch rows, and a device back end
 *     are refused with a message. */
#include "model/trainer.h"
#include "tests/runtime/hostdev.h"
#include "tests/runtime/runtime_harness.h"

enum { STEPS = 6 };
#define RTOL 1e-4

static data_set *s_data;
static char s_tmp[512];

static parallel_tasklet_config s_config(assign_schedule_kind sched) {
  parallel_tasklet_config c = parallel_tasklet_config_default();
  c.run.stages = 2, c.run.replicas = 2;
  snprintf(c.run.schedule, sizeof c.run.schedule, "%s", assign_schedule_name(sched));
  c.run.seq = 16, c.run.layers = 2, c.run.heads = 4, c.run.channels = 32; /* V 64: the data's */
  c.run.batch = 8, c.run.micro_batches = 2, c.run.val_batches = 2, c.run.seed = 5;
  c.run.steps = STEPS;
  h_run_optim_default(&c.run);
  c.run.lr = 3e-3f;
  c.run.warmup = 2;
  c.run.grad_clip = 0.5f;
  c.data = s_data;
  return c;
}

static double s_rel(float a, float b) {
  return fabs((double)a - b) / fmax(fabs((double)b), 1e-12);
}

/* Every tasklet's loss of steps [from, STEPS) and the last validation loss within RTOL of ref's;
 * returns the largest relative difference. */
static double s_close(const h_run *ref, const h_run *got, long from, const char *what) {
  double worst = 0;
  for (long i = from; i < STEPS; i++)
    for (int w = 0; w < 4; w++) {
      double d = s_rel(got->loss[w][i], ref->loss[0][i]);
      worst = fmax(worst, d);
      WT_TEST_ASSERT(d <= RTOL, "%s step %ld rank %d: loss %.7g, without sites %.7g", what, i + 1,
                     w, got->loss[w][i], ref->loss[0][i]);
    }
  double d = s_rel(got->res[0].last_val_loss, ref->res[0].last_val_loss);
  WT_TEST_ASSERT(d <= RTOL, "%s: validation loss %.7g, without sites %.7g", what,
                 got->res[0].last_val_loss, ref->res[0].last_val_loss);
  return fmax(worst, d);
}

static void test_sites_match(assign_schedule_kind sched, const char *name, int all, int cp) {
  static h_run plain, sites;
  parallel_tasklet_config c = s_config(sched);
  h_init(&plain, &c);
  WT_TEST_REQUIRE(h_run_all(&plain) == WT_OK, "%s", plain.err[0]);
  c.run.site_cp = cp; /* the tasklets without a site ignore it */
  h_init(&sites, &c);
  /* world rank = stage·R + replica: rank 0 is stage 0 of replica 0, rank 3 stage 1 of replica 1 */
  for (int w = 0; w < 4; w++)
    sites.site_ranks[w] = all ? (w < 2 ? 2 : 4) : w == 0 ? 2 : w == 3 ? 4 : 1;
  int rc = h_run_all(&sites);
  WT_TEST_REQUIRE(rc == WT_OK, "%s: %s | %s | %s | %s", name, sites.err[0], sites.err[1],
                  sites.err[2], sites.err[3]);
  double worst = s_close(&plain, &sites, 0, name);
  for (int w = 0; w < 4; w++) {
    int site = sites.site_ranks[w] > 1;
    WT_TEST_ASSERT((sites.res[w].bytes_site > 0) == site, "%s rank %d: %llu bytes in its site",
                   name, w, (unsigned long long)sites.res[w].bytes_site);
    /* GPipe runs F0 F1 B0 B1: with the site's one slot both backwards recompute. */
    if (sched == ASSIGN_SCHEDULE_GPIPE)
      WT_TEST_ASSERT(sites.res[w].recomputes == (site ? 2 * STEPS : 0),
                     "%s rank %d: %ld forwards recomputed", name, w, sites.res[w].recomputes);
  }
  printf("%s, %s tasklets as sites, cp %d: losses within %.2g relative of the run without sites; "
         "rank 0's site sent %llu bytes, recomputed %ld forwards\n",
         name, all ? "all" : "2 of 4", cp, worst, (unsigned long long)sites.res[0].bytes_site,
         sites.res[0].recomputes);
}

/* The MoE model (both blocks MoE, E = 4, top-2, a capacity that drops nothing, no aux loss: the
 * site's aux loss is per rank's rows) with every tasklet a site of 2 expert-parallel ranks, each
 * taking one of a micro-batch's 2 rows: the losses of the run without sites within RTOL. */
static void s_moe(parallel_run_config *run) {
  run->moe.experts = 4, run->moe.top_k = 2, run->moe.capacity = 2.0f, run->moe.aux_weight = 0;
  snprintf(run->moe.layers, sizeof run->moe.layers, "all");
}

static void test_moe_sites(assign_schedule_kind sched, const char *name) {
  static h_run plain, sites;
  parallel_tasklet_config c = s_config(sched);
  s_moe(&c.run);
  h_init(&plain, &c);
  WT_TEST_REQUIRE(h_run_all(&plain) == WT_OK, "%s", plain.err[0]);
  h_init(&sites, &c);
  for (int w = 0; w < 4; w++) sites.site_ranks[w] = 2;
  int rc = h_run_all(&sites);
  WT_TEST_REQUIRE(rc == WT_OK, "MoE %s: %s | %s | %s | %s", name, sites.err[0], sites.err[1],
                  sites.err[2], sites.err[3]);
  double worst = s_close(&plain, &sites, 0, name);
  for (int w = 0; w < 4; w++)
    WT_TEST_ASSERT(sites.res[w].bytes_site > 0, "MoE %s rank %d: no bytes in its site", name, w);
  printf("MoE %s, every tasklet a site of 2 EP ranks: losses within %.2g relative of the run "
         "without sites; rank 0's site sent %llu bytes\n",
         name, worst, (unsigned long long)sites.res[0].bytes_site);
}

/* A site run of 3 steps checkpointed in s_tmp/dir. */
static void s_part(parallel_tasklet_config c, const char *dir) {
  static h_run part;
  snprintf(c.run.checkpoint_dir, sizeof c.run.checkpoint_dir, "%s/%s", s_tmp, dir);
  c.stop_after = 3;
  h_init(&part, &c);
  WT_TEST_REQUIRE(h_run_all(&part) == WT_OK, "%s", part.err[0]);
  WT_TEST_ASSERT(part.steps[0] == 3, "stopped after %ld steps", part.steps[0]);
}

static void test_resume(void) {
  static h_run straight, resumed, plain;
  parallel_tasklet_config c = s_config(ASSIGN_SCHEDULE_1F1B);
  h_init(&plain, &c);
  WT_TEST_REQUIRE(h_run_all(&plain) == WT_OK, "%s", plain.err[0]);
  c.run.site_ranks = 2;
  h_init(&straight, &c);
  WT_TEST_REQUIRE(h_run_all(&straight) == WT_OK, "%s", straight.err[0]);
  s_part(c, "a"), s_part(c, "b");
  c.resume = 1;
  snprintf(c.run.checkpoint_dir, sizeof c.run.checkpoint_dir, "%s/a", s_tmp);
  h_init(&resumed, &c);
  WT_TEST_REQUIRE(h_run_all(&resumed) == WT_OK, "%s", resumed.err[0]);
  for (long i = 3; i < STEPS; i++)
    for (int w = 0; w < 4; w++)
      WT_TEST_ASSERT(resumed.loss[w][i] == straight.loss[0][i],
                     "resumed site run step %ld rank %d: %.9g, straight %.9g", i + 1, w,
                     resumed.loss[w][i], straight.loss[0][i]);
  /* The same checkpoint without sites: the stage is the stage. */
  c.run.site_ranks = 1;
  snprintf(c.run.checkpoint_dir, sizeof c.run.checkpoint_dir, "%s/b", s_tmp);
  h_init(&resumed, &c);
  WT_TEST_REQUIRE(h_run_all(&resumed) == WT_OK, "%s", resumed.err[0]);
  s_close(&plain, &resumed, 3, "site checkpoint resumed without sites");
  printf("site run stopped after 3 steps resumes bitwise; without sites within %.0e\n", RTOL);
}

/* A site tasklet whose WAN link dies mid-run: every tasklet returns an error within the deadline
 * (the site's ranks finish each call on their own, so none of them is left waiting). */
static void test_dead_link(void) {
  static h_run straight, h;
  parallel_tasklet_config c = s_config(ASSIGN_SCHEDULE_1F1B);
  c.run.site_ranks = 2;
  h_init(&straight, &c);
  WT_TEST_REQUIRE(h_run_all(&straight) == WT_OK, "%s", straight.err[0]);
  h_init(&h, &c);
  h.timeout_s = 5;
  h.fail_rank = 0, h.fail_after = (int)(straight.msgs[0] / STEPS * 3); /* in step 4 */
  double t0 = wt_now_s();
  WT_TEST_ASSERT(h_run_all(&h) != WT_OK, "the run with a dead link succeeded");
  for (int w = 0; w < 4; w++)
    WT_TEST_ASSERT(h.rcs[w] != WT_OK && h.steps[w] < STEPS, "rank %d: rc %d after %ld steps", w,
                   h.rcs[w], h.steps[w]);
  WT_TEST_ASSERT(strstr(h.err[0], "injected"), "rank 0: %s", h.err[0]);
  WT_TEST_ASSERT(wt_now_s() - t0 < 15, "the failure took %.1f s to spread", wt_now_s() - t0);
  printf("a site tasklet's dead link in step %ld ends every tasklet in %.2f s\n", h.steps[0] + 1,
         wt_now_s() - t0);
}

static void test_refusals(void) {
  static h_run h;
  parallel_tasklet_config c = s_config(ASSIGN_SCHEDULE_GPIPE);
  c.run.site_ranks = 3;
  WT_TEST_ASSERT(parallel_tasklet_config_validate(&c, 4) == WT_EINVAL &&
                     strstr(wt_last_error(), "divides"),
                 "3 ranks for 4 heads: %s", wt_last_error());
  c.run.site_ranks = 6, c.run.site_cp = 4;
  WT_TEST_ASSERT(parallel_tasklet_config_validate(&c, 4) == WT_EINVAL &&
                     strstr(wt_last_error(), "multiple of the context-parallel degree 4"),
                 "6 GPUs with cp 4: %s", wt_last_error());
  c.run.site_ranks = 6, c.run.site_cp = 2;
  WT_TEST_ASSERT(parallel_tasklet_config_validate(&c, 4) == WT_EINVAL &&
                     strstr(wt_last_error(), "3 tensor-parallel"),
                 "6 GPUs with cp 2 for 4 heads: %s", wt_last_error());
  c.run.site_ranks = 6,
  c.run.site_cp = 3; /* 2 TP ranks divide the heads; 6 chunks do not split 16 */
  WT_TEST_ASSERT(parallel_tasklet_config_validate(&c, 4) == WT_EINVAL &&
                     strstr(wt_last_error(), "multiple of 6, not 16"),
                 "cp 3 with T = 16: %s", wt_last_error());
  c.run.site_ranks = 1, c.run.site_cp = 2;
  WT_TEST_ASSERT(parallel_tasklet_config_validate(&c, 4) == WT_OK,
                 "cp 2 without a site was refused: %s", wt_last_error());
  c.run.site_cp = 0;
  c.run.site_ranks = 2;
  s_moe(&c.run);
  WT_TEST_ASSERT(parallel_tasklet_config_validate(&c, 4) == WT_OK, "an MoE site of 2: %s",
                 wt_last_error());
  c.run.site_cp = 2;
  WT_TEST_ASSERT(parallel_tasklet_config_validate(&c, 4) == WT_EINVAL &&
                     strstr(wt_last_error(), "without context parallelism"),
                 "an MoE site with cp 2: %s", wt_last_error());
  c.run.site_cp = 1, c.run.site_ranks = 3; /* 4 experts, 2 rows */
  WT_TEST_ASSERT(parallel_tasklet_config_validate(&c, 4) == WT_EINVAL &&
                     strstr(wt_last_error(), "4 experts"),
                 "an MoE site of 3: %s", wt_last_error());
  c.run.site_ranks = 4; /* 4 experts, but 2 rows per micro-batch */
  WT_TEST_ASSERT(parallel_tasklet_config_validate(&c, 4) == WT_EINVAL &&
                     strstr(wt_last_error(), "2 rows"),
                 "an MoE site of 4 on 2 rows: %s", wt_last_error());
  c = s_config(ASSIGN_SCHEDULE_GPIPE);
  c.run.site_ranks = 2;
  c.kernels = hostdev_ops();
  WT_TEST_REQUIRE(c.kernels, "hostdev: %s", wt_last_error());
  h_init(&h, &c);
  WT_TEST_ASSERT(h_run_all(&h) != WT_OK, "a site on a device back end ran");
  for (int w = 0; w < 4; w++)
    WT_TEST_ASSERT(h.rcs[w] != WT_OK, "rank %d of a refused run returned OK", w);
  WT_TEST_ASSERT(h.rcs[0] == WT_ENOTSUP && strstr(h.err[0], "process-wide"), "device: %d %s",
                 h.rcs[0], h.err[0]);
}

int main(void) {
  wt_test_tmpdir(s_tmp, sizeof s_tmp);
  data_synth_config sc = data_synth_default();
  sc.n_tokens = 10000;
  s_data = data_set_synthetic(&sc);
  WT_TEST_REQUIRE(s_data, "%s", wt_last_error());
  test_sites_match(ASSIGN_SCHEDULE_GPIPE, "GPipe", 0, 1);
  test_sites_match(ASSIGN_SCHEDULE_1F1B, "1F1B", 0, 1);
  test_sites_match(ASSIGN_SCHEDULE_1F1B, "1F1B", 1, 1);
  test_sites_match(ASSIGN_SCHEDULE_GPIPE, "GPipe", 1, 2);
  test_sites_match(ASSIGN_SCHEDULE_1F1B, "1F1B", 0, 2);
  test_sites_match(ASSIGN_SCHEDULE_1F1B, "1F1B", 1, 2);
  test_moe_sites(ASSIGN_SCHEDULE_GPIPE, "GPipe");
  test_moe_sites(ASSIGN_SCHEDULE_1F1B, "1F1B");
  test_resume();
  test_dead_link();
  test_refusals();
  data_set_destroy(&s_data);
  if (!wt_test_failures) {
    char rm[700];
    snprintf(rm, sizeof rm, "rm -rf '%s'", s_tmp);
    if (system(rm) != 0) fprintf(stderr, "could not remove %s\n", s_tmp);
  }
  return wt_test_failures ? 1 : 0;
}
