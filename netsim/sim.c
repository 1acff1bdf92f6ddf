/* sim — builds the task graph of one training iteration (pipeline schedule, activation and
 * gradient transfers, data-parallel reduce), runs it, and splits the time into compute, bubble,
 * pipeline communication and data-parallel communication. */
#include "netsim/sim_internal.h"

#include "assign/schedule.h"
#include "common/common.h"
#include "netsim/scenario_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  const assign_network *net;
  const assign_plan *plan;
  const netsim_sim_config *cfg;
  netsim_graph g;
  int *fwd, *bwd; /* task ids, [(s * d_dp + r) * m + j] */
  int *last;      /* each tasklet's last compute task */
  int *done;      /* join: last pass computed and every outgoing gradient delivered */
  int *ready;     /* join: done and, on the first and last stage, the tied gradient exchanged */
  int *synced;    /* each tasklet's data-parallel reduce finished on it */
  int recomputes; /* backward passes that ran their forward again */
} s_builder;

static int s_dev(const s_builder *b, int s, int r) {
  return b->plan->device[s * b->plan->d_dp + r];
}
static int s_idx(const s_builder *b, int s, int r, int j) {
  return (s * b->plan->d_dp + r) * b->cfg->micro_batches + j;
}

static int s_transfer(s_builder *b, int src, int dst, double bytes, netsim_xfer_kind kind,
                      const char *label) {
  netsim_task t = {.kind = NETSIM_TASK_XFER,
                   .device = src,
                   .dst = dst,
                   .bytes = bytes,
                   .latency_s = b->net->latency_s[src * b->net->n + dst],
                   .xfer_kind = kind};
  snprintf(t.label, sizeof t.label, "%s", label);
  return netsim_graph_add(&b->g, t);
}

/* The order of one tasklet's passes: (is_backward, micro-batch) pairs, from the same schedule
 * description the runtime executes (assign/schedule.h), so the two cannot drift apart. */
static void s_schedule_order(netsim_schedule kind, int s, int n_stages, int m, int *is_bwd,
                             int *mb) {
  assign_schedule_kind k = kind == NETSIM_GPIPE ? ASSIGN_SCHEDULE_GPIPE : ASSIGN_SCHEDULE_1F1B;
  assign_action *passes = wt_xmalloc(sizeof *passes * 2 * (size_t)m);
  int n = assign_schedule_passes(k, s, n_stages, m, passes);
  for (int i = 0; i < n; i++)
    is_bwd[i] = passes[i].kind == ASSIGN_ACT_BACKWARD, mb[i] = passes[i].micro_batch;
  free(passes);
}

/* Compute passes of every tasklet, chained in schedule order on its device. */
static void s_add_compute(s_builder *b) {
  const assign_plan *p = b->plan;
  int m = b->cfg->micro_batches;
  int *is_bwd = wt_xmalloc(sizeof(int) * 2 * (size_t)m),
      *mb = wt_xmalloc(sizeof(int) * 2 * (size_t)m);
  for (int s = 0; s < p->d_pp; s++) {
    s_schedule_order(b->cfg->schedule, s, p->d_pp, m, is_bwd, mb);
    for (int r = 0; r < p->d_dp; r++) {
      int dev = s_dev(b, s, r), prev = -1, held = -1;
      double speed = b->net->compute_speed ? b->net->compute_speed[dev] : 1.0;
      double fwd = b->cfg->stage_fwd_s ? b->cfg->stage_fwd_s[s] : b->cfg->fwd_s;
      double bwd = b->cfg->stage_fwd_s ? 2 * fwd : b->cfg->bwd_s;
      for (int k = 0; k < 2 * m; k++) {
        /* The executor keeps the activations of its latest forward only: any other backward
         * runs its forward again first (parallel/runtime/pipeline.h). */
        int again = b->cfg->recompute && is_bwd[k] && held != mb[k];
        held = is_bwd[k] ? -1 : mb[k];
        b->recomputes += again;
        netsim_task t = {.kind = NETSIM_TASK_COMPUTE,
                         .device = dev,
                         .duration = (is_bwd[k] ? bwd + (again ? fwd : 0) : fwd) / speed};
        snprintf(t.label, sizeof t.label, "%c%s mb%d s%d r%d", is_bwd[k] ? 'B' : 'F',
                 again ? "+F" : "", mb[k], s, r);
        int id = netsim_graph_add(&b->g, t);
        (is_bwd[k] ? b->bwd : b->fwd)[s_idx(b, s, r, mb[k])] = id;
        if (prev >= 0) netsim_graph_dep(&b->g, prev, id);
        prev = id;
      }
      b->last[s * p->d_dp + r] = prev;
    }
  }
  free(is_bwd);
  free(mb);
}

