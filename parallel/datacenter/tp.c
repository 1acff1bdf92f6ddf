/* tp — a tensor-parallel (and optionally sequence-parallel) GPT-2 block over the kernels ops table
 * and the mesh's TP group (tp.h). */
#include "parallel/datacenter/tp.h"

#include "common/common.h"
#include "kernels/kernels.h"
#include "parallel/datacenter/cp.h"
#include "parallel/datacenter/group.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

struct parallel_tp_block {
  const parallel_group_comm *tp; /* its table also says where the buffers live */
  const kernels_ops *k;
  parallel_cp_attention *cpa; /* ring attention over the CP group; NULL without CP */
  int C, NH, t, rank, sp, max_rows, max_B, max_T, c;
  int Cl, NHl; /* this rank's channels (C/t) and heads (NH/t) */
  float *params, *grads;
  size_t off[PARALLEL_TP_TENSORS + 1];
  /* Forward state of the last call. "full" buffers hold all N = B·T rows, the others this
   * rank's rows (all N without SP). */
  int B, T, N, rows, row0;
  const float *x;                          // (rows, C)
  float *ln1, *ln1_mean, *ln1_rstd;        // (rows, C), (rows), (rows)
  float *ln1_full;                         // (N, C)    input of the column-parallel c_attn
  float *qkv, *att, *atty;                 // (N, 3Cl), (B, NHl, T, T), (N, Cl)
  float *res1, *ln2, *ln2_mean, *ln2_rstd; // (rows, C) ...
  float *ln2_full;                         // (N, C)
  float *fc, *gelu;                        // (N, 4Cl)
  float *red;                              // (N, C)    partial sums to reduce (g) / gather
  /* Backward scratch. */
  float *d_full, *d_rows, *d_res1;       // (N, C), (rows, C), (rows, C)
  float *d_gelu, *d_fc, *d_atty, *d_qkv; // (N, 4Cl) ×2, (N, Cl), (N, 3Cl)
  float *d_scratch;                      // (B, NHl, T, T)
  float *d_ln;                           // (4C) LayerNorm gradients of one backward
};

static size_t s_numel(parallel_tp_tensor i, int C, int Cl) {
  switch (i) {
  case PARALLEL_TP_QKV_W:
    return (size_t)C * 3 * Cl;
  case PARALLEL_TP_QKV_B:
    return (size_t)3 * Cl;
  case PARALLEL_TP_ATTN_PROJ_W:
    return (size_t)Cl * C;
  case PARALLEL_TP_FC_W:
    return (size_t)C * 4 * Cl;
  case PARALLEL_TP_FC_B:
    return (size_t)4 * Cl;
  case PARALLEL_TP_FC_PROJ_W:
    return (size_t)4 * Cl * C;
  default:
    return (size_t)C; /* replicated LayerNorm parameters and row-parallel biases */
  }
}

void parallel_tp_shard(parallel_tp_tensor i, int C, int NH, int r, int t, const float *full,
                       float *local) {
  (void)NH; /* heads are contiguous column blocks of C/NH, so a C/t slice holds NH/t of them */
  int Cl = C / t;
  switch (i) {
  case PARALLEL_TP_QKV_W: /* (C, 3C): from each of q, k, v take this rank's Cl columns */
    for (int row = 0; row < C; row++)
      for (int part = 0; part < 3; part++)
        memcpy(local + (size_t)row * 3 * Cl + (size_t)part * Cl,
               full + (size_t)row * 3 * C + (size_t)part * C + (size_t)r * Cl, sizeof(float) * Cl);
    return;
  case PARALLEL_TP_QKV_B:
    for (int part = 0; part < 3; part++)
      memcpy(local + part * Cl, full + part * C + r * Cl, sizeof(float) * Cl);
    return;
  case PARALLEL_TP_ATTN_PROJ_W: /* (C, C): rows r·Cl.. */
    memcpy(local, full + (size_t)r * Cl * C, sizeof(float) * Cl * C);
    return;
  case PARALLEL_TP_FC_W: /* (C, 4C): columns r·4Cl.. */
    for (int row = 0; row < C; row++)
      memcpy(local + (size_t)row * 4 * Cl, full + (size_t)row * 4 * C + (size_t)r * 4 * Cl,
             sizeof(float) * 4 * Cl);
    return;
  case PARALLEL_TP_FC_B:
    memcpy(local, full + r * 4 * Cl, sizeof(float) * 4 * Cl);
    return;
  case PARALLEL_TP_FC_PROJ_W: /* (4C, C): rows r·4Cl.. */
    memcpy(local, full + (size_t)r * 4 * Cl * C, sizeof(float) * 4 * Cl * C);
    return;
  default:
    memcpy(local, full, sizeof(float) * C);
    return;
  }
}

