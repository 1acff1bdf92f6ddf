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
static int s_nparts(const s_out *m) {
  if (m->bytes == 0) return 0;
  size_t part = m->start == 0 ? S_ONE_FRAME_MAX : S_PART_BYTES;
  return (int)((m->bytes + part - 1) / part);
}

/* A large unpaced payload goes as chunks, one ZeroMQ message each: ZeroMQ's I/O thread
 * starts on a multipart message only once its last frame is handed over, and the receiver gets
 * it only whole, so only separate messages let the I/O threads move one part while this thread
 * seals the next and the receiver opens the last (zmq_protocol.h). */
static int s_chunked(const s_out *m) {
  return !m->hello && m->start == 0 && m->bytes > S_ONE_FRAME_MAX;
}

/* Gives m its counters under l's key (current for the peer's session, made here when the peer's
 * session changed) and room for its tags; an empty payload's tag seals the header alone.
 * Caller holds t->mu; m's header has not gone out. */
static void s_seal_begin(parallel_zmq_transport *t, s_link *l, s_out *m) {
  if (l->tx_gen != l->peer_gen) {
    if (parallel_zmq_aead_session(&l->tx, l->base_tx, t->random, l->peer_random, t->caps,
                                  l->peer_caps) != 0)
      WT_WARN("zmq: rank %d: OpenSSL cannot make the cipher of the link to rank %d; its "
              "messages will be refused",
              t->rank, (int)(l - t->links));
    l->tx_gen = l->peer_gen;
    l->tx_next = 0;
  }
  m->nparts = s_nparts(m);
  size_t ntags = (size_t)WT_MAX(m->nparts, 1);
  wt_put_le64(m->header + 48, l->tx_next);
  l->tx_next += ntags;
  free(m->trailer);
  m->trailer = wt_xmalloc(ntags * PARALLEL_ZMQ_TAG_BYTES);
  if (m->nparts == 0)
    parallel_zmq_aead_seal(&l->tx, wt_get_le64(m->header + 48), m->header,
                           PARALLEL_ZMQ_HEADER_BYTES, NULL, 0, m->trailer);
}

/* Hands m's next chunks to ZeroMQ, each sealed just before it goes under its own nonce (the
 * message's counter + its index) with its own header as associated data. Returns 1 when the
 * message is done, 0 when the pipe is full (l->blocked; the next call goes on from there). */
static int s_push_chunks(s_link *l, s_out *m) {
  int sealed = m->trailer != NULL;
  uint64_t base = wt_get_le64(m->header + 48);
  while (m->sent < m->bytes) {
    size_t k = m->sent / S_ONE_FRAME_MAX, len = WT_MIN(S_ONE_FRAME_MAX, m->bytes - m->sent);
    uint8_t header[PARALLEL_ZMQ_HEADER_BYTES];
    memcpy(header, m->header, sizeof header);
    header[7] |= PARALLEL_ZMQ_FLAG_CHUNK | (k == 0 ? PARALLEL_ZMQ_FLAG_FIRST : 0);
    if (sealed) wt_put_le64(header + 48, base + k);
    if (zmq_send(l->push, header, sizeof header, ZMQ_DONTWAIT | ZMQ_SNDMORE) < 0) {
      l->blocked = 1; /* EAGAIN: the pipe is full; nothing of this chunk was sent */
      return 0;
    }
    m->header_sent = 1; /* from here on the message's session and counters are fixed */
    l->blocked = 0;
    uint8_t *tag = sealed ? m->trailer + k * PARALLEL_ZMQ_TAG_BYTES : NULL;
    if (sealed)
      parallel_zmq_aead_seal(&l->tx, base + k, header, sizeof header, m->data + m->sent, len, tag);
    zmq_msg_t f;
    atomic_fetch_add(&m->refs, 1);
    zmq_msg_init_data(&f, m->data + m->sent, len, s_free_frame, m);
    m->sent += len;
    zmq_msg_send(&f, l->push, sealed ? ZMQ_SNDMORE : 0);
    if (sealed) zmq_send(l->push, tag, PARALLEL_ZMQ_TAG_BYTES, 0);
  }
  return 1;
}

