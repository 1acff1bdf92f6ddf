/* store — the coordinator's own copy of every committed shard (--checkpoint-store DIR, with
 * --checkpoint-storage peers): the operator's one place that holds the whole run, laid out as
 * the peers' stores are (parallel/transport/shards.h: DIR/<run>/stage-<s>/...). holders.c offers
 * each committed shard once its writer reported it; a thread of this file fetches it from the
 * live holders as any peer would (the coordinator's CURVE key, which every peer's shard server
 * allows; digest checked) so that the loop never waits on a transfer; the loop collects what
 * landed, records it in state.db (it is not offered again, also after a restart) and logs it. */
#include "coordinator/coordinator_internal.h"

#include "common/common.h"
#include "parallel/transport/shard_relay.h" /* defines: the relay's endpoint, for NATed holders */
#include "parallel/transport/shards.h"

#include <errno.h>
#include <sodium.h> /* defines: sodium_memzero for the key copy */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define S_JOBS 64
#define S_FETCH_TIMEOUT_S 10 /* per holder */

typedef struct {
  parallel_shard_id id;
  char digest[65];
  int n;
  char endpoint[COORD_STORE_HOLDERS][256], key[COORD_STORE_HOLDERS][COORD_KEY_LEN + 1];
  /* the shard relay for a holder behind NAT, else "" */
  char relay[COORD_STORE_HOLDERS][256];
  int rc;        /* done: the fetch's status */
  double s;      /* done: how long it took */
  char why[512]; /* done, failed: the fetch's message */
} s_job;

typedef struct coord_store coord_store;
struct coord_store {
  char root[WT_CONFIG_STR_MAX], pub[COORD_KEY_LEN + 1], sec[COORD_KEY_LEN + 1];
  pthread_t thread;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int stop;
  s_job queue[S_JOBS], done[S_JOBS];
  int n_queue, n_done;
  int busy;                   /* a fetch is in flight ... */
  parallel_shard_id inflight; /* ... of this shard */
};

static const char *s_schema = "CREATE TABLE IF NOT EXISTS shard_stored(step INTEGER, stage INTEGER,"
                              " replica INTEGER, digest TEXT, PRIMARY KEY(step, stage, replica));";

static void s_fetch(coord_store *st, s_job *j) {
  parallel_shard_holder h[COORD_STORE_HOLDERS];
  for (int i = 0; i < j->n; i++)
    h[i] = (parallel_shard_holder){.endpoint = j->endpoint[i],
                                   .public_key = j->key[i],
                                   .relay = j->relay[i][0] ? j->relay[i] : NULL,
                                   .relay_key = st->pub};
  double t0 = wt_now_s();
  j->rc = parallel_shard_fetch(st->root, &j->id, j->digest, h, j->n, st->pub, st->sec,
                               S_FETCH_TIMEOUT_S, NULL);
  j->s = wt_now_s() - t0;
  snprintf(j->why, sizeof j->why, "%s", j->rc == WT_OK ? "" : wt_last_error());
}

static void *s_main(void *arg) {
  coord_store *st = arg;
  pthread_mutex_lock(&st->mu);
  while (!st->stop) {
    if (!st->n_queue || st->n_done == S_JOBS) {
      pthread_cond_wait(&st->cv, &st->mu);
      continue;
    }
    s_job j = st->queue[0];
    memmove(st->queue, st->queue + 1, sizeof(s_job) * (size_t)--st->n_queue);
    st->busy = 1, st->inflight = j.id;
    pthread_mutex_unlock(&st->mu);
    s_fetch(st, &j);
    pthread_mutex_lock(&st->mu);
    st->busy = 0;
    st->done[st->n_done++] = j;
  }
  pthread_mutex_unlock(&st->mu);
  return NULL;
}

int coord_store_start(coordinator *c) {
  if (!c->cfg.checkpoint_store[0]) return WT_OK;
  if (mkdir(c->cfg.checkpoint_store, 0755) != 0 && errno != EEXIST)
    return wt_fail(WT_EIO, "--checkpoint-store %s: cannot create it: %s", c->cfg.checkpoint_store,
                   strerror(errno));
  char *err = NULL;
  if (sqlite3_exec(c->db, s_schema, NULL, NULL, &err) != SQLITE_OK) {
    int rc = wt_fail(WT_EIO, "state database %s/state.db: %s", c->dir, err ? err : "?");
    sqlite3_free(err);
    return rc;
  }
  coord_store *st = wt_xcalloc(1, sizeof *st);
  snprintf(st->root, sizeof st->root, "%s", c->cfg.checkpoint_store);
  memcpy(st->pub, c->pub, sizeof st->pub);
  memcpy(st->sec, c->sec, sizeof st->sec);
  pthread_mutex_init(&st->mu, NULL);
  pthread_cond_init(&st->cv, NULL);
  if (pthread_create(&st->thread, NULL, s_main, st) != 0) {
    free(st);
    return wt_fail(WT_EIO, "--checkpoint-store: cannot start its thread");
  }
  c->store = st;
  return WT_OK;
}

