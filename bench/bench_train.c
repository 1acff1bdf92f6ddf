/* bench-train — how fast a training step runs against what the machine can do.
 *
 * Measures, in one run: (a) the GPT-2 124M shape (L=12, C=768, H=12, V=50257, T=64, B=4) and
 * (b) the CLI's default small config (L=2, C=64, H=4, V=64, T=64, B=16): forward + backward +
 * clip + AdamW update per step, median of --repeats steps after one warm-up, and the GFLOP/s that
 * implies (trainer_flops_per_step); (c) sgemm on 1024³ as the CPU back end runs it (its
 * matmul_forward: OpenBLAS split over the OpenMP threads); (d) the CPU's fp32 FMA peak
 * from a register-only AVX-512 (or AVX2) kernel on every thread. Prints a table, then one JSON
 * line.
 *
 * On a shared machine the load changes within seconds, so a step and an sgemm rate timed a
 * minute apart are not comparable: sgemm is also measured (median of 3 calls) right before every
 * timed 124M step, and the JSON's sgemm_gflops and ratio_124m_to_sgemm use the median of those;
 * ratio_124m_to_sgemm_paired is the median of the per-step ratios. cpu_share_124m (process CPU
 * time / wall time / threads over the timed steps) and load_avg_1m say how disturbed a run was;
 * ratio_124m_to_sgemm_per_cpu_s compares GFLOP per CPU-second of the steps and of the sgemm
 * calls, which depends less on how much of the machine other jobs took (OpenMP threads that
 * spin while waiting count as CPU time in both).
 *
 * --device cuda:N measures instead GPT-2 124M at B=16, T=1024 on that GPU at TF32 and bf16
 * precision (step time, tokens/s, and MFU against the bf16 GEMM rate of the same back end taken
 * in the same run); see s_bench_device.
 */
#include "common/common.h"
#include "common/config.h"
#include "kernels/kernels.h"
#include "model/optim.h"
#include "common/rng.h"
#include "model/trainer.h"

#include <immintrin.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <time.h> /* clock_gettime: CPU time of the process */
#ifdef _OPENMP
#include <omp.h>
#endif

typedef struct {
  int repeats, skip_124m;
  char device[WT_CONFIG_STR_MAX];
} bench_args;

static const wt_option s_options[] = {
    {"repeats", WT_OPT_INT, offsetof(bench_args, repeats), 1, 1000, "3",
     "timed steps per model (median reported)", 0},
    {"skip-124m", WT_OPT_FLAG, offsetof(bench_args, skip_124m), 0, 1, "0",
     "skip the 124M shape (needs ~2.5 GB and minutes on a small CPU)", 0},
    {"device", WT_OPT_STRING, offsetof(bench_args, device), 0, 0, "cpu",
     "cpu, or cuda:N: GPT-2 124M at B=16, T=1024 on GPU N beside its GEMM rate", 0},
    {0}};

static int s_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double s_median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, s_cmp_double);
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* One training step as trainer_step does it, on fixed random tokens. */
static int s_step(gpt_stage *m, optim *opt, const int *x, const int *y, int B, int T) {
  size_t n;
  float *p = gpt_stage_params(m, &n), *g = gpt_stage_grads(m, &n);
  gpt_stage_zero_grad(m);
  WT_CHECK(gpt_stage_forward(m, x, NULL, y, B, T, NULL));
  WT_CHECK(gpt_stage_backward(m, NULL, NULL, 1.0f));
  const optim_config *oc = optim_get_config(opt);
  float scale = optim_clip_scale(oc, optim_grad_sq_norm_on(gpt_stage_kernels(m), g, n));
  return optim_step(opt, p, g, optim_lr_at(oc, optim_step_count(opt)), scale);
}

/* sgemm 1024^3 operands, allocated once so that interleaved measurements cost no page faults. */
typedef struct {
  float *a, *b, *c;
} sgemm_bufs;

enum { SGEMM_N = 1024 };

static sgemm_bufs s_sgemm_bufs(void) {
  size_t nn = (size_t)SGEMM_N * SGEMM_N;
  sgemm_bufs g = {wt_xmalloc(nn * 4), wt_xmalloc(nn * 4), wt_xmalloc(nn * 4)};
  for (size_t i = 0; i < nn; i++) g.a[i] = g.b[i] = (float)(i % 7) * 0.1f;
  return g;
}