/* A tasklet joins the data-parallel reduce only once its last gradient has reached the stage
 * before it, as Megatron-LM and DeepSpeed wait for the last send_backward before reducing:
 * otherwise the reduce would share the NIC with, and slow down, the pipeline's drain. */
static void s_add_done(s_builder *b) {
  for (int s = 0; s < b->plan->d_pp; s++)
    for (int r = 0; r < b->plan->d_dp; r++) {
      netsim_task join = {.kind = NETSIM_TASK_JOIN, .device = s_dev(b, s, r)};
      snprintf(join.label, sizeof join.label, "s%d r%d pipeline done", s, r);
      int id = netsim_graph_add(&b->g, join);
      netsim_graph_dep(&b->g, b->last[s * b->plan->d_dp + r], id);
      b->done[s * b->plan->d_dp + r] = id;
    }
}

/* The tied embedding's gradient, exchanged between the first and the last stage of each replica
 * once both have finished their passes; each joins its data-parallel reduce only with the
 * other's copy in hand (the runtime sums them before reducing). Elsewhere ready = done. */
static void s_add_tied(s_builder *b) {
  const assign_plan *p = b->plan;
  const int S = p->d_pp, R = p->d_dp;
  for (int i = 0; i < S * R; i++) b->ready[i] = b->done[i];
  if (S < 2 || !(b->cfg->tied_bytes > 0)) return;
  char label[64];
  for (int r = 0; r < R; r++) {
    int ends[2] = {0, S - 1};
    for (int e = 0; e < 2; e++) {
      int from = ends[e], to = ends[1 - e];
      snprintf(label, sizeof label, "tied s%d>%d r%d", from, to, r);
      int x = s_transfer(b, s_dev(b, from, r), s_dev(b, to, r), b->cfg->tied_bytes, NETSIM_XFER_DP,
                         label);
      netsim_graph_dep(&b->g, b->done[from * R + r], x);
      netsim_task join = {.kind = NETSIM_TASK_JOIN, .device = s_dev(b, to, r)};
      snprintf(join.label, sizeof join.label, "s%d r%d tied summed", to, r);
      int id = netsim_graph_add(&b->g, join);
      netsim_graph_dep(&b->g, b->done[to * R + r], id);
      netsim_graph_dep(&b->g, x, id);
      b->ready[to * R + r] = id;
    }
  }
}

/* Activations forward and their gradients backward across every cut of every pipeline. */
static void s_add_pipeline(s_builder *b) {
  const assign_plan *p = b->plan;
  char label[64];
  for (int s = 0; s + 1 < p->d_pp; s++)
    for (int r = 0; r < p->d_dp; r++)
      for (int j = 0; j < b->cfg->micro_batches; j++) {
        snprintf(label, sizeof label, "act mb%d s%d>%d r%d", j, s, s + 1, r);
        int a = s_transfer(b, s_dev(b, s, r), s_dev(b, s + 1, r), b->cfg->act_bytes, NETSIM_XFER_PP,
                           label);
        netsim_graph_dep(&b->g, b->fwd[s_idx(b, s, r, j)], a);
        netsim_graph_dep(&b->g, a, b->fwd[s_idx(b, s + 1, r, j)]);
        snprintf(label, sizeof label, "grad mb%d s%d>%d r%d", j, s + 1, s, r);
        int gr = s_transfer(b, s_dev(b, s + 1, r), s_dev(b, s, r), b->cfg->act_bytes,
                            NETSIM_XFER_PP, label);
        netsim_graph_dep(&b->g, b->bwd[s_idx(b, s + 1, r, j)], gr);
        netsim_graph_dep(&b->g, gr, b->bwd[s_idx(b, s, r, j)]);
        netsim_graph_dep(&b->g, gr, b->done[(s + 1) * p->d_dp + r]);
      }
}

void netsim_ring_order_access(const assign_network *net, const assign_access *access,
                              const assign_plan *plan, int stage, double grad_bytes, int *ring) {
  /* The cost model's own choice (assign_ring_choose reads only net, access, c_dp and d_dp). */
  assign_problem p = {.net = net,
                      .d_pp = 1,
                      .d_dp = plan->d_dp,
                      .c_dp_bytes = grad_bytes,
                      .dp_algo = ASSIGN_DP_RING,
                      .access = access};
  assign_ring_choose(&p, plan->d_dp, plan->device + (size_t)stage * plan->d_dp, ring);
}

