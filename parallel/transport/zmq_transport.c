/* zmq_transport — the ZeroMQ back end of parallel_transport_ops (contract in zmq.h).
 *
 * Threads per transport, each owning its sockets (ZeroMQ sockets are not thread-safe):
 *  - the ZAP handler (REP on inproc://zeromq.zap.01) admits only the group's CURVE keys;
 *  - the receiver owns the bound PULL socket and the monitors of the PUSH sockets; it validates
 *    every message and files it in the source's mailbox, and marks a peer gone when it says
 *    goodbye or its connection drops;
 *  - the sender owns the PUSH sockets; it drains the per-link queues, pacing each message when
 *    WAN emulation is on.
 * One mutex guards the queues, mailboxes, link state and counters; the callers' send/recv only
 * touch those, never a socket. */
#include "parallel/transport/zmq.h"

#include "common/common.h"
#include "parallel/transport/zmq_protocol.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zmq.h>

#define S_PART_BYTES ((size_t)256 << 10)  /* pacing granularity of an emulated link */
#define S_ONE_FRAME_MAX ((size_t)1 << 20) /* unshaped payloads up to this go in one frame */
#define S_POLL_MS 50                      /* how often the threads look at their stop flags */
#define S_GONE_GRACE_S 0.5    /* a dropped peer's last messages may still be in flight */
#define S_HWM 16              /* messages ZeroMQ may hold per pipe */
#define S_MAX_PARTS (1 << 18) /* payload frames of one message: 64 GiB in 256 KiB parts */

/* One queued outgoing message; its buffer is shared by the ZeroMQ frames that carry it. */
typedef struct s_out {
  struct s_out *next;
  uint8_t header[PARALLEL_ZMQ_HEADER_BYTES];
  uint8_t *data;
  size_t bytes, sent; /* payload bytes, and how many of them are already handed to ZeroMQ */
  int header_sent;
  double start;    /* wall time the emulated serialisation starts (0 when unshaped) */
  atomic_int refs; /* this struct + one per frame in flight */
} s_out;

/* One received message waiting in a mailbox: its payload frames, kept as ZeroMQ messages. */
typedef struct s_in {
  struct s_in *next;
  int tag;
  size_t bytes;
  int nparts;
  zmq_msg_t *parts;
} s_in;

typedef struct {
  char *endpoint;
  void *push;    /* sender thread */
  void *monitor; /* receiver thread: events of push */
  s_out *head, *tail;
  size_t queued_bytes;
  double link_free;             /* wall time the emulated link finishes serialising its queue */
  double alpha_w, sec_per_byte; /* emulated latency and 1/β, in wall seconds */
  s_in *ihead, *itail;
  size_t in_bytes;
  int connected, gone, said_bye, dropped_after_bye, blocked;
  double gone_at;
  const char *gone_why;
  parallel_zmq_link_stats st;
} s_link;

struct parallel_zmq_transport {
  int rank, size;
  uint64_t run_id;
  uint32_t epoch;
  double timeout_s;
  size_t max_queue;
  int insecure, shaped;
  char *bound;
  uint8_t (*peer_keys)[32]; /* binary public keys, for the ZAP handler */
  char secret[41], public_key[41];
  char **peer_keys_z85;
  void *zctx, *pull, *zap;
  s_link *links;
  pthread_mutex_t mu;
  pthread_cond_t cv_in, cv_out, cv_send;
  pthread_t th_zap, th_recv, th_send;
  int started_zap, started_recv, started_send;
  atomic_int stop_zap, stop_recv, stop_send;
  int waiters;
  parallel_zmq_msg_context msg;
  uint64_t refused;
};

static const parallel_transport_ops s_zmq_ops;

/* ---- small helpers --------------------------------------------------------------------------- */

static struct timespec s_abs(double wall_s) {
  /* wt_now_s is CLOCK_MONOTONIC, and so are the conds (see s_cond_init). */
  struct timespec ts;
  ts.tv_sec = (time_t)wall_s;
  ts.tv_nsec = (long)((wall_s - (double)ts.tv_sec) * 1e9);
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  return ts;
}

static void s_cond_init(pthread_cond_t *cv) {
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(cv, &attr);
  pthread_condattr_destroy(&attr);
}

static void s_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, double wall_s) {
  struct timespec ts = s_abs(wall_s);
  pthread_cond_timedwait(cv, mu, &ts);
}

static void s_out_unref(s_out *m) {
  if (atomic_fetch_sub(&m->refs, 1) == 1) {
    free(m->data);
    free(m);
  }
}

