/* exact — every partition of n <= 12 devices into P unordered groups of K, each evaluated with
 * its Held–Karp order and bottleneck matchings, so the minimum is the model's optimum.
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
} s_exact;

/* Places device-slot `pos` (group pos / K, member pos % K); `min_dev` is the smallest device
 * allowed for this member (members rise within a group). */
static void s_place(s_exact *e, int pos, int min_dev) {
  int n = e->s->n, K = e->s->K;
  if (pos == n) {
    assign_search_load_labels(e->s, e->label);
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
  s_exact e = {s, t, label, labels, INFINITY, INFINITY};
  /* The all-pairs matching surrogate only steers local search; enumeration never reads it. */
  s->alike_on = 0;
  s_place(&e, 0, 0);
  return WT_OK;
}
