/* optim — AdamW / SGD with momentum on flat buffers, clipping and the learning-rate schedule.
 * The update loops run per tensor so each tensor's weight_decay flag applies; the math lives in
 * the kernels back end's adamw_update (so a GPU back end can run the same optimizer). */
#include "model/optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "kernels/kernels.h"

struct optim {
  optim_config cfg;
  gpt_tensor_info *tensors; /* copy: offsets, sizes and decay flags */
  int n_tensors;
  size_t n;               /* elements in the flat buffer */
  float *m;               /* AdamW first moment, or SGD momentum buffer (n) */
  float *v;               /* AdamW second moment (n); NULL for SGD */
  long step;              /* updates taken */
  const kernels_ops *ops; /* where m and v live and the update runs */
  float *host[2]; /* host copies of m and v for checkpoints (device back ends only; pinned) */
};

optim_config optim_config_default(void) {
  optim_config c = {.kind = OPTIM_ADAMW,
                    .lr = 3e-4f,
                    .min_lr = 0.0f,
                    .warmup_steps = 0,
                    .total_steps = 0,
                    .weight_decay = 0.1f,
                    .beta1 = 0.9f,
                    .beta2 = 0.95f,
                    .eps = 1e-8f,
                    .momentum = 0.9f,
                    .grad_clip = 1.0f};
  return c;
}

int optim_config_validate(const optim_config *c) {
  if (c->kind != OPTIM_ADAMW && c->kind != OPTIM_SGD)
    return wt_fail(WT_EINVAL, "optimizer kind %d is unknown; use adamw or sgd", (int)c->kind);
  if (!(c->lr >= 0) || !isfinite(c->lr))
    return wt_fail(WT_EINVAL, "learning rate %g must be finite and >= 0", c->lr);
  if (!(c->min_lr >= 0) || c->min_lr > c->lr)
    return wt_fail(WT_EINVAL, "min_lr %g must be in [0, lr=%g]", c->min_lr, c->lr);
  if (c->warmup_steps < 0 || c->total_steps < 0)
    return wt_fail(WT_EINVAL, "warmup_steps %d and total_steps %ld must be >= 0", c->warmup_steps,
                   c->total_steps);
  if (!(c->weight_decay >= 0) || !isfinite(c->weight_decay))
    return wt_fail(WT_EINVAL, "weight_decay %g must be finite and >= 0", c->weight_decay);
  if (!(c->beta1 >= 0 && c->beta1 < 1) || !(c->beta2 >= 0 && c->beta2 < 1))
    return wt_fail(WT_EINVAL, "AdamW betas (%g, %g) must be in [0, 1)", c->beta1, c->beta2);
  if (!(c->eps > 0)) return wt_fail(WT_EINVAL, "AdamW eps %g must be > 0", c->eps);
  if (!(c->momentum >= 0 && c->momentum < 1))
    return wt_fail(WT_EINVAL, "SGD momentum %g must be in [0, 1)", c->momentum);
  if (!(c->grad_clip >= 0) || !isfinite(c->grad_clip))
    return wt_fail(WT_EINVAL, "grad_clip %g must be finite and >= 0 (0 = off)", c->grad_clip);
  return WT_OK;
}

optim *optim_new(const optim_config *cfg, const gpt_tensor_info *tensors, int n_tensors) {
  return optim_new_on(cfg, tensors, n_tensors, kernels_cpu());
}

optim *optim_new_on(const optim_config *cfg, const gpt_tensor_info *tensors, int n_tensors,
                    const kernels_ops *ops) {
  if (optim_config_validate(cfg) != WT_OK) return NULL;
  if (ops->device && cfg->kind != OPTIM_ADAMW) {
    wt_fail(WT_ENOTSUP, "SGD runs on host back ends only; use --optimizer adamw on %s", ops->name);
    return NULL;
  }
  if (!tensors || n_tensors <= 0) {
    wt_fail(WT_EINVAL, "optim_new: no tensors to optimize");
    return NULL;
  }
  optim *o = wt_xcalloc(1, sizeof *o);
  o->cfg = *cfg;
  o->n_tensors = n_tensors;
  o->tensors = wt_xmalloc(sizeof *tensors * (size_t)n_tensors);
  memcpy(o->tensors, tensors, sizeof *tensors * (size_t)n_tensors);
  for (int i = 0; i < n_tensors; i++) o->n = WT_MAX(o->n, tensors[i].offset + tensors[i].numel);
  o->ops = ops;
  o->m = ops->alloc(o->n * sizeof(float)); /* zeroed; huge pages when large on the host */
  if (cfg->kind == OPTIM_ADAMW) o->v = ops->alloc(o->n * sizeof(float));
  if (!o->m || (cfg->kind == OPTIM_ADAMW && !o->v)) {
    wt_fail(WT_ENOMEM, "optimizer state for %zu parameters does not fit in memory", o->n);
    optim_destroy(&o);
    return NULL;
  }
  return o;
}

void optim_destroy(optim **self_p) {
  if (!self_p || !*self_p) return;
  optim *o = *self_p;
  free(o->tensors);
  if (o->ops) {
    o->ops->free(o->m);
    o->ops->free(o->v);
  }
  if (o->ops) o->ops->host_free(o->host[0]), o->ops->host_free(o->host[1]);
  free(o);
  *self_p = NULL;
}

