/* zmq_transport — the ZeroMQ back end of parallel_transport_ops (contract in zmq.h).
 *
 * Threads per transport, each owning its sockets (ZeroMQ sockets are not thread-safe):
 *  - the receiver owns the bound PULL socket and the monitors of the PUSH sockets; it validates
 *    every message, opens its seal in place and files it in the source's mailbox, takes hellos,
 *    and marks a peer gone when it says goodbye or its connection drops;
 *  - the sender owns the PUSH sockets; it drains the per-link queues, sealing each part in place
 *    as it goes and pacing each message when WAN emulation is on.
 * One mutex guards the queues, mailboxes, link state and counters; the callers' send/recv only
 * touch those, never a socket. */
#include "parallel/transport/zmq_transport_internal.h"

#include <assert.h>
#include <errno.h>
#ifdef __GLIBC__
#include <malloc.h> // defines: mallopt
#endif
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

static const parallel_transport_ops s_zmq_ops;

/* ---- the ops ------------------------------------------------------------------------------- */

static int s_gone_for_good(const s_link *l, double now) {
  return l->gone && (l->said_bye || now - l->gone_at >= S_GONE_GRACE_S);
}

/* Sends the concatenation of in[0, nin) (copied: sealed straight into the frame where the link
 * can seal at once) or owned (taken; nin = 0): queues the message once the link's queue has
 * room. */
static int s_send_msg(parallel_zmq_transport *t, int peer, int tag, const parallel_zmq_span *in,
                      int nin, void *owned, size_t bytes) {
  s_link *l = &t->links[peer];
  double t0 = wt_now_s(), deadline = t0 + t->timeout_s;
  pthread_mutex_lock(&t->mu);
  parallel_zmq_msg_context ctx = t->msg;
  pthread_mutex_unlock(&t->mu);
  s_out *m = parallel_zmq_out_new(t, &ctx, ctx.kind, tag, owned, bytes);
  m->filling = 1;
  pthread_mutex_lock(&t->mu);
  int rc = WT_OK, waited = 0;
  while (l->queued_bytes > 0 && l->queued_bytes + bytes > t->max_queue) {
    double now = wt_now_s();
    waited = 1;
    if (s_gone_for_good(l, now)) {
      rc = WT_EIO;
      break;
    }
    if (now >= deadline) {
      rc = WT_ETIMEOUT;
      break;
    }
    s_wait_until(&t->cv_out, &t->mu, WT_MIN(deadline, now + 0.1));
  }
  if (rc == WT_OK && s_gone_for_good(l, wt_now_s())) rc = WT_EIO;
  if (rc == WT_OK) parallel_zmq_enqueue(t, l, m, waited ? wt_now_s() : t0, 1);
  l->st.wait_s += wt_now_s() - t0;
  uint32_t step = ctx.step;
  const char *why = l->gone_why;
  pthread_mutex_unlock(&t->mu);
  /* Sealed or copied outside the lock, so a large message does not stall the other threads. */
  if (rc == WT_OK) parallel_zmq_fill(t, l, m, in, nin);
  if (rc != WT_OK) s_out_unref(m);
  char tagbuf[48];
  if (rc == WT_EIO)
    return wt_fail(WT_EIO, "zmq: rank %d cannot send to rank %d (%s), %s, step %u: %s", t->rank,
                   peer, l->endpoint, s_tag_name(tag, tagbuf, sizeof tagbuf), step, why);
  if (rc == WT_ETIMEOUT)
    return wt_fail(WT_ETIMEOUT,
                   "zmq: rank %d: send to rank %d (%s), %s, step %u blocked for %.1f s: its "
                   "queue stayed full (the peer is not receiving; is it stuck?)",
                   t->rank, peer, l->endpoint, s_tag_name(tag, tagbuf, sizeof tagbuf), step,
                   t->timeout_s);
  return WT_OK;
}

static int s_send(void *vctx, int peer, int tag, const void *buf, size_t bytes) {
  parallel_zmq_span in = {buf, bytes};
  return s_send_msg(vctx, peer, tag, &in, 1, NULL, bytes);
}

static int s_send_owned(void *vctx, int peer, int tag, void *buf, size_t bytes) {
  return s_send_msg(vctx, peer, tag, NULL, 0, buf, bytes);
}

static int s_send_gather(void *vctx, int peer, int tag, const void *head, size_t head_bytes,
                         const void *body, size_t body_bytes) {
  parallel_zmq_span in[2] = {{head, head_bytes}, {body, body_bytes}};
  return s_send_msg(vctx, peer, tag, in, 2, NULL, head_bytes + body_bytes);
}

