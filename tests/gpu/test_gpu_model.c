/* test_gpu_model — the CUDA back end end to end against the CPU back end: a stage, its
 * optimizer and checkpoints living on the GPU. Exits 77 (skipped) when no CUDA device is
 * present. Checked, on fresh random inputs:
 *   - the memory entries (upload/download/copy/zero, zeroed alloc, pinned host_alloc, the
 *     asynchronous copies on their own stream) and sq_norm;
 *   - matmul and attention at fp32, TF32 and bf16 precision against the reference ops
 *     (relative-norm error, the tolerance argued per precision below);
 *   - the whole model's logits, loss and every gradient against the CPU back end, and
 *     bitwise the same on a second GPU run (determinism);
 *   - the gradient of a forward's loss when the backward's loss_scale is not 1, and when
 *     another slot's forward ran in between (the back end's fused cross-entropy writes dlogits
 *     in the forward; the backward must not take them for another scale or batch);
 *   - 20 AdamW steps with clipping: the GPU losses track the CPU losses, and fall;
 *   - a checkpoint saved from the GPU loads on the CPU (same bytes, same loss) and back.
 *
 * Tolerances. fp32: the GPU sums in another order than the CPU; for sums of K products of O(1)
 * values the rounding is ~sqrt(K)·2^-24 relative, so a relative-norm error of 1e-5 on ops and
 * 1e-4 on the model's gradients (a few dozen ops deep) separates rounding from a wrong index or
 * a missing term, which give errors of order 1. TF32 rounds GEMM inputs to 10 mantissa bits
 * (2^-11 ≈ 5e-4 per input, ~1e-3 per product, averaging over K): 5e-3. bf16 rounds them to 8
 * bits (2^-9 ≈ 2e-3 per input): 2e-2. Training: the losses of 20 steps drift apart as the
 * weights do; fp32 within 1e-3 relative per step, bf16 within 3e-2. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "common/rng.h"
#include "common/testing.h"
#include "kernels/kernels.h"
#include "model/checkpoint.h"
#include "model/gpt.h"
#include "model/optim.h"

static const gpt_config CFG = {
    .vocab_size = 256, .max_seq = 32, .n_layer = 2, .n_head = 4, .channels = 64};
enum { B = 4, T = 32 };

static const kernels_ops *s_gpu;
static wt_rng s_rng;

/* ||got - want|| / ||want|| over n floats (host). */
static double s_rel_err(const float *got, const float *want, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    double d = (double)got[i] - want[i];
    num += d * d, den += (double)want[i] * want[i];
  }
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* The same for one tensor of a gradient: a tensor whose true gradient is zero (the key bias,
 * to which softmax is invariant) holds rounding noise on both back ends, so its error is
 * measured against `floor` (a small share of the whole gradient's norm) when that is larger. */
static double s_rel_err_floor(const float *got, const float *want, size_t n, double floor) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    double d = (double)got[i] - want[i];
    num += d * d, den += (double)want[i] * want[i];
  }
  return sqrt(num) / fmax(sqrt(den), floor);
}

static float *s_random(size_t n, float scale) {
  float *x = wt_xmalloc(n * sizeof(float));
  for (size_t i = 0; i < n; i++) x[i] = scale * (float)wt_rng_normal(&s_rng);
  return x;
}

static float *s_up(const float *host, size_t n) {
  float *d = s_gpu->alloc(n * sizeof(float));
  WT_TEST_REQUIRE(d, "device alloc of %zu floats", n);
  s_gpu->upload(d, host, n * sizeof(float));
  return d;
}

static float *s_down(const float *dev, size_t n) {
  float *h = wt_xmalloc(n * sizeof(float));
  s_gpu->download(h, dev, n * sizeof(float));
  return h;
}

