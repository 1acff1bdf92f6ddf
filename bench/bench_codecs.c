/* bench_codecs — how fast each gradient codec encodes and decodes, next to memcpy.
 *
 * On one buffer of n float32 (default 64 Mi, Gaussian), each repetition times a memcpy of the
 * buffer and then every codec's encode and decode (overwrite); the medians over repetitions are
 * reported. Throughput is in GB/s of float32 input: n * 4 bytes / seconds, for encode, decode
 * and the two together. Measured side by side in one run, the ratio to memcpy is the number
 * that survives a busy machine; so does "GB/cpu-s", input bytes per CPU-second of the process
 * (all threads), which leaves out the time other processes held the cores. Also the zlib CRC-32
 * that the wire format adds, per byte. Prints a table, then one JSON line:
 *   {"n":..,"memcpy_gbps":..,"crc32_gbps":..,"codecs":{"fp16":{"gbps":..,"ratio":..,
 *    "enc_gbps":..,"dec_gbps":..,"vs_memcpy":..,"cpu_gbps":..,"bytes":..},..},
 *    "memcpy_cpu_gbps":..}
 * where "ratio" is the compression ratio (input bytes / payload bytes) and "vs_memcpy" the
 * enc+dec throughput as a fraction of memcpy's.
 *
 * --device cuda:N times the GPU codecs on device buffers against a device-to-device copy in the
 * same run instead (s_bench_device).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include "compress/codec.h"
#include "compress/codec_gpu.h"
#include "common/common.h"
#include "common/config.h"
#include "common/rng.h"
#include "kernels/kernels.h"

typedef struct {
  long long n;
  int reps, block, simd;
  double k_frac;
  char codecs[WT_CONFIG_STR_MAX];
  char device[WT_CONFIG_STR_MAX];
} bench_cfg;

static const wt_option s_options[] = {
    {"n", WT_OPT_INT64, offsetof(bench_cfg, n), 1, 1LL << 32, "67108864", "floats per buffer",
     NULL},
    {"reps", WT_OPT_INT, offsetof(bench_cfg, reps), 1, 1000, "5", "repetitions (median)", NULL},
    {"block", WT_OPT_INT, offsetof(bench_cfg, block), 1, 1 << 30, "64",
     "block size of int8/int4/sign", NULL},
    {"k-frac", WT_OPT_FLOAT, offsetof(bench_cfg, k_frac), 1e-9, 1, "0.01",
     "fraction kept by topk/randk", NULL},
    {"simd", WT_OPT_INT, offsetof(bench_cfg, simd), 0, 1, "1", "use the SIMD paths (0 = portable)",
     NULL},
    {"codecs", WT_OPT_STRING, offsetof(bench_cfg, codecs), 0, 0,
     "fp32,fp16,bf16,int8,int4,sign,topk,randk", "comma-separated codecs to time", NULL},
    {"device", WT_OPT_STRING, offsetof(bench_cfg, device), 0, 0, "cpu",
     "cpu, or cuda:N: the GPU codecs on device buffers beside a device-to-device copy", NULL},
    {0}};

typedef struct {
  compress_codec *codec;
  size_t bytes;
  double *enc_s, *dec_s; // (reps,) wall seconds
  double *cpu_s;         // (reps,) process CPU seconds of encode + decode
} s_row;

/* CPU seconds used by the process (all threads): unlike wall time, it does not count the time
 * other processes held the cores, so GB per CPU-second is steadier on a shared machine. */
