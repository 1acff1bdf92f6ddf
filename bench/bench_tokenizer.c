/* bench_tokenizer — how fast GPT-2's BPE encodes and decodes, single-threaded, in MB/s of text.
 *
 * On one text file (default: ../shared/data/tinyshakespeare.txt, else the test corpus repeated
 * to 1 MiB), each repetition times three passes: encode with a fresh tokenizer ("cold": every
 * distinct piece goes through the merge loop once), encode again with the same one ("warm":
 * pieces come from the cache, as in a long tokenize run), and decode the ids. Medians over the
 * repetitions; MB is 10^6 bytes of text. Beside wall-clock MB/s, "per CPU-s" divides by the
 * process's CPU time instead, which leaves out the time other processes held the core (the
 * number that survives a busy machine). Prints a table, then one JSON line:
 *   {"bench":"tokenizer","file":..,"bytes":..,"tokens":..,"encode_cold_mbps":..,
 *    "encode_warm_mbps":..,"decode_mbps":..,"encode_cold_cpu_mbps":..,
 *    "encode_warm_cpu_mbps":..,"decode_cpu_mbps":..,"load_s":..}
 * where load_s is the time to read and index vocab.json + merges.txt.
 */
#include "common/common.h"
#include "common/config.h"
#include "tokenizer/bpe.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
  char tokenizer[WT_CONFIG_STR_MAX], in[WT_CONFIG_STR_MAX];
  int reps;
} bench_cfg;

static const wt_option s_options[] = {
    {"tokenizer", WT_OPT_STRING, offsetof(bench_cfg, tokenizer), 0, 0,
     WT_SOURCE_DIR "/tests/fixtures/bpe", "directory with vocab.json + merges.txt", NULL},
    {"in", WT_OPT_STRING, offsetof(bench_cfg, in), 0, 0, "",
     "text file (default ../shared/data/tinyshakespeare.txt, else the test corpus)", NULL},
    {"reps", WT_OPT_INT, offsetof(bench_cfg, reps), 1, 1000, "5", "repetitions (median)", NULL},
    {0}};

static char *s_read(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = wt_xmalloc((size_t)n + 1);
  *len = fread(buf, 1, (size_t)n, f);
  fclose(f);
  return buf;
}

/* The text to encode: --in, or the shared Shakespeare, or the test corpus repeated to 1 MiB. */
static char *s_text(const bench_cfg *cfg, char *name, size_t name_size, size_t *len) {
  char path[WT_CONFIG_STR_MAX + 64];
  if (cfg->in[0]) {
    snprintf(name, name_size, "%s", cfg->in);
    return s_read(cfg->in, len);
  }
  snprintf(path, sizeof path, "%s/../shared/data/tinyshakespeare.txt", WT_SOURCE_DIR);
  snprintf(name, name_size, "tinyshakespeare.txt");
  char *t = s_read(path, len);
  if (t) return t;
  snprintf(path, sizeof path, "%s/tests/fixtures/bpe/corpus.txt", WT_SOURCE_DIR);
  snprintf(name, name_size, "corpus.txt x N");
  size_t n;
  char *c = s_read(path, &n);
  if (!c) return NULL;
  *len = (1u << 20) / n * n;
  t = wt_xmalloc(*len);
  for (size_t o = 0; o < *len; o += n) memcpy(t + o, c, n);
  free(c);
  return t;
}

