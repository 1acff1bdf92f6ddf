/* test_gpt_device — the device code paths of a stage, its optimizer and checkpoints, run on
 * this machine through an emulated device: the CPU ops table with device = 1 and counting
 * memory entries. A stage on a device table copies tokens, targets and activations in and out,
 * sums the tied wte gradient densely, gathers checkpoints to the host and loads them back
 * through uploads; with the CPU ops doing the arithmetic, every number must equal, bit for bit,
 * the same model on the plain CPU table. Checked:
 *   - logits, loss and every gradient of a whole model over two accumulated micro-batches;
 *   - a model split in two stages joined by gpt_tied_grads_sum (the device path), gradients
 *     equal to the whole host model's;
 *   - three AdamW steps with global-norm clipping (optim_new_on, optim_grad_sq_norm_on);
 *   - a checkpoint saved from the device loads on the host and back, weights and optimizer
 *     state unchanged;
 *   - every buffer allocated through the table is freed through it; bytes cross between host
 *     and device only by upload/download;
 *   - the trainer: the same losses and norms step for step, and a run saved on the device
 *     resumes on the CPU where it stopped;
 *   - gpt_stage_set_kernels refuses a table with other memory; SGD is refused on a device.
 * All of it twice: on the plain table, then with the optional fused ops a GPU back end has
 * (emulated from the CPU ops, so the bits stay the same), which checks the model's use of
 * them: every kept bf16 copy a backward reads is the rounding of that backward's input, and
 * the forward's dlogits are used by a backward with loss_scale 1 only.
 */
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "common/rng.h"
#include "common/testing.h"
#include "kernels/kernels.h"
#include "model/checkpoint.h"
#include "model/gpt.h"
#include "model/optim.h"
#include "model/trainer.h"

static const gpt_config CFG = {
    .vocab_size = 256, .max_seq = 8, .n_layer = 2, .n_head = 2, .channels = 16};
enum { B = 3, T = 7 };

static long s_live, s_uploads, s_downloads;

static void *s_dev_alloc(size_t bytes) {
  void *p = kernels_cpu()->alloc(bytes);
  if (p) s_live++;
  return p;
}
static void s_dev_free(void *p) {
  if (p) s_live--;
  kernels_cpu()->free(p);
}
static void s_dev_upload(void *dst, const void *src, size_t bytes) {
  s_uploads++;
  kernels_cpu()->upload(dst, src, bytes);
}
static void s_dev_download(void *dst, const void *src, size_t bytes) {
  s_downloads++;
  kernels_cpu()->download(dst, src, bytes);
}

static kernels_ops s_dev;

/* ---- the fused ops, emulated ---- */

static long s_kept_reads, s_kept_head_reads, s_kept_stale, s_ce_fused, s_ce_backward, s_adamw_tensors;

