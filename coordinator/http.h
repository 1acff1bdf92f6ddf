/* coordinator/http — the coordinator's status server: `/status` (JSON), `/metrics` (Prometheus
 * text exposition format 0.0.4) and `/` (a dashboard page that polls /status), served by
 * libmicrohttpd on its own port and thread.
 *
 * One source of truth: a request is answered from a status snapshot the caller builds through
 * one callback; /status prints that snapshot and /metrics is computed from the same snapshot.
 * The server keeps no run state of its own: with opts.refresh_s 0 every request takes a fresh
 * snapshot; with refresh_s > 0 it is served the texts of one at most 2 × refresh_s old, built
 * on a refresher thread while requests come, so a request does not wait for the caller's lock.
 *
 * Threading: the callback runs on the server's thread or its refresher's. When `lock` is given, the
 * server holds it for exactly the duration of the callback, so the callback may read the caller's
 * state that the caller guards with the same mutex; the snapshot it returns must not share memory
 * with that state. With `lock` NULL the callback synchronises by itself.
 *
 * Outside input: a request never crashes or blocks the server. Unknown paths get 404, methods
 * other than GET and HEAD get 405 (with `Allow: GET, HEAD`), request headers are bounded
 * (libmicrohttpd answers oversized ones itself), connections are limited in number (1024 or half
 * the process's descriptors; half of that per address) and time out when idle, and one epoll
 * thread serves them all, so slow or idle clients delay no one's reply. A callback that returns
 * NULL gets 503. Strings in the snapshot (peer ids, region labels) are escaped for Prometheus
 * labels and inserted into the page as text, never as HTML; bytes in them that are not UTF-8 are
 * served as U+FFFD, so both pages stay valid UTF-8.
 *
 * Usage:
 *   static cJSON *s_status(void *arg) { ... build per the schema below ...; return status; }
 *   coordinator_http *http = coordinator_http_new(&(coordinator_http_opts){
 *       .port = 0, .status = s_status, .arg = &coord, .lock = &coord.mutex});
 *   if (!http) WT_ERROR("%s", wt_last_error());
 *   printf("dashboard: http://127.0.0.1:%d/\n", coordinator_http_port(http));
 *   ...
 *   coordinator_http_destroy(&http);
 *
 * ---- The status schema (version 1) -----------------------------------------------------------
 * The callback returns a cJSON object with these members (all optional for the server, which
 * serves what is present; coordinator_http_status_check() says whether a snapshot is complete):
 *   "version":      1
 *   "run":          string, the run's name
 *   "state":        string, the run's state: "waiting" (too few peers), "training",
 *                   "recovering" (re-assigning after a loss), "done"
 *   "epoch":        integer >= 0, the current assignment epoch
 *   "step":         integer >= 0, the last committed training step
 *   "stages":       integer >= 0, pipeline stages S of the current epoch
 *   "replicas":     integer >= 0, data-parallel replicas R of the current epoch
 *   "loss":         number, the latest training loss, or null before the first one
 *   "loss_history": [[step, loss], ...] oldest first, at most COORDINATOR_HTTP_LOSS_MAX pairs
 *                   (the caller thins or drops old points)
 *   "tokens_per_s": number >= 0, training throughput over the last interval
 *   "bytes_per_s":  object, link class -> bytes per second sent over links of that class, summed
 *                   over peers; classes are "intra_region" and "inter_region" (others allowed)
 *   "sync":         object, how the replicas synchronise (optional; checked when present):
 *       "preset":   string, "none" or the preset the other members came from
 *       "diloco":   integer >= 0, DiLoCo's H (0: every step)
 *       "grad_codec", "grad_ef", "act_codec": strings, the codecs and error feedback in use
 *       "outer_lr", "outer_momentum": numbers >= 0, DiLoCo's outer step
 *   "rings":        array of S arrays, each stage's data-parallel ring as the placement chose
 *                   it: R replica numbers, replica 0 first (not checked)
 *   "peers":        array of objects, one per peer the coordinator knows:
 *       "id":       string (e.g. the first hex digits of its public key)
 *       "region":   string, the peer's region label ("" when it gave none)
 *       "stage":    integer, its pipeline stage in the current epoch, -1 when none
 *       "replica":  integer, its data-parallel replica, -1 when none
 *       "state":    string: "joining", "probing", "standby", "training", "leaving", "lost",
 *                   "finished" (told the run is complete)
 *     and, not checked: "flops" and "memory" (its device, a site's aggregate), "gpus" (1, or a
 *     site's GPUs), "sidelined" (why it is left out of epochs for now) and "sidelined_for_s"
 *   not checked, the coordinator's capacity: "peer_counts" (state -> number of peers, all of
 *   them, where "peers" may list only some), "max_peers", "peers_total", "peers_live",
 *   "peers_sidelined", "refused_full", "handshakes_failed", "handshakes_refused", "handshakes_cut"
 *
 * ---- /metrics (all gauges, from the same snapshot) ----------------------------------------------
 *   wantrain_epoch, wantrain_step, wantrain_stages, wantrain_replicas, wantrain_loss,
 *   wantrain_tokens_per_second                       one sample each when the member is present
 *   wantrain_link_bytes_per_second{class="..."}      one per member of "bytes_per_s"
 *   wantrain_peers{state="..."}                      number of peers in each state present
 *                                                    (from "peer_counts" when present)
 *   wantrain_peer_info{id,region,stage,replica,state} 1 per listed peer
 *   wantrain_peers_max, wantrain_peers_held, wantrain_peers_sidelined,
 *   wantrain_registrations_refused_full, wantrain_handshakes_failed,
 *   wantrain_handshakes_refused, wantrain_handshakes_cut  from the members of the same names
 */
