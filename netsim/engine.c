/* engine — the discrete-event loop: compute passes finish, transfers share bandwidth max-min
 * fairly and arrive one latency after their last byte leaves.
 *
 * Between two events every active flow moves at a constant rate, so time jumps straight to the
 * next event: the earliest timed completion or the earliest flow to drain its bytes, each kept
 * in a heap. A flow's drain time is computed once, when its rate is set, and the flow that
 * owns the earliest one is the one that drains: events are taken by identity, never by testing
 * whether a byte count reached zero, so rounding cannot stall the clock however large it grows
 * or however slow a link is. Every turn of the loop retires a transfer or a timed completion,
 * which bounds it by the graph's size.
 *
 * Rates are max-min fair under these limits: each flow's pair bandwidth, each device's egress
 * and ingress NIC, and — for a flow between two access links — the sender's uplink and the
 * receiver's downlink (unlimited ones are left out). The allocation splits over the connected
 * components of the flows-and-NICs graph, so when flows start or end only the components they touch
 * are re-shared, each by water-filling ordered with a heap: O(F log F) for a component of F flows.
 * A simulation therefore costs about O(transfers · component size · log), not O(devices) or a
 * rescan of every flow per event. */
#include "netsim/sim_internal.h"

#include "common/common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the graph ----------------------------------------------------------------------------- */

int netsim_graph_add(netsim_graph *g, netsim_task task) {
  if (g->n == g->cap) {
    g->cap = g->cap ? 2 * g->cap : 256;
    g->tasks = wt_xrealloc(g->tasks, (size_t)g->cap, sizeof *g->tasks);
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
    t->succ = wt_xrealloc(t->succ, (size_t)t->cap_succ, sizeof *t->succ);
  }
  t->succ[t->n_succ++] = after;
  g->tasks[after].pending++;
}

void netsim_graph_free(netsim_graph *g) {
  for (int i = 0; i < g->n; i++) free(g->tasks[i].succ);
  free(g->tasks);
  memset(g, 0, sizeof *g);
}

/* ---- binary min-heaps of (time, id, version) ----------------------------------------------- */

typedef struct {
  double t;
  int id;  /* a task (timed completions), a flow slot (drains) or a resource/flow (filling) */
  int ver; /* the owner's version when pushed; a stale entry is skipped */
} s_event;

typedef struct {
  s_event *a;
  int n, cap;
} s_heap;

