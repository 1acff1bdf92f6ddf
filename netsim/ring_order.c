/* ring_order — the order of a ring all-reduce: every step moves one chunk over every hop at
 * once, so a step lasts as long as the slowest hop, and the best ring minimises that bottleneck
 * (the same objective as assign's ring cost, so simulated and modelled rings agree). */
#include "netsim/sim_internal.h"

#include "common/common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define S_EXACT_MAX 9 /* (k−1)! orders with pruning: instant up to 9 members */

typedef struct {
  const double *w; /* k×k hop seconds */
  int k;
  int *cur, *best;
  char *used;
  double best_cost;
} s_search;

static double s_hop(const assign_network *net, int a, int b, double chunk) {
  return net->latency_s[a * net->n + b] + chunk / net->bandwidth_Bps[a * net->n + b];
}

/* Depth-first over orders starting at member 0, pruning any prefix already as slow as the best. */
static void s_dfs(s_search *s, int depth, double worst) {
  if (worst >= s->best_cost) return;
  if (depth == s->k) {
    worst = fmax(worst, s->w[s->cur[s->k - 1] * s->k + s->cur[0]]);
    if (worst < s->best_cost) {
      s->best_cost = worst;
      memcpy(s->best, s->cur, sizeof(int) * (size_t)s->k);
    }
    return;
  }
  for (int v = 1; v < s->k; v++) {
    if (s->used[v]) continue;
    s->used[v] = 1;
    s->cur[depth] = v;
    s_dfs(s, depth + 1, fmax(worst, s->w[s->cur[depth - 1] * s->k + v]));
    s->used[v] = 0;
  }
}

/* Nearest neighbour from every start; keeps the ring with the smallest bottleneck. */
static void s_greedy(s_search *s) {
  for (int start = 0; start < s->k; start++) {
    memset(s->used, 0, (size_t)s->k);
    s->cur[0] = start;
    s->used[start] = 1;
    double worst = 0;
    for (int i = 1; i < s->k; i++) {
      int next = -1;
      for (int v = 0; v < s->k; v++)
        if (!s->used[v] &&
            (next < 0 || s->w[s->cur[i - 1] * s->k + v] < s->w[s->cur[i - 1] * s->k + next]))
          next = v;
      s->used[next] = 1;
      s->cur[i] = next;
      worst = fmax(worst, s->w[s->cur[i - 1] * s->k + next]);
    }
    worst = fmax(worst, s->w[s->cur[s->k - 1] * s->k + start]);
    if (worst < s->best_cost) {
      s->best_cost = worst;
      memcpy(s->best, s->cur, sizeof(int) * (size_t)s->k);
    }
  }
}

void netsim_ring_order(const assign_network *net, const int *devs, int k, double chunk,
                       int *order) {
  s_search s = {.k = k, .best_cost = INFINITY};
  double *w = wt_xmalloc(sizeof(double) * (size_t)k * k);
  for (int a = 0; a < k; a++)
    for (int b = 0; b < k; b++) w[a * k + b] = a == b ? 0 : s_hop(net, devs[a], devs[b], chunk);
  s.w = w;
  s.cur = wt_xcalloc((size_t)k, sizeof(int));
  s.best = wt_xcalloc((size_t)k, sizeof(int));
  s.used = wt_xcalloc((size_t)k, 1);
  for (int i = 0; i < k; i++) s.best[i] = i;
  if (k <= S_EXACT_MAX) {
    s.used[0] = 1;
    s_dfs(&s, 1, 0);
  } else {
    s_greedy(&s);
  }
  for (int i = 0; i < k; i++) order[i] = s.best[i];
  free(w);
  free(s.cur);
  free(s.best);
  free(s.used);
}
