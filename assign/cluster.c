/* cluster — a cheap first descent for large instances: random partitions are first pulled
 * towards groups of close devices by swaps that lower the sum of data-parallel pair costs inside
 * the groups (a k-way min-sum partition). Each try is O(K) on the label array alone, with no
 * bottleneck matching and no pipeline order, so it sorts 1024 scattered devices into
 * region-like groups in a fraction of a second where the full local search, at about 1.6k
 * evaluations per second there, cannot.
 */
#include "assign/assign_internal.h"

#include <stdlib.h>
#include <string.h>

/* Σ over the other members of row r of dpc[d][·], leaving out `skip`. */
static double s_row_affinity(const assign_model *m, const int *rows, int r, int d, int skip) {
  double acc = 0;
  for (int i = 0; i < m->K; i++) {
    int e = rows[r * m->K + i];
    if (e != d && e != skip) acc += m->dpc[d * m->n + e];
  }
  return acc;
}

void assign_cluster_descent(const assign_model *m, int *label, wt_rng *rng, long patience,
                            long *evals) {
  int n = m->n, K = m->K, P = m->P;
  if (P < 2) return;
  int *rows = wt_xmalloc((size_t)n * sizeof(int)), *slot = wt_xmalloc((size_t)n * sizeof(int));
  int *fill = wt_xcalloc((size_t)P, sizeof(int));
  for (int d = 0; d < n; d++) {
    slot[d] = fill[label[d]]++;
    rows[label[d] * K + slot[d]] = d;
  }
  for (long fails = 0; fails < patience;) {
    int x = (int)wt_rng_below(rng, (uint64_t)n), y = (int)wt_rng_below(rng, (uint64_t)n);
    int a = label[x], b = label[y];
    if (a == b) {
      fails++;
      continue;
    }
    (*evals)++;
    /* change of the in-group pair sum when x and y trade groups */
    double delta = s_row_affinity(m, rows, a, y, x) + s_row_affinity(m, rows, b, x, y) -
                   s_row_affinity(m, rows, a, x, -1) - s_row_affinity(m, rows, b, y, -1);
    /* strictly lower beyond rounding: swapping two alike devices must not count as progress,
     * or a pair could trade places forever on rounding noise */
    if (delta >= -1e-9 * (s_row_affinity(m, rows, a, x, -1) + s_row_affinity(m, rows, b, y, -1))) {
      fails++;
      continue;
    }
    rows[a * K + slot[x]] = y;
    rows[b * K + slot[y]] = x;
    int t = slot[x];
    slot[x] = slot[y];
    slot[y] = t;
    label[x] = b;
    label[y] = a;
    fails = 0;
  }
  free(rows);
  free(slot);
  free(fill);
}