/* Unlinks the oldest message with `tag` from the link's mailbox, or returns NULL: also while
 * the emulated downlink still holds it (*wake: when it will not). */
static s_in *s_take(s_link *l, int tag, double now, double *wake) {
  s_in *prev = NULL;
  for (s_in *m = l->ihead; m; prev = m, m = m->next) {
    if (m->tag != tag) continue;
    if (m->ready_at > now) {
      *wake = m->ready_at;
      return NULL;
    }
    if (prev)
      prev->next = m->next;
    else
      l->ihead = m->next;
    if (l->itail == m) l->itail = prev;
    l->in_bytes -= m->bytes;
    return m;
  }
  return NULL;
}

/* Waits for the next message from peer with tag and unlinks it into *out (or fails naming what
 * was expected, `cap` bytes at most). */
static int s_wait_msg(parallel_zmq_transport *t, int peer, int tag, size_t cap, size_t *got,
                      s_in **out) {
  s_link *l = &t->links[peer];
  double t0 = wt_now_s(), deadline = t0 + t->timeout_s;
  s_in *m = NULL;
  int rc = WT_OK;
  pthread_mutex_lock(&t->mu);
  t->waiters++;
  double wake = 0;
  while (!(m = s_take(l, tag, wt_now_s(), &wake))) {
    double now = wt_now_s();
    if (s_gone_for_good(l, now)) {
      rc = WT_EIO;
      break;
    }
    if (now >= deadline) {
      rc = WT_ETIMEOUT;
      break;
    }
    s_wait_until(&t->cv_in, &t->mu, WT_MIN(WT_MIN(deadline, now + 0.1), wake > now ? wake : 1e300));
  }
  t->waiters--;
  l->st.wait_s += wt_now_s() - t0;
  uint32_t step = t->msg.step;
  const char *why = l->gone_why;
  pthread_mutex_unlock(&t->mu);
  if (got) *got = 0;
  char tagbuf[48];
  if (rc == WT_EIO)
    return wt_fail(WT_EIO,
                   "zmq: rank %d waits for rank %d (%s), %s, step %u (a message of up to %zu "
                   "bytes), but %s",
                   t->rank, peer, l->endpoint, s_tag_name(tag, tagbuf, sizeof tagbuf), step, cap,
                   why);
  if (rc == WT_ETIMEOUT)
    return wt_fail(WT_ETIMEOUT,
                   "zmq: rank %d: no message from rank %d (%s), %s, step %u (expected up to %zu "
                   "bytes) within %.1f s; the peer is stuck, slow or dead — check its log",
                   t->rank, peer, l->endpoint, s_tag_name(tag, tagbuf, sizeof tagbuf), step, cap,
                   t->timeout_s);
  if (m->bytes > cap) {
    size_t bytes = m->bytes;
    s_in_free(m);
    return wt_fail(WT_EMISMATCH,
                   "zmq: rank %d: message from rank %d (%s) is %zu bytes, expected at most %zu",
                   t->rank, peer, s_tag_name(tag, tagbuf, sizeof tagbuf), bytes, cap);
  }
  *out = m;
  return WT_OK;
}

/* Copies a message's parts into buf and frees it; its length in *got. */
static void s_deliver(s_in *m, void *buf, size_t *got) {
  size_t off = 0;
  for (int i = 0; i < m->nparts; i++) {
    size_t n = zmq_msg_size(&m->parts[i]);
    if (n) memcpy((uint8_t *)buf + off, zmq_msg_data(&m->parts[i]), n);
    off += n;
  }
  if (got) *got = off;
  s_in_free(m);
}

static int s_recv(void *vctx, int peer, int tag, void *buf, size_t cap, size_t *got) {
  s_in *m = NULL;
  WT_CHECK(s_wait_msg(vctx, peer, tag, cap, got, &m));
  s_deliver(m, buf, got);
  return WT_OK;
}

/* A message of one part (every unshaped message) is handed out in place; others are copied. */
static int s_recv_view(void *vctx, int peer, int tag, void *buf, size_t cap, const void **data,
                       size_t *got, void **handle) {
  s_in *m = NULL;
  *handle = NULL;
  WT_CHECK(s_wait_msg(vctx, peer, tag, cap, got, &m));
  if (m->nparts == 1) {
    *data = zmq_msg_data(&m->parts[0]);
    *got = m->bytes;
    *handle = m;
    return WT_OK;
  }
  *data = buf;
  s_deliver(m, buf, got);
  return WT_OK;
}

