/* test_assign_network — the network model beyond the paper: directed pairs and access links
 * (uplink and downlink per device or per site) in the cost model.
 *
 * Max-min sharing is checked against its definition (feasible, and every transfer is either at
 * its path's bandwidth or on a full link where nobody gets more), ring choice against every
 * ring order, plans against every layout on tiny problems, and the paper's model as the special
 * case: unlimited access links and symmetric pairs give the same numbers bit for bit.
 */
#include "assign/assign.h"
#include "common/common.h"
#include "common/rng.h"
#include "common/testing.h"
#include "tests/assign/dtfm_worldwide.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A tiny world: n devices on n_links access links. */
typedef struct {
  assign_network net;
  assign_problem prob;
  assign_access acc;
  int link_of[16];
  double up[16], down[16];
} s_world;

static void s_world_alloc(s_world *w, int n, int n_links) {
  memset(w, 0, sizeof *w);
  w->net.n = n;
  w->net.latency_s = calloc((size_t)n * n, sizeof(double));
  w->net.bandwidth_Bps = calloc((size_t)n * n, sizeof(double));
  w->acc = (assign_access){n_links, w->link_of, w->up, w->down};
  for (int l = 0; l < n_links; l++) w->up[l] = w->down[l] = INFINITY;
  w->prob = (assign_problem){.net = &w->net, .d_pp = 1, .d_dp = n, .access = &w->acc};
}

static void s_world_free(s_world *w) {
  free(w->net.latency_s);
  free(w->net.bandwidth_Bps);
}

/* Random directed links (each direction its own draw), random sites and access capacities. */
static void s_random_world(s_world *w, int d_pp, int d_dp, int n_links, wt_rng *rng) {
  int n = d_pp * d_dp;
  s_world_alloc(w, n, n_links);
  w->prob.d_pp = d_pp, w->prob.d_dp = d_dp;
  w->prob.c_dp_bytes = 4e8, w->prob.c_pp_bytes = 1e8;
  w->prob.dp_algo = ASSIGN_DP_RING;
  for (int d = 0; d < n; d++) w->link_of[d] = (int)wt_rng_below(rng, (uint64_t)n_links);
  for (int l = 0; l < n_links; l++) {
    w->up[l] = 1e8 * (0.2 + wt_rng_double(rng));
    w->down[l] = wt_rng_below(rng, 3) == 0 ? INFINITY : 2e8 * (0.2 + wt_rng_double(rng));
  }
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      if (i == j) continue;
      w->net.latency_s[i * n + j] = 0.001 + 0.05 * wt_rng_double(rng);
      w->net.bandwidth_Bps[i * n + j] = 5e8 * (0.1 + wt_rng_double(rng));
    }
}

/* ---- max-min sharing --------------------------------------------------------------------------
 */

/* Sharing by hand, through assign_ring_time (the hops of one ring step run at once). Peers on
 * one access link talk past it; two peers behind one uplink each get half of it; a slower path
 * keeps its own rate; latency adds to the slowest hop. */
