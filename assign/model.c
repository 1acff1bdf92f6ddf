/* model — the two-level cost model: per-pair costs precomputed once, the data-parallel term of a
 * group (sharded parameter server or ring), the bottleneck-matching edge between two groups, and
 * the cost of a plan as laid out or of a partition with the best order.
 */
#include "assign/assign_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The path bandwidth the searches price a pair with: through access links, each uplink and
 * downlink divided among the transfers that can cross it at once — at most `at_once` (one per
 * ring in a reduce, every stage's ring leaving a site once; one per pipeline in a cut) and at
 * most the devices on it. Exact with one device per access link and without access links. */
static double s_search_Bps(const assign_problem *p, const int *count, int at_once, int i, int j) {
  const assign_access *a = p->access;
  double b = p->net->bandwidth_Bps[i * p->net->n + j];
  if (!a || a->link_of[i] == a->link_of[j]) return b;
  int li = a->link_of[i], lj = a->link_of[j];
  double up = a->up_Bps[li] / WT_MIN(count[li], at_once);
  double down = a->down_Bps[lj] / WT_MIN(count[lj], at_once);
  return assign_dmin(b, assign_dmin(up, down));
}

void assign_model_init(assign_model *m, const assign_problem *p) {
  const assign_network *net = p->net;
  int n = net->n, K = p->d_dp;
  memset(m, 0, sizeof *m);
  m->p = p;
  m->n = n;
  m->P = p->d_pp;
  m->K = K;
  m->dpc = wt_xcalloc((size_t)n * n, sizeof(double));
  m->ppc = wt_xcalloc((size_t)n * n, sizeof(double));
  /* PS: every device sends and receives its 1/K shard to/from each other member, both
   * directions of the pair; ring: one hop. Written so that a symmetric pair without access
   * links gives the paper's numbers bit for bit (t + t == 2·t, (t + t) / 2 == t). */
  int ring = p->dp_algo == ASSIGN_DP_RING, P = p->d_pp;
  double chunk = p->c_dp_bytes / K, every = assign_dp_weight(p);
  int *count = NULL; /* devices per access link */
  if (p->access) {
    count = wt_xcalloc((size_t)p->access->n_links, sizeof(int));
    for (int i = 0; i < n; i++) m->shared |= count[p->access->link_of[i]]++ > 0;
  }
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++) {
      if (i == j) continue;
      double aij = net->latency_s[i * n + j], aji = net->latency_s[j * n + i];
      if (ring) {
        m->dpc[i * n + j] = every * (aij + chunk / s_search_Bps(p, count, P, i, j));
      } else {
        double bij = assign_path_Bps(p, i, j), bji = assign_path_Bps(p, j, i);
        m->dpc[i * n + j] =
            every * ((aij + p->c_dp_bytes / (K * bij)) + (aji + p->c_dp_bytes / (K * bji)));
      }
      double fij = s_search_Bps(p, count, K, i, j), fji = s_search_Bps(p, count, K, j, i);
      m->ppc[i * n + j] = ((aij + p->c_pp_bytes / fij) + (aji + p->c_pp_bytes / fji)) / 2;
    }
  free(count);
  m->feasible = 1;
  for (int i = 0; i < n; i++) {
    double speed = net->compute_speed ? net->compute_speed[i] : 1.0;
    if (p->compute_s > 0) m->compute_s = assign_dmax(m->compute_s, p->compute_s / speed);
    if (p->stage_memory_bytes > 0 && net->memory_bytes &&
        net->memory_bytes[i] < p->stage_memory_bytes)
      m->feasible = 0;
  }
  m->scratch_w = wt_xmalloc((size_t)K * K * sizeof(double));
}

void assign_model_free(assign_model *m) {
  free(m->dpc);
  free(m->ppc);
  free(m->scratch_w);
  memset(m, 0, sizeof *m);
}

/* Slowest hop of the best ring through the group (assign_ring_order on the ring hop costs). */
static double s_ring_bottleneck(const assign_model *m, const int *devs, int k) {
  double *w = wt_xmalloc((size_t)k * k * sizeof(double));
  for (int i = 0; i < k; i++)
    for (int j = 0; j < k; j++) w[i * k + j] = m->dpc[devs[i] * m->n + devs[j]];
  double best = assign_ring_order(k, w, NULL);
  free(w);
  return best;
}

double assign_model_group_dp(assign_model *m, const int *devs) {
  int K = m->K, n = m->n;
  if (K <= 1) return 0;
  if (m->p->dp_algo == ASSIGN_DP_RING) return 2.0 * (K - 1) * s_ring_bottleneck(m, devs, K);
  double worst = 0;
  for (int i = 0; i < K; i++) {
    double sum = 0;
    for (int j = 0; j < K; j++) sum += m->dpc[devs[i] * n + devs[j]];
    worst = assign_dmax(worst, sum);
  }
  return worst;
}

double assign_model_edge(assign_model *m, const int *a, const int *b, int *match, double *soft) {
  int K = m->K, n = m->n;
  double *w = m->scratch_w;
  for (int i = 0; i < K; i++)
    for (int j = 0; j < K; j++) w[i * K + j] = m->ppc[a[i] * n + b[j]];
  if (soft) {
    double acc = 0;
    for (int i = 0; i < K; i++) {
      double rmin = INFINITY, cmin = INFINITY;
      for (int j = 0; j < K; j++) {
        rmin = assign_dmin(rmin, w[i * K + j]);
        cmin = assign_dmin(cmin, w[j * K + i]);
      }
      acc += rmin + cmin;
    }
    *soft = acc / (2 * K);
  }
  return assign_bottleneck_matching(K, w, match);
}

