/* shards — peerd's checkpoint store (peer/shards.h): the shard server, the reports, the copies
 * the coordinator asks for, and the check-or-fetch before a resume. */
#include "peer/shards.h"

#include "common/common.h"
#include "coordinator/protocol.h"
#include "parallel/transport/shards.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <dirent.h>
#include <unistd.h>

#define S_MAX_HELD 200 /* shards named in one report (64 KiB messages) */
#define S_QUEUE 32      /* copies waiting */
#define S_COPY_TIMEOUT_S 30

typedef struct {
  parallel_shard_id id;
  char digest[65];
  long long sig; /* the files' sizes and modification times when named */
} s_named;

struct peer_shards {
  char root[2048], pub[41], sec[41], coordinator_pub[41];
  parallel_shard_server *server;
  s_named named[S_MAX_HELD];
  int n_named;
  char last[65]; /* digest of the last report's list */
  /* the copy queue and its thread */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  pthread_t thread;
  int stop, n_queue, changed;
  cJSON *queue[S_QUEUE];
  /* the pin the coordinator's last ACK named: what pruning keeps (under mu) */
  uint64_t pin_run;
  long pin_step;
  int pin_keep;
  pthread_mutex_t store_mu; /* held by a copy and by a prune: neither removes the other's files */
};

static long long s_sig(const char *root, const parallel_shard_id *id) {
  char run_dir[2100], path[2400];
  parallel_shard_run_dir(root, id->run, run_dir, sizeof run_dir);
  struct stat st;
  long long sig = 0;
  snprintf(path, sizeof path, "%s/stage-%d/step-%08ld/SHA256SUMS", run_dir, id->stage, id->step);
  if (id->replica == 0 && stat(path, &st) == 0)
    sig += st.st_size + st.st_mtim.tv_nsec + st.st_mtime;
  snprintf(path, sizeof path, "%s/stage-%d/replica-%d-step-%08ld.state", run_dir, id->stage,
           id->replica, id->step);
  if (stat(path, &st) == 0) sig += 3 * (st.st_size + st.st_mtim.tv_nsec + st.st_mtime);
  return sig;
}

/* Prunes the pinned run's shards by parallel_shard_prune's rule, with the store lock held. */
static void s_prune_locked(peer_shards *s) {
  pthread_mutex_lock(&s->mu);
  const uint64_t run = s->pin_run;
  const long step = s->pin_step;
  const int keep = s->pin_keep;
  pthread_mutex_unlock(&s->mu);
  if (!step) return;
  int n = parallel_shard_prune(s->root, run, step, keep);
  if (n)
    WT_INFO("peerd: removed %d checkpoint shard%s older than the pinned step %ld (%d newer kept "
            "of each)",
            n, n == 1 ? "" : "s", step, keep);
}

static int s_parse_id(const cJSON *b, parallel_shard_id *id, const char **digest) {
  const char *run = coordinator_field_str(b, "run");
  *digest = coordinator_field_str(b, "digest");
  *id = (parallel_shard_id){.run = strtoull(run, NULL, 16),
                            .step = coordinator_field_int(b, "step", -1),
                            .stage = coordinator_field_int(b, "stage", -1),
                            .replica = coordinator_field_int(b, "replica", -1)};
  return strlen(run) == 16 && strspn(run, "0123456789abcdef") == 16 && id->step > 0 &&
                 id->stage >= 0 && id->replica >= 0 && strlen(*digest) == 64
             ? WT_OK
             : WT_EINVAL;
}

/* The holders of a REPLICATE or fetch entry, this peer left out; one named with a "relay" is
 * reached through it. */
static int s_holders(const cJSON *list, const char *self, parallel_shard_holder *h, int max) {
  int n = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, list) {
    const char *ep = coordinator_field_str(e, "endpoint"), *key = coordinator_field_str(e, "key");
    const char *relay = coordinator_field_str(e, "relay"),
               *relay_key = coordinator_field_str(e, "relay_key");
    if (n < max && ep[0] && strlen(key) == 40 && strcmp(key, self))
      h[n++] = (parallel_shard_holder){.endpoint = ep,
                                       .public_key = key,
                                       .relay = relay[0] ? relay : NULL,
                                       .relay_key = relay[0] ? relay_key : NULL};
  }
  return n;
}

/* Where a fetch found the shard, for the log: the holder's endpoint, or the relay. */
static const char *s_via(const parallel_shard_holder *h, char *out, size_t cap) {
  if (h->relay)
    snprintf(out, cap, "%s through the shard relay %s", h->endpoint, h->relay);
  else
    snprintf(out, cap, "%s", h->endpoint);
  return out;
}

