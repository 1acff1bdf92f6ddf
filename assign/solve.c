/* solve — the solver entry point: checks the problem, runs one solver on a fresh search state
 * and turns its partition into an ordered, matched plan.
 *
 * The rank-order baselines are not searches: they lay devices out in id order the way the
 * systems map ranks (see docs/assign.md), with the row order and columns fixed.
 *   megatron:  Megatron-LM's initialize_model_parallel (tensor parallel 1) makes data-parallel
 *              groups of consecutive ranks within each pipeline block and pipeline groups of
 *              ranks strided by world/pp: device s·D_DP + r runs stage s of replica r.
 *   deepspeed: the transposed order, each pipeline on consecutive ranks: device r·D_PP + s runs
 *              stage s of replica r.
 */
#include "assign/assign_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void s_rank_order(const assign_problem *p, assign_solver kind, assign_plan *plan) {
  int P = p->d_pp, K = p->d_dp;
  for (int s = 0; s < P; s++)
    for (int r = 0; r < K; r++)
      plan->device[s * K + r] = kind == ASSIGN_SOLVER_MEGATRON ? s * K + r : r * P + s;
}

static int s_run(assign_search *s, assign_solver kind, assign_tracker *t, wt_rng *rng,
                 const assign_budget *b, int *labels) {
  int n = s->n;
  switch (kind) {
  case ASSIGN_SOLVER_RANDOM:
    return assign_solve_random(s, t, rng, labels);
  case ASSIGN_SOLVER_GREEDY:
    return assign_solve_greedy(s, t, rng, labels);
  case ASSIGN_SOLVER_EXACT:
    return assign_solve_exact(s, t, labels);
  case ASSIGN_SOLVER_GA: {
    /* Every partition of a small instance costs less than one genetic generation of a large one:
     * enumerate them and the answer is the optimum, whatever the budget. */
    if (n <= ASSIGN_GA_EXACT_MAX) return assign_solve_exact(s, t, labels);
    /* Large instances (no all-pairs matching chain): the genetic search did not improve on its
     * greedy individual from 256 devices up, even in 10 s; its budget goes to refining the
     * layout (s_refine) instead, from greedy's partition or a clustered random one. */
    if (!s->alike_on) {
      if (b && b->ga_random_only) {
        for (int d = 0; d < n; d++) labels[d] = d / s->K;
        wt_rng_shuffle_int(rng, labels, n);
        assign_cluster_descent(s->m, labels, rng, 32L * n, &s->evals);
        return WT_OK;
      }
      return assign_solve_greedy(s, t, rng, labels);
    }
    /* big instances: a smaller population leaves evaluations for the search itself */
    int q = b && b->population > 0 ? b->population
                                   : WT_MAX(4, WT_MIN(WT_MIN(50, WT_MAX(10, n / 2)), 20000 / n));
    return assign_solve_ga(s, t, rng, q, b && b->ga_random_only, labels);
  }
  default:
    return wt_fail(WT_EINVAL, "assign: solver %d is not a search", (int)kind);
  }
}

static void s_defaults(assign_solver kind, int n, double *sec, long *evals) {
  *sec = 0;
  *evals = 0;
  /* 5000 partitions take ~1 s at 64 devices but minutes at 1024 (each one is fully priced). */
  if (kind == ASSIGN_SOLVER_RANDOM) *evals = 5000, *sec = 1.0;
  /* A time budget: a fixed count of evaluations (the paper's style) is over in milliseconds on
   * small instances and far too short on large ones. */
  if (kind == ASSIGN_SOLVER_GA) *sec = ASSIGN_GA_DEFAULT_S;
  (void)n;
}

static int s_check(const assign_problem *p, assign_solver kind) {
  WT_CHECK(assign_problem_validate(p));
  WT_CHECK(assign_problem_check_feasible(p));
  if ((unsigned)kind >= ASSIGN_SOLVER_COUNT)
    return wt_fail(WT_EINVAL, "assign: unknown solver %d", (int)kind);
  if (kind == ASSIGN_SOLVER_EXACT && p->net->n > 12)
    return wt_fail(WT_EINVAL, "assign: exact search is limited to 12 devices (got %d); use ga",
                   p->net->n);
  return WT_OK;
}

/* Layout refinement after ga (refine.c) for the rest of the budget, but at least this many moves
 * per device, so that a construction which used up the budget still gets refined. */
#define S_REFINE_MIN_EVALS_PER_DEVICE 20

