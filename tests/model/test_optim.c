/* test_optim — AdamW, SGD with momentum, clipping, the learning-rate schedule, and restoring
 * optimizer state the way a checkpoint does. Expected values come from the formulas in
 * optim.h evaluated here in double; float results agree to ~1e-6 relative. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "kernels/kernels.h"
#include "model/optim.h"
#include "common/rng.h"
#include "common/testing.h"

/* Two tensors: a matrix with weight decay and a bias without. */
static const gpt_tensor_info TENSORS[2] = {
    {.name = "w", .ndim = 2, .shape = {4, 5}, .offset = 0, .numel = 20, .weight_decay = 1},
    {.name = "b", .ndim = 1, .shape = {5, 0}, .offset = 20, .numel = 5, .weight_decay = 0}};
enum { N = 25 };

static void test_config(void) {
  optim_config c = optim_config_default();
  WT_TEST_ASSERT(optim_config_validate(&c) == WT_OK, "defaults are valid: %s", wt_last_error());
  c.beta2 = 1.0f;
  WT_TEST_ASSERT(optim_config_validate(&c) == WT_EINVAL, "beta2 = 1 must be refused");
  WT_TEST_ASSERT(strstr(wt_last_error(), "beta") != NULL, "%s", wt_last_error());
  c = optim_config_default(), c.lr = -1;
  WT_TEST_ASSERT(optim_new(&c, TENSORS, 2) == NULL, "negative lr must be refused");
  c = optim_config_default(), c.min_lr = 1.0f;
  WT_TEST_ASSERT(optim_config_validate(&c) == WT_EINVAL, "min_lr above lr");
  c = optim_config_default();
  WT_TEST_ASSERT(optim_new(&c, TENSORS, 0) == NULL, "no tensors");
}

static void test_schedule(void) {
  optim_config c = optim_config_default();
  c.lr = 1.0f, c.min_lr = 0.1f, c.warmup_steps = 4, c.total_steps = 14;
  for (int s = 0; s < 4; s++) WT_TEST_CLOSE(optim_lr_at(&c, s), (s + 1) / 4.0, 1e-7, 0, "warmup");
  WT_TEST_CLOSE(optim_lr_at(&c, 4), 1.0, 1e-7, 0, "peak right after warmup");
  WT_TEST_CLOSE(optim_lr_at(&c, 9), 0.55, 1e-6, 0, "cosine midpoint is (lr + min_lr) / 2");
  for (long s = 4; s < 13; s++)
    WT_TEST_ASSERT(optim_lr_at(&c, s + 1) <= optim_lr_at(&c, s), "decays at step %ld", s);
  WT_TEST_CLOSE(optim_lr_at(&c, 14), 0.1, 1e-7, 0, "min_lr at the end");
  WT_TEST_CLOSE(optim_lr_at(&c, 1000), 0.1, 1e-7, 0, "min_lr after the end");
  c.total_steps = 0;
  WT_TEST_CLOSE(optim_lr_at(&c, 1000), 1.0, 0, 0, "constant without total_steps");
}

static void test_clip(void) {
  optim_config c = optim_config_default();
  c.grad_clip = 2.0f;
  float g[N];
  double want = 0;
  for (int i = 0; i < N; i++) g[i] = (float)(i - 12) * 0.25f, want += (double)g[i] * g[i];
  WT_TEST_CLOSE(optim_grad_sq_norm(g, N), want, 0, 1e-12, "squared norm");
  WT_TEST_CLOSE(optim_grad_sq_norm(g, 3) + optim_grad_sq_norm(g + 3, N - 3), want, 0, 1e-12,
                "sums over parts add up");
  WT_TEST_CLOSE(optim_clip_scale(&c, 16.0), 2.0 / (4.0 + 1e-6), 0, 1e-6, "clip to 2 from 4");
  WT_TEST_ASSERT(optim_clip_scale(&c, 1.0) == 1.0f, "no clip below the limit");
  c.grad_clip = 0;
  WT_TEST_ASSERT(optim_clip_scale(&c, 1e12) == 1.0f, "clip 0 is off");
}

static void s_fill(float *a, int n, wt_rng *rng) {
  for (int i = 0; i < n; i++) a[i] = (float)wt_rng_normal(rng);
}

