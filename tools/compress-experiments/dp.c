/* dp — synchronous data parallelism with a gradient codec (with or without error feedback).
 *
 * Each step every worker computes the gradient of its own micro-batch; the workers then average
 * their gradients with the parallel/ collectives over the in-process transport, one thread per
 * rank: parallel_allreduce (none), parallel_allreduce_compressed (dense codecs; two-stage error
 * feedback with --ef) or parallel_allreduce_sparse (top-k; sender-side error feedback). The
 * collectives leave bitwise the same average on every rank — checked every step — so one
 * optimizer on one copy of the parameters stands for all the replicas.
 *
 * --local-momentum (SGD only): worker w keeps u_w = μ·u_w + g_w and sends u_w instead of g_w;
 * the optimizer then applies the average as plain SGD. Uncompressed this is the same update as
 * global momentum (momentum is linear), but error feedback now holds back momentum rather than
 * raw gradient, so a delayed coordinate is not integrated by the momentum a second time (the
 * momentum correction of DGC, Lin et al. 2018, without its factor masking). */
#include "tools/compress-experiments/experiments.h"

#include "parallel/collectives/collectives.h"
#include "common/common.h"
#include "model/trainer.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  const exp_config *cfg;
  const compress_codec *codec; /* NULL: uncompressed fp32 ring */
  int sparse;
  float **grads; /* [rank] (n): in: the rank's gradient; out: the average */
  size_t n;
  parallel_ef **ring_ef;   /* [rank] or NULL */
  compress_ef **sparse_ef; /* [rank] or NULL */
} s_reduce;

static int s_rank_reduce(parallel_comm *c, void *arg) {
  s_reduce *x = arg;
  int r = parallel_comm_rank(c);
  exp_threads_apply(x->cfg);
  if (!x->codec) return parallel_allreduce(c, x->grads[r], x->n, PARALLEL_OP_AVG);
  if (x->sparse)
    return parallel_allreduce_sparse(c, x->codec, x->grads[r], x->n, PARALLEL_OP_AVG,
                                     x->sparse_ef ? x->sparse_ef[r] : NULL);
  return parallel_allreduce_compressed(c, x->codec, x->grads[r], x->n, PARALLEL_OP_AVG,
                                       x->ring_ef ? x->ring_ef[r] : NULL);
}

typedef struct {
  const exp_config *cfg;
  const data_set *d;
  gpt_stage *s;
  optim *opt;
  optim_config oc;
  parallel_inproc_group *g;
  s_reduce red;
  data_position *pos; /* [worker] */
  float **mom;        /* [worker] (n): local momentum, or NULL */
  int *in, *tg;       /* (B, T) */
  int steps_done;     /* fewer than cfg->steps when the run diverged */
} s_run;

/* u = μ·u + g, and g becomes u: what this worker sends. */
static void s_local_momentum(float *u, float *g, size_t n, float mu) {
  for (size_t i = 0; i < n; i++) {
    u[i] = mu * u[i] + g[i];
    g[i] = u[i];
  }
}

/* Every worker's gradient, in turn, on the shared parameters; returns their mean loss. */
static int s_worker_grads(s_run *r, double *loss) {
  const int B = r->cfg->batch, T = r->cfg->seq, W = r->cfg->workers;
  size_t n;
  const float *g = gpt_stage_grads(r->s, &n);
  *loss = 0;
  for (int w = 0; w < W; w++) {
    gpt_stage_zero_grad(r->s);
    exp_next_batch(r->cfg, r->d, &r->pos[w], w, r->in, r->tg);
    float l;
    WT_CHECK(trainer_micro_grads(r->s, r->in, r->tg, B, T, 1.0f, &l));
    *loss += l / W;
    memcpy(r->red.grads[w], g, n * sizeof(float));
    if (r->mom) s_local_momentum(r->mom[w], r->red.grads[w], n, (float)r->cfg->momentum);
  }
  return WT_OK;
}

