/* probe — what a probe epoch measured, turned into the network model the placement prices
 * (assign.h): each directed pair's latency and bandwidth as measured, and each peer's access
 * link (uplink, downlink, and which peers share it).
 *
 * The pairs were measured one at a time (peer/probe.c), so each reads its path alone:
 * min(path, the sender's uplink, the receiver's downlink). A peer's uplink is then the fastest
 * it sent to any peer of another region, its downlink the fastest it received from one. Whether
 * the peers of a region share those links is read from the contention rounds: all of them sent
 * at once (up), or received at once (down). Sharing one link of capacity C, k senders get about
 * C together, i.e. about what one got alone; on separate links about k times that. The midpoint,
 * (1 + k)/2 times the solo rate, decides. */
#include "coordinator/coordinator_internal.h"

#include "common/common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The bandwidth measured from slot a to slot b, -1 when none was. */
static double s_bw(const coordinator *c, int a, int b) {
  double lat = -1, bw = -1;
  return coord_link_get(c, a, b, &lat, &bw) ? bw : -1;
}

static double s_lat(const coordinator *c, int a, int b) {
  double lat = -1, bw = -1;
  return coord_link_get(c, a, b, &lat, &bw) ? lat : -1;
}

int coord_probe_link(coordinator *c, int a, int b, double *lat, double *bw) {
  double l1 = s_lat(c, a, b), l2 = s_lat(c, b, a), w = s_bw(c, a, b);
  if (!(w > 0)) return 0;
  *lat = l1 >= 0 ? l1 : (l2 >= 0 ? l2 : 0); /* the pinger measured the pair's round trip */
  *bw = w;
  return 1;
}

int coord_probe_complete(coordinator *c, const int *who, int n, char *why, size_t size) {
  double l, b;
  for (int i = 0; i < n; i++) {
    const coord_peer *p = &c->peers[who[i]];
    if (!(p->up_Bps > 0) || !(p->down_Bps > 0)) {
      snprintf(why, size, "peer %d's access link is not measured", p->id);
      return 0;
    }
    for (int j = 0; j < n; j++)
      if (i != j && !coord_probe_link(c, who[i], who[j], &l, &b)) {
        snprintf(why, size, "the link from peer %d to peer %d is not measured", p->id,
                 c->peers[who[j]].id);
        return 0;
      }
  }
  return 1;
}

/* Whether the pair of epoch ranks (r, q) still lacks a direction. */
static int s_pair_missing(coordinator *c, int r, int q) {
  double l, b;
  return !coord_probe_link(c, c->members[r], c->members[q], &l, &b) ||
         !coord_probe_link(c, c->members[q], c->members[r], &l, &b);
}

/* A pair of epoch ranks as the wire has it. */
static void s_pair_json(cJSON *pairs, int r, int q) {
  cJSON *pair = cJSON_CreateArray();
  cJSON_AddItemToArray(pair, cJSON_CreateNumber(r));
  cJSON_AddItemToArray(pair, cJSON_CreateNumber(q));
  cJSON_AddItemToArray(pairs, pair);
}

cJSON *coord_probe_pairs(coordinator *c) {
  cJSON *pairs = cJSON_CreateArray();
  if (c->probe_planned) { /* swarm.c chose them */
    for (int k = 0; k < c->n_probe_pairs; k++)
      s_pair_json(pairs, c->probe_pairs[k][0], c->probe_pairs[k][1]);
    return pairs;
  }
  for (int r = 0; r < c->n_members; r++)
    for (int q = r + 1; q < c->n_members; q++)
      if (s_pair_missing(c, r, q)) s_pair_json(pairs, r, q);
  return pairs;
}

double coord_probe_deadline_s(coordinator *c) {
  /* the pairs one after another, then two rounds per region; each step is bounded by the
   * peers' own data-plane deadline, this is the whole epoch's, capped */
  int steps = 2 * c->n_members;
  if (c->probe_planned) steps += c->n_probe_pairs;
  for (int r = 0; r < c->n_members && !c->probe_planned; r++)
    for (int q = r + 1; q < c->n_members; q++) steps += s_pair_missing(c, r, q);
  return fmin(60.0 + 3.0 * steps, 1800.0);
}

