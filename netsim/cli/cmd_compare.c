/* cmd_compare — `netsim compare`: every requested solver on one scenario, as a table or JSON. */
#include "netsim/cli/cli.h"

#include "common/common.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  char scenario[WT_CONFIG_STR_MAX];
  char scenario_file[WT_CONFIG_STR_MAX];
  char solvers[WT_CONFIG_STR_MAX];
  long long seed;
  double budget_s;
  long long max_evals;
  int json;
  int no_simulate;
  cli_sim_opts sim;
  char config[WT_CONFIG_STR_MAX];
} compare_cfg;

static const wt_option s_options[] = {
    {"scenario", WT_OPT_STRING, offsetof(compare_cfg, scenario), 0, 0, "",
     "scenario name (may be omitted when the file holds one)", NULL},
    {"scenario-file", WT_OPT_STRING, offsetof(compare_cfg, scenario_file), 0, 0, "",
     "scenario JSON (default: the shipped netsim/scenarios/dtfm-2022.json)", NULL},
    {"solvers", WT_OPT_STRING, offsetof(compare_cfg, solvers), 0, 0,
     "random,megatron,deepspeed,greedy,ga",
     "comma list of random,megatron,deepspeed,greedy,ga,"
     "exact (exact: 12 devices at most)",
     NULL},
    {"seed", WT_OPT_INT64, offsetof(compare_cfg, seed), 0, 9e15, "1", "solver seed", NULL},
    {"budget-s", WT_OPT_FLOAT, offsetof(compare_cfg, budget_s), 0, 86400, "0",
     "time limit per search solver (0 = the solver's default)", NULL},
    {"max-evals", WT_OPT_INT64, offsetof(compare_cfg, max_evals), 0, 1e12, "0",
     "evaluation limit per search solver (0 = none); makes results machine-independent", NULL},
    {"json", WT_OPT_FLAG, offsetof(compare_cfg, json), 0, 1, "0", "print one JSON object", NULL},
    {"no-simulate", WT_OPT_FLAG, offsetof(compare_cfg, no_simulate), 0, 1, "0",
     "price the plans with the cost model only (no simulated iteration)", NULL},
    CLI_SIM_OPTIONS(compare_cfg, sim),
    {"config", WT_OPT_STRING, offsetof(compare_cfg, config), 0, 0, "", "JSON file of these options",
     NULL},
    {0}};

static const char *s_usage =
    "usage: netsim compare (--scenario NAME | --scenario-file FILE [--scenario NAME]) "
    "[--solvers LIST] [--seed S] [--budget-s T] [--no-simulate] [--json]\n"
    "Solves the scenario's assignment with each solver, prices it with the paper's cost model\n"
    "(COMM = DATAP + 2·PIPELINEP; the JSON's pp_s is 2·PIPELINEP) and, unless --no-simulate,\n"
    "simulates one training iteration of it.";

static cJSON *s_result_json(const cli_result *r, int simulated) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "solver", assign_solver_name(r->solver));
  cJSON_AddNumberToObject(o, "comm_cost_s", r->cost.comm_s);
  cJSON_AddNumberToObject(o, "dp_s", r->cost.dp_s);
  cJSON_AddNumberToObject(o, "pp_s", r->cost.pp_s); /* 2·PIPELINEP, as it enters COMM */
  cJSON_AddNumberToObject(o, "pipelinep_s", r->cost.pp_s / 2);
  cJSON_AddNumberToObject(o, "solve_s", r->solve_s);
  cJSON_AddItemToObject(o, "assignment", netsim_assignment_to_json(r->plan));
  if (!simulated) return o;
  cJSON_AddNumberToObject(o, "simulated_iteration_s", r->sim.iteration_s);
  cJSON *b = cJSON_AddObjectToObject(o, "simulated_breakdown_s");
  cJSON_AddNumberToObject(b, "compute", r->sim.compute_s);
  cJSON_AddNumberToObject(b, "bubble", r->sim.bubble_s);
  cJSON_AddNumberToObject(b, "pipeline_comm", r->sim.pp_comm_s);
  cJSON_AddNumberToObject(b, "data_parallel_comm", r->sim.dp_comm_s);
  return o;
}

