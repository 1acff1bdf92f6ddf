/* test_coord_swarm_plan — probing among many peers (coordinator/swarm.c) on a known network, in
 * process: 200 live peers in 4 regions whose one-way latency is a distance in the plane plus
 * each end's access delay, and whose uplinks differ. Probe epochs are chosen by
 * coord_swarm_probe_newcomers and "measured" from the true network, as peer/probe.c would:
 * - every peer is probed, in ⌈200 / 32⌉ epochs, none over 64 members or 256 pairs, each after
 *   the first with landmarks; far fewer pairs than the 19 900 of all pairs;
 * - each peer's uplink is estimated exactly, and the links never measured are estimated from
 *   the network coordinates (within a region, from what each measured to it): the median
 *   relative latency error is under 15 % and the 90th percentile under 60 %, and bandwidth is
 *   min(sender's uplink, receiver's downlink);
 * - with 16 seats, coord_swarm_choose seats no peer on the slowest uplink, and no standby's
 *   estimated access link is faster than a seated peer's;
 * - the placement's estimated links are probed (coord_swarm_probe_plan_links), and once they are
 *   measured no further round is asked; the rounds stop at COORD_REFINE_ROUNDS;
 * - a member two others' transport timeouts name is sidelined, one member's repeated report is
 *   not enough. */
#include "common/common.h"
#include "common/testing.h"
#include "coordinator/coordinator_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_PEERS 200
#define S_REGIONS 4

/* The true network: region r at a point of the plane (seconds), peer i's access delay. */
static const double s_where[S_REGIONS][2] = {{0, 0}, {0.030, 0}, {0, 0.040}, {0.060, 0.050}};

static double s_true_latency(int i, int j) {
  int ri = i % S_REGIONS, rj = j % S_REGIONS;
  double plane = hypot(s_where[ri][0] - s_where[rj][0], s_where[ri][1] - s_where[rj][1]);
  return plane + 0.001 * (1 + i % 3) + 0.001 * (1 + j % 3);
}

static double s_true_up(int i) {
  return 1.25e6 * (1 + i % 5); /* 10 to 50 Mbit/s */
}

static double s_true_bw(int i, int j) {
  return fmin(s_true_up(i), 8 * s_true_up(j)); /* downlinks are 8 × uplinks */
}

static coordinator *s_open(const char *dir) {
  coordinator_config cfg;
  wt_config_defaults(coordinator_options(), &cfg);
  snprintf(cfg.state_dir, sizeof cfg.state_dir, "%.1000s", dir);
  cfg.run.stages = 4, cfg.run.replicas = 4;
  cfg.http_port = -1;
  coordinator *c = coordinator_new(&cfg);
  WT_TEST_REQUIRE(c, "coordinator_new: %s", wt_last_error());
  for (int i = 0; i < S_PEERS; i++) {
    coord_peer *p = &c->peers[i];
    memset(p, 0, sizeof *p);
    p->id = i + 1, p->status = PEER_LIVE, p->epoch_rank = -1, p->flops = 1e9, p->gpus = 1;
    snprintf(p->key, sizeof p->key, "peer%036d", i);
    snprintf(p->region, sizeof p->region, "r%d", i % S_REGIONS);
    c->live[i] = i;
  }
  c->n_peers = S_PEERS, c->next_peer_id = S_PEERS + 1;
  coord_peers_reindex(c);
  return c;
}

/* The probe epoch over who[0..n), measured from the true network, then estimated. */
static void s_measure(coordinator *c, const int *who, int n) {
  memcpy(c->members, who, sizeof(int) * (size_t)n);
  c->n_members = n;
  for (int k = 0; k < c->n_probe_pairs; k++) {
    int a = who[c->probe_pairs[k][0]], b = who[c->probe_pairs[k][1]];
    coord_link_set(c, a, b, s_true_latency(a, b), s_true_bw(a, b));
    coord_link_set(c, b, a, s_true_latency(b, a), s_true_bw(b, a));
  }
  coord_probe_estimate(c);
  coord_swarm_on_probed(c);
  c->n_members = 0;
}