static void test_share_by_hand(void) {
  s_world w;
  s_world_alloc(&w, 3, 2);
  for (int i = 0; i < 9; i++) w.net.bandwidth_Bps[i] = 1e9;
  w.link_of[0] = w.link_of[1] = 0, w.link_of[2] = 1;
  w.up[0] = 1e8;
  /* Ring 0→2→1→0: 0→2 crosses uplink 0 alone, 2→1 meets an unlimited downlink, 1→0 is LAN. */
  int devs[3] = {0, 2, 1}, order[3] = {0, 1, 2};
  double t = assign_ring_time(&w.prob, 3, devs, order, 1e8);
  WT_TEST_CLOSE(t, 1.0, 0, 1e-12, "one crossing flow gets the whole 1e8 B/s uplink");
  /* Devices 0, 1 behind uplink 0 and 2, 3 on link 1: ring 0→2→1→3→0 crosses uplink 0 twice. */
  s_world v;
  s_world_alloc(&v, 4, 2);
  for (int i = 0; i < 16; i++) v.net.bandwidth_Bps[i] = 1e9;
  v.link_of[0] = v.link_of[1] = 0, v.link_of[2] = v.link_of[3] = 1;
  v.up[0] = 1e8;
  int d4[4] = {0, 1, 2, 3}, across[4] = {0, 2, 1, 3}, grouped[4] = {0, 1, 2, 3};
  WT_TEST_CLOSE(assign_ring_time(&v.prob, 4, d4, across, 1e8), 2.0, 0, 1e-12,
                "two peers behind one uplink each get half");
  WT_TEST_CLOSE(assign_ring_time(&v.prob, 4, d4, grouped, 1e8), 1.0, 0, 1e-12,
                "the grouped ring crosses it once");
  v.net.bandwidth_Bps[0 * 4 + 2] = 2e7; /* 0→2's path is slower than its half */
  WT_TEST_CLOSE(assign_ring_time(&v.prob, 4, d4, across, 1e8), 5.0, 0, 1e-12,
                "a slow path keeps its rate (2e7) ...");
  v.net.bandwidth_Bps[0 * 4 + 2] = 1e9;
  v.net.latency_s[1 * 4 + 3] = 0.5;
  WT_TEST_CLOSE(assign_ring_time(&v.prob, 4, d4, across, 1e8), 2.5, 0, 1e-12,
                "... and latency adds to the slowest hop");
  s_world_free(&v);
  s_world_free(&w);
}

/* The ring step against an independent progressive filling (every rising transfer's rate grows
 * in small steps until its path or a full uplink/downlink stops it) on random rings of random
 * directed worlds with random sites. */
static void test_share_definition(void) {
  wt_rng rng;
  wt_rng_seed(&rng, 91);
  for (int trial = 0; trial < 200; trial++) {
    int k = 2 + trial % 7;
    s_world w;
    s_random_world(&w, 1, k, 1 + trial % 3, &rng);
    int devs[8], order[8];
    for (int i = 0; i < k; i++) devs[i] = i, order[i] = i;
    for (int i = k - 1; i > 1; i--) { /* random ring, member 0 first */
      int j = 1 + (int)wt_rng_below(&rng, (uint64_t)i), t = order[i];
      order[i] = order[j], order[j] = t;
    }
    double rate[8], load_up[16] = {0}, load_down[16] = {0};
    int src[8], dst[8];
    for (int i = 0; i < k; i++) src[i] = order[i], dst[i] = order[(i + 1) % k];
    /* Independent progressive filling in tiny steps of the common level. */
    double level = 0, step = 1e4;
    int frozen[8] = {0}, left = k;
    while (left > 0) {
      level += step;
      memset(load_up, 0, sizeof load_up), memset(load_down, 0, sizeof load_down);
      for (int f = 0; f < k; f++) {
        double r = frozen[f] ? rate[f] : level;
        if (w.link_of[src[f]] != w.link_of[dst[f]])
          load_up[w.link_of[src[f]]] += r, load_down[w.link_of[dst[f]]] += r;
      }
      for (int f = 0; f < k; f++) {
        if (frozen[f]) continue;
        int cross = w.link_of[src[f]] != w.link_of[dst[f]];
        if (level >= w.net.bandwidth_Bps[src[f] * k + dst[f]] ||
            (cross && (load_up[w.link_of[src[f]]] >= w.up[w.link_of[src[f]]] ||
                       load_down[w.link_of[dst[f]]] >= w.down[w.link_of[dst[f]]])))
          frozen[f] = 1, rate[f] = level, left--;
      }
    }
    double want = 0;
    for (int f = 0; f < k; f++)
      want = fmax(want, w.net.latency_s[src[f] * k + dst[f]] + 1e8 / rate[f]);
    double got = assign_ring_time(&w.prob, k, devs, order, 1e8);
    /* The stepped filling overshoots each level by at most one step (1e4 of >= 2e7 B/s). */
    WT_TEST_CLOSE(got, want, 0, 2e-3, "ring step vs independent progressive filling");
    s_world_free(&w);
  }
}