const optim_config *optim_get_config(const optim *opt) {
  return &opt->cfg;
}

double optim_grad_sq_norm(const float *grads, size_t n) {
  return kernels_cpu()->sq_norm(grads, n);
}

double optim_grad_sq_norm_on(const kernels_ops *ops, const float *grads, size_t n) {
  return ops->sq_norm(grads, n);
}

float optim_clip_scale(const optim_config *cfg, double total_sq) {
  if (cfg->grad_clip <= 0) return 1.0f;
  double coef = cfg->grad_clip / (sqrt(total_sq) + 1e-6);
  return coef < 1.0 ? (float)coef : 1.0f;
}

float optim_lr_at(const optim_config *cfg, long step) {
  if (step < cfg->warmup_steps) return cfg->lr * (float)(step + 1) / (float)cfg->warmup_steps;
  if (cfg->total_steps <= 0) return cfg->lr;
  if (step >= cfg->total_steps) return cfg->min_lr;
  long span = cfg->total_steps - cfg->warmup_steps;
  double progress = span > 0 ? (double)(step - cfg->warmup_steps) / (double)span : 1.0;
  double cosine = 0.5 * (1.0 + cos(M_PI * progress));
  return (float)(cfg->min_lr + (cfg->lr - cfg->min_lr) * cosine);
}

/* SGD with momentum, PyTorch semantics: g += wd * p (decayed tensors), buf = mu buf + g,
 * p -= lr buf. buf starts at zero, which equals PyTorch's buf = g on the first step. */
static void s_sgd_update(float *p, const float *g, float *buf, size_t n, float lr, float mu,
                         float wd, float scale) {
  for (size_t i = 0; i < n; i++) {
    float grad = g[i] * scale + wd * p[i];
    buf[i] = mu * buf[i] + grad;
    p[i] -= lr * buf[i];
  }
}

int optim_step(optim *o, float *params, const float *grads, float lr, float grad_scale) {
  if (!isfinite(lr) || !isfinite(grad_scale))
    return wt_fail(WT_EINVAL, "optim_step: lr %g and grad_scale %g must be finite", lr, grad_scale);
  const optim_config *c = &o->cfg;
  o->step++;
  float bc1 = 1.0f - powf(c->beta1, (float)o->step);
  float bc2 = 1.0f - powf(c->beta2, (float)o->step);
  const kernels_ops *ops = o->ops;
  if (c->kind == OPTIM_ADAMW && ops->adamw_update_tensors) { /* one launch on a GPU */
    kernels_adamw_tensor *ts = wt_xmalloc(sizeof *ts * (size_t)(o->n_tensors ? o->n_tensors : 1));
    for (int i = 0; i < o->n_tensors; i++)
      ts[i] = (kernels_adamw_tensor){.offset = o->tensors[i].offset,
                                     .numel = o->tensors[i].numel,
                                     .wd = o->tensors[i].weight_decay ? c->weight_decay : 0.0f};
    ops->adamw_update_tensors(params, grads, o->m, o->v, ts, o->n_tensors, lr, c->beta1, c->beta2,
                              c->eps, bc1, bc2, grad_scale);
    free(ts);
    return WT_OK;
  }
  for (int i = 0; i < o->n_tensors; i++) {
    const gpt_tensor_info *t = &o->tensors[i];
    float wd = t->weight_decay ? c->weight_decay : 0.0f;
    size_t off = t->offset;
    if (c->kind == OPTIM_ADAMW)
      ops->adamw_update(params + off, grads + off, o->m + off, o->v + off, t->numel, lr, c->beta1,
                        c->beta2, c->eps, wd, bc1, bc2, grad_scale);
    else
      s_sgd_update(params + off, grads + off, o->m + off, t->numel, lr, c->momentum, wd,
                   grad_scale);
  }
  return WT_OK;
}

int optim_num_states(const optim *o) {
  return o->v ? 2 : 1;
}

float *optim_state(optim *o, int i, size_t *n) {
  float *buf = i == 0 ? o->m : i == 1 ? o->v : NULL;
  if (n) *n = buf ? o->n : 0;
  return buf;
}

float *optim_state_host(optim *o, int i, size_t *n) {
  float *buf = optim_state(o, i, n);
  if (!buf || !o->ops->device) return buf;
  if (!o->host[i] && !(o->host[i] = o->ops->host_alloc(o->n * sizeof(float)))) {
    WT_ERROR("optim: out of host memory for a copy of %zu floats", o->n);
    abort();
  }
  o->ops->download(o->host[i], buf, o->n * sizeof(float));
  return o->host[i];
}

void optim_state_upload(optim *o, int i) {
  float *buf = optim_state(o, i, NULL);
  if (buf && o->ops->device && o->host[i]) o->ops->upload(buf, o->host[i], o->n * sizeof(float));
}

const kernels_ops *optim_kernels(const optim *o) {
  return o->ops;
}

long optim_step_count(const optim *o) {
  return o->step;
}
void optim_set_step_count(optim *o, long step) {
  o->step = step;
}