void netsim_ring_order(const assign_network *net, const assign_plan *plan, int stage,
                       double grad_bytes, int *ring) {
  netsim_ring_order_access(net, NULL, plan, stage, grad_bytes, ring);
}

/* Ring all-reduce over the group in the order assign_ring_order picks (the cost model's ring):
 * 2(D−1) steps; in step k member i passes a chunk to member i+1 once it has the chunk from i−1
 * of step k−1 and its own previous send is done. */
static void s_add_ring(s_builder *b, int s) {
  int D = b->plan->d_dp, steps = 2 * (D - 1);
  double chunk = b->cfg->grad_bytes / D;
  int *prev = wt_xmalloc(sizeof(int) * (size_t)D), *cur = wt_xmalloc(sizeof(int) * (size_t)D);
  int *devs = wt_xmalloc(sizeof(int) * (size_t)D), *ring = wt_xmalloc(sizeof(int) * (size_t)D);
  for (int r = 0; r < D; r++) devs[r] = s_dev(b, s, r);
  const int *given = b->cfg->dp_ring ? b->cfg->dp_ring : b->plan->ring;
  if (given)
    memcpy(ring, given + (size_t)s * D, sizeof(int) * (size_t)D);
  else
    netsim_ring_order_access(b->net, b->cfg->access, b->plan, s, b->cfg->grad_bytes, ring);
  char label[64];
  for (int k = 0; k < steps; k++) {
    for (int i = 0; i < D; i++) {
      snprintf(label, sizeof label, "ring s%d step %d", s, k);
      cur[i] = s_transfer(b, devs[ring[i]], devs[ring[(i + 1) % D]], chunk, NETSIM_XFER_DP, label);
      netsim_graph_dep(&b->g, k == 0 ? b->ready[s * D + ring[i]] : prev[i], cur[i]);
      if (k > 0) netsim_graph_dep(&b->g, prev[(i + D - 1) % D], cur[i]);
    }
    memcpy(prev, cur, sizeof(int) * (size_t)D);
  }
  for (int i = 0; i < D; i++) { /* member i holds the result once the last chunk reaches it */
    netsim_task join = {.kind = NETSIM_TASK_JOIN, .device = devs[ring[i]]};
    snprintf(join.label, sizeof join.label, "s%d r%d reduced", s, ring[i]);
    int id = netsim_graph_add(&b->g, join);
    netsim_graph_dep(&b->g, b->ready[s * D + ring[i]], id);
    netsim_graph_dep(&b->g, prev[(i + D - 1) % D], id);
    netsim_graph_dep(&b->g, prev[i], id);
    b->synced[s * D + ring[i]] = id;
  }
  free(prev);
  free(cur);
  free(devs);
  free(ring);
}

/* Sharded parameter server: device j owns shard j; everyone sends it shard j, j reduces and
 * sends the result back to everyone. */
static void s_add_sharded_ps(s_builder *b, int s) {
  int D = b->plan->d_dp;
  double chunk = b->cfg->grad_bytes / D;
  char label[64];
  for (int i = 0; i < D; i++) {
    netsim_task join = {.kind = NETSIM_TASK_JOIN, .device = s_dev(b, s, i)};
    snprintf(join.label, sizeof join.label, "s%d r%d reduced", s, i);
    b->synced[s * D + i] = netsim_graph_add(&b->g, join);
  }
  for (int j = 0; j < D; j++) {
    netsim_task join = {.kind = NETSIM_TASK_JOIN, .device = s_dev(b, s, j)};
    snprintf(join.label, sizeof join.label, "ps s%d shard %d reduced", s, j);
    int reduced = netsim_graph_add(&b->g, join);
    netsim_graph_dep(&b->g, b->ready[s * D + j], reduced);
    netsim_graph_dep(&b->g, reduced, b->synced[s * D + j]);
    for (int i = 0; i < D; i++) {
      if (i == j) continue;
      snprintf(label, sizeof label, "ps s%d push shard %d", s, j);
      int push = s_transfer(b, s_dev(b, s, i), s_dev(b, s, j), chunk, NETSIM_XFER_DP, label);
      netsim_graph_dep(&b->g, b->ready[s * D + i], push);
      netsim_graph_dep(&b->g, push, reduced);
    }
    for (int i = 0; i < D; i++) {
      if (i == j) continue;
      snprintf(label, sizeof label, "ps s%d pull shard %d", s, j);
      int pull = s_transfer(b, s_dev(b, s, j), s_dev(b, s, i), chunk, NETSIM_XFER_DP, label);
      netsim_graph_dep(&b->g, reduced, pull);
      netsim_graph_dep(&b->g, pull, b->synced[s * D + i]);
    }
  }
}

