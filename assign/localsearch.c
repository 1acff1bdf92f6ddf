/* localsearch — the paper's cyclic local search, in the spirit of Kang & Moon's chains of moves.
 *
 * One chain: starting from the current partition, repeatedly apply the best of a sample of swaps
 * (two devices of different groups trade places), even when it makes the cost worse, and lock
 * the two devices for the rest of the chain; then roll back to the best prefix of the chain.
 * Because the cost is a max (of group DATAPs, of matched pairs), most single swaps leave it
 * unchanged; two things keep the search moving on such plateaus: moves are ranked by
 * (cost, tie) where tie = Σ over groups of DATAP(C) (the non-bottleneck groups still improve),
 * and a chain walks through equal or worse states before judging its best prefix.
 * Half of the sampled swaps take their first device from a critical group — the group with the
 * largest DATAP or an end of the most expensive pipeline edge, where a swap can lower the max
 * at all — and half of those take that group's worst member (largest DATAP sum, or farthest
 * from the group across the edge).
 */
#include "assign/assign_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  int x, y;
} s_move;

/* The member of row r farthest from its nearest partner in row c (pipeline cost). */
static int s_farthest_member(const assign_search *s, int r, int c) {
  const double *ppc = s->m->ppc;
  int K = s->K, n = s->n, best = s->rows[r * K];
  double best_v = -1;
  for (int i = 0; i < K; i++) {
    int d = s->rows[r * K + i];
    double near = INFINITY;
    for (int j = 0; j < K; j++) near = assign_dmin(near, ppc[d * n + s->rows[c * K + j]]);
    if (near > best_v) best_v = near, best = d;
  }
  return best;
}

/* A group where a swap can lower the cost — the DATAP-max group or an end of the longest edge on
 * the pipeline path — and the member that makes it so: the one with the largest DATAP sum, or
 * the one farthest from the group at the other end of the edge. */
static int s_critical_row(const assign_search *s, wt_rng *rng, int *worst, int *across) {
  int P = s->P, K = s->K;
  *across = -1;
  if (P < 2 || wt_rng_below(rng, 2) == 0) {
    int best = 0;
    for (int r = 1; r < P; r++)
      if (s->rowdp[r] > s->rowdp[best]) best = r;
    *worst = s->rows[best * K];
    for (int i = 1; i < K; i++)
      if (s->sum[s->rows[best * K + i]] > s->sum[*worst]) *worst = s->rows[best * K + i];
    return best;
  }
  int at = 0;
  for (int i = 1; i + 1 < P; i++)
    if (s->edge[s->order[i] * P + s->order[i + 1]] > s->edge[s->order[at] * P + s->order[at + 1]])
      at = i;
  int end = (int)wt_rng_below(rng, 2), r = s->order[at + end], c = s->order[at + 1 - end];
  *worst = s_farthest_member(s, r, c);
  *across = c;
  return r;
}

/* Of a few random unlocked devices outside row r, the one nearest to row c. */
static int s_pick_near(const assign_search *s, wt_rng *rng, const char *locked, int r, int c) {
  const double *ppc = s->m->ppc;
  int K = s->K, n = s->n, best = -1;
  double best_v = INFINITY;
  for (int tries = 0; tries < 8; tries++) {
    int d = (int)wt_rng_below(rng, (uint64_t)n);
    if (locked[d] || s->label[d] == r) continue;
    double near = INFINITY;
    for (int j = 0; j < K; j++) near = assign_dmin(near, ppc[d * n + s->rows[c * K + j]]);
    if (near < best_v) best_v = near, best = d;
  }
  return best;
}

static int s_pick_unlocked(const assign_search *s, wt_rng *rng, const char *locked, int row,
                           int not_row) {
  for (int tries = 0; tries < 4 * s->K + 8; tries++) {
    int d = row >= 0 ? s->rows[row * s->K + (int)wt_rng_below(rng, (uint64_t)s->K)]
                     : (int)wt_rng_below(rng, (uint64_t)s->n);
    if (!locked[d] && s->label[d] != not_row) return d;
  }
  return -1;
}

/* The best of `samples` random swaps among unlocked devices; returns 0 if none was found. */
static int s_best_swap(assign_search *s, wt_rng *rng, const char *locked, int samples, s_move *mv) {
  double best_c = INFINITY, best_t = INFINITY;
  int found = 0;
  for (int i = 0; i < samples; i++) {
    /* a quarter of the samples move the worst member of a critical group, a quarter a random
     * member of it, half any device */
    int worst = -1, across = -1, crit = i % 2 == 0 ? s_critical_row(s, rng, &worst, &across) : -1;
    int targeted = i % 4 == 0 && !locked[worst];
    int x = targeted ? worst : s_pick_unlocked(s, rng, locked, crit, -1);
    /* the worst member across an edge is traded for a device close to the far group */
    int y = targeted && across >= 0 ? s_pick_near(s, rng, locked, crit, across) : -1;
    if (y < 0) y = x < 0 ? -1 : s_pick_unlocked(s, rng, locked, -1, s->label[x]);
    if (y < 0) continue;
    double c = assign_search_try_swap(s, x, y, best_c);
    if (!s->t_complete) continue;
    if (assign_search_cmp(c, s->t_tie, best_c, best_t) < 0) {
      best_c = c;
      best_t = s->t_tie;
      *mv = (s_move){x, y};
      found = 1;
    }
  }
  return found;
}

