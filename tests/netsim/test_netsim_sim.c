/* test_netsim_sim — the simulator against hand-computed cases: pipeline closed forms for GPipe
 * and 1F1B, NIC sharing with rates recomputed as transfers come and go, both all-reduce
 * algorithms, the breakdown, the Chrome trace, and refusal of bad plans and assignment files. */
#include "common/common.h"
#include "netsim/netsim.h"
#include "common/rng.h"
#include "common/testing.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#define B_PER_S 1e9 /* every link in these hand-made networks */

/* n devices, every link B_PER_S and `latency`; caller frees with s_net_free. */
static assign_network s_net(int n, double latency) {
  assign_network net = {.n = n};
  net.latency_s = wt_xcalloc((size_t)n * n, sizeof(double));
  net.bandwidth_Bps = wt_xcalloc((size_t)n * n, sizeof(double));
  for (int i = 0; i < n * n; i++) {
    net.bandwidth_Bps[i] = B_PER_S;
    net.latency_s[i] = i % (n + 1) == 0 ? 0 : latency;
  }
  return net;
}

static void s_net_free(assign_network *net) {
  free(net->latency_s);
  free(net->bandwidth_Bps);
  free(net->compute_speed);
}

/* Identity plan: device s*d_dp + r runs stage s of replica r. */
static assign_plan *s_plan(int d_pp, int d_dp) {
  assign_plan *p = assign_plan_new(d_pp, d_dp);
  for (int i = 0; i < d_pp * d_dp; i++) p->device[i] = i;
  return p;
}

static netsim_sim_config s_cfg(netsim_schedule kind, int m, double f, double b, double c) {
  return (netsim_sim_config){.schedule = kind,
                             .micro_batches = m,
                             .fwd_s = f,
                             .bwd_s = b,
                             .act_bytes = c * B_PER_S,
                             .dp_algo = ASSIGN_DP_SHARDED_PS};
}

static netsim_sim_result s_sim(const assign_network *net, const assign_plan *p,
                               const netsim_sim_config *cfg) {
  netsim_sim_result r;
  int rc = netsim_simulate(net, p, cfg, &r, NULL);
  WT_TEST_REQUIRE(rc == WT_OK, "%s", wt_last_error());
  double parts = r.compute_s + r.bubble_s + r.pp_comm_s + r.dp_comm_s;
  WT_TEST_CLOSE(parts, r.iteration_s, 1e-9, 1e-9, "breakdown adds up");
  WT_TEST_ASSERT(r.bubble_s >= -1e-9 && r.pp_comm_s >= -1e-9 && r.dp_comm_s >= -1e-9,
                 "non-negative parts: bubble %g pp %g dp %g", r.bubble_s, r.pp_comm_s, r.dp_comm_s);
  return r;
}

/* GPipe over S stages, zero latency, a transfer of c <= f, b seconds:
 * iteration = (m + S − 1)(f + b) + 2(S − 1)c (fill and drain, each cut crossed once each way
 * on the critical path). */
static void test_gpipe_closed_form(void) {
  int stages[] = {2, 4};
  for (size_t k = 0; k < WT_ARRAY_LEN(stages); k++) {
    int S = stages[k], m = 5;
    double f = 1.0, b = 2.0, c = 0.5;
    assign_network net = s_net(S, 0);
    assign_plan *p = s_plan(S, 1);
    netsim_sim_config cfg = s_cfg(NETSIM_GPIPE, m, f, b, c);
    netsim_sim_result r = s_sim(&net, p, &cfg);
    WT_TEST_CLOSE(r.iteration_s, (m + S - 1) * (f + b) + 2 * (S - 1) * c, 1e-9, 1e-12,
                  "GPipe iteration");
    WT_TEST_CLOSE(r.compute_s, m * (f + b), 1e-9, 1e-12, "compute");
    WT_TEST_CLOSE(r.bubble_s, (S - 1) * (f + b), 1e-9, 1e-12, "bubble");
    WT_TEST_CLOSE(r.pp_comm_s, 2 * (S - 1) * c, 1e-9, 1e-12, "pipeline comm");
    WT_TEST_ASSERT(r.dp_comm_s == 0, "no data parallelism, no dp time");
    WT_TEST_ASSERT(r.n_compute == 2 * m * S && r.n_transfers == 2 * m * (S - 1), "counts");
    /* With latency, every crossing on the critical path pays it once more. */
    assign_network slow = s_net(S, 0.1);
    r = s_sim(&slow, p, &cfg);
    WT_TEST_CLOSE(r.iteration_s, (m + S - 1) * (f + b) + 2 * (S - 1) * (c + 0.1), 1e-9, 1e-12,
                  "GPipe iteration with latency");
    s_net_free(&slow);
    assign_plan_destroy(&p);
    s_net_free(&net);
  }
}

