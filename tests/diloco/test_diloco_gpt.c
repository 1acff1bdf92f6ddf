/* test_diloco_gpt — DiLoCo with H = 1, outer lr 1 and no momentum on 2..4 in-process replicas
 * of the real GPT (model/gpt.h) with plain SGD (model/optim.h) computes the same parameters as
 * synchronous data parallelism (gradients averaged with parallel_allreduce, then one SGD step),
 * up to the float rounding argued in test_diloco.c; replicas stay bitwise identical.
 * Each replica trains on its own random token batches (seeded by rank). Then DiLoCo proper
 * (H = 4 AdamW steps, outer Nesterov 0.7 / 0.9, fp32 / int8 / sign pseudo-gradients) trains. */
#include "parallel/runtime/diloco.h"

#include "parallel/collectives/collectives.h"
#include "parallel/transport/comm.h"
#include "common/common.h"
#include "model/gpt.h"
#include "model/optim.h"
#include "common/rng.h"
#include "common/testing.h"

#include <float.h>
#include <stdlib.h>

#define BATCH 2
#define SEQ 8
#define STEPS 3
#define MAXW 4

static const gpt_config s_cfg = {
    .vocab_size = 32, .max_seq = SEQ, .n_layer = 2, .n_head = 2, .channels = 16};

typedef struct {
  int diloco;          /* 0: data parallel, 1: DiLoCo H=1 */
  float *params[MAXW]; /* result per replica (malloc'd by the rank) */
  size_t n;
  int rcs[MAXW];
  double loss0, loss_last; /* rank 0's first and last loss */
} s_job;

/* One forward/backward on this rank's next random batch; leaves the gradients in the stage. */
static int s_grad(gpt_stage *s, wt_rng *rng, float *loss) {
  int tokens[BATCH * SEQ], targets[BATCH * SEQ];
  for (int i = 0; i < BATCH * SEQ; i++) {
    tokens[i] = (int)wt_rng_below(rng, (uint64_t)s_cfg.vocab_size);
    targets[i] = (tokens[i] * 7 + 3) % s_cfg.vocab_size; /* a learnable map */
  }
  gpt_stage_zero_grad(s);
  WT_CHECK(gpt_stage_forward(s, tokens, NULL, targets, BATCH, SEQ, NULL));
  *loss = gpt_stage_loss(s);
  return gpt_stage_backward(s, NULL, NULL, 1.0f);
}

static int s_train(parallel_comm *c, s_job *j, gpt_stage *s, optim *opt, diloco *d) {
  int r = parallel_comm_rank(c);
  wt_rng rng;
  wt_rng_seed(&rng, 100 + (uint64_t)r);
  size_t n = 0;
  float *p = gpt_stage_params(s, &n), *g = gpt_stage_grads(s, &n), loss = 0;
  for (int step = 0; step < STEPS; step++) {
    WT_CHECK(s_grad(s, &rng, &loss));
    if (r == 0 && step == 0) j->loss0 = loss;
    if (r == 0) j->loss_last = loss;
    if (!j->diloco) WT_CHECK(parallel_allreduce(c, g, n, PARALLEL_OP_AVG));
    WT_CHECK(optim_step(opt, p, g, optim_get_config(opt)->lr, 1.0f));
    if (j->diloco) WT_CHECK(diloco_outer_step(d, c, p));
  }
  j->params[r] = wt_xmalloc(n * sizeof(float));
  memcpy(j->params[r], p, n * sizeof(float));
  j->n = n;
  return WT_OK;
}

static int s_rank_fn(parallel_comm *c, void *arg) {
  s_job *j = arg;
  int r = parallel_comm_rank(c);
  gpt_stage *s = gpt_stage_new(&s_cfg, 0, s_cfg.n_layer, BATCH, SEQ);
  if (!s) return j->rcs[r] = WT_EINVAL;
  gpt_stage_init_weights(s, 7); /* same seed: every replica starts from the same θ */
  optim_config oc = optim_config_default();
  oc.kind = OPTIM_SGD;
  oc.lr = 0.1f;
  oc.momentum = 0.0f;
  oc.weight_decay = 0.0f;
  oc.grad_clip = 0.0f;
  optim *opt = optim_new(&oc, gpt_stage_tensor(s, 0), gpt_stage_num_tensors(s));
  size_t n = 0;
  diloco_config dc = diloco_config_default();
  dc.lr = 1.0f;
  dc.momentum = 0.0f;
  diloco *d = diloco_new(gpt_stage_params(s, &n) ? n : 0, &dc);
  diloco_init(d, gpt_stage_params(s, &n));
  int rc = opt ? s_train(c, j, s, opt, d) : WT_EINVAL;
  if (rc != WT_OK) fprintf(stderr, "rank %d: %s\n", r, wt_last_error());
  diloco_destroy(&d);
  optim_destroy(&opt);
  gpt_stage_destroy(&s);
  return j->rcs[r] = rc;
}

/* ---- DiLoCo proper: H = 4 AdamW inner steps, default outer Nesterov, optionally compressed --- */

typedef struct {
  const compress_codec *codec; /* NULL: fp32 */
  float *params[MAXW];
  size_t n;
  double loss_before, loss_after; /* rank 0, on a fixed held-out batch */
  uint64_t bytes;                 /* rank 0's bytes sent over the run */
} s_h4_job;

static double s_heldout_loss(gpt_stage *s) {
  wt_rng rng;
  wt_rng_seed(&rng, 999);
  float loss = 0;
  if (s_grad(s, &rng, &loss) != WT_OK) return NAN;
  return loss;
}

