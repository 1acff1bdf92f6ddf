/* common — what the three experiments share: data, model shape, optimizer, evaluation, output. */
#include "tools/compress-experiments/experiments.h"

#include "common/common.h"
#include "model/trainer.h"

#ifdef _OPENMP
#include <omp.h>
#endif
#include <math.h>
#include <stdlib.h>
#include <string.h>

void exp_threads_apply(const exp_config *cfg) {
#ifdef _OPENMP
  omp_set_num_threads(cfg->threads);
#else
  (void)cfg;
#endif
}

data_set *exp_data_open(const exp_config *cfg) {
  data_set *d;
  if (!strcmp(cfg->data, "synthetic")) {
    data_synth_config sc = data_synth_default();
    d = data_set_synthetic(&sc);
  } else {
    d = data_set_open_file(cfg->data);
  }
  if (d && data_set_check_seq(d, cfg->seq) != WT_OK) data_set_destroy(&d);
  return d;
}

gpt_config exp_model_config(const exp_config *cfg, const data_set *d) {
  gpt_config g = {.vocab_size = data_set_vocab_size(d),
                  .max_seq = cfg->seq,
                  .n_layer = cfg->layers,
                  .n_head = cfg->heads,
                  .channels = cfg->channels};
  return g;
}

optim_config exp_optim_config(const exp_config *cfg, long total_steps) {
  optim_config oc = optim_config_default();
  int sgd = !strcmp(cfg->optimizer, "sgd");
  oc.kind = sgd ? OPTIM_SGD : OPTIM_ADAMW;
  oc.lr = (float)(cfg->lr > 0 ? cfg->lr : sgd ? 0.3 : 3e-3);
  oc.min_lr = 0.1f * oc.lr;
  oc.warmup_steps = (int)WT_MIN((long)cfg->warmup, total_steps / 2);
  oc.total_steps = total_steps;
  // With --local-momentum the workers have applied momentum already (linear, so the average of
  // their momenta is the global momentum); the optimizer must not apply it twice.
  oc.momentum = cfg->local_momentum ? 0.0f : (float)cfg->momentum;
  // Decoupled decay suits AdamW; for SGD it would be L2 on a tiny model run for a few hundred
  // steps, which only blurs the comparison between codecs.
  oc.weight_decay = sgd ? 0.0f : 0.1f;
  oc.grad_clip = (float)cfg->clip;
  return oc;
}

double exp_eval_loss(gpt_stage **stages, int n_stages, const data_set *d, const exp_config *cfg) {
  const int B = cfg->batch, T = cfg->seq, C = cfg->channels;
  int *in = wt_xmalloc(sizeof(int) * B * T), *tg = wt_xmalloc(sizeof(int) * B * T);
  float *act = n_stages > 1 ? wt_xmalloc(sizeof(float) * B * T * C) : NULL; // (B, T, C)
  double sum = 0;
  int rc = WT_OK;
  for (int i = 0; i < cfg->eval_batches && rc == WT_OK; i++) {
    data_set_val_batch(d, (size_t)i * B, B, T, in, tg);
    if (n_stages == 1) {
      rc = gpt_stage_forward(stages[0], in, NULL, tg, B, T, NULL);
    } else {
      rc = gpt_stage_forward(stages[0], in, NULL, NULL, B, T, act);
      if (rc == WT_OK) rc = gpt_stage_forward(stages[1], NULL, act, tg, B, T, NULL);
    }
    sum += gpt_stage_loss(stages[n_stages - 1]);
  }
  free(in);
  free(tg);
  free(act);
  return rc == WT_OK ? sum / cfg->eval_batches : NAN;
}

int exp_codec_new(const char *name, size_t n, compress_codec **out, int *sparse) {
  *out = NULL;
  *sparse = !strcmp(name, "topk");
  if (!strcmp(name, "none")) return WT_OK;
  compress_params p = compress_params_default(); // blocks of 64, top 1%, nearest rounding
  // One scale for everything a message carries: the ring sends chunks of the flat gradient
  // buffer, so this is one scale per chunk of all tensors together.
  if (!strcmp(name, "int8-tensor")) p.block = n;
  *out = compress_codec_new(strcmp(name, "int8-tensor") ? name : "int8", &p);
  return *out ? WT_OK : wt_last_status();
}

