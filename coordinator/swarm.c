/* swarm — probing and choosing members when the live peers are more than
 * COORD_PROBE_ALL_PAIRS. Measuring every pair costs O(n²) pair times (peer/probe.c measures one
 * pair at a time), so past a dozen peers each probe epoch measures a bounded set:
 *
 * - Newcomers (live peers whose access link is not estimated yet), the oldest first, at most
 *   COORD_PROBE_NEWCOMERS per epoch, with up to COORD_PROBE_LANDMARKS landmarks (probed peers,
 *   the first of each region): each newcomer is paired with every landmark, the pairs each
 *   region's contention round uses are measured alone too (so that the round's sharing test
 *   has its solo rates), and each newcomer is paired with the next COORD_PROBE_MATES newcomers
 *   of its own region and the next COORD_PROBE_MATES of other regions. A peer waits at most
 *   ⌈newcomers ahead of it / COORD_PROBE_NEWCOMERS⌉ probe epochs; an epoch measures at most
 *   COORD_PROBE_PAIRS_MAX pairs.
 * - The placement's links: once a placement is chosen, the links it uses (each replica's
 *   pipeline hops and each stage's ring, both directions) that were only estimated are probed,
 *   and the run is placed again on the measurements, at most COORD_REFINE_ROUNDS times.
 *
 * Everything else is estimated. Latency from network coordinates (Vivaldi, Dabek et al. 2004: a
 * point in the plane plus a height for the access hop, fitted to the measured one-way latencies
 * by spring relaxation; no listed dependency has it), bandwidth from the access-link model
 * (assign.h): the sender's uplink and the receiver's downlink, min(up, down).
 *
 * Who trains: with more live peers than seats, the seats go to the peers whose own tasklet would
 * cost least alone (compute at their speed plus their share of the traffic through their access
 * link); the placement then arranges them, and the rest are standbys. Held estimates are reused:
 * a peer is probed once, and again only for a placement's links. */
#include "coordinator/coordinator_internal.h"

#include "common/common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_VIVALDI_CC 0.25 /* the step's share of the error (Dabek et al.'s c_c) */
#define S_VIVALDI_CE 0.25 /* the error estimate's smoothing (c_e) */
#define S_VIVALDI_SWEEPS 20
#define S_VIVALDI_MIN_H 1e-5 /* seconds: every peer has some access hop */

static int s_has_access(const coord_peer *p) {
  return p->up_Bps > 0 && p->down_Bps > 0;
}

/* ---- network coordinates ------------------------------------------------------------------ */

static double s_distance(const coord_peer *a, const coord_peer *b) {
  return hypot(a->vivaldi[0] - b->vivaldi[0], a->vivaldi[1] - b->vivaldi[1]) + a->vivaldi_h +
         b->vivaldi_h;
}

/* A direction for two peers at one point: from their ids, so that runs repeat. */
static void s_direction(int a, int b, double u[2]) {
  uint32_t h = (uint32_t)a * 2654435761u ^ (uint32_t)b * 40503u;
  double angle = (h % 3600) * (2 * M_PI / 3600);
  u[0] = cos(angle), u[1] = sin(angle);
}