static void s_release(void *vctx, void *handle) {
  (void)vctx;
  s_in_free(handle);
}

/* Says goodbye, lets the queues drain for a bounded time, stops the threads, frees everything. */
static void s_destroy(void *vctx) {
  parallel_zmq_transport *t = vctx;
  if (!t) return;
  if (t->started_send) {
    pthread_mutex_lock(&t->mu);
    for (int r = 0; r < t->size; r++)
      if (r != t->rank && !t->links[r].gone)
        parallel_zmq_enqueue(t, &t->links[r],
                             parallel_zmq_out_new(t, &t->msg, PARALLEL_ZMQ_KIND_BYE, 0, NULL, 0),
                             wt_now_s(), 0);
    double deadline = wt_now_s() + WT_MIN(t->timeout_s, 5.0);
    for (;;) {
      int pending = 0;
      for (int r = 0; r < t->size; r++)
        if (t->links[r].head && !t->links[r].gone) pending = 1;
      if (!pending || wt_now_s() >= deadline) break;
      s_wait_until(&t->cv_out, &t->mu, WT_MIN(deadline, wt_now_s() + 0.05));
    }
    pthread_mutex_unlock(&t->mu);
    atomic_store(&t->stop_send, 1);
    pthread_mutex_lock(&t->mu);
    pthread_cond_broadcast(&t->cv_send);
    pthread_mutex_unlock(&t->mu);
    pthread_join(t->th_send, NULL);
  } else {
    for (int r = 0; r < t->size; r++)
      for (int i = 0; i < t->links[r].nstreams; i++)
        if (s_stream(&t->links[r], i)) zmq_close(s_stream(&t->links[r], i));
  }
  if (t->started_recv) {
    atomic_store(&t->stop_recv, 1);
    pthread_join(t->th_recv, NULL);
  } else {
    if (t->pull) zmq_close(t->pull);
    for (int r = 0; r < t->size; r++)
      if (t->links[r].monitor) zmq_close(t->links[r].monitor);
  }
  if (t->zctx) zmq_ctx_term(t->zctx);
  for (int r = 0; r < t->size; r++) {
    s_link *l = &t->links[r];
    for (s_in *m = l->ihead, *next; m; m = next) {
      next = m->next;
      s_in_free(m);
    }
    if (l->partial) s_in_free(l->partial);
    for (int i = 0; i < l->nheld; i++) {
      for (int k = 0; k < l->held[i].n; k++) zmq_msg_close(&l->held[i].parts[k]);
      free(l->held[i].parts);
    }
    free(l->held);
    free(l->endpoint);
    free(l->outbox);
    free(l->seen);
    parallel_zmq_aead_free(&l->rx);
    parallel_zmq_aead_free(&l->tx);
    pthread_mutex_destroy(&l->seal_mu);
  }
  pthread_mutex_destroy(&t->mu);
  pthread_cond_destroy(&t->cv_in);
  pthread_cond_destroy(&t->cv_out);
  pthread_cond_destroy(&t->cv_send);
  sodium_memzero(t->links, (size_t)t->size * sizeof *t->links); /* the keys */
  free(t->links);
  free(t->reachable);
  free(t->bound);
  free(t);
}

/* Sealed links authenticate every part; plaintext links carry only TCP's checksum. */
static int s_integrity(void *vctx) {
  return !((parallel_zmq_transport *)vctx)->insecure;
}

static const parallel_transport_ops s_zmq_ops = {.name = "zmq",
                                                 .send = s_send,
                                                 .recv = s_recv,
                                                 .destroy = s_destroy,
                                                 .integrity = s_integrity,
                                                 .send_owned = s_send_owned,
                                                 .send_gather = s_send_gather,
                                                 .recv_view = s_recv_view,
                                                 .release = s_release};

/* ---- construction -------------------------------------------------------------------------- */

/* Every message is a short-lived buffer of up to 1 MiB per part (the sender's copy, ZeroMQ's
 * receive buffer). With glibc's defaults the heap top above 2 × the dynamic mmap threshold is
 * handed back after each burst and faulted in, zeroed, for the next: on this project's machine
 * a lone pair moved about half as many bytes that way (docs/performance.md). So the process
 * keeps up to 256 MiB of freed heap and serves blocks below 32 MiB from it — once, and not
 * when the user tuned malloc through the environment. */
