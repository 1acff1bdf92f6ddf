/* holders — checkpoints stored by the peers (--checkpoint-storage peers, docs/coordinator.md
 * "Checkpoints on the peers"): which peer holds which shard (step, stage, replica) with which
 * digest, kept in state.db so that it outlives a coordinator restart; the digest each shard's
 * writer reported, against which every copy is counted; asking peers to copy a committed shard
 * until --checkpoint-copies live peers hold it; the newest step the live holders can resume; and
 * what a seat must fetch before it starts. Shards move between the peers themselves
 * (parallel/transport/shards.h): the coordinator only names holders. */
#include "coordinator/coordinator_internal.h"

#include "common/common.h"
#include "parallel/transport/shard_relay.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_PENDING_S 30.0 /* a copy asked for and not reported within this is asked again */
#define S_MAX_HOLDERS 16 /* holders named per shard in a fetch or a copy request */

static const char *s_schema =
    "CREATE TABLE IF NOT EXISTS shard_digests(step INTEGER, stage INTEGER, replica INTEGER,"
    " digest TEXT, PRIMARY KEY(step, stage, replica));"
    "CREATE TABLE IF NOT EXISTS shard_holders(peer INTEGER, step INTEGER, stage INTEGER,"
    " replica INTEGER, digest TEXT, PRIMARY KEY(peer, step, stage, replica));"
    "CREATE TABLE IF NOT EXISTS shard_servers(peer INTEGER PRIMARY KEY, endpoint TEXT);";

int coord_holders_on(const coordinator *c) {
  return !strcmp(c->cfg.checkpoint_storage, "peers");
}

int coord_holders_open(coordinator *c) {
  char *err = NULL;
  if (sqlite3_exec(c->db, s_schema, NULL, NULL, &err) != SQLITE_OK) {
    int rc = wt_fail(WT_EIO, "state database %s/state.db: %s", c->dir, err ? err : "?");
    sqlite3_free(err);
    return rc;
  }
  return WT_OK;
}

static void s_exec(coordinator *c, const char *sql, long a, long b, long d, long e,
                   const char *text) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(c->db, sql, -1, &st, NULL) != SQLITE_OK) {
    WT_ERROR("coordinator: holders: %s", sqlite3_errmsg(c->db));
    return;
  }
  const long v[4] = {a, b, d, e};
  int n = sqlite3_bind_parameter_count(st), i = 0;
  for (; i < n && i < 4 && v[i] != -1; i++) sqlite3_bind_int64(st, i + 1, v[i]);
  if (text && i < n) sqlite3_bind_text(st, i + 1, text, -1, SQLITE_TRANSIENT);
  if (sqlite3_step(st) != SQLITE_DONE)
    WT_ERROR("coordinator: holders: state database write failed: %s", sqlite3_errmsg(c->db));
  sqlite3_finalize(st);
}

static coord_peer *s_peer_by_id(coordinator *c, int id) {
  for (int i = 0; i < c->n_peers; i++)
    if (c->peers[i].id == id) return &c->peers[i];
  return NULL;
}

/* The digest the writer of a shard reported ("" when none did). */
static void s_writer_digest(coordinator *c, long step, int stage, int replica, char out[65]) {
  sqlite3_stmt *st = NULL;
  out[0] = 0;
  sqlite3_prepare_v2(
      c->db, "SELECT digest FROM shard_digests WHERE step = ? AND stage = ? AND replica = ?", -1,
      &st, NULL);
  sqlite3_bind_int64(st, 1, step), sqlite3_bind_int(st, 2, stage), sqlite3_bind_int(st, 3, replica);
  if (sqlite3_step(st) == SQLITE_ROW) snprintf(out, 65, "%s", sqlite3_column_text(st, 0));
  sqlite3_finalize(st);
}

