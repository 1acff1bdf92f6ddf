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

/* Grows group r from its seed: each step adds the unplaced device whose arrival leaves the
 * smallest largest per-member sum (the group's DATAP under the sharded PS model). Candidates are
 * scored member by member along each member's row of costs (symmetric), so the O(n·K) work of a
 * step streams through memory; own[d] (d's sum to the members) only grows and is kept. */
static void s_grow(const assign_model *m, int r, int *label, int *members, double *sum, double *far,
                   double *own, double *worst) {
  int n = m->n, K = m->K;
  for (int d = 0; d < n; d++) own[d] = m->dpc[(size_t)members[0] * n + d];
  for (int size = 1; size < K; size++) {
    for (int d = 0; d < n; d++) worst[d] = own[d];
    for (int i = 0; i < size; i++) {
      const double *row = m->dpc + (size_t)members[i] * n;
      for (int d = 0; d < n; d++) worst[d] = assign_dmax(worst[d], sum[i] + row[d]);
    }
    int pick = -1;
    double pick_cost = INFINITY;
    for (int d = 0; d < n; d++)
      if (label[d] < 0 && worst[d] < pick_cost) pick_cost = worst[d], pick = d;
    const double *prow = m->dpc + (size_t)pick * n;
    for (int i = 0; i < size; i++) sum[i] += prow[members[i]];
    sum[size] = own[pick];
    members[size] = pick;
    label[pick] = r;
    s_far_place(m, m->dpc, far, pick);
    for (int d = 0; d < n; d++) own[d] += prow[d];
  }
}

static void s_greedy_groups(const assign_model *m, int *labels) {
  int *members = wt_xmalloc((size_t)m->K * sizeof(int));
  double *sum = wt_xmalloc((size_t)m->K * sizeof(double));
  double *far = s_far_new(m, m->dpc);
  double *own = wt_xmalloc((size_t)m->n * sizeof(double)),
         *worst = wt_xmalloc((size_t)m->n * sizeof(double));
  for (int d = 0; d < m->n; d++) labels[d] = -1;
  for (int r = 0; r < m->P; r++) {
    members[0] = s_farthest(m, far, labels);
    labels[members[0]] = r;
    s_far_place(m, m->dpc, far, members[0]);
    sum[0] = 0;
    s_grow(m, r, labels, members, sum, far, own, worst);
  }
  free(members);
  free(sum);
  free(far);
  free(own);
  free(worst);
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
