/* shard_relay — the shard relay's ROUTER, its two routing tables (holder key → connection;
 * client connection → key) and its thread (contract in shard_relay.h). */
#include "parallel/transport/shard_relay.h"

#include "common/common.h"
#include "parallel/transport/shards_internal.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#define S_MAX_ROUTES 4096                     /* peers the relay knows where to find */
#define S_MAX_PAYLOAD ((1 << 20) + (1 << 16)) /* a shard reply: one 1 MiB piece and its head */

typedef struct {
  uint8_t key[32];
  uint8_t id[256]; /* the ROUTER's routing id of the peer's connection */
  size_t id_len;
} s_route;

/* Routes by key (holders, from their hellos) or by connection (clients, from their requests:
 * one peer may fetch on several connections at once, and also be a holder). */
typedef struct {
  s_route *r;
  int n;
} s_table;

struct parallel_shard_relay {
  void *ctx, *router, *zap, *monitor; /* monitor: failed handshakes (shards_internal.h) */
  char endpoint[256];
  pthread_t thread;
  int started;
  atomic_int stop;
  parallel_shard_keyset allowed;
  s_table holders, clients;
  atomic_uint_least64_t messages, bytes, refused;
};

static s_route *s_by_key(s_table *t, const uint8_t key[32]) {
  for (int i = 0; i < t->n; i++)
    if (!memcmp(t->r[i].key, key, 32)) return &t->r[i];
  return NULL;
}

static s_route *s_by_id(s_table *t, const void *id, size_t len) {
  for (int i = 0; i < t->n; i++)
    if (t->r[i].id_len == len && !memcmp(t->r[i].id, id, len)) return &t->r[i];
  return NULL;
}

static void s_forget(s_table *t, s_route *x) {
  *x = t->r[--t->n];
}

/* Puts (key, id) in t, replacing x (an old entry of the same key or id) or the oldest entry. */
static void s_learn(s_table *t, s_route *x, const uint8_t key[32], zmq_msg_t *id) {
  if (!x) {
    if (t->n == S_MAX_ROUTES) memmove(t->r, t->r + 1, sizeof *t->r * (S_MAX_ROUTES - 1)), t->n--;
    x = &t->r[t->n++];
  }
  memcpy(x->key, key, 32);
  x->id_len = zmq_msg_size(id) < sizeof x->id ? zmq_msg_size(id) : sizeof x->id;
  memcpy(x->id, zmq_msg_data(id), x->id_len);
}

/* The authenticated key of the connection a message came on (the ZAP handler's User-Id). */
static int s_sender(zmq_msg_t *m, uint8_t key[32]) {
  const char *user = zmq_msg_gets(m, "User-Id");
  return user && strlen(user) == 40 && zmq_z85_decode(key, user) ? 0 : -1;
}