static uint16_t s_bf16_bits(float x) { /* round to nearest even, as the GPU does */
  uint32_t u;
  memcpy(&u, &x, 4);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static void s_keep(void *inp_bf16, const float *inp, size_t n) {
  uint16_t *y = inp_bf16;
  for (size_t i = 0; i < n; i++) y[i] = s_bf16_bits(inp[i]);
}

static void s_emu_matmul_forward_keep(float *out, void *inp_bf16, const float *inp, const float *w,
                                      const float *b, int N, int C, int OC,
                                      kernels_wlayout layout) {
  s_keep(inp_bf16, inp, (size_t)N * C);
  kernels_cpu()->matmul_forward(out, inp, w, b, N, C, OC, layout);
}

static void s_emu_matmul_backward_kept(float *dinp, float *dw, float *db, const float *dout,
                                       const float *inp, const void *inp_bf16, const float *w,
                                       int N, int C, int OC, kernels_wlayout layout) {
  const uint16_t *kept = inp_bf16;
  s_kept_reads++;
  if (layout == KERNELS_W_OUT_IN) s_kept_head_reads++; /* the LM head: wte is (V, C) */
  for (size_t i = 0; i < (size_t)N * C; i++)
    if (kept[i] != s_bf16_bits(inp[i])) {
      s_kept_stale++;
      break;
    }
  kernels_cpu()->matmul_backward(dinp, dw, db, dout, inp, w, N, C, OC, layout);
}

static void s_emu_matmul_gelu_forward(float *out, float *pre, void *inp_bf16, const float *inp,
                                      const float *w, const float *b, int N, int C, int OC,
                                      kernels_wlayout layout) {
  if (inp_bf16) s_keep(inp_bf16, inp, (size_t)N * C);
  kernels_cpu()->matmul_forward(pre, inp, w, b, N, C, OC, layout);
  kernels_cpu()->gelu_forward(out, pre, (size_t)N * OC);
}

static void s_emu_crossentropy_forward_backward(float *losses, float *lse, float *dlogits,
                                                const float *logits, const int *targets,
                                                float dloss, int N, int V) {
  s_ce_fused++;
  kernels_cpu()->crossentropy_forward(losses, lse, logits, targets, N, V);
  kernels_cpu()->crossentropy_backward(dlogits, logits, lse, targets, dloss, N, V);
}

static void s_emu_crossentropy_backward(float *dlogits, const float *logits, const float *lse,
                                        const int *targets, float dloss, int N, int V) {
  s_ce_backward++;
  kernels_cpu()->crossentropy_backward(dlogits, logits, lse, targets, dloss, N, V);
}

static void s_emu_adamw_update_tensors(float *p, const float *g, float *m, float *v,
                                       const kernels_adamw_tensor *ts, int n, float lr, float b1,
                                       float b2, float eps, float bc1, float bc2,
                                       float grad_scale) {
  s_adamw_tensors++;
  for (int i = 0; i < n; i++) {
    size_t o = ts[i].offset;
    kernels_cpu()->adamw_update(p + o, g + o, m + o, v + o, ts[i].numel, lr, b1, b2, eps, ts[i].wd,
                                bc1, bc2, grad_scale);
  }
}

static void s_add_fused_ops(void) {
  s_dev.name = "emulated-device-fused";
  s_dev.matmul_forward_keep = s_emu_matmul_forward_keep;
  s_dev.matmul_backward_kept = s_emu_matmul_backward_kept;
  s_dev.matmul_gelu_forward = s_emu_matmul_gelu_forward;
  s_dev.crossentropy_forward_backward = s_emu_crossentropy_forward_backward;
  s_dev.crossentropy_backward = s_emu_crossentropy_backward;
  s_dev.adamw_update_tensors = s_emu_adamw_update_tensors;
}

static void s_make_device(void) {
  s_dev = *kernels_cpu();
  s_dev.name = "emulated-device";
  s_dev.device = 1;
  s_dev.alloc = s_dev_alloc;
  s_dev.free = s_dev_free;
  s_dev.upload = s_dev_upload;
  s_dev.download = s_dev_download;
}

static void s_batch(wt_rng *rng, int *tok, int *tgt) {
  for (int i = 0; i < B * T; i++)
    tok[i] = (int)wt_rng_below(rng, CFG.vocab_size),
    tgt[i] = (int)wt_rng_below(rng, CFG.vocab_size);
}

static gpt_stage *s_stage(const kernels_ops *ops, int first, int last) {
  gpt_stage *s = gpt_stage_new_on(&CFG, first, last, B, T, ops);
  WT_TEST_REQUIRE(s, "%s", wt_last_error());
  gpt_stage_init_weights(s, 42);
  return s;
}

/* Two accumulated micro-batches (loss_scale 1/2) on a whole-model stage. */
static void s_two_micro(gpt_stage *s, int seed, float *loss, float *logits) {
  wt_rng rng;
  wt_rng_seed(&rng, (uint64_t)seed);
  int tok[B * T], tgt[B * T];
  for (int m = 0; m < 2; m++) {
    s_batch(&rng, tok, tgt);
    WT_TEST_REQUIRE(gpt_stage_forward(s, tok, NULL, tgt, B, T, NULL) == WT_OK, "%s",
                    wt_last_error());
    loss[m] = gpt_stage_loss(s);
    memcpy(logits, gpt_stage_logits(s), sizeof(float) * B * T * CFG.vocab_size);
    WT_TEST_REQUIRE(gpt_stage_backward(s, NULL, NULL, 0.5f) == WT_OK, "%s", wt_last_error());
  }
}

static int s_same(const float *a, const float *b, size_t n) {
  return memcmp(a, b, n * sizeof(float)) == 0;
}

/* Parameters (grads = 0) or gradients of two stages of the same layout, bitwise, read through
 * the host copies. */
static int s_same_buf(gpt_stage *x, gpt_stage *y, int grads) {
  size_t n;
  const float *a = grads ? gpt_stage_grads_host(x, &n) : gpt_stage_params_host(x, &n);
  const float *b = grads ? gpt_stage_grads_host(y, NULL) : gpt_stage_params_host(y, NULL);
  return s_same(a, b, n);
}

static void test_whole_model(void) {
  gpt_stage *h = s_stage(kernels_cpu(), 0, CFG.n_layer), *d = s_stage(&s_dev, 0, CFG.n_layer);
  WT_TEST_ASSERT(s_same_buf(h, d, 0), "initial weights (drawn on the host, uploaded) differ");
  static float lh[2], ld[2], logh[B * T * 256], logd[B * T * 256];
  for (int step = 0; step < 2; step++) { /* the second round exercises zero_grad + restore */
    gpt_stage_zero_grad(h), gpt_stage_zero_grad(d);
    long up = s_uploads, down = s_downloads;
    s_two_micro(h, 7 + step, lh, logh);
    s_two_micro(d, 7 + step, ld, logd);
    WT_TEST_ASSERT(s_uploads > up && s_downloads > down, "tokens went up and losses came down");
    WT_TEST_ASSERT(memcmp(lh, ld, sizeof lh) == 0, "loss %.9g/%.9g vs %.9g/%.9g", lh[0], lh[1],
                   ld[0], ld[1]);
    WT_TEST_ASSERT(s_same(logh, logd, (size_t)B * T * CFG.vocab_size), "logits differ");
    WT_TEST_ASSERT(s_same_buf(h, d, 1), "gradients differ (round %d)", step);
  }
  gpt_stage_destroy(&h), gpt_stage_destroy(&d);
}

static void test_split(void) {
  wt_rng rng;
  wt_rng_seed(&rng, 11);
  int tok[B * T], tgt[B * T];
  s_batch(&rng, tok, tgt);
  gpt_stage *h = s_stage(kernels_cpu(), 0, CFG.n_layer);
  gpt_stage *a = s_stage(&s_dev, 0, 1), *b = s_stage(&s_dev, 1, CFG.n_layer);
  static float act[B * T * 16], grad[B * T * 16];
  WT_TEST_REQUIRE(gpt_stage_forward(h, tok, NULL, tgt, B, T, NULL) == WT_OK, "host forward");
  WT_TEST_REQUIRE(gpt_stage_backward(h, NULL, NULL, 1.0f) == WT_OK, "host backward");
  WT_TEST_REQUIRE(gpt_stage_forward(a, tok, NULL, NULL, B, T, act) == WT_OK, "%s", wt_last_error());
  WT_TEST_REQUIRE(gpt_stage_forward(b, NULL, act, tgt, B, T, NULL) == WT_OK, "%s", wt_last_error());
  WT_TEST_REQUIRE(gpt_stage_backward(b, NULL, grad, 1.0f) == WT_OK, "%s", wt_last_error());
  WT_TEST_REQUIRE(gpt_stage_backward(a, grad, NULL, 1.0f) == WT_OK, "%s", wt_last_error());
  WT_TEST_REQUIRE(gpt_tied_grads_sum(a, b) == WT_OK, "%s", wt_last_error());
  float lh = gpt_stage_loss(h), lb = gpt_stage_loss(b);
  WT_TEST_ASSERT(memcmp(&lh, &lb, sizeof lh) == 0, "loss %.9g vs %.9g", lh, lb);
  /* Every tensor of a and b equals the whole model's tensor of the same name. */
  gpt_stage *parts[2] = {a, b};
  const float *gh = gpt_stage_grads_host(h, NULL);
  for (int p = 0; p < 2; p++) {
    const float *gp = gpt_stage_grads_host(parts[p], NULL);
    for (int j = 0; j < gpt_stage_num_tensors(parts[p]); j++) {
      const gpt_tensor_info *u = gpt_stage_tensor(parts[p], j);
      for (int k = 0; k < gpt_stage_num_tensors(h); k++) {
        const gpt_tensor_info *t = gpt_stage_tensor(h, k);
        if (strcmp(t->name, u->name) == 0)
          WT_TEST_ASSERT(s_same(gh + t->offset, gp + u->offset, t->numel), "%s differs in stage %d",
                         t->name, p);
      }
    }
  }
  /* A host stage and a device stage cannot be joined in place. */
  gpt_stage *hb = s_stage(kernels_cpu(), 1, CFG.n_layer);
  WT_TEST_ASSERT(gpt_tied_grads_sum(a, hb) == WT_EINVAL, "mixed back ends refused");
  gpt_stage_destroy(&h), gpt_stage_destroy(&a), gpt_stage_destroy(&b), gpt_stage_destroy(&hb);
}

/* AdamW steps with clipping on both back ends; returns nothing, checks params after each. */
static void test_training_and_checkpoint(void) {
  optim_config oc = optim_config_default();
  oc.lr = 1e-2f, oc.grad_clip = 0.5f; /* clipping active: the norm path matters */
  gpt_stage *h = s_stage(kernels_cpu(), 0, CFG.n_layer), *d = s_stage(&s_dev, 0, CFG.n_layer);
  optim *oh = optim_new(&oc, gpt_stage_tensor(h, 0), gpt_stage_num_tensors(h));
  optim *od = optim_new_on(&oc, gpt_stage_tensor(d, 0), gpt_stage_num_tensors(d), &s_dev);
  WT_TEST_REQUIRE(oh && od, "%s", wt_last_error());
  WT_TEST_ASSERT(optim_kernels(od) == &s_dev, "optimizer on the device table");
  static float l[2], logits[B * T * 256];
  size_t n;
  for (int step = 0; step < 3; step++) {
    gpt_stage *st[2] = {h, d};
    optim *op[2] = {oh, od};
    for (int i = 0; i < 2; i++) {
      gpt_stage_zero_grad(st[i]);
      s_two_micro(st[i], 100 + step, l, logits);
      float *p = gpt_stage_params(st[i], &n), *g = gpt_stage_grads(st[i], NULL);
      double sq = optim_grad_sq_norm_on(gpt_stage_kernels(st[i]), g, n);
      WT_TEST_REQUIRE(optim_step(op[i], p, g, oc.lr, optim_clip_scale(&oc, sq)) == WT_OK, "step");
    }
    WT_TEST_ASSERT(s_same_buf(h, d, 0), "parameters differ after step %d", step + 1);
  }
  /* Saved from the device, loaded on the host (and back): nothing changes. */
  char dir[512];
  wt_test_tmpdir(dir, sizeof dir);
  checkpoint_meta m = {.step = 3, .tokenizer = DATA_TOKENIZER_BYTES};
  data_position_init(&m.data_pos, 1);
  WT_TEST_REQUIRE(checkpoint_save(dir, d, od, &m, 1) == WT_OK, "%s", wt_last_error());
  gpt_stage *h2 = gpt_stage_new(&CFG, 0, CFG.n_layer, B, T);
  optim *oh2 = optim_new(&oc, gpt_stage_tensor(h2, 0), gpt_stage_num_tensors(h2));
  checkpoint_meta got;
  WT_TEST_REQUIRE(checkpoint_load(dir, h2, oh2, &got) == WT_OK, "%s", wt_last_error());
  WT_TEST_ASSERT(s_same_buf(h2, h, 0), "weights saved on the device load on the host");
  for (int i = 0; i < optim_num_states(oh); i++) {
    const float *want = optim_state_host(oh, i, &n);
    WT_TEST_ASSERT(s_same(optim_state_host(oh2, i, NULL), want, n),
                   "optimizer state %d saved on the device loads on the host", i);
  }
  gpt_stage *d2 = gpt_stage_new_on(&CFG, 0, CFG.n_layer, B, T, &s_dev);
  optim *od2 = optim_new_on(&oc, gpt_stage_tensor(d2, 0), gpt_stage_num_tensors(d2), &s_dev);
  long up = s_uploads;
  WT_TEST_REQUIRE(checkpoint_load(dir, d2, od2, &got) == WT_OK, "%s", wt_last_error());
  WT_TEST_ASSERT(s_uploads >= up + 3, "weights and both moments uploaded");
  WT_TEST_ASSERT(s_same_buf(d2, h, 0), "weights load back onto the device");
  WT_TEST_ASSERT(optim_step_count(od2) == 3, "step count %ld", optim_step_count(od2));
  char rm[600];
  snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
  if (system(rm) != 0) fprintf(stderr, "could not remove %s\n", dir);
  optim_destroy(&oh), optim_destroy(&od), optim_destroy(&oh2), optim_destroy(&od2);
  gpt_stage_destroy(&h), gpt_stage_destroy(&d), gpt_stage_destroy(&h2), gpt_stage_destroy(&d2);
}

/* The trainer on the device table: the same losses as on the CPU, step for step, and a run saved
 * on the device continues on the CPU exactly as it would have gone on. */
static void test_trainer(void) {
  data_synth_config sc = data_synth_default();
  sc.n_tokens = 10000;
  data_set *d = data_set_synthetic(&sc);
  WT_TEST_REQUIRE(d, "%s", wt_last_error());
  trainer_config c = {.model = {.vocab_size = data_set_vocab_size(d),
                                .max_seq = 16,
                                .n_layer = 2,
                                .n_head = 2,
                                .channels = 16},
                      .batch = 4,
                      .micro_batches = 2,
                      .steps = 6,
                      .val_batches = 2,
                      .seed = 11};
  c.optim = optim_config_default();
  c.optim.lr = 3e-3f, c.optim.warmup_steps = 2, c.optim.grad_clip = 0.5f;
  trainer_config cd = c;
  cd.kernels = &s_dev;
  trainer *h = trainer_new(&c, d), *g = trainer_new(&cd, d);
  WT_TEST_REQUIRE(h && g, "%s", wt_last_error());
  char dir[512];
  wt_test_tmpdir(dir, sizeof dir);
  trainer *r = NULL;
  for (int i = 0; i < 6; i++) {
    trainer_step_info a, b, e;
    WT_TEST_REQUIRE(trainer_step(h, &a) == WT_OK, "%s", wt_last_error());
    WT_TEST_REQUIRE(trainer_step(g, &b) == WT_OK, "%s", wt_last_error());
    WT_TEST_ASSERT(memcmp(&a.loss, &b.loss, sizeof(float)) == 0 && a.grad_norm == b.grad_norm,
                   "step %d: loss %.9g vs %.9g, norm %.9g vs %.9g", i + 1, a.loss, b.loss,
                   a.grad_norm, b.grad_norm);
    if (r) {
      WT_TEST_REQUIRE(trainer_step(r, &e) == WT_OK, "%s", wt_last_error());
      WT_TEST_ASSERT(memcmp(&a.loss, &e.loss, sizeof(float)) == 0,
                     "resumed step %d: loss %.9g vs %.9g", i + 1, e.loss, a.loss);
    }
    if (i == 2) { /* saved on the device, resumed on the CPU */
      WT_TEST_REQUIRE(trainer_save(g, dir, 1, NULL) == WT_OK, "%s", wt_last_error());
      r = trainer_new(&c, d);
      WT_TEST_REQUIRE(r && trainer_resume(r, dir) == WT_OK, "%s", wt_last_error());
    }
  }
  float vh, vg;
  WT_TEST_REQUIRE(trainer_val_loss(h, &vh) == WT_OK && trainer_val_loss(g, &vg) == WT_OK, "val");
  WT_TEST_ASSERT(memcmp(&vh, &vg, sizeof vh) == 0, "validation loss %.9g vs %.9g", vh, vg);
  char rm[600];
  snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
  if (system(rm) != 0) fprintf(stderr, "could not remove %s\n", dir);
  trainer_destroy(&h), trainer_destroy(&g), trainer_destroy(&r);
  data_set_destroy(&d);
}

static void test_refusals(void) {
  gpt_stage *h = s_stage(kernels_cpu(), 0, CFG.n_layer);
  WT_TEST_ASSERT(gpt_stage_set_kernels(h, &s_dev) == WT_EINVAL &&
                     strstr(wt_last_error(), "gpt_stage_new_on"),
                 "a table with other memory is refused: %s", wt_last_error());
  WT_TEST_ASSERT(gpt_stage_kernels(h) == kernels_cpu(), "the stage keeps its back end");
  WT_TEST_ASSERT(gpt_stage_set_kernels(h, kernels_ref()) == WT_OK, "cpu -> ref shares memory");
  optim_config oc = optim_config_default();
  oc.kind = OPTIM_SGD;
  optim *o = optim_new_on(&oc, gpt_stage_tensor(h, 0), gpt_stage_num_tensors(h), &s_dev);
  WT_TEST_ASSERT(!o && strstr(wt_last_error(), "SGD runs on host back ends only"),
                 "SGD refused on a device: %s", wt_last_error());
  gpt_stage_destroy(&h);
}

/* With the fused ops: the forward's dlogits serve a backward with loss_scale 1 (no
 * crossentropy_backward) on a new stage, not one with 0.5 (one call), but then the next
 * forward of that stage expects 0.5 (no call); the gradients equal the host's every time. */
static void test_fused_dlogits(void) {
  wt_rng rng;
  wt_rng_seed(&rng, 5);
  int tok[B * T], tgt[B * T];
  s_batch(&rng, tok, tgt);
  const float scales[] = {1.0f, 0.5f};
  for (int i = 0; i < 2; i++) {
    gpt_stage *h = s_stage(kernels_cpu(), 0, CFG.n_layer), *d = s_stage(&s_dev, 0, CFG.n_layer);
    gpt_stage *both[2] = {h, d};
    for (int round = 0; round < 2; round++) {
      long before = s_ce_backward;
      for (int k = 0; k < 2; k++) {
        gpt_stage_zero_grad(both[k]);
        WT_TEST_REQUIRE(gpt_stage_forward(both[k], tok, NULL, tgt, B, T, NULL) == WT_OK, "%s",
                        wt_last_error());
        WT_TEST_REQUIRE(gpt_stage_backward(both[k], NULL, NULL, scales[i]) == WT_OK, "%s",
                        wt_last_error());
      }
      long want = i == 1 && round == 0 ? 1 : 0;
      WT_TEST_ASSERT(s_ce_backward - before == want,
                     "loss_scale %g, round %d: %ld crossentropy_backward calls, want %ld",
                     scales[i], round, s_ce_backward - before, want);
      WT_TEST_ASSERT(s_same_buf(h, d, 1), "loss_scale %g, round %d: gradients differ", scales[i],
                     round);
    }
    gpt_stage_destroy(&h), gpt_stage_destroy(&d);
  }
}

int main(void) {
  s_make_device();
  for (int fused = 0; fused < 2; fused++) {
    if (fused) s_add_fused_ops();
    test_whole_model();
    test_split();
    test_training_and_checkpoint();
    test_trainer();
    test_refusals();
  }
  test_fused_dlogits();
  WT_TEST_ASSERT(s_kept_reads > 0 && s_kept_stale == 0,
                 "%ld of %ld kept bf16 copies read by a backward were stale", s_kept_stale,
                 s_kept_reads);
  WT_TEST_ASSERT(s_kept_head_reads > 0, "the LM head's backward rounded its input again");
  WT_TEST_ASSERT(s_ce_fused > 0 && s_adamw_tensors > 0, "fused cross-entropy %ld, AdamW %ld calls",
                 s_ce_fused, s_adamw_tensors);
  WT_TEST_ASSERT(s_live == 0, "%ld device buffers not freed", s_live);
  return wt_test_finish("test_gpt_device");
}
