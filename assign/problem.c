/* problem — validating problems and plans, symmetrising networks, plan ownership, solver names. */
#include "assign/assign_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static int s_validate_matrix(const assign_network *net, const double *x, const char *what,
                             int positive) {
  int n = net->n;
  if (!x) return wt_fail(WT_EINVAL, "assign: network %s matrix is missing", what);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      double v = x[i * n + j];
      if (i == j) continue; /* the diagonal is never used */
      if (!isfinite(v) || v < 0 || (positive && v <= 0))
        return wt_fail(WT_EINVAL, "assign: %s[%d][%d] = %g; it must be %s and finite", what, i, j,
                       v, positive ? "> 0" : ">= 0");
    }
  return WT_OK;
}

static int s_validate_devices(const assign_network *net) {
  for (int i = 0; i < net->n; i++) {
    if (net->compute_speed && !(net->compute_speed[i] > 0 && isfinite(net->compute_speed[i])))
      return wt_fail(WT_EINVAL, "assign: compute_speed[%d] = %g; it must be > 0 and finite", i,
                     net->compute_speed[i]);
    if (net->memory_bytes && !(net->memory_bytes[i] >= 0))
      return wt_fail(WT_EINVAL, "assign: memory_bytes[%d] = %g; it must be >= 0", i,
                     net->memory_bytes[i]);
  }
  return WT_OK;
}

/* Access links: every device on a link in range, capacities > 0 (INFINITY = unlimited). */
static int s_validate_access(const assign_problem *p) {
  const assign_access *a = p->access;
  if (!a) return WT_OK;
  if (a->n_links < 1 || !a->link_of || !a->up_Bps || !a->down_Bps)
    return wt_fail(WT_EINVAL, "assign: access links given without links, link_of, up_Bps or "
                              "down_Bps; pass access = NULL for unlimited access");
  for (int d = 0; d < p->net->n; d++)
    if (a->link_of[d] < 0 || a->link_of[d] >= a->n_links)
      return wt_fail(WT_EINVAL, "assign: device %d is on access link %d, outside 0..%d", d,
                     a->link_of[d], a->n_links - 1);
  for (int l = 0; l < a->n_links; l++)
    if (!(a->up_Bps[l] > 0) || !(a->down_Bps[l] > 0))
      return wt_fail(WT_EINVAL,
                     "assign: access link %d has uplink %g and downlink %g bytes/s; both must be "
                     "> 0 (INFINITY for unlimited)",
                     l, a->up_Bps[l], a->down_Bps[l]);
  return WT_OK;
}

static int s_validate_scalars(const assign_problem *p) {
  if (!(p->c_dp_bytes >= 0 && isfinite(p->c_dp_bytes)))
    return wt_fail(WT_EINVAL, "assign: c_dp_bytes = %g; it must be >= 0 and finite", p->c_dp_bytes);
  if (!(p->c_pp_bytes >= 0 && isfinite(p->c_pp_bytes)))
    return wt_fail(WT_EINVAL, "assign: c_pp_bytes = %g; it must be >= 0 and finite", p->c_pp_bytes);
  if (!(p->dp_every >= 0 && isfinite(p->dp_every)))
    return wt_fail(WT_EINVAL, "assign: dp_every = %g; it must be >= 0 and finite", p->dp_every);
  if (!(p->compute_s >= 0 && isfinite(p->compute_s)))
    return wt_fail(WT_EINVAL, "assign: compute_s = %g; it must be >= 0 and finite", p->compute_s);
  if (!(p->stage_memory_bytes >= 0))
    return wt_fail(WT_EINVAL, "assign: stage_memory_bytes = %g; it must be >= 0",
                   p->stage_memory_bytes);
  if (p->dp_algo != ASSIGN_DP_SHARDED_PS && p->dp_algo != ASSIGN_DP_RING)
    return wt_fail(WT_EINVAL, "assign: dp_algo %d is neither sharded PS (0) nor ring (1)",
                   (int)p->dp_algo);
  return WT_OK;
}

int assign_problem_validate(const assign_problem *p) {
  if (!p || !p->net) return wt_fail(WT_EINVAL, "assign: problem or its network is NULL");
  const assign_network *net = p->net;
  if (net->n <= 0) return wt_fail(WT_EINVAL, "assign: network has %d devices", net->n);
  if (p->d_pp <= 0 || p->d_dp <= 0)
    return wt_fail(WT_EINVAL, "assign: d_pp = %d and d_dp = %d must both be >= 1", p->d_pp,
                   p->d_dp);
  if ((long)p->d_pp * p->d_dp != net->n)
    return wt_fail(WT_EINVAL,
                   "assign: d_pp x d_dp = %d x %d = %ld tasklets but the network has %d devices; "
                   "they must be equal",
                   p->d_pp, p->d_dp, (long)p->d_pp * p->d_dp, net->n);
  WT_CHECK(s_validate_matrix(net, net->latency_s, "latency_s", 0));
  WT_CHECK(s_validate_matrix(net, net->bandwidth_Bps, "bandwidth_Bps", 1));
  WT_CHECK(s_validate_devices(net));
  WT_CHECK(s_validate_access(p));
  return s_validate_scalars(p);
}