/* 1F1B does the same passes in another order: same compute, and with free transfers the same
 * (S − 1)(f + b) bubble as GPipe. */
static void test_1f1b(void) {
  int S = 4, m = 8;
  assign_network net = s_net(S, 0);
  assign_plan *p = s_plan(S, 1);
  netsim_sim_config g = s_cfg(NETSIM_GPIPE, m, 1.0, 2.0, 0.0);
  netsim_sim_config o = s_cfg(NETSIM_1F1B, m, 1.0, 2.0, 0.0);
  netsim_sim_result rg = s_sim(&net, p, &g), ro = s_sim(&net, p, &o);
  WT_TEST_CLOSE(ro.compute_s, rg.compute_s, 1e-12, 0, "same compute");
  WT_TEST_ASSERT(ro.n_compute == rg.n_compute, "same number of passes");
  WT_TEST_CLOSE(ro.iteration_s, (m + S - 1) * 3.0, 1e-9, 1e-12, "1F1B iteration");
  /* With transfers both still finish, and 1F1B is never faster than the no-comm bound. */
  o.act_bytes = g.act_bytes = 0.4 * B_PER_S;
  ro = s_sim(&net, p, &o);
  WT_TEST_ASSERT(ro.iteration_s >= (m + S - 1) * 3.0 + 2 * (S - 1) * 0.4 - 1e-9, "lower bound");
  /* Heterogeneous speed: a device twice as fast halves its passes. */
  net.compute_speed = wt_xcalloc((size_t)S, sizeof(double));
  for (int d = 0; d < S; d++) net.compute_speed[d] = d == 0 ? 0.5 : 1.0;
  ro = s_sim(&net, p, &o);
  WT_TEST_CLOSE(ro.compute_s, m * 3.0 / 0.5, 1e-9, 1e-12, "slow device dominates compute");
  assign_plan_destroy(&p);
  s_net_free(&net);
}

