/* assign_internal — what the assign/ sources share and nobody else sees: the precomputed model
 * (pair costs), the partition search state used by every solver, and the solver entry points.
 *
 * A partition is a table rows[P*K] (row s = data-parallel group s, in no particular order); the
 * search state keeps per-row DATAP terms, the P×P table of bottleneck-matching edge weights and
 * a pipeline order, so that swapping two devices re-evaluates only the two touched rows and
 * their 2(P−1) edges.
 */
#ifndef WT_ASSIGN_INTERNAL_H
#define WT_ASSIGN_INTERNAL_H

#include "assign/assign.h"
#include "common/common.h"
#include "common/rng.h"

/* fmin/fmax without the NaN handling that keeps them library calls (inputs are validated). */
static inline double assign_dmin(double a, double b) {
  return a < b ? a : b;
}
static inline double assign_dmax(double a, double b) {
  return a > b ? a : b;
}

/* The share of DATAP an iteration pays: the sync runs every dp_every iterations (DiLoCo). */
static inline double assign_dp_weight(const assign_problem *p) {
  return p->dp_every > 1 ? 1.0 / p->dp_every : 1.0;
}

/* Inside searches the order is re-optimised after each committed move: Held–Karp up to this
 * many groups, 2-opt above. Final plans are ordered by Held–Karp up to ASSIGN_EXACT_TSP_MAX. */
#define ASSIGN_SEARCH_TSP_EXACT_MAX 10
#define ASSIGN_EXACT_TSP_MAX 16
/* The search keeps the all-pairs matching sum, and the local search ends with a chain led by it
 * (see localsearch.c), when a partition has at most this many swaps: each one scanned costs
 * 2(P−1) min-sum matchings of O(K³). */
#define ASSIGN_ALIKE_SWAPS_MAX 4096
/* ga enumerates every partition (the exact solver, ~6 ms at 12 devices) up to this many devices. */
#define ASSIGN_GA_EXACT_MAX 12
/* ga's default budget when the caller gives none. */
#define ASSIGN_GA_DEFAULT_S 1.0
/* Rings are ordered exactly (bottleneck Hamiltonian cycle) up to this many replicas. */
#define ASSIGN_RING_EXACT_MAX 10

/* ---- the network model's shared parts (access.c) ------------------------------------------ */

/* Path bandwidth from i to j through their access links: min(β_ij, up(i), down(j)) when on
 * different links, β_ij otherwise (and without access links). */
double assign_path_Bps(const assign_problem *p, int i, int j);
/* 1 when two of the k devices are on one access link (so concurrent hops may share it). */
int assign_access_shared(const assign_problem *p, int k, const int *devs);
/* Max-min fair rates of F concurrent transfers src[f] → dst[f]: each capped by its path
 * bandwidth, those crossing access links sharing the sender's uplink and receiver's downlink. */
void assign_access_share(const assign_problem *p, int F, const int *src, const int *dst,
                         double *rate);
/* One step of every stage's ring at once (ring[s*K + i] as plan->ring): the slowest hop of the
 * P·K transfers of c_dp/K bytes, sharing access links across stages. */
double assign_rings_time(const assign_problem *p, const assign_plan *plan, const int *ring);
/* One pipeline cut of K hops from[r] → to[r], all at once: max over hops of the mean of the
 * forward (c_pp from → to) and backward (to → from) transfer times under sharing. */
double assign_cut_time(const assign_problem *p, int K, const int *from, const int *to);

typedef struct {
  const assign_problem *p;
  int n, P, K;
  int shared; /* some access link holds two devices: rings and cuts may share it */
  /* Pair costs. With access links shared by several devices the searches divide each uplink
   * and downlink among the transfers that can cross it at once (model.c, s_search_Bps); the
   * exact sharing is priced on whole plans (assign_plan_cost). */
  double *dpc; /* n*n: PS: t(d→d') + t(d'→d) of a c_dp/K shard (the paper's 2(α + c_dp/(K·β))
                  when symmetric); ring: one hop α + (c_dp/K)/β */
  double *ppc; /* n*n: (t(d→d', c_pp) + t(d'→d, c_pp)) / 2 (α + c_pp/β when symmetric) */
  double compute_s;  /* the placement-independent compute term */
  int feasible;      /* memory check */
  double *scratch_w; /* K*K matching weights */
  int *scratch_i;    /* work space for matching */
} assign_model;

void assign_model_init(assign_model *m, const assign_problem *p);
void assign_model_free(assign_model *m);
/* DATAP of one group of K devices. */
double assign_model_group_dp(assign_model *m, const int *devs);
/* Edge weight between two groups: bottleneck matching of ppc; match[i] = index in b paired
 * with a[i] when match is not NULL. When soft is not NULL it receives a smooth companion of the
 * bottleneck, the mean over the 2K members of their cheapest partner in the other group: it
 * falls as the two groups' members come closer even while the bottleneck pair stays put. */
