/* test_coord_limits — the coordinator in-process against raw CURVE clients, over what an
 * unauthenticated sender adds up to: 2000 registrations refused for a bad token add no row to
 * the state database and only a bounded number of log lines. */
#include "common/common.h"
#include "common/testing.h"
#include "coordinator/coordinator.h"
#include "coordinator/protocol.h"
#include "parallel/zmq.h"

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#define S_REFUSED 2000

static char s_tmp[1024], s_state[1100];
static volatile sig_atomic_t s_stop;
static void *s_zctx;

typedef struct {
  char pub[41], sec[41];
  void *sock;
  char sid[COORD_SID_CHARS + 1];
  uint64_t seq;
} s_client;

static void *s_serve(void *arg) {
  coordinator_run(arg, &s_stop);
  return NULL;
}

static coordinator *s_start(pthread_t *th) {
  coordinator_config cfg;
  wt_config_defaults(coordinator_options(), &cfg);
  snprintf(cfg.state_dir, sizeof cfg.state_dir, "%.1000s", s_state);
  cfg.stages = 2, cfg.replicas = 4; /* eight live peers: never more than two here, no epoch */
  cfg.heartbeat_s = 0.2, cfg.liveness = 100;
  cfg.http_port = -1;
  coordinator *c = coordinator_new(&cfg);
  WT_TEST_REQUIRE(c, "coordinator_new: %s", wt_last_error());
  s_stop = 0;
  pthread_create(th, NULL, s_serve, c);
  return c;
}

static void s_stop_it(coordinator **c, pthread_t th) {
  s_stop = 1;
  pthread_join(th, NULL);
  coordinator_destroy(c);
}

/* A connection with the client's key pair (made when new is 1) and a fresh session. */
static void s_open(s_client *cl, coordinator *c, int new_key) {
  if (new_key) parallel_zmq_keypair_new(cl->pub, cl->sec);
  cl->sock = zmq_socket(s_zctx, ZMQ_DEALER);
  int linger = 0;
  zmq_setsockopt(cl->sock, ZMQ_LINGER, &linger, sizeof linger);
  zmq_setsockopt(cl->sock, ZMQ_CURVE_SERVERKEY, coordinator_public_key(c), 40);
  zmq_setsockopt(cl->sock, ZMQ_CURVE_PUBLICKEY, cl->pub, 40);
  zmq_setsockopt(cl->sock, ZMQ_CURVE_SECRETKEY, cl->sec, 40);
  zmq_connect(cl->sock, coordinator_endpoint(c));
  coordinator_sid_new(cl->sid);
  cl->seq = 0;
}

static void s_close(s_client *cl) {
  zmq_close(cl->sock);
  cl->sock = NULL;
}

static void s_send(s_client *cl, coordinator_cmd cmd, const char *body_json) {
  cJSON *b = body_json ? cJSON_Parse(body_json) : NULL;
  char *text = coordinator_msg_encode(cmd, cl->sid, ++cl->seq, b);
  zmq_send(cl->sock, text, strlen(text), 0);
  free(text);
  cJSON_Delete(b);
}

static void s_register(s_client *cl, const char *token) {
  char body[512];
  snprintf(body, sizeof body,
           "{\"token\":\"%s\",\"device\":{\"kind\":\"cpu\",\"flops\":1e9,\"memory\":1e9}}", token);
  s_send(cl, COORD_CMD_REGISTER, body);
}

/* The next reply within 3 s: its command (-1 for none) and its peer_id (0 without one). */
static int s_reply(s_client *cl, int *peer_id) {
  zmq_pollitem_t it = {cl->sock, 0, ZMQ_POLLIN, 0};
  if (peer_id) *peer_id = 0;
  if (zmq_poll(&it, 1, 3000) <= 0) return -1;
  char buf[COORD_MSG_MAX];
  int n = zmq_recv(cl->sock, buf, sizeof buf, 0);
  coordinator_msg m;
  if (n <= 0 || coordinator_msg_decode(buf, (size_t)n, &m) != WT_OK) return -1;
  if (peer_id) *peer_id = coordinator_field_int(m.body, "peer_id", 0);
  int cmd = (int)m.cmd;
  coordinator_msg_clear(&m);
  return cmd;
}

static long s_count(const char *sql) {
  char path[1200];
  snprintf(path, sizeof path, "%s/state.db", s_state);
  sqlite3 *db = NULL;
  sqlite3_stmt *st = NULL;
  long n = -1;
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
      sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
    n = sqlite3_column_int64(st, 0);
  sqlite3_finalize(st);
  sqlite3_close(db);
  return n;
}

/* Registrations with a bad token, each in a fresh session: refused, and nothing kept of them. */
static void test_refusals_leave_nothing(coordinator *c) {
  long sessions = s_count("SELECT COUNT(*) FROM sessions");
  long events = s_count("SELECT COUNT(*) FROM events");
  char log_path[1200];
  snprintf(log_path, sizeof log_path, "%s/refusals.log", s_tmp);
  fflush(stderr);
  int saved = dup(2), fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  dup2(fd, 2);
  close(fd);
  s_client bad;
  s_open(&bad, c, 1);
  int refused = 0;
  for (int k = 0; k < S_REFUSED; k++) {
    coordinator_sid_new(bad.sid);
    s_register(&bad, "wt1.AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA");
    refused += s_reply(&bad, NULL) == COORD_CMD_REFUSED;
  }
  s_close(&bad);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  WT_TEST_ASSERT(refused == S_REFUSED, "every bad registration is refused (%d)", refused);
  WT_TEST_ASSERT(s_count("SELECT COUNT(*) FROM sessions") == sessions &&
                     s_count("SELECT COUNT(*) FROM events") == events,
                 "refusals add no row: sessions %ld -> %ld, events %ld -> %ld", sessions,
                 s_count("SELECT COUNT(*) FROM sessions"), events,
                 s_count("SELECT COUNT(*) FROM events"));
  FILE *f = fopen(log_path, "r");
  int lines = 0;
  char line[2048];
  while (f && fgets(line, sizeof line, f)) lines++;
  if (f) fclose(f);
  WT_TEST_ASSERT(lines >= 1 && lines <= 25, "%d refusals logged in %d lines", S_REFUSED, lines);
}

int main(void) {
  wt_test_tmpdir(s_tmp, sizeof s_tmp);
  snprintf(s_state, sizeof s_state, "%s/state", s_tmp);
  s_zctx = zmq_ctx_new();
  char token[256];
  WT_TEST_REQUIRE(coordinator_token_new(s_state, 0, 0, token, sizeof token) == WT_OK, "%s",
                  wt_last_error());
  pthread_t th;
  coordinator *c = s_start(&th);
  test_refusals_leave_nothing(c);
  s_stop_it(&c, th);
  zmq_ctx_term(s_zctx);
  return wt_test_finish("test_coord_limits");
}