static assign_cost s_finish(const assign_model *m, double dp, double path) {
  assign_cost c = {0};
  c.dp_s = dp;
  c.pp_s = 2 * path;
  c.compute_s = m->compute_s;
  c.feasible = m->feasible;
  c.comm_s = m->feasible ? dp + 2 * path + m->compute_s : INFINITY;
  return c;
}

static assign_cost s_invalid(void) {
  return (assign_cost){NAN, NAN, NAN, NAN, 0};
}

assign_cost assign_plan_cost(const assign_problem *p, const assign_plan *plan) {
  if (assign_plan_validate(p, plan) != WT_OK) return s_invalid();
  assign_model m;
  assign_model_init(&m, p);
  int P = m.P, K = m.K, n = m.n;
  double dp = 0, path = 0;
  int ring = p->dp_algo == ASSIGN_DP_RING && K > 1;
  if (ring && m.shared) {
    /* Every stage reduces at the end of the iteration: all rings' hops run at once and share
     * access links across stages too. */
    assign_plan *own = plan->ring ? NULL : assign_plan_copy(plan);
    if (own) assign_plan_choose_rings(p, own);
    dp = assign_dp_weight(p) * 2.0 * (K - 1) *
         assign_rings_time(p, plan, own ? own->ring : plan->ring);
    assign_plan_destroy(&own);
  } else
    for (int s = 0; s < P; s++) {
      const int *row = plan->device + s * K;
      double g = ring && plan->ring
                     ? assign_dp_weight(p) * 2.0 * (K - 1) *
                           assign_ring_time(p, K, row, plan->ring + s * K, p->c_dp_bytes / K)
                     : assign_model_group_dp(&m, row);
      dp = assign_dmax(dp, g);
    }
  for (int s = 0; s + 1 < P; s++) {
    double hop = 0;
    if (m.shared) /* the cut's K hops run at once and may share access links */
      hop = assign_cut_time(p, K, plan->device + s * K, plan->device + (s + 1) * K);
    else
      for (int r = 0; r < K; r++)
        hop = assign_dmax(hop, m.ppc[plan->device[s * K + r] * n + plan->device[(s + 1) * K + r]]);
    path += hop;
  }
  assign_cost c = s_finish(&m, dp, path);
  assign_model_free(&m);
  return c;
}

/* Lays rows out in `order`, each row's columns matched to the row before it. */
static void s_layout(assign_model *m, int *rows, const int *order) {
  int P = m->P, K = m->K;
  int *out = wt_xmalloc((size_t)P * K * sizeof(int)), *match = wt_xmalloc((size_t)K * sizeof(int));
  memcpy(out, rows + order[0] * K, (size_t)K * sizeof(int));
  for (int s = 1; s < P; s++) {
    const int *next = rows + order[s] * K;
    assign_model_edge(m, out + (s - 1) * K, next, match, NULL);
    for (int r = 0; r < K; r++) out[s * K + r] = next[match[r]];
  }
  memcpy(rows, out, (size_t)P * K * sizeof(int));
  free(out);
  free(match);
}

assign_cost assign_model_partition_cost(assign_model *m, int *rows, assign_order_mode mode) {
  int P = m->P, K = m->K;
  double dp = 0;
  for (int s = 0; s < P; s++) dp = assign_dmax(dp, assign_model_group_dp(m, rows + s * K));
  double *w = wt_xcalloc((size_t)P * P, sizeof(double));
  for (int a = 0; a < P; a++)
    for (int b = a + 1; b < P; b++)
      w[a * P + b] = w[b * P + a] = assign_model_edge(m, rows + a * K, rows + b * K, NULL, NULL);
  int *order = wt_xmalloc((size_t)P * sizeof(int));
  double path = 0;
  if (mode == ASSIGN_ORDER_KEEP) {
    for (int i = 0; i < P; i++) order[i] = i;
    for (int i = 0; i + 1 < P; i++) path += w[i * P + i + 1];
  } else
    path = assign_tsp_open_path(P, w, mode == ASSIGN_ORDER_EXACT, order);
  s_layout(m, rows, order);
  free(w);
  free(order);
  return s_finish(m, dp, path);
}

assign_cost assign_model_rematch(assign_model *m, int *rows) {
  int P = m->P, K = m->K, n = m->n;
  int *order = wt_xmalloc((size_t)P * sizeof(int));
  for (int i = 0; i < P; i++) order[i] = i;
  s_layout(m, rows, order);
  free(order);
  double dp = 0, path = 0;
  for (int s = 0; s < P; s++) dp = assign_dmax(dp, assign_model_group_dp(m, rows + s * K));
  for (int s = 0; s + 1 < P; s++) {
    double hop = 0;
    for (int r = 0; r < K; r++)
      hop = assign_dmax(hop, m->ppc[rows[s * K + r] * n + rows[(s + 1) * K + r]]);
    path += hop;
  }
  return s_finish(m, dp, path);
}

assign_cost assign_plan_optimize_order(const assign_problem *p, assign_plan *plan) {
  if (assign_plan_validate(p, plan) != WT_OK) return s_invalid();
  assign_model m;
  assign_model_init(&m, p);
  assign_cost c = assign_model_partition_cost(&m, plan->device, ASSIGN_ORDER_EXACT);
  int shared = m.shared;
  assign_model_free(&m);
  /* The rows moved: rings of the old layout no longer describe them. */
  if (plan->ring) assign_plan_choose_rings(p, plan);
  if (plan->ring || shared) c = assign_plan_cost(p, plan);
  return c;
}
