/* test_gpt_split — a model cut into layer-range stages computes what the whole model computes:
 *   - logits, loss and every gradient BITWISE equal for several cut points (two and three
 *     stages), with the tied wte gradient joined by gpt_tied_grads_sum;
 *   - several steps of training (AdamW, global-norm clipping summed over stages, cosine lr)
 *     keep every parameter bitwise equal to unsplit training;
 *   - gradient accumulation over two micro-batches (loss_scale 1/2) equals one batch of twice
 *     the size up to float rounding (tolerance argued at the check);
 *   - with accumulation over micro-batches, split stages (tied wte gradients joined once, before
 *     the update) still give BITWISE the unsplit model's gradients, for several steps;
 *   - activation slots: three forwards kept in three slots, then their backwards in another
 *     order, give BITWISE the losses, input gradients and parameter gradients of a one-slot stage
 *     running each forward right before its backward (whole model and a middle stage); bad slot
 *     counts and indices are refused.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "model/gpt.h"
#include "kernels/kernels.h"
#include "model/optim.h"
#include "common/rng.h"
#include "common/testing.h"

static const gpt_config CFG = {
    .vocab_size = 50, .max_seq = 8, .n_layer = 4, .n_head = 2, .channels = 16};
enum { B = 3, T = 7, MAX_STAGES = 4 };

typedef struct {
  int n;
  gpt_stage *s[MAX_STAGES];
  optim *opt[MAX_STAGES];
} pipeline;

static pipeline s_pipeline(const int *cuts, int n_cuts, uint64_t seed) {
  pipeline p = {.n = n_cuts + 1};
  for (int i = 0; i < p.n; i++) {
    int first = i == 0 ? 0 : cuts[i - 1], last = i == n_cuts ? CFG.n_layer : cuts[i];
    p.s[i] = gpt_stage_new(&CFG, first, last, B, T);
    WT_TEST_REQUIRE(p.s[i], "%s", wt_last_error());
    gpt_stage_init_weights(p.s[i], seed);
  }
  return p;
}

static void s_pipeline_free(pipeline *p) {
  for (int i = 0; i < p->n; i++) gpt_stage_destroy(&p->s[i]), optim_destroy(&p->opt[i]);
}

/* Forward then backward through the stages, passing activations and their gradients along as
 * a pipeline would; joins the tied wte gradient. */
static void s_fwd_bwd(pipeline *p, const int *tok, const int *tgt) {
  static float act[MAX_STAGES][B * T * 16], grad[MAX_STAGES][B * T * 16];
  for (int i = 0; i < p->n; i++) {
    int last = i == p->n - 1;
    int rc = gpt_stage_forward(p->s[i], i == 0 ? tok : NULL, i ? act[i - 1] : NULL,
                               last ? tgt : NULL, B, T, last ? NULL : act[i]);
    WT_TEST_REQUIRE(rc == WT_OK, "%s", wt_last_error());
  }
  for (int i = p->n - 1; i >= 0; i--) {
    int rc =
        gpt_stage_backward(p->s[i], i == p->n - 1 ? NULL : grad[i], i ? grad[i - 1] : NULL, 1.0f);
    WT_TEST_REQUIRE(rc == WT_OK, "%s", wt_last_error());
  }
  WT_TEST_REQUIRE(gpt_tied_grads_sum(p->s[0], p->s[p->n - 1]) == WT_OK, "%s", wt_last_error());
}

/* Every tensor of the unsplit model equals, bit for bit, the same tensor in every stage of the
 * split one that holds it (both copies of wte included). */
static int s_same_tensors(pipeline *whole, pipeline *split, int grads, const char *what) {
  gpt_stage *w = whole->s[0];
  int ok = 1;
  for (int k = 0; k < gpt_stage_num_tensors(w); k++) {
    const gpt_tensor_info *t = gpt_stage_tensor(w, k);
    const float *ref = (grads ? gpt_stage_grads(w, NULL) : gpt_stage_params(w, NULL)) + t->offset;
    for (int i = 0; i < split->n; i++)
      for (int j = 0; j < gpt_stage_num_tensors(split->s[i]); j++) {
        const gpt_tensor_info *u = gpt_stage_tensor(split->s[i], j);
        if (strcmp(u->name, t->name) != 0) continue;
        const float *got =
            (grads ? gpt_stage_grads(split->s[i], NULL) : gpt_stage_params(split->s[i], NULL)) +
            u->offset;
        if (memcmp(got, ref, t->numel * sizeof(float)) != 0) {
          WT_TEST_ASSERT(0, "%s: %s differs in stage %d", what, t->name, i);
          ok = 0;
        }
      }
  }
  return ok;
}