/* One Vivaldi step of a towards the measured one-way latency `lat` to b. */
static void s_vivaldi_step(coord_peer *a, const coord_peer *b, double lat) {
  if (!(lat > 0)) return;
  double ea = a->vivaldi_n ? a->vivaldi_err : 1, eb = b->vivaldi_n ? b->vivaldi_err : 1;
  double w = ea / (ea + eb), dist = s_distance(a, b);
  double es = fabs(dist - lat) / lat;
  a->vivaldi_err = fmin(1, es * S_VIVALDI_CE * w + ea * (1 - S_VIVALDI_CE * w));
  double dx = a->vivaldi[0] - b->vivaldi[0], dy = a->vivaldi[1] - b->vivaldi[1];
  double plane = hypot(dx, dy), u[2];
  if (plane > 1e-12)
    u[0] = dx / plane, u[1] = dy / plane;
  else
    s_direction(a->id, b->id, u);
  double force = S_VIVALDI_CC * w * (lat - dist); /* > 0: too close, push apart */
  double mag = plane + a->vivaldi_h + b->vivaldi_h;
  a->vivaldi[0] += force * u[0] * (plane > 1e-12 ? plane / mag : 1);
  a->vivaldi[1] += force * u[1] * (plane > 1e-12 ? plane / mag : 1);
  double h_share = mag > 1e-12 ? (a->vivaldi_h + b->vivaldi_h) / mag : 0.5;
  a->vivaldi_h = fmax(S_VIVALDI_MIN_H, a->vivaldi_h + force * h_share);
  a->vivaldi_n++;
}

/* Each member's measured latencies to members of its own region, summed up. */
static void s_region_latency(coordinator *c) {
  for (int r = 0; r < c->n_members; r++)
    for (int q = 0; q < c->n_members; q++) {
      coord_peer *p = &c->peers[c->members[r]];
      double lat, bw;
      if (q == r || strcmp(p->region, c->peers[c->members[q]].region) ||
          !coord_link_get(c, c->members[r], c->members[q], &lat, &bw))
        continue;
      p->region_lat += lat, p->region_n++;
    }
}

void coord_swarm_on_probed(coordinator *c) {
  s_region_latency(c);
  for (int sweep = 0; sweep < S_VIVALDI_SWEEPS; sweep++)
    for (int r = 0; r < c->n_members; r++)
      for (int q = 0; q < c->n_members; q++) {
        double lat, bw;
        if (q == r || !coord_link_get(c, c->members[r], c->members[q], &lat, &bw)) continue;
        s_vivaldi_step(&c->peers[c->members[r]], &c->peers[c->members[q]], lat);
      }
}

int coord_swarm_link(coordinator *c, int a, int b, double *lat, double *bw) {
  if (coord_probe_link(c, a, b, lat, bw)) return 1;
  const coord_peer *p = &c->peers[a], *q = &c->peers[b];
  /* only peers a chosen set of pairs probed have coordinates: a run that measured every pair
   * keeps pricing a link it lacks as free */
  if (!s_has_access(p) || !s_has_access(q) || !p->vivaldi_n || !q->vivaldi_n) return 0;
  *bw = fmin(p->up_Bps, q->down_Bps);
  /* peers of one region label are taken to be one place: the plane's few milliseconds of fitting
   * error would swamp their latency, so it is the mean of what each measured to its region */
  *lat = strcmp(p->region, q->region) || !p->region_n || !q->region_n
             ? s_distance(p, q)
             : (p->region_lat / p->region_n + q->region_lat / q->region_n) / 2;
  return 1;
}

/* ---- the pairs a probe epoch measures ------------------------------------------------------ */

typedef struct {
  coordinator *c;
  unsigned char taken[COORD_PROBE_MAX][COORD_PROBE_MAX];
} s_pairs;

static void s_pair_add(s_pairs *ps, int r, int q) {
  coordinator *c = ps->c;
  int lo = WT_MIN(r, q), hi = WT_MAX(r, q);
  if (lo == hi || ps->taken[lo][hi] || c->n_probe_pairs >= COORD_PROBE_PAIRS_MAX) return;
  ps->taken[lo][hi] = 1;
  c->probe_pairs[c->n_probe_pairs][0] = lo, c->probe_pairs[c->n_probe_pairs][1] = hi;
  c->n_probe_pairs++;
}

static int s_same_region(const coordinator *c, const int *who, int r, int q) {
  return !strcmp(c->peers[who[r]].region, c->peers[who[q]].region);
}

/* The pairs of each region's contention rounds (peer/probe.c, s_round_of): member i of a region
 * of two or more sends to partner i, the partners ordered one per other region at a time. */