/* ---- rings ------------------------------------------------------------------------------------
 */

static double s_brute_ring(const assign_problem *p, int k, const int *devs, double chunk) {
  int perm[10], c[10] = {0};
  for (int i = 0; i < k; i++) perm[i] = i;
  double best = assign_ring_time(p, k, devs, perm, chunk);
  int *a = perm + 1, m = k - 1;
  for (int i = 1; i < m;) {
    if (c[i] < i) {
      int j = i % 2 ? c[i] : 0, t = a[j];
      a[j] = a[i], a[i] = t;
      best = fmin(best, assign_ring_time(p, k, devs, perm, chunk));
      c[i]++, i = 1;
    } else
      c[i++] = 0;
  }
  return best;
}

/* assign_ring_choose against every ring order on directed links with shared uplinks: equal up
 * to 7 members (every order is tried), never worse than replica order and never better than the
 * optimum at 8 and 9 (a search). The order it writes attains the time it returns. */
static void test_ring_choose_vs_brute(void) {
  wt_rng rng;
  wt_rng_seed(&rng, 17);
  int above = 0;
  for (int trial = 0; trial < 60; trial++) {
    int k = 2 + trial % 8;
    s_world w;
    s_random_world(&w, 1, k, 1 + trial % 4, &rng);
    int devs[9], order[9], ident[9];
    for (int i = 0; i < k; i++) devs[i] = ident[i] = i;
    double chunk = w.prob.c_dp_bytes / k;
    double got = assign_ring_choose(&w.prob, k, devs, order);
    WT_TEST_ASSERT(order[0] == 0, "ring starts at member 0");
    WT_TEST_CLOSE(assign_ring_time(&w.prob, k, devs, order, chunk), got, 0, 0,
                  "the ring written attains the time returned");
    double best = s_brute_ring(&w.prob, k, devs, chunk);
    if (k <= 7)
      WT_TEST_CLOSE(got, best, 0, 1e-12, "vs every ring order");
    else {
      WT_TEST_ASSERT(got >= best * (1 - 1e-12), "not below the optimum");
      WT_TEST_ASSERT(got <= assign_ring_time(&w.prob, k, devs, ident, chunk) * (1 + 1e-12),
                     "not worse than replica order");
      above += got > best * (1 + 1e-9);
    }
    s_world_free(&w);
  }
  fprintf(stderr, "ring choice at 8-9 members: %d of 14 above the optimum\n", above);
}

/* Two sites of four behind one slow uplink each, replicas numbered alternately: replica order
 * crosses each uplink four times per step (each crossing at a quarter of it), the chosen ring
 * once. assign_solve puts that ring in the plan, and plan_cost prices the plan's own ring. */