double assign_model_edge(assign_model *m, const int *a, const int *b, int *match, double *soft);

/* How a partition's pipeline order is chosen. */
typedef enum {
  ASSIGN_ORDER_HEURISTIC = 0, /* nearest neighbour + 2-opt */
  ASSIGN_ORDER_EXACT = 1,     /* Held–Karp when P <= ASSIGN_EXACT_TSP_MAX, else heuristic */
  ASSIGN_ORDER_KEEP = 2       /* rows stay in their order (resolve keeps stages in place) */
} assign_order_mode;

/* Evaluates the partition in rows[P*K] with its pipeline order chosen by `mode` and the
 * bottleneck matchings, and rewrites rows into that plan layout (row order = pipeline order,
 * columns matched). */
assign_cost assign_model_partition_cost(assign_model *m, int *rows, assign_order_mode mode);

/* Re-matches the columns of rows[P*K] along the row order as given (P−1 bottleneck matchings,
 * the best columns for that order) and returns the plan's cost. */
assign_cost assign_model_rematch(assign_model *m, int *rows);

/* 2-opt on an open path in place; returns its length. */
double assign_tsp_improve(int m, const double *w, int *order);

/* WT_EINVAL naming the first device whose memory is below stage_memory_bytes: every device runs
 * a tasklet, so then no plan is feasible. */
int assign_problem_check_feasible(const assign_problem *p);

/* ---- search state -------------------------------------------------------------------------- */

typedef struct {
  assign_model *m;
  int P, K, n;
  int *rows;                  /* P*K */
  int *label;                 /* n: row of each device */
  int *slot;                  /* n: index within its row */
  double *sum;                /* n: PS: Σ over the row of dpc (the device's DATAP sum) */
  double *rowdp;              /* P */
  double *edge;               /* P*P */
  double *soft;               /* P*P: the edges' smooth companions (see assign_model_edge) */
  int *order;                 /* P: pipeline order over rows */
  double dp, path, cost, tie; /* tie = Σ_rows DATAP(C) + Σ_path edges soft: breaks plateaus */
  /* The surrogate of the local search's last chain (kept only when `alike_on`): pairsum[a*P+b]
   * is the min-sum matching cost of rows a and b under the pipeline pair cost, alike the Σ over
   * all pairs of rows (see search.c for why). */
  int alike_on;
  double alike;
  double *pairsum;                    /* P*P */
  double *h_work, *h_work2, *h_work3; /* K+1 each: Hungarian potentials and slacks */
  int *h_match, *h_way;               /* K+1 each */
  char *h_used;                       /* K+1 */
  /* scratch for a tentative swap */
  double *t_edge, *t_soft, *t_pairsum; /* P*P */
  int *t_order;
  double *t_sum_a, *t_sum_b;
  int *t_rowa, *t_rowb;
  double t_dpa, t_dpb, t_dp, t_path, t_cost, t_tie;
  int t_complete; /* the tentative swap was fully evaluated (not rejected early) */
  int t_x, t_y;   /* the pair it is about */
  long evals;
  assign_order_mode mode; /* how the path is found inside the search */
} assign_search;

/* mode: ASSIGN_ORDER_KEEP for resolve (rows never re-ordered); otherwise a tentative swap is
 * costed with the order held and a committed one re-orders (Held–Karp when P <=
 * ASSIGN_SEARCH_TSP_EXACT_MAX, else 2-opt); assign_search_to_plan orders the final plan exactly. */
void assign_search_init(assign_search *s, assign_model *m, assign_order_mode mode);
void assign_search_free(assign_search *s);
/* Loads a partition given as labels (row of each device, K per row) and evaluates it fully. */
void assign_search_load_labels(assign_search *s, const int *label);
/* Loads a partition given as rows[P*K] (kept in this row order). */
void assign_search_load_rows(assign_search *s, const int *rows);
/* Evaluates swapping devices x and y (different rows) into the tentative fields, with the
 * pipeline order held; returns the tentative cost. Rejects early (returns +inf, t_complete = 0)
 * when DATAP alone exceeds `bound`. */
double assign_search_try_swap(assign_search *s, int x, int y, double bound);
/* s->alike after swapping x and y (different rows), without costing the swap or changing the
 * state; counts as an evaluation. Only when s->alike_on. */
double assign_search_try_alike(assign_search *s, int x, int y);
/* Commits the swap of x and y (re-evaluating it unless the last try_swap was that pair and
 * complete), then re-orders the pipeline; s->cost may end below the tentative cost. */
void assign_search_commit_swap(assign_search *s, int x, int y);
/* Lexicographic (cost, tie) comparison with a relative tolerance: <0 if a better. */
int assign_search_cmp(double ca, double ta, double cb, double tb);
/* Writes the current partition as an ordered, matched plan and returns its exact cost. */
assign_cost assign_search_to_plan(assign_search *s, assign_plan *plan);

