/* test_gpt_moe — the Mixture-of-Experts variant of the GPT (gpt.h, model/moe.h):
 *   - one expert with top-1 and a capacity that drops nothing computes what the dense model
 *     computes when that expert holds the dense MLP's weights: logits, loss and every gradient
 *     (the gate is softmax over one expert = 1, so the router's gradient is exactly 0);
 *   - the layout: router and experts under global names, the parameter counts (total and
 *     active), and an EP rank's stage holding only its experts;
 *   - the gradients of CE + aux_weight · Σ aux through a whole model (two MoE blocks of four
 *     experts, top-2, aux weight 0.5) against central finite differences;
 *   - routing statistics: kept + dropped = blocks · tokens · k, and a tight capacity drops;
 *   - a checkpoint of an MoE model reads back the same config and loss, and a dense model
 *     refuses it with a message naming the experts;
 *   - bad MoE configs and --moe-layers lists are refused with messages.
 * Tolerances: E = 1 vs dense 1e-6 + 1e-5·|ref| (same kernels on the same rows; only the MoE
 * path's zero-initialised accumulations differ); finite differences (float32, step 2e-3)
 * 2e-3 + 5e-2·|ref|, as the MoE layer's own test. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "common/testing.h"
#include "model/checkpoint.h"
#include "model/gpt.h"

enum { V = 50, T = 8, B = 2, L = 2, C = 16, NH = 2 };

static gpt_config s_dense(void) {
  return (gpt_config){.vocab_size = V, .max_seq = T, .n_layer = L, .n_head = NH, .channels = C};
}

static gpt_config s_moe(int E, int k, float cap, float aux, const char *layers) {
  gpt_config c = s_dense();
  c.moe_experts = E, c.moe_top_k = k, c.moe_capacity = cap, c.moe_aux_weight = aux;
  WT_TEST_REQUIRE(gpt_config_set_moe_layers(&c, layers) == WT_OK, "%s", wt_last_error());
  return c;
}

static void s_batch(int *tok, int *tgt, unsigned seed) {
  for (int i = 0; i < B * T; i++) {
    seed = seed * 1103515245u + 12345u;
    tok[i] = (int)((seed >> 16) % V);
    tgt[i] = (int)((seed >> 8) % V);
  }
}

static gpt_stage *s_stage(const gpt_config *c) {
  gpt_stage *s = gpt_stage_new(c, 0, c->n_layer, B, T);
  WT_TEST_REQUIRE(s, "%s", wt_last_error());
  gpt_stage_init_weights(s, 5);
  return s;
}

static void s_fwd_bwd(gpt_stage *s, const int *tok, const int *tgt) {
  gpt_stage_zero_grad(s);
  WT_TEST_REQUIRE(gpt_stage_forward(s, tok, NULL, tgt, B, T, NULL) == WT_OK, "%s", wt_last_error());
  WT_TEST_REQUIRE(gpt_stage_backward(s, NULL, NULL, 1.0f) == WT_OK, "%s", wt_last_error());
}

/* The index of tensor `name` in s, or -1. */
static int s_find(const gpt_stage *s, const char *name) {
  for (int i = 0; i < gpt_stage_num_tensors(s); i++)
    if (!strcmp(gpt_stage_tensor(s, i)->name, name)) return i;
  return -1;
}

/* A dense tensor's name in the one-expert model: mlp.X -> moe.experts.0.X. */
static void s_moe_name(const char *dense, char *out, size_t size) {
  const char *mlp = strstr(dense, "mlp.");
  if (!mlp) {
    snprintf(out, size, "%s", dense);
    return;
  }
  snprintf(out, size, "%.*smoe.experts.0.%s", (int)(mlp - dense), dense, mlp + 4);
}

