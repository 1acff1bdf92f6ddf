/* bench_collectives — what users compare: the ring all-reduce over the ZeroMQ transport among
 * p forked processes on loopback, with sealed links and with --insecure ones, at 1, 4, 16 and
 * 64 MiB (up to --mib), beside references measured in the same run:
 *  1. a lone pair of processes streaming --pair-mib MiB in --pair-msg-kib messages (256 KiB;
 *     the transport sends those over 1 MiB in chunks) over (a) plain ZeroMQ PUSH/PULL
 *     (plaintext, no transport code), (c) the same with CurveZMQ, (s) the
 *     transport with sealed links (send + recv_view: sealed from the sender's buffer, opened
 *     where ZeroMQ received it) and (i) the transport with insecure links; back to back per
 *     run, so they share the machine's load (target: (s) ≥ 0.70 of (a)); then the seal alone
 *     on one core, the ring's frames copied and sealed in place against sealed from where
 *     they lie (what the transport does);
 *  2. the all-reduce at each size, sealed and insecure: bus bandwidth 2(p−1)/p · n / t, from a
 *     common start (barrier) to the last rank's end (barrier), like Open MPI's, which
 *     scripts/bench-collectives.sh measures beside it (bench/mpi_allreduce.c) and merges;
 *  3. shaped (--beta > 0): every link emulates bandwidth β; the all-reduce of --mib MiB against
 *     the bound 2(p−1)/p · n/β (target ≥ 0.85).
 * Medians over --runs repetitions. Prints a table, then one JSON line:
 *   {"bench":"collectives","procs":..,"runs":..,"cores":..,"cipher":..,"streams":..,"pair_mib":..,
 *    "pair_msg_kib":..,"pair_plain_GBps":..,"pair_curve_GBps":..,"pair_sealed_GBps":..,"pair_insecure_GBps":..,
 *    "sealed_of_plain":..,"pair_{plain,curve,sealed,insecure}_cpu_s_per_GB":..,
 *    "seal_copy_cpu_s_per_GB":..,"seal_direct_cpu_s_per_GB":..,
 *    "allreduce":[{"mib":..,"sealed_s":..,"sealed_bus_GBps":..,"sealed_cpu_s":..,
 *    "insecure_s":..,"insecure_bus_GBps":..,"insecure_cpu_s":..},..],"beta_Bps":..,
 *    "shaped_of_bound":..,"loadavg":..}
 * Beside each time, the CPU seconds of all the processes in the same interval (their threads and
 * ZeroMQ's, user and system): what the work costs, which the load of a shared machine changes far
 * less than the wall time. The table's "CPU bound" is the bus bandwidth those CPU seconds would
 * allow if spread over every core with none idle.
 *   build/bin/bench-collectives [--procs 4] [--mib 64] [--runs 5] [--pair-mib 256]
 *                              [--pair-msg-kib 256] [--beta 10e6] [--streams 1]
 * The load average is printed too: on a shared machine every number here is CPU-bound.
 */
#include "parallel/collectives/collectives.h"
#include "parallel/transport/comm.h"
#include "parallel/transport/zmq.h"
#include "parallel/transport/zmq_aead.h"

#include "common/common.h"
#include "common/config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include <sodium.h>
#include <zmq.h>

#define S_MAX_RUNS 50
#define S_MAX_PROCS 16
#define S_NSIZES 4
#define S_MSG ((size_t)256 << 10) /* message size of the warm-up streams */

static const int s_sizes[S_NSIZES] = {1, 4, 16, 64}; /* MiB; those ≤ --mib, and --mib itself */

typedef struct {
  int procs, mib, runs, pair_mib, pair_msg_kib, streams;
  double beta;
} bench_cfg;

