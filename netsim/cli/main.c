/* netsim — experiments on simulated wide-area topologies: compare assignment solvers, sweep all
 * scenarios into a CSV and a chart, simulate one assignment with a timeline, generate worlds. */
#include "netsim/cli/cli.h"

#include "common/common.h"

#include <string.h>

typedef struct {
  int regions, gpus_per_region;
  long long seed;
  double jitter;
  int shuffle;
  char out[WT_CONFIG_STR_MAX];
  char config[WT_CONFIG_STR_MAX];
} generate_cfg;

static const wt_option s_generate_options[] = {
    {"regions", WT_OPT_INT, offsetof(generate_cfg, regions), 1, 64, "8", "regions", NULL},
    {"gpus-per-region", WT_OPT_INT, offsetof(generate_cfg, gpus_per_region), 1, 64, "8",
     "devices per region", NULL},
    {"seed", WT_OPT_INT64, offsetof(generate_cfg, seed), 0, 9e15, "1", "topology seed", NULL},
    {"jitter", WT_OPT_FLOAT, offsetof(generate_cfg, jitter), 0, 0.9, "0",
     "per-pair noise: every device pair's latency and bandwidth scaled by its own factor in "
     "[1-j, 1+j] (0 = region form: devices of a region identical)",
     NULL},
    {"shuffle", WT_OPT_FLAG, offsetof(generate_cfg, shuffle), 0, 1, "0",
     "number devices in random order instead of region by region", NULL},
    {"out", WT_OPT_STRING, offsetof(generate_cfg, out), 0, 0, "",
     "scenario file to write "
     "(required)",
     NULL},
    {"config", WT_OPT_STRING, offsetof(generate_cfg, config), 0, 0, "",
     "JSON file of these options", NULL},
    {0}};

int cli_generate_main(int argc, char **argv) {
  generate_cfg c;
  int rc = cli_parse("usage: netsim generate --out FILE [--regions n] [--gpus-per-region g] "
                     "[--seed S] [--jitter J] [--shuffle]\nWrites a random world-wide topology "
                     "as a scenario file.",
                     s_generate_options, &c, argc, argv);
  if (rc >= 0) return rc;
  if (!*c.out) {
    fprintf(stderr, "netsim generate: --out FILE is required (see --help)\n");
    return CLI_EXIT_USAGE;
  }
  netsim_scenario *s = netsim_scenario_random(c.regions, c.gpus_per_region, (uint64_t)c.seed);
  if (c.jitter > 0 || c.shuffle) {
    netsim_scenario *j = netsim_scenario_jitter(s, c.jitter, c.shuffle, (uint64_t)c.seed + 1);
    netsim_scenario_destroy(&s);
    s = j;
  }
  rc = netsim_scenario_save(s, c.out);
  if (rc == WT_OK)
    printf("wrote %s (scenario %s)\n", c.out, netsim_scenario_name(s));
  else
    fprintf(stderr, "netsim generate: %s\n", wt_last_error());
  netsim_scenario_destroy(&s);
  return rc == WT_OK ? 0 : CLI_EXIT_FAIL;
}

static void s_usage(FILE *out) {
  fprintf(out,
          "usage: netsim COMMAND [options]   (netsim COMMAND --help lists a command's options)\n"
          "  compare   solve one scenario with several solvers; table or --json\n"
          "  sweep     all scenarios (and --random K topologies) → CSV + chart\n"
          "  simulate  one assignment file → iteration breakdown and a Chrome trace\n"
          "  generate  write a random world-wide topology as a scenario file\n"
          "Scenarios default to %s\n",
          netsim_scenario_default_path());
}

int main(int argc, char **argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
      !strcmp(argv[1], "help")) {
    s_usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? CLI_EXIT_USAGE : 0;
  }
  if (!strcmp(argv[1], "compare")) return cli_compare_main(argc, argv);
  if (!strcmp(argv[1], "sweep")) return cli_sweep_main(argc, argv);
  if (!strcmp(argv[1], "simulate")) return cli_simulate_main(argc, argv);
  if (!strcmp(argv[1], "generate")) return cli_generate_main(argc, argv);
  fprintf(stderr, "netsim: unknown command '%s'\n", argv[1]);
  s_usage(stderr);
  return CLI_EXIT_USAGE;
}