/* Sends [id] + n parts without waiting: a peer that cannot take it loses it. */
static int s_send(parallel_shard_relay *r, const void *id, size_t id_len, const void **part,
                  const size_t *len, int n) {
  if (zmq_send(r->router, id, id_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) return -1;
  for (int i = 0; i < n; i++)
    if (zmq_send(r->router, part[i], len[i], (i + 1 < n ? ZMQ_SNDMORE : 0) | ZMQ_DONTWAIT) < 0)
      return -1;
  return 0;
}

static void s_count(parallel_shard_relay *r, size_t bytes) {
  atomic_fetch_add(&r->messages, 1);
  atomic_fetch_add(&r->bytes, bytes);
}

/* A client's request [to][payload]: on to holder `to` as [from][client id][payload], or back
 * as [to][""] when that holder is not connected. */
static void s_request(parallel_shard_relay *r, const uint8_t from[32], zmq_msg_t *part) {
  s_learn(&r->clients, s_by_id(&r->clients, zmq_msg_data(&part[0]), zmq_msg_size(&part[0])), from,
          &part[0]);
  s_route *h = s_by_key(&r->holders, zmq_msg_data(&part[1]));
  const void *out[3] = {from, zmq_msg_data(&part[0]), zmq_msg_data(&part[2])};
  const size_t len[3] = {32, zmq_msg_size(&part[0]), zmq_msg_size(&part[2])};
  if (h && s_send(r, h->id, h->id_len, out, len, 3) == 0) return s_count(r, len[2]);
  if (h && errno == EHOSTUNREACH) s_forget(&r->holders, h); /* its connection is gone */
  const void *back[2] = {zmq_msg_data(&part[1]), ""};
  const size_t back_len[2] = {32, 0};
  s_send(r, zmq_msg_data(&part[0]), zmq_msg_size(&part[0]), back, back_len, 2);
}

/* A holder's reply [to][client id][payload]: on to that connection, if it is `to`'s. */
static void s_reply(parallel_shard_relay *r, const uint8_t from[32], zmq_msg_t *part) {
  s_route *c = s_by_id(&r->clients, zmq_msg_data(&part[2]), zmq_msg_size(&part[2]));
  if (!c || memcmp(c->key, zmq_msg_data(&part[1]), 32)) {
    atomic_fetch_add(&r->refused, 1);
    return;
  }
  const void *out[2] = {from, zmq_msg_data(&part[3])};
  const size_t len[2] = {32, zmq_msg_size(&part[3])};
  if (s_send(r, c->id, c->id_len, out, len, 2) == 0)
    s_count(r, len[1]);
  else if (errno == EHOSTUNREACH)
    s_forget(&r->clients, c);
}

/* Routes one message of n parts (n > 4: it had too many) that came on the connection whose
 * handshake proved key `from` (NULL: none): its own function so that fuzz/fuzz_shard_relay.c
 * can drive the routing tables without sockets to peers. */
static void s_route_message(parallel_shard_relay *r, const uint8_t *from, zmq_msg_t *part, int n) {
  const size_t to_len = from && n >= 2 ? zmq_msg_size(&part[1]) : 1;
  if (from && n == 2 && to_len == 0)
    s_learn(&r->holders, s_by_key(&r->holders, from), from, &part[0]);
  else if (from && n == 3 && to_len == 32)
    s_request(r, from, part);
  else if (from && n == 4 && to_len == 32)
    s_reply(r, from, part);
  else
    atomic_fetch_add(&r->refused, 1);
}

/* One message: [id][""] (hello), [id][to][payload] (request), [id][to][client][payload]
 * (reply); anything else is counted and dropped. */
static void s_pass(parallel_shard_relay *r) {
  zmq_msg_t part[4];
  int n = 0, more = 1, extra = 0;
  while (more) {
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, r->router, ZMQ_DONTWAIT) < 0) {
      zmq_msg_close(&m);
      break;
    }
    more = zmq_msg_more(&m);
    if (n < 4)
      part[n++] = m;
    else
      zmq_msg_close(&m), extra = 1;
  }
  uint8_t from[32];
  const int authenticated = !extra && n >= 2 && s_sender(&part[1], from) == 0;
  s_route_message(r, authenticated ? from : NULL, part, extra ? 5 : n);
  for (int i = 0; i < n; i++) zmq_msg_close(&part[i]);
}

static void *s_main(void *arg) {
  parallel_shard_relay *r = arg;
  while (!atomic_load(&r->stop)) {
    zmq_pollitem_t it[3] = {
        {r->zap, 0, ZMQ_POLLIN, 0}, {r->router, 0, ZMQ_POLLIN, 0}, {r->monitor, 0, ZMQ_POLLIN, 0}};
    if (zmq_poll(it, 3, 100) <= 0) continue;
    if ((it[0].revents & ZMQ_POLLIN) && !parallel_shard_zap_answer(r->zap, &r->allowed))
      atomic_fetch_add(&r->refused, 1);
    if (it[1].revents & ZMQ_POLLIN) s_pass(r);
    if ((it[2].revents & ZMQ_POLLIN) && parallel_shard_monitor_refused(r->monitor))
      atomic_fetch_add(&r->refused, 1);
  }
  return NULL;
}

