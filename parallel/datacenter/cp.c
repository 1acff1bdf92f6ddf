/* cp — ring attention over the CP group with a load-balanced causal split (cp.h). */
#include "parallel/datacenter/cp.h"

#include "common/common.h"
#include "parallel/datacenter/group.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* User tags on the CP sub-communicator: K/V blocks and their gradient accumulators. */
enum { S_TAG_KV = 1, S_TAG_DKV = 2 };

struct parallel_cp_attention {
  const parallel_group_comm *cp;
  int C, NH, hs, c, rank, max_B, max_T;
  int B, T, Tl;     /* the last forward's shape; Tl = T / c local rows */
  float *qkv;       // (B, Tl, 3C) this rank's rows, copied at forward
  float *out;       // (B, Tl, C)
  float *lse;       // (B, NH, Tl) log-sum-exp of each query's scores
  float *m, *l;     // (B, NH, Tl) running max and normaliser
  float *kv, *dkv;  // (B, Tl, 2C) the visiting K/V block [k | v] and its gradient
  float *delta;     // (B, NH, Tl) Σ dO·O per query
  float *acc;       // (hs) one query's block sum
  int *qpos, *kpos; // (Tl) positions of this rank's rows and of the visiting block's rows
};

parallel_cp_attention *parallel_cp_attention_new(const parallel_mesh *mesh, int C, int NH,
                                                 int max_B, int max_T) {
  const parallel_group_comm *cp = parallel_mesh_coll(mesh, PARALLEL_GROUP_CP);
  int c = cp->size;
  if (cp->ops->device_buffers) {
    wt_fail(WT_ENOTSUP,
            "cp attention: its maths runs on host buffers, but the CP group's back end (%s) "
            "keeps device buffers; run this layer with the host back end",
            cp->ops->name);
    return NULL;
  }
  if (C < 1 || NH < 1 || C % NH || max_B < 1 || max_T < 1 || (c > 1 && max_T % (2 * c))) {
    wt_fail(WT_EINVAL,
            "cp attention: %d heads must divide %d channels, and the sequence %d must split into "
            "2 × %d equal chunks; pick a sequence length that is a multiple of %d",
            NH, C, max_T, c, 2 * c);
    return NULL;
  }
  parallel_cp_attention *a = wt_xcalloc(1, sizeof *a);
  a->cp = cp, a->C = C, a->NH = NH, a->hs = C / NH, a->c = c, a->rank = cp->rank;
  a->max_B = max_B, a->max_T = max_T;
  size_t rows = (size_t)max_B * (max_T / c), heads = rows * NH;
  a->qkv = wt_xcalloc(rows * 3 * C, sizeof(float));
  a->out = wt_xcalloc(rows * C, sizeof(float));
  a->lse = wt_xcalloc(heads, sizeof(float));
  a->m = wt_xcalloc(heads, sizeof(float)), a->l = wt_xcalloc(heads, sizeof(float));
  a->kv = wt_xcalloc(rows * 2 * C, sizeof(float));
  a->dkv = wt_xcalloc(rows * 2 * C, sizeof(float));
  a->delta = wt_xcalloc(heads, sizeof(float));
  a->acc = wt_xcalloc((size_t)a->hs, sizeof(float));
  a->qpos = wt_xcalloc((size_t)max_T, sizeof(int)),
  a->kpos = wt_xcalloc((size_t)max_T, sizeof(int));
  return a;
}

void parallel_cp_attention_destroy(parallel_cp_attention **self_p) {
  if (!self_p || !*self_p) return;
  parallel_cp_attention *a = *self_p;
  free(a->qkv), free(a->out), free(a->lse), free(a->m), free(a->l), free(a->kv), free(a->dkv);
  free(a->delta), free(a->acc), free(a->qpos), free(a->kpos);
  free(a);
  *self_p = NULL;
}

/* Rank `owner` holds chunk owner, then chunk 2c − 1 − owner. */
int parallel_cp_position(int c, int owner, int T, int i) {
  int S = T / (2 * c);
  return c == 1 ? i : i < S ? owner * S + i : (2 * c - 1 - owner) * S + (i - S);
}

