/* deadline — the coordinator's waits, from what the run measured (common/deadline.h):
 *   - a peer's heartbeat window: 3 × the longest of its last heartbeat gaps, at least two
 *     heartbeats, at most --liveness × --heartbeat (the window until 8 gaps are in, and for one
 *     window after the coordinator's own stall, whose burst of late messages measures nothing);
 *   - the bind and start phases of an epoch: 4 × the longest phase measured so far, at least
 *     10 s (a member may fetch its data shard or receive a stage's state meanwhile), at most
 *     --bind-timeout (the deadline until one was measured);
 *   - the data plane's per-step receive deadline, which each peer derives from its own step
 *     times (peer/deadline.c) and reports in its heartbeats: kept for /status;
 *   - a train epoch member's waits on its links, from their probed rate and round trip and the
 *     bytes each moves (coord_traffic_step_bytes): 3 × the slowest link's bytes / rate + round
 *     trip, at least 1 s, at most --peer-timeout. A step's receives (pipeline cuts, and the
 *     ring's gradients when it reduces every step), a DiLoCo outer step's (the ring's
 *     pseudo-gradients) and a stage's state (a hand-over or a checkpoint shard fetched, at least
 *     2 s). The first two are sent in the EPOCH message as floors under the peer's step-derived
 *     deadlines, the third as its shard fetch deadline; the slowest member's state time is a
 *     floor under the start phase's deadline (it moves the states).
 * A frozen peer is then found within a few of its heartbeats or steps on a fast network, while a
 * slow one's longer gaps, steps and link times lengthen its deadlines (up to the fixed flags). */
#include "coordinator/coordinator_internal.h"

#include "common/common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define S_HB_MARGIN 3.0
#define S_HB_SAMPLES 8
#define S_PHASE_MARGIN 4.0
#define S_PHASE_FLOOR_S 10.0
#define S_LINK_MARGIN 3.0
#define S_LINK_FLOOR_S 1.0 /* as the peer's receive floor: scheduling noise on busy cores */
/* a fetch opens a CURVE connection and checks every byte: 0.02-0.22 s for the test model on 2
 * busy cores (docs/coordinator.md, "Failure handling"), ten times that at least */
#define S_STATE_FLOOR_S 2.0
#define S_MAX_LINKS 4 /* into a member: two pipeline neighbours, its ring's predecessor */

void coord_deadline_init(coordinator *c) {
  const wt_deadline_config phase = {1.0, S_PHASE_MARGIN, S_PHASE_FLOOR_S, c->cfg.bind_timeout_s, 1};
  wt_deadline_init(&c->dl_bind, &phase);
  wt_deadline_init(&c->dl_start, &phase);
}

static void s_peer_init(coordinator *c, coord_peer *p) {
  const double cap = c->cfg.liveness * c->cfg.heartbeat_s;
  const wt_deadline_config hb = {1.0, S_HB_MARGIN, 2 * c->cfg.heartbeat_s, cap, S_HB_SAMPLES};
  wt_deadline_init(&p->dl_heartbeat, &hb);
  p->dl_ready = 1;
  p->recv_deadline_s = p->step_q90_s = NAN;
}

void coord_deadline_on_heartbeat(coordinator *c, coord_peer *p, double gap_s, const cJSON *body) {
  if (!p->dl_ready) s_peer_init(c, p);
  /* a gap past the fixed window spans a stall (the coordinator's, or a reconnect): not a
   * sample of how this peer's heartbeats arrive */
  if (gap_s <= p->dl_heartbeat.cfg.cap_s) wt_deadline_add(&p->dl_heartbeat, gap_s);
  const cJSON *d = cJSON_GetObjectItemCaseSensitive(body, "deadline");
  p->recv_deadline_s = fmin(fmax(coordinator_field_num(d, "recv_s", NAN), 0), 1e6);
  p->step_q90_s = fmin(fmax(coordinator_field_num(d, "step_q90_s", NAN), 0), 1e6);
}

double coord_deadline_heartbeat_s(coordinator *c, coord_peer *p) {
  if (!p->dl_ready) s_peer_init(c, p);
  if (wt_now_s() < c->stall_grace_until) return p->dl_heartbeat.cfg.cap_s;
  return wt_deadline_s(&p->dl_heartbeat);
}

double coord_deadline_bind_s(const coordinator *c) {
  return wt_deadline_s(&c->dl_bind);
}
double coord_deadline_start_s(const coordinator *c) {
  return fmin(fmax(wt_deadline_s(&c->dl_start), c->dl_state_s), c->cfg.bind_timeout_s);
}

void coord_deadline_bound(coordinator *c, double took_s) {
  wt_deadline_add(&c->dl_bind, took_s);
}
void coord_deadline_started(coordinator *c, double took_s) {
  wt_deadline_add(&c->dl_start, took_s);
}