static void test_memory(void) {
  size_t n = 100003;
  float *x = s_random(n, 1), *d = s_gpu->alloc(n * 4), *e = s_gpu->alloc(n * 4);
  float *z = s_down(d, n);
  int zero = 1;
  for (size_t i = 0; i < n; i++) zero &= z[i] == 0.0f;
  WT_TEST_ASSERT(zero, "alloc returns zeroed memory");
  s_gpu->upload(d, x, n * 4);
  s_gpu->copy(e, d, n * 4);
  float *y = s_down(e, n);
  WT_TEST_ASSERT(memcmp(x, y, n * 4) == 0, "upload, copy, download round trip");
  double want = kernels_cpu()->sq_norm(x, n), got = s_gpu->sq_norm(d, n);
  WT_TEST_ASSERT(fabs(got - want) <= 1e-12 * want, "sq_norm %.17g vs CPU %.17g", got, want);
  WT_TEST_ASSERT(s_gpu->sq_norm(d, n) == got, "sq_norm is deterministic");
  s_gpu->zero(e, n * 4);
  WT_TEST_ASSERT(s_gpu->sq_norm(e, n) == 0.0, "zero clears");
  WT_TEST_ASSERT(s_gpu->mem_total() > 1e8, "mem_total reports the GPU's memory");
  float *pinned = s_gpu->host_alloc(n * 4); /* page-locked staging memory */
  WT_TEST_REQUIRE(pinned, "host_alloc");
  WT_TEST_ASSERT(pinned[0] == 0.0f && pinned[n - 1] == 0.0f, "host_alloc returns zeroed memory");
  s_gpu->download(pinned, d, n * 4);
  WT_TEST_ASSERT(memcmp(pinned, x, n * 4) == 0, "download into pinned memory");
  /* Asynchronous copies: an op queued after an upload sees its data; a download queued after
   * an op sees its result once copy_wait returns. */
  float *d2 = s_gpu->alloc(n * 4), *back = s_gpu->host_alloc(n * 4);
  s_gpu->upload_async(d2, pinned, n * 4);
  WT_TEST_ASSERT(s_gpu->sq_norm(d2, n) == got, "an op after upload_async sees the data");
  s_gpu->residual_forward(d2, d2, d2, n); /* 2x, exact */
  s_gpu->download_async(back, d2, n * 4);
  s_gpu->copy_wait();
  int doubled = 1;
  for (size_t i = 0; i < n; i++) doubled &= back[i] == 2 * x[i];
  WT_TEST_ASSERT(doubled, "download_async after an op, then copy_wait, gives its result");
  s_gpu->free(d2), s_gpu->host_free(back);
  s_gpu->host_free(pinned);
  s_gpu->free(d), s_gpu->free(e);
  free(x), free(y), free(z);
}

/* matmul (both layouts, forward and backward) and attention (forward and backward) at one
 * precision, against the reference back end. */
