/* acsgd_run — AC-SGD at a pipeline cut: a 2-stage split of the model, the activation sent
 * forward through the AC-SGD sender/receiver (compress/acsgd.h), the gradient sent back
 * quantized directly, over several epochs of a small fixed training subset (so every sample is
 * seen again and its cached activation makes the delta small).
 *
 * Modes: none (floats cross the cut), direct (each activation quantized on its own: the
 * baseline), delta (AC-SGD). Sample ids are the samples' indices in the subset. */
#include "tools/compress-experiments/experiments.h"

#include "compress/acsgd.h"
#include "common/common.h"
#include "model/trainer.h"
#include "common/rng.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  const exp_config *cfg;
  const data_set *d;
  int mode; /* 0 none, 1 direct, 2 delta */
  gpt_stage *s[2];
  optim *opt[2];
  optim_config oc;
  acsgd_sender *snd;
  acsgd_receiver *rcv;
  char path_send[WT_CONFIG_STR_MAX + 8], path_recv[WT_CONFIG_STR_MAX + 8];
  int *tok, *tgt;      /* (N, T): the subset */
  int *in, *tg;        /* (B, T) */
  float *act, *act_in; /* (B, T, C): what stage 0 produced, what stage 1 received */
  float *gin, *gout;   /* (B, T, C): what stage 1 produced, what stage 0 received */
  uint8_t *msg;
  size_t msg_cap;
  double bytes_fwd, bytes_bwd;
  double err_sq, ref_sq; /* activation error of the last epoch */
} s_run;

/* Sends B activations across the cut; act_in receives what the receiver reconstructs. */
static int s_cross_forward(s_run *r, const int *ids, int B, int last_epoch) {
  const size_t TC = (size_t)r->cfg->seq * r->cfg->channels;
  for (int b = 0; b < B; b++) {
    const float *a = r->act + b * TC;
    float *out = r->act_in + b * TC;
    size_t len = TC * sizeof(float);
    if (r->mode == 0)
      memcpy(out, a, len);
    else {
      WT_CHECK(acsgd_sender_encode(r->snd, (uint64_t)ids[b], a, r->msg, r->msg_cap, &len, NULL));
      WT_CHECK(acsgd_receiver_decode(r->rcv, r->msg, len, out, TC, NULL, NULL));
    }
    r->bytes_fwd += (double)len;
    for (size_t i = 0; last_epoch && i < TC; i++) {
      r->err_sq += ((double)out[i] - a[i]) * ((double)out[i] - a[i]);
      r->ref_sq += (double)a[i] * a[i];
    }
  }
  return WT_OK;
}

/* Sends B activation gradients back, quantized directly (or as floats in mode none). */
static int s_cross_backward(s_run *r, const int *ids, int B) {
  const int T = r->cfg->seq, C = r->cfg->channels;
  const size_t TC = (size_t)T * C;
  for (int b = 0; b < B; b++) {
    size_t len = TC * sizeof(float);
    if (r->mode == 0)
      memcpy(r->gout + b * TC, r->gin + b * TC, len);
    else {
      WT_CHECK(acsgd_quant_encode(r->gin + b * TC, T, C, r->cfg->grad_bits, (uint64_t)ids[b],
                                  r->msg, r->msg_cap, &len));
      WT_CHECK(acsgd_quant_decode(r->msg, len, r->gout + b * TC, TC, NULL));
    }
    r->bytes_bwd += (double)len;
  }
  return WT_OK;
}

static int s_step(s_run *r, const int *ids, int B, int last_epoch, double *loss) {
  const int T = r->cfg->seq;
  for (int b = 0; b < B; b++) {
    memcpy(r->in + b * T, r->tok + (size_t)ids[b] * T, sizeof(int) * T);
    memcpy(r->tg + b * T, r->tgt + (size_t)ids[b] * T, sizeof(int) * T);
  }
  gpt_stage_zero_grad(r->s[0]);
  gpt_stage_zero_grad(r->s[1]);
  WT_CHECK(gpt_stage_forward(r->s[0], r->in, NULL, NULL, B, T, r->act));
  WT_CHECK(s_cross_forward(r, ids, B, last_epoch));
  WT_CHECK(gpt_stage_forward(r->s[1], NULL, r->act_in, r->tg, B, T, NULL));
  *loss = gpt_stage_loss(r->s[1]);
  WT_CHECK(gpt_stage_backward(r->s[1], NULL, r->gin, 1.0f));
  WT_CHECK(s_cross_backward(r, ids, B));
  WT_CHECK(gpt_stage_backward(r->s[0], r->gout, NULL, 1.0f));
  WT_CHECK(gpt_tied_grads_sum(r->s[0], r->s[1]));
  /* The global norm counts the tied wte once (trainer_grad_sq_norm leaves out stage 1's copy). */
  double sq = trainer_grad_sq_norm(r->s[0]) + trainer_grad_sq_norm(r->s[1]);
  WT_CHECK(exp_optim_step(r->opt[0], r->s[0], sq, *loss));
  return exp_optim_step(r->opt[1], r->s[1], sq, *loss);
}

