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

/* Parses argv[2..] with `table` into cfg (defaults first). Prints help and returns -1 (caller
 * exits 0) on --help; prints the error and returns CLI_USAGE on a bad flag; else CLI_OK. */
int cli_parse(const char *command, const char *usage, const wt_option *table, void *cfg, int argc,
              char **argv);

/* The kernels back end of --device NAME (kernels_for_device: cpu, cuda, cuda:N). Returns
 * CLI_OK with *ops set; else prints the error and returns CLI_USAGE for a malformed name or
 * CLI_FAIL when this build or machine has no such device. */
struct kernels_ops;
int cli_device(const char *command, const char *name, const struct kernels_ops **ops);

/* Prints "wantrain <command>: error: <wt_last_error()>" and returns CLI_FAIL. */
int cli_fail(const char *command);

#endif
