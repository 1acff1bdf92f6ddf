/* assign — where each tasklet (pipeline stage × data-parallel replica) runs: the two-level cost
 * model of Yuan et al. 2022 and the solvers that minimise it. A pure library: no sockets, no
 * files, no printing.
 *
 * Vocabulary:
 *   network  N devices with one-way latency α (s) and bandwidth β (bytes/s) between each pair
 *            (symmetrised on load as the mean of both directions), optional compute speed and
 *            memory per device.
 *   problem  the network plus D_PP (stages), D_DP (replicas), c_DP (gradient bytes of one
 *            stage), c_PP (activation bytes crossing one cut per iteration) and options.
 *   plan     the assignment, as a D_PP × D_DP table: device[s * d_dp + r] runs stage s of
 *            pipeline replica r. Row s is data-parallel group C_s (stage s's replicas); the row
 *            order is the pipeline order; column r is one pipeline (the matching between
 *            neighbouring groups). Every device appears exactly once.
 *
 * Cost (paper's model, the default):
 *   DATAP(C) = max_{d∈C} Σ_{d'∈C∖{d}} 2(α_dd' + c_DP / (D_DP·β_dd')),  DATAP = max_s DATAP(C_s)
 *   w(C, C') = min over perfect matchings M of max_{(d,d')∈M} (α_dd' + c_PP/β_dd')
 *   PIPELINEP = open-loop TSP over groups with weights w;  COMM = DATAP + 2·PIPELINEP
 * plan_cost evaluates a plan as given (its own row order and columns); the solvers choose rows
 * (the partition) and then order and match them optimally, so their plans cost what the model
 * says the partition costs.
 */
#ifndef WT_ASSIGN_H
#define WT_ASSIGN_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  int n;                  /* devices */
  double *latency_s;      /* n*n, one way, symmetric after assign_network_symmetrize */
  double *bandwidth_Bps;  /* n*n, bytes per second, > 0 off the diagonal */
  double *compute_speed;  /* n, relative speed (1 = reference); NULL = all 1 */
  double *memory_bytes;   /* n; NULL = unlimited */
} assign_network;

typedef enum { ASSIGN_DP_SHARDED_PS = 0, ASSIGN_DP_RING = 1 } assign_dp_algo;

typedef struct {
  const assign_network *net;
  int d_pp, d_dp;          /* d_pp * d_dp == net->n */
  double c_dp_bytes;       /* gradient bytes of one stage */
  double c_pp_bytes;       /* activation bytes per pipeline cut per iteration */
  /* Beyond the paper (all off / zero by default = the paper's model): */
  assign_dp_algo dp_algo;  /* data-parallel term: sharded parameter server (paper) or ring */
  double compute_s;        /* compute time of one tasklet on a speed-1 device; 0 = not modelled.
                              When > 0, COMM gains max over tasklets of compute_s / speed. */
  double stage_memory_bytes; /* memory one tasklet needs; 0 = not checked. A plan placing a
                                tasklet on a device with less memory is infeasible (cost +inf). */
} assign_problem;

typedef struct {
  int d_pp, d_dp;
  int *device; /* d_pp * d_dp entries; owned by the plan */
} assign_plan;

typedef struct {
  double comm_s;     /* total cost COMM (+ compute term when modelled) */
  double dp_s;       /* DATAP */
  double pp_s;       /* 2 · PIPELINEP */
  double compute_s;  /* the compute term (0 when not modelled) */
  int feasible;      /* 0 if a memory constraint is violated */
} assign_cost;

/* Validates a problem: sizes, symmetric positive bandwidths, non-negative latencies.
 * Returns WT_OK or WT_EINVAL naming the problem. */
int assign_problem_validate(const assign_problem *p);

/* Makes latency and bandwidth symmetric: x_dd' = x_d'd = (x_dd' + x_d'd) / 2. */
void assign_network_symmetrize(assign_network *net);

assign_plan *assign_plan_new(int d_pp, int d_dp);
void assign_plan_destroy(assign_plan **self_p);
assign_plan *assign_plan_copy(const assign_plan *src);

/* Cost of a plan exactly as laid out (row order = pipeline order, columns = matchings). */
assign_cost assign_plan_cost(const assign_problem *p, const assign_plan *plan);

/* Cost of the partition the plan's rows define, with the best pipeline order (Held–Karp for
 * d_pp <= 16, else a heuristic) and bottleneck matchings; rewrites the plan's row order and
 * columns to that optimum. */
assign_cost assign_plan_optimize_order(const assign_problem *p, assign_plan *plan);

#endif
