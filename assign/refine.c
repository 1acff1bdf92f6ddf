/* refine — local search on a laid-out plan (rows in pipeline order, columns matched) for large
 * instances, where re-matching and re-ordering after every move cannot keep up.
 *
 * The state holds, for the layout as it stands, each device's DATAP sum within its row, each
 * row's DATAP, every hop (the pipeline pair cost between a device and the next stage's device of
 * its column) and each cut's largest hop. Swapping two devices changes at most two rows and the
 * hops of two columns at no more than four cuts, so a move is priced in O(K + P) (ring DATAP:
 * the two rows' ring orders), whatever n is. The held layout's cost is a real plan's cost
 * (assign_plan_cost of the layout), so a move never looks better than it is; the final ordering
 * and matching can only lower it further.
 *
 * Moves: a device at a critical place — an end of a cut's slowest hop, or the member with the
 * largest DATAP sum in the DATAP-max row — traded with the nearest devices (by pipeline pair cost)
 * of its pipeline neighbours, or of itself: the places where a device could sit with short hops.
 * A swap inside a row re-matches two columns. Moves are ranked by (cost, tie), tie = Σ rows'
 * DATAP + Σ all hops: the cost is a sum of maxima, so most swaps leave it unchanged, and the sums
 * rank them on that plateau. When a sweep over every cut finds nothing, a few random swaps among
 * neighbours kick the layout, and the search goes back to the best layout if the descent from
 * there ends worse (iterated local search).
 */
#include "assign/assign_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* nearest neighbours per device kept for candidate moves */
#define S_KNN 12

static int s_ring(const assign_refine *r) {
  return r->m->p->dp_algo == ASSIGN_DP_RING;
}

/* The L devices with the smallest ppc to d (partial selection; O(n·L)). */
static void s_knn_row(const assign_model *m, int d, int L, int *out) {
  const double *row = m->ppc + (size_t)d * m->n;
  double best[S_KNN];
  int cnt = 0;
  for (int e = 0; e < m->n; e++) {
    if (e == d) continue;
    double v = row[e];
    if (cnt == L && v >= best[L - 1]) continue;
    int i = cnt < L ? cnt++ : L - 1;
    while (i > 0 && best[i - 1] > v) best[i] = best[i - 1], out[i] = out[i - 1], i--;
    best[i] = v;
    out[i] = e;
  }
  for (int i = cnt; i < L; i++) out[i] = out[0];
}

void assign_refine_init(assign_refine *r, assign_model *m, long *evals) {
  int n = m->n, P = m->P, K = m->K;
  memset(r, 0, sizeof *r);
  r->m = m;
  r->n = n;
  r->P = P;
  r->K = K;
  r->evals = evals;
  r->t_x = r->t_y = -1;
  r->dev = wt_xmalloc((size_t)n * sizeof(int));
  r->pos = wt_xmalloc((size_t)n * sizeof(int));
  r->sum = wt_xcalloc((size_t)n, sizeof(double));
  r->rowdp = wt_xcalloc((size_t)P, sizeof(double));
  r->hop = wt_xcalloc((size_t)n, sizeof(double));
  r->cutmax = wt_xcalloc((size_t)P, sizeof(double));
  r->cut2 = wt_xcalloc((size_t)P, sizeof(double));
  r->cutarg = wt_xcalloc((size_t)P, sizeof(int));
  r->t_sum = wt_xmalloc((size_t)2 * K * sizeof(double));
  r->t_row = wt_xmalloc((size_t)K * sizeof(int));
  r->L = WT_MIN(S_KNN, n - 1);
  r->knn = wt_xmalloc((size_t)n * WT_MAX(1, r->L) * sizeof(int));
  for (int d = 0; d < n && r->L > 0; d++) s_knn_row(m, d, r->L, r->knn + (size_t)d * r->L);
}

