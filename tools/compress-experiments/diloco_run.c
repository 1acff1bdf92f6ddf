/* diloco_run — DiLoCo: `workers` replicas (one gpt_stage each) take H inner AdamW (or SGD) steps
 * on their own micro-batches, then average their pseudo-gradients through parallel/diloco.h
 * (fp32 ring, or compressed with --codec, error feedback with --ef) over the in-process
 * transport, one thread per rank, and take the outer Nesterov step. --steps counts inner steps
 * per worker, so a run sees exactly the tokens of a synchronous dp run with the same --steps. */
#include "tools/compress-experiments/experiments.h"

#include "common/common.h"
#include "model/trainer.h"
#include "parallel/diloco.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  const exp_config *cfg;
  gpt_stage **s;  /* [worker] */
  optim **opt;    /* [worker]: inner optimizers */
  diloco **outer; /* [worker]: every replica runs the same outer step */
  data_position *pos;
  optim_config oc;
  compress_codec *codec;
  parallel_inproc_group *g;
  int *in, *tg;
} s_run;

static int s_rank_outer(parallel_comm *c, void *arg) {
  s_run *r = arg;
  int w = parallel_comm_rank(c);
  exp_threads_apply(r->cfg);
  size_t n;
  return diloco_outer_step(r->outer[w], c, gpt_stage_params(r->s[w], &n));
}

/* One inner step of worker w on its own next micro-batch; *loss receives its loss. */
static int s_inner_step(s_run *r, const data_set *d, int w, double *loss) {
  const int B = r->cfg->batch, T = r->cfg->seq;
  gpt_stage *s = r->s[w];
  gpt_stage_zero_grad(s);
  data_set_next_batch(d, &r->pos[w], B, T, r->in, r->tg);
  float l;
  WT_CHECK(trainer_micro_grads(s, r->in, r->tg, B, T, 1.0f, &l));
  *loss = l;
  return exp_optim_step(r->opt[w], s, trainer_grad_sq_norm(s), l);
}

static int s_setup(s_run *r, const data_set *d) {
  const exp_config *cfg = r->cfg;
  const int W = cfg->workers;
  gpt_config gc = exp_model_config(cfg, d);
  r->oc = exp_optim_config(cfg, cfg->steps);
  r->s = wt_xcalloc(W, sizeof *r->s);
  r->opt = wt_xcalloc(W, sizeof *r->opt);
  r->outer = wt_xcalloc(W, sizeof *r->outer);
  r->pos = wt_xcalloc(W, sizeof *r->pos);
  int sparse;
  size_t n = gpt_config_num_params(&gc);
  WT_CHECK(exp_codec_new(cfg->codec, n, &r->codec, &sparse));
  diloco_config dc = diloco_config_default();
  dc.lr = (float)cfg->outer_lr;
  dc.momentum = (float)cfg->outer_momentum;
  dc.codec = r->codec;
  dc.error_feedback = cfg->ef;
  dc.sparse = sparse;
  for (int w = 0; w < W; w++) {
    r->s[w] = gpt_stage_new(&gc, 0, gc.n_layer, cfg->batch, cfg->seq);
    if (!r->s[w]) return WT_EINVAL;
    gpt_stage_init_weights(r->s[w], (uint64_t)cfg->seed); // the same θ on every replica
    r->opt[w] = optim_new(&r->oc, gpt_stage_tensor(r->s[w], 0), gpt_stage_num_tensors(r->s[w]));
    r->outer[w] = diloco_new(n, &dc);
    if (!r->opt[w] || !r->outer[w]) return WT_EINVAL;
    diloco_init(r->outer[w], gpt_stage_params(r->s[w], &n));
    data_position_init(&r->pos[w], (uint64_t)cfg->seed * 1000 + (uint64_t)w); // as in dp
  }
  r->g = parallel_inproc_group_new(W);
  r->in = wt_xmalloc(sizeof(int) * cfg->batch * cfg->seq);
  r->tg = wt_xmalloc(sizeof(int) * cfg->batch * cfg->seq);
  return r->g ? WT_OK : WT_EINVAL;
}

