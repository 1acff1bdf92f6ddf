/* bench_assign — how good and how fast the assign solvers are.
 *
 * 1. The world-wide scenario of Yuan et al. 2022 (8 regions × 8 GPUs): every solver's cost, and
 *    for ga the time and evaluations to its best (the paper's GA: 49.218 s after ~525 s of
 *    Python).
 *    "ga-rand" is ga started from random partitions only (no greedy individual): the search
 *    itself, without the constructive head start.
 * 2. 1024 devices (D_PP=16, D_DP=64): the same 8 regions, 128 devices each, with seeded
 *    per-pair jitter (±10% bandwidth, up to +1 ms latency) so no two devices are alike; the
 *    best-cost curves of ga and ga-rand over time.
 * 3. Scale: `netsim generate`-style worlds of g regions × g devices (n = g², d_pp = d_dp = g),
 *    every pair jittered ±10% and the ids shuffled (netsim_scenario_jitter), several seeds per
 *    size: greedy, ga and random at their default budgets (ga: 1 s, plus its refinement's floor
 *    of 20·n moves; random: 5000 partitions or 1 s), cost and time to solution, and ga's margin
 *    over greedy.
 * 1b. The same scenario priced with the ring reduce the runtime runs, without and with shared
 *    access links (each region behind one 1 Gbit/s gateway): table rows only.
 * Prints a table, then one JSON line.
 */
#include "assign/assign.h"
#include "common/common.h"
#include "common/config.h"
#include "common/rng.h"
#include "netsim/netsim.h"
#include "tests/assign/dtfm_worldwide.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  double ga_seconds, big_seconds;
  long long random_evals, seed, ga_evals;
  int big_dpp, big_ddp, skip_big;
  char scale[WT_CONFIG_STR_MAX];
  int scale_seeds;
} bench_cfg;

static const wt_option s_options[] = {
    {"ga-seconds", WT_OPT_FLOAT, offsetof(bench_cfg, ga_seconds), 0.01, 3600, "1",
     "ga budget on the world-wide scenario (seconds)", NULL},
    /* 58 s of search + the final Held–Karp ordering and layout: a plan within 60 s */
    {"big-seconds", WT_OPT_FLOAT, offsetof(bench_cfg, big_seconds), 0.01, 3600, "58",
     "ga budget on the large instance (seconds)", NULL},
    {"ga-evals", WT_OPT_INT64, offsetof(bench_cfg, ga_evals), 0, 1e12, "0",
     "world-wide ga budget in evaluations instead of seconds (reproducible); 0 = use seconds",
     NULL},
    {"random-evals", WT_OPT_INT64, offsetof(bench_cfg, random_evals), 1, 1e9, "5000",
     "random partitions to try", NULL},
    {"seed", WT_OPT_INT64, offsetof(bench_cfg, seed), 0, 1e18, "1", "solver seed", NULL},
    {"big-dpp", WT_OPT_INT, offsetof(bench_cfg, big_dpp), 1, 64, "16", "large instance D_PP", NULL},
    {"big-ddp", WT_OPT_INT, offsetof(bench_cfg, big_ddp), 1, 256, "64", "large instance D_DP",
     NULL},
    {"skip-big", WT_OPT_FLAG, offsetof(bench_cfg, skip_big), 0, 1, "0", "only the world-wide part",
     NULL},
    {"scale", WT_OPT_STRING, offsetof(bench_cfg, scale), 0, 0, "64,256,1024",
     "device counts of the scale part, each a square g*g up to 10000 (~5 GB of matrices at 10000; "
     "\"\" "
     "skips the part)",
     NULL},
    {"scale-seeds", WT_OPT_INT, offsetof(bench_cfg, scale_seeds), 1, 100, "3",
     "jittered worlds per size", NULL},
    {0}};

typedef struct {
  assign_network net;
  assign_problem prob;
} s_instance;