static void test_ops_at(kernels_precision p, double tol, const char *name) {
  const kernels_ops *ref = kernels_ref();
  WT_TEST_REQUIRE(kernels_set_precision(s_gpu, p) == WT_OK, "%s", wt_last_error());
  int N = 96, C = 64, OC = 192;
  for (int layout = 0; layout < 2; layout++) {
    float *inp = s_random((size_t)N * C, 1), *w = s_random((size_t)C * OC, 0.1f);
    float *bias = s_random(OC, 1), *dout = s_random((size_t)N * OC, 1);
    float *out = wt_xcalloc((size_t)N * OC, 4), *dinp = wt_xcalloc((size_t)N * C, 4);
    float *dw = wt_xcalloc((size_t)C * OC, 4), *db = wt_xcalloc(OC, 4);
    float *d_inp = s_up(inp, (size_t)N * C), *d_w = s_up(w, (size_t)C * OC), *d_b = s_up(bias, OC);
    float *d_dout = s_up(dout, (size_t)N * OC), *d_out = s_up(out, (size_t)N * OC);
    float *d_dinp = s_up(dinp, (size_t)N * C), *d_dw = s_up(dw, (size_t)C * OC);
    float *d_db = s_up(db, OC);
    ref->matmul_forward(out, inp, w, bias, N, C, OC, (kernels_wlayout)layout);
    s_gpu->matmul_forward(d_out, d_inp, d_w, d_b, N, C, OC, (kernels_wlayout)layout);
    ref->matmul_backward(dinp, dw, db, dout, inp, w, N, C, OC, (kernels_wlayout)layout);
    s_gpu->matmul_backward(d_dinp, d_dw, d_db, d_dout, d_inp, d_w, N, C, OC,
                           (kernels_wlayout)layout);
    float *g[4] = {s_down(d_out, (size_t)N * OC), s_down(d_dinp, (size_t)N * C),
                   s_down(d_dw, (size_t)C * OC), s_down(d_db, OC)};
    const float *want[4] = {out, dinp, dw, db};
    size_t len[4] = {(size_t)N * OC, (size_t)N * C, (size_t)C * OC, OC};
    static const char *what[4] = {"out", "dinp", "dweight", "dbias"};
    for (int i = 0; i < 4; i++) {
      double e = s_rel_err(g[i], want[i], len[i]);
      /* the bias gradient is a plain fp32 sum at every precision */
      WT_TEST_ASSERT(e <= (i == 3 ? 1e-5 : tol), "%s matmul layout %d %s: rel err %.3g > %.3g",
                     name, layout, what[i], e, i == 3 ? 1e-5 : tol);
      free(g[i]);
    }
    float *hb[] = {inp, w, bias, dout, out, dinp, dw, db};
    float *dbuf[] = {d_inp, d_w, d_b, d_dout, d_out, d_dinp, d_dw, d_db};
    for (int i = 0; i < 8; i++) free(hb[i]), s_gpu->free(dbuf[i]);
  }
  int Bn = 2, Tn = 48, Cn = 64, NH = 4;
  size_t nq = (size_t)Bn * Tn * 3 * Cn, no = (size_t)Bn * Tn * Cn, na = (size_t)Bn * NH * Tn * Tn;
  float *qkv = s_random(nq, 1), *dout = s_random(no, 1);
  float *out = wt_xcalloc(no, 4), *att = wt_xcalloc(na, 4), *dqkv = s_random(nq, 1);
  float *scratch = wt_xcalloc(na, 4);
  float *d_qkv = s_up(qkv, nq), *d_dout = s_up(dout, no), *d_out = s_up(out, no);
  float *d_att = s_up(att, na), *d_dqkv = s_up(dqkv, nq), *d_scr = s_up(scratch, na);
  ref->attention_forward(out, att, qkv, Bn, Tn, Cn, NH);
  s_gpu->attention_forward(d_out, d_att, d_qkv, Bn, Tn, Cn, NH);
  ref->attention_backward(dqkv, scratch, dout, qkv, att, Bn, Tn, Cn, NH);
  s_gpu->attention_backward(d_dqkv, d_scr, d_dout, d_qkv, d_att, Bn, Tn, Cn, NH);
  float *go = s_down(d_out, no), *ga = s_down(d_att, na), *gd = s_down(d_dqkv, nq);
  int causal = 1;
  for (int bh = 0; bh < Bn * NH; bh++)
    for (int t = 0; t < Tn; t++)
      for (int t2 = t + 1; t2 < Tn; t2++) causal &= ga[((size_t)bh * Tn + t) * Tn + t2] == 0.0f;
  WT_TEST_ASSERT(causal, "%s attention: probabilities above the diagonal are 0", name);
  double e[3] = {s_rel_err(go, out, no), s_rel_err(ga, att, na), s_rel_err(gd, dqkv, nq)};
  static const char *what[3] = {"out", "att", "dqkv (accumulated)"};
  for (int i = 0; i < 3; i++)
    WT_TEST_ASSERT(e[i] <= tol, "%s attention %s: rel err %.3g > %.3g", name, what[i], e[i], tol);
  free(go), free(ga), free(gd), free(qkv), free(dout), free(out), free(att), free(dqkv),
      free(scratch);
  float *dbuf[] = {d_qkv, d_dout, d_out, d_att, d_dqkv, d_scr};
  for (int i = 0; i < 6; i++) s_gpu->free(dbuf[i]);
  WT_TEST_REQUIRE(kernels_set_precision(s_gpu, KERNELS_PREC_FP32) == WT_OK, "back to fp32");
}

static void s_batch(wt_rng *rng, int *tok, int *tgt) {
  /* A learnable rule (next = token + 1) with noise, so that training lowers the loss. */
  for (int i = 0; i < B * T; i++) {
    tok[i] = (int)wt_rng_below(rng, CFG.vocab_size);
    tgt[i] = wt_rng_below(rng, 4) ? (tok[i] + 1) % CFG.vocab_size
                                  : (int)wt_rng_below(rng, CFG.vocab_size);
  }
}