static void test_ring_beats_replica_order(void) {
  s_world w;
  s_world_alloc(&w, 8, 2);
  w.prob.c_dp_bytes = 8e8;
  w.prob.dp_algo = ASSIGN_DP_RING;
  for (int i = 0; i < 8; i++) {
    w.link_of[i] = i % 2;
    for (int j = 0; j < 8; j++) {
      int same = i % 2 == j % 2;
      w.net.latency_s[i * 8 + j] = i == j ? 0 : same ? 0.001 : 0.03;
      w.net.bandwidth_Bps[i * 8 + j] = same ? 1.25e9 : 1.25e8;
    }
  }
  w.up[0] = w.up[1] = w.down[0] = w.down[1] = 1.25e7; /* 100 Mbit/s each way */
  assign_plan *plan = assign_plan_new(1, 8);
  plan->ring = malloc(8 * sizeof(int));
  for (int i = 0; i < 8; i++) plan->ring[i] = i;
  double replica = assign_plan_cost(&w.prob, plan).dp_s;
  WT_TEST_CLOSE(replica, 14 * (0.03 + 1e8 / (1.25e7 / 4)), 0, 1e-12, "replica order: 4 crossings");
  assign_plan *best = NULL;
  WT_TEST_REQUIRE(assign_solve(&w.prob, ASSIGN_SOLVER_GA, NULL, 1, &best, NULL) == WT_OK, "%s",
                  wt_last_error());
  WT_TEST_REQUIRE(best->ring != NULL, "the plan carries its ring");
  int crossings = 0;
  for (int i = 0; i < 8; i++)
    crossings += best->device[best->ring[i]] % 2 != best->device[best->ring[(i + 1) % 8]] % 2;
  WT_TEST_ASSERT(crossings == 2, "the chosen ring leaves each site once (%d crossings)", crossings);
  double chosen = assign_plan_cost(&w.prob, best).dp_s;
  WT_TEST_CLOSE(chosen, 14 * (0.03 + 1e8 / 1.25e7), 0, 1e-12, "chosen ring: one crossing each");
  fprintf(stderr, "ring over two shared uplinks: replica order %.3f s, chosen %.3f s (%.2fx)\n",
          replica, chosen, replica / chosen);
  assign_plan_destroy(&best);
  assign_plan_destroy(&plan);
  s_world_free(&w);
}

/* ---- plans ---------------------------------------------------------------------------------- */

/* Directed pairs by hand on two devices: the PS pair term is t(a→b) + t(b→a), a 2-ring waits
 * for its slower hop, a pipeline hop costs the mean of its two directions. */
static void test_directed_by_hand(void) {
  s_world w;
  s_world_alloc(&w, 2, 1);
  w.prob.access = NULL;
  w.net.latency_s[1] = 0.01, w.net.latency_s[2] = 0.03;
  w.net.bandwidth_Bps[1] = 1e8, w.net.bandwidth_Bps[2] = 5e7;
  w.prob.c_dp_bytes = 2e8, w.prob.c_pp_bytes = 1e8;
  assign_plan *plan = assign_plan_new(1, 2);
  double ab = 0.01 + 1e8 / 1e8, ba = 0.03 + 1e8 / 5e7;
  WT_TEST_CLOSE(assign_plan_cost(&w.prob, plan).dp_s, ab + ba, 0, 1e-12, "PS: both directions");
  w.prob.dp_algo = ASSIGN_DP_RING;
  WT_TEST_CLOSE(assign_plan_cost(&w.prob, plan).dp_s, 2 * fmax(ab, ba), 0, 1e-12,
                "ring: the slower hop");
  assign_plan_destroy(&plan);
  plan = assign_plan_new(2, 1);
  w.prob.d_pp = 2, w.prob.d_dp = 1;
  double fwd = 0.01 + 1e8 / 1e8, bwd = 0.03 + 1e8 / 5e7;
  WT_TEST_CLOSE(assign_plan_cost(&w.prob, plan).pp_s, fwd + bwd, 0, 1e-12,
                "pipeline: forward plus backward");
  assign_plan_destroy(&plan);
  s_world_free(&w);
}

/* A cut whose two hops leave one site: they share its uplink (and the gradients its
 * downlink). */
static void test_shared_cut_by_hand(void) {
  s_world w;
  s_world_alloc(&w, 4, 3);
  for (int i = 0; i < 16; i++) w.net.bandwidth_Bps[i] = 1e9;
  w.link_of[0] = w.link_of[1] = 0, w.link_of[2] = 1, w.link_of[3] = 2;
  w.up[0] = 1e8, w.down[0] = 5e7;
  w.prob.d_pp = 2, w.prob.d_dp = 2, w.prob.c_pp_bytes = 1e8;
  assign_plan *plan = assign_plan_new(2, 2); /* stage 0 on devices 0, 1; stage 1 on 2, 3 */
  double fwd = 1e8 / 5e7, bwd = 1e8 / 2.5e7; /* half the uplink, half the downlink */
  WT_TEST_CLOSE(assign_plan_cost(&w.prob, plan).pp_s, fwd + bwd, 0, 1e-12,
                "two hops share one uplink and one downlink");
  assign_plan_destroy(&plan);
  s_world_free(&w);
}

