/* assign — where each tasklet (pipeline stage × data-parallel replica) runs: the two-level cost
 * model of Yuan et al. 2022 and the solvers that minimise it. A pure library: no sockets, no
 * files, no printing.
 *
 * Vocabulary:
 *   network  N devices with one-way latency α (s) and path bandwidth β (bytes/s) for each
 *            ordered pair (α_dd' need not equal α_d'd), optional compute speed and memory per
 *            device; and optionally access links (assign_access): the uplink and downlink each
 *            device reaches the network through, possibly shared by the devices of a site.
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
 *
 * Directed pairs and access links (the general model; with symmetric pairs and no access links
 * every number is the paper's, bit for bit):
 *   t(d→d', B) = α_dd' + B / β'_dd', where β'_dd' = min(β_dd', up(d), down(d')) when d and d'
 *                are on different access links, else β_dd' (a site's LAN).
 *   sharded PS: the pair term 2(α + c_DP/(D_DP·β)) becomes t(d→d') + t(d'→d) with B = c_DP/D_DP.
 *   ring:       DATAP = 2(k−1) · one step of every stage's ring at once (all stages reduce at
 *               the end of the iteration): the slowest of the P·k hops, sharing access links
 *               max-min fairly, in the plan's rings (plan->ring) or each stage's best ring
 *               (assign_ring_choose). Without shared links: max over stages of the paper's
 *               ring term, each stage alone.
 *   pipeline:   a hop's pair cost is the mean of its forward (activation) and backward (gradient)
 *               time, (t(d→d', c_PP) + t(d'→d, c_PP)) / 2; assign_plan_cost prices each cut's K
 *               concurrent hops sharing access links.
 * The searches keep per-pair costs and price a pair across a shared access link with the link
 * divided among the transfers that can cross it at once (min(devices on it, D_PP) in the
 * reduce, min(devices on it, D_DP) in a cut); assign_solve prices its final plan exactly.
 */
#ifndef WT_ASSIGN_H
#define WT_ASSIGN_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  int n;                 /* devices */
  double *latency_s;     /* n*n, one way: latency_s[d*n + d'] from d to d' */
  double *bandwidth_Bps; /* n*n, bytes per second, > 0 off the diagonal */
  double *compute_speed; /* n, relative speed (1 = reference); NULL = all 1 */
  double *memory_bytes;  /* n; NULL = unlimited */
} assign_network;

/* Access links: every device reaches the network through one access link, of which several
 * devices may share one (the peers of a home or of a site behind one uplink). A transfer between
 * devices on different access links is limited by its path bandwidth, the sender's uplink and the
 * receiver's downlink; between devices on one access link only by the path (the site's own LAN).
 * Concurrent transfers share an uplink or downlink max-min fairly. Nothing here is owned: the
 * arrays belong to whoever built the struct (netsim_scenario_access for a scenario). */
typedef struct {
  int n_links;            /* access links */
  const int *link_of;     /* n devices: the access link of each, in [0, n_links) */
  const double *up_Bps;   /* n_links: uplink capacity, bytes/s, > 0; INFINITY = unlimited */
  const double *down_Bps; /* n_links: downlink capacity, as up_Bps */
} assign_access;

typedef enum { ASSIGN_DP_SHARDED_PS = 0, ASSIGN_DP_RING = 1 } assign_dp_algo;

typedef struct {
  const assign_network *net;
  int d_pp, d_dp;    /* d_pp * d_dp == net->n */
  double c_dp_bytes; /* gradient bytes of one stage */
  double c_pp_bytes; /* activation bytes per pipeline cut per iteration */
  /* Beyond the paper (all off / zero by default = the paper's model): */
  assign_dp_algo dp_algo;      /* data-parallel term: sharded parameter server (paper) or ring */
  double compute_s;            /* compute time of one tasklet on a speed-1 device; 0 = not modelled.
                                  When > 0, COMM gains max over tasklets of compute_s / speed. */
  double stage_memory_bytes;   /* memory one tasklet needs; 0 = not checked. A plan placing a
                                  tasklet on a device with less memory is infeasible (cost +inf). */
  const assign_access *access; /* access links; NULL = unlimited (the paper's model) */
  double dp_every; /* the data-parallel sync runs once every dp_every iterations (DiLoCo's H):
                      DATAP counts 1/dp_every of itself per iteration; 0 or 1 = every one */
} assign_problem;

