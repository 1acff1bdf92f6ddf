/* cmd_simulate — `netsim simulate`: one assignment file, one iteration, a breakdown and a trace. */
#include "netsim/cli/cli.h"

#include "common/common.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  char scenario[WT_CONFIG_STR_MAX];
  char scenario_file[WT_CONFIG_STR_MAX];
  char assignment[WT_CONFIG_STR_MAX];
  char trace[WT_CONFIG_STR_MAX];
  int json;
  cli_sim_opts sim;
  char config[WT_CONFIG_STR_MAX];
} simulate_cfg;

static const wt_option s_options[] = {
    {"scenario", WT_OPT_STRING, offsetof(simulate_cfg, scenario), 0, 0, "",
     "scenario name (may be omitted when the file holds one)", NULL},
    {"scenario-file", WT_OPT_STRING, offsetof(simulate_cfg, scenario_file), 0, 0, "",
     "scenario JSON (default: the shipped netsim/scenarios/dtfm-2022.json)", NULL},
    {"assignment", WT_OPT_STRING, offsetof(simulate_cfg, assignment), 0, 0, "",
     "assignment JSON: {\"groups\": [[..] per stage]} and/or {\"pipelines\": [[..] per replica]}"
     " (required)",
     NULL},
    {"trace", WT_OPT_STRING, offsetof(simulate_cfg, trace), 0, 0, "",
     "write the timeline as Chrome trace JSON here (open in Perfetto)", NULL},
    {"json", WT_OPT_FLAG, offsetof(simulate_cfg, json), 0, 1, "0", "print one JSON object", NULL},
    CLI_SIM_OPTIONS(simulate_cfg, sim),
    {"config", WT_OPT_STRING, offsetof(simulate_cfg, config), 0, 0, "",
     "JSON file of these options", NULL},
    {0}};

static const char *s_usage =
    "usage: netsim simulate --scenario NAME [--scenario-file FILE] --assignment FILE "
    "[--schedule gpipe|1f1b] [--micro-batches m] [--trace out.json]\n"
    "Simulates one training iteration of the given assignment and prints where the time goes.";

static void s_print(const simulate_cfg *c, const netsim_scenario *s, const assign_cost *cost,
                    const netsim_sim_result *r) {
  if (c->json) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "scenario", netsim_scenario_name(s));
    cJSON_AddNumberToObject(o, "comm_cost_s", cost->comm_s);
    cJSON_AddNumberToObject(o, "dp_s", cost->dp_s);
    cJSON_AddNumberToObject(o, "pp_s", cost->pp_s);
    cJSON_AddNumberToObject(o, "simulated_iteration_s", r->iteration_s);
    cJSON_AddNumberToObject(o, "compute_s", r->compute_s);
    cJSON_AddNumberToObject(o, "bubble_s", r->bubble_s);
    cJSON_AddNumberToObject(o, "pipeline_comm_s", r->pp_comm_s);
    cJSON_AddNumberToObject(o, "data_parallel_comm_s", r->dp_comm_s);
    char *text = cJSON_Print(o);
    printf("%s\n", text);
    free(text);
    cJSON_Delete(o);
    return;
  }
  printf("scenario %s, %s, %d micro-batches\n", netsim_scenario_name(s), c->sim.schedule,
         c->sim.micro_batches);
  printf("  cost model: COMM %.3f s = DATAP %.3f s + 2·PIPELINEP %.3f s\n", cost->comm_s,
         cost->dp_s, cost->pp_s);
  printf("  simulated iteration %.3f s = compute %.3f + bubble %.3f + pipeline comm %.3f + "
         "data-parallel comm %.3f\n",
         r->iteration_s, r->compute_s, r->bubble_s, r->pp_comm_s, r->dp_comm_s);
  printf("  %d compute passes, %d transfers\n", r->n_compute, r->n_transfers);
}

static int s_run(const simulate_cfg *c, const netsim_scenario *s) {
  assign_problem p;
  netsim_scenario_problem(s, &p);
  assign_plan *plan = NULL;
  if (netsim_assignment_load(c->assignment, p.d_pp, p.d_dp, &plan) != WT_OK) {
    fprintf(stderr, "netsim simulate: %s\n", wt_last_error());
    return CLI_EXIT_USAGE;
  }
  netsim_sim_config sim;
  cli_sim_config(&c->sim, s, &sim);
  p.dp_algo = sim.dp_algo;
  assign_cost cost = assign_plan_cost(&p, plan);
  netsim_sim_result r;
  netsim_trace *trace = NULL;
  int rc = netsim_simulate(p.net, plan, &sim, &r, *c->trace ? &trace : NULL);
  if (rc == WT_OK && trace) rc = netsim_trace_write(trace, c->trace);
  if (rc == WT_OK)
    s_print(c, s, &cost, &r);
  else if (rc == WT_ETIMEOUT)
    fprintf(stderr, "netsim simulate: %s; raise --sim-limit-s (now %g s; 0 = no limit)\n",
            wt_last_error(), c->sim.limit_s);
  else
    fprintf(stderr, "netsim simulate: %s\n", wt_last_error());
  if (rc == WT_OK && trace && !c->json) printf("  trace written to %s\n", c->trace);
  netsim_trace_destroy(&trace);
  assign_plan_destroy(&plan);
  return rc == WT_OK ? 0 : CLI_EXIT_FAIL;
}

int cli_simulate_main(int argc, char **argv) {
  simulate_cfg c;
  int rc = cli_parse(s_usage, s_options, &c, argc, argv);
  if (rc >= 0) return rc;
  if (!*c.assignment) {
    fprintf(stderr, "netsim simulate: --assignment FILE is required (see --help)\n");
    return CLI_EXIT_USAGE;
  }
  netsim_scenario_set *set = NULL;
  const netsim_scenario *s = NULL;
  if (cli_scenario_open(c.scenario_file, c.scenario, &set, &s) != WT_OK) {
    fprintf(stderr, "netsim simulate: %s\n", wt_last_error());
    return CLI_EXIT_USAGE;
  }
  rc = s_run(&c, s);
  netsim_scenario_set_destroy(&set);
  return rc;
}
