/* bench_robust — the cost of the robust all-reduce (collectives.h) against the ring, for a group
 * of R ranks and a tensor of n floats:
 *  - bytes each rank sends per sync (exact: counted by the transport), plain fp32 and int8;
 *  - the aggregate's compute, what every rank does after the all-gather (detection included),
 *    on one thread: parallel_robust_allreduce over a group of one rank holding R rows is not
 *    possible, so the aggregate and the checks are timed as parallel_robust_aggregate plus one
 *    pass of dot products, the work of robust.c's checks;
 *  - the wall time of one sync over the in-process transport, all R ranks as threads of this
 *    process sharing its cores (so it counts every rank's compute, R times one rank's).
 * Medians over --runs. Prints a table, then one JSON line per row:
 *   {"bench":"robust","ranks":..,"n":..,"kind":..,"codec":..,"bytes":..,"ring_bytes":..,
 *    "compute_ms":..,"wall_ms":..,"ring_wall_ms":..}
 *   build/bin/bench-robust [--n 1048576] [--runs 5]
 */
#include "parallel/collectives/collectives.h"
#include "parallel/transport/comm.h"

#include "common/common.h"
#include "common/config.h"
#include "common/rng.h"
#include "compress/codec.h"
#include "compress/ef.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  int n, runs;
} s_args;

typedef struct {
  size_t n;
  parallel_robust_kind kind; /* NONE: the ring */
  const char *codec;         /* NULL: fp32 */
  uint64_t bytes;
  double seconds;
} s_job;

static int s_rank(parallel_comm *c, void *arg) {
  s_job *j = arg;
  const int r = parallel_comm_rank(c);
  float *x = wt_xmalloc(sizeof(float) * j->n);
  wt_rng rng;
  wt_rng_seed(&rng, 9 + (uint64_t)r);
  for (size_t i = 0; i < j->n; i++) x[i] = (float)wt_rng_normal(&rng);
  compress_params p = compress_params_default();
  compress_codec *codec = j->codec ? compress_codec_new(j->codec, &p) : NULL;
  parallel_ef *ef = codec ? parallel_ef_new(j->n, r, parallel_comm_size(c)) : NULL;
  compress_ef *sef = codec ? compress_ef_new(j->n) : NULL;
  parallel_robust_config cfg = parallel_robust_config_default(j->kind);
  parallel_robust *rob = j->kind != PARALLEL_ROBUST_NONE ? parallel_robust_new(&cfg) : NULL;
  parallel_comm_reset_counters(c);
  double t0 = wt_now_s();
  int rc;
  if (rob)
    rc = parallel_robust_allreduce(rob, c, codec, sef, x, j->n, NULL);
  else if (codec)
    rc = parallel_allreduce_compressed(c, codec, x, j->n, PARALLEL_OP_AVG, ef);
  else
    rc = parallel_allreduce(c, x, j->n, PARALLEL_OP_AVG);
  if (r == 0) j->seconds = wt_now_s() - t0, j->bytes = parallel_comm_bytes_sent(c);
  parallel_robust_destroy(&rob);
  compress_ef_destroy(&sef);
  parallel_ef_destroy(&ef);
  compress_codec_destroy(&codec);
  free(x);
  return rc;
}

static int s_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double s_median(double *v, int m) {
  qsort(v, (size_t)m, sizeof *v, s_cmp);
  return m % 2 ? v[m / 2] : 0.5 * (v[m / 2 - 1] + v[m / 2]);
}

/* One sync over R threads, median over runs: wall seconds, bytes rank 0 sent. */
static void s_sync(int R, size_t n, parallel_robust_kind kind, const char *codec, int runs,
                   double *wall, uint64_t *bytes) {
  double t[64];
  for (int i = 0; i < runs; i++) {
    s_job j = {.n = n, .kind = kind, .codec = codec};
    parallel_inproc_group *g = parallel_inproc_group_new(R);
    parallel_inproc_group_set_timeout(g, 120);
    parallel_inproc_run(g, s_rank, &j, NULL);
    parallel_inproc_group_destroy(&g);
    t[i] = j.seconds, *bytes = j.bytes;
  }
  *wall = s_median(t, runs);
}

