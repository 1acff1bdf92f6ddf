/* test_gpt_torch — the golden end-to-end check: wantrain's GPT against GPT-2 written in PyTorch
 * (scripts/make_torch_fixture.py wrote tests/fixtures/gpt_tiny.bin; its header is documented
 * there). Same weights, tokens and targets; we compare logits, loss, every gradient, and the
 * losses of 10 AdamW steps with clipping.
 *
 * Tolerances, each |got - want| <= atol + rtol |want|:
 *   logits  atol 1e-5, rtol 1e-4: both sides are float32 with different summation orders
 *           (sgemm vs MKL-DNN/ATen); sums of 32..128 terms of size ~1 differ by ~1e-6.
 *   loss    1e-5 relative: a mean of 16 log-sum-exps of such logits.
 *   grads   atol 1e-5 * max|g| of the tensor, rtol 1e-3: backprop through 2 blocks compounds
 *           the same rounding; a wrong term (sign, factor, missing branch) is O(|g|).
 *   losses  the AdamW trajectory: step k's loss agrees to 1e-4 relative + 1e-5 absolute.
 *           Rounding differences grow through the updates (AdamW divides by sqrt(v), which
 *           amplifies noise in tiny gradients) but stay far below this on 10 steps.
 * Both back ends ("cpu" and "ref") are checked.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "model/gpt.h"
#include "kernels/kernels.h"
#include "model/optim.h"
#include "common/testing.h"

typedef struct {
  int V, maxT, L, NH, C, B, T, n_steps, n_params;
  float lr, beta1, beta2, eps, wd, clip;
  float *params, *logits, *grads, *losses, loss;
  int *tokens, *targets;
} fixture;

static int s_read(FILE *f, void *dst, size_t bytes, const char *what) {
  if (fread(dst, 1, bytes, f) != bytes)
    return wt_fail(WT_ECORRUPT, "fixture truncated while reading %s", what);
  return WT_OK;
}

static float *s_read_floats(FILE *f, size_t n, const char *what, int *rc) {
  float *a = malloc(sizeof(float) * (n ? n : 1));
  if (*rc == WT_OK) *rc = s_read(f, a, sizeof(float) * n, what);
  return a;
}

static int s_load(const char *path, fixture *x) {
  FILE *f = fopen(path, "rb");
  if (!f) return wt_fail(WT_ENOTFOUND, "cannot open %s; run scripts/make_torch_fixture.py", path);
  char magic[8];
  int32_t h[12];
  float hp[8];
  int rc = s_read(f, magic, 8, "magic");
  if (rc == WT_OK && memcmp(magic, "WTGPTFX1", 8) != 0) rc = wt_fail(WT_ECORRUPT, "bad magic");
  if (rc == WT_OK) rc = s_read(f, h, sizeof h, "header");
  if (rc == WT_OK) rc = s_read(f, hp, sizeof hp, "hyper-parameters");
  if (rc == WT_OK && (h[0] != 1 || h[9] <= 0 || h[9] > 10000000 || h[8] < 0 || h[8] > 1000))
    rc = wt_fail(WT_ECORRUPT, "fixture version %d / sizes not understood", h[0]);
  if (rc != WT_OK) {
    fclose(f);
    return rc;
  }
  x->V = h[1], x->maxT = h[2], x->L = h[3], x->NH = h[4], x->C = h[5], x->B = h[6], x->T = h[7];
  x->n_steps = h[8], x->n_params = h[9];
  x->lr = hp[0], x->beta1 = hp[1], x->beta2 = hp[2], x->eps = hp[3], x->wd = hp[4], x->clip = hp[5];
  size_t BT = (size_t)x->B * x->T;
  x->params = s_read_floats(f, (size_t)x->n_params, "params", &rc);
  x->tokens = malloc(sizeof(int) * BT), x->targets = malloc(sizeof(int) * BT);
  if (rc == WT_OK) rc = s_read(f, x->tokens, sizeof(int) * BT, "tokens");
  if (rc == WT_OK) rc = s_read(f, x->targets, sizeof(int) * BT, "targets");
  x->logits = s_read_floats(f, BT * x->V, "logits", &rc);
  if (rc == WT_OK) rc = s_read(f, &x->loss, sizeof(float), "loss");
  x->grads = s_read_floats(f, (size_t)x->n_params, "grads", &rc);
  x->losses = s_read_floats(f, (size_t)x->n_steps, "losses", &rc);
  fclose(f);
  return rc;
}

static void s_check(const fixture *x, const kernels_ops *ops) {
  gpt_config cfg = {
      .vocab_size = x->V, .max_seq = x->maxT, .n_layer = x->L, .n_head = x->NH, .channels = x->C};
  gpt_stage *s = gpt_stage_new(&cfg, 0, x->L, x->B, x->T);
  WT_TEST_REQUIRE(s, "%s", wt_last_error());
  gpt_stage_set_kernels(s, ops);
  size_t n;
  float *p = gpt_stage_params(s, &n), *g = gpt_stage_grads(s, NULL);
  WT_TEST_REQUIRE(n == (size_t)x->n_params, "layout has %zu params, fixture %d", n, x->n_params);
  memcpy(p, x->params, n * sizeof(float));
  gpt_stage_zero_grad(s);
  WT_TEST_REQUIRE(gpt_stage_forward(s, x->tokens, NULL, x->targets, x->B, x->T, NULL) == WT_OK,
                  "%s", wt_last_error());
  WT_TEST_REQUIRE(gpt_stage_backward(s, NULL, NULL, 1.0f) == WT_OK, "%s", wt_last_error());
  char what[96];
  snprintf(what, sizeof what, "%s logits", ops->name);
  wt_test_allclose(gpt_stage_logits(s), x->logits, (size_t)x->B * x->T * x->V, 1e-5, 1e-4, what);
  snprintf(what, sizeof what, "%s loss", ops->name);
  WT_TEST_CLOSE(gpt_stage_loss(s), x->loss, 0, 1e-5, what);
  for (int i = 0; i < gpt_stage_num_tensors(s); i++) {
    const gpt_tensor_info *t = gpt_stage_tensor(s, i);
    double gmax = 0;
    for (size_t k = 0; k < t->numel; k++) gmax = fmax(gmax, fabs(x->grads[t->offset + k]));
    snprintf(what, sizeof what, "%s grad %s", ops->name, t->name);
    wt_test_allclose(g + t->offset, x->grads + t->offset, t->numel, 1e-5 * gmax, 1e-3, what);
  }
  /* Ten AdamW steps on the same batch, as torch.optim.AdamW + clip_grad_norm_ did. */
  optim_config oc = optim_config_default();
  oc.lr = x->lr, oc.beta1 = x->beta1, oc.beta2 = x->beta2, oc.eps = x->eps;
  oc.weight_decay = x->wd, oc.grad_clip = x->clip;
  int nt;
  const gpt_tensor_info *ti = gpt_stage_tensors(s, &nt);
  optim *opt = optim_new(&oc, ti, nt);
  WT_TEST_REQUIRE(opt, "%s", wt_last_error());
  memcpy(p, x->params, n * sizeof(float));
  for (int step = 0; step < x->n_steps; step++) {
    gpt_stage_zero_grad(s);
    gpt_stage_forward(s, x->tokens, NULL, x->targets, x->B, x->T, NULL);
    gpt_stage_backward(s, NULL, NULL, 1.0f);
    snprintf(what, sizeof what, "%s loss before AdamW step %d", ops->name, step);
    WT_TEST_CLOSE(gpt_stage_loss(s), x->losses[step], 1e-5, 1e-4, what);
    float scale = optim_clip_scale(&oc, optim_grad_sq_norm(g, n));
    WT_TEST_REQUIRE(optim_step(opt, p, g, optim_lr_at(&oc, step), scale) == WT_OK, "step");
  }
  optim_destroy(&opt);
  gpt_stage_destroy(&s);
}

int main(void) {
  kernels_cpu_init();
  char path[4096];
  snprintf(path, sizeof path, "%s/tests/fixtures/gpt_tiny.bin", wt_test_source_dir());
  fixture x = {0};
  int rc = s_load(path, &x);
  WT_TEST_REQUIRE(rc == WT_OK, "%s", wt_last_error());
  printf("fixture: V=%d T=%d L=%d C=%d NH=%d B=%d, loss %.6f\n", x.V, x.T, x.L, x.C, x.NH, x.B,
         x.loss);
  s_check(&x, kernels_cpu());
  s_check(&x, kernels_ref());
  free(x.params), free(x.logits), free(x.grads), free(x.losses), free(x.tokens), free(x.targets);
  return wt_test_finish("test_gpt_torch");
}
