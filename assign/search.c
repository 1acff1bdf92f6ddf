/* search — the partition state every solver walks: rows, per-device DATAP sums, per-row DATAP,
 * the edge table between rows and a pipeline order. A swap of two devices touches two rows, so
 * it re-evaluates O(K) sums, 2(P−1) bottleneck matchings and the path, never the whole model.
 */
#include "assign/assign_internal.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void assign_search_init(assign_search *s, assign_model *m, assign_order_mode mode) {
  int P = m->P, K = m->K, n = m->n;
  memset(s, 0, sizeof *s);
  s->m = m;
  s->P = P;
  s->K = K;
  s->n = n;
  s->mode = mode;
  s->rows = wt_xmalloc((size_t)n * sizeof(int));
  s->label = wt_xmalloc((size_t)n * sizeof(int));
  s->slot = wt_xmalloc((size_t)n * sizeof(int));
  s->sum = wt_xcalloc((size_t)n, sizeof(double));
  s->rowdp = wt_xcalloc((size_t)P, sizeof(double));
  s->edge = wt_xcalloc((size_t)P * P, sizeof(double));
  s->t_edge = wt_xcalloc((size_t)P * P, sizeof(double));
  s->soft = wt_xcalloc((size_t)P * P, sizeof(double));
  s->t_soft = wt_xcalloc((size_t)P * P, sizeof(double));
  s->alike_on = mode != ASSIGN_ORDER_KEEP && (long)n * (n - K) / 2 <= ASSIGN_ALIKE_SWAPS_MAX;
  s->pairsum = wt_xcalloc((size_t)P * P, sizeof(double));
  s->t_pairsum = wt_xcalloc((size_t)P * P, sizeof(double));
  s->h_work = wt_xmalloc((size_t)(K + 1) * sizeof(double));
  s->h_work2 = wt_xmalloc((size_t)(K + 1) * sizeof(double));
  s->h_work3 = wt_xmalloc((size_t)(K + 1) * sizeof(double));
  s->h_match = wt_xmalloc((size_t)(K + 1) * sizeof(int));
  s->h_way = wt_xmalloc((size_t)(K + 1) * sizeof(int));
  s->h_used = wt_xmalloc((size_t)(K + 1));
  s->order = wt_xmalloc((size_t)P * sizeof(int));
  s->t_order = wt_xmalloc((size_t)P * sizeof(int));
  s->t_sum_a = wt_xmalloc((size_t)K * sizeof(double));
  s->t_sum_b = wt_xmalloc((size_t)K * sizeof(double));
  s->t_rowa = wt_xmalloc((size_t)K * sizeof(int));
  s->t_rowb = wt_xmalloc((size_t)K * sizeof(int));
  for (int i = 0; i < P; i++) s->order[i] = i;
}

void assign_search_free(assign_search *s) {
  void *bufs[] = {s->pairsum, s->t_pairsum, s->h_work,  s->h_work2, s->h_work3, s->h_match,
                  s->h_way,   s->h_used,    s->soft,    s->t_soft,  s->rows,    s->label,
                  s->slot,    s->sum,       s->rowdp,   s->edge,    s->t_edge,  s->order,
                  s->t_order, s->t_sum_a,   s->t_sum_b, s->t_rowa,  s->t_rowb};
  for (size_t i = 0; i < WT_ARRAY_LEN(bufs); i++) free(bufs[i]);
  memset(s, 0, sizeof *s);
}

/* Row sums for the sharded PS term: sum[d] = Σ_{d' in row} dpc[d][d']. */
static double s_row_sums(const assign_search *s, const int *row, double *sum) {
  const double *dpc = s->m->dpc;
  int n = s->n, K = s->K;
  double worst = 0;
  for (int i = 0; i < K; i++) {
    double acc = 0;
    for (int j = 0; j < K; j++) acc += dpc[row[i] * n + row[j]];
    sum[i] = acc;
    worst = assign_dmax(worst, acc);
  }
  return worst;
}

static int s_ring(const assign_search *s) {
  return s->m->p->dp_algo == ASSIGN_DP_RING;
}

/* Length of the path in the held order (the identity order in KEEP mode). */
static double s_path(const assign_search *s, const double *edge, const int *order) {
  int P = s->P;
  double path = 0;
  for (int i = 0; i + 1 < P; i++) path += edge[order[i] * P + order[i + 1]];
  return path;
}

/* Σ of the soft companions along the path. */
static double s_path_soft(const assign_search *s, const double *soft, const int *order) {
  int P = s->P;
  double acc = 0;
  for (int i = 0; i + 1 < P; i++) acc += soft[order[i] * P + order[i + 1]];
  return acc;
}