static int s_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Probes every newcomer; returns the epochs it took. */
static int s_probe_all(coordinator *c, long *pairs) {
  int who[COORD_PROBE_MAX], n = 0, epochs = 0;
  char why[256];
  *pairs = 0;
  while (coord_swarm_probe_newcomers(c, c->live, S_PEERS, who, &n, why, sizeof why)) {
    WT_TEST_REQUIRE(epochs < 20, "probing does not end: %s", why);
    WT_TEST_ASSERT(n <= COORD_PROBE_MAX && c->n_probe_pairs <= COORD_PROBE_PAIRS_MAX,
                   "epoch %d: %d members, %d pairs", epochs, n, c->n_probe_pairs);
    int landmarks = 0;
    for (int k = 0; k < n; k++) landmarks += c->peers[who[k]].up_Bps > 0;
    WT_TEST_ASSERT(epochs == 0 || landmarks > 0, "epoch %d has no landmark: %s", epochs, why);
    s_measure(c, who, n);
    *pairs += c->n_probe_pairs;
    epochs++;
  }
  return epochs;
}

/* The estimates of the links never measured. */
static void s_check_estimates(coordinator *c) {
  double *err = wt_xmalloc(sizeof(double) * S_PEERS * S_PEERS);
  int n_err = 0, bw_bad = 0;
  for (int i = 0; i < S_PEERS; i++) {
    WT_TEST_ASSERT(fabs(c->peers[i].up_Bps - s_true_up(i)) < 1, "peer %d's uplink %.0f, want %.0f",
                   i, c->peers[i].up_Bps, s_true_up(i));
    for (int j = 0; j < S_PEERS; j++) {
      double lat, bw;
      if (i == j || coord_probe_link(c, i, j, &lat, &bw)) continue;
      WT_TEST_REQUIRE(coord_swarm_link(c, i, j, &lat, &bw), "no estimate of %d -> %d", i, j);
      err[n_err++] = fabs(lat - s_true_latency(i, j)) / s_true_latency(i, j);
      bw_bad += fabs(bw - fmin(c->peers[i].up_Bps, c->peers[j].down_Bps)) > 1;
    }
  }
  qsort(err, (size_t)n_err, sizeof *err, s_cmp);
  double median = err[n_err / 2], p90 = err[n_err * 9 / 10];
  printf("estimated links: %d, latency relative error median %.3f, p90 %.3f\n", n_err, median, p90);
  WT_TEST_ASSERT(median < 0.15 && p90 < 0.6, "latency error median %.3f, p90 %.3f", median, p90);
  WT_TEST_ASSERT(bw_bad == 0, "%d bandwidth estimates are not min(up, down)", bw_bad);
  free(err);
}

static double s_access(const coordinator *c, int i) {
  return fmin(c->peers[i].up_Bps, c->peers[i].down_Bps);
}

/* 16 seats among 200 equally fast peers: none on the slowest uplink (10 Mbit/s), and no
 * standby's estimated access link is faster than a seated peer's. */
static void s_check_choice(coordinator *c) {
  int list[16], seated[S_PEERS] = {0};
  coord_swarm_choose(c, c->live, S_PEERS, list, 16, 1e9, 1e8);
  double slowest_seat = INFINITY;
  for (int k = 0; k < 16; k++) {
    WT_TEST_ASSERT(list[k] % 5 != 0, "seat %d went to peer %d on a 10 Mbit/s uplink", k, list[k]);
    seated[list[k]] = 1, slowest_seat = fmin(slowest_seat, s_access(c, list[k]));
  }
  for (int i = 0; i < S_PEERS; i++)
    WT_TEST_ASSERT(seated[i] || s_access(c, i) <= slowest_seat,
                   "standby %d (%.1f Mbit/s) is faster than a seated peer (%.1f Mbit/s)", i,
                   s_access(c, i) * 8e-6, slowest_seat * 8e-6);
}

/* Whether a direction of the link between world ranks v and w is only estimated. */
static int s_estimated(coordinator *c, int v, int w) {
  double lat, bw;
  return !coord_probe_link(c, c->members[v], c->members[w], &lat, &bw) ||
         !coord_probe_link(c, c->members[w], c->members[v], &lat, &bw);
}

