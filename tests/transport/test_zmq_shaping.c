/* test_zmq_shaping — the WAN emulation of the ZeroMQ transport delays each message by the link's
 * latency α and paces it at the link's bandwidth β, on the sending side, scaled by time_scale:
 * a small message arrives after ≈ α, a large one after ≈ α + b/β, back-to-back messages pay α
 * once (a pipe, not a stop-and-wait link), and time_scale shrinks all of it. Access links: two
 * messages leaving one rank for two others share its uplink, two arriving from two others share
 * its downlink (each takes twice as long as alone), and peers behind the same access link cross
 * neither. Bounds are
 * generous (the lower ones tight, since shaping can only add time; the upper ones allow for a
 * loaded 2-core machine) — the benchmark, not this test, measures how close it gets. */
#include "parallel/transport/zmq.h"

#include "common/common.h"
#include "common/testing.h"
#include "tests/transport/harness.h"

typedef struct {
  double alpha, beta, scale;
} s_link_cfg;

static double s_lat[2], s_bw[2];

static void s_shape(int rank, parallel_zmq_config *cfg, void *user) {
  s_link_cfg *l = user;
  (void)rank;
  s_lat[0] = s_lat[1] = l->alpha;
  s_bw[0] = s_bw[1] = l->beta;
  cfg->latency_s = s_lat;
  cfg->bandwidth_Bps = s_bw;
  cfg->time_scale = l->scale;
}

/* Sends `count` messages of `bytes` from rank 0 to rank 1 and returns the seconds from the first
 * send to the last receive (one process, one clock). */
static double s_transfer(s_group *g, int count, size_t bytes) {
  uint8_t *buf = wt_xcalloc(bytes + 1, 1), *in = wt_xmalloc(bytes + 1);
  double t0 = wt_now_s();
  for (int i = 0; i < count; i++)
    WT_TEST_REQUIRE(parallel_comm_send(g->comms[0], 1, 1, buf, bytes) == WT_OK, "%s",
                    wt_last_error());
  size_t got = 0;
  for (int i = 0; i < count; i++)
    WT_TEST_REQUIRE(parallel_comm_recv(g->comms[1], 0, 1, in, bytes + 1, &got) == WT_OK &&
                        got == bytes,
                    "%s", wt_last_error());
  double dt = wt_now_s() - t0;
  free(buf);
  free(in);
  return dt;
}

static void s_case(const char *what, s_link_cfg l, int count, size_t bytes) {
  parallel_zmq_config base = parallel_zmq_config_default();
  base.timeout_s = 30;
  s_group g;
  WT_TEST_REQUIRE(s_group_open(&g, 2, &base, s_shape, &l) == WT_OK, "%s", wt_last_error());
  /* Let the CURVE handshakes finish first so they are not counted as link delay. */
  s_transfer(&g, 1, 0);
  double want = l.scale * (l.alpha + (double)count * (double)bytes / l.beta);
  double dt = s_transfer(&g, count, bytes);
  parallel_zmq_link_stats st = parallel_zmq_link_stats_get(g.comms[0], 1);
  printf("%-34s expected %.3f s, measured %.3f s (shaped %.3f s on the link)\n", what, want, dt,
         st.shaped_s);
  WT_TEST_ASSERT(dt >= 0.95 * want, "%s: arrived after %.3f s, before the emulated %.3f s", what,
                 dt, want);
  WT_TEST_ASSERT(dt <= 1.25 * want + 0.25, "%s: took %.3f s, emulated %.3f s", what, dt, want);
  WT_TEST_ASSERT(st.shaped_s > 0, "%s: the link counted no shaping", what);
  s_group_close(&g);
}

/* Three ranks on fast paths (1 ms, 100 MB/s); rank 0's access link has a 10 MB/s uplink and
 * downlink, and rank 2 is behind it when `shared` (the other ranks have unlimited ones). */
typedef struct {
  int shared;
} s_access_cfg;

static double s_lat3[3][3], s_bw3[3][3];
static int s_same3[3][3];