/* full[at + j] += local[j] for j < n. */
static void s_add(float *full, const float *local, size_t n) {
  for (size_t j = 0; j < n; j++) full[j] += local[j];
}

void parallel_tp_unshard_add(parallel_tp_tensor i, int C, int NH, int r, int t, const float *local,
                             float *full) {
  (void)NH; /* the same head-contiguous layout as parallel_tp_shard */
  int Cl = C / t;
  switch (i) {
  case PARALLEL_TP_QKV_W:
    for (int row = 0; row < C; row++)
      for (int part = 0; part < 3; part++)
        s_add(full + (size_t)row * 3 * C + (size_t)part * C + (size_t)r * Cl,
              local + (size_t)row * 3 * Cl + (size_t)part * Cl, (size_t)Cl);
    return;
  case PARALLEL_TP_QKV_B:
    for (int part = 0; part < 3; part++) s_add(full + part * C + r * Cl, local + part * Cl, Cl);
    return;
  case PARALLEL_TP_ATTN_PROJ_W:
    s_add(full + (size_t)r * Cl * C, local, (size_t)Cl * C);
    return;
  case PARALLEL_TP_FC_W:
    for (int row = 0; row < C; row++)
      s_add(full + (size_t)row * 4 * C + (size_t)r * 4 * Cl, local + (size_t)row * 4 * Cl,
            (size_t)4 * Cl);
    return;
  case PARALLEL_TP_FC_B:
    s_add(full + r * 4 * Cl, local, (size_t)4 * Cl);
    return;
  case PARALLEL_TP_FC_PROJ_W:
    s_add(full + (size_t)r * 4 * Cl * C, local, (size_t)4 * Cl * C);
    return;
  default:
    s_add(full, local, (size_t)C);
    return;
  }
}

int parallel_tp_replicated(parallel_tp_tensor i) {
  return i != PARALLEL_TP_QKV_W && i != PARALLEL_TP_QKV_B && i != PARALLEL_TP_ATTN_PROJ_W &&
         i != PARALLEL_TP_FC_W && i != PARALLEL_TP_FC_B && i != PARALLEL_TP_FC_PROJ_W;
}

