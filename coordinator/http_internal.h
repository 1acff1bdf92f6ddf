/* http_internal — what the status server's files share: the dashboard page, generated at build
 * time from coordinator/dashboard.html by cmake/embed.cmake, and the cache of the served texts
 * (http_cache.c). */
#ifndef WT_COORDINATOR_HTTP_INTERNAL_H
#define WT_COORDINATOR_HTTP_INTERNAL_H

/* The page served at `/`, NUL-terminated. */
extern const char coordinator_http_page[];

#include <cjson/cJSON.h>

/* The texts of /status and /metrics from a recent snapshot (http_cache.c says how recent).
 * build returns a new snapshot (UTF-8 repaired) or NULL; it runs on the refresher's thread or a
 * request's. new never fails (without a thread, every get builds); destroy joins the thread and
 * sets *self_p = NULL. get returns a copy the caller frees with free(), or NULL with *code the
 * HTTP status to answer (503: no snapshot, 500: not an object); *code is 200 with a text. */
typedef struct coordinator_http_cache coordinator_http_cache;
typedef cJSON *(*coordinator_http_snapshot_fn)(void *arg);
coordinator_http_cache *coordinator_http_cache_new(double refresh_s,
                                                   coordinator_http_snapshot_fn build, void *arg);
char *coordinator_http_cache_get(coordinator_http_cache *self, int metrics, unsigned *code);
void coordinator_http_cache_destroy(coordinator_http_cache **self_p);

#endif
