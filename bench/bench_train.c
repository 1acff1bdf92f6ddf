/* bench-train — how fast a training step runs against what the machine can do.
 *
 * Measures, in one run: (a) the GPT-2 124M shape (L=12, C=768, H=12, V=50257, T=64, B=4) and
 * (b) the CLI's default small config (L=2, C=64, H=4, V=64, T=64, B=16): forward + backward +
 * clip + AdamW update per step, median of --repeats steps after one warm-up, and the GFLOP/s that
 * implies (trainer_flops_per_step); (c) the BLAS's sgemm on 1024³; (d) the CPU's fp32 FMA peak
 * from a register-only AVX-512 (or AVX2) kernel on every thread. Prints a table, then one JSON
 * line.
 */
#include "common.h"
#include "config.h"
#include "kernels.h"
#include "optim.h"
#include "rng.h"
#include "trainer.h"

#include <cblas.h>
#include <immintrin.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

typedef struct {
  int repeats, skip_124m;
} bench_args;

static const wt_option s_options[] = {
    {"repeats", WT_OPT_INT, offsetof(bench_args, repeats), 1, 1000, "3",
     "timed steps per model (median reported)", 0},
    {"skip-124m", WT_OPT_FLAG, offsetof(bench_args, skip_124m), 0, 1, "0",
     "skip the 124M shape (needs ~2.5 GB and minutes on a small CPU)", 0},
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
  float scale = optim_clip_scale(oc, optim_grad_sq_norm(g, n));
  return optim_step(opt, p, g, optim_lr_at(oc, optim_step_count(opt)), scale);
}

/* Median seconds per step of model cfg at (B, T); -1 on failure. */
static double s_time_model(const gpt_config *cfg, int B, int T, int repeats) {
  gpt_stage *m = gpt_stage_new(cfg, 0, cfg->n_layer, B, T);
  if (!m) return -1;
  gpt_stage_init_weights(m, 1);
  optim_config oc = optim_config_default();
  optim *opt = optim_new(&oc, gpt_stage_tensor(m, 0), gpt_stage_num_tensors(m));
  int *x = wt_xmalloc((size_t)B * T * sizeof(int)), *y = wt_xmalloc((size_t)B * T * sizeof(int));
  wt_rng rng;
  wt_rng_seed(&rng, 7);
  for (int i = 0; i < B * T; i++) {
    x[i] = (int)wt_rng_below(&rng, (uint64_t)cfg->vocab_size);
    y[i] = (int)wt_rng_below(&rng, (uint64_t)cfg->vocab_size);
  }
  double *t = wt_xcalloc((size_t)repeats, sizeof *t), med = -1;
  int rc = opt ? s_step(m, opt, x, y, B, T) : WT_EINVAL; /* warm-up: page in, first-touch */
  for (int r = 0; r < repeats && rc == WT_OK; r++) {
    double t0 = wt_now_s();
    rc = s_step(m, opt, x, y, B, T);
    t[r] = wt_now_s() - t0;
  }
  if (rc == WT_OK)
    med = s_median(t, repeats);
  else
    WT_ERROR("bench-train: %s", wt_last_error());
  free(t), free(x), free(y);
  optim_destroy(&opt);
  gpt_stage_destroy(&m);
  return med;
}

/* sgemm 1024³ GFLOP/s, median of 5 after a warm-up. */
static double s_sgemm_gflops(void) {
  const int n = 1024;
  float *a = wt_xmalloc((size_t)n * n * 4), *b = wt_xmalloc((size_t)n * n * 4);
  float *c = wt_xmalloc((size_t)n * n * 4);
  for (size_t i = 0; i < (size_t)n * n; i++) a[i] = b[i] = (float)(i % 7) * 0.1f;
  double t[5] = {0};
  for (int r = -1; r < 5; r++) {
    double t0 = wt_now_s();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a, n, b, n, 0, c, n);
    if (r >= 0) t[r] = wt_now_s() - t0;
  }
  free(a), free(b), free(c);
  return 2.0 * n * n * n / s_median(t, 5) / 1e9;
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

int main(int argc, char **argv) {
  kernels_cpu_init(argc, argv);
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
  const gpt_config big = {
      .vocab_size = 50257, .max_seq = 64, .n_layer = 12, .n_head = 12, .channels = 768};
  const gpt_config small = {
      .vocab_size = 64, .max_seq = 64, .n_layer = 2, .n_head = 4, .channels = 64};
  const char *isa;
  double peak = s_peak_gflops(&isa), sgemm = s_sgemm_gflops();
  double t_small = s_time_model(&small, 16, 64, a.repeats);
  double t_big = a.skip_124m ? -1 : s_time_model(&big, 4, 64, a.repeats);
  double g_small = t_small > 0 ? trainer_flops_per_step(&small, 16, 64) / t_small / 1e9 : -1;
  double g_big = t_big > 0 ? trainer_flops_per_step(&big, 4, 64) / t_big / 1e9 : -1;
  printf("%-44s %12s %10s\n", "measurement", "value", "unit");
  printf("%-44s %12.1f %10s\n", "fp32 FMA peak (register-only, all threads)", peak, "GFLOP/s");
  printf("%-44s %12.1f %10s\n", "sgemm 1024^3", sgemm, "GFLOP/s");
  printf("%-44s %12.4f %10s\n", "124M step (B=4, T=64) fwd+bwd+AdamW", t_big, "s");
  printf("%-44s %12.1f %10s\n", "124M achieved", g_big, "GFLOP/s");
  printf("%-44s %12.4f %10s\n", "small step (L2 C64 B16 T64) fwd+bwd+AdamW", t_small, "s");
  printf("%-44s %12.2f %10s\n", "small achieved", g_small, "GFLOP/s");
  printf("threads %d, BLAS core %s, FMA kernel %s, median of %d steps\n", kernels_cpu_threads(),
         kernels_blas_corename(), isa, a.repeats);
  printf("{\"step_s_124m\":%.6g,\"gflops_124m\":%.4g,\"sgemm_gflops\":%.4g,"
         "\"ratio_124m_to_sgemm\":%.4g,\"peak_gflops\":%.4g,\"ratio_sgemm_to_peak\":%.4g,"
         "\"step_s_small\":%.6g,\"gflops_small\":%.4g,\"blas_core\":\"%s\"}\n",
         t_big, g_big, sgemm, g_big > 0 ? g_big / sgemm : -1, peak, sgemm / peak, t_small, g_small,
         kernels_blas_corename());
  return (t_small > 0 && (a.skip_124m || t_big > 0)) ? 0 : 1;
}