static int s_h4_fn(parallel_comm *c, void *arg) {
  s_h4_job *j = arg;
  int r = parallel_comm_rank(c), rc = WT_OK;
  gpt_stage *s = gpt_stage_new(&s_cfg, 0, s_cfg.n_layer, BATCH, SEQ);
  if (!s) return WT_EINVAL;
  gpt_stage_init_weights(s, 7);
  optim_config oc = optim_config_default(); /* AdamW, as in the paper */
  oc.lr = 3e-3f;
  optim *opt = optim_new(&oc, gpt_stage_tensor(s, 0), gpt_stage_num_tensors(s));
  size_t n = 0;
  float *p = gpt_stage_params(s, &n), *g = gpt_stage_grads(s, &n), loss = 0;
  diloco_config dc = diloco_config_default();
  dc.codec = j->codec;
  diloco *d = diloco_new(n, &dc);
  diloco_init(d, p);
  if (r == 0) j->loss_before = s_heldout_loss(s);
  parallel_comm_reset_counters(c);
  wt_rng rng;
  wt_rng_seed(&rng, 200 + (uint64_t)r);
  for (int round = 0; round < 8 && rc == WT_OK; round++) {
    for (int h = 0; h < 4 && rc == WT_OK; h++) {
      rc = s_grad(s, &rng, &loss);
      if (rc == WT_OK) rc = optim_step(opt, p, g, oc.lr, 1.0f);
    }
    if (rc == WT_OK) rc = diloco_outer_step(d, c, p);
  }
  if (r == 0) {
    j->bytes = parallel_comm_bytes_sent(c);
    j->loss_after = s_heldout_loss(s);
  }
  j->params[r] = wt_xmalloc(n * sizeof(float));
  memcpy(j->params[r], p, n * sizeof(float));
  j->n = n;
  diloco_destroy(&d);
  optim_destroy(&opt);
  gpt_stage_destroy(&s);
  return rc;
}

/* 4 replicas, 8 rounds of H = 4: replicas identical, held-out loss goes down with fp32, int8 and
 * sign (with error feedback) pseudo-gradients. */
static void test_diloco_h4(void) {
  const char *names[] = {"fp32", "int8", "sign"};
  for (size_t k = 0; k < WT_ARRAY_LEN(names); k++) {
    compress_codec *codec = NULL;
    if (k > 0) codec = compress_codec_new(names[k], NULL);
    s_h4_job j = {.codec = codec};
    parallel_inproc_group *g = parallel_inproc_group_new(MAXW);
    int rc = parallel_inproc_run(g, s_h4_fn, &j, NULL);
    parallel_inproc_group_destroy(&g);
    WT_TEST_ASSERT(rc == WT_OK, "%s: %s", names[k], wt_status_name(rc));
    for (int r = 1; r < MAXW && rc == WT_OK; r++)
      WT_TEST_ASSERT(!memcmp(j.params[r], j.params[0], j.n * sizeof(float)), "%s: replica %d",
                     names[k], r);
    printf("H=4 x 8 rounds, %d replicas, %-4s: held-out loss %.4f -> %.4f, %llu bytes sent by "
           "rank 0\n",
           MAXW, names[k], j.loss_before, j.loss_after, (unsigned long long)j.bytes);
    WT_TEST_ASSERT(j.loss_after < j.loss_before - 0.1, "%s: DiLoCo did not train", names[k]);
    for (int r = 0; r < MAXW; r++) free(j.params[r]);
    compress_codec_destroy(&codec);
  }
}

static void s_free(s_job *j) {
  for (int r = 0; r < MAXW; r++) free(j->params[r]);
}

int main(void) {
  for (int world = 2; world <= MAXW; world++) {
    s_job dp = {.diloco = 0}, dl = {.diloco = 1};
    parallel_inproc_group *g = parallel_inproc_group_new(world);
    int rc1 = parallel_inproc_run(g, s_rank_fn, &dp, NULL);
    int rc2 = parallel_inproc_run(g, s_rank_fn, &dl, NULL);
    parallel_inproc_group_destroy(&g);
    WT_TEST_REQUIRE(rc1 == WT_OK && rc2 == WT_OK,
                    "world %d: runs failed: data parallel %s, DiLoCo %s", world,
                    wt_status_name(rc1), wt_status_name(rc2));
    for (int r = 1; r < world; r++) {
      WT_TEST_ASSERT(!memcmp(dp.params[r], dp.params[0], dp.n * sizeof(float)), "dp replica %d", r);
      WT_TEST_ASSERT(!memcmp(dl.params[r], dl.params[0], dl.n * sizeof(float)), "diloco replica %d",
                     r);
    }
    /* Per step and element: a few ulps of |θ_i| (see test_diloco.c), plus the effect on the next
     * gradient of such a difference, which is far smaller at lr 0.1. Over STEPS steps allow
     * STEPS · 4 ulp(|θ_i|), and an absolute floor of 4 ulp of the typical weight (0.02). */
    double max_rel = 0;
    for (size_t i = 0; i < dp.n; i++) {
      double d = fabs((double)dl.params[0][i] - dp.params[0][i]);
      max_rel = fmax(max_rel, d / fmax(fabs(dp.params[0][i]), 0.02));
    }
    printf("world %d: %zu parameters, max |diloco - dp| / max(|θ|, 0.02) = %.2e (%.1f ulp), "
           "loss %.4f -> %.4f\n",
           world, dp.n, max_rel, max_rel / FLT_EPSILON, dp.loss0, dp.loss_last);
    wt_test_allclose(dl.params[0], dp.params[0], dp.n, STEPS * 4 * FLT_EPSILON * 0.02,
                     STEPS * 4 * FLT_EPSILON, "DiLoCo H=1 vs data parallel (GPT)");
    s_free(&dp);
    s_free(&dl);
  }
  test_diloco_h4();
  return wt_test_finish("test_diloco_gpt");
}