static void s_malloc_tune(void) {
#ifdef __GLIBC__
  if (getenv("GLIBC_TUNABLES") || getenv("MALLOC_TRIM_THRESHOLD_") ||
      getenv("MALLOC_MMAP_THRESHOLD_"))
    return;
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
}
static pthread_once_t s_malloc_once = PTHREAD_ONCE_INIT;

parallel_zmq_config parallel_zmq_config_default(void) {
  parallel_zmq_config c;
  memset(&c, 0, sizeof c);
  c.timeout_s = 60.0;
  c.max_queue_bytes = (size_t)64 << 20;
  c.time_scale = 1.0;
  c.io_threads = 1;
  c.streams = 1;
  return c;
}

static int s_key_ok(const char *k) {
  uint8_t bin[32];
  return k && strlen(k) == PARALLEL_ZMQ_KEY_CHARS && zmq_z85_decode(bin, k) != NULL;
}

static int s_tcp_ok(const char *ep) {
  return ep && !strncmp(ep, "tcp://", 6) && strlen(ep) < 256;
}

static int s_config_check(const parallel_zmq_config *c) {
  if (c->size < 1 || c->size > 1024)
    return wt_fail(WT_EINVAL, "zmq: group size %d out of range [1, 1024]", c->size);
  if (c->rank < 0 || c->rank >= c->size)
    return wt_fail(WT_EINVAL, "zmq: rank %d out of range for a group of %d", c->rank, c->size);
  if (!c->endpoints || !c->endpoints[c->rank])
    return wt_fail(WT_EINVAL, "zmq: no endpoint for this rank (%d) to bind", c->rank);
  if (!(c->timeout_s > 0))
    return wt_fail(WT_EINVAL, "zmq: timeout_s must be > 0 (got %g)", c->timeout_s);
  if (c->max_queue_bytes == 0) return wt_fail(WT_EINVAL, "zmq: max_queue_bytes must be > 0");
  if (!c->insecure) {
    if (parallel_zmq_aead_init() != 0)
      return wt_fail(WT_ENOTSUP, "zmq: libsodium cannot start (no entropy source?); sealed "
                                 "links need it, or pass insecure=1 for a local test");
    if (!s_key_ok(c->secret_key) || !s_key_ok(c->public_key))
      return wt_fail(WT_EINVAL,
                     "zmq: rank %d has no valid CURVE key pair (40-char Z85 keys); "
                     "make one with parallel_zmq_keypair_new, or set insecure=1",
                     c->rank);
    if (!c->peer_public_keys)
      return wt_fail(WT_EINVAL, "zmq: peer_public_keys missing (one Z85 key per rank)");
    for (int r = 0; r < c->size; r++)
      if (r != c->rank && !s_key_ok(c->peer_public_keys[r]))
        return wt_fail(WT_EINVAL,
                       "zmq: the public key of rank %d is missing or not 40-char "
                       "Z85",
                       r);
  }
  if (c->streams < 0 || c->streams > S_MAX_STREAMS)
    return wt_fail(WT_EINVAL, "zmq: streams %d: use 1..%d (0 = the default 1)", c->streams,
                   S_MAX_STREAMS);
  if (c->streams > 1 && c->insecure)
    return wt_fail(WT_EINVAL,
                   "zmq: streams %d needs sealed links (their counters put the "
                   "streams' messages back in order); drop insecure or use 1 stream",
                   c->streams);
  if (c->streams > 1 && (c->latency_s || c->bandwidth_Bps))
    return wt_fail(WT_EINVAL,
                   "zmq: streams %d with WAN emulation: an emulated link paces one "
                   "stream; use 1",
                   c->streams);
  if (c->io_threads < 0 || c->io_threads > 16)
    return wt_fail(WT_EINVAL, "zmq: io_threads %d: use 1..16 (0 = the default 1)", c->io_threads);
  if (c->latency_s || c->bandwidth_Bps) {
    if (!(c->time_scale > 0))
      return wt_fail(WT_EINVAL, "zmq: time_scale must be > 0 (got %g)", c->time_scale);
    for (int r = 0; r < c->size; r++) {
      if (c->latency_s && !(c->latency_s[r] >= 0))
        return wt_fail(WT_EINVAL, "zmq: latency to rank %d must be >= 0 s (got %g)", r,
                       c->latency_s[r]);
      if (c->bandwidth_Bps && !(c->bandwidth_Bps[r] >= 0))
        return wt_fail(WT_EINVAL, "zmq: bandwidth to rank %d must be >= 0 B/s (got %g)", r,
                       c->bandwidth_Bps[r]);
    }
  }
  if (!(c->uplink_Bps >= 0) || !(c->downlink_Bps >= 0))
    return wt_fail(WT_EINVAL, "zmq: uplink and downlink must be >= 0 B/s (got %g, %g)",
                   c->uplink_Bps, c->downlink_Bps);
  return WT_OK;
}