static int s_step(s_run *r, double *loss) {
  WT_CHECK(s_worker_grads(r, loss));
  int rcs[64];
  WT_CHECK(parallel_inproc_run(r->g, s_rank_reduce, &r->red, rcs));
  for (int w = 1; w < r->cfg->workers; w++)
    if (memcmp(r->red.grads[0], r->red.grads[w], r->red.n * sizeof(float)) != 0)
      return wt_fail(WT_EMISMATCH,
                     "ranks 0 and %d hold different averaged gradients; the "
                     "collective broke its contract",
                     w);
  size_t n;
  float *g = gpt_stage_grads(r->s, &n);
  memcpy(g, r->red.grads[0], n * sizeof(float));
  return exp_optim_step(r->opt, r->s, trainer_grad_sq_norm(r->s), *loss);
}

static int s_setup(s_run *r, const exp_config *cfg, const data_set *d) {
  const int W = cfg->workers;
  gpt_config gc = exp_model_config(cfg, d);
  r->s = gpt_stage_new(&gc, 0, gc.n_layer, cfg->batch, cfg->seq);
  if (!r->s) return WT_EINVAL;
  gpt_stage_init_weights(r->s, (uint64_t)cfg->seed);
  r->oc = exp_optim_config(cfg, cfg->steps);
  r->opt = optim_new(&r->oc, gpt_stage_tensor(r->s, 0), gpt_stage_num_tensors(r->s));
  r->g = parallel_inproc_group_new(W);
  if (!r->opt || !r->g) return WT_EINVAL;
  size_t n;
  gpt_stage_params(r->s, &n);
  compress_codec *codec;
  WT_CHECK(exp_codec_new(cfg->codec, n, &codec, &r->red.sparse));
  r->red.codec = codec;
  r->red.cfg = cfg;
  r->red.n = n;
  r->red.grads = wt_xcalloc(W, sizeof(float *));
  r->pos = wt_xcalloc(W, sizeof *r->pos);
  for (int w = 0; w < W; w++) {
    r->red.grads[w] = wt_xmalloc(n * sizeof(float));
    exp_data_position_init(cfg, w, &r->pos[w]);
  }
  if (cfg->ef && codec && r->red.sparse) {
    r->red.sparse_ef = wt_xcalloc(W, sizeof(compress_ef *));
    for (int w = 0; w < W; w++) r->red.sparse_ef[w] = compress_ef_new(n);
  } else if (cfg->ef && codec) {
    r->red.ring_ef = wt_xcalloc(W, sizeof(parallel_ef *));
    for (int w = 0; w < W; w++) WT_CHECK_NEW(r->red.ring_ef[w], parallel_ef_new(n, w, W));
  }
  if (cfg->local_momentum && strcmp(cfg->optimizer, "sgd") != 0)
    return wt_fail(WT_EINVAL, "--local-momentum needs --optimizer sgd (AdamW's moments are not "
                              "linear in the gradient)");
  if (cfg->local_momentum) {
    r->mom = wt_xcalloc(W, sizeof(float *));
    for (int w = 0; w < W; w++) r->mom[w] = wt_xcalloc(n, sizeof(float));
  }
  r->in = wt_xmalloc(sizeof(int) * cfg->batch * cfg->seq);
  r->tg = wt_xmalloc(sizeof(int) * cfg->batch * cfg->seq);
  return WT_OK;
}

static void s_teardown(s_run *r) {
  for (int w = 0; w < r->cfg->workers && r->red.grads; w++) {
    free(r->red.grads[w]);
    if (r->red.ring_ef) parallel_ef_destroy(&r->red.ring_ef[w]);
    if (r->red.sparse_ef) compress_ef_destroy(&r->red.sparse_ef[w]);
    if (r->mom) free(r->mom[w]);
  }
  free(r->mom);
  free(r->red.grads);
  free(r->red.ring_ef);
  free(r->red.sparse_ef);
  compress_codec *codec = (compress_codec *)r->red.codec;
  compress_codec_destroy(&codec);
  free(r->pos);
  free(r->in);
  free(r->tg);
  parallel_inproc_group_destroy(&r->g);
  optim_destroy(&r->opt);
  gpt_stage_destroy(&r->s);
}