/* Transfers alone: fair NIC sharing with rates recomputed when a transfer starts or ends. */
static void test_nic_sharing(void) {
  assign_network net = s_net(3, 0);
  double nic[3] = {B_PER_S, B_PER_S, B_PER_S};
  int src[2] = {0, 0}, dst[2] = {1, 2};
  double bytes[2] = {1e9, 1e9}, start[2] = {0, 0}, arrive[2];
  /* One alone takes 1 s. */
  WT_TEST_REQUIRE(netsim_transfers_simulate(&net, nic, 1, src, dst, bytes, start, arrive) == WT_OK,
                  "%s", wt_last_error());
  WT_TEST_CLOSE(arrive[0], 1.0, 1e-9, 0, "alone");
  /* Two on one sender NIC take twice as long. */
  netsim_transfers_simulate(&net, nic, 2, src, dst, bytes, start, arrive);
  WT_TEST_CLOSE(arrive[0], 2.0, 1e-9, 0, "shared sender, first");
  WT_TEST_CLOSE(arrive[1], 2.0, 1e-9, 0, "shared sender, second");
  /* Two into one receiver NIC as well. */
  int src2[2] = {1, 2}, dst2[2] = {0, 0};
  netsim_transfers_simulate(&net, nic, 2, src2, dst2, bytes, start, arrive);
  WT_TEST_CLOSE(arrive[1], 2.0, 1e-9, 0, "shared receiver");
  /* The second starts at 0.5 s: the first has half left and shares from then (1.5 s); the
   * second gets half rate until 1.5 s (half done) and full rate after (2.0 s). */
  start[1] = 0.5;
  netsim_transfers_simulate(&net, nic, 2, src, dst, bytes, start, arrive);
  WT_TEST_CLOSE(arrive[0], 1.5, 1e-9, 0, "staggered first");
  WT_TEST_CLOSE(arrive[1], 2.0, 1e-9, 0, "staggered second");
  /* A NIC twice the link: each transfer is held by its own link, not the NIC. */
  double big[3] = {2 * B_PER_S, 2 * B_PER_S, 2 * B_PER_S};
  start[1] = 0;
  netsim_transfers_simulate(&net, big, 2, src, dst, bytes, start, arrive);
  WT_TEST_CLOSE(arrive[1], 1.0, 1e-9, 0, "link-limited");
  /* Max-min: 0→1 and 0→2 share 0's NIC, 2→1 also enters 1. With NICs of 1 GB/s each flow gets
   * 0.5 GB/s (0's egress and 1's ingress both split in two). */
  int s3[3] = {0, 0, 2}, d3[3] = {1, 2, 1};
  double b3[3] = {1e9, 1e9, 1e9}, t3[3] = {0, 0, 0}, a3[3];
  netsim_transfers_simulate(&net, nic, 3, s3, d3, b3, t3, a3);
  for (int i = 0; i < 3; i++) WT_TEST_CLOSE(a3[i], 2.0, 1e-9, 0, "three-flow max-min");
  /* Latency is added after the last byte. */
  assign_network far = s_net(3, 0.25);
  netsim_transfers_simulate(&far, nic, 1, src, dst, bytes, start, arrive);
  WT_TEST_CLOSE(arrive[0], 1.25, 1e-9, 0, "latency");
  int bad_dst[1] = {0};
  WT_TEST_ASSERT(netsim_transfers_simulate(&net, nic, 1, src, bad_dst, bytes, start, arrive) ==
                     WT_EINVAL,
                 "a transfer to itself is refused");
  s_net_free(&far);
  s_net_free(&net);
}

/* Links far slower or farther than any real one still simulate, and quickly: on a clock of 1e10 s
 * a 100-byte transfer lasts less than the clock's rounding step, and the engine must still end
 * it (it takes events by identity, not by bytes reaching zero). A hang here trips the alarm. */
static void test_extreme_values(void) {
  alarm(20);
  assign_network net = s_net(3, 0);
  double nic[3] = {B_PER_S, B_PER_S, B_PER_S};
  int src[2] = {0, 0}, dst[2] = {1, 2};
  double bytes[2] = {100, 100}, start[2] = {1e10, 1e10}, arrive[2];
  int rc = netsim_transfers_simulate(&net, nic, 2, src, dst, bytes, start, arrive);
  WT_TEST_REQUIRE(rc == WT_OK, "%s", wt_last_error());
  for (int i = 0; i < 2; i++) WT_TEST_CLOSE(arrive[i], 1e10, 1e-5, 0, "tiny transfer, huge clock");
  /* A whole iteration across 1e7 s of latency (1e10 ms) and another over 1e-12 Gbit/s links. */
  assign_network far = s_net(4, 1e7), slow = s_net(4, 0);
  for (int i = 0; i < 16; i++) slow.bandwidth_Bps[i] = 1e-12 * 1e9 / 8;
  assign_plan *p = s_plan(2, 2);
  netsim_sim_config cfg = s_cfg(NETSIM_1F1B, 8, 1e-3, 2e-3, 0);
  cfg.act_bytes = 1e6;
  cfg.grad_bytes = 1e9;
  netsim_sim_result r = s_sim(&far, p, &cfg);
  WT_TEST_ASSERT(isfinite(r.iteration_s) && r.iteration_s >= 2 * 1e7 + 2 * 1e7,
                 "far: %g s, at least one activation, one gradient and the reduce's latencies",
                 r.iteration_s);
  r = s_sim(&slow, p, &cfg);
  double one_byte_s = 8 / (1e-12 * 1e9);
  WT_TEST_ASSERT(isfinite(r.iteration_s) && r.dp_comm_s >= 1e9 / 2 * one_byte_s,
                 "slow: %g s, dp %g s", r.iteration_s, r.dp_comm_s);
  assign_plan_destroy(&p);
  s_net_free(&far);
  s_net_free(&slow);
  s_net_free(&net);
  alarm(0);
}

