/* coord_client — the coordinator tests' raw CURVE client (coord_client.h). */
#include "tests/coordinator/coord_client.h"

#include "common/common.h"
#include "common/testing.h"

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