void coord_probe_on_result(coordinator *c, coord_peer *p, const cJSON *body) {
  const char *names[] = {"latency_s", "bandwidth_Bps", "up_round_Bps", "down_round_Bps"};
  const cJSON *rows[4];
  for (int k = 0; k < 4; k++) { /* the round rows may be absent: no round measured */
    rows[k] = cJSON_GetObjectItemCaseSensitive(body, names[k]);
    if ((k < 2 || rows[k]) && cJSON_GetArraySize(rows[k]) != c->n_members) {
      p->result = -1;
      return;
    }
  }
  const int r = p->epoch_rank, a = c->members[r];
  for (int j = 0; j < c->n_members; j++) {
    double l = cJSON_GetNumberValue(cJSON_GetArrayItem(rows[0], j));
    double w = cJSON_GetNumberValue(cJSON_GetArrayItem(rows[1], j));
    double up = cJSON_GetNumberValue(cJSON_GetArrayItem(rows[2], j));
    double down = cJSON_GetNumberValue(cJSON_GetArrayItem(rows[3], j));
    c->probe_up[r * COORD_PROBE_MAX + j] = up > 0 && up < 1e13 ? up : -1;
    c->probe_down[r * COORD_PROBE_MAX + j] = down > 0 && down < 1e13 ? down : -1;
    if (j == r || !(l >= 0 && l < 100) || !(w > 0 && w < 1e13)) continue;
    int b = c->members[j];
    coord_link_set(c, a, b, l, w);
    coord_state_save_link(c, a, b);
  }
}

static int s_same_region(coordinator *c, int r, int q) {
  return !strcmp(c->peers[c->members[r]].region, c->peers[c->members[q]].region);
}

/* The probe epoch's members' solo uplink and downlink: the fastest to / from another region
 * (any other member when all share one region). */
static void s_solo(coordinator *c, double *up, double *down) {
  const int n = c->n_members;
  int all_one = 1;
  for (int r = 1; r < n; r++) all_one &= s_same_region(c, 0, r);
  for (int r = 0; r < n; r++) up[r] = down[r] = -1;
  for (int r = 0; r < n; r++)
    for (int q = 0; q < n; q++) {
      if (q == r || (!all_one && s_same_region(c, r, q))) continue;
      up[r] = fmax(up[r], s_bw(c, c->members[r], c->members[q]));
      down[q] = fmax(down[q], s_bw(c, c->members[r], c->members[q]));
    }
}

/* Whether the region's members (ranks g[0..k)) share their uplink (up) or downlink (!up): the
 * round's rates together against the solo rates of the same transfers. *ratio gets the sum over
 * the mean solo rate (about 1 when shared, about k when not); -1 when the round measured fewer
 * than two transfers. */
static int s_shared(coordinator *c, const int *g, int k, int up, double *ratio) {
  double sum = 0, solo = 0;
  int measured = 0;
  *ratio = -1;
  for (int i = 0; i < k; i++)
    for (int q = 0; q < c->n_members; q++) {
      /* up: member g[i] sent to q; down: q sent to member g[i] */
      int from = up ? g[i] : q, to = up ? q : g[i];
      double rate = (up ? c->probe_up : c->probe_down)[from * COORD_PROBE_MAX + to];
      double alone = s_bw(c, c->members[from], c->members[to]);
      if (!(rate > 0) || !(alone > 0)) continue;
      sum += rate, solo += alone, measured++;
    }
  if (measured < 2) return 0;
  *ratio = sum / (solo / measured);
  return *ratio < (1.0 + measured) / 2;
}

void coord_probe_estimate(coordinator *c) {
  const int n = c->n_members;
  double up[COORD_PROBE_MAX], down[COORD_PROBE_MAX];
  int done[COORD_PROBE_MAX] = {0};
  s_solo(c, up, down);
  /* a chosen set of pairs sees a few of each member's links: a member probed before (a
   * landmark) keeps the fastest it was seen at */
  for (int r = 0; r < n && c->probe_planned; r++) {
    const coord_peer *p = &c->peers[c->members[r]];
    up[r] = fmax(up[r], p->up_Bps), down[r] = fmax(down[r], p->down_Bps);
  }
  for (int r = 0; r < n; r++) {
    if (done[r]) continue;
    int g[COORD_PROBE_MAX], k = 0;
    for (int q = r; q < n; q++)
      if (!done[q] && s_same_region(c, r, q)) g[k++] = q, done[q] = 1;
    double ratio_up = -1, ratio_down = -1;
    int sh_up = k > 1 && k < n && s_shared(c, g, k, 1, &ratio_up);
    int sh_down = k > 1 && k < n && s_shared(c, g, k, 0, &ratio_down);
    /* a shared link is one link: the peers' solo rates are each its capacity; a link shared in
     * one direction only is one access link whose other direction is the members' sum */
    double u = 0, d = 0, u_max = 0, d_max = 0;
    for (int i = 0; i < k; i++) {
      u += fmax(up[g[i]], 0), d += fmax(down[g[i]], 0);
      u_max = fmax(u_max, up[g[i]]), d_max = fmax(d_max, down[g[i]]);
    }
    for (int i = 0; i < k; i++) {
      coord_peer *p = &c->peers[c->members[g[i]]];
      int one = sh_up || sh_down;
      p->access_link = one ? c->peers[c->members[g[0]]].id : p->id;
      p->up_Bps = one ? (sh_up ? u_max : u) : up[g[i]];
      p->down_Bps = one ? (sh_down ? d_max : d) : down[g[i]];
      p->up_ratio = ratio_up, p->down_ratio = ratio_down;
    }
    if (k > 1 && k < n)
      coord_event(c, "probe",
                  "region %s (%d peers): %s uplink (%.1f Mbit/s; together/alone %.2f), "
                  "%s downlink (%.1f Mbit/s; %.2f)",
                  c->peers[c->members[g[0]]].region, k, sh_up ? "one shared" : "separate",
                  (sh_up ? u_max : u) * 8e-6, ratio_up, sh_down ? "one shared" : "separate",
                  (sh_down ? d_max : d) * 8e-6, ratio_down);
  }
  coord_state_save_access(c);
}

