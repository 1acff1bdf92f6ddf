/* zmq_relay — the relay's inboxes and its forwarding thread (contract in zmq_relay.h). */
#include "parallel/transport/zmq_relay.h"

#include "common/common.h"
#include "parallel/transport/zmq_transport_internal.h" /* defines: S_MAX_FRAME, S_HWM */

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

typedef struct {
  void *in, *out; /* PULL from the senders, PUSH to the owner */
  char in_ep[300], out_ep[300];
} s_inbox;

struct parallel_zmq_relay {
  void *zctx;
  s_inbox *boxes;
  int n;
  pthread_t thread;
  int started;
  atomic_int stop;
  atomic_uint_least64_t messages, bytes;
};

/* Binds sock on host at the first free port of [lo, hi] (0, 0: an ephemeral one). */
static int s_bind(void *sock, const char *host, int lo, int hi, char *ep, size_t cap) {
  if (lo == 0) {
    snprintf(ep, cap, "tcp://%s:*", host);
    if (zmq_bind(sock, ep) != 0)
      return wt_fail(WT_EIO, "relay: cannot bind %s: %s", ep, zmq_strerror(errno));
  } else {
    int port = lo;
    for (; port <= hi; port++) {
      snprintf(ep, cap, "tcp://%s:%d", host, port);
      if (zmq_bind(sock, ep) == 0) break;
    }
    if (port > hi)
      return wt_fail(WT_EIO,
                     "relay: no free port in %d-%d on %s (each inbox takes two): widen the range",
                     lo, hi, host);
  }
  size_t n = cap;
  zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, ep, &n);
  return WT_OK;
}

static void *s_socket(void *zctx, int type) {
  void *s = zmq_socket(zctx, type);
  int hwm = S_HWM, linger = 0;
  int64_t maxmsg = S_MAX_FRAME;
  zmq_setsockopt(s, type == ZMQ_PULL ? ZMQ_RCVHWM : ZMQ_SNDHWM, &hwm, sizeof hwm);
  zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
  if (type == ZMQ_PULL) zmq_setsockopt(s, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
  return s;
}

/* Moves one whole message from inbox b's PULL to its PUSH. The PUSH had room for it (the poll
 * said so), and a message is admitted whole, so only a connection dropped meanwhile can make a
 * frame fail: the rest of that message is then read and dropped, as the owner is gone. */
static void s_forward(parallel_zmq_relay *r, s_inbox *b) {
  int more = 1, ok = 1;
  uint64_t bytes = 0;
  while (more) {
    zmq_msg_t f;
    zmq_msg_init(&f);
    if (zmq_msg_recv(&f, b->in, ZMQ_DONTWAIT) < 0) {
      zmq_msg_close(&f);
      return;
    }
    more = zmq_msg_more(&f);
    bytes += zmq_msg_size(&f);
    if (ok && zmq_msg_send(&f, b->out, ZMQ_DONTWAIT | (more ? ZMQ_SNDMORE : 0)) < 0) ok = 0;
    if (!ok) zmq_msg_close(&f);
  }
  if (ok) {
    atomic_fetch_add(&r->messages, 1);
    atomic_fetch_add(&r->bytes, bytes);
  }
}

/* Polls each inbox's PULL while its PUSH can take a message, else the PUSH for room. */
static void *s_main(void *arg) {
  parallel_zmq_relay *r = arg;
  zmq_pollitem_t *items = wt_xcalloc((size_t)r->n, sizeof *items);
  while (!atomic_load(&r->stop)) {
    for (int k = 0; k < r->n; k++) {
      int ev = 0;
      size_t sz = sizeof ev;
      zmq_getsockopt(r->boxes[k].out, ZMQ_EVENTS, &ev, &sz);
      items[k] = (ev & ZMQ_POLLOUT) ? (zmq_pollitem_t){r->boxes[k].in, 0, ZMQ_POLLIN, 0}
                                    : (zmq_pollitem_t){r->boxes[k].out, 0, ZMQ_POLLOUT, 0};
    }
    if (zmq_poll(items, r->n, S_POLL_MS) <= 0) continue;
    for (int k = 0; k < r->n; k++)
      if (items[k].socket == r->boxes[k].in && (items[k].revents & ZMQ_POLLIN))
        s_forward(r, &r->boxes[k]);
  }
  free(items);
  return NULL;
}

parallel_zmq_relay *parallel_zmq_relay_new(const char *host, int n, int port_min, int port_max) {
  if (n < 1 || n > 1024) {
    wt_fail(WT_EINVAL, "relay: %d inboxes out of range [1, 1024]", n);
    return NULL;
  }
  if (port_min < 0 || port_max > 65535 || (port_min == 0) != (port_max == 0) ||
      port_min > port_max) {
    wt_fail(WT_EINVAL, "relay: port range %d-%d: give 1 <= min <= max <= 65535, or 0-0", port_min,
            port_max);
    return NULL;
  }
  parallel_zmq_relay *r = wt_xcalloc(1, sizeof *r);
  r->zctx = zmq_ctx_new();
  r->n = n;
  r->boxes = wt_xcalloc((size_t)n, sizeof *r->boxes);
  int rc = r->zctx ? WT_OK : wt_fail(WT_EIO, "relay: cannot create a ZeroMQ context");
  for (int k = 0; k < n && rc == WT_OK; k++) {
    s_inbox *b = &r->boxes[k];
    b->in = s_socket(r->zctx, ZMQ_PULL);
    b->out = s_socket(r->zctx, ZMQ_PUSH);
    rc = s_bind(b->in, host, port_min, port_max, b->in_ep, sizeof b->in_ep);
    if (rc == WT_OK) rc = s_bind(b->out, host, port_min, port_max, b->out_ep, sizeof b->out_ep);
  }
  if (rc == WT_OK && pthread_create(&r->thread, NULL, s_main, r) != 0)
    rc = wt_fail(WT_EIO, "relay: cannot start its thread");
  r->started = rc == WT_OK;
  if (rc != WT_OK) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", wt_last_error());
    parallel_zmq_relay_destroy(&r);
    wt_fail(rc, "%s", msg);
  }
  return r;
}

const char *parallel_zmq_relay_in(const parallel_zmq_relay *r, int k) {
  return k >= 0 && k < r->n ? r->boxes[k].in_ep : NULL;
}

const char *parallel_zmq_relay_out(const parallel_zmq_relay *r, int k) {
  return k >= 0 && k < r->n ? r->boxes[k].out_ep : NULL;
}

parallel_zmq_relay_stats parallel_zmq_relay_stats_get(const parallel_zmq_relay *r) {
  parallel_zmq_relay_stats st = {atomic_load(&r->messages), atomic_load(&r->bytes)};
  return st;
}

void parallel_zmq_relay_destroy(parallel_zmq_relay **r_p) {
  parallel_zmq_relay *r = r_p ? *r_p : NULL;
  if (!r) return;
  atomic_store(&r->stop, 1);
  if (r->started) pthread_join(r->thread, NULL);
  for (int k = 0; k < r->n; k++) {
    if (r->boxes[k].in) zmq_close(r->boxes[k].in);
    if (r->boxes[k].out) zmq_close(r->boxes[k].out);
  }
  if (r->zctx) zmq_ctx_term(r->zctx);
  free(r->boxes);
  free(r);
  *r_p = NULL;
}