/* ---- solver bookkeeping ---------------------------------------------------------------------- */

typedef struct {
  double t0, max_s;
  long max_evals;
  long *evals;      /* the search's counter */
  assign_stats *st; /* never NULL inside solvers */
  double best;
} assign_tracker;

void assign_tracker_init(assign_tracker *t, const assign_budget *b, assign_stats *st, long *evals,
                         double default_s, long default_evals);
/* 1 when the budget is spent. */
int assign_tracker_done(const assign_tracker *t);
/* 1 when the budget is spent or a step expected to take next_s seconds would overrun its time
 * limit: on large instances one step (a full evaluation) can cost many times the whole budget. */
int assign_tracker_done_before(const assign_tracker *t, double next_s);
/* Records cost if it improves the best (a curve point). */
void assign_tracker_offer(assign_tracker *t, double cost);

/* Each solver writes its best partition as labels[n] (row per device). */
int assign_solve_random(assign_search *s, assign_tracker *t, wt_rng *rng, int *labels);
int assign_solve_greedy(assign_search *s, assign_tracker *t, wt_rng *rng, int *labels);
int assign_solve_ga(assign_search *s, assign_tracker *t, wt_rng *rng, int population,
                    int random_only, int *labels);
int assign_solve_exact(assign_search *s, assign_tracker *t, int *labels);
/* Swaps devices of a partition given as labels[n] while that lowers the sum of dpc over pairs
 * inside groups, until `patience` random tries in a row fail; adds its tries to *evals. */
void assign_cluster_descent(const assign_model *m, int *label, wt_rng *rng, long patience,
                            long *evals);
/* One cyclic local search (chains of swaps, best prefix kept) on the search's current
 * partition; returns 1 if it improved. */
int assign_local_search(assign_search *s, assign_tracker *t, wt_rng *rng, int max_rounds);

/* ---- layout refinement (refine.c) ------------------------------------------------------------
 * A local search on a laid-out plan (dev[s*K + c] runs stage s of pipeline c, rows in pipeline
 * order): order and matchings are held, so a swap of two devices re-prices at most two rows and
 * the hops of two columns at four cuts, O(K + P) whatever n is. */
typedef struct {
  assign_model *m;
  int n, P, K;
  int *dev;                         /* n: the layout */
  int *pos;                         /* n: place (s*K + c) of each device */
  double *sum;                      /* n: PS: the device's DATAP sum within its row */
  double *rowdp;                    /* P */
  double *hop;                      /* (P-1)*K: ppc between dev[s*K+c] and dev[(s+1)*K+c] */
  double *cutmax;                   /* P-1: each cut's slowest hop */
  int *cutarg;                      /* P-1: its column */
  double *cut2;                     /* P-1: the slowest hop of the other columns */
  double dp, path, hops, cost, tie; /* hops = Σ all hops; tie = Σ rows' DATAP + hops */
  int L;                            /* nearest neighbours per device (by ppc) */
  int *knn;                         /* n*L */
  long *evals;                      /* counter the moves add to (the search's) */
  /* the last tentative swap */
  int t_x, t_y;
  double t_dpx, t_dpy, t_cost, t_tie;
  double *t_sum; /* 2K: new DATAP sums of x's row, then y's row */
  int *t_row;    /* K: ring DATAP work row */
} assign_refine;

/* Precomputes the nearest-neighbour lists (O(n²) reads of ppc); evals is the counter to add to. */
void assign_refine_init(assign_refine *r, assign_model *m, long *evals);
void assign_refine_free(assign_refine *r);
/* Loads a layout (n entries, rows in pipeline order) and prices it fully. */
void assign_refine_load(assign_refine *r, const int *layout);
/* Cost of the layout after x and y trade places (any two devices), without changing the state;
 * the tie goes to r->t_tie. */
double assign_refine_try_swap(assign_refine *r, int x, int y);
/* Trades the places of x and y. */
void assign_refine_commit_swap(assign_refine *r, int x, int y);
/* Cost of the layout after stages s1..s2 (s1 < s2) of column c are reversed (hops keep their
 * lengths and move between cuts; the rows in between each trade one member); tie in r->t_tie.
 * Returns +inf (tie +inf) without pricing the rows when the new path alone already puts the
 * cost above `bound`: O(s2 − s1 + P) then, plus O((s2 − s1)·K) for the rows otherwise. */
double assign_refine_try_reverse(assign_refine *r, int c, int s1, int s2, double bound);
void assign_refine_commit_reverse(assign_refine *r, int c, int s1, int s2);
/* Iterated local search from the loaded layout until the tracker's budget is spent, but for at
 * least min_evals moves; leaves the best layout found loaded and offers improvements to t. */
void assign_refine_run(assign_refine *r, assign_tracker *t, wt_rng *rng, long min_evals);

#endif
