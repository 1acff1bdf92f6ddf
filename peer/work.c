/* work — one epoch's work on its own thread: a link probe (peer/probe.c, through the same
 * ZeroMQ links and WAN emulation training uses) or a training tasklet. */
#include "peer/peer_internal.h"

#include "common/bytes.h" /* defines: wt_put_le64 / wt_get_le64 for the hand-over header */
#include "common/common.h"
#include "compress/acsgd.h" /* defines: acsgd_msg_bytes, the activation codec's message size */
#include "coordinator/protocol.h" /* defines: coordinator_field_*, reading epoch messages */
#include "kernels/kernels.h"
#include "model/gpt.h" /* defines: gpt_config_num_params, the baseline's gradient bytes */
#include "parallel/runtime/tasklet.h"
#include "parallel/transport/shards.h" /* defines: parallel_shard_run_dir, the store's run directory */
#include "peer/shards.h"
#include "parallel/transport/zmq_relay.h"

#include <sodium.h> /* defines: crypto_hash_sha256 for the state hand-over */

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define S_TAG_STATE_HEAD 9101 /* the state hand-over: step, bytes, SHA-256 ... */
#define S_TAG_STATE 9102      /* ... then the blob */

/* ---- the aborting wrapper: once w->abort is set every op fails, so the tasklet returns and
 * its comm says goodbye, which ends the neighbours' waits at once ---------------------------- */

typedef struct {
  parallel_comm *inner;
  peer_work *w;
} s_wrap;

static int s_wsend(void *ctx, int peer, int tag, const void *buf, size_t bytes) {
  s_wrap *x = ctx;
  if (x->w->abort) return wt_fail(WT_EIO, "the coordinator aborted epoch %d", x->w->epoch);
  return parallel_comm_send(x->inner, peer, tag, buf, bytes);
}

static int s_wrecv(void *ctx, int peer, int tag, void *buf, size_t cap, size_t *got) {
  s_wrap *x = ctx;
  if (x->w->abort) return wt_fail(WT_EIO, "the coordinator aborted epoch %d", x->w->epoch);
  return parallel_comm_recv(x->inner, peer, tag, buf, cap, got);
}

static const parallel_transport_ops s_wrap_ops = {
    .name = "peerd", .send = s_wsend, .recv = s_wrecv};

/* A train epoch's run: its "train" object decoded and checked as the coordinator checked it, so
 * a peer trains exactly what the operator set, and refuses what it could not train. */
static int s_run_of(const cJSON *epoch, int n, parallel_run_config *run) {
  char origin[64];
  snprintf(origin, sizeof origin, "epoch %d's run", n);
  const cJSON *train = cJSON_GetObjectItemCaseSensitive(epoch, "train");
  if (!cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(epoch, "tasklet")))
    return wt_fail(WT_EINVAL, "%s: a train epoch without its tasklet's seat", origin);
  WT_CHECK(parallel_run_config_from_json(train, origin, run));
  if (parallel_run_config_check(run) != WT_OK) {
    char why[1024];
    snprintf(why, sizeof why, "%s", wt_last_error());
    return wt_fail(WT_EINVAL, "%s cannot train: %s", origin, why);
  }
  return WT_OK;
}

/* EPOCH's routes (coordinator/reach.c): "reachable" per rank, and "relay_inboxes" for the
 * member that hosts the epoch's relay (made here, on this peer's host). */
static int s_routes_of(peer_work *w, const cJSON *epoch, const char *host, int *reachable) {
  const cJSON *re = cJSON_GetObjectItemCaseSensitive(epoch, "reachable");
  if (!re) return WT_OK;
  if (cJSON_GetArraySize(re) != w->size)
    return wt_fail(WT_EINVAL, "the coordinator sent an impossible epoch (reachable)");
  for (int r = 0; r < w->size; r++)
    reachable[r] = cJSON_GetNumberValue(cJSON_GetArrayItem(re, r)) == 1;
  w->routed = 1;
  const int inboxes = coordinator_field_int(epoch, "relay_inboxes", 0);
  if (inboxes <= 0) return WT_OK;
  if (inboxes > w->size)
    return wt_fail(WT_EINVAL, "the coordinator asked for %d relay inboxes in a group of %d",
                   inboxes, w->size);
  w->relay = parallel_zmq_relay_new(host, inboxes, 0, 0);
  if (!w->relay) return WT_EIO;
  WT_INFO("peerd: hosting the relay of epoch %d: %d inboxes on %s", w->epoch, inboxes, host);
  return WT_OK;
}

/* A relay bound to every address (0.0.0.0, [::]) announces that address: the peer reaches it at
 * the host it reaches the coordinator at. Other endpoints are returned as they are. */
static const char *s_relay_endpoint(const char *ep, const char *coordinator, char *buf,
                                    size_t cap) {
  if (!ep || !coordinator || strncmp(coordinator, "tcp://", 6)) return ep;
  const char *port = strrchr(ep, ':');
  if (!port || (strncmp(ep, "tcp://0.0.0.0:", 14) && strncmp(ep, "tcp://[::]:", 11))) return ep;
  const char *host = coordinator + 6, *host_end = strrchr(host, ':');
  if (!host_end) return ep;
  snprintf(buf, cap, "tcp://%.*s%s", (int)(host_end - host), host, port);
  return buf;
}

void peer_work_outboxes_json(const peer_work *w, cJSON *bound) {
  if (!w->routed || !w->transport) return;
  cJSON *ob = cJSON_AddArrayToObject(bound, "outboxes");
  for (int r = 0; r < w->size; r++) {
    const char *ep = parallel_zmq_transport_outbox(w->transport, r);
    cJSON_AddItemToArray(ob, ep ? cJSON_CreateString(ep) : cJSON_CreateNull());
  }
  if (!w->relay) return;
  cJSON *in = cJSON_AddArrayToObject(bound, "relay_in");
  cJSON *out = cJSON_AddArrayToObject(bound, "relay_out");
  for (int k = 0; parallel_zmq_relay_in(w->relay, k); k++) {
    cJSON_AddItemToArray(in, cJSON_CreateString(parallel_zmq_relay_in(w->relay, k)));
    cJSON_AddItemToArray(out, cJSON_CreateString(parallel_zmq_relay_out(w->relay, k)));
  }
}