/* The placement: 16 peers by world rank (4 x 4), replica-order rings. */
static void s_check_refine(coordinator *c) {
  int who[COORD_PROBE_MAX], n = 0, want = 0;
  char why[256];
  for (int w = 0; w < 16; w++) c->members[w] = 7 * w + 5;
  c->n_members = 16, c->n_rings = 0, c->refine_rounds = 0;
  for (int w = 0; w < 16; w++) /* each replica's hop to the next stage, each stage's ring */
    want += (w + 4 < 16 && s_estimated(c, w, w + 4)) + s_estimated(c, w, w / 4 * 4 + (w + 1) % 4);
  WT_TEST_REQUIRE(want > 0, "the placement's links were all measured already");
  WT_TEST_REQUIRE(coord_swarm_probe_plan_links(c, who, &n, why, sizeof why),
                  "the placement's estimated links are not probed");
  printf("refine: %s, %d members\n", why, n);
  WT_TEST_ASSERT(c->n_probe_pairs == want && n <= 16, "%d pairs (want %d) among %d members",
                 c->n_probe_pairs, want, n);
  int plan[16];
  memcpy(plan, c->members, sizeof plan);
  s_measure(c, who, n);
  memcpy(c->members, plan, sizeof plan);
  c->n_members = 16;
  WT_TEST_ASSERT(!coord_swarm_probe_plan_links(c, who, &n, why, sizeof why),
                 "a measured placement asks for more probes: %s", why);
  for (int w = 0; w < 16; w++) c->members[w] = 4 * w + 2;
  WT_TEST_ASSERT(coord_swarm_probe_plan_links(c, who, &n, why, sizeof why),
                 "a second round is refused");
  WT_TEST_ASSERT(!coord_swarm_probe_plan_links(c, who, &n, why, sizeof why),
                 "more than %d rounds: %s", COORD_REFINE_ROUNDS, why);
  c->n_members = 0;
}

/* A stuck member (sideline.c): one member's timeout naming it, repeated, sidelines no one; a
 * second member's does, with the reason. */
static void s_check_accusations(coordinator *c) {
  const char *why = "zmq: rank 1: no message from rank 0 (tcp://x), step 3 within 5.0 s";
  c->epoch = 99, c->n_members = 3;
  for (int r = 0; r < 3; r++) {
    c->members[r] = 150 + r;
    c->peers[150 + r].epoch_rank = r, c->peers[150 + r].result = -1;
  }
  coord_sideline_note_failure(c, &c->peers[151], WT_ETIMEOUT, why);
  coord_sideline_note_failure(c, &c->peers[151], WT_ETIMEOUT, why); /* the same RESULT again */
  coord_sideline_note_failure(c, &c->peers[152], WT_EIO, why);      /* not a timeout */
  coord_sideline_on_epoch_over(c);
  WT_TEST_ASSERT(coord_sideline_available(c, 150, wt_now_s()),
                 "one member's repeated report sidelined rank 0");
  coord_sideline_note_failure(c, &c->peers[152], WT_ETIMEOUT, why);
  coord_sideline_on_epoch_over(c);
  WT_TEST_ASSERT(!coord_sideline_available(c, 150, wt_now_s()) &&
                     strstr(c->peers[150].sidelined_why, "data links failed"),
                 "two members' timeouts did not sideline rank 0: '%s'",
                 c->peers[150].sidelined_why);
  WT_TEST_ASSERT(coord_sideline_available(c, 151, wt_now_s()) &&
                     coord_sideline_available(c, 152, wt_now_s()),
                 "an accuser was sidelined");
  c->n_members = 0;
}

int main(void) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/wt-swarm-plan-XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  WT_TEST_REQUIRE(mkdtemp(dir), "mkdtemp");
  coordinator *c = s_open(dir);
  long pairs = 0;
  int epochs = s_probe_all(c, &pairs);
  printf("probing %d peers: %d epochs, %ld pairs (all pairs: %d)\n", S_PEERS, epochs, pairs,
         S_PEERS * (S_PEERS - 1) / 2);
  WT_TEST_ASSERT(epochs == (S_PEERS + COORD_PROBE_NEWCOMERS - 1) / COORD_PROBE_NEWCOMERS,
                 "%d probe epochs", epochs);
  WT_TEST_ASSERT(pairs < S_PEERS * 10, "%ld pairs measured", pairs);
  s_check_estimates(c);
  s_check_choice(c);
  s_check_refine(c);
  s_check_accusations(c);
  coordinator_destroy(&c);
  return wt_test_finish("test_coord_swarm_plan");
}
