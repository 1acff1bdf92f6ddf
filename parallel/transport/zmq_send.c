/* zmq_send — the ZeroMQ transport's sender thread and its queues: it owns the PUSH
 * sockets and drains the per-link queues, pacing each message when WAN emulation is on. */
#include "parallel/transport/zmq_transport_internal.h"

#include <assert.h>
#include <errno.h>
#include "common/bytes.h" // defines: little-endian field access

#include <string.h>

/* ---- sender -------------------------------------------------------------------------------- */

/* Wall time the next frame(s) of m are due: the end of their emulated serialisation plus α. */
static double s_due(const s_link *l, const s_out *m) {
  if (m->start == 0) return 0;
  size_t end = WT_MIN(m->bytes, m->sent + S_PART_BYTES);
  return m->start + l->alpha_w + (double)end * m->sec_per_byte;
}

/* Payload frames of m: one for an unshaped message up to S_ONE_FRAME_MAX, which the receiver
 * hands out without a copy (s_recv_view); chunks of S_ONE_FRAME_MAX for a larger unshaped one
 * (s_chunked); parts of S_PART_BYTES in one multipart message for a paced one. */
static size_t s_part_bytes(const s_out *m) {
  return m->start == 0 ? S_ONE_FRAME_MAX : S_PART_BYTES;
}

static int s_nparts(const s_out *m) {
  if (m->bytes == 0) return 0;
  return (int)((m->bytes + s_part_bytes(m) - 1) / s_part_bytes(m));
}

/* A large unpaced payload goes as chunks, one ZeroMQ message each: ZeroMQ's I/O thread
 * starts on a multipart message only once its last frame is handed over, and the receiver gets
 * it only whole, so only separate messages let the I/O threads move one part while this thread
 * seals the next and the receiver opens the last (zmq_protocol.h). */
static int s_chunked(const s_out *m) {
  return !m->hello && m->start == 0 && m->bytes > S_ONE_FRAME_MAX;
}

/* The header chunk k of m goes out with (its flags, on a sealed link its own counter): the
 * associated data its tag covers. */
static void s_chunk_header(const s_out *m, size_t k, int sealed,
                           uint8_t header[PARALLEL_ZMQ_HEADER_BYTES]) {
  memcpy(header, m->header, PARALLEL_ZMQ_HEADER_BYTES);
  header[7] |= PARALLEL_ZMQ_FLAG_CHUNK | (k == 0 ? PARALLEL_ZMQ_FLAG_FIRST : 0);
  if (sealed) wt_put_le64(header + 48, wt_get_le64(m->header + 48) + k);
}

/* Gives m its counters under l's key and room for its tags. Caller holds t->mu; m's header has
 * not gone out. */
static void s_count(s_link *l, s_out *m) {
  m->nparts = s_nparts(m);
  size_t ntags = (size_t)WT_MAX(m->nparts, 1);
  wt_put_le64(m->header + 48, l->tx_next);
  l->tx_next += ntags;
  free(m->trailer);
  m->trailer = wt_xmalloc(ntags * PARALLEL_ZMQ_TAG_BYTES);
}

/* Where part k of m lies in its payload, and the associated data its tag covers (`scratch`
 * holds a chunk's own header). */
static const uint8_t *s_part(const s_out *m, int k, size_t *off, size_t *len, uint8_t *scratch) {
  *off = (size_t)k * s_part_bytes(m);
  *len = WT_MIN(s_part_bytes(m), m->bytes - *off);
  if (!s_chunked(m)) return m->header;
  s_chunk_header(m, (size_t)k, 1, scratch);
  return scratch;
}

/* The bytes [off, off + len) of the concatenation of in[0, nin) (nin <= 2) as spans. */
static int s_slice(const parallel_zmq_span *in, int nin, size_t off, size_t len,
                   parallel_zmq_span out[2]) {
  int n = 0;
  for (int i = 0; i < nin && len; i++) {
    if (off >= in[i].bytes) {
      off -= in[i].bytes;
      continue;
    }
    size_t take = WT_MIN(len, in[i].bytes - off);
    out[n++] = (parallel_zmq_span){in[i].data + off, take};
    off = 0;
    len -= take;
  }
  return n;
}

