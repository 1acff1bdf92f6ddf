/* cli — what the `wantrain` sub-commands share (cli.h): parsing a command's options, choosing
 * its device, the trainer config of the train options and their checks, the error line. */
#include "tools/wantrain/cli.h"

#include "common/common.h"
#include "kernels/kernels.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int cli_parse(const char *command, const char *usage, const wt_option *table, void *cfg, int argc,
              char **argv) {
  int help = 0;
  if (wt_config_defaults(table, cfg) != WT_OK ||
      wt_config_parse_args(table, cfg, argc, argv, 2, NULL, 0, NULL, &help) != WT_OK) {
    fprintf(stderr, "wantrain %s: error: %s\n", command, wt_last_error());
    return CLI_USAGE;
  }
  if (help) {
    wt_config_print_help(stdout, usage, table);
    return -1;
  }
  return CLI_OK;
}

int cli_device(const char *command, const char *name, const char *precision, int tf32,
               const kernels_ops **ops) {
  kernels_precision p;
  int rc = kernels_for_device(name, ops);
  if (rc == WT_OK) rc = kernels_parse_precision(precision, tf32, &p);
  if (rc == WT_OK) rc = kernels_set_precision(*ops, p);
  if (rc == WT_OK) return CLI_OK;
  fprintf(stderr, "wantrain %s: error: %s\n", command, wt_last_error());
  return rc == WT_EINVAL ? CLI_USAGE : CLI_FAIL;
}

int cli_check_moe(const parallel_run_config *run) {
  gpt_config m = {.n_layer = run->layers};
  WT_CHECK(gpt_moe_options_apply(&run->moe, &m));
  if (run->moe.experts > 0 && strcmp(run->device, "cpu") != 0)
    return wt_fail(WT_EINVAL, "MoE blocks (--moe-experts) run on --device cpu only, not %s",
                   run->device);
  return WT_OK;
}

int cli_check_model(const parallel_run_config *run) {
  if (run->channels % run->heads != 0)
    return wt_fail(WT_EINVAL, "--heads %d must divide --channels %d", run->heads, run->channels);
  return cli_check_moe(run);
}

int cli_fail(const char *command) {
  fprintf(stderr, "wantrain %s: error: %s\n", command, wt_last_error());
  return CLI_FAIL;
}

int cli_json_log_open(cli_json_log *log, const char *command, const char *path) {
  *log = (cli_json_log){.command = command, .path = path};
  if (!path[0]) return WT_OK;
  if (!(log->f = fopen(path, "a")))
    return wt_fail(WT_EIO, "cannot open --json-log %s: %s", path, strerror(errno));
  return WT_OK;
}

void cli_json_log_line(cli_json_log *log, const char *fmt, ...) {
  if (!log->f || log->error) return;
  va_list ap;
  va_start(ap, fmt);
  errno = 0;
  int bad = vfprintf(log->f, fmt, ap) < 0;
  va_end(ap);
  bad = bad || fflush(log->f) != 0;
  if (!bad) return;
  log->error = errno ? errno : EIO;
  fprintf(stderr,
          "wantrain %s: warning: cannot write --json-log %s: %s; training goes on, the log stops "
          "here and wantrain %s will exit with status 1\n",
          log->command, log->path, strerror(log->error), log->command);
}

int cli_json_log_close(cli_json_log *log, int rc) {
  if (!log->f) return rc;
  if (fclose(log->f) != 0 && !log->error) log->error = errno ? errno : EIO;
  log->f = NULL;
  if (log->error && rc == WT_OK)
    rc = wt_fail(WT_EIO, "--json-log %s could not be written (%s); the log is incomplete",
                 log->path, strerror(log->error));
  return rc;
}