static gpt_stage *s_stage(const kernels_ops *ops) {
  gpt_stage *s = gpt_stage_new_on(&CFG, 0, CFG.n_layer, B, T, ops);
  WT_TEST_REQUIRE(s, "%s", wt_last_error());
  gpt_stage_init_weights(s, 3);
  return s;
}

static void s_fwd_bwd(gpt_stage *s, const int *tok, const int *tgt) {
  gpt_stage_zero_grad(s);
  WT_TEST_REQUIRE(gpt_stage_forward(s, tok, NULL, tgt, B, T, NULL) == WT_OK, "%s", wt_last_error());
  WT_TEST_REQUIRE(gpt_stage_backward(s, NULL, NULL, 1.0f) == WT_OK, "%s", wt_last_error());
}

static void test_model(void) {
  wt_rng rng;
  wt_rng_seed(&rng, 21);
  int tok[B * T], tgt[B * T];
  s_batch(&rng, tok, tgt);
  gpt_stage *c = s_stage(kernels_cpu()), *g = s_stage(s_gpu), *g2 = s_stage(s_gpu);
  s_fwd_bwd(c, tok, tgt), s_fwd_bwd(g, tok, tgt), s_fwd_bwd(g2, tok, tgt);
  size_t nl = (size_t)B * T * CFG.vocab_size;
  double el = s_rel_err(gpt_stage_logits(g), gpt_stage_logits(c), nl);
  WT_TEST_ASSERT(el <= 1e-5, "logits: rel err %.3g", el);
  WT_TEST_CLOSE(gpt_stage_loss(g), gpt_stage_loss(c), 0, 1e-5, "loss");
  size_t n;
  const float *gc = gpt_stage_grads_host(c, &n);
  float *gg = wt_xmalloc(n * 4);
  memcpy(gg, gpt_stage_grads_host(g, NULL), n * 4);
  double floor = 1e-3 * sqrt(optim_grad_sq_norm(gc, n));
  for (int i = 0; i < gpt_stage_num_tensors(c); i++) {
    const gpt_tensor_info *t = gpt_stage_tensor(c, i);
    double e = s_rel_err_floor(gg + t->offset, gc + t->offset, t->numel, floor);
    WT_TEST_ASSERT(e <= 1e-4, "gradient %s: rel err %.3g", t->name, e);
  }
  WT_TEST_ASSERT(memcmp(gg, gpt_stage_grads_host(g2, NULL), n * 4) == 0,
                 "two GPU runs give bitwise the same gradients");
  double sq_c = optim_grad_sq_norm(gc, n);
  double sq_g = optim_grad_sq_norm_on(s_gpu, gpt_stage_grads(g, NULL), n);
  WT_TEST_CLOSE(sq_g, sq_c, 0, 1e-4, "global gradient norm^2");
  /* bf16: the same model within the bf16 tolerance. */
  WT_TEST_REQUIRE(kernels_set_precision(s_gpu, KERNELS_PREC_BF16) == WT_OK, "bf16");
  s_fwd_bwd(g2, tok, tgt);
  el = s_rel_err(gpt_stage_logits(g2), gpt_stage_logits(c), nl);
  WT_TEST_ASSERT(el <= 2e-2, "bf16 logits: rel err %.3g", el);
  WT_TEST_CLOSE(gpt_stage_loss(g2), gpt_stage_loss(c), 0, 2e-2, "bf16 loss");
  WT_TEST_REQUIRE(kernels_set_precision(s_gpu, KERNELS_PREC_FP32) == WT_OK, "fp32");
  free(gg);
  gpt_stage_destroy(&c), gpt_stage_destroy(&g), gpt_stage_destroy(&g2);
}

/* Gradients of the GPU stage against the CPU stage's, per tensor (relative-norm error). */
static void s_check_grads(gpt_stage *g, gpt_stage *c, double tol, const char *what) {
  size_t n;
  const float *gc = gpt_stage_grads_host(c, &n);
  float *gg = wt_xmalloc(n * 4);
  memcpy(gg, gpt_stage_grads_host(g, NULL), n * 4);
  double floor = 1e-3 * sqrt(optim_grad_sq_norm(gc, n));
  for (int i = 0; i < gpt_stage_num_tensors(c); i++) {
    const gpt_tensor_info *t = gpt_stage_tensor(c, i);
    double e = s_rel_err_floor(gg + t->offset, gc + t->offset, t->numel, floor);
    WT_TEST_ASSERT(e <= tol, "%s: gradient %s: rel err %.3g", what, t->name, e);
  }
  free(gg);
}

