/* coordinator — the program: `coordinator [serve] [options]` runs the daemon, `coordinator
 * token new [--state-dir DIR] [--expires DURATION] [--uses N]` mints a join token. */
#include "coordinator/coordinator.h"

#include "common/common.h"
#include "common/config.h"
#include "model/gpt.h" /* defines: the MoE checks of gpt_config */

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

/* The MoE options against each other and the model, as `wantrain train` checks them. */
static int s_check_moe(const coordinator_config *c) {
  if (c->moe_experts == 0 && (c->moe_top_k != 1 || strcmp(c->moe_layers, "all") != 0 ||
                              c->moe_capacity != 1.25 || c->moe_aux_weight != 0.01))
    return wt_fail(WT_EINVAL, "--moe-top-k, --moe-layers, --moe-capacity and --moe-aux-weight "
                              "shape an MoE model; add --moe-experts E (> 0) or drop them");
  if (c->moe_experts == 0) return WT_OK;
  if (c->site_cp > 1)
    return wt_fail(WT_EINVAL, "a site runs an MoE model's stages expert-parallel, without "
                              "context parallelism; drop --site-cp or the MoE options");
  gpt_config g = {.vocab_size = 256,
                  .max_seq = c->seq,
                  .n_layer = c->layers,
                  .n_head = c->heads,
                  .channels = c->channels,
                  .moe_experts = c->moe_experts,
                  .moe_top_k = c->moe_top_k,
                  .moe_capacity = (float)c->moe_capacity,
                  .moe_aux_weight = (float)c->moe_aux_weight};
  if (gpt_config_set_moe_layers(&g, c->moe_layers) != WT_OK) {
    char msg[600];
    snprintf(msg, sizeof msg, "%s", wt_last_error());
    return wt_fail(WT_EINVAL, "--moe-layers: %s (--layers %d)", msg, c->layers);
  }
  return gpt_config_validate(&g);
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
  if (cfg.batch % (cfg.replicas * cfg.micro_batches) || cfg.channels % cfg.heads) {
    fprintf(stderr, "coordinator: error: --batch must be a multiple of --replicas x "
                    "--micro-batches and --heads must divide --channels\n");
    return 2;
  }
  if (cfg.site_cp > 1 && cfg.seq % (2 * cfg.site_cp)) {
    fprintf(stderr,
            "coordinator: error: --site-cp %d splits each sequence into %d chunks; give a --seq "
            "that is a multiple of %d (not %d)\n",
            cfg.site_cp, 2 * cfg.site_cp, 2 * cfg.site_cp, cfg.seq);
    return 2;
  }
  if (s_check_moe(&cfg) != WT_OK) {
    fprintf(stderr, "coordinator: error: %s\n", wt_last_error());
    return 2;
  }
  if (strcmp(cfg.grad_codec, "none") || !strncmp(cfg.act_codec, "delta", 5)) {
    /* Recovery from churn resumes from checkpoints, which hold no codec state. */
    fprintf(stderr,
            "coordinator: error: --grad-codec %s / --act-codec %s keep state (error "
            "feedback, activation caches) that checkpoints do not hold, so a run could "
            "not recover from a lost peer; use --grad-codec none and --act-codec none "
            "or direct8\n",
            cfg.grad_codec, cfg.act_codec);
    return 2;
  }
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
  int rc = coordinator_run(c, &s_stop);
  if (rc != WT_OK) fprintf(stderr, "coordinator: error: %s\n", wt_last_error());
  char *status = coordinator_status_json(c);
  printf("coordinator: final %s\n", status);
  free(status);
  coordinator_destroy(&c);
  return rc == WT_OK ? 0 : 1;
}