/* ---- a member's links ---------------------------------------------------------------------- */

typedef struct {
  int from[S_MAX_LINKS]; /* member ranks that send to this one */
  double step_bytes[S_MAX_LINKS], sync_bytes[S_MAX_LINKS];
  int n;
} s_inbound;

static void s_inbound_add(s_inbound *in, int from, double step_bytes, double sync_bytes) {
  for (int i = 0; i < in->n; i++) /* a two-replica ring's predecessor is its successor too */
    if (in->from[i] == from) return;
  in->from[in->n] = from, in->step_bytes[in->n] = step_bytes, in->sync_bytes[in->n] = sync_bytes;
  in->n++;
}

/* The links into member r of a train epoch (world rank r = stage × R + replica): its pipeline
 * neighbours' cuts each step, and its ring predecessor's share of the ring all-reduce,
 * 2 (R − 1) / R of a stage's gradient, every step or (DiLoCo) every outer step. */
static void s_inbound_of(const coordinator *c, int r, s_inbound *in) {
  const parallel_run_config *run = &c->cfg.run;
  const int S = run->stages, R = run->replicas, stage = r / R, replica = r % R;
  double cut, grad, state;
  coord_traffic_step_bytes(c, &cut, &grad, &state);
  in->n = 0;
  if (stage > 0) s_inbound_add(in, r - R, cut, 0);
  if (stage < S - 1) s_inbound_add(in, r + R, cut, 0);
  if (R < 2) return;
  int pos = 0;
  while (pos < R && (c->n_rings ? c->rings[stage * R + pos] : pos) != replica) pos++;
  const int prev_pos = (pos + R - 1) % R;
  const int prev = c->n_rings ? c->rings[stage * R + prev_pos] : prev_pos;
  const double ring = 2.0 * (R - 1) / R * grad;
  s_inbound_add(in, stage * R + prev, run->sync.diloco > 0 ? 0 : ring, ring);
}

/* A stage's state into member r comes from a replica of the stage, or as a shard from its
 * holders: priced over the slowest link into r from any other member (the cap when one of those
 * is not measured, or there is none). */
static double s_state_s(coordinator *c, int r, const wt_deadline_config *cfg) {
  double cut, grad, bytes, slow_bw = 0, slow_rtt = 0, slow_t = -1;
  coord_traffic_step_bytes(c, &cut, &grad, &bytes);
  for (int q = 0; q < c->n_members; q++) {
    double lat = 0, rate = 0;
    if (q == r) continue;
    if (!coord_traffic_link_wall(c, c->members[q], c->members[r], &lat, &rate)) rate = 0;
    const double t = rate > 0 ? bytes / rate + 2 * lat : INFINITY;
    if (t > slow_t) slow_t = t, slow_bw = rate, slow_rtt = 2 * lat;
  }
  return slow_t >= 0 ? wt_deadline_links_s(cfg, &bytes, &slow_bw, &slow_rtt, 1) : cfg->cap_s;
}

static coord_link_deadlines s_member_links(coordinator *c, int r) {
  const double cap = c->cfg.peer_timeout_s;
  const wt_deadline_config link = {1.0, S_LINK_MARGIN, S_LINK_FLOOR_S, cap, 1};
  const wt_deadline_config state = {1.0, S_LINK_MARGIN, S_STATE_FLOOR_S, cap, 1};
  s_inbound in;
  s_inbound_of(c, r, &in);
  double bw[S_MAX_LINKS], rtt[S_MAX_LINKS], worst = -1;
  coord_link_deadlines d = {.sync_s = NAN, .slow_from = -1, .slow_Bps = NAN, .slow_rtt_s = NAN};
  for (int i = 0; i < in.n; i++) {
    double lat = 0;
    if (!coord_traffic_link_wall(c, c->members[in.from[i]], c->members[r], &lat, &bw[i]))
      bw[i] = 0, lat = NAN;
    rtt[i] = 2 * lat;
    const double t = bw[i] > 0 ? in.step_bytes[i] / bw[i] + rtt[i] : INFINITY;
    if (t > worst)
      worst = t, d.slow_from = c->peers[c->members[in.from[i]]].id, d.slow_Bps = bw[i],
      d.slow_rtt_s = rtt[i];
  }
  d.recv_s = wt_deadline_links_s(&link, in.step_bytes, bw, rtt, in.n);
  if (c->cfg.run.sync.diloco > 0 && c->cfg.run.replicas > 1)
    d.sync_s = wt_deadline_links_s(&link, in.sync_bytes, bw, rtt, in.n);
  d.state_s = s_state_s(c, r, &state);
  return d;
}