/* Seconds of CPU this process used so far, all threads. */
static double s_cpu_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* sgemm 1024^3 GFLOP/s, median of `reps` calls (after one warm-up call); *per_cpu_s (may be
 * NULL) receives the GFLOP per CPU-second of the timed calls. */
static double s_sgemm_gflops(const sgemm_bufs *g, int reps, double *per_cpu_s) {
  const int n = SGEMM_N;
  double t[16] = {0}, cpu = 0, flops = 2.0 * n * n * n;
  reps = WT_MIN(reps, 16);
  for (int r = -1; r < reps; r++) {
    double t0 = wt_now_s(), c0 = s_cpu_s();
    kernels_cpu()->matmul_forward(g->c, g->a, g->b, NULL, n, n, n, KERNELS_W_IN_OUT);
    if (r >= 0) t[r] = wt_now_s() - t0, cpu += s_cpu_s() - c0;
  }
  if (per_cpu_s) *per_cpu_s = flops * reps / cpu / 1e9;
  return flops / s_median(t, reps) / 1e9;
}

/* What one model's timing gives: medians over the timed steps, and (when sgemm was measured
 * next to every step) the median of the per-step ratio of model GFLOP/s to sgemm GFLOP/s. */
typedef struct {
  double step_s;    /* median seconds per step; -1 on failure */
  double sgemm;     /* median sgemm GFLOP/s measured right before each step; 0 if not */
  double ratio;     /* median of the paired ratios; 0 if sgemm was not measured */
  double cpu_share; /* process CPU time / (wall time x threads) over the timed steps */
  double ratio_cpu; /* model GFLOP per CPU-second / sgemm GFLOP per CPU-second (all steps) */
} model_timing;

/* Times `repeats` steps of model cfg at (B, T) after one warm-up. With g non-NULL, measures
 * sgemm (median of 3 calls) right before each step: the machine's load changes within seconds
 * when other jobs share it, and a ratio is only meaningful for two rates taken together. */
static model_timing s_time_model(const kernels_ops *ops, const gpt_config *cfg, int B, int T,
                                 int repeats, const sgemm_bufs *g) {
  model_timing res = {.step_s = -1};
  gpt_stage *m = gpt_stage_new_on(cfg, 0, cfg->n_layer, B, T, ops);
  if (!m) {
    WT_ERROR("bench-train: %s", wt_last_error());
    return res;
  }
  gpt_stage_init_weights(m, 1);
  optim_config oc = optim_config_default();
  optim *opt = optim_new_on(&oc, gpt_stage_tensor(m, 0), gpt_stage_num_tensors(m), ops);
  int *x = wt_xmalloc((size_t)B * T * sizeof(int)), *y = wt_xmalloc((size_t)B * T * sizeof(int));
  wt_rng rng;
  wt_rng_seed(&rng, 7);
  for (int i = 0; i < B * T; i++) {
    x[i] = (int)wt_rng_below(&rng, (uint64_t)cfg->vocab_size);
    y[i] = (int)wt_rng_below(&rng, (uint64_t)cfg->vocab_size);
  }
  double *t = wt_xcalloc((size_t)repeats, sizeof *t), *sg = wt_xcalloc((size_t)repeats, sizeof *sg);
  double *ratio = wt_xcalloc((size_t)repeats, sizeof *ratio),
         flops = trainer_flops_per_step(cfg, B, T);
  double wall = 0, cpu = 0, sg_cpu = 0;
  int rc = opt ? s_step(m, opt, x, y, B, T) : WT_EINVAL; /* warm-up: page in, first-touch */
  for (int r = 0; r < repeats && rc == WT_OK; r++) {
    double per_cpu = 0;
    if (g) sg[r] = s_sgemm_gflops(g, 3, &per_cpu), sg_cpu += per_cpu / repeats;
    double t0 = wt_now_s(), c0 = s_cpu_s();
    rc = s_step(m, opt, x, y, B, T);
    t[r] = wt_now_s() - t0;
    wall += t[r], cpu += s_cpu_s() - c0;
    if (g) ratio[r] = flops / t[r] / 1e9 / sg[r];
  }
  if (rc == WT_OK) {
    res.step_s = s_median(t, repeats);
    res.sgemm = g ? s_median(sg, repeats) : 0;
    res.ratio = g ? s_median(ratio, repeats) : 0;
    res.cpu_share = cpu / (wall * (ops->device ? 1 : kernels_cpu_threads()));
    res.ratio_cpu = g ? flops * repeats / cpu / 1e9 / sg_cpu : 0;
  } else {
    WT_ERROR("bench-train: %s", wt_last_error());
  }
  free(t), free(sg), free(ratio), free(x), free(y);
  optim_destroy(&opt);
  gpt_stage_destroy(&m);
  return res;
}

