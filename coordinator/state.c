/* state — the coordinator's SQLite database (WAL): schema, load on start, and the writes that
 * make every decision survive a kill -9. Writes go through before the daemon acts on them. */
#include "coordinator/coordinator_internal.h"

#include "common/common.h"

#include <math.h>
#include <sodium.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *s_schema =
    "PRAGMA journal_mode=WAL;"
    "PRAGMA synchronous=NORMAL;"
    "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT);"
    "CREATE TABLE IF NOT EXISTS tokens(id TEXT PRIMARY KEY, expires REAL, uses_left INTEGER,"
    " created REAL);"
    "CREATE TABLE IF NOT EXISTS peers(key TEXT PRIMARY KEY, id INTEGER, status INTEGER,"
    " sid TEXT, last_seq INTEGER, region TEXT, kind TEXT, host TEXT, flops REAL, memory REAL,"
    " gpus INTEGER DEFAULT 1);"
    "CREATE TABLE IF NOT EXISTS sessions(key TEXT, sid TEXT, PRIMARY KEY(key, sid));"
    "CREATE TABLE IF NOT EXISTS links(a TEXT, b TEXT, latency_s REAL, bandwidth_Bps REAL,"
    " PRIMARY KEY(a, b));"
    "CREATE TABLE IF NOT EXISTS epochs(n INTEGER PRIMARY KEY, kind TEXT, plan TEXT,"
    " cost_ga_s REAL, cost_random_s REAL, created REAL);"
    "CREATE TABLE IF NOT EXISTS checkpoints(step INTEGER, stage INTEGER, digest TEXT,"
    " PRIMARY KEY(step, stage));"
    "CREATE TABLE IF NOT EXISTS events(id INTEGER PRIMARY KEY AUTOINCREMENT, t REAL, kind TEXT,"
    " detail TEXT);"
    "CREATE TABLE IF NOT EXISTS losses(step INTEGER PRIMARY KEY, loss REAL);";

static int s_exec(coordinator *c, const char *sql) {
  char *err = NULL;
  if (sqlite3_exec(c->db, sql, NULL, NULL, &err) != SQLITE_OK) {
    int rc = wt_fail(WT_EIO, "state database %s/state.db: %s", c->dir, err ? err : "?");
    sqlite3_free(err);
    return rc;
  }
  return WT_OK;
}

/* Runs one statement with text/number arguments given as a format of 't' (text), 'd' (double),
 * 'i' (int64). Logs a failure: a lost write is reported, the daemon goes on. */
static void s_run(coordinator *c, const char *sql, const char *types, ...) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(c->db, sql, -1, &st, NULL) != SQLITE_OK) {
    WT_ERROR("coordinator: state database: %s", sqlite3_errmsg(c->db));
    return;
  }
  va_list ap;
  va_start(ap, types);
  for (int i = 0; types[i]; i++) {
    if (types[i] == 't')
      sqlite3_bind_text(st, i + 1, va_arg(ap, const char *), -1, SQLITE_TRANSIENT);
    if (types[i] == 'd') sqlite3_bind_double(st, i + 1, va_arg(ap, double));
    if (types[i] == 'i') sqlite3_bind_int64(st, i + 1, va_arg(ap, long long));
  }
  va_end(ap);
  if (sqlite3_step(st) != SQLITE_DONE)
    WT_ERROR("coordinator: state database write failed: %s", sqlite3_errmsg(c->db));
  sqlite3_finalize(st);
}

/* A state database written before peers reported their GPUs has no gpus column: add it, every
 * peer it knows counted as one GPU (what those peers were). */