static void s_free_frame(void *data, void *hint) {
  (void)data;
  s_out_unref(hint);
}

static void s_in_free(s_in *m) {
  for (int i = 0; i < m->nparts; i++) zmq_msg_close(&m->parts[i]);
  free(m->parts);
  free(m);
}

/* "tag 5" or "reserved tag 0x40000011" — collective tags read better in hex. */
static const char *s_tag_name(int tag, char *buf, size_t cap) {
  if (tag >= PARALLEL_TAG_RESERVED)
    snprintf(buf, cap, "library tag 0x%x", (unsigned)tag);
  else
    snprintf(buf, cap, "tag %d", tag);
  return buf;
}

/* ---- ZAP handler --------------------------------------------------------------------------- */

/* Reads one ZAP request (RFC 27: version, request id, domain, address, identity, mechanism,
 * credentials...) and answers 200 with user id "rank N" for a group key, else 400. */
static void s_zap_serve_one(parallel_zmq_transport *t) {
  zmq_msg_t f[8];
  int n = 0, more = 1;
  while (more && n < 8) {
    zmq_msg_init(&f[n]);
    if (zmq_msg_recv(&f[n], t->zap, 0) < 0) {
      zmq_msg_close(&f[n]);
      break;
    }
    more = zmq_msg_more(&f[n]);
    n++;
  }
  while (more) { /* drain an over-long request */
    zmq_msg_t extra;
    zmq_msg_init(&extra);
    if (zmq_msg_recv(&extra, t->zap, 0) < 0)
      more = 0;
    else
      more = zmq_msg_more(&extra);
    zmq_msg_close(&extra);
  }
  if (n < 6) {
    for (int i = 0; i < n; i++) zmq_msg_close(&f[i]);
    return;
  }
  int rank = -1;
  const char *mech = zmq_msg_data(&f[5]);
  if (zmq_msg_size(&f[5]) == 5 && memcmp(mech, "CURVE", 5) == 0 && n >= 7 &&
      zmq_msg_size(&f[6]) == 32) {
    for (int r = 0; r < t->size; r++)
      if (r != t->rank && memcmp(zmq_msg_data(&f[6]), t->peer_keys[r], 32) == 0) rank = r;
  }
  char user[32] = "";
  const char *code = "400", *text = "key not in this group";
  if (rank >= 0) {
    snprintf(user, sizeof user, "rank %d", rank);
    code = "200";
    text = "OK";
  } else {
    char addr[64] = "?";
    size_t an = zmq_msg_size(&f[3]) < sizeof addr - 1 ? zmq_msg_size(&f[3]) : sizeof addr - 1;
    memcpy(addr, zmq_msg_data(&f[3]), an);
    addr[an] = 0;
    WT_WARN("zmq: rank %d refused a connection from %s: its public key is not one of the "
            "group's (a stray or hostile process, or a peer started with the wrong key file)",
            t->rank, addr);
    pthread_mutex_lock(&t->mu);
    t->refused++;
    pthread_mutex_unlock(&t->mu);
  }
  zmq_send(t->zap, "1.0", 3, ZMQ_SNDMORE);
  zmq_send(t->zap, zmq_msg_data(&f[1]), zmq_msg_size(&f[1]), ZMQ_SNDMORE);
  zmq_send(t->zap, code, 3, ZMQ_SNDMORE);
  zmq_send(t->zap, text, strlen(text), ZMQ_SNDMORE);
  zmq_send(t->zap, user, strlen(user), ZMQ_SNDMORE);
  zmq_send(t->zap, "", 0, 0);
  for (int i = 0; i < n; i++) zmq_msg_close(&f[i]);
}

static void *s_zap_main(void *p) {
  parallel_zmq_transport *t = p;
  while (!atomic_load(&t->stop_zap)) {
    zmq_pollitem_t it = {t->zap, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&it, 1, S_POLL_MS) > 0 && (it.revents & ZMQ_POLLIN)) s_zap_serve_one(t);
  }
  zmq_close(t->zap);
  return NULL;
}

/* ---- receiver ------------------------------------------------------------------------------ */

static void s_refuse(parallel_zmq_transport *t, const char *problem, const parallel_zmq_header *h,
                     const char *user) {
  char tagbuf[48];
  if (h)
    WT_WARN("zmq: rank %d refused a message (%s): claims rank %d, %s, run %llu epoch %u step %u "
            "micro-batch %u tensor %u, %llu bytes, authenticated as '%s'; dropped",
            t->rank, problem, (int)h->src_rank, s_tag_name(h->tag, tagbuf, sizeof tagbuf),
            (unsigned long long)h->run_id, h->epoch, h->step, h->micro_batch, h->tensor_id,
            (unsigned long long)h->length, user ? user : "-");
  else
    WT_WARN("zmq: rank %d refused a message (%s), authenticated as '%s'; dropped", t->rank, problem,
            user ? user : "-");
  pthread_mutex_lock(&t->mu);
  t->refused++;
  pthread_mutex_unlock(&t->mu);
}