/* Minimum of assign_plan_cost over every layout (n <= 8), each with its best rings. */
static double s_brute_plans(const assign_problem *p) {
  int n = p->net->n, c[8] = {0};
  assign_plan *plan = assign_plan_new(p->d_pp, p->d_dp);
  double best = INFINITY;
  for (int i = 0;;) {
    assign_plan_choose_rings(p, plan);
    best = fmin(best, assign_plan_cost(p, plan).comm_s);
    while (i < n && c[i] >= i) c[i++] = 0;
    if (i >= n) break;
    int j = i % 2 ? c[i] : 0, t = plan->device[j];
    plan->device[j] = plan->device[i];
    plan->device[i] = t;
    c[i]++;
    i = 0;
  }
  assign_plan_destroy(&plan);
  return best;
}

/* The exact solver with directed links and shared access links against every layout: equal
 * when the pipeline cannot share (one stage, or a link per device), and never below the optimum
 * otherwise (the searches price the pipeline per pair; its final plan is priced in full). */
static void test_exact_vs_brute(void) {
  static const int shapes[][2] = {{1, 6}, {1, 7}, {2, 3}, {3, 2}, {2, 4}, {4, 2}};
  wt_rng rng;
  wt_rng_seed(&rng, 23);
  for (int trial = 0; trial < 24; trial++) {
    int P = shapes[trial % 6][0], K = shapes[trial % 6][1], per_device = trial % 12 >= 6;
    s_world w;
    s_random_world(&w, P, K, per_device ? P * K : 3, &rng);
    if (per_device)
      for (int d = 0; d < P * K; d++) w.link_of[d] = d;
    w.prob.dp_algo = trial % 2 ? ASSIGN_DP_RING : ASSIGN_DP_SHARDED_PS;
    if (w.prob.dp_algo == ASSIGN_DP_SHARDED_PS && !per_device) w.prob.dp_algo = ASSIGN_DP_RING;
    assign_plan *plan = NULL;
    WT_TEST_REQUIRE(assign_solve(&w.prob, ASSIGN_SOLVER_EXACT, NULL, 0, &plan, NULL) == WT_OK, "%s",
                    wt_last_error());
    double got = assign_plan_cost(&w.prob, plan).comm_s, want = s_brute_plans(&w.prob);
    if (P == 1 || per_device)
      WT_TEST_CLOSE(got, want, 0, 1e-9, "exact vs every layout");
    else
      WT_TEST_ASSERT(got >= want * (1 - 1e-12), "exact %g not below every layout's %g", got, want);
    assign_plan_destroy(&plan);
    s_world_free(&w);
  }
}

/* Two homes of four behind one 100 Mbit/s uplink (500 down) each, 2 stages × 4 replicas: with
 * per-pair costs every pipeline hop across the homes looks like 38 s, but the four of a cut
 * share the uplink (150 s); the searches see that, and put pipelines inside the homes. */
