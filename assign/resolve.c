/* resolve — incremental re-assignment after devices left or joined, keeping the running plan.
 *
 * Moving a device to another stage costs a transfer of that stage's weights, so the plan's
 * stages stay where they are (no re-ordering) and a device keeps its stage unless a move pays:
 *  1. vacate: tasklets of devices listed as changed, or marked -1, become vacancies;
 *  2. fill: each joined device (in id order) takes the vacancy whose group it raises least
 *     (the group's DATAP over its members so far);
 *  3. improve: hill-climb over swaps, taking the best sampled swap only when it lowers the cost
 *     by at least 1%, so each accepted swap buys a real gain for its two moves.
 * Columns are re-matched freely: replicas of one stage hold the same weights.
 */
#include "assign/assign_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int s_check_prev(const assign_problem *p, const assign_plan *prev, const int *changed,
                        int n_changed) {
  int n = p->net->n;
  if (!prev || prev->d_pp != p->d_pp || prev->d_dp != p->d_dp)
    return wt_fail(WT_EINVAL,
                   "assign: previous plan's shape %dx%d does not match the problem's %dx%d",
                   prev ? prev->d_pp : 0, prev ? prev->d_dp : 0, p->d_pp, p->d_dp);
  char *seen = wt_xcalloc((size_t)n, 1);
  int rc = WT_OK;
  for (int i = 0; i < n && rc == WT_OK; i++) {
    int d = prev->device[i];
    if (d < -1 || d >= n)
      rc = wt_fail(WT_EINVAL, "assign: previous plan has device %d at tasklet %d, outside -1..%d",
                   d, i, n - 1);
    else if (d >= 0 && seen[d]++)
      rc = wt_fail(WT_EINVAL, "assign: previous plan places device %d twice", d);
  }
  for (int i = 0; i < n_changed && rc == WT_OK; i++)
    if (changed[i] < 0 || changed[i] >= n)
      rc = wt_fail(WT_EINVAL, "assign: changed device %d is outside 0..%d", changed[i], n - 1);
  free(seen);
  return rc;
}

/* DATAP of the members of row r placed so far, with device d added. */
static double s_partial_dp(const assign_model *m, const int *row, int d) {
  int n = m->n, K = m->K;
  double own = 0, worst = 0;
  for (int i = 0; i < K; i++) {
    if (row[i] < 0) continue;
    double sum = m->dpc[row[i] * n + d];
    for (int j = 0; j < K; j++)
      if (row[j] >= 0) sum += m->dpc[row[i] * n + row[j]];
    own += m->dpc[d * n + row[i]];
    worst = assign_dmax(worst, sum);
  }
  return assign_dmax(worst, own);
}

static void s_fill(const assign_model *m, int *rows, const char *placed) {
  int n = m->n, P = m->P, K = m->K;
  for (int d = 0; d < n; d++) {
    if (placed[d]) continue;
    int best_r = -1;
    double best = INFINITY;
    for (int r = 0; r < P; r++) {
      int has_vacancy = 0;
      for (int i = 0; i < K; i++) has_vacancy |= rows[r * K + i] < 0;
      double c = has_vacancy ? s_partial_dp(m, rows + r * K, d) : INFINITY;
      if (has_vacancy && (best_r < 0 || c < best)) best = c, best_r = r;
    }
    int i = 0;
    while (rows[best_r * K + i] >= 0) i++;
    rows[best_r * K + i] = d;
  }
}

/* Each accepted swap moves two devices' weights across the network, so it must buy at least
 * this relative drop in the cost. */
#define ASSIGN_RESOLVE_MIN_GAIN 0.01

/* Hill climbing: best of a sample of swaps, taken only for a real gain. */
static void s_improve(assign_search *s, assign_tracker *t, wt_rng *rng) {
  int samples = WT_MIN(64, s->n * (s->n - s->K) / 2);
  while (s->P > 1 && !assign_tracker_done(t)) {
    int bx = -1, by = -1;
    double best = s->cost * (1 - ASSIGN_RESOLVE_MIN_GAIN);
    for (int i = 0; i < samples && !assign_tracker_done(t); i++) {
      int x = (int)wt_rng_below(rng, (uint64_t)s->n), y = (int)wt_rng_below(rng, (uint64_t)s->n);
      if (s->label[x] == s->label[y]) continue;
      double c = assign_search_try_swap(s, x, y, best);
      if (s->t_complete && c < best) best = c, bx = x, by = y;
    }
    if (bx < 0) break;
    assign_search_commit_swap(s, bx, by);
    assign_tracker_offer(t, s->cost);
  }
}

int assign_resolve(const assign_problem *p, const assign_plan *prev, const int *changed,
                   int n_changed, const assign_budget *budget, uint64_t seed, assign_plan **out,
                   assign_stats *stats) {
  *out = NULL;
  assign_stats local = {0};
  assign_stats *st = stats ? stats : &local;
  memset(st, 0, sizeof *st);
  WT_CHECK(assign_problem_validate(p));
  WT_CHECK(assign_problem_check_feasible(p));
  WT_CHECK(s_check_prev(p, prev, changed, n_changed));
  double t0 = wt_now_s();
  int n = p->net->n;
  int *rows = wt_xmalloc((size_t)n * sizeof(int));
  char *fresh = wt_xcalloc((size_t)n, 1), *placed = wt_xcalloc((size_t)n, 1);
  for (int i = 0; i < n_changed; i++) fresh[changed[i]] = 1;
  for (int i = 0; i < n; i++) {
    int d = prev->device[i];
    rows[i] = d >= 0 && !fresh[d] ? d : -1;
    if (rows[i] >= 0) placed[d] = 1;
  }
  assign_model m;
  assign_search s;
  assign_tracker t;
  wt_rng rng;
  assign_model_init(&m, p);
  s_fill(&m, rows, placed);
  assign_search_init(&s, &m, ASSIGN_ORDER_KEEP);
  assign_search_load_rows(&s, rows);
  assign_tracker_init(&t, budget, st, &s.evals, 1.0, 20L * n);
  assign_tracker_offer(&t, s.cost);
  wt_rng_seed(&rng, seed);
  s_improve(&s, &t, &rng);
  assign_plan *plan = assign_plan_new(p->d_pp, p->d_dp);
  assign_cost c = assign_search_to_plan(&s, plan);
  assign_plan_choose_rings(p, plan); /* the new plan's rings, as assign_solve's */
  if (p->access) c = assign_plan_cost(p, plan);
  st->evals = s.evals;
  st->seconds = wt_now_s() - t0;
  st->best_cost_s = c.comm_s;
  assign_search_free(&s);
  assign_model_free(&m);
  free(rows);
  free(fresh);
  free(placed);
  *out = plan;
  return WT_OK;
}