static void test_loss_scale_and_slots(void) {
  wt_rng rng;
  wt_rng_seed(&rng, 23);
  int tok[2][B * T], tgt[2][B * T];
  s_batch(&rng, tok[0], tgt[0]);
  s_batch(&rng, tok[1], tgt[1]);
  gpt_stage *c = s_stage(kernels_cpu()), *g = s_stage(s_gpu);
  /* loss_scale 0.25 on a new stage: the forward's dlogits (made for 1) must not be used */
  gpt_stage *both[2] = {c, g};
  for (int i = 0; i < 2; i++) {
    gpt_stage_zero_grad(both[i]);
    WT_TEST_REQUIRE(gpt_stage_forward(both[i], tok[0], NULL, tgt[0], B, T, NULL) == WT_OK, "%s",
                    wt_last_error());
    WT_TEST_REQUIRE(gpt_stage_backward(both[i], NULL, NULL, 0.25f) == WT_OK, "%s", wt_last_error());
  }
  s_check_grads(g, c, 1e-4, "loss_scale 0.25");
  /* slot 0 forward on batch 0, slot 1 forward on batch 1, then slot 0's backward */
  WT_TEST_REQUIRE(gpt_stage_set_slots(g, 2) == WT_OK, "%s", wt_last_error());
  gpt_stage_zero_grad(g);
  for (int k = 0; k < 2; k++) {
    WT_TEST_REQUIRE(gpt_stage_use_slot(g, k) == WT_OK, "%s", wt_last_error());
    WT_TEST_REQUIRE(gpt_stage_forward(g, tok[k], NULL, tgt[k], B, T, NULL) == WT_OK, "%s",
                    wt_last_error());
  }
  WT_TEST_REQUIRE(gpt_stage_use_slot(g, 0) == WT_OK, "%s", wt_last_error());
  WT_TEST_REQUIRE(gpt_stage_backward(g, NULL, NULL, 1.0f) == WT_OK, "%s", wt_last_error());
  s_fwd_bwd(c, tok[0], tgt[0]);
  s_check_grads(g, c, 1e-4, "slot 0's backward after slot 1's forward");
  gpt_stage_destroy(&c), gpt_stage_destroy(&g);
}

/* 20 steps on the CPU and on the GPU at precision p; returns the GPU stage and optimizer for
 * the checkpoint test when keep is set. */
static void s_train(kernels_precision p, double tol, const char *name, gpt_stage **keep_s,
                    optim **keep_o) {
  WT_TEST_REQUIRE(kernels_set_precision(s_gpu, p) == WT_OK, "%s", wt_last_error());
  optim_config oc = optim_config_default();
  oc.lr = 3e-3f, oc.grad_clip = 1.0f;
  gpt_stage *st[2] = {s_stage(kernels_cpu()), s_stage(s_gpu)};
  optim *op[2];
  for (int i = 0; i < 2; i++) {
    op[i] = optim_new_on(&oc, gpt_stage_tensor(st[i], 0), gpt_stage_num_tensors(st[i]),
                         gpt_stage_kernels(st[i]));
    WT_TEST_REQUIRE(op[i], "%s", wt_last_error());
  }
  wt_rng rng;
  wt_rng_seed(&rng, 99);
  int tok[B * T], tgt[B * T];
  float first = 0, last = 0;
  for (int step = 0; step < 20; step++) {
    s_batch(&rng, tok, tgt);
    float loss[2];
    for (int i = 0; i < 2; i++) {
      s_fwd_bwd(st[i], tok, tgt);
      loss[i] = gpt_stage_loss(st[i]);
      size_t n;
      float *pp = gpt_stage_params(st[i], &n), *gg = gpt_stage_grads(st[i], NULL);
      double sq = optim_grad_sq_norm_on(gpt_stage_kernels(st[i]), gg, n);
      WT_TEST_REQUIRE(
          optim_step(op[i], pp, gg, optim_lr_at(&oc, step), optim_clip_scale(&oc, sq)) == WT_OK,
          "step");
    }
    WT_TEST_ASSERT(fabs(loss[1] - loss[0]) <= tol * loss[0], "%s step %d: GPU loss %.6f, CPU %.6f",
                   name, step + 1, loss[1], loss[0]);
    if (step == 0) first = loss[1];
    last = loss[1];
  }
  WT_TEST_ASSERT(last < first - 0.3f, "%s: GPU training lowers the loss (%.4f -> %.4f)", name,
                 first, last);
  gpt_stage_destroy(&st[0]), optim_destroy(&op[0]);
  if (keep_s) {
    *keep_s = st[1], *keep_o = op[1];
  } else {
    gpt_stage_destroy(&st[1]), optim_destroy(&op[1]);
  }
  WT_TEST_REQUIRE(kernels_set_precision(s_gpu, KERNELS_PREC_FP32) == WT_OK, "fp32");
}

