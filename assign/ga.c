/* ga — the paper's hybrid: a steady-state genetic algorithm over partitions whose children are
 * polished by the cyclic local search.
 *
 * An individual is a label per device (its group). Group numbers are arbitrary, so before a
 * crossover the second parent's groups are renamed to the first's by greatest overlap; the child
 * takes each device's label from either parent at random, then a balance repair moves random
 * surplus devices of over-full groups into under-full ones. The child replaces the worse parent
 * when it is better (and not a copy of someone already in the population, which keeps the
 * population diverse). Each child also gets a few random swaps (mutation) before its local
 * search, and when the best has not improved for 4·Q generations everyone but the best is
 * replaced by fresh random partitions (a restart). The first individual is the greedy
 * partition, the rest random; on large instances random partitions first go through the cheap
 * clustering descent of cluster.c.
 */
#include "assign/assign_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  int *label;
  double cost, tie;
} s_indiv;

/* map[g2] = group of parent a that shares the most devices with group g2 of parent b. */
static void s_align(int n, int P, const int *a, const int *b, int *map, int *overlap) {
  memset(overlap, 0, (size_t)P * P * sizeof(int));
  for (int d = 0; d < n; d++) overlap[b[d] * P + a[d]]++;
  char *used_a = wt_xcalloc((size_t)P, 1), *used_b = wt_xcalloc((size_t)P, 1);
  for (int step = 0; step < P; step++) {
    int bg = -1, ag = -1, best = -1;
    for (int i = 0; i < P; i++)
      for (int j = 0; j < P && !used_b[i]; j++)
        if (!used_a[j] && overlap[i * P + j] > best) best = overlap[i * P + j], bg = i, ag = j;
    map[bg] = ag;
    used_b[bg] = used_a[ag] = 1;
  }
  free(used_a);
  free(used_b);
}

/* Moves random devices out of over-full groups into under-full ones until all hold K. */
static void s_repair(wt_rng *rng, int n, int P, int K, int *label, int *count, int *perm) {
  memset(count, 0, (size_t)P * sizeof(int));
  for (int d = 0; d < n; d++) count[label[d]]++;
  for (int i = 0; i < n; i++) perm[i] = i;
  wt_rng_shuffle_int(rng, perm, n);
  int under = 0;
  for (int i = 0; i < n; i++) {
    int d = perm[i];
    if (count[label[d]] <= K) continue;
    while (count[under] >= K) under++;
    count[label[d]]--;
    label[d] = under;
    count[under]++;
  }
}

typedef struct {
  assign_search *s;
  assign_tracker *t;
  wt_rng *rng;
  int n, P, K, Q;
  s_indiv *pop;
  int *map, *overlap, *count, *perm;
  long stale; /* generations since the population's best improved */
  int random_only;
  double step_s; /* wall time of the last individual's evaluation or generation */
} s_ga;

static void s_evaluate(s_ga *g, s_indiv *ind, int rounds) {
  double t0 = wt_now_s();
  assign_search_load_labels(g->s, ind->label);
  assign_tracker_offer(g->t, g->s->cost);
  assign_local_search(g->s, g->t, g->rng, rounds);
  memcpy(ind->label, g->s->label, (size_t)g->n * sizeof(int));
  ind->cost = g->s->cost;
  ind->tie = g->s->tie;
  g->step_s = wt_now_s() - t0;
}

static void s_crossover(s_ga *g, const s_indiv *a, const s_indiv *b, s_indiv *child) {
  s_align(g->n, g->P, a->label, b->label, g->map, g->overlap);
  for (int d = 0; d < g->n; d++)
    child->label[d] = wt_rng_below(g->rng, 2) ? a->label[d] : g->map[b->label[d]];
  s_repair(g->rng, g->n, g->P, g->K, child->label, g->count, g->perm);
}

/* Swaps the groups of a few random device pairs. */
static void s_mutate(s_ga *g, int *label) {
  int swaps = 1 + (int)wt_rng_below(g->rng, (uint64_t)WT_MAX(1, g->n / 16));
  for (int i = 0; i < swaps; i++) {
    int x = (int)wt_rng_below(g->rng, (uint64_t)g->n),
        y = (int)wt_rng_below(g->rng, (uint64_t)g->n);
    int t = label[x];
    label[x] = label[y];
    label[y] = t;
  }
}