/* Receives one multipart message from the PULL socket and files or refuses it. */
static void s_recv_one(parallel_zmq_transport *t) {
  zmq_msg_t head;
  zmq_msg_init(&head);
  if (zmq_msg_recv(&head, t->pull, ZMQ_DONTWAIT) < 0) {
    zmq_msg_close(&head);
    return;
  }
  int more = zmq_msg_more(&head), too_many = 0;
  int cap = 4, n = 0;
  zmq_msg_t *parts = wt_xmalloc((size_t)cap * sizeof *parts);
  uint64_t total = 0;
  while (more) {
    if (n == S_MAX_PARTS) { /* a flood of frames: drain the rest without keeping it */
      zmq_msg_t extra;
      zmq_msg_init(&extra);
      more = zmq_msg_recv(&extra, t->pull, 0) >= 0 && zmq_msg_more(&extra);
      zmq_msg_close(&extra);
      too_many = 1;
      continue;
    }
    if (n == cap) {
      zmq_msg_t *more_parts = wt_xmalloc((size_t)(cap *= 2) * sizeof *parts);
      for (int i = 0; i < n; i++) { /* ZeroMQ messages are moved through its API, never copied */
        zmq_msg_init(&more_parts[i]);
        zmq_msg_move(&more_parts[i], &parts[i]);
        zmq_msg_close(&parts[i]);
      }
      free(parts);
      parts = more_parts;
    }
    zmq_msg_init(&parts[n]);
    if (zmq_msg_recv(&parts[n], t->pull, 0) < 0) {
      zmq_msg_close(&parts[n]);
      break;
    }
    total += zmq_msg_size(&parts[n]);
    more = zmq_msg_more(&parts[n]);
    n++;
  }
  const char *user = t->insecure ? NULL : zmq_msg_gets(&head, "User-Id");
  parallel_zmq_header h;
  const char *problem = parallel_zmq_header_decode(zmq_msg_data(&head), zmq_msg_size(&head), &h);
  parallel_zmq_expect e = {t->run_id, t->epoch, t->size, t->rank};
  int decoded = problem == NULL;
  if (!problem && too_many) problem = "more payload frames than any sender makes";
  if (!problem) problem = parallel_zmq_header_check(&h, &e, total);
  if (!problem && user) {
    char want[32];
    snprintf(want, sizeof want, "rank %d", (int)h.src_rank);
    if (strcmp(user, want) != 0) problem = "source rank is not the one its key belongs to";
  }
  if (problem) {
    s_refuse(t, problem, decoded ? &h : NULL, user);
    for (int i = 0; i < n; i++) zmq_msg_close(&parts[i]);
    free(parts);
    zmq_msg_close(&head);
    return;
  }
  zmq_msg_close(&head);
  s_link *l = &t->links[h.src_rank];
  pthread_mutex_lock(&t->mu);
  if (h.kind == PARALLEL_ZMQ_KIND_BYE) {
    l->gone = l->said_bye = 1;
    l->gone_at = wt_now_s();
    l->gone_why = "it closed its communicator (said goodbye)";
    for (int i = 0; i < n; i++) zmq_msg_close(&parts[i]);
    free(parts);
  } else {
    s_in *m = wt_xcalloc(1, sizeof *m);
    m->tag = h.tag;
    m->bytes = (size_t)total;
    m->nparts = n;
    m->parts = parts;
    if (l->itail)
      l->itail->next = m;
    else
      l->ihead = m;
    l->itail = m;
    l->in_bytes += m->bytes;
    l->st.bytes_recv += total;
    l->st.msgs_recv++;
  }
  pthread_cond_broadcast(&t->cv_in);
  pthread_mutex_unlock(&t->mu);
}

