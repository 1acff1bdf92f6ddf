/* status — the snapshot of the coordinator's state that /status, /metrics, the dashboard and
 * the demo's summary are built on: the HTTP side's status schema (version 1, coordinator/http.h)
 * plus the coordinator's own members (committed step, predicted costs, recovery, WAN bytes). */
#include "coordinator/coordinator_internal.h"

#include "common/common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void s_num(cJSON *o, const char *name, double v) {
  if (isfinite(v))
    cJSON_AddNumberToObject(o, name, v);
  else
    cJSON_AddNullToObject(o, name);
}

void coord_loss_record(coordinator *c, long step, float loss) {
  if (!isfinite(loss)) return;
  coord_loss_keep(c, step, loss);
  coord_state_save_loss(c, step, loss);
}

static void s_bytes(coordinator *c, double *intra, double *inter) {
  *intra = *inter = 0;
  for (int i = 0; i < c->n_peers; i++) {
    *intra += c->peers[i].done_intra + c->peers[i].bytes_intra;
    *inter += c->peers[i].done_inter + c->peers[i].bytes_inter;
  }
}

void coord_status_tick(coordinator *c) {
  double now = wt_now_s(), intra, inter;
  if (now - c->rate_t < 1) return;
  s_bytes(c, &intra, &inter);
  if (c->rate_t > 0) {
    c->rate_intra = fmax(0, intra - c->prev_intra) / (now - c->rate_t);
    c->rate_inter = fmax(0, inter - c->prev_inter) / (now - c->rate_t);
  }
  c->rate_t = now, c->prev_intra = intra, c->prev_inter = inter;
}

static const char *s_peer_state(const coordinator *c, const coord_peer *p) {
  if (p->finished) return "finished";
  if (p->status != PEER_LIVE) return "lost";
  if (p->epoch_rank < 0) return "standby";
  return !strcmp(c->epoch_kind, "probe") ? "probing" : "training";
}

static const char *s_run_state(const coordinator *c) {
  if (c->run_complete == 1) return "done";
  if (c->run_complete == 2) return "stopped";
  if (c->lost_at > 0 || c->phase == EPOCH_DRAINING) return "recovering";
  if (c->phase == EPOCH_NONE) return "waiting";
  return !strcmp(c->epoch_kind, "train") ? "training" : "probing";
}

/* A value the trainer holds as a float, as its shortest decimal (0.7, not 0.699999988). */
static double s_float_value(double v) {
  char text[32];
  snprintf(text, sizeof text, "%.7g", v);
  return strtod(text, NULL);
}

/* Admission and capacity: the table's size and bound, registrations refused for want of a
 * slot, failed, refused and cut CURVE handshakes, members sidelined for silence. */
static void s_admission(cJSON *o, coordinator *c) {
  int live = 0, sidelined = 0;
  const double now = wt_now_s();
  for (int i = 0; i < c->n_peers; i++) {
    live += c->peers[i].status == PEER_LIVE;
    sidelined += c->peers[i].status == PEER_LIVE && !coord_sideline_available(c, i, now);
  }
  uint64_t failed, refused, cut;
  coord_zap_counts(c, &failed, &refused, &cut);
  cJSON_AddNumberToObject(o, "max_peers", c->cfg.max_peers);
  cJSON_AddNumberToObject(o, "peers_total", c->n_peers);
  cJSON_AddNumberToObject(o, "peers_live", live);
  cJSON_AddNumberToObject(o, "peers_sidelined", sidelined);
  cJSON_AddNumberToObject(o, "refused_full", (double)c->refused_full);
  cJSON_AddNumberToObject(o, "handshakes_failed", (double)failed);
  cJSON_AddNumberToObject(o, "handshakes_refused", (double)refused);
  cJSON_AddNumberToObject(o, "handshakes_cut", (double)cut);
}

/* The relay between unreachable members: what it forwarded (every epoch's), and the current
 * epoch's inboxes. */
