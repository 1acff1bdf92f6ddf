/* matching — bottleneck perfect matching between two groups of equal size.
 *
 * The smallest threshold t for which the bipartite graph {(i,j) : w_ij <= t} has a perfect
 * matching is found by binary search over the costs (quickselect picks each probe, so nothing
 * is sorted: O(k²) selection work in all), starting from the lower
 * bound max(max_i min_j w_ij, max_j min_i w_ij) (every vertex needs some edge), which on networks
 * made of regions is usually already the answer. Each probe is a maximum matching by augmenting
 * paths (Kuhn) over bitset adjacency — 64 right vertices per word, so a search from one vertex
 * costs O(k²/64) — warm-started from the previous probe's matching minus the edges above the
 * new threshold. (Hopcroft–Karp's phases bound the worst case better; with warm starts few
 * augmentations are left per probe and the bitsets win.)
 */
#include "assign_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  int k, words;
  const double *w;
  double t;
  uint64_t *adj; /* k rows of `words` words: bit j of row i set when w_ij <= t */
  uint64_t *vis; /* right vertices reached by the current search */
  int *ml, *mr;
} s_hk;

static void s_build_adj(s_hk *h) {
  int k = h->k, W = h->words;
  memset(h->adj, 0, (size_t)k * W * sizeof(uint64_t));
  for (int i = 0; i < k; i++)
    for (int j = 0; j < k; j++)
      if (h->w[i * k + j] <= h->t) h->adj[i * W + j / 64] |= (uint64_t)1 << (j % 64);
}

/* Kuhn's augmenting path from left vertex i over right vertices not yet reached. */
static int s_augment(s_hk *h, int i) {
  int W = h->words;
  for (int wi = 0; wi < W; wi++) {
    uint64_t bits = h->adj[i * W + wi] & ~h->vis[wi];
    while (bits) {
      int b = __builtin_ctzll(bits);
      bits &= bits - 1;
      h->vis[wi] |= (uint64_t)1 << b;
      int j = wi * 64 + b;
      if (h->mr[j] < 0 || s_augment(h, h->mr[j])) {
        h->ml[i] = j;
        h->mr[j] = i;
        return 1;
      }
      bits &= ~h->vis[wi]; /* the recursion may have reached more of this word */
    }
  }
  return 0;
}

/* Maximum matching size at threshold h->t, reusing the pairs of ml/mr that are still allowed.
 * One pass over the free left vertices suffices (a vertex with no augmenting path never gains
 * one when others augment), and the reached set is only cleared after a success: what a failed
 * search reached cannot lead to a free vertex while the matching is unchanged. */
static int s_max_matching(s_hk *h) {
  int k = h->k, size = 0;
  s_build_adj(h);
  for (int i = 0; i < k; i++) {
    int j = h->ml[i];
    if (j >= 0 && h->w[i * k + j] > h->t) h->ml[i] = h->mr[j] = -1;
    else if (j >= 0) size++;
  }
  memset(h->vis, 0, (size_t)h->words * sizeof(uint64_t));
  for (int i = 0; i < k && size < k; i++)
    if (h->ml[i] < 0 && s_augment(h, i)) {
      size++;
      memset(h->vis, 0, (size_t)h->words * sizeof(uint64_t));
    }
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

double assign_bottleneck_matching_hint(int k, const double *w, int *match, double hint) {
  if (k <= 0) return 0;
  int W = (k + 63) / 64;
  int *buf = wt_xmalloc((size_t)2 * k * sizeof(int));
  uint64_t *bits = wt_xmalloc((size_t)(k + 1) * W * sizeof(uint64_t));
  s_hk h = {k, W, w, 0, bits, bits + (size_t)k * W, buf, buf + k};
  memset(buf, 0xff, (size_t)2 * k * sizeof(int)); /* ml = mr = -1 */
  double lb = s_lower_bound(k, w);
  h.t = lb;
  if (s_max_matching(&h) < k) {
    /* the answer lies in (lo, hi]: narrowed first by the hint, when it falls inside */
    double lo = lb, hi = INFINITY;
    if (hint > lb) {
      h.t = hint;
      if (s_max_matching(&h) == k) hi = hint;
      else lo = hint;
    }
    double *vals = wt_xmalloc((size_t)k * k * sizeof(double));
    int cnt = 0;
    for (int i = 0; i < k * k; i++)
      if (w[i] > lo && w[i] <= hi) vals[cnt++] = w[i];
    h.t = s_search(&h, vals, cnt);
    s_max_matching(&h);
    free(vals);
  }
  double worst = 0;
  for (int i = 0; i < k; i++) worst = w[i * k + h.ml[i]] > worst ? w[i * k + h.ml[i]] : worst;
  if (match) memcpy(match, h.ml, (size_t)k * sizeof(int));
  free(buf);
  free(bits);
  return worst;
}

double assign_bottleneck_matching(int k, const double *w, int *match) {
  return assign_bottleneck_matching_hint(k, w, match, 0);
}