/* The per-step exchange of (squared-norm share, loss) for gradient clipping: once its reduce
 * is done every tasklet sends norm_bytes to every other, in one round; the step ends on a
 * tasklet when all the others' have arrived. */
static void s_add_norm(s_builder *b) {
  const int W = b->plan->d_pp * b->plan->d_dp;
  int *end = wt_xmalloc(sizeof(int) * (size_t)W);
  for (int v = 0; v < W; v++) {
    netsim_task join = {.kind = NETSIM_TASK_JOIN, .device = b->plan->device[v]};
    snprintf(join.label, sizeof join.label, "rank %d norms gathered", v);
    end[v] = netsim_graph_add(&b->g, join);
    netsim_graph_dep(&b->g, b->synced[v], end[v]);
  }
  for (int w = 0; w < W; w++)
    for (int v = 0; v < W; v++) {
      if (v == w) continue;
      char label[64];
      snprintf(label, sizeof label, "norm %d>%d", w, v);
      int x = s_transfer(b, b->plan->device[w], b->plan->device[v], b->cfg->norm_bytes,
                         NETSIM_XFER_DP, label);
      netsim_graph_dep(&b->g, b->synced[w], x);
      netsim_graph_dep(&b->g, x, end[v]);
    }
  free(end);
}

static int s_check(const assign_network *net, const assign_plan *plan,
                   const netsim_sim_config *cfg) {
  if (!plan || plan->d_pp < 1 || plan->d_dp < 1 || plan->d_pp * plan->d_dp != net->n)
    return wt_fail(WT_EINVAL, "simulate: the plan's shape does not cover the %d devices", net->n);
  char *seen = wt_xcalloc((size_t)net->n, 1);
  int rc = WT_OK;
  for (int i = 0; i < net->n && rc == WT_OK; i++) {
    int d = plan->device[i];
    if (d < 0 || d >= net->n || seen[d])
      rc = wt_fail(WT_EINVAL,
                   "simulate: device %d is out of "
                   "range or appears twice in the plan",
                   d);
    else
      seen[d] = 1;
  }
  free(seen);
  WT_CHECK(rc);
  for (int i = 0; cfg->access && i < net->n; i++)
    if (cfg->access->link_of[i] < 0 || cfg->access->link_of[i] >= cfg->access->n_links)
      return wt_fail(WT_EINVAL, "simulate: device %d is on access link %d, outside 0..%d", i,
                     cfg->access->link_of[i], cfg->access->n_links - 1);
  for (int l = 0; cfg->access && l < cfg->access->n_links; l++)
    if (!(cfg->access->up_Bps[l] > 0) || !(cfg->access->down_Bps[l] > 0))
      return wt_fail(WT_EINVAL, "simulate: access link %d needs capacities > 0", l);
  const int *ring = cfg->dp_ring ? cfg->dp_ring : plan->ring;
  for (int s = 0; ring && s < plan->d_pp; s++) {
    int mask_ok = 1;
    char *in = wt_xcalloc((size_t)plan->d_dp, 1);
    for (int i = 0; i < plan->d_dp && mask_ok; i++) {
      int r = ring[s * plan->d_dp + i];
      mask_ok = r >= 0 && r < plan->d_dp && !in[r]++;
    }
    free(in);
    if (!mask_ok)
      return wt_fail(WT_EINVAL, "simulate: stage %d's ring does not hold each replica once", s);
  }
  if (cfg->micro_batches < 1 || cfg->micro_batches > 100000)
    return wt_fail(WT_EINVAL, "simulate: micro_batches must be in [1, 100000]");
  for (int s = 0; cfg->stage_fwd_s && s < plan->d_pp; s++)
    if (!(cfg->stage_fwd_s[s] >= 0))
      return wt_fail(WT_EINVAL, "simulate: stage %d's forward time must be >= 0", s);
  if (!(cfg->fwd_s >= 0) || !(cfg->bwd_s >= 0) || !(cfg->act_bytes >= 0) ||
      !(cfg->grad_bytes >= 0) || !(cfg->max_seconds >= 0) || !(cfg->tied_bytes >= 0) ||
      !(cfg->norm_bytes >= 0))
    return wt_fail(WT_EINVAL, "simulate: times and sizes must be >= 0");
  return WT_OK;
}

