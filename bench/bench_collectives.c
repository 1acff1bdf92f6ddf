/* bench_collectives — ring all-reduce over the ZeroMQ transport among p forked processes on
 * loopback (CURVE on), against references measured in the same run:
 *  1. shaped: every link emulates bandwidth β (WAN emulation, zero latency); the all-reduce of
 *     n bytes is compared with the bound 2(p−1)/p · n/β (target: ≥ 0.85 of the bound);
 *  2. unshaped: its bus bandwidth 2(p−1)/p · n / t beside plain ZeroMQ streams (raw PUSH/PULL
 *     sockets with CURVE, 256 KiB messages, the bytes one rank sends in the all-reduce, no
 *     transport code, two I/O threads per process like the transport) in two forms: (a) one pair streaming alone, (b) every ring link streaming
 *     at once — the same links and the same number of busy processes as the all-reduce
 *     (target: bus ≥ 0.70 of the stream). Each run measures (a), (b) and the all-reduce back to
 *     back in the same processes, so the three share whatever load the machine has then.
 * Which stream is the fair ceiling depends on the cores: CURVE encrypts and decrypts every byte,
 * so the all-reduce does p times the crypto work of a lone pair (every rank sends and receives);
 * a lone pair runs at full speed only when the machine has a core free for every busy ZeroMQ
 * thread of the ring (about 2p). With fewer cores the lone pair is a CPU ceiling the ring cannot
 * reach (on 2 cores and p = 4 about 2 / (2p) = 0.25 of it), and (b) is the comparison that
 * measures the collective rather than the machine. The table says which one the target is met
 * against. Medians over --runs repetitions. Prints a table, then one JSON line:
 *   {"bench":"collectives","procs":..,"mib":..,"runs":..,"cores":..,"beta_Bps":..,"shaped_s":..,
 *    "bound_s":..,"shaped_of_bound":..,"allreduce_s":..,"bus_GBps":..,"pair_GBps":..,
 *    "ring_links_GBps":..,"bus_of_pair":..,"bus_of_ring_links":..,"loadavg":..}
 *   build/bin/bench-collectives [--procs 4] [--mib 64] [--runs 5] [--beta 10e6]
 * The load average is printed too: on a shared machine every number here is CPU-bound.
 */
#include "parallel/collectives/collectives.h"
#include "parallel/transport/comm.h"
#include "parallel/transport/zmq.h"

#include "common/common.h"
#include "common/config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zmq.h>

#define S_MAX_RUNS 50

typedef struct {
  int procs, mib, runs;
  double beta;
} bench_cfg;

static const wt_option s_options[] = {
    {"procs", WT_OPT_INT, offsetof(bench_cfg, procs), 2, 16, "4", "processes in the ring", NULL},
    {"mib", WT_OPT_INT, offsetof(bench_cfg, mib), 1, 4096, "64", "all-reduce size in MiB", NULL},
    {"runs", WT_OPT_INT, offsetof(bench_cfg, runs), 1, S_MAX_RUNS, "5",
     "repetitions of each measurement (median)", NULL},
    {"beta", WT_OPT_FLOAT, offsetof(bench_cfg, beta), 1e5, 1e11, "10e6",
     "emulated link bandwidth of the shaped run, bytes/s (keep it well below what the unshaped "
     "ring moves, or the run measures the CPU instead of the emulation)",
     NULL},
    {0}};

/* Written by rank 0 of each fork group into memory shared with the parent. */
typedef struct {
  bench_cfg cfg;
  double allreduce_s[S_MAX_RUNS], pair_s[S_MAX_RUNS], ring_s[S_MAX_RUNS];
} s_shared;

static int s_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double s_median(const double *v, int n) {
  double tmp[S_MAX_RUNS];
  memcpy(tmp, v, (size_t)n * sizeof *v);
  qsort(tmp, (size_t)n, sizeof *tmp, s_cmp);
  return n % 2 ? tmp[n / 2] : 0.5 * (tmp[n / 2 - 1] + tmp[n / 2]);
}