static void s_copy(peer_shards *s, const cJSON *b) {
  parallel_shard_id id;
  const char *digest;
  parallel_shard_holder h[16];
  if (s_parse_id(b, &id, &digest) != WT_OK) {
    WT_WARN("peerd: dropped a replicate request: no run, step, stage, replica or digest");
    return;
  }
  if (parallel_shard_verify(s->root, &id, digest) == WT_OK) return; /* already held */
  int n = s_holders(cJSON_GetObjectItemCaseSensitive(b, "holders"), s->pub, h, 16), from = -1;
  const char *delay = getenv("WT_TEST_PEERD_COPY_DELAY_S"); /* test-only: copies that lag */
  if (delay && atof(delay) > 0) usleep((useconds_t)(fmin(atof(delay), S_COPY_TIMEOUT_S) * 1e6));
  double t0 = wt_now_s();
  pthread_mutex_lock(&s->store_mu);
  int rc =
      parallel_shard_fetch(s->root, &id, digest, h, n, s->pub, s->sec, S_COPY_TIMEOUT_S, &from);
  pthread_mutex_unlock(&s->store_mu);
  if (rc != WT_OK) {
    WT_WARN("peerd: copy of a checkpoint shard failed: %s", wt_last_error());
    return;
  }
  char via[600];
  WT_INFO("peerd: copied step %ld stage %d replica %d from %s in %.2f s (digest checked)", id.step,
          id.stage, id.replica, s_via(&h[from], via, sizeof via), wt_now_s() - t0);
  pthread_mutex_lock(&s->store_mu);
  s_prune_locked(s);
  pthread_mutex_unlock(&s->store_mu);
}

/* The step a queued replicate request names (-1 when it names none: dropped by s_copy). */
static long s_step_of(const cJSON *b) {
  return coordinator_field_int(b, "step", -1);
}

/* Which queued copy goes next: the newest step's (the first asked among equals). A newer step
 * held k times moves the coordinator's pin forward and lets older steps go; an old step's copy
 * only keeps what the pin already protects, so under lagging copies it waits. */
static int s_next_locked(const peer_shards *s) {
  int best = 0;
  for (int i = 1; i < s->n_queue; i++)
    if (s_step_of(s->queue[i]) > s_step_of(s->queue[best])) best = i;
  return best;
}

/* The oldest step's queued copy (the last asked among equals): the one a full queue gives up. */
static int s_oldest_locked(const peer_shards *s) {
  int worst = 0;
  for (int i = 1; i < s->n_queue; i++)
    if (s_step_of(s->queue[i]) <= s_step_of(s->queue[worst])) worst = i;
  return worst;
}

static void s_dequeue_locked(peer_shards *s, int i) {
  memmove(s->queue + i, s->queue + i + 1, sizeof(cJSON *) * (size_t)(s->n_queue - i - 1));
  s->n_queue--;
}

static void *s_main(void *arg) {
  peer_shards *s = arg;
  pthread_mutex_lock(&s->mu);
  while (!s->stop) {
    if (!s->n_queue) {
      pthread_cond_wait(&s->cv, &s->mu);
      continue;
    }
    const int next = s_next_locked(s);
    cJSON *b = s->queue[next];
    s_dequeue_locked(s, next);
    pthread_mutex_unlock(&s->mu);
    s_copy(s, b);
    cJSON_Delete(b);
    pthread_mutex_lock(&s->mu);
    s->changed = 1;
  }
  pthread_mutex_unlock(&s->mu);
  return NULL;
}

peer_shards *peer_shards_new(const char *data_dir, const char *pub, const char *sec,
                             const char *coordinator_pub) {
  peer_shards *s = wt_xcalloc(1, sizeof *s);
  snprintf(s->root, sizeof s->root, "%s/runs", data_dir);
  snprintf(s->pub, sizeof s->pub, "%s", pub);
  snprintf(s->sec, sizeof s->sec, "%s", sec);
  snprintf(s->coordinator_pub, sizeof s->coordinator_pub, "%s",
           coordinator_pub ? coordinator_pub : "");
  if (mkdir(s->root, 0700) != 0 && errno != EEXIST) {
    wt_fail(WT_EIO, "cannot create %s: %s", s->root, strerror(errno));
    free(s);
    return NULL;
  }
  pthread_mutex_init(&s->mu, NULL);
  pthread_mutex_init(&s->store_mu, NULL);
  pthread_cond_init(&s->cv, NULL);
  pthread_create(&s->thread, NULL, s_main, s);
  return s;
}

