/* bench_relay — what a link between two ranks costs when one or both accept no inbound
 * connection (zmq.h "Reachability"): the same sealed pair of transports, on loopback, wired
 * (d) directly, (o) through an outbox (rank 1 unreachable) and (r) through a relay (both
 * unreachable, parallel/transport/zmq_relay.h). Per run and wiring, back to back so that they
 * share the machine's load: one-way streaming of --mib MiB in 1 MiB messages (rank 0 → 1, then
 * a one-byte answer), and the round trip of a 64-byte message (median of 200). Medians over
 * --runs. Prints a table, then one JSON line:
 *   {"bench":"relay","runs":..,"mib":..,"direct_GBps":..,"outbox_GBps":..,"relay_GBps":..,
 *    "relay_of_direct":..,"direct_rtt_us":..,"outbox_rtt_us":..,"relay_rtt_us":..,"loadavg":..}
 *   build/bin/bench-relay [--mib 256] [--runs 5]
 * Both ranks (and the relay) are threads of this process: every number here is CPU-bound. */
#include "parallel/transport/zmq.h"
#include "parallel/transport/zmq_relay.h"

#include "common/common.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_RUNS_MAX 50
#define S_MSG ((size_t)1 << 20)
#define S_PINGS 200

enum { S_DIRECT, S_OUTBOX, S_RELAY, S_WIRINGS };
static const char *s_names[S_WIRINGS] = {"direct", "outbox", "relay"};

typedef struct {
  parallel_comm *c;
  size_t mib;
  double gbps, rtt_us;
  int rc;
} s_rank;

static int s_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double s_median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, s_cmp);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Rank 0 streams, rank 1 drains; then 200 round trips of 64 bytes, rank 0 timing them. */
static void *s_rank_main(void *arg) {
  s_rank *r = arg;
  const int me = parallel_comm_rank(r->c);
  uint8_t *buf = wt_xcalloc(S_MSG, 1), ack = 1;
  size_t got = 0;
  double t0 = wt_now_s();
  for (size_t k = 0; k < r->mib && r->rc == WT_OK; k++)
    r->rc = me == 0 ? parallel_comm_send(r->c, 1, 1, buf, S_MSG)
                    : parallel_comm_recv(r->c, 0, 1, buf, S_MSG, &got);
  if (r->rc == WT_OK)
    r->rc = me == 0 ? parallel_comm_recv(r->c, 1, 2, &ack, 1, &got)
                    : parallel_comm_send(r->c, 0, 2, &ack, 1);
  r->gbps = (double)r->mib * (double)S_MSG / (wt_now_s() - t0) / 1e9;
  double rtt[S_PINGS];
  for (int k = 0; k < S_PINGS && r->rc == WT_OK; k++) {
    double t = wt_now_s();
    if (me == 0) {
      r->rc = parallel_comm_send(r->c, 1, 3, buf, 64);
      if (r->rc == WT_OK) r->rc = parallel_comm_recv(r->c, 1, 3, buf, 64, &got);
    } else {
      r->rc = parallel_comm_recv(r->c, 0, 3, buf, 64, &got);
      if (r->rc == WT_OK) r->rc = parallel_comm_send(r->c, 0, 3, buf, 64);
    }
    rtt[k] = (wt_now_s() - t) * 1e6;
  }
  if (r->rc == WT_OK) r->rtt_us = s_median(rtt, S_PINGS);
  free(buf);
  return NULL;
}