static void s_heap_push(s_heap *h, double t, int id, int ver) {
  if (h->n == h->cap) {
    h->cap = h->cap ? 2 * h->cap : 256;
    h->a = wt_xrealloc(h->a, (size_t)h->cap, sizeof *h->a);
  }
  int i = h->n++;
  while (i > 0 && h->a[(i - 1) / 2].t > t) {
    h->a[i] = h->a[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  h->a[i] = (s_event){t, id, ver};
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

/* ---- active flows and the NICs they load --------------------------------------------------- */

typedef struct {
  int task;         /* -1 while the slot is free */
  int src, dst;     /* devices */
  double cap;       /* the pair's bandwidth, bytes/s */
  double remaining; /* bytes left at t_upd */
  double rate, t_upd;
  int ver;         /* bumped whenever its drain time changes or it ends */
  int nr;          /* resources it loads: egress NIC, ingress NIC, then uplink, downlink */
  int r[4], at[4]; /* those resources and its positions in their lists */
  int mark;        /* component search stamp */
} s_flow;

typedef struct {
  int *a, n, cap;
} s_list;

static void s_list_push(s_list *l, int v) {
  if (l->n == l->cap) {
    l->cap = l->cap ? 2 * l->cap : 8;
    l->a = wt_xrealloc(l->a, (size_t)l->cap, sizeof(int));
  }
  l->a[l->n++] = v;
}

/* A resource is one direction of one NIC: 2d egress of device d, 2d+1 its ingress; or of one
 * access link l: 2n + 2l its uplink, 2n + 2l + 1 its downlink. */
typedef struct {
  s_list flows; /* flow slots using it */
  double left;  /* capacity not yet given to frozen flows (during a filling) */
  int unfrozen; /* its flows still rising (during a filling) */
  int mark;     /* component search stamp */
  int dirty;    /* its flow set changed since the last sharing */
} s_res;

typedef struct {
  netsim_graph *g;
  const assign_network *net;
  const double *nic;
  const assign_access *access;
  int free_pp;
  double t;
  s_heap timed;  /* compute / join / arrival completions by task */
  s_heap drains; /* flow drain times by slot */
  s_flow *flows;
  int n_slots, cap_slots;
  s_list free_slots;
  int active;
  s_res *res; /* 2 per device, then 2 per access link */
  int n_res;
  s_list dirty;
  int stamp;
  /* scratch of one sharing */
  s_list comp_res, comp_flows;
  s_heap fill, caps;
  char *frozen; /* by slot */
  int done;
} s_engine;

static void s_flow_drain_at(s_engine *e, int slot) {
  s_flow *f = &e->flows[slot];
  f->ver++;
  if (f->rate > 0) s_heap_push(&e->drains, f->t_upd + f->remaining / f->rate, slot, f->ver);
}

static void s_res_dirty(s_engine *e, int r) {
  if (!e->res[r].dirty) {
    e->res[r].dirty = 1;
    s_list_push(&e->dirty, r);
  }
}

static void s_flow_add(s_engine *e, int task) {
  const netsim_task *t = &e->g->tasks[task];
  int slot;
  if (e->free_slots.n) {
    slot = e->free_slots.a[--e->free_slots.n];
  } else {
    if (e->n_slots == e->cap_slots) {
      e->cap_slots = e->cap_slots ? 2 * e->cap_slots : 64;
      e->flows = wt_xrealloc(e->flows, (size_t)e->cap_slots, sizeof *e->flows);
      e->frozen = wt_xrealloc(e->frozen, (size_t)e->cap_slots, 1);
    }
    slot = e->n_slots++;
    e->flows[slot].ver = 0;
    e->flows[slot].mark = 0;
  }
  s_flow *f = &e->flows[slot];
  f->task = task;
  f->src = t->device;
  f->dst = t->dst;
  f->cap = e->net->bandwidth_Bps[t->device * e->net->n + t->dst];
  f->remaining = t->bytes;
  f->rate = 0;
  f->t_upd = e->t;
  f->ver++;
  f->nr = 0;
  f->r[f->nr++] = 2 * f->src;
  f->r[f->nr++] = 2 * f->dst + 1;
  const assign_access *a = e->access;
  if (a && a->link_of[f->src] != a->link_of[f->dst]) {
    int base = 2 * e->net->n, lu = a->link_of[f->src], ld = a->link_of[f->dst];
    if (isfinite(a->up_Bps[lu])) f->r[f->nr++] = base + 2 * lu;
    if (isfinite(a->down_Bps[ld])) f->r[f->nr++] = base + 2 * ld + 1;
  }
  for (int k = 0; k < f->nr; k++) {
    f->at[k] = e->res[f->r[k]].flows.n;
    s_list_push(&e->res[f->r[k]].flows, slot);
    s_res_dirty(e, f->r[k]);
  }
  e->active++;
}

/* Removes slot from a resource's list, moving the last entry into its place. */
static void s_res_unlink(s_engine *e, int r, int at) {
  s_list *l = &e->res[r].flows;
  int moved = l->a[--l->n];
  if (at < l->n) {
    l->a[at] = moved;
    s_flow *m = &e->flows[moved];
    for (int k = 0; k < m->nr; k++)
      if (m->r[k] == r) m->at[k] = at;
  }
}

static void s_flow_remove(s_engine *e, int slot) {
  s_flow *f = &e->flows[slot];
  for (int k = 0; k < f->nr; k++) {
    s_res_unlink(e, f->r[k], f->at[k]);
    s_res_dirty(e, f->r[k]);
  }
  f->task = -1;
  f->ver++;
  s_list_push(&e->free_slots, slot);
  e->active--;
}

/* ---- max-min fair sharing of the touched components ---------------------------------------- */

/* Collects the component of resource r (breadth-first over flows) into comp_res / comp_flows. */
static void s_component(s_engine *e, int r0) {
  if (e->res[r0].mark == e->stamp) return;
  int head = e->comp_res.n;
  e->res[r0].mark = e->stamp;
  s_list_push(&e->comp_res, r0);
  while (head < e->comp_res.n) {
    const s_res *r = &e->res[e->comp_res.a[head++]];
    for (int i = 0; i < r->flows.n; i++) {
      int slot = r->flows.a[i];
      s_flow *f = &e->flows[slot];
      if (f->mark == e->stamp) continue;
      f->mark = e->stamp;
      s_list_push(&e->comp_flows, slot);
      for (int k = 0; k < f->nr; k++)
        if (e->res[f->r[k]].mark != e->stamp) {
          e->res[f->r[k]].mark = e->stamp;
          s_list_push(&e->comp_res, f->r[k]);
        }
    }
  }
}

/* Fixes flow `slot` at `rate` from now on: bytes sent so far are booked at the old rate. */
static void s_flow_set_rate(s_engine *e, int slot, double rate) {
  s_flow *f = &e->flows[slot];
  /* Re-sharing a component leaves most rates where they were: keep their drain entries. */
  if (rate == f->rate) return;
  f->remaining = fmax(0, f->remaining - f->rate * (e->t - f->t_upd));
  f->t_upd = e->t;
  f->rate = rate;
  s_flow_drain_at(e, slot);
}

/* Freezes a rising flow at `level`: its NICs lose that much capacity and one rising flow. Their
 * heap keys are left as they are: a NIC's level can only rise when a flow freezes, so a stale
 * key is too low and is corrected when it reaches the top. */
static void s_fill_freeze(s_engine *e, int slot, double level) {
  e->frozen[slot] = 1;
  s_flow_set_rate(e, slot, level);
  const s_flow *f = &e->flows[slot];
  for (int k = 0; k < f->nr; k++) {
    s_res *res = &e->res[f->r[k]];
    res->left = fmax(0, res->left - level);
    res->unfrozen--;
  }
}

/* Capacity of resource r in bytes/s. */
static double s_capacity(const s_engine *e, int r) {
  int n = e->net->n;
  if (r < 2 * n) return e->nic[r / 2];
  int l = (r - 2 * n) / 2;
  return r % 2 ? e->access->down_Bps[l] : e->access->up_Bps[l];
}

/* Restores the heap below index i (Floyd's construction calls it bottom-up: O(n) in all). */
static void s_heap_sift_down(s_heap *h, int i) {
  s_event x = h->a[i];
  for (;;) {
    int c = 2 * i + 1;
    if (c >= h->n) break;
    if (c + 1 < h->n && h->a[c + 1].t < h->a[c].t) c++;
    if (h->a[c].t >= x.t) break;
    h->a[i] = h->a[c];
    i = c;
  }
  h->a[i] = x;
}

/* Water-filling: every rising flow holds the same level; the limit reached first (a NIC whose
 * rising flows share what is left of it, or a flow's own pair bandwidth) freezes its flows at
 * that level. Levels only rise, so one pass suffices, merging two heaps: NICs by the level at
 * which they fill, and pair bandwidths. The second is built in linear time and popped only as
 * far as the level climbs, since most flows stop at a NIC. */
static void s_share_component(s_engine *e) {
  s_heap *nics = &e->fill, *caps = &e->caps;
  nics->n = caps->n = 0;
  for (int i = 0; i < e->comp_res.n; i++) {
    s_res *res = &e->res[e->comp_res.a[i]];
    res->left = s_capacity(e, e->comp_res.a[i]);
    res->unfrozen = res->flows.n;
    if (res->unfrozen) s_heap_push(nics, res->left / res->unfrozen, e->comp_res.a[i], 0);
  }
  int rising = e->comp_flows.n;
  if (caps->cap < rising) {
    caps->cap = rising;
    caps->a = wt_xrealloc(caps->a, (size_t)rising, sizeof *caps->a);
  }
  for (int i = 0; i < rising; i++) {
    int slot = e->comp_flows.a[i];
    e->frozen[slot] = 0;
    caps->a[i] = (s_event){e->flows[slot].cap, slot, 0};
  }
  caps->n = rising;
  for (int i = rising / 2 - 1; i >= 0; i--) s_heap_sift_down(caps, i);
  while (rising > 0) {
    if (caps->n && (nics->n == 0 || caps->a[0].t <= nics->a[0].t)) {
      s_event c = s_heap_pop(caps);
      if (!e->frozen[c.id]) s_fill_freeze(e, c.id, c.t), rising--;
      continue;
    }
    if (nics->n == 0) break; /* cannot happen: every rising flow is in some NIC's count */
    s_event top = s_heap_pop(nics);
    s_res *res = &e->res[top.id];
    if (res->unfrozen == 0) continue;
    double level = res->left / res->unfrozen;
    if (level > top.t) {
      s_heap_push(nics, level, top.id, 0);
      continue;
    }
    for (int i = 0; i < res->flows.n && res->unfrozen > 0; i++)
      if (!e->frozen[res->flows.a[i]]) s_fill_freeze(e, res->flows.a[i], top.t), rising--;
  }
}

/* Re-shares every component that holds a resource whose flow set changed. */
static void s_share_dirty(s_engine *e) {
  /* One stamp for the pass: a component holding several dirty resources is shared once. */
  e->stamp++;
  for (int i = 0; i < e->dirty.n; i++) {
    int r = e->dirty.a[i];
    e->res[r].dirty = 0;
    e->comp_res.n = e->comp_flows.n = 0;
    s_component(e, r);
    if (e->comp_flows.n) s_share_component(e);
  }
  e->dirty.n = 0;
}

/* ---- the loop -------------------------------------------------------------------------------- */

/* A task whose dependencies are all done starts now. */
static void s_start(s_engine *e, int id) {
  netsim_task *task = &e->g->tasks[id];
  double t = e->t;
  task->start_s = t;
  int free = e->free_pp && task->kind == NETSIM_TASK_XFER && task->xfer_kind == NETSIM_XFER_PP;
  if (task->kind == NETSIM_TASK_COMPUTE) {
    s_heap_push(&e->timed, t + task->duration, id, 0);
  } else if (task->kind == NETSIM_TASK_JOIN) {
    s_heap_push(&e->timed, t, id, 0);
  } else if (task->bytes <= 0 || free) {
    task->send_end_s = t;
    s_heap_push(&e->timed, t + (free ? 0 : task->latency_s), id, 0);
  } else {
    s_flow_add(e, id);
  }
}

static void s_finish(s_engine *e, int id) {
  netsim_task *task = &e->g->tasks[id];
  task->end_s = e->t;
  e->done++;
  for (int k = 0; k < task->n_succ; k++) {
    int s = task->succ[k];
    if (--e->g->tasks[s].pending == 0) s_start(e, s);
  }
}

/* The earliest drain still current (stale entries are dropped), or +inf. */
static double s_next_drain(s_engine *e) {
  while (e->drains.n) {
    const s_event *top = &e->drains.a[0];
    const s_flow *f = &e->flows[top->id];
    if (f->task >= 0 && f->ver == top->ver) return top->t;
    s_heap_pop(&e->drains);
  }
  return INFINITY;
}

/* Hands a drained flow to the latency stage: its last byte left at time t. */
static void s_drain(s_engine *e, int slot) {
  netsim_task *task = &e->g->tasks[e->flows[slot].task];
  task->send_end_s = e->t;
  s_heap_push(&e->timed, e->t + task->latency_s, e->flows[slot].task, 0);
  s_flow_remove(e, slot);
}

/* One turn: jump to the earliest event, drain every flow due by then (flows due within 1e-12
 * of the clock drain together, so identical transfers on identical links end as one event
 * rather than one re-sharing each), then finish every completion due. Returns 0 when nothing is
 * left to happen. */
static int s_step(s_engine *e) {
  double drain = s_next_drain(e);
  double timed = e->timed.n ? e->timed.a[0].t : INFINITY;
  double next = fmin(drain, timed);
  if (next == INFINITY) return 0;
  e->t = fmax(e->t, next);
  double due = e->t + 1e-12 * fabs(e->t);
  while (s_next_drain(e) <= due) s_drain(e, s_heap_pop(&e->drains).id);
  while (e->timed.n && e->timed.a[0].t <= e->t) s_finish(e, s_heap_pop(&e->timed).id);
  return 1;
}

static void s_engine_free(s_engine *e) {
  for (int r = 0; r < e->n_res; r++) free(e->res[r].flows.a);
  free(e->res);
  free(e->flows);
  free(e->frozen);
  free(e->free_slots.a);
  free(e->dirty.a);
  free(e->comp_res.a);
  free(e->comp_flows.a);
  free(e->timed.a);
  free(e->drains.a);
  free(e->fill.a);
  free(e->caps.a);
}

int netsim_engine_run(netsim_graph *g, const assign_network *net, const double *nic_Bps,
                      const assign_access *access, int free_pp, double deadline_s) {
  s_engine e = {.g = g, .net = net, .nic = nic_Bps, .access = access, .free_pp = free_pp};
  e.n_res = 2 * net->n + (access ? 2 * access->n_links : 0);
  e.res = wt_xcalloc((size_t)e.n_res, sizeof *e.res);
  for (int i = 0; i < g->n; i++)
    if (g->tasks[i].pending == 0) s_start(&e, i);
  /* Each turn retires at least one transfer or completion: a transfer drains once and a task
   * completes once, so more turns than twice the tasks would be a bug, not a slow network. */
  long turns = 0, max_turns = 2L * g->n + 2;
  int rc = WT_OK;
  for (;;) {
    s_share_dirty(&e);
    if (!s_step(&e)) break;
    if ((++turns & 255) == 0 && deadline_s > 0 && wt_now_s() > deadline_s) {
      rc = wt_fail(WT_ETIMEOUT,
                   "simulation stopped at its time limit after %ld events (%d of %d tasks done, "
                   "simulated clock %g s)",
                   turns, e.done, g->n, e.t);
      break;
    }
    if (turns > max_turns) {
      rc = wt_fail(WT_EINVAL, "simulation made no progress after %ld events (clock %g s)", turns,
                   e.t);
      break;
    }
  }
  int stuck = e.active;
  s_engine_free(&e);
  WT_CHECK(rc);
  if (stuck > 0)
    return wt_fail(WT_EINVAL,
                   "simulation stalled: %d transfers have no bandwidth (a link or NIC of 0 "
                   "bytes/s)",
                   stuck);
  if (e.done != g->n)
    return wt_fail(WT_EINVAL, "simulation stalled: %d of %d tasks never ran", g->n - e.done, g->n);
  return WT_OK;
}