void assign_refine_free(assign_refine *r) {
  void *bufs[] = {r->dev,  r->pos,    r->sum,   r->rowdp, r->hop, r->cutmax,
                  r->cut2, r->cutarg, r->t_sum, r->t_row, r->knn};
  for (size_t i = 0; i < WT_ARRAY_LEN(bufs); i++) free(bufs[i]);
  memset(r, 0, sizeof *r);
}

static double s_total(const assign_refine *r, double dp, double path) {
  return r->m->feasible ? dp + 2 * path + r->m->compute_s : INFINITY;
}

static double s_ppc(const assign_refine *r, int a, int b) {
  return r->m->ppc[(size_t)a * r->n + b];
}

/* Recomputes every total from the per-row and per-cut terms. */
static void s_totals(assign_refine *r) {
  int P = r->P, K = r->K;
  double dp = 0, rows = 0, path = 0, hops = 0;
  for (int s = 0; s < P; s++) dp = assign_dmax(dp, r->rowdp[s]), rows += r->rowdp[s];
  for (int s = 0; s + 1 < P; s++) {
    path += r->cutmax[s];
    for (int c = 0; c < K; c++) hops += r->hop[s * K + c];
  }
  r->dp = dp;
  r->path = path;
  r->hops = hops;
  r->cost = s_total(r, dp, path);
  r->tie = rows + hops;
}

static void s_eval_row(assign_refine *r, int s) {
  int K = r->K, n = r->n;
  const int *row = r->dev + s * K;
  double worst = 0;
  for (int i = 0; i < K; i++) {
    double acc = 0;
    for (int j = 0; j < K; j++) acc += r->m->dpc[(size_t)row[i] * n + row[j]];
    r->sum[row[i]] = acc;
    worst = assign_dmax(worst, acc);
  }
  r->rowdp[s] = s_ring(r) ? assign_model_group_dp(r->m, row) : worst;
}

/* Prices cut s's hops, its slowest hop (and column) and the slowest of the other columns. */
static void s_eval_cut(assign_refine *r, int s) {
  int K = r->K, arg = 0;
  double mx = 0, second = 0;
  for (int c = 0; c < K; c++) {
    double h = s_ppc(r, r->dev[s * K + c], r->dev[(s + 1) * K + c]);
    r->hop[s * K + c] = h;
    if (h > mx)
      second = mx, mx = h, arg = c;
    else
      second = assign_dmax(second, h);
  }
  r->cutmax[s] = mx;
  r->cutarg[s] = arg;
  r->cut2[s] = second;
}

void assign_refine_load(assign_refine *r, const int *layout) {
  memcpy(r->dev, layout, (size_t)r->n * sizeof(int));
  for (int i = 0; i < r->n; i++) r->pos[r->dev[i]] = i;
  for (int s = 0; s < r->P; s++) s_eval_row(r, s);
  for (int s = 0; s + 1 < r->P; s++) s_eval_cut(r, s);
  s_totals(r);
  (*r->evals)++;
}

/* The device at place i once x and y have traded places. */
static int s_at(const assign_refine *r, int i, int x, int y) {
  int d = r->dev[i];
  return d == x ? y : d == y ? x : d;
}

/* DATAP of row s after member `out` is replaced by `in`; the members' new sums go to tsum (in row
 * order). */
static double s_row_swapped(assign_refine *r, int s, int out, int in, double *tsum) {
  int K = r->K, n = r->n;
  const double *dpc = r->m->dpc;
  const int *row = r->dev + s * K;
  double worst = 0, in_sum = 0;
  int at = 0;
  for (int i = 0; i < K; i++) {
    int d = row[i];
    if (d == out) {
      at = i;
      continue;
    }
    tsum[i] = r->sum[d] - dpc[(size_t)d * n + out] + dpc[(size_t)d * n + in];
    in_sum += dpc[(size_t)in * n + d];
    worst = assign_dmax(worst, tsum[i]);
  }
  tsum[at] = in_sum;
  if (!s_ring(r)) return assign_dmax(worst, in_sum);
  memcpy(r->t_row, row, (size_t)K * sizeof(int));
  r->t_row[at] = in;
  return assign_model_group_dp(r->m, r->t_row);
}

