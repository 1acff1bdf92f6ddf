/* tracker — a solver's budget (time and evaluations) and its best-cost curve. */
#include "assign/assign_internal.h"

#include <math.h>
#include <string.h>

void assign_tracker_init(assign_tracker *t, const assign_budget *b, assign_stats *st, long *evals,
                         double default_s, long default_evals) {
  memset(t, 0, sizeof *t);
  t->t0 = wt_now_s();
  t->max_s = b ? b->max_seconds : 0;
  t->max_evals = b ? b->max_evals : 0;
  if (t->max_s <= 0 && t->max_evals <= 0) {
    t->max_s = default_s;
    t->max_evals = default_evals;
  }
  t->evals = evals;
  t->st = st;
  t->best = INFINITY;
}

int assign_tracker_done(const assign_tracker *t) {
  if (t->max_evals > 0 && *t->evals >= t->max_evals) return 1;
  return t->max_s > 0 && wt_now_s() - t->t0 >= t->max_s;
}

int assign_tracker_done_before(const assign_tracker *t, double next_s) {
  if (assign_tracker_done(t)) return 1;
  return t->max_s > 0 && wt_now_s() - t->t0 + next_s > t->max_s;
}

/* Keeps the curve within ASSIGN_CURVE_MAX points by dropping every other one (the first and the
 * latest stay), so a long run still shows its whole shape. */
static void s_thin(assign_stats *st) {
  int w = 1;
  for (int r = 2; r < st->n_curve; r += 2) st->curve[w++] = st->curve[r];
  st->n_curve = w;
}

void assign_tracker_offer(assign_tracker *t, double cost) {
  if (!(cost < t->best)) return;
  if (isfinite(t->best) && cost > t->best - 1e-12 * fabs(t->best)) return; /* rounding noise */
  t->best = cost;
  assign_stats *st = t->st;
  st->best_cost_s = cost;
  st->evals_to_best = *t->evals;
  st->seconds_to_best = wt_now_s() - t->t0;
  if (st->n_curve == ASSIGN_CURVE_MAX) s_thin(st);
  st->curve[st->n_curve++] = (assign_curve_point){st->seconds_to_best, *t->evals, cost};
}
