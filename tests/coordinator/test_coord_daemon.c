/* test_coord_daemon — the coordinator in-process against raw CURVE clients: admission (no token,
 * forged, used up, unknown key), garbage / truncated / oversized / wrong-version / replayed
 * messages dropped and counted while it keeps serving, and a restart on the same state
 * directory that keeps the peer's session (and its site's GPU count in /status) and refuses a
 * replay across it; a state database of the schema before the GPU count is upgraded in place,
 * its peers counted as one GPU each. */
#include "common/common.h"
#include "common/testing.h"
#include "coordinator/coordinator.h"
#include "coordinator/http.h"
#include "coordinator/protocol.h"
#include "parallel/transport/zmq.h"
#include "tests/coordinator/coord_client.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

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

/* Connects with the client's key pair (made on first use), keeping its session. */
static void s_client_connect(s_client *cl, coordinator *c) {
  cl->sock = coord_client_socket(s_zctx, coordinator_public_key(c), coordinator_endpoint(c),
                                 cl->pub, cl->sec);
  WT_TEST_REQUIRE(cl->sock, "a CURVE client connects");
}

static void s_client_open(s_client *cl, coordinator *c) {
  parallel_zmq_keypair_new(cl->pub, cl->sec);
  s_client_connect(cl, c);
  coordinator_sid_new(cl->sid);
  cl->seq = 0;
}

static void s_raw(s_client *cl, const void *data, size_t n) {
  zmq_send(cl->sock, data, n, 0);
}

static void s_msg(s_client *cl, coordinator_cmd cmd, uint64_t seq, const char *body_json) {
  coord_client_send_json(cl->sock, cl->sid, seq, cmd, body_json);
}

/* The next reply within 3 s, decoded; returns its command or -1 for none. */
static int s_reply(s_client *cl, char *field, size_t size) {
  coordinator_msg m;
  if (!coord_client_recv(cl->sock, 3000, &m)) return -1;
  const char *r = cJSON_GetStringValue(cJSON_GetObjectItem(m.body, "reason"));
  if (field) snprintf(field, size, "%s", r ? r : "");
  int cmd = (int)m.cmd;
  coordinator_msg_clear(&m);
  return cmd;
}

static void s_register(s_client *cl, const char *token) {
  char body[512];
  snprintf(body, sizeof body,
           "{\"token\":\"%s\",\"device\":{\"kind\":\"cpu\",\"flops\":1e9,\"memory\":1e9,"
           "\"gpus\":2}}",
           token);
  s_msg(cl, COORD_CMD_REGISTER, ++cl->seq, body);
}