/* A wall-clock limit stops a simulation with WT_ETIMEOUT and a message saying so; without one
 * the same simulation finishes. */
static void test_time_limit(void) {
  assign_network net = s_net(64, 0.01);
  assign_plan *p = s_plan(8, 8);
  netsim_sim_config cfg = s_cfg(NETSIM_1F1B, 8, 0.1, 0.2, 0.05);
  cfg.grad_bytes = 1e9;
  cfg.max_seconds = 1e-9;
  netsim_sim_result r;
  int rc = netsim_simulate(&net, p, &cfg, &r, NULL);
  WT_TEST_ASSERT(rc == WT_ETIMEOUT && strstr(wt_last_error(), "time limit"), "rc %d: %s", rc,
                 wt_last_error());
  cfg.max_seconds = 0;
  r = s_sim(&net, p, &cfg);
  WT_TEST_ASSERT(r.iteration_s > 0, "no limit: finishes");
  cfg.max_seconds = -1;
  WT_TEST_ASSERT(netsim_simulate(&net, p, &cfg, &r, NULL) == WT_EINVAL, "negative limit refused");
  assign_plan_destroy(&p);
  s_net_free(&net);
}

/* One stage, D replicas, no compute: both all-reduce algorithms move 2(D−1)/D of the gradient
 * through each NIC, so on uniform links both take 2(D−1)·G/(D·B). */
static void test_allreduce(void) {
  int D = 4;
  double G = 3e9;
  assign_network net = s_net(D, 0);
  assign_plan *p = s_plan(1, D);
  const assign_dp_algo algos[] = {ASSIGN_DP_RING, ASSIGN_DP_SHARDED_PS};
  for (size_t k = 0; k < 2; k++) {
    netsim_sim_config cfg = s_cfg(NETSIM_GPIPE, 1, 0, 0, 0);
    cfg.grad_bytes = G;
    cfg.dp_algo = algos[k];
    netsim_sim_result r = s_sim(&net, p, &cfg);
    WT_TEST_CLOSE(r.dp_comm_s, 2.0 * (D - 1) * G / (D * B_PER_S), 1e-9, 1e-9,
                  k ? "sharded PS" : "ring");
    WT_TEST_ASSERT(r.n_transfers == (k ? 2 * D * (D - 1) : 2 * (D - 1) * D), "transfers %d",
                   r.n_transfers);
  }
  /* With latency α the ring pays it 2(D−1) times, the parameter server twice. */
  assign_network slow = s_net(D, 0.01);
  netsim_sim_config cfg = s_cfg(NETSIM_GPIPE, 1, 0, 0, 0);
  cfg.grad_bytes = G;
  cfg.dp_algo = ASSIGN_DP_RING;
  netsim_sim_result ring = s_sim(&slow, p, &cfg);
  cfg.dp_algo = ASSIGN_DP_SHARDED_PS;
  netsim_sim_result ps = s_sim(&slow, p, &cfg);
  WT_TEST_CLOSE(ring.dp_comm_s - ps.dp_comm_s, (2 * (D - 1) - 2) * 0.01, 1e-9, 1e-9,
                "latency terms");
  s_net_free(&slow);
  assign_plan_destroy(&p);
  s_net_free(&net);
}

/* On uneven links the simulated ring takes its best order and each of its 2(D−1) steps lasts as
 * long as the slowest hop: exactly the ring term of assign's cost model, for groups ordered
 * exactly (D <= 10) and heuristically (D = 12), on many random networks. */