static void s_setopt_int(void *sock, int opt, int v) {
  zmq_setsockopt(sock, opt, &v, sizeof v);
}

static int s_reachable(const parallel_zmq_transport *t, int r) {
  return !t->reachable || t->reachable[r];
}

/* This rank reachable and peer r not: r cannot be connected to, so the PUSH for r binds on this
 * rank's host (the PULL's, ephemeral port) and r's PULL connects to it. Its monitor sees r's
 * connection come and go as it would see an outgoing one. */
static int s_bind_outbox(parallel_zmq_transport *t, int r) {
  s_link *l = &t->links[r];
  if (!s_reachable(t, t->rank) || s_reachable(t, r)) return WT_OK;
  if (strncmp(t->bound, "tcp://", 6))
    return wt_fail(WT_EINVAL,
                   "zmq: rank %d binds %s, but an outbox for unreachable rank %d "
                   "needs a tcp:// endpoint",
                   t->rank, t->bound, r);
  char ep[300];
  snprintf(ep, sizeof ep, "%s", t->bound);
  char *colon = strrchr(ep + 6, ':');
  if (colon) snprintf(colon, sizeof ep - (size_t)(colon - ep), ":*");
  if (zmq_bind(l->push, ep) != 0)
    return wt_fail(WT_EIO, "zmq: rank %d cannot bind its outbox for rank %d at %s: %s", t->rank, r,
                   ep, zmq_strerror(errno));
  size_t n = sizeof ep;
  zmq_getsockopt(l->push, ZMQ_LAST_ENDPOINT, ep, &n);
  l->outbox = wt_xstrdup(ep);
  return WT_OK;
}

static int s_connect_fail(parallel_zmq_transport *t, int peer, const char *what, const char *ep);

/* A PUSH socket of a link, not yet connected. */
static void *s_push_socket(parallel_zmq_transport *t) {
  void *push = zmq_socket(t->zctx, ZMQ_PUSH);
  s_setopt_int(push, ZMQ_SNDHWM, S_HWM);
  s_setopt_int(push, ZMQ_LINGER, (int)(WT_MIN(t->timeout_s, 2.0) * 1000));
  s_setopt_int(push, ZMQ_RECONNECT_IVL, 100);
  s_setopt_int(push, ZMQ_RECONNECT_IVL_MAX, 1000);
  return push;
}

/* Several streams to reachable peer r: streams 1.. connect where stream 0 does. */
static int s_connect_streams(parallel_zmq_transport *t, int r, const char *ep) {
  s_link *l = &t->links[r];
  for (int i = 1; i < t->streams; i++) {
    l->extra_push[i - 1] = s_push_socket(t);
    l->nstreams = i + 1;
    if (zmq_connect(l->extra_push[i - 1], ep) != 0)
      return s_connect_fail(t, r, "the PULL (another stream)", ep);
  }
  return WT_OK;
}

/* Creates the context, bound PULL socket, PUSH sockets (not yet connected, or bound as outboxes)
 * and their monitors. The receiver thread starts at connect: until then the PULL may still be
 * connected to outboxes and relays from this thread. */