/* The cuts whose hops the swap of places px and py changes (sorted, unique); returns how many. */
static int s_cuts(const assign_refine *r, int px, int py, int *cuts) {
  int K = r->K, P = r->P, cnt = 0;
  const int cand[4] = {px / K - 1, px / K, py / K - 1, py / K};
  for (int i = 0; i < 4; i++) {
    int s = cand[i], dup = 0;
    if (s < 0 || s + 1 >= P) continue;
    for (int j = 0; j < cnt; j++) dup |= cuts[j] == s;
    if (!dup) cuts[cnt++] = s;
  }
  return cnt;
}

/* Largest hop and the hop sum of cut s after x and y trade places (only columns cx, cy change). */
static void s_cut_swapped(const assign_refine *r, int s, int x, int y, int cx, int cy, double *mx,
                          double *sum) {
  int K = r->K;
  double m = 0, delta = 0;
  for (int c = 0; c < K; c++) {
    double h = r->hop[s * K + c];
    if (c == cx || c == cy) {
      double nh = s_ppc(r, s_at(r, s * K + c, x, y), s_at(r, (s + 1) * K + c, x, y));
      delta += nh - h;
      h = nh;
    }
    m = assign_dmax(m, h);
  }
  *mx = m;
  *sum = delta;
}

double assign_refine_try_swap(assign_refine *r, int x, int y) {
  int K = r->K, P = r->P, px = r->pos[x], py = r->pos[y], sx = px / K, sy = py / K;
  (*r->evals)++;
  double dpx = r->rowdp[sx], dpy = r->rowdp[sy];
  if (sx != sy) {
    dpx = s_row_swapped(r, sx, x, y, r->t_sum);
    dpy = s_row_swapped(r, sy, y, x, r->t_sum + K);
  }
  double dp = 0, rows = 0;
  for (int s = 0; s < P; s++) {
    double v = s == sx ? dpx : s == sy ? dpy : r->rowdp[s];
    dp = assign_dmax(dp, v);
    rows += v;
  }
  int cuts[4], nc = s_cuts(r, px, py, cuts);
  double path = r->path, hops = r->hops;
  for (int i = 0; i < nc; i++) {
    double mx, dsum;
    s_cut_swapped(r, cuts[i], x, y, px % K, py % K, &mx, &dsum);
    path += mx - r->cutmax[cuts[i]];
    hops += dsum;
  }
  r->t_x = x;
  r->t_y = y;
  r->t_dpx = dpx;
  r->t_dpy = dpy;
  r->t_cost = s_total(r, dp, path);
  r->t_tie = rows + hops;
  return r->t_cost;
}

void assign_refine_commit_swap(assign_refine *r, int x, int y) {
  int K = r->K, px = r->pos[x], py = r->pos[y], sx = px / K, sy = py / K;
  if (r->t_x != x || r->t_y != y) assign_refine_try_swap(r, x, y);
  if (sx != sy) {
    const int *rx = r->dev + sx * K, *ry = r->dev + sy * K;
    for (int i = 0; i < K; i++) {
      r->sum[rx[i] == x ? y : rx[i]] = r->t_sum[i];
      r->sum[ry[i] == y ? x : ry[i]] = r->t_sum[K + i];
    }
    r->rowdp[sx] = r->t_dpx;
    r->rowdp[sy] = r->t_dpy;
  }
  r->dev[px] = y;
  r->dev[py] = x;
  r->pos[x] = py;
  r->pos[y] = px;
  int cuts[4], nc = s_cuts(r, px, py, cuts);
  for (int i = 0; i < nc; i++) s_eval_cut(r, cuts[i]);
  /* totals from the terms, so rounding does not drift over millions of moves */
  s_totals(r);
  r->t_x = r->t_y = -1;
}

/* The device at stage s of column c once stages s1..s2 of that column are reversed. */
static int s_rev_at(const assign_refine *r, int s, int c, int s1, int s2) {
  return r->dev[((s >= s1 && s <= s2) ? s1 + s2 - s : s) * r->K + c];
}

