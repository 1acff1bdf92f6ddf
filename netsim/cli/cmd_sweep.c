/* cmd_sweep — `netsim sweep`: every solver on the five paper scenarios (and K random worlds),
 * written as CSV plus a gnuplot chart: cost per solver per scenario, simulated iteration time,
 * and the speed-up of ga over each baseline. */
#include "netsim/cli/cli.h"

#include "common/common.h"
#include "common/plot.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct {
  char scenario_file[WT_CONFIG_STR_MAX];
  char solvers[WT_CONFIG_STR_MAX];
  int random;
  int regions, gpus_per_region;
  long long seed;
  double budget_s;
  long long max_evals;
  char out[WT_CONFIG_STR_MAX];
  cli_sim_opts sim;
  char config[WT_CONFIG_STR_MAX];
} sweep_cfg;

static const wt_option s_options[] = {
    {"scenario-file", WT_OPT_STRING, offsetof(sweep_cfg, scenario_file), 0, 0, "",
     "scenario JSON; all its scenarios run (default: the shipped dtfm-2022.json)", NULL},
    {"solvers", WT_OPT_STRING, offsetof(sweep_cfg, solvers), 0, 0,
     "random,megatron,deepspeed,greedy,ga", "comma list of solvers (ga is the reference)", NULL},
    {"random", WT_OPT_INT, offsetof(sweep_cfg, random), 0, 1000, "0",
     "also run K random world-wide topologies", NULL},
    {"regions", WT_OPT_INT, offsetof(sweep_cfg, regions), 1, 64, "8",
     "regions of each random topology (= pipeline stages)", NULL},
    {"gpus-per-region", WT_OPT_INT, offsetof(sweep_cfg, gpus_per_region), 1, 64, "8",
     "devices per region of each random topology (= replicas)", NULL},
    {"seed", WT_OPT_INT64, offsetof(sweep_cfg, seed), 0, 9e15, "1",
     "solver seed; random topology k uses seed + k", NULL},
    {"budget-s", WT_OPT_FLOAT, offsetof(sweep_cfg, budget_s), 0, 86400, "0",
     "time limit per search solver (0 = the solver's default)", NULL},
    {"max-evals", WT_OPT_INT64, offsetof(sweep_cfg, max_evals), 0, 1e12, "0",
     "evaluation limit per search solver (0 = none)", NULL},
    {"out", WT_OPT_STRING, offsetof(sweep_cfg, out), 0, 0, "netsim-sweep",
     "output folder (created): sweep.csv, speedup.csv, sweep.gp, sweep.png", NULL},
    CLI_SIM_OPTIONS(sweep_cfg, sim),
    {"config", WT_OPT_STRING, offsetof(sweep_cfg, config), 0, 0, "", "JSON file of these options",
     NULL},
    {0}};

static const char *s_usage =
    "usage: netsim sweep [--random K] [--out DIR] [--solvers LIST] [--budget-s T]\n"
    "Runs every solver on every scenario of the file (and K random topologies) and writes a CSV\n"
    "and a chart of cost per solver and of ga's speed-up over each baseline.";

typedef struct {
  const netsim_scenario **scen;
  int n_scen;
  assign_solver kinds[ASSIGN_SOLVER_COUNT];
  int n_kinds;
  cli_result *res; /* [scenario * n_kinds + solver] */
} s_sweep;

static cli_result *s_at(const s_sweep *w, int sc, int k) {
  return &w->res[sc * w->n_kinds + k];
}

static int s_run_all(const sweep_cfg *c, s_sweep *w) {
  int total = w->n_scen * w->n_kinds, step = 0;
  for (int sc = 0; sc < w->n_scen; sc++) {
    netsim_sim_config sim;
    cli_sim_config(&c->sim, w->scen[sc], &sim);
    for (int k = 0; k < w->n_kinds; k++) {
      cli_result *r = s_at(w, sc, k);
      WT_CHECK(cli_solve_and_simulate(w->scen[sc], w->kinds[k], c->budget_s, (long)c->max_evals,
                                      (uint64_t)c->seed, &sim, 1, r));
      fprintf(stderr,
              "[%d/%d] %-28s %-9s COMM %8.3f s  simulated iteration %8.3f s  (solved in "
              "%.2f s)\n",
              ++step, total, netsim_scenario_name(w->scen[sc]), assign_solver_name(w->kinds[k]),
              r->cost.comm_s, r->sim.iteration_s, r->solve_s);
    }
  }
  return WT_OK;
}

