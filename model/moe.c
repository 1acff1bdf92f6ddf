/* moe — a Mixture-of-Experts MLP with top-k routing, capacity, token dropping and the Switch
 * load-balancing loss, its experts spread over an EP group reached through one all-to-all
 * callback (moe.h). */
#include "model/moe.h"

#include "common/common.h"
#include "kernels/kernels.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct moe_layer {
  const kernels_ops *k;
  moe_exchange ex;
  int C, E, K, P, rank, El, e0, max_N;
  float cf, aux_weight;
  float *router, *d_router;   // (C, E), bound
  float *experts, *d_experts; // El × [fc_w | fc_b | proj_w | proj_b], bound
  size_t expert_size;
  /* Forward state. */
  int N, cap, dropped;
  float aux;
  float *x;                  // (N, C)
  float *probs;              // (N, E)
  int *choice;               // (N, K) expert of each choice
  int *slot;                 // (N, K) its slot in the expert, −1 if dropped
  int *picked, *kept;        // (E) choices that picked / were accepted by each expert
  float *send, *recv;        // (P, El, cap, C) all-to-all blocks, this rank's view
  float *ein, *h, *g, *eout; // per local expert: (P·cap, C), (P·cap, 4C) ×2, (P·cap, C)
  float *back;               // (P, El, cap, C) expert outputs of this rank's tokens
  /* Backward scratch. */
  float *d_eout, *d_g, *d_h, *d_ein; // as ein, h, g, eout
  float *d_logits;                   // (N, E)
};

moe_layer *moe_layer_new(const kernels_ops *k, int C, const moe_config *cfg, int max_N,
                         const moe_exchange *ex) {
  moe_exchange one = {.rank = 0, .size = 1};
  if (!ex) ex = &one;
  if (k->device) {
    wt_fail(WT_ENOTSUP,
            "moe: its maths runs on host buffers, but kernels back end %s keeps device "
            "buffers; run MoE layers on the cpu back end",
            k->name);
    return NULL;
  }
  if (moe_config_validate(cfg, ex->size) != WT_OK) return NULL;
  if (C < 1 || max_N < 1 || ex->rank < 0 || ex->rank >= ex->size ||
      (ex->size > 1 && !ex->alltoall)) {
    wt_fail(WT_EINVAL,
            "moe: width %d and %d tokens must be >= 1, rank %d in [0, %d) and an "
            "EP group of several ranks needs an all-to-all",
            C, max_N, ex->rank, ex->size);
    return NULL;
  }
  moe_layer *m = wt_xcalloc(1, sizeof *m);
  m->k = k, m->ex = *ex, m->C = C, m->E = cfg->experts, m->K = cfg->top_k, m->P = ex->size;
  m->rank = ex->rank, m->El = m->E / m->P, m->e0 = m->rank * m->El, m->max_N = max_N;
  m->cf = cfg->capacity_factor, m->aux_weight = cfg->aux_weight;
  m->expert_size = moe_expert_numel(C);
  size_t E = (size_t)m->E, N = (size_t)max_N;
  m->x = wt_xcalloc(N * C, sizeof(float));
  m->probs = wt_xcalloc(N * E, sizeof(float)), m->d_logits = wt_xcalloc(N * E, sizeof(float));
  m->choice = wt_xcalloc(N * m->K, sizeof(int)), m->slot = wt_xcalloc(N * m->K, sizeof(int));
  m->picked = wt_xcalloc(E, sizeof(int)), m->kept = wt_xcalloc(E, sizeof(int));
  return m;
}

static void s_free_dispatch(moe_layer *m) {
  float *bufs[] = {m->send, m->recv,   m->ein, m->h,   m->g,    m->eout,
                   m->back, m->d_eout, m->d_g, m->d_h, m->d_ein};
  for (size_t i = 0; i < WT_ARRAY_LEN(bufs); i++) free(bufs[i]);
  m->send = m->recv = m->ein = m->h = m->g = m->eout = m->back = NULL;
  m->d_eout = m->d_g = m->d_h = m->d_ein = NULL;
}

void moe_layer_destroy(moe_layer **self_p) {
  if (!self_p || !*self_p) return;
  moe_layer *m = *self_p;
  s_free_dispatch(m);
  free(m->x), free(m->probs), free(m->d_logits), free(m->choice), free(m->slot);
  free(m->picked), free(m->kept);
  free(m);
  *self_p = NULL;
}