/* Live peers holding the shard with its writer's digest (and a shard server), at most max. */
static int s_live_holders(coordinator *c, long step, int stage, int replica, coord_peer **out,
                          char (*endpoint)[256], int max) {
  sqlite3_stmt *st = NULL;
  sqlite3_prepare_v2(c->db,
                     "SELECT h.peer, s.endpoint FROM shard_holders h JOIN shard_digests d"
                     " ON h.step = d.step AND h.stage = d.stage AND h.replica = d.replica"
                     " AND h.digest = d.digest JOIN shard_servers s ON s.peer = h.peer"
                     " WHERE h.step = ? AND h.stage = ? AND h.replica = ? ORDER BY h.peer",
                     -1, &st, NULL);
  sqlite3_bind_int64(st, 1, step), sqlite3_bind_int(st, 2, stage), sqlite3_bind_int(st, 3, replica);
  int n = 0;
  while (n < max && sqlite3_step(st) == SQLITE_ROW) {
    coord_peer *p = s_peer_by_id(c, sqlite3_column_int(st, 0));
    if (!p || p->status != PEER_LIVE) continue;
    if (endpoint) snprintf(endpoint[n], 256, "%s", sqlite3_column_text(st, 1));
    out[n++] = p;
  }
  sqlite3_finalize(st);
  return n;
}

/* The shards a resume of step needs: every stage's replica 0 (the stage checkpoint) and, in a
 * run that keeps state across steps, every other replica's .state. */
static int s_needed(const coordinator *c, int replica) {
  return replica == 0 || parallel_run_config_stateful(&c->cfg.run);
}

/* Whether every shard a resume of step needs has `copies` live holders with its writer's
 * digest. */
static int s_step_held(coordinator *c, long step, int copies) {
  coord_peer *h[S_MAX_HOLDERS];
  for (int s = 0; s < c->cfg.run.stages; s++)
    for (int r = 0; r < c->cfg.run.replicas; r++) {
      if (!s_needed(c, r)) continue;
      char d[65];
      s_writer_digest(c, step, s, r, d);
      if (!d[0] || s_live_holders(c, step, s, r, h, NULL, S_MAX_HOLDERS) < copies) return 0;
    }
  return 1;
}

/* The steps that have a writer's digest, newest first, not past `max_step`. Returns how many. */
static int s_digest_steps(coordinator *c, long max_step, long *steps, int cap) {
  sqlite3_stmt *st = NULL;
  sqlite3_prepare_v2(c->db,
                     "SELECT DISTINCT step FROM shard_digests WHERE step <= ? ORDER BY step DESC",
                     -1, &st, NULL);
  sqlite3_bind_int64(st, 1, max_step);
  int n = 0;
  while (n < cap && sqlite3_step(st) == SQLITE_ROW) steps[n++] = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  return n;
}

/* The newest step not past max_step whose needed shards have `copies` live holders each. */
static long s_newest_held(coordinator *c, long max_step, int copies) {
  long steps[256];
  int n = s_digest_steps(c, max_step, steps, 256);
  for (int i = 0; i < n; i++)
    if (s_step_held(c, steps[i], copies)) return steps[i];
  return 0;
}

long coord_holders_resume_step(coordinator *c) {
  return s_newest_held(c, c->cfg.run.steps, 1);
}

/* Live peers with a shard server: what can hold a copy. */
static int s_live_servers(coordinator *c) {
  sqlite3_stmt *st = NULL;
  sqlite3_prepare_v2(c->db, "SELECT peer FROM shard_servers", -1, &st, NULL);
  int n = 0;
  while (sqlite3_step(st) == SQLITE_ROW) {
    const coord_peer *p = s_peer_by_id(c, sqlite3_column_int(st, 0));
    n += p && p->status == PEER_LIVE;
  }
  sqlite3_finalize(st);
  return n;
}

/* The pin is what keeps the newest restorable step on the peers: no store prunes it or anything
 * newer, so it stays held (less the holders that leave) until a newer step is held k times as
 * well. Only a step held k times is pinned: pinning one its writers alone hold would let the
 * stores prune the older steps whose copies are still on their way, and copies that lag would
 * then never land. Until a step is held k times (0) the stores prune nothing. */
long coord_holders_pinned_step(coordinator *c) {
  if (!coord_holders_on(c) || c->committed_step <= 0) return 0;
  const int copies = WT_MAX(1, WT_MIN(c->cfg.checkpoint_copies, s_live_servers(c)));
  return s_newest_held(c, c->committed_step, copies);
}