/* Min-sum perfect matching of row a to row b under the pipeline pair cost (Hungarian method with
 * potentials, O(K³)). Unlike the bottleneck it counts every member that lacks a like partner, and
 * unlike a greedy pass (tried first) it does not depend on the order of the rows' members, so
 * swapping two alike devices does not look like progress. */
static double s_pair_sum(const assign_search *s, const int *a, const int *b) {
  const double *ppc = s->m->ppc;
  int K = s->K, n = s->n;
  double *u = s->h_work, *v = s->h_work2, *minv = s->h_work3;
  char *used = s->h_used;
  int *match = s->h_match, *way = s->h_way; /* match[j] = row (1-based) matched to column j */
  for (int j = 0; j <= K; j++) u[j] = v[j] = 0, match[j] = way[j] = 0;
  for (int i = 1; i <= K; i++) {
    int j0 = 0;
    match[0] = i;
    for (int j = 0; j <= K; j++) minv[j] = INFINITY, used[j] = 0;
    do { /* grow the alternating tree from row i until it reaches a free column */
      used[j0] = 1;
      int i0 = match[j0], j1 = 0;
      double delta = INFINITY;
      for (int j = 1; j <= K; j++) {
        if (used[j]) continue;
        double cur = ppc[a[i0 - 1] * n + b[j - 1]] - u[i0] - v[j];
        if (cur < minv[j]) minv[j] = cur, way[j] = j0;
        if (minv[j] < delta) delta = minv[j], j1 = j;
      }
      for (int j = 0; j <= K; j++)
        if (used[j])
          u[match[j]] += delta, v[j] -= delta;
        else
          minv[j] -= delta;
      j0 = j1;
    } while (match[j0] != 0);
    do { /* flip the path */
      int j1 = way[j0];
      match[j0] = match[j1];
      j0 = j1;
    } while (j0);
  }
  double acc = 0;
  for (int j = 1; j <= K; j++) acc += ppc[a[match[j] - 1] * n + b[j - 1]];
  return acc;
}

/* Refreshes pairsum for every pair that involves row a or row b (rows given) and returns the new
 * Σ over all pairs. Why the local search looks at it: with a max objective a group that is
 * incompatible with the others (say two devices of one region and none of another) costs only
 * through the worst matched pair of the one or two path edges it touches, so each of the swaps
 * that repair such groups but the last leaves cost, path and tie unchanged; this sum drops with
 * every device that finds a like partner in every other group, which turns that plateau into a
 * slope. */
static double s_pair_sums(assign_search *s, double *ps, int a, const int *rowa, int b,
                          const int *rowb) {
  int P = s->P, K = s->K;
  for (int r = 0; r < P; r++) {
    const int *row = r == a ? rowa : r == b ? rowb : s->rows + r * K;
    if (r != a) ps[a * P + r] = ps[r * P + a] = s_pair_sum(s, rowa, row);
    if (r != b && r != a) ps[b * P + r] = ps[r * P + b] = s_pair_sum(s, rowb, row);
  }
  double acc = 0;
  for (int x = 0; x < P; x++)
    for (int y = x + 1; y < P; y++) acc += ps[x * P + y];
  return acc;
}

static double s_total(const assign_search *s, double dp, double path) {
  return s->m->feasible ? dp + 2 * path + s->m->compute_s : INFINITY;
}

void assign_search_load_rows(assign_search *s, const int *rows) {
  int P = s->P, K = s->K;
  memcpy(s->rows, rows, (size_t)s->n * sizeof(int));
  double rowsum = 0;
  s->dp = 0;
  double *rsum = wt_xmalloc((size_t)K * sizeof(double));
  for (int r = 0; r < P; r++) {
    const int *row = s->rows + r * K;
    for (int i = 0; i < K; i++) {
      s->label[row[i]] = r;
      s->slot[row[i]] = i;
    }
    double ps = s_row_sums(s, row, rsum);
    for (int i = 0; i < K; i++) s->sum[row[i]] = rsum[i];
    s->rowdp[r] = s_ring(s) ? assign_model_group_dp(s->m, row) : ps;
    s->dp = assign_dmax(s->dp, s->rowdp[r]);
    rowsum += s->rowdp[r];
  }
  free(rsum);
  for (int a = 0; a < P; a++)
    for (int b = a + 1; b < P; b++)
      s->edge[a * P + b] = s->edge[b * P + a] =
          assign_model_edge(s->m, s->rows + a * K, s->rows + b * K, NULL, &s->soft[a * P + b]);
  for (int a = 0; a < P; a++)
    for (int b = 0; b < a; b++) s->soft[a * P + b] = s->soft[b * P + a];
  s->alike = 0;
  for (int a = 0; a < P && s->alike_on; a++)
    for (int b = a + 1; b < P; b++) {
      s->pairsum[a * P + b] = s_pair_sum(s, s->rows + a * K, s->rows + b * K);
      s->alike += s->pairsum[a * P + b];
    }
  for (int i = 0; i < P; i++) s->order[i] = i;
  s->path = s->mode == ASSIGN_ORDER_KEEP
                ? s_path(s, s->edge, s->order)
                : assign_tsp_open_path(P, s->edge, P <= ASSIGN_SEARCH_TSP_EXACT_MAX, s->order);
  s->cost = s_total(s, s->dp, s->path);
  s->tie = rowsum + s_path_soft(s, s->soft, s->order);
  s->evals++;
}