static void s_random_individual(s_ga *g, s_indiv *ind) {
  for (int d = 0; d < g->n; d++) g->perm[d] = d;
  wt_rng_shuffle_int(g->rng, g->perm, g->n);
  for (int d = 0; d < g->n; d++) ind->label[g->perm[d]] = d / g->K;
  /* Large instances (no all-pairs matching chain, see localsearch.c) first sort the random
   * partition into groups of close devices: at 1024 devices ga from random starts went from
   * 142 s to 86 s after 20 s. Not below that size: on the world-wide scenario it pulls every
   * group into one region (59.4 s, the opposite of the 49.2 s optimum) */
  if (!g->s->alike_on)
    assign_cluster_descent(g->s->m, ind->label, g->rng, 32L * g->n, &g->s->evals);
}

static int s_best_index(const s_ga *g) {
  int best = 0;
  for (int q = 1; q < g->Q; q++)
    if (assign_search_cmp(g->pop[q].cost, g->pop[q].tie, g->pop[best].cost, g->pop[best].tie) < 0)
      best = q;
  return best;
}

/* Everyone but the best starts again from a random partition. */
static void s_restart(s_ga *g) {
  int keep = s_best_index(g);
  for (int q = 0; q < g->Q && !assign_tracker_done_before(g->t, g->step_s); q++) {
    if (q == keep) continue;
    s_random_individual(g, &g->pop[q]);
    s_evaluate(g, &g->pop[q], 2);
  }
  g->stale = 0;
}

static int s_is_duplicate(const s_ga *g, const s_indiv *c) {
  for (int i = 0; i < g->Q; i++)
    if (assign_search_cmp(c->cost, c->tie, g->pop[i].cost, g->pop[i].tie) == 0) return 1;
  return 0;
}

static void s_generation(s_ga *g, s_indiv *child) {
  int i = (int)wt_rng_below(g->rng, (uint64_t)g->Q);
  int j = (int)wt_rng_below(g->rng, (uint64_t)(g->Q - 1));
  if (j >= i) j++;
  double best_before = g->t->best;
  s_crossover(g, &g->pop[i], &g->pop[j], child);
  s_mutate(g, child->label);
  s_evaluate(g, child, 4);
  int worse =
      assign_search_cmp(g->pop[i].cost, g->pop[i].tie, g->pop[j].cost, g->pop[j].tie) > 0 ? i : j;
  if (assign_search_cmp(child->cost, child->tie, g->pop[worse].cost, g->pop[worse].tie) < 0 &&
      !s_is_duplicate(g, child)) {
    int *tmp = g->pop[worse].label;
    g->pop[worse] = *child;
    child->label = tmp;
  }
  g->stale = g->t->best < best_before ? 0 : g->stale + 1;
  if (g->stale > 4L * g->Q) s_restart(g);
}

static void s_init_population(s_ga *g) {
  /* The next individual is not started when it would not finish within the time budget (its
   * predecessor's evaluation time is the estimate): at 4096 devices one costs seconds. */
  for (int q = 0; q < g->Q && (q == 0 || !assign_tracker_done_before(g->t, g->step_s)); q++) {
    s_indiv *ind = &g->pop[q];
    if (q == 0 && !g->random_only)
      assign_solve_greedy(g->s, g->t, g->rng, ind->label);
    else
      s_random_individual(g, ind);
    s_evaluate(g, ind, 2);
  }
}

int assign_solve_ga(assign_search *s, assign_tracker *t, wt_rng *rng, int population,
                    int random_only, int *labels) {
  int n = s->n, P = s->P;
  s_ga g = {.s = s,
            .t = t,
            .rng = rng,
            .n = n,
            .P = P,
            .K = s->K,
            .Q = WT_MAX(2, population),
            .random_only = random_only};
  g.pop = wt_xcalloc((size_t)g.Q, sizeof(s_indiv));
  for (int q = 0; q < g.Q; q++) {
    g.pop[q].label = wt_xmalloc((size_t)n * sizeof(int));
    g.pop[q].cost = g.pop[q].tie = INFINITY;
  }
  s_indiv child = {wt_xmalloc((size_t)n * sizeof(int)), INFINITY, INFINITY};
  g.map = wt_xmalloc((size_t)P * sizeof(int));
  g.overlap = wt_xmalloc((size_t)P * P * sizeof(int));
  g.count = wt_xmalloc((size_t)P * sizeof(int));
  g.perm = wt_xmalloc((size_t)n * sizeof(int));
  s_init_population(&g);
  /* an interrupted initialisation leaves unevaluated individuals at +inf: never parents */
  while (P > 1 && !assign_tracker_done_before(t, g.step_s) && g.pop[g.Q - 1].cost < INFINITY)
    s_generation(&g, &child);
  int best = s_best_index(&g);
  memcpy(labels, g.pop[best].label, (size_t)n * sizeof(int));
  for (int q = 0; q < g.Q; q++) free(g.pop[q].label);
  free(g.pop);
  free(child.label);
  free(g.map);
  free(g.overlap);
  free(g.count);
  free(g.perm);
  return WT_OK;
}