/* Refines the laid-out plan; keeps the result, re-matched along its order (and re-ordered where
 * that is exact), when it is better. */
static void s_refine(assign_model *m, assign_tracker *t, wt_rng *rng, long *evals,
                     assign_plan *plan, assign_cost *c) {
  int n = m->n;
  assign_refine r;
  assign_refine_init(&r, m, evals);
  assign_refine_load(&r, plan->device);
  assign_refine_run(&r, t, rng, (long)S_REFINE_MIN_EVALS_PER_DEVICE * n);
  int *rows = wt_xmalloc((size_t)n * sizeof(int));
  memcpy(rows, r.dev, (size_t)n * sizeof(int));
  assign_cost rc = assign_model_rematch(m, rows);
  if (m->P <= ASSIGN_EXACT_TSP_MAX) {
    int *ord = wt_xmalloc((size_t)n * sizeof(int));
    memcpy(ord, r.dev, (size_t)n * sizeof(int));
    assign_cost oc = assign_model_partition_cost(m, ord, ASSIGN_ORDER_EXACT);
    if (oc.comm_s < rc.comm_s) rc = oc, memcpy(rows, ord, (size_t)n * sizeof(int));
    free(ord);
  }
  if (rc.comm_s < c->comm_s) {
    memcpy(plan->device, rows, (size_t)n * sizeof(int));
    *c = rc;
  }
  free(rows);
  assign_refine_free(&r);
}

/* Runs a search solver and lays its best partition out as `plan`. */
static int s_search_plan(const assign_problem *p, assign_solver kind, const assign_budget *budget,
                         uint64_t seed, assign_plan *plan, assign_stats *st, assign_cost *c) {
  assign_model m;
  assign_search s;
  assign_tracker t;
  wt_rng rng;
  double dsec;
  long devals;
  assign_model_init(&m, p);
  assign_search_init(&s, &m, ASSIGN_ORDER_HEURISTIC);
  s_defaults(kind, p->net->n, &dsec, &devals);
  assign_tracker_init(&t, budget, st, &s.evals, dsec, devals);
  wt_rng_seed(&rng, seed);
  int *labels = wt_xmalloc((size_t)p->net->n * sizeof(int));
  int rc = s_run(&s, kind, &t, &rng, budget, labels);
  if (rc == WT_OK) {
    assign_search_load_labels(&s, labels);
    *c = assign_search_to_plan(&s, plan);
    if (kind == ASSIGN_SOLVER_GA && p->net->n > ASSIGN_GA_EXACT_MAX)
      s_refine(&m, &t, &rng, &s.evals, plan, c);
    assign_tracker_offer(&t, c->comm_s); /* exact re-ordering may lower the search's cost */
    st->evals = s.evals;
  }
  free(labels);
  assign_search_free(&s);
  assign_model_free(&m);
  return rc;
}

int assign_solve(const assign_problem *p, assign_solver kind, const assign_budget *budget,
                 uint64_t seed, assign_plan **out, assign_stats *stats) {
  *out = NULL;
  assign_stats local = {0};
  assign_stats *st = stats ? stats : &local;
  memset(st, 0, sizeof *st);
  WT_CHECK(s_check(p, kind));
  double t0 = wt_now_s();
  assign_plan *plan = assign_plan_new(p->d_pp, p->d_dp);
  assign_cost c;
  int rank_order = kind == ASSIGN_SOLVER_MEGATRON || kind == ASSIGN_SOLVER_DEEPSPEED;
  if (rank_order) {
    s_rank_order(p, kind, plan);
    c = assign_plan_cost(p, plan);
    st->evals = st->evals_to_best = 1;
  } else {
    int rc = s_search_plan(p, kind, budget, seed, plan, st, &c);
    if (rc != WT_OK) {
      assign_plan_destroy(&plan);
      return rc;
    }
  }
  /* The rings the runtime will run; with shared access links the search priced the pipeline
   * per pair, so the plan is priced again as it will run. */
  assign_plan_choose_rings(p, plan);
  if (p->access) c = assign_plan_cost(p, plan);
  st->seconds = wt_now_s() - t0;
  st->best_cost_s = c.comm_s;
  st->exact_order = !rank_order && p->d_pp <= ASSIGN_EXACT_TSP_MAX;
  if (st->n_curve == 0) {
    st->seconds_to_best = st->seconds;
    st->curve[st->n_curve++] = (assign_curve_point){st->seconds, st->evals, c.comm_s};
  }
  *out = plan;
  return WT_OK;
}