static void test_one_expert_is_dense(void) {
  gpt_config dc = s_dense(), mc = s_moe(1, 1, 1.0f, 0.5f, "all");
  gpt_stage *d = s_stage(&dc), *m = s_stage(&mc);
  float *dp = gpt_stage_params(d, NULL), *mp = gpt_stage_params(m, NULL);
  for (int i = 0; i < gpt_stage_num_tensors(d); i++) { /* the dense weights into the expert */
    const gpt_tensor_info *t = gpt_stage_tensor(d, i);
    char name[64];
    s_moe_name(t->name, name, sizeof name);
    int j = s_find(m, name);
    WT_TEST_REQUIRE(j >= 0, "the one-expert model has no %s", name);
    memcpy(mp + gpt_stage_tensor(m, j)->offset, dp + t->offset, t->numel * sizeof(float));
  }
  int tok[B * T], tgt[B * T];
  s_batch(tok, tgt, 11);
  s_fwd_bwd(d, tok, tgt);
  s_fwd_bwd(m, tok, tgt);
  WT_TEST_CLOSE(gpt_stage_loss(m), gpt_stage_loss(d), 1e-6, 1e-5, "loss, one expert vs dense");
  wt_test_allclose(gpt_stage_logits(m), gpt_stage_logits(d), (size_t)B * T * V, 1e-6, 1e-5,
                   "logits, one expert vs dense");
  float *dg = gpt_stage_grads(d, NULL), *mg = gpt_stage_grads(m, NULL);
  for (int i = 0; i < gpt_stage_num_tensors(d); i++) {
    const gpt_tensor_info *t = gpt_stage_tensor(d, i);
    char name[64];
    s_moe_name(t->name, name, sizeof name);
    const gpt_tensor_info *u = gpt_stage_tensor(m, s_find(m, name));
    wt_test_allclose(mg + u->offset, dg + t->offset, t->numel, 1e-6, 1e-5, name);
  }
  for (int l = 0; l < L; l++) {
    char name[64];
    snprintf(name, sizeof name, "h.%d.moe.router.weight", l);
    const gpt_tensor_info *u = gpt_stage_tensor(m, s_find(m, name));
    for (size_t i = 0; i < u->numel; i++)
      WT_TEST_ASSERT(mg[u->offset + i] == 0.0f, "%s grad[%zu] = %g with one expert", name, i,
                     mg[u->offset + i]);
  }
  gpt_stage_destroy(&d);
  gpt_stage_destroy(&m);
}

static void test_layout(void) {
  gpt_config c = s_moe(4, 2, 1.25f, 0.01f, "1");
  gpt_stage *s = s_stage(&c);
  size_t n;
  gpt_stage_params(s, &n);
  WT_TEST_ASSERT(n == gpt_config_num_params(&c), "stage holds %zu, config says %zu", n,
                 gpt_config_num_params(&c));
  size_t expert = 8 * C * C + 5 * C,
         dense = gpt_config_num_params(&(gpt_config){
             .vocab_size = V, .max_seq = T, .n_layer = L, .n_head = NH, .channels = C});
  WT_TEST_ASSERT(n == dense + 3 * expert + (size_t)C * 4,
                 "total %zu: dense %zu + 3 experts + "
                 "router",
                 n, dense);
  WT_TEST_ASSERT(gpt_config_num_active_params(&c) == dense + expert + (size_t)C * 4, "active %zu",
                 gpt_config_num_active_params(&c));
  const char *want[] = {"h.0.mlp.c_fc.weight", "h.1.moe.router.weight",
                        "h.1.moe.experts.0.c_fc.weight", "h.1.moe.experts.3.c_proj.bias"};
  for (size_t i = 0; i < WT_ARRAY_LEN(want); i++)
    WT_TEST_ASSERT(s_find(s, want[i]) >= 0, "no tensor %s", want[i]);
  WT_TEST_ASSERT(s_find(s, "h.1.mlp.c_fc.weight") < 0, "an MoE block has no dense MLP");
  const gpt_tensor_info *r = gpt_stage_tensor(s, s_find(s, "h.1.moe.router.weight"));
  WT_TEST_ASSERT(r->shape[0] == C && r->shape[1] == 4 && r->weight_decay == 1, "router %dx%d",
                 r->shape[0], r->shape[1]);
  gpt_stage_destroy(&s);

  /* Rank 1 of EP 2 holds experts 2 and 3 under their global names. */
  moe_exchange ep = {.rank = 1, .size = 2, .alltoall = NULL};
  WT_TEST_ASSERT(!gpt_stage_new_ep(&c, 0, L, B, T, kernels_cpu(), &ep) &&
                     strstr(wt_last_error(), "all-to-all"),
                 "EP 2 without an all-to-all: %s", wt_last_error());
  ep.alltoall = (int (*)(void *, const float *, float *, size_t))1; /* never called here */
  gpt_stage *r1 = gpt_stage_new_ep(&c, 0, L, B, T, kernels_cpu(), &ep);
  WT_TEST_REQUIRE(r1, "%s", wt_last_error());
  WT_TEST_ASSERT(s_find(r1, "h.1.moe.experts.2.c_fc.weight") >= 0 &&
                     s_find(r1, "h.1.moe.experts.3.c_proj.weight") >= 0 &&
                     s_find(r1, "h.1.moe.experts.0.c_fc.weight") < 0,
                 "EP rank 1 of 2 holds experts 2, 3 only");
  gpt_stage_params(r1, &n);
  WT_TEST_ASSERT(n == dense + expert + (size_t)C * 4, "EP rank holds %zu", n);
  ep.size = 3;
  WT_TEST_ASSERT(!gpt_stage_new_ep(&c, 0, L, B, T, kernels_cpu(), &ep) &&
                     strstr(wt_last_error(), "multiple of the EP degree 3"),
                 "4 experts on EP 3: %s", wt_last_error());
  gpt_stage_destroy(&r1);
}