static int s_open(parallel_zmq_transport *t, const parallel_zmq_config *c) {
  t->zctx = zmq_ctx_new();
  if (!t->zctx) return wt_fail(WT_EIO, "zmq: cannot create a context: %s", zmq_strerror(errno));
  /* Before the first socket: the I/O threads start with it. */
  if (zmq_ctx_set(t->zctx, ZMQ_IO_THREADS, c->io_threads ? c->io_threads : 1) != 0)
    return wt_fail(WT_EIO, "zmq: cannot set %d I/O threads: %s", c->io_threads,
                   zmq_strerror(errno));
  t->pull = zmq_socket(t->zctx, ZMQ_PULL);
  s_setopt_int(t->pull, ZMQ_RCVHWM, S_HWM);
  s_setopt_int(t->pull, ZMQ_LINGER, 0);
  /* No sender makes a larger frame; a connection that sends one is dropped by ZeroMQ. */
  int64_t maxmsg = S_MAX_FRAME;
  zmq_setsockopt(t->pull, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
  const char *ep = c->endpoints[c->rank];
  if (zmq_bind(t->pull, ep) != 0)
    return wt_fail(WT_EIO,
                   "zmq: rank %d cannot bind %s: %s (is the port in use or the ipc path "
                   "not writable?)",
                   t->rank, ep, zmq_strerror(errno));
  char bound[256];
  size_t blen = sizeof bound;
  zmq_getsockopt(t->pull, ZMQ_LAST_ENDPOINT, bound, &blen);
  t->bound = wt_xstrdup(bound);
  for (int r = 0; r < t->size; r++) {
    if (r == t->rank) continue;
    s_link *l = &t->links[r];
    l->push = s_push_socket(t);
    l->nstreams = 1;
    char mon[64];
    snprintf(mon, sizeof mon, "inproc://wt-monitor-%d", r);
    zmq_socket_monitor(l->push, mon, ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED);
    l->monitor = zmq_socket(t->zctx, ZMQ_PAIR);
    s_setopt_int(l->monitor, ZMQ_LINGER, 0);
    zmq_connect(l->monitor, mon);
    WT_CHECK(s_bind_outbox(t, r));
  }
  return WT_OK;
}

/* Sealed links: this process's session random and caps, and each link's kx base keys from the
 * rank's X25519 key pair (the CURVE keys) and the peer's public key. */
static int s_keys(parallel_zmq_transport *t, const parallel_zmq_config *c) {
  uint8_t pk[32], sk[32], peer_pk[32];
  zmq_z85_decode(pk, c->public_key);
  zmq_z85_decode(sk, c->secret_key);
  randombytes_buf(t->random, sizeof t->random);
  t->caps = parallel_zmq_aead_caps();
  int rc = WT_OK;
  for (int r = 0; r < t->size && rc == WT_OK; r++) {
    if (r == t->rank) continue;
    s_link *l = &t->links[r];
    zmq_z85_decode(peer_pk, c->peer_public_keys[r]);
    if (parallel_zmq_aead_base_keys(l->base_rx, l->base_tx, t->rank, r, pk, sk, peer_pk) != 0)
      rc = wt_fail(WT_EINVAL, "zmq: the public key of rank %d is not a usable X25519 key", r);
    l->seen = wt_xcalloc(S_MAX_SESSIONS, sizeof *l->seen);
    l->hello_due = 1;
  }
  sodium_memzero(sk, sizeof sk);
  return rc;
}

static void s_reachable_copy(parallel_zmq_transport *t, const parallel_zmq_config *c) {
  if (!c->reachable) return;
  t->reachable = wt_xcalloc((size_t)t->size, sizeof *t->reachable);
  for (int r = 0; r < t->size; r++) t->reachable[r] = c->reachable[r] != 0;
}

parallel_zmq_transport *parallel_zmq_transport_new(const parallel_zmq_config *c) {
  if (s_config_check(c) != WT_OK) return NULL;
  pthread_once(&s_malloc_once, s_malloc_tune);
  parallel_zmq_transport *t = wt_xcalloc(1, sizeof *t);
  t->rank = c->rank;
  t->size = c->size;
  t->run_id = c->run_id;
  t->epoch = c->epoch;
  t->timeout_s = c->timeout_s;
  t->max_queue = c->max_queue_bytes;
  t->insecure = c->insecure;
  t->streams = c->streams > 1 ? c->streams : 1;
  t->msg.kind = PARALLEL_ZMQ_KIND_DATA;
  pthread_mutex_init(&t->mu, NULL);
  s_cond_init(&t->cv_in);
  s_cond_init(&t->cv_out);
  s_cond_init(&t->cv_send);
  atomic_init(&t->stop_recv, 0);
  atomic_init(&t->stop_send, 0);
  t->links = wt_xcalloc((size_t)t->size, sizeof *t->links);
  s_reachable_copy(t, c);
  int rc = t->insecure ? WT_OK : s_keys(t, c);
  if (t->insecure)
    WT_WARN("zmq: rank %d runs INSECURE: plaintext, unauthenticated links (debugging only; "
            "drop insecure to seal every link)",
            t->rank);
  t->shaped = c->latency_s || c->bandwidth_Bps;
  for (int r = 0; r < t->size; r++) {
    s_link *l = &t->links[r];
    pthread_mutex_init(&l->seal_mu, NULL);
    if (c->latency_s) l->alpha_w = c->latency_s[r] * c->time_scale;
    if (c->bandwidth_Bps && c->bandwidth_Bps[r] > 0)
      l->sec_per_byte = c->time_scale / c->bandwidth_Bps[r];
    l->crosses_access = t->shaped && r != c->rank && (!c->same_access || !c->same_access[r]);
  }
  if (t->shaped && c->uplink_Bps > 0) t->up_sec_per_byte = c->time_scale / c->uplink_Bps;
  if (t->shaped && c->downlink_Bps > 0) t->down_sec_per_byte = c->time_scale / c->downlink_Bps;
  if (rc == WT_OK) rc = s_open(t, c);
  if (rc != WT_OK) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", wt_last_error());
    s_destroy(t);
    wt_fail(rc, "%s", msg);
    return NULL;
  }
  return t;
}