parallel_tp_block *parallel_tp_block_new(const parallel_mesh *mesh, const kernels_ops *k, int C,
                                         int NH, int max_B, int max_T, int sp) {
  const parallel_group_comm *tp = parallel_mesh_coll(mesh, PARALLEL_GROUP_TP);
  int t = tp->size;
  if (C < 1 || NH < 1 || C % NH || NH % t || max_B < 1 || max_T < 1) {
    wt_fail(WT_EINVAL,
            "tp block: %d heads must divide %d channels and be a multiple of the TP degree %d "
            "(batch %d × %d must be positive); pick a TP degree that divides the heads",
            NH, C, t, max_B, max_T);
    return NULL;
  }
  parallel_tp_block *b = wt_xcalloc(1, sizeof *b);
  b->tp = tp, b->k = k, b->C = C, b->NH = NH, b->t = t, b->rank = tp->rank;
  b->sp = sp != 0, b->max_B = max_B, b->max_T = max_T, b->max_rows = max_B * max_T;
  b->Cl = C / t, b->NHl = NH / t;
  b->c = parallel_comm_size(parallel_mesh_group(mesh, PARALLEL_GROUP_CP));
  if (b->c > 1 && tp->ops->device_buffers) {
    wt_fail(WT_ENOTSUP,
            "tp block: ring attention runs on host buffers, but the TP group's back "
            "end (%s) keeps device buffers; use CP = 1 on a device back end",
            tp->ops->name);
    free(b);
    return NULL;
  }
  if (b->c > 1) { /* this rank's heads, over the ranks that share its TP coordinate */
    b->cpa = parallel_cp_attention_new(mesh, b->Cl, b->NHl, max_B, max_T);
    if (!b->cpa) {
      free(b);
      return NULL;
    }
  }
  for (int i = 0; i < PARALLEL_TP_TENSORS; i++)
    b->off[i + 1] = b->off[i] + s_numel((parallel_tp_tensor)i, C, b->Cl);
  size_t N = (size_t)b->max_rows, NC = N * C, Cl = (size_t)b->Cl, P = b->off[PARALLEL_TP_TENSORS];
  /* The probabilities of the whole-sequence attention op; ring attention keeps its own state. */
  size_t att = b->cpa ? 0 : (size_t)max_B * b->NHl * max_T * max_T;
  const struct {
    float **p;
    size_t n;
  } bufs[] = {{&b->params, P},
              {&b->grads, P},
              {&b->ln1, NC},
              {&b->ln1_mean, N},
              {&b->ln1_rstd, N},
              {&b->ln1_full, NC},
              {&b->qkv, N * 3 * Cl},
              {&b->att, att},
              {&b->atty, N * Cl},
              {&b->res1, NC},
              {&b->ln2, NC},
              {&b->ln2_mean, N},
              {&b->ln2_rstd, N},
              {&b->ln2_full, NC},
              {&b->fc, N * 4 * Cl},
              {&b->gelu, N * 4 * Cl},
              {&b->red, NC},
              {&b->d_full, NC},
              {&b->d_rows, NC},
              {&b->d_res1, NC},
              {&b->d_gelu, N * 4 * Cl},
              {&b->d_fc, N * 4 * Cl},
              {&b->d_atty, N * Cl},
              {&b->d_qkv, N * 3 * Cl},
              {&b->d_scratch, att},
              {&b->d_ln, 4 * (size_t)C}};
  for (size_t i = 0; i < WT_ARRAY_LEN(bufs); i++) {
    *bufs[i].p = parallel_group_alloc(tp, bufs[i].n);
    if (!*bufs[i].p) { /* a device allocation failed: keep its status */
      int code = wt_last_status();
      parallel_tp_block_destroy(&b);
      wt_fail(code ? code : WT_ENOMEM, "tp block: cannot allocate its buffers on the %s back end",
              tp->ops->name);
      return NULL;
    }
  }
  return b;
}

void parallel_tp_block_destroy(parallel_tp_block **self_p) {
  if (!self_p || !*self_p) return;
  parallel_tp_block *b = *self_p;
  float *bufs[] = {b->params,    b->grads,    b->ln1,    b->ln1_mean, b->ln1_rstd, b->ln1_full,
                   b->qkv,       b->att,      b->atty,   b->res1,     b->ln2,      b->ln2_mean,
                   b->ln2_rstd,  b->ln2_full, b->fc,     b->gelu,     b->red,      b->d_full,
                   b->d_rows,    b->d_res1,   b->d_gelu, b->d_fc,     b->d_atty,   b->d_qkv,
                   b->d_scratch, b->d_ln};
  for (size_t i = 0; i < WT_ARRAY_LEN(bufs); i++) parallel_group_free(b->tp, bufs[i]);
  parallel_cp_attention_destroy(&b->cpa);
  free(b);
  *self_p = NULL;
}

float *parallel_tp_block_param(parallel_tp_block *b, parallel_tp_tensor i, size_t *n) {
  if (n) *n = b->off[i + 1] - b->off[i];
  return b->params + b->off[i];
}

float *parallel_tp_block_grad(parallel_tp_block *b, parallel_tp_tensor i, size_t *n) {
  if (n) *n = b->off[i + 1] - b->off[i];
  return b->grads + b->off[i];
}

float *parallel_tp_block_params(parallel_tp_block *b, size_t *n) {
  if (n) *n = b->off[PARALLEL_TP_TENSORS];
  return b->params;
}

float *parallel_tp_block_grads(parallel_tp_block *b, size_t *n) {
  if (n) *n = b->off[PARALLEL_TP_TENSORS];
  return b->grads;
}