static int s_add_gpus_column(coordinator *c) {
  sqlite3_stmt *st = NULL;
  int found = 0;
  if (sqlite3_prepare_v2(c->db, "SELECT name FROM pragma_table_info('peers')", -1, &st, NULL) !=
      SQLITE_OK)
    return wt_fail(WT_EIO, "state database %s/state.db: %s", c->dir, sqlite3_errmsg(c->db));
  while (sqlite3_step(st) == SQLITE_ROW)
    found |= !strcmp((const char *)sqlite3_column_text(st, 0), "gpus");
  sqlite3_finalize(st);
  return found ? WT_OK : s_exec(c, "ALTER TABLE peers ADD COLUMN gpus INTEGER DEFAULT 1;");
}

int coord_state_open(coordinator *c) {
  char path[1300];
  snprintf(path, sizeof path, "%s/state.db", c->dir);
  if (sqlite3_open(path, &c->db) != SQLITE_OK) {
    int rc = wt_fail(WT_EIO, "cannot open the state database %s: %s", path,
                     c->db ? sqlite3_errmsg(c->db) : "out of memory");
    sqlite3_close(c->db);
    c->db = NULL;
    return rc;
  }
  sqlite3_busy_timeout(c->db, 5000);
  WT_CHECK(s_exec(c, s_schema));
  return s_add_gpus_column(c);
}

void coord_state_close(coordinator *c) {
  if (c->db) sqlite3_close(c->db);
  c->db = NULL;
}

void coord_event(coordinator *c, const char *kind, const char *fmt, ...) {
  char detail[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(detail, sizeof detail, fmt, ap);
  va_end(ap);
  WT_INFO("coordinator: %s: %s", kind, detail);
  s_run(c, "INSERT INTO events(t, kind, detail) VALUES(?, ?, ?)", "dtt", (double)time(NULL), kind,
        detail);
  coord_event_keep(c, (double)time(NULL), kind, detail);
}

void coord_event_keep(coordinator *c, double t, const char *kind, const char *detail) {
  coord_event_line *e = &c->events[c->events_next];
  e->t = t;
  snprintf(e->kind, sizeof e->kind, "%s", kind);
  size_t n = strlen(detail);
  if (n >= sizeof e->detail) /* cut at a character's start, not inside its UTF-8 bytes */
    for (n = sizeof e->detail - 1; n > 0 && ((unsigned char)detail[n] & 0xC0) == 0x80;) n--;
  memcpy(e->detail, detail, n);
  e->detail[n] = 0;
  c->events_next = (c->events_next + 1) % COORD_EVENTS_KEPT;
  if (c->n_events < COORD_EVENTS_KEPT) c->n_events++;
}

/* The newest events of the database, oldest first, into the in-memory log. */
static void s_load_events(coordinator *c) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(c->db,
                         "SELECT t, kind, detail FROM (SELECT id, t, kind, detail FROM events "
                         "ORDER BY id DESC LIMIT ?) ORDER BY id",
                         -1, &st, NULL) != SQLITE_OK)
    return;
  sqlite3_bind_int(st, 1, COORD_EVENTS_KEPT);
  while (sqlite3_step(st) == SQLITE_ROW) {
    const char *kind = (const char *)sqlite3_column_text(st, 1);
    const char *detail = (const char *)sqlite3_column_text(st, 2);
    coord_event_keep(c, sqlite3_column_double(st, 0), kind ? kind : "", detail ? detail : "");
  }
  sqlite3_finalize(st);
}

void coord_state_meta_set(coordinator *c, const char *key, const char *value) {
  s_run(c, "INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)", "tt", key, value);
}

int coord_state_meta_get(coordinator *c, const char *key, char *out, size_t size) {
  sqlite3_stmt *st = NULL;
  int found = 0;
  if (sqlite3_prepare_v2(c->db, "SELECT value FROM meta WHERE key = ?", -1, &st, NULL) ==
      SQLITE_OK) {
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0)) {
      snprintf(out, size, "%s", (const char *)sqlite3_column_text(st, 0));
      found = 1;
    }
  }
  sqlite3_finalize(st);
  return found;
}

