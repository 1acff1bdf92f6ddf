/* test_mesh_train — a tp 2 × cp 2 × dp 2 mesh on 8 in-process ranks trains a GPT-2 (vocabulary-
 * parallel embedding and head, tensor-parallel blocks with sequence parallelism, ring attention
 * over the CP group) for a few SGD steps, and matches the single-device model (model/gpt.h)
 * trained on the same global batches: the loss of every step and every weight at the end.
 *
 * Data: each step's global batch has DP·B sequences; replica d takes sequences [d·B, (d+1)·B),
 * CP rank c of it the positions of the load-balanced split (parallel/datacenter/cp.h). Each rank's
 * loss is the mean over its rows, so the global mean loss — and its gradient — is the average over
 * the dense-gradient group (dp × cp), which is what the ranks all-reduce before each step.
 * Tolerance: losses atol 1e-5 + rtol 1e-5, weights atol 1e-5 + rtol 1e-4 (row-parallel partial
 * sums, blockwise softmax and averaged gradients round differently in float32; the losses of
 * both are printed). */
#include "kernels/kernels.h"
#include "model/gpt.h"
#include "parallel/collectives/collectives.h"
#include "parallel/datacenter/cp.h"
#include "parallel/datacenter/mesh.h"
#include "parallel/datacenter/tp.h"

#include "common/common.h"
#include "common/testing.h"

#include <math.h>

enum { TP = 2, CP = 2, DP = 2, B = 2, T = 8, C = 32, NH = 4, L = 2, V = 64, STEPS = 3 };
enum { BG = DP * B, TL = T / CP, NL = B * TL }; /* global batch, local sequence, local rows */
#define LR 0.05f

typedef struct {
  gpt_stage *st;
  const float *init; /* initial weights (flat, stage order) */
  int tokens[STEPS][BG * T], targets[STEPS][BG * T];
  float loss[STEPS]; /* single-device loss of each step */
} s_ref;

static uint64_t s_rng;
static float s_uniform(void) { /* xorshift64*, in [-1, 1) */
  s_rng ^= s_rng >> 12, s_rng ^= s_rng << 25, s_rng ^= s_rng >> 27;
  return (float)((double)((s_rng * 2685821657736338717ull) >> 40) / (double)(1ull << 24)) * 2 - 1;
}

static const gpt_tensor_info *s_tensor(gpt_stage *st, const char *name) {
  for (int k = 0; k < gpt_stage_num_tensors(st); k++)
    if (strcmp(gpt_stage_tensor(st, k)->name, name) == 0) return gpt_stage_tensor(st, k);
  return NULL;
}