int parallel_tp_block_zero_grad(parallel_tp_block *b) {
  return parallel_group_zero(b->tp, b->grads, sizeof(float) * b->off[PARALLEL_TP_TENSORS]);
}

int parallel_tp_block_load(parallel_tp_block *b, const float *const full[PARALLEL_TP_TENSORS]) {
  float *shard = wt_xmalloc(sizeof(float) * b->off[PARALLEL_TP_TENSORS]);
  for (int i = 0; i < PARALLEL_TP_TENSORS; i++)
    parallel_tp_shard((parallel_tp_tensor)i, b->C, b->NH, b->rank, b->t, full[i],
                      shard + b->off[i]);
  int rc =
      parallel_group_upload(b->tp, b->params, shard, sizeof(float) * b->off[PARALLEL_TP_TENSORS]);
  free(shard);
  return rc;
}

void parallel_tp_block_rows(const parallel_tp_block *b, int B, int T, int *first, int *count) {
  int N = B * T / b->c;
  if (!b->sp) {
    *first = 0, *count = N;
    return;
  }
  /* A group reduce-scatter leaves chunk (rank + 1) mod t on this rank (group.h). */
  size_t off, len;
  parallel_chunk_range((size_t)N, b->t, (b->rank + 1) % b->t, &off, &len);
  *first = (int)off, *count = (int)len;
}

/* ---- the conjugate operators --------------------------------------------------------------- */

/* f forward / g backward: make the full (N, C) input of a column-parallel matmul from this rank's
 * rows. Without SP the rows are the full input (returned as is); with SP an all-gather. */
static int s_gather(parallel_tp_block *b, const float *rows, float *full, const float **out) {
  if (!b->sp) {
    *out = rows;
    return WT_OK;
  }
  size_t C = (size_t)b->C;
  WT_CHECK(parallel_group_copy(b->tp, full + (size_t)b->row0 * C, rows,
                               sizeof(float) * (size_t)b->rows * C));
  *out = full;
  return parallel_group_allgather(b->tp, full, (size_t)b->N * C);
}

/* g forward / f backward: sum the partial (N, C) results of the ranks and leave this rank's rows
 * in `rows`. Without SP an all-reduce, with SP a reduce-scatter. */
static int s_reduce(parallel_tp_block *b, float *partial, float *rows) {
  size_t C = (size_t)b->C, n = (size_t)b->N * C;
  if (b->sp)
    WT_CHECK(parallel_group_reduce_scatter(b->tp, partial, n, PARALLEL_OP_SUM));
  else
    WT_CHECK(parallel_group_allreduce(b->tp, partial, n, PARALLEL_OP_SUM));
  return parallel_group_copy(b->tp, rows, partial + (size_t)b->row0 * C,
                             sizeof(float) * (size_t)b->rows * C);
}

/* A row-parallel matmul's bias, replicated: TP rank 0 adds it to its partial product, so the
 * reduction adds it once (in the matmul, not as one op per row afterwards). */
static const float *s_row_bias(const parallel_tp_block *b, parallel_tp_tensor bias) {
  return b->tp->rank == 0 ? parallel_tp_block_param((parallel_tp_block *)b, bias, NULL) : NULL;
}

/* ---- forward --------------------------------------------------------------------------------- */