int exp_optim_step(optim *opt, gpt_stage *s, double sq_total, double loss) {
  if (!isfinite(sq_total) || !isfinite(loss)) return WT_OK;
  size_t n;
  float *params = gpt_stage_params(s, &n);
  const float *grads = gpt_stage_grads(s, &n);
  return trainer_apply(opt, params, grads, optim_step_count(opt), sq_total, (float)loss, NULL);
}

void exp_add_bytes(cJSON *j, const exp_config *cfg, parallel_inproc_group *g, long steps,
                   size_t n) {
  double total = 0;
  for (int w = 0; w < cfg->workers; w++)
    total += (double)parallel_comm_bytes_sent(parallel_inproc_group_comm(g, w));
  double per_step = total / cfg->workers / (double)WT_MAX(steps, 1);
  double fp32 = 2.0 * (cfg->workers - 1) / cfg->workers * 4.0 * (double)n;
  cJSON_AddNumberToObject(j, "bytes_per_worker_per_step", per_step);
  cJSON_AddNumberToObject(j, "bytes_per_worker_per_token", per_step / (cfg->batch * cfg->seq));
  cJSON_AddNumberToObject(j, "fraction_of_fp32_sync", fp32 > 0 ? per_step / fp32 : 0);
}

void exp_curve_add(cJSON *curve, long step, double loss) {
  cJSON *pt = cJSON_CreateArray();
  cJSON_AddItemToArray(pt, cJSON_CreateNumber((double)step));
  cJSON_AddItemToArray(pt, cJSON_CreateNumber(loss));
  cJSON_AddItemToArray(curve, pt);
}

void exp_data_position_init(const exp_config *cfg, int w, data_position *pos) {
  if (!strcmp(cfg->data_order, "global"))
    data_position_init(pos, (uint64_t)cfg->seed); /* model/trainer.c's seeding */
  else
    data_position_init(pos, (uint64_t)cfg->seed * 1000 + (uint64_t)w);
}

void exp_next_batch(const exp_config *cfg, const data_set *d, data_position *pos, int w,
                    int *inputs, int *targets) {
  const int B = cfg->batch, T = cfg->seq, W = cfg->workers;
  if (strcmp(cfg->data_order, "global")) {
    data_set_next_batch(d, pos, B, T, inputs, targets);
    return;
  }
  int *in = wt_xmalloc(sizeof(int) * (size_t)W * B * T); // (W·B, T): the global batch
  int *tg = wt_xmalloc(sizeof(int) * (size_t)W * B * T);
  data_set_next_batch(d, pos, W * B, T, in, tg);
  memcpy(inputs, in + (size_t)w * B * T, sizeof(int) * (size_t)B * T);
  memcpy(targets, tg + (size_t)w * B * T, sizeof(int) * (size_t)B * T);
  free(in), free(tg);
}

cJSON *exp_result_new(const exp_config *cfg) {
  cJSON *j = cJSON_CreateObject();
  cJSON_AddStringToObject(j, "experiment", cfg->experiment);
  const char *slash = strrchr(cfg->data, '/');
  cJSON_AddStringToObject(j, "data", slash ? slash + 1 : cfg->data);
  char model[96];
  snprintf(model, sizeof model, "L%d-C%d-H%d-T%d", cfg->layers, cfg->channels, cfg->heads,
           cfg->seq);
  cJSON_AddStringToObject(j, "model", model);
  cJSON_AddNumberToObject(j, "seed", (double)cfg->seed);
  if (!strcmp(cfg->experiment, "dp") || !strcmp(cfg->experiment, "diloco"))
    cJSON_AddStringToObject(j, "data_order", cfg->data_order);
  return j;
}

void exp_print(cJSON *result) {
  char *line = cJSON_PrintUnformatted(result);
  printf("%s\n", line);
  fflush(stdout);
  free(line);
  cJSON_Delete(result);
}