static double s_cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int s_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double s_median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, s_cmp);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv) {
  bench_cfg cfg;
  int help = 0;
  wt_config_defaults(s_options, &cfg);
  if (wt_config_parse_args(s_options, &cfg, argc, argv, 1, NULL, 0, NULL, &help) != WT_OK) {
    fprintf(stderr, "bench-tokenizer: %s\n", wt_last_error());
    return 2;
  }
  if (help) {
    wt_config_print_help(stdout, "usage: bench-tokenizer [options]", s_options);
    return 0;
  }
  char name[WT_CONFIG_STR_MAX];
  size_t len = 0;
  char *text = s_text(&cfg, name, sizeof name, &len);
  if (!text || !len) {
    fprintf(stderr, "bench-tokenizer: cannot read the text %s\n", name);
    return 1;
  }
  double *cold = wt_xcalloc((size_t)cfg.reps, sizeof *cold);
  double *warm = wt_xcalloc((size_t)cfg.reps, sizeof *warm);
  double *dec = wt_xcalloc((size_t)cfg.reps, sizeof *dec);
  double *load = wt_xcalloc((size_t)cfg.reps, sizeof *load);
  double *cpu = wt_xcalloc(3 * (size_t)cfg.reps, sizeof *cpu); /* (3, reps) cold, warm, decode */
  size_t tokens = 0;
  for (int r = 0; r < cfg.reps; r++) {
    double t0 = wt_now_s();
    tokenizer_bpe *bpe = tokenizer_bpe_new(cfg.tokenizer);
    if (!bpe) {
      fprintf(stderr, "bench-tokenizer: %s\n", wt_last_error());
      return 1;
    }
    double t1 = wt_now_s(), c1 = s_cpu_s();
    tokenizer_ids ids = {0};
    tokenizer_bpe_encode(bpe, text, len, &ids);
    double t2 = wt_now_s(), c2 = s_cpu_s();
    ids.n = 0;
    tokenizer_bpe_encode(bpe, text, len, &ids);
    double t3 = wt_now_s(), c3 = s_cpu_s();
    size_t back_len;
    char *back = tokenizer_bpe_decode(bpe, ids.ids, ids.n, &back_len);
    double t4 = wt_now_s(), c4 = s_cpu_s();
    cpu[r] = c2 - c1, cpu[cfg.reps + r] = c3 - c2, cpu[2 * cfg.reps + r] = c4 - c3;
    if (back_len != len || memcmp(back, text, len)) {
      fprintf(stderr, "bench-tokenizer: decode(encode(text)) differs from the text\n");
      return 1;
    }
    load[r] = t1 - t0, cold[r] = t2 - t1, warm[r] = t3 - t2, dec[r] = t4 - t3;
    tokens = ids.n;
    free(back);
    tokenizer_ids_free(&ids);
    tokenizer_bpe_destroy(&bpe);
  }
  double mb = (double)len / 1e6, l = s_median(load, cfg.reps);
  double c = mb / s_median(cold, cfg.reps), w = mb / s_median(warm, cfg.reps);
  double d = mb / s_median(dec, cfg.reps);
  double cc = mb / s_median(cpu, cfg.reps), cw = mb / s_median(cpu + cfg.reps, cfg.reps);
  double cd = mb / s_median(cpu + 2 * cfg.reps, cfg.reps);
  printf("text %s: %zu bytes, %zu tokens (%.2f bytes/token); load %.3f s; median of %d\n", name,
         len, tokens, (double)len / (double)tokens, l, cfg.reps);
  printf("%-14s %10s %14s\n", "pass", "MB/s", "MB per CPU-s");
  printf("%-14s %10.1f %14.1f\n%-14s %10.1f %14.1f\n%-14s %10.1f %14.1f\n", "encode cold", c, cc,
         "encode warm", w, cw, "decode", d, cd);
  printf("{\"bench\":\"tokenizer\",\"file\":\"%s\",\"bytes\":%zu,\"tokens\":%zu,"
         "\"encode_cold_mbps\":%.2f,\"encode_warm_mbps\":%.2f,\"decode_mbps\":%.2f,"
         "\"encode_cold_cpu_mbps\":%.2f,\"encode_warm_cpu_mbps\":%.2f,\"decode_cpu_mbps\":%.2f,"
         "\"load_s\":%.4f}\n",
         name, len, tokens, c, w, d, cc, cw, cd, l);
  free(cold), free(warm), free(dec), free(load), free(cpu), free(text);
  return 0;
}