/* Register-only FMA chains: 16 independent accumulators hide the FMA latency on two ports.
 * Returns FLOPs done (2 per lane per FMA). */
__attribute__((target("avx512f"))) static double s_fma512(long iters) {
  __m512 acc[16], m = _mm512_set1_ps(0.999999f), a = _mm512_set1_ps(1e-7f);
  for (int i = 0; i < 16; i++) acc[i] = _mm512_set1_ps((float)i);
  for (long it = 0; it < iters; it++)
    for (int i = 0; i < 16; i++) acc[i] = _mm512_fmadd_ps(acc[i], m, a);
  float sink = 0, out[16];
  for (int i = 0; i < 16; i++) _mm512_storeu_ps(out, acc[i]), sink += out[0];
  __asm__ volatile("" ::"x"(sink));
  return (double)iters * 16 * 16 * 2;
}

__attribute__((target("avx2,fma"))) static double s_fma256(long iters) {
  __m256 acc[12], m = _mm256_set1_ps(0.999999f), a = _mm256_set1_ps(1e-7f);
  for (int i = 0; i < 12; i++) acc[i] = _mm256_set1_ps((float)i);
  for (long it = 0; it < iters; it++)
    for (int i = 0; i < 12; i++) acc[i] = _mm256_fmadd_ps(acc[i], m, a);
  float sink = 0, out[8];
  for (int i = 0; i < 12; i++) _mm256_storeu_ps(out, acc[i]), sink += out[0];
  __asm__ volatile("" ::"x"(sink));
  return (double)iters * 12 * 8 * 2;
}

/* Peak fp32 GFLOP/s over all threads (best of 5 runs: the best is the least disturbed); *isa
 * receives "avx512" or "avx2". */
static double s_peak_gflops(const char **isa) {
  __builtin_cpu_init();
  int wide = __builtin_cpu_supports("avx512f");
  *isa = wide ? "avx512" : "avx2";
  const long iters = 50000000;
  double best = 0;
  for (int r = 0; r < 5; r++) {
    double flops = 0, t0 = wt_now_s();
#pragma omp parallel reduction(+ : flops)
    flops += wide ? s_fma512(iters) : s_fma256(iters);
    double g = flops / (wt_now_s() - t0) / 1e9;
    if (g > best) best = g;
  }
  return best;
}

/* GEMM rate of a back end at n^3 through its matmul_forward (fp32 inputs: TF32 or fp32 by the
 * table's math mode), median of `reps` calls after a warm-up; a 4-byte download after each
 * call waits for the device. Returns TFLOP/s, or -1 when the buffers do not fit. */
static double s_gemm_tflops(const kernels_ops *ops, int n, int reps) {
  size_t nn = (size_t)n * n;
  float *a = ops->alloc(nn * 4), *b = ops->alloc(nn * 4), *c = ops->alloc(nn * 4), sink;
  double t[16], res = -1;
  reps = WT_MIN(reps, 16);
  if (a && b && c) {
    for (int r = -1; r < reps; r++) {
      double t0 = wt_now_s();
      ops->matmul_forward(c, a, b, NULL, n, n, n, KERNELS_W_IN_OUT);
      ops->download(&sink, c, sizeof sink);
      if (r >= 0) t[r] = wt_now_s() - t0;
    }
    res = 2.0 * n * n * n / s_median(t, reps) / 1e12;
  }
  ops->free(a), ops->free(b), ops->free(c);
  return res;
}

