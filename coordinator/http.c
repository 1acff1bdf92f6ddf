/* http — the status server: libmicrohttpd on its own thread, routing GET /, /status and
 * /metrics to the page, the caller's snapshot and its Prometheus rendering. */
#include "coordinator/http.h"

#include "common/common.h"
#include "coordinator/http_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

/* Limits on what a client can make the server hold: a request's headers must fit in the
 * per-connection memory (larger ones get 431 from libmicrohttpd), idle connections are closed,
 * and the number of connections is capped so a flood cannot exhaust descriptors.
 *
 * A held connection costs one descriptor and S_CONN_MEMORY, nothing else: one thread polls them
 * all with epoll (poll where there is none; never select, which stops at FD_SETSIZE), so slow or
 * idle clients delay no one else's reply. What they can take is the connection limit: once it
 * is reached libmicrohttpd stops accepting and new clients wait in the listen queue. So the
 * limit is high, S_CONN_MAX or half of this process's descriptors, whichever is lower, and one
 * address may hold at most half of it: one client cannot lock out the others, and a client that
 * holds a few hundred connections from the operator's own address leaves room for its request. */
#define S_CONN_MEMORY (32 * 1024)
#define S_CONN_TIMEOUT_S 10
#define S_CONN_MAX 1024

struct coordinator_http {
  struct MHD_Daemon *daemon;
  coordinator_http_status_fn status;
  void *arg;
  pthread_mutex_t *lock;
  int port;
  coordinator_http_cache *cache; /* the texts served (http_cache.c) */
};

static void s_mhd_log(void *cls, const char *fmt, va_list ap) {
  (void)cls;
  if (!wt_log_enabled(WT_LOG_DEBUG)) return;
  char msg[512];
  vsnprintf(msg, sizeof msg, fmt, ap);
  msg[strcspn(msg, "\n")] = '\0';
  WT_DEBUG("http: %s", msg);
}

/* A copy of `s` (allocated with cJSON_malloc) with each byte that starts no well-formed UTF-8
 * sequence replaced by U+FFFD, or NULL when `s` is well-formed already. */
static char *s_utf8_repaired(const char *s) {
  size_t n = strlen(s), i = 0, len = 0;
  while (i < n && (len = wt_utf8_seq(s + i, n - i))) i += len;
  if (i == n) return NULL;
  char *out = cJSON_malloc(3 * n + 1), *o = out;
  if (!out) return NULL;
  for (i = 0; i < n; i += len ? len : 1) {
    len = wt_utf8_seq(s + i, n - i);
    memcpy(o, len ? s + i : "\xEF\xBF\xBD", len ? len : 3);
    o += len ? len : 3;
  }
  *o = '\0';
  return out;
}

void coordinator_http_utf8_repair(cJSON *item) {
  for (; item; item = item->next) {
    char *fixed;
    if (item->string && !(item->type & cJSON_StringIsConst) &&
        (fixed = s_utf8_repaired(item->string))) {
      cJSON_free(item->string);
      item->string = fixed;
    }
    if (cJSON_IsString(item) && !(item->type & cJSON_IsReference) && item->valuestring &&
        (fixed = s_utf8_repaired(item->valuestring))) {
      cJSON_free(item->valuestring);
      item->valuestring = fixed;
    }
    coordinator_http_utf8_repair(item->child);
  }
}

static cJSON *s_snapshot(void *arg) {
  coordinator_http *self = arg;
  if (self->lock) pthread_mutex_lock(self->lock);
  cJSON *st = self->status(self->arg);
  if (self->lock) pthread_mutex_unlock(self->lock);
  /* JSON and the exposition format are UTF-8, whatever bytes the caller's strings hold. */
  if (st) coordinator_http_utf8_repair(st);
  return st;
}

/* Queues `body` (freed by `free_fn` after sending, or static when free_fn is NULL). */
static enum MHD_Result s_reply(struct MHD_Connection *c, unsigned code, const char *type,
                               char *body, void (*free_fn)(void *)) {
  struct MHD_Response *r =
      free_fn ? MHD_create_response_from_buffer_with_free_callback(strlen(body), body, free_fn)
              : MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_PERSISTENT);
  if (!r) {
    if (free_fn) free_fn(body);
    return MHD_NO;
  }
  MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
  MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
  MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
  if (code == MHD_HTTP_METHOD_NOT_ALLOWED)
    MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
  if (strncmp(type, "text/html", 9) == 0)
    MHD_add_response_header(r, "Content-Security-Policy",
                            "default-src 'none'; script-src 'unsafe-inline'; "
                            "style-src 'unsafe-inline'; connect-src 'self'");
  enum MHD_Result ok = MHD_queue_response(c, code, r);
  MHD_destroy_response(r);
  return ok;
}

static enum MHD_Result s_plain(struct MHD_Connection *c, unsigned code, const char *msg) {
  return s_reply(c, code, "text/plain; charset=utf-8", (char *)msg, NULL);
}

/* /status or /metrics from the cache; a missing text answers with the cache's code. */
static enum MHD_Result s_serve_cached(coordinator_http *self, struct MHD_Connection *c,
                                      int metrics) {
  unsigned code = 0;
  char *text = coordinator_http_cache_get(self->cache, metrics, &code);
  if (!text)
    return s_plain(c,
                   code == MHD_HTTP_SERVICE_UNAVAILABLE ? MHD_HTTP_SERVICE_UNAVAILABLE
                                                        : MHD_HTTP_INTERNAL_SERVER_ERROR,
                   code == MHD_HTTP_SERVICE_UNAVAILABLE ? "no status available yet\n"
                                                        : "status snapshot is not an object\n");
  return s_reply(c, MHD_HTTP_OK,
                 metrics ? "text/plain; version=0.0.4; charset=utf-8" : "application/json", text,
                 free);
}