/* Seconds of one all-reduce, from a common start (barrier) to the last rank's end (barrier). */
static int s_time_allreduce(parallel_comm *c, float *x, size_t n, double *out) {
  WT_CHECK(parallel_comm_barrier(c));
  double t0 = wt_now_s();
  WT_CHECK(parallel_allreduce(c, x, n, PARALLEL_OP_AVG));
  WT_CHECK(parallel_comm_barrier(c));
  *out = wt_now_s() - t0;
  return WT_OK;
}

static int s_allreduce_fn(parallel_comm *c, void *arg) {
  s_shared *sh = arg;
  size_t n = (size_t)sh->cfg.mib << 18; /* MiB of float32 */
  float *x = wt_xmalloc(n * sizeof *x);
  for (size_t i = 0; i < n; i++) x[i] = (float)(i % 1000) * 1e-3f;
  double t;
  int rc = s_time_allreduce(c, x, n, &t); /* warm-up: connections, page faults */
  for (int r = 0; rc == WT_OK && r < sh->cfg.runs; r++) {
    rc = s_time_allreduce(c, x, n, &t);
    if (parallel_comm_rank(c) == 0) sh->allreduce_s[r] = t;
  }
  free(x);
  return rc;
}

/* ---- plain ZeroMQ streams (no transport code) -------------------------------------------------
 */

/* Streams `bytes` over the already connected sockets in messages of `msg` bytes, sending and / or
 * receiving, between two barriers; *out is the seconds in between. */
static int s_stream(void *push, void *pull, int sending, int receiving, size_t bytes, size_t msg,
                    parallel_comm *c, double *out) {
  int rc = parallel_comm_barrier(c);
  double t0 = wt_now_s();
  size_t sent = 0, got = 0;
  while (rc == WT_OK && ((sending && sent < bytes) || (receiving && got < bytes))) {
    zmq_pollitem_t it[2] = {{push, 0, sending && sent < bytes ? ZMQ_POLLOUT : 0, 0},
                            {pull, 0, receiving && got < bytes ? ZMQ_POLLIN : 0, 0}};
    if (zmq_poll(it, 2, 10000) <= 0) rc = wt_fail(WT_ETIMEOUT, "bench stream stalled");
    if (it[0].revents & ZMQ_POLLOUT) {
      size_t len = WT_MIN(msg, bytes - sent); /* exactly `bytes`: nothing left for the next run */
      zmq_msg_t m;
      zmq_msg_init_size(&m, len);
      zmq_msg_send(&m, push, 0);
      sent += len;
    }
    if (it[1].revents & ZMQ_POLLIN) {
      zmq_msg_t m;
      zmq_msg_init(&m);
      zmq_msg_recv(&m, pull, 0);
      got += zmq_msg_size(&m);
      zmq_msg_close(&m);
    }
  }
  if (rc == WT_OK) rc = parallel_comm_barrier(c);
  *out = wt_now_s() - t0;
  return rc;
}

/* Unshaped: per run, (a) one pair streaming alone, (b) every ring link streaming at once, then
 * the all-reduce over the transport, in the same processes. */