/* bench-train --device cuda:N: GPT-2 124M at B=16, T=1024 on the GPU at TF32 and at bf16
 * precision, beside the bf16 GEMM rate of the same back end measured in this run (its
 * matmul_forward at 8192^3, bf16 tensor-core compute on fp32 buffers); MFU = model FLOP/s /
 * that rate. */
static int s_bench_device(const kernels_ops *ops, const char *device, int repeats) {
  const gpt_config gpt2 = {
      .vocab_size = 50257, .max_seq = 1024, .n_layer = 12, .n_head = 12, .channels = 768};
  const int B = 16, T = 1024;
  static const struct {
    kernels_precision p;
    const char *name;
  } modes[] = {{KERNELS_PREC_TF32, "tf32"}, {KERNELS_PREC_BF16, "bf16"}};
  WT_CHECK(kernels_set_precision(ops, KERNELS_PREC_BF16));
  double gemm = s_gemm_tflops(ops, 8192, 5);
  double flops = trainer_flops_per_step(&gpt2, B, T), step[2], tflops[2], tok_s[2];
  for (int m = 0; m < 2; m++) {
    WT_CHECK(kernels_set_precision(ops, modes[m].p));
    model_timing mt = s_time_model(ops, &gpt2, B, T, repeats, NULL);
    step[m] = mt.step_s;
    tflops[m] = mt.step_s > 0 ? flops / mt.step_s / 1e12 : -1;
    tok_s[m] = mt.step_s > 0 ? (double)B * T / mt.step_s : -1;
  }
  printf("%-44s %12s %10s\n", "measurement", "value", "unit");
  printf("%-44s %12.2f %10s\n", "bf16 GEMM 8192^3 via matmul_forward", gemm, "TFLOP/s");
  for (int m = 0; m < 2; m++) {
    char label[64];
    snprintf(label, sizeof label, "124M step (B=16, T=1024), %s", modes[m].name);
    printf("%-44s %12.4f %10s\n", label, step[m], "s");
    printf("%-44s %12.0f %10s\n", "  tokens per second", tok_s[m], "tok/s");
    printf("%-44s %12.2f %10s\n", "  achieved", tflops[m], "TFLOP/s");
    printf("%-44s %12.3f %10s\n", "  MFU vs the bf16 GEMM rate", tflops[m] / gemm, "");
  }
  printf("device %s (%s back end), median of %d steps after one warm-up\n", device, ops->name,
         repeats);
  printf("{\"device\":\"%s\",\"batch\":%d,\"seq\":%d,\"gemm_bf16_tflops\":%.4g,"
         "\"step_s_tf32\":%.6g,\"tokens_per_s_tf32\":%.6g,\"mfu_tf32\":%.4g,"
         "\"step_s_bf16\":%.6g,\"tokens_per_s_bf16\":%.6g,\"mfu_bf16\":%.4g}\n",
         device, B, T, gemm, step[0], tok_s[0], tflops[0] / gemm, step[1], tok_s[1],
         tflops[1] / gemm);
  return step[0] > 0 && step[1] > 0 && gemm > 0 ? 0 : 1;
}