static void s_batch(wt_rng *rng, int *tok, int *tgt, int n) {
  for (int i = 0; i < n; i++)
    tok[i] = (int)wt_rng_below(rng, CFG.vocab_size),
    tgt[i] = (int)wt_rng_below(rng, CFG.vocab_size);
}

static void test_split_bitwise(void) {
  static const int cuts[][3] = {{1}, {2}, {3}, {1, 3}, {1, 2, 3}};
  static const int n_cuts[] = {1, 1, 1, 2, 3};
  wt_rng rng;
  wt_rng_seed(&rng, 5);
  int tok[B * T], tgt[B * T];
  s_batch(&rng, tok, tgt, B * T);
  pipeline whole = s_pipeline(NULL, 0, 42);
  s_fwd_bwd(&whole, tok, tgt);
  for (size_t c = 0; c < WT_ARRAY_LEN(n_cuts); c++) {
    pipeline split = s_pipeline(cuts[c], n_cuts[c], 42);
    s_fwd_bwd(&split, tok, tgt);
    gpt_stage *a = whole.s[0], *b = split.s[split.n - 1];
    WT_TEST_ASSERT(memcmp(gpt_stage_logits(a), gpt_stage_logits(b),
                          sizeof(float) * B * T * CFG.vocab_size) == 0,
                   "logits, cut %zu", c);
    float la = gpt_stage_loss(a), lb = gpt_stage_loss(b);
    WT_TEST_ASSERT(memcmp(&la, &lb, sizeof la) == 0, "loss %.9g vs %.9g, cut %zu", la, lb, c);
    char what[32];
    snprintf(what, sizeof what, "grads, cut %zu", c);
    s_same_tensors(&whole, &split, 1, what);
    s_pipeline_free(&split);
  }
  s_pipeline_free(&whole);
}

/* Global gradient norm over all stages, counting the tied wte once (it sits at the start of
 * the last stage's buffer, offset 0, when that stage is not also the first). */
static double s_sq_norm(pipeline *p) {
  double sq = 0;
  for (int i = 0; i < p->n; i++) {
    size_t n, skip = 0;
    float *g = gpt_stage_grads(p->s[i], &n);
    if (i > 0 && gpt_stage_tied_grad(p->s[i], &skip)) {
      WT_TEST_REQUIRE(gpt_stage_tied_grad(p->s[i], NULL) == g, "wte comes first in the buffer");
    }
    sq += optim_grad_sq_norm(g + skip, n - skip);
  }
  return sq;
}

static float s_train_step(pipeline *p, const int *tok, const int *tgt, int *clipped) {
  for (int i = 0; i < p->n; i++) gpt_stage_zero_grad(p->s[i]);
  s_fwd_bwd(p, tok, tgt);
  const optim_config *cfg = optim_get_config(p->opt[0]);
  float scale = optim_clip_scale(cfg, s_sq_norm(p));
  *clipped |= scale < 1.0f;
  float lr = optim_lr_at(cfg, optim_step_count(p->opt[0]));
  for (int i = 0; i < p->n; i++)
    WT_TEST_REQUIRE(optim_step(p->opt[i], gpt_stage_params(p->s[i], NULL),
                               gpt_stage_grads(p->s[i], NULL), lr, scale) == WT_OK,
                    "%s", wt_last_error());
  return gpt_stage_loss(p->s[p->n - 1]);
}