void moe_layer_bind(moe_layer *m, float *router, float *d_router, float *experts,
                    float *d_experts) {
  m->router = router, m->d_router = d_router, m->experts = experts, m->d_experts = d_experts;
}

void moe_layer_set_kernels(moe_layer *m, const kernels_ops *k) {
  m->k = k;
}

void moe_layer_experts(const moe_layer *m, int *first, int *count) {
  *first = m->e0, *count = m->El;
}

float moe_layer_aux_loss(const moe_layer *m) {
  return m->aux;
}
int moe_layer_dropped(const moe_layer *m) {
  return m->dropped;
}
void moe_layer_load(const moe_layer *m, int *kept) {
  memcpy(kept, m->kept, sizeof(int) * (size_t)m->E);
}
int moe_layer_capacity(const moe_layer *m) {
  return m->cap;
}

/* Tensor i of local expert le, in the parameters or the gradients. */
static float *s_param(const moe_layer *m, int le, moe_tensor i) {
  return m->experts + (size_t)le * m->expert_size + moe_tensor_offset(m->C, i);
}
static float *s_grad(const moe_layer *m, int le, moe_tensor i) {
  return m->d_experts + (size_t)le * m->expert_size + moe_tensor_offset(m->C, i);
}

/* ---- routing ------------------------------------------------------------------------------- */

/* probs = softmax(x @ Wr); top-k choices; slots under the capacity; the aux loss. */
static void s_route(moe_layer *m) {
  int N = m->N, E = m->E, K = m->K;
  m->k->matmul_forward(m->probs, m->x, m->router, NULL, N, m->C, E, KERNELS_W_IN_OUT);
  for (int n = 0; n < N; n++) {
    float *p = m->probs + (size_t)n * E, mx = -INFINITY, s = 0;
    for (int e = 0; e < E; e++) mx = fmaxf(mx, p[e]);
    for (int e = 0; e < E; e++) s += p[e] = expf(p[e] - mx);
    for (int e = 0; e < E; e++) p[e] /= s;
    for (int j = 0; j < K; j++) { /* j-th highest; ties go to the lower index */
      int best = -1;
      for (int e = 0; e < E; e++) {
        int taken = 0;
        for (int i = 0; i < j; i++) taken |= m->choice[(size_t)n * K + i] == e;
        if (!taken && (best < 0 || p[e] > p[best])) best = e;
      }
      m->choice[(size_t)n * K + j] = best;
    }
  }
  memset(m->picked, 0, sizeof(int) * (size_t)E), memset(m->kept, 0, sizeof(int) * (size_t)E);
  m->dropped = 0;
  for (int j = 0; j < K; j++) /* all first choices, then all second choices, ... */
    for (int n = 0; n < N; n++) {
      int e = m->choice[(size_t)n * K + j];
      m->picked[e]++;
      int ok = m->kept[e] < m->cap;
      m->slot[(size_t)n * K + j] = ok ? m->kept[e]++ : -1;
      m->dropped += !ok;
    }
  double aux = 0;
  for (int e = 0; e < E; e++) {
    double mean_p = 0;
    for (int n = 0; n < N; n++) mean_p += m->probs[(size_t)n * E + e];
    aux += (double)m->picked[e] / ((double)N * K) * (mean_p / N);
  }
  m->aux = (float)(aux * E);
}

/* ---- dispatch ------------------------------------------------------------------------------- */

/* Row of (token's choice) in a (P, El, cap, C) block buffer, by global expert and slot. */
static float *s_row(const moe_layer *m, float *buf, int e, int slot) {
  return buf + (((size_t)(e / m->El) * m->El + e % m->El) * m->cap + slot) * m->C;
}

/* Row `slot` from source `src` for local expert le, in the (P, El, cap, C) view of received
 * blocks, and the same row in the per-expert (El, P·cap, C) layout the kernels run on. */
static size_t s_recv_off(const moe_layer *m, int src, int le, int slot) {
  return (((size_t)src * m->El + le) * m->cap + slot) * m->C;
}
static size_t s_expert_off(const moe_layer *m, int le, int src, int slot) {
  return (((size_t)le * m->P + src) * m->cap + slot) * m->C;
}

/* Block j of `send` to rank j, block i of `recv` from rank i; each block El·cap·C floats. With
 * one rank the block goes straight back. */