static void s_positions(int c, int owner, int T, int *pos) {
  for (int i = 0; i < T / c; i++) pos[i] = parallel_cp_position(c, owner, T, i);
}

void parallel_cp_positions(const parallel_cp_attention *a, int T, int *pos) {
  s_positions(a->c, a->rank, T, pos);
}

/* Passes `buf` (n floats) one hop around the ring: send to rank + 1, receive from rank − 1 into
 * the same buffer (the back end's sendrecv allows that). */
static int s_ring_pass(parallel_cp_attention *a, int tag, float *buf, size_t n) {
  int c = a->c, next = (a->rank + 1) % c, prev = (a->rank + c - 1) % c;
  int rc = parallel_group_sendrecv(a->cp, tag, buf, next, buf, prev, n * sizeof(float));
  if (rc != WT_ECORRUPT) return rc;
  char why[256];
  snprintf(why, sizeof why, "%s", wt_last_error());
  return wt_fail(WT_ECORRUPT, "cp attention: %s; the ranks disagree on the batch shape", why);
}

static float s_dot(const float *x, const float *y, int n) {
  float s = 0;
  for (int i = 0; i < n; i++) s += x[i] * y[i];
  return s;
}

/* Merges the visiting block (positions kpos) into every query's running max, normaliser and
 * output sum (a->out holds the unnormalised sum during the ring). */
static void s_forward_block(parallel_cp_attention *a) {
  int C = a->C, hs = a->hs, Tl = a->Tl;
  float scale = 1.0f / sqrtf((float)hs);
  for (int b = 0; b < a->B; b++)
    for (int h = 0; h < a->NH; h++)
      for (int i = 0; i < Tl; i++) {
        const float *q = a->qkv + ((size_t)b * Tl + i) * 3 * C + h * hs;
        float mb = -INFINITY;
        for (int j = 0; j < Tl; j++)
          if (a->kpos[j] <= a->qpos[i])
            mb = fmaxf(mb, scale * s_dot(q, a->kv + ((size_t)b * Tl + j) * 2 * C + h * hs, hs));
        if (mb == -INFINITY) continue; /* the whole block lies in this query's future */
        float lb = 0;
        memset(a->acc, 0, sizeof(float) * (size_t)hs);
        for (int j = 0; j < Tl; j++) {
          if (a->kpos[j] > a->qpos[i]) continue;
          const float *k = a->kv + ((size_t)b * Tl + j) * 2 * C + h * hs, *v = k + C;
          float p = expf(scale * s_dot(q, k, hs) - mb);
          lb += p;
          for (int d = 0; d < hs; d++) a->acc[d] += p * v[d];
        }
        size_t hi = ((size_t)b * a->NH + h) * Tl + i;
        float m = a->m[hi], mn = fmaxf(m, mb), w_old = expf(m - mn), w_new = expf(mb - mn);
        float *o = a->out + ((size_t)b * Tl + i) * C + h * hs;
        for (int d = 0; d < hs; d++) o[d] = o[d] * w_old + a->acc[d] * w_new;
        a->l[hi] = a->l[hi] * w_old + lb * w_new;
        a->m[hi] = mn;
      }
}

/* The visiting block's rows start as this rank's own K and V. */
static void s_load_own_kv(parallel_cp_attention *a) {
  int C = a->C;
  for (size_t row = 0; row < (size_t)a->B * a->Tl; row++)
    memcpy(a->kv + row * 2 * C, a->qkv + row * 3 * C + C, sizeof(float) * 2 * (size_t)C);
}

