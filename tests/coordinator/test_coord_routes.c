/* test_coord_routes — reachability and the routes of an epoch, against an in-process
 * coordinator and raw CURVE clients.
 *  1. The connect-back test: a client that listens on its reach_port is reachable, one whose
 *     port is closed is not ("Connection refused"), one that says "reachable": false is not
 *     (untested), one that offers no port is untested; /status shows each.
 *  2. A probe epoch of one reachable and two unreachable members: EPOCH carries reachable[];
 *     the reachable member's BOUND without outboxes is refused and counted, and the epoch
 *     aborts; in the next one, its outboxes reach each unreachable member in START, with the
 *     coordinator relay's inboxes, and nothing of it reaches the reachable member. */
#include "common/common.h"
#include "common/testing.h"
#include "coordinator/coordinator.h"
#include "coordinator/protocol.h"
#include "tests/coordinator/coord_client.h"

#include <arpa/inet.h>
#include <cjson/cJSON.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zmq.h>

static char s_tmp[1024];
static volatile sig_atomic_t s_stop;
static void *s_zctx;
static const long s_wait_ms = 10000; /* for a reply, on a loaded machine */

typedef struct {
  coord_client_peer peer;
  int rank;
} s_client;

static void *s_serve(void *arg) {
  coordinator_run(arg, &s_stop);
  return NULL;
}

/* Connects and registers; `reach` is the REGISTER's reachability fields (may be ""). */
static void s_join(s_client *cl, coordinator *c, const char *reach) {
  coord_client_peer_open(&cl->peer, s_zctx, coordinator_public_key(c), coordinator_endpoint(c), 1);
  cl->rank = -1;
  coord_client_peer_sendf(
      &cl->peer, COORD_CMD_REGISTER,
      "{\"token\":\"\",\"host\":\"127.0.0.1\",\"device\":{\"kind\":\"cpu\",\"flops\":1e9,"
      "\"memory\":1e9}%s}",
      reach);
}

/* A TCP port on 127.0.0.1: listening (*fd set) or closed again (listen = 0). */
static int s_port(int listen_on, int *fd) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  WT_TEST_REQUIRE(bind(s, (struct sockaddr *)&a, len) == 0, "bind a test port");
  getsockname(s, (struct sockaddr *)&a, &len);
  if (listen_on) {
    listen(s, 4);
    *fd = s;
  } else {
    close(s);
  }
  return ntohs(a.sin_port);
}

/* /status's "reachable" of the peer with this key, "" when not listed. */
static void s_reachable_of(coordinator *c, const char *key, char *out, size_t cap) {
  char *text = coordinator_status_json(c);
  cJSON *o = cJSON_Parse(text);
  out[0] = 0;
  const cJSON *p;
  cJSON_ArrayForEach(p, cJSON_GetObjectItemCaseSensitive(o, "peers")) {
    if (strcmp(coordinator_field_str(p, "key"), key)) continue;
    snprintf(out, cap, "%s: %s", coordinator_field_str(p, "reachable"),
             coordinator_field_str(p, "reach_why"));
  }
  cJSON_Delete(o);
  free(text);
}

static coordinator *s_coordinator(const char *name, int stages, int replicas, pthread_t *th) {
  coordinator_config cfg;
  wt_config_defaults(coordinator_options(), &cfg);
  snprintf(cfg.state_dir, sizeof cfg.state_dir, "%.1000s/%s", s_tmp, name);
  cfg.open = 1, cfg.run.stages = stages, cfg.run.replicas = replicas, cfg.run.steps = 100;
  cfg.run.batch = 12, cfg.run.micro_batches = 1;
  cfg.heartbeat_s = 0.2, cfg.liveness = 100, cfg.http_port = -1;
  coordinator *c = coordinator_new(&cfg);
  WT_TEST_REQUIRE(c, "coordinator_new: %s", wt_last_error());
  s_stop = 0;
  pthread_create(th, NULL, s_serve, c);
  return c;
}

