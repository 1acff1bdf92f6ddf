/* test_assign_refine — the layout refinement of large instances.
 *
 * 1. Incremental pricing: on random jittered worlds (sharded PS and ring DATAP, with and without
 *    the compute term), every tentative swap's cost and tie equal a full evaluation of the swapped
 *    layout to 1e-9 relative, the cost also equals assign_plan_cost of that layout (the public,
 *    independent evaluator), the same for reversals of a column's stage segment, and the state
 *    after a run of committed moves equals a fresh load.
 * 2. On a 256-device jittered world with shuffled ids (16 regions of 16, built here, seeded),
 *    default-settings ga must be strictly better than greedy.
 */
#include "assign/assign.h"
#include "assign/assign_internal.h"
#include "common/common.h"
#include "common/rng.h"
#include "common/testing.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  assign_network net;
  assign_problem prob;
} s_world;

/* A point on the unit sphere. */
static void s_point(wt_rng *rng, double p[3]) {
  double len = 0;
  while (len < 1e-9) {
    for (int i = 0; i < 3; i++) p[i] = wt_rng_normal(rng);
    len = sqrt(p[0] * p[0] + p[1] * p[1] + p[2] * p[2]);
  }
  for (int i = 0; i < 3; i++) p[i] /= len;
}

static double s_jit(wt_rng *rng, double v) {
  return v * (0.9 + 0.2 * wt_rng_double(rng));
}

/* g regions of `per` devices on a globe (latency by distance, bandwidth falling with it, 2 Gbps
 * inside a region), every pair jittered ±10%, device ids shuffled: the shape of netsim's
 * generated worlds. d_pp = g, d_dp = per. */
static void s_jittered_world(s_world *w, int g, int per, uint64_t seed) {
  int n = g * per;
  wt_rng rng;
  wt_rng_seed(&rng, seed);
  memset(w, 0, sizeof *w);
  w->net.n = n;
  w->net.latency_s = wt_xcalloc((size_t)n * n, sizeof(double));
  w->net.bandwidth_Bps = wt_xcalloc((size_t)n * n, sizeof(double));
  double *pts = wt_xmalloc((size_t)g * 3 * sizeof(double));
  for (int r = 0; r < g; r++) s_point(&rng, pts + 3 * r);
  int *region = wt_xmalloc((size_t)n * sizeof(int));
  for (int d = 0; d < n; d++) region[d] = d % g;
  wt_rng_shuffle_int(&rng, region, n);
  for (int a = 0; a < n; a++)
    for (int b = a + 1; b < n; b++) {
      const double *pa = pts + 3 * region[a], *pb = pts + 3 * region[b];
      double dot = pa[0] * pb[0] + pa[1] * pb[1] + pa[2] * pb[2];
      double km = 6371.0 * acos(assign_dmax(-1, assign_dmin(1, dot)));
      int same = region[a] == region[b];
      double lat = same ? 0.005 : km / 200000.0 + 0.01;
      double gbps = same ? 2.0 : 0.3 + 0.9 * exp(-km / 5000.0);
      w->net.latency_s[a * n + b] = w->net.latency_s[b * n + a] = s_jit(&rng, lat);
      w->net.bandwidth_Bps[a * n + b] = w->net.bandwidth_Bps[b * n + a] =
          s_jit(&rng, gbps) * 1e9 / 8;
    }
  for (int d = 0; d < n; d++) w->net.bandwidth_Bps[d * n + d] = 1e9;
  w->prob = (assign_problem){
      .net = &w->net, .d_pp = g, .d_dp = per, .c_dp_bytes = 650e6, .c_pp_bytes = 471.247e6};
  free(pts);
  free(region);
}

static void s_world_free(s_world *w) {
  free(w->net.latency_s);
  free(w->net.bandwidth_Bps);
}

static int s_close(double a, double b) {
  return fabs(a - b) <= 1e-9 * assign_dmax(fabs(a), fabs(b));
}

