/* test_coord_limits — the coordinator in-process against raw CURVE clients, over what a
 * long-lived run and an unauthenticated sender add up to: 300 volunteers that join and leave
 * one after another (more than the table's 256 slots, --max-peers) leave room for the next one,
 * with ids never reused, a peer that stayed live untouched and a returning key recognised as
 * itself, across a restart too; 2000 registrations refused for a bad token add no row to
 * the state database and only a bounded number of log lines; and the connections from one
 * address are capped, except for a key admitted before. */
#include "common/common.h"
#include "common/testing.h"
#include "coordinator/coordinator.h"
#include "coordinator/protocol.h"
#include "parallel/transport/zmq.h"
#include "tests/coordinator/coord_client.h"

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

#define S_SLOTS 256
#define S_CHURN 300 /* more volunteers than the coordinator has slots */
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

static coordinator *s_start_with(pthread_t *th, const char *state, int per_source) {
  coordinator_config cfg;
  wt_config_defaults(coordinator_options(), &cfg);
  snprintf(cfg.state_dir, sizeof cfg.state_dir, "%.1000s", state);
  if (per_source) cfg.max_per_source = per_source;
  cfg.max_peers = S_SLOTS;
  cfg.run.stages = 2,
  cfg.run.replicas = 4; /* eight live peers: never more than two here, no epoch */
  cfg.heartbeat_s = 0.2, cfg.liveness = 100;
  cfg.http_port = -1;
  coordinator *c = coordinator_new(&cfg);
  WT_TEST_REQUIRE(c, "coordinator_new: %s", wt_last_error());
  s_stop = 0;
  pthread_create(th, NULL, s_serve, c);
  return c;
}

static coordinator *s_start(pthread_t *th) {
  return s_start_with(th, s_state, 0);
}

static void s_stop_it(coordinator **c, pthread_t th) {
  s_stop = 1;
  pthread_join(th, NULL);
  coordinator_destroy(c);
}

/* A connection with the client's key pair (made when new is 1) and a fresh session. */
static void s_open(s_client *cl, coordinator *c, int new_key) {
  if (new_key) parallel_zmq_keypair_new(cl->pub, cl->sec);
  cl->sock = coord_client_socket(s_zctx, coordinator_public_key(c), coordinator_endpoint(c),
                                 cl->pub, cl->sec);
  WT_TEST_REQUIRE(cl->sock, "a CURVE client connects");
  coordinator_sid_new(cl->sid);
  cl->seq = 0;
}

static void s_close(s_client *cl) {
  zmq_close(cl->sock);
  cl->sock = NULL;
}

static void s_send(s_client *cl, coordinator_cmd cmd, const char *body_json) {
  coord_client_send_json(cl->sock, cl->sid, ++cl->seq, cmd, body_json);
}

static void s_register(s_client *cl, const char *token) {
  char body[512];
  snprintf(body, sizeof body,
           "{\"token\":\"%s\",\"device\":{\"kind\":\"cpu\",\"flops\":1e9,\"memory\":1e9}}", token);
  s_send(cl, COORD_CMD_REGISTER, body);
}

/* The next reply within ms: its command (-1 for none) and its peer_id (0 without one). */
static int s_reply_within(s_client *cl, int *peer_id, long ms) {
  coordinator_msg m;
  if (peer_id) *peer_id = 0;
  if (!coord_client_recv(cl->sock, ms, &m)) return -1;
  if (peer_id) *peer_id = coordinator_field_int(m.body, "peer_id", 0);
  int cmd = (int)m.cmd;
  coordinator_msg_clear(&m);
  return cmd;
}