/* Seals every part of m (counted) from in[0, nin) into out, or (open = 1) opens them in place
 * in out; its tags are m->trailer. Returns 0, or -1 when a part does not open. Caller holds
 * l->seal_mu. */
static int s_seal_all(s_link *l, const s_out *m, const parallel_zmq_span *in, int nin, uint8_t *out,
                      int open) {
  uint64_t base = wt_get_le64(m->header + 48);
  uint8_t scratch[PARALLEL_ZMQ_HEADER_BYTES];
  for (int k = 0; k < WT_MAX(m->nparts, 1); k++) {
    size_t off, len;
    const uint8_t *ad = s_part(m, k, &off, &len, scratch);
    uint8_t *tag = m->trailer + (size_t)k * PARALLEL_ZMQ_TAG_BYTES;
    if (open) {
      if (parallel_zmq_aead_open(&l->tx, base + (uint64_t)k, ad, PARALLEL_ZMQ_HEADER_BYTES,
                                 out + off, len, tag) != 0)
        return -1;
      continue;
    }
    parallel_zmq_span piece[2];
    int n = s_slice(in, nin, off, len, piece);
    parallel_zmq_aead_seal_spans(&l->tx, base + (uint64_t)k, ad, PARALLEL_ZMQ_HEADER_BYTES, piece,
                                 n, out + off, tag);
  }
  return 0;
}

/* The peer's session changed (it restarted): every queued message whose header has not gone
 * out gets its counters again under the new key, so messages sealed at enqueue under the old
 * one are opened back to plaintext first (one that will not open is dropped, with a warning).
 * Then the key of the new session. Caller holds t->mu. */
static void s_new_session(parallel_zmq_transport *t, s_link *l) {
  pthread_mutex_lock(&l->seal_mu);
  for (s_out *m = l->head, *prev = NULL, *next; m; m = next) {
    next = m->next;
    if (m->hello || m->header_sent || !m->trailer) {
      prev = m;
      continue;
    }
    int lost = m->presealed && m->sealed_done && s_seal_all(l, m, NULL, 0, m->data, 1) != 0;
    if (lost) {
      WT_WARN("zmq: rank %d: a message queued for rank %d does not open again for its new "
              "session; dropped",
              t->rank, (int)(l - t->links));
      if (prev)
        prev->next = next;
      else
        l->head = next;
      if (l->tail == m) l->tail = prev;
      l->queued_bytes -= m->bytes;
      s_out_unref(m);
      continue;
    }
    m->presealed = m->sealed_done = 0;
    free(m->trailer);
    m->trailer = NULL;
    l->uncounted++;
    prev = m;
  }
  if (parallel_zmq_aead_session(&l->tx, l->base_tx, t->random, l->peer_random, t->caps,
                                l->peer_caps) != 0)
    WT_WARN("zmq: rank %d: OpenSSL cannot make the cipher of the link to rank %d; its "
            "messages will be refused",
            t->rank, (int)(l - t->links));
  pthread_mutex_unlock(&l->seal_mu);
  l->tx_gen = l->peer_gen;
  l->tx_next = 0;
}

/* Counts m at the head of the queue (it was queued before it could be sealed at once); an empty
 * payload's tag seals the header alone, here. Caller holds t->mu. */
static void s_seal_begin(s_link *l, s_out *m) {
  s_count(l, m);
  l->uncounted--;
  if (m->nparts == 0) {
    pthread_mutex_lock(&l->seal_mu);
    parallel_zmq_aead_seal(&l->tx, wt_get_le64(m->header + 48), m->header,
                           PARALLEL_ZMQ_HEADER_BYTES, NULL, 0, m->trailer);
    pthread_mutex_unlock(&l->seal_mu);
  }
}

/* Hands m's next chunks to ZeroMQ, each sealed (unless sealed at enqueue) just before it goes
 * under its own nonce (the message's counter + its index) with its own header as associated
 * data. Returns 1 when the
 * message is done, 0 when the pipe is full (l->blocked; the next call goes on from there). */
