/* test_zmq_relay — links between unreachable ranks (zmq.h "Reachability", zmq_relay.h): five
 * ranks, two reachable and three not, each its own transport on loopback. The reachable ranks
 * bind outboxes for the unreachable ones, the unreachable ones reach each other only through a
 * relay. Checks: every ordered pair exchanges its own message intact, an all-reduce over the
 * group sums right, the relay forwarded the traffic between unreachable ranks (and only that),
 * and an unreachable rank without its relay endpoints is refused with a message naming them. */
#include "parallel/collectives/collectives.h"
#include "parallel/transport/zmq.h"
#include "parallel/transport/zmq_relay.h"

#include "common/common.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 5
#define PAIR_FLOATS 4096 /* per ordered pair: 16 KiB, several frames' worth of headers */
static const int s_reachable[N] = {1, 1, 0, 0, 0};

static int s_fail(const char *what) {
  fprintf(stderr, "FAIL: %s (%s)\n", what, wt_last_error());
  return 1;
}

/* Rank r's message to rank p: values no other pair sends. */
static float s_value(int r, int p, int i) {
  return (float)(r * 1000 + p * 100) + (float)i * 0.25f;
}

static int s_rank_main(parallel_comm *c) {
  const int me = parallel_comm_rank(c);
  float *buf = wt_xmalloc(PAIR_FLOATS * sizeof(float));
  for (int p = 0; p < N; p++) {
    if (p == me) continue;
    /* the lower rank sends first, so every pair's order is fixed */
    for (int turn = 0; turn < 2; turn++) {
      int sending = (turn == 0) == (me < p);
      if (sending) {
        for (int i = 0; i < PAIR_FLOATS; i++) buf[i] = s_value(me, p, i);
        WT_CHECK(parallel_comm_send(c, p, 7, buf, PAIR_FLOATS * sizeof(float)));
      } else {
        size_t got = 0;
        WT_CHECK(parallel_comm_recv(c, p, 7, buf, PAIR_FLOATS * sizeof(float), &got));
        for (int i = 0; i < PAIR_FLOATS; i++)
          if (got != PAIR_FLOATS * sizeof(float) || buf[i] != s_value(p, me, i))
            return wt_fail(WT_EMISMATCH, "rank %d: message from rank %d wrong at %d", me, p, i);
      }
    }
  }
  float x[64];
  for (int i = 0; i < 64; i++) x[i] = (float)(me + 1) * (float)i;
  WT_CHECK(parallel_allreduce(c, x, 64, PARALLEL_OP_SUM));
  for (int i = 0; i < 64; i++)
    if (x[i] != 15.0f * (float)i)
      return wt_fail(WT_EMISMATCH, "rank %d: all-reduce[%d] = %g, want %g", me, i, x[i], 15.0 * i);
  free(buf);
  return WT_OK;
}

typedef struct {
  parallel_comm *c;
  int rc;
  char err[512];
} s_job;

static void *s_thread(void *p) {
  s_job *j = p;
  j->rc = s_rank_main(j->c);
  snprintf(j->err, sizeof j->err, "%s", j->rc ? wt_last_error() : "");
  return NULL;
}

typedef struct {
  char pub[N][41], sec[N][41];
  const char *pubs[N];
  const char *relay_in[N], *relay_out[N];
} s_keys;

static parallel_zmq_config s_config(s_keys *k, int r, const char **eps) {
  parallel_zmq_config cfg = parallel_zmq_config_default();
  cfg.rank = r, cfg.size = N, cfg.endpoints = eps, cfg.timeout_s = 20;
  cfg.secret_key = k->sec[r], cfg.public_key = k->pub[r], cfg.peer_public_keys = k->pubs;
  cfg.reachable = s_reachable;
  return cfg;
}