static void s_round_pairs(s_pairs *ps, const int *who, int n) {
  int nth[COORD_PROBE_MAX] = {0}, members[COORD_PROBE_MAX], partners[COORD_PROBE_MAX];
  for (int r = 0; r < n; r++)
    for (int q = 0; q < r; q++) nth[r] += s_same_region(ps->c, who, q, r);
  for (int g = 0; g < n; g++) {
    if (nth[g] != 0) continue; /* once per region, at its first rank */
    int k = 0, n_partners = 0;
    for (int r = 0; r < n; r++)
      if (s_same_region(ps->c, who, r, g)) members[k++] = r;
    for (int level = 0; level < n; level++)
      for (int r = 0; r < n; r++)
        if (nth[r] == level && !s_same_region(ps->c, who, r, g)) partners[n_partners++] = r;
    if (k < 2 || k == n) continue;
    for (int i = 0; i < k && i < n_partners; i++) s_pair_add(ps, members[i], partners[i]);
  }
}

/* Newcomer rank i's pairs besides the landmarks: the next COORD_PROBE_MATES newcomers after it
 * of its own region and of other regions. */
static void s_newcomer_pairs(s_pairs *ps, const int *who, int n, int n_land, int i) {
  int mates = 0, others = 0;
  for (int k = 1; k < n - n_land; k++) {
    int q = n_land + (i - n_land + k) % (n - n_land);
    int same = s_same_region(ps->c, who, i, q);
    if (same && mates < COORD_PROBE_MATES) s_pair_add(ps, i, q), mates++;
    if (!same && others < COORD_PROBE_MATES) s_pair_add(ps, i, q), others++;
  }
}

static int s_region_taken(const coordinator *c, const int *who, int n, int i) {
  for (int k = 0; k < n; k++)
    if (!strcmp(c->peers[who[k]].region, c->peers[i].region)) return 1;
  return 0;
}

static int s_in(const int *list, int n, int x) {
  for (int k = 0; k < n; k++)
    if (list[k] == x) return 1;
  return 0;
}

/* The landmarks: the first probed live peer of each region, then other probed ones. */
static int s_landmarks(coordinator *c, const int *live, int n_live, int *who) {
  int n = 0;
  for (int pass = 0; pass < 2; pass++)
    for (int k = 0; k < n_live && n < COORD_PROBE_LANDMARKS; k++) {
      int i = live[k];
      if (!s_has_access(&c->peers[i]) || s_in(who, n, i)) continue;
      if (pass == 0 && s_region_taken(c, who, n, i)) continue;
      who[n++] = i;
    }
  return n;
}

int coord_swarm_probe_newcomers(coordinator *c, const int *live, int n_live, int *who, int *n_who,
                                char *why, size_t size) {
  int waiting = 0;
  for (int k = 0; k < n_live; k++) waiting += !s_has_access(&c->peers[live[k]]);
  if (!waiting) return 0;
  int n_land = s_landmarks(c, live, n_live, who), n = n_land;
  for (int k = 0; k < n_live && n - n_land < COORD_PROBE_NEWCOMERS; k++)
    if (!s_has_access(&c->peers[live[k]])) who[n++] = live[k];
  if (n < 2) return 0; /* a lone newcomer and nobody probed: it waits for a second peer */
  s_pairs *ps = wt_xcalloc(1, sizeof *ps);
  ps->c = c;
  c->probe_planned = 1, c->n_probe_pairs = 0;
  /* the landmarks first (they place a newcomer's access link and coordinates), then the
   * rounds' solo rates, then the newcomers among themselves, while pairs are left */
  for (int i = n_land; i < n; i++)
    for (int l = 0; l < n_land; l++) s_pair_add(ps, l, i);
  s_round_pairs(ps, who, n);
  for (int i = n_land; i < n; i++) s_newcomer_pairs(ps, who, n, n_land, i);
  free(ps);
  *n_who = n;
  snprintf(why, size,
           "%d of %d live peers are not probed yet: %d of them with %d landmarks, %d pairs",
           waiting, n_live, n - n_land, n_land, c->n_probe_pairs);
  return 1;
}