double assign_refine_try_reverse(assign_refine *r, int c, int s1, int s2, double bound) {
  int K = r->K, P = r->P;
  (*r->evals)++;
  double dp = 0, rows = 0, path = r->path, hops = r->hops;
  /* the hops first: they live in one small table, while the rows' DATAP reads scattered pair
   * costs, so a reversal that lengthens the path is rejected before touching them */
  for (int s = WT_MAX(0, s1 - 1); s <= WT_MIN(P - 2, s2); s++) {
    double nh = s_ppc(r, s_rev_at(r, s, c, s1, s2), s_rev_at(r, s + 1, c, s1, s2));
    double others = r->cutarg[s] == c ? r->cut2[s] : r->cutmax[s];
    path += assign_dmax(nh, others) - r->cutmax[s];
    hops += nh - r->hop[s * K + c];
  }
  r->t_x = r->t_y = -1;
  for (int s = 0; s < P; s++)
    if (s < s1 || s > s2) dp = assign_dmax(dp, r->rowdp[s]);
  if (s_total(r, dp, path) > bound * (1 + 1e-12)) {
    r->t_tie = INFINITY;
    return r->t_cost = INFINITY;
  }
  for (int s = 0; s < P; s++) {
    double v = r->rowdp[s];
    int out = r->dev[s * K + c], in = s_rev_at(r, s, c, s1, s2);
    if (in != out) v = s_row_swapped(r, s, out, in, r->t_sum);
    dp = assign_dmax(dp, v);
    rows += v;
  }
  r->t_cost = s_total(r, dp, path);
  r->t_tie = rows + hops;
  return r->t_cost;
}

void assign_refine_commit_reverse(assign_refine *r, int c, int s1, int s2) {
  int K = r->K, P = r->P;
  for (int a = s1, b = s2; a < b; a++, b--) {
    int x = r->dev[a * K + c], y = r->dev[b * K + c];
    r->dev[a * K + c] = y;
    r->dev[b * K + c] = x;
    r->pos[y] = a * K + c;
    r->pos[x] = b * K + c;
  }
  for (int s = s1; s <= s2; s++) s_eval_row(r, s);
  for (int s = WT_MAX(0, s1 - 1); s <= WT_MIN(P - 2, s2); s++) s_eval_cut(r, s);
  s_totals(r);
  r->t_x = r->t_y = -1;
}

/* ---- the search ---------------------------------------------------------------------------- */

/* The best improving swap of x with a candidate near one of `anchors`; 1 if one was committed. */
static int s_improve_place(assign_refine *r, int x, const int *anchors, int n_anchors) {
  double bc = r->cost, bt = r->tie;
  int by = -1;
  for (int a = 0; a < n_anchors; a++) {
    const int *nb = r->knn + (size_t)anchors[a] * r->L;
    for (int i = 0; i < r->L; i++) {
      int y = nb[i];
      if (y == x) continue;
      double c = assign_refine_try_swap(r, x, y);
      if (assign_search_cmp(c, r->t_tie, bc, bt) < 0) bc = c, bt = r->t_tie, by = y;
    }
  }
  if (by < 0) return 0;
  assign_refine_commit_swap(r, x, by);
  return 1;
}

/* Tries to move device x (at place p) next to its pipeline neighbours or near itself. */
static int s_improve_device(assign_refine *r, int x) {
  int K = r->K, p = r->pos[x], anchors[3], na = 0;
  if (p >= K) anchors[na++] = r->dev[p - K];
  if (p + K < r->n) anchors[na++] = r->dev[p + K];
  anchors[na++] = x;
  return s_improve_place(r, x, anchors, na);
}

/* The best improving reversal of column c that moves the hop at cut s elsewhere: stages s+1..s2
 * or s1..s reversed; 1 if one was committed. Each hop of a pipeline keeps its length but lands on
 * another cut, so a slow hop can go where that cut's slowest hop is slower anyway. */