/* CE + aux_weight · Σ over blocks of aux, the objective the backward differentiates. */
static double s_objective(gpt_stage *s, const int *tok, const int *tgt) {
  gpt_stage_zero_grad(s);
  WT_TEST_REQUIRE(gpt_stage_forward(s, tok, NULL, tgt, B, T, NULL) == WT_OK, "%s", wt_last_error());
  double aux;
  int blocks = gpt_stage_moe_stats(s, NULL, NULL, &aux, NULL);
  return gpt_stage_loss(s) + gpt_stage_config(s)->moe_aux_weight * aux * blocks;
}

static void test_finite_differences(void) {
  gpt_config c = s_moe(4, 2, 4.0f, 0.5f, "all");
  gpt_stage *s = s_stage(&c);
  int tok[B * T], tgt[B * T];
  s_batch(tok, tgt, 3);
  size_t n;
  float *p = gpt_stage_params(s, &n), *g = gpt_stage_grads(s, NULL);
  /* Routers of std 0.6 instead of 0.02: near-uniform probabilities would let a step of h swap
   * the top-k experts, and the objective is not differentiable across such a swap. */
  for (int l = 0; l < L; l++) {
    char name[64];
    snprintf(name, sizeof name, "h.%d.moe.router.weight", l);
    const gpt_tensor_info *t = gpt_stage_tensor(s, s_find(s, name));
    for (size_t i = 0; i < t->numel; i++) p[t->offset + i] *= 30;
  }
  s_fwd_bwd(s, tok, tgt);
  float *grad = wt_xmalloc(n * sizeof(float));
  memcpy(grad, g, n * sizeof(float));
  const char *names[] = {"h.0.moe.router.weight", "h.1.moe.router.weight",
                         "h.0.moe.experts.1.c_fc.weight", "h.1.moe.experts.2.c_proj.bias",
                         "h.0.attn.c_attn.weight"};
  const float h = 2e-3f;
  for (size_t k = 0; k < WT_ARRAY_LEN(names); k++) {
    const gpt_tensor_info *t = gpt_stage_tensor(s, s_find(s, names[k]));
    for (int j = 0; j < 3; j++) {
      size_t i = t->offset + (size_t)(j * 7 + 1) % t->numel;
      float keep = p[i];
      p[i] = keep + h;
      double up = s_objective(s, tok, tgt);
      p[i] = keep - h;
      double down = s_objective(s, tok, tgt);
      p[i] = keep;
      WT_TEST_CLOSE(grad[i], (up - down) / (2 * h), 2e-3, 5e-2, names[k]);
    }
  }
  free(grad);
  gpt_stage_destroy(&s);
}

static void test_stats(void) {
  int tok[B * T], tgt[B * T];
  s_batch(tok, tgt, 7);
  for (int tight = 0; tight < 2; tight++) {
    gpt_config c = s_moe(4, 2, tight ? 0.5f : 4.0f, 0.01f, "all");
    gpt_stage *s = s_stage(&c);
    s_fwd_bwd(s, tok, tgt);
    WT_TEST_REQUIRE(gpt_stage_forward(s, tok, NULL, tgt, B, T, NULL) == WT_OK, "%s",
                    wt_last_error());
    long kept[4], dropped, sum = 0;
    double aux;
    int fw;
    WT_TEST_ASSERT(gpt_stage_moe_stats(s, kept, &dropped, &aux, &fw) == L, "MoE blocks");
    for (int e = 0; e < 4; e++) sum += kept[e];
    WT_TEST_ASSERT(fw == 2 && sum + dropped == 2L * L * B * T * 2,
                   "kept %ld + dropped %ld over %d forwards", sum, dropped, fw);
    WT_TEST_ASSERT(tight ? dropped > 0 : dropped == 0, "capacity %g dropped %ld", c.moe_capacity,
                   dropped);
    WT_TEST_ASSERT(aux >= 1.0 - 1e-6, "the aux loss is at least 1 (balanced): %g", aux);
    gpt_stage_zero_grad(s);
    WT_TEST_ASSERT(gpt_stage_moe_stats(s, kept, &dropped, NULL, &fw) == L && fw == 0 &&
                       dropped == 0 && kept[0] == 0,
                   "zero_grad resets the statistics");
    gpt_stage_destroy(&s);
  }
  gpt_config d = s_dense();
  gpt_stage *s = s_stage(&d);
  WT_TEST_ASSERT(gpt_stage_moe_stats(s, NULL, NULL, NULL, NULL) == 0, "a dense model has none");
  gpt_stage_destroy(&s);
}