void coord_deadline_links(coordinator *c) {
  const coord_link_deadlines none = {NAN, NAN, NAN, -1, NAN, NAN};
  for (int i = 0; i < c->n_peers; i++) c->peers[i].dl_links = none;
  c->dl_state_s = 0;
  if (strcmp(c->epoch_kind, "train")) return;
  for (int r = 0; r < c->n_members; r++) {
    coord_peer *p = &c->peers[c->members[r]];
    p->dl_links = s_member_links(c, r);
    c->dl_state_s = fmax(c->dl_state_s, p->dl_links.state_s);
  }
}

void coord_deadline_epoch_json(coordinator *c, int r, cJSON *epoch) {
  const coord_link_deadlines *d = &c->peers[c->members[r]].dl_links;
  if (!(d->recv_s > 0)) return; /* not a train epoch's member */
  cJSON *o = cJSON_AddObjectToObject(epoch, "deadline");
  cJSON_AddNumberToObject(o, "recv_s", d->recv_s);
  if (isfinite(d->sync_s)) cJSON_AddNumberToObject(o, "sync_s", d->sync_s);
  cJSON_AddNumberToObject(o, "fetch_s", d->state_s);
}

/* ---- /status ------------------------------------------------------------------------------- */

static void s_stats(cJSON *o, const char *name, const double *v, int n) {
  if (n == 0) return;
  double lo = INFINITY, hi = 0;
  for (int i = 0; i < n; i++) lo = fmin(lo, v[i]), hi = fmax(hi, v[i]);
  cJSON *s = cJSON_AddObjectToObject(o, name);
  cJSON_AddNumberToObject(s, "min", lo);
  cJSON_AddNumberToObject(s, "max", hi);
}

cJSON *coord_deadline_json(coordinator *c) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "bind_s", coord_deadline_bind_s(c));
  cJSON_AddNumberToObject(o, "bind_cap_s", c->cfg.bind_timeout_s);
  cJSON_AddNumberToObject(o, "start_s", coord_deadline_start_s(c));
  cJSON_AddNumberToObject(o, "heartbeat_cap_s", c->cfg.liveness * c->cfg.heartbeat_s);
  cJSON_AddNumberToObject(o, "recv_cap_s", c->cfg.peer_timeout_s);
  double *hb = wt_xmalloc(sizeof(double) * (size_t)(c->n_peers + 1));
  double *rv = wt_xmalloc(sizeof(double) * (size_t)(c->n_peers + 1));
  double *lk = wt_xmalloc(sizeof(double) * (size_t)(c->n_peers + 1));
  int n_hb = 0, n_rv = 0, n_lk = 0;
  for (int i = 0; i < c->n_peers; i++) {
    coord_peer *p = &c->peers[i];
    if (p->status != PEER_LIVE) continue;
    hb[n_hb++] = coord_deadline_heartbeat_s(c, p);
    if (p->epoch_rank >= 0 && isfinite(p->recv_deadline_s)) rv[n_rv++] = p->recv_deadline_s;
    if (p->epoch_rank >= 0 && p->dl_links.recv_s > 0) lk[n_lk++] = p->dl_links.recv_s;
  }
  s_stats(o, "heartbeat_s", hb, n_hb);
  s_stats(o, "recv_s", rv, n_rv);
  s_stats(o, "link_recv_s", lk, n_lk);
  if (c->dl_state_s > 0) cJSON_AddNumberToObject(o, "start_link_floor_s", c->dl_state_s);
  free(hb), free(rv), free(lk);
  return o;
}

void coord_deadline_peer_json(coordinator *c, coord_peer *p, cJSON *j) {
  cJSON *d = cJSON_AddObjectToObject(j, "deadline");
  cJSON_AddNumberToObject(d, "heartbeat_s", coord_deadline_heartbeat_s(c, p));
  if (isfinite(p->recv_deadline_s)) cJSON_AddNumberToObject(d, "recv_s", p->recv_deadline_s);
  if (isfinite(p->step_q90_s)) cJSON_AddNumberToObject(d, "step_q90_s", p->step_q90_s);
  const coord_link_deadlines *l = &p->dl_links;
  if (p->epoch_rank < 0 || !(l->recv_s > 0)) return; /* 0: set by no train epoch here */
  cJSON *o = cJSON_AddObjectToObject(d, "links");
  cJSON_AddNumberToObject(o, "recv_s", l->recv_s);
  if (isfinite(l->sync_s)) cJSON_AddNumberToObject(o, "sync_s", l->sync_s);
  cJSON_AddNumberToObject(o, "state_s", l->state_s);
  if (l->slow_from < 0) return;
  cJSON *w = cJSON_AddObjectToObject(o, "slowest");
  cJSON_AddNumberToObject(w, "from", l->slow_from);
  cJSON_AddNumberToObject(w, "bandwidth_Bps", isfinite(l->slow_Bps) ? l->slow_Bps : -1);
  cJSON_AddNumberToObject(w, "rtt_s", isfinite(l->slow_rtt_s) ? l->slow_rtt_s : -1);
}
