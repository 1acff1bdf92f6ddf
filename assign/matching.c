/* matching — bottleneck perfect matching between two groups of equal size.
 *
 * Two stages, both exact:
 *  1. Every vertex needs some edge, so the answer is at least
 *     lb = max(max_i min_j w_ij, max_j min_i w_ij); on networks made of regions it usually is
 *     lb. A maximum matching of the graph {w_ij <= lb} is found by augmenting paths (Kuhn) over
 *     bitset adjacency, 64 right vertices per word.
 *  2. While the matching is not perfect, the augmenting path whose largest new edge is smallest
 *     is found by a minimax Dijkstra over alternating paths (O(k²) with arrays) and applied.
 *     The final threshold is optimal: if a perfect matching M* with all edges below the current
 *     path's bottleneck b existed, M ⊕ M* would hold an augmenting path with edges below b.
 * So the cost is one bitset matching plus O(k²) per missing pair, never a sort of k² values.
 */
#include "assign/assign_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  int k, words;
  const double *w;
  double t;
  uint64_t *adj; /* k rows of `words` words: bit j of row i set when w_ij <= t */
  uint64_t *vis; /* right vertices reached by the current search */
  int *ml, *mr;  /* match of each left / right vertex, -1 when free */
} s_match;

/* Kuhn's augmenting path from left vertex i over right vertices not yet reached. */
static int s_augment(s_match *h, int i) {
  int W = h->words;
  for (int wi = 0; wi < W; wi++) {
    uint64_t bits = h->adj[i * W + wi] & ~h->vis[wi];
    while (bits) {
      int b = __builtin_ctzll(bits);
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

/* Maximum matching of {w_ij <= t} from scratch. One pass over the left vertices suffices (a
 * vertex with no augmenting path never gains one when others augment), and the reached set is
 * only cleared after a success: what a failed search reached cannot lead to a free vertex while
 * the matching is unchanged. Returns the size. */
static int s_threshold_matching(s_match *h) {
  int k = h->k, W = h->words, size = 0;
  memset(h->adj, 0, (size_t)k * W * sizeof(uint64_t));
  for (int i = 0; i < k; i++)
    for (int j = 0; j < k; j++)
      if (h->w[i * k + j] <= h->t) h->adj[i * W + j / 64] |= (uint64_t)1 << (j % 64);
  memset(h->vis, 0, (size_t)W * sizeof(uint64_t));
  for (int i = 0; i < k; i++)
    if (s_augment(h, i)) {
      size++;
      memset(h->vis, 0, (size_t)W * sizeof(uint64_t));
    }
  return size;
}

static double s_lower_bound(int k, const double *w) {
  double lb = 0;
  for (int i = 0; i < k; i++) {
    double rmin = INFINITY, cmin = INFINITY;
    for (int j = 0; j < k; j++) {
      rmin = assign_dmin(rmin, w[i * k + j]);
      cmin = assign_dmin(cmin, w[j * k + i]);
    }
    lb = assign_dmax(lb, assign_dmax(rmin, cmin));
  }
  return lb;
}

typedef struct {
  double *best; /* k: smallest bottleneck of an alternating path reaching right vertex j */
  int *par;     /* k: the left vertex that path arrives from */
  char *done;   /* k: right vertex settled */
} s_dijkstra;

static void s_relax(const s_match *h, s_dijkstra *d, int i, double level) {
  int k = h->k;
  for (int j = 0; j < k; j++) {
    double v = assign_dmax(level, h->w[i * k + j]);
    if (!d->done[j] && v < d->best[j]) {
      d->best[j] = v;
      d->par[j] = i;
    }
  }
}

/* Finds and applies the augmenting path with the smallest largest edge. */
static void s_minimax_augment(s_match *h, s_dijkstra *d) {
  int k = h->k;
  for (int j = 0; j < k; j++) d->best[j] = INFINITY, d->done[j] = 0, d->par[j] = -1;
  for (int i = 0; i < k; i++)
    if (h->ml[i] < 0) s_relax(h, d, i, 0);
  for (;;) {
    int j = -1;
    for (int c = 0; c < k; c++)
      if (!d->done[c] && (j < 0 || d->best[c] < d->best[j])) j = c;
    d->done[j] = 1;
    if (h->mr[j] >= 0) {
      s_relax(h, d, h->mr[j], d->best[j]);
      continue;
    }
    while (j >= 0) { /* flip the path back to its free left end */
      int i = d->par[j], next = h->ml[i];
      h->ml[i] = j;
      h->mr[j] = i;
      j = next;
    }
    return;
  }
}

double assign_bottleneck_matching(int k, const double *w, int *match) {
  if (k <= 0) return 0;
  int W = (k + 63) / 64;
  int *ibuf = wt_xmalloc((size_t)3 * k * sizeof(int));
  uint64_t *bits = wt_xmalloc((size_t)(k + 1) * W * sizeof(uint64_t));
  s_match h = {k, W, w, s_lower_bound(k, w), bits, bits + (size_t)k * W, ibuf, ibuf + k};
  memset(ibuf, 0xff, (size_t)2 * k * sizeof(int)); /* ml = mr = -1 */
  int size = s_threshold_matching(&h);
  if (size < k) {
    double *best = wt_xmalloc((size_t)k * sizeof(double));
    char *done = wt_xmalloc((size_t)k);
    s_dijkstra d = {best, ibuf + 2 * k, done};
    for (; size < k; size++) s_minimax_augment(&h, &d);
    free(best);
    free(done);
  }
  double worst = 0;
  for (int i = 0; i < k; i++) worst = assign_dmax(worst, w[i * k + h.ml[i]]);
  if (match) memcpy(match, h.ml, (size_t)k * sizeof(int));
  free(ibuf);
  free(bits);
  return worst;
}