static void s_relay_json(cJSON *o, const coordinator *c) {
  double messages = 0, bytes = 0;
  coord_relay_stats(c, &messages, &bytes);
  cJSON *r = cJSON_AddObjectToObject(o, "relay");
  cJSON_AddBoolToObject(r, "active", c->relay != NULL || c->relay_rank >= 0);
  if (c->relay_rank >= 0) /* --relay peer: a member hosts it; what it forwards it logs */
    cJSON_AddNumberToObject(r, "host_peer", c->peers[c->members[c->relay_rank]].id);
  cJSON_AddNumberToObject(r, "messages", messages);
  cJSON_AddNumberToObject(r, "bytes", bytes);
}

/* A peer sidelined from epochs for now: why, and for how long still. */
static void s_peer_sideline(cJSON *j, const coordinator *c, int i) {
  const coord_peer *p = &c->peers[i];
  if (coord_sideline_available(c, i, wt_now_s())) return;
  cJSON_AddStringToObject(j, "sidelined", p->sidelined_why);
  cJSON_AddNumberToObject(j, "sidelined_for_s", round(p->sidelined_until - wt_now_s()));
}

/* The slots /status lists, at most COORD_STATUS_PEERS: those the run uses (members of the
 * epoch, world ranks of the plan), then the live ones, then the rest, each in slot order. A
 * snapshot of thousands of peers would hold the daemon's lock and the page for long;
 * "peer_counts" counts them all. Returns how many. */
static int s_listed(const coordinator *c, int *out) {
  char *in_run = wt_xcalloc((size_t)(c->n_peers ? c->n_peers : 1), 1);
  for (int i = 0; i < c->n_peers; i++) in_run[i] = c->peers[i].epoch_rank >= 0;
  for (int r = 0; r < c->n_plan; r++) in_run[c->plan_members[r]] = 1;
  int n = 0;
  for (int pass = 0; pass < 3; pass++)
    for (int i = 0; i < c->n_peers && n < COORD_STATUS_PEERS; i++) {
      int run = in_run[i], live = c->peers[i].status == PEER_LIVE;
      if (pass == 0 ? run : pass == 1 ? !run && live : !run && !live) out[n++] = i;
    }
  free(in_run);
  return n;
}

static void s_peer_counts(cJSON *o, const coordinator *c) {
  static const char *const states[] = {"probing", "standby", "training", "lost"};
  int counts[4] = {0};
  for (int i = 0; i < c->n_peers; i++) {
    const char *st = s_peer_state(c, &c->peers[i]);
    for (int k = 0; k < 4; k++) counts[k] += !strcmp(st, states[k]);
  }
  cJSON *pc = cJSON_AddObjectToObject(o, "peer_counts");
  for (int k = 0; k < 4; k++) cJSON_AddNumberToObject(pc, states[k], counts[k]);
}

/* Progress against the run's end: the expected time left at the measured iteration time (null
 * before one is measured), and where the latest complete checkpoint lives. */
static void s_progress(const coordinator *c, cJSON *o) {
  double left = (double)(c->cfg.run.steps - c->last_step);
  if (c->run_complete == 1)
    cJSON_AddNumberToObject(o, "eta_s", 0);
  else
    s_num(o, "eta_s", c->iteration_s > 0 ? fmax(left, 0) * c->iteration_s : NAN);
  cJSON_AddStringToObject(o, "checkpoint_dir", c->cfg.run.checkpoint_dir);
  /* the placement's predicted communication per iteration in wall seconds, beside the measured
   * iteration: the emulated WAN runs at time_scale wall seconds per emulated second */
  cJSON_AddNumberToObject(o, "time_scale", c->scenario ? c->cfg.time_scale : 1);
  s_num(o, "predicted_iteration_comm_s", c->cost_ga * (c->scenario ? c->cfg.time_scale : 1));
}

/* The newest events (joins, losses, epochs, checkpoints, promotions ...), oldest first. */
static void s_events(const coordinator *c, cJSON *o) {
  cJSON *events = cJSON_AddArrayToObject(o, "events");
  int first = (c->events_next - c->n_events + COORD_EVENTS_KEPT) % COORD_EVENTS_KEPT;
  for (int k = 0; k < c->n_events; k++) {
    const coord_event_line *e = &c->events[(first + k) % COORD_EVENTS_KEPT];
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "t", e->t);
    cJSON_AddStringToObject(j, "kind", e->kind);
    cJSON_AddStringToObject(j, "detail", e->detail);
    cJSON_AddItemToArray(events, j);
  }
}