static void test_split_training(void) {
  optim_config oc = optim_config_default();
  oc.lr = 1e-2f, oc.warmup_steps = 2, oc.total_steps = 6, oc.min_lr = 1e-3f;
  oc.grad_clip = 0.5f; /* below the initial norm, so clipping is exercised */
  static const int cut[] = {2};
  pipeline whole = s_pipeline(NULL, 0, 3), split = s_pipeline(cut, 1, 3);
  pipeline *ps[2] = {&whole, &split};
  for (int k = 0; k < 2; k++)
    for (int i = 0; i < ps[k]->n; i++) {
      int n;
      const gpt_tensor_info *t = gpt_stage_tensors(ps[k]->s[i], &n);
      ps[k]->opt[i] = optim_new(&oc, t, n);
      WT_TEST_REQUIRE(ps[k]->opt[i], "%s", wt_last_error());
    }
  wt_rng rng;
  wt_rng_seed(&rng, 11);
  int tok[B * T], tgt[B * T], clipped = 0;
  float first_loss = 0, loss = 0;
  for (int step = 0; step < 6; step++) {
    s_batch(&rng, tok, tgt, B * T);
    tgt[0] = tok[0]; /* make the batch a little learnable */
    float lw = s_train_step(&whole, tok, tgt, &clipped);
    float ls = s_train_step(&split, tok, tgt, &clipped);
    WT_TEST_ASSERT(memcmp(&lw, &ls, sizeof lw) == 0, "step %d loss %.9g vs %.9g", step, lw, ls);
    char what[32];
    snprintf(what, sizeof what, "params after step %d", step);
    if (!s_same_tensors(&whole, &split, 0, what)) break;
    if (step == 0) first_loss = lw;
    loss = lw;
  }
  WT_TEST_ASSERT(clipped, "the test should exercise clipping");
  WT_TEST_ASSERT(isfinite(loss) && loss != first_loss, "training changed the loss");
  s_pipeline_free(&whole);
  s_pipeline_free(&split);
}

/* Gradients accumulated over micro-batches, as a pipeline does: every micro-batch's backward adds
 * into the stage gradients, and the tied wte halves are joined once, after the last one. */
static void s_accumulate(pipeline *p, const int *tok, const int *tgt, int micro) {
  static float act[MAX_STAGES][B * T * 16], grad[MAX_STAGES][B * T * 16];
  for (int i = 0; i < p->n; i++) gpt_stage_zero_grad(p->s[i]);
  for (int m = 0; m < micro; m++) {
    const int *mt = tok + m * B * T, *mg = tgt + m * B * T;
    for (int i = 0; i < p->n; i++) {
      int last = i == p->n - 1;
      WT_TEST_REQUIRE(gpt_stage_forward(p->s[i], i == 0 ? mt : NULL, i ? act[i - 1] : NULL,
                                        last ? mg : NULL, B, T, last ? NULL : act[i]) == WT_OK,
                      "%s", wt_last_error());
    }
    for (int i = p->n - 1; i >= 0; i--)
      WT_TEST_REQUIRE(gpt_stage_backward(p->s[i], i == p->n - 1 ? NULL : grad[i],
                                         i ? grad[i - 1] : NULL, 1.0f / (float)micro) == WT_OK,
                      "%s", wt_last_error());
  }
  WT_TEST_REQUIRE(gpt_tied_grads_sum(p->s[0], p->s[p->n - 1]) == WT_OK, "%s", wt_last_error());
}

static void test_split_accumulation_bitwise(void) {
  enum { MICRO = 3, STEPS = 3 };
  static const int cuts[] = {1, 3};
  pipeline whole = s_pipeline(NULL, 0, 21), split = s_pipeline(cuts, 2, 21);
  wt_rng rng;
  wt_rng_seed(&rng, 17);
  for (int step = 0; step < STEPS; step++) {
    int tok[MICRO * B * T], tgt[MICRO * B * T];
    s_batch(&rng, tok, tgt, MICRO * B * T);
    tok[B * T] = tok[0]; /* a token repeated across micro-batches: its wte rows accumulate */
    s_accumulate(&whole, tok, tgt, MICRO);
    s_accumulate(&split, tok, tgt, MICRO);
    char what[48];
    snprintf(what, sizeof what, "accumulated grads, step %d", step);
    if (!s_same_tensors(&whole, &split, 1, what)) break;
  }
  s_pipeline_free(&whole);
  s_pipeline_free(&split);
}

/* One batch of 4 sequences against two micro-batches of 2 with loss_scale 1/2 (B = 3 would not
 * split into equal halves, and unequal halves weigh rows differently). */
