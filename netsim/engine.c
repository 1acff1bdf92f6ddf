/* engine — the discrete-event loop: compute passes finish, transfers share bandwidth max-min
 * fairly and arrive one latency after their last byte leaves.
 *
 * Between two events every active flow moves at a constant rate, so time jumps straight to the
 * next event: the earliest timed completion (heap) or the earliest flow to drain its bytes.
 * Rates are recomputed by progressive filling whenever the set of flows changes. */
#include "netsim/sim_internal.h"

#include "common/common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- the graph ----------------------------------------------------------------------------- */

int netsim_graph_add(netsim_graph *g, netsim_task task) {
  if (g->n == g->cap) {
    g->cap = g->cap ? 2 * g->cap : 256;
    netsim_task *grown = realloc(g->tasks, (size_t)g->cap * sizeof *grown);
    if (!grown) abort(); /* sizes are ours, bounded by the plan */
    g->tasks = grown;
  }
  task.pending = 0;
  task.succ = NULL;
  task.n_succ = task.cap_succ = 0;
  task.start_s = task.send_end_s = task.end_s = -1;
  g->tasks[g->n] = task;
  return g->n++;
}

void netsim_graph_dep(netsim_graph *g, int before, int after) {
  netsim_task *t = &g->tasks[before];
  if (t->n_succ == t->cap_succ) {
    t->cap_succ = t->cap_succ ? 2 * t->cap_succ : 4;
    int *grown = realloc(t->succ, (size_t)t->cap_succ * sizeof(int));
    if (!grown) abort();
    t->succ = grown;
  }
  t->succ[t->n_succ++] = after;
  g->tasks[after].pending++;
}

void netsim_graph_free(netsim_graph *g) {
  for (int i = 0; i < g->n; i++) free(g->tasks[i].succ);
  free(g->tasks);
  memset(g, 0, sizeof *g);
}

/* ---- a binary min-heap of (time, task) completions ----------------------------------------- */

typedef struct {
  double t;
  int task;
} s_event;

typedef struct {
  s_event *a;
  int n, cap;
} s_heap;