/* Tentative moves against a full evaluation, then committed moves against a fresh load. */
static void s_check_incremental(s_world *w, uint64_t seed) {
  assign_model m;
  assign_model_init(&m, &w->prob);
  long evals = 0, evals2 = 0;
  assign_refine r, full;
  assign_refine_init(&r, &m, &evals);
  assign_refine_init(&full, &m, &evals2);
  int n = m.n, *layout = wt_xmalloc((size_t)n * sizeof(int));
  wt_rng rng;
  wt_rng_seed(&rng, seed);
  for (int d = 0; d < n; d++) layout[d] = d;
  wt_rng_shuffle_int(&rng, layout, n);
  assign_refine_load(&r, layout);
  assign_plan *plan = assign_plan_new(m.P, m.K);
  double worst = 0;
  for (int it = 0; it < 400; it++) {
    int x = (int)wt_rng_below(&rng, (uint64_t)n), y = (int)wt_rng_below(&rng, (uint64_t)n);
    /* half the pairs from neighbouring places: same row, same column, adjacent stages */
    if (it % 2 && n > m.K) y = r.dev[(r.pos[x] + (it % 4 == 1 ? 1 : m.K)) % n];
    if (x == y) continue;
    double c = assign_refine_try_swap(&r, x, y), tie = r.t_tie;
    memcpy(plan->device, r.dev, (size_t)n * sizeof(int));
    int px = r.pos[x], py = r.pos[y];
    plan->device[px] = y;
    plan->device[py] = x;
    assign_refine_load(&full, plan->device);
    double ref = assign_plan_cost(&w->prob, plan).comm_s;
    WT_TEST_ASSERT(s_close(c, full.cost) && s_close(c, ref),
                   "swap %d<->%d: incremental cost %.12g, full %.12g, assign_plan_cost %.12g", x, y,
                   c, full.cost, ref);
    WT_TEST_ASSERT(s_close(tie, full.tie), "swap %d<->%d: incremental tie %.12g, full %.12g", x, y,
                   tie, full.tie);
    worst = assign_dmax(worst, fabs(c - ref) / ref);
    if (wt_rng_below(&rng, 2)) assign_refine_commit_swap(&r, x, y);
  }
  for (int it = 0; it < 200 && m.P > 1; it++) { /* segment reversals of one column */
    int c = (int)wt_rng_below(&rng, (uint64_t)m.K), s1 = (int)wt_rng_below(&rng, (uint64_t)m.P - 1);
    int s2 = s1 + 1 + (int)wt_rng_below(&rng, (uint64_t)(m.P - 1 - s1));
    double cost = assign_refine_try_reverse(&r, c, s1, s2, INFINITY), tie = r.t_tie;
    memcpy(plan->device, r.dev, (size_t)n * sizeof(int));
    for (int a = s1, b = s2; a < b; a++, b--) {
      plan->device[a * m.K + c] = r.dev[b * m.K + c];
      plan->device[b * m.K + c] = r.dev[a * m.K + c];
    }
    assign_refine_load(&full, plan->device);
    double ref = assign_plan_cost(&w->prob, plan).comm_s;
    WT_TEST_ASSERT(s_close(cost, full.cost) && s_close(cost, ref) && s_close(tie, full.tie),
                   "reverse column %d stages %d..%d: incremental %.12g / %.12g, full %.12g / "
                   "%.12g, assign_plan_cost %.12g",
                   c, s1, s2, cost, tie, full.cost, full.tie, ref);
    worst = assign_dmax(worst, fabs(cost - ref) / ref);
    if (wt_rng_below(&rng, 2)) assign_refine_commit_reverse(&r, c, s1, s2);
  }
  assign_refine_load(&full, r.dev);
  WT_TEST_ASSERT(s_close(r.cost, full.cost) && s_close(r.tie, full.tie),
                 "after commits: state %.12g / %.12g, fresh load %.12g / %.12g", r.cost, r.tie,
                 full.cost, full.tie);
  printf("incremental vs full (n=%d, %s%s): largest relative difference %.2e\n", n,
         w->prob.dp_algo == ASSIGN_DP_RING ? "ring" : "PS",
         w->prob.compute_s > 0 ? ", compute" : "", worst);
  assign_plan_destroy(&plan);
  free(layout);
  assign_refine_free(&r);
  assign_refine_free(&full);
  assign_model_free(&m);
}