static void test_adamw(void) {
  optim_config c = optim_config_default();
  c.lr = 0.01f, c.weight_decay = 0.5f, c.beta1 = 0.9f, c.beta2 = 0.99f, c.eps = 1e-8f;
  optim *o = optim_new(&c, TENSORS, 2);
  WT_TEST_REQUIRE(o, "%s", wt_last_error());
  wt_rng rng;
  wt_rng_seed(&rng, 3);
  float p[N], p0[N], g[N], g2[N];
  s_fill(p, N, &rng), s_fill(g, N, &rng), s_fill(g2, N, &rng);
  memcpy(p0, p, sizeof p);
  WT_TEST_REQUIRE(optim_step(o, p, g, c.lr, 0.5f) == WT_OK, "%s", wt_last_error());
  WT_TEST_REQUIRE(optim_step(o, p, g2, c.lr, 0.5f) == WT_OK, "%s", wt_last_error());
  for (int i = 0; i < N; i++) { /* two steps by the formula, in double */
    double wd = i < 20 ? 0.5 : 0.0, x = p0[i], m = 0, v = 0;
    double gs[2] = {0.5 * g[i], 0.5 * g2[i]};
    for (int t = 1; t <= 2; t++) {
      x *= 1 - 0.01 * wd;
      m = 0.9 * m + 0.1 * gs[t - 1], v = 0.99 * v + 0.01 * gs[t - 1] * gs[t - 1];
      x -= 0.01 / (1 - pow(0.9, t)) * m / (sqrt(v) / sqrt(1 - pow(0.99, t)) + 1e-8);
    }
    WT_TEST_CLOSE(p[i], x, 1e-6, 1e-5, i < 20 ? "AdamW decayed element" : "AdamW bias element");
  }
  WT_TEST_ASSERT(optim_step_count(o) == 2, "step count %ld", optim_step_count(o));
  WT_TEST_ASSERT(optim_num_states(o) == 2, "AdamW has m and v");
  float before[N];
  memcpy(before, p, sizeof p);
  WT_TEST_ASSERT(optim_step(o, p, g, NAN, 1.0f) == WT_EINVAL, "NaN lr must be refused");
  WT_TEST_ASSERT(memcmp(before, p, sizeof p) == 0 && optim_step_count(o) == 2,
                 "a refused step changes nothing");
  optim_destroy(&o);
  WT_TEST_ASSERT(o == NULL, "destroy sets NULL");
}

static void test_sgd(void) {
  optim_config c = optim_config_default();
  c.kind = OPTIM_SGD, c.lr = 0.1f, c.momentum = 0.9f, c.weight_decay = 0.01f;
  optim *o = optim_new(&c, TENSORS, 2);
  WT_TEST_REQUIRE(o, "%s", wt_last_error());
  WT_TEST_ASSERT(optim_num_states(o) == 1 && optim_state(o, 1, NULL) == NULL, "SGD: one state");
  float p[N], g[N];
  for (int i = 0; i < N; i++) p[i] = 1.0f, g[i] = 0.5f;
  optim_step(o, p, g, c.lr, 1.0f);
  optim_step(o, p, g, c.lr, 1.0f);
  /* decayed: g1 = 0.5 + 0.01*1 = 0.51, p1 = 1 - 0.051 = 0.949; g2 = 0.5 + 0.00949,
   * buf2 = 0.9*0.51 + g2, p2 = p1 - 0.1*buf2 */
  double g2 = 0.5 + 0.01 * 0.949, want = 0.949 - 0.1 * (0.9 * 0.51 + g2);
  WT_TEST_CLOSE(p[0], want, 1e-6, 1e-6, "SGD momentum with decay");
  WT_TEST_CLOSE(p[24], 1.0 - 0.05 - 0.1 * (0.9 * 0.5 + 0.5), 1e-6, 1e-6, "SGD bias, no decay");
  optim_destroy(&o);
}

/* Saving m, v and the step count and loading them into a fresh optimizer continues bitwise. */
static void test_state_restore(void) {
  optim_config c = optim_config_default();
  optim *a = optim_new(&c, TENSORS, 2), *b = optim_new(&c, TENSORS, 2);
  WT_TEST_REQUIRE(a && b, "%s", wt_last_error());
  wt_rng rng;
  wt_rng_seed(&rng, 9);
  float pa[N], pb[N], g[N];
  s_fill(pa, N, &rng);
  for (int s = 0; s < 3; s++) s_fill(g, N, &rng), optim_step(a, pa, g, 1e-2f, 1.0f);
  memcpy(pb, pa, sizeof pa);
  for (int i = 0; i < optim_num_states(a); i++) {
    size_t na, nb;
    float *sa = optim_state(a, i, &na), *sb = optim_state(b, i, &nb);
    WT_TEST_REQUIRE(sa && sb && na == N && nb == N, "state %d size", i);
    memcpy(sb, sa, na * sizeof(float));
  }
  optim_set_step_count(b, optim_step_count(a));
  s_fill(g, N, &rng);
  optim_step(a, pa, g, 1e-2f, 1.0f);
  optim_step(b, pb, g, 1e-2f, 1.0f);
  WT_TEST_ASSERT(memcmp(pa, pb, sizeof pa) == 0, "restored optimizer diverged");
  WT_TEST_ASSERT(optim_state(a, 2, NULL) == NULL, "state index out of range");
  optim_destroy(&a), optim_destroy(&b);
}

int main(void) {
  kernels_cpu_init();
  test_config();
  test_schedule();
  test_clip();
  test_adamw();
  test_sgd();
  test_state_restore();
  return wt_test_finish("test_optim");
}
