/* daemon — the coordinator's socket, main loop and message dispatch (admission, heartbeats,
 * leaving, checkpoint reports). Epoch logic lives in epoch.c, the database in state.c, the
 * options in options.c, the ZAP handler in zap.c, the send path in send.c. */
#include "coordinator/coordinator_internal.h"

#include "common/common.h"
#include "parallel/transport/zmq.h" /* defines: the CURVE key-pair helpers */

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <sodium.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#define S_HANDSHAKE_MS 10000 /* ZMQ_HANDSHAKE_IVL of a control connection */
#define S_REFUSAL_WINDOW_S 10
#define S_REFUSAL_LINES 20 /* refusals logged per window */

static int s_keys(coordinator *c) {
  char path[1300];
  snprintf(path, sizeof path, "%s/coordinator.key", c->dir);
  int rc = parallel_zmq_keypair_load(path, c->pub, c->sec);
  if (rc == WT_ENOTFOUND) {
    WT_CHECK(parallel_zmq_keypair_new(c->pub, c->sec));
    WT_CHECK(parallel_zmq_keypair_save(path, c->pub, c->sec));
    rc = WT_OK;
  }
  if (rc != WT_OK) return rc;
  snprintf(path, sizeof path, "%s/coordinator.pub", c->dir);
  FILE *f = fopen(path, "w");
  if (!f || fprintf(f, "%s\n", c->pub) < 0 || fclose(f) != 0)
    return wt_fail(WT_EIO, "cannot write %s: %s", path, strerror(errno));
  return WT_OK;
}

static int s_bind(coordinator *c) {
  c->zctx = zmq_ctx_new();
  c->router = zmq_socket(c->zctx, ZMQ_ROUTER);
  int one = 1, linger = 0, hwm = 10000, handshake_ms = S_HANDSHAKE_MS;
  /* a connection that does not finish its CURVE handshake gives its descriptor back */
  zmq_setsockopt(c->router, ZMQ_HANDSHAKE_IVL, &handshake_ms, sizeof handshake_ms);
  zmq_setsockopt(c->router, ZMQ_CURVE_SERVER, &one, sizeof one);
  zmq_setsockopt(c->router, ZMQ_CURVE_SECRETKEY, c->sec, 40);
  zmq_setsockopt(c->router, ZMQ_ZAP_DOMAIN, "wantrain", 8);
  zmq_setsockopt(c->router, ZMQ_LINGER, &linger, sizeof linger);
  zmq_setsockopt(c->router, ZMQ_RCVHWM, &hwm, sizeof hwm);
  zmq_setsockopt(c->router, ZMQ_ROUTER_HANDOVER, &one, sizeof one);
  int maxmsg = COORD_MSG_MAX + 1024; /* larger frames are cut off by zmq before we read them */
  int64_t maxsize = maxmsg;
  zmq_setsockopt(c->router, ZMQ_MAXMSGSIZE, &maxsize, sizeof maxsize);
  WT_CHECK(coord_zap_start(c));
  /* A restarted coordinator with an ephemeral port listens where it listened before, so the
   * peers' reconnects find it. */
  char previous[256] = "";
  size_t blen = strlen(c->cfg.bind);
  int ephemeral = blen > 2 && !strcmp(c->cfg.bind + blen - 2, ":*");
  if (ephemeral && coord_state_meta_get(c, "endpoint", previous, sizeof previous) &&
      zmq_bind(c->router, previous) == 0) {
    WT_INFO("coordinator: listening again on %s", previous);
  } else if (zmq_bind(c->router, c->cfg.bind) != 0) {
    return wt_fail(WT_EIO, "cannot bind the control socket to %s: %s; choose another --bind",
                   c->cfg.bind, zmq_strerror(errno));
  }
  size_t sz = sizeof c->endpoint;
  zmq_getsockopt(c->router, ZMQ_LAST_ENDPOINT, c->endpoint, &sz);
  coord_state_meta_set(c, "endpoint", c->endpoint);
  char path[1300];
  snprintf(path, sizeof path, "%s/endpoint", c->dir);
  FILE *f = fopen(path, "w");
  if (!f || fprintf(f, "%s\n", c->endpoint) < 0 || fclose(f) != 0)
    return wt_fail(WT_EIO, "cannot write %s: %s", path, strerror(errno));
  return WT_OK;
}