typedef struct {
  int d_pp, d_dp;
  int *device; /* d_pp * d_dp entries; owned by the plan */
  /* Each stage's data-parallel ring, or NULL when none was chosen: ring[s*d_dp + i] is the
   * replica (column of row s) at position i of stage s's ring, ring[s*d_dp] = 0; owned by the
   * plan. assign_solve fills it (assign_plan_choose_rings); the runtime runs these rings. */
  int *ring;
} assign_plan;

typedef struct {
  double comm_s;    /* total cost COMM (+ compute term when modelled) */
  double dp_s;      /* DATAP */
  double pp_s;      /* 2 · PIPELINEP */
  double compute_s; /* the compute term (0 when not modelled) */
  int feasible;     /* 0 if a memory constraint is violated */
} assign_cost;

/* Validates a problem: sizes, positive bandwidths, non-negative latencies (either direction of
 * a pair may differ), access links in range with capacities > 0. Returns WT_OK or WT_EINVAL
 * naming the problem. */
int assign_problem_validate(const assign_problem *p);

/* Makes latency and bandwidth symmetric: x_dd' = x_d'd = (x_dd' + x_d'd) / 2 (the paper's
 * undirected model, for callers that measured both directions but want their mean). */
void assign_network_symmetrize(assign_network *net);

/* A plan with device[i] = i and no rings; NULL (wt_last_error) for a size below 1. */
assign_plan *assign_plan_new(int d_pp, int d_dp);
void assign_plan_destroy(assign_plan **self_p);
/* A deep copy (rings included when src has them). */
assign_plan *assign_plan_copy(const assign_plan *src);

/* Checks that a plan has the problem's shape and holds every device exactly once. Returns WT_OK
 * or WT_EINVAL naming the first bad entry. */
int assign_plan_validate(const assign_problem *p, const assign_plan *plan);

/* Cost of a plan exactly as laid out (row order = pipeline order, columns = matchings, and with
 * the ring term its own rings when plan->ring is set, else each stage's best ring). The
 * problem must be valid (assign_problem_validate). A plan that fails assign_plan_validate costs
 * NaN in every field with feasible = 0, and wt_last_error() says why. */
assign_cost assign_plan_cost(const assign_problem *p, const assign_plan *plan);

/* Cost of the partition the plan's rows define, with the best pipeline order (Held–Karp for
 * d_pp <= 16, else a heuristic) and bottleneck matchings; rewrites the plan's row order and
 * columns to that optimum. An invalid plan is left alone and costs NaN, as above. */
assign_cost assign_plan_optimize_order(const assign_problem *p, assign_plan *plan);

/* ---- building blocks (public so tests and netsim can check them) ------------------------- */

/* Bottleneck perfect matching of a k×k cost table w (row-major, w[i*k+j] = cost of pairing
 * left i with right j): the matching minimising its largest pair cost. Writes the match of each
 * left vertex into match[k] when match is not NULL and returns that largest cost (0 for k=0).
 * Binary search over the sorted distinct costs, each step a Hopcroft–Karp maximum matching. */
double assign_bottleneck_matching(int k, const double *w, int *match);

/* Shortest open path visiting all m nodes once (any start, any end) under the symmetric m×m
 * weights w. Writes the visiting order into order[m] and returns the path's length. exact != 0
 * asks for Held–Karp (allowed for m <= 16); otherwise nearest-neighbour from every start plus
 * 2-opt, the heuristic used above 16. */
double assign_tsp_open_path(int m, const double *w, int exact, int *order);