static void s_alloc(s_instance *in, int n, int d_pp, int d_dp) {
  memset(in, 0, sizeof *in);
  in->net.n = n;
  in->net.latency_s = wt_xcalloc((size_t)n * n, sizeof(double));
  in->net.bandwidth_Bps = wt_xcalloc((size_t)n * n, sizeof(double));
  in->prob = (assign_problem){.net = &in->net,
                              .d_pp = d_pp,
                              .d_dp = d_dp,
                              .c_dp_bytes = DTFM_WW_C_DP,
                              .c_pp_bytes = DTFM_WW_C_PP};
}

static void s_free(s_instance *in) {
  free(in->net.latency_s);
  free(in->net.bandwidth_Bps);
}

/* 8 world-wide regions of n/8 devices, with per-pair jitter. */
static void s_big(s_instance *in, int d_pp, int d_dp, uint64_t seed) {
  int n = d_pp * d_dp, per = (n + 7) / 8;
  wt_rng rng;
  wt_rng_seed(&rng, seed);
  s_alloc(in, n, d_pp, d_dp);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      int ri = i / per, rj = j / per;
      in->net.latency_s[i * n + j] =
          dtfm_ww_latency_ms[ri][rj] / 1000.0 + 0.001 * wt_rng_double(&rng);
      in->net.bandwidth_Bps[i * n + j] =
          dtfm_ww_bandwidth_gbps[ri][rj] * 1e9 / 8 * (0.9 + 0.2 * wt_rng_double(&rng));
    }
  assign_network_symmetrize(&in->net);
}

#define WW_RUNS 6  /* random, megatron, deepspeed, greedy, ga, ga-rand */
#define BIG_RUNS 4 /* megatron, greedy, ga, ga-rand */

typedef struct {
  const char *name;
  assign_cost cost;
  assign_stats st;
} s_result;

static int s_run(const s_instance *in, assign_solver kind, const assign_budget *b, uint64_t seed,
                 s_result *r) {
  assign_plan *plan = NULL;
  r->name = b && b->ga_random_only ? "ga-rand" : assign_solver_name(kind);
  int rc = assign_solve(&in->prob, kind, b, seed, &plan, &r->st);
  if (rc != WT_OK) {
    fprintf(stderr, "bench-assign: %s failed: %s\n", r->name, wt_last_error());
    return rc;
  }
  r->cost = assign_plan_cost(&in->prob, plan);
  assign_plan_destroy(&plan);
  printf("%-10s %-9s %10.3f %9.3f %9.3f %9.3f %9ld %9ld %9.3f\n",
         in->net.n == 64 ? "worldwide" : "big", r->name, r->cost.comm_s, r->cost.dp_s, r->cost.pp_s,
         r->st.seconds, r->st.evals, r->st.evals_to_best, r->st.seconds_to_best);
  return WT_OK;
}

static void s_json_result(const s_result *r, int last) {
  printf("\"%s\":{\"cost_s\":%.4f,\"dp_s\":%.4f,\"pp2_s\":%.4f,\"seconds\":%.4f,\"evals\":%ld,"
         "\"evals_to_best\":%ld,\"seconds_to_best\":%.4f}%s",
         r->name, r->cost.comm_s, r->cost.dp_s, r->cost.pp_s, r->st.seconds, r->st.evals,
         r->st.evals_to_best, r->st.seconds_to_best, last ? "" : ",");
}

static int s_worldwide(const bench_cfg *cfg, s_result *res) {
  s_instance in;
  s_alloc(&in, 64, 8, 8);
  dtfm_ww_fill(in.net.latency_s, in.net.bandwidth_Bps);
  assign_budget rnd = {.max_evals = cfg->random_evals}, ga = {.max_seconds = cfg->ga_seconds};
  if (cfg->ga_evals > 0) ga = (assign_budget){.max_evals = cfg->ga_evals};
  assign_budget ga_rand = ga;
  ga_rand.ga_random_only = 1;
  const assign_solver kinds[WW_RUNS] = {ASSIGN_SOLVER_RANDOM,    ASSIGN_SOLVER_MEGATRON,
                                        ASSIGN_SOLVER_DEEPSPEED, ASSIGN_SOLVER_GREEDY,
                                        ASSIGN_SOLVER_GA,        ASSIGN_SOLVER_GA};
  const assign_budget *budgets[WW_RUNS] = {&rnd, NULL, NULL, NULL, &ga, &ga_rand};
  int rc = WT_OK;
  for (int i = 0; i < WW_RUNS && rc == WT_OK; i++)
    rc = s_run(&in, kinds[i], budgets[i], (uint64_t)cfg->seed, &res[i]);
  s_free(&in);
  return rc;
}

