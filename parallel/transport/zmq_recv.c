/* zmq_recv — the ZeroMQ transport's receiver thread: it owns the bound PULL socket and
 * the monitors of the PUSH sockets, validates every message, files it in its source's mailbox,
 * and marks a peer gone when it says goodbye or its connection drops. */
#include "parallel/transport/zmq_transport_internal.h"

#include <assert.h>
#include <errno.h>
#include <string.h>

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