static void test_ring_matches_model(void) {
  const int sizes[] = {5, 9, 10, 12};
  for (size_t z = 0; z < WT_ARRAY_LEN(sizes); z++)
    for (uint64_t seed = 1; seed <= 12; seed++) {
      int D = sizes[z];
      assign_network net = s_net(D, 0);
      wt_rng rng;
      wt_rng_seed(&rng, 7 + 100 * seed + (uint64_t)D);
      for (int a = 0; a < D; a++)
        for (int b = a + 1; b < D; b++) {
          double lat = 0.05 * wt_rng_double(&rng), bw = B_PER_S * (0.2 + wt_rng_double(&rng));
          net.latency_s[a * D + b] = net.latency_s[b * D + a] = lat;
          net.bandwidth_Bps[a * D + b] = net.bandwidth_Bps[b * D + a] = bw;
        }
      assign_plan *p = s_plan(1, D);
      p->device[0] = 3, p->device[3] = 0; /* not in id order */
      assign_problem prob = {.net = &net,
                             .d_pp = 1,
                             .d_dp = D,
                             .c_dp_bytes = 2e9,
                             .c_pp_bytes = 0,
                             .dp_algo = ASSIGN_DP_RING};
      netsim_sim_config cfg = s_cfg(NETSIM_GPIPE, 1, 0, 0, 0);
      cfg.grad_bytes = prob.c_dp_bytes;
      cfg.dp_algo = ASSIGN_DP_RING;
      netsim_sim_result r = s_sim(&net, p, &cfg);
      assign_cost cost = assign_plan_cost(&prob, p);
      WT_TEST_CLOSE(r.dp_comm_s, cost.dp_s, 1e-9, 1e-9, "simulated ring = modelled ring");
      assign_plan_destroy(&p);
      s_net_free(&net);
    }
}

/* One micro-batch, no compute, one replica: nothing overlaps, so the activation crosses every
 * cut forward and its gradient every cut back, one after another — exactly 2·PIPELINEP of
 * assign's model for the plan's stage order. */
static void test_pipeline_matches_model(void) {
  int S = 5;
  assign_network net = s_net(S, 0);
  wt_rng rng;
  wt_rng_seed(&rng, 11);
  for (int a = 0; a < S; a++)
    for (int b = a + 1; b < S; b++) {
      double lat = 0.1 * wt_rng_double(&rng), bw = B_PER_S * (0.1 + wt_rng_double(&rng));
      net.latency_s[a * S + b] = net.latency_s[b * S + a] = lat;
      net.bandwidth_Bps[a * S + b] = net.bandwidth_Bps[b * S + a] = bw;
    }
  assign_plan *p = s_plan(S, 1);
  int order[5] = {2, 0, 4, 1, 3};
  memcpy(p->device, order, sizeof order);
  assign_problem prob = {.net = &net, .d_pp = S, .d_dp = 1, .c_dp_bytes = 0, .c_pp_bytes = 3e8};
  netsim_sim_config cfg = s_cfg(NETSIM_1F1B, 1, 0, 0, 0);
  cfg.act_bytes = prob.c_pp_bytes;
  netsim_sim_result r = s_sim(&net, p, &cfg);
  WT_TEST_CLOSE(r.iteration_s, assign_plan_cost(&prob, p).pp_s, 1e-9, 1e-9,
                "simulated m=1 pipeline = 2·PIPELINEP");
  assign_plan_destroy(&p);
  s_net_free(&net);
}

/* Slices on one (pid, tid) must nest or be disjoint for Perfetto; ours never nest, so disjoint. */
static int s_lanes_disjoint(const cJSON *events) {
  int n = cJSON_GetArraySize(events), ok = 1;
  for (int i = 0; i < n && ok; i++) {
    const cJSON *a = cJSON_GetArrayItem(events, i);
    if (strcmp(cJSON_GetObjectItem(a, "ph")->valuestring, "X")) continue;
    for (int j = i + 1; j < n && ok; j++) {
      const cJSON *b = cJSON_GetArrayItem(events, j);
      if (strcmp(cJSON_GetObjectItem(b, "ph")->valuestring, "X") ||
          cJSON_GetObjectItem(a, "pid")->valueint != cJSON_GetObjectItem(b, "pid")->valueint ||
          cJSON_GetObjectItem(a, "tid")->valueint != cJSON_GetObjectItem(b, "tid")->valueint)
        continue;
      double a0 = cJSON_GetObjectItem(a, "ts")->valuedouble;
      double a1 = a0 + cJSON_GetObjectItem(a, "dur")->valuedouble;
      double b0 = cJSON_GetObjectItem(b, "ts")->valuedouble;
      double b1 = b0 + cJSON_GetObjectItem(b, "dur")->valuedouble;
      if (a0 < b1 - 1e-6 && b0 < a1 - 1e-6) ok = 0;
    }
  }
  return ok;
}