static int s_push_chunks(s_link *l, s_out *m) {
  int sealed = m->trailer != NULL;
  uint64_t base = wt_get_le64(m->header + 48);
  while (m->sent < m->bytes) {
    size_t k = m->sent / S_ONE_FRAME_MAX, len = WT_MIN(S_ONE_FRAME_MAX, m->bytes - m->sent);
    uint8_t header[PARALLEL_ZMQ_HEADER_BYTES];
    s_chunk_header(m, k, sealed, header);
    void *sock = s_stream(l, (int)((base + k) % (uint64_t)l->nstreams));
    if (zmq_send(sock, header, sizeof header, ZMQ_DONTWAIT | ZMQ_SNDMORE) < 0) {
      l->blocked = 1; /* EAGAIN: the pipe is full; nothing of this chunk was sent */
      l->blocked_on = sock;
      return 0;
    }
    m->header_sent = 1; /* from here on the message's session and counters are fixed */
    l->blocked = 0;
    uint8_t *tag = sealed ? m->trailer + k * PARALLEL_ZMQ_TAG_BYTES : NULL;
    if (sealed && !m->presealed) {
      pthread_mutex_lock(&l->seal_mu);
      parallel_zmq_aead_seal(&l->tx, base + k, header, sizeof header, m->data + m->sent, len, tag);
      pthread_mutex_unlock(&l->seal_mu);
    }
    zmq_msg_t f;
    atomic_fetch_add(&m->refs, 1);
    zmq_msg_init_data(&f, m->data + m->sent, len, s_free_frame, m);
    m->sent += len;
    zmq_msg_send(&f, sock, sealed ? ZMQ_SNDMORE : 0);
    if (sealed) zmq_send(sock, tag, PARALLEL_ZMQ_TAG_BYTES, 0);
  }
  return 1;
}

/* Hands a hello to ZeroMQ on each of the link's streams, so that on every stream it comes before
 * the messages sealed for the session it announces. Returns 1 when done, 0 when a pipe is full
 * (l->blocked; the next call goes on with that stream). */
static int s_push_hello(s_link *l, s_out *m) {
  while (m->hello_streams < l->nstreams) {
    void *sock = s_stream(l, m->hello_streams);
    if (zmq_send(sock, m->header, PARALLEL_ZMQ_HEADER_BYTES, ZMQ_DONTWAIT | ZMQ_SNDMORE) < 0) {
      l->blocked = 1;
      l->blocked_on = sock;
      return 0;
    }
    m->header_sent = 1;
    zmq_send(sock, m->data, m->bytes, ZMQ_SNDMORE);
    zmq_send(sock, m->trailer, PARALLEL_ZMQ_TAG_BYTES, 0);
    m->hello_streams++;
  }
  l->blocked = 0;
  return 1;
}

/* Hands the next frames of the link's head message to ZeroMQ, sealing each part in place just
 * before it goes (unless it was sealed at enqueue). Returns 1 when the message is done, 0 when it
 * must wait (pacing or a full pipe; l->blocked says which). Called without the mutex: only this
 * thread pops heads or touches the frames in progress; l->tx is used under l->seal_mu. */
