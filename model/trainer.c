/* trainer — one optimizer step over a global batch with gradient accumulation, validation loss,
 * and checkpoint save/resume of the whole training state. */
#include "model/trainer.h"

#include "common/common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct trainer {
  trainer_config cfg;
  const data_set *data;
  gpt_stage *model;
  optim *opt;
  data_position pos;
  long step;
  int *inputs, *targets; /* (B, T) global batch */
};

static int s_validate(const trainer_config *c, const data_set *data) {
  WT_CHECK(gpt_config_validate(&c->model));
  if (c->batch < 1 || c->micro_batches < 1 || c->batch % c->micro_batches != 0)
    return wt_fail(WT_EINVAL, "--batch %d must be a positive multiple of --micro-batches %d",
                   c->batch, c->micro_batches);
  if (c->model.vocab_size != data_set_vocab_size(data))
    return wt_fail(WT_EMISMATCH, "the model's vocabulary (%d) differs from the data's (%d)",
                   c->model.vocab_size, data_set_vocab_size(data));
  if (c->val_batches < 1) return wt_fail(WT_EINVAL, "val_batches must be >= 1");
  WT_CHECK(optim_config_validate(&c->optim));
  return data_set_check_seq(data, c->model.max_seq);
}

trainer *trainer_new(const trainer_config *cfg, const data_set *data) {
  if (s_validate(cfg, data) != WT_OK) return NULL;
  trainer *t = wt_xcalloc(1, sizeof *t);
  t->cfg = *cfg;
  t->cfg.optim.total_steps = cfg->steps;
  t->data = data;
  const int mb = cfg->batch / cfg->micro_batches, T = cfg->model.max_seq;
  t->model = gpt_stage_new(&cfg->model, 0, cfg->model.n_layer, mb, T);
  if (t->model) {
    gpt_stage_init_weights(t->model, cfg->seed);
    t->opt =
        optim_new(&t->cfg.optim, gpt_stage_tensor(t->model, 0), gpt_stage_num_tensors(t->model));
  }
  if (!t->model || !t->opt) {
    trainer_destroy(&t);
    return NULL;
  }
  data_position_init(&t->pos, cfg->seed);
  t->inputs = wt_xmalloc((size_t)cfg->batch * T * sizeof(int));
  t->targets = wt_xmalloc((size_t)cfg->batch * T * sizeof(int));
  return t;
}

void trainer_destroy(trainer **self_p) {
  if (!self_p || !*self_p) return;
  trainer *t = *self_p;
  gpt_stage_destroy(&t->model);
  optim_destroy(&t->opt);
  free(t->inputs);
  free(t->targets);
  free(t);
  *self_p = NULL;
}

/* Forward + backward of every micro-batch; returns the mean loss through *loss. */
static int s_accumulate(trainer *t, float *loss) {
  const int m = t->cfg.micro_batches, mb = t->cfg.batch / m, T = t->cfg.model.max_seq;
  double sum = 0;
  gpt_stage_zero_grad(t->model);
  for (int i = 0; i < m; i++) {
    size_t off = (size_t)i * mb * T;
    WT_CHECK(gpt_stage_forward(t->model, t->inputs + off, NULL, t->targets + off, mb, T, NULL));
    sum += gpt_stage_loss(t->model);
    WT_CHECK(gpt_stage_backward(t->model, NULL, NULL, 1.0f / (float)m));
  }
  *loss = (float)(sum / m);
  return WT_OK;
}

int trainer_step(trainer *t, trainer_step_info *info) {
  double t0 = wt_now_s();
  data_position saved = t->pos;
  data_set_next_batch(t->data, &t->pos, t->cfg.batch, t->cfg.model.max_seq, t->inputs, t->targets);
  float loss = 0;
  int rc = s_accumulate(t, &loss);
  size_t n;
  float *params = gpt_stage_params(t->model, &n), *grads = gpt_stage_grads(t->model, &n);
  double sq = rc == WT_OK ? optim_grad_sq_norm(grads, n) : 0;
  if (rc == WT_OK && (!isfinite(loss) || !isfinite(sq)))
    rc = wt_fail(WT_EINVAL,
                 "step %ld: the loss (%g) or gradient norm (%g) is not finite; training "
                 "diverged — lower --lr or raise --warmup",
                 t->step + 1, loss, sqrt(sq));
  float lr = optim_lr_at(&t->cfg.optim, optim_step_count(t->opt));
  if (rc == WT_OK) rc = optim_step(t->opt, params, grads, lr, optim_clip_scale(&t->cfg.optim, sq));
  if (rc != WT_OK) {
    t->pos = saved; /* the step did not happen */
    return rc;
  }
  t->step++;
  if (info)
    *info = (trainer_step_info){.step = t->step,
                                .loss = loss,
                                .lr = lr,
                                .grad_norm = (float)sqrt(sq),
                                .seconds = wt_now_s() - t0};
  return WT_OK;
}

int trainer_val_loss(trainer *t, float *loss) {
  const int mb = t->cfg.batch / t->cfg.micro_batches, T = t->cfg.model.max_seq;
  size_t windows = data_set_num_val_windows(t->data, T);
  int nb = (int)WT_MIN((size_t)t->cfg.val_batches, (windows + (size_t)mb - 1) / (size_t)mb);
  int b = (int)WT_MIN((size_t)mb, windows);
  double sum = 0;
  for (int i = 0; i < nb; i++) {
    data_set_val_batch(t->data, (size_t)i * b, b, T, t->inputs, t->targets);
    WT_CHECK(gpt_stage_forward(t->model, t->inputs, NULL, t->targets, b, T, NULL));
    sum += gpt_stage_loss(t->model);
  }
  *loss = (float)(sum / nb);
  return WT_OK;
}

long trainer_steps_done(const trainer *t) {
  return t->step;
}
gpt_stage *trainer_model(trainer *t) {
  return t->model;
}
const trainer_config *trainer_get_config(const trainer *t) {
  return &t->cfg;
}

int trainer_save(trainer *t, const char *dir, int keep, const char *train_json) {
  checkpoint_meta m = {
      .step = t->step, .data_pos = t->pos, .tokenizer = data_set_tokenizer(t->data)};
  if (train_json) snprintf(m.train_json, sizeof m.train_json, "%s", train_json);
  return checkpoint_save(dir, t->model, t->opt, &m, keep);
}

int trainer_resume(trainer *t, const char *path) {
  checkpoint_meta m;
  WT_CHECK(checkpoint_load(path, t->model, t->opt, &m));
  t->step = m.step;
  t->pos = m.data_pos;
  return WT_OK;
}

double trainer_flops_per_step(const gpt_config *c, int B, int T) {
  /* 6 FLOPs per weight per token (2 forward, 4 backward) for every matmul weight including the
   * LM head, plus attention's QK^T and AV: 2·2·T·C per token per layer forward, ×3 with backward
   * (causal masking is not discounted, as in the PaLM/nanoGPT MFU convention). */
  double C = c->channels, L = c->n_layer, V = c->vocab_size;
  double matmul_weights = L * 12 * C * C + V * C;
  double tokens = (double)B * T;
  return 6 * matmul_weights * tokens + 3 * L * 4 * T * C * tokens;
}