static const char *const s_block_names[PARALLEL_TP_TENSORS] = {
    "ln_1.weight",        "ln_1.bias",        "attn.c_attn.weight", "attn.c_attn.bias",
    "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight",        "ln_2.bias",
    "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};

typedef struct {
  parallel_mesh *mesh;
  parallel_comm *tp, *grad;
  parallel_tp_vocab *voc;
  parallel_tp_block *blk[L];
  float lnf_w[C], lnf_b[C], d_lnf_w[C], d_lnf_b[C];
  float emb[NL * C], act[L + 1][NL * C], h[NL * C], lnf[NL * C], mean[NL], rstd[NL];
  float d_lnf[NL * C], d_h[NL * C], d_act[L + 1][NL * C], d_emb[NL * C];
  int first, rows;
} s_model;

/* Sequence parallelism leaves each TP rank a chunk of the rows: gather them back. */
static int s_gather_rows(s_model *m, const float *rows, float *full) {
  memcpy(full + (size_t)m->first * C, rows, sizeof(float) * (size_t)m->rows * C);
  return parallel_allgather_chunks(m->tp, full, (size_t)NL * C);
}

static int s_forward_backward(s_model *m, const int *tokens, const int *targets, float *loss) {
  const kernels_ops *k = kernels_ref();
  WT_CHECK(parallel_tp_vocab_embed(m->voc, tokens, B, T, m->emb));
  memcpy(m->act[0], m->emb + (size_t)m->first * C, sizeof(float) * (size_t)m->rows * C);
  for (int l = 0; l < L; l++)
    WT_CHECK(parallel_tp_block_forward(m->blk[l], m->act[l], m->act[l + 1], B, T));
  WT_CHECK(s_gather_rows(m, m->act[L], m->h));
  k->layernorm_forward(m->lnf, m->mean, m->rstd, m->h, m->lnf_w, m->lnf_b, NL, C);
  WT_CHECK(parallel_tp_vocab_loss(m->voc, m->lnf, targets, B, T, loss));
  memset(m->d_lnf, 0, sizeof m->d_lnf), memset(m->d_h, 0, sizeof m->d_h);
  memset(m->d_act, 0, sizeof m->d_act);
  WT_CHECK(parallel_tp_vocab_loss_backward(m->voc, 1.0f, m->d_lnf));
  k->layernorm_backward(m->d_h, m->d_lnf_w, m->d_lnf_b, m->d_lnf, m->h, m->lnf_w, m->mean, m->rstd,
                        NL, C);
  memcpy(m->d_act[L], m->d_h + (size_t)m->first * C, sizeof(float) * (size_t)m->rows * C);
  for (int l = L - 1; l >= 0; l--)
    WT_CHECK(parallel_tp_block_backward(m->blk[l], m->d_act[l + 1], m->d_act[l]));
  WT_CHECK(s_gather_rows(m, m->d_act[0], m->d_emb));
  parallel_tp_vocab_embed_backward(m->voc, m->d_emb);
  return WT_OK;
}

/* Every local tensor as (param, grad, count), in a fixed order. */
typedef struct {
  float *p, *g;
  size_t n;
} s_slot;

static int s_slots(s_model *m, s_slot *out) {
  int n = 0;
  out[n].p = parallel_tp_vocab_wte(m->voc, &out[n].n);
  out[n].g = parallel_tp_vocab_wte_grad(m->voc, NULL), n++;
  out[n].p = parallel_tp_vocab_wpe(m->voc, &out[n].n);
  out[n].g = parallel_tp_vocab_wpe_grad(m->voc, NULL), n++;
  out[n] = (s_slot){m->lnf_w, m->d_lnf_w, C}, n++;
  out[n] = (s_slot){m->lnf_b, m->d_lnf_b, C}, n++;
  for (int l = 0; l < L; l++) {
    out[n].p = parallel_tp_block_params(m->blk[l], &out[n].n);
    out[n].g = parallel_tp_block_grads(m->blk[l], NULL), n++;
  }
  return n;
}

/* Loads this rank's shards of the reference's initial weights. */
static void s_load(s_model *m, const s_ref *ref) {
  gpt_stage *st = ref->st;
  const float *w = ref->init, *full[PARALLEL_TP_TENSORS];
  char name[64];
  for (int l = 0; l < L; l++) {
    for (int i = 0; i < PARALLEL_TP_TENSORS; i++) {
      snprintf(name, sizeof name, "h.%d.%s", l, s_block_names[i]);
      full[i] = w + s_tensor(st, name)->offset;
    }
    parallel_tp_block_load(m->blk[l], full);
  }
  parallel_tp_vocab_load(m->voc, w + s_tensor(st, "wte.weight")->offset,
                         w + s_tensor(st, "wpe.weight")->offset);
  memcpy(m->lnf_w, w + s_tensor(st, "ln_f.weight")->offset, sizeof m->lnf_w);
  memcpy(m->lnf_b, w + s_tensor(st, "ln_f.bias")->offset, sizeof m->lnf_b);
}

/* Compares the trained local tensors with the shards of the single-device model's weights. */
static int s_compare(s_model *m, const s_ref *ref, int tp_rank) {
  gpt_stage *st = ref->st;
  const float *w = gpt_stage_params(st, NULL);
  int v0, vr, rc = WT_OK;
  parallel_tp_vocab_range(m->voc, &v0, &vr);
  size_t n;
  const float *p = parallel_tp_vocab_wte(m->voc, &n);
  if (!wt_test_allclose(p, w + s_tensor(st, "wte.weight")->offset + (size_t)v0 * C, n, 1e-5, 1e-4,
                        "wte rows"))
    rc = WT_EMISMATCH;
  p = parallel_tp_vocab_wpe(m->voc, &n);
  if (!wt_test_allclose(p, w + s_tensor(st, "wpe.weight")->offset, n, 1e-5, 1e-4, "wpe"))
    rc = WT_EMISMATCH;
  if (!wt_test_allclose(m->lnf_w, w + s_tensor(st, "ln_f.weight")->offset, C, 1e-5, 1e-4, "ln_f"))
    rc = WT_EMISMATCH;
  float *shard = wt_xmalloc(sizeof(float) * 4 * C * C);
  char name[64];
  for (int l = 0; l < L; l++)
    for (int i = 0; i < PARALLEL_TP_TENSORS; i++) {
      snprintf(name, sizeof name, "h.%d.%s", l, s_block_names[i]);
      parallel_tp_shard((parallel_tp_tensor)i, C, NH, tp_rank, TP, w + s_tensor(st, name)->offset,
                        shard);
      p = parallel_tp_block_param(m->blk[l], (parallel_tp_tensor)i, &n);
      if (!wt_test_allclose(p, shard, n, 1e-5, 1e-4, name)) rc = WT_EMISMATCH;
    }
  free(shard);
  return rc == WT_OK ? WT_OK : wt_fail(rc, "trained weights differ from the single device");
}

static int s_rank_fn(parallel_comm *world, void *arg) {
  const s_ref *ref = arg;
  int r = parallel_comm_rank(world), rc = WT_OK;
  parallel_mesh_shape shape = {.dp = DP, .pp = 1, .tp = TP, .cp = CP, .ep = 1};
  s_model *m = wt_xcalloc(1, sizeof *m);
  m->mesh = parallel_mesh_new(world, &shape, 1);
  if (!m->mesh) {
    free(m);
    return WT_EINVAL;
  }
  parallel_mesh_coord co = parallel_mesh_get_coord(m->mesh);
  m->tp = parallel_mesh_group(m->mesh, PARALLEL_GROUP_TP);
  m->grad = parallel_mesh_group(m->mesh, PARALLEL_GROUP_DENSE_GRAD);
  m->voc = parallel_tp_vocab_new(m->mesh, kernels_ref(), V, C, T, B, T);
  for (int l = 0; l < L; l++)
    m->blk[l] = parallel_tp_block_new(m->mesh, kernels_ref(), C, NH, B, T, 1);
  s_load(m, ref);
  parallel_tp_block_rows(m->blk[0], B, T, &m->first, &m->rows);
  s_slot slots[4 + L];
  int ns = s_slots(m, slots);
  for (int step = 0; step < STEPS && rc == WT_OK; step++) {
    /* This rank's rows: its replica's sequences, at its CP positions. */
    int tokens[NL], targets[NL];
    for (int b = 0; b < B; b++)
      for (int i = 0; i < TL; i++) {
        int src = (co.dp * B + b) * T + parallel_cp_position(CP, co.cp, T, i);
        tokens[b * TL + i] = ref->tokens[step][src], targets[b * TL + i] = ref->targets[step][src];
      }
    for (int s = 0; s < ns; s++) memset(slots[s].g, 0, sizeof(float) * slots[s].n);
    float loss = 0;
    WT_CHECK_GOTO(s_forward_backward(m, tokens, targets, &loss), rc, done);
    WT_CHECK_GOTO(parallel_allreduce(m->grad, &loss, 1, PARALLEL_OP_AVG), rc, done);
    for (int s = 0; s < ns; s++) {
      WT_CHECK_GOTO(parallel_allreduce(m->grad, slots[s].g, slots[s].n, PARALLEL_OP_AVG), rc, done);
      for (size_t j = 0; j < slots[s].n; j++) slots[s].p[j] -= LR * slots[s].g[j];
    }
    if (fabsf(loss - ref->loss[step]) > 1e-5f + 1e-5f * fabsf(ref->loss[step]))
      rc = wt_fail(WT_EMISMATCH, "rank %d step %d: loss %.7f, single device %.7f", r, step, loss,
                   ref->loss[step]);
    else if (r == 0)
      printf("step %d: mesh loss %.7f, single device %.7f\n", step, loss, ref->loss[step]);
  }
  if (rc == WT_OK) rc = s_compare(m, ref, co.tp);
done:
  if (rc != WT_OK) fprintf(stderr, "rank %d: %s\n", r, wt_last_error());
  for (int l = 0; l < L; l++) parallel_tp_block_destroy(&m->blk[l]);
  parallel_tp_vocab_destroy(&m->voc);
  parallel_mesh_destroy(&m->mesh);
  free(m);
  return rc;
}

int main(void) {
  gpt_config cfg = {.vocab_size = V, .max_seq = T, .n_layer = L, .n_head = NH, .channels = C};
  static s_ref ref;
  ref.st = gpt_stage_new(&cfg, 0, L, BG, T);
  WT_TEST_REQUIRE(ref.st, "stage: %s", wt_last_error());
  gpt_stage_set_kernels(ref.st, kernels_ref());
  size_t np;
  float *w = gpt_stage_params(ref.st, &np), *g = gpt_stage_grads(ref.st, NULL);
  s_rng = 0x5851f42d4c957f2dull;
  for (size_t i = 0; i < np; i++) w[i] = 0.2f * s_uniform();
  for (int k = 0; k < gpt_stage_num_tensors(ref.st); k++) {
    const gpt_tensor_info *ti = gpt_stage_tensor(ref.st, k);
    if (strstr(ti->name, "ln_") && strstr(ti->name, "weight"))
      for (size_t j = 0; j < ti->numel; j++) w[ti->offset + j] += 1.0f;
  }
  float *init = wt_xmalloc(sizeof(float) * np);
  memcpy(init, w, sizeof(float) * np);
  ref.init = init;
  for (int s = 0; s < STEPS; s++)
    for (int i = 0; i < BG * T; i++) {
      ref.tokens[s][i] = (int)(fabsf(s_uniform()) * V) % V;
      ref.targets[s][i] = (int)(fabsf(s_uniform()) * V) % V;
    }
  for (int s = 0; s < STEPS; s++) {
    gpt_stage_zero_grad(ref.st);
    WT_TEST_REQUIRE(gpt_stage_forward(ref.st, ref.tokens[s], NULL, ref.targets[s], BG, T, NULL) ==
                        WT_OK,
                    "%s", wt_last_error());
    WT_TEST_REQUIRE(gpt_stage_backward(ref.st, NULL, NULL, 1.0f) == WT_OK, "%s", wt_last_error());
    ref.loss[s] = gpt_stage_loss(ref.st);
    for (size_t i = 0; i < np; i++) w[i] -= LR * g[i];
  }
  parallel_inproc_group *grp = parallel_inproc_group_new(TP * CP * DP);
  parallel_inproc_group_set_timeout(grp, 30);
  WT_TEST_ASSERT(parallel_inproc_run(grp, s_rank_fn, &ref, NULL) == WT_OK,
                 "tp × cp × dp training differs (rank messages above)");
  parallel_inproc_group_destroy(&grp);
  free(init);
  gpt_stage_destroy(&ref.st);
  return wt_test_failures ? 1 : 0;
}