static void test_solver_sees_shared_uplinks(void) {
  s_world w;
  s_world_alloc(&w, 8, 2);
  w.prob.d_pp = 2, w.prob.d_dp = 4;
  w.prob.c_dp_bytes = 650e6, w.prob.c_pp_bytes = 471.247e6;
  w.prob.dp_algo = ASSIGN_DP_RING;
  for (int i = 0; i < 8; i++) {
    w.link_of[i] = i / 4;
    for (int j = 0; j < 8; j++) {
      int same = i / 4 == j / 4;
      w.net.latency_s[i * 8 + j] = i == j ? 0 : same ? 0.0005 : 0.025;
      w.net.bandwidth_Bps[i * 8 + j] = same ? 1.25e9 : 1.25e8;
    }
  }
  w.up[0] = w.up[1] = 1.25e7, w.down[0] = w.down[1] = 6.25e7;
  assign_plan *across = assign_plan_new(2, 4); /* stage 0 in home A, stage 1 in home B */
  double across_s = assign_plan_cost(&w.prob, across).comm_s;
  assign_plan *ga = NULL;
  assign_budget b = {.max_evals = 20000};
  WT_TEST_REQUIRE(assign_solve(&w.prob, ASSIGN_SOLVER_GA, &b, 1, &ga, NULL) == WT_OK, "%s",
                  wt_last_error());
  double ga_s = assign_plan_cost(&w.prob, ga).comm_s;
  for (int r = 0; r < 4; r++)
    WT_TEST_ASSERT(ga->device[r] / 4 == ga->device[4 + r] / 4, "pipeline %d inside one home", r);
  WT_TEST_ASSERT(ga_s < 0.6 * across_s, "ga %.3f s vs pipelines across the homes %.3f s", ga_s,
                 across_s);
  fprintf(stderr, "two homes: ga %.3f s, pipelines across the homes %.3f s\n", ga_s, across_s);
  assign_plan_destroy(&ga);
  assign_plan_destroy(&across);
  s_world_free(&w);
}

/* Four regions of two devices, 2 stages x 4 replicas, the paper's sharded exchange: a sync every
 * iteration makes each stage's group worth keeping to two regions (and so its pipelines cross
 * regions); one every 100 iterations (DiLoCo's H, dp_every) costs 1/100 of DATAP per iteration,
 * and the GA keeps every pipeline inside a region instead. A negative dp_every is refused. */
static void test_dp_every(void) {
  s_world w;
  s_world_alloc(&w, 8, 1);
  w.prob.access = NULL;
  w.prob.d_pp = 2, w.prob.d_dp = 4;
  w.prob.c_dp_bytes = 1e8, w.prob.c_pp_bytes = 1e5;
  w.prob.dp_algo = ASSIGN_DP_SHARDED_PS;
  for (int i = 0; i < 8; i++)
    for (int j = 0; j < 8; j++) {
      int same = i / 2 == j / 2;
      w.net.latency_s[i * 8 + j] = i == j ? 0 : same ? 0.001 : 0.1;
      w.net.bandwidth_Bps[i * 8 + j] = same ? 1.25e9 : 1.25e7;
    }
  assign_plan *plan = assign_plan_new(2, 4);
  for (int w_ = 0; w_ < 8; w_++) plan->device[w_] = w_;
  assign_cost every = assign_plan_cost(&w.prob, plan);
  w.prob.dp_every = 100;
  assign_cost h100 = assign_plan_cost(&w.prob, plan);
  WT_TEST_CLOSE(h100.dp_s, every.dp_s / 100, 0, 1e-12, "DATAP with dp_every 100");
  WT_TEST_ASSERT(h100.pp_s == every.pp_s, "the pipeline term does not change");
  assign_plan *ga = NULL;
  assign_budget b = {.max_evals = 20000};
  WT_TEST_REQUIRE(assign_solve(&w.prob, ASSIGN_SOLVER_GA, &b, 1, &ga, NULL) == WT_OK, "%s",
                  wt_last_error());
  for (int r = 0; r < 4; r++)
    WT_TEST_ASSERT(ga->device[r] / 2 == ga->device[4 + r] / 2, "H=100: pipeline %d in one region",
                   r);
  assign_plan *sync = NULL;
  w.prob.dp_every = 0;
  WT_TEST_REQUIRE(assign_solve(&w.prob, ASSIGN_SOLVER_GA, &b, 1, &sync, NULL) == WT_OK, "%s",
                  wt_last_error());
  int inside = 0;
  for (int r = 0; r < 4; r++) inside += sync->device[r] / 2 == sync->device[4 + r] / 2;
  WT_TEST_ASSERT(inside == 0, "a sync every iteration: %d pipelines in one region, want 0", inside);
  w.prob.dp_every = 100;
  double ga_s = assign_plan_cost(&w.prob, ga).comm_s,
         sync_s = assign_plan_cost(&w.prob, sync).comm_s;
  WT_TEST_ASSERT(ga_s < 0.5 * sync_s, "H=100: ga %.4f s vs the every-step plan's %.4f s", ga_s,
                 sync_s);
  fprintf(stderr, "dp_every 100: ga %.4f s, the every-step plan %.4f s\n", ga_s, sync_s);
  w.prob.dp_every = -1;
  WT_TEST_ASSERT(assign_problem_validate(&w.prob) == WT_EINVAL, "dp_every -1 refused");
  assign_plan_destroy(&ga);
  assign_plan_destroy(&sync);
  assign_plan_destroy(&plan);
  s_world_free(&w);
}

