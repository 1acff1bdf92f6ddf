/* matching — bottleneck perfect matching between two groups of equal size.
 *
 * The smallest threshold t for which the bipartite graph {(i,j) : w_ij <= t} has a perfect
 * matching is found by binary search over the costs (quickselect picks each probe, so nothing
 * is sorted: O(k²) selection work in all), starting from the lower
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

static double s_lower_bound(int k, const double *w) {
  double lb = 0;
  for (int i = 0; i < k; i++) {
    double rmin = INFINITY, cmin = INFINITY;
    for (int j = 0; j < k; j++) {
      rmin = w[i * k + j] < rmin ? w[i * k + j] : rmin;
      cmin = w[j * k + i] < cmin ? w[j * k + i] : cmin;
    }
    double m = rmin > cmin ? rmin : cmin;
    lb = m > lb ? m : lb;
  }
  return lb;
}

/* Rearranges a[0..n) so that a[nth] holds the value it would hold if sorted, with nothing
 * larger before it and nothing smaller after it (quickselect, middle pivot). */
static void s_select(double *a, int n, int nth) {
  int lo = 0, hi = n - 1;
  while (lo < hi) {
    double pivot = a[lo + (hi - lo) / 2];
    int i = lo, j = hi;
    while (i <= j) {
      while (a[i] < pivot) i++;
      while (a[j] > pivot) j--;
      if (i <= j) {
        double t = a[i];
        a[i++] = a[j];
        a[j--] = t;
      }
    }
    if (nth <= j) hi = j;
    else if (nth >= i) lo = i;
    else return;
  }
}

/* The smallest feasible threshold among vals[0..cnt) (the largest is feasible). */
static double s_search(s_hk *h, double *vals, int cnt) {
  int lo = 0, hi = cnt;
  while (hi - lo > 1) {
    int mid = lo + (hi - lo - 1) / 2;
    s_select(vals + lo, hi - lo, mid - lo);
    h->t = vals[mid];
    if (s_max_matching(h) == h->k) hi = mid + 1;
    else lo = mid + 1;
  }
  return vals[lo];
}

double assign_bottleneck_matching(int k, const double *w, int *match) {
  if (k <= 0) return 0;
  int *buf = wt_xmalloc((size_t)4 * k * sizeof(int));
  s_hk h = {k, w, 0, buf, buf + k, buf + 2 * k, buf + 3 * k};
  memset(buf, 0xff, (size_t)2 * k * sizeof(int)); /* ml = mr = -1 */
  h.t = s_lower_bound(k, w);
  if (s_max_matching(&h) < k) {
    double *vals = wt_xmalloc((size_t)k * k * sizeof(double));
    int cnt = 0;
    for (int i = 0; i < k * k; i++)
      if (w[i] > h.t) vals[cnt++] = w[i];
    h.t = s_search(&h, vals, cnt);
    s_max_matching(&h);
    free(vals);
  }
  double worst = 0;
  for (int i = 0; i < k; i++) worst = w[i * k + h.ml[i]] > worst ? w[i * k + h.ml[i]] : worst;
  if (match) memcpy(match, h.ml, (size_t)k * sizeof(int));
  free(buf);
  return worst;
}
