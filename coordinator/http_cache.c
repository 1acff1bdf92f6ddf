/* http_cache — the status server's texts of /status and /metrics, built off the request path.
 *
 * Building a snapshot takes the caller's lock (the coordinator's loop holds it while it handles
 * messages) and printing a thousand peers' snapshot takes milliseconds more, so a request that
 * builds its own waits behind the loop and competes with it for the cores. Here a request is
 * served the texts of the newest snapshot when it is at most 2 × refresh_s old (or older while
 * the refresher is building the next: on a loaded machine a second build would only queue
 * behind the first), and asks a refresher thread for a new one; the refresher builds at most one
 * per refresh_s, and only while requests ask (an idle server builds nothing). A request that finds
 * no snapshot that young (the first, or the first after a quiet spell) builds one itself, so a
 * single look is always fresh. With refresh_s = 0 every request builds its own. */
#include "coordinator/http_internal.h"

#include "common/common.h"
#include "coordinator/http.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct coordinator_http_cache {
  double refresh_s;
  coordinator_http_snapshot_fn build;
  void *arg;
  pthread_mutex_t mu; /* guards the texts and the flags below */
  pthread_cond_t wake;
  char *status_text, *metrics_text; /* NULL: the snapshot had none (codes say why) */
  unsigned status_code, metrics_code;
  double built_at; /* wt_now_s() when the newest snapshot's build returned; 0 = none */
  int wanted, stop;
  int building; /* the refresher is building one: a request takes the newest rather than wait */
  pthread_t refresher;
  int has_refresher;
};

/* Builds a snapshot and its two texts, then swaps them in unless a newer one is there: what is
 * served never goes back in time. */
static void s_rebuild(coordinator_http_cache *self) {
  cJSON *st = self->build(self->arg);
  /* builds take the caller's lock one at a time, so they return in the order they read */
  double t = wt_now_s();
  char *status = NULL, *metrics = NULL;
  unsigned status_code = 503, metrics_code = 503; /* no status available yet */
  if (st && cJSON_IsObject(st)) {
    status = cJSON_PrintUnformatted(st);
    metrics = coordinator_http_metrics_render(st);
    status_code = status ? 200 : 500, metrics_code = metrics ? 200 : 500;
  } else if (st) {
    status_code = metrics_code = 500; /* not an object */
  }
  cJSON_Delete(st);
  pthread_mutex_lock(&self->mu);
  if (t < self->built_at) { /* a request's build, taken later, finished first: it stays */
    pthread_mutex_unlock(&self->mu);
    cJSON_free(status);
    free(metrics);
    return;
  }
  cJSON_free(self->status_text);
  free(self->metrics_text);
  self->status_text = status, self->metrics_text = metrics;
  self->status_code = status_code, self->metrics_code = metrics_code;
  self->built_at = t;
  pthread_mutex_unlock(&self->mu);
}

static void *s_refresher(void *arg) {
  coordinator_http_cache *self = arg;
  pthread_mutex_lock(&self->mu);
  while (!self->stop) {
    if (!self->wanted) {
      pthread_cond_wait(&self->wake, &self->mu);
      continue;
    }
    self->wanted = 0, self->building = 1;
    pthread_mutex_unlock(&self->mu);
    s_rebuild(self);
    pthread_mutex_lock(&self->mu);
    self->building = 0;
    pthread_mutex_unlock(&self->mu);
    struct timespec pause = {.tv_sec = (time_t)self->refresh_s,
                             .tv_nsec = (long)((self->refresh_s - (time_t)self->refresh_s) * 1e9)};
    nanosleep(&pause, NULL); /* at most one snapshot per refresh_s */
    pthread_mutex_lock(&self->mu);
  }
  pthread_mutex_unlock(&self->mu);
  return NULL;
}

coordinator_http_cache *coordinator_http_cache_new(double refresh_s,
                                                   coordinator_http_snapshot_fn build, void *arg) {
  coordinator_http_cache *self = wt_xcalloc(1, sizeof *self);
  self->refresh_s = refresh_s > 0 ? refresh_s : 0;
  self->build = build, self->arg = arg;
  pthread_mutex_init(&self->mu, NULL);
  pthread_cond_init(&self->wake, NULL);
  /* without a refresher every request builds its own, which is still correct */
  if (self->refresh_s > 0)
    self->has_refresher = pthread_create(&self->refresher, NULL, s_refresher, self) == 0;
  return self;
}

/* A copy of the cached text, or NULL with its code; the caller holds self->mu. */
static char *s_copy(coordinator_http_cache *self, int metrics, unsigned *code) {
  const char *text = metrics ? self->metrics_text : self->status_text;
  *code = metrics ? self->metrics_code : self->status_code;
  return text ? wt_xstrdup(text) : NULL;
}

char *coordinator_http_cache_get(coordinator_http_cache *self, int metrics, unsigned *code) {
  pthread_mutex_lock(&self->mu);
  const int young = self->has_refresher && self->built_at > 0 &&
                    (wt_now_s() - self->built_at <= 2 * self->refresh_s || self->building);
  if (young) {
    char *text = s_copy(self, metrics, code);
    self->wanted = 1;
    pthread_cond_signal(&self->wake);
    pthread_mutex_unlock(&self->mu);
    return text;
  }
  pthread_mutex_unlock(&self->mu);
  s_rebuild(self);
  pthread_mutex_lock(&self->mu);
  char *text = s_copy(self, metrics, code);
  pthread_mutex_unlock(&self->mu);
  return text;
}

void coordinator_http_cache_destroy(coordinator_http_cache **self_p) {
  if (!self_p || !*self_p) return;
  coordinator_http_cache *self = *self_p;
  if (self->has_refresher) {
    pthread_mutex_lock(&self->mu);
    self->stop = 1;
    pthread_cond_signal(&self->wake);
    pthread_mutex_unlock(&self->mu);
    pthread_join(self->refresher, NULL);
  }
  cJSON_free(self->status_text);
  free(self->metrics_text);
  pthread_cond_destroy(&self->wake);
  pthread_mutex_destroy(&self->mu);
  free(self);
  *self_p = NULL;
}