parallel_shard_relay *parallel_shard_relay_new(const char *bind, const char *public_z85,
                                               const char *secret_z85) {
  uint8_t k[32];
  if (!bind || !public_z85 || !secret_z85 || strlen(public_z85) != 40 || strlen(secret_z85) != 40 ||
      !zmq_z85_decode(k, public_z85) || !zmq_z85_decode(k, secret_z85)) {
    wt_fail(WT_EINVAL, "shard relay: an endpoint and a key pair of two Z85 keys are needed");
    return NULL;
  }
  parallel_shard_relay *r = wt_xcalloc(1, sizeof *r);
  parallel_shard_keyset_init(&r->allowed);
  r->holders.r = wt_xcalloc(S_MAX_ROUTES, sizeof(s_route));
  r->clients.r = wt_xcalloc(S_MAX_ROUTES, sizeof(s_route));
  r->ctx = zmq_ctx_new();
  r->zap = zmq_socket(r->ctx, ZMQ_REP);
  r->router = zmq_socket(r->ctx, ZMQ_ROUTER);
  int one = 1, linger = 0;
  int64_t max = S_MAX_PAYLOAD;
  zmq_setsockopt(r->router, ZMQ_LINGER, &linger, sizeof linger);
  zmq_setsockopt(r->zap, ZMQ_LINGER, &linger, sizeof linger);
  zmq_setsockopt(r->router, ZMQ_MAXMSGSIZE, &max, sizeof max);
  zmq_setsockopt(r->router, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
  zmq_setsockopt(r->router, ZMQ_CURVE_SERVER, &one, sizeof one);
  zmq_setsockopt(r->router, ZMQ_CURVE_SECRETKEY, secret_z85, 40);
  zmq_setsockopt(r->router, ZMQ_ZAP_DOMAIN, "wantrain.shard-relay", 20);
  size_t len = sizeof r->endpoint;
  if (zmq_bind(r->zap, "inproc://zeromq.zap.01") != 0 || zmq_bind(r->router, bind) != 0 ||
      zmq_getsockopt(r->router, ZMQ_LAST_ENDPOINT, r->endpoint, &len) != 0) {
    wt_fail(WT_EIO, "shard relay: cannot bind %s: %s", bind, zmq_strerror(zmq_errno()));
    parallel_shard_relay_destroy(&r);
    return NULL;
  }
  char name[64];
  snprintf(name, sizeof name, "shard-relay-monitor-%p", (void *)r);
  r->monitor = parallel_shard_monitor_open(r->ctx, r->router, name);
  if (!r->monitor) {
    wt_fail(WT_EIO, "shard relay: cannot monitor its socket: %s", zmq_strerror(zmq_errno()));
    parallel_shard_relay_destroy(&r);
    return NULL;
  }
  if (pthread_create(&r->thread, NULL, s_main, r) != 0) {
    wt_fail(WT_EIO, "shard relay: cannot start its thread");
    parallel_shard_relay_destroy(&r);
    return NULL;
  }
  r->started = 1;
  return r;
}

const char *parallel_shard_relay_endpoint(const parallel_shard_relay *r) {
  return r->endpoint;
}

int parallel_shard_relay_allow(parallel_shard_relay *r, const char *public_z85) {
  if (parallel_shard_keyset_add(&r->allowed, public_z85) != WT_OK)
    return wt_fail(WT_EINVAL, "shard relay: %s", wt_last_error());
  return WT_OK;
}

parallel_shard_relay_stats parallel_shard_relay_stats_get(const parallel_shard_relay *r) {
  parallel_shard_relay_stats st = {atomic_load(&r->messages), atomic_load(&r->bytes),
                                   atomic_load(&r->refused)};
  return st;
}

void parallel_shard_relay_destroy(parallel_shard_relay **r_p) {
  parallel_shard_relay *r = r_p ? *r_p : NULL;
  if (!r) return;
  atomic_store(&r->stop, 1);
  if (r->started) pthread_join(r->thread, NULL);
  if (r->monitor) zmq_close(r->monitor);
  if (r->router) zmq_close(r->router);
  if (r->zap) zmq_close(r->zap);
  if (r->ctx) zmq_ctx_term(r->ctx);
  parallel_shard_keyset_free(&r->allowed);
  free(r->holders.r);
  free(r->clients.r);
  free(r);
  *r_p = NULL;
}
