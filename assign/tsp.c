/* tsp — the pipeline order: shortest open path through the data-parallel groups.
 *
 * Held–Karp over subsets (m·2^m states, m^2·2^m steps: 16 groups = 16M steps) is exact; above 16
 * groups, or where a search needs many evaluations, nearest neighbour from every start followed
 * by 2-opt segment reversals gives a good path in O(m^3) per pass.
 */
#include "assign/assign_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double s_path_len(int m, const double *w, const int *order) {
  double len = 0;
  for (int i = 0; i + 1 < m; i++) len += w[order[i] * m + order[i + 1]];
  return len;
}

static double s_held_karp(int m, const double *w, int *order) {
  size_t states = (size_t)1 << m;
  double *dp = wt_xmalloc(states * m * sizeof(double)); /* dp[mask*m + j]: path over mask ends j */
  for (size_t i = 0; i < states * m; i++) dp[i] = INFINITY;
  for (int j = 0; j < m; j++) dp[((size_t)1 << j) * m + j] = 0;
  for (size_t mask = 1; mask < states; mask++)
    for (int j = 0; j < m; j++) {
      double base = dp[mask * m + j];
      if (!(mask >> j & 1) || base == INFINITY) continue;
      for (int k = 0; k < m; k++) {
        if (mask >> k & 1) continue;
        double *to = &dp[(mask | (size_t)1 << k) * m + k];
        if (base + w[j * m + k] < *to) *to = base + w[j * m + k];
      }
    }
  size_t mask = states - 1;
  int last = 0;
  for (int j = 1; j < m; j++)
    if (dp[mask * m + j] < dp[mask * m + last]) last = j;
  double best = dp[mask * m + last];
  /* Walk back: the predecessor k is one whose stored value plus the edge reproduces dp exactly
   * (the same floating-point sum that set it). */
  for (int pos = m - 1; pos > 0; pos--) {
    order[pos] = last;
    size_t prev = mask & ~((size_t)1 << last);
    int found = -1;
    for (int k = 0; k < m && found < 0; k++)
      if ((prev >> k & 1) && dp[prev * m + k] + w[k * m + last] == dp[mask * m + last]) found = k;
    mask = prev;
    last = found;
  }
  order[0] = last;
  free(dp);
  return best;
}

/* 2-opt for an open path: reversing order[i..j] replaces edges (i-1,i) and (j,j+1). */
double assign_tsp_improve(int m, const double *w, int *order) {
  int improved = 1;
  while (improved) {
    improved = 0;
    for (int i = 0; i < m - 1; i++)
      for (int j = i + 1; j < m; j++) {
        double before = 0, after = 0;
        if (i > 0) {
          before += w[order[i - 1] * m + order[i]];
          after += w[order[i - 1] * m + order[j]];
        }
        if (j < m - 1) {
          before += w[order[j] * m + order[j + 1]];
          after += w[order[i] * m + order[j + 1]];
        }
        if (after < before - 1e-12 * before) {
          for (int a = i, b = j; a < b; a++, b--) {
            int tmp = order[a];
            order[a] = order[b];
            order[b] = tmp;
          }
          improved = 1;
        }
      }
  }
  return s_path_len(m, w, order);
}

static double s_nearest_neighbour(int m, const double *w, int start, int *order, char *used) {
  memset(used, 0, (size_t)m);
  order[0] = start;
  used[start] = 1;
  for (int pos = 1; pos < m; pos++) {
    int cur = order[pos - 1], best = -1;
    for (int k = 0; k < m; k++)
      if (!used[k] && (best < 0 || w[cur * m + k] < w[cur * m + best])) best = k;
    order[pos] = best;
    used[best] = 1;
  }
  return assign_tsp_improve(m, w, order);
}

double assign_tsp_open_path(int m, const double *w, int exact, int *order) {
  if (m <= 0) return 0;
  if (exact && m <= ASSIGN_EXACT_TSP_MAX) return s_held_karp(m, w, order);
  int *cand = wt_xmalloc((size_t)m * sizeof(int));
  char *used = wt_xmalloc((size_t)m);
  double best = INFINITY;
  for (int start = 0; start < m; start++) {
    double len = s_nearest_neighbour(m, w, start, cand, used);
    if (len < best) {
      best = len;
      memcpy(order, cand, (size_t)m * sizeof(int));
    }
  }
  free(cand);
  free(used);
  return best;
}