static void s_connect_back(void) {
  pthread_t th;
  coordinator *c = s_coordinator("reach", 4, 4, &th); /* 16 seats: no epoch forms */
  int fd = -1, open_port = s_port(1, &fd), closed_port = s_port(0, NULL);
  s_client yes, no, says, none;
  char reach[64];
  snprintf(reach, sizeof reach, ",\"reach_port\":%d", open_port);
  s_join(&yes, c, reach);
  snprintf(reach, sizeof reach, ",\"reach_port\":%d", closed_port);
  s_join(&no, c, reach);
  s_join(&says, c, ",\"reachable\":false");
  s_join(&none, c, "");
  s_client *all[] = {&yes, &no, &says, &none};
  for (size_t i = 0; i < WT_ARRAY_LEN(all); i++)
    cJSON_Delete(coord_client_peer_expect(&all[i]->peer, COORD_CMD_WELCOME, s_wait_ms));
  char got[4][200];
  double end = wt_now_s() + 5;
  do {
    for (int i = 0; i < 4; i++) s_reachable_of(c, all[i]->peer.pub, got[i], sizeof got[i]);
  } while ((!strncmp(got[0], "testing", 7) || !strncmp(got[1], "testing", 7)) && wt_now_s() < end);
  printf("connect-back: listening %s | closed %s | says so %s | no port %s\n", got[0], got[1],
         got[2], got[3]);
  WT_TEST_ASSERT(!strcmp(got[0], "yes: "), "a listening port is reachable: %s", got[0]);
  WT_TEST_ASSERT(!strncmp(got[1], "no: ", 4) && strstr(got[1], "refused"),
                 "a closed port is not: %s", got[1]);
  WT_TEST_ASSERT(!strncmp(got[2], "no: ", 4) && strstr(got[2], "says"),
                 "a peer that says so is not: %s", got[2]);
  WT_TEST_ASSERT(!strcmp(got[3], "untested: "), "no port offered: untested: %s", got[3]);
  s_stop = 1;
  pthread_join(th, NULL);
  coordinator_destroy(&c);
  for (size_t i = 0; i < WT_ARRAY_LEN(all); i++) zmq_close(all[i]->peer.sock);
  close(fd);
}

/* Receives every member's EPOCH (ranks into cl[i]->rank); returns the epoch and, for each
 * member, whether EPOCH's reachable[] has it reachable. */
static int s_epoch(s_client **cl, int n, int *reachable) {
  int epoch = -1;
  for (int i = 0; i < n; i++) {
    cJSON *e = coord_client_peer_expect(&cl[i]->peer, COORD_CMD_EPOCH, s_wait_ms);
    WT_TEST_REQUIRE(e, "client %d got an epoch", i);
    epoch = coordinator_field_int(e, "epoch", -1);
    cl[i]->rank = coordinator_field_int(e, "rank", -1);
    const cJSON *re = cJSON_GetObjectItemCaseSensitive(e, "reachable");
    WT_TEST_REQUIRE(cJSON_GetArraySize(re) == n, "EPOCH carries reachable[] for %d", n);
    for (int j = 0; j < n; j++) reachable[j] = (int)cJSON_GetNumberValue(cJSON_GetArrayItem(re, j));
    cJSON_Delete(e);
  }
  return epoch;
}

/* Member cl's BOUND: for a reachable one, an outbox (port 45000 + rank) per unreachable rank. */
static void s_bound(s_client *cl, int epoch, const int *reachable, int n, int with_outboxes) {
  char ob[512] = "";
  if (with_outboxes) {
    size_t k = (size_t)snprintf(ob, sizeof ob, ",\"outboxes\":[");
    for (int r = 0; r < n; r++)
      k += (size_t)snprintf(ob + k, sizeof ob - k, "%s%s", r ? "," : "",
                            reachable[cl->rank] && !reachable[r] ? "\"tcp://127.0.0.1:4500X\""
                                                                 : "null");
    snprintf(ob + k, sizeof ob - k, "]");
    for (char *x; (x = strchr(ob, 'X'));) *x = (char)('0' + cl->rank);
  }
  coord_client_peer_sendf(&cl->peer, COORD_CMD_BOUND,
                          "{\"epoch\":%d,\"endpoint\":\"tcp://127.0.0.1:%d\"%s}", epoch,
                          40000 + cl->rank, ob);
}

