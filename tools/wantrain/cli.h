/* cli — what the `wantrain` sub-commands share: their entry points and exit codes. */
#ifndef WT_CLI_H
#define WT_CLI_H

#include "common/config.h"
#include "model/trainer.h"
#include "parallel/runtime/run_config.h" /* defines: the run's option rows */

#include <stdio.h>

/* Exit statuses: 0 success, 1 a failure at run time (file, data, checkpoint), 2 a usage error
 * (unknown or malformed flag, missing required option). */
enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

int cmd_train(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_sample(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_launch(int argc, char **argv);
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

/* The --device, --precision and --tf32 rows of a command's option table, for a struct whose
 * member path `m` (run., or nothing) has fields `device`, `precision` (char[WT_CONFIG_STR_MAX])
 * and `tf32` (int): the run's rows (parallel/runtime/run_config.h). */
#define CLI_DEVICE_OPTIONS(type, m) PARALLEL_RUN_DEVICE_OPTIONS(type, m)

/* Checks the Mixture-of-Experts options of a run against each other and its device: shaping
 * flags without --moe-experts, top-k above the experts, a device other than the CPU, a
 * --moe-layers list that does not fit. Returns WT_OK or WT_EINVAL naming the flag. */
int cli_check_moe(const parallel_run_config *run);

/* The model's shape flags (--heads dividing --channels), then cli_check_moe: what `train` and
 * `launch` both refuse as a usage error before starting anything. WT_OK or WT_EINVAL naming the
 * flag. */
int cli_check_model(const parallel_run_config *run);

/* The data rows (--data, --data-sha256 of the run at member path `m`, and --cache-dir, a field
 * `cache_dir` of `type` where this process keeps downloads), and the model and optimizer rows
 * (--seq, --layers, --channels, --heads, --lr, --min-lr, --warmup, --weight-decay, --grad-clip,
 * --optimizer, --seed) that `train` and `launch` share with the coordinator, for a
 * parallel_run_config member `m` of `type`: the run's rows, so a flag has one name, bound,
 * default and help in every command. */
// clang-format off
#define CLI_DATA_OPTIONS(type, m)                                                                  \
  PARALLEL_RUN_DATA_OPTIONS(type, m),                                                              \
  {"cache-dir", WT_OPT_STRING, offsetof(type, cache_dir), 0, 0, "",                                \
   "where URLs are downloaded (default $WANTRAIN_CACHE or ~/.cache/wantrain)", 0}
#define CLI_MODEL_OPTIONS(type, m)                                                                 \
  PARALLEL_RUN_MODEL_OPTIONS(type, m.), PARALLEL_RUN_OPTIM_OPTIONS(type, m.)
// clang-format on

/* A --json-log file of `wantrain <command>`: one JSON object a line. The first write error is
 * reported at once and the run goes on (its checkpoints matter more than its log); closing
 * turns it into the run's failure. `f` is NULL when there is no log. */
typedef struct {
  FILE *f;
  int error; /* the first write error (errno), 0 none */
  const char *command, *path;
} cli_json_log;

/* Opens path for appending (no log when path is ""). WT_OK or WT_EIO naming the file. */
int cli_json_log_open(cli_json_log *log, const char *command, const char *path);
/* Writes one line (printf format); nothing once a write has failed. */
__attribute__((format(printf, 2, 3))) void cli_json_log_line(cli_json_log *log, const char *fmt,
                                                              ...);
/* Closes the log. Returns rc, or WT_EIO ("the log is incomplete") when rc is WT_OK and a write
 * failed. */
int cli_json_log_close(cli_json_log *log, int rc);

/* Prints "wantrain <command>: error: <wt_last_error()>" and returns CLI_FAIL. */
int cli_fail(const char *command);

#endif