int parallel_tp_block_forward(parallel_tp_block *b, const float *x, float *out, int B, int T) {
  if (B < 1 || T < 1 || B > b->max_B || T > b->max_T || (b->c > 1 && T % (2 * b->c)) ||
      (b->sp && (B * T / b->c) % b->t))
    return wt_fail(WT_EINVAL,
                   "tp block: batch %d × %d exceeds %d × %d, or T is not a multiple of 2 × CP %d, "
                   "or (with SP) the rows do not split over TP %d",
                   B, T, b->max_B, b->max_T, b->c, b->t);
  const kernels_ops *k = b->k;
  int C = b->C, Cl = b->Cl;
  b->B = B, b->T = T, b->N = B * T / b->c, b->x = x;
  parallel_tp_block_rows(b, B, T, &b->row0, &b->rows);
  int N = b->N, R = b->rows;
  const float *in = NULL;

  /* attention: LN (rows) → f → column-parallel c_attn → local heads → row-parallel c_proj → g */
  k->layernorm_forward(b->ln1, b->ln1_mean, b->ln1_rstd, x,
                       parallel_tp_block_param(b, PARALLEL_TP_LN1_W, NULL),
                       parallel_tp_block_param(b, PARALLEL_TP_LN1_B, NULL), R, C);
  WT_CHECK(s_gather(b, b->ln1, b->ln1_full, &in));
  k->matmul_forward(b->qkv, in, parallel_tp_block_param(b, PARALLEL_TP_QKV_W, NULL),
                    parallel_tp_block_param(b, PARALLEL_TP_QKV_B, NULL), N, C, 3 * Cl,
                    KERNELS_W_IN_OUT);
  if (b->cpa)
    WT_CHECK(parallel_cp_attention_forward(b->cpa, b->atty, b->qkv, B, T));
  else
    k->attention_forward(b->atty, b->att, b->qkv, B, T, Cl, b->NHl);
  k->matmul_forward(b->red, b->atty, parallel_tp_block_param(b, PARALLEL_TP_ATTN_PROJ_W, NULL),
                    s_row_bias(b, PARALLEL_TP_ATTN_PROJ_B), N, Cl, C, KERNELS_W_IN_OUT);
  WT_CHECK(s_reduce(b, b->red, b->d_rows));
  k->residual_forward(b->res1, x, b->d_rows, (size_t)R * C);

  /* MLP: LN (rows) → f → column-parallel c_fc → GELU → row-parallel c_proj → g */
  k->layernorm_forward(b->ln2, b->ln2_mean, b->ln2_rstd, b->res1,
                       parallel_tp_block_param(b, PARALLEL_TP_LN2_W, NULL),
                       parallel_tp_block_param(b, PARALLEL_TP_LN2_B, NULL), R, C);
  WT_CHECK(s_gather(b, b->ln2, b->ln2_full, &in));
  k->matmul_forward(b->fc, in, parallel_tp_block_param(b, PARALLEL_TP_FC_W, NULL),
                    parallel_tp_block_param(b, PARALLEL_TP_FC_B, NULL), N, C, 4 * Cl,
                    KERNELS_W_IN_OUT);
  k->gelu_forward(b->gelu, b->fc, (size_t)N * 4 * Cl);
  k->matmul_forward(b->red, b->gelu, parallel_tp_block_param(b, PARALLEL_TP_FC_PROJ_W, NULL),
                    s_row_bias(b, PARALLEL_TP_FC_PROJ_B), N, 4 * Cl, C, KERNELS_W_IN_OUT);
  WT_CHECK(s_reduce(b, b->red, b->d_rows));
  k->residual_forward(out, b->res1, b->d_rows, (size_t)R * C);
  return WT_OK;
}

/* ---- backward -------------------------------------------------------------------------------- */

/* The gradient of one row-parallel matmul and what feeds it: dout_rows (this rank's rows) is
 * gathered (g backward), pushed through the matmul into d_in (N, K) of the local columns. The
 * bias gradient is taken over the gathered rows, so it is complete on every rank. */
static int s_back_row_parallel(parallel_tp_block *b, const float *dout_rows, const float *inp,
                               parallel_tp_tensor w, float *d_in, int K) {
  const float *dout = NULL;
  WT_CHECK(s_gather(b, dout_rows, b->d_full, &dout));
  WT_CHECK(parallel_group_zero(b->tp, d_in, sizeof(float) * (size_t)b->N * K));
  b->k->matmul_backward(d_in, parallel_tp_block_grad(b, w, NULL),
                        parallel_tp_block_grad(b, (parallel_tp_tensor)(w + 1), NULL), dout, inp,
                        parallel_tp_block_param(b, w, NULL), b->N, K, b->C, KERNELS_W_IN_OUT);
  return WT_OK;
}

/* The gradient through one column-parallel matmul (weight w, input the LN output `ln_in` of all
 * rows), summed over the ranks (f backward) into d_rows, then through the LayerNorm (weights
 * lnw) into dx_rows (+=); LayerNorm gradients go to d_ln (2C, summed over ranks later with SP). */