void coord_store_stop(coordinator *c) {
  coord_store *st = c->store;
  if (!st) return;
  pthread_mutex_lock(&st->mu);
  st->stop = 1;
  pthread_cond_signal(&st->cv);
  pthread_mutex_unlock(&st->mu);
  pthread_join(st->thread, NULL); /* a fetch in flight ends within its deadline */
  sodium_memzero(st->sec, sizeof st->sec);
  pthread_mutex_destroy(&st->mu);
  pthread_cond_destroy(&st->cv);
  free(st);
  c->store = NULL;
}

static int s_stored(coordinator *c, const parallel_shard_id *id) {
  sqlite3_stmt *q = NULL;
  sqlite3_prepare_v2(c->db,
                     "SELECT 1 FROM shard_stored WHERE step = ? AND stage = ? AND replica = ?", -1,
                     &q, NULL);
  sqlite3_bind_int64(q, 1, id->step), sqlite3_bind_int(q, 2, id->stage);
  sqlite3_bind_int(q, 3, id->replica);
  int found = sqlite3_step(q) == SQLITE_ROW;
  sqlite3_finalize(q);
  return found;
}

static int s_same(const parallel_shard_id *a, const parallel_shard_id *b) {
  return a->step == b->step && a->stage == b->stage && a->replica == b->replica;
}

/* Queued, in flight, or fetched and not yet collected. */
static int s_queued(const coord_store *st, const parallel_shard_id *id) {
  int found = st->busy && s_same(&st->inflight, id);
  for (int i = 0; i < st->n_queue && !found; i++) found = s_same(&st->queue[i].id, id);
  for (int i = 0; i < st->n_done && !found; i++) found = s_same(&st->done[i].id, id);
  return found;
}

void coord_store_offer(coordinator *c, long step, int stage, int replica, const char *digest,
                       coord_peer **holders, char (*endpoint)[256], int n) {
  coord_store *st = c->store;
  if (!st || n < 1) return;
  parallel_shard_id id = {
      .run = c->run_id & 0xFFFFFFFFFFFFull, .step = step, .stage = stage, .replica = replica};
  if (s_stored(c, &id)) return;
  pthread_mutex_lock(&st->mu);
  if (!s_queued(st, &id) && st->n_queue < S_JOBS) {
    s_job *j = &st->queue[st->n_queue++];
    memset(j, 0, sizeof *j);
    j->id = id;
    snprintf(j->digest, sizeof j->digest, "%s", digest);
    for (int i = 0; i < n && i < COORD_STORE_HOLDERS; i++, j->n++) {
      snprintf(j->endpoint[i], sizeof j->endpoint[i], "%s", endpoint[i]);
      snprintf(j->key[i], sizeof j->key[i], "%s", holders[i]->key);
      if (c->shard_relay && !coord_reachable(holders[i]))
        snprintf(j->relay[i], sizeof j->relay[i], "%s",
                 parallel_shard_relay_endpoint(c->shard_relay));
    }
    pthread_cond_signal(&st->cv);
  }
  pthread_mutex_unlock(&st->mu);
}

void coord_store_collect(coordinator *c) {
  coord_store *st = c->store;
  if (!st) return;
  s_job done[S_JOBS];
  pthread_mutex_lock(&st->mu);
  int n = st->n_done;
  memcpy(done, st->done, sizeof(s_job) * (size_t)n);
  st->n_done = 0;
  pthread_cond_signal(&st->cv);
  pthread_mutex_unlock(&st->mu);
  for (int i = 0; i < n; i++) {
    const s_job *j = &done[i];
    if (j->rc != WT_OK) { /* offered again at the next check, while holders live */
      WT_WARN("coordinator: --checkpoint-store: %s", j->why);
      continue;
    }
    sqlite3_stmt *q = NULL;
    sqlite3_prepare_v2(c->db,
                       "INSERT OR REPLACE INTO shard_stored(step, stage, replica, digest) "
                       "VALUES(?, ?, ?, ?)",
                       -1, &q, NULL);
    sqlite3_bind_int64(q, 1, j->id.step), sqlite3_bind_int(q, 2, j->id.stage);
    sqlite3_bind_int(q, 3, j->id.replica);
    sqlite3_bind_text(q, 4, j->digest, -1, SQLITE_TRANSIENT);
    sqlite3_step(q);
    sqlite3_finalize(q);
    coord_event(c, "checkpoint",
                "stored step %ld stage %d replica %d in %s (%.2f s, digest checked)", j->id.step,
                j->id.stage, j->id.replica, st->root, j->s);
  }
}

int coord_store_busy(coordinator *c) {
  coord_store *st = c->store;
  if (!st) return 0;
  pthread_mutex_lock(&st->mu);
  int busy = st->busy || st->n_queue > 0 || st->n_done > 0;
  pthread_mutex_unlock(&st->mu);
  return busy;
}
