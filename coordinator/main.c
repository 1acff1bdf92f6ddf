/* coordinator — the program: `coordinator [serve] [options]` runs the daemon, `coordinator
 * token new [--state-dir DIR] [--expires DURATION] [--uses N]` mints a join token. */
#include "coordinator/coordinator.h"

#include "common/common.h"
#include "coordinator/coordinator_internal.h"
#include "common/config.h"
#include "compress/preset.h"

#include <cjson/cJSON.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static volatile sig_atomic_t s_stop;

static void s_on_signal(int sig) {
  (void)sig;
  s_stop = 1;
}

typedef struct {
  char state_dir[WT_CONFIG_STR_MAX], expires[WT_CONFIG_STR_MAX];
  int uses;
} token_args;

#define F(x) offsetof(token_args, x)
static const wt_option s_token_options[] = {
    {"state-dir", WT_OPT_STRING, F(state_dir), 0, 0, "coordinator-state",
     "the coordinator's state directory", 0},
    {"expires", WT_OPT_STRING, F(expires), 0, 0, "0",
     "lifetime: 90s, 15m, 2h, 7d (0 = never expires)", 0},
    {"uses", WT_OPT_INT, F(uses), 0, 1e9, "1", "registrations it allows (0 = unlimited)", 0},
    {0}};
#undef F

static int s_token(int argc, char **argv) {
  token_args a;
  int help = 0;
  if (argc < 3 || strcmp(argv[2], "new")) {
    fprintf(stderr, "usage: coordinator token new [--state-dir DIR] [--expires D] [--uses N]\n");
    return 2;
  }
  if (wt_config_defaults(s_token_options, &a) != WT_OK ||
      wt_config_parse_args(s_token_options, &a, argc, argv, 3, NULL, 0, NULL, &help) != WT_OK) {
    fprintf(stderr, "coordinator token: error: %s\n", wt_last_error());
    return 2;
  }
  if (help) {
    wt_config_print_help(stdout, "usage: coordinator token new [options]\n\nMints a join token.",
                         s_token_options);
    return 0;
  }
  double expires = 0;
  if (coordinator_duration_parse(a.expires, &expires) != WT_OK) {
    fprintf(stderr, "coordinator token: error: --expires: %s\n", wt_last_error());
    return 2;
  }
  char tok[256];
  if (coordinator_token_new(a.state_dir, expires, a.uses, tok, sizeof tok) != WT_OK) {
    fprintf(stderr, "coordinator token: error: %s\n", wt_last_error());
    return 1;
  }
  printf("%s\n", tok);
  return 0;
}

/* The last status as one log line, without its event log: each event is a line above it, and
 * a reader looking for an event's text should find the event, not this line. */
static void s_print_final(coordinator *c) {
  char *text = coordinator_status_json(c);
  cJSON *status = cJSON_Parse(text);
  if (status) {
    cJSON_DeleteItemFromObject(status, "events");
    free(text);
    text = cJSON_PrintUnformatted(status);
    cJSON_Delete(status);
  }
  printf("coordinator: final %s\n", text);
  free(text);
}

int main(int argc, char **argv) {
  if (argc >= 2 && !strcmp(argv[1], "token")) return s_token(argc, argv);
  int first = argc >= 2 && !strcmp(argv[1], "serve") ? 2 : 1;
  coordinator_config cfg;
  int help = 0;
  const wt_option *opts = coordinator_options();
  if (wt_config_defaults(opts, &cfg) != WT_OK ||
      wt_config_parse_args(opts, &cfg, argc, argv, first, NULL, 0, NULL, &help) != WT_OK) {
    fprintf(stderr, "coordinator: error: %s\n", wt_last_error());
    return 2;
  }
  if (help) {
    wt_config_print_help(stdout,
                         "usage: coordinator [serve] [options]\n"
                         "       coordinator token new [--expires D] [--uses N]\n\n"
                         "Admits peers, places tasklets, runs the training run's epochs.",
                         opts);
    return 0;
  }
  if (coordinator_config_check(&cfg) != WT_OK) {
    fprintf(stderr, "coordinator: error: %s\n", wt_last_error());
    return 2;
  }
  /* Each seat is one admitted peer, and the coordinator admits no more than --max-peers. */
  if (cfg.run.stages * cfg.run.replicas > cfg.max_peers) {
    fprintf(stderr,
            "coordinator: error: --stages %d x --replicas %d = %d seats, but this coordinator "
            "admits at most --max-peers %d peers, so this run could never start; give fewer "
            "stages or replicas, or a larger --max-peers\n",
            cfg.run.stages, cfg.run.replicas, cfg.run.stages * cfg.run.replicas, cfg.max_peers);
    return 2;
  }
  if (strcmp(cfg.run.sync.preset, "none")) {
    char line[512];
    compress_preset_describe(compress_preset_find(cfg.run.sync.preset), line, sizeof line);
    printf("coordinator: preset %s: %s\n", cfg.run.sync.preset, line);
  }
  if (!strcmp(cfg.checkpoint_storage, "peers"))
    printf("coordinator: checkpoints on the peers (%s): each peer's --data-dir, %d copies of "
           "each committed shard%s%s\n",
           coordinator_checkpoint_storage_why(&cfg), cfg.checkpoint_copies,
           cfg.checkpoint_store[0] ? ", and in " : "", cfg.checkpoint_store);
  else
    printf("coordinator: checkpoints in %s (%s), which every peer must reach\n",
           cfg.run.checkpoint_dir[0] ? cfg.run.checkpoint_dir
                                     : "the state directory's checkpoints/",
           coordinator_checkpoint_storage_why(&cfg));
  if (parallel_run_config_stateful(&cfg.run))
    printf("coordinator: sync: DiLoCo H=%d (outer lr %g, momentum %g), --grad-codec %s, error "
           "feedback %s, --act-codec %s: recovery from a lost peer %s %s\n",
           cfg.run.sync.diloco, cfg.run.sync.outer_lr, cfg.run.sync.outer_momentum,
           cfg.run.sync.grad_codec, cfg.run.sync.grad_ef, cfg.run.act_codec,
           parallel_run_config_live_recovery(&cfg.run)
               ? "starts from the live replicas' state (from the checkpoint only when a stage has "
                 "no live replica):"
               : "resumes from the last complete checkpoint in",
           cfg.run.checkpoint_dir);
  fflush(stdout);
  struct sigaction sa = {0};
  sa.sa_handler = s_on_signal;
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  coordinator *c = coordinator_new(&cfg);
  if (!c) {
    fprintf(stderr, "coordinator: error: %s\n", wt_last_error());
    return 1;
  }
  printf("coordinator: listening on %s\ncoordinator: public key %s (in %s/coordinator.pub)\n",
         coordinator_endpoint(c), coordinator_public_key(c), cfg.state_dir);
  if (coordinator_http_port_get(c) >= 0)
    printf("coordinator: dashboard http://%s:%d/ (/status, /metrics)\n", cfg.http_bind,
           coordinator_http_port_get(c));
  fflush(stdout);
  int rc = coordinator_run(c, &s_stop);
  if (rc != WT_OK) fprintf(stderr, "coordinator: error: %s\n", wt_last_error());
  s_print_final(c);
  coordinator_destroy(&c);
  return rc == WT_OK ? 0 : 1;
}