static const wt_option s_options[] = {
    {"procs", WT_OPT_INT, offsetof(bench_cfg, procs), 2, 16, "4", "processes in the ring", NULL},
    {"mib", WT_OPT_INT, offsetof(bench_cfg, mib), 1, 4096, "64", "all-reduce size in MiB", NULL},
    {"runs", WT_OPT_INT, offsetof(bench_cfg, runs), 1, S_MAX_RUNS, "5",
     "repetitions of each measurement (median)", NULL},
    {"pair-mib", WT_OPT_INT, offsetof(bench_cfg, pair_mib), 1, 4096, "256",
     "bytes one pair streams per run, MiB", NULL},
    {"streams", WT_OPT_INT, offsetof(bench_cfg, streams), 1, 8, "1",
     "TCP connections per sealed link (parallel_zmq_config.streams; insecure and shaped runs "
     "use 1)",
     NULL},
    {"pair-msg-kib", WT_OPT_INT, offsetof(bench_cfg, pair_msg_kib), 1, 1 << 20, "256",
     "size of the pair's messages, KiB", NULL},
    {"beta", WT_OPT_FLOAT, offsetof(bench_cfg, beta), 0, 1e11, "10e6",
     "emulated link bandwidth of the shaped run, bytes/s, 0 to skip it (keep it well below what "
     "the unshaped ring moves, or the run measures the CPU instead of the emulation)",
     NULL},
    {0}};