void coord_holders_ack_json(const coordinator *c, cJSON *ack) {
  if (!coord_holders_on(c) || c->holders_pinned <= 0) return;
  char run[17];
  snprintf(run, sizeof run, "%016llx", (unsigned long long)(c->run_id & 0xFFFFFFFFFFFFull));
  cJSON *o = cJSON_AddObjectToObject(ack, "pinned");
  cJSON_AddStringToObject(o, "run", run);
  cJSON_AddNumberToObject(o, "step", (double)c->holders_pinned);
  cJSON_AddNumberToObject(o, "keep", WT_MAX(c->cfg.run.keep, 2));
}

/* A peer that has just registered reports its store at its next heartbeat; until it has (or
 * a few heartbeats passed), the newest step the live peers hold is not known yet. */
static int s_reports_pending(const coordinator *c) {
  double now = wt_now_s();
  for (int i = 0; i < c->n_peers; i++)
    if (c->peers[i].status == PEER_LIVE && c->peers[i].shards_due > now) return 1;
  return 0;
}

/* Appends to why what a resume of step lacks: each needed shard with no live holder, and the
 * peers that held it. */
static void s_missing_at(coordinator *c, long step, char *why, size_t size) {
  coord_peer *h[1];
  size_t len = strlen(why);
  snprintf(why + len, size - len, "%sstep %ld lacks", len ? "; " : "", step);
  for (int s = 0; s < c->cfg.run.stages; s++)
    for (int r = 0; r < c->cfg.run.replicas; r++) {
      char d[65];
      s_writer_digest(c, step, s, r, d);
      if (!s_needed(c, r) || (d[0] && s_live_holders(c, step, s, r, h, NULL, 1) > 0)) continue;
      len = strlen(why);
      snprintf(why + len, size - len, " stage %d replica %d (held by peers", s, r);
      sqlite3_stmt *st = NULL;
      sqlite3_prepare_v2(c->db,
                         "SELECT peer FROM shard_holders WHERE step = ? AND stage = ? AND "
                         "replica = ? AND digest = ? ORDER BY peer LIMIT 8",
                         -1, &st, NULL);
      sqlite3_bind_int64(st, 1, step), sqlite3_bind_int(st, 2, s), sqlite3_bind_int(st, 3, r);
      sqlite3_bind_text(st, 4, d, -1, SQLITE_TRANSIENT);
      int n = 0;
      for (; sqlite3_step(st) == SQLITE_ROW; n++) {
        len = strlen(why);
        snprintf(why + len, size - len, " %d", sqlite3_column_int(st, 0));
      }
      sqlite3_finalize(st);
      len = strlen(why);
      snprintf(why + len, size - len, "%s, none live)", n ? "" : " none");
    }
}

int coord_holders_ready(coordinator *c, char *why, size_t size) {
  if (!coord_holders_on(c) || c->committed_step <= 0) return 1;
  const int pending = s_reports_pending(c);
  if (!pending && coord_holders_resume_step(c) > 0) {
    c->holders_wait_since = 0;
    return 1;
  }
  /* the wait starts once every live peer has reported; peers that register meanwhile (their
   * reports pending) do not stretch it, but a step they already named ends it */
  if (pending && (c->holders_wait_since <= 0 || coord_holders_resume_step(c) > 0)) return 0;
  const double now = wt_now_s(), limit = c->cfg.bind_timeout_s;
  if (c->holders_wait_since <= 0) {
    c->holders_wait_since = now;
    coord_event(c, "checkpoint",
                "waiting at most %.3g s (--bind-timeout) for peers that hold the shards of a "
                "committed step (step %ld is committed; no step has every shard on a live peer)",
                limit, c->committed_step);
  }
  if (now - c->holders_wait_since < limit) return 0;
  snprintf(why, size,
           "no live peer came back with the shards of a committed step within %.3g s "
           "(--bind-timeout): ",
           limit);
  char *list = why + strlen(why);
  const size_t left = size - strlen(why);
  list[0] = 0;
  long steps[3];
  int n = s_digest_steps(c, c->committed_step, steps, 3);
  for (int i = 0; i < n; i++) s_missing_at(c, steps[i], list, left);
  if (!n) snprintf(list, left, "no peer ever reported a shard of step %ld", c->committed_step);
  size_t len = strlen(why);
  snprintf(why + len, size - len, "; their holders' --data-dir may still have them");
  return -1;
}

/* ---- reports ------------------------------------------------------------------------------ */

