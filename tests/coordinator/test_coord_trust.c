/* test_coord_trust — the coordinator's trust record (coordinator/trust.c), in-process against
 * four raw CURVE clients that play peerd's protocol for a run of 1 stage x 4 replicas with
 * --robust median: they bind, answer the link probe and, in the train epoch, heartbeat with the
 * robust sync's counts. The three honest ones report that replica 3's contribution was left out
 * of every sync; the liar at replica 3 reports itself clean and frames replica 0. Asserted: the
 * liar, and only it, is excluded once past --trust-flags, with the reason in /status and
 * /metrics; the liar, heartbeating on, is told at once that it was excluded and why (not that
 * it missed heartbeats), and its key is refused when it registers again; the framed honest peer
 * is not excluded; a malformed report is dropped without effect.
 * Spot checks, with a third coordinator: failed checks reported by one checker alone (a liar
 * framing an honest peer) exclude nobody; failures of one member reported by two checkers
 * exclude it, with the reason; a coordinator restarted on the same state keeps every peer's
 * spot-check counts and checkers.
 * Claims (coordinator/claims.c), with a second coordinator: one of four clients claims 100x
 * the FLOP/s of the others while its heartbeats measure the same compute as theirs; it, and not
 * a peer claiming 3x, is flagged, in /status and /metrics, and placed by its measured speed on
 * the others' scale, also after a restart on the same state. */
#include "common/common.h"
#include "common/testing.h"
#include "coordinator/coordinator.h"
#include "coordinator/http.h"
#include "coordinator/protocol.h"
#include "tests/coordinator/coord_client.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

enum { N = 4 };

static char s_tmp[1024], s_state[1100];
static volatile sig_atomic_t s_stop;
static void *s_zctx;

typedef struct {
  coord_client_peer peer;
  int epoch, rank, training, refused, excluded;
  char kind[8], reason[512], first_reason[512]; /* the last refusal's reason; the first's */
  long step;
} s_client;

static void *s_serve(void *arg) {
  coordinator_run(arg, &s_stop);
  return NULL;
}

static void s_open(s_client *cl, coordinator *c, int new_key) {
  coord_client_peer_open(&cl->peer, s_zctx, coordinator_public_key(c), coordinator_endpoint(c),
                         new_key);
  cl->epoch = -1, cl->rank = -1, cl->training = 0, cl->step = 0;
}

static void s_register_claiming(s_client *cl, double flops) {
  coord_client_peer_sendf(
      &cl->peer, COORD_CMD_REGISTER,
      "{\"token\":\"\",\"device\":{\"kind\":\"cpu\",\"flops\":%g,\"memory\":1e9}}", flops);
}

static void s_register(s_client *cl) {
  s_register_claiming(cl, 1e9);
}

/* Answers what the coordinator sent: BOUND to EPOCH, the probe's RESULT to its START. */
static void s_handle(s_client *cl, const coordinator_msg *m) {
  const cJSON *b = m->body;
  if (m->cmd == COORD_CMD_REFUSED) {
    if (!cl->refused)
      snprintf(cl->first_reason, sizeof cl->first_reason, "%s", coordinator_field_str(b, "reason"));
    cl->refused = 1;
    cl->excluded = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(b, "excluded"));
    snprintf(cl->reason, sizeof cl->reason, "%s", coordinator_field_str(b, "reason"));
  } else if (m->cmd == COORD_CMD_EPOCH) {
    cl->epoch = coordinator_field_int(b, "epoch", -1),
    cl->rank = coordinator_field_int(b, "rank", -1);
    snprintf(cl->kind, sizeof cl->kind, "%s", coordinator_field_str(b, "kind"));
    cJSON *r = cJSON_CreateObject();
    cJSON_AddNumberToObject(r, "epoch", cl->epoch);
    cJSON_AddStringToObject(r, "endpoint", "tcp://127.0.0.1:9");
    coord_client_peer_send(&cl->peer, COORD_CMD_BOUND, r);
    cJSON_Delete(r);
  } else if (m->cmd == COORD_CMD_START && !strcmp(cl->kind, "probe")) {
    cJSON *r = cJSON_CreateObject();
    cJSON_AddNumberToObject(r, "epoch", cl->epoch);
    cJSON_AddBoolToObject(r, "ok", 1);
    cJSON_AddNumberToObject(r, "steps", 0);
    cJSON *la = cJSON_AddArrayToObject(r, "latency_s"),
          *bw = cJSON_AddArrayToObject(r, "bandwidth_Bps");
    for (int j = 0; j < N; j++) {
      cJSON_AddItemToArray(la, cJSON_CreateNumber(0.001));
      cJSON_AddItemToArray(bw, cJSON_CreateNumber(1e9));
    }
    coord_client_peer_send(&cl->peer, COORD_CMD_RESULT, r);
    cJSON_Delete(r);
  } else if (m->cmd == COORD_CMD_START) {
    cl->training = 1;
  }
}