static int s_improve_reverse(assign_refine *r, int s, int c) {
  double bc = r->cost, bt = r->tie;
  int b1 = -1, b2 = -1;
  for (int e = 0; e < r->P; e++) {
    int s1 = e > s ? s + 1 : e, s2 = e > s ? e : s;
    if (s2 - s1 < 1) continue;
    double cost = assign_refine_try_reverse(r, c, s1, s2, bc);
    if (assign_search_cmp(cost, r->t_tie, bc, bt) < 0) bc = cost, bt = r->t_tie, b1 = s1, b2 = s2;
  }
  if (b1 < 0) return 0;
  assign_refine_commit_reverse(r, c, b1, b2);
  return 1;
}

/* One sweep: both ends of every cut's slowest hop, and the worst member of the DATAP-max row.
 * Returns how many moves were committed. */
static int s_sweep(assign_refine *r, const assign_tracker *t) {
  int K = r->K, P = r->P, moved = 0;
  for (int s = 0; s + 1 < P && !assign_tracker_done(t); s++) {
    int at = 0;
    for (int c = 1; c < K; c++)
      if (r->hop[s * K + c] > r->hop[s * K + at]) at = c;
    moved += s_improve_device(r, r->dev[s * K + at]);
    moved += s_improve_device(r, r->dev[(s + 1) * K + at]);
    moved += s_improve_reverse(r, s, at);
  }
  int worst_row = 0;
  for (int s = 1; s < P; s++)
    if (r->rowdp[s] > r->rowdp[worst_row]) worst_row = s;
  int w = r->dev[worst_row * K];
  for (int i = 1; i < K; i++)
    if (r->sum[r->dev[worst_row * K + i]] > r->sum[w]) w = r->dev[worst_row * K + i];
  if (K > 1 && !assign_tracker_done(t)) moved += s_improve_device(r, w);
  return moved;
}

/* A few random swaps of devices with one of their nearest neighbours. */
static void s_kick(assign_refine *r, wt_rng *rng) {
  int swaps = 2 + (int)wt_rng_below(rng, 4);
  for (int i = 0; i < swaps; i++) {
    int x = (int)wt_rng_below(rng, (uint64_t)r->n);
    int y = r->knn[(size_t)x * r->L + wt_rng_below(rng, (uint64_t)r->L)];
    assign_refine_commit_swap(r, x, y);
  }
}

void assign_refine_run(assign_refine *r, assign_tracker *t, wt_rng *rng, long min_evals) {
  if (r->n < 2 || r->L < 1) return;
  int *best = wt_xmalloc((size_t)r->n * sizeof(int));
  memcpy(best, r->dev, (size_t)r->n * sizeof(int));
  double best_c = r->cost, best_t = r->tie;
  long start = *r->evals;
  /* The floor keeps a refinement step even when the construction used up the time budget (at
   * 10,000 devices greedy alone takes longer than the default 1 s). */
  assign_tracker floor = *t;
  floor.max_s = 0;
  floor.max_evals = start + min_evals;
  for (;;) {
    const assign_tracker *lim = *r->evals - start < min_evals ? &floor : t;
    if (assign_tracker_done(lim)) break;
    while (s_sweep(r, lim) > 0 && !assign_tracker_done(lim)) assign_tracker_offer(t, r->cost);
    if (assign_search_cmp(r->cost, r->tie, best_c, best_t) < 0) {
      best_c = r->cost, best_t = r->tie;
      memcpy(best, r->dev, (size_t)r->n * sizeof(int));
      assign_tracker_offer(t, r->cost);
    } else if (memcmp(best, r->dev, (size_t)r->n * sizeof(int)) != 0) {
      assign_refine_load(r, best);
    }
    lim = *r->evals - start < min_evals ? &floor : t;
    if (assign_tracker_done(lim)) break;
    s_kick(r, rng);
  }
  if (assign_search_cmp(r->cost, r->tie, best_c, best_t) > 0) assign_refine_load(r, best);
  free(best);
}