/* Reads one monitor event of the PUSH socket to `peer` and updates the link's liveness. */
static void s_monitor_one(parallel_zmq_transport *t, int peer) {
  s_link *l = &t->links[peer];
  zmq_msg_t ev, addr;
  zmq_msg_init(&ev);
  zmq_msg_init(&addr);
  if (zmq_msg_recv(&ev, l->monitor, ZMQ_DONTWAIT) < 0) goto done;
  if (zmq_msg_more(&ev)) zmq_msg_recv(&addr, l->monitor, 0);
  if (zmq_msg_size(&ev) < 6) goto done;
  uint16_t event;
  memcpy(&event, zmq_msg_data(&ev), 2);
  pthread_mutex_lock(&t->mu);
  if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
    /* A handshake after the goodbye's connection dropped is a new process at the peer's
     * endpoint (one restarted with the same key): the link is live again. */
    if (l->said_bye && l->dropped_after_bye) l->said_bye = 0, l->dropped_after_bye = 0;
    l->connected = 1;
    if (!l->said_bye) l->gone = 0;
  } else if (event == ZMQ_EVENT_DISCONNECTED && l->said_bye) {
    l->dropped_after_bye = 1;
  } else if (event == ZMQ_EVENT_DISCONNECTED && l->connected && !l->gone) {
    l->gone = 1;
    l->gone_at = wt_now_s();
    l->gone_why = "its connection dropped (the process died or the network failed)";
  } else if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH && !l->gone) {
    l->gone = 1;
    l->gone_at = wt_now_s();
    l->gone_why = "it refused this rank's CURVE key (check both key files)";
    WT_WARN("zmq: rank %d: rank %d (%s) refused this rank's key", t->rank, peer, l->endpoint);
  }
  pthread_cond_broadcast(&t->cv_in);
  pthread_cond_broadcast(&t->cv_out);
  pthread_mutex_unlock(&t->mu);
done:
  zmq_msg_close(&ev);
  zmq_msg_close(&addr);
}

static void *s_recv_main(void *p) {
  parallel_zmq_transport *t = p;
  zmq_pollitem_t *items = wt_xcalloc((size_t)t->size + 1, sizeof *items);
  int *peer_of = wt_xcalloc((size_t)t->size + 1, sizeof *peer_of);
  while (!atomic_load(&t->stop_recv)) {
    int n = 0;
    /* Bounded memory: stop reading while the mailboxes are over budget, unless a caller waits
     * for a message that is not there yet (it may be behind the queued ones). */
    pthread_mutex_lock(&t->mu);
    size_t held = 0;
    for (int r = 0; r < t->size; r++) held += t->links[r].in_bytes;
    int accept = held < t->max_queue * 2 || t->waiters > 0;
    pthread_mutex_unlock(&t->mu);
    if (accept) {
      items[n] = (zmq_pollitem_t){t->pull, 0, ZMQ_POLLIN, 0};
      peer_of[n++] = -1;
    }
    for (int r = 0; r < t->size; r++)
      if (t->links[r].monitor) {
        items[n] = (zmq_pollitem_t){t->links[r].monitor, 0, ZMQ_POLLIN, 0};
        peer_of[n++] = r;
      }
    if (zmq_poll(items, n, S_POLL_MS) <= 0) continue;
    for (int i = 0; i < n; i++) {
      if (!(items[i].revents & ZMQ_POLLIN)) continue;
      if (peer_of[i] < 0)
        for (int k = 0; k < 64; k++) s_recv_one(t); /* drain a burst; returns at once if empty */
      else
        s_monitor_one(t, peer_of[i]);
    }
  }
  free(items);
  free(peer_of);
  zmq_close(t->pull);
  for (int r = 0; r < t->size; r++)
    if (t->links[r].monitor) zmq_close(t->links[r].monitor);
  return NULL;
}

/* ---- sender -------------------------------------------------------------------------------- */

/* Wall time the next frame(s) of m are due: the end of their emulated serialisation plus α. */
static double s_due(const s_link *l, const s_out *m) {
  if (m->start == 0) return 0;
  size_t end = WT_MIN(m->bytes, m->sent + S_PART_BYTES);
  return m->start + l->alpha_w + (double)end * l->sec_per_byte;
}

/* Hands the next frames of the link's head message to ZeroMQ. Returns 1 when the message is
 * done, 0 when it must wait (pacing or a full pipe; l->blocked says which). Called without the
 * mutex: only this thread pops heads or touches the frames in progress. */