static int s_reply(s_client *cl, int *peer_id) {
  return s_reply_within(cl, peer_id, 3000);
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

/* Volunteers join and leave, one after another; the slots of those gone are reused. */
static void test_churn(coordinator **c, pthread_t *th, const char *token) {
  s_client stay = {0}, first = {0}, v = {0};
  int id = 0, prev = 0, stay_id = 0, first_id = 0, ok = 1;
  s_open(&stay, *c, 1);
  s_register(&stay, token);
  WT_TEST_REQUIRE(s_reply(&stay, &stay_id) == COORD_CMD_WELCOME, "the peer that stays joins");
  for (int k = 0; k < S_CHURN && ok; k++) {
    s_client *cl = k == 0 ? &first : &v;
    s_open(cl, *c, 1);
    s_register(cl, token);
    ok = s_reply(cl, &id) == COORD_CMD_WELCOME && id > prev && id != stay_id;
    WT_TEST_ASSERT(ok, "volunteer %d of %d is admitted with a new id (%d after %d)", k + 1, S_CHURN,
                   id, prev);
    prev = id;
    if (k == 0) first_id = id;
    s_send(cl, COORD_CMD_LEAVE, NULL);
    s_send(&stay, COORD_CMD_HEARTBEAT, "{\"step\":0}"); /* orders the leave before the next */
    WT_TEST_ASSERT(s_reply(&stay, NULL) == COORD_CMD_ACK, "the peer that stays is served");
    s_close(cl);
  }
  s_open(&first, *c, 0); /* the first volunteer comes back, with its key and no token */
  s_register(&first, "");
  WT_TEST_ASSERT(s_reply(&first, &id) == COORD_CMD_WELCOME && id == first_id,
                 "a returning key is recognised as peer %d (got %d)", first_id, id);
  WT_TEST_ASSERT(s_count("SELECT COUNT(*) FROM peers") == S_CHURN + 1 &&
                     s_count("SELECT COUNT(DISTINCT id) FROM peers") == S_CHURN + 1,
                 "the database holds each key once, each with its own id (%ld rows)",
                 s_count("SELECT COUNT(*) FROM peers"));
  /* a restart loads the live peers; ids go on; the peer that stayed keeps its session */
  s_stop_it(c, *th);
  *c = s_start(th);
  s_close(&stay);
  char sid[COORD_SID_CHARS + 1];
  uint64_t seq = stay.seq;
  memcpy(sid, stay.sid, sizeof sid);
  s_open(&stay, *c, 0);
  memcpy(stay.sid, sid, sizeof sid), stay.seq = seq;
  s_send(&stay, COORD_CMD_HEARTBEAT, "{\"step\":0}");
  WT_TEST_ASSERT(s_reply(&stay, NULL) == COORD_CMD_ACK, "the peer that stayed is still known");
  s_client late = {0};
  s_open(&late, *c, 1);
  s_register(&late, token);
  WT_TEST_ASSERT(s_reply(&late, &id) == COORD_CMD_WELCOME && id > prev,
                 "after a restart a new volunteer gets a new id (%d after %d)", id, prev);
  s_close(&late);
  s_close(&stay);
  s_close(&first);
}

/* A fresh key's connection gets through the caps: an unknown key is answered, not ignored. */
static int s_through(s_client *cl, coordinator *c) {
  s_open(cl, c, 1);
  s_send(cl, COORD_CMD_HEARTBEAT, "{\"step\":0}");
  return s_reply_within(cl, NULL, 1000) == COORD_CMD_REFUSED;
}

/* At most max_per_source connections from one address, unless the key was admitted before;
 * a closed connection gives its place back. */
static void test_per_source_cap(const char *token_state) {
  char state[1200], token[256];
  snprintf(state, sizeof state, "%s-caps", token_state);
  WT_TEST_REQUIRE(coordinator_token_new(state, 0, 0, token, sizeof token) == WT_OK, "%s",
                  wt_last_error());
  pthread_t th;
  coordinator *c = s_start_with(&th, state, 3);
  s_client peer = {0}, a = {0}, b = {0}, d = {0}, again = {0};
  s_open(&peer, c, 1);
  s_register(&peer, token);
  WT_TEST_REQUIRE(s_reply(&peer, NULL) == COORD_CMD_WELCOME, "a peer is admitted");
  WT_TEST_ASSERT(s_through(&a, c) && s_through(&b, c), "three connections from 127.0.0.1 pass");
  WT_TEST_ASSERT(!s_through(&d, c), "a fourth one with a fresh key is refused at the handshake");
  s_close(&d);
  again = peer; /* the admitted key, on a second connection beside its first */
  s_open(&again, c, 0);
  memcpy(again.sid, peer.sid, sizeof again.sid), again.seq = peer.seq; /* its session goes on */
  s_send(&again, COORD_CMD_HEARTBEAT, "{\"step\":0}");
  WT_TEST_ASSERT(s_reply_within(&again, NULL, 1000) == COORD_CMD_ACK,
                 "a key admitted before is not held to the per-source cap");
  s_close(&again);
  s_close(&a);
  int passed = 0; /* a's place comes back once its DISCONNECTED is counted */
  for (int k = 0; k < 5 && !passed; k++) {
    passed = s_through(&d, c);
    s_close(&d);
  }
  WT_TEST_ASSERT(passed, "a closed connection gives its place back");
  s_close(&b);
  s_close(&peer);
  s_stop_it(&c, th);
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
  s_client bad = {0};
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
  test_churn(&c, &th, token);
  s_stop_it(&c, th);
  test_per_source_cap(s_state);
  zmq_ctx_term(s_zctx);
  return wt_test_finish("test_coord_limits");
}