static void test_trace(void) {
  assign_network net = s_net(6, 0.01);
  assign_plan *p = s_plan(3, 2);
  netsim_sim_config cfg = s_cfg(NETSIM_1F1B, 3, 0.1, 0.2, 0.3); /* transfers overlap passes */
  cfg.grad_bytes = 1e9;
  netsim_sim_result r;
  netsim_trace *tr = NULL;
  WT_TEST_REQUIRE(netsim_simulate(&net, p, &cfg, &r, &tr) == WT_OK, "%s", wt_last_error());
  char *text = netsim_trace_to_json(tr);
  cJSON *root = cJSON_Parse(text);
  WT_TEST_REQUIRE(root, "trace is not JSON");
  const cJSON *events = cJSON_GetObjectItem(root, "traceEvents");
  WT_TEST_REQUIRE(cJSON_IsArray(events), "traceEvents");
  int compute = 0, send = 0, recv = 0;
  double last_end_us = 0;
  for (const cJSON *e = events->child; e; e = e->next) {
    if (strcmp(cJSON_GetObjectItem(e, "ph")->valuestring, "X")) continue;
    const char *cat = cJSON_GetObjectItem(e, "cat")->valuestring;
    compute += !strcmp(cat, "compute");
    send += !strcmp(cat, "send");
    recv += !strcmp(cat, "recv");
    int pid = cJSON_GetObjectItem(e, "pid")->valueint;
    WT_TEST_ASSERT(pid >= 0 && pid < 6, "pid %d is a device", pid);
    double end =
        cJSON_GetObjectItem(e, "ts")->valuedouble + cJSON_GetObjectItem(e, "dur")->valuedouble;
    last_end_us = fmax(last_end_us, end);
  }
  WT_TEST_ASSERT(compute == r.n_compute, "compute events %d vs %d", compute, r.n_compute);
  WT_TEST_ASSERT(send == r.n_transfers && recv == r.n_transfers, "transfer events %d/%d vs %d",
                 send, recv, r.n_transfers);
  WT_TEST_CLOSE(last_end_us * 1e-6, r.iteration_s, 1e-6, 1e-9, "trace ends with the iteration");
  WT_TEST_ASSERT(s_lanes_disjoint(events), "slices on one lane overlap");
  cJSON_Delete(root);
  free(text);
  netsim_trace_destroy(&tr);
  WT_TEST_ASSERT(tr == NULL, "destroy clears");
  assign_plan_destroy(&p);
  s_net_free(&net);
}

static void test_bad_plans(void) {
  assign_network net = s_net(4, 0);
  assign_plan *p = s_plan(2, 2);
  netsim_sim_config cfg = s_cfg(NETSIM_GPIPE, 2, 1, 1, 0);
  netsim_sim_result r;
  p->device[3] = 0; /* device 0 twice */
  WT_TEST_ASSERT(netsim_simulate(&net, p, &cfg, &r, NULL) == WT_EINVAL, "duplicate accepted");
  p->device[3] = 7;
  WT_TEST_ASSERT(netsim_simulate(&net, p, &cfg, &r, NULL) == WT_EINVAL, "out of range accepted");
  p->device[3] = 3;
  cfg.micro_batches = 0;
  WT_TEST_ASSERT(netsim_simulate(&net, p, &cfg, &r, NULL) == WT_EINVAL, "m = 0 accepted");
  assign_plan *wrong = s_plan(3, 1);
  cfg.micro_batches = 1;
  WT_TEST_ASSERT(netsim_simulate(&net, wrong, &cfg, &r, NULL) == WT_EINVAL, "shape accepted");
  assign_plan_destroy(&wrong);
  assign_plan_destroy(&p);
  s_net_free(&net);
}