const char *parallel_zmq_transport_endpoint(const parallel_zmq_transport *t) {
  return t->bound;
}

const char *parallel_zmq_transport_outbox(const parallel_zmq_transport *t, int peer) {
  return peer >= 0 && peer < t->size ? t->links[peer].outbox : NULL;
}

static int s_connect_fail(parallel_zmq_transport *t, int peer, const char *what, const char *ep) {
  return wt_fail(WT_EINVAL, "zmq: rank %d cannot connect to %s of rank %d at '%s': %s", t->rank,
                 what, peer, ep ? ep : "(none)", zmq_strerror(errno));
}

/* Wires link r (zmq.h "Reachability"): where its PUSH connects, and where this rank's PULL
 * connects to receive from r. Runs before the threads start, so it may touch both sockets. */
static int s_connect_link(parallel_zmq_transport *t, int r, const char *const *endpoints,
                          const parallel_zmq_routes *routes) {
  s_link *l = &t->links[r];
  char what[320];
  if (s_reachable(t, r)) {
    if (!endpoints || !endpoints[r] || zmq_connect(l->push, endpoints[r]) != 0)
      return s_connect_fail(t, r, "the PULL", endpoints ? endpoints[r] : NULL);
    WT_CHECK(s_connect_streams(t, r, endpoints[r]));
    snprintf(what, sizeof what, "%s", endpoints[r]);
  } else if (l->outbox) {
    snprintf(what, sizeof what, "%s (its outbox here; it connects)", l->outbox);
  } else {
    const char *in = routes && routes->relay_in ? routes->relay_in[r] : NULL;
    if (!s_tcp_ok(in))
      return wt_fail(WT_EINVAL,
                     "zmq: ranks %d and %d are both unreachable, and no tcp:// relay inbox of "
                     "rank %d (routes.relay_in[%d]) was given to send through",
                     t->rank, r, r, r);
    if (zmq_connect(l->push, in) != 0) return s_connect_fail(t, r, "the relay inbox", in);
    snprintf(what, sizeof what, "relay %s", in);
  }
  l->endpoint = wt_xstrdup(what);
  /* Peers connect to a reachable rank's PULL, with several streams when configured: their
   * messages may come out of counter order (zmq_recv.c holds them back). */
  if (s_reachable(t, t->rank) && t->streams > 1) l->held = wt_xcalloc(S_MAX_HELD, sizeof *l->held);
  if (s_reachable(t, t->rank) || !s_reachable(t, r)) return WT_OK;
  const char *ob = routes && routes->outboxes ? routes->outboxes[r] : NULL;
  if (!s_tcp_ok(ob) || zmq_connect(t->pull, ob) != 0) return s_connect_fail(t, r, "the outbox", ob);
  return WT_OK;
}

/* An unreachable rank with unreachable peers collects their messages at its relay inbox. */
static int s_connect_outlet(parallel_zmq_transport *t, const parallel_zmq_routes *routes) {
  int needed = 0;
  for (int r = 0; r < t->size; r++)
    needed |= r != t->rank && !s_reachable(t, t->rank) && !s_reachable(t, r);
  if (!needed) return WT_OK;
  const char *out = routes ? routes->relay_out : NULL;
  if (!s_tcp_ok(out))
    return wt_fail(WT_EINVAL,
                   "zmq: rank %d is unreachable and has unreachable peers, but no tcp:// outlet "
                   "of its relay inbox (routes.relay_out) was given to collect from",
                   t->rank);
  if (zmq_connect(t->pull, out) != 0) return s_connect_fail(t, t->rank, "the relay outlet", out);
  return WT_OK;
}