/* What a complete run ended with: its last step and loss (the heartbeats' last ones may be
 * older), and the peers told it is complete, which then left. */
static void s_save_outcome(coordinator *c, cJSON *run) {
  if (c->run_complete != 1) return;
  cJSON_AddNumberToObject(run, "last_step", (double)c->last_step);
  if (isfinite(c->last_loss)) cJSON_AddNumberToObject(run, "last_loss", c->last_loss);
  cJSON *f = cJSON_AddArrayToObject(run, "finished");
  for (int i = 0; i < c->n_peers; i++)
    if (c->peers[i].finished) cJSON_AddItemToArray(f, cJSON_CreateNumber(c->peers[i].id));
}

void coord_state_save_run(coordinator *c) {
  cJSON *run = cJSON_CreateObject();
  char id[24]; /* as text: a JSON number is a double, which keeps 53 of the id's 64 bits */
  snprintf(id, sizeof id, "%016llx", (unsigned long long)c->run_id);
  cJSON_AddStringToObject(run, "run_id", id);
  cJSON_AddNumberToObject(run, "complete", c->run_complete);
  cJSON_AddNumberToObject(run, "committed_step", (double)c->committed_step);
  cJSON_AddNumberToObject(run, "start_step", (double)c->start_step);
  cJSON_AddNumberToObject(run, "epoch", c->epoch);
  cJSON_AddStringToObject(run, "epoch_kind", c->epoch_kind);
  cJSON_AddNumberToObject(run, "running", c->phase == EPOCH_RUNNING);
  cJSON_AddNumberToObject(run, "cost_ga_s", c->cost_ga);
  cJSON_AddNumberToObject(run, "cost_random_s", c->cost_random);
  cJSON_AddNumberToObject(run, "first_loss", c->first_loss);
  cJSON_AddNumberToObject(run, "recovery_s", c->recovery_s);
  s_save_outcome(c, run);
  cJSON *m = cJSON_AddArrayToObject(run, "members"), *pm = cJSON_AddArrayToObject(run, "plan");
  for (int i = 0; i < c->n_members; i++)
    cJSON_AddItemToArray(m, cJSON_CreateNumber(c->peers[c->members[i]].id));
  for (int i = 0; i < c->n_plan; i++)
    cJSON_AddItemToArray(pm, cJSON_CreateNumber(c->peers[c->plan_members[i]].id));
  cJSON *rings = cJSON_AddArrayToObject(run, "rings"); /* the plan's rings, as sent */
  for (int i = 0; i < c->n_rings; i++) cJSON_AddItemToArray(rings, cJSON_CreateNumber(c->rings[i]));
  char *text = cJSON_PrintUnformatted(run);
  coord_state_meta_set(c, "run", text);
  free(text);
  cJSON_Delete(run);
}

void coord_state_save_peer(coordinator *c, const coord_peer *p) {
  s_run(c,
        "INSERT OR REPLACE INTO peers(key, id, status, sid, last_seq, region, kind, host, flops,"
        " memory, gpus) VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        "tiititttddi", p->key, (long long)p->id, (long long)p->status, p->sid,
        (long long)p->last_seq, p->region, p->kind, p->host, p->flops, p->memory,
        (long long)(p->gpus > 0 ? p->gpus : 1));
}

void coord_state_begin(coordinator *c) {
  if (sqlite3_get_autocommit(c->db)) s_exec(c, "BEGIN");
}

void coord_state_commit(coordinator *c) {
  if (!sqlite3_get_autocommit(c->db) && s_exec(c, "COMMIT") != WT_OK)
    WT_ERROR("coordinator: %s", wt_last_error());
}

void coord_state_defer_peer(coordinator *c, int i) {
  if (c->peers[i].seq_dirty) return;
  c->peers[i].seq_dirty = 1;
  c->dirty[c->n_dirty++] = i;
}

