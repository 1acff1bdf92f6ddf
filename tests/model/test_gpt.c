/* test_gpt — one GPT stage: config validation, the Hugging Face tensor layout, bad inputs, and
 * a whole-model gradient check against central finite differences.
 *
 * Gradient-check tolerance: parameters are set to N(0, 0.3) so every nonlinearity is exercised;
 * step h = 1e-2 gives a truncation error ~ h^2 |f'''| / 6 ~ 1e-5 and the float loss (~4, rounding
 * 2e-7 per evaluation, a few 1e-7 through the network) adds ~1e-5 to the quotient. A wrong term
 * in any backward is O(|g|), so |g - fd| <= 2e-4 + 2e-2 |fd| separates the two by far. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "model/gpt.h"
#include "kernels/kernels.h"
#include "common/rng.h"
#include "common/testing.h"

static void test_config(void) {
  gpt_config ok = {
      .vocab_size = 50257, .max_seq = 1024, .n_layer = 12, .n_head = 12, .channels = 768};
  WT_TEST_ASSERT(gpt_config_validate(&ok) == WT_OK, "%s", wt_last_error());
  /* GPT-2 small: the published 124,439,808 parameters (with wpe's 1024 rows, one wte). */
  WT_TEST_ASSERT(gpt_config_num_params(&ok) == 124439808u, "%zu", gpt_config_num_params(&ok));
  gpt_config bad = ok;
  bad.n_head = 7;
  WT_TEST_ASSERT(gpt_config_validate(&bad) == WT_EINVAL, "n_head must divide channels");
  WT_TEST_ASSERT(strstr(wt_last_error(), "n_head") != NULL, "message: %s", wt_last_error());
  bad = ok, bad.vocab_size = 0;
  WT_TEST_ASSERT(gpt_config_validate(&bad) == WT_EINVAL, "vocab 0");
  WT_TEST_ASSERT(strstr(wt_last_error(), "vocab_size") != NULL, "message: %s", wt_last_error());
  bad = ok, bad.n_layer = -1;
  WT_TEST_ASSERT(gpt_config_validate(&bad) == WT_EINVAL, "negative n_layer");
  gpt_config tiny = {.vocab_size = 11, .max_seq = 8, .n_layer = 3, .n_head = 2, .channels = 8};
  WT_TEST_ASSERT(gpt_stage_new(&tiny, 2, 2, 1, 8) == NULL, "empty range must be refused");
  WT_TEST_ASSERT(gpt_stage_new(&tiny, 0, 4, 1, 8) == NULL, "range past n_layer");
  WT_TEST_ASSERT(gpt_stage_new(&tiny, 0, 3, 1, 9) == NULL, "max_seq beyond the config");
  WT_TEST_ASSERT(gpt_stage_new(&tiny, 0, 3, 0, 8) == NULL, "max_batch 0");
  /* A model far beyond any machine's memory is refused with the sizes, not an abort. */
  gpt_config huge = {
      .vocab_size = 1 << 24, .max_seq = 1 << 16, .n_layer = 4096, .n_head = 64, .channels = 65536};
  WT_TEST_ASSERT(gpt_config_validate(&huge) == WT_OK, "%s", wt_last_error());
  WT_TEST_ASSERT(gpt_stage_new(&huge, 0, 4096, 64, 1 << 16) == NULL, "huge stage");
  WT_TEST_ASSERT(strstr(wt_last_error(), "GiB") != NULL, "message: %s", wt_last_error());
}

static const gpt_tensor_info *s_find(const gpt_stage *s, const char *name) {
  for (int i = 0; i < gpt_stage_num_tensors(s); i++)
    if (strcmp(gpt_stage_tensor(s, i)->name, name) == 0) return gpt_stage_tensor(s, i);
  return NULL;
}