/* START's routes for this peer: the outboxes of reachable ranks for it, the relay inboxes of
 * the unreachable ranks and its own inbox's outlet (wildcard hosts made reachable into eps). */
static int s_start_routes(const peer_work *w, const cJSON *start, const char **outboxes,
                          const char **relay_in, char (*eps)[300], parallel_zmq_routes *routes) {
  const cJSON *ob = cJSON_GetObjectItemCaseSensitive(start, "outboxes");
  const cJSON *in = cJSON_GetObjectItemCaseSensitive(start, "relay_in");
  if ((ob && cJSON_GetArraySize(ob) != w->size) || (in && cJSON_GetArraySize(in) != w->size))
    return wt_fail(WT_EINVAL, "START lists outboxes or relay inboxes for another group size");
  for (int i = 0; i < w->size; i++) {
    outboxes[i] = ob ? cJSON_GetStringValue(cJSON_GetArrayItem(ob, i)) : NULL;
    relay_in[i] = s_relay_endpoint(in ? cJSON_GetStringValue(cJSON_GetArrayItem(in, i)) : NULL,
                                   w->coordinator, eps[i], sizeof eps[i]);
  }
  const char *out = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(start, "relay_out"));
  *routes = (parallel_zmq_routes){outboxes, relay_in,
                                  s_relay_endpoint(out, w->coordinator, eps[64], sizeof eps[64])};
  return WT_OK;
}

peer_work *peer_work_new(const cJSON *epoch, const char *host, const char *coordinator,
                         const char *pub, const char *sec, const data_set *data, peer_held *held) {
  peer_work *w = wt_xcalloc(1, sizeof *w);
  w->held = held;
  pthread_mutex_init(&w->mu, NULL);
  w->body = cJSON_Duplicate(epoch, 1);
  w->epoch = coordinator_field_int(epoch, "epoch", -1);
  w->rank = coordinator_field_int(epoch, "rank", -1);
  w->size = coordinator_field_int(epoch, "size", 0);
  w->is_train = !strcmp(coordinator_field_str(epoch, "kind"), "train");
  w->data = data;
  if (w->is_train && s_run_of(epoch, w->epoch, &w->run) != WT_OK) {
    peer_work_destroy(&w);
    return NULL;
  }
  w->loss = w->first_loss = NAN;
  const cJSON *keys = cJSON_GetObjectItemCaseSensitive(epoch, "keys");
  const cJSON *la = cJSON_GetObjectItemCaseSensitive(epoch, "latency_s");
  const cJSON *bw = cJSON_GetObjectItemCaseSensitive(epoch, "bandwidth_Bps");
  int ok = w->size >= 1 && w->size <= 64 && w->rank >= 0 && w->rank < w->size &&
           cJSON_GetArraySize(keys) == w->size && (!la || cJSON_GetArraySize(la) == w->size) &&
           (!bw || cJSON_GetArraySize(bw) == w->size) && !la == !bw;
  for (int i = 0; ok && i < w->size; i++) {
    const char *k = cJSON_GetStringValue(cJSON_GetArrayItem(keys, i));
    ok = k && strlen(k) == 40;
    if (ok) memcpy(w->keys[i], k, 41);
  }
  if (ok && la) {
    w->lat = wt_xcalloc((size_t)w->size, sizeof(double));
    w->bw = wt_xcalloc((size_t)w->size, sizeof(double));
    for (int i = 0; i < w->size; i++) {
      w->lat[i] = cJSON_GetNumberValue(cJSON_GetArrayItem(la, i));
      w->bw[i] = cJSON_GetNumberValue(cJSON_GetArrayItem(bw, i));
      ok = ok && w->lat[i] >= 0 && w->lat[i] < 10 && w->bw[i] >= 0;
    }
  }
  const cJSON *sa = cJSON_GetObjectItemCaseSensitive(epoch, "same_access");
  ok = ok && (!sa || (la && cJSON_GetArraySize(sa) == w->size));
  if (ok && sa) {
    w->same_access = wt_xcalloc((size_t)w->size, sizeof(int));
    for (int i = 0; i < w->size; i++)
      w->same_access[i] = cJSON_GetNumberValue(cJSON_GetArrayItem(sa, i)) != 0;
    w->uplink_Bps = coordinator_field_num(epoch, "uplink_Bps", 0);
    w->downlink_Bps = coordinator_field_num(epoch, "downlink_Bps", 0);
    ok = w->uplink_Bps >= 0 && w->downlink_Bps >= 0;
  }
  if (!ok) {
    wt_fail(WT_EINVAL, "the coordinator sent an impossible epoch (rank, size, keys or links)");
    peer_work_destroy(&w);
    return NULL;
  }
  int reachable[64];
  snprintf(w->coordinator, sizeof w->coordinator, "%s", coordinator ? coordinator : "");
  if (s_routes_of(w, epoch, host, reachable) != WT_OK) {
    char why[1024];
    snprintf(why, sizeof why, "%s", wt_last_error());
    peer_work_destroy(&w);
    wt_fail(WT_EIO, "cannot set up epoch %d's routes: %s",
            coordinator_field_int(epoch, "epoch", -1), why);
    return NULL;
  }
  char ep[300];
  snprintf(ep, sizeof ep, "tcp://%s:*", host);
  const char *eps[64];
  for (int i = 0; i < w->size; i++) eps[i] = ep;
  const char *pubs[64];
  for (int i = 0; i < w->size; i++) pubs[i] = w->keys[i];
  parallel_zmq_config z = parallel_zmq_config_default();
  z.rank = w->rank, z.size = w->size, z.endpoints = eps;
  z.run_id = (uint64_t)fmin(fmax(coordinator_field_num(epoch, "run_id", 1), 0), 1e18);
  w->run_id = z.run_id;
  snprintf(w->pub, sizeof w->pub, "%s", pub);
  snprintf(w->sec, sizeof w->sec, "%s", sec);
  z.epoch = (uint32_t)w->epoch;
  z.timeout_s = coordinator_field_num(epoch, "timeout_s", 30);
  peer_deadline_start(w, z.timeout_s, cJSON_GetObjectItemCaseSensitive(epoch, "deadline"));
  z.secret_key = sec, z.public_key = pub, z.peer_public_keys = pubs;
  z.latency_s = w->lat, z.bandwidth_Bps = w->bw;
  z.time_scale = coordinator_field_num(epoch, "time_scale", 1);
  z.same_access = w->same_access;
  z.uplink_Bps = w->uplink_Bps, z.downlink_Bps = w->downlink_Bps;
  if (w->routed) z.reachable = reachable;
  w->transport = parallel_zmq_transport_new(&z);
  if (!w->transport) {
    char why[1024];
    snprintf(why, sizeof why, "%s", wt_last_error());
    peer_work_destroy(&w);
    wt_fail(WT_EIO, "cannot open the data socket for epoch: %s", why);
    return NULL;
  }
  return w;
}