int coord_probe_access(coordinator *c, const int *list, int n, assign_access *acc) {
  memset(acc, 0, sizeof *acc);
  for (int i = 0; i < n; i++)
    if (!(c->peers[list[i]].up_Bps > 0) || !(c->peers[list[i]].down_Bps > 0)) return 0;
  int *link_of = wt_xcalloc((size_t)n, sizeof(int));
  double *up = wt_xcalloc((size_t)n, sizeof(double)), *down = wt_xcalloc((size_t)n, sizeof(double));
  int n_links = 0;
  for (int i = 0; i < n; i++) {
    const coord_peer *p = &c->peers[list[i]];
    int l;
    for (l = 0; l < i; l++)
      if (c->peers[list[l]].access_link == p->access_link) break;
    if (l < i) {
      link_of[i] = link_of[l];
      continue;
    }
    link_of[i] = n_links;
    up[n_links] = p->up_Bps, down[n_links] = p->down_Bps;
    n_links++;
  }
  *acc = (assign_access){.n_links = n_links, .link_of = link_of, .up_Bps = up, .down_Bps = down};
  return 1;
}

void coord_probe_access_free(assign_access *acc) {
  free((void *)acc->link_of);
  free((void *)acc->up_Bps);
  free((void *)acc->down_Bps);
  memset(acc, 0, sizeof *acc);
}

cJSON *coord_probe_json(coordinator *c) {
  cJSON *o = cJSON_CreateObject();
  int live[COORD_PROBE_MAX], n = 0; /* the matrix of thousands of peers would swamp /status */
  for (int i = 0; i < c->n_peers && n < COORD_PROBE_MAX; i++)
    if (c->peers[i].status == PEER_LIVE) live[n++] = i;
  int probed = 0, n_live = 0; /* how many of all the live peers have an estimated access link */
  for (int i = 0; i < c->n_peers; i++)
    if (c->peers[i].status == PEER_LIVE)
      n_live++, probed += c->peers[i].up_Bps > 0 && c->peers[i].down_Bps > 0;
  cJSON_AddNumberToObject(o, "live", n_live);
  cJSON_AddNumberToObject(o, "probed", probed);
  cJSON *ids = cJSON_AddArrayToObject(o, "peers");
  cJSON *lat = cJSON_AddArrayToObject(o, "latency_s");
  cJSON *bw = cJSON_AddArrayToObject(o, "bandwidth_Bps");
  cJSON *acc = cJSON_AddArrayToObject(o, "access");
  for (int i = 0; i < n; i++) {
    const coord_peer *p = &c->peers[live[i]];
    cJSON_AddItemToArray(ids, cJSON_CreateNumber(p->id));
    cJSON *lrow = cJSON_CreateArray(), *brow = cJSON_CreateArray();
    for (int j = 0; j < n; j++) {
      double l = -1, b = -1;
      if (i != j && !coord_probe_link(c, live[i], live[j], &l, &b)) l = b = -1;
      cJSON_AddItemToArray(lrow, i == j ? cJSON_CreateNull() : cJSON_CreateNumber(l));
      cJSON_AddItemToArray(brow, i == j ? cJSON_CreateNull() : cJSON_CreateNumber(b));
    }
    cJSON_AddItemToArray(lat, lrow);
    cJSON_AddItemToArray(bw, brow);
    cJSON *a = cJSON_CreateObject();
    cJSON_AddNumberToObject(a, "id", p->id);
    cJSON_AddStringToObject(a, "region", p->region);
    cJSON_AddNumberToObject(a, "link", p->access_link);
    cJSON_AddNumberToObject(a, "up_Bps", p->up_Bps > 0 ? p->up_Bps : -1);
    cJSON_AddNumberToObject(a, "down_Bps", p->down_Bps > 0 ? p->down_Bps : -1);
    cJSON_AddNumberToObject(a, "up_together_over_alone", p->up_ratio);
    cJSON_AddNumberToObject(a, "down_together_over_alone", p->down_ratio);
    cJSON_AddItemToArray(acc, a);
  }
  return o;
}