static int s_push_some(parallel_zmq_transport *t, s_link *l, s_out *m, double now) {
  if (!m->header_sent) {
    int flags = ZMQ_DONTWAIT | (m->bytes ? ZMQ_SNDMORE : 0);
    if (zmq_send(l->push, m->header, PARALLEL_ZMQ_HEADER_BYTES, flags) < 0) {
      l->blocked = 1; /* EAGAIN: the pipe is full; nothing of this message was sent */
      return 0;
    }
    m->header_sent = 1;
  }
  l->blocked = 0;
  while (m->sent < m->bytes) {
    if (m->start != 0 && s_due(l, m) > now) return 0;
    /* A small unshaped message goes out in one frame, which the receiver hands out without a
     * copy (s_recv_view); larger or paced ones in parts. */
    int whole = m->start == 0 && m->bytes <= S_ONE_FRAME_MAX;
    size_t len = whole ? m->bytes - m->sent : WT_MIN(S_PART_BYTES, m->bytes - m->sent);
    zmq_msg_t f;
    atomic_fetch_add(&m->refs, 1);
    zmq_msg_init_data(&f, m->data + m->sent, len, s_free_frame, m);
    m->sent += len;
    /* After the first frame ZeroMQ accepts the rest of a multipart message without blocking. */
    zmq_msg_send(&f, l->push, m->sent < m->bytes ? ZMQ_SNDMORE : 0);
  }
  (void)t;
  return 1;
}

static void *s_send_main(void *p) {
  parallel_zmq_transport *t = p;
  zmq_pollitem_t *items = wt_xcalloc((size_t)t->size, sizeof *items);
  pthread_mutex_lock(&t->mu);
  while (!atomic_load(&t->stop_send)) {
    double now = wt_now_s(), next = now + S_POLL_MS * 1e-3;
    int nblocked = 0, progressed = 0;
    for (int r = 0; r < t->size; r++) {
      s_link *l = &t->links[r];
      s_out *m = l->head;
      if (!m) continue;
      double due = s_due(l, m);
      if (due > now) {
        next = WT_MIN(next, due);
        continue;
      }
      pthread_mutex_unlock(&t->mu);
      int done = s_push_some(t, l, m, now);
      pthread_mutex_lock(&t->mu);
      if (done) {
        l->head = m->next;
        if (!l->head) l->tail = NULL;
        l->queued_bytes -= m->bytes;
        l->st.bytes_sent += m->bytes;
        l->st.msgs_sent++;
        s_out_unref(m);
        progressed = 1;
        pthread_cond_broadcast(&t->cv_out);
      } else if (l->blocked) {
        items[nblocked++] = (zmq_pollitem_t){l->push, 0, ZMQ_POLLOUT, 0};
      } else {
        next = WT_MIN(next, s_due(l, m));
      }
    }
    if (progressed) continue;
    if (nblocked) {
      /* A full pipe: wait until one accepts more (or the next paced frame is due). */
      pthread_mutex_unlock(&t->mu);
      long ms = (long)((next - wt_now_s()) * 1e3) + 1;
      zmq_poll(items, nblocked, WT_MAX(1L, WT_MIN(ms, (long)S_POLL_MS)));
      pthread_mutex_lock(&t->mu);
    } else {
      s_wait_until(&t->cv_send, &t->mu, next);
    }
  }
  pthread_mutex_unlock(&t->mu);
  free(items);
  for (int r = 0; r < t->size; r++)
    if (t->links[r].push) {
      /* Drop whatever could not go out; linger bounds how long close waits for a dead peer. */
      for (s_out *m = t->links[r].head, *next; m; m = next) {
        next = m->next;
        s_out_unref(m);
      }
      t->links[r].head = t->links[r].tail = NULL;
      /* A peer known to be gone takes nothing more: don't linger on its unsent frames. */
      pthread_mutex_lock(&t->mu);
      int gone = t->links[r].gone;
      pthread_mutex_unlock(&t->mu);
      int zero = 0;
      if (gone) zmq_setsockopt(t->links[r].push, ZMQ_LINGER, &zero, sizeof zero);
      zmq_close(t->links[r].push);
    }
  return NULL;
}

/* Appends a message to the link's queue, stamping its emulated start: when it was handed over
 * (`ready`, the wall time of the send call, since a NIC starts serialising while the rest of a
 * buffer is still being copied) or when the link is free, whichever is later. Caller holds
 * t->mu. */
static void s_enqueue(parallel_zmq_transport *t, s_link *l, s_out *m, double ready) {
  if (t->shaped) {
    double now = ready;
    double start = WT_MAX(now, l->link_free);
    l->link_free = start + (double)m->bytes * l->sec_per_byte;
    m->start = start > 0 ? start : 1e-9;
    l->st.shaped_s += l->link_free + l->alpha_w - now;
  }
  if (l->tail)
    l->tail->next = m;
  else
    l->head = m;
  l->tail = m;
  l->queued_bytes += m->bytes;
  pthread_cond_signal(&t->cv_send);
}

/* A message for the queue; `owned` (a wt_xmalloc'ed block of `bytes`) becomes its buffer, else
 * buf is copied. */