void peer_work_use_store(peer_work *w, const char *root) {
  snprintf(w->shard_root, sizeof w->shard_root, "%s", root);
  parallel_shard_run_dir(root, w->run_id, w->run.checkpoint_dir, sizeof w->run.checkpoint_dir);
}

const char *peer_work_endpoint(const peer_work *w) {
  return parallel_zmq_transport_endpoint(w->transport);
}

/* ---- training ---------------------------------------------------------------------------- */

/* ---- the --json-log records (peer.h): written by the work thread only -------------------- */

static void s_log(peer_work *w, cJSON *o) {
  char *text = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  if (text && w->log) {
    fprintf(w->log, "%s\n", text);
    fflush(w->log);
  }
  free(text);
}

static void s_log_num_or_null(cJSON *o, const char *key, double v) {
  if (isfinite(v))
    cJSON_AddNumberToObject(o, key, v);
  else
    cJSON_AddNullToObject(o, key);
}

static void s_log_step(peer_work *w, const parallel_tasklet_step *st) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "step", (double)st->info.step);
  cJSON_AddNumberToObject(o, "loss", st->info.loss);
  s_log_num_or_null(o, "val_loss", st->val_loss);
  cJSON_AddNumberToObject(o, "step_s", st->info.seconds);
  cJSON_AddNumberToObject(o, "rank", w->rank);
  cJSON_AddNumberToObject(o, "bytes_pipeline", (double)st->bytes_pipeline);
  cJSON_AddNumberToObject(o, "bytes_data", (double)st->bytes_data);
  cJSON_AddNumberToObject(o, "bytes_control", (double)st->bytes_control);
  s_log(w, o);
}

/* What the tasklet and the transport counted, at the end of the epoch's tasklet. */
static void s_log_done(peer_work *w, int rc, const parallel_tasklet_result *res,
                       parallel_comm *zc) {
  if (!w->log) return;
  double wire = 0, wait = 0;
  for (int p = 0; p < w->size; p++) {
    parallel_zmq_link_stats ls = parallel_zmq_link_stats_get(zc, p);
    wire += (double)ls.bytes_sent, wait += ls.wait_s;
  }
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "event", "done");
  cJSON_AddNumberToObject(o, "epoch", w->epoch);
  cJSON_AddNumberToObject(o, "rank", w->rank);
  cJSON_AddBoolToObject(o, "ok", rc == WT_OK);
  if (rc != WT_OK) cJSON_AddStringToObject(o, "error", wt_last_error());
  cJSON_AddNumberToObject(o, "steps", (double)res->steps_done);
  s_log_num_or_null(o, "loss", res->last_loss);
  s_log_num_or_null(o, "val_loss", res->last_val_loss);
  cJSON_AddBoolToObject(o, "time_limited", res->time_limited);
  cJSON_AddNumberToObject(o, "seconds", res->seconds);
  cJSON_AddNumberToObject(o, "compute_s", res->compute_s);
  cJSON_AddNumberToObject(o, "bytes_pipeline", (double)res->bytes_pipeline);
  cJSON_AddNumberToObject(o, "bytes_data", (double)res->bytes_data);
  cJSON_AddNumberToObject(o, "bytes_control", (double)res->bytes_control);
  cJSON_AddNumberToObject(o, "bytes_site", (double)res->bytes_site);
  cJSON_AddNumberToObject(o, "wire_bytes", wire);
  cJSON_AddNumberToObject(o, "wait_s", wait);
  cJSON_AddNumberToObject(o, "refused", (double)parallel_zmq_refused(zc));
  cJSON_AddNumberToObject(o, "pipeline_s", res->pipeline_s);
  cJSON_AddNumberToObject(o, "tied_s", res->tied_s);
  cJSON_AddNumberToObject(o, "reduce_s", res->reduce_s);
  cJSON_AddNumberToObject(o, "norm_s", res->norm_s);
  cJSON_AddNumberToObject(o, "recomputes", (double)res->recomputes);
  s_log(w, o);
}

/* Fault injection for the tests: WANTRAIN_PEERD_DIE=RANK:STEP makes the peer at that world
 * rank exit abruptly after that step (no goodbye, no result), as a crash would. */
static void s_maybe_die(const peer_work *w, long step) {
  const char *die = getenv("WANTRAIN_PEERD_DIE");
  int rank = -1;
  long at = -1;
  if (die && sscanf(die, "%d:%ld", &rank, &at) == 2 && rank == w->rank && step == at) {
    if (w->log) fflush(w->log);
    _exit(3);
  }
}

