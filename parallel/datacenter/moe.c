/* moe — the Mixture-of-Experts layer of model/moe.h on a mesh's EP group: the group's
 * all-to-all as the layer's exchange, and the router and local experts' storage (moe.h). */
#include "parallel/datacenter/moe.h"

#include "common/common.h"
#include "kernels/kernels.h"
#include "model/gpt.h"
#include "model/moe.h"
#include "parallel/datacenter/group.h"

#include <stdlib.h>
#include <string.h>

/* User tag of the all-to-all blocks on the EP sub-communicator. */
enum { S_TAG_A2A = 1 };

struct parallel_moe {
  moe_layer *layer;
  int C, E, El;
  float *router, *d_router;   // (C, E)
  float *experts, *d_experts; // El × moe_expert_numel(C)
};

/* The EP group's all-to-all, with a message that says what a size mismatch means here. */
static int s_alltoall(void *ctx, const float *send, float *recv, size_t bytes) {
  const parallel_group_comm *ep = ctx;
  int rc = parallel_group_alltoall(ep, S_TAG_A2A, send, recv, bytes);
  if (rc != WT_ECORRUPT) return rc;
  char why[256];
  snprintf(why, sizeof why, "%s", wt_last_error());
  return wt_fail(WT_ECORRUPT, "moe: %s; every EP rank must pass the same number of tokens", why);
}

int parallel_moe_exchange(const parallel_mesh *mesh, moe_exchange *ex) {
  const parallel_group_comm *ep = parallel_mesh_coll(mesh, PARALLEL_GROUP_EP);
  if (ep->ops->device_buffers)
    return wt_fail(WT_ENOTSUP,
                   "moe: its maths runs on host buffers, but the EP group's back end (%s) "
                   "keeps device buffers; run this layer with the host back end",
                   ep->ops->name);
  *ex =
      (moe_exchange){.rank = ep->rank, .size = ep->size, .ctx = (void *)ep, .alltoall = s_alltoall};
  return WT_OK;
}

parallel_moe *parallel_moe_new(const parallel_mesh *mesh, const kernels_ops *k, int C,
                               const parallel_moe_config *cfg, int max_N) {
  moe_exchange ex;
  if (parallel_moe_exchange(mesh, &ex) != WT_OK) return NULL;
  moe_layer *layer = moe_layer_new(k, C, cfg, max_N, &ex);
  if (!layer) return NULL;
  parallel_moe *m = wt_xcalloc(1, sizeof *m);
  m->layer = layer, m->C = C, m->E = cfg->experts, m->El = cfg->experts / ex.size;
  size_t E = (size_t)m->E, es = moe_expert_numel(C) * (size_t)m->El;
  m->router = wt_xcalloc((size_t)C * E, sizeof(float));
  m->d_router = wt_xcalloc((size_t)C * E, sizeof(float));
  m->experts = wt_xcalloc(es, sizeof(float));
  m->d_experts = wt_xcalloc(es, sizeof(float));
  moe_layer_bind(layer, m->router, m->d_router, m->experts, m->d_experts);
  return m;
}

void parallel_moe_destroy(parallel_moe **self_p) {
  if (!self_p || !*self_p) return;
  parallel_moe *m = *self_p;
  moe_layer_destroy(&m->layer);
  free(m->router), free(m->d_router), free(m->experts), free(m->d_experts);
  free(m);
  *self_p = NULL;
}

void parallel_moe_experts(const parallel_moe *m, int *first, int *count) {
  moe_layer_experts(m->layer, first, count);
}

float *parallel_moe_router(parallel_moe *m, size_t *n) {
  if (n) *n = (size_t)m->C * m->E;
  return m->router;
}
float *parallel_moe_router_grad(parallel_moe *m, size_t *n) {
  if (n) *n = (size_t)m->C * m->E;
  return m->d_router;
}
float *parallel_moe_expert(parallel_moe *m, int local, parallel_moe_tensor i, size_t *n) {
  if (n) *n = moe_tensor_numel(m->C, (moe_tensor)i);
  return m->experts + (size_t)local * moe_expert_numel(m->C) +
         moe_tensor_offset(m->C, (moe_tensor)i);
}
float *parallel_moe_expert_grad(parallel_moe *m, int local, parallel_moe_tensor i, size_t *n) {
  if (n) *n = moe_tensor_numel(m->C, (moe_tensor)i);
  return m->d_experts + (size_t)local * moe_expert_numel(m->C) +
         moe_tensor_offset(m->C, (moe_tensor)i);
}

