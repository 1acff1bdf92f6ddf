/* test_sim_model — netsim's model of what the runtime does besides passes and the reduce,
 * against hand-computed timelines: recomputed forwards (the executor holds one micro-batch's
 * activations), per-stage pass times, the tied embedding's exchange between the first and last
 * stage, and the one-round (norm share, loss) exchange that ends every step. */
#include "common/common.h"
#include "common/testing.h"
#include "netsim/netsim.h"

#include <stdlib.h>

#define F 0.01 /* forward of one micro-batch; backward 2F */
#define L 0.05 /* one-way latency of every link */

static assign_network s_net(int n) {
  assign_network net = {.n = n};
  net.latency_s = wt_xcalloc((size_t)n * n, sizeof(double));
  net.bandwidth_Bps = wt_xcalloc((size_t)n * n, sizeof(double));
  for (int i = 0; i < n * n; i++) {
    net.bandwidth_Bps[i] = 1e15; /* bytes cost nothing: latency and compute only */
    net.latency_s[i] = i % (n + 1) == 0 ? 0 : L;
  }
  return net;
}

static double s_sim(const assign_network *net, int S, int R, netsim_sim_config cfg,
                    netsim_sim_result *out) {
  assign_plan *p = assign_plan_new(S, R);
  for (int i = 0; i < S * R; i++) p->device[i] = i;
  netsim_sim_result res;
  int rc = netsim_simulate(net, p, &cfg, &res, NULL);
  assign_plan_destroy(&p);
  WT_TEST_ASSERT(rc == WT_OK, "simulate: %s", wt_last_error());
  if (out) *out = res;
  return rc == WT_OK ? res.iteration_s : -1;
}

/* GPipe runs all forwards first, so every backward but a lone micro-batch's reruns its forward;
 * 1F1B's last stage alternates F j, B j and never does; its first stage (S-1 warm-up forwards)
 * does for every backward when m <= S. */
static void test_recompute_counts(void) {
  WT_TEST_ASSERT(netsim_schedule_recomputes(NETSIM_GPIPE, 0, 2, 4) == 4, "gpipe m=4");
  WT_TEST_ASSERT(netsim_schedule_recomputes(NETSIM_GPIPE, 1, 2, 1) == 0, "gpipe m=1");
  WT_TEST_ASSERT(netsim_schedule_recomputes(NETSIM_1F1B, 3, 4, 4) == 0, "1f1b last stage");
  WT_TEST_ASSERT(netsim_schedule_recomputes(NETSIM_1F1B, 0, 4, 4) == 4, "1f1b first stage");
  WT_TEST_ASSERT(netsim_schedule_recomputes(NETSIM_1F1B, 4, 4, 4) == -1, "stage out of range");
}

/* One device, GPipe, m = 2: F0 F1 then B0 and B1, each after its forward again:
 * 2F + 2·(F + 2F) = 8F. Without recompute 6F. */
static void test_recompute_time(void) {
  assign_network net = s_net(1);
  netsim_sim_config cfg = {
      .schedule = NETSIM_GPIPE, .micro_batches = 2, .fwd_s = F, .bwd_s = 2 * F};
  netsim_sim_result res;
  WT_TEST_CLOSE(s_sim(&net, 1, 1, cfg, &res), 6 * F, 1e-12, 0, "no recompute");
  cfg.recompute = 1;
  WT_TEST_CLOSE(s_sim(&net, 1, 1, cfg, &res), 8 * F, 1e-12, 0, "recompute");
  WT_TEST_ASSERT(res.n_recomputes == 2, "%d recomputes", res.n_recomputes);
  /* per-stage times override fwd_s (backward twice the stage's forward) */
  double stage[1] = {2 * F};
  cfg.stage_fwd_s = stage;
  WT_TEST_CLOSE(s_sim(&net, 1, 1, cfg, &res), 16 * F, 1e-12, 0, "stage times");
  free(net.latency_s), free(net.bandwidth_Bps);
}

/* Two stages, one replica, one micro-batch: stage 0 F [0,F], act arrives F+L, stage 1 F and B
 * until 4F+L, the gradient arrives 4F+2L, stage 0's B ends 6F+2L: the passes alone.
 * Tied exchange: stage 1's copy (sent at 4F+2L, once its gradient is delivered) reaches stage 0
 * at 4F+3L, stage 0's (sent at 6F+2L) reaches stage 1 at 6F+3L, which ends the step.
 * Norm exchange after that: stage 0 is ready at max(6F+2L, 4F+3L) = 4F+3L (L > 2F), so its
 * message reaches stage 1 at 4F+4L, stage 1's reaches stage 0 at 6F+4L, which ends it. */
static void test_tied_and_norm(void) {
  assign_network net = s_net(2);
  netsim_sim_config cfg = {.schedule = NETSIM_1F1B, .micro_batches = 1, .fwd_s = F, .bwd_s = 2 * F};
  WT_TEST_CLOSE(s_sim(&net, 2, 1, cfg, NULL), 6 * F + 2 * L, 1e-12, 0, "passes");
  cfg.tied_bytes = 1;
  WT_TEST_CLOSE(s_sim(&net, 2, 1, cfg, NULL), 6 * F + 3 * L, 1e-12, 0, "tied");
  cfg.norm_exchange = 1, cfg.norm_bytes = 24;
  WT_TEST_CLOSE(s_sim(&net, 2, 1, cfg, NULL), 6 * F + 4 * L, 1e-12, 0, "tied + norm");
  cfg.tied_bytes = 0;
  /* norm alone: stage 1 is done at 4F+2L, its message reaches stage 0 at 4F+3L; stage 0's
   * (sent 6F+2L) reaches stage 1 at 6F+3L */
  WT_TEST_CLOSE(s_sim(&net, 2, 1, cfg, NULL), 6 * F + 3 * L, 1e-12, 0, "norm");
  cfg.norm_bytes = -1;
  assign_plan *p = assign_plan_new(2, 1);
  p->device[0] = 0, p->device[1] = 1;
  netsim_sim_result res;
  WT_TEST_ASSERT(netsim_simulate(&net, p, &cfg, &res, NULL) == WT_EINVAL, "negative bytes");
  assign_plan_destroy(&p);
  free(net.latency_s), free(net.bandwidth_Bps);
}

/* One stage, two replicas, ring: each device passes a chunk twice (reduce-scatter then
 * all-gather), 2L after the passes (3F); the norm exchange adds one more L. */
static void test_ring_then_norm(void) {
  assign_network net = s_net(2);
  netsim_sim_config cfg = {.schedule = NETSIM_GPIPE,
                           .micro_batches = 1,
                           .fwd_s = F,
                           .bwd_s = 2 * F,
                           .grad_bytes = 8,
                           .dp_algo = ASSIGN_DP_RING};
  WT_TEST_CLOSE(s_sim(&net, 1, 2, cfg, NULL), 3 * F + 2 * L, 1e-12, 0, "ring");
  cfg.norm_exchange = 1, cfg.norm_bytes = 24;
  WT_TEST_CLOSE(s_sim(&net, 1, 2, cfg, NULL), 3 * F + 3 * L, 1e-12, 0, "ring + norm");
  free(net.latency_s), free(net.bandwidth_Bps);
}

int main(void) {
  test_recompute_counts();
  test_recompute_time();
  test_tied_and_norm();
  test_ring_then_norm();
  if (wt_test_failures) fprintf(stderr, "test_sim_model: %d failure(s)\n", wt_test_failures);
  return wt_test_failures ? 1 : 0;
}