int parallel_cp_attention_forward(parallel_cp_attention *a, float *out, const float *qkv, int B,
                                  int T) {
  int c = a->c;
  if (B < 1 || T < 1 || B > a->max_B || T > a->max_T || (c > 1 && T % (2 * c)))
    return wt_fail(WT_EINVAL,
                   "cp attention: batch %d × %d exceeds %d × %d or is not a multiple of 2 × %d", B,
                   T, a->max_B, a->max_T, c);
  int C = a->C, Tl = T / c;
  a->B = B, a->T = T, a->Tl = Tl;
  size_t rows = (size_t)B * Tl, heads = rows * a->NH;
  memcpy(a->qkv, qkv, sizeof(float) * rows * 3 * C);
  memset(a->out, 0, sizeof(float) * rows * C);
  memset(a->l, 0, sizeof(float) * heads);
  for (size_t i = 0; i < heads; i++) a->m[i] = -INFINITY;
  s_positions(c, a->rank, T, a->qpos);
  s_load_own_kv(a);
  for (int s = 0; s < c; s++) {
    s_positions(c, (a->rank - s + c) % c, T, a->kpos); /* the block's owner */
    s_forward_block(a);
    if (s < c - 1) WT_CHECK(s_ring_pass(a, S_TAG_KV, a->kv, rows * 2 * C));
  }
  /* Every query sees at least itself, so l > 0. */
  for (int b = 0; b < B; b++)
    for (int h = 0; h < a->NH; h++)
      for (int i = 0; i < Tl; i++) {
        size_t hi = ((size_t)b * a->NH + h) * Tl + i;
        float *o = a->out + ((size_t)b * Tl + i) * C + h * a->hs;
        for (int d = 0; d < a->hs; d++) o[d] /= a->l[hi];
        a->lse[hi] = a->m[hi] + logf(a->l[hi]);
      }
  memcpy(out, a->out, sizeof(float) * rows * C);
  return WT_OK;
}

/* Gradients from one visiting block: dq into dqkv's q columns, dk and dv into a->dkv. */
static void s_backward_block(parallel_cp_attention *a, float *dqkv, const float *dout) {
  int C = a->C, hs = a->hs, Tl = a->Tl;
  float scale = 1.0f / sqrtf((float)hs);
  for (int b = 0; b < a->B; b++)
    for (int h = 0; h < a->NH; h++)
      for (int i = 0; i < Tl; i++) {
        size_t row = (size_t)b * Tl + i, hi = ((size_t)b * a->NH + h) * Tl + i;
        const float *q = a->qkv + row * 3 * C + h * hs, *dO = dout + row * C + h * hs;
        float *dq = dqkv + row * 3 * C + h * hs;
        for (int j = 0; j < Tl; j++) {
          if (a->kpos[j] > a->qpos[i]) continue;
          const float *k = a->kv + ((size_t)b * Tl + j) * 2 * C + h * hs, *v = k + C;
          float *dk = a->dkv + ((size_t)b * Tl + j) * 2 * C + h * hs, *dv = dk + C;
          float p = expf(scale * s_dot(q, k, hs) - a->lse[hi]);
          float ds = p * (s_dot(dO, v, hs) - a->delta[hi]);
          for (int d = 0; d < hs; d++) {
            dv[d] += p * dO[d];
            dq[d] += scale * ds * k[d];
            dk[d] += scale * ds * q[d];
          }
        }
      }
}

int parallel_cp_attention_backward(parallel_cp_attention *a, float *dqkv, const float *dout) {
  int C = a->C, c = a->c, Tl = a->Tl, hs = a->hs;
  size_t rows = (size_t)a->B * Tl;
  for (int b = 0; b < a->B; b++)
    for (int h = 0; h < a->NH; h++)
      for (int i = 0; i < Tl; i++) {
        size_t row = (size_t)b * Tl + i;
        a->delta[((size_t)b * a->NH + h) * Tl + i] =
            s_dot(dout + row * C + h * hs, a->out + row * C + h * hs, hs);
      }
  s_load_own_kv(a);
  memset(a->dkv, 0, sizeof(float) * rows * 2 * C);
  for (int s = 0; s < c; s++) {
    s_positions(c, (a->rank - s + c) % c, a->T, a->kpos);
    s_backward_block(a, dqkv, dout);
    if (s < c - 1) WT_CHECK(s_ring_pass(a, S_TAG_KV, a->kv, rows * 2 * C));
    /* dK/dV travel with their block; after the last step they are one hop short of its owner. */
    if (c > 1) WT_CHECK(s_ring_pass(a, S_TAG_DKV, a->dkv, rows * 2 * C));
  }
  /* a->dkv now holds the complete gradient of this rank's own K and V rows. */
  for (size_t row = 0; row < rows; row++)
    for (int j = 0; j < 2 * C; j++) dqkv[row * 3 * C + C + j] += a->dkv[row * 2 * C + j];
  return WT_OK;
}
