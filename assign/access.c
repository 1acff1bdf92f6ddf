/* access — the network model's shared parts: a transfer's effective path bandwidth through
 * access links, max-min fair sharing of uplinks and downlinks between concurrent transfers, and
 * the two places the cost model needs it: one step of a ring all-reduce (every member sends to
 * the next at once) and one pipeline cut (every pipeline's hop at once). Choosing a ring's order
 * under sharing lives here too: it is what makes a ring cross a site's uplink once. */
#include "assign/assign_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Rings with members sharing an access link are enumerated up to this many members. */
#define S_SHARED_RING_EXACT_MAX 7
/* Passes of the relocation search over a ring above that size, and the largest ring it runs on:
 * a pass tries k² moves of O(k²) each, ~3·10⁵ steps at 24 members. */
#define S_RELOCATE_PASSES 8
#define S_RELOCATE_MAX 24

double assign_path_Bps(const assign_problem *p, int i, int j) {
  double b = p->net->bandwidth_Bps[i * p->net->n + j];
  const assign_access *a = p->access;
  if (!a || a->link_of[i] == a->link_of[j]) return b;
  return assign_dmin(b, assign_dmin(a->up_Bps[a->link_of[i]], a->down_Bps[a->link_of[j]]));
}

int assign_access_shared(const assign_problem *p, int k, const int *devs) {
  const assign_access *a = p->access;
  if (!a) return 0;
  for (int i = 0; i < k; i++)
    for (int j = i + 1; j < k; j++)
      if (a->link_of[devs[i]] == a->link_of[devs[j]]) return 1;
  return 0;
}

/* Finds (or adds) the resource of access link `link` in direction `dir` among the first *nr. */
static int s_resource(int *key, double *cap, int *nr, int link, int dir, double c) {
  int want = 2 * link + dir;
  for (int r = 0; r < *nr; r++)
    if (key[r] == want) return r;
  key[*nr] = want;
  cap[*nr] = c;
  return (*nr)++;
}

void assign_access_share(const assign_problem *p, int F, const int *src, const int *dst,
                         double *rate) {
  const assign_access *a = p->access;
  const int n = p->net->n;
  /* Per flow: its path cap and up to two shared resources (uplink, downlink); -1 = none. */
  int *res = wt_xmalloc(sizeof(int) * 2 * (size_t)F), *key = wt_xmalloc(sizeof(int) * 2 * F);
  int *cnt = wt_xcalloc(2 * (size_t)F, sizeof(int));
  double *left = wt_xmalloc(sizeof(double) * 2 * (size_t)F);
  double *cap = wt_xmalloc(sizeof(double) * (size_t)F);
  char *frozen = wt_xcalloc((size_t)F, 1);
  int nr = 0;
  for (int f = 0; f < F; f++) {
    cap[f] = p->net->bandwidth_Bps[src[f] * n + dst[f]];
    res[2 * f] = res[2 * f + 1] = -1;
    if (!a || a->link_of[src[f]] == a->link_of[dst[f]]) continue;
    int lu = a->link_of[src[f]], ld = a->link_of[dst[f]];
    if (isfinite(a->up_Bps[lu])) res[2 * f] = s_resource(key, left, &nr, lu, 0, a->up_Bps[lu]);
    if (isfinite(a->down_Bps[ld]))
      res[2 * f + 1] = s_resource(key, left, &nr, ld, 1, a->down_Bps[ld]);
  }
  for (int i = 0; i < 2 * F; i++)
    if (res[i] >= 0) cnt[res[i]]++;
  /* Water-filling: all rising flows hold one level; the first limit reached (a flow's own path
   * or a resource's equal share of what is left) freezes its flows there. */
  for (int rising = F; rising > 0;) {
    double level = INFINITY;
    for (int f = 0; f < F; f++)
      if (!frozen[f]) level = assign_dmin(level, cap[f]);
    for (int r = 0; r < nr; r++)
      if (cnt[r] > 0) level = assign_dmin(level, left[r] / cnt[r]);
    for (int f = 0; f < F; f++) {
      if (frozen[f]) continue;
      int hit = cap[f] <= level;
      for (int e = 0; e < 2 && !hit; e++) {
        int r = res[2 * f + e];
        hit = r >= 0 && left[r] / cnt[r] <= level;
      }
      if (!hit) continue;
      frozen[f] = 1, rising--;
      rate[f] = level;
      for (int e = 0; e < 2; e++) {
        int r = res[2 * f + e];
        if (r >= 0) left[r] = assign_dmax(0, left[r] - level), cnt[r]--;
      }
    }
  }
  free(res);
  free(key);
  free(cnt);
  free(left);
  free(cap);
  free(frozen);
}