static void test_accumulation(void) {
  enum { BB = 4, HB = 2 };
  gpt_stage *big = gpt_stage_new(&CFG, 0, CFG.n_layer, BB, T);
  gpt_stage *acc = gpt_stage_new(&CFG, 0, CFG.n_layer, HB, T);
  WT_TEST_REQUIRE(big && acc, "%s", wt_last_error());
  gpt_stage_init_weights(big, 8);
  gpt_stage_init_weights(acc, 8);
  wt_rng rng;
  wt_rng_seed(&rng, 13);
  int tok[BB * T], tgt[BB * T];
  s_batch(&rng, tok, tgt, BB * T);
  gpt_stage_zero_grad(big);
  gpt_stage_zero_grad(acc);
  WT_TEST_REQUIRE(gpt_stage_forward(big, tok, NULL, tgt, BB, T, NULL) == WT_OK, "%s",
                  wt_last_error());
  WT_TEST_REQUIRE(gpt_stage_backward(big, NULL, NULL, 1.0f) == WT_OK, "%s", wt_last_error());
  double loss = 0;
  for (int m = 0; m < BB / HB; m++) {
    WT_TEST_REQUIRE(gpt_stage_forward(acc, tok + m * HB * T, NULL, tgt + m * HB * T, HB, T, NULL) ==
                        WT_OK,
                    "fwd");
    WT_TEST_REQUIRE(gpt_stage_backward(acc, NULL, NULL, 1.0f / (BB / HB)) == WT_OK, "bwd");
    loss += gpt_stage_loss(acc) / (BB / HB);
  }
  /* The same per-row terms summed in another grouping (sgemm over 28 rows vs two sums of 14;
   * loss scales 1/28 vs 1/2 * 1/14): each gradient is a sum of <= 28 terms, so the difference is
   * a few ulps of the largest partial sum. Tolerance 1e-5 * max|g| + 1e-4 relative. */
  size_t n;
  const float *gb = gpt_stage_grads(big, &n), *ga = gpt_stage_grads(acc, NULL);
  double gmax = 0;
  for (size_t i = 0; i < n; i++) gmax = fmax(gmax, fabs(gb[i]));
  WT_TEST_ASSERT(gmax > 0, "gradients are not all zero");
  wt_test_allclose(ga, gb, n, 1e-5 * gmax, 1e-4, "accumulated vs big-batch gradients");
  WT_TEST_CLOSE(loss, gpt_stage_loss(big), 1e-6, 1e-6, "mean loss over the micro-batches");
  gpt_stage_destroy(&big);
  gpt_stage_destroy(&acc);
}