static double s_cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int s_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double s_median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, s_cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Parses the --codecs list into rows; returns the count or a negative status. */
static int s_rows_new(const bench_cfg *cfg, s_row *rows, int max) {
  compress_params p = compress_params_default();
  p.block = (size_t)cfg->block;
  p.k_frac = cfg->k_frac;
  p.seed = 1;
  char list[WT_CONFIG_STR_MAX];
  snprintf(list, sizeof list, "%s", cfg->codecs);
  int count = 0;
  for (char *save = NULL, *name = strtok_r(list, ",", &save); name && count < max;
       name = strtok_r(NULL, ",", &save)) {
    memset(&rows[count], 0, sizeof rows[count]);
    WT_CHECK_NEW(rows[count].codec, compress_codec_new(name, &p));
    rows[count].enc_s = wt_xcalloc((size_t)cfg->reps, sizeof(double));
    rows[count].dec_s = wt_xcalloc((size_t)cfg->reps, sizeof(double));
    rows[count].cpu_s = wt_xcalloc((size_t)cfg->reps, sizeof(double));
    count++;
  }
  return count;
}

static float *s_gaussian(size_t n) {
  float *x = wt_xmalloc(n * sizeof *x);
  wt_rng rng;
  wt_rng_seed(&rng, 2024);
  for (size_t i = 0; i < n; i++) x[i] = (float)wt_rng_normal(&rng) * 1e-3f;
  return x;
}

/* One repetition of one codec: times encode and decode, remembers the payload size. */
static int s_time_codec(s_row *row, int rep, const float *x, size_t n, uint8_t *buf, size_t cap,
                        float *y) {
  double c0 = s_cpu_s(), t0 = wt_now_s();
  WT_CHECK(compress_codec_encode(row->codec, x, n, buf, cap, &row->bytes));
  double t1 = wt_now_s();
  WT_CHECK(compress_codec_decode(row->codec, buf, row->bytes, y, n));
  row->enc_s[rep] = t1 - t0;
  row->dec_s[rep] = wt_now_s() - t1;
  row->cpu_s[rep] = s_cpu_s() - c0;
  return WT_OK;
}

static double s_time_crc(const uint8_t *buf, size_t len) {
  double t0 = wt_now_s();
  uLong crc = crc32(0L, Z_NULL, 0);
  for (size_t off = 0; off < len; off += 1u << 30)
    crc = crc32(crc, buf + off, (uInt)WT_MIN(len - off, (size_t)1 << 30));
  double dt = wt_now_s() - t0;
  if (crc == 0x12345678) fprintf(stderr, "(crc %lx)\n", crc); // keeps the call observable
  return dt;
}

static void s_report(const bench_cfg *cfg, s_row *rows, int count, double memcpy_s,
                     double memcpy_cpu_s, double crc_gbps) {
  double gb = (double)cfg->n * 4 / 1e9, memcpy_gbps = gb / memcpy_s;
  double memcpy_cpu = gb / memcpy_cpu_s;
  printf("\nn = %lld floats (%.0f MB), median of %d, block %d, k_frac %g, simd %d\n", cfg->n,
         gb * 1e3, cfg->reps, cfg->block, cfg->k_frac, cfg->simd);
  printf("%-8s %12s %8s %10s %10s %10s %9s %10s %9s\n", "codec", "bytes", "ratio", "enc GB/s",
         "dec GB/s", "both GB/s", "% memcpy", "GB/cpu-s", "% memcpy");
  printf("%-8s %12lld %8.2f %10s %10s %10.2f %8.0f%% %10.2f %8.0f%%\n", "memcpy", cfg->n * 4, 1.0,
         "", "", memcpy_gbps, 100.0, memcpy_cpu, 100.0);
  char json[8192];
  int off = snprintf(json, sizeof json,
                     "{\"n\":%lld,\"reps\":%d,\"memcpy_gbps\":%.3f,"
                     "\"memcpy_cpu_gbps\":%.3f,\"crc32_gbps\":%.3f,\"codecs\":{",
                     cfg->n, cfg->reps, memcpy_gbps, memcpy_cpu, crc_gbps);
  for (int r = 0; r < count; r++) {
    double enc = s_median(rows[r].enc_s, cfg->reps), dec = s_median(rows[r].dec_s, cfg->reps);
    double both = gb / (enc + dec), ratio = (double)cfg->n * 4 / (double)WT_MAX(rows[r].bytes, 1);
    double cpu = gb / s_median(rows[r].cpu_s, cfg->reps);
    const char *name = compress_codec_name(rows[r].codec);
    printf("%-8s %12zu %8.2f %10.2f %10.2f %10.2f %8.0f%% %10.2f %8.0f%%\n", name, rows[r].bytes,
           ratio, gb / enc, gb / dec, both, 100 * both / memcpy_gbps, cpu, 100 * cpu / memcpy_cpu);
    off += snprintf(json + off, sizeof json - (size_t)off,
                    "%s\"%s\":{\"gbps\":%.3f,\"ratio\":%.3f,\"enc_gbps\":%.3f,\"dec_gbps\":%.3f,"
                    "\"vs_memcpy\":%.3f,\"cpu_gbps\":%.3f,\"bytes\":%zu}",
                    r ? "," : "", name, both, ratio, gb / enc, gb / dec, both / memcpy_gbps, cpu,
                    rows[r].bytes);
  }
  printf("zlib crc32 (wire checksum): %.2f GB/s of payload\n", crc_gbps);
  printf("%s}}\n", json);
}