void assign_search_load_labels(assign_search *s, const int *label) {
  int *rows = wt_xmalloc((size_t)s->n * sizeof(int)), *fill = wt_xcalloc((size_t)s->P, sizeof(int));
  for (int d = 0; d < s->n; d++) {
    assert(label[d] >= 0 && label[d] < s->P && fill[label[d]] < s->K);
    rows[label[d] * s->K + fill[label[d]]++] = d;
  }
  assign_search_load_rows(s, rows);
  free(rows);
  free(fill);
}

/* DATAP of row r after replacing member `out` (at slot) by `in`; new sums into tsum. */
static double s_swapped_row(assign_search *s, int r, int slot, int in, int *trow, double *tsum) {
  const double *dpc = s->m->dpc;
  int n = s->n, K = s->K, out = s->rows[r * K + slot];
  memcpy(trow, s->rows + r * K, (size_t)K * sizeof(int));
  trow[slot] = in;
  double worst = 0, in_sum = 0;
  for (int i = 0; i < K; i++) {
    if (i == slot) continue;
    int d = trow[i];
    tsum[i] = s->sum[d] - dpc[d * n + out] + dpc[d * n + in];
    in_sum += dpc[in * n + d];
    worst = assign_dmax(worst, tsum[i]);
  }
  tsum[slot] = in_sum;
  /* the sums are kept in ring mode too, so the state stays consistent if the term changes */
  return s_ring(s) ? assign_model_group_dp(s->m, trow) : assign_dmax(worst, in_sum);
}

/* A swap is evaluated with the pipeline order held, so only the edges of the two rows to their
 * path neighbours matter (at most 4 matchings instead of 2(P−1)); a commit then refreshes the
 * rest and re-orders (Held–Karp up to ASSIGN_SEARCH_TSP_EXACT_MAX groups, 2-opt above). The
 * held-order cost is a real plan's cost, so it never flatters a move. Measured on the world-wide
 * scenario this ranks moves well enough and gives 4-10x more evaluations per second than
 * re-ordering every candidate. */
static int s_need_edge(const assign_search *s, int a, int r) {
  for (int i = 0; i + 1 < s->P; i++) {
    int u = s->order[i], v = s->order[i + 1];
    if ((u == a && v == r) || (u == r && v == a)) return 1;
  }
  return 0;
}

static void s_set_edge(assign_search *s, double *edge, double *soft, int a, int r, const int *rowa,
                       const int *rowr) {
  int P = s->P;
  edge[a * P + r] = edge[r * P + a] = assign_model_edge(s->m, rowa, rowr, NULL, &soft[a * P + r]);
  soft[r * P + a] = soft[a * P + r];
}

double assign_search_try_swap(assign_search *s, int x, int y, double bound) {
  int a = s->label[x], b = s->label[y], P = s->P, K = s->K;
  assert(a != b);
  s->evals++;
  s->t_complete = 0;
  s->t_x = x;
  s->t_y = y;
  s->t_dpa = s_swapped_row(s, a, s->slot[x], y, s->t_rowa, s->t_sum_a);
  s->t_dpb = s_swapped_row(s, b, s->slot[y], x, s->t_rowb, s->t_sum_b);
  s->t_dp = assign_dmax(s->t_dpa, s->t_dpb);
  double rowsum = 0;
  for (int r = 0; r < P; r++) {
    double v = r == a ? s->t_dpa : r == b ? s->t_dpb : s->rowdp[r];
    s->t_dp = assign_dmax(s->t_dp, v);
    rowsum += v;
  }
  if (s_total(s, s->t_dp, 0) > bound * (1 + 1e-12)) return INFINITY;
  memcpy(s->t_edge, s->edge, (size_t)P * P * sizeof(double));
  memcpy(s->t_soft, s->soft, (size_t)P * P * sizeof(double));
  for (int r = 0; r < P; r++) {
    if (r == a) continue;
    const int *row = r == b ? s->t_rowb : s->rows + r * K;
    if (s_need_edge(s, a, r)) s_set_edge(s, s->t_edge, s->t_soft, a, r, s->t_rowa, row);
    if (r != b && s_need_edge(s, b, r)) s_set_edge(s, s->t_edge, s->t_soft, b, r, s->t_rowb, row);
  }
  memcpy(s->t_order, s->order, (size_t)P * sizeof(int));
  s->t_path = s_path(s, s->t_edge, s->t_order);
  s->t_cost = s_total(s, s->t_dp, s->t_path);
  s->t_tie = rowsum + s_path_soft(s, s->t_soft, s->t_order);
  s->t_complete = 1;
  return s->t_cost;
}