/* One chain; returns 1 if its best prefix is strictly better than where it started. */
static int s_chain(assign_search *s, assign_tracker *t, wt_rng *rng, int len, int samples,
                   char *locked, s_move *log) {
  double best_c = s->cost, best_t = s->tie;
  int best_len = 0, steps = 0;
  memset(locked, 0, (size_t)s->n);
  while (steps < len && !assign_tracker_done(t)) {
    s_move mv;
    if (!s_best_swap(s, rng, locked, samples, &mv)) break;
    assign_search_commit_swap(s, mv.x, mv.y);
    locked[mv.x] = locked[mv.y] = 1;
    log[steps++] = mv;
    assign_tracker_offer(t, s->cost);
    if (assign_search_cmp(s->cost, s->tie, best_c, best_t) < 0) {
      best_c = s->cost;
      best_t = s->tie;
      best_len = steps;
    }
  }
  while (steps > best_len) { /* undo past the best prefix: a swap is its own inverse */
    steps--;
    assign_search_commit_swap(s, log[steps].y, log[steps].x);
  }
  return best_len > 0;
}

/* The swap that lowers the all-pairs matching sum most (the surrogate), or 0 if none does. */
static int s_surrogate_step(assign_search *s, assign_tracker *t, s_move *mv) {
  double ba = s->alike;
  int found = 0;
  for (int x = 0; x < s->n && !assign_tracker_done(t); x++)
    for (int y = x + 1; y < s->n; y++) {
      if (s->label[x] == s->label[y]) continue;
      double v = assign_search_try_alike(s, x, y);
      if (assign_search_cmp(0, v, 0, ba) < 0) ba = v, *mv = (s_move){x, y}, found = 1;
    }
  return found;
}

/* A chain led by the surrogate instead of the cost: groups become alike (every member finds a
 * like partner in every other group), which is what lets pipelines stay local, through states
 * whose cost is worse; the chain then rolls back to its best prefix by (cost, tie). */
static int s_surrogate_chain(assign_search *s, assign_tracker *t, int len, s_move *log) {
  double best_c = s->cost, best_t = s->tie;
  int best_len = 0, steps = 0;
  s_move mv;
  while (steps < len && !assign_tracker_done(t) && s_surrogate_step(s, t, &mv)) {
    assign_search_commit_swap(s, mv.x, mv.y);
    log[steps++] = mv;
    assign_tracker_offer(t, s->cost);
    if (assign_search_cmp(s->cost, s->tie, best_c, best_t) < 0)
      best_c = s->cost, best_t = s->tie, best_len = steps;
  }
  while (steps > best_len) {
    steps--;
    assign_search_commit_swap(s, log[steps].y, log[steps].x);
  }
  return best_len > 0;
}

int assign_local_search(assign_search *s, assign_tracker *t, wt_rng *rng, int max_rounds) {
  if (s->P < 2) return 0; /* one group: nothing to swap */
  /* chain length and samples per step: tried 16..128 × 24..32 on the world-wide scenario; 32 × 24
   * was the most consistent */
  int len = WT_MAX(2, WT_MIN(s->n / 2, 24));
  int samples = WT_MIN(32, s->n * (s->n - s->K) / 2);
  char *locked = wt_xmalloc((size_t)s->n);
  s_move *log = wt_xmalloc((size_t)len * sizeof(s_move));
  int improved = 0;
  for (int round = 0; round < max_rounds && !assign_tracker_done(t); round++) {
    if (!s_chain(s, t, rng, len, samples, locked, log)) break;
    improved = 1;
  }
  /* the surrogate chain scans every swap: only where there are few (the world-wide scenario has
   * 1792); chains of up to n/4 steps reached 49.218 from random starts for seeds 1..20 (8 steps
   * for 10 of 10, 4 or 6 steps for fewer) */
  if (s->alike_on && !assign_tracker_done(t)) {
    s_move *slog = wt_xmalloc((size_t)s->n * sizeof(s_move));
    if (s_surrogate_chain(s, t, WT_MAX(2, s->n / 4), slog)) improved = 1;
    free(slog);
  }
  free(locked);
  free(log);
  return improved;
}
