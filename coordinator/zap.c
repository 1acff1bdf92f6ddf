/* zap — the coordinator's ZAP handler and connection caps. Any CURVE client may connect: the
 * daemon admits by join token. What one sender could still do is hold connections until the
 * process runs out of file descriptors, when ZeroMQ's accept fails and spins and neither the
 * status page nor a peer with a token gets in. So the handler counts the control socket's open
 * connections per source address (ACCEPTED / DISCONNECTED from its monitor) and refuses the
 * handshake of one over max_connections, or over max_per_source from its address unless the
 * state database knows its key (an admitted peer reconnecting). ZeroMQ closes a refused
 * connection and a ZeroMQ client does not retry it (status 400); a connection that never completes
 * its handshake is closed after ZMQ_HANDSHAKE_IVL (daemon.c). The same monitor reports the
 * handshakes that fail — a peer given the wrong --coordinator-key fails CURVE's — and those cut
 * before they finish, which are counted for /status and /metrics and logged at most once per
 * 10 s. */
#include "coordinator/coordinator_internal.h"

#include "common/common.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <zmq.h>

#define S_MONITOR "inproc://wantrain.coordinator.monitor"
#define S_FD_RESERVE                                                                               \
  128 /* descriptors beside the control connections: database, status server                       \
         (64 connections at most), ZeroMQ's own, logs */
#define S_FD_MAX (1 << 20)
#define S_NOT_OPEN -1  /* fd_source: no control connection on that descriptor */
#define S_NO_SOURCE -2 /* fd_source: one, counted in the total only (the source table is full) */

typedef struct {
  char addr[INET6_ADDRSTRLEN];
  int n; /* open connections; 0 = a free entry */
} s_source;

struct coord_zap {
  void *rep, *monitor;
  sqlite3 *db; /* the handler's own read-only connection: is a key known? */
  int max_total, max_source;
  int total;
  s_source *sources; /* max_total + S_FD_RESERVE entries: no more can be open */
  int n_sources;
  int *fd_source; /* by descriptor: its entry in sources, S_NOT_OPEN or S_NO_SOURCE */
  int fd_cap;
  uint64_t refused;
  /* CURVE handshakes that failed (a client with the wrong server key, garbage) and that this
   * handler refused; written here, read by the status under the daemon's lock */
  _Atomic uint64_t handshakes_failed, handshakes_refused, handshakes_cut;
  double failed_log_t, cut_log_t; /* when one of each was last logged */
};

#define S_FAILED_LOG_S 10 /* one line per window about failed handshakes */

/* The open-file limit must hold max_connections and the rest of the process: raise the soft
 * limit as far as the hard one allows, then lower max_connections to what fits. */
static int s_fd_budget(coordinator *c, int *fd_cap) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return wt_fail(WT_EIO, "cannot read the open-file limit");
  rlim_t want = (rlim_t)c->cfg.max_connections + S_FD_RESERVE;
  if (rl.rlim_cur < want) {
    struct rlimit up = rl;
    up.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
    if (setrlimit(RLIMIT_NOFILE, &up) == 0) rl = up;
  }
  long fit = (long)rl.rlim_cur - S_FD_RESERVE;
  if (fit < 16)
    return wt_fail(WT_EINVAL,
                   "the open-file limit (ulimit -n) is %llu: too few for the control "
                   "connections and the %d descriptors the coordinator needs beside them; "
                   "raise it to at least %d",
                   (unsigned long long)rl.rlim_cur, S_FD_RESERVE, S_FD_RESERVE + 16);
  if (fit < c->cfg.max_connections) {
    WT_WARN("coordinator: the open-file limit (ulimit -n %llu) holds %ld control connections, "
            "not --max-connections %d; using %ld (raise the limit for more)",
            (unsigned long long)rl.rlim_cur, fit, c->cfg.max_connections, fit);
    c->cfg.max_connections = (int)fit;
  }
  *fd_cap = rl.rlim_cur > S_FD_MAX ? S_FD_MAX : (int)rl.rlim_cur;
  return WT_OK;
}

