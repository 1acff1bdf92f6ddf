/* zmq_recv — the ZeroMQ transport's receiver thread: it owns the bound PULL socket and
 * the monitors of the PUSH sockets, validates every message, files it in its source's mailbox,
 * and marks a peer gone when it says goodbye or its connection drops. */
#include "parallel/transport/zmq_transport_internal.h"

#include <assert.h>
#include <errno.h>
#include <string.h>

/* The emulated downlink, shared by every message that crosses this rank's access link: a message
 * whose last byte arrived now began arriving bytes/β earlier (the sender paced it at its link's
 * rate, taken as this rank's rate back to it); it occupies the downlink for bytes at the
 * downlink's rate from then or from when the downlink is free, whichever is later, and is handed
 * out when that ends. Returns the wall time it is ready (0: at once). Caller holds t->mu. */
static double s_downlink(parallel_zmq_transport *t, const s_link *l, size_t bytes) {
  if (!t->shaped || !l->crosses_access || t->down_sec_per_byte <= 0) return 0;
  const double now = wt_now_s(), began = now - (double)bytes * l->sec_per_byte;
  const double start = WT_MAX(began, t->down_free);
  t->down_free = start + (double)bytes * t->down_sec_per_byte;
  return t->down_free > now ? t->down_free : 0;
}

/* ---- receiver ------------------------------------------------------------------------------ */

static void s_refuse(parallel_zmq_transport *t, const char *problem, const parallel_zmq_header *h) {
  char tagbuf[48];
  if (h)
    WT_WARN("zmq: rank %d refused a message (%s): claims rank %d, %s, run %llu epoch %u step %u "
            "micro-batch %u tensor %u, %llu bytes, counter %llu; dropped",
            t->rank, problem, (int)h->src_rank, s_tag_name(h->tag, tagbuf, sizeof tagbuf),
            (unsigned long long)h->run_id, h->epoch, h->step, h->micro_batch, h->tensor_id,
            (unsigned long long)h->length, (unsigned long long)h->counter);
  else
    WT_WARN("zmq: rank %d refused a message (%s); dropped", t->rank, problem);
  pthread_mutex_lock(&t->mu);
  t->refused++;
  pthread_mutex_unlock(&t->mu);
}

/* Refuses and frees l's held message i. */
static void s_held_drop(parallel_zmq_transport *t, s_link *l, int i, const char *why) {
  s_held *e = &l->held[i];
  s_refuse(t, why, &e->h);
  for (int k = 0; k < e->n; k++) zmq_msg_close(&e->parts[k]);
  free(e->parts);
  l->held[i] = l->held[--l->nheld];
}

/* Takes a peer's authenticated hello: a session random seen before and since replaced is an old
 * session's (refused); a new one becomes the link's session (keys of both directions change, its
 * counters start again) and is answered with this process's hello unless the peer already
 * echoes this process's random. */
static const char *s_hello(parallel_zmq_transport *t, s_link *l, const uint8_t *body) {
  const uint8_t *random = body, *echo = body + PARALLEL_ZMQ_RANDOM_BYTES;
  uint8_t caps = body[2 * PARALLEL_ZMQ_RANDOM_BYTES];
  const char *problem = NULL;
  pthread_mutex_lock(&t->mu);
  int current = l->peer_gen && memcmp(random, l->peer_random, PARALLEL_ZMQ_RANDOM_BYTES) == 0;
  int old = 0;
  for (int i = 0; i < l->nseen && !current; i++)
    if (memcmp(l->seen[i], random, PARALLEL_ZMQ_RANDOM_BYTES) == 0) old = 1;
  if (old) {
    problem = "a replayed hello of an earlier session of that rank";
  } else if (!current) {
    if (l->nseen == S_MAX_SESSIONS) memmove(l->seen[0], l->seen[1], --l->nseen * sizeof *l->seen);
    memcpy(l->seen[l->nseen++], random, PARALLEL_ZMQ_RANDOM_BYTES);
    memcpy(l->peer_random, random, PARALLEL_ZMQ_RANDOM_BYTES);
    l->peer_caps = caps;
    l->peer_gen++;
    if (parallel_zmq_aead_session(&l->rx, l->base_rx, random, t->random, caps, t->caps) != 0)
      WT_WARN("zmq: rank %d: OpenSSL cannot make the cipher of a link; its messages will be "
              "refused",
              t->rank);
    l->rx_next = 0;
  }
  if (!problem && memcmp(echo, t->random, PARALLEL_ZMQ_RANDOM_BYTES) != 0) l->hello_due = 1;
  pthread_cond_broadcast(&t->cv_send);
  pthread_mutex_unlock(&t->mu);
  if (!old && !current)
    while (l->nheld) s_held_drop(t, l, 0, "held for the peer's earlier session, which it left");
  return problem;
}