static void s_slots_case(int first, int last) {
  enum { MB = 3, N = B * T * 16 };
  static const int order[MB] = {2, 0, 1}; /* backward order */
  gpt_stage *ref = gpt_stage_new(&CFG, first, last, B, T);
  gpt_stage *sl = gpt_stage_new(&CFG, first, last, B, T);
  WT_TEST_REQUIRE(ref && sl, "%s", wt_last_error());
  gpt_stage_init_weights(ref, 4), gpt_stage_init_weights(sl, 4);
  WT_TEST_REQUIRE(gpt_stage_set_slots(sl, MB) == WT_OK && gpt_stage_num_slots(sl) == MB, "%s",
                  wt_last_error());
  const int is_first = first == 0, is_last = last == CFG.n_layer;
  wt_rng rng;
  wt_rng_seed(&rng, 99);
  static int tok[MB][B * T], tgt[MB][B * T];
  static float in[MB][N], gout[MB][N], out[N], gin_ref[MB][N], gin[N];
  float loss_ref[MB];
  for (int j = 0; j < MB; j++) {
    s_batch(&rng, tok[j], tgt[j], B * T);
    for (int i = 0; i < N; i++) in[j][i] = wt_rng_float(&rng) - 0.5f;
    for (int i = 0; i < N; i++) gout[j][i] = 1e-3f * (wt_rng_float(&rng) - 0.5f);
  }
#define FWD(st, j)                                                                                 \
  gpt_stage_forward(st, is_first ? tok[j] : NULL, is_first ? NULL : in[j], is_last ? tgt[j] : NULL, \
                    B, T, is_last ? NULL : out)
  gpt_stage_zero_grad(ref), gpt_stage_zero_grad(sl);
  for (int k = 0; k < MB; k++) { /* one slot: each forward right before its backward */
    int j = order[k];
    WT_TEST_REQUIRE(FWD(ref, j) == WT_OK, "%s", wt_last_error());
    loss_ref[j] = is_last ? gpt_stage_loss(ref) : 0;
    WT_TEST_REQUIRE(gpt_stage_backward(ref, is_last ? NULL : gout[j], is_first ? NULL : gin_ref[j],
                                       1.0f / MB) == WT_OK,
                    "%s", wt_last_error());
  }
  for (int j = 0; j < MB; j++) { /* slots: every forward first */
    WT_TEST_REQUIRE(gpt_stage_use_slot(sl, j) == WT_OK && gpt_stage_slot(sl) == j, "use");
    WT_TEST_REQUIRE(FWD(sl, j) == WT_OK, "%s", wt_last_error());
  }
#undef FWD
  for (int k = 0; k < MB; k++) {
    int j = order[k];
    WT_TEST_REQUIRE(gpt_stage_use_slot(sl, j) == WT_OK, "use");
    if (is_last)
      WT_TEST_ASSERT(gpt_stage_loss(sl) == loss_ref[j], "[%d, %d) slot %d keeps its loss: %.9g "
                     "vs %.9g", first, last, j, gpt_stage_loss(sl), loss_ref[j]);
    WT_TEST_REQUIRE(gpt_stage_backward(sl, is_last ? NULL : gout[j], is_first ? NULL : gin,
                                       1.0f / MB) == WT_OK,
                    "%s", wt_last_error());
    if (!is_first)
      WT_TEST_ASSERT(!memcmp(gin, gin_ref[j], sizeof gin), "[%d, %d) micro-batch %d: grad_in",
                     first, last, j);
  }
  size_t n;
  const float *ga = gpt_stage_grads(sl, &n), *gb = gpt_stage_grads(ref, NULL);
  WT_TEST_ASSERT(!memcmp(ga, gb, sizeof(float) * n), "[%d, %d): parameter gradients bitwise",
                 first, last);
  /* Shrinking keeps slot 0; bad counts and slots are refused. */
  WT_TEST_ASSERT(gpt_stage_set_slots(sl, 1) == WT_OK && gpt_stage_slot(sl) == 0, "shrink");
  WT_TEST_ASSERT(gpt_stage_set_slots(sl, 0) == WT_EINVAL, "0 slots");
  WT_TEST_ASSERT(gpt_stage_set_slots(sl, GPT_MAX_SLOTS + 1) == WT_EINVAL, "too many slots");
  WT_TEST_ASSERT(gpt_stage_use_slot(sl, 1) == WT_EINVAL && gpt_stage_use_slot(sl, -1) == WT_EINVAL,
                 "a slot outside the range");
  gpt_stage_destroy(&ref), gpt_stage_destroy(&sl);
}

static void test_slots(void) {
  s_slots_case(0, CFG.n_layer);
  s_slots_case(1, 3);
  s_slots_case(0, 2);
  s_slots_case(2, CFG.n_layer);
}

static void test_tied_sum_errors(void) {
  gpt_stage *a = gpt_stage_new(&CFG, 0, 2, 1, 4), *b = gpt_stage_new(&CFG, 2, 4, 1, 4);
  WT_TEST_REQUIRE(a && b, "%s", wt_last_error());
  WT_TEST_ASSERT(gpt_tied_grads_sum(b, a) == WT_EINVAL, "ends swapped must be refused");
  WT_TEST_ASSERT(gpt_tied_grads_sum(a, b) == WT_OK, "%s", wt_last_error());
  gpt_config other = CFG;
  other.channels = 32;
  gpt_stage *c = gpt_stage_new(&other, 2, 4, 1, 4);
  WT_TEST_ASSERT(gpt_tied_grads_sum(a, c) == WT_EINVAL, "different models must be refused");
  gpt_stage_destroy(&a), gpt_stage_destroy(&b), gpt_stage_destroy(&c);
}

int main(void) {
  kernels_cpu_init();
  test_split_bitwise();
  test_split_training();
  test_accumulation();
  test_split_accumulation_bitwise();
  test_tied_sum_errors();
  test_slots();
  return wt_test_finish("test_gpt_split");
}