/* p's trust record, when it changed since it was last written. */
static void s_save_trust(coordinator *c, coord_peer *p) {
  char *text = coord_trust_record(c, p);
  if (!text) return;
  uint64_t digest = 0;
  crypto_generichash((unsigned char *)&digest, sizeof digest, (const unsigned char *)text,
                     strlen(text), NULL, 0);
  if (digest != p->trust_saved) {
    char meta[COORD_KEY_LEN + 16];
    snprintf(meta, sizeof meta, "trust:%s", p->key);
    coord_state_meta_set(c, meta, text);
    p->trust_saved = digest;
  }
  free(text);
}

void coord_state_load_trust(coordinator *c, coord_peer *p) {
  char meta[COORD_KEY_LEN + 16], text[8192];
  snprintf(meta, sizeof meta, "trust:%s", p->key);
  if (!coord_state_meta_get(c, meta, text, sizeof text)) return;
  if (!coord_trust_record_load(c, p, text))
    WT_WARN("coordinator: state database: the trust record of peer %d (key %.8s…) is damaged; "
            "its counts start afresh (an exclusion, kept apart, still holds)",
            p->id, p->key);
}

/* One transaction and one prepared statement for all of them: a heartbeat costs an UPDATE, not
 * a commit. */
void coord_state_flush(coordinator *c, int force) {
  double now = wt_now_s();
  if (!c->n_dirty || (!force && now - c->dirty_t < COORD_SEQ_FLUSH_S)) return;
  c->dirty_t = now;
  sqlite3_stmt *st = NULL;
  coord_state_begin(c);
  if (sqlite3_prepare_v2(c->db, "UPDATE peers SET sid = ?, last_seq = ? WHERE key = ?", -1, &st,
                         NULL) != SQLITE_OK)
    WT_ERROR("coordinator: state database: %s", sqlite3_errmsg(c->db));
  for (int k = 0; k < c->n_dirty; k++) {
    coord_peer *p = &c->peers[c->dirty[k]];
    p->seq_dirty = 0;
    s_save_trust(c, p); /* in the same transaction */
    if (!st) continue;
    sqlite3_bind_text(st, 1, p->sid, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, (sqlite3_int64)p->last_seq);
    sqlite3_bind_text(st, 3, p->key, -1, SQLITE_STATIC);
    if (sqlite3_step(st) != SQLITE_DONE)
      WT_ERROR("coordinator: state database write failed: %s", sqlite3_errmsg(c->db));
    sqlite3_reset(st);
  }
  sqlite3_finalize(st);
  coord_state_commit(c);
  c->n_dirty = 0;
}

void coord_state_save_link(coordinator *c, int a, int b) {
  double lat = -1, bw = -1;
  coord_link_get(c, a, b, &lat, &bw);
  s_run(c, "INSERT OR REPLACE INTO links(a, b, latency_s, bandwidth_Bps) VALUES(?, ?, ?, ?)",
        "ttdd", c->peers[a].key, c->peers[b].key, lat, bw);
}

int coord_state_session_seen(coordinator *c, const char *key, const char *sid) {
  sqlite3_stmt *st = NULL;
  int seen = 0;
  if (sqlite3_prepare_v2(c->db, "SELECT 1 FROM sessions WHERE key = ? AND sid = ?", -1, &st,
                         NULL) == SQLITE_OK) {
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, sid, -1, SQLITE_STATIC);
    seen = sqlite3_step(st) == SQLITE_ROW;
  }
  sqlite3_finalize(st);
  return seen;
}

void coord_state_session_add(coordinator *c, const char *key, const char *sid) {
  s_run(c, "INSERT OR IGNORE INTO sessions(key, sid) VALUES(?, ?)", "tt", key, sid);
}

int coord_state_peer_id(coordinator *c, const char *key) {
  sqlite3_stmt *st = NULL;
  int id = 0;
  if (sqlite3_prepare_v2(c->db, "SELECT id FROM peers WHERE key = ?", -1, &st, NULL) == SQLITE_OK) {
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    if (sqlite3_step(st) == SQLITE_ROW) id = sqlite3_column_int(st, 0);
  }
  sqlite3_finalize(st);
  return id > 0 ? id : 0;
}