static void s_print_table(const netsim_scenario *s, const netsim_sim_config *sim,
                          const cli_result *r, int count, int simulated) {
  printf("scenario %s: %d devices, %s, %d micro-batches, forward %.3f s / backward %.3f s per "
         "micro-batch on a speed-1 device\n",
         netsim_scenario_name(s), netsim_scenario_network(s)->n,
         sim->schedule == NETSIM_GPIPE ? "GPipe" : "1F1B", sim->micro_batches, sim->fwd_s,
         sim->bwd_s);
  printf("%-10s %10s %9s %9s | %10s %9s %9s %9s %9s | %8s\n", "solver", "COMM s", "DATAP s",
         "2·PIPE s", "sim iter s", "compute", "bubble", "pp comm", "dp comm", "solve s");
  for (int i = 0; i < count && !simulated; i++)
    printf("%-10s %10.3f %9.3f %9.3f | %10s %9s %9s %9s %9s | %8.2f\n",
           assign_solver_name(r[i].solver), r[i].cost.comm_s, r[i].cost.dp_s, r[i].cost.pp_s, "-",
           "-", "-", "-", "-", r[i].solve_s);
  for (int i = 0; i < count && simulated; i++)
    printf("%-10s %10.3f %9.3f %9.3f | %10.3f %9.3f %9.3f %9.3f %9.3f | %8.2f\n",
           assign_solver_name(r[i].solver), r[i].cost.comm_s, r[i].cost.dp_s, r[i].cost.pp_s,
           r[i].sim.iteration_s, r[i].sim.compute_s, r[i].sim.bubble_s, r[i].sim.pp_comm_s,
           r[i].sim.dp_comm_s, r[i].solve_s);
}

static int s_run(const compare_cfg *c, const netsim_scenario *s) {
  assign_solver kinds[ASSIGN_SOLVER_COUNT];
  int count = 0;
  if (cli_solvers_parse(c->solvers, netsim_scenario_network(s)->n, kinds, &count) != WT_OK) {
    fprintf(stderr, "netsim compare: %s\n", wt_last_error());
    return CLI_EXIT_USAGE;
  }
  netsim_sim_config sim;
  cli_sim_config(&c->sim, s, &sim);
  cli_result results[ASSIGN_SOLVER_COUNT];
  int done = 0, rc = WT_OK;
  for (; done < count && rc == WT_OK; done++) {
    if (!c->json) fprintf(stderr, "solving with %s...\n", assign_solver_name(kinds[done]));
    rc = cli_solve_and_simulate(s, kinds[done], c->budget_s, (long)c->max_evals, (uint64_t)c->seed,
                                &sim, !c->no_simulate, &results[done]);
  }
  if (rc != WT_OK) {
    fprintf(stderr, "netsim compare: %s\n", wt_last_error());
  } else if (c->json) {
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "scenario", netsim_scenario_name(s));
    cJSON *list = cJSON_AddArrayToObject(root, "results");
    for (int i = 0; i < count; i++)
      cJSON_AddItemToArray(list, s_result_json(&results[i], !c->no_simulate));
    char *text = cJSON_Print(root);
    printf("%s\n", text);
    free(text);
    cJSON_Delete(root);
  } else {
    s_print_table(s, &sim, results, count, !c->no_simulate);
  }
  for (int i = 0; i < done; i++) cli_result_clear(&results[i]);
  return rc == WT_OK ? 0 : CLI_EXIT_FAIL;
}

int cli_compare_main(int argc, char **argv) {
  compare_cfg c;
  int rc = cli_parse(s_usage, s_options, &c, argc, argv);
  if (rc >= 0) return rc;
  netsim_scenario_set *set = NULL;
  const netsim_scenario *s = NULL;
  if (cli_scenario_open(c.scenario_file, c.scenario, &set, &s) != WT_OK) {
    fprintf(stderr, "netsim compare: %s\n", wt_last_error());
    return CLI_EXIT_USAGE;
  }
  rc = s_run(&c, s);
  netsim_scenario_set_destroy(&set);
  return rc;
}
