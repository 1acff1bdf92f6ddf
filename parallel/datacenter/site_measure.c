/* site_measure — a site's efficiency measured (site.h): the same stage's passes on one device and
 * on the site, timed side by side. */
#include "parallel/datacenter/site.h"

#include "common/common.h"

#include <stdlib.h>

#define S_MAX_REPS 64

static int s_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double s_median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, s_cmp);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

gpt_config parallel_site_probe_config(int ranks) {
  /* Heads of 64 channels, at least 12 and a multiple of the ranks: GPT-2 small's width where the
   * ranks divide 12, else the next width they split. */
  int heads = ranks;
  while (heads < 12) heads += ranks;
  return (gpt_config){.vocab_size = 256,
                      .max_seq = PARALLEL_SITE_PROBE_SEQ,
                      .n_layer = 3,
                      .n_head = heads,
                      .channels = 64 * heads};
}

int parallel_site_measure(parallel_site *site, const gpt_config *cfg, int first, int last, int B,
                          int T, int reps, parallel_site_timing *out) {
  if (reps < 1 || reps > S_MAX_REPS)
    return wt_fail(WT_EINVAL, "site measure: %d repetitions; use 1 to %d", reps, S_MAX_REPS);
  if (first == 0 || last == cfg->n_layer)
    return wt_fail(WT_EINVAL,
                   "site measure: layers [%d, %d) hold an end of the model; time a middle stage",
                   first, last);
  gpt_stage *st = gpt_stage_new(cfg, first, last, B, T);
  if (!st) return wt_last_status();
  gpt_stage_init_weights(st, 1);
  int rc = parallel_site_load(site, st);
  const size_t NC = (size_t)B * T * cfg->channels;
  float *x = wt_xmalloc(sizeof(float) * NC), *y = wt_xmalloc(sizeof(float) * NC);
  float *dy = wt_xmalloc(sizeof(float) * NC), *dx = wt_xmalloc(sizeof(float) * NC);
  for (size_t i = 0; i < NC; i++) x[i] = (float)((i * 2654435761u) % 1000) / 1000 - 0.5f;
  for (size_t i = 0; i < NC; i++) dy[i] = (float)((i * 40503u) % 1000) / 1e5f;
  double one[S_MAX_REPS], on_site[S_MAX_REPS];
  /* One untimed pass of each warms caches and the ranks' threads; then the two alternate, so
   * the machine's load falls on both alike. */
  for (int r = -1; rc == WT_OK && r < reps; r++) {
    double t0 = wt_now_s();
    rc = gpt_stage_forward(st, NULL, x, NULL, B, T, y);
    if (rc == WT_OK) rc = gpt_stage_backward(st, dy, dx, 1.0f);
    double t1 = wt_now_s();
    if (rc == WT_OK) rc = parallel_site_forward(site, NULL, x, NULL, B, T, y);
    if (rc == WT_OK) rc = parallel_site_backward(site, dy, dx, 1.0f);
    double t2 = wt_now_s();
    if (r >= 0) one[r] = t1 - t0, on_site[r] = t2 - t1;
  }
  if (rc == WT_OK) rc = parallel_site_grads(site, st); /* leaves the site's gradients at zero */
  free(x), free(y), free(dy), free(dx);
  gpt_stage_destroy(&st);
  if (rc != WT_OK) return rc;
  out->one_s = s_median(one, reps);
  out->site_s = s_median(on_site, reps);
  const double e = out->one_s / (parallel_site_ranks(site) * out->site_s);
  out->efficiency = e > 1 ? 1 : e < PARALLEL_SITE_MIN_EFFICIENCY ? PARALLEL_SITE_MIN_EFFICIENCY : e;
  return WT_OK;
}

int parallel_site_probe(int ranks, int reps, parallel_site_timing *out) {
  const gpt_config cfg = parallel_site_probe_config(ranks);
  const int B = PARALLEL_SITE_PROBE_ROWS, T = PARALLEL_SITE_PROBE_SEQ;
  parallel_site *site = parallel_site_new(&cfg, 1, 2, B, T, ranks, 1, NULL);
  if (!site) return wt_last_status();
  int rc = parallel_site_measure(site, &cfg, 1, 2, B, T, reps, out);
  parallel_site_destroy(&site);
  return rc;
}
