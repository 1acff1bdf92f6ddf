/* baselines — random partitions and the greedy constructive heuristic.
 *
 * random: K uniformly random balanced partitions, each with its best pipeline order and
 *   bottleneck matchings; keeps the best.
 * greedy: data-parallel traffic dominates (every member talks to every other), so groups are
 *   grown one at a time: a group starts from the unplaced device that is farthest (largest
 *   summed DP cost) from the other unplaced devices — the hardest one to place — and repeatedly
 *   takes the unplaced device that raises the group's DATAP the least. The pipeline order and
 *   matchings are then optimised like every other partition.
 *   Its mirror image is tried too: pipelines are grown as nearest-neighbour chains (by the
 *   pipeline pair cost) from the farthest unplaced device, and group s takes the s-th device of
 *   every chain. The better of the two partitions is the greedy answer.
 */
#include "assign/assign_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void s_random_labels(wt_rng *rng, int P, int K, int *labels, int *perm) {
  int n = P * K;
  for (int i = 0; i < n; i++) perm[i] = i;
  wt_rng_shuffle_int(rng, perm, n);
  for (int i = 0; i < n; i++) labels[perm[i]] = i / K;
}

int assign_solve_random(assign_search *s, assign_tracker *t, wt_rng *rng, int *labels) {
  int n = s->n, *cand = wt_xmalloc((size_t)n * sizeof(int)),
      *perm = wt_xmalloc((size_t)n * sizeof(int));
  double best = INFINITY, step_s = 0;
  do {
    double t0 = wt_now_s();
    s_random_labels(rng, s->P, s->K, cand, perm);
    assign_search_load_labels(s, cand);
    if (s->cost < best) {
      best = s->cost;
      memcpy(labels, cand, (size_t)n * sizeof(int));
    }
    assign_tracker_offer(t, s->cost);
    step_s = wt_now_s() - t0; /* a partition costs seconds at 10,000 devices */
  } while (!assign_tracker_done_before(t, step_s));
  free(cand);
  free(perm);
  return WT_OK;
}

/* far[d] = Σ over unplaced devices e of cost[d][e], kept current as devices are placed: O(n) per
 * placement instead of O(n²) per search for the farthest device. */
static double *s_far_new(const assign_model *m, const double *cost) {
  int n = m->n;
  double *far = wt_xcalloc((size_t)n, sizeof(double));
  for (int d = 0; d < n; d++)
    for (int e = 0; e < n; e++) far[d] += cost[(size_t)d * n + e];
  return far;
}

/* Costs are symmetric (assign_problem_validate), so x's row serves: read along memory. */
static void s_far_place(const assign_model *m, const double *cost, double *far, int x) {
  const double *row = cost + (size_t)x * m->n;
  for (int d = 0; d < m->n; d++) far[d] -= row[d];
}

/* The unplaced device with the largest summed cost to the other unplaced devices; among sums
 * equal to within rounding (identical devices), the lowest id, so the pick does not depend on
 * the order the sums were accumulated in. */
static int s_farthest(const assign_model *m, const double *far, const int *label) {
  int best = -1;
  double best_sum = -INFINITY;
  for (int d = 0; d < m->n; d++)
    if (label[d] < 0 && (best < 0 || far[d] > best_sum + 1e-9 * fabs(best_sum)))
      best_sum = far[d], best = d;
  return best;
}

/* Candidates for a group: all unplaced devices while there are few, else the S_POOL(K) unplaced
 * devices nearest its seed (by DP pair cost). A group of K grows from its seed's surroundings,
 * so scoring every unplaced device at every step (O(n·K) each, O(n²·K) in all: 6 s at 10,000
 * devices) mostly scores devices that cannot win; the pool makes a group O(n + K²·pool). */
#define S_POOL(K) WT_MAX(256, 4 * (K))

static int s_cmp_key(const void *a, const void *b) {
  const double *x = a, *y = b;
  return x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : (x[1] < y[1] ? -1 : x[1] > y[1]);
}

/* Fills cand with the candidates of a group seeded at `seed`; returns how many. */
static int s_pool(const assign_model *m, int seed, const int *label, int *cand, double *key) {
  int n = m->n, cnt = 0, pool = S_POOL(m->K);
  const double *row = m->dpc + (size_t)seed * n;
  for (int d = 0; d < n; d++)
    if (label[d] < 0) key[2 * cnt] = row[d], key[2 * cnt + 1] = d, cnt++;
  if (cnt > pool) { /* sorted by (cost, id): the pool does not depend on ties' order */
    qsort(key, (size_t)cnt, 2 * sizeof(double), s_cmp_key);
    cnt = pool;
  }
  for (int i = 0; i < cnt; i++) cand[i] = (int)key[2 * i + 1];
  return cnt;
}

