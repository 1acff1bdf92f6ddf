/* zmq_zap — the ZeroMQ transport's ZAP handler: a REP socket on inproc://zeromq.zap.01
 * that admits only the CURVE keys of the group's ranks (zmq_transport.c says who owns what). */
#include "parallel/transport/zmq_transport_internal.h"

#include <string.h>

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

void *parallel_zmq_zap_main(void *p) {
  parallel_zmq_transport *t = p;
  while (!atomic_load(&t->stop_zap)) {
    zmq_pollitem_t it = {t->zap, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&it, 1, S_POLL_MS) > 0 && (it.revents & ZMQ_POLLIN)) s_zap_serve_one(t);
  }
  zmq_close(t->zap);
  return NULL;
}