static void test_layout(void) {
  gpt_config c = {.vocab_size = 11, .max_seq = 8, .n_layer = 3, .n_head = 2, .channels = 8};
  gpt_stage *all = gpt_stage_new(&c, 0, 3, 2, 8);
  WT_TEST_REQUIRE(all, "%s", wt_last_error());
  size_t n, sum = 0;
  gpt_stage_params(all, &n);
  WT_TEST_ASSERT(n == gpt_config_num_params(&c), "full stage holds every parameter once");
  for (int i = 0; i < gpt_stage_num_tensors(all); i++) {
    const gpt_tensor_info *t = gpt_stage_tensor(all, i);
    WT_TEST_ASSERT(t->offset == sum, "%s is not contiguous", t->name);
    sum += t->numel;
  }
  WT_TEST_ASSERT(gpt_stage_num_tensors(all) == 2 + 12 * 3 + 2, "tensor count");
  WT_TEST_ASSERT(strcmp(gpt_stage_tensor(all, 0)->name, "wte.weight") == 0, "first is wte");
  const gpt_tensor_info *qkv = s_find(all, "h.1.attn.c_attn.weight");
  WT_TEST_ASSERT(qkv && qkv->shape[0] == 8 && qkv->shape[1] == 24 && qkv->weight_decay == 1,
                 "c_attn.weight is Conv1D (in, out) = (C, 3C) with decay");
  const gpt_tensor_info *fcp = s_find(all, "h.2.mlp.c_proj.weight");
  WT_TEST_ASSERT(fcp && fcp->shape[0] == 32 && fcp->shape[1] == 8, "mlp.c_proj is (4C, C)");
  const gpt_tensor_info *lnb = s_find(all, "ln_f.bias");
  WT_TEST_ASSERT(lnb && lnb->ndim == 1 && lnb->weight_decay == 0, "ln_f.bias: 1-D, no decay");
  WT_TEST_ASSERT(gpt_stage_tied_grad(all, &n) != NULL && n == 88, "tied grad of the full stage");
  gpt_stage *mid = gpt_stage_new(&c, 1, 2, 2, 8);
  WT_TEST_REQUIRE(mid, "%s", wt_last_error());
  WT_TEST_ASSERT(gpt_stage_num_tensors(mid) == 12 && !s_find(mid, "wte.weight") &&
                     s_find(mid, "h.1.ln_1.weight") && !s_find(mid, "h.0.ln_1.weight"),
                 "a middle stage holds its own block only");
  WT_TEST_ASSERT(gpt_stage_tied_grad(mid, &n) == NULL && n == 0, "no tied grad in the middle");
  /* Init draws per tensor name: the middle stage's block equals the full model's. */
  gpt_stage_init_weights(all, 7);
  gpt_stage_init_weights(mid, 7);
  const gpt_tensor_info *a = s_find(all, "h.1.mlp.c_fc.weight"),
                        *b = s_find(mid, "h.1.mlp.c_fc.weight");
  WT_TEST_ASSERT(memcmp(gpt_stage_params(all, NULL) + a->offset,
                        gpt_stage_params(mid, NULL) + b->offset, a->numel * sizeof(float)) == 0,
                 "same weights in any stage");
  const gpt_tensor_info *ln = s_find(all, "h.0.ln_1.weight");
  WT_TEST_ASSERT(gpt_stage_params(all, NULL)[ln->offset] == 1.0f, "LayerNorm weight starts at 1");
  gpt_stage_destroy(&all);
  gpt_stage_destroy(&mid);
  WT_TEST_ASSERT(all == NULL, "destroy sets the pointer to NULL");
}

