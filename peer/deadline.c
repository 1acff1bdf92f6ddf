/* deadline — the data plane's receive deadline on a peer, from its own step times.
 *
 * The transport gives up on a receive after its timeout (the coordinator's timeout_s, from
 * --peer-timeout). A frozen neighbour (SIGSTOP, a paused VM) would hold this tasklet that long.
 * So after each step the deadline of the next one is set from what this tasklet measured: a
 * receive inside a step waits no longer than the step itself, and a step takes about as long as
 * the steps before it. Steps that do more than the usual (an outer DiLoCo step, a validation, a
 * checkpoint, the last step) and the step after one are not measured as usual steps and keep the
 * cap — except DiLoCo's outer steps once one was measured: those get margin × the slowest
 * measured one. Until five usual steps are measured (every epoch's start, where the state
 * hand-over moves whole stages) the cap holds; the cap always bounds it. Once measured, a
 * deadline is never below what the coordinator derived from this member's links (the bytes each
 * moves over its probed rate, plus its round trip: coordinator/deadline.c), so that a slow link
 * whose transfers the measured steps happened not to show still has the time it needs. */
#include "peer/peer_internal.h"

#include "common/common.h"
#include "coordinator/protocol.h" /* defines: coordinator_field_num, reading the epoch */

#include <cjson/cJSON.h>
#include <math.h>

#define S_QUANTILE 0.9 /* the step time most steps stay under */
#define S_MARGIN 3.0   /* a receive may wait 3 x that */
/* below it, scheduling noise on busy cores cuts live peers (docs/coordinator.md, "Deadlines") */
#define S_FLOOR_S 1.0

/* A link floor from the coordinator: 0 when absent or not a positive number. */
static double s_floor(const cJSON *links, const char *name) {
  const double v = coordinator_field_num(links, name, 0);
  return v > 0 && isfinite(v) ? v : 0;
}

void peer_deadline_start(peer_work *w, double cap_s, const cJSON *links) {
  wt_deadline_config step = {S_QUANTILE, S_MARGIN, S_FLOOR_S, cap_s, 5};
  wt_deadline_config sync = {1.0, S_MARGIN, S_FLOOR_S, cap_s, 1};
  wt_deadline_init(&w->dl_step, &step);
  wt_deadline_init(&w->dl_sync, &sync);
  w->dl_cap_s = cap_s, w->dl_recv_s = cap_s;
  w->dl_link_recv_s = s_floor(links, "recv_s"), w->dl_link_sync_s = s_floor(links, "sync_s");
}

double peer_deadline_fetch_s(const cJSON *epoch) {
  const double cap = coordinator_field_num(epoch, "timeout_s", 30);
  const double d = s_floor(cJSON_GetObjectItemCaseSensitive(epoch, "deadline"), "fetch_s");
  return d > 0 ? fmin(d, cap) : cap;
}

/* What step `s` does beyond forward, backward and the per-step sync (0: a usual step; 1: an
 * outer DiLoCo step; 2: a validation, the last step, or a checkpoint after it). */
static int s_kind(const parallel_run_config *r, long s) {
  if (s >= r->steps || (r->val_every > 0 && s % r->val_every == 0) ||
      (r->checkpoint_every > 0 && s % r->checkpoint_every == 0))
    return 2;
  return r->sync.diloco > 0 && s % r->sync.diloco == 0 ? 1 : 0;
}

double peer_deadline_on_step(peer_work *w, long step, double dt) {
  const parallel_run_config *r = &w->run;
  /* dt ran from the previous step's end: what happened after that step counts too */
  const int prev = s_kind(r, step - 1), now = s_kind(r, step);
  if (dt > 0 && prev == 0 && now == 0) wt_deadline_add(&w->dl_step, dt);
  if (dt > 0 && prev == 0 && now == 1) wt_deadline_add(&w->dl_sync, dt);
  /* after a step that did more, a neighbour may still be doing it (another stage's outer step
   * over a slower ring, a checkpoint): the cap */
  const int next = s_kind(r, step + 1);
  double d = w->dl_cap_s;
  if (now == 0 && next == 0) d = fmin(fmax(wt_deadline_s(&w->dl_step), w->dl_link_recv_s), d);
  if (now == 0 && next == 1) d = fmin(fmax(wt_deadline_s(&w->dl_sync), w->dl_link_sync_s), d);
  if (d != w->dl_recv_s && w->zc) parallel_zmq_set_timeout(w->zc, d);
  w->dl_recv_s = d;
  return d;
}

void peer_deadline_json(const peer_work *w, cJSON *body) {
  if (!w->is_train) return;
  cJSON *o = cJSON_AddObjectToObject(body, "deadline");
  cJSON_AddNumberToObject(o, "recv_s", w->dl_recv_s);
  cJSON_AddNumberToObject(o, "cap_s", w->dl_cap_s);
  const double q = wt_deadline_quantile(&w->dl_step);
  if (isfinite(q)) cJSON_AddNumberToObject(o, "step_q90_s", q);
  cJSON_AddNumberToObject(o, "steps_measured", wt_deadline_samples(&w->dl_step));
  if (w->dl_link_recv_s > 0) cJSON_AddNumberToObject(o, "link_s", w->dl_link_recv_s);
}