/* Ring all-reduce order over k members with hop costs w (k×k, row-major, w[i*k+j] = seconds for
 * one chunk from member i to member j): every step of the ring moves a chunk over every hop at
 * once, so the best ring is the one whose slowest hop is fastest. Writes the members in ring
 * order into order[k] (starting with member 0) when order is not NULL, and returns that slowest
 * hop (0 for k <= 1). Exact for k <= 10 (binary search over the hop costs, each step a
 * Hamiltonian-cycle test by dynamic programming over subsets, 2^k·k² work); above, the best
 * nearest-neighbour ring over all starts. The cost model's ring term (2(D−1) times this, with
 * w = α + c_DP/(D·β)) and netsim's simulated ring both use it, so they agree on the order. */
double assign_ring_order(int k, const double *w, int *order);

/* ---- rings over the network model (directed pairs, shared access links) -------------------- */

/* Seconds of one ring step over the k devices devs[] in ring order order[] (positions into
 * devs): every member i sends `bytes` to the next, all at once, the k transfers sharing access
 * links max-min fairly (capped by their paths); the step lasts as long as the slowest transfer
 * (latency + bytes / its rate). The problem must be valid. 0 for k <= 1. */
double assign_ring_time(const assign_problem *p, int k, const int *devs, const int *order,
                        double bytes);

/* The ring over the k devices devs[] that the cost model prices and the runtime should run:
 * writes the order (positions into devs, order[0] = 0) and returns its step time for chunks of
 * c_DP / d_dp bytes (assign_ring_time). Without two members on one access link the hops do not
 * share and the best ring is the bottleneck ring of assign_ring_order (exact up to 10 members);
 * with sharing: every ring up to 7 members, else the better of the bottleneck ring and a ring
 * that keeps each access link's members together, each improved (up to 24 members) by moving
 * single members while the step gets faster. Region-aware in that sense: a ring crossing a shared
 * uplink once beats one that crosses it at every other hop. */
double assign_ring_choose(const assign_problem *p, int k, const int *devs, int *order);

/* Fills plan->ring (allocating it when NULL) with assign_ring_choose for every stage. Returns
 * WT_OK, or WT_EINVAL (ring untouched) when the plan does not fit the problem. */
int assign_plan_choose_rings(const assign_problem *p, assign_plan *plan);

/* ---- solvers ------------------------------------------------------------------------------ */

typedef enum {
  ASSIGN_SOLVER_RANDOM = 0, /* best of K random partitions, each ordered and matched optimally */
  ASSIGN_SOLVER_MEGATRON,   /* rank order as Megatron-LM groups ranks; fixed, not optimised */
  ASSIGN_SOLVER_DEEPSPEED,  /* the transposed rank order (pipelines on consecutive ranks) */
  ASSIGN_SOLVER_GREEDY,     /* constructive: grow groups, or pipelines, from the hardest device */
  ASSIGN_SOLVER_GA,         /* the paper's hybrid: genetic algorithm + cyclic local search, then
                               a local search on the laid-out plan; on n <= 12 devices every
                               partition instead (as exact: the optimum); on large instances
                               (more than 4096 possible swaps) greedy's plan refined by that
                               layout search, without the genetic part */
  ASSIGN_SOLVER_EXACT,      /* exhaustive with symmetry breaking; n <= 12 only */
  ASSIGN_SOLVER_COUNT
} assign_solver;

/* "random", "megatron", "deepspeed", "greedy", "ga", "exact"; "?" for an unknown value. */
const char *assign_solver_name(assign_solver kind);
/* Parses a solver name; WT_EINVAL naming the accepted names when unknown. */
int assign_solver_parse(const char *name, assign_solver *out);

/* A search stops at whichever limit comes first; zero means "no limit of that kind". With both
 * zero a solver uses its default budget (random: 5000 partitions or 1 s; ga: 1 s; resolve: 20·n
 * evaluations or 1 s). exact, and ga on n <= 12 devices, enumerate every partition and ignore
 * budgets (at most 15400 partitions, ~6 ms). Limits are checked between local-search steps, so a
 * run may pass them by one step (at most 33 evaluations) plus the final ordering of the plan;
 * under a time limit, random and ga also skip a new partition or generation that the previous
 * one's duration says would not finish in time (one costs seconds at 4096 devices), and greedy's
 * construction always runs to the end; ga's final layout refinement runs at least 20·n move
 * evaluations (O(D_DP + D_PP) to O(D_PP·D_DP) each) even past the budget, so that a
 * construction that used up the budget is still refined. Only max_evals makes a run
 * reproducible whatever the machine's speed. */