static int s_unshaped_fn(parallel_comm *c, void *arg) {
  s_shared *sh = arg;
  int me = parallel_comm_rank(c), p = parallel_comm_size(c);
  int right = (me + 1) % p, left = (me + p - 1) % p;
  /* Raw sockets with fresh keys: a PULL (CURVE server) bound here, whose port and key go to the
   * left neighbour, and a PUSH to the right neighbour's. */
  char pub[41], sec[41], ep[256] = "", right_pub[41], right_ep[256];
  WT_CHECK(parallel_zmq_keypair_new(pub, sec));
  void *zctx = zmq_ctx_new();
  zmq_ctx_set(zctx, ZMQ_IO_THREADS, 2); /* as the transport: sending and receiving in parallel */
  void *pull = zmq_socket(zctx, ZMQ_PULL), *push = zmq_socket(zctx, ZMQ_PUSH);
  int one = 1, zero = 0, hwm = 16;
  zmq_setsockopt(pull, ZMQ_CURVE_SERVER, &one, sizeof one);
  zmq_setsockopt(pull, ZMQ_CURVE_SECRETKEY, sec, 40);
  zmq_setsockopt(pull, ZMQ_RCVHWM, &hwm, sizeof hwm);
  zmq_setsockopt(pull, ZMQ_LINGER, &zero, sizeof zero);
  zmq_bind(pull, "tcp://127.0.0.1:*");
  size_t len = sizeof ep;
  zmq_getsockopt(pull, ZMQ_LAST_ENDPOINT, ep, &len);
  size_t got;
  WT_CHECK(parallel_comm_send(c, left, 1, pub, 41));
  WT_CHECK(parallel_comm_send(c, left, 2, ep, sizeof ep));
  WT_CHECK(parallel_comm_recv(c, right, 1, right_pub, 41, &got));
  WT_CHECK(parallel_comm_recv(c, right, 2, right_ep, sizeof right_ep, &got));
  zmq_setsockopt(push, ZMQ_SNDHWM, &hwm, sizeof hwm);
  zmq_setsockopt(push, ZMQ_CURVE_SERVERKEY, right_pub, 40);
  zmq_setsockopt(push, ZMQ_CURVE_PUBLICKEY, pub, 40);
  zmq_setsockopt(push, ZMQ_CURVE_SECRETKEY, sec, 40);
  zmq_setsockopt(push, ZMQ_LINGER, &zero, sizeof zero);
  zmq_connect(push, right_ep);
  /* One small message around the ring so the handshakes are done before any clock starts. */
  size_t bytes = (size_t)sh->cfg.mib << 20, chunk = bytes / (size_t)p;
  size_t msg = WT_MIN(chunk, (size_t)256 << 10); /* a stream pipelines its messages */
  double t = 0;
  int rc = s_stream(push, pull, 1, 1, 1, 1, c, &t);
  /* What one rank sends in an all-reduce: 2(p-1) chunks of n/p. */
  size_t stream_bytes = 2 * (size_t)(p - 1) * chunk, n = bytes / sizeof(float);
  float *x = wt_xmalloc(n * sizeof *x);
  for (size_t i = 0; i < n; i++) x[i] = (float)(i % 1000) * 1e-3f;
  if (rc == WT_OK) rc = s_time_allreduce(c, x, n, &t); /* warm-up: page faults, queues */
  /* The three measurements of a run back to back, so that they share the machine's load. */
  for (int r = 0; rc == WT_OK && r < sh->cfg.runs; r++) {
    rc = s_stream(push, pull, me == 0, me == 1, stream_bytes, msg, c, &t); /* one pair alone */
    if (me == 0) sh->pair_s[r] = t;
    if (rc == WT_OK) rc = s_stream(push, pull, 1, 1, stream_bytes, msg, c, &t); /* every link */
    if (me == 0) sh->ring_s[r] = t;
    if (rc == WT_OK) rc = s_time_allreduce(c, x, n, &t);
    if (me == 0) sh->allreduce_s[r] = t;
  }
  free(x);
  zmq_close(push);
  zmq_close(pull);
  zmq_ctx_term(zctx);
  return rc;
}