/* One rank's work after the all-gather, on this thread: the aggregate and a pass of norms and
 * cosines (the checks), median over runs. */
static double s_compute(int R, size_t n, parallel_robust_kind kind, int runs) {
  float *rows = wt_xmalloc(sizeof(float) * (size_t)R * n), *out = wt_xmalloc(sizeof(float) * n);
  wt_rng rng;
  wt_rng_seed(&rng, 3);
  for (size_t i = 0; i < (size_t)R * n; i++) rows[i] = (float)wt_rng_normal(&rng);
  double t[64], sink = 0;
  for (int k = 0; k < runs; k++) {
    double t0 = wt_now_s();
    parallel_robust_aggregate(kind, rows, R, n, NULL, out);
    for (int j = 0; j < R; j++)
      for (size_t i = 0; i < n; i++) sink += (double)rows[(size_t)j * n + i] * (out[i] + rows[i]);
    t[k] = wt_now_s() - t0;
  }
  free(rows), free(out);
  if (sink == 1.2345) printf(" ");
  return s_median(t, runs);
}

int main(int argc, char **argv) {
  static const wt_option opts[] = {
      {"n", WT_OPT_INT, offsetof(s_args, n), 1024, 1 << 26, "1048576", "floats per tensor", 0},
      {"runs", WT_OPT_INT, offsetof(s_args, runs), 1, 50, "5", "repetitions (median)", 0},
      {0}};
  s_args a;
  int help = 0;
  if (wt_config_defaults(opts, &a) != WT_OK ||
      wt_config_parse_args(opts, &a, argc, argv, 1, NULL, 0, NULL, &help) != WT_OK || help) {
    fprintf(stderr, "bench-robust: %s\n", help ? "" : wt_last_error());
    wt_config_print_help(stderr, "usage: bench-robust [options]", opts);
    return help ? 0 : 2;
  }
  const size_t n = (size_t)a.n;
  const char *codecs[] = {NULL, "int8"};
  static char json[8192];
  size_t json_at = 0;
  printf("%-5s %-14s %-5s %12s %12s %7s %11s %11s %11s\n", "ranks", "aggregate", "codec",
         "bytes/rank", "ring bytes", "ratio", "compute ms", "wall ms", "ring wall");
  for (int R = 4; R <= 8; R += 4)
    for (int ci = 0; ci < 2; ci++) {
      double ring_wall;
      uint64_t ring_bytes;
      s_sync(R, n, PARALLEL_ROBUST_NONE, codecs[ci], a.runs, &ring_wall, &ring_bytes);
      for (int k = 1; k <= 3; k++) {
        double wall;
        uint64_t bytes;
        s_sync(R, n, (parallel_robust_kind)k, codecs[ci], a.runs, &wall, &bytes);
        double compute = s_compute(R, n, (parallel_robust_kind)k, a.runs);
        const char *kn = parallel_robust_kind_name((parallel_robust_kind)k);
        printf("%-5d %-14s %-5s %12llu %12llu %7.2f %11.1f %11.1f %11.1f\n", R, kn,
               codecs[ci] ? codecs[ci] : "fp32", (unsigned long long)bytes,
               (unsigned long long)ring_bytes, (double)bytes / (double)ring_bytes, 1e3 * compute,
               1e3 * wall, 1e3 * ring_wall);
        json_at += (size_t)snprintf(
            json + json_at, sizeof json - json_at,
            "{\"bench\":\"robust\",\"ranks\":%d,\"n\":%zu,\"kind\":\"%s\",\"codec\":\"%s\","
            "\"bytes\":%llu,\"ring_bytes\":%llu,\"compute_ms\":%.3f,\"wall_ms\":%.3f,"
            "\"ring_wall_ms\":%.3f}\n",
            R, n, kn, codecs[ci] ? codecs[ci] : "fp32", (unsigned long long)bytes,
            (unsigned long long)ring_bytes, 1e3 * compute, 1e3 * wall, 1e3 * ring_wall);
      }
    }
  fputs(json, stdout);
  return 0;
}
