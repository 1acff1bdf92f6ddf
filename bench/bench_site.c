/* bench_site — what running a pipeline stage on a site of t tensor-parallel ranks
 * (parallel/datacenter/site.h) costs on this machine, against the same stage on one gpt_stage:
 *   - the time of one micro-batch's forward + backward of a middle stage on the gpt_stage and on
 *     sites of each t in --ranks, alternately (parallel_site_measure, medians over --runs), the
 *     efficiency that gives (stage / (t × site)), and the bytes the site's ranks sent per pass;
 *   - the fixed cost of one site call: parallel_inproc_run of a function that does nothing.
 * On a CPU the ranks share the machine's cores (and OpenBLAS's threads), so a site is no faster
 * than one device here: the table measures the overhead of the code path GPUs will run, not a
 * speed-up. Prints a table, then one JSON line:
 *   {"bench":"site","layers":..,"channels":..,"heads":..,"rows":..,"seq":..,
 *    "sites":[{"ranks":..,"stage_s":..,"pass_s":..,"efficiency":..,"bytes":..,"call_us":..},...],
 *    "loadavg":..}
 *   build/bin/bench-site [--layers 2] [--channels 256] [--heads 8] [--rows 4] [--seq 128]
 *                        [--ranks 2,4] [--runs 7]
 */
#include "kernels/kernels.h"
#include "model/gpt.h"
#include "parallel/transport/comm.h"
#include "parallel/datacenter/site.h"

#include "common/common.h"
#include "common/config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_MAX_RUNS 64 /* parallel_site_measure's most repetitions */
#define S_MAX_SITES 8

typedef struct {
  int layers, channels, heads, rows, seq, runs;
  char ranks[WT_CONFIG_STR_MAX];
} bench_cfg;

#define F(x) offsetof(bench_cfg, x)
static const wt_option s_options[] = {
    {"layers", WT_OPT_INT, F(layers), 1, 64, "2", "blocks of the middle stage", NULL},
    {"channels", WT_OPT_INT, F(channels), 8, 8192, "256", "model width C", NULL},
    {"heads", WT_OPT_INT, F(heads), 1, 128, "8", "attention heads", NULL},
    {"rows", WT_OPT_INT, F(rows), 1, 1024, "4", "sequences per micro-batch", NULL},
    {"seq", WT_OPT_INT, F(seq), 1, 8192, "128", "tokens per sequence T", NULL},
    {"ranks", WT_OPT_STRING, F(ranks), 0, 0, "2,4", "site sizes, comma-separated", NULL},
    {"runs", WT_OPT_INT, F(runs), 1, S_MAX_RUNS, "7", "repetitions (median)", NULL},
    {0}};
#undef F

static int s_noop(parallel_comm *c, void *arg) {
  (void)c, (void)arg;
  return WT_OK;
}

/* Mean microseconds of one parallel_inproc_run of nothing on t ranks. */
static double s_call_us(int t) {
  parallel_inproc_group *g = parallel_inproc_group_new(t);
  if (!g) return -1;
  const int n = 500;
  double t0 = wt_now_s();
  for (int i = 0; i < n; i++) parallel_inproc_run(g, s_noop, NULL, NULL);
  double us = (wt_now_s() - t0) / n * 1e6;
  parallel_inproc_group_destroy(&g);
  return us;
}

int main(int argc, char **argv) {
  wt_program_init(argv); /* OMP_WAIT_POLICY=PASSIVE unless the user chose */
  bench_cfg cfg;
  int help = 0;
  wt_config_defaults(s_options, &cfg);
  if (wt_config_parse_args(s_options, &cfg, argc, argv, 1, NULL, 0, NULL, &help) != WT_OK) {
    fprintf(stderr, "bench-site: %s\n", wt_last_error());
    return 2;
  }
  if (help) {
    wt_config_print_help(stdout, "usage: bench-site [options]", s_options);
    return 0;
  }
  if (kernels_cpu_init() != WT_OK) {
    fprintf(stderr, "bench-site: %s\n", wt_last_error());
    return 1;
  }
  int ts[S_MAX_SITES], nt = 0;
  for (char *p = cfg.ranks; *p && nt < S_MAX_SITES; p++) {
    ts[nt++] = (int)strtol(p, &p, 10);
    if (*p != ',') break;
  }
  /* A middle stage: layers [1, 1 + layers) of a model with one more block on each side. */
  gpt_config mc = {.vocab_size = 256,
                   .max_seq = cfg.seq,
                   .n_layer = cfg.layers + 2,
                   .n_head = cfg.heads,
                   .channels = cfg.channels};
  const int first = 1, last = 1 + cfg.layers, B = cfg.rows, T = cfg.seq, C = cfg.channels;
  printf("middle stage of %d blocks, C = %d, %d heads, micro-batch %d x %d; forward + backward,\n"
         "on one gpt_stage and on the site alternately (parallel_site_measure):\n",
         cfg.layers, C, cfg.heads, B, T);
  printf("%-12s %12s %12s %11s %14s %11s\n", "", "stage (s)", "site (s)", "efficiency",
         "site bytes", "call (us)");
  double one[S_MAX_SITES] = {0}, pass[S_MAX_SITES] = {0}, eff[S_MAX_SITES] = {0},
         call[S_MAX_SITES] = {0};
  unsigned long long bytes[S_MAX_SITES] = {0};
  int rc = 0;
  for (int k = 0; k < nt; k++) {
    parallel_site *site = parallel_site_new(&mc, first, last, B, T, ts[k], 1, kernels_cpu());
    parallel_site_timing t;
    uint64_t b0 = site ? parallel_site_bytes(site) : 0;
    if (!site || parallel_site_measure(site, &mc, first, last, B, T, cfg.runs, &t) != WT_OK) {
      fprintf(stderr, "bench-site: %d ranks: %s\n", ts[k], wt_last_error());
      rc = 1;
      parallel_site_destroy(&site);
      continue;
    }
    one[k] = t.one_s, pass[k] = t.site_s, eff[k] = t.efficiency;
    /* the measure's untimed pass and its cfg.runs timed ones */
    bytes[k] = (unsigned long long)((parallel_site_bytes(site) - b0) / (uint64_t)(cfg.runs + 1));
    call[k] = s_call_us(ts[k]);
    char name[32];
    snprintf(name, sizeof name, "site of %d", ts[k]);
    printf("%-12s %12.4f %12.4f %11.3f %14llu %11.1f\n", name, one[k], pass[k], eff[k], bytes[k],
           call[k]);
    parallel_site_destroy(&site);
  }
  double load[1] = {-1};
  if (getloadavg(load, 1) != 1) load[0] = -1;
  printf("load average %.2f\n", load[0]);
  printf("{\"bench\":\"site\",\"layers\":%d,\"channels\":%d,\"heads\":%d,\"rows\":%d,\"seq\":%d,"
         "\"sites\":[",
         cfg.layers, C, cfg.heads, B, T);
  for (int k = 0; k < nt; k++)
    printf("%s{\"ranks\":%d,\"stage_s\":%.6f,\"pass_s\":%.6f,\"efficiency\":%.4f,"
           "\"bytes\":%llu,\"call_us\":%.1f}",
           k ? "," : "", ts[k], one[k], pass[k], eff[k], bytes[k], call[k]);
  printf("],\"loadavg\":%.2f}\n", load[0]);
  return rc;
}
