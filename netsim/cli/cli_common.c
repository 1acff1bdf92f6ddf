/* cli_common — flag parsing, scenario opening and solve-then-simulate shared by subcommands. */
#include "netsim/cli/cli.h"

#include "common/common.h"

#include <stdlib.h>
#include <string.h>

void cli_sim_config(const cli_sim_opts *o, const netsim_scenario *s, netsim_sim_config *cfg) {
  netsim_schedule kind = !strcmp(o->schedule, "gpipe") ? NETSIM_GPIPE : NETSIM_1F1B;
  netsim_sim_config_from_scenario(s, kind, o->micro_batches, cfg);
  cfg->dp_algo = !strcmp(o->dp_algo, "ring")         ? ASSIGN_DP_RING
                 : !strcmp(o->dp_algo, "sharded-ps") ? ASSIGN_DP_SHARDED_PS
                                                     : netsim_scenario_default_dp_algo(s);
  cfg->max_seconds = o->limit_s;
  if (o->fwd_s > 0) cfg->fwd_s = o->fwd_s;
  if (o->bwd_s > 0)
    cfg->bwd_s = o->bwd_s;
  else if (o->fwd_s > 0)
    cfg->bwd_s = 2 * o->fwd_s;
}

int cli_parse(const char *usage, const wt_option *table, void *cfg, int argc, char **argv) {
  int help = 0;
  if (wt_config_defaults(table, cfg) != WT_OK ||
      wt_config_parse_args(table, cfg, argc, argv, 2, NULL, 0, NULL, &help) != WT_OK) {
    fprintf(stderr, "netsim %s: %s\n", argv[1], wt_last_error());
    return CLI_EXIT_USAGE;
  }
  if (help) {
    wt_config_print_help(stdout, usage, table);
    return 0;
  }
  return -1;
}

int cli_scenario_open(const char *file, const char *name, netsim_scenario_set **set,
                      const netsim_scenario **out) {
  const char *path = file && *file ? file : netsim_scenario_default_path();
  WT_CHECK_NEW(*set, netsim_scenario_set_load(path));
  int rc = netsim_scenario_set_find(*set, name, out);
  if (rc != WT_OK) {
    char msg[2200];
    snprintf(msg, sizeof msg, "%s", wt_last_error());
    wt_fail(rc, "%s: %s (--scenario NAME)", path, msg);
    netsim_scenario_set_destroy(set);
  }
  return rc;
}

int cli_solvers_parse(const char *list, int n_devices, assign_solver *out, int *count) {
  char buf[WT_CONFIG_STR_MAX];
  snprintf(buf, sizeof buf, "%s", list);
  *count = 0;
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    assign_solver kind;
    WT_CHECK(assign_solver_parse(tok, &kind));
    for (int i = 0; i < *count; i++)
      if (out[i] == kind) return wt_fail(WT_EINVAL, "--solvers: '%s' is listed twice", tok);
    if (kind == ASSIGN_SOLVER_EXACT && n_devices > 12)
      return wt_fail(WT_EINVAL,
                     "--solvers: exact search is limited to 12 devices and this "
                     "scenario has %d; drop exact or use a smaller scenario",
                     n_devices);
    out[(*count)++] = kind;
  }
  if (*count == 0) return wt_fail(WT_EINVAL, "--solvers: give at least one solver");
  return WT_OK;
}

int cli_solve_and_simulate(const netsim_scenario *s, assign_solver solver, double budget_s,
                           long max_evals, uint64_t seed, const netsim_sim_config *sim,
                           int simulate, cli_result *out) {
  memset(out, 0, sizeof *out);
  out->solver = solver;
  assign_problem p;
  netsim_scenario_problem(s, &p);
  p.dp_algo = sim->dp_algo;
  assign_budget budget = {.max_seconds = budget_s, .max_evals = max_evals};
  assign_stats stats;
  double t0 = wt_now_s();
  WT_CHECK(assign_solve(&p, solver, &budget, seed, &out->plan, &stats));
  out->solve_s = wt_now_s() - t0;
  out->cost = assign_plan_cost(&p, out->plan);
  if (!simulate) return WT_OK;
  int rc = netsim_simulate(p.net, out->plan, sim, &out->sim, NULL);
  if (rc == WT_ETIMEOUT) {
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", wt_last_error());
    return wt_fail(rc,
                   "simulating the %s plan on %d devices took longer than --sim-limit-s %g: %s; "
                   "raise --sim-limit-s (0 = no limit) or, with compare, pass --no-simulate",
                   assign_solver_name(solver), p.net->n, sim->max_seconds, msg);
  }
  return rc;
}

void cli_result_clear(cli_result *r) {
  assign_plan_destroy(&r->plan);
  memset(r, 0, sizeof *r);
}