static void s_build(s_builder *b) {
  size_t cells = (size_t)b->plan->d_pp * b->plan->d_dp;
  b->fwd = wt_xmalloc(sizeof(int) * cells * (size_t)b->cfg->micro_batches);
  b->bwd = wt_xmalloc(sizeof(int) * cells * (size_t)b->cfg->micro_batches);
  b->last = wt_xmalloc(sizeof(int) * cells);
  b->done = wt_xmalloc(sizeof(int) * cells);
  b->ready = wt_xmalloc(sizeof(int) * cells);
  b->synced = wt_xmalloc(sizeof(int) * cells);
  s_add_compute(b);
  s_add_done(b);
  s_add_pipeline(b);
  s_add_tied(b);
  memcpy(b->synced, b->ready, sizeof(int) * cells);
  if (b->plan->d_dp > 1)
    for (int s = 0; s < b->plan->d_pp; s++) {
      if (b->cfg->dp_algo == ASSIGN_DP_RING)
        s_add_ring(b, s);
      else
        s_add_sharded_ps(b, s);
    }
  if (b->cfg->norm_exchange && cells > 1) s_add_norm(b);
}

static void s_builder_free(s_builder *b) {
  netsim_graph_free(&b->g);
  free(b->fwd);
  free(b->bwd);
  free(b->last);
  free(b->done);
  free(b->ready);
  free(b->synced);
}

static double s_pipeline_end(const netsim_graph *g) {
  double end = 0;
  for (int i = 0; i < g->n; i++)
    if (g->tasks[i].kind == NETSIM_TASK_COMPUTE) end = fmax(end, g->tasks[i].end_s);
  return end;
}

/* Runs the graph (free_pp: pipeline transfers cost nothing) and returns the pipeline end. */
static int s_run(const assign_network *net, const assign_plan *plan, const netsim_sim_config *cfg,
                 int free_pp, s_builder *b, const double *nic, double deadline_s) {
  *b = (s_builder){.net = net, .plan = plan, .cfg = cfg};
  s_build(b);
  return netsim_engine_run(&b->g, net, nic, cfg->access, free_pp, deadline_s);
}

static double *s_default_nics(const assign_network *net) {
  double *nic = wt_xmalloc(sizeof(double) * (size_t)net->n);
  for (int d = 0; d < net->n; d++) {
    nic[d] = 0;
    for (int e = 0; e < net->n; e++)
      if (e != d) nic[d] = fmax(nic[d], net->bandwidth_Bps[d * net->n + e]);
    if (nic[d] <= 0) nic[d] = 1e12; /* a single device never sends */
  }
  return nic;
}

int netsim_simulate(const assign_network *net, const assign_plan *plan,
                    const netsim_sim_config *cfg, netsim_sim_result *out, netsim_trace **trace_p) {
  memset(out, 0, sizeof *out);
  if (trace_p) *trace_p = NULL;
  WT_CHECK(s_check(net, plan, cfg));
  double *own_nic = cfg->nic_Bps ? NULL : s_default_nics(net);
  const double *nic = cfg->nic_Bps ? cfg->nic_Bps : own_nic;
  double deadline = cfg->max_seconds > 0 ? wt_now_s() + cfg->max_seconds : 0;
  s_builder full, free_pp = {0};
  int rc = s_run(net, plan, cfg, 0, &full, nic, deadline);
  if (rc == WT_OK) rc = s_run(net, plan, cfg, 1, &free_pp, nic, deadline);
  if (rc == WT_OK) {
    double *busy = wt_xcalloc((size_t)net->n, sizeof(double));
    for (int i = 0; i < full.g.n; i++) {
      const netsim_task *t = &full.g.tasks[i];
      if (t->kind == NETSIM_TASK_COMPUTE)
        busy[t->device] += t->duration, out->n_compute++;
      else if (t->kind == NETSIM_TASK_XFER)
        out->n_transfers++;
      out->iteration_s = fmax(out->iteration_s, t->end_s);
    }
    for (int d = 0; d < net->n; d++) out->compute_s = fmax(out->compute_s, busy[d]);
    out->n_recomputes = full.recomputes;
    free(busy);
    out->pipeline_end_s = s_pipeline_end(&full.g);
    double end_free = s_pipeline_end(&free_pp.g);
    out->bubble_s = end_free - out->compute_s;
    out->pp_comm_s = out->pipeline_end_s - end_free;
    out->dp_comm_s = out->iteration_s - out->pipeline_end_s;
    if (!isfinite(out->iteration_s))
      rc = wt_fail(WT_EINVAL,
                   "simulate: the iteration's time overflows (links too slow or too far for "
                   "double-precision seconds); use faster links or smaller sizes");
    else if (trace_p)
      *trace_p = netsim_trace_from_graph(&full.g, net->n);
  }
  s_builder_free(&full);
  s_builder_free(&free_pp);
  free(own_nic);
  return rc;
}

