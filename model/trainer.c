/* trainer — one optimizer step over a global batch with gradient accumulation, in pieces a
 * distributed step replaces through hooks; validation loss; checkpoint save/resume. */
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
  trainer_hooks hooks;
};

static int s_replicas(const trainer_config *c) {
  return c->replicas > 0 ? c->replicas : 1;
}

static int s_whole(const trainer_config *c) {
  return c->first_layer == 0 && (c->last_layer == 0 || c->last_layer == c->model.n_layer);
}

static int s_validate(const trainer_config *c, const data_set *data) {
  WT_CHECK(gpt_config_validate(&c->model));
  if (c->replicas < 0 || c->replica < 0 || c->replica >= s_replicas(c))
    return wt_fail(WT_EINVAL, "replica %d is not one of %d replicas", c->replica, s_replicas(c));
  if (c->batch < 1 || c->micro_batches < 1 || c->batch % c->micro_batches != 0)
    return wt_fail(WT_EINVAL, "--batch %d must be a positive multiple of --micro-batches %d",
                   c->batch, c->micro_batches);
  if (c->batch % (s_replicas(c) * c->micro_batches) != 0)
    return wt_fail(WT_EINVAL,
                   "--batch %d must be a multiple of --replicas %d times --micro-batches %d",
                   c->batch, s_replicas(c), c->micro_batches);
  if (!s_whole(c) &&
      (c->first_layer < 0 || c->last_layer > c->model.n_layer || c->first_layer >= c->last_layer))
    return wt_fail(WT_EINVAL, "stage layers [%d, %d) are not a non-empty part of [0, %d)",
                   c->first_layer, c->last_layer, c->model.n_layer);
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
  const int mb = trainer_micro_rows(t), T = cfg->model.max_seq;
  int first = s_whole(cfg) ? 0 : cfg->first_layer;
  int last = s_whole(cfg) ? cfg->model.n_layer : cfg->last_layer;
  const kernels_ops *ops = cfg->kernels ? cfg->kernels : kernels_cpu();
  t->model = gpt_stage_new_on(&cfg->model, first, last, mb, T, ops);
  if (t->model) {
    gpt_stage_init_weights(t->model, cfg->seed);
    if (!cfg->external_optimizer)
      t->opt = optim_new_on(&t->cfg.optim, gpt_stage_tensor(t->model, 0),
                            gpt_stage_num_tensors(t->model), ops);
  }
  if (!t->model || (!t->opt && !cfg->external_optimizer)) {
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

int trainer_micro_grads(gpt_stage *s, const int *tokens, const int *targets, int B, int T,
                        float loss_scale, float *loss) {
  WT_CHECK(gpt_stage_forward(s, tokens, NULL, targets, B, T, NULL));
  *loss = gpt_stage_loss(s);
  return gpt_stage_backward(s, NULL, NULL, loss_scale);
}

/* The local grads hook: forward + backward of every micro-batch of this replica's rows; returns
 * the mean loss through *loss. */
static int s_accumulate(trainer *t, const int *inputs, const int *targets, float *loss) {
  const int m = t->cfg.micro_batches, mb = trainer_micro_rows(t), T = t->cfg.model.max_seq;
  double sum = 0;
  for (int i = 0; i < m; i++) {
    size_t off = (size_t)i * mb * T;
    float l;
    WT_CHECK(
        trainer_micro_grads(t->model, inputs + off, targets + off, mb, T, 1.0f / (float)m, &l));
    sum += l;
  }
  *loss = (float)(sum / m);
  return WT_OK;
}

double trainer_grad_sq_norm_range(gpt_stage *s, size_t lo, size_t hi) {
  size_t n, tied_n;
  const float *g = gpt_stage_grads(s, &n);
  hi = WT_MIN(hi, n);
  if (lo >= hi) return 0;
  const float *tied = gpt_stage_tied_grad(s, &tied_n);
  const kernels_ops *k = gpt_stage_kernels(s);
  if (gpt_stage_first(s) == 0 || !tied) return optim_grad_sq_norm_on(k, g + lo, hi - lo);
  /* The last stage's wte copy is counted by the first stage. */
  size_t wlo = (size_t)(tied - g), whi = wlo + tied_n;
  double sq = 0;
  if (lo < wlo) sq += optim_grad_sq_norm_on(k, g + lo, WT_MIN(hi, wlo) - lo);
  if (hi > whi) sq += optim_grad_sq_norm_on(k, g + WT_MAX(lo, whi), hi - WT_MAX(lo, whi));
  return sq;
}

double trainer_grad_sq_norm(gpt_stage *s) {
  size_t n;
  gpt_stage_grads(s, &n);
  return trainer_grad_sq_norm_range(s, 0, n);
}

static int s_check_finite(long step, double sq, float loss) {
  if (isfinite(loss) && isfinite(sq)) return WT_OK;
  return wt_fail(WT_EINVAL,
                 "step %ld: the loss (%g) or gradient norm (%g) is not finite; training "
                 "diverged — lower --lr or raise --warmup",
                 step + 1, loss, sqrt(sq));
}

int trainer_apply(optim *opt, float *params, const float *grads, long step, double sq, float loss,
                  float *lr) {
  WT_CHECK(s_check_finite(step, sq, loss));
  const optim_config *c = optim_get_config(opt);
  float rate = optim_lr_at(c, step);
  if (lr) *lr = rate;
  return optim_step(opt, params, grads, rate, optim_clip_scale(c, sq));
}

void trainer_set_hooks(trainer *t, const trainer_hooks *hooks) {
  if (hooks)
    t->hooks = *hooks;
  else
    memset(&t->hooks, 0, sizeof t->hooks);
}

/* Gradients, sync, norm and update of one step on the drawn batch. */
static int s_step(trainer *t, float *loss, double *sq, float *lr) {
  const trainer_hooks *h = &t->hooks;
  const int rows = t->cfg.batch / s_replicas(&t->cfg), T = t->cfg.model.max_seq;
  const size_t off = (size_t)t->cfg.replica * rows * T;
  if (!h->grads && gpt_stage_first(t->model) != 0)
    return wt_fail(WT_EINVAL, "trainer: a partial stage needs a grads hook (a pipeline)");
  if (!h->update && !t->opt)
    return wt_fail(WT_EINVAL, "trainer: external_optimizer needs an update hook");
  gpt_stage_zero_grad(t->model);
  float local = 0;
  if (h->grads)
    WT_CHECK(h->grads(h->ctx, t, t->inputs + off, t->targets + off, rows, &local));
  else
    WT_CHECK(s_accumulate(t, t->inputs + off, t->targets + off, &local));
  if (h->sync) WT_CHECK(h->sync(h->ctx, t));
  if (h->norm)
    WT_CHECK(h->norm(h->ctx, t, local, sq, loss));
  else
    *sq = trainer_grad_sq_norm(t->model), *loss = local;
  size_t n;
  float *params = gpt_stage_params(t->model, &n), *grads = gpt_stage_grads(t->model, &n);
  if (!h->update) return trainer_apply(t->opt, params, grads, t->step, *sq, *loss, lr);
  WT_CHECK(s_check_finite(t->step, *sq, *loss));
  *lr = optim_lr_at(&t->cfg.optim, t->step);
  return h->update(h->ctx, t, *lr, optim_clip_scale(&t->cfg.optim, *sq));
}

int trainer_step(trainer *t, trainer_step_info *info) {
  double t0 = wt_now_s();
  data_position saved = t->pos;
  data_set_next_batch(t->data, &t->pos, t->cfg.batch, t->cfg.model.max_seq, t->inputs, t->targets);
  float loss = 0, lr = 0;
  double sq = 0;
  int rc = s_step(t, &loss, &sq, &lr);
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
  if (!s_whole(&t->cfg))
    return wt_fail(WT_EINVAL, "trainer_val_loss needs the whole model, not one stage");
  const int mb = trainer_micro_rows(t), T = t->cfg.model.max_seq;
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
optim *trainer_optim(trainer *t) {
  return t->opt;
}
void trainer_batch(const trainer *t, const int **inputs, const int **targets) {
  *inputs = t->inputs, *targets = t->targets;
}

const data_set *trainer_data(const trainer *t) {
  return t->data;
}
const trainer_config *trainer_get_config(const trainer *t) {
  return &t->cfg;
}
int trainer_micro_rows(const trainer *t) {
  return t->cfg.batch / (s_replicas(&t->cfg) * t->cfg.micro_batches);
}

int trainer_save(trainer *t, const char *dir, int keep, const char *train_json) {
  checkpoint_meta m = {
      .step = t->step, .data_pos = t->pos, .tokenizer = data_set_tokenizer(t->data)};
  if (train_json) snprintf(m.train_json, sizeof m.train_json, "%s", train_json);
  return checkpoint_save(dir, t->model, t->opt, &m, keep);
}

data_position trainer_data_position(const trainer *t) {
  return t->pos;
}

void trainer_set_progress(trainer *t, long step, const data_position *pos) {
  t->step = step;
  t->pos = *pos;
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
  for (int l = 0; l < c->n_layer; l++) /* an MoE block: k experts' MLPs per token and the router */
    if (gpt_config_is_moe(c, l))
      matmul_weights += (c->moe_top_k - 1) * 8 * C * C + C * c->moe_experts;
  double tokens = (double)B * T;
  return 6 * matmul_weights * tokens + 3 * L * 4 * T * C * tokens;
}