/* Whether p wrote (step, stage, replica) itself: it holds that seat in the running train epoch,
 * which started before step. A copy is counted only when its digest is the writer's. */
static int s_is_writer(const coordinator *c, const coord_peer *p, long step, int stage,
                       int replica) {
  return !strcmp(c->epoch_kind, "train") &&
         (c->phase == EPOCH_RUNNING || c->phase == EPOCH_DRAINING) &&
         p->epoch_rank == stage * c->cfg.run.replicas + replica && step > c->start_step &&
         step <= c->cfg.run.steps;
}

void coord_holders_on_register(coordinator *c, coord_peer *p) {
  if (!coord_holders_on(c)) return;
  s_exec(c, "DELETE FROM shard_servers WHERE peer = ?", p->id, -1, -1, -1, NULL);
  p->shards_due = wt_now_s() + 3 * c->cfg.heartbeat_s + 1;
  if (c->shard_relay) parallel_shard_relay_allow(c->shard_relay, p->key);
}

int coord_shard_relay_open(coordinator *c) {
  if (!coord_holders_on(c)) return WT_OK;
  char host[256], bind[300];
  coord_relay_host(c, host, sizeof host);
  /* Inside the operator's relay range when one is given: that range is what the firewall opens.
   * The first free port of it; the epochs' relays take the ports after it. */
  int lo = c->cfg.relay_port_min, hi = c->cfg.relay_port_max;
  for (int port = lo; !c->shard_relay && port <= (lo ? hi : 0); port++) {
    if (lo) snprintf(bind, sizeof bind, "tcp://%s:%d", host, port);
    else snprintf(bind, sizeof bind, "tcp://%s:*", host);
    c->shard_relay = parallel_shard_relay_new(bind, c->pub, c->sec);
  }
  if (!c->shard_relay)
    return wt_fail(WT_EIO, "the shard relay: %s%s", wt_last_error(),
                   lo ? " (no free port in --relay-port-min..--relay-port-max: widen the range)"
                      : "");
  parallel_shard_relay_allow(c->shard_relay, c->pub); /* --checkpoint-store fetches through it */
  coord_event(c, "relay", "shard relay at %s (for holders that accept no inbound connection)",
              parallel_shard_relay_endpoint(c->shard_relay));
  return WT_OK;
}

void coord_shard_relay_close(coordinator *c) {
  parallel_shard_relay_destroy(&c->shard_relay);
}

void coord_holders_welcome_json(const coordinator *c, cJSON *b) {
  if (!coord_holders_on(c)) return;
  cJSON_AddStringToObject(b, "storage", "peers");
  if (c->shard_relay)
    cJSON_AddStringToObject(b, "shard_relay", parallel_shard_relay_endpoint(c->shard_relay));
}

void coord_holders_on_shards(coordinator *c, coord_peer *p, const cJSON *body) {
  p->shards_due = 0;
  const char *ep = coordinator_field_str(body, "endpoint");
  const cJSON *held = cJSON_GetObjectItemCaseSensitive(body, "held");
  if (strncmp(ep, "tcp://", 6) || strlen(ep) >= 256 || !cJSON_IsArray(held)) {
    c->refused++;
    WT_WARN("coordinator: dropped a shard report from peer %d: no tcp:// endpoint or no list",
            p->id);
    return;
  }
  char run[17];
  snprintf(run, sizeof run, "%016llx", (unsigned long long)(c->run_id & 0xFFFFFFFFFFFFull));
  s_exec(c, "BEGIN", -1, -1, -1, -1, NULL);
  s_exec(c, "INSERT OR REPLACE INTO shard_servers(peer, endpoint) VALUES(?, ?)", p->id, -1, -1, -1,
         ep);
  s_exec(c, "DELETE FROM shard_holders WHERE peer = ?", p->id, -1, -1, -1, NULL);
  const cJSON *e;
  cJSON_ArrayForEach(e, held) {
    long step = coordinator_field_int(e, "step", -1);
    int stage = coordinator_field_int(e, "stage", -1),
        replica = coordinator_field_int(e, "replica", -1);
    const char *digest = coordinator_field_str(e, "digest");
    if (strcmp(coordinator_field_str(e, "run"), run) || step < 1 || stage < 0 ||
        stage >= c->cfg.run.stages || replica < 0 || replica >= c->cfg.run.replicas ||
        strlen(digest) != 64 || strspn(digest, "0123456789abcdef") != 64)
      continue; /* another run's, or impossible: not this run's holding */
    if (s_is_writer(c, p, step, stage, replica))
      s_exec(
          c,
          "INSERT OR REPLACE INTO shard_digests(step, stage, replica, digest) VALUES(?, ?, ?, ?)",
          step, stage, replica, -1, digest);
    s_exec(c,
           "INSERT OR REPLACE INTO shard_holders(peer, step, stage, replica, digest)"
           " VALUES(?, ?, ?, ?, ?)",
           p->id, step, stage, replica, digest);
  }
  s_exec(c, "COMMIT", -1, -1, -1, -1, NULL);
  coord_holders_check(c);
}