/* Written by rank 0 of each fork group into memory shared with the parent. */
typedef struct {
  bench_cfg cfg;
  int nsizes, mib[S_NSIZES + 1];
  double allreduce_s[S_NSIZES + 1][S_MAX_RUNS];
  double plain_s[S_MAX_RUNS], curve_s[S_MAX_RUNS], comm_s[S_MAX_RUNS];
  /* CPU seconds of each rank (its process: its threads and ZeroMQ's) in the same intervals */
  double allreduce_cpu[S_NSIZES + 1][S_MAX_RUNS][S_MAX_PROCS];
  double plain_cpu[S_MAX_RUNS][S_MAX_PROCS], curve_cpu[S_MAX_RUNS][S_MAX_PROCS],
      comm_cpu[S_MAX_RUNS][S_MAX_PROCS];
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

/* CPU seconds this process (all its threads) has used. */
static double s_cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The median over runs of the CPU seconds of ranks [0, ranks) together: what the work costs,
 * which the machine's load changes far less than it changes the wall time. */
static double s_cpu_median(const double (*cpu)[S_MAX_PROCS], int runs, int ranks) {
  double sum[S_MAX_RUNS];
  for (int r = 0; r < runs; r++) {
    sum[r] = 0;
    for (int k = 0; k < ranks; k++) sum[r] += cpu[r][k];
  }
  return s_median(sum, runs);
}

/* Seconds of one all-reduce, from a common start (barrier) to the last rank's end (barrier);
 * *cpu is this rank's CPU seconds in between. */
static int s_time_allreduce(parallel_comm *c, float *x, size_t n, double *out, double *cpu) {
  WT_CHECK(parallel_comm_barrier(c));
  double t0 = wt_now_s(), c0 = s_cpu_now();
  WT_CHECK(parallel_allreduce(c, x, n, PARALLEL_OP_AVG));
  WT_CHECK(parallel_comm_barrier(c));
  *out = wt_now_s() - t0;
  *cpu = s_cpu_now() - c0;
  return WT_OK;
}

/* Every size in sh->mib: a warm-up (connections, page faults), then --runs timed all-reduces. */
static int s_allreduce_fn(parallel_comm *c, void *arg) {
  s_shared *sh = arg;
  int rc = WT_OK;
  for (int k = 0; rc == WT_OK && k < sh->nsizes; k++) {
    size_t n = (size_t)sh->mib[k] << 18; /* MiB of float32 */
    float *x = wt_xmalloc(n * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = (float)(i % 1000) * 1e-3f;
    double t, cpu;
    int me = parallel_comm_rank(c);
    rc = s_time_allreduce(c, x, n, &t, &cpu);
    for (int r = 0; rc == WT_OK && r < sh->cfg.runs; r++) {
      rc = s_time_allreduce(c, x, n, &t, &sh->allreduce_cpu[k][r][me]);
      if (me == 0) sh->allreduce_s[k][r] = t;
    }
    free(x);
  }
  return rc;
}

/* ---- plain ZeroMQ streams (no transport code) -------------------------------------------------
 */

/* Streams `bytes` over the already connected sockets in messages of `msg` bytes, sending and / or
 * receiving, between two barriers; *out is the seconds in between, *cpu this rank's CPU
 * seconds. */
static int s_stream(void *push, void *pull, int sending, int receiving, size_t bytes, size_t msg,
                    parallel_comm *c, double *out, double *cpu) {
  int rc = parallel_comm_barrier(c);
  double t0 = wt_now_s(), c0 = s_cpu_now();
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
  *cpu = s_cpu_now() - c0;
  return rc;
}

/* Streams `bytes` from rank 0 to rank 1 over the transport in `msg`-byte messages: sent from one
 * buffer (copied into the frame, as the ring's pieces are), received in place (recv_view). */
static int s_comm_stream(parallel_comm *c, size_t bytes, size_t msg, uint8_t *buf, double *out,
                         double *cpu) {
  int me = parallel_comm_rank(c), rc = parallel_comm_barrier(c);
  double t0 = wt_now_s(), c0 = s_cpu_now();
  for (size_t done = 0; rc == WT_OK && done < bytes; done += msg) {
    size_t len = WT_MIN(msg, bytes - done), got = 0;
    if (me == 0) {
      rc = parallel_comm_send(c, 1, 3, buf, len);
    } else {
      const void *data = NULL;
      void *handle = NULL;
      rc = parallel_comm_recv_view(c, 0, 3, buf, len, &data, &got, &handle);
      if (rc == WT_OK) parallel_comm_release(c, handle);
    }
  }
  if (rc == WT_OK) rc = parallel_comm_barrier(c);
  *out = wt_now_s() - t0;
  *cpu = s_cpu_now() - c0;
  return rc;
}

/* Raw sockets between ranks 0 → 1 on their own context (one I/O thread, as the transport):
 * plaintext, or CURVE with fresh keys. */
static int s_raw_pair(parallel_comm *c, int curve, void **zctx, void **push, void **pull) {
  int me = parallel_comm_rank(c), zero = 0, one = 1, hwm = 16;
  char pub[41], sec[41], ep[256] = "", peer_pub[41] = "";
  size_t got;
  WT_CHECK(parallel_zmq_keypair_new(pub, sec));
  *zctx = zmq_ctx_new();
  zmq_ctx_set(*zctx, ZMQ_IO_THREADS, 1);
  *push = *pull = NULL;
  if (me == 1) {
    *pull = zmq_socket(*zctx, ZMQ_PULL);
    if (curve) {
      zmq_setsockopt(*pull, ZMQ_CURVE_SERVER, &one, sizeof one);
      zmq_setsockopt(*pull, ZMQ_CURVE_SECRETKEY, sec, 40);
    }
    zmq_setsockopt(*pull, ZMQ_RCVHWM, &hwm, sizeof hwm);
    zmq_setsockopt(*pull, ZMQ_LINGER, &zero, sizeof zero);
    zmq_bind(*pull, "tcp://127.0.0.1:*");
    size_t len = sizeof ep;
    zmq_getsockopt(*pull, ZMQ_LAST_ENDPOINT, ep, &len);
    WT_CHECK(parallel_comm_send(c, 0, 1, pub, 41));
    WT_CHECK(parallel_comm_send(c, 0, 2, ep, sizeof ep));
  } else if (me == 0) {
    WT_CHECK(parallel_comm_recv(c, 1, 1, peer_pub, 41, &got));
    WT_CHECK(parallel_comm_recv(c, 1, 2, ep, sizeof ep, &got));
    *push = zmq_socket(*zctx, ZMQ_PUSH);
    zmq_setsockopt(*push, ZMQ_SNDHWM, &hwm, sizeof hwm);
    if (curve) {
      zmq_setsockopt(*push, ZMQ_CURVE_SERVERKEY, peer_pub, 40);
      zmq_setsockopt(*push, ZMQ_CURVE_PUBLICKEY, pub, 40);
      zmq_setsockopt(*push, ZMQ_CURVE_SECRETKEY, sec, 40);
    }
    zmq_setsockopt(*push, ZMQ_LINGER, &zero, sizeof zero);
    zmq_connect(*push, ep);
  }
  return WT_OK;
}

static void s_raw_close(void *zctx, void *push, void *pull) {
  if (push) zmq_close(push);
  if (pull) zmq_close(pull);
  zmq_ctx_term(zctx);
}

/* The lone pair, per run back to back: plain ZeroMQ, CURVE, then the transport (sealed or
 * insecure, as the comm was made). With `comm_only`, just the transport. */
static int s_pair_fn(parallel_comm *c, void *arg) {
  s_shared *sh = arg;
  int me = parallel_comm_rank(c), comm_only = sh->cfg.procs < 0;
  size_t bytes = (size_t)sh->cfg.pair_mib << 20, msg = (size_t)sh->cfg.pair_msg_kib << 10;
  void *zp = NULL, *pp = NULL, *lp = NULL, *zc = NULL, *pc = NULL, *lc = NULL;
  if (!comm_only) {
    WT_CHECK(s_raw_pair(c, 0, &zp, &pp, &lp));
    WT_CHECK(s_raw_pair(c, 1, &zc, &pc, &lc));
  }
  size_t cap = WT_MAX(msg, S_MSG);
  uint8_t *buf = wt_xmalloc(cap);
  memset(buf, 0x5a, cap);
  double t = 0, cpu = 0;
  int rc = WT_OK;
  /* Warm-up: handshakes, sessions, page faults. */
  if (!comm_only) rc = s_stream(pp, lp, me == 0, me == 1, S_MSG * 8, S_MSG, c, &t, &cpu);
  if (!comm_only && rc == WT_OK)
    rc = s_stream(pc, lc, me == 0, me == 1, S_MSG * 8, S_MSG, c, &t, &cpu);
  if (rc == WT_OK) rc = s_comm_stream(c, S_MSG * 8, S_MSG, buf, &t, &cpu);
  for (int r = 0; rc == WT_OK && r < sh->cfg.runs; r++) {
    if (!comm_only) {
      rc =
          s_stream(pp, lp, me == 0, me == 1, bytes, msg, c, &sh->plain_s[r], &sh->plain_cpu[r][me]);
      if (rc == WT_OK)
        rc = s_stream(pc, lc, me == 0, me == 1, bytes, msg, c, &sh->curve_s[r],
                      &sh->curve_cpu[r][me]);
    }
    if (rc == WT_OK) rc = s_comm_stream(c, bytes, msg, buf, &t, &sh->comm_cpu[r][me]);
    if (me == 0) sh->comm_s[r] = t;
  }
  free(buf);
  if (!comm_only) {
    s_raw_close(zp, pp, lp);
    s_raw_close(zc, pc, lc);
  }
  return rc;
}

/* ---- the seal alone, on one core ------------------------------------------------------------ */

/* CPU seconds per GB to seal the ring's frames (a 32-byte frame header and a 256 KiB piece taken
 * from a 64 MiB tensor) into fresh buffers, the two ways a sender can: copy header and piece into
 * the buffer and seal it in place, or seal from where they lie into the buffer
 * (parallel_zmq_aead_seal_spans, what the transport does). Alternated, medians of 9 passes. */
static void s_seal_cost(double *copy_s_per_gb, double *direct_s_per_gb) {
  enum { S_REPS = 9 };
  const size_t piece = (size_t)256 << 10, tensor = (size_t)64 << 20, head = 32;
  uint8_t *x = wt_xmalloc(tensor), key[32] = {1}, r1[32] = {2}, r2[32] = {3}, ad[56] = {0};
  uint8_t header[32] = {0}, tag[PARALLEL_ZMQ_TAG_BYTES];
  memset(x, 7, tensor);
  parallel_zmq_aead a = {0};
  parallel_zmq_aead_session(&a, key, r1, r2, parallel_zmq_aead_caps(), parallel_zmq_aead_caps());
  double t[2][S_REPS];
  uint64_t counter = 0;
  for (int rep = 0; rep < S_REPS; rep++)
    for (int direct = 0; direct < 2; direct++) {
      double c0 = s_cpu_now();
      for (size_t off = 0; off + piece <= tensor; off += piece) {
        uint8_t *frame = wt_xmalloc(head + piece);
        if (direct) {
          parallel_zmq_span in[2] = {{header, head}, {x + off, piece}};
          parallel_zmq_aead_seal_spans(&a, counter++, ad, sizeof ad, in, 2, frame, tag);
        } else {
          memcpy(frame, header, head);
          memcpy(frame + head, x + off, piece);
          parallel_zmq_aead_seal(&a, counter++, ad, sizeof ad, frame, head + piece, tag);
        }
        free(frame);
      }
      t[direct][rep] = (s_cpu_now() - c0) / ((double)tensor / 1e9);
    }
  *copy_s_per_gb = s_median(t[0], S_REPS);
  *direct_s_per_gb = s_median(t[1], S_REPS);
  parallel_zmq_aead_free(&a);
  free(x);
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
  for (int k = 0; k < S_NSIZES && s_sizes[k] < cfg.mib; k++) sh->mib[sh->nsizes++] = s_sizes[k];
  sh->mib[sh->nsizes++] = cfg.mib;
  double factor = 2.0 * (p - 1) / p, pair_bytes = (double)((size_t)cfg.pair_mib << 20);
  parallel_zmq_config base = parallel_zmq_config_default();
  base.timeout_s = 120;
  base.max_queue_bytes = (size_t)64 << 20;
  base.streams = cfg.streams;

  /* The lone pair: plain, CURVE and sealed in one group, insecure in a second. */
  double plain_s[S_MAX_RUNS], curve_s[S_MAX_RUNS], sealed_s[S_MAX_RUNS], insecure_s[S_MAX_RUNS];
  if (parallel_zmq_fork_run(2, &base, s_pair_fn, sh, NULL) != WT_OK) {
    fprintf(stderr, "bench-collectives: pair: %s\n", wt_last_error());
    return 1;
  }
  memcpy(plain_s, sh->plain_s, sizeof plain_s);
  memcpy(curve_s, sh->curve_s, sizeof curve_s);
  memcpy(sealed_s, sh->comm_s, sizeof sealed_s);
  double pair_gb = pair_bytes / 1e9; /* core-seconds per GB of each pair, both processes */
  double cpu_plain = s_cpu_median(sh->plain_cpu, cfg.runs, 2) / pair_gb;
  double cpu_curve = s_cpu_median(sh->curve_cpu, cfg.runs, 2) / pair_gb;
  double cpu_sealed = s_cpu_median(sh->comm_cpu, cfg.runs, 2) / pair_gb;
  parallel_zmq_config insecure = base;
  insecure.insecure = 1;
  insecure.streams = 1; /* several streams need sealed links */
  sh->cfg.procs = -1;   /* transport only */
  if (parallel_zmq_fork_run(2, &insecure, s_pair_fn, sh, NULL) != WT_OK) {
    fprintf(stderr, "bench-collectives: insecure pair: %s\n", wt_last_error());
    return 1;
  }
  sh->cfg.procs = p;
  memcpy(insecure_s, sh->comm_s, sizeof insecure_s);
  double cpu_insecure = s_cpu_median(sh->comm_cpu, cfg.runs, 2) / pair_gb;
  double gb_plain = pair_bytes / s_median(plain_s, cfg.runs) / 1e9;
  double gb_curve = pair_bytes / s_median(curve_s, cfg.runs) / 1e9;
  double gb_sealed = pair_bytes / s_median(sealed_s, cfg.runs) / 1e9;
  double gb_insecure = pair_bytes / s_median(insecure_s, cfg.runs) / 1e9;

  /* The all-reduce at every size, sealed, then insecure. */
  double ar_sealed[S_NSIZES + 1], ar_insecure[S_NSIZES + 1];
  double cpu_ar_sealed[S_NSIZES + 1], cpu_ar_insecure[S_NSIZES + 1]; /* all ranks' CPU s */
  if (parallel_zmq_fork_run(p, &base, s_allreduce_fn, sh, NULL) != WT_OK) {
    fprintf(stderr, "bench-collectives: %s\n", wt_last_error());
    return 1;
  }
  for (int k = 0; k < sh->nsizes; k++) {
    ar_sealed[k] = s_median(sh->allreduce_s[k], cfg.runs);
    cpu_ar_sealed[k] = s_cpu_median(sh->allreduce_cpu[k], cfg.runs, p);
  }
  if (parallel_zmq_fork_run(p, &insecure, s_allreduce_fn, sh, NULL) != WT_OK) {
    fprintf(stderr, "bench-collectives: insecure: %s\n", wt_last_error());
    return 1;
  }
  for (int k = 0; k < sh->nsizes; k++) {
    ar_insecure[k] = s_median(sh->allreduce_s[k], cfg.runs);
    cpu_ar_insecure[k] = s_cpu_median(sh->allreduce_cpu[k], cfg.runs, p);
  }

  /* Shaped, at --mib only. */
  double shaped_s = 0, bound_s = 0, n_top = (double)((size_t)cfg.mib << 20);
  if (cfg.beta > 0) {
    double lat[16] = {0}, bw[16];
    for (int r = 0; r < 16; r++) bw[r] = cfg.beta;
    parallel_zmq_config shaped = base;
    shaped.streams = 1; /* an emulated link paces one stream */
    shaped.latency_s = lat;
    shaped.bandwidth_Bps = bw;
    sh->nsizes = 1;
    sh->mib[0] = cfg.mib;
    if (parallel_zmq_fork_run(p, &shaped, s_allreduce_fn, sh, NULL) != WT_OK) {
      fprintf(stderr, "bench-collectives: shaped: %s\n", wt_last_error());
      return 1;
    }
    shaped_s = s_median(sh->allreduce_s[0], cfg.runs);
    bound_s = factor * n_top / cfg.beta;
    sh->nsizes = 0;
    for (int k = 0; k < S_NSIZES && s_sizes[k] < cfg.mib; k++) sh->mib[sh->nsizes++] = s_sizes[k];
    sh->mib[sh->nsizes++] = cfg.mib;
  }

  double load[1] = {0};
  getloadavg(load, 1);
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  const char *cipher = crypto_aead_aes256gcm_is_available() ? "aes256gcm" : "chacha20poly1305";
  printf("ZeroMQ transport, %d processes on %ld cores, median of %d runs (load average %.1f), "
         "sealed with %s\n",
         p, cores, cfg.runs, load[0], cipher);
  char pair_title[64];
  snprintf(pair_title, sizeof pair_title, "lone pair, %d KiB messages", cfg.pair_msg_kib);
  printf("%-44s %10s %10s %10s\n", pair_title, "seconds", "GB/s", "CPU s/GB");
  printf("%-44s %10.3f %10.3f %10.3f\n", "(a) plain ZeroMQ, plaintext", s_median(plain_s, cfg.runs),
         gb_plain, cpu_plain);
  printf("%-44s %10.3f %10.3f %10.3f\n", "(c) plain ZeroMQ, CurveZMQ", s_median(curve_s, cfg.runs),
         gb_curve, cpu_curve);
  printf("%-44s %10.3f %10.3f %10.3f\n", "(s) transport, sealed", s_median(sealed_s, cfg.runs),
         gb_sealed, cpu_sealed);
  printf("%-44s %10.3f %10.3f %10.3f\n", "(i) transport, insecure", s_median(insecure_s, cfg.runs),
         gb_insecure, cpu_insecure);
  printf("sealed pair: %.2f of plaintext ZeroMQ (target >= 0.70: %s), %.2fx CurveZMQ\n",
         gb_sealed / gb_plain, gb_sealed / gb_plain >= 0.70 ? "met" : "NOT met",
         gb_sealed / gb_curve);
  double seal_copy, seal_direct;
  s_seal_cost(&seal_copy, &seal_direct);
  printf("seal on one core, 256 KiB frames: copy then seal in place %.3f CPU s/GB, seal from the "
         "caller's bytes %.3f\n",
         seal_copy, seal_direct);
  /* CPU bound: the bus bandwidth if all ranks' CPU seconds were spread over every core. */
  printf("%-10s %10s %10s %10s %10s %10s %10s\n", "all-reduce", "sealed s", "bus GB/s", "CPU bound",
         "insecure s", "bus GB/s", "CPU bound");
  for (int k = 0; k < sh->nsizes; k++) {
    double n = (double)((size_t)sh->mib[k] << 20);
    printf("%6d MiB %10.4f %10.3f %10.3f %10.4f %10.3f %10.3f\n", sh->mib[k], ar_sealed[k],
           factor * n / ar_sealed[k] / 1e9, factor * n * cores / cpu_ar_sealed[k] / 1e9,
           ar_insecure[k], factor * n / ar_insecure[k] / 1e9,
           factor * n * cores / cpu_ar_insecure[k] / 1e9);
  }
  if (cfg.beta > 0)
    printf("shaped all-reduce of %d MiB at beta %.3g B/s: %.3f s, %.3f of the bound %.3f s "
           "(target >= 0.85: %s)\n",
           cfg.mib, cfg.beta, shaped_s, bound_s / shaped_s, bound_s,
           bound_s / shaped_s >= 0.85 ? "met" : "NOT met");
  printf("{\"bench\":\"collectives\",\"procs\":%d,\"runs\":%d,\"cores\":%ld,\"cipher\":\"%s\","
         "\"streams\":%d,\"pair_mib\":%d,\"pair_msg_kib\":%d,\"pair_plain_GBps\":%.4f,"
         "\"pair_curve_GBps\":%.4f,\"pair_sealed_GBps\":%.4f,\"pair_insecure_GBps\":%.4f,"
         "\"sealed_of_plain\":%.4f,"
         "\"pair_plain_cpu_s_per_GB\":%.4f,\"pair_curve_cpu_s_per_GB\":%.4f,"
         "\"pair_sealed_cpu_s_per_GB\":%.4f,\"pair_insecure_cpu_s_per_GB\":%.4f,"
         "\"seal_copy_cpu_s_per_GB\":%.4f,\"seal_direct_cpu_s_per_GB\":%.4f,\"allreduce\":[",
         p, cfg.runs, cores, cipher, cfg.streams, cfg.pair_mib, cfg.pair_msg_kib, gb_plain,
         gb_curve, gb_sealed, gb_insecure, gb_sealed / gb_plain, cpu_plain, cpu_curve, cpu_sealed,
         cpu_insecure, seal_copy, seal_direct);
  for (int k = 0; k < sh->nsizes; k++) {
    double n = (double)((size_t)sh->mib[k] << 20);
    printf("%s{\"mib\":%d,\"sealed_s\":%.5f,\"sealed_bus_GBps\":%.4f,\"sealed_cpu_s\":%.5f,"
           "\"insecure_s\":%.5f,\"insecure_bus_GBps\":%.4f,\"insecure_cpu_s\":%.5f}",
           k ? "," : "", sh->mib[k], ar_sealed[k], factor * n / ar_sealed[k] / 1e9,
           cpu_ar_sealed[k], ar_insecure[k], factor * n / ar_insecure[k] / 1e9, cpu_ar_insecure[k]);
  }
  printf("],\"beta_Bps\":%.6g,\"shaped_s\":%.4f,\"bound_s\":%.4f,\"shaped_of_bound\":%.4f,"
         "\"loadavg\":%.2f}\n",
         cfg.beta, shaped_s, bound_s, shaped_s > 0 ? bound_s / shaped_s : 0, load[0]);
  munmap(sh, sizeof *sh);
  return 0;
}