static s_out *s_out_make(const parallel_zmq_transport *t, const parallel_zmq_msg_context *ctx,
                         int kind, int tag, const void *buf, void *owned, size_t bytes) {
  s_out *m = wt_xcalloc(1, sizeof *m);
  if (owned) {
    m->data = owned;
  } else {
    m->data = bytes ? wt_xmalloc(bytes) : NULL;
    if (bytes) memcpy(m->data, buf, bytes);
  }
  m->bytes = bytes;
  atomic_init(&m->refs, 1);
  parallel_zmq_header h = {.kind = (uint8_t)kind,
                           .codec = ctx->codec,
                           .run_id = t->run_id,
                           .epoch = t->epoch,
                           .src_rank = t->rank,
                           .tag = tag,
                           .step = ctx->step,
                           .micro_batch = ctx->micro_batch,
                           .tensor_id = ctx->tensor_id,
                           .length = bytes};
  parallel_zmq_header_encode(&h, m->header);
  return m;
}

static s_out *s_out_new(const parallel_zmq_transport *t, const parallel_zmq_msg_context *ctx,
                        int kind, int tag, const void *buf, size_t bytes) {
  return s_out_make(t, ctx, kind, tag, buf, NULL, bytes);
}

/* ---- the ops ------------------------------------------------------------------------------- */

static int s_gone_for_good(const s_link *l, double now) {
  return l->gone && (l->said_bye || now - l->gone_at >= S_GONE_GRACE_S);
}

/* Sends buf (copied) or owned (taken): queues the message once the link's queue has room. */
static int s_send_msg(parallel_zmq_transport *t, int peer, int tag, const void *buf, void *owned,
                      size_t bytes) {
  s_link *l = &t->links[peer];
  double t0 = wt_now_s(), deadline = t0 + t->timeout_s;
  /* The copy is made outside the lock, so a large message does not stall the other threads. */
  pthread_mutex_lock(&t->mu);
  parallel_zmq_msg_context ctx = t->msg;
  pthread_mutex_unlock(&t->mu);
  s_out *m = s_out_make(t, &ctx, ctx.kind, tag, buf, owned, bytes);
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
  if (rc == WT_OK) s_enqueue(t, l, m, waited ? wt_now_s() : t0);
  l->st.wait_s += wt_now_s() - t0;
  uint32_t step = ctx.step;
  const char *why = l->gone_why;
  pthread_mutex_unlock(&t->mu);
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
  return s_send_msg(vctx, peer, tag, buf, NULL, bytes);
}

static int s_send_owned(void *vctx, int peer, int tag, void *buf, size_t bytes) {
  return s_send_msg(vctx, peer, tag, NULL, buf, bytes);
}