static void test_incremental(void) {
  s_world w;
  s_jittered_world(&w, 6, 8, 5);
  s_check_incremental(&w, 1);
  w.prob.dp_algo = ASSIGN_DP_RING;
  s_check_incremental(&w, 2);
  w.prob.dp_algo = ASSIGN_DP_SHARDED_PS;
  w.prob.compute_s = 1.5;
  s_check_incremental(&w, 3);
  s_world_free(&w);
  s_jittered_world(&w, 16, 16, 6); /* the 256-device shape of the ga test below */
  s_check_incremental(&w, 4);
  s_world_free(&w);
}

/* A refinement run never ends worse than it started, and keeps its layout consistent. */
static void test_run_monotone(void) {
  s_world w;
  s_jittered_world(&w, 8, 8, 9);
  assign_model m;
  assign_model_init(&m, &w.prob);
  long evals = 0;
  assign_refine r;
  assign_refine_init(&r, &m, &evals);
  int *layout = wt_xmalloc((size_t)m.n * sizeof(int));
  for (int d = 0; d < m.n; d++) layout[d] = d;
  assign_refine_load(&r, layout);
  double start = r.cost;
  assign_stats st = {0};
  assign_tracker t;
  assign_budget b = {.max_evals = 20000};
  assign_tracker_init(&t, &b, &st, &evals, 0, 0);
  wt_rng rng;
  wt_rng_seed(&rng, 1);
  assign_refine_run(&r, &t, &rng, 0);
  assign_plan *plan = assign_plan_new(m.P, m.K);
  memcpy(plan->device, r.dev, (size_t)m.n * sizeof(int));
  WT_TEST_REQUIRE(assign_plan_validate(&w.prob, plan) == WT_OK, "refined layout is a plan");
  double c = assign_plan_cost(&w.prob, plan).comm_s;
  WT_TEST_ASSERT(s_close(c, r.cost), "state %.12g vs plan cost %.12g", r.cost, c);
  WT_TEST_ASSERT(c < start, "refinement from the id-order layout: %.4f, started at %.4f", c, start);
  printf("refinement of the id-order layout (64 devices): %.3f -> %.3f s\n", start, c);
  assign_plan_destroy(&plan);
  free(layout);
  assign_refine_free(&r);
  assign_model_free(&m);
  s_world_free(&w);
}

/* Default-settings ga on 256 jittered, shuffled devices beats greedy strictly. */
static void test_ga_beats_greedy_256(void) {
  for (uint64_t seed = 1; seed <= 2; seed++) {
    s_world w;
    s_jittered_world(&w, 16, 16, 100 + seed);
    assign_plan *ga = NULL, *greedy = NULL;
    assign_stats st;
    WT_TEST_REQUIRE(assign_solve(&w.prob, ASSIGN_SOLVER_GA, NULL, seed, &ga, &st) == WT_OK, "ga");
    WT_TEST_REQUIRE(assign_solve(&w.prob, ASSIGN_SOLVER_GREEDY, NULL, seed, &greedy, NULL) == WT_OK,
                    "greedy");
    double cg = assign_plan_cost(&w.prob, greedy).comm_s, ca = assign_plan_cost(&w.prob, ga).comm_s;
    WT_TEST_ASSERT(ca < cg * (1 - 1e-9), "world %d, 256 devices: default ga %.4f s, greedy %.4f s",
                   (int)seed, ca, cg);
    printf("256 jittered devices, world %d: greedy %.3f s, default ga %.3f s (%+.2f%%, %.2f s)\n",
           (int)seed, cg, ca, 100 * (ca / cg - 1), st.seconds);
    assign_plan_destroy(&ga);
    assign_plan_destroy(&greedy);
    s_world_free(&w);
  }
}

int main(void) {
  test_incremental();
  test_run_monotone();
  test_ga_beats_greedy_256();
  return wt_test_finish("test_assign_refine");
}