/* ---- copies ---------------------------------------------------------------------------------- */

/* The holders as a fetch names them; one that accepts no inbound connection is reached through
 * the shard relay ("relay", "relay_key": the coordinator's). */
static cJSON *s_holders_json(const coordinator *c, coord_peer **h, char (*ep)[256], int n) {
  cJSON *a = cJSON_CreateArray();
  for (int i = 0; i < n; i++) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "peer", h[i]->id);
    cJSON_AddStringToObject(o, "endpoint", ep[i]);
    cJSON_AddStringToObject(o, "key", h[i]->key);
    if (c->shard_relay && !coord_reachable(h[i])) {
      cJSON_AddStringToObject(o, "relay", parallel_shard_relay_endpoint(c->shard_relay));
      cJSON_AddStringToObject(o, "relay_key", c->pub);
    }
    cJSON_AddItemToArray(a, o);
  }
  return a;
}

/* Tells each holder to let `who` fetch from it. */
static void s_allow(coordinator *c, coord_peer **h, int n, const coord_peer *who) {
  cJSON *b = cJSON_CreateObject();
  cJSON *keys = cJSON_AddArrayToObject(b, "keys");
  cJSON_AddItemToArray(keys, cJSON_CreateString(who->key));
  for (int i = 0; i < n; i++)
    if (h[i] != who) coord_send(c, h[i], COORD_CMD_SHARD_ALLOW, b);
  cJSON_Delete(b);
}

static int s_has_server(coordinator *c, const coord_peer *p) {
  sqlite3_stmt *st = NULL;
  sqlite3_prepare_v2(c->db, "SELECT 1 FROM shard_servers WHERE peer = ?", -1, &st, NULL);
  sqlite3_bind_int(st, 1, p->id);
  int ok = sqlite3_step(st) == SQLITE_ROW;
  sqlite3_finalize(st);
  return ok;
}

static int s_pending(coordinator *c, long step, int stage, int replica, int peer, int add) {
  double now = wt_now_s();
  for (int i = 0; i < COORD_HOLDERS_PENDING; i++) {
    coord_copy_pending *q = &c->copies[i];
    if (q->t > 0 && now - q->t < S_PENDING_S && q->step == step && q->stage == stage &&
        q->replica == replica && (peer < 0 || q->peer == peer))
      return 1;
  }
  if (!add) return 0;
  int oldest = 0;
  for (int i = 1; i < COORD_HOLDERS_PENDING; i++)
    if (c->copies[i].t < c->copies[oldest].t) oldest = i;
  c->copies[oldest] = (coord_copy_pending){step, stage, replica, peer, now};
  return 0;
}

/* A live peer, not holding the shard, not asked already, with a shard server: the members of
 * the running epoch first (they are up and serving), then any other live peer. */
static coord_peer *s_copy_target(coordinator *c, long step, int stage, int replica,
                                 coord_peer **holders, int n_holders) {
  for (int pass = 0; pass < 2; pass++)
    for (int i = 0; i < c->n_peers; i++) {
      coord_peer *p = &c->peers[i];
      int held = 0;
      for (int k = 0; k < n_holders; k++) held |= holders[k] == p;
      if (p->status != PEER_LIVE || held || (pass == 0 && p->epoch_rank < 0) ||
          s_pending(c, step, stage, replica, p->id, 0) || !s_has_server(c, p))
        continue;
      return p;
    }
  return NULL;
}