static int s_push_some(parallel_zmq_transport *t, s_link *l, s_out *m, double now) {
  (void)t;
  if (m->hello) return s_push_hello(l, m);
  if (s_chunked(m)) return s_push_chunks(l, m);
  int sealed = m->trailer && !m->presealed; /* sealed here, part by part */
  void *sock = s_stream(l, (int)(wt_get_le64(m->header + 48) % (uint64_t)l->nstreams));
  if (!m->header_sent) {
    m->nparts = s_nparts(m);
    int flags = ZMQ_DONTWAIT | (m->bytes || m->trailer ? ZMQ_SNDMORE : 0);
    if (zmq_send(sock, m->header, PARALLEL_ZMQ_HEADER_BYTES, flags) < 0) {
      l->blocked = 1; /* EAGAIN: the pipe is full; nothing of this message was sent */
      l->blocked_on = sock;
      return 0;
    }
    m->header_sent = 1;
  }
  l->blocked = 0;
  while (m->sent < m->bytes) {
    if (m->start != 0 && s_due(l, m) > now) return 0;
    size_t len = m->nparts == 1 ? m->bytes : WT_MIN(S_PART_BYTES, m->bytes - m->sent);
    size_t k = m->nparts == 1 ? 0 : m->sent / S_PART_BYTES;
    if (sealed) {
      pthread_mutex_lock(&l->seal_mu);
      parallel_zmq_aead_seal(&l->tx, wt_get_le64(m->header + 48) + k, m->header,
                             PARALLEL_ZMQ_HEADER_BYTES, m->data + m->sent, len,
                             m->trailer + k * PARALLEL_ZMQ_TAG_BYTES);
      pthread_mutex_unlock(&l->seal_mu);
    }
    zmq_msg_t f;
    atomic_fetch_add(&m->refs, 1);
    zmq_msg_init_data(&f, m->data + m->sent, len, s_free_frame, m);
    m->sent += len;
    /* After the first frame ZeroMQ accepts the rest of a multipart message without blocking. */
    zmq_msg_send(&f, sock, m->sent < m->bytes || m->trailer ? ZMQ_SNDMORE : 0);
  }
  if (m->trailer)
    zmq_send(sock, m->trailer, (size_t)WT_MAX(m->nparts, 1) * PARALLEL_ZMQ_TAG_BYTES, 0);
  return 1;
}