int coord_state_checkpoint(coordinator *c, long step, int stage, const char *digest,
                           int *complete) {
  s_run(c, "INSERT OR REPLACE INTO checkpoints(step, stage, digest) VALUES(?, ?, ?)", "iit",
        (long long)step, (long long)stage, digest);
  sqlite3_stmt *st = NULL;
  int n = 0;
  if (sqlite3_prepare_v2(c->db, "SELECT COUNT(DISTINCT stage) FROM checkpoints WHERE step = ?", -1,
                         &st, NULL) == SQLITE_OK) {
    sqlite3_bind_int64(st, 1, step);
    if (sqlite3_step(st) == SQLITE_ROW) n = sqlite3_column_int(st, 0);
  }
  sqlite3_finalize(st);
  *complete = n >= c->cfg.run.stages;
  return WT_OK;
}

void coord_state_save_epoch(coordinator *c, const char *plan_json) {
  s_run(c,
        "INSERT OR REPLACE INTO epochs(n, kind, plan, cost_ga_s, cost_random_s, created)"
        " VALUES(?, ?, ?, ?, ?, ?)",
        "ittddd", (long long)c->epoch, c->epoch_kind, plan_json, c->cost_ga, c->cost_random,
        (double)time(NULL));
  coord_state_save_run(c);
}

void coord_state_save_loss(coordinator *c, long step, float loss) {
  s_run(c, "INSERT OR REPLACE INTO losses(step, loss) VALUES(?, ?)", "id", (long long)step,
        (double)loss);
}

/* The loss curve, step by step as the heartbeats brought it; the newest point is also the last
 * step and loss /status shows until the peers report again. */
static void s_load_losses(coordinator *c) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(c->db, "SELECT step, loss FROM losses ORDER BY step", -1, &st, NULL) !=
      SQLITE_OK)
    return;
  while (sqlite3_step(st) == SQLITE_ROW) {
    long step = (long)sqlite3_column_int64(st, 0);
    float loss = (float)sqlite3_column_double(st, 1);
    coord_loss_keep(c, step, loss);
    c->last_step = step, c->last_loss = loss;
  }
  sqlite3_finalize(st);
}

static int s_peer_by_id(coordinator *c, int id) {
  for (int i = 0; i < c->n_peers; i++)
    if (c->peers[i].id == id) return i;
  return -1;
}

/* The probed links among the peers in the table; with key, only those of that peer. */
static void s_load_links(coordinator *c, const char *key) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(c->db,
                         key ? "SELECT a, b, latency_s, bandwidth_Bps FROM links WHERE a = ?1 OR "
                               "b = ?1"
                             : "SELECT a, b, latency_s, bandwidth_Bps FROM links",
                         -1, &st, NULL) != SQLITE_OK)
    return;
  if (key) sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
  while (sqlite3_step(st) == SQLITE_ROW) {
    const char *ka = (const char *)sqlite3_column_text(st, 0),
               *kb = (const char *)sqlite3_column_text(st, 1);
    int a = ka ? coord_peer_find(c, ka) : -1, b = kb ? coord_peer_find(c, kb) : -1;
    if (a < 0 || b < 0) continue;
    coord_link_set(c, a, b, sqlite3_column_double(st, 2), sqlite3_column_double(st, 3));
  }
  sqlite3_finalize(st);
}