static void s_drain(s_client *cl) {
  coordinator_msg m;
  while (coord_client_recv(cl->peer.sock, 0, &m)) {
    s_handle(cl, &m);
    coordinator_msg_clear(&m);
  }
}

/* The failed spot checks each client reports having made, by its rank and the rank checked. */
static long s_spot[N][N];

/* A training heartbeat: the robust sync's counts as this client reports them. liar_rank is the
 * world rank whose contribution honest clients saw left out; the liar claims replica 0's. */
static void s_heartbeat(s_client *cl, int liar_rank, int malformed) {
  cl->step++;
  cJSON *b = cJSON_CreateObject();
  cJSON_AddNumberToObject(b, "epoch", cl->epoch);
  cJSON_AddStringToObject(b, "state", "working");
  cJSON_AddNumberToObject(b, "step", (double)cl->step);
  cJSON_AddNumberToObject(b, "loss", 3.0);
  cJSON *m = cJSON_AddObjectToObject(b, "compute"); /* every client computes alike */
  cJSON_AddNumberToObject(m, "steps", (double)cl->step);
  cJSON_AddNumberToObject(m, "s", 0.01 * (double)cl->step);
  cJSON *t = cJSON_AddObjectToObject(b, "trust");
  cJSON_AddNumberToObject(t, "syncs", (double)cl->step);
  cJSON *f = cJSON_AddArrayToObject(t, "flagged"), *why = cJSON_AddArrayToObject(t, "why");
  const int lying = cl->rank == liar_rank, blamed = lying ? 0 : liar_rank;
  for (int r = 0; r < (malformed ? N - 1 : N); r++) {
    cJSON_AddItemToArray(f, cJSON_CreateNumber(r == blamed ? (double)cl->step : 0));
    cJSON_AddItemToArray(why, cJSON_CreateString(r == blamed ? "norm" : ""));
  }
  cJSON *spot = cJSON_AddArrayToObject(t, "spot_failed");
  for (int r = 0; r < N; r++)
    cJSON_AddItemToArray(spot, cJSON_CreateNumber(cl->rank >= 0 ? (double)s_spot[cl->rank][r] : 0));
  coord_client_peer_send(&cl->peer, COORD_CMD_HEARTBEAT, b);
  cJSON_Delete(b);
}

/* The id /status gives the peer of key `key` (-1: none). */
static int s_peer_id(const cJSON *st, const char *key) {
  const cJSON *p;
  cJSON_ArrayForEach(
      p, cJSON_GetObjectItemCaseSensitive(
             st, "peers")) if (!strcmp(coordinator_field_str(p, "key"),
                                       key)) return atoi(coordinator_field_str(p, "id"));
  return -1;
}

static cJSON *s_status(coordinator *c) {
  char *text = coordinator_status_json(c);
  cJSON *st = cJSON_Parse(text);
  free(text);
  return st;
}

static int s_excluded(coordinator *c) {
  cJSON *st = s_status(c);
  int n = coordinator_field_int(st, "peers_excluded", -1);
  cJSON_Delete(st);
  return n;
}

/* Field `name` of /status's "trust" entry for peer id (-1: no entry). */
static double s_trust_of(const cJSON *st, int id, const char *name) {
  const cJSON *e;
  cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(
                            st, "trust")) if (coordinator_field_int(e, "id", -2) ==
                                              id) return coordinator_field_num(e, name, -1);
  return -1;
}

/* Stops c, starts a coordinator on the same state directory (not serving) and returns the two
 * /status documents, before and after (the caller's). */
static void s_restart_status(coordinator **c, pthread_t th, const coordinator_config *cfg,
                             cJSON **before, cJSON **after) {
  *before = s_status(*c);
  s_stop = 1;
  pthread_join(th, NULL);
  coordinator_destroy(c);
  *c = coordinator_new(cfg);
  WT_TEST_REQUIRE(*c, "coordinator_new after the restart: %s", wt_last_error());
  *after = s_status(*c);
}