/* The ring model on the world-wide scenario: the runtime's ring reduce, each region's eight
 * GPUs behind one shared access link of 1 Gbit/s up and down (a region's gateway). Rows "ring"
 * (no access links) and "ring-acc" (shared links): megatron, deepspeed and ga at its budget. */
static int s_worldwide_ring(const bench_cfg *cfg) {
  s_instance in;
  s_alloc(&in, 64, 8, 8);
  dtfm_ww_fill(in.net.latency_s, in.net.bandwidth_Bps);
  in.prob.dp_algo = ASSIGN_DP_RING;
  int link_of[64];
  double cap[8];
  for (int d = 0; d < 64; d++) link_of[d] = d / 8;
  for (int l = 0; l < 8; l++) cap[l] = 1e9 / 8;
  assign_access acc = {8, link_of, cap, cap};
  assign_budget ga = {.max_seconds = cfg->ga_seconds};
  if (cfg->ga_evals > 0) ga = (assign_budget){.max_evals = cfg->ga_evals};
  const assign_solver kinds[3] = {ASSIGN_SOLVER_MEGATRON, ASSIGN_SOLVER_DEEPSPEED,
                                  ASSIGN_SOLVER_GA};
  for (int shared = 0; shared < 2; shared++) {
    in.prob.access = shared ? &acc : NULL;
    for (int k = 0; k < 3; k++) {
      assign_plan *plan = NULL;
      assign_stats st;
      if (assign_solve(&in.prob, kinds[k], kinds[k] == ASSIGN_SOLVER_GA ? &ga : NULL,
                       (uint64_t)cfg->seed, &plan, &st) != WT_OK) {
        fprintf(stderr, "bench-assign: ring %s failed: %s\n", assign_solver_name(kinds[k]),
                wt_last_error());
        s_free(&in);
        return WT_EINVAL;
      }
      assign_cost c = assign_plan_cost(&in.prob, plan);
      printf("%-10s %-9s %10.3f %9.3f %9.3f %9.3f %9ld %9ld %9.3f\n", shared ? "ring-acc" : "ring",
             assign_solver_name(kinds[k]), c.comm_s, c.dp_s, c.pp_s, st.seconds, st.evals,
             st.evals_to_best, st.seconds_to_best);
      assign_plan_destroy(&plan);
    }
  }
  s_free(&in);
  return WT_OK;
}

static void s_print_curve(const s_result *r, int n) {
  printf("\n%s cost curve on %d devices (t_s, evals, best cost s):\n", r->name, n);
  for (int i = 0; i < r->st.n_curve; i++)
    printf("  %8.3f %9ld %10.3f\n", r->st.curve[i].t_s, r->st.curve[i].evals,
           r->st.curve[i].cost_s);
}

static int s_large(const bench_cfg *cfg, s_result *res) {
  s_instance in;
  s_big(&in, cfg->big_dpp, cfg->big_ddp, 7);
  assign_budget ga = {.max_seconds = cfg->big_seconds};
  assign_budget ga_rand = {.max_seconds = cfg->big_seconds, .ga_random_only = 1};
  int rc = s_run(&in, ASSIGN_SOLVER_MEGATRON, NULL, 0, &res[0]);
  if (rc == WT_OK) rc = s_run(&in, ASSIGN_SOLVER_GREEDY, NULL, 0, &res[1]);
  if (rc == WT_OK) rc = s_run(&in, ASSIGN_SOLVER_GA, &ga, (uint64_t)cfg->seed, &res[2]);
  if (rc == WT_OK) rc = s_run(&in, ASSIGN_SOLVER_GA, &ga_rand, (uint64_t)cfg->seed, &res[3]);
  s_free(&in);
  if (rc != WT_OK) return rc;
  s_print_curve(&res[2], in.net.n);
  s_print_curve(&res[3], in.net.n);
  return WT_OK;
}

