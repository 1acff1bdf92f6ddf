/* ring — the order of a ring all-reduce. Every step moves one chunk over every hop at once, so a
 * step lasts as long as the slowest hop and the best ring minimises that bottleneck. The cost
 * model (DATAP with ASSIGN_DP_RING) and the simulator (netsim) both order rings here, so the
 * modelled and the simulated ring are the same ring. */
#include "assign/assign_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int s_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* reach[mask*k + j]: some path from member 0 through exactly the members of mask ends at j using
 * only hops of cost <= t. Returns whether it closes into a ring back to 0. */
static int s_ring_exists(int k, const double *w, double t, char *reach) {
  size_t states = (size_t)1 << k;
  memset(reach, 0, states * k);
  reach[1 * k + 0] = 1;
  for (size_t mask = 1; mask < states; mask += 2)
    for (int j = 0; j < k; j++) {
      if (!reach[mask * k + j]) continue;
      for (int x = 1; x < k; x++)
        if (!(mask >> x & 1) && w[j * k + x] <= t) reach[(mask | (size_t)1 << x) * k + x] = 1;
    }
  for (int j = 1; j < k; j++)
    if (reach[(states - 1) * k + j] && w[j * k + 0] <= t) return 1;
  return 0;
}

/* Walks a ring found by s_ring_exists at threshold t back from its last member. */
static void s_ring_trace(int k, const double *w, double t, const char *reach, int *order) {
  size_t mask = ((size_t)1 << k) - 1;
  int j = 1;
  while (!(reach[mask * k + j] && w[j * k + 0] <= t)) j++;
  for (int pos = k - 1; pos > 0; pos--) {
    order[pos] = j;
    size_t prev = mask & ~((size_t)1 << j);
    int i = 0;
    while (!(reach[prev * k + i] && w[i * k + j] <= t)) i++;
    mask = prev;
    j = i;
  }
  order[0] = 0;
}

/* Binary search over the distinct hop costs for the smallest that still admits a ring. */
static double s_ring_exact(int k, const double *w, int *order) {
  double *vals = wt_xmalloc((size_t)k * k * sizeof(double));
  int cnt = 0;
  for (int i = 0; i < k; i++)
    for (int j = 0; j < k; j++)
      if (i != j) vals[cnt++] = w[i * k + j];
  qsort(vals, (size_t)cnt, sizeof(double), s_cmp_double);
  char *reach = wt_xmalloc(((size_t)1 << k) * k);
  int lo = 0, hi = cnt - 1; /* the complete graph (vals[cnt-1]) always has a ring */
  while (lo < hi) {
    int mid = lo + (hi - lo) / 2;
    if (s_ring_exists(k, w, vals[mid], reach))
      hi = mid;
    else
      lo = mid + 1;
  }
  double best = vals[hi];
  if (order) {
    s_ring_exists(k, w, best, reach);
    s_ring_trace(k, w, best, reach, order);
  }
  free(reach);
  free(vals);
  return best;
}

/* Nearest neighbour from every start; the ring with the smallest bottleneck, rotated to start at
 * member 0. */
static double s_ring_greedy(int k, const double *w, int *order) {
  double best = INFINITY;
  int *cur = wt_xmalloc((size_t)k * sizeof(int));
  char *used = wt_xmalloc((size_t)k);
  for (int s = 0; s < k; s++) {
    memset(used, 0, (size_t)k);
    cur[0] = s;
    used[s] = 1;
    double worst = 0;
    for (int step = 1; step < k; step++) {
      int last = cur[step - 1], nxt = -1;
      for (int x = 0; x < k; x++)
        if (!used[x] && (nxt < 0 || w[last * k + x] < w[last * k + nxt])) nxt = x;
      worst = assign_dmax(worst, w[last * k + nxt]);
      used[nxt] = 1;
      cur[step] = nxt;
    }
    worst = assign_dmax(worst, w[cur[k - 1] * k + s]);
    if (worst < best) {
      best = worst;
      if (order) {
        int at0 = 0;
        while (cur[at0] != 0) at0++;
        for (int i = 0; i < k; i++) order[i] = cur[(at0 + i) % k];
      }
    }
  }
  free(cur);
  free(used);
  return best;
}

double assign_ring_order(int k, const double *w, int *order) {
  if (k <= 1) {
    if (order && k == 1) order[0] = 0;
    return 0;
  }
  if (k <= ASSIGN_RING_EXACT_MAX) return s_ring_exact(k, w, order);
  return s_ring_greedy(k, w, order);
}