/* Mean bytes one rank sent per step, over all ranks. */
static double s_bytes_per_worker_step(s_run *r) {
  double total = 0;
  for (int w = 0; w < r->cfg->workers; w++)
    total += (double)parallel_comm_bytes_sent(parallel_inproc_group_comm(r->g, w));
  return total / r->cfg->workers / WT_MAX(r->steps_done, 1);
}

static void s_report(s_run *r, double val0, double val, double train, int diverged, cJSON *curve,
                     double t0) {
  const exp_config *cfg = r->cfg;
  cJSON *j = exp_result_new(cfg);
  cJSON_AddStringToObject(j, "codec", cfg->codec);
  cJSON_AddBoolToObject(j, "ef", cfg->ef);
  cJSON_AddStringToObject(j, "optimizer", cfg->optimizer);
  cJSON_AddNumberToObject(j, "momentum", cfg->optimizer[0] == 's' ? cfg->momentum : 0);
  cJSON_AddBoolToObject(j, "local_momentum", cfg->local_momentum);
  cJSON_AddNumberToObject(j, "clip", cfg->clip);
  cJSON_AddNumberToObject(j, "lr", r->oc.lr);
  cJSON_AddNumberToObject(j, "workers", cfg->workers);
  cJSON_AddNumberToObject(j, "steps", r->steps_done);
  cJSON_AddNumberToObject(j, "tokens",
                          (double)r->steps_done * cfg->workers * cfg->batch * cfg->seq);
  cJSON_AddNumberToObject(j, "params", (double)r->red.n);
  cJSON_AddStringToObject(j, "reduce", "parallel/ collectives, in-process transport");
  cJSON_AddBoolToObject(j, "diverged", diverged);
  cJSON_AddNumberToObject(j, "initial_val_loss", val0);
  cJSON_AddNumberToObject(j, "final_val_loss", val);     // cJSON prints NaN as null
  cJSON_AddNumberToObject(j, "final_train_loss", train); // mean over the last 10 steps
  double bytes = s_bytes_per_worker_step(r);
  double fp32 = 2.0 * (cfg->workers - 1) / cfg->workers * 4.0 * (double)r->red.n;
  cJSON_AddNumberToObject(j, "bytes_per_worker_per_step", bytes);
  cJSON_AddNumberToObject(j, "ratio_vs_fp32_ring", bytes > 0 ? fp32 / bytes : 0);
  exp_add_bytes(j, cfg, r->g, r->steps_done, r->red.n);
  if (curve) cJSON_AddItemToObject(j, "val_curve", curve);
  cJSON_AddNumberToObject(j, "wall_s", wt_now_s() - t0);
  exp_print(j);
}

int exp_run_dp(const exp_config *cfg) {
  double t0 = wt_now_s();
  data_set *d = exp_data_open(cfg);
  if (!d) return WT_EINVAL;
  s_run r = {.cfg = cfg, .d = d};
  int rc = s_setup(&r, cfg, d);
  double train = 0, loss = 0, val0 = rc == WT_OK ? exp_eval_loss(&r.s, 1, d, cfg) : NAN;
  int diverged = 0;
  cJSON *curve = cfg->eval_every > 0 ? cJSON_CreateArray() : NULL;
  for (int step = 0; rc == WT_OK && step < cfg->steps && !diverged; step++) {
    rc = s_step(&r, &loss);
    r.steps_done++;
    diverged = !isfinite(loss) || loss > 1e3;
    if (step >= cfg->steps - 10) train += loss / WT_MIN(10, cfg->steps);
    if (curve && !diverged && (step + 1) % cfg->eval_every == 0 && step + 1 < cfg->steps)
      exp_curve_add(curve, step + 1, exp_eval_loss(&r.s, 1, d, cfg));
  }
  if (rc == WT_OK) {
    double val = diverged ? NAN : exp_eval_loss(&r.s, 1, d, cfg);
    if (curve && !diverged) exp_curve_add(curve, r.steps_done, val);
    s_report(&r, val0, val, diverged ? NAN : train, diverged, curve, t0);
    curve = NULL;
  }
  cJSON_Delete(curve);
  s_teardown(&r);
  data_set_destroy(&d);
  return rc;
}
