/* wantrain — train, evaluate and sample a GPT on one machine.
 *
 *   wantrain train  [options]    train (or resume) on the synthetic corpus, a file or a URL
 *   wantrain eval   [options]    mean next-token cross-entropy of a checkpoint on a file
 *   wantrain sample [options]    generate text from a checkpoint
 *   wantrain tokenize [options]  a text file to GPT-2 token shards (llm.c .bin)
 *   wantrain launch [options]    S stages x R replicas: a coordinator and S x R peerd here
 *   wantrain demo   [options]    a coordinator and 9 peerd on an emulated WAN, one killed
 *
 * Every command's options come from one table in its cmd_*.c (common/config.h): --help lists
 * them with their defaults; a bad flag exits with status 2. What the commands share is cli.c.
 */
#include "tools/wantrain/cli.h"

#include "common/common.h"
#include "kernels/kernels.h"

#include <stdio.h>
#include <string.h>

static const struct {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *help;
} s_commands[] = {
    {"train", cmd_train, "train a GPT (or resume one) and write checkpoints"},
    {"eval", cmd_eval, "mean next-token loss of a checkpoint on a data file"},
    {"sample", cmd_sample, "generate text from a checkpoint"},
    {"tokenize", cmd_tokenize, "encode a text file with GPT-2's BPE into llm.c .bin shards"},
    {"launch", cmd_launch, "train with S stages x R replicas: a coordinator and S x R peerd here"},
    {"demo", cmd_demo, "coordinator + 9 peerd over an emulated WAN, one peer killed part-way"},
};

static void s_usage(FILE *out) {
  fprintf(out, "usage: wantrain <command> [options]   (wantrain <command> --help for options)\n\n"
               "commands:\n");
  for (size_t i = 0; i < WT_ARRAY_LEN(s_commands); i++)
    fprintf(out, "  %-8s %s\n", s_commands[i].name, s_commands[i].help);
}

int main(int argc, char **argv) {
  wt_program_init(argv); /* OMP_WAIT_POLICY=PASSIVE unless the user chose */
  kernels_cpu_init();    /* loads OpenBLAS before any thread starts; a failure shows at first use */
  if (argc < 2) {
    s_usage(stderr);
    return CLI_USAGE;
  }
  if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
    s_usage(stdout);
    return CLI_OK;
  }
  for (size_t i = 0; i < WT_ARRAY_LEN(s_commands); i++)
    if (!strcmp(argv[1], s_commands[i].name)) return s_commands[i].run(argc, argv);
  fprintf(stderr, "wantrain: unknown command '%s'\n", argv[1]);
  s_usage(stderr);
  return CLI_USAGE;
}