int netsim_schedule_recomputes(netsim_schedule schedule, int stage, int n_stages, int m) {
  if (stage < 0 || stage >= n_stages || m < 1) return -1;
  int *is_bwd = wt_xmalloc(sizeof(int) * 2 * (size_t)m),
      *mb = wt_xmalloc(sizeof(int) * 2 * (size_t)m);
  s_schedule_order(schedule, stage, n_stages, m, is_bwd, mb);
  int held = -1, n = 0;
  for (int k = 0; k < 2 * m; k++) {
    n += is_bwd[k] && held != mb[k];
    held = is_bwd[k] ? -1 : mb[k];
  }
  free(is_bwd);
  free(mb);
  return n;
}

void netsim_sim_config_from_scenario(const netsim_scenario *s, netsim_schedule schedule, int m,
                                     netsim_sim_config *cfg) {
  memset(cfg, 0, sizeof *cfg);
  cfg->schedule = schedule;
  cfg->micro_batches = m;
  /* Backward costs twice the forward (two GEMMs per forward GEMM). */
  double per_mb = netsim_scenario_stage_flops(s) / s->ref_flops / m;
  cfg->fwd_s = per_mb / 3.0;
  cfg->bwd_s = per_mb * 2.0 / 3.0;
  cfg->act_bytes = s->c_pp_bytes / m;
  cfg->grad_bytes = s->c_dp_bytes;
  cfg->dp_algo = ASSIGN_DP_SHARDED_PS;
  cfg->nic_Bps = s->nic_Bps;
  cfg->access = netsim_scenario_access(s);
}

int netsim_transfers_simulate(const assign_network *net, const double *nic_Bps, int count,
                              const int *src, const int *dst, const double *bytes,
                              const double *start_s, double *arrive_s) {
  return netsim_transfers_simulate_access(net, NULL, nic_Bps, count, src, dst, bytes, start_s,
                                          arrive_s);
}

int netsim_transfers_simulate_access(const assign_network *net, const assign_access *access,
                                     const double *nic_Bps, int count, const int *src,
                                     const int *dst, const double *bytes, const double *start_s,
                                     double *arrive_s) {
  netsim_graph g = {0};
  for (int i = 0; i < count; i++) {
    if (src[i] < 0 || src[i] >= net->n || dst[i] < 0 || dst[i] >= net->n || src[i] == dst[i] ||
        !(bytes[i] >= 0) || !(start_s[i] >= 0)) {
      netsim_graph_free(&g);
      return wt_fail(WT_EINVAL, "transfer %d: bad endpoints, size or start", i);
    }
    /* A transfer that becomes ready later waits behind a compute task of that length. */
    netsim_task wait = {.kind = NETSIM_TASK_COMPUTE, .device = src[i], .duration = start_s[i]};
    int w = netsim_graph_add(&g, wait);
    netsim_task t = {.kind = NETSIM_TASK_XFER,
                     .device = src[i],
                     .dst = dst[i],
                     .bytes = bytes[i],
                     .latency_s = net->latency_s[src[i] * net->n + dst[i]]};
    netsim_graph_dep(&g, w, netsim_graph_add(&g, t));
  }
  double *own_nic = nic_Bps ? NULL : s_default_nics(net);
  int rc = netsim_engine_run(&g, net, nic_Bps ? nic_Bps : own_nic, access, 0, 0);
  for (int i = 0; rc == WT_OK && i < count; i++) arrive_s[i] = g.tasks[2 * i + 1].end_s;
  netsim_graph_free(&g);
  free(own_nic);
  return rc;
}
