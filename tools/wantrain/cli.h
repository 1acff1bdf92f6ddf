/* cli — what the `wantrain` sub-commands share: their entry points and exit codes. */
#ifndef WT_CLI_H
#define WT_CLI_H

#include "common/config.h"

/* Exit statuses: 0 success, 1 a failure at run time (file, data, checkpoint), 2 a usage error
 * (unknown or malformed flag, missing required option). */
enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

int cmd_train(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_sample(int argc, char **argv);
int cmd_launch(int argc, char **argv);
/* The hidden `wantrain __tasklet RANK RUN_DIR STATUS_FD <launch options>` that `launch` execs
 * once per process (cmd_launch.c). */
int cmd_launch_worker(int argc, char **argv);
int cmd_demo(int argc, char **argv);

/* Parses argv[2..] with `table` into cfg (defaults first). Prints help and returns -1 (caller
 * exits 0) on --help; prints the error and returns CLI_USAGE on a bad flag; else CLI_OK. */
int cli_parse(const char *command, const char *usage, const wt_option *table, void *cfg, int argc,
              char **argv);

/* The kernels back end of --device NAME (kernels_for_device: cpu, cuda, cuda:N) set to the
 * matmul precision of --precision fp32|bf16 and --tf32. Returns CLI_OK with *ops set; else
 * prints the error and returns CLI_USAGE for a malformed name or CLI_FAIL when this build or
 * machine has no such device, or the back end cannot compute at that precision. */
struct kernels_ops;
int cli_device(const char *command, const char *name, const char *precision, int tf32,
               const struct kernels_ops **ops);

/* The --device, --precision and --tf32 rows of a command's option table, for a struct with
 * fields `device`, `precision` (char[WT_CONFIG_STR_MAX]) and `tf32` (int). */
// clang-format off
#define CLI_DEVICE_OPTIONS(type)                                                                   \
  {"device", WT_OPT_STRING, offsetof(type, device), 0, 0, "cpu",                                   \
   "kernels back end: cpu, or cuda:N for GPU N (CUDA builds)", 0},                                 \
  {"precision", WT_OPT_CHOICE, offsetof(type, precision), 0, 0, "fp32",                            \
   "matmul precision; bf16: bf16 tensor-core inputs, fp32 weights, optimizer and loss (GPU)",      \
   "fp32|bf16"},                                                                                   \
  {"tf32", WT_OPT_FLAG, offsetof(type, tf32), 0, 1, "0",                                          \
   "fp32 matmuls on TF32 tensor cores (GPU)", 0}
// clang-format on

/* Prints "wantrain <command>: error: <wt_last_error()>" and returns CLI_FAIL. */
int cli_fail(const char *command);

#endif