static void test_spot_exclusion(void) {
  char dir[1200];
  snprintf(dir, sizeof dir, "%s/spot", s_tmp);
  coordinator_config cfg;
  wt_config_defaults(coordinator_options(), &cfg);
  snprintf(cfg.state_dir, sizeof cfg.state_dir, "%.1000s", dir);
  cfg.open = 1, cfg.run.stages = 1, cfg.run.replicas = N, cfg.run.batch = 16;
  snprintf(cfg.run.robust, sizeof cfg.run.robust, "median");
  cfg.run.spot_check_every = 10;
  cfg.heartbeat_s = 0.1, cfg.liveness = 100;
  WT_TEST_REQUIRE(coordinator_config_check(&cfg) == WT_OK, "%s", wt_last_error());
  coordinator *c = coordinator_new(&cfg);
  WT_TEST_REQUIRE(c, "coordinator_new: %s", wt_last_error());
  s_stop = 0;
  pthread_t th;
  pthread_create(&th, NULL, s_serve, c);
  static s_client cl[N];
  for (int i = 0; i < N; i++) s_open(&cl[i], c, 1), s_register(&cl[i]);
  memset(s_spot, 0, sizeof s_spot);
  int rounds = 0;
  double t0 = wt_now_s();
  while (wt_now_s() - t0 < 30 && s_excluded(c) < 1) {
    int all = 1;
    for (int i = 0; i < N; i++) s_drain(&cl[i]), all &= cl[i].training;
    if (all) {
      rounds++;
      /* rank 0 frames rank 1 in every report; ranks 1 and 2 catch rank 3, from round 4 on */
      s_spot[0][1] = rounds;
      if (rounds == 4) s_spot[1][3] = 1;
      if (rounds == 6) s_spot[2][3] = 1;
      for (int i = 0; i < N; i++) s_heartbeat(&cl[i], -1, 0);
    }
    usleep(100000);
  }
  WT_TEST_REQUIRE(rounds > 0, "the clients never reached a train epoch");
  WT_TEST_ASSERT(rounds >= 6, "excluded at round %d, before a second checker reported", rounds);
  cJSON *st = s_status(c);
  const cJSON *ex = cJSON_GetObjectItemCaseSensitive(st, "excluded");
  WT_TEST_ASSERT(cJSON_GetArraySize(ex) == 1, "one peer excluded, not %d", cJSON_GetArraySize(ex));
  const char *key = coordinator_field_str(cJSON_GetArrayItem(ex, 0), "key");
  const char *reason = coordinator_field_str(cJSON_GetArrayItem(ex, 0), "reason");
  int caught = -1;
  for (int i = 0; i < N; i++)
    if (cl[i].rank == N - 1) caught = i;
  WT_TEST_ASSERT(caught >= 0 && !strcmp(key, cl[caught].peer.pub),
                 "the excluded key is the one two checkers caught: %.8s", key);
  WT_TEST_ASSERT(strstr(reason, "failed 2 spot checks made by 2 peers"), "the reason: %s", reason);
  printf("spot checks: excluded at round %d: %s\n", rounds, reason);
  cJSON_Delete(st);
  /* a restarted coordinator holds the same spot-check counts of every peer it keeps */
  cJSON *before, *after;
  s_restart_status(&c, th, &cfg, &before, &after);
  const char *fields[] = {"spot_checks", "spot_failed", "spot_checkers", "flagged", "syncs"};
  int compared = 0;
  for (int i = 0; i < N; i++) {
    if (i == caught) continue; /* excluded: gone from the table, its key refused */
    const int id = s_peer_id(before, cl[i].peer.pub);
    for (size_t f = 0; f < WT_ARRAY_LEN(fields); f++) {
      const double was = s_trust_of(before, id, fields[f]), is = s_trust_of(after, id, fields[f]);
      WT_TEST_ASSERT(was == is, "peer %d's %s: %g before the restart, %g after", id, fields[f], was,
                     is);
      compared += was > 0;
    }
  }
  const cJSON *ex_after = cJSON_GetObjectItemCaseSensitive(after, "excluded");
  WT_TEST_ASSERT(coordinator_field_int(after, "peers_excluded", -1) == 1 &&
                     !strcmp(coordinator_field_str(cJSON_GetArrayItem(ex_after, 0), "key"),
                             cl[caught].peer.pub) &&
                     strstr(coordinator_field_str(cJSON_GetArrayItem(ex_after, 0), "reason"),
                            "failed 2 spot checks"),
                 "the restarted coordinator lists the exclusion: %d",
                 coordinator_field_int(after, "peers_excluded", -1));
  int framed = -1;
  for (int i = 0; i < N; i++)
    if (cl[i].rank == 1) framed = s_peer_id(after, cl[i].peer.pub);
  WT_TEST_ASSERT(compared >= 3 && s_trust_of(after, framed, "spot_failed") >= 6 &&
                     s_trust_of(after, framed, "spot_checkers") == 1,
                 "the framed peer's failed checks (%g, by %g checkers) survive the restart",
                 s_trust_of(after, framed, "spot_failed"),
                 s_trust_of(after, framed, "spot_checkers"));
  cJSON_Delete(before);
  cJSON_Delete(after);
  for (int i = 0; i < N; i++) zmq_close(cl[i].peer.sock);
  coordinator_destroy(&c);
}