static void s_routes(void) {
  pthread_t th;
  coordinator *c = s_coordinator("routes", 1, 3, &th);
  s_client a, b, d;
  s_join(&a, c, "");
  s_join(&b, c, ",\"reachable\":false");
  s_join(&d, c, ",\"reachable\":false");
  s_client *cl[] = {&a, &b, &d};
  int reachable[3];
  int epoch = s_epoch(cl, 3, reachable);
  WT_TEST_ASSERT(reachable[a.rank] == 1 && reachable[b.rank] == 0 && reachable[d.rank] == 0,
                 "EPOCH's reachable[] is by rank");
  uint64_t before = coordinator_refused(c);
  s_bound(&b, epoch, reachable, 3, 1);
  s_bound(&d, epoch, reachable, 3, 1);
  s_bound(&a, epoch, reachable, 3, 0); /* a reachable member that lists no outbox */
  cJSON *ab = coord_client_peer_expect(&b.peer, COORD_CMD_ABORT, s_wait_ms);
  WT_TEST_ASSERT(ab != NULL, "a BOUND without outboxes aborts the epoch");
  cJSON_Delete(ab);
  WT_TEST_ASSERT(coordinator_refused(c) == before + 1, "and is counted as refused");

  epoch = s_epoch(cl, 3, reachable);
  for (int i = 0; i < 3; i++) s_bound(cl[i], epoch, reachable, 3, 1);
  cJSON *st[3];
  for (int i = 0; i < 3; i++) {
    st[i] = coord_client_peer_expect(&cl[i]->peer, COORD_CMD_START, s_wait_ms);
    WT_TEST_REQUIRE(st[i], "client %d got START", i);
  }
  WT_TEST_ASSERT(!cJSON_GetObjectItemCaseSensitive(st[0], "outboxes") &&
                     !cJSON_GetObjectItemCaseSensitive(st[0], "relay_in"),
                 "the reachable member gets no routes");
  for (int i = 1; i < 3; i++) {
    const cJSON *ob = cJSON_GetObjectItemCaseSensitive(st[i], "outboxes");
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(st[i], "relay_in");
    const char *out = coordinator_field_str(st[i], "relay_out");
    char want[64];
    snprintf(want, sizeof want, "tcp://127.0.0.1:4500%d", a.rank);
    const char *got = cJSON_GetStringValue(cJSON_GetArrayItem(ob, a.rank));
    WT_TEST_ASSERT(got && !strcmp(got, want), "unreachable client %d gets a's outbox (%s)", i,
                   got ? got : "none");
    const char *in_other = cJSON_GetStringValue(cJSON_GetArrayItem(in, cl[3 - i]->rank));
    WT_TEST_ASSERT(in_other && !strncmp(in_other, "tcp://127.0.0.1:", 16) &&
                       cJSON_IsNull(cJSON_GetArrayItem(in, a.rank)),
                   "unreachable client %d gets the other's relay inbox, none for a", i);
    WT_TEST_ASSERT(!strncmp(out, "tcp://127.0.0.1:", 16), "and its own outlet (%s)", out);
  }
  for (int i = 0; i < 3; i++) cJSON_Delete(st[i]);
  s_stop = 1;
  pthread_join(th, NULL);
  coordinator_destroy(&c);
  for (int i = 0; i < 3; i++) zmq_close(cl[i]->peer.sock);
}

int main(void) {
  wt_test_tmpdir(s_tmp, sizeof s_tmp);
  s_zctx = zmq_ctx_new();
  s_connect_back();
  s_routes();
  zmq_ctx_term(s_zctx);
  char rm[1200];
  snprintf(rm, sizeof rm, "rm -rf '%s'", s_tmp);
  if (system(rm) != 0) fprintf(stderr, "test_coord_routes: could not remove %s\n", s_tmp);
  return wt_test_finish("test_coord_routes");
}