void peer_shards_destroy(peer_shards **self_p) {
  peer_shards *s = *self_p;
  if (!s) return;
  pthread_mutex_lock(&s->mu);
  s->stop = 1;
  pthread_cond_signal(&s->cv);
  pthread_mutex_unlock(&s->mu);
  pthread_join(s->thread, NULL); /* a copy in flight ends within its deadline */
  for (int i = 0; i < s->n_queue; i++) cJSON_Delete(s->queue[i]);
  parallel_shard_server_destroy(&s->server);
  pthread_mutex_destroy(&s->mu);
  pthread_mutex_destroy(&s->store_mu);
  pthread_cond_destroy(&s->cv);
  free(s);
  *self_p = NULL;
}

int peer_shards_serve(peer_shards *s, const char *host, const char *relay) {
  if (!s->server) {
    char bind[300];
    snprintf(bind, sizeof bind, "tcp://%.280s:*", host);
    s->server = parallel_shard_server_new(bind, s->root, s->pub, s->sec);
    if (!s->server) return wt_last_status();
    if (s->coordinator_pub[0]) parallel_shard_server_allow(s->server, s->coordinator_pub);
  }
  if (relay && relay[0] &&
      parallel_shard_server_relay(s->server, relay, s->coordinator_pub) != WT_OK)
    WT_WARN("peerd: the coordinator named no usable shard relay (%.100s): %s", relay,
            wt_last_error());
  return WT_OK;
}

const char *peer_shards_root(const peer_shards *s) {
  return s->root;
}

/* The digest of a shard: the cached one while its files are unchanged. */
static int s_digest(peer_shards *s, const parallel_shard_id *id, s_named *old, int n_old,
                    s_named *out) {
  long long sig = s_sig(s->root, id);
  for (int i = 0; i < n_old; i++)
    if (old[i].id.run == id->run && old[i].id.step == id->step && old[i].id.stage == id->stage &&
        old[i].id.replica == id->replica && old[i].sig == sig) {
      *out = old[i];
      return WT_OK;
    }
  out->id = *id, out->sig = sig;
  return parallel_shard_digest(s->root, id, out->digest, NULL);
}

cJSON *peer_shards_report(peer_shards *s, int force) {
  if (!s->server) return NULL; /* the run does not keep its checkpoints on the peers */
  s_named old[S_MAX_HELD];
  int n_old = s->n_named;
  memcpy(old, s->named, sizeof(s_named) * (size_t)n_old);
  s->n_named = 0;
  DIR *d = opendir(s->root);
  for (struct dirent *e; d && (e = readdir(d));) {
    if (strlen(e->d_name) != 16 || strspn(e->d_name, "0123456789abcdef") != 16) continue;
    parallel_shard_id ids[S_MAX_HELD];
    int n = parallel_shard_list(s->root, strtoull(e->d_name, NULL, 16), ids, S_MAX_HELD);
    for (int i = 0; i < n && s->n_named < S_MAX_HELD; i++)
      if (s_digest(s, &ids[i], old, n_old, &s->named[s->n_named]) == WT_OK) s->n_named++;
  }
  if (d) closedir(d);
  cJSON *b = cJSON_CreateObject();
  cJSON_AddStringToObject(b, "endpoint", parallel_shard_server_endpoint(s->server));
  cJSON *held = cJSON_AddArrayToObject(b, "held");
  for (int i = 0; i < s->n_named; i++) {
    const s_named *x = &s->named[i];
    char run[17];
    snprintf(run, sizeof run, "%016llx", (unsigned long long)x->id.run);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "run", run);
    cJSON_AddNumberToObject(o, "step", (double)x->id.step);
    cJSON_AddNumberToObject(o, "stage", x->id.stage);
    cJSON_AddNumberToObject(o, "replica", x->id.replica);
    cJSON_AddStringToObject(o, "digest", x->digest);
    cJSON_AddItemToArray(held, o);
  }
  char *text = cJSON_PrintUnformatted(held), hex[65];
  unsigned long long h = 1469598103934665603ull; /* FNV-1a: a change detector, not a digest */
  for (const char *p = text; *p; p++) h = (h ^ (unsigned char)*p) * 1099511628211ull;
  snprintf(hex, sizeof hex, "%016llx", h);
  free(text);
  if (!force && !strcmp(hex, s->last)) {
    cJSON_Delete(b);
    return NULL;
  }
  snprintf(s->last, sizeof s->last, "%s", hex);
  return b;
}