/* Counts a step's robust-sync evidence (replica order; NULL: the step had none). Under mu. */
static void s_trust_record(peer_work *w, const parallel_robust_report *rep,
                           const parallel_tasklet_spot *spot) {
  if (spot && spot->target >= 0 && spot->target < 64)
    w->spot_checked[spot->target]++, w->spot_failed[spot->target] += spot->failed;
  if (!rep) return;
  w->trust_syncs++;
  for (int r = 0; r < rep->world && r < 64; r++)
    if (rep->rank[r].flags) w->trust_flagged[r]++, w->trust_why[r] |= rep->rank[r].flags;
}

static void s_on_step(void *arg, const parallel_tasklet_step *st) {
  peer_work *w = arg;
  /* The next messages belong to the next step: the transport stamps it on them and names it in
   * its errors. */
  parallel_zmq_msg_context ctx = {.kind = PARALLEL_ZMQ_KIND_DATA,
                                  .step = (uint32_t)st->info.step + 1};
  parallel_zmq_set_context(w->zc, &ctx);
  s_log_step(w, st);
  s_maybe_die(w, st->info.step);
  pthread_mutex_lock(&w->mu);
  double now = wt_now_s(), dt = now - w->t_last;
  const parallel_run_config *run = &w->run;
  double tokens = (double)run->batch * run->seq / run->replicas;
  if (w->t_last > 0 && dt > 0) w->tokens_s = tokens / dt;
  w->t_last = now;
  w->step = st->info.step;
  w->compute_steps++, w->compute_s = st->compute_s;
  if (st->info.step == 1) w->first_loss = st->info.loss;
  w->loss = st->info.loss;
  w->bytes_sent = (double)(st->bytes_pipeline + st->bytes_data + st->bytes_control);
  const cJSON *regions = cJSON_GetObjectItemCaseSensitive(w->body, "regions");
  const char *mine = cJSON_GetStringValue(cJSON_GetArrayItem(regions, w->rank));
  double intra = 0, inter = 0, inter_raw = 0, recv = 0;
  /* Without compression: each step sends m micro-batches of rows samples forward to the next
   * stage and their gradients back to the previous one; the codec's bytes are fixed per sample
   * (compress/acsgd.h), so what it saved on a pipeline link is exact. */
  const int R = run->replicas, S = run->stages;
  const double rows = (double)run->batch / R;
  if (w->start_step < 0) w->start_step = st->info.step - 1;
  const double saved = (double)(st->info.step - w->start_step) * rows * w->act_saved_row;
  for (int p = 0; p < w->size; p++) {
    parallel_zmq_link_stats ls = parallel_zmq_link_stats_get(w->zc, p);
    const char *theirs = cJSON_GetStringValue(cJSON_GetArrayItem(regions, p));
    int pipe_next = w->stage + 1 < S && p == (w->stage + 1) * R + w->replica;
    int pipe_prev = w->stage > 0 && p == (w->stage - 1) * R + w->replica;
    if (mine && theirs && !strcmp(mine, theirs)) {
      intra += (double)ls.bytes_sent;
    } else {
      inter += (double)ls.bytes_sent;
      /* the ring's next gets what a float32 all-reduce every step sends, at least */
      double dp_raw =
          p == w->dp_next ? (double)(st->info.step - w->start_step) * w->dp_raw_step : 0;
      inter_raw += fmax((double)ls.bytes_sent + (pipe_next || pipe_prev ? saved : 0), dp_raw);
    }
    recv += (double)ls.bytes_recv;
  }
  w->bytes_intra = intra, w->bytes_inter = inter, w->bytes_recv = recv;
  w->bytes_inter_raw = inter_raw;
  s_trust_record(w, st->robust, st->spot);
  peer_deadline_on_step(w, st->info.step, w->start_step < st->info.step - 1 ? dt : 0);
  pthread_mutex_unlock(&w->mu);
}

void peer_work_trust_json(peer_work *w, cJSON *body) {
  pthread_mutex_lock(&w->mu);
  const int R = WT_MIN(w->run.replicas, 64);
  if (w->is_train && strcmp(w->run.robust, "none") && w->trust_syncs > 0) {
    cJSON *t = cJSON_AddObjectToObject(body, "trust");
    cJSON_AddNumberToObject(t, "syncs", (double)w->trust_syncs);
    cJSON *flagged = cJSON_AddArrayToObject(t, "flagged"), *why = cJSON_AddArrayToObject(t, "why");
    for (int r = 0; r < R; r++) {
      char names[96];
      parallel_robust_flags_str(w->trust_why[r], names, sizeof names);
      cJSON_AddItemToArray(flagged, cJSON_CreateNumber((double)w->trust_flagged[r]));
      cJSON_AddItemToArray(why, cJSON_CreateString(names));
    }
    cJSON *checked = cJSON_AddArrayToObject(t, "spot_checked"),
          *failed = cJSON_AddArrayToObject(t, "spot_failed");
    for (int r = 0; r < R; r++) {
      cJSON_AddItemToArray(checked, cJSON_CreateNumber((double)w->spot_checked[r]));
      cJSON_AddItemToArray(failed, cJSON_CreateNumber((double)w->spot_failed[r]));
    }
  }
  peer_deadline_json(w, body);
  if (w->is_train && w->compute_steps > 0) {
    cJSON *m = cJSON_AddObjectToObject(body, "compute");
    cJSON_AddNumberToObject(m, "steps", (double)w->compute_steps);
    cJSON_AddNumberToObject(m, "s", w->compute_s);
  }
  pthread_mutex_unlock(&w->mu);
}

/* ---- the state hand-over: before the tasklet starts, every member the coordinator names as a
 * source (state_from[r] == r) sends its held state to the members that start from it; they check
 * its SHA-256, stage and step. The sources never receive, so the sends cannot deadlock. ------- */