static void s_teardown(s_run *r) {
  for (int w = 0; w < r->cfg->workers && r->s; w++) {
    gpt_stage_destroy(&r->s[w]);
    optim_destroy(&r->opt[w]);
    diloco_destroy(&r->outer[w]);
  }
  free(r->s), free(r->opt), free(r->outer), free(r->pos), free(r->in), free(r->tg);
  compress_codec_destroy(&r->codec);
  parallel_inproc_group_destroy(&r->g);
}

static void s_report(s_run *r, const data_set *d, double val0, double train, int steps, int rounds,
                     int diverged, double t0) {
  const exp_config *cfg = r->cfg;
  cJSON *j = exp_result_new(cfg);
  cJSON_AddStringToObject(j, "codec", cfg->codec);
  cJSON_AddBoolToObject(j, "ef", cfg->ef);
  cJSON_AddStringToObject(j, "optimizer", cfg->optimizer);
  cJSON_AddNumberToObject(j, "lr", r->oc.lr);
  cJSON_AddNumberToObject(j, "H", cfg->H);
  cJSON_AddNumberToObject(j, "outer_lr", cfg->outer_lr);
  cJSON_AddNumberToObject(j, "outer_momentum", cfg->outer_momentum);
  cJSON_AddNumberToObject(j, "workers", cfg->workers);
  cJSON_AddNumberToObject(j, "steps", steps);
  cJSON_AddNumberToObject(j, "rounds", rounds);
  cJSON_AddNumberToObject(j, "tokens", (double)steps * cfg->workers * cfg->batch * cfg->seq);
  cJSON_AddStringToObject(j, "reduce", "parallel/diloco.h over parallel/ collectives, in-process");
  cJSON_AddBoolToObject(j, "diverged", diverged);
  cJSON_AddNumberToObject(j, "initial_val_loss", val0);
  cJSON_AddNumberToObject(j, "final_val_loss", diverged ? NAN : exp_eval_loss(r->s, 1, d, cfg));
  cJSON_AddNumberToObject(j, "final_train_loss", train);
  double total = 0;
  for (int w = 0; w < cfg->workers; w++)
    total += (double)parallel_comm_bytes_sent(parallel_inproc_group_comm(r->g, w));
  cJSON_AddNumberToObject(j, "bytes_per_worker_per_step", total / cfg->workers / WT_MAX(steps, 1));
  cJSON_AddNumberToObject(j, "wall_s", wt_now_s() - t0);
  exp_print(j);
}

int exp_run_diloco(const exp_config *cfg) {
  double t0 = wt_now_s();
  data_set *d = exp_data_open(cfg);
  if (!d) return WT_EINVAL;
  s_run r = {.cfg = cfg};
  int rc = s_setup(&r, d), rounds = 0, diverged = 0, steps = 0;
  double train = 0, val0 = rc == WT_OK ? exp_eval_loss(r.s, 1, d, cfg) : NAN;
  for (int step = 0; rc == WT_OK && step < cfg->steps && !diverged; step++, steps++) {
    double mean = 0, loss = 0;
    for (int w = 0; rc == WT_OK && w < cfg->workers; w++) {
      rc = s_inner_step(&r, d, w, &loss);
      mean += loss / cfg->workers;
    }
    diverged = !isfinite(mean) || mean > 1e3;
    if (step >= cfg->steps - 10) train += mean / WT_MIN(10, cfg->steps);
    // Synchronise every H steps, and after the last step so the result is one model.
    if (rc == WT_OK && !diverged && ((step + 1) % cfg->H == 0 || step + 1 == cfg->steps)) {
      rc = parallel_inproc_run(r.g, s_rank_outer, &r, NULL);
      rounds++;
    }
  }
  if (rc == WT_OK) s_report(&r, d, val0, diverged ? NAN : train, steps, rounds, diverged, t0);
  s_teardown(&r);
  data_set_destroy(&d);
  return rc;
}