/* The status server's callback: runs on its thread, under c->mu (coordinator_http_opts.lock). */
static cJSON *s_http_status(void *arg) {
  return coord_status(arg);
}

static int s_http(coordinator *c) {
  if (c->cfg.http_port < 0) return WT_OK;
  coordinator_http_opts o = {.bind = c->cfg.http_bind,
                             .port = c->cfg.http_port,
                             .status = s_http_status,
                             .arg = c,
                             .lock = &c->mu,
                             .refresh_s = COORD_STATUS_REFRESH_S};
  c->http = coordinator_http_new(&o);
  if (!c->http) return WT_EIO;
  char path[1300];
  snprintf(path, sizeof path, "%s/http_port", c->dir);
  FILE *f = fopen(path, "w");
  if (!f || fprintf(f, "%d\n", coordinator_http_port(c->http)) < 0 || fclose(f) != 0)
    return wt_fail(WT_EIO, "cannot write %s: %s", path, strerror(errno));
  return WT_OK;
}

int coordinator_http_port_get(const coordinator *c) {
  return c->http ? coordinator_http_port(c->http) : -1;
}

coordinator *coordinator_new(const coordinator_config *cfg) {
  if (sodium_init() < 0) {
    wt_fail(WT_EIO, "libsodium failed to initialise");
    return NULL;
  }
  coordinator *c = wt_xcalloc(1, sizeof *c);
  c->promote = -1;
  c->relay_rank = -1;
  c->cfg = *cfg;
  coord_deadline_init(c);
  snprintf(c->dir, sizeof c->dir, "%s", cfg->state_dir);
  if (!c->cfg.run.checkpoint_dir[0])
    snprintf(c->cfg.run.checkpoint_dir, sizeof c->cfg.run.checkpoint_dir, "%.1000s/checkpoints",
             c->dir);
  c->first_loss = c->last_loss = NAN;
  pthread_mutex_init(&c->mu, NULL);
  coordinator_sid_new(c->sid);
  int rc =
      mkdir(c->dir, 0700) == 0 || errno == EEXIST
          ? WT_OK
          : wt_fail(WT_EIO, "cannot create the state directory %s: %s", c->dir, strerror(errno));
  if (rc == WT_OK) rc = coord_peers_init(c);
  if (rc == WT_OK) rc = coord_scenario_load(c);
  if (rc == WT_OK) rc = coord_token_key_load(c->dir, c->token_key);
  if (rc == WT_OK) rc = coord_state_open(c);
  if (rc == WT_OK) rc = coord_holders_open(c);
  if (rc == WT_OK) rc = coord_state_load(c);
  if (rc == WT_OK) rc = s_keys(c);
  if (rc == WT_OK) rc = coord_store_start(c); /* fetches with the coordinator's key pair */
  if (rc == WT_OK) rc = s_bind(c);
  if (rc == WT_OK) rc = coord_shard_relay_open(c);
  if (rc == WT_OK) rc = s_http(c);
  if (rc != WT_OK) {
    char why[1024];
    snprintf(why, sizeof why, "%s", wt_last_error());
    coordinator_destroy(&c);
    wt_fail(rc, "%s", why);
    return NULL;
  }
  return c;
}