static int s_source_find(struct coord_zap *z, const char *addr, int add) {
  int free_at = -1;
  for (int i = 0; i < z->n_sources; i++) {
    if (z->sources[i].n > 0 && !strcmp(z->sources[i].addr, addr)) return i;
    if (z->sources[i].n == 0 && free_at < 0) free_at = i;
  }
  if (!add) return -1;
  if (free_at < 0) {
    if (z->n_sources == z->max_total + S_FD_RESERVE) return -1;
    free_at = z->n_sources++;
  }
  snprintf(z->sources[free_at].addr, sizeof z->sources[free_at].addr, "%s", addr);
  return free_at;
}

/* The remote address of an accepted descriptor, as ZAP names it ("127.0.0.1", "::1"). */
static void s_peer_addr(int fd, char *out, size_t size) {
  struct sockaddr_storage sa;
  socklen_t len = sizeof sa;
  snprintf(out, size, "?");
  if (getpeername(fd, (struct sockaddr *)&sa, &len) != 0) return;
  if (sa.ss_family == AF_INET)
    inet_ntop(AF_INET, &((struct sockaddr_in *)&sa)->sin_addr, out, (socklen_t)size);
  else if (sa.ss_family == AF_INET6)
    inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&sa)->sin6_addr, out, (socklen_t)size);
}

/* A failed handshake: counted, and logged at most once per S_FAILED_LOG_S. Refusals by this
 * handler (status 400) arrive as AUTH failures and are logged where they are made. A protocol
 * error is a client that does not speak CURVE to this key — with ZMQ_PROTOCOL_ERROR_ZMTP_
 * CRYPTOGRAPHIC, one that does not have this coordinator's public key; "no detail" is a
 * handshake cut before it finished (a reset, a timeout: a client gone, or a coordinator too
 * busy to finish it within ZMQ_HANDSHAKE_IVL), value its errno. */
static void s_handshake_failed(struct coord_zap *z, uint16_t event, uint32_t value) {
  if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) {
    atomic_fetch_add(&z->handshakes_refused, 1);
    return;
  }
  int cut = event == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL;
  uint64_t n = atomic_fetch_add(cut ? &z->handshakes_cut : &z->handshakes_failed, 1) + 1;
  double now = wt_now_s(), *last = cut ? &z->cut_log_t : &z->failed_log_t;
  if (now - *last < S_FAILED_LOG_S) return;
  *last = now;
  if (cut)
    WT_WARN("coordinator: a CURVE handshake was cut before it finished (%s); %llu so far",
            strerror((int)value), (unsigned long long)n);
  else if (value == ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC)
    WT_WARN("coordinator: a CURVE handshake failed: the client does not have this coordinator's "
            "public key (a peer given the wrong --coordinator-key?); %llu so far",
            (unsigned long long)n);
  else
    WT_WARN("coordinator: a CURVE handshake failed (protocol error %#x); %llu so far", value,
            (unsigned long long)n);
}

/* One monitor event: [u16 event, u32 value (the descriptor)][endpoint]. A descriptor is
 * counted under the address it had when the event was read and uncounted under the same. */
static int s_monitor_event(struct coord_zap *z) {
  zmq_msg_t head, addr;
  zmq_msg_init(&head);
  zmq_msg_init(&addr);
  int got = zmq_msg_recv(&head, z->monitor, ZMQ_DONTWAIT);
  if (got < 0 || !zmq_msg_more(&head) || zmq_msg_recv(&addr, z->monitor, 0) < 0) {
    zmq_msg_close(&head);
    zmq_msg_close(&addr);
    return got < 0 ? -1 : 0;
  }
  uint16_t event = 0;
  uint32_t fd = 0;
  if (zmq_msg_size(&head) == 6) {
    memcpy(&event, zmq_msg_data(&head), 2);
    memcpy(&fd, (const char *)zmq_msg_data(&head) + 2, 4);
  }
  zmq_msg_close(&head);
  zmq_msg_close(&addr);
  if (event & (ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
               ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)) {
    s_handshake_failed(z, event, fd);
    return 0;
  }
  if (fd >= (uint32_t)z->fd_cap) return 0;
  if (event != ZMQ_EVENT_ACCEPTED && event != ZMQ_EVENT_DISCONNECTED) return 0;
  if (z->fd_source[fd] != S_NOT_OPEN) { /* closed (on ACCEPTED: its DISCONNECTED went missing) */
    if (z->fd_source[fd] >= 0) z->sources[z->fd_source[fd]].n--;
    z->fd_source[fd] = S_NOT_OPEN;
    z->total--;
  }
  if (event == ZMQ_EVENT_ACCEPTED) {
    char a[INET6_ADDRSTRLEN];
    s_peer_addr((int)fd, a, sizeof a);
    int s = s_source_find(z, a, 1);
    z->fd_source[fd] = s >= 0 ? s : S_NO_SOURCE;
    if (s >= 0) z->sources[s].n++;
    z->total++;
  }
  return 0;
}