#ifndef WT_COORDINATOR_HTTP_H
#define WT_COORDINATOR_HTTP_H

#include <cjson/cJSON.h>
#include <pthread.h>

/* Bounds of a valid snapshot (coordinator_http_status_check): loss_history pairs, and bytes in
 * an id, region, state or link class (longer ones are also cut in /metrics labels). */
#define COORDINATOR_HTTP_LOSS_MAX 2000
#define COORDINATOR_HTTP_STR_MAX 256

typedef struct coordinator_http coordinator_http;

/* Returns a new status snapshot (schema above) that the server takes ownership of and deletes,
 * or NULL when none is available (the request then gets 503). Must not block for long: it runs
 * on the server's only thread. */
typedef cJSON *(*coordinator_http_status_fn)(void *arg);

typedef struct {
  const char *bind; /* numeric IPv4 or IPv6 address to listen on; NULL = "127.0.0.1" */
  int port;         /* TCP port, 0 = an ephemeral port (read it with coordinator_http_port) */
  coordinator_http_status_fn status; /* required */
  void *arg;                         /* passed to `status` */
  pthread_mutex_t *lock;             /* held around each call of `status`; NULL = none */
  /* > 0: requests are served a snapshot at most 2 × refresh_s old, rebuilt off the request path
   * at most every refresh_s while requests come; 0: every request builds its own */
  double refresh_s;
} coordinator_http_opts;

/* Starts the server (it listens before this returns). Returns NULL with wt_last_error() set
 * when the options are invalid (no callback, a bind address that is not a numeric IP, a port
 * outside 0..65535) or the socket cannot be bound (port in use). Caller owns the result. */
coordinator_http *coordinator_http_new(const coordinator_http_opts *opts);

/* The TCP port the server listens on (the ephemeral one when opts.port was 0). */
int coordinator_http_port(const coordinator_http *self);

/* Stops the server (waits for its thread) and frees it; *self_p becomes NULL. NULL-safe. */
void coordinator_http_destroy(coordinator_http **self_p);

/* Checks that `status` follows the schema above with every member present: WT_OK, or WT_EINVAL
 * with wt_last_error() naming the first bad or missing member. For callers' tests. */
int coordinator_http_status_check(const cJSON *status);

/* Replaces, in every string of `item`, its siblings and their children (member names too), each
 * byte that starts no well-formed UTF-8 sequence with U+FFFD. What the server does to every
 * snapshot before it serves it; for other writers of the same snapshot. NULL-safe. */
void coordinator_http_utf8_repair(cJSON *item);

/* Renders the /metrics text for `status` into a new NUL-terminated string the caller frees with
 * free(), or NULL with wt_last_error() set when status is not an object. */
char *coordinator_http_metrics_render(const cJSON *status);

#endif
