/* cmd_eval — `wantrain eval`: mean next-token cross-entropy of a checkpoint over a whole file,
 * in consecutive windows of T+1 tokens at stride T (a last partial window is dropped). */
#include "tools/wantrain/cli.h"

#include "model/checkpoint.h"
#include "parallel/runtime/tasklet.h" /* a multi-stage run directory as one model */
#include "common/common.h"
#include "model/data.h"
#include "kernels/kernels.h"

#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  char checkpoint[WT_CONFIG_STR_MAX];
  char data[WT_CONFIG_STR_MAX];
  char data_sha256[WT_CONFIG_STR_MAX];
  char cache_dir[WT_CONFIG_STR_MAX];
  int batch, json;
  char device[WT_CONFIG_STR_MAX], precision[WT_CONFIG_STR_MAX];
  int tf32;
} eval_args;

#define F(x) offsetof(eval_args, x)
static const wt_option s_options[] = {
    {"checkpoint", WT_OPT_STRING, F(checkpoint), 0, 0, "",
     "run directory (its latest step) or step directory (required)", 0},
    {"data", WT_OPT_STRING, F(data), 0, 0, "",
     "text file, llm.c .bin shard, URL, or synthetic (required)", 0},
    {"data-sha256", WT_OPT_STRING, F(data_sha256), 0, 0, "", "expected SHA-256 of the data", 0},
    {"cache-dir", WT_OPT_STRING, F(cache_dir), 0, 0, "", "where URLs are downloaded", 0},
    {"batch", WT_OPT_INT, F(batch), 1, 4096, "8", "windows per forward pass", 0},
    {"json", WT_OPT_FLAG, F(json), 0, 1, "0",
     "print {\"loss\":..,\"tokens\":..} only (loss null, with an \"error\", if not finite)", 0},
    CLI_DEVICE_OPTIONS(eval_args, ),
    {0}};
#undef F

static const char *s_usage =
    "usage: wantrain eval --checkpoint PATH --data PATH [--json]\n\n"
    "Mean next-token cross-entropy (nats) over the whole file, cut into consecutive windows of\n"
    "T+1 tokens with stride T (T = the model's context); a last partial window is dropped.";

/* Set by SIGINT/SIGTERM while the data downloads: the download stops and leaves nothing. */
static volatile sig_atomic_t s_stop_signal = 0;

static void s_on_signal(int sig) {
  s_stop_signal = sig;
  signal(sig, SIG_DFL); /* a second signal ends the process at once */
}

/* Opens the data with signals that end a download cleanly; afterwards they end eval at once. */
static data_set *s_open_data(const eval_args *a) {
  signal(SIGINT, s_on_signal);
  signal(SIGTERM, s_on_signal);
  data_fetch_configure(0, &s_stop_signal);
  data_set *d = data_set_open(a->data, a->cache_dir, a->data_sha256);
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  return d;
}

/* Sums loss × targets over every full window; *tokens receives the number of targets. */
static int s_eval(gpt_stage *m, const data_set *d, int B, double *sum, size_t *tokens) {
  const int T = gpt_stage_config(m)->max_seq;
  const size_t n = data_set_num_tokens(d), windows = n > 0 ? (n - 1) / (size_t)T : 0;
  const uint16_t *tok = data_set_tokens(d);
  if (windows == 0)
    return wt_fail(WT_EINVAL, "%zu tokens is fewer than one window of %d+1 tokens", n, T);
  int *x = wt_xmalloc((size_t)B * T * sizeof(int)), *y = wt_xmalloc((size_t)B * T * sizeof(int));
  int rc = WT_OK;
  *sum = 0;
  *tokens = 0;
  for (size_t w = 0; w < windows && rc == WT_OK; w += (size_t)B) {
    int b = (int)WT_MIN((size_t)B, windows - w);
    for (size_t i = 0; i < (size_t)b * T; i++) {
      size_t at = (w + i / (size_t)T) * (size_t)T + i % (size_t)T;
      x[i] = tok[at];
      y[i] = tok[at + 1];
    }
    rc = gpt_stage_forward(m, x, NULL, y, b, T, NULL);
    *sum += (double)gpt_stage_loss(m) * b * T;
    *tokens += (size_t)b * T;
  }
  free(x);
  free(y);
  return rc;
}

static int s_run(const eval_args *a, const kernels_ops *ops) {
  if (!a->checkpoint[0] || !a->data[0])
    return wt_fail(WT_EINVAL, "--checkpoint and --data are required (see --help)");
  gpt_config cfg;
  checkpoint_meta meta;
  WT_CHECK(parallel_run_read_config(a->checkpoint, &cfg, &meta));
  data_set *d = s_open_data(a);
  if (!d) return WT_EINVAL;
  int rc = WT_OK;
  if (data_set_vocab_size(d) != cfg.vocab_size)
    rc = wt_fail(WT_EMISMATCH,
                 "the checkpoint's vocabulary is %d tokens but %s has %d; evaluate "
                 "on data of the kind the model was trained on",
                 cfg.vocab_size, a->data, data_set_vocab_size(d));
  gpt_stage *m =
      rc == WT_OK ? gpt_stage_new_on(&cfg, 0, cfg.n_layer, a->batch, cfg.max_seq, ops) : NULL;
  if (rc == WT_OK && !m) rc = WT_EINVAL;
  if (rc == WT_OK) rc = parallel_run_load_model(a->checkpoint, m, &meta);
  double sum = 0;
  size_t tokens = 0;
  if (rc == WT_OK) rc = s_eval(m, d, a->batch, &sum, &tokens);
  double loss = tokens ? sum / (double)tokens : NAN;
  if (rc == WT_OK && a->json && !isfinite(loss)) /* JSON has no NaN or infinity */
    printf("{\"loss\":null,\"tokens\":%zu,\"error\":\"the mean loss is %s, not a finite "
           "number: the checkpoint's weights have diverged or are damaged\"}\n",
           tokens, isnan(loss) ? "NaN" : "infinite");
  else if (rc == WT_OK && a->json)
    printf("{\"loss\":%.6f,\"tokens\":%zu}\n", loss, tokens);
  else if (rc == WT_OK)
    printf("loss %.4f nats/token (perplexity %.3f) over %zu predicted tokens of %s\n",
           sum / (double)tokens, exp(sum / (double)tokens), tokens, a->data);
  gpt_stage_destroy(&m);
  data_set_destroy(&d);
  return rc;
}

int cmd_eval(int argc, char **argv) {
  eval_args a;
  int rc = cli_parse("eval", s_usage, s_options, &a, argc, argv);
  if (rc) return rc < 0 ? CLI_OK : rc;
  if (!a.checkpoint[0] || !a.data[0]) {
    fprintf(stderr, "wantrain eval: error: --checkpoint and --data are required (see --help)\n");
    return CLI_USAGE;
  }
  if (a.data_sha256[0] && data_sha256_check(a.data_sha256) != WT_OK) {
    fprintf(stderr, "wantrain eval: error: %s\n", wt_last_error());
    return CLI_USAGE;
  }
  const kernels_ops *ops = NULL;
  if ((rc = cli_device("eval", a.device, a.precision, a.tf32, &ops)) != CLI_OK) return rc;
  if (s_run(&a, ops) == WT_OK) return CLI_OK;
  cli_fail("eval");
  return s_stop_signal ? 128 + (int)s_stop_signal : CLI_FAIL;
}
