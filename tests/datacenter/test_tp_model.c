/* test_tp_model — a whole GPT-2 split by tensor parallelism (parallel/datacenter/tp.h):
 * vocabulary-parallel embedding, L tensor-parallel blocks (with and without sequence parallelism),
 * a replicated ln_f and the vocabulary-parallel LM head with its parallel cross-entropy, on t = 1,
 * 2, 4 in-process ranks, against the single-device model (model/gpt.h) on the same weights and
 * batch: the loss, this rank's columns of the logits, every gradient and the weights after one SGD
 * step agree, and the vocabulary-parallel layer sends the bytes of docs/parallel.md. Both sides run
 * the reference kernels. Tolerance atol 1e-5 + rtol 1e-4, as in test_tp.c (the split inner sums of
 * the row-parallel matmuls and of the head's input gradient round differently in float32; a wrong
 * shard or a missing reduction is off by ~1e-1). */
#include "kernels/kernels.h"
#include "model/gpt.h"
#include "parallel/collectives/collectives.h"
#include "parallel/datacenter/mesh.h"
#include "parallel/datacenter/tp.h"

#include "common/common.h"
#include "common/testing.h"

#include <math.h>

enum { B = 2, T = 8, C = 32, NH = 4, L = 2, V = 67, N = B * T };
#define ATOL 1e-5
#define RTOL 1e-4
#define LR 0.1f

