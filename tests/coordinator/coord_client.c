/* coord_client — the coordinator tests' raw CURVE client (coord_client.h). */
#include "tests/coordinator/coord_client.h"

#include "common/common.h"
#include "common/testing.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

void *coord_client_socket(void *zctx, const char *server_key, const char *endpoint, const char *pub,
                          const char *sec) {
  void *sock = zmq_socket(zctx, ZMQ_DEALER);
  if (!sock) return NULL;
  int linger = 0;
  int64_t max_msg = COORD_MSG_MAX + 1024; /* what the coordinator may send, and no more */
  zmq_setsockopt(sock, ZMQ_LINGER, &linger, sizeof linger);
  zmq_setsockopt(sock, ZMQ_MAXMSGSIZE, &max_msg, sizeof max_msg);
  if (zmq_setsockopt(sock, ZMQ_CURVE_SERVERKEY, server_key, 40) != 0 ||
      zmq_setsockopt(sock, ZMQ_CURVE_PUBLICKEY, pub, 40) != 0 ||
      zmq_setsockopt(sock, ZMQ_CURVE_SECRETKEY, sec, 40) != 0 || zmq_connect(sock, endpoint) != 0) {
    zmq_close(sock);
    return NULL;
  }
  return sock;
}

int coord_client_send(void *sock, const char *sid, uint64_t seq, coordinator_cmd cmd,
                      const cJSON *body) {
  char *text = coordinator_msg_encode(cmd, sid, seq, body);
  if (!text) return -1;
  int rc = zmq_send(sock, text, strlen(text), ZMQ_DONTWAIT) < 0 ? -1 : 0;
  free(text);
  return rc;
}

int coord_client_send_json(void *sock, const char *sid, uint64_t seq, coordinator_cmd cmd,
                           const char *json) {
  cJSON *b = json ? cJSON_Parse(json) : NULL;
  WT_TEST_REQUIRE(!json || b, "the test's message body is JSON: %s", json);
  int rc = coord_client_send(sock, sid, seq, cmd, b);
  cJSON_Delete(b);
  return rc;
}

int coord_client_recv(void *sock, long ms, coordinator_msg *m) {
  zmq_pollitem_t it = {sock, 0, ZMQ_POLLIN, 0};
  if (zmq_poll(&it, 1, ms) <= 0) return 0;
  char *buf = malloc(COORD_MSG_MAX);
  int n = buf ? zmq_recv(sock, buf, COORD_MSG_MAX, ZMQ_DONTWAIT) : -1;
  int ok = n > 0 && n <= COORD_MSG_MAX && coordinator_msg_decode(buf, (size_t)n, m) == WT_OK;
  free(buf);
  return ok;
}

void coord_client_peer_open(coord_client_peer *p, void *zctx, const char *server_key,
                            const char *endpoint, int new_key) {
  if (new_key) zmq_curve_keypair(p->pub, p->sec);
  p->sock = coord_client_socket(zctx, server_key, endpoint, p->pub, p->sec);
  WT_TEST_REQUIRE(p->sock, "a CURVE client connects to %s", endpoint);
  coordinator_sid_new(p->sid);
  p->seq = 0;
}

int coord_client_peer_send(coord_client_peer *p, coordinator_cmd cmd, const cJSON *body) {
  return coord_client_send(p->sock, p->sid, ++p->seq, cmd, body);
}

int coord_client_peer_sendf(coord_client_peer *p, coordinator_cmd cmd, const char *fmt, ...) {
  char json[4096];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(json, sizeof json, fmt, ap);
  va_end(ap);
  WT_TEST_REQUIRE(n >= 0 && (size_t)n < sizeof json, "the test's message body fits: %s", json);
  return coord_client_send_json(p->sock, p->sid, ++p->seq, cmd, json);
}

cJSON *coord_client_peer_expect(coord_client_peer *p, coordinator_cmd want, long ms) {
  double end = wt_now_s() + (double)ms / 1000;
  for (double now = wt_now_s(); now < end; now = wt_now_s()) {
    coordinator_msg m;
    long left = (long)((end - now) * 1000) + 1;
    if (!coord_client_recv(p->sock, left < 200 ? left : 200, &m)) continue;
    cJSON *body = m.cmd == want ? cJSON_Duplicate(m.body, 1) : NULL;
    coordinator_msg_clear(&m);
    if (body) return body;
  }
  return NULL;
}