void peer_held_clear(peer_held *h) {
  free(h->blob);
  memset(h, 0, sizeof *h);
}

static int s_state_send(const peer_held *held, parallel_comm *world, int to) {
  uint8_t head[48];
  wt_put_le64(head, (uint64_t)held->step);
  wt_put_le64(head + 8, (uint64_t)held->bytes);
  crypto_hash_sha256(head + 16, held->blob, held->bytes);
  WT_CHECK(parallel_comm_send(world, to, S_TAG_STATE_HEAD, head, sizeof head));
  return parallel_comm_send(world, to, S_TAG_STATE, held->blob, held->bytes);
}

static int s_state_recv(parallel_comm *world, int from, int stage, long step, int live,
                        void **out, size_t *out_bytes) {
  uint8_t head[48], digest[32];
  size_t got = 0;
  WT_CHECK(parallel_comm_recv(world, from, S_TAG_STATE_HEAD, head, sizeof head, &got));
  uint64_t bytes = wt_get_le64(head + 8);
  const uint64_t at_step = wt_get_le64(head);
  if (got != sizeof head || (live ? at_step > (uint64_t)step : at_step != (uint64_t)step) ||
      bytes < 64 || bytes > (1ull << 40))
    return wt_fail(WT_ECORRUPT,
                   "state hand-over from rank %d: a header for step %llu of %llu bytes, "
                   "expected step %ld",
                   from, (unsigned long long)wt_get_le64(head), (unsigned long long)bytes, step);
  uint8_t *blob = wt_xmalloc((size_t)bytes);
  int rc = parallel_comm_recv(world, from, S_TAG_STATE, blob, (size_t)bytes, &got);
  if (rc == WT_OK && got != bytes)
    rc = wt_fail(WT_ECORRUPT, "state hand-over from rank %d: %zu bytes, announced %llu", from, got,
                 (unsigned long long)bytes);
  if (rc == WT_OK) crypto_hash_sha256(digest, blob, (size_t)bytes);
  if (rc == WT_OK && sodium_memcmp(digest, head + 16, 32) != 0)
    rc = wt_fail(WT_ECORRUPT,
                 "state hand-over from rank %d: SHA-256 mismatch; the state was "
                 "damaged on the way and is refused",
                 from);
  int s = -1;
  long at = -1;
  if (rc == WT_OK) rc = parallel_tasklet_state_info(blob, (size_t)bytes, &s, &at);
  if (rc == WT_OK && (s != stage || at != (long)at_step))
    rc = wt_fail(WT_ECORRUPT,
                 "state hand-over from rank %d: stage %d at step %ld, expected stage "
                 "%d at step %ld",
                 from, s, at, stage, step);
  if (rc != WT_OK) {
    free(blob);
    return rc;
  }
  *out = blob, *out_bytes = (size_t)bytes;
  return WT_OK;
}

/* peer_internal.h: sources send first, then everyone takes its start. */
int peer_state_exchange(const peer_held *held, parallel_comm *world, const cJSON *from, int stage,
                        long step, int live, const void **in, size_t *in_bytes, int *owned) {
  const int me = parallel_comm_rank(world), size = parallel_comm_size(world);
  if (cJSON_GetArraySize(from) != size || size > 64)
    return wt_fail(WT_EINVAL, "state_from lists %d sources for a group of %d",
                   cJSON_GetArraySize(from), size);
  int src[64] = {0};
  for (int r = 0; r < size; r++) {
    const cJSON *e = cJSON_GetArrayItem(from, r);
    src[r] = cJSON_IsNumber(e) ? (int)fmin(fmax(e->valuedouble, -1), 1e6) : -1;
    if (src[r] < 0 || src[r] >= size)
      return wt_fail(WT_EINVAL, "state_from names source %d for rank %d", src[r], r);
  }
  int asked = src[me] == me; /* starting from its own state, or sending it */
  for (int r = 0; r < size; r++) asked |= r != me && src[r] == me;
  if (asked && (!held->blob || (live ? held->step > step : held->step != step)))
    return wt_fail(WT_EINVAL,
                   "the coordinator expects this peer to hold a stage at step %ld; it "
                   "holds stage %d at step %ld",
                   step, held->stage, held->step);
  for (int r = 0; r < size; r++)
    if (r != me && src[r] == me) WT_CHECK(s_state_send(held, world, r));
  if (src[me] == me) {
    if (held->stage != stage)
      return wt_fail(WT_EINVAL,
                     "the coordinator expects this peer to hold stage %d; it holds "
                     "stage %d",
                     stage, held->stage);
    *in = held->blob, *in_bytes = held->bytes, *owned = 0;
    return WT_OK;
  }
  void *blob = NULL;
  size_t bytes = 0;
  double t0 = wt_now_s();
  WT_CHECK(s_state_recv(world, src[me], stage, step, live, &blob, &bytes));
  WT_INFO("peerd: stage %d at step %ld: %.1f MB of state from rank %d in %.2f s, SHA-256 ok%s",
          stage, step, (double)bytes / 1e6, src[me], wt_now_s() - t0,
          live ? "; a replacement replica: it starts from the outer weights" : "");
  *in = blob, *in_bytes = bytes, *owned = 1;
  return WT_OK;
}

/* The stage's data-parallel ring the coordinator sent (tasklet.dp_ring): R replica numbers, which
 * parallel_tasklet_config_validate checks to be a ring starting at replica 0; replica order
 * when the coordinator sent none. */