/* Unlinks the oldest message with `tag` from the link's mailbox, or returns NULL. */
static s_in *s_take(s_link *l, int tag) {
  s_in *prev = NULL;
  for (s_in *m = l->ihead; m; prev = m, m = m->next) {
    if (m->tag != tag) continue;
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
  while (!(m = s_take(l, tag))) {
    double now = wt_now_s();
    if (s_gone_for_good(l, now)) {
      rc = WT_EIO;
      break;
    }
    if (now >= deadline) {
      rc = WT_ETIMEOUT;
      break;
    }
    s_wait_until(&t->cv_in, &t->mu, WT_MIN(deadline, now + 0.1));
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
        s_enqueue(t, &t->links[r], s_out_new(t, &t->msg, PARALLEL_ZMQ_KIND_BYE, 0, NULL, 0),
                  wt_now_s());
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
      if (t->links[r].push) zmq_close(t->links[r].push);
  }
  if (t->started_recv) {
    atomic_store(&t->stop_recv, 1);
    pthread_join(t->th_recv, NULL);
  } else {
    if (t->pull) zmq_close(t->pull);
    for (int r = 0; r < t->size; r++)
      if (t->links[r].monitor) zmq_close(t->links[r].monitor);
  }
  if (t->started_zap) {
    atomic_store(&t->stop_zap, 1);
    pthread_join(t->th_zap, NULL);
  } else if (t->zap) {
    zmq_close(t->zap);
  }
  if (t->zctx) zmq_ctx_term(t->zctx);
  for (int r = 0; r < t->size; r++) {
    s_link *l = &t->links[r];
    for (s_in *m = l->ihead, *next; m; m = next) {
      next = m->next;
      s_in_free(m);
    }
    free(l->endpoint);
  }
  pthread_mutex_destroy(&t->mu);
  pthread_cond_destroy(&t->cv_in);
  pthread_cond_destroy(&t->cv_out);
  pthread_cond_destroy(&t->cv_send);
  free(t->links);
  free(t->peer_keys);
  free(t->bound);
  memset(t->secret, 0, sizeof t->secret);
  free(t);
}

/* CURVE authenticates and encrypts every frame; plaintext links carry only TCP's checksum. */
static int s_integrity(void *vctx) {
  return !((parallel_zmq_transport *)vctx)->insecure;
}

static const parallel_transport_ops s_zmq_ops = {.name = "zmq",
                                                 .send = s_send,
                                                 .recv = s_recv,
                                                 .destroy = s_destroy,
                                                 .integrity = s_integrity,
                                                 .send_owned = s_send_owned,
                                                 .recv_view = s_recv_view,
                                                 .release = s_release};

/* ---- construction -------------------------------------------------------------------------- */

parallel_zmq_config parallel_zmq_config_default(void) {
  parallel_zmq_config c;
  memset(&c, 0, sizeof c);
  c.timeout_s = 60.0;
  c.max_queue_bytes = (size_t)64 << 20;
  c.time_scale = 1.0;
  c.io_threads = 2;
  return c;
}

static int s_key_ok(const char *k) {
  uint8_t bin[32];
  return k && strlen(k) == PARALLEL_ZMQ_KEY_CHARS && zmq_z85_decode(bin, k) != NULL;
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
    if (!zmq_has("curve"))
      return wt_fail(WT_ENOTSUP, "zmq: this libzmq has no CURVE support; install a libzmq "
                                 "built with libsodium, or pass insecure=1 for a local test");
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
  if (c->io_threads < 0 || c->io_threads > 16)
    return wt_fail(WT_EINVAL, "zmq: io_threads %d: use 1..16 (0 = the default 2)", c->io_threads);
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
  return WT_OK;
}

static void s_setopt_int(void *sock, int opt, int v) {
  zmq_setsockopt(sock, opt, &v, sizeof v);
}

/* Creates the context, ZAP handler, bound PULL socket, PUSH sockets (not yet connected) and
 * their monitors; starts the ZAP and receiver threads. */
static int s_open(parallel_zmq_transport *t, const parallel_zmq_config *c) {
  t->zctx = zmq_ctx_new();
  if (!t->zctx) return wt_fail(WT_EIO, "zmq: cannot create a context: %s", zmq_strerror(errno));
  /* Before the first socket: the I/O threads start with it. */
  if (zmq_ctx_set(t->zctx, ZMQ_IO_THREADS, c->io_threads ? c->io_threads : 2) != 0)
    return wt_fail(WT_EIO, "zmq: cannot set %d I/O threads: %s", c->io_threads,
                   zmq_strerror(errno));
  if (!t->insecure) {
    t->zap = zmq_socket(t->zctx, ZMQ_REP);
    if (zmq_bind(t->zap, "inproc://zeromq.zap.01") != 0)
      return wt_fail(WT_EIO, "zmq: cannot start the ZAP handler: %s", zmq_strerror(errno));
    if (pthread_create(&t->th_zap, NULL, s_zap_main, t) != 0)
      return wt_fail(WT_EIO, "zmq: cannot start the ZAP thread");
    t->started_zap = 1;
  }
  t->pull = zmq_socket(t->zctx, ZMQ_PULL);
  s_setopt_int(t->pull, ZMQ_RCVHWM, S_HWM);
  s_setopt_int(t->pull, ZMQ_LINGER, 0);
  if (!t->insecure) {
    s_setopt_int(t->pull, ZMQ_CURVE_SERVER, 1);
    zmq_setsockopt(t->pull, ZMQ_CURVE_SECRETKEY, t->secret, PARALLEL_ZMQ_KEY_CHARS);
    zmq_setsockopt(t->pull, ZMQ_ZAP_DOMAIN, "wantrain", 8);
  }
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
    l->push = zmq_socket(t->zctx, ZMQ_PUSH);
    s_setopt_int(l->push, ZMQ_SNDHWM, S_HWM);
    s_setopt_int(l->push, ZMQ_LINGER, (int)(WT_MIN(t->timeout_s, 2.0) * 1000));
    s_setopt_int(l->push, ZMQ_RECONNECT_IVL, 100);
    s_setopt_int(l->push, ZMQ_RECONNECT_IVL_MAX, 1000);
    if (!t->insecure) {
      zmq_setsockopt(l->push, ZMQ_CURVE_SERVERKEY, t->peer_keys_z85[r], PARALLEL_ZMQ_KEY_CHARS);
      zmq_setsockopt(l->push, ZMQ_CURVE_PUBLICKEY, t->public_key, PARALLEL_ZMQ_KEY_CHARS);
      zmq_setsockopt(l->push, ZMQ_CURVE_SECRETKEY, t->secret, PARALLEL_ZMQ_KEY_CHARS);
    }
    char mon[64];
    snprintf(mon, sizeof mon, "inproc://wt-monitor-%d", r);
    zmq_socket_monitor(l->push, mon,
                       ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_DISCONNECTED |
                           ZMQ_EVENT_HANDSHAKE_FAILED_AUTH);
    l->monitor = zmq_socket(t->zctx, ZMQ_PAIR);
    s_setopt_int(l->monitor, ZMQ_LINGER, 0);
    zmq_connect(l->monitor, mon);
  }
  if (pthread_create(&t->th_recv, NULL, s_recv_main, t) != 0)
    return wt_fail(WT_EIO, "zmq: cannot start the receiver thread");
  t->started_recv = 1;
  return WT_OK;
}