typedef struct {
  double max_seconds;
  long max_evals;
  int population;     /* ga population; 0 = default (min(50, max(10, n/2)), at most 20000/n) */
  int ga_random_only; /* 1: ga starts from random partitions only, without the greedy one */
} assign_budget;

typedef struct {
  double t_s;    /* seconds since the solver started */
  long evals;    /* evaluations so far */
  double cost_s; /* best cost found so far */
} assign_curve_point;

#define ASSIGN_CURVE_MAX 512

typedef struct {
  long evals;             /* cost evaluations (full or incremental) */
  long evals_to_best;     /* evaluations when the final best was first reached */
  double seconds;         /* wall time of the solve */
  double seconds_to_best; /* wall time when the final best was first reached */
  double best_cost_s;
  int exact_order; /* 1 if the pipeline order is Held–Karp optimal (d_pp <= 16) */
  int n_curve;     /* samples in curve, one per improvement (thinned past the max) */
  assign_curve_point curve[ASSIGN_CURVE_MAX];
} assign_stats;

/* Solves a problem with one solver, reproducibly: the same problem, kind, budget (by evals) and
 * seed give the same plan, with its rings chosen (plan->ring, assign_plan_choose_rings) — the
 * whole placement a coordinator hands to its peers. On WT_OK *out is a new plan the caller
 * destroys. stats may be NULL.
 * Returns WT_EINVAL for an invalid problem, for `exact` above 12 devices, and when no plan is
 * feasible (a device's memory below stage_memory_bytes); *out is then NULL. */
int assign_solve(const assign_problem *p, assign_solver kind, const assign_budget *budget,
                 uint64_t seed, assign_plan **out, assign_stats *stats);

/* Re-solves after devices changed, starting from prev and keeping as much of it as possible.
 *   prev     the running plan, in the indices of p's network; an entry may be -1 (a tasklet
 *            whose device left and whose index is now free or reused).
 *   changed  device indices whose row in the network now describes a different device (a spare
 *            that took a leaver's index) or that joined; they are placed afresh. Devices of the
 *            network absent from prev are also treated as joined.
 * Keeping a tasklet means a device stays in its stage (row): replicas of one stage hold the same
 * weights, so columns are re-matched freely, but the stage order is kept (reordering stages
 * would move every device's weights). Joined devices fill the vacated tasklets where they cost
 * least; then, within the budget, the best sampled swap is taken while it lowers the cost by
 * at least 1% (each swap moves two devices' weights).
 * *out is a new plan; stats may be NULL. WT_EINVAL if prev's shape does not match p, or it
 * holds a device twice or out of range. */
int assign_resolve(const assign_problem *p, const assign_plan *prev, const int *changed,
                   int n_changed, const assign_budget *budget, uint64_t seed, assign_plan **out,
                   assign_stats *stats);

/* Number of devices that run a different stage in b than in a (same shape required). */
int assign_plan_moved(const assign_plan *a, const assign_plan *b);

/* ---- sites ---------------------------------------------------------------------------------- */

/* A site: `gpus` identical GPUs behind one fast fabric (NVLink, InfiniBand) that run their
 * pipeline stage with tensor/context/expert parallelism inside (parallel/datacenter/mesh.h). The
 * WAN solvers see it as ONE device whose compute speed = gpus × efficiency × the speed of one GPU
 *   memory        = gpus × the memory of one GPU (0 = unlimited stays unlimited)
 * where efficiency in (0, 1] is the stated fraction of linear scaling the site's inner
 * parallelism keeps (its collectives and bubbles). Writes the site's speed and memory; returns
 * WT_OK, or WT_EINVAL (nothing written) for gpus < 1, efficiency outside (0, 1], a speed that is
 * not > 0 or a negative memory. */
int assign_site_device(int gpus, double efficiency, double gpu_speed, double gpu_memory_bytes,
                       double *site_speed, double *site_memory_bytes);

#endif
