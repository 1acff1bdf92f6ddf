/* sim_internal — the task graph the simulator runs, shared by the graph builder (sim.c), the
 * event engine (engine.c) and the timeline writer (trace.c). Not part of the public API. */
#ifndef WT_NETSIM_SIM_INTERNAL_H
#define WT_NETSIM_SIM_INTERNAL_H

#include "netsim/netsim.h"

typedef enum {
  NETSIM_TASK_COMPUTE, /* occupies nothing shared: a device's passes are chained in order */
  NETSIM_TASK_XFER,    /* a flow from device to dst sharing NICs, then one-way latency */
  NETSIM_TASK_JOIN,    /* zero-time barrier */
} netsim_task_kind;

typedef enum { NETSIM_XFER_PP, NETSIM_XFER_DP } netsim_xfer_kind;

typedef struct {
  netsim_task_kind kind;
  int device;      /* compute: the device; transfer: the sender */
  int dst;         /* transfer: the receiver */
  double duration; /* compute seconds */
  double bytes, latency_s;
  netsim_xfer_kind xfer_kind;
  char label[64]; /* trace name: "F mb3 s1 r0", "act mb3 s1→2 r0", "dp ring step 2" */
  int pending;    /* dependencies not yet done */
  int *succ, n_succ, cap_succ;
  /* Filled by the engine: */
  double start_s;    /* compute started / flow became ready */
  double send_end_s; /* transfer: last byte left the sender */
  double end_s;      /* compute finished / transfer arrived / join passed */
} netsim_task;

typedef struct {
  netsim_task *tasks;
  int n, cap;
} netsim_graph;

/* Appends a task (pending = 0, no successors) and returns its index. */
int netsim_graph_add(netsim_graph *g, netsim_task task);
/* Records that `after` waits for `before`. */
void netsim_graph_dep(netsim_graph *g, int before, int after);
void netsim_graph_free(netsim_graph *g);

/* Runs the graph from time 0 and fills the tasks' times; transfers share NICs and, when access
 * is not NULL, access links (see netsim.h). Transfers of kind PP take zero time
 * when free_pp is set (used to separate bubble from pipeline communication). deadline_s is a
 * wt_now_s() time after which the run stops with WT_ETIMEOUT (0 = none). Returns WT_OK, or
 * WT_EINVAL when some task never became ready (a cycle: a programming error in the builder). */
int netsim_engine_run(netsim_graph *g, const assign_network *net, const double *nic_Bps,
                      const assign_access *access, int free_pp, double deadline_s);

/* The timeline of a finished graph. */
netsim_trace *netsim_trace_from_graph(const netsim_graph *g, int n_devices);

#endif