static int s_key_known(struct coord_zap *z, const char *key) {
  sqlite3_stmt *st = NULL;
  int known = 0;
  if (z->db &&
      sqlite3_prepare_v2(z->db, "SELECT 1 FROM peers WHERE key = ?", -1, &st, NULL) == SQLITE_OK) {
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    known = sqlite3_step(st) == SQLITE_ROW;
  }
  sqlite3_finalize(st);
  return known;
}

/* Whether the connection from addr with this key may finish its handshake; it is counted
 * already (its ACCEPTED event came before its handshake). */
static const char *s_verdict(struct coord_zap *z, const char *addr, const char *key) {
  if (z->total > z->max_total) return "too many connections";
  int s = s_source_find(z, addr, 0);
  if (s >= 0 && z->sources[s].n > z->max_source && !s_key_known(z, key))
    return "too many connections from this address";
  return NULL;
}

/* One ZAP request (RFC 27): version, request id, domain, address, routing id, mechanism,
 * credentials; the reply names the client's key as the User-Id of its messages. */
static int s_zap_request(struct coord_zap *z) {
  char frames[7][256];
  size_t lens[7];
  int n = 0, more = 1;
  while (more && n < 7) {
    int got = zmq_recv(z->rep, frames[n], sizeof frames[n] - 1, 0);
    if (got < 0) return -1;
    lens[n] = (size_t)WT_MIN(got, 255);
    frames[n][lens[n]] = 0;
    size_t sz = sizeof more;
    zmq_getsockopt(z->rep, ZMQ_RCVMORE, &more, &sz);
    n++;
  }
  while (more) { /* drain an oversized request */
    char junk[256];
    if (zmq_recv(z->rep, junk, sizeof junk, 0) < 0) return -1;
    size_t sz = sizeof more;
    zmq_getsockopt(z->rep, ZMQ_RCVMORE, &more, &sz);
  }
  char user[41] = "";
  int ok = n >= 7 && lens[5] == 5 && !memcmp(frames[5], "CURVE", 5) && lens[6] == 32;
  if (ok) zmq_z85_encode(user, (const uint8_t *)frames[6], 32);
  while (zmq_poll(&(zmq_pollitem_t){z->monitor, 0, ZMQ_POLLIN, 0}, 1, 0) > 0)
    if (s_monitor_event(z) < 0) break; /* count this connection before judging it */
  const char *why = ok ? s_verdict(z, n > 3 ? frames[3] : "", user) : "CURVE only";
  if (ok && why) {
    ok = 0;
    if (z->refused++ % 1000 == 0)
      WT_WARN("coordinator: refused a connection from %s: %s (%d open, %d at most, %d from one "
              "address; %llu refused so far)",
              frames[3], why, z->total, z->max_total, z->max_source,
              (unsigned long long)z->refused);
  }
  zmq_send(z->rep, "1.0", 3, ZMQ_SNDMORE);
  zmq_send(z->rep, frames[1], n > 1 ? lens[1] : 0, ZMQ_SNDMORE);
  /* 400, not the "temporary" 300: a ZeroMQ client retries a 300 at once, for ever */
  zmq_send(z->rep, ok ? "200" : "400", 3, ZMQ_SNDMORE);
  zmq_send(z->rep, ok ? "OK" : why, ok ? 2 : strlen(why), ZMQ_SNDMORE);
  zmq_send(z->rep, ok ? user : "", ok ? strlen(user) : 0, ZMQ_SNDMORE);
  zmq_send(z->rep, "", 0, 0);
  return 0;
}