static int s_write(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (!f) return 0;
  fputs(text, f);
  fclose(f);
  return 1;
}

static void test_assignment_files(void) {
  char dir[256], path[512];
  wt_test_tmpdir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/a.json", dir);
  /* Round trip of the JSON netsim prints. */
  assign_plan *p = s_plan(2, 3), *back = NULL;
  p->device[0] = 5, p->device[5] = 0;
  p->ring = malloc(6 * sizeof(int));
  const int rings[6] = {0, 2, 1, 0, 1, 2};
  memcpy(p->ring, rings, sizeof rings);
  cJSON *js = netsim_assignment_to_json(p);
  char *text = cJSON_Print(js);
  s_write(path, text);
  free(text);
  cJSON_Delete(js);
  WT_TEST_REQUIRE(netsim_assignment_load(path, 2, 3, &back) == WT_OK, "%s", wt_last_error());
  WT_TEST_ASSERT(!memcmp(back->device, p->device, 6 * sizeof(int)), "round trip");
  WT_TEST_ASSERT(back->ring && !memcmp(back->ring, rings, sizeof rings), "rings round trip");
  assign_plan_destroy(&back);
  const char *bad[] = {
      "{\"groups\": [[0,1,2],[3,4,4]]}",                                     /* a device twice */
      "{\"groups\": [[0,1,2],[3,4]]}",                                       /* short row */
      "{\"groups\": [[0,1,2]]}",                                             /* missing stage */
      "{\"pipelines\": [[0,1],[2,3],[4,9]]}",                                /* out of range */
      "{\"pipelines\": [[0,1],[2,3],[4,\"5\"]]}",                            /* wrong type */
      "{\"groups\": [[0,1,2],[3,4,5]], \"pipelines\": [[1,0],[2,3],[4,5]]}", /* disagree */
      "{\"stages\": []}",                                                    /* neither key */
      "[1,2,3]",                                                             /* not an object */
      "{\"groups\": [[0,1,2],[3,4,5]], \"rings\": [[0,1,1],[0,1,2]]}",       /* replica twice */
      "{\"groups\": [[0,1,2],[3,4,5]], \"rings\": [[1,0,2],[0,1,2]]}",       /* not from 0 */
      "{\"groups\": [[0,1,2],[3,4,5]], \"rings\": [[0,1,2]]}",               /* a stage short */
  };
  for (size_t i = 0; i < WT_ARRAY_LEN(bad); i++) {
    s_write(path, bad[i]);
    int rc = netsim_assignment_load(path, 2, 3, &back);
    WT_TEST_ASSERT(rc == WT_EINVAL && back == NULL, "bad assignment %zu accepted", i);
    WT_TEST_ASSERT(strstr(wt_last_error(), path), "names the file: %s", wt_last_error());
  }
  remove(path);
  rmdir(dir);
  assign_plan_destroy(&p);
}

/* Access links: two peers behind one uplink each get half of it (and share the receiver's NIC);
 * alone a transfer gets all of it; between peers on one access link the uplink is not used. */
