/* peerd — the program: parse the flags, run until the run is over or a signal says leave. */
#include "peer/peer.h"

#include "common/common.h"
#include "kernels/kernels.h"

#include <signal.h>
#include <stdio.h>

static volatile sig_atomic_t s_stop;

static void s_on_signal(int sig) {
  (void)sig;
  s_stop = 1;
}

int main(int argc, char **argv) {
  wt_program_init(argv); /* OMP_WAIT_POLICY=PASSIVE unless the user chose */
  kernels_cpu_init();
  peerd_config cfg;
  int help = 0;
  if (wt_config_defaults(peerd_options(), &cfg) != WT_OK ||
      wt_config_parse_args(peerd_options(), &cfg, argc, argv, 1, NULL, 0, NULL, &help) != WT_OK) {
    fprintf(stderr, "peerd: error: %s\n", wt_last_error());
    return 2;
  }
  if (help) {
    wt_config_print_help(stdout,
                         "usage: peerd --coordinator tcp://HOST:PORT --coordinator-key FILE|KEY "
                         "--token TOKEN [options]\n       peerd --site FILE --site-rank R "
                         "(R >= 1) [--key FILE] [--data-dir DIR]\n\nJoins a wantrain run and "
                         "trains what the coordinator assigns; or, as rank R >= 1 of a declared "
                         "site, serves that site's rank 0.",
                         peerd_options());
    return 0;
  }
  if (cfg.site_rank < 1 && (!cfg.coordinator[0] || !cfg.coordinator_key[0])) {
    fprintf(stderr, "peerd: error: --coordinator tcp://HOST:PORT and --coordinator-key FILE|KEY "
                    "are required (peerd --help)\n");
    return 2;
  }
  if (peerd_config_check(&cfg) != WT_OK) {
    fprintf(stderr, "peerd: error: %s\n", wt_last_error());
    return 2;
  }
  struct sigaction sa = {0};
  sa.sa_handler = s_on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  setvbuf(stdout, NULL, _IOLBF, 0);
  int rc = peerd_run(&cfg, &s_stop);
  if (rc != WT_OK) {
    fprintf(stderr, "peerd: error: %s\n", wt_last_error());
    return 1;
  }
  return 0;
}
