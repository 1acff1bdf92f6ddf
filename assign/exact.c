/* exact — every partition of n <= 12 devices into P unordered groups of K, each evaluated with
 * its Held–Karp order and bottleneck matchings, so the minimum is the model's optimum. With
 * access links that several devices share, each partition is laid out and priced as a plan
 * (assign_plan_cost), so the optimum is the shared-link model's too.
 *
 * Symmetry breaking: groups are unordered and members within a group are unordered, so each
 * group is filled in increasing device order and a new group always starts with the smallest
 * unplaced device. That enumerates each partition once: n! / (K!^P · P!) of them (15400 at
 * most for n = 12).
 */
#include "assign/assign_internal.h"

#include <math.h>
#include <string.h>

typedef struct {
  assign_search *s;
  assign_tracker *t;
  int *label, *best;
  double best_cost, best_tie;
  assign_plan *layout; /* with shared access links: the partition laid out, priced exactly */
} s_exact;

/* The partition's cost as it would run: laid out (best order, matched columns) and priced by
 * assign_plan_cost, which shares access links among a reduce's and a cut's concurrent hops.
 * The per-pair search costs cannot tell two devices of one site in one stage (one hop leaves
 * the site) from the same two in different stages (two hops at once); the plan cost can. */
static void s_price_laid_out(s_exact *e) {
  memcpy(e->layout->device, e->s->rows, (size_t)e->s->n * sizeof(int));
  assign_model_partition_cost(e->s->m, e->layout->device, ASSIGN_ORDER_EXACT);
  assign_cost c = assign_plan_cost(e->s->m->p, e->layout);
  e->s->cost = c.comm_s, e->s->tie = c.dp_s;
}

/* Places device-slot `pos` (group pos / K, member pos % K); `min_dev` is the smallest device
 * allowed for this member (members rise within a group). */
static void s_place(s_exact *e, int pos, int min_dev) {
  int n = e->s->n, K = e->s->K;
  if (pos == n) {
    assign_search_load_labels(e->s, e->label);
    if (e->layout) s_price_laid_out(e);
    assign_tracker_offer(e->t, e->s->cost);
    if (assign_search_cmp(e->s->cost, e->s->tie, e->best_cost, e->best_tie) < 0) {
      e->best_cost = e->s->cost;
      e->best_tie = e->s->tie;
      memcpy(e->best, e->label, (size_t)n * sizeof(int));
    }
    return;
  }
  int group = pos / K;
  if (pos % K == 0) { /* a new group starts with the smallest unplaced device */
    int d = 0;
    while (e->label[d] >= 0) d++;
    e->label[d] = group;
    s_place(e, pos + 1, d + 1);
    e->label[d] = -1;
    return;
  }
  for (int d = min_dev; d < n; d++) {
    if (e->label[d] >= 0) continue;
    e->label[d] = group;
    s_place(e, pos + 1, d + 1);
    e->label[d] = -1;
  }
}

int assign_solve_exact(assign_search *s, assign_tracker *t, int *labels) {
  int label[12];
  for (int d = 0; d < 12; d++) label[d] = -1;
  s_exact e = {s, t, label, labels, INFINITY, INFINITY, NULL};
  if (s->m->shared) e.layout = assign_plan_new(s->P, s->K);
  /* The all-pairs matching surrogate only steers local search; enumeration never reads it. */
  s->alike_on = 0;
  s_place(&e, 0, 0);
  assign_plan_destroy(&e.layout);
  return WT_OK;
}