void parallel_moe_zero_grad(parallel_moe *m) {
  memset(m->d_router, 0, sizeof(float) * (size_t)m->C * m->E);
  memset(m->d_experts, 0, sizeof(float) * moe_expert_numel(m->C) * (size_t)m->El);
}

float parallel_moe_aux_loss(const parallel_moe *m) {
  return moe_layer_aux_loss(m->layer);
}
int parallel_moe_dropped(const parallel_moe *m) {
  return moe_layer_dropped(m->layer);
}
void parallel_moe_load(const parallel_moe *m, int *kept) {
  moe_layer_load(m->layer, kept);
}

int parallel_moe_forward(parallel_moe *m, const float *x, float *y, int N) {
  return moe_layer_forward(m->layer, x, y, N);
}

int parallel_moe_backward(parallel_moe *m, const float *dy, float *dx) {
  return moe_layer_backward(m->layer, dy, dx, 1.0f);
}

/* ---- gathering a model's experts ----------------------------------------------------------- */

/* Offset of tensor `name` in stage s, or -1 when s does not hold it. */
static long s_offset(gpt_stage *s, const char *name) {
  int n;
  const gpt_tensor_info *t = gpt_stage_tensors(s, &n);
  for (int i = 0; i < n; i++)
    if (!strcmp(t[i].name, name)) return (long)t[i].offset;
  return -1;
}

int parallel_moe_gather_stage(const parallel_mesh *mesh, gpt_stage *local, gpt_stage *full) {
  const parallel_group_comm *ep = parallel_mesh_coll(mesh, PARALLEL_GROUP_EP);
  const gpt_config *c = gpt_stage_config(local);
  if (memcmp(c, gpt_stage_config(full), sizeof *c) != 0 ||
      gpt_stage_first(local) != gpt_stage_first(full) ||
      gpt_stage_last(local) != gpt_stage_last(full))
    return wt_fail(WT_EINVAL, "moe: gathering experts needs two stages of one model and layers");
  if (gpt_stage_copy_params(full, local) < 0) return WT_EINVAL;
  if (c->moe_experts == 0) return WT_OK;
  int El = c->moe_experts / ep->size;
  size_t es = moe_expert_numel(c->channels), block = (size_t)El * es;
  float *buf = wt_xmalloc(sizeof(float) * block * (size_t)ep->size);
  float *lp = gpt_stage_params_host(local, NULL), *fp = gpt_stage_params_host(full, NULL);
  int rc = WT_OK;
  for (int l = gpt_stage_first(local); l < gpt_stage_last(local) && rc == WT_OK; l++) {
    if (!gpt_config_is_moe(c, l)) continue;
    char mine[64], first[64];
    snprintf(mine, sizeof mine, "h.%d.moe.experts.%d.c_fc.weight", l, ep->rank * El);
    snprintf(first, sizeof first, "h.%d.moe.experts.0.c_fc.weight", l);
    long lo = s_offset(local, mine), fo = s_offset(full, first);
    if (lo < 0 || fo < 0) {
      rc = wt_fail(WT_EINVAL,
                   "moe: block %d's experts are missing from a stage (is `local` "
                   "this rank's EP stage and `full` a stage of every expert?)",
                   l);
      break;
    }
    memset(buf, 0, sizeof(float) * block * (size_t)ep->size);
    memcpy(buf + (size_t)ep->rank * block, lp + lo, sizeof(float) * block);
    rc = parallel_group_allreduce(ep, buf, block * (size_t)ep->size, PARALLEL_OP_SUM);
    if (rc == WT_OK) memcpy(fp + fo, buf, sizeof(float) * block * (size_t)ep->size);
  }
  free(buf);
  if (rc == WT_OK) gpt_stage_params_upload(full);
  return rc;
}