int main(void) {
  s_keys k = {0};
  parallel_zmq_relay *relay = parallel_zmq_relay_new("127.0.0.1", N, 0, 0);
  if (!relay) return s_fail("relay_new");
  for (int r = 0; r < N; r++) {
    if (parallel_zmq_keypair_new(k.pub[r], k.sec[r]) != WT_OK) return s_fail("keypair");
    k.pubs[r] = k.pub[r];
    k.relay_in[r] = s_reachable[r] ? NULL : parallel_zmq_relay_in(relay, r);
    k.relay_out[r] = s_reachable[r] ? NULL : parallel_zmq_relay_out(relay, r);
  }
  /* an unreachable rank that is not told where its relay is: refused, naming what is missing */
  const char *eps[N] = {0};
  eps[2] = "tcp://127.0.0.1:*";
  parallel_zmq_config lone = s_config(&k, 2, eps);
  parallel_zmq_transport *t = parallel_zmq_transport_new(&lone);
  if (!t) return s_fail("transport_new");
  const char *no_relay_eps[N] = {"tcp://127.0.0.1:1", "tcp://127.0.0.1:1", NULL, NULL, NULL};
  const char *fake_outboxes[N] = {"tcp://127.0.0.1:1", "tcp://127.0.0.1:1", NULL, NULL, NULL};
  parallel_zmq_routes no_relay = {.outboxes = fake_outboxes};
  if (parallel_zmq_transport_connect_routes(&t, no_relay_eps, &no_relay) || t ||
      !strstr(wt_last_error(), "relay_in[3]"))
    return s_fail("a missing relay inbox accepted");
  printf("refused without a relay: %s\n", wt_last_error());

  parallel_zmq_transport *ts[N];
  char bound[N][256];
  const char *bound_p[N];
  for (int r = 0; r < N; r++) {
    const char *own[N] = {0};
    own[r] = "tcp://127.0.0.1:*";
    parallel_zmq_config cfg = s_config(&k, r, own);
    if (!(ts[r] = parallel_zmq_transport_new(&cfg))) return s_fail("transport_new");
    snprintf(bound[r], sizeof bound[r], "%s", parallel_zmq_transport_endpoint(ts[r]));
    bound_p[r] = bound[r];
  }
  /* outboxes: only a reachable rank has them, and only for the unreachable ones */
  for (int r = 0; r < N; r++)
    for (int p = 0; p < N; p++)
      if (!parallel_zmq_transport_outbox(ts[r], p) !=
          !(s_reachable[r] && !s_reachable[p] && p != r))
        return s_fail("an outbox where none belongs, or none where one does");
  /* what the coordinator gathers from BOUND: each rank's outboxes (connect takes ts[r]) */
  static char outbox[N][N][256];
  for (int r = 0; r < N; r++)
    for (int p = 0; p < N; p++) {
      const char *o = parallel_zmq_transport_outbox(ts[p], r);
      snprintf(outbox[r][p], sizeof outbox[r][p], "%s", o ? o : "");
    }
  parallel_comm *comms[N];
  for (int r = 0; r < N; r++) {
    const char *outboxes[N] = {0};
    for (int p = 0; p < N; p++) outboxes[p] = outbox[r][p][0] ? outbox[r][p] : NULL;
    parallel_zmq_routes routes = {outboxes, k.relay_in, k.relay_out[r]};
    if (!(comms[r] = parallel_zmq_transport_connect_routes(&ts[r], bound_p, &routes)))
      return s_fail("connect_routes");
  }
  s_job jobs[N];
  pthread_t th[N];
  for (int r = 0; r < N; r++) {
    jobs[r] = (s_job){comms[r], 0, ""};
    pthread_create(&th[r], NULL, s_thread, &jobs[r]);
  }
  int bad_ranks = 0;
  for (int r = 0; r < N; r++) {
    pthread_join(th[r], NULL);
    if (jobs[r].rc) fprintf(stderr, "FAIL: rank %d: %s\n", r, jobs[r].err), bad_ranks++;
  }
  parallel_zmq_relay_stats st = parallel_zmq_relay_stats_get(relay);
  for (int r = 0; r < N; r++) parallel_comm_destroy(&comms[r]);
  parallel_zmq_relay_destroy(&relay);
  if (bad_ranks) return 1;
  /* 3 unreachable ranks: 6 ordered pairs each carry at least their PAIR_FLOATS message; the
   * reachable ranks' 14 other pairs go direct, so the relay carries well under all 20 pairs */
  const double pair = PAIR_FLOATS * sizeof(float);
  printf("relay forwarded %llu messages, %llu bytes\n", (unsigned long long)st.messages,
         (unsigned long long)st.bytes);
  if (st.bytes < 6 * pair) return s_fail("the relay did not carry the unreachable pairs' traffic");
  if (st.bytes > 12 * pair) return s_fail("the relay carried traffic of reachable pairs");
  printf("test_zmq_relay: all checks passed\n");
  return 0;
}