static enum MHD_Result s_handle(void *cls, struct MHD_Connection *c, const char *url,
                                const char *method, const char *version, const char *upload,
                                size_t *upload_size, void **req_state) {
  (void)version, (void)upload, (void)upload_size, (void)req_state;
  coordinator_http *self = cls;
  /* Answering on the first call means a request body is never read: the server only serves
   * reads, and libmicrohttpd closes the connection after replying to one that sent a body. */
  if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
    return s_plain(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD are served\n");
  if (strcmp(url, "/status") == 0) return s_serve_cached(self, c, 0);
  if (strcmp(url, "/metrics") == 0) return s_serve_cached(self, c, 1);
  if (strcmp(url, "/") == 0)
    return s_reply(c, MHD_HTTP_OK, "text/html; charset=utf-8", (char *)coordinator_http_page, NULL);
  return s_plain(c, MHD_HTTP_NOT_FOUND, "not found: the server has /, /status and /metrics\n");
}

/* The connection limit: S_CONN_MAX, or half of the descriptors this process may open. */
static unsigned s_conn_max(void) {
  struct rlimit r;
  if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur == RLIM_INFINITY) return S_CONN_MAX;
  return (unsigned)WT_MAX(16, WT_MIN((rlim_t)S_CONN_MAX, r.rlim_cur / 2));
}

/* Fills `addr` from a numeric address; returns its length, or 0 when it is not one. */
static socklen_t s_address(const char *bind, int port, struct sockaddr_storage *addr) {
  memset(addr, 0, sizeof *addr);
  struct sockaddr_in *v4 = (struct sockaddr_in *)addr;
  struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)addr;
  if (inet_pton(AF_INET, bind, &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons((uint16_t)port);
    return sizeof *v4;
  }
  if (inet_pton(AF_INET6, bind, &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons((uint16_t)port);
    return sizeof *v6;
  }
  return 0;
}

coordinator_http *coordinator_http_new(const coordinator_http_opts *opts) {
  if (!opts || !opts->status) {
    wt_fail(WT_EINVAL, "coordinator_http_new: no status callback given");
    return NULL;
  }
  const char *bind = opts->bind ? opts->bind : "127.0.0.1";
  if (opts->port < 0 || opts->port > 65535) {
    wt_fail(WT_EINVAL, "HTTP port %d is out of range; give 1..65535, or 0 for any free port",
            opts->port);
    return NULL;
  }
  struct sockaddr_storage addr;
  if (!s_address(bind, opts->port, &addr)) {
    wt_fail(WT_EINVAL,
            "HTTP bind address '%s' is not a numeric IP address; give one such as "
            "127.0.0.1 (this machine only) or 0.0.0.0 (all interfaces)",
            bind);
    return NULL;
  }
  coordinator_http *self = wt_xcalloc(1, sizeof *self);
  self->status = opts->status;
  self->arg = opts->arg;
  self->lock = opts->lock;
  self->cache = coordinator_http_cache_new(opts->refresh_s, s_snapshot, self);
  unsigned flags = MHD_USE_ERROR_LOG;
  flags |= MHD_is_feature_supported(MHD_FEATURE_EPOLL) ? MHD_USE_EPOLL_INTERNAL_THREAD
                                                       : MHD_USE_POLL_INTERNAL_THREAD;
  if (addr.ss_family == AF_INET6) flags |= MHD_USE_IPv6;
  const unsigned conn_max = s_conn_max();
  errno = 0;
  self->daemon = MHD_start_daemon(
      flags, (uint16_t)opts->port, NULL, NULL, s_handle, self, MHD_OPTION_SOCK_ADDR,
      (struct sockaddr *)&addr, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)S_CONN_MEMORY,
      MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)S_CONN_TIMEOUT_S, MHD_OPTION_CONNECTION_LIMIT,
      conn_max, MHD_OPTION_PER_IP_CONNECTION_LIMIT, conn_max / 2, MHD_OPTION_LISTEN_BACKLOG_SIZE,
      conn_max, MHD_OPTION_EXTERNAL_LOGGER, s_mhd_log, NULL, MHD_OPTION_END);
  if (!self->daemon) {
    wt_fail(WT_EIO, "cannot serve HTTP on %s port %d: %s; pick another port (0 = any free one)",
            bind, opts->port, errno ? strerror(errno) : "libmicrohttpd refused to start");
    coordinator_http_cache_destroy(&self->cache);
    free(self);
    return NULL;
  }
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(self->daemon, MHD_DAEMON_INFO_BIND_PORT);
  self->port = info ? info->port : opts->port;
  return self;
}

int coordinator_http_port(const coordinator_http *self) {
  return self->port;
}

void coordinator_http_destroy(coordinator_http **self_p) {
  if (!self_p || !*self_p) return;
  coordinator_http *self = *self_p;
  MHD_stop_daemon(self->daemon);
  coordinator_http_cache_destroy(&self->cache);
  free(self);
  *self_p = NULL;
}