static void s_shape_access(int rank, parallel_zmq_config *cfg, void *user) {
  const s_access_cfg *a = user;
  for (int j = 0; j < 3; j++) {
    s_lat3[rank][j] = j == rank ? 0 : 0.001;
    s_bw3[rank][j] = j == rank ? 0 : 100e6;
    s_same3[rank][j] = j == rank || (a->shared && ((rank == 0 && j == 2) || (rank == 2 && j == 0)));
  }
  cfg->latency_s = s_lat3[rank];
  cfg->bandwidth_Bps = s_bw3[rank];
  cfg->same_access = s_same3[rank];
  cfg->time_scale = 1;
  cfg->uplink_Bps = cfg->downlink_Bps = rank == 0 || (a->shared && rank == 2) ? 10e6 : 0;
}

/* Seconds for `bytes` from each of the `from` ranks to each of the `to` ranks (all sends first,
 * then all receives). */
static double s_fan(s_group *g, const int *from, int nf, const int *to, int nt, size_t bytes) {
  uint8_t *buf = wt_xcalloc(bytes + 1, 1), *in = wt_xmalloc(bytes + 1);
  double t0 = wt_now_s();
  for (int i = 0; i < nf; i++)
    for (int k = 0; k < nt; k++)
      if (from[i] != to[k])
        WT_TEST_REQUIRE(parallel_comm_send(g->comms[from[i]], to[k], 2, buf, bytes) == WT_OK, "%s",
                        wt_last_error());
  size_t got = 0;
  for (int k = 0; k < nt; k++)
    for (int i = 0; i < nf; i++)
      if (from[i] != to[k])
        WT_TEST_REQUIRE(parallel_comm_recv(g->comms[to[k]], from[i], 2, in, bytes + 1, &got) ==
                                WT_OK &&
                            got == bytes,
                        "%s", wt_last_error());
  double dt = wt_now_s() - t0;
  free(buf);
  free(in);
  return dt;
}

static void s_access_case(const char *what, int shared, const int *from, int nf, const int *to,
                          int nt, double want) {
  parallel_zmq_config base = parallel_zmq_config_default();
  base.timeout_s = 30;
  s_access_cfg a = {shared};
  s_group g;
  WT_TEST_REQUIRE(s_group_open(&g, 3, &base, s_shape_access, &a) == WT_OK, "%s", wt_last_error());
  const int all[3] = {0, 1, 2};
  s_fan(&g, all, 3, all, 3, 0); /* the handshakes, not counted */
  double dt = s_fan(&g, from, nf, to, nt, 2000000);
  printf("%-34s expected %.3f s, measured %.3f s\n", what, want, dt);
  WT_TEST_ASSERT(dt >= 0.95 * want, "%s: done after %.3f s, before the emulated %.3f s", what, dt,
                 want);
  WT_TEST_ASSERT(dt <= 1.25 * want + 0.25, "%s: took %.3f s, emulated %.3f s", what, dt, want);
  s_group_close(&g);
}

static void test_access_links(void) {
  const int r0[1] = {0}, r1[1] = {1}, r12[2] = {1, 2}, r2[1] = {2};
  /* 2 MB at 10 MB/s through rank 0's access link: 0.2 s each, 0.4 s for two */
  s_access_case("uplink: 0 -> 1 alone", 0, r0, 1, r1, 1, 0.2);
  s_access_case("uplink: 0 -> 1 and 0 -> 2 share it", 0, r0, 1, r12, 2, 0.4);
  s_access_case("downlink: 1 -> 0 and 2 -> 0 share it", 0, r12, 2, r0, 1, 0.4);
  /* behind one access link, 2 MB at the path's 100 MB/s: 0.02 s */
  s_access_case("0 -> 2 behind one access link", 1, r0, 1, r2, 1, 0.021);
}

int main(void) {
  test_access_links();
  s_case("latency only (8 B, a=0.2 s)", (s_link_cfg){0.2, 1e12, 1}, 1, 8);
  s_case("4 MB at 10 MB/s, a=0.2 s", (s_link_cfg){0.2, 10e6, 1}, 1, 4000000);
  s_case("5 x 1 MB back to back", (s_link_cfg){0.2, 10e6, 1}, 5, 1000000);
  s_case("time_scale 0.1: a=2 s, 1 MB at 1 MB/s", (s_link_cfg){2.0, 1e6, 0.1}, 1, 1000000);
  if (wt_test_failures) fprintf(stderr, "test_zmq_shaping: %d failure(s)\n", wt_test_failures);
  return wt_test_failures ? 1 : 0;
}
