/* matching — bottleneck perfect matching between two groups of equal size.
 *
 * The smallest threshold t for which the bipartite graph {(i,j) : w_ij <= t} has a perfect
 * matching is found by binary search over the sorted distinct costs, starting from the lower
 * bound max(max_i min_j w_ij, max_j min_i w_ij) (every vertex needs some edge), which on networks
 * made of regions is usually already the answer. Each probe is a Hopcroft–Karp maximum matching
 * warm-started from the previous probe's matching, minus the edges above the new threshold.
 */
#include "assign_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  int k;
  const double *w;
  double t;
  int *ml, *mr, *dist, *queue;
} s_hk;

static int s_bfs(s_hk *h) {
  int head = 0, tail = 0, found = 0, k = h->k;
  for (int i = 0; i < k; i++) {
    h->dist[i] = h->ml[i] < 0 ? 0 : -1;
    if (h->ml[i] < 0) h->queue[tail++] = i;
  }
  while (head < tail) {
    int i = h->queue[head++];
    for (int j = 0; j < k; j++) {
      if (h->w[i * k + j] > h->t) continue;
      int i2 = h->mr[j];
      if (i2 < 0) found = 1;
      else if (h->dist[i2] < 0) {
        h->dist[i2] = h->dist[i] + 1;
        h->queue[tail++] = i2;
      }
    }
  }
  return found;
}

static int s_dfs(s_hk *h, int i) {
  int k = h->k;
  for (int j = 0; j < k; j++) {
    if (h->w[i * k + j] > h->t) continue;
    int i2 = h->mr[j];
    if (i2 < 0 || (h->dist[i2] == h->dist[i] + 1 && s_dfs(h, i2))) {
      h->ml[i] = j;
      h->mr[j] = i;
      return 1;
    }
  }
  h->dist[i] = -1; /* dead end: no augmenting path through i in this phase */
  return 0;
}

/* Maximum matching size at threshold h->t, reusing the pairs of ml/mr that are still allowed. */
static int s_max_matching(s_hk *h) {
  int k = h->k, size = 0;
  for (int i = 0; i < k; i++) {
    int j = h->ml[i];
    if (j >= 0 && h->w[i * k + j] > h->t) h->ml[i] = h->mr[j] = -1;
    else if (j >= 0) size++;
  }
  while (s_bfs(h))
    for (int i = 0; i < k; i++)
      if (h->ml[i] < 0 && s_dfs(h, i)) size++;
  return size;
}

static int s_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double s_lower_bound(int k, const double *w) {
  double lb = 0;
  for (int i = 0; i < k; i++) {
    double rmin = INFINITY, cmin = INFINITY;
    for (int j = 0; j < k; j++) {
      rmin = fmin(rmin, w[i * k + j]);
      cmin = fmin(cmin, w[j * k + i]);
    }
    lb = fmax(lb, fmax(rmin, cmin));
  }
  return lb;
}

/* Sorted distinct costs >= lb; returns how many. */
static int s_candidates(int k, const double *w, double lb, double *vals) {
  int cnt = 0;
  for (int i = 0; i < k * k; i++)
    if (w[i] >= lb) vals[cnt++] = w[i];
  qsort(vals, (size_t)cnt, sizeof(double), s_cmp_double);
  int u = 0;
  for (int i = 0; i < cnt; i++)
    if (u == 0 || vals[i] != vals[u - 1]) vals[u++] = vals[i];
  return u;
}

double assign_bottleneck_matching(int k, const double *w, int *match) {
  if (k <= 0) return 0;
  int *buf = wt_xmalloc((size_t)4 * k * sizeof(int));
  s_hk h = {k, w, 0, buf, buf + k, buf + 2 * k, buf + 3 * k};
  memset(buf, 0xff, (size_t)2 * k * sizeof(int)); /* ml = mr = -1 */
  h.t = s_lower_bound(k, w);
  if (s_max_matching(&h) < k) {
    double *vals = wt_xmalloc((size_t)k * k * sizeof(double));
    int lo = 1, hi = s_candidates(k, w, h.t, vals) - 1; /* vals[0] = lb failed; vals[hi] works */
    while (lo < hi) {
      int mid = lo + (hi - lo) / 2;
      h.t = vals[mid];
      if (s_max_matching(&h) == k) hi = mid;
      else lo = mid + 1;
    }
    h.t = vals[hi];
    s_max_matching(&h);
    free(vals);
  }
  double worst = 0;
  for (int i = 0; i < k; i++) worst = fmax(worst, w[i * k + h.ml[i]]);
  if (match) memcpy(match, h.ml, (size_t)k * sizeof(int));
  free(buf);
  return worst;
}
