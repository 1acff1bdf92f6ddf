/* test_site_measure — a site's efficiency measured (parallel/datacenter/site.h):
 *   - parallel_site_probe_config gives a model every rank count from 1 to 16 splits: at least 12
 *     heads, a multiple of the ranks, 64 channels per head, GPT-2 small's width for 1–4 ranks;
 *   - parallel_site_measure on sites of 1 and 2 ranks reports positive medians and the efficiency
 *     one_s / (ranks × site_s), clamped to [PARALLEL_SITE_MIN_EFFICIENCY, 1];
 *   - the site is left as if new: after measuring, one pass on the site and on a fresh stage with
 *     other weights gives the same gradients (no stale weights, no left-over gradients);
 *   - a stage with an end of the model, repetitions out of range and a site of another stage are
 *     refused with a message; parallel_site_probe runs end to end.
 * Timing is not asserted (a noisy machine): only that the numbers are consistent. */
#include "kernels/kernels.h"
#include "model/gpt.h"
#include "parallel/datacenter/site.h"

#include "common/common.h"
#include "common/testing.h"

#include <math.h>
#include <string.h>

enum { B = 2, T = 16, C = 32, NH = 4, L = 4 };

static const gpt_config s_cfg = {
    .vocab_size = 61, .max_seq = T, .n_layer = L, .n_head = NH, .channels = C};

static void s_probe_configs(void) {
  for (int n = 1; n <= 16; n++) {
    gpt_config c = parallel_site_probe_config(n);
    WT_TEST_ASSERT(c.n_head >= 12 && c.n_head % n == 0 && c.channels == 64 * c.n_head,
                   "probe for %d ranks: %d heads, %d channels", n, c.n_head, c.channels);
    WT_TEST_ASSERT(gpt_config_validate(&c) == WT_OK, "probe for %d ranks: %s", n, wt_last_error());
    if (n <= 4) WT_TEST_ASSERT(c.channels == 768, "probe for %d ranks: %d channels", n, c.channels);
  }
}

/* The gradients of one forward + backward of x on a fresh stage with weights `seed`, through
 * the site when one is given. */
static float *s_grads(parallel_site *site, uint64_t seed) {
  gpt_stage *st = gpt_stage_new(&s_cfg, 1, 3, B, T);
  WT_TEST_REQUIRE(st, "stage: %s", wt_last_error());
  gpt_stage_init_weights(st, seed);
  const size_t NC = (size_t)B * T * C;
  float *x = wt_xmalloc(sizeof(float) * NC), *y = wt_xmalloc(sizeof(float) * NC);
  float *dy = wt_xmalloc(sizeof(float) * NC), *dx = wt_xmalloc(sizeof(float) * NC);
  for (size_t i = 0; i < NC; i++) x[i] = (float)(i % 13) / 13 - 0.5f, dy[i] = (float)(i % 7) / 70;
  if (site) {
    WT_TEST_REQUIRE(parallel_site_load(site, st) == WT_OK, "load: %s", wt_last_error());
    WT_TEST_REQUIRE(parallel_site_forward(site, NULL, x, NULL, B, T, y) == WT_OK &&
                        parallel_site_backward(site, dy, dx, 1.0f) == WT_OK &&
                        parallel_site_grads(site, st) == WT_OK,
                    "site pass: %s", wt_last_error());
  } else {
    WT_TEST_REQUIRE(gpt_stage_forward(st, NULL, x, NULL, B, T, y) == WT_OK &&
                        gpt_stage_backward(st, dy, dx, 1.0f) == WT_OK,
                    "stage pass: %s", wt_last_error());
  }
  size_t n;
  const float *g = gpt_stage_grads_host(st, &n);
  float *out = wt_xmalloc(sizeof(float) * n);
  memcpy(out, g, sizeof(float) * n);
  free(x), free(y), free(dy), free(dx);
  gpt_stage_destroy(&st);
  return out;
}

static void s_measure(int ranks) {
  parallel_site *site = parallel_site_new(&s_cfg, 1, 3, B, T, ranks, 1, NULL);
  WT_TEST_REQUIRE(site, "site of %d: %s", ranks, wt_last_error());
  parallel_site_timing t = {0};
  WT_TEST_REQUIRE(parallel_site_measure(site, &s_cfg, 1, 3, B, T, 3, &t) == WT_OK,
                  "measure on %d ranks: %s", ranks, wt_last_error());
  printf("site of %d: one rank %.6f s, site %.6f s, efficiency %.3f\n", ranks, t.one_s, t.site_s,
         t.efficiency);
  double want = t.one_s / (ranks * t.site_s);
  want = fmin(1, fmax(PARALLEL_SITE_MIN_EFFICIENCY, want));
  WT_TEST_ASSERT(t.one_s > 0 && t.site_s > 0, "medians %g %g", t.one_s, t.site_s);
  WT_TEST_CLOSE(t.efficiency, want, 0, 1e-12, "efficiency = one / (ranks x site), clamped");
  /* Left as if new: the next pass equals a fresh stage's, on other weights. */
  size_t n;
  gpt_stage *probe = gpt_stage_new(&s_cfg, 1, 3, B, T);
  gpt_stage_grads_host(probe, &n);
  gpt_stage_destroy(&probe);
  float *got = s_grads(site, 7), *want_g = s_grads(NULL, 7);
  wt_test_allclose(got, want_g, n, 1e-5, 1e-4, "gradients after measuring");
  free(got), free(want_g);
  parallel_site_destroy(&site);
}

static void s_refusals(void) {
  parallel_site *site = parallel_site_new(&s_cfg, 1, 3, B, T, 2, 1, NULL);
  WT_TEST_REQUIRE(site, "site: %s", wt_last_error());
  parallel_site_timing t;
  WT_TEST_ASSERT(parallel_site_measure(site, &s_cfg, 0, 3, B, T, 3, &t) == WT_EINVAL &&
                     strstr(wt_last_error(), "end of the model"),
                 "a first stage: %s", wt_last_error());
  WT_TEST_ASSERT(parallel_site_measure(site, &s_cfg, 1, 3, B, T, 0, &t) == WT_EINVAL &&
                     strstr(wt_last_error(), "repetitions"),
                 "0 repetitions: %s", wt_last_error());
  WT_TEST_ASSERT(parallel_site_measure(site, &s_cfg, 1, 2, B, T, 3, &t) == WT_EINVAL &&
                     strstr(wt_last_error(), "another model"),
                 "a site of another stage: %s", wt_last_error());
  parallel_site_destroy(&site);
  WT_TEST_ASSERT(parallel_site_probe(2, 1, &t) == WT_OK && t.efficiency > 0 && t.efficiency <= 1,
                 "probe of 2: %s", wt_last_error());
}

int main(void) {
  if (kernels_cpu_init() != WT_OK) {
    fprintf(stderr, "%s\n", wt_last_error());
    return 1;
  }
  s_probe_configs();
  s_measure(1);
  s_measure(2);
  s_refusals();
  return wt_test_finish("test_site_measure");
}