static coordinator *s_start(pthread_t *th) {
  coordinator_config cfg;
  wt_config_defaults(coordinator_options(), &cfg);
  snprintf(cfg.state_dir, sizeof cfg.state_dir, "%.1000s", s_state);
  cfg.run.stages = 2, cfg.run.replicas = 4; /* eight peers: this test never starts a run */
  cfg.heartbeat_s = 0.2, cfg.liveness = 50;
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

int main(void) {
  wt_test_tmpdir(s_tmp, sizeof s_tmp);
  snprintf(s_state, sizeof s_state, "%s/state", s_tmp);
  s_zctx = zmq_ctx_new();
  char one_use[256], why[512];
  WT_TEST_REQUIRE(coordinator_token_new(s_state, 0, 1, one_use, sizeof one_use) == WT_OK, "%s",
                  wt_last_error());
  pthread_t th;
  coordinator *c = s_start(&th);

  s_client none, forged, good, second, stranger, hostile;
  s_client_open(&none, c);
  s_register(&none, "");
  WT_TEST_ASSERT(s_reply(&none, why, sizeof why) == COORD_CMD_REFUSED &&
                     strstr(why, "no join token"),
                 "no token: refused (%s)", why);
  s_client_open(&forged, c);
  char bad[256];
  snprintf(bad, sizeof bad, "%s", one_use);
  size_t k = strlen(bad) - 2; /* a character of the tag, replaced by another base64url one */
  bad[k] = bad[k] == 'A' ? 'B' : 'A';
  s_register(&forged, bad);
  WT_TEST_ASSERT(s_reply(&forged, why, sizeof why) == COORD_CMD_REFUSED &&
                     strstr(why, "does not verify"),
                 "forged token: refused (%s)", why);
  s_client_open(&good, c);
  s_register(&good, one_use);
  WT_TEST_ASSERT(s_reply(&good, NULL, 0) == COORD_CMD_WELCOME, "a valid token is admitted");
  s_client_open(&second, c);
  s_register(&second, one_use);
  WT_TEST_ASSERT(s_reply(&second, why, sizeof why) == COORD_CMD_REFUSED && strstr(why, "used up"),
                 "a one-use token cannot be used twice (%s)", why);
  s_client_open(&stranger, c);
  s_msg(&stranger, COORD_CMD_HEARTBEAT, 1, NULL);
  WT_TEST_ASSERT(s_reply(&stranger, why, sizeof why) == COORD_CMD_REFUSED &&
                     strstr(why, "unknown peer key"),
                 "an unknown key is refused (%s)", why);

  /* hostile bytes from an admitted key's connection and another one: dropped, no reply */
  uint64_t before = coordinator_refused(c);
  s_client_open(&hostile, c);
  s_raw(&hostile, "\xde\xad\xbe\xef garbage", 12);
  s_raw(&good, "{\"v\":2,\"cmd\":\"heartbeat\",\"sid\":\"", 32); /* truncated */
  char wrongv[256];
  snprintf(wrongv, sizeof wrongv, "{\"v\":7,\"cmd\":\"heartbeat\",\"sid\":\"%s\",\"seq\":50}",
           good.sid);
  s_raw(&good, wrongv, strlen(wrongv));
  size_t big = COORD_MSG_MAX + 100;
  char *huge = wt_xmalloc(big);
  memset(huge, '[', big);
  s_raw(&good, huge, big);
  free(huge);
  zmq_send(good.sock, "a", 1, ZMQ_SNDMORE); /* two frames */
  zmq_send(good.sock, "b", 1, 0);
  s_msg(&good, COORD_CMD_HEARTBEAT, ++good.seq, "{\"step\":0}");
  WT_TEST_ASSERT(s_reply(&good, NULL, 0) == COORD_CMD_ACK, "still serving after the junk");
  WT_TEST_ASSERT(s_reply(&hostile, NULL, 0) == -1, "junk gets no answer");
  WT_TEST_ASSERT(coordinator_refused(c) >= before + 5, "5 junk messages counted (%llu)",
                 (unsigned long long)(coordinator_refused(c) - before));
  /* replays: the same heartbeat again, and the registration again */
  before = coordinator_refused(c);
  s_msg(&good, COORD_CMD_HEARTBEAT, good.seq, "{\"step\":0}");
  s_msg(&good, COORD_CMD_REGISTER, 1,
        "{\"token\":\"\",\"device\":{\"kind\":\"cpu\",\"flops\":1e9}}");
  s_msg(&good, COORD_CMD_HEARTBEAT, ++good.seq, "{\"step\":0}");
  WT_TEST_ASSERT(s_reply(&good, NULL, 0) == COORD_CMD_ACK, "only the fresh heartbeat answered");
  WT_TEST_ASSERT(s_reply(&good, NULL, 0) == -1, "the replays got nothing");
  WT_TEST_ASSERT(coordinator_refused(c) == before + 2, "2 replays counted (%llu)",
                 (unsigned long long)(coordinator_refused(c) - before));
  char *status = coordinator_status_json(c);
  cJSON *snap = cJSON_Parse(status);
  WT_TEST_ASSERT(snap && coordinator_http_status_check(snap) == WT_OK,
                 "the snapshot follows the status server's schema: %s", wt_last_error());
  cJSON_Delete(snap);
  WT_TEST_ASSERT(strstr(status, "\"state\":\"standby\""), "status lists the live peer: %s", status);
  free(status);

  /* restart on the same state: the session goes on, a replay across the restart is refused */
  s_stop_it(&c, th);
  c = s_start(&th);
  zmq_close(good.sock);
  s_client_connect(&good, c); /* the endpoint's port may differ: a new connection */
  s_msg(&good, COORD_CMD_HEARTBEAT, good.seq, "{\"step\":0}");
  WT_TEST_ASSERT(s_reply(&good, NULL, 0) == -1, "a replay across the restart is refused");
  s_msg(&good, COORD_CMD_HEARTBEAT, ++good.seq, "{\"step\":0}");
  WT_TEST_ASSERT(s_reply(&good, NULL, 0) == COORD_CMD_ACK,
                 "the restarted coordinator knows the peer's session");
  status = coordinator_status_json(c);
  WT_TEST_ASSERT(strstr(status, "\"gpus\":2"), "the restart keeps the site's GPUs: %s", status);
  free(status);
  zmq_close(good.sock);
  s_stop_it(&c, th);

  /* a state database of the schema without the GPU count: upgraded, the peer one GPU */
  char db_path[1200];
  snprintf(db_path, sizeof db_path, "%s/state.db", s_state);
  sqlite3 *db = NULL;
  WT_TEST_REQUIRE(sqlite3_open(db_path, &db) == SQLITE_OK &&
                      sqlite3_exec(db, "ALTER TABLE peers DROP COLUMN gpus", NULL, NULL, NULL) ==
                          SQLITE_OK,
                  "dropping the gpus column: %s", sqlite3_errmsg(db));
  sqlite3_close(db);
  c = s_start(&th);
  status = coordinator_status_json(c);
  WT_TEST_ASSERT(strstr(status, "\"gpus\":1") && !strstr(status, "\"gpus\":2"),
                 "an old state's peer counts as one GPU: %s", status);
  free(status);
  s_stop_it(&c, th);
  c = s_start(&th); /* the upgraded database opens again */
  s_stop_it(&c, th);
  s_client *all[] = {&none, &forged, &second, &stranger, &hostile};
  for (size_t i = 0; i < WT_ARRAY_LEN(all); i++) zmq_close(all[i]->sock);
  zmq_ctx_term(s_zctx);
  return wt_test_finish("test_coord_daemon");
}