typedef struct {
  int sp;
  gpt_stage *st;     /* the single-device model, after forward + backward */
  const float *next; /* its weights after one SGD step (flat, stage order) */
  int tokens[N], targets[N];
  float logits[N * V]; /* the single-device logits, saved before its backward */
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

static int s_close(const float *got, const float *want, size_t n, const char *what, int rank) {
  if (!wt_test_allclose(got, want, n, ATOL, RTOL, what))
    return wt_fail(WT_EMISMATCH, "rank %d: %s differs from the single-device model", rank, what);
  return WT_OK;
}

/* The parallel model of one rank. */
typedef struct {
  parallel_comm *tp;
  parallel_tp_vocab *voc;
  parallel_tp_block *blk[L];
  float lnf_w[C], lnf_b[C], d_lnf_w[C], d_lnf_b[C];
  float emb[N * C], act[L + 1][N * C], h[N * C], lnf[N * C], mean[N], rstd[N];
  float d_lnf[N * C], d_h[N * C], d_act[L + 1][N * C], d_emb[N * C];
  int first, rows, sp;
} s_model;

/* With SP the blocks hold only this rank's rows: gather them back to all N rows. */
static int s_gather_rows(s_model *m, const float *rows, float *full) {
  memcpy(full + (size_t)m->first * C, rows, sizeof(float) * (size_t)m->rows * C);
  return m->sp ? parallel_allgather_chunks(m->tp, full, (size_t)N * C) : WT_OK;
}

/* Bytes one rank sends in a ring all-reduce of n floats (docs/parallel.md): every chunk but
 * (r+1) mod p in the reduce-scatter and every chunk but (r+2) mod p in the all-gather, each
 * message with a 32-byte frame header. */
static uint64_t s_allreduce_bytes(size_t n, int p, int r) {
  if (p == 1) return 0;
  size_t off, a, b;
  parallel_chunk_range(n, p, (r + 1) % p, &off, &a);
  parallel_chunk_range(n, p, (r + 2) % p, &off, &b);
  return 4 * (2 * n - a - b) + 2 * (uint64_t)(p - 1) * 32;
}

/* Checks the bytes the TP group sent since the last check against one all-reduce of n floats. */
static int s_check_bytes(s_model *m, size_t n, const char *what) {
  int p = parallel_comm_size(m->tp), r = parallel_comm_rank(m->tp);
  uint64_t got = parallel_comm_bytes_sent(m->tp), want = s_allreduce_bytes(n, p, r);
  parallel_comm_reset_counters(m->tp);
  if (got != want)
    return wt_fail(WT_EMISMATCH, "rank %d: %s sent %llu bytes, formula %llu", r, what,
                   (unsigned long long)got, (unsigned long long)want);
  return WT_OK;
}

static int s_step(s_model *m, const s_ref *ref, float *loss) {
  const kernels_ops *k = kernels_ref();
  parallel_comm_reset_counters(m->tp);
  WT_CHECK(parallel_tp_vocab_embed(m->voc, ref->tokens, B, T, m->emb));
  WT_CHECK(s_check_bytes(m, (size_t)N * C, "vocabulary-parallel embedding"));
  memcpy(m->act[0], m->emb + (size_t)m->first * C, sizeof(float) * (size_t)m->rows * C);
  for (int l = 0; l < L; l++)
    WT_CHECK(parallel_tp_block_forward(m->blk[l], m->act[l], m->act[l + 1], B, T));
  WT_CHECK(s_gather_rows(m, m->act[L], m->h));
  k->layernorm_forward(m->lnf, m->mean, m->rstd, m->h, m->lnf_w, m->lnf_b, N, C);
  parallel_comm_reset_counters(m->tp);
  WT_CHECK(parallel_tp_vocab_loss(m->voc, m->lnf, ref->targets, B, T, loss));
  WT_CHECK(s_check_bytes(m, (size_t)N * (parallel_comm_size(m->tp) + 1), "parallel loss"));
  return WT_OK;
}

static int s_backward(s_model *m) {
  const kernels_ops *k = kernels_ref();
  memset(m->d_lnf, 0, sizeof m->d_lnf), memset(m->d_h, 0, sizeof m->d_h);
  memset(m->d_act, 0, sizeof m->d_act);
  parallel_comm_reset_counters(m->tp);
  WT_CHECK(parallel_tp_vocab_loss_backward(m->voc, 1.0f, m->d_lnf));
  WT_CHECK(s_check_bytes(m, (size_t)N * C, "LM head backward"));
  k->layernorm_backward(m->d_h, m->d_lnf_w, m->d_lnf_b, m->d_lnf, m->h, m->lnf_w, m->mean, m->rstd,
                        N, C);
  memcpy(m->d_act[L], m->d_h + (size_t)m->first * C, sizeof(float) * (size_t)m->rows * C);
  for (int l = L - 1; l >= 0; l--)
    WT_CHECK(parallel_tp_block_backward(m->blk[l], m->d_act[l + 1], m->d_act[l]));
  WT_CHECK(s_gather_rows(m, m->d_act[0], m->d_emb));
  parallel_tp_vocab_embed_backward(m->voc, m->d_emb);
  return WT_OK;
}

/* Compares every gradient (shard of the reference), then takes one SGD step on every local
 * tensor and compares with the shard of the reference's stepped weights. */
static int s_check_tensors(s_model *m, const s_ref *ref, int r, int t) {
  gpt_stage *st = ref->st;
  const float *gref = gpt_stage_grads(st, NULL);
  float *shard = wt_xmalloc(sizeof(float) * (size_t)V * 4 * C);
  int rc = WT_OK, v0, vr;
  parallel_tp_vocab_range(m->voc, &v0, &vr);
  char name[64];
  for (int pass = 0; pass < 2 && rc == WT_OK; pass++) {
    const float *src = pass == 0 ? gref : ref->next; /* gradients, then stepped weights */
    size_t n;
    const gpt_tensor_info *ti = s_tensor(st, "wte.weight");
    float *p = parallel_tp_vocab_wte(m->voc, &n), *g = parallel_tp_vocab_wte_grad(m->voc, NULL);
    if (pass == 1)
      for (size_t j = 0; j < n; j++) p[j] -= LR * g[j];
    rc = s_close(pass ? p : g, src + ti->offset + (size_t)v0 * C, n, "wte rows", r);
    ti = s_tensor(st, "wpe.weight");
    p = parallel_tp_vocab_wpe(m->voc, &n), g = parallel_tp_vocab_wpe_grad(m->voc, NULL);
    if (pass == 1)
      for (size_t j = 0; j < n; j++) p[j] -= LR * g[j];
    if (rc == WT_OK) rc = s_close(pass ? p : g, src + ti->offset, n, "wpe", r);
    float *lnf[2] = {m->lnf_w, m->lnf_b}, *dlnf[2] = {m->d_lnf_w, m->d_lnf_b};
    for (int i = 0; i < 2 && rc == WT_OK; i++) {
      ti = s_tensor(st, i ? "ln_f.bias" : "ln_f.weight");
      if (pass == 1)
        for (int j = 0; j < C; j++) lnf[i][j] -= LR * dlnf[i][j];
      rc = s_close(pass ? lnf[i] : dlnf[i], src + ti->offset, C, ti->name, r);
    }
    for (int l = 0; l < L && rc == WT_OK; l++)
      for (int i = 0; i < PARALLEL_TP_TENSORS && rc == WT_OK; i++) {
        snprintf(name, sizeof name, "h.%d.%s", l, s_block_names[i]);
        ti = s_tensor(st, name);
        p = parallel_tp_block_param(m->blk[l], (parallel_tp_tensor)i, &n);
        g = parallel_tp_block_grad(m->blk[l], (parallel_tp_tensor)i, NULL);
        if (pass == 1)
          for (size_t j = 0; j < n; j++) p[j] -= LR * g[j];
        parallel_tp_shard((parallel_tp_tensor)i, C, NH, r, t, src + ti->offset, shard);
        rc = s_close(pass ? p : g, shard, n, name, r);
      }
  }
  free(shard);
  return rc;
}

static int s_rank_fn(parallel_comm *world, void *arg) {
  s_ref *ref = arg;
  int t = parallel_comm_size(world), r = parallel_comm_rank(world), rc = WT_OK;
  parallel_mesh_shape shape = {.dp = 1, .pp = 1, .tp = t, .cp = 1, .ep = 1};
  parallel_mesh *mesh = parallel_mesh_new(world, &shape, 1);
  s_model *m = wt_xcalloc(1, sizeof *m);
  if (!mesh) {
    free(m);
    return WT_EINVAL;
  }
  m->tp = parallel_mesh_group(mesh, PARALLEL_GROUP_TP), m->sp = ref->sp;
  gpt_stage *st = ref->st;
  const float *pref = gpt_stage_params(st, NULL);
  m->voc = parallel_tp_vocab_new(mesh, kernels_ref(), V, C, T, B, T);
  const float *full[PARALLEL_TP_TENSORS];
  char name[64];
  for (int l = 0; l < L; l++) {
    m->blk[l] = parallel_tp_block_new(mesh, kernels_ref(), C, NH, B, T, ref->sp);
    for (int i = 0; i < PARALLEL_TP_TENSORS; i++) {
      snprintf(name, sizeof name, "h.%d.%s", l, s_block_names[i]);
      full[i] = pref + s_tensor(st, name)->offset;
    }
    parallel_tp_block_load(m->blk[l], full);
  }
  parallel_tp_vocab_load(m->voc, pref + s_tensor(st, "wte.weight")->offset,
                         pref + s_tensor(st, "wpe.weight")->offset);
  memcpy(m->lnf_w, pref + s_tensor(st, "ln_f.weight")->offset, sizeof m->lnf_w);
  memcpy(m->lnf_b, pref + s_tensor(st, "ln_f.bias")->offset, sizeof m->lnf_b);
  parallel_tp_block_rows(m->blk[0], B, T, &m->first, &m->rows);

  float loss = 0;
  int v0, vr;
  parallel_tp_vocab_range(m->voc, &v0, &vr);
  WT_CHECK_GOTO(s_step(m, ref, &loss), rc, done);
  /* This rank's columns of the logits, and only those: (N, vr). The backward overwrites them. */
  const float *lg = parallel_tp_vocab_logits(m->voc);
  for (int i = 0; i < N && rc == WT_OK; i++)
    rc = s_close(lg + (size_t)i * vr, ref->logits + (size_t)i * V + v0, (size_t)vr, "logits", r);
  if (rc != WT_OK) goto done;
  WT_CHECK_GOTO(s_backward(m), rc, done);
  if (fabsf(loss - gpt_stage_loss(st)) > 1e-5f + 1e-5f * fabsf(gpt_stage_loss(st))) {
    rc = wt_fail(WT_EMISMATCH, "rank %d: loss %.7f, single device %.7f", r, loss,
                 gpt_stage_loss(st));
    goto done;
  }
  rc = s_check_tensors(m, ref, r, t);
done:
  if (rc != WT_OK) fprintf(stderr, "rank %d: %s\n", r, wt_last_error());
  for (int l = 0; l < L; l++) parallel_tp_block_destroy(&m->blk[l]);
  parallel_tp_vocab_destroy(&m->voc);
  free(m);
  parallel_mesh_destroy(&mesh);
  return rc;
}

static void test_model(int t, int sp) {
  gpt_config cfg = {.vocab_size = V, .max_seq = T, .n_layer = L, .n_head = NH, .channels = C};
  s_ref ref = {.sp = sp};
  ref.st = gpt_stage_new(&cfg, 0, L, B, T);
  WT_TEST_REQUIRE(ref.st, "stage: %s", wt_last_error());
  gpt_stage_set_kernels(ref.st, kernels_ref());
  size_t np;
  float *params = gpt_stage_params(ref.st, &np), *grads = gpt_stage_grads(ref.st, NULL);
  s_rng = 0x2545f4914f6cdd1dull;
  for (size_t i = 0; i < np; i++) params[i] = 0.2f * s_uniform();
  for (int k = 0; k < gpt_stage_num_tensors(ref.st); k++) {
    const gpt_tensor_info *ti = gpt_stage_tensor(ref.st, k);
    if (strstr(ti->name, "ln_") && strstr(ti->name, "weight"))
      for (size_t j = 0; j < ti->numel; j++) params[ti->offset + j] += 1.0f;
  }
  for (int i = 0; i < N; i++) ref.tokens[i] = (int)(fabsf(s_uniform()) * V) % V;
  for (int i = 0; i < N; i++) ref.targets[i] = (int)(fabsf(s_uniform()) * V) % V;
  gpt_stage_zero_grad(ref.st);
  WT_TEST_REQUIRE(gpt_stage_forward(ref.st, ref.tokens, NULL, ref.targets, B, T, NULL) == WT_OK,
                  "%s", wt_last_error());
  memcpy(ref.logits, gpt_stage_logits(ref.st), sizeof ref.logits);
  WT_TEST_REQUIRE(gpt_stage_backward(ref.st, NULL, NULL, 1.0f) == WT_OK, "%s", wt_last_error());
  float *next = wt_xmalloc(sizeof(float) * np);
  for (size_t i = 0; i < np; i++) next[i] = params[i] - LR * grads[i];
  ref.next = next;
  parallel_inproc_group *g = parallel_inproc_group_new(t);
  parallel_inproc_group_set_timeout(g, 30);
  int rc = parallel_inproc_run(g, s_rank_fn, &ref, NULL);
  WT_TEST_ASSERT(rc == WT_OK, "model tp %d sp %d failed (rank messages above)", t, sp);
  printf("model tp %d sequence-parallel %d: loss %.6f %s\n", t, sp, gpt_stage_loss(ref.st),
         rc == WT_OK ? "matches" : "DIFFERS");
  parallel_inproc_group_destroy(&g);
  free(next);
  gpt_stage_destroy(&ref.st);
}

/* A token outside the vocabulary is refused on every rank, before any message is sent. */
static int s_bad_token_fn(parallel_comm *world, void *arg) {
  (void)arg;
  parallel_mesh_shape shape = {.dp = 1, .pp = 1, .tp = parallel_comm_size(world), .cp = 1, .ep = 1};
  parallel_mesh *mesh = parallel_mesh_new(world, &shape, 1);
  parallel_tp_vocab *v = parallel_tp_vocab_new(mesh, kernels_ref(), V, C, T, B, T);
  int tokens[N] = {0}, rc = WT_EINVAL;
  float *out = wt_xcalloc(N * C, sizeof(float));
  tokens[5] = V;
  if (parallel_tp_vocab_embed(v, tokens, B, T, out) == WT_EINVAL &&
      strstr(wt_last_error(), "outside [0, 67)"))
    rc = WT_OK;
  free(out);
  parallel_tp_vocab_destroy(&v);
  parallel_mesh_destroy(&mesh);
  return rc;
}

int main(void) {
  for (int sp = 0; sp <= 1; sp++) {
    test_model(1, sp);
    test_model(2, sp);
    test_model(4, sp);
  }
  parallel_inproc_group *g = parallel_inproc_group_new(2);
  WT_TEST_ASSERT(parallel_inproc_run(g, s_bad_token_fn, NULL, NULL) == WT_OK,
                 "bad token not refused with a message");
  parallel_inproc_group_destroy(&g);
  return wt_test_failures ? 1 : 0;
}