/* The entry of /status's "claims" for the peer of key `key` (NULL: none). */
static const cJSON *s_claim_of(const cJSON *st, const char *key) {
  const cJSON *peers = cJSON_GetObjectItemCaseSensitive(st, "peers"), *p, *e;
  int id = -1;
  cJSON_ArrayForEach(p, peers) if (!strcmp(coordinator_field_str(p, "key"), key)) id =
      atoi(coordinator_field_str(p, "id"));
  cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(
                            st, "claims")) if (coordinator_field_int(e, "id", -2) == id) return e;
  return NULL;
}

static int s_claims_flagged(coordinator *c) {
  cJSON *st = s_status(c);
  int n = coordinator_field_int(st, "peers_claim_flagged", -1);
  cJSON_Delete(st);
  return n;
}

static void test_claims(void) {
  char dir[1200];
  snprintf(dir, sizeof dir, "%s/claims", s_tmp);
  coordinator_config cfg;
  wt_config_defaults(coordinator_options(), &cfg);
  snprintf(cfg.state_dir, sizeof cfg.state_dir, "%.1000s", dir);
  cfg.open = 1, cfg.run.stages = 1, cfg.run.replicas = N, cfg.run.batch = 16;
  cfg.heartbeat_s = 0.1, cfg.liveness = 100;
  WT_TEST_REQUIRE(coordinator_config_check(&cfg) == WT_OK, "%s", wt_last_error());
  coordinator *c = coordinator_new(&cfg);
  WT_TEST_REQUIRE(c, "coordinator_new: %s", wt_last_error());
  s_stop = 0;
  pthread_t th;
  pthread_create(&th, NULL, s_serve, c);
  static s_client cl[N];
  const double claim[N] = {1e11, 3e9, 1e9, 1e9}; /* 100x the others; 3x: within the band */
  for (int i = 0; i < N; i++) s_open(&cl[i], c, 1), s_register_claiming(&cl[i], claim[i]);
  int training = 0;
  double t0 = wt_now_s();
  while (wt_now_s() - t0 < 30 && s_claims_flagged(c) < 1) {
    int all = 1;
    for (int i = 0; i < N; i++) s_drain(&cl[i]), all &= cl[i].training;
    if (all)
      for (int i = 0; i < N; i++) s_heartbeat(&cl[i], -1, 0);
    training |= all;
    usleep(100000);
  }
  WT_TEST_REQUIRE(training, "the clients never reached a train epoch");
  long flagged_at = cl[0].step;
  for (int k = 0; k < 5; k++) { /* more reports: the flag stays on the one liar */
    for (int i = 0; i < N; i++) s_drain(&cl[i]), s_heartbeat(&cl[i], -1, 0);
    usleep(100000);
  }
  cJSON *st = s_status(c);
  WT_TEST_ASSERT(coordinator_field_int(st, "peers_claim_flagged", -1) == 1,
                 "one claim flagged, not %d", coordinator_field_int(st, "peers_claim_flagged", -1));
  printf("the 100x claim flagged at its report of step %ld\n", flagged_at);
  WT_TEST_ASSERT(flagged_at >= 3 && flagged_at <= 6,
                 "flagged after a few lasting reports, not at step %ld", flagged_at);
  for (int i = 0; i < N; i++) {
    const cJSON *e = s_claim_of(st, cl[i].peer.pub);
    WT_TEST_ASSERT(e, "client %d has a claim record", i);
    if (!e) continue;
    const int flagged = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(e, "flagged"));
    const double placed = coordinator_field_num(e, "flops_placed", -1),
                 measured = coordinator_field_num(e, "flops_measured", -1);
    WT_TEST_ASSERT(flagged == (i == 0), "client %d claiming %g: flagged %d", i, claim[i], flagged);
    WT_TEST_ASSERT(measured > 0, "client %d: measured %g FLOP/s", i, measured);
    /* the liar computes like the 1e9 peers, so on their scale it is placed at 1e9 */
    const double want = i == 0 ? 1e9 : claim[i];
    WT_TEST_ASSERT(fabs(placed - want) <= 1e-3 * want, "client %d placed at %g FLOP/s, want %g", i,
                   placed, want);
  }
  char *metrics = coordinator_http_metrics_render(st);
  WT_TEST_ASSERT(metrics && strstr(metrics, "wantrain_peers_claim_flagged 1") &&
                     strstr(metrics, "wantrain_peer_claim_flagged{id=") &&
                     strstr(metrics, "wantrain_peer_flops_measured{id="),
                 "/metrics shows the flagged claim:\n%s", metrics ? metrics : "(none)");
  free(metrics);
  cJSON_Delete(st);
  /* a restarted coordinator keeps the flag and places the liar by its measured speed */
  cJSON *before, *after;
  s_restart_status(&c, th, &cfg, &before, &after);
  WT_TEST_ASSERT(coordinator_field_int(after, "peers_claim_flagged", -1) == 1,
                 "one claim flagged after the restart, not %d",
                 coordinator_field_int(after, "peers_claim_flagged", -1));
  for (int i = 0; i < N; i++) {
    const cJSON *was = s_claim_of(before, cl[i].peer.pub), *is = s_claim_of(after, cl[i].peer.pub);
    WT_TEST_ASSERT(was && is, "client %d has a claim record after the restart", i);
    if (!was || !is) continue;
    WT_TEST_ASSERT(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(is, "flagged")) == (i == 0) &&
                       coordinator_field_num(is, "flops_placed", -1) ==
                           coordinator_field_num(was, "flops_placed", -2),
                   "client %d: placed at %g after the restart, %g before", i,
                   coordinator_field_num(is, "flops_placed", -1),
                   coordinator_field_num(was, "flops_placed", -1));
  }
  cJSON_Delete(before);
  cJSON_Delete(after);
  for (int i = 0; i < N; i++) zmq_close(cl[i].peer.sock);
  coordinator_destroy(&c);
}