void coordinator_destroy(coordinator **self_p) {
  coordinator *c = *self_p;
  if (!c) return;
  coordinator_http_destroy(&c->http); /* first: its thread reads the state */
  if (c->router) zmq_close(c->router);
  if (c->zctx) {
    zmq_ctx_shutdown(c->zctx);
    coord_zap_stop(c);
    zmq_ctx_term(c->zctx);
  }
  coord_store_stop(c);
  coord_shard_relay_close(c);
  coord_routes_close(c); /* logs what the relay forwarded: before the database closes */
  if (c->db && c->dirty) coord_state_flush(c, 1);
  coord_state_close(c);
  coord_scenario_close(c);
  for (int i = 0; i < c->n_peers; i++)
    if (c->peers[i].reach == COORD_REACH_TESTING) close(c->peers[i].reach_fd);
  coord_peers_free(c);
  pthread_mutex_destroy(&c->mu);
  sodium_memzero(c->sec, sizeof c->sec);
  free(c);
  *self_p = NULL;
}

const char *coordinator_public_key(const coordinator *c) {
  return c->pub;
}
const char *coordinator_endpoint(const coordinator *c) {
  return c->endpoint;
}
uint64_t coordinator_refused(const coordinator *c) {
  return c->refused;
}

/* A reply to a sender that has no peer record (refused registration, unknown key). */
static void s_refuse(coordinator *c, const unsigned char *route, size_t rlen, const char *reason) {
  coord_peer tmp = {0};
  memcpy(tmp.route, route, rlen);
  tmp.route_len = rlen;
  cJSON *b = cJSON_CreateObject();
  cJSON_AddStringToObject(b, "reason", reason);
  coord_send(c, &tmp, COORD_CMD_REFUSED, b);
  cJSON_Delete(b);
}

/* Logs what was refused to a sender that is not an admitted peer, at most S_REFUSAL_LINES lines
 * per S_REFUSAL_WINDOW_S and then how many were not: such a sender must not fill the log. */