void coord_state_save_access(coordinator *c) {
  char text[65536];
  coord_state_meta_get(c, "access", text, sizeof text);
  cJSON *all = cJSON_Parse(text);
  if (!cJSON_IsObject(all)) cJSON_Delete(all), all = cJSON_CreateObject();
  for (int i = 0; i < c->n_peers; i++) {
    const coord_peer *p = &c->peers[i];
    if (!(p->up_Bps > 0)) continue;
    cJSON *row = cJSON_CreateArray();
    const double v[] = {p->up_Bps, p->down_Bps, p->access_link, p->up_ratio, p->down_ratio};
    for (int k = 0; k < 5; k++) cJSON_AddItemToArray(row, cJSON_CreateNumber(v[k]));
    cJSON_DeleteItemFromObjectCaseSensitive(all, p->key);
    cJSON_AddItemToObject(all, p->key, row);
  }
  char *out = cJSON_PrintUnformatted(all);
  if (out && strlen(out) < sizeof text) coord_state_meta_set(c, "access", out);
  free(out);
  cJSON_Delete(all);
}

void coord_state_load_access(coordinator *c, int i) {
  char text[65536];
  if (!coord_state_meta_get(c, "access", text, sizeof text)) return;
  cJSON *all = cJSON_Parse(text);
  for (int k = i < 0 ? 0 : i; k < (i < 0 ? c->n_peers : i + 1); k++) {
    coord_peer *p = &c->peers[k];
    const cJSON *row = cJSON_GetObjectItemCaseSensitive(all, p->key);
    double v[5];
    int ok = cJSON_GetArraySize(row) == 5;
    for (int j = 0; ok && j < 5; j++)
      ok = isfinite(v[j] = cJSON_GetNumberValue(cJSON_GetArrayItem(row, j)));
    if (!ok || !(v[0] > 0 && v[1] > 0)) continue; /* absent or damaged: probed again */
    p->up_Bps = v[0], p->down_Bps = v[1], p->access_link = (int)v[2];
    p->up_ratio = v[3], p->down_ratio = v[4];
  }
  cJSON_Delete(all);
}

void coord_state_load_links(coordinator *c, int i) {
  s_load_links(c, c->peers[i].key);
  coord_state_load_access(c, i);
}

static int s_json_has(const cJSON *run, const char *name, int id) {
  const cJSON *it;
  cJSON_ArrayForEach(it, cJSON_GetObjectItem(run, name)) if (it->valueint == id) return 1;
  return 0;
}

/* The peers the table holds: the live ones and those the run record names (members of the
 * running epoch, world ranks of the last plan). Peers gone for good stay in the database only,
 * where a returning key is found (coord_state_peer_id). Ids go on after the largest seen. */
static void s_load_peers(coordinator *c, const cJSON *run) {
  sqlite3_stmt *st = NULL;
  c->next_peer_id = 1;
  if (sqlite3_prepare_v2(c->db,
                         "SELECT key, id, status, sid, last_seq, region, kind, host, "
                         "flops, memory, gpus FROM peers ORDER BY id",
                         -1, &st, NULL) != SQLITE_OK)
    return;
  while (sqlite3_step(st) == SQLITE_ROW) {
    int id = sqlite3_column_int(st, 1);
    if (id >= c->next_peer_id) c->next_peer_id = id + 1;
    if (c->n_peers == c->cfg.max_peers ||
        (!sqlite3_column_int(st, 2) && !s_json_has(run, "members", id) &&
         !s_json_has(run, "plan", id) && !s_json_has(run, "finished", id)))
      continue;
    coord_peer *p = &c->peers[c->n_peers++];
    memset(p, 0, sizeof *p);
    snprintf(p->key, sizeof p->key, "%s", (const char *)sqlite3_column_text(st, 0));
    p->id = sqlite3_column_int(st, 1);
    p->status = sqlite3_column_int(st, 2) ? PEER_LIVE : PEER_GONE;
    snprintf(p->sid, sizeof p->sid, "%s", (const char *)sqlite3_column_text(st, 3));
    p->last_seq = (uint64_t)sqlite3_column_int64(st, 4);
    snprintf(p->region, sizeof p->region, "%s", (const char *)sqlite3_column_text(st, 5));
    snprintf(p->kind, sizeof p->kind, "%s", (const char *)sqlite3_column_text(st, 6));
    snprintf(p->host, sizeof p->host, "%s", (const char *)sqlite3_column_text(st, 7));
    p->flops = sqlite3_column_double(st, 8);
    p->memory = sqlite3_column_double(st, 9);
    p->gpus = sqlite3_column_int(st, 10);
    if (p->gpus < 1 || p->gpus > 1024) p->gpus = 1; /* a damaged row: one GPU, as registration */
    p->last_seen = wt_now_s(); /* a restarted coordinator gives every peer a full liveness */
    p->epoch_rank = -1;
    char why[256];
    p->region_index = coord_region_index(c, p->region, why, sizeof why);
    p->device_index = -1;
    p->device_index = coord_scenario_device(c, (int)(p - c->peers));
    coord_state_load_trust(c, p);
  }
  sqlite3_finalize(st);
  coord_peers_reindex(c);
  s_load_links(c, NULL);
  coord_state_load_access(c, -1);
}