static int s_back_col_parallel(parallel_tp_block *b, const float *d_out_local, const float *ln_in,
                               parallel_tp_tensor w, int OC, const float *ln_x,
                               parallel_tp_tensor lnw, const float *mean, const float *rstd,
                               float *d_ln, float *dx_rows) {
  int C = b->C;
  WT_CHECK(parallel_group_zero(b->tp, b->red, sizeof(float) * (size_t)b->N * C));
  b->k->matmul_backward(b->red, parallel_tp_block_grad(b, w, NULL),
                        parallel_tp_block_grad(b, (parallel_tp_tensor)(w + 1), NULL), d_out_local,
                        ln_in, parallel_tp_block_param(b, w, NULL), b->N, C, OC, KERNELS_W_IN_OUT);
  WT_CHECK(s_reduce(b, b->red, b->d_rows));
  b->k->layernorm_backward(dx_rows, d_ln, d_ln + C, b->d_rows, ln_x,
                           parallel_tp_block_param(b, lnw, NULL), mean, rstd, b->rows, C);
  return WT_OK;
}

int parallel_tp_block_backward(parallel_tp_block *b, const float *dout, float *dx) {
  const kernels_ops *k = b->k;
  int C = b->C, Cl = b->Cl, N = b->N, R = b->rows;
  size_t RC = (size_t)R * C;
  const float *ln1_in = b->sp ? b->ln1_full : b->ln1, *ln2_in = b->sp ? b->ln2_full : b->ln2;
  /* Without SP the LayerNorm gradients are already complete on each rank and go straight into
   * the gradients; with SP they are partial sums over this rank's rows, collected in d_ln. */
  float *d_ln1 = b->d_ln, *d_ln2 = b->d_ln + 2 * C;
  WT_CHECK(parallel_group_zero(b->tp, b->d_ln, sizeof(float) * 4 * (size_t)C));

  /* MLP branch: out = res1 + mlp(res1) */
  WT_CHECK(parallel_group_copy(b->tp, b->d_res1, dout, sizeof(float) * RC));
  WT_CHECK(s_back_row_parallel(b, dout, b->gelu, PARALLEL_TP_FC_PROJ_W, b->d_gelu, 4 * Cl));
  WT_CHECK(parallel_group_zero(b->tp, b->d_fc, sizeof(float) * (size_t)N * 4 * Cl));
  k->gelu_backward(b->d_fc, b->fc, b->d_gelu, (size_t)N * 4 * Cl);
  WT_CHECK(s_back_col_parallel(b, b->d_fc, ln2_in, PARALLEL_TP_FC_W, 4 * Cl, b->res1,
                               PARALLEL_TP_LN2_W, b->ln2_mean, b->ln2_rstd, d_ln2, b->d_res1));

  /* attention branch: res1 = x + attn(x) */
  WT_CHECK(s_back_row_parallel(b, b->d_res1, b->atty, PARALLEL_TP_ATTN_PROJ_W, b->d_atty, Cl));
  WT_CHECK(parallel_group_zero(b->tp, b->d_qkv, sizeof(float) * (size_t)N * 3 * Cl));
  if (b->cpa)
    WT_CHECK(parallel_cp_attention_backward(b->cpa, b->d_qkv, b->d_atty));
  else
    k->attention_backward(b->d_qkv, b->d_scratch, b->d_atty, b->qkv, b->att, b->B, b->T, Cl,
                          b->NHl);
  WT_CHECK(s_back_col_parallel(b, b->d_qkv, ln1_in, PARALLEL_TP_QKV_W, 3 * Cl, b->x,
                               PARALLEL_TP_LN1_W, b->ln1_mean, b->ln1_rstd, d_ln1, dx));
  k->residual_forward(dx, dx, b->d_res1, RC); /* the residual's skip path */

  if (b->sp) WT_CHECK(parallel_group_allreduce(b->tp, b->d_ln, 4 * (size_t)C, PARALLEL_OP_SUM));
  const parallel_tp_tensor ln[4] = {PARALLEL_TP_LN1_W, PARALLEL_TP_LN1_B, PARALLEL_TP_LN2_W,
                                    PARALLEL_TP_LN2_B};
  for (int i = 0; i < 4; i++) {
    float *g = parallel_tp_block_grad(b, ln[i], NULL);
    k->residual_forward(g, g, b->d_ln + (size_t)i * C, (size_t)C);
  }
  return WT_OK;
}