void peer_shards_on_replicate(peer_shards *s, const cJSON *body) {
  if (!s->server) return;
  pthread_mutex_lock(&s->mu);
  if (s->n_queue == S_QUEUE) {
    const int oldest = s_oldest_locked(s);
    if (s_step_of(s->queue[oldest]) >= s_step_of(body)) {
      pthread_mutex_unlock(&s->mu);
      WT_WARN("peerd: dropped a replicate request for step %ld: %d copies of newer steps are "
              "waiting already",
              s_step_of(body), S_QUEUE);
      return;
    }
    WT_WARN("peerd: dropped the replicate request for step %ld: %d copies are waiting, and "
            "step %ld is newer",
            s_step_of(s->queue[oldest]), S_QUEUE, s_step_of(body));
    cJSON_Delete(s->queue[oldest]);
    s_dequeue_locked(s, oldest);
  }
  s->queue[s->n_queue++] = cJSON_Duplicate(body, 1);
  pthread_cond_signal(&s->cv);
  pthread_mutex_unlock(&s->mu);
}

void peer_shards_on_pin(peer_shards *s, const cJSON *pinned) {
  if (!s->server || !cJSON_IsObject(pinned)) return;
  const char *run = coordinator_field_str(pinned, "run");
  const long step = coordinator_field_int(pinned, "step", -1);
  const int keep = coordinator_field_int(pinned, "keep", -1);
  if (strlen(run) != 16 || strspn(run, "0123456789abcdef") != 16 || step < 0 || keep < 1) {
    WT_WARN("peerd: dropped a pinned step from the coordinator: no run, step or keep");
    return;
  }
  pthread_mutex_lock(&s->mu);
  s->pin_run = strtoull(run, NULL, 16), s->pin_step = step, s->pin_keep = keep;
  pthread_mutex_unlock(&s->mu);
  /* a copy in flight holds the store: this prune waits for the next ACK, the loop never blocks */
  if (pthread_mutex_trylock(&s->store_mu) != 0) return;
  s_prune_locked(s);
  pthread_mutex_unlock(&s->store_mu);
}

void peer_shards_on_allow(peer_shards *s, const cJSON *keys) {
  if (!s->server) return;
  const cJSON *k;
  cJSON_ArrayForEach(k, keys) {
    if (cJSON_IsString(k)) parallel_shard_server_allow(s->server, k->valuestring);
  }
}

int peer_shards_prepare(const char *root, uint64_t run, const cJSON *fetch, const char *pub,
                        const char *sec, double timeout_s) {
  const cJSON *e;
  cJSON_ArrayForEach(e, fetch) {
    parallel_shard_id id;
    const char *digest;
    char runhex[17];
    snprintf(runhex, sizeof runhex, "%016llx", (unsigned long long)run);
    cJSON *x = cJSON_Duplicate(e, 1);
    cJSON_AddStringToObject(x, "run", runhex);
    int rc = s_parse_id(x, &id, &digest);
    if (rc != WT_OK) {
      cJSON_Delete(x);
      return wt_fail(WT_EINVAL, "the coordinator sent an impossible shard to fetch");
    }
    if (parallel_shard_verify(root, &id, digest) == WT_OK) {
      WT_INFO("peerd: step %ld stage %d replica %d is here, digest checked", id.step, id.stage,
              id.replica);
      cJSON_Delete(x);
      continue;
    }
    /* a damaged copy is of no use to anyone: gone from the store, it is gone from the next
     * report too, so the coordinator stops naming this peer as its holder */
    if (wt_last_status() == WT_ECORRUPT)
      WT_WARN("peerd: refused the local copy of step %ld stage %d replica %d: %s; removed it",
              id.step, id.stage, id.replica, wt_last_error());
    parallel_shard_remove(root, &id);
    parallel_shard_holder h[16];
    int n = s_holders(cJSON_GetObjectItemCaseSensitive(x, "holders"), pub, h, 16), from = -1;
    double t0 = wt_now_s();
    rc = parallel_shard_fetch(root, &id, digest, h, n, pub, sec, timeout_s, &from);
    char via[600];
    if (rc == WT_OK)
      WT_INFO("peerd: fetched step %ld stage %d replica %d from %s in %.2f s, digest checked",
              id.step, id.stage, id.replica, s_via(&h[from], via, sizeof via), wt_now_s() - t0);
    cJSON_Delete(x);
    if (rc != WT_OK) return rc;
  }
  return WT_OK;
}