/* Authenticates a sealed message from l's peer and opens its n payload parts in place (or
 * takes its hello; *hello is then 1). Returns NULL, or what is wrong with it. */
static const char *s_open_sealed(parallel_zmq_transport *t, s_link *l, const uint8_t *header,
                                 const parallel_zmq_header *h, zmq_msg_t *parts, int n,
                                 zmq_msg_t *trailer, int *hello) {
  size_t ntags = (size_t)WT_MAX(n, 1);
  if (!trailer || zmq_msg_size(trailer) != ntags * PARALLEL_ZMQ_TAG_BYTES)
    return "its trailer does not hold one tag per part (truncated or extended)";
  const uint8_t *tags = zmq_msg_data(trailer);
  if (h->kind == PARALLEL_ZMQ_KIND_HELLO) {
    *hello = 1;
    if (n != 1 || h->length != PARALLEL_ZMQ_HELLO_BYTES) return "a malformed hello";
    uint8_t mac[16];
    const uint8_t *body = zmq_msg_data(&parts[0]);
    parallel_zmq_aead_hello_mac(mac, l->base_rx, header, PARALLEL_ZMQ_HEADER_BYTES, body,
                                PARALLEL_ZMQ_HELLO_BYTES);
    if (sodium_memcmp(mac, tags, 16) != 0)
      return "a hello not made with the claimed rank's key (a stranger, or a peer given "
             "another key pair than this rank was given for it)";
    return s_hello(t, l, body);
  }
  pthread_mutex_lock(&t->mu);
  int keyed = l->peer_gen != 0;
  pthread_mutex_unlock(&t->mu);
  if (!keyed) return "a sealed message before its sender's hello (no session key yet)";
  if (h->counter < l->rx_next) return "replayed or reordered (its counter is below the next one)";
  if (h->counter > UINT64_MAX - ntags) return "counter out of range";
  for (int k = 0; k < n || (k == 0 && n == 0); k++) {
    uint8_t *buf = n ? zmq_msg_data(&parts[k]) : NULL;
    size_t len = n ? zmq_msg_size(&parts[k]) : 0;
    if (parallel_zmq_aead_open(&l->rx, h->counter + (uint64_t)k, header, PARALLEL_ZMQ_HEADER_BYTES,
                               buf, len, tags + (size_t)k * PARALLEL_ZMQ_TAG_BYTES) != 0)
      return "authentication failed (altered in transit, or not sealed with the claimed "
             "rank's key for this session)";
  }
  return NULL; /* s_accept moves rx_next past it once it is taken in order */
}

/* Moves *part to the end of m's parts, making room as needed (ZeroMQ messages are moved
 * through its API, never copied). */
static void s_parts_append(s_in *m, zmq_msg_t *part) {
  if (m->nparts == m->cap_parts) {
    int cap = m->cap_parts ? 2 * m->cap_parts : 16;
    zmq_msg_t *more = wt_xmalloc((size_t)cap * sizeof *more);
    for (int i = 0; i < m->nparts; i++) {
      zmq_msg_init(&more[i]);
      zmq_msg_move(&more[i], &m->parts[i]);
      zmq_msg_close(&m->parts[i]);
    }
    free(m->parts);
    m->parts = more;
    m->cap_parts = cap;
  }
  zmq_msg_init(&m->parts[m->nparts]);
  zmq_msg_move(&m->parts[m->nparts++], part);
}

/* Files a received message in l's mailbox and wakes the callers waiting for one. */
static void s_file(parallel_zmq_transport *t, s_link *l, s_in *m) {
  pthread_mutex_lock(&t->mu);
  m->ready_at = s_downlink(t, l, m->bytes);
  if (l->itail)
    l->itail->next = m;
  else
    l->ihead = m;
  l->itail = m;
  l->in_bytes += m->bytes;
  l->st.bytes_recv += m->bytes;
  l->st.msgs_recv++;
  pthread_cond_broadcast(&t->cv_in);
  pthread_mutex_unlock(&t->mu);
}

/* Whether an accepted chunk continues the message being put together on l: the same header
 * but for flags and counter, on a sealed link the nonce right after the last chunk's
 * (`expected`), and no more bytes than its length. Returns NULL, or what is wrong. */
static const char *s_chunk_misfit(const s_link *l, const parallel_zmq_header *h, uint64_t expected,
                                  uint64_t bytes) {
  const parallel_zmq_header *f = &l->partial_h;
  if (!l->partial) return "a chunk without the first chunk of its message (cut short or reordered)";
  if (h->kind != f->kind || h->codec != f->codec || h->tag != f->tag || h->step != f->step ||
      h->micro_batch != f->micro_batch || h->tensor_id != f->tensor_id || h->length != f->length ||
      h->epoch != f->epoch)
    return "a chunk of another message than the one it would continue";
  if ((h->flags & PARALLEL_ZMQ_FLAG_SEALED) && h->counter != expected)
    return "a chunk out of order (one before it is missing, or it is replayed or reordered)";
  if (l->partial->bytes + bytes > h->length) return "chunks longer than their payload";
  return NULL;
}

