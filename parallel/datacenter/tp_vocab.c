/* tp_vocab — the vocabulary-parallel token embedding, tied LM head and parallel cross-entropy
 * (tp.h): wte split by rows over the TP group, logits never gathered. */
#include "parallel/datacenter/tp.h"

#include "common/common.h"
#include "kernels/kernels.h"
#include "parallel/datacenter/cp.h"
#include "parallel/datacenter/group.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct parallel_tp_vocab {
  const parallel_group_comm *tp;
  const kernels_ops *k;
  int V, C, max_pos, max_rows, max_T, t, rank, v0, Vr;
  int c, cp_rank;                 /* the CP group: rows are this rank's positions of the sequence */
  float *wte, *wpe, *dwte, *dwpe; // (Vr, C), (max_pos, C) and their gradients
  /* State of the last embed / loss. */
  int *tokens, *targets; // (N)
  int *pos;              // (N) position of each row in its sequence
  int B, T, N;
  const float *h; // (N, C) input of the head (the caller's buffer, kept until backward)
  float *logits;  // (N, Vr)
  float *lse;     // (N) global log-sum-exp of each row
  float *exch;    // ((t + 1) N) per-rank log-sum-exps, then the target logits
  float *dh_part; // (N, C) this rank's partial input gradient of the head
};

parallel_tp_vocab *parallel_tp_vocab_new(const parallel_mesh *mesh, const kernels_ops *k, int V,
                                         int C, int max_pos, int max_B, int max_T) {
  const parallel_group_comm *tp = parallel_mesh_coll(mesh, PARALLEL_GROUP_TP);
  int t = tp->size;
  if (tp->ops->device_buffers) {
    wt_fail(WT_ENOTSUP,
            "tp vocab: its maths runs on host buffers, but the TP group's back end (%s) "
            "keeps device buffers; run this layer with the host back end",
            tp->ops->name);
    return NULL;
  }
  if (V < t || C < 1 || max_pos < max_T || max_B < 1 || max_T < 1) {
    wt_fail(WT_EINVAL,
            "tp vocab: vocabulary %d must have at least one row per rank (%d ranks), width %d "
            "and batch %d × %d positive, and wpe's %d rows cover the sequence",
            V, t, C, max_B, max_T, max_pos);
    return NULL;
  }
  parallel_tp_vocab *v = wt_xcalloc(1, sizeof *v);
  v->tp = tp, v->k = k, v->V = V, v->C = C, v->max_pos = max_pos, v->max_T = max_T;
  v->max_rows = max_B * max_T, v->t = t, v->rank = tp->rank;
  parallel_comm *cp = parallel_mesh_group(mesh, PARALLEL_GROUP_CP);
  v->c = parallel_comm_size(cp), v->cp_rank = parallel_comm_rank(cp);
  size_t off, len;
  parallel_chunk_range((size_t)V, t, v->rank, &off, &len);
  v->v0 = (int)off, v->Vr = (int)len;
  size_t N = (size_t)v->max_rows;
  v->wte = wt_xcalloc((size_t)v->Vr * C, sizeof(float));
  v->dwte = wt_xcalloc((size_t)v->Vr * C, sizeof(float));
  v->wpe = wt_xcalloc((size_t)max_pos * C, sizeof(float));
  v->dwpe = wt_xcalloc((size_t)max_pos * C, sizeof(float));
  v->tokens = wt_xcalloc(N, sizeof(int)), v->targets = wt_xcalloc(N, sizeof(int));
  v->pos = wt_xcalloc(N, sizeof(int));
  v->logits = wt_xcalloc(N * v->Vr, sizeof(float)), v->lse = wt_xcalloc(N, sizeof(float));
  v->exch = wt_xcalloc(N * (size_t)(t + 1), sizeof(float));
  v->dh_part = wt_xcalloc(N * (size_t)C, sizeof(float));
  return v;
}