static int s_alltoall(moe_layer *m, const float *send, float *recv) {
  size_t bytes = (size_t)m->El * m->cap * m->C * sizeof(float);
  if (m->P == 1 && !m->ex.alltoall) {
    memcpy(recv, send, bytes);
    return WT_OK;
  }
  return m->ex.alltoall(m->ex.ctx, send, recv, bytes);
}

/* Between the (P, El, cap, C) exchange view and the (El, P·cap, C) per-expert view. */
static void s_to_experts(const moe_layer *m, const float *xv, float *ev) {
  for (int src = 0; src < m->P; src++)
    for (int le = 0; le < m->El; le++)
      memcpy(ev + s_expert_off(m, le, src, 0), xv + s_recv_off(m, src, le, 0),
             sizeof(float) * (size_t)m->cap * m->C);
}
static void s_from_experts(const moe_layer *m, const float *ev, float *xv) {
  for (int src = 0; src < m->P; src++)
    for (int le = 0; le < m->El; le++)
      memcpy(xv + s_recv_off(m, src, le, 0), ev + s_expert_off(m, le, src, 0),
             sizeof(float) * (size_t)m->cap * m->C);
}

static void s_alloc_dispatch(moe_layer *m) {
  s_free_dispatch(m);
  size_t rows = (size_t)m->P * m->El * m->cap, C = (size_t)m->C;
  m->send = wt_xcalloc(rows * C, sizeof(float)), m->recv = wt_xcalloc(rows * C, sizeof(float));
  m->ein = wt_xcalloc(rows * C, sizeof(float)), m->eout = wt_xcalloc(rows * C, sizeof(float));
  m->h = wt_xcalloc(rows * 4 * C, sizeof(float)), m->g = wt_xcalloc(rows * 4 * C, sizeof(float));
  m->back = wt_xcalloc(rows * C, sizeof(float));
  m->d_eout = wt_xcalloc(rows * C, sizeof(float)), m->d_ein = wt_xcalloc(rows * C, sizeof(float));
  m->d_h = wt_xcalloc(rows * 4 * C, sizeof(float)),
  m->d_g = wt_xcalloc(rows * 4 * C, sizeof(float));
}

/* ---- forward / backward ------------------------------------------------------------------ */

int moe_layer_forward(moe_layer *m, const float *x, float *y, int N) {
  if (N < 1 || N > m->max_N)
    return wt_fail(WT_EINVAL, "moe: %d tokens outside [1, %d]", N, m->max_N);
  int C = m->C, K = m->K, cap = (int)ceil((double)m->cf * N * K / m->E);
  m->N = N;
  if (cap < 1) cap = 1;
  if (cap != m->cap || !m->send) m->cap = cap, s_alloc_dispatch(m);
  memcpy(m->x, x, sizeof(float) * (size_t)N * C);
  s_route(m);

  size_t rows = (size_t)m->P * m->El * cap, rows_e = (size_t)m->P * cap;
  memset(m->send, 0, sizeof(float) * rows * C);
  for (int n = 0; n < N; n++)
    for (int j = 0; j < K; j++) {
      int s = m->slot[(size_t)n * K + j];
      if (s >= 0)
        memcpy(s_row(m, m->send, m->choice[(size_t)n * K + j], s), x + (size_t)n * C,
               sizeof(float) * C);
    }
  WT_CHECK(s_alltoall(m, m->send, m->recv));
  s_to_experts(m, m->recv, m->ein);
  for (int le = 0; le < m->El; le++) { /* unused slots are zero rows: outputs ignored */
    size_t r0 = (size_t)le * rows_e;
    m->k->matmul_forward(m->h + r0 * 4 * C, m->ein + r0 * C, s_param(m, le, MOE_FC_W),
                         s_param(m, le, MOE_FC_B), (int)rows_e, C, 4 * C, KERNELS_W_IN_OUT);
    m->k->gelu_forward(m->g + r0 * 4 * C, m->h + r0 * 4 * C, rows_e * 4 * C);
    m->k->matmul_forward(m->eout + r0 * C, m->g + r0 * 4 * C, s_param(m, le, MOE_PROJ_W),
                         s_param(m, le, MOE_PROJ_B), (int)rows_e, 4 * C, C, KERNELS_W_IN_OUT);
  }
  s_from_experts(m, m->eout, m->send);
  WT_CHECK(s_alltoall(m, m->send, m->back));
  memset(y, 0, sizeof(float) * (size_t)N * C);
  for (int n = 0; n < N; n++)
    for (int j = 0; j < K; j++) {
      int s = m->slot[(size_t)n * K + j], e = m->choice[(size_t)n * K + j];
      if (s < 0) continue;
      const float *o = s_row(m, m->back, e, s);
      float gate = m->probs[(size_t)n * m->E + e];
      for (int c = 0; c < C; c++) y[(size_t)n * C + c] += gate * o[c];
    }
  return WT_OK;
}