static void test_train_and_checkpoint(void) {
  gpt_stage *g = NULL;
  optim *og = NULL;
  s_train(KERNELS_PREC_FP32, 1e-3, "fp32", &g, &og);
  s_train(KERNELS_PREC_BF16, 3e-2, "bf16", NULL, NULL);
  char dir[512];
  wt_test_tmpdir(dir, sizeof dir);
  checkpoint_meta m = {.step = 20, .tokenizer = DATA_TOKENIZER_BYTES};
  data_position_init(&m.data_pos, 1);
  WT_TEST_REQUIRE(checkpoint_save(dir, g, og, &m, 1) == WT_OK, "%s", wt_last_error());
  optim_config oc = optim_config_default();
  oc.lr = 3e-3f;
  gpt_stage *c = s_stage(kernels_cpu());
  optim *oc_ = optim_new(&oc, gpt_stage_tensor(c, 0), gpt_stage_num_tensors(c));
  checkpoint_meta got;
  WT_TEST_REQUIRE(checkpoint_load(dir, c, oc_, &got) == WT_OK, "%s", wt_last_error());
  size_t n;
  const float *pc = gpt_stage_params_host(c, &n);
  WT_TEST_ASSERT(memcmp(pc, gpt_stage_params_host(g, NULL), n * 4) == 0,
                 "weights saved on the GPU load on the CPU unchanged");
  WT_TEST_ASSERT(optim_step_count(oc_) == 20, "optimizer step count %ld", optim_step_count(oc_));
  wt_rng rng;
  wt_rng_seed(&rng, 5);
  int tok[B * T], tgt[B * T];
  s_batch(&rng, tok, tgt);
  s_fwd_bwd(c, tok, tgt), s_fwd_bwd(g, tok, tgt);
  WT_TEST_CLOSE(gpt_stage_loss(c), gpt_stage_loss(g), 0, 1e-5, "loss of the loaded model");
  gpt_stage *g2 = s_stage(s_gpu);
  WT_TEST_REQUIRE(checkpoint_load(dir, g2, NULL, &got) == WT_OK, "%s", wt_last_error());
  WT_TEST_ASSERT(memcmp(gpt_stage_params_host(g2, NULL), pc, n * 4) == 0, "and back onto the GPU");
  char rm[600];
  snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
  if (system(rm) != 0) fprintf(stderr, "could not remove %s\n", dir);
  gpt_stage_destroy(&g), gpt_stage_destroy(&g2), gpt_stage_destroy(&c);
  optim_destroy(&og), optim_destroy(&oc_);
}

int main(void) {
  if (kernels_for_device("cuda:0", &s_gpu) != WT_OK) {
    printf("test_gpu_model: skipped: %s\n", wt_last_error());
    return WT_TEST_SKIP;
  }
  wt_rng_seed(&s_rng, 1234);
  test_memory();
  test_ops_at(KERNELS_PREC_FP32, 1e-5, "fp32");
  test_ops_at(KERNELS_PREC_TF32, 5e-3, "tf32");
  test_ops_at(KERNELS_PREC_BF16, 2e-2, "bf16");
  test_model();
  test_loss_scale_and_slots();
  test_train_and_checkpoint();
  return wt_test_finish("test_gpu_model");
}