int assign_problem_check_feasible(const assign_problem *p) {
  const assign_network *net = p->net;
  if (p->stage_memory_bytes <= 0 || !net->memory_bytes) return WT_OK;
  for (int d = 0; d < net->n; d++)
    if (net->memory_bytes[d] < p->stage_memory_bytes)
      return wt_fail(WT_EINVAL,
                     "assign: device %d has %.0f bytes of memory but a tasklet needs %.0f; every "
                     "device runs a tasklet, so no plan fits — use more stages or drop the device",
                     d, net->memory_bytes[d], p->stage_memory_bytes);
  return WT_OK;
}

void assign_network_symmetrize(assign_network *net) {
  int n = net->n;
  for (int i = 0; i < n; i++)
    for (int j = i + 1; j < n; j++) {
      double *a = net->latency_s, *b = net->bandwidth_Bps;
      double l = (a[i * n + j] + a[j * n + i]) / 2, w = (b[i * n + j] + b[j * n + i]) / 2;
      a[i * n + j] = a[j * n + i] = l;
      b[i * n + j] = b[j * n + i] = w;
    }
}

assign_plan *assign_plan_new(int d_pp, int d_dp) {
  if (d_pp <= 0 || d_dp <= 0) {
    wt_fail(WT_EINVAL, "a plan needs at least one stage and one replica (got %d x %d)", d_pp, d_dp);
    return NULL;
  }
  assign_plan *plan = wt_xcalloc(1, sizeof *plan);
  plan->d_pp = d_pp;
  plan->d_dp = d_dp;
  plan->device = wt_xmalloc((size_t)d_pp * d_dp * sizeof(int));
  for (int i = 0; i < d_pp * d_dp; i++) plan->device[i] = i;
  return plan;
}

void assign_plan_destroy(assign_plan **self_p) {
  if (!self_p || !*self_p) return;
  free((*self_p)->device);
  free((*self_p)->ring);
  free(*self_p);
  *self_p = NULL;
}

assign_plan *assign_plan_copy(const assign_plan *src) {
  assign_plan *plan = assign_plan_new(src->d_pp, src->d_dp);
  size_t cells = (size_t)src->d_pp * src->d_dp;
  memcpy(plan->device, src->device, cells * sizeof(int));
  if (src->ring) {
    plan->ring = wt_xmalloc(cells * sizeof(int));
    memcpy(plan->ring, src->ring, cells * sizeof(int));
  }
  return plan;
}

int assign_plan_validate(const assign_problem *p, const assign_plan *plan) {
  if (!plan || plan->d_pp != p->d_pp || plan->d_dp != p->d_dp)
    return wt_fail(WT_EINVAL, "assign: plan shape %dx%d does not match the problem's %dx%d",
                   plan ? plan->d_pp : 0, plan ? plan->d_dp : 0, p->d_pp, p->d_dp);
  int n = p->net->n;
  char *seen = wt_xcalloc((size_t)n, 1);
  int rc = WT_OK;
  for (int i = 0; i < n && rc == WT_OK; i++) {
    int d = plan->device[i];
    if (d < 0 || d >= n)
      rc = wt_fail(WT_EINVAL,
                   "assign: plan tasklet %d (stage %d, replica %d) has device %d, "
                   "outside 0..%d",
                   i, i / p->d_dp, i % p->d_dp, d, n - 1);
    else if (seen[d]++)
      rc = wt_fail(WT_EINVAL, "assign: plan places device %d twice (again at stage %d, replica %d)",
                   d, i / p->d_dp, i % p->d_dp);
  }
  free(seen);
  return rc;
}

int assign_plan_moved(const assign_plan *a, const assign_plan *b) {
  /* stage_of[d] over the largest device id present in either plan */
  int n = a->d_pp * a->d_dp, maxd = -1, moved = 0;
  for (int i = 0; i < n; i++) maxd = WT_MAX(maxd, WT_MAX(a->device[i], b->device[i]));
  int *stage = wt_xmalloc((size_t)(maxd + 2) * sizeof(int));
  for (int d = 0; d <= maxd; d++) stage[d] = -1;
  for (int i = 0; i < n; i++)
    if (a->device[i] >= 0) stage[a->device[i]] = i / a->d_dp;
  for (int i = 0; i < n; i++)
    if (b->device[i] >= 0 && stage[b->device[i]] != i / b->d_dp) moved++;
  free(stage);
  return moved;
}

static const char *s_names[ASSIGN_SOLVER_COUNT] = {"random", "megatron", "deepspeed",
                                                   "greedy", "ga",       "exact"};

const char *assign_solver_name(assign_solver kind) {
  return (unsigned)kind < ASSIGN_SOLVER_COUNT ? s_names[kind] : "?";
}

int assign_solver_parse(const char *name, assign_solver *out) {
  for (int k = 0; k < ASSIGN_SOLVER_COUNT; k++)
    if (name && strcmp(name, s_names[k]) == 0) {
      *out = (assign_solver)k;
      return WT_OK;
    }
  return wt_fail(
      WT_EINVAL,
      "assign: unknown solver '%s'; use random, megatron, deepspeed, greedy, ga or exact",
      name ? name : "(null)");
}
