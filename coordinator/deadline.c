/* deadline — the coordinator's waits, from what the run measured (common/deadline.h):
 *   - a peer's heartbeat window: 3 × the longest of its last heartbeat gaps, at least two
 *     heartbeats, at most --liveness × --heartbeat (the window until 8 gaps are in, and for one
 *     window after the coordinator's own stall, whose burst of late messages measures nothing);
 *   - the bind and start phases of an epoch: 4 × the longest phase measured so far, at least
 *     10 s (a member may fetch its data shard or receive a stage's state meanwhile), at most
 *     --bind-timeout (the deadline until one was measured);
 *   - the data plane's per-step receive deadline, which each peer derives from its own step
 *     times (peer/deadline.c) and reports in its heartbeats: kept for /status.
 * A frozen peer is then found within a few of its heartbeats or steps on a fast network, while a
 * slow one's longer gaps and steps lengthen its deadlines (up to the fixed flags). */
#include "coordinator/coordinator_internal.h"

#include "common/common.h"

#include <math.h>
#include <stdlib.h>

#define S_HB_MARGIN 3.0
#define S_HB_SAMPLES 8
#define S_PHASE_MARGIN 4.0
#define S_PHASE_FLOOR_S 10.0

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
  return wt_deadline_s(&c->dl_start);
}

void coord_deadline_bound(coordinator *c, double took_s) {
  wt_deadline_add(&c->dl_bind, took_s);
}
void coord_deadline_started(coordinator *c, double took_s) {
  wt_deadline_add(&c->dl_start, took_s);
}

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
  int n_hb = 0, n_rv = 0;
  for (int i = 0; i < c->n_peers; i++) {
    coord_peer *p = &c->peers[i];
    if (p->status != PEER_LIVE) continue;
    hb[n_hb++] = coord_deadline_heartbeat_s(c, p);
    if (p->epoch_rank >= 0 && isfinite(p->recv_deadline_s)) rv[n_rv++] = p->recv_deadline_s;
  }
  s_stats(o, "heartbeat_s", hb, n_hb);
  s_stats(o, "recv_s", rv, n_rv);
  free(hb), free(rv);
  return o;
}

void coord_deadline_peer_json(coordinator *c, coord_peer *p, cJSON *j) {
  cJSON *d = cJSON_AddObjectToObject(j, "deadline");
  cJSON_AddNumberToObject(d, "heartbeat_s", coord_deadline_heartbeat_s(c, p));
  if (isfinite(p->recv_deadline_s)) cJSON_AddNumberToObject(d, "recv_s", p->recv_deadline_s);
  if (isfinite(p->step_q90_s)) cJSON_AddNumberToObject(d, "step_q90_s", p->step_q90_s);
}