parallel_zmq_transport *parallel_zmq_transport_new(const parallel_zmq_config *c) {
  if (s_config_check(c) != WT_OK) return NULL;
  parallel_zmq_transport *t = wt_xcalloc(1, sizeof *t);
  t->rank = c->rank;
  t->size = c->size;
  t->run_id = c->run_id;
  t->epoch = c->epoch;
  t->timeout_s = c->timeout_s;
  t->max_queue = c->max_queue_bytes;
  t->insecure = c->insecure;
  t->msg.kind = PARALLEL_ZMQ_KIND_DATA;
  pthread_mutex_init(&t->mu, NULL);
  s_cond_init(&t->cv_in);
  s_cond_init(&t->cv_out);
  s_cond_init(&t->cv_send);
  atomic_init(&t->stop_zap, 0);
  atomic_init(&t->stop_recv, 0);
  atomic_init(&t->stop_send, 0);
  t->links = wt_xcalloc((size_t)t->size, sizeof *t->links);
  t->peer_keys = wt_xcalloc((size_t)t->size, sizeof *t->peer_keys);
  if (!t->insecure) {
    memcpy(t->secret, c->secret_key, 41);
    memcpy(t->public_key, c->public_key, 41);
    t->peer_keys_z85 = (char **)c->peer_public_keys; /* used only inside s_open */
    for (int r = 0; r < t->size; r++)
      if (r != t->rank) zmq_z85_decode(t->peer_keys[r], c->peer_public_keys[r]);
  } else {
    WT_WARN("zmq: rank %d runs INSECURE: plaintext, unauthenticated links (debugging only; "
            "drop insecure to use CurveZMQ)",
            t->rank);
  }
  t->shaped = c->latency_s || c->bandwidth_Bps;
  for (int r = 0; r < t->size; r++) {
    s_link *l = &t->links[r];
    if (c->latency_s) l->alpha_w = c->latency_s[r] * c->time_scale;
    if (c->bandwidth_Bps && c->bandwidth_Bps[r] > 0)
      l->sec_per_byte = c->time_scale / c->bandwidth_Bps[r];
  }
  int rc = s_open(t, c);
  t->peer_keys_z85 = NULL;
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

parallel_comm *parallel_zmq_transport_connect(parallel_zmq_transport **t_p,
                                              const char *const *endpoints) {
  parallel_zmq_transport *t = *t_p;
  *t_p = NULL;
  for (int r = 0; r < t->size; r++) {
    if (r == t->rank) continue;
    s_link *l = &t->links[r];
    if (!endpoints || !endpoints[r] || zmq_connect(l->push, endpoints[r]) != 0) {
      int rc = wt_fail(WT_EINVAL, "zmq: rank %d cannot connect to rank %d at '%s': %s", t->rank, r,
                       endpoints && endpoints[r] ? endpoints[r] : "(none)", zmq_strerror(errno));
      char msg[512];
      snprintf(msg, sizeof msg, "%s", wt_last_error());
      s_destroy(t);
      wt_fail(rc, "%s", msg);
      return NULL;
    }
    l->endpoint = wt_xstrdup(endpoints[r]);
  }
  if (pthread_create(&t->th_send, NULL, s_send_main, t) != 0) {
    s_destroy(t);
    wt_fail(WT_EIO, "zmq: cannot start the sender thread");
    return NULL;
  }
  t->started_send = 1;
  parallel_comm *c = parallel_comm_new(&s_zmq_ops, t, t->rank, t->size);
  if (!c) s_destroy(t);
  return c;
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