static FILE *s_open(const char *dir, const char *name, char *path, size_t size) {
  snprintf(path, size, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  if (!f) wt_fail(WT_EIO, "cannot write %s: %s", path, strerror(errno));
  return f;
}

static int s_close(FILE *f, const char *path) {
  if (fclose(f) != 0) return wt_fail(WT_EIO, "cannot write %s", path);
  return WT_OK;
}

static int s_write_csv(const char *dir, const s_sweep *w) {
  char path[WT_CONFIG_STR_MAX + 64];
  FILE *f = s_open(dir, "sweep.csv", path, sizeof path);
  if (!f) return WT_EIO;
  fprintf(f, "scenario,solver,devices,comm_cost_s,dp_s,pp_s,simulated_iteration_s,compute_s,"
             "bubble_s,pp_comm_s,dp_comm_s,solve_s\n");
  for (int sc = 0; sc < w->n_scen; sc++)
    for (int k = 0; k < w->n_kinds; k++) {
      const cli_result *r = s_at(w, sc, k);
      fprintf(f, "%s,%s,%d,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.6f,%.3f\n",
              netsim_scenario_name(w->scen[sc]), assign_solver_name(r->solver),
              netsim_scenario_network(w->scen[sc])->n, r->cost.comm_s, r->cost.dp_s, r->cost.pp_s,
              r->sim.iteration_s, r->sim.compute_s, r->sim.bubble_s, r->sim.pp_comm_s,
              r->sim.dp_comm_s, r->solve_s);
    }
  return s_close(f, path);
}

static int s_ga_index(const s_sweep *w) {
  for (int k = 0; k < w->n_kinds; k++)
    if (w->kinds[k] == ASSIGN_SOLVER_GA) return k;
  return -1;
}

/* speedup.csv: long form for readers; speedup_wide.csv: one column per baseline for gnuplot. */
static int s_write_speedup(const char *dir, const s_sweep *w) {
  int ga = s_ga_index(w);
  if (ga < 0) return WT_OK;
  char path[WT_CONFIG_STR_MAX + 64], wide_path[WT_CONFIG_STR_MAX + 64];
  FILE *f = s_open(dir, "speedup.csv", path, sizeof path);
  if (!f) return WT_EIO;
  FILE *wide = s_open(dir, "speedup_wide.csv", wide_path, sizeof wide_path);
  if (!wide) {
    fclose(f);
    return WT_EIO;
  }
  fprintf(f, "scenario,baseline,comm_cost_speedup,simulated_iteration_speedup\n");
  fprintf(wide, "scenario");
  for (int k = 0; k < w->n_kinds; k++)
    if (k != ga) fprintf(wide, ",%s", assign_solver_name(w->kinds[k]));
  fprintf(wide, "\n");
  for (int sc = 0; sc < w->n_scen; sc++) {
    const cli_result *g = s_at(w, sc, ga);
    fprintf(wide, "%s", netsim_scenario_name(w->scen[sc]));
    for (int k = 0; k < w->n_kinds; k++) {
      if (k == ga) continue;
      const cli_result *b = s_at(w, sc, k);
      double cost = b->cost.comm_s / g->cost.comm_s, iter = b->sim.iteration_s / g->sim.iteration_s;
      fprintf(f, "%s,%s,%.4f,%.4f\n", netsim_scenario_name(w->scen[sc]),
              assign_solver_name(b->solver), cost, iter);
      fprintf(wide, ",%.4f", iter);
    }
    fprintf(wide, "\n");
  }
  int rc = s_close(f, path);
  int rc2 = s_close(wide, wide_path);
  return rc != WT_OK ? rc : rc2;
}

/* cost_wide.csv / iter_wide.csv: one row per scenario, one column per solver. */
static int s_write_wide(const char *dir, const char *name, const s_sweep *w, int iteration) {
  char path[WT_CONFIG_STR_MAX + 64];
  FILE *f = s_open(dir, name, path, sizeof path);
  if (!f) return WT_EIO;
  fprintf(f, "scenario");
  for (int k = 0; k < w->n_kinds; k++) fprintf(f, ",%s", assign_solver_name(w->kinds[k]));
  fprintf(f, "\n");
  for (int sc = 0; sc < w->n_scen; sc++) {
    fprintf(f, "%s", netsim_scenario_name(w->scen[sc]));
    for (int k = 0; k < w->n_kinds; k++) {
      const cli_result *r = s_at(w, sc, k);
      fprintf(f, ",%.6f", iteration ? r->sim.iteration_s : r->cost.comm_s);
    }
    fprintf(f, "\n");
  }
  return s_close(f, path);
}

static int s_write_gnuplot(const char *dir, const s_sweep *w) {
  char path[WT_CONFIG_STR_MAX + 64];
  FILE *f = s_open(dir, "sweep.gp", path, sizeof path);
  if (!f) return WT_EIO;
  int ga = s_ga_index(w), panels = ga >= 0 ? 3 : 2;
  fprintf(f,
          "# netsim sweep chart: run `gnuplot sweep.gp` in this folder.\n"
          "# pngcairo draws nicer text; builds without cairo still have the libgd png terminal.\n"
          "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {\n"
          "  set terminal pngcairo size 1400,%d font 'sans,11'\n"
          "} else {\n"
          "  set terminal png size 1400,%d\n"
          "}\n"
          "set output 'sweep.png'\n"
          "set termoption noenhanced\n"
          "set datafile separator ','\n"
          "set style data histograms\n"
          "set style histogram clustered gap 1\n"
          "set style fill solid 0.85 border -1\n"
          "set boxwidth 0.9\n"
          "set xtics rotate by 25 right scale 0\n"
          "set key outside right top\n"
          "set grid ytics\n"
          "set yrange [0:*]\n"
          "set multiplot layout %d,1 title 'netsim sweep: solvers per scenario (ga = genetic "
          "algorithm + local search)'\n",
          panels * 480, panels * 480, panels);
  fprintf(f,
          "set title \"Communication cost per iteration in the paper's model (log scale; "
          "lower is better)\"\nset ylabel 'COMM (s)'\nset logscale y\nset yrange [*:*]\n"
          "plot for [i=2:%d] 'cost_wide.csv' using i:xtic(1) title columnheader(i)\n"
          "unset logscale y\nset yrange [0:*]\n",
          w->n_kinds + 1);
  fprintf(f,
          "set title 'Simulated end-to-end iteration time (compute + bubble + communication)'\n"
          "set ylabel 'iteration (s)'\n"
          "plot for [i=2:%d] 'iter_wide.csv' using i:xtic(1) title columnheader(i)\n",
          w->n_kinds + 1);
  if (ga >= 0)
    fprintf(f,
            "set title 'Speed-up of ga over each baseline (simulated iteration time; 1 = "
            "same)'\nset ylabel 'baseline / ga'\n"
            "set arrow 1 from graph 0, first 1 to graph 1, first 1 nohead dt 2 lw 2\n"
            "plot for [i=2:%d] 'speedup_wide.csv' using i:xtic(1) title columnheader(i)\n",
            w->n_kinds);
  fprintf(f, "unset multiplot\n");
  return s_close(f, path);
}

static int s_outputs(const sweep_cfg *c, const s_sweep *w) {
  WT_CHECK(s_write_csv(c->out, w));
  WT_CHECK(s_write_speedup(c->out, w));
  WT_CHECK(s_write_wide(c->out, "cost_wide.csv", w, 0));
  WT_CHECK(s_write_wide(c->out, "iter_wide.csv", w, 1));
  WT_CHECK(s_write_gnuplot(c->out, w));
  printf("wrote %s/sweep.csv, %s/speedup.csv and %s/sweep.gp\n", c->out, c->out, c->out);
  if (wt_plot_gnuplot(c->out, "sweep.gp", WT_PLOT_TIMEOUT_S) == WT_OK)
    printf("chart: %s/sweep.png\n", c->out);
  else
    printf("gnuplot did not run: %s\n", wt_last_error());
  int ga = s_ga_index(w);
  for (int sc = 0; sc < w->n_scen && ga >= 0; sc++) {
    printf("%-28s ga COMM %8.3f s, iteration %8.3f s; ga faster than:",
           netsim_scenario_name(w->scen[sc]), s_at(w, sc, ga)->cost.comm_s,
           s_at(w, sc, ga)->sim.iteration_s);
    for (int k = 0; k < w->n_kinds; k++)
      if (k != ga)
        printf(" %s %.2fx", assign_solver_name(w->kinds[k]),
               s_at(w, sc, k)->sim.iteration_s / s_at(w, sc, ga)->sim.iteration_s);
    printf("\n");
  }
  return WT_OK;
}

/* Builds the scenario list: the file's, then K random worlds (saved beside the results). */
static int s_scenarios(const sweep_cfg *c, const netsim_scenario_set *set, s_sweep *w,
                       netsim_scenario **randoms) {
  int nf = netsim_scenario_set_count(set);
  w->n_scen = nf + c->random;
  w->scen = wt_xcalloc((size_t)w->n_scen, sizeof *w->scen);
  for (int i = 0; i < nf; i++) w->scen[i] = netsim_scenario_set_get(set, i);
  for (int k = 0; k < c->random; k++) {
    randoms[k] = netsim_scenario_random(c->regions, c->gpus_per_region, (uint64_t)c->seed + k);
    w->scen[nf + k] = randoms[k];
    char path[WT_CONFIG_STR_MAX + 64];
    snprintf(path, sizeof path, "%s/%s.json", c->out, netsim_scenario_name(randoms[k]));
    WT_CHECK(netsim_scenario_save(randoms[k], path));
  }
  int max_n = 0;
  for (int i = 0; i < w->n_scen; i++) max_n = WT_MAX(max_n, netsim_scenario_network(w->scen[i])->n);
  return cli_solvers_parse(c->solvers, max_n, w->kinds, &w->n_kinds);
}

int cli_sweep_main(int argc, char **argv) {
  sweep_cfg c;
  int rc = cli_parse(s_usage, s_options, &c, argc, argv);
  if (rc >= 0) return rc;
  if (mkdir(c.out, 0755) != 0 && errno != EEXIST) {
    fprintf(stderr, "netsim sweep: cannot create %s: %s\n", c.out, strerror(errno));
    return CLI_EXIT_FAIL;
  }
  netsim_scenario_set *set =
      netsim_scenario_set_load(*c.scenario_file ? c.scenario_file : netsim_scenario_default_path());
  if (!set) {
    fprintf(stderr, "netsim sweep: %s\n", wt_last_error());
    return CLI_EXIT_USAGE;
  }
  s_sweep w = {0};
  netsim_scenario **randoms = wt_xcalloc((size_t)c.random + 1, sizeof *randoms);
  rc = s_scenarios(&c, set, &w, randoms);
  int exit_code = rc == WT_EINVAL ? CLI_EXIT_USAGE : CLI_EXIT_FAIL;
  if (rc == WT_OK) {
    w.res = wt_xcalloc((size_t)(w.n_scen * w.n_kinds), sizeof *w.res);
    rc = s_run_all(&c, &w);
    exit_code = CLI_EXIT_FAIL;
  }
  if (rc == WT_OK) rc = s_outputs(&c, &w);
  if (rc != WT_OK) fprintf(stderr, "netsim sweep: %s\n", wt_last_error());
  for (int i = 0; w.res && i < w.n_scen * w.n_kinds; i++) cli_result_clear(&w.res[i]);
  for (int k = 0; k < c.random; k++) netsim_scenario_destroy(&randoms[k]);
  free(randoms);
  free(w.res);
  free(w.scen);
  netsim_scenario_set_destroy(&set);
  return rc == WT_OK ? 0 : exit_code;
}