static void s_copy_shard(coordinator *c, long step, int stage, int replica) {
  char digest[65], ep[S_MAX_HOLDERS][256];
  s_writer_digest(c, step, stage, replica, digest);
  if (!digest[0]) return;
  coord_peer *h[S_MAX_HOLDERS];
  int n = s_live_holders(c, step, stage, replica, h, ep, S_MAX_HOLDERS);
  coord_store_offer(c, step, stage, replica, digest, h, ep, n);
  int asked = 0;
  for (int i = 0; i < c->n_peers; i++) /* copies asked for count as made until they are late */
    asked +=
        c->peers[i].status == PEER_LIVE && s_pending(c, step, stage, replica, c->peers[i].id, 0);
  if (c->run_complete) return; /* the store still takes the last step; the peers are leaving */
  for (int want = c->cfg.checkpoint_copies - n - asked; n > 0 && want > 0; want--) {
    coord_peer *t = s_copy_target(c, step, stage, replica, h, n);
    if (!t) {
      if (!c->holders_short_said)
        coord_event(c, "checkpoint",
                    "step %ld stage %d replica %d has %d live holder%s; no other live peer can "
                    "take a copy (--checkpoint-copies %d)",
                    step, stage, replica, n, n == 1 ? "" : "s", c->cfg.checkpoint_copies);
      c->holders_short_said = 1;
      return;
    }
    s_pending(c, step, stage, replica, t->id, 1);
    s_allow(c, h, n, t);
    cJSON *b = cJSON_CreateObject();
    char run[17];
    snprintf(run, sizeof run, "%016llx", (unsigned long long)(c->run_id & 0xFFFFFFFFFFFFull));
    cJSON_AddStringToObject(b, "run", run);
    cJSON_AddNumberToObject(b, "step", (double)step);
    cJSON_AddNumberToObject(b, "stage", stage);
    cJSON_AddNumberToObject(b, "replica", replica);
    cJSON_AddStringToObject(b, "digest", digest);
    cJSON_AddItemToObject(b, "holders", s_holders_json(c, h, ep, n));
    coord_send(c, t, COORD_CMD_REPLICATE, b);
    cJSON_Delete(b);
    coord_event(c, "checkpoint", "peer %d copies step %ld stage %d replica %d (%d live holder%s)",
                t->id, step, stage, replica, n, n == 1 ? "" : "s");
  }
}

int coord_holders_end_stored(coordinator *c) {
  if (!c->store || !coord_holders_on(c) || c->committed_step <= 0) return 1;
  sqlite3_stmt *st = NULL;
  sqlite3_prepare_v2(c->db,
                     "SELECT d.replica FROM shard_digests d LEFT JOIN shard_stored s"
                     " ON s.step = d.step AND s.stage = d.stage AND s.replica = d.replica"
                     " WHERE d.step = ? AND s.step IS NULL",
                     -1, &st, NULL);
  sqlite3_bind_int64(st, 1, c->committed_step);
  int missing = 0;
  while (!missing && sqlite3_step(st) == SQLITE_ROW) missing = s_needed(c, sqlite3_column_int(st, 0));
  sqlite3_finalize(st);
  return !missing;
}

/* The newest S_COPIED_STEPS committed steps are kept at checkpoint_copies: the latest, and the
 * one before while the latest may still be landing on some holders. */
#define S_COPIED_STEPS 2

void coord_holders_check(coordinator *c) {
  coord_store_collect(c);
  if (!coord_holders_on(c) || c->committed_step <= 0) return;
  c->holders_pinned = coord_holders_pinned_step(c);
  sqlite3_stmt *st = NULL;
  sqlite3_prepare_v2(c->db,
                     "SELECT DISTINCT step FROM shard_digests WHERE step <= ? ORDER BY step DESC "
                     "LIMIT ?",
                     -1, &st, NULL);
  sqlite3_bind_int64(st, 1, c->committed_step), sqlite3_bind_int(st, 2, S_COPIED_STEPS);
  long steps[S_COPIED_STEPS];
  int n = 0;
  while (n < S_COPIED_STEPS && sqlite3_step(st) == SQLITE_ROW)
    steps[n++] = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  for (int i = 0; i < n; i++)
    for (int s = 0; s < c->cfg.run.stages; s++)
      for (int r = 0; r < c->cfg.run.replicas; r++)
        if (s_needed(c, r)) s_copy_shard(c, steps[i], s, r);
}