void parallel_tp_vocab_destroy(parallel_tp_vocab **self_p) {
  if (!self_p || !*self_p) return;
  parallel_tp_vocab *v = *self_p;
  free(v->wte), free(v->dwte), free(v->wpe), free(v->dwpe), free(v->tokens), free(v->targets),
      free(v->pos);
  free(v->logits), free(v->lse), free(v->exch), free(v->dh_part);
  free(v);
  *self_p = NULL;
}

void parallel_tp_vocab_range(const parallel_tp_vocab *v, int *first, int *count) {
  *first = v->v0, *count = v->Vr;
}

float *parallel_tp_vocab_wte(parallel_tp_vocab *v, size_t *n) {
  if (n) *n = (size_t)v->Vr * v->C;
  return v->wte;
}
float *parallel_tp_vocab_wpe(parallel_tp_vocab *v, size_t *n) {
  if (n) *n = (size_t)v->max_pos * v->C;
  return v->wpe;
}
float *parallel_tp_vocab_wte_grad(parallel_tp_vocab *v, size_t *n) {
  if (n) *n = (size_t)v->Vr * v->C;
  return v->dwte;
}
float *parallel_tp_vocab_wpe_grad(parallel_tp_vocab *v, size_t *n) {
  if (n) *n = (size_t)v->max_pos * v->C;
  return v->dwpe;
}

void parallel_tp_vocab_zero_grad(parallel_tp_vocab *v) {
  memset(v->dwte, 0, sizeof(float) * (size_t)v->Vr * v->C);
  memset(v->dwpe, 0, sizeof(float) * (size_t)v->max_pos * v->C);
}

void parallel_tp_vocab_load(parallel_tp_vocab *v, const float *wte_full, const float *wpe_full) {
  memcpy(v->wte, wte_full + (size_t)v->v0 * v->C, sizeof(float) * (size_t)v->Vr * v->C);
  if (wpe_full) memcpy(v->wpe, wpe_full, sizeof(float) * (size_t)v->max_pos * v->C);
}

/* Checks ids and the batch before anything is sent, so every rank refuses the same input
 * together instead of leaving its peers waiting in a collective. */
static int s_check(const parallel_tp_vocab *v, const int *ids, int B, int T, const char *what) {
  if (B < 1 || T < 1 || T > v->max_T || B * T > v->max_rows || (v->c > 1 && T % (2 * v->c)))
    return wt_fail(WT_EINVAL,
                   "tp vocab: batch %d × %d is larger than the layer was made for, or T is not a "
                   "multiple of 2 × CP %d",
                   B, T, v->c);
  for (int i = 0; i < B * T / v->c; i++)
    if (ids[i] < 0 || ids[i] >= v->V)
      return wt_fail(WT_EINVAL, "tp vocab: %s %d at position %d is outside [0, %d)", what, ids[i],
                     i, v->V);
  return WT_OK;
}

int parallel_tp_vocab_embed(parallel_tp_vocab *v, const int *tokens, int B, int T, float *out) {
  WT_CHECK(s_check(v, tokens, B, T, "token"));
  int C = v->C, N = B * T / v->c, Tl = T / v->c;
  v->B = B, v->T = T, v->N = N;
  for (int i = 0; i < N; i++) v->pos[i] = parallel_cp_position(v->c, v->cp_rank, T, i % Tl);
  memcpy(v->tokens, tokens, sizeof(int) * (size_t)N);
  memset(out, 0, sizeof(float) * (size_t)N * C);
  for (int i = 0; i < N; i++) {
    int row = tokens[i] - v->v0;
    if (row >= 0 && row < v->Vr)
      memcpy(out + (size_t)i * C, v->wte + (size_t)row * C, sizeof(float) * C);
  }
  WT_CHECK(parallel_group_allreduce(v->tp, out, (size_t)N * C, PARALLEL_OP_SUM));
  for (int i = 0; i < N; i++)
    for (int j = 0; j < C; j++) out[(size_t)i * C + j] += v->wpe[(size_t)v->pos[i] * C + j];
  return WT_OK;
}