/* bench-codecs --device cuda:N: the GPU codecs (codec_gpu.h) on device buffers, each
 * repetition timing a device-to-device copy of the buffer and then every codec's encode and
 * decode; a 4-byte download after each call waits for the GPU. Codecs without GPU kernels are
 * listed and skipped. Same table and JSON as the CPU run, with the copy in memcpy's place and
 * "device" added; vs_memcpy is then the fraction of the copy's rate. */
static int s_bench_device(bench_cfg *cfg, s_row *rows, int count, const kernels_ops *ops) {
  size_t n = (size_t)cfg->n, cap = 0;
  int kept = 0;
  for (int r = 0; r < count; r++) {
    if (!compress_gpu_supported(rows[r].codec)) {
      printf("%s: no GPU kernels yet, skipped\n", compress_codec_name(rows[r].codec));
      compress_codec_destroy(&rows[r].codec);
      free(rows[r].enc_s), free(rows[r].dec_s), free(rows[r].cpu_s);
      continue;
    }
    rows[kept++] = rows[r];
  }
  for (int r = 0; r < kept; r++) cap = WT_MAX(cap, compress_codec_max_size(rows[r].codec, n));
  float *hx = s_gaussian(n), sink;
  float *x = ops->alloc(n * 4), *y = ops->alloc(n * 4), *dst = ops->alloc(n * 4);
  uint8_t *buf = ops->alloc(cap ? cap : 4);
  if (!x || !y || !dst || !buf) {
    fprintf(stderr, "bench-codecs: %zu floats do not fit on %s; lower --n\n", n, cfg->device);
    return 1;
  }
  ops->upload(x, hx, n * 4);
  double *copy_s = wt_xcalloc((size_t)cfg->reps, sizeof(double));
  for (int rep = 0; rep < cfg->reps; rep++) {
    double t0 = wt_now_s();
    ops->copy(dst, x, n * 4);
    ops->download(&sink, dst, sizeof sink);
    copy_s[rep] = wt_now_s() - t0;
    for (int r = 0; r < kept; r++) {
      s_row *row = &rows[r];
      double e0 = wt_now_s();
      if (compress_gpu_encode(row->codec, x, n, buf, cap, &row->bytes) != WT_OK) return 1;
      ops->download(&sink, buf, sizeof sink);
      double e1 = wt_now_s();
      if (compress_gpu_decode(row->codec, buf, row->bytes, y, n) != WT_OK) return 1;
      ops->download(&sink, y, sizeof sink);
      row->enc_s[rep] = e1 - e0, row->dec_s[rep] = wt_now_s() - e1;
      row->cpu_s[rep] = row->enc_s[rep] + row->dec_s[rep]; /* the GPU's time, not the CPU's */
    }
    fprintf(stderr, "rep %d/%d done\n", rep + 1, cfg->reps);
  }
  double copy = s_median(copy_s, cfg->reps);
  printf("device %s: GB/s of float32 input; \"memcpy\" is a device-to-device copy\n", cfg->device);
  s_report(cfg, rows, kept, copy, copy, 0);
  for (int r = 0; r < kept; r++) {
    compress_codec_destroy(&rows[r].codec);
    free(rows[r].enc_s), free(rows[r].dec_s), free(rows[r].cpu_s);
  }
  ops->free(x), ops->free(y), ops->free(dst), ops->free(buf);
  free(hx), free(copy_s);
  return 0;
}