int main(void) {
  wt_test_tmpdir(s_tmp, sizeof s_tmp);
  snprintf(s_state, sizeof s_state, "%s/state", s_tmp);
  s_zctx = zmq_ctx_new();
  coordinator_config cfg;
  wt_config_defaults(coordinator_options(), &cfg);
  snprintf(cfg.state_dir, sizeof cfg.state_dir, "%.1000s", s_state);
  cfg.open = 1, cfg.run.stages = 1, cfg.run.replicas = N, cfg.run.batch = 16;
  snprintf(cfg.run.robust, sizeof cfg.run.robust, "median");
  cfg.run.trust_flags = 5;
  cfg.heartbeat_s = 0.1, cfg.liveness = 100;
  WT_TEST_REQUIRE(coordinator_config_check(&cfg) == WT_OK, "%s", wt_last_error());
  coordinator *c = coordinator_new(&cfg);
  WT_TEST_REQUIRE(c, "coordinator_new: %s", wt_last_error());
  pthread_t th;
  pthread_create(&th, NULL, s_serve, c);

  static s_client cl[N];
  for (int i = 0; i < N; i++) s_open(&cl[i], c, 1), s_register(&cl[i]);
  int liar = -1, malformed_sent = 0;
  double t0 = wt_now_s();
  while (wt_now_s() - t0 < 30 && s_excluded(c) < 1) {
    for (int i = 0; i < N; i++) s_drain(&cl[i]);
    int all = 1;
    for (int i = 0; i < N; i++) all &= cl[i].training;
    if (all) {
      for (int i = 0; i < N; i++)
        if (cl[i].rank == N - 1) liar = i;
      /* one malformed report first (three counts for four replicas): dropped */
      for (int i = 0; i < N; i++) s_heartbeat(&cl[i], N - 1, !malformed_sent && i == 0);
      malformed_sent = 1;
    }
    usleep(100000);
  }
  WT_TEST_REQUIRE(liar >= 0, "the clients never reached a train epoch");
  cJSON *st = s_status(c);
  const cJSON *ex = cJSON_GetObjectItemCaseSensitive(st, "excluded");
  WT_TEST_ASSERT(coordinator_field_int(st, "peers_excluded", -1) == 1 &&
                     cJSON_GetArraySize(ex) == 1,
                 "one peer excluded, not %d", coordinator_field_int(st, "peers_excluded", -1));
  const char *key = coordinator_field_str(cJSON_GetArrayItem(ex, 0), "key");
  const char *reason = coordinator_field_str(cJSON_GetArrayItem(ex, 0), "reason");
  WT_TEST_ASSERT(!strcmp(key, cl[liar].peer.pub), "the excluded key is the liar's: %.8s", key);
  WT_TEST_ASSERT(strstr(reason, "left out of 5 of its 5 robust syncs (norm)"),
                 "the reason gives the evidence: %s", reason);
  /* the step the liar reached: five reports, the first one's malformed copy dropped (else
   * replica 0's honest count would be framed by it and by the liar) */
  const cJSON *tr = cJSON_GetObjectItemCaseSensitive(st, "trust"), *e;
  cJSON_ArrayForEach(e, tr) {
    const int flagged = coordinator_field_int(e, "flagged", -1);
    WT_TEST_ASSERT(flagged == 0 || !strcmp(coordinator_field_str(e, "why"), "norm"),
                   "peer %d: %d flags (%s)", coordinator_field_int(e, "id", -1), flagged,
                   coordinator_field_str(e, "why"));
  }
  char *metrics = coordinator_http_metrics_render(st);
  WT_TEST_ASSERT(metrics && strstr(metrics, "wantrain_peers_excluded 1") &&
                     strstr(metrics, "wantrain_peer_excluded{id="),
                 "/metrics counts the exclusion:\n%s", metrics ? metrics : "(none)");
  free(metrics);
  cJSON_Delete(st);
  /* the liar heartbeats on: it is told at once that it was excluded and why, not that it
   * missed heartbeats */
  for (int k = 0; k < 30 && !cl[liar].refused; k++)
    s_heartbeat(&cl[liar], N - 1, 0), usleep(100000), s_drain(&cl[liar]);
  WT_TEST_ASSERT(cl[liar].refused && cl[liar].excluded &&
                     strstr(cl[liar].first_reason, "this key was excluded from the run: its "
                                                   "contributions were left out"),
                 "the excluded liar's first refusal: %s",
                 cl[liar].refused ? cl[liar].first_reason : "none");
  cl[liar].refused = cl[liar].excluded = 0;
  for (int k = 0; k < 30 && !cl[liar].refused; k++)
    s_heartbeat(&cl[liar], N - 1, 0), usleep(100000), s_drain(&cl[liar]);
  WT_TEST_ASSERT(cl[liar].refused && cl[liar].excluded && strstr(cl[liar].reason, "excluded") &&
                     !strstr(cl[liar].reason, "missed heartbeats"),
                 "a later heartbeat of the liar is refused with the reason: %s", cl[liar].reason);
  cl[liar].refused = 0;
  /* a few more rounds: the honest peers keep reporting, nobody else goes */
  for (int k = 0; k < 10; k++) {
    for (int i = 0; i < N; i++)
      if (i != liar) s_drain(&cl[i]), s_heartbeat(&cl[i], N - 1, 0);
    usleep(50000);
  }
  WT_TEST_ASSERT(s_excluded(c) == 1, "only the liar is excluded: %d", s_excluded(c));
  /* the liar's key is refused from now on, with the reason */
  zmq_close(cl[liar].peer.sock);
  s_open(&cl[liar], c, 0);
  s_register(&cl[liar]);
  for (int k = 0; k < 30 && !cl[liar].refused; k++) usleep(100000), s_drain(&cl[liar]);
  WT_TEST_ASSERT(cl[liar].refused && strstr(cl[liar].reason, "excluded from the run"),
                 "the excluded key registers again: %s",
                 cl[liar].refused ? cl[liar].reason : "admitted");
  s_stop = 1;
  pthread_join(th, NULL);
  for (int i = 0; i < N; i++) zmq_close(cl[i].peer.sock);
  coordinator_destroy(&c);
  test_claims();
  test_spot_exclusion();
  zmq_ctx_term(s_zctx);
  char rm[1200];
  snprintf(rm, sizeof rm, "rm -rf '%s'", s_tmp);
  if (system(rm) != 0) fprintf(stderr, "could not remove %s\n", s_tmp);
  return wt_test_finish("test_coord_trust");
}