static void test_checkpoint(void) {
  char dir[512];
  wt_test_tmpdir(dir, sizeof dir);
  gpt_config c = s_moe(4, 2, 1.5f, 0.03f, "0");
  gpt_stage *s = s_stage(&c);
  int tok[B * T], tgt[B * T];
  s_batch(tok, tgt, 9);
  WT_TEST_REQUIRE(gpt_stage_forward(s, tok, NULL, tgt, B, T, NULL) == WT_OK, "%s", wt_last_error());
  checkpoint_meta meta = {.step = 1, .tokenizer = DATA_TOKENIZER_SYNTHETIC};
  data_position_init(&meta.data_pos, 1);
  WT_TEST_REQUIRE(checkpoint_save(dir, s, NULL, &meta, 1) == WT_OK, "%s", wt_last_error());
  gpt_config back;
  checkpoint_meta got;
  WT_TEST_REQUIRE(checkpoint_read_config(dir, &back, &got) == WT_OK, "%s", wt_last_error());
  WT_TEST_ASSERT(!memcmp(&back, &c, sizeof c), "the MoE config reads back (E %d k %d cap %g)",
                 back.moe_experts, back.moe_top_k, back.moe_capacity);
  gpt_stage *t = gpt_stage_new(&back, 0, L, B, T);
  WT_TEST_REQUIRE(t && checkpoint_load(dir, t, NULL, &got) == WT_OK, "%s", wt_last_error());
  WT_TEST_REQUIRE(gpt_stage_forward(t, tok, NULL, tgt, B, T, NULL) == WT_OK, "%s", wt_last_error());
  WT_TEST_ASSERT(gpt_stage_loss(t) == gpt_stage_loss(s), "loaded loss %.9g, saved %.9g",
                 gpt_stage_loss(t), gpt_stage_loss(s));
  gpt_config d = s_dense();
  gpt_stage *u = s_stage(&d);
  WT_TEST_ASSERT(checkpoint_load(dir, u, NULL, &got) == WT_EMISMATCH &&
                     strstr(wt_last_error(), "4 experts (top-2"),
                 "a dense model refuses an MoE checkpoint: %s", wt_last_error());
  gpt_stage_destroy(&s);
  gpt_stage_destroy(&t);
  gpt_stage_destroy(&u);
}

static void test_refusals(void) {
  gpt_config c = s_dense();
  WT_TEST_ASSERT(gpt_config_set_moe_layers(&c, "0,2") == WT_EINVAL &&
                     strstr(wt_last_error(), "block 2 does not exist"),
                 "%s", wt_last_error());
  WT_TEST_ASSERT(gpt_config_set_moe_layers(&c, "1-x") == WT_EINVAL &&
                     strstr(wt_last_error(), "\"1-x\" is not a block number"),
                 "%s", wt_last_error());
  WT_TEST_ASSERT(gpt_config_set_moe_layers(&c, "") == WT_EINVAL, "an empty list");
  WT_TEST_ASSERT(gpt_config_set_moe_layers(&c, "0-1") == WT_OK && c.moe_layer[0] && c.moe_layer[1],
                 "a range");
  WT_TEST_ASSERT(gpt_config_validate(&c) == WT_EINVAL && strstr(wt_last_error(), "moe_experts"),
                 "MoE blocks without experts: %s", wt_last_error());
  c = s_moe(4, 5, 1.0f, 0.0f, "0");
  WT_TEST_ASSERT(gpt_config_validate(&c) == WT_EINVAL && strstr(wt_last_error(), "top-k 5"), "%s",
                 wt_last_error());
  c = s_moe(4, 1, 0.0f, 0.0f, "0");
  WT_TEST_ASSERT(gpt_config_validate(&c) == WT_EINVAL && strstr(wt_last_error(), "capacity"), "%s",
                 wt_last_error());
  c = s_moe(4, 1, 1.0f, 0.0f, "0");
  gpt_stage *st = gpt_stage_new(&c, 0, c.n_layer, B, T);
  WT_TEST_REQUIRE(st != NULL, "%s", wt_last_error());
  WT_TEST_ASSERT(gpt_stage_set_slots(st, 2) == WT_ENOTSUP && strstr(wt_last_error(), "one forward"),
                 "an MoE stage refuses a second activation slot: %s", wt_last_error());
  WT_TEST_ASSERT(gpt_stage_set_slots(st, 1) == WT_OK, "one slot is fine");
  gpt_stage_destroy(&st);
  memset(c.moe_layer, 0, sizeof c.moe_layer);
  WT_TEST_ASSERT(gpt_config_validate(&c) == WT_EINVAL &&
                     strstr(wt_last_error(), "at least one MoE block"),
                 "%s", wt_last_error());
}

int main(void) {
  test_one_expert_is_dense();
  test_layout();
  test_finite_differences();
  test_stats();
  test_checkpoint();
  test_refusals();
  return wt_test_finish("test_gpt_moe");
}
