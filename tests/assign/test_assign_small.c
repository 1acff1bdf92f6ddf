/* test_assign_small — ga with its default settings finds the optimum of every small instance.
 *
 * 50 random fully heterogeneous 12-device networks (every pair its own latency and bandwidth) for
 * each shape 3×4, 4×3, 6×2 and 2×6, three seeds each: the cost of ga's plan must equal the
 * minimum over every partition, found here by a brute force of its own (each partition priced
 * with the paper's formulas: DATAP by its definition, the pipeline by bottleneck matchings and
 * every order of the groups).
 *
 *   test_assign_small [INSTANCES]   instances per shape (default 50; the sanitizer build runs
 *                                   fewer, see CMakeLists.txt)
 */
#include "assign/assign.h"
#include "common/common.h"
#include "common/rng.h"
#include "common/testing.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define N 12

typedef struct {
  int P, K;
  const assign_problem *p;
  int group[N][N]; /* group[g][i]: member i of group g */
  int used[N];
  double best;
} s_brute;

static double s_lat(const s_brute *b, int i, int j) {
  return b->p->net->latency_s[i * N + j];
}
static double s_bw(const s_brute *b, int i, int j) {
  return b->p->net->bandwidth_Bps[i * N + j];
}

/* DATAP(C) = max over members of Σ over the others of 2(α + c_DP/(D_DP·β)). */
static double s_datap(const s_brute *b, const int *g) {
  double worst = 0;
  for (int i = 0; i < b->K; i++) {
    double sum = 0;
    for (int j = 0; j < b->K; j++)
      if (j != i)
        sum += 2 * (s_lat(b, g[i], g[j]) + b->p->c_dp_bytes / (b->K * s_bw(b, g[i], g[j])));
    worst = fmax(worst, sum);
  }
  return worst;
}

/* The shortest open path over the P groups under edge weights w, over every order. */
static double s_best_path(int P, const double *w) {
  int perm[N], c[N] = {0};
  for (int i = 0; i < P; i++) perm[i] = i;
  double best = INFINITY;
  for (int i = 0;;) {
    double len = 0;
    for (int s = 0; s + 1 < P; s++) len += w[perm[s] * P + perm[s + 1]];
    best = fmin(best, len);
    while (i < P && c[i] >= i) c[i++] = 0;
    if (i >= P) break;
    int j = i % 2 ? c[i] : 0, t = perm[j];
    perm[j] = perm[i];
    perm[i] = t;
    c[i]++;
    i = 0;
  }
  return best;
}

static void s_price(s_brute *b) {
  int P = b->P, K = b->K;
  double dp = 0, w[N * N], table[N * N];
  for (int g = 0; g < P; g++) dp = fmax(dp, s_datap(b, b->group[g]));
  for (int x = 0; x < P; x++)
    for (int y = x + 1; y < P; y++) {
      for (int i = 0; i < K; i++)
        for (int j = 0; j < K; j++) {
          int u = b->group[x][i], v = b->group[y][j];
          table[i * K + j] = s_lat(b, u, v) + b->p->c_pp_bytes / s_bw(b, u, v);
        }
      w[x * P + y] = w[y * P + x] = assign_bottleneck_matching(K, table, NULL);
    }
  b->best = fmin(b->best, dp + 2 * (P > 1 ? s_best_path(P, w) : 0));
}

/* Fills group g from member i on, members rising in id; each new group starts with the lowest
 * device still free, so each partition is met once. */
static void s_fill(s_brute *b, int g, int i, int from) {
  if (g == b->P) {
    s_price(b);
    return;
  }
  if (i == b->K) {
    s_fill(b, g + 1, 0, 0);
    return;
  }
  if (i == 0) {
    int d = 0;
    while (b->used[d]) d++;
    b->used[d] = 1;
    b->group[g][0] = d;
    s_fill(b, g, 1, d + 1);
    b->used[d] = 0;
    return;
  }
  for (int d = from; d <= N - (b->K - i); d++) {
    if (b->used[d]) continue;
    b->used[d] = 1;
    b->group[g][i] = d;
    s_fill(b, g, i + 1, d + 1);
    b->used[d] = 0;
  }
}

static double s_optimum(const assign_problem *p) {
  s_brute b = {.P = p->d_pp, .K = p->d_dp, .p = p, .best = INFINITY};
  s_fill(&b, 0, 0, 0);
  return b.best;
}

/* Every pair its own link: latency 1–150 ms, bandwidth 0.1–10 Gbit/s (log-uniform). */
static void s_random_network(assign_network *net, wt_rng *rng) {
  for (int i = 0; i < N; i++)
    for (int j = i + 1; j < N; j++) {
      double lat = 0.001 + 0.149 * wt_rng_double(rng);
      double bw = 0.1e9 / 8 * pow(100, wt_rng_double(rng));
      net->latency_s[i * N + j] = net->latency_s[j * N + i] = lat;
      net->bandwidth_Bps[i * N + j] = net->bandwidth_Bps[j * N + i] = bw;
    }
}

int main(int argc, char **argv) {
  static const int shapes[][2] = {{3, 4}, {4, 3}, {6, 2}, {2, 6}};
  const int instances = argc > 1 ? atoi(argv[1]) : 50, seeds = 3;
  WT_TEST_REQUIRE(instances >= 1 && instances <= 10000, "instances per shape: %s", argv[1]);
  double lat[N * N] = {0}, bw[N * N] = {0};
  assign_network net = {.n = N, .latency_s = lat, .bandwidth_Bps = bw};
  wt_rng rng;
  wt_rng_seed(&rng, 2024);
  int checked = 0, at_optimum = 0;
  for (size_t sh = 0; sh < WT_ARRAY_LEN(shapes); sh++)
    for (int inst = 0; inst < instances; inst++) {
      s_random_network(&net, &rng);
      assign_problem p = {.net = &net,
                          .d_pp = shapes[sh][0],
                          .d_dp = shapes[sh][1],
                          .c_dp_bytes = 1e8 * (0.2 + 2 * wt_rng_double(&rng)),
                          .c_pp_bytes = 1e8 * (0.2 + 2 * wt_rng_double(&rng))};
      double best = s_optimum(&p);
      for (uint64_t seed = 1; seed <= (uint64_t)seeds; seed++) {
        assign_plan *plan = NULL;
        WT_TEST_REQUIRE(assign_solve(&p, ASSIGN_SOLVER_GA, NULL, seed, &plan, NULL) == WT_OK, "%s",
                        wt_last_error());
        double got = assign_plan_cost(&p, plan).comm_s;
        WT_TEST_CLOSE(got, best, 0, 1e-9, "default ga vs brute-force optimum");
        if (fabs(got - best) <= 1e-9 * best)
          at_optimum++;
        else
          fprintf(stderr, "  shape %dx%d instance %d seed %llu\n", shapes[sh][0], shapes[sh][1],
                  inst, (unsigned long long)seed);
        assign_plan_destroy(&plan);
        checked++;
      }
    }
  printf("default ga at the optimum on %d of %d runs (4 shapes x %d instances x %d seeds)\n",
         at_optimum, checked, instances, seeds);
  return wt_test_finish("test_assign_small");
}