/* Exact (uncompressed) mean loss over the whole training subset. */
static double s_subset_loss(s_run *r) {
  const int N = r->cfg->subset, B = r->cfg->batch, T = r->cfg->seq;
  double sum = 0;
  for (int first = 0; first < N; first += B) {
    int nb = WT_MIN(B, N - first);
    if (gpt_stage_forward(r->s[0], r->tok + (size_t)first * T, NULL, NULL, nb, T, r->act) ||
        gpt_stage_forward(r->s[1], NULL, r->act, r->tgt + (size_t)first * T, nb, T, NULL))
      return NAN;
    sum += gpt_stage_loss(r->s[1]) * nb;
  }
  return sum / N;
}

static int s_make_channel(s_run *r) {
  const exp_config *cfg = r->cfg;
  if (cfg->bits != 2 && cfg->bits != 4 && cfg->bits != 8)
    return wt_fail(WT_EINVAL, "--bits %d: AC-SGD quantizes to 2, 4 or 8 bits", cfg->bits);
  if (cfg->grad_bits != 2 && cfg->grad_bits != 4 && cfg->grad_bits != 8)
    return wt_fail(WT_EINVAL, "--grad-bits %d: must be 2, 4 or 8", cfg->grad_bits);
  acsgd_options o = {.bits = cfg->bits,
                     .delta = r->mode == 2,
                     .rows = cfg->seq,
                     .cols = cfg->channels,
                     .max_samples = (size_t)cfg->subset,
                     .overflow = ACSGD_OVERFLOW_REFUSE};
  if (cfg->cache_path[0]) {
    snprintf(r->path_send, sizeof r->path_send, "%s.send", cfg->cache_path);
    snprintf(r->path_recv, sizeof r->path_recv, "%s.recv", cfg->cache_path);
    o.cache_path = r->path_send;
  }
  r->snd = acsgd_sender_new(&o);
  if (cfg->cache_path[0]) o.cache_path = r->path_recv;
  r->rcv = r->snd ? acsgd_receiver_new(&o) : NULL;
  r->msg_cap = acsgd_msg_bytes(cfg->seq, cfg->channels, 8);
  r->msg = wt_xmalloc(r->msg_cap);
  return r->rcv ? WT_OK : WT_EINVAL;
}

static int s_setup(s_run *r) {
  const exp_config *cfg = r->cfg;
  const int B = cfg->batch, T = cfg->seq, C = cfg->channels, N = cfg->subset;
  if (cfg->cut >= cfg->layers)
    return wt_fail(WT_EINVAL, "--cut %d must be below --layers %d", cfg->cut, cfg->layers);
  r->mode = !strcmp(cfg->acsgd, "none") ? 0 : !strcmp(cfg->acsgd, "direct") ? 1 : 2;
  gpt_config gc = exp_model_config(cfg, r->d);
  r->s[0] = gpt_stage_new(&gc, 0, cfg->cut, B, T);
  r->s[1] = r->s[0] ? gpt_stage_new(&gc, cfg->cut, gc.n_layer, B, T) : NULL;
  if (!r->s[1]) return WT_EINVAL;
  long steps = (long)cfg->epochs * ((N + B - 1) / B);
  r->oc = exp_optim_config(cfg, steps);
  for (int k = 0; k < 2; k++) {
    gpt_stage_init_weights(r->s[k], (uint64_t)cfg->seed);
    r->opt[k] = optim_new(&r->oc, gpt_stage_tensor(r->s[k], 0), gpt_stage_num_tensors(r->s[k]));
    if (!r->opt[k]) return WT_EINVAL;
  }
  r->tok = wt_xmalloc(sizeof(int) * N * T);
  r->tgt = wt_xmalloc(sizeof(int) * N * T);
  data_position pos; // the subset: N random training windows, fixed by the seed
  data_position_init(&pos, (uint64_t)cfg->seed * 7919 + 17);
  data_set_next_batch(r->d, &pos, N, T, r->tok, r->tgt);
  r->in = wt_xmalloc(sizeof(int) * B * T);
  r->tg = wt_xmalloc(sizeof(int) * B * T);
  size_t act = sizeof(float) * B * T * C;
  r->act = wt_xmalloc(act);
  r->act_in = wt_xmalloc(act);
  r->gin = wt_xmalloc(act);
  r->gout = wt_xmalloc(act);
  return r->mode ? s_make_channel(r) : WT_OK;
}