/* Hands the next frames of the link's head message to ZeroMQ, sealing each part in place just
 * before it goes. Returns 1 when the message is done, 0 when it must wait (pacing or a full
 * pipe; l->blocked says which). Called without the mutex: only this thread pops heads, touches
 * the frames in progress or l->tx. */
static int s_push_some(parallel_zmq_transport *t, s_link *l, s_out *m, double now) {
  (void)t;
  if (s_chunked(m)) return s_push_chunks(l, m);
  int sealed = m->trailer && !m->hello;
  if (!m->header_sent) {
    if (!m->hello) m->nparts = s_nparts(m);
    int flags = ZMQ_DONTWAIT | (m->bytes || m->trailer ? ZMQ_SNDMORE : 0);
    if (zmq_send(l->push, m->header, PARALLEL_ZMQ_HEADER_BYTES, flags) < 0) {
      l->blocked = 1; /* EAGAIN: the pipe is full; nothing of this message was sent */
      return 0;
    }
    m->header_sent = 1;
  }
  l->blocked = 0;
  while (m->sent < m->bytes) {
    if (m->start != 0 && s_due(l, m) > now) return 0;
    size_t len = m->nparts == 1 ? m->bytes : WT_MIN(S_PART_BYTES, m->bytes - m->sent);
    size_t k = m->nparts == 1 ? 0 : m->sent / S_PART_BYTES;
    if (sealed)
      parallel_zmq_aead_seal(&l->tx, wt_get_le64(m->header + 48) + k, m->header,
                             PARALLEL_ZMQ_HEADER_BYTES, m->data + m->sent, len,
                             m->trailer + k * PARALLEL_ZMQ_TAG_BYTES);
    zmq_msg_t f;
    atomic_fetch_add(&m->refs, 1);
    zmq_msg_init_data(&f, m->data + m->sent, len, s_free_frame, m);
    m->sent += len;
    /* After the first frame ZeroMQ accepts the rest of a multipart message without blocking. */
    zmq_msg_send(&f, l->push, m->sent < m->bytes || m->trailer ? ZMQ_SNDMORE : 0);
  }
  if (m->trailer)
    zmq_send(l->push, m->trailer, (size_t)WT_MAX(m->nparts, 1) * PARALLEL_ZMQ_TAG_BYTES, 0);
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
      if (!m) continue;
      if (!t->insecure && !m->hello && !m->header_sent) {
        if (l->peer_gen == 0) continue; /* no session yet: the peer's hello wakes this thread */
        /* Once per message, again only if the session changed before its header went out. */
        if (!m->trailer || l->tx_gen != l->peer_gen) s_seal_begin(t, l, m);
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
 * buffer is still being copied) or when the link is free, whichever is later; a message that
 * crosses this rank's access link also waits for its uplink, which every such message shares,
 * and goes at the slower of the path's and the uplink's rates. Caller holds t->mu. */
void parallel_zmq_enqueue(parallel_zmq_transport *t, s_link *l, s_out *m, double ready) {
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
  pthread_cond_signal(&t->cv_send);
}

s_out *parallel_zmq_out_new(const parallel_zmq_transport *t, const parallel_zmq_msg_context *ctx,
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
  s_out *m = parallel_zmq_out_new(t, &ctx, PARALLEL_ZMQ_KIND_HELLO, 0, body, body,
                                  PARALLEL_ZMQ_HELLO_BYTES);
  m->hello = 1;
  m->nparts = 1;
  m->trailer = wt_xmalloc(PARALLEL_ZMQ_TAG_BYTES);
  parallel_zmq_aead_hello_mac(m->trailer, l->base_tx, m->header, PARALLEL_ZMQ_HEADER_BYTES, body,
                              PARALLEL_ZMQ_HELLO_BYTES);
  return m;
}