/* ---- the paper as the special case ---------------------------------------------------------- */

/* World-wide: unlimited access links (one per device, or one per region) and the network's own
 * symmetric pairs give exactly the paper's costs, and ga still finds 49.218 s. */
static void test_paper_special_case(void) {
  s_world w;
  s_world_alloc(&w, 64, 8);
  free(w.net.latency_s), free(w.net.bandwidth_Bps);
  w.net.latency_s = calloc(64 * 64, sizeof(double));
  w.net.bandwidth_Bps = calloc(64 * 64, sizeof(double));
  dtfm_ww_fill(w.net.latency_s, w.net.bandwidth_Bps);
  w.prob.d_pp = w.prob.d_dp = 8;
  w.prob.c_dp_bytes = DTFM_WW_C_DP;
  w.prob.c_pp_bytes = DTFM_WW_C_PP;
  int link_of[64]; /* one access link per region, unlimited */
  for (int d = 0; d < 64; d++) link_of[d] = d / 8;
  w.acc.link_of = link_of;
  assign_problem paper = w.prob;
  paper.access = NULL;
  assign_plan *plan = assign_plan_new(8, 8);
  for (int s = 0; s < 8; s++)
    for (int r = 0; r < 8; r++) plan->device[s * 8 + r] = r * 8 + s; /* pipelines in a region */
  for (int algo = 0; algo < 2; algo++) {
    paper.dp_algo = w.prob.dp_algo = (assign_dp_algo)algo;
    assign_cost a = assign_plan_cost(&paper, plan), b = assign_plan_cost(&w.prob, plan);
    WT_TEST_ASSERT(a.comm_s == b.comm_s && a.dp_s == b.dp_s && a.pp_s == b.pp_s,
                   "unlimited access links change nothing (%.17g vs %.17g)", a.comm_s, b.comm_s);
  }
  w.prob.dp_algo = ASSIGN_DP_SHARDED_PS;
  WT_TEST_CLOSE(assign_plan_cost(&w.prob, plan).comm_s, 49.218, 1e-3, 0, "the paper's layout");
  assign_plan *ga = NULL;
  assign_budget b = {.max_evals = 20000};
  WT_TEST_REQUIRE(assign_solve(&w.prob, ASSIGN_SOLVER_GA, &b, 1, &ga, NULL) == WT_OK, "%s",
                  wt_last_error());
  WT_TEST_CLOSE(assign_plan_cost(&w.prob, ga).comm_s, 49.218, 1e-3, 0, "ga with access links");
  assign_plan_destroy(&ga);
  assign_plan_destroy(&plan);
  s_world_free(&w);
}

int main(void) {
  test_share_by_hand();
  test_share_definition();
  test_ring_choose_vs_brute();
  test_ring_beats_replica_order();
  test_directed_by_hand();
  test_shared_cut_by_hand();
  test_exact_vs_brute();
  test_solver_sees_shared_uplinks();
  test_dp_every();
  test_paper_special_case();
  return wt_test_finish("test_assign_network");
}