/* The run's exclusions (trust.c's "excluded:KEY" rows) back into /status's list, in the order
 * they were made; a key the peers table no longer knows is listed with id 0. */
static void s_load_excluded(coordinator *c) {
  sqlite3_stmt *st = NULL;
  if (sqlite3_prepare_v2(c->db,
                         "SELECT substr(key, 10), value FROM meta WHERE key LIKE 'excluded:%' "
                         "ORDER BY rowid",
                         -1, &st, NULL) != SQLITE_OK)
    return;
  while (sqlite3_step(st) == SQLITE_ROW) {
    const char *key = (const char *)sqlite3_column_text(st, 0),
               *why = (const char *)sqlite3_column_text(st, 1);
    int k = c->n_excluded++;
    if (!key || !why || k >= COORD_MAX_EXCLUDED) continue;
    c->excluded_id[k] = coord_state_peer_id(c, key);
    snprintf(c->excluded_key[k], sizeof c->excluded_key[k], "%s", key);
    snprintf(c->excluded_why[k], sizeof c->excluded_why[k], "%s", why);
  }
  sqlite3_finalize(st);
}

static void s_ids_to_peers(coordinator *c, const cJSON *arr, int *out, int *n) {
  *n = 0;
  const cJSON *it;
  cJSON_ArrayForEach(it, arr) {
    int i = s_peer_by_id(c, it->valueint);
    if (i >= 0 && *n < COORD_MAX_MEMBERS) out[(*n)++] = i;
  }
}

static void s_load_outcome(coordinator *c, const cJSON *run) {
  const cJSON *step = cJSON_GetObjectItem(run, "last_step");
  const cJSON *loss = cJSON_GetObjectItem(run, "last_loss");
  if (cJSON_IsNumber(step)) c->last_step = (long)step->valuedouble;
  if (cJSON_IsNumber(loss)) c->last_loss = loss->valuedouble;
  const cJSON *it;
  cJSON_ArrayForEach(it, cJSON_GetObjectItem(run, "finished")) {
    int i = s_peer_by_id(c, it->valueint);
    if (i >= 0) c->peers[i].finished = 1, c->peers[i].status = PEER_GONE;
  }
}

/* The run id: hex text, or a number as older state databases hold it (its low bits lost). */
static uint64_t s_load_run_id(const cJSON *run) {
  const cJSON *id = cJSON_GetObjectItem(run, "run_id");
  if (cJSON_IsString(id)) return (uint64_t)strtoull(id->valuestring, NULL, 16);
  return (uint64_t)cJSON_GetNumberValue(id);
}