static void test_bad_inputs(void) {
  gpt_config c = {.vocab_size = 11, .max_seq = 8, .n_layer = 2, .n_head = 2, .channels = 8};
  gpt_stage *s = gpt_stage_new(&c, 0, 2, 2, 4);
  WT_TEST_REQUIRE(s, "%s", wt_last_error());
  gpt_stage_init_weights(s, 1);
  int tok[8] = {1, 2, 3, 4, 5, 6, 7, 8}, tgt[8] = {2, 3, 4, 5, 6, 7, 8, 9};
  WT_TEST_ASSERT(gpt_stage_backward(s, NULL, NULL, 1.0f) == WT_EINVAL, "backward before forward");
  tok[3] = 11;
  WT_TEST_ASSERT(gpt_stage_forward(s, tok, NULL, tgt, 2, 4, NULL) == WT_EINVAL, "token id 11");
  WT_TEST_ASSERT(strstr(wt_last_error(), "token id 11") != NULL, "%s", wt_last_error());
  tok[3] = 4, tgt[0] = -1;
  WT_TEST_ASSERT(gpt_stage_forward(s, tok, NULL, tgt, 2, 4, NULL) == WT_EINVAL, "target -1");
  tgt[0] = 2;
  WT_TEST_ASSERT(gpt_stage_forward(s, tok, NULL, tgt, 3, 4, NULL) == WT_EINVAL, "B > max_batch");
  WT_TEST_ASSERT(gpt_stage_forward(s, tok, NULL, tgt, 1, 5, NULL) == WT_EINVAL, "T > max_seq");
  WT_TEST_ASSERT(gpt_stage_forward(s, tok, NULL, tgt, 2, 4, NULL) == WT_OK, "%s", wt_last_error());
  /* Initial loss of a small-init model is near ln(V): the logits are nearly uniform. */
  WT_TEST_CLOSE(gpt_stage_loss(s), log(11.0), 0.1, 0, "initial loss ~ ln V");
  gpt_stage_destroy(&s);
}

static void test_gradcheck(const kernels_ops *ops) {
  gpt_config c = {.vocab_size = 13, .max_seq = 6, .n_layer = 2, .n_head = 2, .channels = 8};
  int B = 2, T = 5;
  gpt_stage *s = gpt_stage_new(&c, 0, 2, B, T);
  WT_TEST_REQUIRE(s, "%s", wt_last_error());
  gpt_stage_set_kernels(s, ops);
  wt_rng rng;
  wt_rng_seed(&rng, 99);
  size_t n;
  float *p = gpt_stage_params(s, &n), *g = gpt_stage_grads(s, NULL);
  for (size_t i = 0; i < n; i++) p[i] = (float)(0.3 * wt_rng_normal(&rng));
  int tok[10], tgt[10];
  for (int i = 0; i < B * T; i++)
    tok[i] = (int)wt_rng_below(&rng, 13), tgt[i] = (int)wt_rng_below(&rng, 13);
  gpt_stage_zero_grad(s);
  WT_TEST_REQUIRE(gpt_stage_forward(s, tok, NULL, tgt, B, T, NULL) == WT_OK, "%s", wt_last_error());
  WT_TEST_REQUIRE(gpt_stage_backward(s, NULL, NULL, 1.0f) == WT_OK, "%s", wt_last_error());
  /* Check a few entries of every tensor, including wte (both of its uses) and wpe. */
  for (int ti = 0; ti < gpt_stage_num_tensors(s); ti++) {
    const gpt_tensor_info *t = gpt_stage_tensor(s, ti);
    for (int k = 0; k < 3; k++) {
      size_t i = t->offset + wt_rng_below(&rng, t->numel);
      float saved = p[i], xp = saved + 1e-2f, xm = saved - 1e-2f;
      p[i] = xp;
      gpt_stage_forward(s, tok, NULL, tgt, B, T, NULL);
      double lp = gpt_stage_loss(s);
      p[i] = xm;
      gpt_stage_forward(s, tok, NULL, tgt, B, T, NULL);
      double lm = gpt_stage_loss(s);
      p[i] = saved;
      char what[128];
      snprintf(what, sizeof what, "%s: d loss / d %s[%zu]", ops->name, t->name, i - t->offset);
      WT_TEST_CLOSE(g[i], (lp - lm) / ((double)xp - xm), 2e-4, 2e-2, what);
    }
  }
  gpt_stage_destroy(&s);
}

int main(void) {
  kernels_cpu_init();
  test_config();
  test_layout();
  test_bad_inputs();
  test_gradcheck(kernels_cpu());
  test_gradcheck(kernels_ref());
  return wt_test_finish("test_gpt");
}