static void s_json_curve(const char *key, const s_result *r) {
  printf("\"%s\":[", key);
  for (int i = 0; i < r->st.n_curve; i++)
    printf("%s[%.4f,%ld,%.4f]", i ? "," : "", r->st.curve[i].t_s, r->st.curve[i].evals,
           r->st.curve[i].cost_s);
  printf("]");
}

/* ---- scale: jittered, shuffled worlds ------------------------------------------------------- */

#define SCALE_MAX 64 /* (size, seed) runs */
#define SCALE_SOLVERS 3

typedef struct {
  int n, seed;
  double cost[SCALE_SOLVERS], secs[SCALE_SOLVERS]; /* greedy, ga, random */
} s_scale_row;

static const assign_solver s_scale_kinds[SCALE_SOLVERS] = {ASSIGN_SOLVER_GREEDY, ASSIGN_SOLVER_GA,
                                                           ASSIGN_SOLVER_RANDOM};

static int s_scale_one(int g, int seed, s_scale_row *row) {
  netsim_scenario *base = netsim_scenario_random(g, g, (uint64_t)seed);
  netsim_scenario *s = netsim_scenario_jitter(base, 0.1, 1, (uint64_t)seed + 1000);
  netsim_scenario_destroy(&base);
  assign_problem p;
  netsim_scenario_problem(s, &p);
  *row = (s_scale_row){.n = g * g, .seed = seed};
  int rc = WT_OK;
  for (int k = 0; k < SCALE_SOLVERS && rc == WT_OK; k++) {
    assign_plan *plan = NULL;
    assign_stats st;
    rc = assign_solve(&p, s_scale_kinds[k], NULL, (uint64_t)seed, &plan, &st);
    if (rc != WT_OK) {
      fprintf(stderr, "bench-assign: %s on %d devices: %s\n", assign_solver_name(s_scale_kinds[k]),
              g * g, wt_last_error());
      break;
    }
    row->cost[k] = assign_plan_cost(&p, plan).comm_s;
    row->secs[k] = st.seconds;
    assign_plan_destroy(&plan);
  }
  netsim_scenario_destroy(&s);
  if (rc == WT_OK)
    printf("%6d %4d %10.3f %10.3f %10.3f %8.2f %8.2f %8.2f %+9.3f%%\n", row->n, seed, row->cost[0],
           row->cost[1], row->cost[2], row->secs[0], row->secs[1], row->secs[2],
           100 * (row->cost[1] / row->cost[0] - 1));
  return rc;
}

/* Parses --scale into side lengths g (n = g²); WT_EINVAL naming a bad entry. */
static int s_scale_sizes(const bench_cfg *cfg, int *g, int *count) {
  char buf[WT_CONFIG_STR_MAX];
  snprintf(buf, sizeof buf, "%s", cfg->scale);
  *count = 0;
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    int n = atoi(tok), side = (int)lround(sqrt(n));
    if (side < 2 || side * side != n || n > 10000)
      return wt_fail(WT_EINVAL, "--scale: %s is not a square g*g of 4 to 10000 devices", tok);
    if ((*count + 1) * cfg->scale_seeds > SCALE_MAX)
      return wt_fail(WT_EINVAL, "--scale: more than %d runs with --scale-seeds", SCALE_MAX);
    g[(*count)++] = side;
  }
  return WT_OK;
}

static int s_scale(const bench_cfg *cfg, const int *g, int n_sizes, s_scale_row *rows, int *count) {
  *count = 0;
  if (n_sizes == 0) return WT_OK;
  printf("\nscale: jittered (±10%%), shuffled g×g worlds, default budgets\n");
  printf("%6s %4s %10s %10s %10s %8s %8s %8s %10s\n", "n", "seed", "greedy_s", "ga_s", "random_s",
         "t_grdy", "t_ga", "t_rand", "ga/greedy");
  for (int i = 0; i < n_sizes; i++)
    for (int seed = 1; seed <= cfg->scale_seeds; seed++)
      WT_CHECK(s_scale_one(g[i], seed, &rows[(*count)++]));
  return WT_OK;
}