/* Adds peer index i to the group (its rank, or -1 when the group is full). */
static int s_group_rank(int *who, int *n, int i) {
  for (int k = 0; k < *n; k++)
    if (who[k] == i) return k;
  if (*n == COORD_PROBE_MAX) return -1;
  who[*n] = i;
  return (*n)++;
}

/* The link a → b of the placement, added to the group's pairs when a direction is estimated. */
static void s_plan_link(s_pairs *ps, int *who, int *n, int a, int b) {
  double lat, bw;
  coordinator *c = ps->c;
  if (a == b || (coord_probe_link(c, a, b, &lat, &bw) && coord_probe_link(c, b, a, &lat, &bw)))
    return;
  int n0 = *n, ra = s_group_rank(who, n, a), rb = s_group_rank(who, n, b);
  if (ra < 0 || rb < 0) {
    *n = n0; /* not both fit: left for the next round */
    return;
  }
  s_pair_add(ps, ra, rb);
}

int coord_swarm_probe_plan_links(coordinator *c, int *who, int *n_who, char *why, size_t size) {
  const int S = c->cfg.run.stages, R = c->cfg.run.replicas;
  if (c->refine_rounds >= COORD_REFINE_ROUNDS || c->n_members != S * R) return 0;
  s_pairs *ps = wt_xcalloc(1, sizeof *ps);
  ps->c = c;
  c->probe_planned = 1, c->n_probe_pairs = 0;
  int n = 0;
  for (int s = 0; s + 1 < S; s++) /* each pipeline's hops */
    for (int r = 0; r < R; r++)
      s_plan_link(ps, who, &n, c->members[s * R + r], c->members[(s + 1) * R + r]);
  for (int s = 0; s < S && R > 1; s++) /* each stage's ring */
    for (int i = 0; i < R; i++) {
      int from = c->n_rings ? c->rings[s * R + i] : i;
      int to = c->n_rings ? c->rings[s * R + (i + 1) % R] : (i + 1) % R;
      s_plan_link(ps, who, &n, c->members[s * R + from], c->members[s * R + to]);
    }
  free(ps);
  if (!c->n_probe_pairs) return 0;
  c->refine_rounds++;
  *n_who = n;
  snprintf(why, size, "the placement uses %d links that are only estimated (round %d of %d)",
           c->n_probe_pairs, c->refine_rounds, COORD_REFINE_ROUNDS);
  return 1;
}

/* ---- who trains --------------------------------------------------------------------------- */

typedef struct {
  double cost;
  int slot;
} s_by_cost;

static int s_cmp_cost(const void *a, const void *b) {
  const s_by_cost *x = a, *y = b;
  if (x->cost != y->cost) return x->cost < y->cost ? -1 : 1;
  return (x->slot > y->slot) - (x->slot < y->slot);
}

void coord_swarm_choose(coordinator *c, const int *live, int n_live, int *list, int n,
                        double tasklet_flop, double tasklet_bytes) {
  s_by_cost *order = wt_xmalloc(sizeof *order * (size_t)WT_MAX(n_live, 1));
  for (int k = 0; k < n_live; k++) {
    const coord_peer *p = &c->peers[live[k]];
    double flops = coord_claim_flops(p), link = fmin(p->up_Bps, p->down_Bps);
    /* a peer without a speed or an estimated link goes last, the faster first among them */
    double cost = flops > 0 ? tasklet_flop / flops : 1e30;
    cost += s_has_access(p) ? tasklet_bytes / link : 1e30 - fmin(flops, 1e20) * 1e-10;
    order[k] = (s_by_cost){cost, live[k]};
  }
  qsort(order, (size_t)n_live, sizeof *order, s_cmp_cost);
  for (int k = 0; k < n && k < n_live; k++) list[k] = order[k].slot;
  free(order);
}