void parallel_tp_vocab_embed_backward(parallel_tp_vocab *v, const float *dout) {
  int C = v->C;
  for (int i = 0; i < v->N; i++) {
    const float *d = dout + (size_t)i * C;
    float *p = v->dwpe + (size_t)v->pos[i] * C;
    for (int j = 0; j < C; j++) p[j] += d[j];
    int row = v->tokens[i] - v->v0;
    if (row >= 0 && row < v->Vr)
      for (int j = 0; j < C; j++) v->dwte[(size_t)row * C + j] += d[j];
  }
}

int parallel_tp_vocab_loss(parallel_tp_vocab *v, const float *h, const int *targets, int B, int T,
                           float *loss) {
  WT_CHECK(s_check(v, targets, B, T, "target"));
  int N = B * T / v->c, Vr = v->Vr, t = v->t;
  v->B = B, v->T = T, v->N = N, v->h = h;
  memcpy(v->targets, targets, sizeof(int) * (size_t)N);
  v->k->matmul_forward(v->logits, h, v->wte, NULL, N, v->C, Vr, KERNELS_W_OUT_IN);
  /* Rows 0..t-1 of exch: each rank's log-sum-exp over its columns; row t: the target's logit,
   * written by the one rank that holds the target. The all-reduce (a sum) assembles them. */
  memset(v->exch, 0, sizeof(float) * (size_t)N * (t + 1));
  for (int i = 0; i < N; i++) {
    const float *x = v->logits + (size_t)i * Vr;
    float m = -INFINITY;
    for (int j = 0; j < Vr; j++) m = fmaxf(m, x[j]);
    double s = exp((double)x[0] - m); /* Vr >= 1: the constructor gives each rank a row */
    for (int j = 1; j < Vr; j++) s += exp((double)x[j] - m);
    v->exch[(size_t)v->rank * N + i] = m + (float)log(s);
    int col = targets[i] - v->v0;
    if (col >= 0 && col < Vr) v->exch[(size_t)t * N + i] = x[col];
  }
  WT_CHECK(parallel_group_allreduce(v->tp, v->exch, (size_t)N * (t + 1), PARALLEL_OP_SUM));
  double total = 0;
  for (int i = 0; i < N; i++) {
    float m = -INFINITY;
    for (int r = 0; r < t; r++) m = fmaxf(m, v->exch[(size_t)r * N + i]);
    double s = exp((double)v->exch[i] - m);
    for (int r = 1; r < t; r++) s += exp((double)v->exch[(size_t)r * N + i] - m);
    v->lse[i] = m + (float)log(s);
    total += (double)v->lse[i] - v->exch[(size_t)t * N + i];
  }
  *loss = (float)(total / N);
  return WT_OK;
}

const float *parallel_tp_vocab_logits(const parallel_tp_vocab *v) {
  return v->logits;
}

int parallel_tp_vocab_loss_backward(parallel_tp_vocab *v, float loss_scale, float *dh) {
  int N = v->N, Vr = v->Vr, C = v->C;
  float dloss = loss_scale / (float)N;
  /* In place: the logits become dlogits = (softmax − onehot)·dloss over this rank's columns. */
  for (int i = 0; i < N; i++) {
    float *x = v->logits + (size_t)i * Vr;
    int col = v->targets[i] - v->v0;
    for (int j = 0; j < Vr; j++) {
      float p = expf(x[j] - v->lse[i]);
      x[j] = (p - (j == col ? 1.0f : 0.0f)) * dloss;
    }
  }
  /* dh is a partial sum over the vocabulary: summed over the group into a scratch copy first,
   * since dh accumulates (+=) what the caller already holds. */
  float *part = v->dh_part;
  memset(part, 0, sizeof(float) * (size_t)N * C);
  v->k->matmul_backward(part, v->dwte, NULL, v->logits, v->h, v->wte, N, C, Vr, KERNELS_W_OUT_IN);
  WT_CHECK(parallel_group_allreduce(v->tp, part, (size_t)N * C, PARALLEL_OP_SUM));
  for (size_t i = 0; i < (size_t)N * C; i++) dh[i] += part[i];
  return WT_OK;
}