/* Connects the links, then starts the threads (the receiver first: it owns the PULL from now). */
static int s_connect_all(parallel_zmq_transport *t, const char *const *endpoints,
                         const parallel_zmq_routes *routes) {
  for (int r = 0; r < t->size; r++)
    if (r != t->rank) WT_CHECK(s_connect_link(t, r, endpoints, routes));
  WT_CHECK(s_connect_outlet(t, routes));
  if (pthread_create(&t->th_recv, NULL, parallel_zmq_recv_main, t) != 0)
    return wt_fail(WT_EIO, "zmq: cannot start the receiver thread");
  t->started_recv = 1;
  if (pthread_create(&t->th_send, NULL, parallel_zmq_send_main, t) != 0)
    return wt_fail(WT_EIO, "zmq: cannot start the sender thread");
  t->started_send = 1;
  return WT_OK;
}

parallel_comm *parallel_zmq_transport_connect_routes(parallel_zmq_transport **t_p,
                                                     const char *const *endpoints,
                                                     const parallel_zmq_routes *routes) {
  parallel_zmq_transport *t = *t_p;
  *t_p = NULL;
  int rc = s_connect_all(t, endpoints, routes);
  if (rc != WT_OK) {
    char msg[512];
    snprintf(msg, sizeof msg, "%s", wt_last_error());
    s_destroy(t);
    wt_fail(rc, "%s", msg);
    return NULL;
  }
  parallel_comm *c = parallel_comm_new(&s_zmq_ops, t, t->rank, t->size);
  if (!c) s_destroy(t);
  return c;
}

parallel_comm *parallel_zmq_transport_connect(parallel_zmq_transport **t_p,
                                              const char *const *endpoints) {
  return parallel_zmq_transport_connect_routes(t_p, endpoints, NULL);
}

void parallel_zmq_transport_destroy(parallel_zmq_transport **t_p) {
  if (!t_p || !*t_p) return;
  s_destroy(*t_p);
  *t_p = NULL;
}

parallel_comm *parallel_zmq_comm_new(const parallel_zmq_config *cfg) {
  parallel_zmq_transport *t = parallel_zmq_transport_new(cfg);
  if (!t) return NULL;
  return parallel_zmq_transport_connect(&t, cfg->endpoints);
}

/* ---- context and counters ------------------------------------------------------------------ */

static parallel_zmq_transport *s_of(const parallel_comm *c) {
  return c && parallel_comm_ops(c) == &s_zmq_ops ? parallel_comm_ctx(c) : NULL;
}

int parallel_zmq_set_context(parallel_comm *c, const parallel_zmq_msg_context *ctx) {
  parallel_zmq_transport *t = s_of(c);
  if (!t) return wt_fail(WT_EINVAL, "zmq: set_context on a communicator of another transport");
  if (ctx->kind < 1 || ctx->kind > PARALLEL_ZMQ_KIND_MAX || ctx->kind == PARALLEL_ZMQ_KIND_BYE)
    return wt_fail(WT_EINVAL, "zmq: message kind %d is not one a caller may send", ctx->kind);
  if (ctx->codec > PARALLEL_ZMQ_CODEC_MAX)
    return wt_fail(WT_EINVAL, "zmq: codec id %d out of range [0, %d]", ctx->codec,
                   PARALLEL_ZMQ_CODEC_MAX);
  pthread_mutex_lock(&t->mu);
  t->msg = *ctx;
  pthread_mutex_unlock(&t->mu);
  return WT_OK;
}

int parallel_zmq_set_timeout(parallel_comm *c, double timeout_s) {
  parallel_zmq_transport *t = s_of(c);
  if (!t) return wt_fail(WT_EINVAL, "zmq: set_timeout on a communicator of another transport");
  if (!(timeout_s > 0)) return wt_fail(WT_EINVAL, "zmq: timeout_s must be > 0 (got %g)", timeout_s);
  pthread_mutex_lock(&t->mu);
  t->timeout_s = timeout_s;
  pthread_mutex_unlock(&t->mu);
  return WT_OK;
}

parallel_zmq_link_stats parallel_zmq_link_stats_get(const parallel_comm *c, int peer) {
  parallel_zmq_link_stats st;
  memset(&st, 0, sizeof st);
  parallel_zmq_transport *t = s_of(c);
  if (!t || peer < 0 || peer >= t->size) return st;
  pthread_mutex_lock(&t->mu);
  st = t->links[peer].st;
  pthread_mutex_unlock(&t->mu);
  return st;
}

uint64_t parallel_zmq_refused(const parallel_comm *c) {
  parallel_zmq_transport *t = s_of(c);
  if (!t) return 0;
  pthread_mutex_lock(&t->mu);
  uint64_t n = t->refused;
  pthread_mutex_unlock(&t->mu);
  return n;
}