/* Grows group r from its seed: each step adds the candidate whose arrival leaves the smallest
 * largest per-member sum (the group's DATAP under the sharded PS model). Candidates are scored
 * member by member along each member's row of costs (symmetric); own[i] (candidate i's sum to
 * the members) only grows and is kept. */
static void s_grow(const assign_model *m, int r, int *label, int *members, double *sum, double *far,
                   double *own, double *worst, int *cand, double *key) {
  int n = m->n, K = m->K, nc = s_pool(m, members[0], label, cand, key);
  for (int i = 0; i < nc; i++) own[i] = m->dpc[(size_t)members[0] * n + cand[i]];
  for (int size = 1; size < K; size++) {
    for (int i = 0; i < nc; i++) worst[i] = own[i];
    for (int j = 0; j < size; j++) {
      const double *row = m->dpc + (size_t)members[j] * n;
      for (int i = 0; i < nc; i++) worst[i] = assign_dmax(worst[i], sum[j] + row[cand[i]]);
    }
    int pick = -1;
    double pick_cost = INFINITY;
    for (int i = 0; i < nc; i++)
      if (label[cand[i]] < 0 && worst[i] < pick_cost) pick_cost = worst[i], pick = i;
    int d = cand[pick];
    const double *prow = m->dpc + (size_t)d * n;
    for (int j = 0; j < size; j++) sum[j] += prow[members[j]];
    sum[size] = own[pick];
    members[size] = d;
    label[d] = r;
    s_far_place(m, m->dpc, far, d);
    for (int i = 0; i < nc; i++) own[i] += prow[cand[i]];
  }
}

static void s_greedy_groups(const assign_model *m, int *labels) {
  int *members = wt_xmalloc((size_t)m->K * sizeof(int));
  double *sum = wt_xmalloc((size_t)m->K * sizeof(double));
  double *far = s_far_new(m, m->dpc);
  double *own = wt_xmalloc((size_t)m->n * sizeof(double)),
         *worst = wt_xmalloc((size_t)m->n * sizeof(double));
  int *cand = wt_xmalloc((size_t)m->n * sizeof(int));
  double *key = wt_xmalloc((size_t)m->n * 2 * sizeof(double));
  for (int d = 0; d < m->n; d++) labels[d] = -1;
  for (int r = 0; r < m->P; r++) {
    members[0] = s_farthest(m, far, labels);
    labels[members[0]] = r;
    s_far_place(m, m->dpc, far, members[0]);
    sum[0] = 0;
    s_grow(m, r, labels, members, sum, far, own, worst, cand, key);
  }
  free(members);
  free(sum);
  free(far);
  free(own);
  free(worst);
  free(cand);
  free(key);
}

/* Pipelines as nearest-neighbour chains; a device's group is its position in its chain. */
static void s_greedy_pipelines(const assign_model *m, int *labels) {
  int n = m->n;
  double *far = s_far_new(m, m->ppc);
  for (int d = 0; d < n; d++) labels[d] = -1;
  for (int c = 0; c < m->K; c++) {
    int last = s_farthest(m, far, labels);
    labels[last] = 0;
    s_far_place(m, m->ppc, far, last);
    for (int pos = 1; pos < m->P; pos++) {
      int next = -1;
      for (int d = 0; d < n; d++)
        if (labels[d] < 0 && (next < 0 || m->ppc[last * n + d] < m->ppc[last * n + next])) next = d;
      labels[next] = pos;
      s_far_place(m, m->ppc, far, next);
      last = next;
    }
  }
  free(far);
}

int assign_solve_greedy(assign_search *s, assign_tracker *t, wt_rng *rng, int *labels) {
  (void)rng; /* deterministic by construction */
  int *other = wt_xmalloc((size_t)s->n * sizeof(int));
  s_greedy_groups(s->m, labels);
  assign_search_load_labels(s, labels);
  assign_tracker_offer(t, s->cost);
  double c1 = s->cost, t1 = s->tie;
  s_greedy_pipelines(s->m, other);
  assign_search_load_labels(s, other);
  assign_tracker_offer(t, s->cost);
  if (assign_search_cmp(s->cost, s->tie, c1, t1) < 0)
    memcpy(labels, other, (size_t)s->n * sizeof(int));
  free(other);
  return WT_OK;
}