static int s_ring_of(const cJSON *t, int R, int *ring) {
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(t, "dp_ring");
  for (int i = 0; i < R; i++) ring[i] = i;
  if (!a) return WT_OK;
  if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != R)
    return wt_fail(WT_EINVAL, "the coordinator sent a dp_ring of %d entries for %d replicas",
                   cJSON_GetArraySize(a), R);
  for (int i = 0; i < R; i++) {
    const cJSON *x = cJSON_GetArrayItem(a, i);
    if (!cJSON_IsNumber(x) || x->valuedouble < 0 || x->valuedouble >= R ||
        x->valuedouble != (int)x->valuedouble)
      return wt_fail(WT_EINVAL, "the coordinator sent a dp_ring entry that is no replica of %d", R);
    ring[i] = (int)x->valuedouble;
  }
  return WT_OK;
}

/* The uncompressed baseline of the data-parallel sync: a float32 ring all-reduce of the
 * stage's share of the parameters every step sends 2 (R - 1) / R of them to the ring's next. */
static void s_dp_baseline(peer_work *w, const parallel_tasklet_config *c,
                          const gpt_config *model) {
  const int R = c->run.replicas;
  w->dp_next = -1, w->dp_raw_step = 0;
  if (R <= 1) return;
  int pos = 0;
  while (pos < R && c->dp_ring[pos] != c->replica) pos++;
  w->dp_next = c->stage * R + c->dp_ring[(pos + 1) % R];
  const double stage_params = (double)gpt_config_num_params(model) / c->run.stages;
  w->dp_raw_step = 2.0 * (R - 1) / R * 4.0 * stage_params;
}

static int s_train(peer_work *w, parallel_comm *world, parallel_comm *zc) {
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(w->body, "tasklet");
  parallel_tasklet_config c;
  WT_CHECK(parallel_tasklet_config_from_run(&w->run, coordinator_field_int(t, "stage", 0),
                                            coordinator_field_int(t, "replica", 0), w->data, &c));
  c.resume = coordinator_field_int(t, "resume", 0);
  if (w->shard_root[0]) { /* the checkpoints live in this peer's store */
    c.private_dir = 1;
    c.owner_prunes = 1; /* the store prunes what this peer holds, around the pinned step */
    c.resume_step = (long)coordinator_field_num(t, "resume_step", 0);
    if (c.resume)
      WT_CHECK(peer_shards_prepare(w->shard_root, w->run_id,
                                   cJSON_GetObjectItemCaseSensitive(t, "fetch"), w->pub, w->sec,
                                   peer_deadline_fetch_s(w->body)));
  }
  WT_CHECK(s_ring_of(t, c.run.replicas, w->dp_ring));
  c.dp_ring = w->dp_ring;
  c.on_step = s_on_step;
  c.on_step_arg = w;
  /* the site is this peer's own (--gpus, --site); the run says how a site splits its stage */
  c.run.site_ranks = w->site_ranks;
  c.site_link = w->site_link;
  int bits = !strncmp(c.run.act_codec, "direct", 6) ? atoi(c.run.act_codec + 6) : 0;
  const int T = c.run.seq, C = c.run.channels;
  pthread_mutex_lock(&w->mu);
  w->stage = c.stage, w->replica = c.replica, w->total_steps = c.run.steps;
  w->start_step = -1; /* the first step done tells */
  w->act_saved_row = bits ? 4.0 * T * C - (double)acsgd_msg_bytes(T, C, bits) : 0;
  pthread_mutex_unlock(&w->mu);
  WT_CHECK(parallel_tasklet_config_validate(&c, parallel_comm_size(world)));
  const cJSON *from = cJSON_GetObjectItemCaseSensitive(t, "state_from");
  /* A stateful run other than DiLoCo (error feedback, delta caches, ZeRO-1) keeps no state
   * between epochs: the coordinator restarts it from its checkpoint, which holds what a
   * hand-over cannot. A DiLoCo run hands its outer state over (live recovery). */
  const int live = parallel_run_config_live_recovery(&w->run);
  const int keeps = live || !parallel_run_config_stateful(&w->run);
  if (!keeps && from)
    return wt_fail(WT_EINVAL, "the coordinator asks for a state hand-over in a run with ZeRO-1, "
                              "error feedback or delta activation caches, which only its "
                              "checkpoint can restore");
  if (!keeps) peer_held_clear(w->held); /* nothing to hand over or to report as held */
  const void *in = NULL;
  int owned = 0;
  if (from) {
    const long step = (long)coordinator_field_num(t, "resume_step", 0);
    c.resume = 0;
    WT_CHECK(peer_state_exchange(w->held, world, from, c.stage, step, live, &in,
                                 &c.state_in_bytes, &owned));
    c.state_in = in;
    c.state_in_replica = live && owned; /* another replica's state: a replacement */
    c.start_step = live ? step : 0;
  }
  void *out = NULL;
  size_t out_bytes = 0;
  if (keeps) c.state_out = &out, c.state_out_bytes = &out_bytes;
  trainer_config train; /* what the stage's trainer takes from the run, for the log */
  WT_CHECK(parallel_run_trainer_config(&c.run, data_set_vocab_size(c.data), &train));
  const trainer_config *tc = &train;
  s_dp_baseline(w, &c, &train.model);
  char ring[64 * 4] = "";
  for (int i = 0; i < c.run.replicas; i++)
    snprintf(ring + strlen(ring), sizeof ring - strlen(ring), "%s%d", i ? " " : "", c.dp_ring[i]);
  WT_INFO("peerd: stage %d replica %d of %d x %d trains seq %d, %d layers x %d channels, batch "
          "%d in %d micro-batches, %s, lr %g to %g after %d warmup steps, keeping %d checkpoints; "
          "the stage's ring: replicas %s",
          c.stage, c.replica, c.run.stages, c.run.replicas, tc->model.max_seq, tc->model.n_layer,
          tc->model.channels, tc->batch, tc->micro_batches, w->run.schedule, (double)tc->optim.lr,
          (double)tc->optim.min_lr, tc->optim.warmup_steps, c.run.keep, ring);
  if (c.run.sync.diloco > 0 || strcmp(c.run.sync.grad_codec, "none"))
    WT_INFO("peerd: stage %d replica %d syncs with DiLoCo H=%d (outer lr %g, momentum %g), "
            "grad codec %s, error feedback %s",
            c.stage, c.replica, c.run.sync.diloco, (double)(float)c.run.sync.outer_lr,
            (double)(float)c.run.sync.outer_momentum, c.run.sync.grad_codec,
            strcmp(c.run.sync.grad_ef, "off") ? "on" : "off");
  if (w->log) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "event", "start");
    cJSON_AddNumberToObject(o, "epoch", w->epoch);
    cJSON_AddNumberToObject(o, "peer_id", w->peer_id);
    cJSON_AddNumberToObject(o, "rank", w->rank);
    cJSON_AddNumberToObject(o, "stage", c.stage);
    cJSON_AddNumberToObject(o, "replica", c.replica);
    cJSON *r = cJSON_AddArrayToObject(o, "dp_ring");
    for (int i = 0; i < c.run.replicas; i++)
      cJSON_AddItemToArray(r, cJSON_CreateNumber(c.dp_ring[i]));
    s_log(w, o);
  }
  parallel_tasklet_result res;
  memset(&res, 0, sizeof res);
  int rc = parallel_tasklet_run(&c, world, &res);
  s_log_done(w, rc, &res, zc);
  w->time_limited = rc == WT_OK && res.time_limited;
  if (c.run.site_ranks > 1 && c.run.moe.experts > 0) {
    WT_INFO("peerd: stage %d ran %ld steps on a site of %d expert-parallel ranks, %.1f MB between "
            "them",
            c.stage, res.steps_done, c.run.site_ranks, (double)res.bytes_site / 1e6);
  } else if (c.run.site_ranks > 1) {
    const int cp = c.run.site_cp > 1 ? c.run.site_cp : 1;
    WT_INFO("peerd: stage %d ran %ld steps on a site of %d tensor-parallel x %d context-parallel "
            "ranks, %.1f MB between them",
            c.stage, res.steps_done, c.run.site_ranks / cp, cp, (double)res.bytes_site / 1e6);
  }
  long ran = w->start_step >= 0 ? res.steps_done - w->start_step : 0; /* -1: no step ran */
  if (ran > 0) /* the step counter, so that a log shows which steps each epoch trained */
    WT_INFO("peerd: epoch %d: stage %d replica %d trained steps %ld to %ld", w->epoch, c.stage,
            c.replica, w->start_step + 1, res.steps_done);
  if (ran > 0) /* where a step's time went, to hold against the placement's prediction */
    WT_INFO("peerd: stage %d replica %d, %ld steps of %.3f s: pipeline %.3f (compute %.3f), tied "
            "embedding %.3f, data-parallel reduce %.3f, norm %.3f",
            c.stage, c.replica, ran, res.seconds / ran, res.pipeline_s / ran, res.compute_s / ran,
            res.tied_s / ran, res.reduce_s / ran, res.norm_s / ran);
  if (owned) free((void *)in);
  if (out) { /* the stage at its last completed step, kept for the next epoch */
    int stage = -1;
    long step = 0;
    long outer = -1;
    parallel_tasklet_state_info(out, out_bytes, &stage, &step);
    parallel_tasklet_state_outer(out, out_bytes, &outer);
    peer_held_clear(w->held);
    *w->held = (peer_held){
        .blob = out, .bytes = out_bytes, .stage = stage, .step = step, .outer = outer};
  }
  uint64_t recv = 0;
  char sent[64 * 16] = ""; /* what went where: the pipeline neighbours and the ring's next */
  for (int p = 0; p < w->size; p++) {
    parallel_zmq_link_stats ls = parallel_zmq_link_stats_get(zc, p);
    recv += ls.bytes_recv;
    snprintf(sent + strlen(sent), sizeof sent - strlen(sent), "%s%.3f", p ? " " : "",
             (double)ls.bytes_sent / 1e6);
  }
  WT_INFO("peerd: stage %d replica %d (rank %d) sent MB to ranks 0..%d: %s", c.stage, c.replica,
          w->rank, w->size - 1, sent);
  pthread_mutex_lock(&w->mu);
  w->steps = res.steps_done;
  w->bytes_recv = (double)recv;
  if (rc == WT_OK) w->loss = res.last_loss;
  pthread_mutex_unlock(&w->mu);
  return rc;
}