static void s_heap_push(s_heap *h, double t, int task) {
  if (h->n == h->cap) {
    h->cap = h->cap ? 2 * h->cap : 256;
    h->a = realloc(h->a, (size_t)h->cap * sizeof *h->a);
    if (!h->a) abort();
  }
  int i = h->n++;
  while (i > 0 && h->a[(i - 1) / 2].t > t) {
    h->a[i] = h->a[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  h->a[i] = (s_event){t, task};
}

static s_event s_heap_pop(s_heap *h) {
  s_event top = h->a[0], last = h->a[--h->n];
  int i = 0;
  for (;;) {
    int c = 2 * i + 1;
    if (c >= h->n) break;
    if (c + 1 < h->n && h->a[c + 1].t < h->a[c].t) c++;
    if (h->a[c].t >= last.t) break;
    h->a[i] = h->a[c];
    i = c;
  }
  if (h->n) h->a[i] = last;
  return top;
}

/* ---- max-min fair rates by progressive filling --------------------------------------------- */

typedef struct {
  int *task;         /* active flows' task ids */
  double *remaining; /* bytes left */
  double *rate;      /* bytes/s */
  int n, cap;
  /* scratch for the filling, sized to the devices */
  double *left_out, *left_in;
  int *cnt_out, *cnt_in;
  char *frozen;
} s_flows;

static double s_cap(const netsim_graph *g, const assign_network *net, int task) {
  const netsim_task *t = &g->tasks[task];
  return net->bandwidth_Bps[t->device * net->n + t->dst];
}

/* Every flow at rate 0 and unfrozen; every NIC at full capacity, counting its flows. */
static void s_share_reset(s_flows *f, const netsim_graph *g, int nd, const double *nic) {
  for (int d = 0; d < nd; d++) {
    f->left_out[d] = f->left_in[d] = nic[d];
    f->cnt_out[d] = f->cnt_in[d] = 0;
  }
  f->frozen = realloc(f->frozen, (size_t)(f->cap ? f->cap : 1));
  if (!f->frozen) abort();
  for (int i = 0; i < f->n; i++) {
    const netsim_task *t = &g->tasks[f->task[i]];
    f->rate[i] = 0;
    f->frozen[i] = 0;
    f->cnt_out[t->device]++;
    f->cnt_in[t->dst]++;
  }
}

/* The largest common raise of all unfrozen flows before a NIC or a pair's cap saturates. */
static double s_share_increment(const s_flows *f, const netsim_graph *g,
                                const assign_network *net) {
  double inc = INFINITY;
  for (int d = 0; d < net->n; d++) {
    if (f->cnt_out[d]) inc = fmin(inc, f->left_out[d] / f->cnt_out[d]);
    if (f->cnt_in[d]) inc = fmin(inc, f->left_in[d] / f->cnt_in[d]);
  }
  for (int i = 0; i < f->n; i++)
    if (!f->frozen[i]) inc = fmin(inc, s_cap(g, net, f->task[i]) - f->rate[i]);
  return fmax(inc, 0);
}

/* Raises the unfrozen flows by inc, then freezes those whose cap or NIC is now full (within
 * rounding); returns how many froze. */
static int s_share_raise(s_flows *f, const netsim_graph *g, const assign_network *net,
                         const double *nic, double inc) {
  for (int i = 0; i < f->n; i++) {
    if (f->frozen[i]) continue;
    const netsim_task *t = &g->tasks[f->task[i]];
    f->rate[i] += inc;
    f->left_out[t->device] -= inc;
    f->left_in[t->dst] -= inc;
  }
  int frozen = 0;
  for (int i = 0; i < f->n; i++) {
    if (f->frozen[i]) continue;
    const netsim_task *t = &g->tasks[f->task[i]];
    if (f->rate[i] >= s_cap(g, net, f->task[i]) * (1 - 1e-12) ||
        f->left_out[t->device] <= nic[t->device] * 1e-12 ||
        f->left_in[t->dst] <= nic[t->dst] * 1e-12) {
      f->frozen[i] = 1;
      f->cnt_out[t->device]--;
      f->cnt_in[t->dst]--;
      frozen++;
    }
  }
  return frozen;
}

/* Raises all unfrozen flows together until a NIC or a pair's cap saturates, freezes the flows
 * it limits, and repeats: the classic water-filling that yields the max-min fair allocation.
 * Each round freezes at least one flow, so it ends after at most n rounds. */
static void s_flows_share(s_flows *f, const netsim_graph *g, const assign_network *net,
                          const double *nic) {
  s_share_reset(f, g, net->n, nic);
  for (int active = f->n; active > 0;) {
    int frozen = s_share_raise(f, g, net, nic, s_share_increment(f, g, net));
    if (frozen == 0) break; /* cannot happen (the minimum resource saturates); never spin */
    active -= frozen;
  }
}

static void s_flows_add(s_flows *f, int task, double bytes) {
  if (f->n == f->cap) {
    f->cap = f->cap ? 2 * f->cap : 64;
    f->task = realloc(f->task, (size_t)f->cap * sizeof(int));
    f->remaining = realloc(f->remaining, (size_t)f->cap * sizeof(double));
    f->rate = realloc(f->rate, (size_t)f->cap * sizeof(double));
    if (!f->task || !f->remaining || !f->rate) abort();
  }
  f->task[f->n] = task;
  f->remaining[f->n] = bytes;
  f->rate[f->n] = 0;
  f->n++;
}

static void s_flows_remove(s_flows *f, int i) {
  f->n--;
  f->task[i] = f->task[f->n];
  f->remaining[i] = f->remaining[f->n];
  f->rate[i] = f->rate[f->n];
}

/* ---- the loop -------------------------------------------------------------------------------- */

typedef struct {
  netsim_graph *g;
  int free_pp;
  s_heap heap;
  s_flows flows;
  int dirty; /* the flow set changed: rates must be recomputed */
  int done;
} s_engine;

/* A task whose dependencies are all done starts at time t. */
static void s_start(s_engine *e, int id, double t) {
  netsim_task *task = &e->g->tasks[id];
  task->start_s = t;
  if (task->kind == NETSIM_TASK_COMPUTE) {
    s_heap_push(&e->heap, t + task->duration, id);
  } else if (task->kind == NETSIM_TASK_JOIN) {
    s_heap_push(&e->heap, t, id);
  } else if (task->bytes <= 0 || (e->free_pp && task->xfer_kind == NETSIM_XFER_PP)) {
    task->send_end_s = t;
    s_heap_push(&e->heap,
                t + (e->free_pp && task->xfer_kind == NETSIM_XFER_PP ? 0 : task->latency_s), id);
  } else {
    s_flows_add(&e->flows, id, task->bytes);
    e->dirty = 1;
  }
}

static void s_finish(s_engine *e, int id, double t) {
  netsim_task *task = &e->g->tasks[id];
  task->end_s = t;
  e->done++;
  for (int k = 0; k < task->n_succ; k++) {
    int s = task->succ[k];
    if (--e->g->tasks[s].pending == 0) s_start(e, s, t);
  }
}

/* Moves every flow forward by dt and hands drained flows to the latency stage. */
static void s_advance(s_engine *e, double t, double dt) {
  s_flows *f = &e->flows;
  for (int i = 0; i < f->n; i++) f->remaining[i] -= f->rate[i] * dt;
  for (int i = f->n - 1; i >= 0; i--) {
    netsim_task *task = &e->g->tasks[f->task[i]];
    /* Drained within rounding: 1e-9 of the flow's bytes. */
    if (f->remaining[i] <= task->bytes * 1e-9) {
      task->send_end_s = t;
      s_heap_push(&e->heap, t + task->latency_s, f->task[i]);
      s_flows_remove(f, i);
      e->dirty = 1;
    }
  }
}

static double s_next_drain(const s_flows *f) {
  double best = INFINITY;
  for (int i = 0; i < f->n; i++)
    if (f->rate[i] > 0) best = fmin(best, f->remaining[i] / f->rate[i]);
  return best;
}

int netsim_engine_run(netsim_graph *g, const assign_network *net, const double *nic_Bps,
                      int free_pp) {
  s_engine e = {.g = g, .free_pp = free_pp};
  int nd = net->n;
  e.flows.left_out = wt_xcalloc((size_t)nd, sizeof(double));
  e.flows.left_in = wt_xcalloc((size_t)nd, sizeof(double));
  e.flows.cnt_out = wt_xcalloc((size_t)nd, sizeof(int));
  e.flows.cnt_in = wt_xcalloc((size_t)nd, sizeof(int));
  double t = 0;
  for (int i = 0; i < g->n; i++)
    if (g->tasks[i].pending == 0) s_start(&e, i, 0);
  while (e.heap.n > 0 || e.flows.n > 0) {
    if (e.dirty) s_flows_share(&e.flows, g, net, nic_Bps);
    e.dirty = 0;
    double drain = t + s_next_drain(&e.flows);
    double next = e.heap.n ? fmin(e.heap.a[0].t, drain) : drain;
    if (!isfinite(next)) break; /* flows with no bandwidth: cannot happen with positive caps */
    s_advance(&e, next, next - t);
    t = next;
    while (e.heap.n && e.heap.a[0].t <= t) s_finish(&e, s_heap_pop(&e.heap).task, t);
  }
  free(e.heap.a);
  free(e.flows.task);
  free(e.flows.remaining);
  free(e.flows.rate);
  free(e.flows.frozen);
  free(e.flows.left_out);
  free(e.flows.left_in);
  free(e.flows.cnt_out);
  free(e.flows.cnt_in);
  if (e.done != g->n)
    return wt_fail(WT_EINVAL, "simulation stalled: %d of %d tasks never ran", g->n - e.done, g->n);
  return WT_OK;
}
