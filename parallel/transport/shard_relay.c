/* shard_relay — the shard relay's ROUTER, its routing table (peer key → connection) and its
 * thread (contract in shard_relay.h). */
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

#define S_MAX_ROUTES 4096                    /* peers the relay knows where to find */
#define S_MAX_PAYLOAD ((1 << 20) + (1 << 16)) /* a shard reply: one 1 MiB piece and its head */

typedef struct {
  uint8_t key[32];
  uint8_t id[256]; /* the ROUTER's routing id of the peer's connection */
  size_t id_len;
} s_route;

struct parallel_shard_relay {
  void *ctx, *router, *zap;
  char endpoint[256];
  pthread_t thread;
  int started;
  atomic_int stop;
  parallel_shard_keyset allowed;
  s_route *routes;
  int n_routes;
  atomic_uint_least64_t messages, bytes, refused;
};

static s_route *s_find(parallel_shard_relay *r, const uint8_t key[32]) {
  for (int i = 0; i < r->n_routes; i++)
    if (!memcmp(r->routes[i].key, key, 32)) return &r->routes[i];
  return NULL;
}

static void s_forget(parallel_shard_relay *r, s_route *x) {
  *x = r->routes[--r->n_routes];
}

/* Where key's messages go from now on: the connection it last spoke on. */
static void s_learn(parallel_shard_relay *r, const uint8_t key[32], zmq_msg_t *id) {
  s_route *x = s_find(r, key);
  if (!x) {
    if (r->n_routes == S_MAX_ROUTES) s_forget(r, &r->routes[0]);
    x = &r->routes[r->n_routes++];
    memcpy(x->key, key, 32);
  }
  x->id_len = zmq_msg_size(id) < sizeof x->id ? zmq_msg_size(id) : sizeof x->id;
  memcpy(x->id, zmq_msg_data(id), x->id_len);
}

/* The authenticated key of the connection a message came on (the ZAP handler's User-Id). */
static int s_sender(zmq_msg_t *m, uint8_t key[32]) {
  const char *user = zmq_msg_gets(m, "User-Id");
  return user && strlen(user) == 40 && zmq_z85_decode(key, user) ? 0 : -1;
}

/* Sends [id][head][payload] without waiting: a peer that cannot take it loses it. */
static int s_send3(parallel_shard_relay *r, const void *id, size_t id_len, const void *head,
                   size_t head_len, zmq_msg_t *payload) {
  if (zmq_send(r->router, id, id_len, ZMQ_SNDMORE | ZMQ_DONTWAIT) < 0) return -1;
  zmq_send(r->router, head, head_len, ZMQ_SNDMORE | ZMQ_DONTWAIT);
  return payload ? zmq_msg_send(payload, r->router, ZMQ_DONTWAIT) : zmq_send(r->router, "", 0, ZMQ_DONTWAIT);
}

/* One message: [id][to]([payload]). */
static void s_pass(parallel_shard_relay *r) {
  zmq_msg_t part[3];
  int n = 0, more = 1;
  while (more) {
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, r->router, ZMQ_DONTWAIT) < 0) {
      zmq_msg_close(&m);
      break;
    }
    more = zmq_msg_more(&m);
    if (n < 3)
      part[n++] = m;
    else
      zmq_msg_close(&m), n = 4;
  }
  uint8_t from[32];
  const int shape_ok = n >= 2 && n <= 3 && s_sender(&part[1], from) == 0;
  const size_t to_len = shape_ok ? zmq_msg_size(&part[1]) : 0;
  if (!shape_ok || (to_len != 0 && to_len != 32) || (to_len == 0) != (n == 2)) {
    atomic_fetch_add(&r->refused, 1);
  } else {
    s_learn(r, from, &part[0]);
    if (to_len == 32) {
      uint8_t to[32];
      memcpy(to, zmq_msg_data(&part[1]), 32);
      s_route *x = s_find(r, to);
      const size_t bytes = zmq_msg_size(&part[2]);
      if (x && s_send3(r, x->id, x->id_len, from, 32, &part[2]) >= 0) {
        atomic_fetch_add(&r->messages, 1);
        atomic_fetch_add(&r->bytes, bytes);
      } else {
        if (x && errno == EHOSTUNREACH) s_forget(r, x); /* its connection is gone */
        s_send3(r, zmq_msg_data(&part[0]), zmq_msg_size(&part[0]), to, 32, NULL);
      }
    }
  }
  for (int i = 0; i < n && i < 3; i++) zmq_msg_close(&part[i]);
}

static void *s_main(void *arg) {
  parallel_shard_relay *r = arg;
  while (!atomic_load(&r->stop)) {
    zmq_pollitem_t it[2] = {{r->zap, 0, ZMQ_POLLIN, 0}, {r->router, 0, ZMQ_POLLIN, 0}};
    if (zmq_poll(it, 2, 100) <= 0) continue;
    if ((it[0].revents & ZMQ_POLLIN) && !parallel_shard_zap_answer(r->zap, &r->allowed))
      atomic_fetch_add(&r->refused, 1);
    if (it[1].revents & ZMQ_POLLIN) s_pass(r);
  }
  return NULL;
}

parallel_shard_relay *parallel_shard_relay_new(const char *bind, const char *public_z85,
                                               const char *secret_z85) {
  uint8_t k[32];
  if (!bind || !public_z85 || !secret_z85 || strlen(public_z85) != 40 ||
      strlen(secret_z85) != 40 || !zmq_z85_decode(k, public_z85) || !zmq_z85_decode(k, secret_z85)) {
    wt_fail(WT_EINVAL, "shard relay: an endpoint and a key pair of two Z85 keys are needed");
    return NULL;
  }
  parallel_shard_relay *r = wt_xcalloc(1, sizeof *r);
  parallel_shard_keyset_init(&r->allowed);
  r->routes = wt_xcalloc(S_MAX_ROUTES, sizeof *r->routes);
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
  if (r->router) zmq_close(r->router);
  if (r->zap) zmq_close(r->zap);
  if (r->ctx) zmq_ctx_term(r->ctx);
  parallel_shard_keyset_free(&r->allowed);
  free(r->routes);
  free(r);
  *r_p = NULL;
}
