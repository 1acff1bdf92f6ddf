/* test_moe_model — the MoE GPT with its experts spread over an EP group (gpt_stage_new_ep +
 * parallel_moe_exchange), and its checkpoints across EP degrees:
 *   1. EP 2 (4 experts, top-2, both blocks MoE, a capacity that drops nothing) trains a few SGD
 *      steps and matches one device that runs each rank's rows as a micro-batch: the loss of
 *      every step and every weight at the end (dense gradients summed over the EP group, expert
 *      gradients complete on their owner, each rank's loss scaled by 1/EP);
 *      — and again with a tight capacity (0.75), where tokens are dropped, the same ones on both;
 *      each rank's token load (pairs its experts received) plus the dropped pairs account for
 *      every token's k choices in every MoE block;
 *   2. the EP 2 ranks gather one checkpoint (parallel_moe_gather_stage, checkpoint_save on rank
 *      0) whose expert tensors carry global names (h.L.moe.experts.E.*);
 *   3. that checkpoint loads into EP 1 and into EP 4 (each rank picking its experts by name) and
 *      both give the loss the EP 2 run measured on the same batch after training.
 * Tolerance: losses and weights atol 1e-5 + rtol 1e-4 (expert batches padded to other sizes and
 * the summed gradients round differently in float32; the numbers are printed). */
#include "kernels/kernels.h"
#include "model/checkpoint.h"
#include "model/gpt.h"
#include "model/safetensors.h"
#include "parallel/collectives/collectives.h"
#include "parallel/datacenter/mesh.h"
#include "parallel/datacenter/moe.h"

#include "common/common.h"
#include "common/testing.h"

#include <math.h>

enum { V = 32, T = 8, L = 2, C = 16, NH = 2, E = 4, K = 2, BG = 4, STEPS = 3 };
#define LR 0.1f

typedef struct {
  gpt_config cfg;
  char dir[512];
  int tokens[STEPS + 1][BG * T], targets[STEPS + 1][BG * T]; /* the last: the evaluation batch */
  float loss[STEPS];                                         /* one device, each step */
  gpt_stage *ref;                                            /* one device after training */
  float eval_ep2;   /* EP 2's loss on the evaluation batch after training */
  float eval_ep[5]; /* the loaded checkpoint's loss at EP 1, 2, 4 */
  long dropped;     /* EP 2 rank 0's dropped pairs over the run */
} s_case;

static int s_is_expert(const char *name) {
  return strstr(name, ".moe.experts.") != NULL;
}

/* Mean loss over the EP group of each rank's B rows of `batch`, after a forward. */
static int s_eval(gpt_stage *s, parallel_comm *ep, const int *tok, const int *tgt, int P, int r,
                  float *loss) {
  int B = BG / P;
  WT_CHECK(gpt_stage_forward(s, tok + r * B * T, NULL, tgt + r * B * T, B, T, NULL));
  *loss = gpt_stage_loss(s);
  return ep ? parallel_allreduce(ep, loss, 1, PARALLEL_OP_AVG) : WT_OK;
}

/* One device: each step's batch as EP-many micro-batches (the rows of each rank), so that the
 * capacity and the aux loss see the same tokens as each EP rank. */
static void s_reference(s_case *k, int P) {
  k->ref = gpt_stage_new(&k->cfg, 0, L, BG / P, T);
  WT_TEST_REQUIRE(k->ref, "%s", wt_last_error());
  gpt_stage_init_weights(k->ref, 3);
  size_t n;
  float *w = gpt_stage_params(k->ref, &n), *g = gpt_stage_grads(k->ref, NULL);
  for (int s = 0; s < STEPS; s++) {
    gpt_stage_zero_grad(k->ref);
    double sum = 0;
    for (int r = 0; r < P; r++) {
      int B = BG / P;
      WT_TEST_REQUIRE(gpt_stage_forward(k->ref, k->tokens[s] + r * B * T, NULL,
                                        k->targets[s] + r * B * T, B, T, NULL) == WT_OK,
                      "%s", wt_last_error());
      sum += gpt_stage_loss(k->ref);
      WT_TEST_REQUIRE(gpt_stage_backward(k->ref, NULL, NULL, 1.0f / P) == WT_OK, "%s",
                      wt_last_error());
    }
    k->loss[s] = (float)(sum / P);
    for (size_t i = 0; i < n; i++) w[i] -= LR * g[i];
  }
}