static void s_json_scale(const s_scale_row *rows, int count) {
  printf(",\"scale\":[");
  for (int i = 0; i < count; i++)
    printf("%s{\"n\":%d,\"seed\":%d,\"greedy_s\":%.4f,\"ga_s\":%.4f,\"random_s\":%.4f,"
           "\"greedy_time_s\":%.3f,\"ga_time_s\":%.3f,\"random_time_s\":%.3f,"
           "\"ga_vs_greedy_pct\":%.3f}",
           i ? "," : "", rows[i].n, rows[i].seed, rows[i].cost[0], rows[i].cost[1], rows[i].cost[2],
           rows[i].secs[0], rows[i].secs[1], rows[i].secs[2],
           100 * (rows[i].cost[1] / rows[i].cost[0] - 1));
  printf("]");
}

static void s_json(const bench_cfg *cfg, const s_result *ww, const s_result *big,
                   const s_scale_row *scale, int n_scale) {
  printf("{\"bench\":\"assign\",\"worldwide\":{\"paper_ga_cost_s\":49.218,");
  for (int i = 0; i < WW_RUNS; i++) s_json_result(&ww[i], 0);
  s_json_curve("ga_rand_curve", &ww[WW_RUNS - 1]);
  printf("}");
  if (!cfg->skip_big) {
    printf(",\"big\":{\"n\":%d,\"d_pp\":%d,\"d_dp\":%d,", cfg->big_dpp * cfg->big_ddp, cfg->big_dpp,
           cfg->big_ddp);
    for (int i = 0; i < BIG_RUNS; i++) s_json_result(&big[i], 0);
    s_json_curve("ga_curve", &big[2]);
    printf(",");
    s_json_curve("ga_rand_curve", &big[3]);
    printf("}");
  }
  s_json_scale(scale, n_scale);
  printf("}\n");
}

int main(int argc, char **argv) {
  bench_cfg cfg;
  int help = 0;
  wt_config_defaults(s_options, &cfg);
  if (wt_config_parse_args(s_options, &cfg, argc, argv, 1, NULL, 0, NULL, &help) != WT_OK) {
    fprintf(stderr, "bench-assign: %s\n", wt_last_error());
    return 2;
  }
  if (help) {
    wt_config_print_help(stdout, "usage: bench-assign [options]", s_options);
    return 0;
  }
  if (!cfg.skip_big && cfg.big_dpp * cfg.big_ddp > 4096) {
    fprintf(stderr,
            "bench-assign: --big-dpp x --big-ddp = %d devices; at most 4096 (two n x n "
            "matrices of doubles must fit in memory)\n",
            cfg.big_dpp * cfg.big_ddp);
    return 2;
  }
  s_scale_row scale[SCALE_MAX];
  int sides[SCALE_MAX], n_sides = 0, n_scale = 0;
  if (s_scale_sizes(&cfg, sides, &n_sides) != WT_OK) {
    fprintf(stderr, "bench-assign: %s\n", wt_last_error());
    return 2;
  }
  printf("%-10s %-9s %10s %9s %9s %9s %9s %9s %9s\n", "scenario", "solver", "cost_s", "dp_s",
         "2pp_s", "time_s", "evals", "ev_best", "t_best");
  s_result ww[WW_RUNS], big[BIG_RUNS];
  if (s_worldwide(&cfg, ww) != WT_OK) return 1;
  if (s_worldwide_ring(&cfg) != WT_OK) return 1;
  if (!cfg.skip_big && s_large(&cfg, big) != WT_OK) return 1;
  if (s_scale(&cfg, sides, n_sides, scale, &n_scale) != WT_OK) return 1;
  printf("\n");
  s_json(&cfg, ww, big, scale, n_scale);
  return 0;
}