static void test_access_sharing(void) {
  assign_network net = s_net(3, 0);
  int link_of[3] = {0, 0, 1};
  double up[2] = {1e8, INFINITY}, down[2] = {INFINITY, INFINITY};
  assign_access acc = {2, link_of, up, down};
  int src[2] = {0, 1}, dst[2] = {2, 2};
  double bytes[2] = {1e8, 1e8}, start[2] = {0, 0}, arrive[2];
  WT_TEST_REQUIRE(netsim_transfers_simulate_access(&net, &acc, NULL, 2, src, dst, bytes, start,
                                                   arrive) == WT_OK,
                  "%s", wt_last_error());
  WT_TEST_CLOSE(arrive[0], 2.0, 1e-12, 1e-12, "first peer: half the uplink");
  WT_TEST_CLOSE(arrive[1], 2.0, 1e-12, 1e-12, "second peer: half the uplink");
  netsim_transfers_simulate_access(&net, &acc, NULL, 1, src, dst, bytes, start, arrive);
  WT_TEST_CLOSE(arrive[0], 1.0, 1e-12, 1e-12, "alone: the whole uplink");
  int lan_dst[1] = {1};
  netsim_transfers_simulate_access(&net, &acc, NULL, 1, src, lan_dst, bytes, start, arrive);
  WT_TEST_CLOSE(arrive[0], 0.1, 1e-12, 1e-12, "inside the site: the path, not the uplink");
  /* The second transfer starts when the first is half done: 0.5 s alone at 1e8 B/s, then both
   * at half (the first ends at 1.5 s), then the second alone again (ends at 2.0 s). */
  start[1] = 0.5;
  netsim_transfers_simulate_access(&net, &acc, NULL, 2, src, dst, bytes, start, arrive);
  WT_TEST_CLOSE(arrive[0], 1.5, 1e-12, 1e-12, "re-shared when the second starts");
  WT_TEST_CLOSE(arrive[1], 2.0, 1e-12, 1e-12, "and when the first ends");
  s_net_free(&net);
}

/* Two sites of four devices behind one 100 Mbit/s uplink (and downlink) each, replicas
 * numbered alternately: the ring in replica order crosses each uplink at four hops of every
 * step, the ring assign_solve chooses (and puts in the plan) once. Simulated, the chosen ring
 * is ~4× faster, and it takes as long as the cost model's ring term says. */
static void test_ring_order_on_shared_uplinks(void) {
  assign_network net = s_net(8, 0);
  int link_of[8];
  double cap[2] = {1.25e7, 1.25e7};
  for (int i = 0; i < 8; i++) {
    link_of[i] = i % 2;
    for (int j = 0; j < 8; j++) {
      int same = i % 2 == j % 2;
      net.latency_s[i * 8 + j] = i == j ? 0 : same ? 0.001 : 0.03;
      net.bandwidth_Bps[i * 8 + j] = same ? 1.25e9 : 1.25e8;
    }
  }
  assign_access acc = {2, link_of, cap, cap};
  assign_problem prob = {.net = &net,
                         .d_pp = 1,
                         .d_dp = 8,
                         .c_dp_bytes = 8e8,
                         .dp_algo = ASSIGN_DP_RING,
                         .access = &acc};
  assign_plan *chosen = NULL;
  WT_TEST_REQUIRE(assign_solve(&prob, ASSIGN_SOLVER_GA, NULL, 1, &chosen, NULL) == WT_OK, "%s",
                  wt_last_error());
  assign_plan *replica = assign_plan_copy(chosen);
  for (int i = 0; i < 8; i++) replica->device[i] = i, replica->ring[i] = i;
  netsim_sim_config cfg = s_cfg(NETSIM_GPIPE, 1, 0, 0, 0);
  cfg.grad_bytes = prob.c_dp_bytes;
  cfg.dp_algo = ASSIGN_DP_RING;
  cfg.access = &acc;
  netsim_sim_result a = s_sim(&net, replica, &cfg), b = s_sim(&net, chosen, &cfg);
  double model = assign_plan_cost(&prob, chosen).dp_s;
  fprintf(stderr, "shared uplinks: replica-order ring %.3f s, chosen ring %.3f s (model %.3f)\n",
          a.dp_comm_s, b.dp_comm_s, model);
  WT_TEST_ASSERT(b.dp_comm_s * 3.5 < a.dp_comm_s, "the chosen ring is ~4x faster");
  WT_TEST_CLOSE(b.dp_comm_s, model, 0, 1e-3, "simulated chosen ring vs the model");
  assign_plan_destroy(&replica);
  assign_plan_destroy(&chosen);
  s_net_free(&net);
}

int main(void) {
  test_access_sharing();
  test_ring_order_on_shared_uplinks();
  test_gpipe_closed_form();
  test_1f1b();
  test_nic_sharing();
  test_extreme_values();
  test_time_limit();
  test_allreduce();
  test_ring_matches_model();
  test_pipeline_matches_model();
  test_trace();
  test_bad_plans();
  test_assignment_files();
  return wt_test_finish("test_netsim_sim");
}