/* This rank's stage of an EP group over all of world. */
static gpt_stage *s_ep_stage(parallel_comm *world, parallel_mesh **mesh, const gpt_config *cfg,
                             int B) {
  parallel_mesh_shape shape = {.dp = 1, .pp = 1, .tp = 1, .cp = 1, .ep = parallel_comm_size(world)};
  *mesh = parallel_mesh_new(world, &shape, 1);
  moe_exchange ex;
  if (!*mesh || parallel_moe_exchange(*mesh, &ex) != WT_OK) return NULL;
  return gpt_stage_new_ep(cfg, 0, L, B, T, kernels_cpu(), &ex);
}

/* ---- 1, 2: EP 2 trains, matches one device, saves one checkpoint ------------------------- */

static int s_compare(gpt_stage *s, gpt_stage *ref, int r) {
  int n;
  const gpt_tensor_info *t = gpt_stage_tensors(s, &n);
  const float *w = gpt_stage_params(s, NULL), *rw = gpt_stage_params(ref, NULL);
  for (int i = 0; i < n; i++) {
    int m, j = 0;
    const gpt_tensor_info *u = gpt_stage_tensors(ref, &m);
    while (j < m && strcmp(u[j].name, t[i].name)) j++;
    if (j == m) return wt_fail(WT_EMISMATCH, "rank %d: %s has no reference", r, t[i].name);
    for (size_t e = 0; e < t[i].numel; e++) {
      float a = w[t[i].offset + e], b = rw[u[j].offset + e];
      if (!(fabsf(a - b) <= 1e-5f + 1e-4f * fabsf(b)))
        return wt_fail(WT_EMISMATCH, "rank %d: %s[%zu] is %.7g, one device %.7g", r, t[i].name, e,
                       a, b);
    }
  }
  return WT_OK;
}

/* Each rank's token load: the (token, choice) pairs its experts received from all ranks (the
 * per-expert counts summed over the EP group), which with the dropped ones must account for
 * every rank's B·T tokens × k choices × MoE blocks. */
static int s_rank_load(parallel_comm *ep, const long *kept, long dropped, int P, int r) {
  float f[E + 1];
  for (int e = 0; e < E; e++) f[e] = (float)kept[e];
  f[E] = (float)dropped;
  WT_CHECK(parallel_allreduce(ep, f, E + 1, PARALLEL_OP_SUM));
  double total = f[E];
  char line[256];
  int len = snprintf(line, sizeof line, "EP %d last step: ", P);
  for (int p = 0; p < P; p++) {
    double load = 0;
    for (int e = p * E / P; e < (p + 1) * E / P; e++) load += f[e];
    total += load;
    len +=
        snprintf(line + len, sizeof line - (size_t)len, "rank %d receives %.0f pairs, ", p, load);
  }
  if (total != (double)BG * T * K * L)
    return wt_fail(WT_EMISMATCH, "rank %d: loads and drops sum to %.0f, not %d", r, total,
                   BG * T * K * L);
  if (r == 0) printf("%sdropped %.0f (of %d)\n", line, f[E], BG * T * K * L);
  return WT_OK;
}