/* Router backward: d_logits from d_probs (in m->d_logits on entry) through the softmax, then
 * into the router weights and dx. */
static void s_router_backward(moe_layer *m, float *dx) {
  int N = m->N, E = m->E;
  for (int n = 0; n < N; n++) {
    const float *p = m->probs + (size_t)n * E;
    float *d = m->d_logits + (size_t)n * E, dot = 0;
    for (int e = 0; e < E; e++) dot += p[e] * d[e];
    for (int e = 0; e < E; e++) d[e] = p[e] * (d[e] - dot);
  }
  m->k->matmul_backward(dx, m->d_router, NULL, m->d_logits, m->x, m->router, N, m->C, E,
                        KERNELS_W_IN_OUT);
}

int moe_layer_backward(moe_layer *m, const float *dy, float *dx, float aux_scale) {
  int N = m->N, C = m->C, K = m->K, E = m->E, cap = m->cap;
  size_t rows = (size_t)m->P * m->El * cap, rows_e = (size_t)m->P * cap;
  /* Combine backward: the gate's gradient and the expert outputs' gradients. The aux loss adds
   * aux_scale · aux_weight · E · f_e / N to every token's d probs[e]. */
  for (int n = 0; n < N; n++)
    for (int e = 0; e < E; e++)
      m->d_logits[(size_t)n * E + e] =
          aux_scale * m->aux_weight * (float)E * ((float)m->picked[e] / ((float)N * K)) / (float)N;
  memset(m->send, 0, sizeof(float) * rows * C);
  for (int n = 0; n < N; n++)
    for (int j = 0; j < K; j++) {
      int s = m->slot[(size_t)n * K + j], e = m->choice[(size_t)n * K + j];
      if (s < 0) continue;
      const float *o = s_row(m, m->back, e, s), *d = dy + (size_t)n * C;
      float gate = m->probs[(size_t)n * E + e], dgate = 0, *dst = s_row(m, m->send, e, s);
      for (int c = 0; c < C; c++) dgate += d[c] * o[c], dst[c] = gate * d[c];
      m->d_logits[(size_t)n * E + e] += dgate;
    }
  WT_CHECK(s_alltoall(m, m->send, m->recv));
  s_to_experts(m, m->recv, m->d_eout);
  memset(m->d_g, 0, sizeof(float) * rows * 4 * C), memset(m->d_h, 0, sizeof(float) * rows * 4 * C);
  memset(m->d_ein, 0, sizeof(float) * rows * C);
  for (int le = 0; le < m->El; le++) {
    size_t r0 = (size_t)le * rows_e;
    m->k->matmul_backward(m->d_g + r0 * 4 * C, s_grad(m, le, MOE_PROJ_W), s_grad(m, le, MOE_PROJ_B),
                          m->d_eout + r0 * C, m->g + r0 * 4 * C, s_param(m, le, MOE_PROJ_W),
                          (int)rows_e, 4 * C, C, KERNELS_W_IN_OUT);
    m->k->gelu_backward(m->d_h + r0 * 4 * C, m->h + r0 * 4 * C, m->d_g + r0 * 4 * C,
                        rows_e * 4 * C);
    m->k->matmul_backward(m->d_ein + r0 * C, s_grad(m, le, MOE_FC_W), s_grad(m, le, MOE_FC_B),
                          m->d_h + r0 * 4 * C, m->ein + r0 * C, s_param(m, le, MOE_FC_W),
                          (int)rows_e, C, 4 * C, KERNELS_W_IN_OUT);
  }
  s_from_experts(m, m->d_ein, m->send);
  WT_CHECK(s_alltoall(m, m->send, m->back)); /* back now holds d x of each kept choice */
  for (int n = 0; n < N; n++)
    for (int j = 0; j < K; j++) {
      int s = m->slot[(size_t)n * K + j];
      if (s < 0) continue;
      const float *d = s_row(m, m->back, m->choice[(size_t)n * K + j], s);
      for (int c = 0; c < C; c++) dx[(size_t)n * C + c] += d[c];
    }
  s_router_backward(m, dx);
  return WT_OK;
}