/* ---- a seat's start -------------------------------------------------------------------------- */

void coord_holders_seat_json(coordinator *c, int rank, cJSON *t) {
  if (!coord_holders_on(c)) return;
  cJSON_AddStringToObject(t, "storage", "peers");
  if (c->from_peers || c->start_step <= 0) return;
  cJSON_ReplaceItemInObject(t, "resume", cJSON_CreateNumber(1));
  const int R = c->cfg.run.replicas, stage = rank / R, replica = rank % R;
  coord_peer *who = &c->peers[c->members[rank]];
  cJSON *fetch = cJSON_AddArrayToObject(t, "fetch");
  for (int r = 0; r < R; r++) {
    if (r != 0 && r != replica) continue;
    if (!s_needed(c, r)) continue;
    char digest[65], ep[S_MAX_HOLDERS][256];
    s_writer_digest(c, c->start_step, stage, r, digest);
    coord_peer *h[S_MAX_HOLDERS];
    int n = s_live_holders(c, c->start_step, stage, r, h, ep, S_MAX_HOLDERS);
    s_allow(c, h, n, who);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "step", (double)c->start_step);
    cJSON_AddNumberToObject(o, "stage", stage);
    cJSON_AddNumberToObject(o, "replica", r);
    cJSON_AddStringToObject(o, "digest", digest);
    cJSON_AddItemToObject(o, "holders", s_holders_json(c, h, ep, n));
    cJSON_AddItemToArray(fetch, o);
  }
}

/* ---- /status -----------------------------------------------------------------------------------
 */

void coord_holders_status(coordinator *c, cJSON *o) {
  cJSON_AddStringToObject(o, "checkpoint_storage", c->cfg.checkpoint_storage);
  if (!coord_holders_on(c)) return;
  cJSON_AddNumberToObject(o, "checkpoint_copies", c->cfg.checkpoint_copies);
  cJSON_AddNumberToObject(o, "resumable_step", (double)coord_holders_resume_step(c));
  cJSON_AddNumberToObject(o, "pinned_step", (double)c->holders_pinned);
  if (c->shard_relay) {
    parallel_shard_relay_stats st = parallel_shard_relay_stats_get(c->shard_relay);
    cJSON *r = cJSON_AddObjectToObject(o, "shard_relay");
    cJSON_AddStringToObject(r, "endpoint", parallel_shard_relay_endpoint(c->shard_relay));
    cJSON_AddNumberToObject(r, "messages", (double)st.messages);
    cJSON_AddNumberToObject(r, "bytes", (double)st.bytes);
    cJSON_AddNumberToObject(r, "refused", (double)st.refused);
  }
  cJSON *a = cJSON_AddArrayToObject(o, "shards");
  sqlite3_stmt *st = NULL;
  sqlite3_prepare_v2(c->db,
                     "SELECT step, stage, replica, digest FROM shard_digests WHERE step >= ("
                     "SELECT COALESCE(MAX(step), 0) FROM shard_digests) - ? ORDER BY step DESC, "
                     "stage, replica LIMIT 256",
                     -1, &st, NULL);
  sqlite3_bind_int64(st, 1, (sqlite3_int64)c->cfg.run.checkpoint_every);
  while (sqlite3_step(st) == SQLITE_ROW) {
    long step = sqlite3_column_int64(st, 0);
    int stage = sqlite3_column_int(st, 1), replica = sqlite3_column_int(st, 2);
    cJSON *e = cJSON_CreateObject();
    cJSON_AddNumberToObject(e, "step", (double)step);
    cJSON_AddNumberToObject(e, "stage", stage);
    cJSON_AddNumberToObject(e, "replica", replica);
    cJSON_AddStringToObject(e, "digest", (const char *)sqlite3_column_text(st, 3));
    coord_peer *h[S_MAX_HOLDERS];
    int n = s_live_holders(c, step, stage, replica, h, NULL, S_MAX_HOLDERS);
    cJSON *ids = cJSON_AddArrayToObject(e, "holders");
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(ids, cJSON_CreateNumber(h[i]->id));
    cJSON_AddItemToArray(a, e);
  }
  sqlite3_finalize(st);
}