static int s_train_fn(parallel_comm *world, void *arg) {
  s_case *k = arg;
  int r = parallel_comm_rank(world), P = parallel_comm_size(world), B = BG / P, rc = WT_OK;
  parallel_mesh *mesh = NULL;
  gpt_stage *s = s_ep_stage(world, &mesh, &k->cfg, B), *full = NULL;
  if (!s) return wt_last_status();
  parallel_comm *ep = parallel_mesh_group(mesh, PARALLEL_GROUP_EP);
  gpt_stage_init_weights(s, 3); /* a tensor's weights depend on its name, not on the rank */
  size_t np;
  float *w = gpt_stage_params(s, &np), *g = gpt_stage_grads(s, NULL);
  int nt;
  const gpt_tensor_info *t = gpt_stage_tensors(s, &nt);
  for (int step = 0; step < STEPS && rc == WT_OK; step++) {
    gpt_stage_zero_grad(s);
    float loss = 0;
    WT_CHECK_GOTO(s_eval(s, NULL, k->tokens[step], k->targets[step], P, r, &loss), rc, done);
    WT_CHECK_GOTO(gpt_stage_backward(s, NULL, NULL, 1.0f / P), rc, done);
    long dropped = 0, kept[E];
    gpt_stage_moe_stats(s, kept, &dropped, NULL, NULL);
    if (r == 0) k->dropped += dropped;
    if (step == STEPS - 1) WT_CHECK_GOTO(s_rank_load(ep, kept, dropped, P, r), rc, done);
    WT_CHECK_GOTO(parallel_allreduce(ep, &loss, 1, PARALLEL_OP_AVG), rc, done);
    for (int i = 0; i < nt; i++) /* replicated weights: the sum of the ranks' 1/P shares */
      if (!s_is_expert(t[i].name))
        WT_CHECK_GOTO(parallel_allreduce(ep, g + t[i].offset, t[i].numel, PARALLEL_OP_SUM), rc,
                      done);
    for (size_t i = 0; i < np; i++) w[i] -= LR * g[i];
    if (fabsf(loss - k->loss[step]) > 1e-5f + 1e-4f * fabsf(k->loss[step]))
      rc = wt_fail(WT_EMISMATCH, "rank %d step %d: EP loss %.7f, one device %.7f", r, step, loss,
                   k->loss[step]);
    else if (r == 0)
      printf("step %d: EP %d loss %.7f, one device %.7f\n", step, P, loss, k->loss[step]);
  }
  WT_CHECK_GOTO(s_compare(s, k->ref, r), rc, done);
  float eval;
  WT_CHECK_GOTO(s_eval(s, ep, k->tokens[STEPS], k->targets[STEPS], P, r, &eval), rc, done);
  if (r == 0) k->eval_ep2 = eval;
  if (!k->dir[0]) goto done;
  full = gpt_stage_new(&k->cfg, 0, L, B, T);
  WT_CHECK_GOTO(parallel_moe_gather_stage(mesh, s, full), rc, done);
  if (r == 0) {
    checkpoint_meta meta = {.step = STEPS, .tokenizer = DATA_TOKENIZER_SYNTHETIC};
    data_position_init(&meta.data_pos, 1);
    WT_CHECK_GOTO(checkpoint_save(k->dir, full, NULL, &meta, 1), rc, done);
  }
done:
  if (rc != WT_OK) fprintf(stderr, "rank %d: %s\n", r, wt_last_error());
  gpt_stage_destroy(&full);
  gpt_stage_destroy(&s);
  parallel_mesh_destroy(&mesh);
  return rc;
}

/* ---- 3: the checkpoint on EP 1, 2 and 4 --------------------------------------------------- */

static int s_load_fn(parallel_comm *world, void *arg) {
  s_case *k = arg;
  int r = parallel_comm_rank(world), P = parallel_comm_size(world), rc = WT_OK;
  parallel_mesh *mesh = NULL;
  gpt_stage *s = s_ep_stage(world, &mesh, &k->cfg, BG / P);
  if (!s) return wt_last_status();
  checkpoint_meta meta;
  float loss = 0;
  WT_CHECK_GOTO(checkpoint_load(k->dir, s, NULL, &meta), rc, done);
  WT_CHECK_GOTO(s_eval(s, parallel_mesh_group(mesh, PARALLEL_GROUP_EP), k->tokens[STEPS],
                       k->targets[STEPS], P, r, &loss),
                rc, done);
  if (r == 0) k->eval_ep[P] = loss;
done:
  if (rc != WT_OK) fprintf(stderr, "EP %d rank %d: %s\n", P, r, wt_last_error());
  gpt_stage_destroy(&s);
  parallel_mesh_destroy(&mesh);
  return rc;
}