static void s_refusal_log(coordinator *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void s_refusal_log(coordinator *c, const char *fmt, ...) {
  double now = wt_now_s();
  if (now - c->refusal_log_t >= S_REFUSAL_WINDOW_S) {
    if (c->refusal_log_skipped)
      WT_WARN("coordinator: %llu more refusals in the last %.0f s were not logged",
              (unsigned long long)c->refusal_log_skipped, now - c->refusal_log_t);
    c->refusal_log_t = now, c->refusal_log_n = 0, c->refusal_log_skipped = 0;
  }
  if (c->refusal_log_n >= S_REFUSAL_LINES) {
    c->refusal_log_skipped++;
    return;
  }
  c->refusal_log_n++;
  char line[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  WT_WARN("coordinator: %s", line);
}

/* A registration refused: counted, answered with the reason and logged (rate-limited). Nothing
 * is written to the state database for it. */
static void s_refuse_registration(coordinator *c, const unsigned char *route, size_t rlen,
                                  const char *key, const char *why) {
  c->refused++;
  s_refuse(c, route, rlen, why);
  s_refusal_log(c, "refused: key %.8s…: %s", key, why);
}

static void s_register(coordinator *c, const unsigned char *route, size_t rlen, const char *key,
                       const coordinator_msg *m) {
  char why[512];
  int i = coord_peer_find(c, key);
  if (coord_state_session_seen(c, key, m->sid)) {
    c->refused++;
    s_refusal_log(c, "dropped a replayed registration (session %.8s… of key %.8s… was seen before)",
                  m->sid, key);
    return;
  }
  const cJSON *dev = cJSON_GetObjectItemCaseSensitive(m->body, "device");
  double flops = coordinator_field_num(dev, "flops", -1),
         memory = coordinator_field_num(dev, "memory", 0);
  double gpus = coordinator_field_num(dev, "gpus", 1); /* a peerd of one device may not say */
  const char *kind = coordinator_field_str(dev, "kind"),
             *region = coordinator_field_str(m->body, "region");
  const char *host = coordinator_field_str(m->body, "host");
  if (coord_trust_refuses(c, key, why, sizeof why)) {
    s_refuse_registration(c, route, rlen, key, why);
    return;
  }
  if (coordinator_register_labels_check(m->body) != WT_OK) {
    c->refused++;
    snprintf(why, sizeof why, "%s", wt_last_error());
    s_refuse(c, route, rlen, why);
    coord_event(c, "refused", "key %.8s…: %s", key, why);
    return;
  }
  if (!cJSON_IsObject(dev) || !(flops > 0 && flops < 1e18) || memory < 0 || !kind[0] ||
      !(gpus >= 1 && gpus <= 1024 && gpus == floor(gpus)) || strlen(kind) >= 32 ||
      strlen(region) >= 64 || strlen(host) >= 256) {
    s_refuse_registration(c, route, rlen, key,
                          "registration without a valid device report (kind, flops > 0, "
                          "memory >= 0, gpus 1..1024, region < 64 chars); upgrade peerd");
    return;
  }
  /* A site splits the heads over its GPUs / site_cp tensor-parallel ranks: refuse a peer that
   * could never run its stage rather than fail every epoch it is placed in. */
  const int cp = c->cfg.run.site_cp > 1 ? c->cfg.run.site_cp : 1, n = (int)gpus;
  const int E = c->cfg.run.moe.experts;
  if (E > 0 && strcmp(kind, "cpu") != 0) {
    snprintf(why, sizeof why,
             "this run's model has MoE blocks, which run on CPU peers only (this peer reports a "
             "%s device); join with --device cpu",
             kind);
    s_refuse_registration(c, route, rlen, key, why);
    return;
  }
  if (E > 0 && n > 1 && E % n) {
    snprintf(why, sizeof why,
             "a site of %d GPUs runs this run's MoE stages as %d expert-parallel ranks, which must "
             "split the %d experts evenly; use a --gpus that divides %d",
             n, n, E, E);
    s_refuse_registration(c, route, rlen, key, why);
    return;
  }
  if (E == 0 && n > 1 && (n % cp || c->cfg.run.heads % (n / cp))) {
    snprintf(why, sizeof why,
             "a site of %d GPUs cannot run this run's model: %d must be a multiple of --site-cp "
             "%d and %d / %d tensor-parallel ranks must divide the %d heads; use another --gpus",
             n, n, cp, n, cp, c->cfg.run.heads);
    s_refuse_registration(c, route, rlen, key, why);
    return;
  }
  int ri = coord_region_index(c, region, why, sizeof why);
  if (ri < 0 && c->scenario) {
    s_refuse_registration(c, route, rlen, key, why);
    return;
  }
  /* A key the table no longer holds but the database knows comes back as itself, without a
   * token, as it would have while its slot was kept. The slot is found before the token is
   * checked so that a full coordinator spends no token's use. */
  int known_id = i < 0 ? coord_state_peer_id(c, key) : 0;
  if (i < 0 && c->n_peers == c->cfg.max_peers)
    coord_state_flush(c, 1); /* the pending sequence numbers name slots, which a reap moves */
  if (i < 0 && !coord_peers_make_room(c)) {
    c->refused_full++;
    snprintf(why, sizeof why,
             "the coordinator is full (all %d slots of --max-peers hold a live peer or one the "
             "run still needs; %llu registrations refused so far); try again later or another run",
             c->cfg.max_peers, (unsigned long long)c->refused_full);
    s_refuse_registration(c, route, rlen, key, why);
    return;
  }
  if (i < 0 && !known_id && !c->cfg.open &&
      coord_token_verify(c, coordinator_field_str(m->body, "token"), why, sizeof why) != WT_OK) {
    s_refuse_registration(c, route, rlen, key, why);
    return;
  }
  if (i < 0) {
    i = coord_peer_add(c, key, known_id ? known_id : c->next_peer_id++);
    c->peers[i].device_index = -1;
    if (known_id) coord_state_load_links(c, i), coord_state_load_trust(c, &c->peers[i]);
  }
  coord_state_begin(c); /* one commit for the admission's rows, before WELCOME goes out */
  coord_state_session_add(c, key, m->sid);
  coord_peer *p = &c->peers[i];
  int was_member = p->epoch_rank >= 0 && p->status == PEER_LIVE;
  p->status = PEER_LIVE;
  memcpy(p->sid, m->sid, sizeof p->sid);
  p->last_seq = m->seq;
  memcpy(p->route, route, rlen);
  p->route_len = rlen;
  p->last_seen = wt_now_s();
  if (p->region_index != ri) p->device_index = -1; /* a new region: a new device in it */
  p->flops = flops, p->memory = memory, p->region_index = ri, p->gpus = (int)gpus;
  p->device_index = coord_scenario_device(c, i);
  snprintf(p->kind, sizeof p->kind, "%s", kind);
  snprintf(p->region, sizeof p->region, "%s", region);
  snprintf(p->host, sizeof p->host, "%s", host[0] ? host : "127.0.0.1");
  if (cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(m->body, "reachable")))
    coord_reach_declared_unreachable(c, p);
  else
    coord_reach_start(c, p, coordinator_field_int(m->body, "reach_port", 0));
  coord_holders_on_register(c, p);
  p->held_step = (long)fmin(fmax(coordinator_field_num(m->body, "held_step", 0), 0), 1e12);
  p->held_stage = coordinator_field_int(m->body, "held_stage", -1);
  p->held_outer = (long)fmin(fmax(coordinator_field_num(m->body, "held_outer", -1), -1), 1e12);
  coord_state_save_peer(c, p);
  coord_event(c, "joined", "peer %d (key %.8s…, %s x %d, %.1f GFLOP/s, region '%s')", p->id, key,
              p->kind, p->gpus, p->flops / 1e9, p->region);
  coord_state_commit(c);
  cJSON *b = cJSON_CreateObject();
  cJSON_AddNumberToObject(b, "peer_id", p->id);
  cJSON_AddNumberToObject(b, "heartbeat_s", c->cfg.heartbeat_s);
  cJSON_AddNumberToObject(b, "liveness", c->cfg.liveness);
  coord_holders_welcome_json(c, b);
  coord_send(c, p, COORD_CMD_WELCOME, b);
  cJSON_Delete(b);
  if (was_member) coord_epoch_on_lost(c, p, "it registered again (the process restarted)");
}

static void s_heartbeat(coordinator *c, coord_peer *p, const cJSON *b) {
  p->step = (long)coordinator_field_int(b, "step", 0);
  p->loss = coordinator_field_num(b, "loss", NAN);
  p->tokens_s = coordinator_field_num(b, "tokens_s", 0);
  p->bytes_sent = coordinator_field_num(b, "bytes_sent", 0);
  p->bytes_recv = coordinator_field_num(b, "bytes_recv", 0);
  p->bytes_intra = fmax(p->bytes_intra, coordinator_field_num(b, "bytes_intra", 0));
  p->bytes_inter = fmax(p->bytes_inter, coordinator_field_num(b, "bytes_inter", 0));
  p->bytes_inter_raw = fmax(p->bytes_inter_raw, coordinator_field_num(b, "bytes_inter_raw", 0));
  int ep = coordinator_field_int(b, "epoch", -1);
  if (ep == c->epoch && !strcmp(coordinator_field_str(b, "state"), "working"))
    p->started_epoch = ep;
  if (ep == c->epoch && p->epoch_rank >= 0 && c->phase == EPOCH_RUNNING &&
      !strcmp(c->epoch_kind, "train") && p->step > 0) {
    if (p->step > c->last_step) {
      c->last_step = p->step, c->last_loss = p->loss;
      coord_loss_record(c, p->step, (float)p->loss);
      double now = wt_now_s(); /* iteration time within one epoch, from its first step seen */
      if (c->it_epoch != c->epoch)
        c->it_epoch = c->epoch, c->it_t0 = now, c->it_step0 = p->step;
      else if (p->step > c->it_step0 + 4)
        c->iteration_s = (now - c->it_t0) / (p->step - c->it_step0);
    }
    double first = coordinator_field_num(b, "first_loss", NAN);
    if (isnan(c->first_loss) && isfinite(first)) c->first_loss = first;
    if (c->lost_at > 0 && p->step > c->start_step) { /* a step done in the new epoch */
      c->recovery_s = wt_now_s() - c->lost_at;
      c->lost_at = 0;
      coord_event(c, "recovered", "training resumed past step %ld %.1f s after the loss",
                  c->start_step, c->recovery_s);
      coord_state_save_run(c);
    }
  }
  coord_trust_on_heartbeat(c, p, b); /* the robust sync's evidence; may exclude p */
  const cJSON *result = cJSON_GetObjectItemCaseSensitive(b, "result");
  if (cJSON_IsObject(result) && p->epoch_rank >= 0 && p->result == 0)
    coord_epoch_on_result(c, p, result); /* its RESULT was lost (e.g. while we restarted) */
  cJSON *a = cJSON_CreateObject();
  cJSON_AddNumberToObject(a, "epoch", c->epoch);
  coord_holders_ack_json(c, a);
  coord_send(c, p, COORD_CMD_ACK, a);
  cJSON_Delete(a);
}

static void s_message(coordinator *c, const unsigned char *route, size_t rlen, const char *key,
                      const void *data, size_t n) {
  coordinator_msg m;
  if (coordinator_msg_decode(data, n, &m) != WT_OK) {
    c->refused++;
    s_refusal_log(c, "dropped a message from key %.8s…: %s", key, wt_last_error());
    return;
  }
  if (m.cmd == COORD_CMD_REGISTER) {
    s_register(c, route, rlen, key, &m);
    coordinator_msg_clear(&m);
    return;
  }
  int i = coord_peer_find(c, key);
  char why[600];
  if (i >= 0 && c->peers[i].status != PEER_LIVE && coord_trust_refuses(c, key, why, sizeof why)) {
    coord_trust_tell_excluded(c, route, rlen, why); /* not "missed heartbeats": the reason */
    coordinator_msg_clear(&m);
    return;
  }
  if (i < 0 || c->peers[i].status != PEER_LIVE) {
    c->refused++;
    s_refusal_log(c, "dropped \"%s\" from key %.8s…: %s", coordinator_cmd_name(m.cmd), key,
                  i < 0 ? "an unknown key" : "a peer that was dropped");
    s_refuse(c, route, rlen,
             i < 0 ? "unknown peer key: register first with a join token"
                   : "this peer was dropped (missed heartbeats); register again");
    coordinator_msg_clear(&m);
    return;
  }
  coord_peer *p = &c->peers[i];
  if (coordinator_seq_accept(p->sid, &p->last_seq, m.sid, m.seq) != WT_OK) {
    c->refused++;
    WT_WARN("coordinator: dropped \"%s\" from peer %d: %s", coordinator_cmd_name(m.cmd), p->id,
            wt_last_error());
    coordinator_msg_clear(&m);
    return;
  }
  memcpy(p->route, route, rlen);
  p->route_len = rlen;
  const double gap_s = wt_now_s() - p->last_seen;
  p->last_seen = wt_now_s();
  /* the sequence survives a restart: no replay window (a heartbeat's within COORD_SEQ_FLUSH_S) */
  if (m.cmd == COORD_CMD_HEARTBEAT)
    coord_state_defer_peer(c, i);
  else
    coord_state_save_peer(c, p);
  switch (m.cmd) {
  case COORD_CMD_HEARTBEAT:
    coord_deadline_on_heartbeat(c, p, gap_s, m.body);
    s_heartbeat(c, p, m.body);
    break;
  case COORD_CMD_BOUND:
    coord_epoch_on_bound(c, p, m.body);
    break;
  case COORD_CMD_RESULT:
    coord_epoch_on_result(c, p, m.body);
    break;
  case COORD_CMD_CHECKPOINT:
    coord_epoch_on_checkpoint(c, p, m.body);
    break;
  case COORD_CMD_SHARDS:
    coord_holders_on_shards(c, p, m.body);
    break;
  case COORD_CMD_LEAVE:
    p->status = PEER_GONE;
    coord_state_save_peer(c, p);
    coord_event(c, "left", "peer %d said it leaves", p->id);
    coord_epoch_on_lost(c, p, "it left");
    break;
  default:
    c->refused++;
    WT_WARN("coordinator: dropped \"%s\" from peer %d: peers do not send it",
            coordinator_cmd_name(m.cmd), p->id);
  }
  coordinator_msg_clear(&m);
}

/* Reads one [route][body] message. A message with more frames or an over-long route is
 * drained and dropped. */
static void s_recv(coordinator *c) {
  unsigned char route[256];
  int rlen = zmq_recv(c->router, route, sizeof route, ZMQ_DONTWAIT);
  if (rlen < 0) return;
  zmq_msg_t msg;
  zmq_msg_init(&msg);
  int more = 0;
  size_t sz = sizeof more;
  zmq_getsockopt(c->router, ZMQ_RCVMORE, &more, &sz);
  if (!more || zmq_msg_recv(&msg, c->router, 0) < 0) {
    zmq_msg_close(&msg);
    c->refused++;
    s_refusal_log(c, "dropped an empty message");
    return;
  }
  const char *user = zmq_msg_gets(&msg, "User-Id");
  int extra = zmq_msg_more(&msg);
  while (zmq_getsockopt(c->router, ZMQ_RCVMORE, &more, &sz) == 0 && more) {
    zmq_msg_t junk;
    zmq_msg_init(&junk);
    zmq_msg_recv(&junk, c->router, 0);
    zmq_msg_close(&junk);
  }
  if (extra || rlen > 255 || !user || strlen(user) != COORD_KEY_LEN) {
    c->refused++;
    s_refusal_log(c, "dropped a message with %s",
                  extra ? "more than one frame" : "no authenticated key");
  } else {
    s_message(c, route, (size_t)rlen, user, zmq_msg_data(&msg), zmq_msg_size(&msg));
  }
  zmq_msg_close(&msg);
}

/* Drops the live peers whose heartbeat window has ended. The scan runs only once the earliest
 * window can have ended (c->liveness_next, the earliest end it saw): a peer's last_seen only
 * moves forward, and a newly admitted one's window ends later than any open one. */
static void s_liveness(coordinator *c) {
  double cap = c->cfg.liveness * c->cfg.heartbeat_s, now = wt_now_s();
  if (now < c->liveness_next) return;
  c->liveness_next = now + cap;
  for (int i = 0; i < c->n_peers; i++) {
    coord_peer *p = &c->peers[i];
    if (p->status != PEER_LIVE) continue;
    const double limit = coord_deadline_heartbeat_s(c, p); /* its measured gaps, at most cap */
    if (now - p->last_seen <= limit) {
      c->liveness_next = fmin(c->liveness_next, p->last_seen + limit);
      continue;
    }
    p->status = PEER_GONE;
    coord_state_save_peer(c, p);
    if (p->finished) /* told the run is complete, it exited */
      coord_event(c, "left", "peer %d exited after the run completed", p->id);
    else
      coord_event(c, "lost",
                  "peer %d sent no heartbeat for %.2f s (its deadline %.2f s, from its measured "
                  "heartbeat gaps; at most %d heartbeats)",
                  p->id, now - p->last_seen, limit, c->cfg.liveness);
    coord_epoch_on_lost(c, p, "it stopped sending heartbeats");
  }
}

/* The loop did not run for late_s beyond its poll timeout: the process was stopped, its VM
 * paused or migrated, or a placement took long. The peers' heartbeats of that time went
 * unheard, not unsent, so that time does not count as their silence: every live peer's window
 * resumes where it stood (a peer already silent before stays so), and the epoch phase's
 * deadline moves on by as much. */
static void s_forgive_stall(coordinator *c, double late_s) {
  double now = wt_now_s();
  for (int i = 0; i < c->n_peers; i++)
    if (c->peers[i].status == PEER_LIVE)
      c->peers[i].last_seen = fmin(now, c->peers[i].last_seen + late_s);
  c->phase_deadline += late_s;
  if (c->start_deadline > 0) c->start_deadline += late_s;
  /* the peers' messages of that time arrive in a burst, or after a reconnect: their measured
   * gaps say nothing for a while, so the fixed window judges them for one window */
  c->stall_grace_until = now + c->cfg.liveness * c->cfg.heartbeat_s;
  c->liveness_next = 0; /* judge them again now, against the windows moved on */
  if (late_s >= 1)
    WT_WARN("coordinator: the loop did not run for %.1f s (the process was stopped, its machine "
            "paused, or a placement ran long); the peers' liveness does not count that time",
            late_s);
}

/* The poll timeout: until the nearest deadline (a peer's liveness, the epoch phase's), at most
 * half a heartbeat so the status rates and the epoch logic keep ticking. */
static long s_next_deadline_ms(coordinator *c) {
  pthread_mutex_lock(&c->mu);
  double now = wt_now_s(), next = fmin(now + c->cfg.heartbeat_s / 2, c->liveness_next);
  int timed = c->phase == EPOCH_BINDING || c->phase == EPOCH_DRAINING ||
              (c->phase == EPOCH_RUNNING && !strcmp(c->epoch_kind, "probe"));
  if (timed && !c->run_complete) next = fmin(next, c->phase_deadline);
  pthread_mutex_unlock(&c->mu);
  return (long)fmax(1, (next - now) * 1000 + 1);
}

/* The run is complete: every live peer is told, and exits (gone, not lost). */
static void s_finish_peers(coordinator *c) {
  for (int i = 0; i < c->n_peers; i++)
    if (c->peers[i].status == PEER_LIVE) {
      coord_send(c, &c->peers[i], COORD_CMD_FINISH, NULL);
      c->peers[i].finished = 1;
    }
  c->finish_due = 0;
  coord_state_save_run(c); /* the run record lists who was told */
}

int coordinator_run(coordinator *c, const volatile sig_atomic_t *stop) {
  double done_at = 0, awake = wt_now_s(); /* when the loop last judged the peers' liveness */
  while (!*stop) {
    zmq_pollitem_t item = {c->router, 0, ZMQ_POLLIN, 0};
    long timeout_ms = s_next_deadline_ms(c);
    if (zmq_poll(&item, 1, timeout_ms) < 0 && errno != EINTR)
      return wt_fail(WT_EIO, "control socket poll failed: %s", zmq_strerror(errno));
    pthread_mutex_lock(&c->mu);
    double late = wt_now_s() - awake - timeout_ms / 1e3;
    if (late > c->cfg.heartbeat_s) s_forgive_stall(c, late);
    for (int k = 0; k < 256 && (item.revents & ZMQ_POLLIN); k++) {
      int ev = 0;
      size_t sz = sizeof ev;
      zmq_getsockopt(c->router, ZMQ_EVENTS, &ev, &sz);
      if (!(ev & ZMQ_POLLIN)) break;
      s_recv(c);
    }
    coord_state_flush(c, 0);
    s_liveness(c);
    awake = wt_now_s();
    coord_reach_tick(c);
    coord_epoch_tick(c);
    coord_status_tick(c);
    if (c->run_complete) coord_store_collect(c); /* the last step's shards, fetched at the end */
    double now = wt_now_s();
    if (c->finish_due > 0 && now - c->holders_check_t >= 0.25) /* offers the end to the store */
      c->holders_check_t = now, coord_holders_check(c);
    if (c->finish_due > 0 && ((!coord_store_busy(c) && coord_holders_end_stored(c)) ||
                              now - c->finish_due > COORD_STORE_DRAIN_S))
      s_finish_peers(c);
    pthread_mutex_unlock(&c->mu);
    if (c->cfg.exit_when_done && c->run_complete && c->finish_due == 0) {
      if (done_at == 0) done_at = wt_now_s();
      if (wt_now_s() - done_at > 2 * c->cfg.heartbeat_s) break; /* let FINISH go out */
    }
  }
  return c->run_complete == 2 ? wt_fail(WT_EIO, "the run stopped: %s", c->last_error) : WT_OK;
}