typedef struct {
  peer_work *w;
  parallel_comm *zc;
} s_job;

static void *s_main(void *arg) {
  s_job *j = arg;
  peer_work *w = j->w;
  s_wrap x = {j->zc, w};
  w->zc = j->zc;
  parallel_comm *world = parallel_comm_new(&s_wrap_ops, &x, w->rank, w->size);
  int rc = !world ? WT_EINVAL : w->is_train ? s_train(w, world, j->zc) : peer_probe_run(w, world);
  w->rc = rc;
  if (rc != WT_OK) snprintf(w->error, sizeof w->error, "%s", wt_last_error());
  parallel_comm_destroy(&world);
  pthread_mutex_lock(&w->mu);
  w->zc = NULL;
  pthread_mutex_unlock(&w->mu);
  parallel_comm_destroy(&j->zc); /* says goodbye: neighbours still waiting on us fail at once */
  free(j);
  w->finished = 1;
  return NULL;
}

int peer_work_start(peer_work *w, const cJSON *start) {
  const cJSON *eps = cJSON_GetObjectItemCaseSensitive(start, "endpoints");
  if (cJSON_GetArraySize(eps) != w->size)
    return wt_fail(WT_EINVAL, "START lists %d endpoints for a group of %d", cJSON_GetArraySize(eps),
                   w->size);
  const char *list[64];
  for (int i = 0; i < w->size; i++) {
    list[i] = cJSON_GetStringValue(cJSON_GetArrayItem(eps, i));
    if (!list[i] || strncmp(list[i], "tcp://", 6))
      return wt_fail(WT_EINVAL, "START endpoint %d is not tcp://", i);
  }
  const char *outboxes[64] = {0}, *relay_in[64] = {0};
  char relay_eps[65][300];
  parallel_zmq_routes routes;
  WT_CHECK(s_start_routes(w, start, outboxes, relay_in, relay_eps, &routes));
  parallel_comm *zc = parallel_zmq_transport_connect_routes(&w->transport, list, &routes);
  if (!zc) return WT_EIO;
  s_job *j = wt_xmalloc(sizeof *j);
  j->w = w, j->zc = zc;
  w->t_last = 0;
  if (pthread_create(&w->thread, NULL, s_main, j) != 0) {
    parallel_comm_destroy(&j->zc);
    free(j);
    return wt_fail(WT_EIO, "cannot start the work thread");
  }
  w->started = 1;
  return WT_OK;
}