static void s_run(s_case *k, int P, parallel_rank_fn fn, const char *what) {
  parallel_inproc_group *g = parallel_inproc_group_new(P);
  parallel_inproc_group_set_timeout(g, 30);
  WT_TEST_ASSERT(parallel_inproc_run(g, fn, k, NULL) == WT_OK, "%s on EP %d (messages above)", what,
                 P);
  parallel_inproc_group_destroy(&g);
}

/* The saved file names experts globally: expert 3 of block 1 is there, whatever wrote it. */
static void s_check_names(const s_case *k) {
  char path[4200], name[64];
  WT_TEST_REQUIRE(checkpoint_resolve(k->dir, path, sizeof path) == WT_OK, "%s", wt_last_error());
  strncat(path, "/model.safetensors", sizeof path - strlen(path) - 1);
  safetensors *st = safetensors_load(path);
  WT_TEST_REQUIRE(st, "%s", wt_last_error());
  for (int l = 0; l < L; l++)
    for (int e = 0; e < E; e++) {
      snprintf(name, sizeof name, "h.%d.moe.experts.%d.c_fc.weight", l, e);
      int64_t shape[2] = {C, 4 * C};
      WT_TEST_ASSERT(safetensors_read(st, name, 2, shape, NULL) == WT_OK, "%s: %s", name,
                     wt_last_error());
    }
  safetensors_destroy(&st);
}

int main(void) {
  static s_case k;
  k.cfg = (gpt_config){.vocab_size = V,
                       .max_seq = T,
                       .n_layer = L,
                       .n_head = NH,
                       .channels = C,
                       .moe_experts = E,
                       .moe_top_k = K,
                       .moe_capacity = (float)E / K,
                       .moe_aux_weight = 0.05f};
  WT_TEST_REQUIRE(gpt_config_set_moe_layers(&k.cfg, "all") == WT_OK, "%s", wt_last_error());
  wt_test_tmpdir(k.dir, sizeof k.dir);
  unsigned seed = 12345;
  for (int s = 0; s <= STEPS; s++)
    for (int i = 0; i < BG * T; i++) {
      seed = seed * 1103515245u + 12345u, k.tokens[s][i] = (int)((seed >> 16) % V);
      seed = seed * 1103515245u + 12345u, k.targets[s][i] = (int)((seed >> 16) % V);
    }
  s_reference(&k, 2);
  s_run(&k, 2, s_train_fn, "training");
  WT_TEST_ASSERT(k.dropped == 0, "capacity %g dropped %ld", k.cfg.moe_capacity, k.dropped);
  s_check_names(&k);
  for (int P = 1; P <= 4; P *= 2) {
    s_run(&k, P, s_load_fn, "loading the EP 2 checkpoint");
    printf("EP 2 checkpoint on EP %d: loss %.7f (EP 2 after training: %.7f)\n", P, k.eval_ep[P],
           k.eval_ep2);
    WT_TEST_CLOSE(k.eval_ep[P], k.eval_ep2, 1e-5, 1e-4, "loss of the loaded checkpoint");
  }
  gpt_stage_destroy(&k.ref);

  static s_case tight; /* the same training where the capacity drops tokens; no checkpoint */
  tight = k;
  tight.cfg.moe_capacity = 0.75f, tight.dir[0] = 0, tight.dropped = 0;
  s_reference(&tight, 2);
  s_run(&tight, 2, s_train_fn, "training with a tight capacity");
  WT_TEST_ASSERT(tight.dropped > 0, "capacity 0.75 dropped nothing");
  printf("capacity 0.75: rank 0 dropped %ld (token, choice) pairs in %d steps\n", tight.dropped,
         STEPS);
  gpt_stage_destroy(&tight.ref);
  return wt_test_finish("test_moe_model");
}