/* Transfer time latency + bytes / rate for each of F flows, the rates shared; returns the max. */
static double s_slowest(const assign_problem *p, int F, const int *src, const int *dst,
                        double bytes, double *each) {
  double *rate = wt_xmalloc(sizeof(double) * (size_t)F), worst = 0;
  assign_access_share(p, F, src, dst, rate);
  for (int f = 0; f < F; f++) {
    double t = p->net->latency_s[src[f] * p->net->n + dst[f]] + bytes / rate[f];
    if (each) each[f] = t;
    worst = assign_dmax(worst, t);
  }
  free(rate);
  return worst;
}

double assign_ring_time(const assign_problem *p, int k, const int *devs, const int *order,
                        double bytes) {
  if (k <= 1) return 0;
  int *src = wt_xmalloc(sizeof(int) * 2 * (size_t)k), *dst = src + k;
  for (int i = 0; i < k; i++) src[i] = devs[order[i]], dst[i] = devs[order[(i + 1) % k]];
  double t = s_slowest(p, k, src, dst, bytes, NULL);
  free(src);
  return t;
}

double assign_rings_time(const assign_problem *p, const assign_plan *plan, const int *ring) {
  int P = plan->d_pp, K = plan->d_dp, F = P * K;
  if (K <= 1) return 0;
  int *src = wt_xmalloc(sizeof(int) * 2 * (size_t)F), *dst = src + F;
  for (int s = 0; s < P; s++)
    for (int i = 0; i < K; i++) {
      const int *row = plan->device + s * K, *r = ring + s * K;
      src[s * K + i] = row[r[i]], dst[s * K + i] = row[r[(i + 1) % K]];
    }
  double t = s_slowest(p, F, src, dst, p->c_dp_bytes / K, NULL);
  free(src);
  return t;
}

double assign_cut_time(const assign_problem *p, int K, const int *from, const int *to) {
  double *fwd = wt_xmalloc(sizeof(double) * 2 * (size_t)K), *bwd = fwd + K, worst = 0;
  s_slowest(p, K, from, to, p->c_pp_bytes, fwd);
  s_slowest(p, K, to, from, p->c_pp_bytes, bwd);
  for (int r = 0; r < K; r++) worst = assign_dmax(worst, (fwd[r] + bwd[r]) / 2);
  free(fwd);
  return worst;
}

/* Every ring with member 0 first (Heap's algorithm over positions 1..k-1); keeps the fastest. */
static double s_ring_enumerate(const assign_problem *p, int k, const int *devs, double chunk,
                               int *best) {
  int *cur = wt_xmalloc(sizeof(int) * 2 * (size_t)k), *c = cur + k;
  for (int i = 0; i < k; i++) cur[i] = i, c[i] = 0;
  double bt = assign_ring_time(p, k, devs, cur, chunk);
  memcpy(best, cur, sizeof(int) * (size_t)k);
  int m = k - 1, *a = cur + 1;
  for (int i = 1; i < m;) {
    if (c[i] < i) {
      int j = i % 2 ? c[i] : 0, t = a[j];
      a[j] = a[i], a[i] = t;
      double tt = assign_ring_time(p, k, devs, cur, chunk);
      if (tt < bt) bt = tt, memcpy(best, cur, sizeof(int) * (size_t)k);
      c[i]++, i = 1;
    } else
      c[i++] = 0;
  }
  free(cur);
  return bt;
}

/* Moves single members to other places of the ring while that makes the step faster. */
static double s_ring_relocate(const assign_problem *p, int k, const int *devs, double chunk,
                              int *ring) {
  double t = assign_ring_time(p, k, devs, ring, chunk);
  int *trial = wt_xmalloc(sizeof(int) * (size_t)k);
  for (int pass = 0, better = 1; better && pass < S_RELOCATE_PASSES; pass++) {
    better = 0;
    for (int from = 0; from < k; from++)
      for (int to = 0; to < k; to++) {
        if (to == from) continue;
        int x = ring[from], w = 0;
        for (int i = 0; i < k; i++) /* ring without x, x inserted before original place `to` */
          if (i != from) {
            if (i == to && to < from) trial[w++] = x;
            trial[w++] = ring[i];
            if (i == to && to > from) trial[w++] = x;
          }
        double tt = assign_ring_time(p, k, devs, trial, chunk);
        if (tt < t * (1 - 1e-12)) t = tt, memcpy(ring, trial, sizeof(int) * (size_t)k), better = 1;
      }
  }
  free(trial);
  return t;
}