/* Adds an accepted chunk (one part, `bytes` long) to the message being put together on l and
 * files that message once it is whole. A first chunk starts a message, refusing one still
 * incomplete; a chunk that does not fit refuses itself and the incomplete message. Returns
 * NULL, or what is wrong with the chunk. */
static const char *s_chunk_add(parallel_zmq_transport *t, s_link *l, const parallel_zmq_header *h,
                               uint64_t expected, zmq_msg_t *part, uint64_t bytes) {
  const char *problem = NULL;
  if (h->flags & PARALLEL_ZMQ_FLAG_FIRST) {
    if (l->partial)
      s_refuse(t, "a chunked message cut short (another one began before its last chunk)",
               &l->partial_h);
  } else {
    problem = s_chunk_misfit(l, h, expected, bytes);
  }
  if (l->partial && (problem || (h->flags & PARALLEL_ZMQ_FLAG_FIRST))) {
    s_in_free(l->partial);
    l->partial = NULL;
  }
  if (problem) return problem;
  if (!l->partial) {
    l->partial = wt_xcalloc(1, sizeof *l->partial);
    l->partial->tag = h->tag;
    l->partial_h = *h;
  }
  s_parts_append(l->partial, part);
  l->partial->bytes += (size_t)bytes;
  if (l->partial->bytes == h->length) {
    s_file(t, l, l->partial);
    l->partial = NULL;
  }
  return NULL;
}

/* Takes an authenticated message (its n payload frames, `bytes` in all; taken over) in l's
 * order: moves rx_next past its counters, adds a chunk to its message, marks a goodbye, or files
 * it. */
static void s_accept(parallel_zmq_transport *t, s_link *l, const parallel_zmq_header *h,
                     zmq_msg_t *parts, int n, uint64_t bytes) {
  int chunk = (h->flags & PARALLEL_ZMQ_FLAG_CHUNK) != 0;
  uint64_t expected = l->rx_next; /* a chunk's nonce, if it continues a message */
  if (h->flags & PARALLEL_ZMQ_FLAG_SEALED) l->rx_next = h->counter + (uint64_t)WT_MAX(n, 1);
  const char *problem = chunk ? s_chunk_add(t, l, h, expected, &parts[0], bytes) : NULL;
  if (!chunk && l->partial) { /* a link's chunks come back to back */
    s_refuse(t, "a chunked message cut short (another message came before its last chunk)",
             &l->partial_h);
    s_in_free(l->partial);
    l->partial = NULL;
  }
  if (problem || chunk || h->kind == PARALLEL_ZMQ_KIND_BYE) {
    if (problem) s_refuse(t, problem, h);
    for (int i = 0; i < n; i++) zmq_msg_close(&parts[i]);
    free(parts);
  }
  if (problem || chunk) return;
  if (h->kind == PARALLEL_ZMQ_KIND_BYE) {
    pthread_mutex_lock(&t->mu);
    l->gone = l->said_bye = 1;
    l->gone_at = wt_now_s();
    l->gone_why = "it closed its communicator (said goodbye)";
    pthread_cond_broadcast(&t->cv_in);
    pthread_mutex_unlock(&t->mu);
    return;
  }
  s_in *m = wt_xcalloc(1, sizeof *m);
  m->tag = h->tag;
  m->bytes = (size_t)bytes;
  m->nparts = m->cap_parts = n;
  m->parts = parts;
  s_file(t, l, m);
}

/* Takes l's held messages whose turn has come, in counter order; force: the lowest one also when
 * the counters before it never came (they are skipped, as one stream skips a lost message). */
static void s_release_held(parallel_zmq_transport *t, s_link *l, int force) {
  while (l->nheld) {
    int lo = 0;
    for (int i = 1; i < l->nheld; i++)
      if (l->held[i].h.counter < l->held[lo].h.counter) lo = i;
    if (l->held[lo].h.counter < l->rx_next) {
      s_held_drop(t, l, lo, "replayed (its counter was taken already)");
      continue;
    }
    if (l->held[lo].h.counter != l->rx_next && !force) return;
    force = 0;
    s_held e = l->held[lo];
    l->held[lo] = l->held[--l->nheld];
    s_accept(t, l, &e.h, e.parts, e.n, e.bytes);
  }
}

/* Holds an authenticated message that came ahead of rx_next on another stream. A second copy of
 * a held counter is a replay; a full hold gives up on the oldest gap. */