int coord_state_load(coordinator *c) {
  char text[16384];
  int have_run = coord_state_meta_get(c, "run", text, sizeof text);
  cJSON *run = have_run ? cJSON_Parse(text) : NULL;
  if (have_run && !run)
    return wt_fail(WT_ECORRUPT,
                   "state database %s/state.db: the run record is not JSON; "
                   "move the state directory away to start a new run",
                   c->dir);
  s_load_peers(c, run);
  s_load_excluded(c);
  s_load_losses(c);
  s_load_events(c);
  if (!have_run) {
    randombytes_buf(&c->run_id, sizeof c->run_id);
    coord_state_save_run(c);
    return WT_OK;
  }
  c->run_id = s_load_run_id(run);
  c->run_complete = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(run, "complete"));
  c->committed_step = (long)cJSON_GetNumberValue(cJSON_GetObjectItem(run, "committed_step"));
  double start = cJSON_GetNumberValue(cJSON_GetObjectItem(run, "start_step"));
  c->start_step = isfinite(start) ? (long)start : c->committed_step;
  c->epoch = (int)cJSON_GetNumberValue(cJSON_GetObjectItem(run, "epoch"));
  const char *kind = cJSON_GetStringValue(cJSON_GetObjectItem(run, "epoch_kind"));
  snprintf(c->epoch_kind, sizeof c->epoch_kind, "%s", kind ? kind : "");
  c->cost_ga = cJSON_GetNumberValue(cJSON_GetObjectItem(run, "cost_ga_s"));
  c->cost_random = cJSON_GetNumberValue(cJSON_GetObjectItem(run, "cost_random_s"));
  c->first_loss = cJSON_GetNumberValue(cJSON_GetObjectItem(run, "first_loss"));
  c->recovery_s = cJSON_GetNumberValue(cJSON_GetObjectItem(run, "recovery_s"));
  s_ids_to_peers(c, cJSON_GetObjectItem(run, "members"), c->members, &c->n_members);
  s_ids_to_peers(c, cJSON_GetObjectItem(run, "plan"), c->plan_members, &c->n_plan);
  s_load_outcome(c, run);
  /* the rings of that plan: the running epoch's members run them, and /status shows them */
  const cJSON *rings = cJSON_GetObjectItem(run, "rings");
  c->n_rings = cJSON_GetArraySize(rings) == c->n_plan ? c->n_plan : 0;
  for (int i = 0; i < c->n_rings; i++) {
    double v = cJSON_GetNumberValue(cJSON_GetArrayItem(rings, i));
    c->rings[i] = v >= 0 && v < c->cfg.run.replicas ? (int)v : 0;
  }
  if (cJSON_GetNumberValue(cJSON_GetObjectItem(run, "running")) == 1 &&
      !strcmp(c->epoch_kind, "train")) {
    /* The members train without us; they report their results to whoever serves now. */
    c->phase = EPOCH_RUNNING;
    for (int r = 0; r < c->n_members; r++) c->peers[c->members[r]].epoch_rank = r;
  } else {
    c->n_members = 0;
  }
  cJSON_Delete(run);
  coord_event(c, "restart",
              "state loaded: run %016llx, epoch %d (%s), %d peers known, "
              "committed step %ld%s",
              (unsigned long long)c->run_id, c->epoch,
              c->phase == EPOCH_RUNNING ? "running" : "idle", c->n_peers, c->committed_step,
              c->run_complete ? ", run complete" : "");
  return WT_OK;
}

/* The loss curve kept in memory for /status (loaded from the losses table, then appended). */
void coord_loss_keep(coordinator *c, long step, float loss) {
  if (c->n_hist == COORD_LOSS_HIST) { /* keep every other point: the curve stays whole */
    for (int i = 0; i < COORD_LOSS_HIST / 2; i++) {
      c->hist_step[i] = c->hist_step[2 * i + 1];
      c->hist_loss[i] = c->hist_loss[2 * i + 1];
    }
    c->n_hist = COORD_LOSS_HIST / 2;
  }
  c->hist_step[c->n_hist] = step;
  c->hist_loss[c->n_hist++] = loss;
}