static void s_teardown(s_run *r) {
  acsgd_sender_destroy(&r->snd);
  acsgd_receiver_destroy(&r->rcv);
  if (r->path_send[0]) remove(r->path_send);
  if (r->path_recv[0]) remove(r->path_recv);
  for (int k = 0; k < 2; k++) {
    optim_destroy(&r->opt[k]);
    gpt_stage_destroy(&r->s[k]);
  }
  free(r->tok), free(r->tgt), free(r->in), free(r->tg), free(r->msg);
  free(r->act), free(r->act_in), free(r->gin), free(r->gout);
}

static void s_report(s_run *r, double val0, cJSON *curve, long steps, int diverged, double t0) {
  const exp_config *cfg = r->cfg;
  cJSON *j = exp_result_new(cfg);
  cJSON_AddStringToObject(j, "acsgd", cfg->acsgd);
  cJSON_AddNumberToObject(j, "bits", r->mode ? cfg->bits : 32);
  cJSON_AddNumberToObject(j, "grad_bits", r->mode ? cfg->grad_bits : 32);
  cJSON_AddNumberToObject(j, "cut", cfg->cut);
  cJSON_AddNumberToObject(j, "subset", cfg->subset);
  cJSON_AddNumberToObject(j, "epochs", cfg->epochs);
  cJSON_AddStringToObject(j, "optimizer", cfg->optimizer);
  cJSON_AddNumberToObject(j, "lr", r->oc.lr);
  cJSON_AddBoolToObject(j, "diverged", diverged);
  cJSON_AddNumberToObject(j, "initial_val_loss", val0);
  cJSON_AddNumberToObject(j, "final_train_loss", diverged ? NAN : s_subset_loss(r));
  cJSON_AddNumberToObject(j, "final_val_loss", diverged ? NAN : exp_eval_loss(r->s, 2, r->d, cfg));
  cJSON_AddNumberToObject(j, "act_rel_err_last_epoch", sqrt(r->err_sq / (r->ref_sq + 1e-30)));
  cJSON_AddNumberToObject(j, "fwd_bytes_per_step", r->bytes_fwd / (double)steps);
  cJSON_AddNumberToObject(j, "bwd_bytes_per_step", r->bytes_bwd / (double)steps);
  cJSON_AddNumberToObject(j, "bytes_per_step", (r->bytes_fwd + r->bytes_bwd) / (double)steps);
  acsgd_stats st = r->snd ? acsgd_sender_stats(r->snd) : (acsgd_stats){0};
  cJSON_AddNumberToObject(j, "cache_bytes", (double)st.cache_bytes_used);
  cJSON_AddBoolToObject(j, "cache_mmap", cfg->cache_path[0] != 0);
  cJSON_AddItemToObject(j, "epoch_train_loss", curve);
  cJSON_AddNumberToObject(j, "wall_s", wt_now_s() - t0);
  exp_print(j);
}

int exp_run_acsgd(const exp_config *cfg) {
  double t0 = wt_now_s();
  data_set *d = exp_data_open(cfg);
  if (!d) return WT_EINVAL;
  s_run r = {.cfg = cfg, .d = d};
  int rc = s_setup(&r), diverged = 0;
  double val0 = rc == WT_OK ? exp_eval_loss(r.s, 2, d, cfg) : NAN;
  const int N = cfg->subset, B = cfg->batch;
  int *order = wt_xmalloc(sizeof(int) * N);
  for (int i = 0; i < N; i++) order[i] = i;
  wt_rng rng;
  wt_rng_seed(&rng, (uint64_t)cfg->seed + 99);
  cJSON *curve = cJSON_CreateArray();
  long steps = 0;
  for (int ep = 0; rc == WT_OK && ep < cfg->epochs && !diverged; ep++) {
    wt_rng_shuffle_int(&rng, order, N);
    double sum = 0, loss = 0;
    for (int first = 0; rc == WT_OK && first < N; first += B, steps++) {
      int nb = WT_MIN(B, N - first);
      rc = s_step(&r, order + first, nb, ep == cfg->epochs - 1, &loss);
      sum += loss * nb;
      diverged = diverged || !isfinite(loss);
    }
    cJSON_AddItemToArray(curve, cJSON_CreateNumber(round(sum / N * 1e4) / 1e4));
  }
  if (rc == WT_OK)
    s_report(&r, val0, curve, WT_MAX(steps, 1), diverged, t0);
  else
    cJSON_Delete(curve);
  free(order);
  s_teardown(&r);
  data_set_destroy(&d);
  return rc;
}