void *parallel_zmq_send_main(void *p) {
  parallel_zmq_transport *t = p;
  zmq_pollitem_t *items = wt_xcalloc((size_t)t->size, sizeof *items);
  pthread_mutex_lock(&t->mu);
  while (!atomic_load(&t->stop_send)) {
    double now = wt_now_s(), next = now + S_POLL_MS * 1e-3;
    int nblocked = 0, progressed = 0;
    for (int r = 0; r < t->size; r++) {
      s_link *l = &t->links[r];
      if (l->hello_due && l->push && (!l->head || !l->head->header_sent)) {
        s_out *h = parallel_zmq_hello_new(t, l);
        h->next = l->head;
        l->head = h;
        if (!l->tail) l->tail = h;
        l->hello_due = 0;
      }
      s_out *m = l->head;
      if (!m || m->filling) continue; /* a filling message's caller wakes this thread */
      if (!t->insecure && !m->hello && !m->header_sent) {
        if (l->peer_gen == 0) continue; /* no session yet: the peer's hello wakes this thread */
        if (l->tx_gen != l->peer_gen) s_new_session(t, l);
        m = l->head; /* s_new_session may drop messages */
        if (!m || m->filling) continue;
        if (!m->trailer) s_seal_begin(l, m);
      }
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
        if (!m->hello) {
          l->queued_bytes -= m->bytes;
          l->st.bytes_sent += m->bytes;
          l->st.msgs_sent++;
        }
        s_out_unref(m);
        progressed = 1;
        pthread_cond_broadcast(&t->cv_out);
      } else if (l->blocked) {
        items[nblocked++] = (zmq_pollitem_t){l->blocked_on, 0, ZMQ_POLLOUT, 0};
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
      for (int i = 0; i < t->links[r].nstreams; i++) {
        if (gone) zmq_setsockopt(s_stream(&t->links[r], i), ZMQ_LINGER, &zero, sizeof zero);
        zmq_close(s_stream(&t->links[r], i));
      }
    }
  return NULL;
}

/* Appends a message to the link's queue, stamping its emulated start: when it was handed over
 * (`ready`, the wall time of the send call, since a NIC starts serialising while the rest of a
 * buffer is still being copied) or when the link is free, whichever is later; a message that
 * crosses this rank's access link also waits for its uplink, which every such message shares,
 * and goes at the slower of the path's and the uplink's rates. Caller holds t->mu. */
void parallel_zmq_enqueue(parallel_zmq_transport *t, s_link *l, s_out *m, double ready,
                          int seal_now) {
  if (t->shaped) {
    double now = ready;
    double start = WT_MAX(now, l->link_free);
    m->sec_per_byte = l->sec_per_byte;
    if (l->crosses_access && t->up_sec_per_byte > 0) {
      start = WT_MAX(start, t->up_free);
      m->sec_per_byte = WT_MAX(m->sec_per_byte, t->up_sec_per_byte);
      t->up_free = start + (double)m->bytes * t->up_sec_per_byte;
    }
    l->link_free = start + (double)m->bytes * m->sec_per_byte;
    m->start = start > 0 ? start : 1e-9;
    l->st.shaped_s += l->link_free + l->alpha_w - now;
  }
  if (l->tail)
    l->tail->next = m;
  else
    l->head = m;
  l->tail = m;
  l->queued_bytes += m->bytes;
  if (!t->insecure && !m->hello) {
    /* Sealing at enqueue: counters in queue order, so only behind messages already counted. */
    if (seal_now && l->uncounted == 0 && l->peer_gen && l->tx_gen == l->peer_gen && l->tx.ctx) {
      s_count(l, m);
      m->presealed = 1;
    } else {
      l->uncounted++;
    }
  }
  if (!m->filling) pthread_cond_signal(&t->cv_send); /* else parallel_zmq_fill wakes it */
}

void parallel_zmq_fill(parallel_zmq_transport *t, s_link *l, s_out *m, const parallel_zmq_span *in,
                       int nin) {
  parallel_zmq_span own = {m->data, m->bytes};
  if (nin == 0) in = &own, nin = 1;
  pthread_mutex_lock(&l->seal_mu);
  int sealed = m->presealed; /* 0 when a new session took its counters back (s_new_session) */
  if (sealed) {
    s_seal_all(l, m, in, nin, m->data, 0);
    m->sealed_done = 1;
  }
  pthread_mutex_unlock(&l->seal_mu);
  if (!sealed && in != &own)
    for (size_t i = 0, off = 0; i < (size_t)nin; off += in[i++].bytes)
      if (in[i].bytes) memcpy(m->data + off, in[i].data, in[i].bytes);
  pthread_mutex_lock(&t->mu);
  m->filling = 0;
  pthread_cond_signal(&t->cv_send);
  pthread_mutex_unlock(&t->mu);
}

s_out *parallel_zmq_out_new(const parallel_zmq_transport *t, const parallel_zmq_msg_context *ctx,
                            int kind, int tag, void *owned, size_t bytes) {
  s_out *m = wt_xcalloc(1, sizeof *m);
  m->data = owned ? owned : bytes ? wt_xmalloc(bytes) : NULL;
  m->bytes = bytes;
  atomic_init(&m->refs, 1);
  parallel_zmq_header h = {.kind = (uint8_t)kind,
                           .codec = ctx->codec,
                           .flags = t->insecure ? 0 : PARALLEL_ZMQ_FLAG_SEALED,
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

s_out *parallel_zmq_hello_new(const parallel_zmq_transport *t, const s_link *l) {
  uint8_t *body = wt_xmalloc(PARALLEL_ZMQ_HELLO_BYTES);
  memcpy(body, t->random, PARALLEL_ZMQ_RANDOM_BYTES);
  memcpy(body + PARALLEL_ZMQ_RANDOM_BYTES, l->peer_random, PARALLEL_ZMQ_RANDOM_BYTES);
  body[2 * PARALLEL_ZMQ_RANDOM_BYTES] = t->caps;
  parallel_zmq_msg_context ctx = {0};
  s_out *m =
      parallel_zmq_out_new(t, &ctx, PARALLEL_ZMQ_KIND_HELLO, 0, body, PARALLEL_ZMQ_HELLO_BYTES);
  m->hello = 1;
  m->nparts = 1;
  m->trailer = wt_xmalloc(PARALLEL_ZMQ_TAG_BYTES);
  parallel_zmq_aead_hello_mac(m->trailer, l->base_tx, m->header, PARALLEL_ZMQ_HEADER_BYTES, body,
                              PARALLEL_ZMQ_HELLO_BYTES);
  return m;
}
