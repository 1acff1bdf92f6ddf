/* cli — what the netsim subcommands share: simulator options, loading the scenario named on the
 * command line, and running one solver then simulating its plan.
 *
 * Exit statuses of every subcommand: 0 done, 1 a failure while running (a file not written),
 * 2 a bad request (unknown flag, bad value, bad scenario or assignment file). */
#ifndef WT_NETSIM_CLI_H
#define WT_NETSIM_CLI_H

#include "common/config.h"
#include "netsim/netsim.h"

#include <stddef.h>

#define CLI_EXIT_FAIL 1
#define CLI_EXIT_USAGE 2

/* Simulator settings every subcommand accepts (embedded in each command's config struct). */
typedef struct {
  char schedule[WT_CONFIG_STR_MAX]; /* gpipe | 1f1b */
  int micro_batches;
  char dp_algo[WT_CONFIG_STR_MAX]; /* auto | sharded-ps | ring */
  double fwd_s, bwd_s;             /* 0 = derived from the model size and device speed */
  double limit_s;                  /* wall-clock limit of one simulation; 0 = none */
} cli_sim_opts;

/* The option table rows for cli_sim_opts living at `base` inside a command's config. */
#define CLI_SIM_OPTIONS(type, member)                                                              \
  {"schedule",          WT_OPT_CHOICE, offsetof(type, member.schedule), 0, 0, "1f1b",              \
   "pipeline schedule", "gpipe|1f1b"},                                                             \
      {"micro-batches",                                                                            \
       WT_OPT_INT,                                                                                 \
       offsetof(type, member.micro_batches),                                                       \
       1,                                                                                          \
       4096,                                                                                       \
       "8",                                                                                        \
       "micro-batches per iteration",                                                              \
       NULL},                                                                                      \
      {"dp-algo",                                                                                  \
       WT_OPT_CHOICE,                                                                              \
       offsetof(type, member.dp_algo),                                                             \
       0,                                                                                          \
       0,                                                                                          \
       "auto",                                                                                     \
       "data-parallel reduce; auto: the paper's sharded PS on symmetric scenarios without access " \
       "links, else the ring",                                                                     \
       "auto|sharded-ps|ring"},                                                                    \
      {"fwd-s",                                                                                    \
       WT_OPT_FLOAT,                                                                               \
       offsetof(type, member.fwd_s),                                                               \
       0,                                                                                          \
       1e6,                                                                                        \
       "0",                                                                                        \
       "forward of one micro-batch through one stage, speed-1 device (0 = from model size)",       \
       NULL},                                                                                      \
      {"bwd-s",                                                                                    \
       WT_OPT_FLOAT,                                                                               \
       offsetof(type, member.bwd_s),                                                               \
       0,                                                                                          \
       1e6,                                                                                        \
       "0",                                                                                        \
       "backward of one micro-batch (0 = twice the forward derived from model size)",              \
       NULL},                                                                                      \
  {                                                                                                \
    "sim-limit-s", WT_OPT_FLOAT, offsetof(type, member.limit_s), 0, 86400, "300",                  \
        "wall-clock limit of one simulation; past it the command stops with an error (0 = none)",  \
        NULL                                                                                       \
  }

/* Turns the options into a simulator config for a scenario. */
void cli_sim_config(const cli_sim_opts *o, const netsim_scenario *s, netsim_sim_config *cfg);

/* Parses a subcommand's flags (argv[2..]): returns 0 after printing --help, CLI_EXIT_USAGE
 * after printing the error, and -1 when the command should go on. */
int cli_parse(const char *usage, const wt_option *table, void *cfg, int argc, char **argv);

/* Loads `file` (the shipped file when empty) and picks scenario `name` (the only one when
 * empty). On WT_OK the caller destroys *set; *out points into it. */
int cli_scenario_open(const char *file, const char *name, netsim_scenario_set **set,
                      const netsim_scenario **out);

/* One solver's outcome on one scenario. */
typedef struct {
  assign_solver solver;
  assign_cost cost;      /* the paper's cost model for the plan */
  netsim_sim_result sim; /* the simulated iteration */
  double solve_s;
  assign_plan *plan; /* owned; cli_result_clear frees it */
} cli_result;

/* Runs `solver` (budget in seconds and/or evaluations, seed) on the scenario, pricing with
 * sim->dp_algo, and simulates the plan with `sim` when `simulate` (else out->sim stays zero).
 * Returns WT_OK, the solver's error, or the simulator's (WT_ETIMEOUT past sim->max_seconds, with a
 * message naming the flag). */
int cli_solve_and_simulate(const netsim_scenario *s, assign_solver solver, double budget_s,
                           long max_evals, uint64_t seed, const netsim_sim_config *sim,
                           int simulate, cli_result *out);
void cli_result_clear(cli_result *r);

/* Parses "a,b,c" into solver kinds (at most ASSIGN_SOLVER_COUNT, no repeats); refuses exact on
 * scenarios above 12 devices when n_devices > 0. Returns WT_OK or WT_EINVAL. */
int cli_solvers_parse(const char *list, int n_devices, assign_solver *out, int *count);

/* Subcommands. */
int cli_compare_main(int argc, char **argv);
int cli_sweep_main(int argc, char **argv);
int cli_simulate_main(int argc, char **argv);
int cli_generate_main(int argc, char **argv);

#endif