static void s_hold(parallel_zmq_transport *t, s_link *l, const parallel_zmq_header *h,
                   zmq_msg_t *parts, int n, uint64_t bytes) {
  for (int i = 0; i < l->nheld; i++)
    if (l->held[i].h.counter == h->counter) {
      s_refuse(t, "replayed (a message with its counter is already held)", h);
      for (int k = 0; k < n; k++) zmq_msg_close(&parts[k]);
      free(parts);
      return;
    }
  if (l->nheld == S_MAX_HELD) s_release_held(t, l, 1);
  l->held[l->nheld++] = (s_held){*h, parts, n, bytes, wt_now_s()};
  pthread_mutex_lock(&t->mu);
  l->st.msgs_held++;
  pthread_mutex_unlock(&t->mu);
}

/* Several streams: a link whose oldest held message has waited S_HOLD_S for the counters before
 * it takes it anyway (they were lost, or cut out on the way). */
static void s_held_expire(parallel_zmq_transport *t, s_link *l, double now) {
  if (!l->nheld) return;
  double oldest = now;
  for (int i = 0; i < l->nheld; i++) oldest = WT_MIN(oldest, l->held[i].since);
  if (now - oldest < S_HOLD_S) return;
  WT_WARN("zmq: rank %d: counters %llu.. from rank %d never came within %.1f s; skipped", t->rank,
          (unsigned long long)l->rx_next, (int)(l - t->links), S_HOLD_S);
  s_release_held(t, l, 1);
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
    if (n == S_MAX_PARTS + 1) { /* a flood of frames: drain the rest without keeping it */
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
  parallel_zmq_header h;
  const uint8_t *hb = zmq_msg_data(&head);
  const char *problem = parallel_zmq_header_decode(hb, zmq_msg_size(&head), &h);
  parallel_zmq_expect e = {t->run_id, t->epoch, t->size, t->rank};
  int decoded = problem == NULL, sealed = decoded && (h.flags & PARALLEL_ZMQ_FLAG_SEALED);
  zmq_msg_t *trailer = NULL;
  if (!problem && too_many) problem = "more payload frames than any sender makes";
  if (!problem && sealed && t->insecure)
    problem = "a sealed message on a plaintext link (this rank runs insecure, the sender not)";
  if (!problem && !sealed && !t->insecure)
    problem = "a plaintext message on a sealed link (the sender runs insecure, or is not a "
              "wantrain peer)";
  if (!problem && sealed && n > 0) { /* the last frame is the trailer, not payload */
    trailer = &parts[--n];
    total -= zmq_msg_size(trailer);
  }
  if (!problem) problem = parallel_zmq_header_check(&h, &e, total);
  if (!problem && (h.flags & PARALLEL_ZMQ_FLAG_CHUNK) && n != 1)
    problem = "a chunk of other than one part";
  int hello = 0;
  s_link *l = problem ? NULL : &t->links[h.src_rank];
  if (!problem && sealed) problem = s_open_sealed(t, l, hb, &h, parts, n, trailer, &hello);
  if (!problem && !sealed && h.kind == PARALLEL_ZMQ_KIND_HELLO)
    problem = "a hello on a plaintext link";
  if (trailer) zmq_msg_close(trailer);
  zmq_msg_close(&head);
  if (problem || hello) {
    if (problem) s_refuse(t, problem, decoded ? &h : NULL);
    for (int i = 0; i < n; i++) zmq_msg_close(&parts[i]);
    free(parts);
    return;
  }
  if (l->held && h.counter != l->rx_next) { /* several streams: one before it is on the way */
    s_hold(t, l, &h, parts, n, total);
    return;
  }
  s_accept(t, l, &h, parts, n, total);
  if (l->held) s_release_held(t, l, 0);
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
  }
  pthread_cond_broadcast(&t->cv_in);
  pthread_cond_broadcast(&t->cv_out);
  pthread_mutex_unlock(&t->mu);
done:
  zmq_msg_close(&ev);
  zmq_msg_close(&addr);
}

void *parallel_zmq_recv_main(void *p) {
  parallel_zmq_transport *t = p;
  zmq_pollitem_t *items = wt_xcalloc((size_t)t->size + 1, sizeof *items);
  int *peer_of = wt_xcalloc((size_t)t->size + 1, sizeof *peer_of);
  while (!atomic_load(&t->stop_recv)) {
    int n = 0;
    /* Bounded memory: stop reading while the mailboxes are over budget, unless a caller waits
     * for a message that is not there yet (it may be behind the queued ones). */
    pthread_mutex_lock(&t->mu);
    size_t held = 0;
    for (int r = 0; r < t->size; r++) {
      const s_link *l = &t->links[r];
      held += l->in_bytes + (l->partial ? l->partial->bytes : 0);
      for (int i = 0; i < l->nheld; i++) held += (size_t)l->held[i].bytes;
    }
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
    double now = wt_now_s();
    for (int r = 0; r < t->size; r++) s_held_expire(t, &t->links[r], now);
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