int main(int argc, char **argv) {
  wt_program_init(argv); /* OMP_WAIT_POLICY=PASSIVE unless the user chose */
  bench_args a;
  int help = 0;
  if (wt_config_defaults(s_options, &a) != WT_OK ||
      wt_config_parse_args(s_options, &a, argc, argv, 1, NULL, 0, NULL, &help) != WT_OK) {
    fprintf(stderr, "bench-train: error: %s\n", wt_last_error());
    return 2;
  }
  if (help) {
    wt_config_print_help(stdout, "usage: bench-train [options]", s_options);
    return 0;
  }
  const kernels_ops *ops = NULL;
  int drc = kernels_for_device(a.device, &ops);
  if (drc != WT_OK) {
    fprintf(stderr, "bench-train: error: --device: %s\n", wt_last_error());
    return drc == WT_EINVAL ? 2 : 1;
  }
  if (ops->device) return s_bench_device(ops, a.device, a.repeats);
  if (kernels_cpu_init() != WT_OK) {
    fprintf(stderr, "bench-train: error: %s\n", wt_last_error());
    return 1;
  }
  const gpt_config big = {
      .vocab_size = 50257, .max_seq = 64, .n_layer = 12, .n_head = 12, .channels = 768};
  const gpt_config small = {
      .vocab_size = 64, .max_seq = 64, .n_layer = 2, .n_head = 4, .channels = 64};
  const char *isa;
  double load[1] = {-1};
  if (getloadavg(load, 1) < 1) load[0] = -1;
  sgemm_bufs gb = s_sgemm_bufs();
  double peak = s_peak_gflops(&isa), sgemm = s_sgemm_gflops(&gb, 5, NULL);
  model_timing small_t = s_time_model(kernels_cpu(), &small, 16, 64, a.repeats, NULL);
  model_timing big_t = {.step_s = -1};
  if (!a.skip_124m) big_t = s_time_model(kernels_cpu(), &big, 4, 64, a.repeats, &gb);
  double t_small = small_t.step_s, t_big = big_t.step_s;
  double g_small = t_small > 0 ? trainer_flops_per_step(&small, 16, 64) / t_small / 1e9 : -1;
  double g_big = t_big > 0 ? trainer_flops_per_step(&big, 4, 64) / t_big / 1e9 : -1;
  /* The reference rate: the sgemm medians taken between the 124M steps when there were any. */
  double sgemm_ref = t_big > 0 ? big_t.sgemm : sgemm;
  printf("%-44s %12s %10s\n", "measurement", "value", "unit");
  printf("%-44s %12.1f %10s\n", "fp32 FMA peak (register-only, all threads)", peak, "GFLOP/s");
  printf("%-44s %12.1f %10s\n", "sgemm 1024^3 (before the models)", sgemm, "GFLOP/s");
  printf("%-44s %12.1f %10s\n", "sgemm 1024^3 (median, between 124M steps)", big_t.sgemm,
         "GFLOP/s");
  printf("%-44s %12.4f %10s\n", "124M step (B=4, T=64) fwd+bwd+AdamW", t_big, "s");
  printf("%-44s %12.1f %10s\n", "124M achieved", g_big, "GFLOP/s");
  printf("%-44s %12.3f %10s\n", "124M / sgemm (median of per-step pairs)", big_t.ratio, "");
  printf("%-44s %12.2f %10s\n", "124M CPU share (cpu / (wall x threads))", big_t.cpu_share, "");
  printf("%-44s %12.3f %10s\n", "124M / sgemm per CPU-second", big_t.ratio_cpu, "");
  printf("%-44s %12.4f %10s\n", "small step (L2 C64 B16 T64) fwd+bwd+AdamW", t_small, "s");
  printf("%-44s %12.2f %10s\n", "small achieved", g_small, "GFLOP/s");
  printf("threads %d, BLAS core %s, FMA kernel %s, median of %d steps, load average %.2f\n",
         kernels_cpu_threads(), kernels_blas_corename(), isa, a.repeats, load[0]);
  printf("{\"step_s_124m\":%.6g,\"gflops_124m\":%.4g,\"sgemm_gflops\":%.4g,"
         "\"ratio_124m_to_sgemm\":%.4g,\"ratio_124m_to_sgemm_paired\":%.4g,"
         "\"ratio_124m_to_sgemm_per_cpu_s\":%.4g,\"sgemm_gflops_before\":%.4g,"
         "\"cpu_share_124m\":%.3g,\"peak_gflops\":%.4g,"
         "\"ratio_sgemm_to_peak\":%.4g,\"step_s_small\":%.6g,\"gflops_small\":%.4g,"
         "\"load_avg_1m\":%.3g,\"threads\":%d,\"blas_core\":\"%s\"}\n",
         t_big, g_big, sgemm_ref, g_big > 0 ? g_big / sgemm_ref : -1, big_t.ratio, big_t.ratio_cpu,
         sgemm, big_t.cpu_share, peak, sgemm_ref / peak, t_small, g_small, load[0],
         kernels_cpu_threads(), kernels_blas_corename());
  free(gb.a), free(gb.b), free(gb.c);
  return (t_small > 0 && (a.skip_124m || t_big > 0)) ? 0 : 1;
}