cJSON *coord_status(coordinator *c) {
  cJSON *o = cJSON_CreateObject();
  char run[32];
  snprintf(run, sizeof run, "%016llx", (unsigned long long)c->run_id);
  cJSON_AddNumberToObject(o, "version", 1);
  cJSON_AddStringToObject(o, "run", run);
  cJSON_AddStringToObject(o, "state", s_run_state(c));
  cJSON_AddNumberToObject(o, "epoch", c->epoch);
  cJSON_AddNumberToObject(o, "step", (double)c->last_step);
  cJSON_AddNumberToObject(o, "stages", c->cfg.run.stages);
  cJSON_AddNumberToObject(o, "replicas", c->cfg.run.replicas);
  s_num(o, "loss", c->last_loss);
  cJSON *hist = cJSON_AddArrayToObject(o, "loss_history");
  for (int i = 0; i < c->n_hist; i++) {
    cJSON *pt = cJSON_CreateArray();
    cJSON_AddItemToArray(pt, cJSON_CreateNumber((double)c->hist_step[i]));
    cJSON_AddItemToArray(pt, cJSON_CreateNumber(c->hist_loss[i]));
    cJSON_AddItemToArray(hist, pt);
  }
  double tok = 0, intra, inter;
  for (int i = 0; i < c->n_peers; i++) { /* one replica's first stage counts its tokens */
    const coord_peer *p = &c->peers[i];
    if (p->status == PEER_LIVE && p->epoch_rank >= 0 && p->epoch_rank < c->cfg.run.replicas &&
        !strcmp(c->epoch_kind, "train"))
      tok += p->tokens_s;
  }
  cJSON_AddNumberToObject(o, "tokens_per_s", tok);
  cJSON *rates = cJSON_AddObjectToObject(o, "bytes_per_s");
  cJSON_AddNumberToObject(rates, "intra_region", c->rate_intra);
  cJSON_AddNumberToObject(rates, "inter_region", c->rate_inter);
  cJSON *sync = cJSON_AddObjectToObject(o, "sync"); /* as applied: a preset already expanded */
  cJSON_AddStringToObject(sync, "preset", c->cfg.run.sync.preset);
  cJSON_AddNumberToObject(sync, "diloco", c->cfg.run.sync.diloco);
  cJSON_AddStringToObject(sync, "grad_codec", c->cfg.run.sync.grad_codec);
  cJSON_AddStringToObject(sync, "grad_ef", c->cfg.run.sync.grad_ef);
  cJSON_AddNumberToObject(sync, "outer_lr", s_float_value(c->cfg.run.sync.outer_lr));
  cJSON_AddNumberToObject(sync, "outer_momentum", s_float_value(c->cfg.run.sync.outer_momentum));
  cJSON_AddStringToObject(sync, "act_codec", c->cfg.run.act_codec);
  /* each stage's data-parallel ring as the placement chose it (replica order before one) */
  cJSON *rings = cJSON_AddArrayToObject(o, "rings");
  const int R = c->cfg.run.replicas;
  for (int s = 0; s < c->cfg.run.stages; s++) {
    cJSON *ring = cJSON_CreateArray();
    for (int i = 0; i < R; i++)
      cJSON_AddItemToArray(ring, cJSON_CreateNumber(c->n_rings ? c->rings[s * R + i] : i));
    cJSON_AddItemToArray(rings, ring);
  }
  coord_trust_status(c, o); /* peers_excluded, excluded, trust */
  /* what the probes measured: the directed matrix among the live peers and their access links */
  cJSON *probe = coord_probe_json(c);
  cJSON_AddItemToObject(probe, "problem", coord_epoch_problem_json(c));
  cJSON_AddItemToObject(o, "probe", probe);
  cJSON *peers = cJSON_AddArrayToObject(o, "peers");
  int *listed = wt_xmalloc(sizeof(int) * (size_t)(c->n_peers ? c->n_peers : 1));
  int n_listed = s_listed(c, listed);
  for (int k = 0; k < n_listed; k++) {
    const int i = listed[k];
    const coord_peer *p = &c->peers[i];
    cJSON *j = cJSON_CreateObject();
    char id[16];
    snprintf(id, sizeof id, "%d", p->id);
    cJSON_AddStringToObject(j, "id", id);
    cJSON_AddStringToObject(j, "key", p->key);
    cJSON_AddStringToObject(j, "region", p->region);
    cJSON_AddNumberToObject(j, "scenario_device", p->device_index); /* -1: none emulated */
    int seated = p->epoch_rank >= 0 && !strcmp(c->epoch_kind, "train");
    cJSON_AddNumberToObject(j, "stage", seated ? p->epoch_rank / c->cfg.run.replicas : -1);
    cJSON_AddNumberToObject(j, "replica", seated ? p->epoch_rank % c->cfg.run.replicas : -1);
    cJSON_AddStringToObject(j, "state", s_peer_state(c, p));
    cJSON_AddStringToObject(j, "device", p->kind);
    cJSON_AddNumberToObject(j, "flops", p->flops);
    cJSON_AddNumberToObject(j, "memory", p->memory);
    cJSON_AddNumberToObject(j, "gpus", p->gpus > 0 ? p->gpus : 1);
    cJSON_AddNumberToObject(j, "step", (double)p->step);
    s_num(j, "loss", p->loss);
    cJSON_AddNumberToObject(j, "tokens_s", p->tokens_s);
    s_peer_sideline(j, c, i);
    cJSON_AddStringToObject(j, "reachable", coord_reach_name(p->reach));
    if (p->reach_why[0]) cJSON_AddStringToObject(j, "reach_why", p->reach_why);
    coord_deadline_peer_json(c, (coord_peer *)p, j);
    cJSON_AddItemToArray(peers, j);
  }
  free(listed);
  s_peer_counts(o, c);
  s_relay_json(o, c);
  /* the coordinator's own members */
  cJSON_AddStringToObject(o, "endpoint", c->endpoint);
  cJSON_AddStringToObject(o, "public_key", c->pub);
  cJSON_AddStringToObject(o, "epoch_kind", c->epoch_kind);
  cJSON_AddNumberToObject(o, "steps", c->cfg.run.steps);
  cJSON_AddNumberToObject(o, "committed_step", (double)c->committed_step);
  s_num(o, "first_loss", c->first_loss);
  s_num(o, "predicted_cost_ga_s", c->cost_ga);
  s_num(o, "predicted_cost_random_s", c->cost_random);
  s_num(o, "recovery_s", c->recovery_s);
  cJSON_AddItemToObject(o, "deadlines", coord_deadline_json(c));
  s_num(o, "measured_iteration_s", c->iteration_s);
  s_bytes(c, &intra, &inter);
  cJSON_AddNumberToObject(o, "bytes_intra_region", intra);
  cJSON_AddNumberToObject(o, "wan_bytes", inter);
  double raw = 0; /* what the WAN would have carried with float32 activations */
  for (int i = 0; i < c->n_peers; i++)
    raw += c->peers[i].done_inter_raw + c->peers[i].bytes_inter_raw;
  cJSON_AddNumberToObject(o, "wan_bytes_uncompressed", raw);
  cJSON_AddNumberToObject(o, "refused", (double)c->refused);
  s_admission(o, c);
  if (c->last_error[0]) cJSON_AddStringToObject(o, "last_error", c->last_error);
  s_progress(c, o);
  coord_holders_status(c, o);
  cJSON_AddStringToObject(o, "checkpoint_storage_why", coordinator_checkpoint_storage_why(&c->cfg));
  s_events(c, o);
  return o;
}

char *coordinator_status_json(coordinator *c) {
  pthread_mutex_lock(&c->mu);
  cJSON *o = coord_status(c);
  pthread_mutex_unlock(&c->mu);
  coordinator_http_utf8_repair(o); /* labels restored from an older state were never checked */
  char *text = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  return text;
}