/* One measurement of a wiring: fresh transports (and relay), connected, both ranks run. */
static int s_measure(int wiring, size_t mib, double *gbps, double *rtt_us) {
  char pub[2][41], sec[2][41];
  const char *pubs[2] = {pub[0], pub[1]};
  for (int r = 0; r < 2; r++) WT_CHECK(parallel_zmq_keypair_new(pub[r], sec[r]));
  int reachable[2] = {1, wiring == S_DIRECT};
  if (wiring == S_RELAY) reachable[0] = 0;
  parallel_zmq_relay *relay =
      wiring == S_RELAY ? parallel_zmq_relay_new("127.0.0.1", 2, 0, 0) : NULL;
  if (wiring == S_RELAY && !relay) return WT_EIO;
  const char *rin[2] = {0}, *rout[2] = {0};
  for (int r = 0; relay && r < 2; r++)
    rin[r] = parallel_zmq_relay_in(relay, r), rout[r] = parallel_zmq_relay_out(relay, r);
  parallel_zmq_transport *ts[2];
  char eps[2][256], outbox[2][256] = {"", ""};
  const char *ep_p[2] = {eps[0], eps[1]};
  for (int r = 0; r < 2; r++) {
    const char *own[2] = {0};
    own[r] = "tcp://127.0.0.1:*";
    parallel_zmq_config cfg = parallel_zmq_config_default();
    cfg.rank = r, cfg.size = 2, cfg.endpoints = own, cfg.timeout_s = 60;
    cfg.secret_key = sec[r], cfg.public_key = pub[r], cfg.peer_public_keys = pubs;
    cfg.reachable = reachable;
    if (!(ts[r] = parallel_zmq_transport_new(&cfg))) return WT_EIO;
    snprintf(eps[r], sizeof eps[r], "%s", parallel_zmq_transport_endpoint(ts[r]));
  }
  for (int r = 0; r < 2; r++) {
    const char *o = parallel_zmq_transport_outbox(ts[1 - r], r);
    if (o) snprintf(outbox[r], sizeof outbox[r], "%s", o);
  }
  s_rank ranks[2];
  pthread_t th[2];
  for (int r = 0; r < 2; r++) {
    const char *obs[2] = {0};
    obs[1 - r] = outbox[r][0] ? outbox[r] : NULL;
    parallel_zmq_routes routes = {obs, rin, rout[r]};
    parallel_comm *c = parallel_zmq_transport_connect_routes(&ts[r], ep_p, &routes);
    if (!c) return WT_EIO;
    ranks[r] = (s_rank){.c = c, .mib = mib};
  }
  for (int r = 0; r < 2; r++) pthread_create(&th[r], NULL, s_rank_main, &ranks[r]);
  for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
  int rc = ranks[0].rc ? ranks[0].rc : ranks[1].rc;
  *gbps = ranks[1].gbps, *rtt_us = ranks[0].rtt_us;
  for (int r = 0; r < 2; r++) parallel_comm_destroy(&ranks[r].c);
  parallel_zmq_relay_destroy(&relay);
  return rc;
}

int main(int argc, char **argv) {
  size_t mib = 256;
  int runs = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--mib"))
      mib = (size_t)atol(argv[i + 1]);
    else if (!strcmp(argv[i], "--runs"))
      runs = atoi(argv[i + 1]);
    else {
      fprintf(stderr, "bench-relay: unknown option %s (--mib N, --runs N)\n", argv[i]);
      return 2;
    }
  }
  if (mib < 1 || runs < 1 || runs > S_RUNS_MAX) {
    fprintf(stderr, "bench-relay: --mib >= 1 and --runs 1..%d\n", S_RUNS_MAX);
    return 2;
  }
  double gb[S_WIRINGS][S_RUNS_MAX], rtt[S_WIRINGS][S_RUNS_MAX];
  for (int k = 0; k < runs; k++)
    for (int w = 0; w < S_WIRINGS; w++)
      if (s_measure(w, mib, &gb[w][k], &rtt[w][k]) != WT_OK) {
        fprintf(stderr, "bench-relay: %s: %s\n", s_names[w], wt_last_error());
        return 1;
      }
  double g[S_WIRINGS], t[S_WIRINGS];
  printf("%-8s %12s %14s   (sealed pair on loopback, %zu MiB in 1 MiB messages, median of %d)\n",
         "wiring", "stream GB/s", "64 B RTT (us)", mib, runs);
  for (int w = 0; w < S_WIRINGS; w++) {
    g[w] = s_median(gb[w], runs), t[w] = s_median(rtt[w], runs);
    printf("%-8s %12.3f %14.1f\n", s_names[w], g[w], t[w]);
  }
  double load = 0;
  FILE *f = fopen("/proc/loadavg", "r");
  if (f) {
    if (fscanf(f, "%lf", &load) != 1) load = 0;
    fclose(f);
  }
  printf("{\"bench\":\"relay\",\"runs\":%d,\"mib\":%zu,\"direct_GBps\":%.4f,\"outbox_GBps\":%.4f,"
         "\"relay_GBps\":%.4f,\"relay_of_direct\":%.3f,\"direct_rtt_us\":%.1f,"
         "\"outbox_rtt_us\":%.1f,\"relay_rtt_us\":%.1f,\"loadavg\":%.2f}\n",
         runs, mib, g[0], g[1], g[2], g[2] / g[0], t[0], t[1], t[2], load);
  return 0;
}