double assign_search_try_alike(assign_search *s, int x, int y) {
  int a = s->label[x], b = s->label[y], K = s->K, P = s->P;
  assert(a != b && s->alike_on);
  s->evals++;
  memcpy(s->t_rowa, s->rows + a * K, (size_t)K * sizeof(int));
  memcpy(s->t_rowb, s->rows + b * K, (size_t)K * sizeof(int));
  s->t_rowa[s->slot[x]] = y;
  s->t_rowb[s->slot[y]] = x;
  memcpy(s->t_pairsum, s->pairsum, (size_t)P * P * sizeof(double));
  s->t_complete = 0; /* the rows above are not a full tentative state */
  return s_pair_sums(s, s->t_pairsum, a, s->t_rowa, b, s->t_rowb);
}

/* After a lazy commit: every edge of rows a and b, then a 2-opt pass from the held order. */
static void s_refresh(assign_search *s, int a, int b) {
  int P = s->P, K = s->K;
  for (int r = 0; r < P; r++) {
    if (r != a) s_set_edge(s, s->edge, s->soft, a, r, s->rows + a * K, s->rows + r * K);
    if (r != b && r != a) s_set_edge(s, s->edge, s->soft, b, r, s->rows + b * K, s->rows + r * K);
  }
  if (s->alike_on) s->alike = s_pair_sums(s, s->pairsum, a, s->rows + a * K, b, s->rows + b * K);
  s->path = P <= ASSIGN_SEARCH_TSP_EXACT_MAX ? assign_tsp_open_path(P, s->edge, 1, s->order)
                                             : assign_tsp_improve(P, s->edge, s->order);
  s->cost = s_total(s, s->dp, s->path);
  double rowsum = 0;
  for (int r = 0; r < P; r++) rowsum += s->rowdp[r];
  s->tie = rowsum + s_path_soft(s, s->soft, s->order);
}

void assign_search_commit_swap(assign_search *s, int x, int y) {
  int a = s->label[x], b = s->label[y], K = s->K, P = s->P;
  if (!s->t_complete || s->t_x != x || s->t_y != y) assign_search_try_swap(s, x, y, INFINITY);
  memcpy(s->rows + a * K, s->t_rowa, (size_t)K * sizeof(int));
  memcpy(s->rows + b * K, s->t_rowb, (size_t)K * sizeof(int));
  for (int i = 0; i < K; i++) {
    s->sum[s->t_rowa[i]] = s->t_sum_a[i];
    s->sum[s->t_rowb[i]] = s->t_sum_b[i];
  }
  s->label[x] = b;
  s->label[y] = a;
  int sx = s->slot[x];
  s->slot[x] = s->slot[y];
  s->slot[y] = sx;
  s->rowdp[a] = s->t_dpa;
  s->rowdp[b] = s->t_dpb;
  memcpy(s->edge, s->t_edge, (size_t)P * P * sizeof(double));
  memcpy(s->soft, s->t_soft, (size_t)P * P * sizeof(double));
  memcpy(s->order, s->t_order, (size_t)P * sizeof(int));
  s->dp = s->t_dp;
  s->path = s->t_path;
  s->cost = s->t_cost;
  s->tie = s->t_tie;
  s->t_complete = 0;
  if (s->mode != ASSIGN_ORDER_KEEP) s_refresh(s, a, b);
}

/* Equal within a relative 1e-9: costs are sums of the same terms in different orders. */
static int s_cmp1(double a, double b) {
  if (a == b) return 0;
  if (isinf(a) || isinf(b)) return a < b ? -1 : 1;
  double eps = 1e-9 * assign_dmax(fabs(a), fabs(b));
  return a < b - eps ? -1 : a > b + eps ? 1 : 0;
}

int assign_search_cmp(double ca, double ta, double cb, double tb) {
  int c = s_cmp1(ca, cb);
  return c ? c : s_cmp1(ta, tb);
}

assign_cost assign_search_to_plan(assign_search *s, assign_plan *plan) {
  memcpy(plan->device, s->rows, (size_t)s->n * sizeof(int));
  assign_order_mode mode = s->mode == ASSIGN_ORDER_KEEP ? ASSIGN_ORDER_KEEP : ASSIGN_ORDER_EXACT;
  return assign_model_partition_cost(s->m, plan->device, mode);
}