cJSON *peer_work_result(peer_work *w) {
  cJSON *b = cJSON_CreateObject();
  cJSON_AddNumberToObject(b, "epoch", w->epoch);
  cJSON_AddBoolToObject(b, "ok", w->rc == WT_OK);
  if (w->rc != WT_OK) cJSON_AddStringToObject(b, "error", w->error);
  if (w->rc != WT_OK) cJSON_AddNumberToObject(b, "code", w->rc); /* a wt_status */
  cJSON_AddNumberToObject(b, "steps", (double)w->steps);
  if (w->time_limited) cJSON_AddTrueToObject(b, "time_limited");
  cJSON_AddNumberToObject(b, "bytes_intra", w->bytes_intra);
  cJSON_AddNumberToObject(b, "bytes_inter", w->bytes_inter);
  cJSON_AddNumberToObject(b, "bytes_inter_raw", w->bytes_inter_raw);
  if (isfinite(w->loss)) cJSON_AddNumberToObject(b, "loss", w->loss);
  if (isfinite(w->first_loss)) cJSON_AddNumberToObject(b, "first_loss", w->first_loss);
  peer_work_trust_json(w, b);
  if (w->held->step > 0) { /* what this peer can start the next epoch from or hand over */
    cJSON_AddNumberToObject(b, "held_stage", w->held->stage);
    cJSON_AddNumberToObject(b, "held_step", (double)w->held->step);
    if (w->held->outer >= 0) cJSON_AddNumberToObject(b, "held_outer", (double)w->held->outer);
  }
  if (!w->is_train && w->rc == WT_OK) {
    cJSON *la = cJSON_AddArrayToObject(b, "latency_s"),
          *bw = cJSON_AddArrayToObject(b, "bandwidth_Bps");
    for (int i = 0; i < w->size; i++) {
      cJSON_AddItemToArray(la, cJSON_CreateNumber(w->probe_lat[i]));
      cJSON_AddItemToArray(bw, cJSON_CreateNumber(w->probe_bw[i]));
    }
    cJSON *up = cJSON_AddArrayToObject(b, "up_round_Bps"),
          *down = cJSON_AddArrayToObject(b, "down_round_Bps");
    for (int i = 0; i < w->size; i++) {
      cJSON_AddItemToArray(up, cJSON_CreateNumber(w->probe_up_round[i]));
      cJSON_AddItemToArray(down, cJSON_CreateNumber(w->probe_down_round[i]));
    }
  }
  return b;
}

void peer_work_destroy(peer_work **self_p) {
  peer_work *w = *self_p;
  if (!w) return;
  w->abort = 1;
  if (w->started) pthread_join(w->thread, NULL); /* every wait inside has the epoch's deadline */
  parallel_zmq_transport_destroy(&w->transport);
  if (w->relay) {
    parallel_zmq_relay_stats st = parallel_zmq_relay_stats_get(w->relay);
    WT_INFO("peerd: the relay of epoch %d forwarded %llu messages, %llu bytes", w->epoch,
            (unsigned long long)st.messages, (unsigned long long)st.bytes);
    parallel_zmq_relay_destroy(&w->relay);
  }
  cJSON_Delete(w->body);
  free(w->lat);
  free(w->bw);
  free(w->same_access);
  free(w->probe_lat);
  free(w->probe_bw);
  free(w->probe_up_round);
  free(w->probe_down_round);
  pthread_mutex_destroy(&w->mu);
  free(w);
  *self_p = NULL;
}

int peer_device_measure(const char *device, double *flops, double *memory) {
  const kernels_ops *k = NULL;
  WT_CHECK(kernels_for_device(device, &k));
  int n = k->device ? 2048 : 256; /* a GPU needs a bigger product to show its rate */
  size_t nn = (size_t)n * n;
  float *h = wt_xmalloc(nn * sizeof(float));
  for (size_t i = 0; i < nn; i++) h[i] = (float)(i % 7) * 0.1f;
  float *a = k->alloc(nn * 4), *b = k->alloc(nn * 4), *o = k->alloc(nn * 4), sink;
  if (!a || !b || !o) {
    k->free(a), k->free(b), k->free(o), free(h);
    return wt_fail(WT_ENOMEM, "--device %s: cannot allocate %d^2 matrices to measure it", device,
                   n);
  }
  k->upload(a, h, nn * 4), k->upload(b, h, nn * 4);
  double best = 1e9;
  for (int r = 0; r < 6; r++) { /* the first is a warm-up */
    double t0 = wt_now_s();
    k->matmul_forward(o, a, b, NULL, n, n, n, KERNELS_W_IN_OUT);
    k->download(&sink, o, sizeof sink); /* waits for the device */
    if (r > 0) best = fmin(best, wt_now_s() - t0);
  }
  k->free(a), k->free(b), k->free(o), free(h);
  *flops = 2.0 * n * n * n / fmax(best, 1e-9);
  *memory = k->mem_total();
  return WT_OK;
}