/* Serves until the context shuts down (ETERM). */
static void *s_zap_loop(void *arg) {
  struct coord_zap *z = arg;
  for (;;) {
    zmq_pollitem_t items[2] = {{z->rep, 0, ZMQ_POLLIN, 0}, {z->monitor, 0, ZMQ_POLLIN, 0}};
    if (zmq_poll(items, 2, -1) < 0 && zmq_errno() != EINTR) break;
    if ((items[1].revents & ZMQ_POLLIN) && s_monitor_event(z) < 0 && zmq_errno() == ETERM) break;
    if ((items[0].revents & ZMQ_POLLIN) && s_zap_request(z) < 0) break;
  }
  zmq_close(z->rep);
  zmq_close(z->monitor);
  z->rep = z->monitor = NULL;
  return NULL;
}

int coord_zap_start(coordinator *c) {
  struct coord_zap *z = wt_xcalloc(1, sizeof *z);
  c->zap_state = z;
  WT_CHECK(s_fd_budget(c, &z->fd_cap));
  z->max_total = c->cfg.max_connections, z->max_source = c->cfg.max_per_source;
  z->sources = wt_xcalloc((size_t)z->max_total + S_FD_RESERVE, sizeof *z->sources);
  z->fd_source = wt_xmalloc(sizeof(int) * (size_t)z->fd_cap);
  for (int i = 0; i < z->fd_cap; i++) z->fd_source[i] = S_NOT_OPEN;
  char path[1300];
  snprintf(path, sizeof path, "%s/state.db", c->dir);
  if (sqlite3_open_v2(path, &z->db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
    sqlite3_close(z->db); /* without it every key is new: the per-source cap holds for all */
    z->db = NULL;
  }
  if (z->db) sqlite3_busy_timeout(z->db, 100);
  const int events = ZMQ_EVENT_ACCEPTED | ZMQ_EVENT_DISCONNECTED |
                     ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL | ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                     ZMQ_EVENT_HANDSHAKE_FAILED_AUTH;
  if (zmq_socket_monitor(c->router, S_MONITOR, events) != 0)
    return wt_fail(WT_EIO, "cannot monitor the control socket: %s", zmq_strerror(errno));
  z->monitor = zmq_socket(c->zctx, ZMQ_PAIR);
  int unlimited = 0; /* a lost DISCONNECTED would count a closed connection for ever */
  zmq_setsockopt(z->monitor, ZMQ_RCVHWM, &unlimited, sizeof unlimited);
  z->rep = zmq_socket(c->zctx, ZMQ_REP);
  if (zmq_connect(z->monitor, S_MONITOR) != 0 || zmq_bind(z->rep, "inproc://zeromq.zap.01") != 0)
    return wt_fail(WT_EIO, "cannot start the ZAP handler: %s", zmq_strerror(errno));
  pthread_t *th = wt_xmalloc(sizeof *th);
  if (pthread_create(th, NULL, s_zap_loop, z) != 0) {
    free(th);
    return wt_fail(WT_EIO, "cannot start the ZAP thread");
  }
  c->zap_thread = th;
  return WT_OK;
}

void coord_zap_counts(const coordinator *c, uint64_t *failed, uint64_t *refused, uint64_t *cut) {
  const struct coord_zap *z = c->zap_state;
  *failed = z ? atomic_load(&z->handshakes_failed) : 0;
  *refused = z ? atomic_load(&z->handshakes_refused) : 0;
  *cut = z ? atomic_load(&z->handshakes_cut) : 0;
}

void coord_zap_stop(coordinator *c) {
  struct coord_zap *z = c->zap_state;
  if (!z) return;
  if (c->zap_thread) {
    pthread_join(*(pthread_t *)c->zap_thread, NULL);
    free(c->zap_thread);
    c->zap_thread = NULL;
  }
  if (z->rep) zmq_close(z->rep);
  if (z->monitor) zmq_close(z->monitor);
  sqlite3_close(z->db);
  free(z->sources);
  free(z->fd_source);
  free(z);
  c->zap_state = NULL;
}