/* The ring's members regrouped so that each access link's members are consecutive, the links
 * in the order of their first member in `ring`, each link's members in ring order. */
static void s_ring_group_links(const assign_problem *p, int k, const int *devs, const int *ring,
                               int *out) {
  char *used = wt_xcalloc((size_t)k, 1);
  int w = 0;
  for (int i = 0; i < k; i++) {
    if (used[i]) continue;
    int link = p->access->link_of[devs[ring[i]]];
    for (int j = i; j < k; j++)
      if (!used[j] && p->access->link_of[devs[ring[j]]] == link) used[j] = 1, out[w++] = ring[j];
  }
  free(used);
}

static void s_rotate_to_zero(int k, int *ring) {
  int at = 0, *tmp = wt_xmalloc(sizeof(int) * (size_t)k);
  while (ring[at] != 0) at++;
  for (int i = 0; i < k; i++) tmp[i] = ring[(at + i) % k];
  memcpy(ring, tmp, sizeof(int) * (size_t)k);
  free(tmp);
}

double assign_ring_choose(const assign_problem *p, int k, const int *devs, int *order) {
  if (k <= 1) {
    if (order && k == 1) order[0] = 0;
    return 0;
  }
  const int n = p->net->n;
  double chunk = p->c_dp_bytes / p->d_dp;
  int *ring = wt_xmalloc(sizeof(int) * 2 * (size_t)k), *alt = ring + k;
  double t;
  if (!assign_access_shared(p, k, devs)) {
    /* One transfer per uplink and downlink: hops do not share, the bottleneck ring is best. */
    double *w = wt_xmalloc(sizeof(double) * (size_t)k * k);
    for (int i = 0; i < k; i++)
      for (int j = 0; j < k; j++)
        w[i * k + j] = i == j ? 0
                              : p->net->latency_s[devs[i] * n + devs[j]] +
                                    chunk / assign_path_Bps(p, devs[i], devs[j]);
    t = assign_ring_order(k, w, ring);
    free(w);
  } else if (k <= S_SHARED_RING_EXACT_MAX) {
    t = s_ring_enumerate(p, k, devs, chunk, ring);
  } else {
    /* The bottleneck ring over per-pair costs, and the same ring with links kept together. */
    double *w = wt_xmalloc(sizeof(double) * (size_t)k * k);
    for (int i = 0; i < k; i++)
      for (int j = 0; j < k; j++)
        w[i * k + j] = i == j ? 0
                              : p->net->latency_s[devs[i] * n + devs[j]] +
                                    chunk / assign_path_Bps(p, devs[i], devs[j]);
    assign_ring_order(k, w, ring);
    free(w);
    s_ring_group_links(p, k, devs, ring, alt);
    int relocate = k <= S_RELOCATE_MAX;
    t = relocate ? s_ring_relocate(p, k, devs, chunk, ring)
                 : assign_ring_time(p, k, devs, ring, chunk);
    double ta = relocate ? s_ring_relocate(p, k, devs, chunk, alt)
                         : assign_ring_time(p, k, devs, alt, chunk);
    if (ta < t) t = ta, memcpy(ring, alt, sizeof(int) * (size_t)k);
    s_rotate_to_zero(k, ring);
  }
  if (order) memcpy(order, ring, sizeof(int) * (size_t)k);
  free(ring);
  return t;
}

int assign_plan_choose_rings(const assign_problem *p, assign_plan *plan) {
  WT_CHECK(assign_plan_validate(p, plan));
  int P = plan->d_pp, K = plan->d_dp;
  if (!plan->ring) plan->ring = wt_xmalloc(sizeof(int) * (size_t)P * K);
  for (int s = 0; s < P; s++) assign_ring_choose(p, K, plan->device + s * K, plan->ring + s * K);
  return WT_OK;
}