int main(int argc, char **argv) {
  bench_cfg cfg;
  int help = 0;
  wt_config_defaults(s_options, &cfg);
  if (wt_config_parse_args(s_options, &cfg, argc, argv, 1, NULL, 0, NULL, &help) != WT_OK) {
    fprintf(stderr, "bench-codecs: %s\n", wt_last_error());
    return 2;
  }
  if (help) {
    wt_config_print_help(stdout, "usage: bench-codecs [options]", s_options);
    return 0;
  }
  const kernels_ops *ops = NULL;
  int drc = kernels_for_device(cfg.device, &ops);
  if (drc != WT_OK) {
    fprintf(stderr, "bench-codecs: --device: %s\n", wt_last_error());
    return drc == WT_EINVAL ? 2 : 1;
  }
  compress_codec_set_simd(cfg.simd);
  s_row rows[16];
  int count = s_rows_new(&cfg, rows, 16);
  if (count <= 0) {
    fprintf(stderr, "bench-codecs: %s\n", count < 0 ? wt_last_error() : "no codecs given");
    return 2;
  }
  if (ops->device) {
    if (s_bench_device(&cfg, rows, count, ops) == 0) return 0;
    fprintf(stderr, "bench-codecs: %s\n", wt_last_error());
    return 1;
  }
  size_t n = (size_t)cfg.n, cap = 0;
  for (int r = 0; r < count; r++) cap = WT_MAX(cap, compress_codec_max_size(rows[r].codec, n));
  float *x = s_gaussian(n), *y = wt_xmalloc(n * sizeof *y), *dst = wt_xmalloc(n * sizeof *dst);
  uint8_t *buf = wt_xmalloc(cap);
  memset(y, 0, n * sizeof *y); // fault the pages in before anything is timed
  memset(dst, 0, n * sizeof *dst);
  memset(buf, 0, cap);
  double *memcpy_s = wt_xcalloc((size_t)cfg.reps, sizeof(double)), crc_s = 1e30;
  double *memcpy_cpu_s = wt_xcalloc((size_t)cfg.reps, sizeof(double));
  for (int rep = 0; rep < cfg.reps; rep++) {
    double c0 = s_cpu_s(), t0 = wt_now_s();
    memcpy(dst, x, n * sizeof *x);
    memcpy_s[rep] = wt_now_s() - t0;
    memcpy_cpu_s[rep] = s_cpu_s() - c0;
    for (int r = 0; r < count; r++)
      if (s_time_codec(&rows[r], rep, x, n, buf, cap, y) != WT_OK) {
        fprintf(stderr, "bench-codecs: %s\n", wt_last_error());
        return 1;
      }
    crc_s = WT_MIN(crc_s, s_time_crc((const uint8_t *)dst, n * sizeof *dst / 2));
    fprintf(stderr, "rep %d/%d done\n", rep + 1, cfg.reps);
  }
  double crc_gbps = (double)n * 2 / 1e9 / crc_s;
  s_report(&cfg, rows, count, s_median(memcpy_s, cfg.reps), s_median(memcpy_cpu_s, cfg.reps),
           crc_gbps);
  for (int r = 0; r < count; r++) {
    compress_codec_destroy(&rows[r].codec);
    free(rows[r].enc_s), free(rows[r].dec_s), free(rows[r].cpu_s);
  }
  free(memcpy_cpu_s), free(memcpy_s), free(x), free(y), free(dst), free(buf);
  return 0;
}