int main(int argc, char **argv) {
  bench_cfg cfg;
  int help = 0;
  wt_config_defaults(s_options, &cfg);
  if (wt_config_parse_args(s_options, &cfg, argc, argv, 1, NULL, 0, NULL, &help) != WT_OK) {
    fprintf(stderr, "bench-collectives: %s\n", wt_last_error());
    return 2;
  }
  if (help) {
    wt_config_print_help(stdout, "usage: bench-collectives [options]", s_options);
    return 0;
  }
  s_shared *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (sh == MAP_FAILED) {
    fprintf(stderr, "bench-collectives: cannot map shared memory\n");
    return 1;
  }
  memset(sh, 0, sizeof *sh);
  sh->cfg = cfg;
  int p = cfg.procs;
  double n = (double)((size_t)cfg.mib << 20), factor = 2.0 * (p - 1) / p;
  parallel_zmq_config base = parallel_zmq_config_default();
  base.timeout_s = 120;
  base.max_queue_bytes = (size_t)cfg.mib << 20;

  if (parallel_zmq_fork_run(p, &base, s_unshaped_fn, sh, NULL) != WT_OK) {
    fprintf(stderr, "bench-collectives: %s\n", wt_last_error());
    return 1;
  }
  double pair_s = s_median(sh->pair_s, cfg.runs), ring_s = s_median(sh->ring_s, cfg.runs);
  double ar_s = s_median(sh->allreduce_s, cfg.runs);
  double pair_gbps = factor * n / pair_s / 1e9, ring_gbps = factor * n / ring_s / 1e9;
  double bus_gbps = factor * n / ar_s / 1e9;

  double lat[16] = {0}, bw[16];
  for (int r = 0; r < 16; r++) bw[r] = cfg.beta;
  base.latency_s = lat;
  base.bandwidth_Bps = bw;
  if (parallel_zmq_fork_run(p, &base, s_allreduce_fn, sh, NULL) != WT_OK) {
    fprintf(stderr, "bench-collectives: shaped: %s\n", wt_last_error());
    return 1;
  }
  double shaped_s = s_median(sh->allreduce_s, cfg.runs), bound_s = factor * n / cfg.beta;

  double load[1] = {0};
  getloadavg(load, 1);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  double of_bound = bound_s / shaped_s, of_pair = bus_gbps / pair_gbps;
  double of_ring = bus_gbps / ring_gbps;
  printf("ring all-reduce of %d MiB over ZeroMQ + CURVE, %d processes on %ld cores, median of %d "
         "runs (load average %.1f)\n",
         cfg.mib, p, cores, cfg.runs, load[0]);
  printf("%-48s %10s %10s\n", "measurement", "seconds", "GB/s");
  printf("%-48s %10.3f %10.3f\n", "(a) plain zmq stream, one pair alone", pair_s, pair_gbps);
  printf("%-48s %10.3f %10.3f\n", "(b) plain zmq streams, every ring link at once", ring_s,
         ring_gbps);
  printf("%-48s %10.3f %10.3f  (bus)\n", "all-reduce, unshaped", ar_s, bus_gbps);
  printf("%-48s %10.3f %10.3f  (bus)\n", "all-reduce, shaped", shaped_s,
         factor * n / shaped_s / 1e9);
  printf("%-48s %10.3f %10.3f\n", "bound 2(p-1)/p * n / beta", bound_s, cfg.beta / 1e9);
  printf("shaped all-reduce: %.3f of the bound (target >= 0.85: %s)\n", of_bound,
         of_bound >= 0.85 ? "met" : "NOT met");
  printf("unshaped bus bandwidth: %.2f of (a) the lone pair (target >= 0.70: %s), %.2f of (b) the "
         "ring links' streams (target >= 0.70: %s)\n",
         of_pair, of_pair >= 0.70 ? "met" : "NOT met", of_ring,
         of_ring >= 0.70 ? "met" : "NOT met");
  if (cores < 2L * p)
    printf("(a) is CPU-bound here: the ring's %d processes encrypt and decrypt %d times the bytes "
           "of the lone pair on %ld cores (ceiling about %.2f of it); (b) is the fair reference\n",
           p, p, cores, (double)cores / (2.0 * p));
  printf("{\"bench\":\"collectives\",\"procs\":%d,\"mib\":%d,\"runs\":%d,\"cores\":%ld,"
         "\"beta_Bps\":%.6g,\"shaped_s\":%.4f,\"bound_s\":%.4f,\"shaped_of_bound\":%.4f,"
         "\"allreduce_s\":%.4f,\"bus_GBps\":%.4f,\"pair_GBps\":%.4f,\"ring_links_GBps\":%.4f,"
         "\"bus_of_pair\":%.4f,\"bus_of_ring_links\":%.4f,\"loadavg\":%.2f}\n",
         p, cfg.mib, cfg.runs, cores, cfg.beta, shaped_s, bound_s, of_bound, ar_s, bus_gbps,
         pair_gbps, ring_gbps, of_pair, of_ring, load[0]);
  munmap(sh, sizeof *sh);
  return 0;
}
