/* cmd_sample — `wantrain sample`: text from a checkpoint, one token at a time, each drawn from
 * the softmax of the last position's logits at a temperature (0 = always the likeliest). */
#include "tools/wantrain/cli.h"

#include "model/checkpoint.h"
#include "parallel/runtime/tasklet.h" /* a multi-stage run directory as one model */
#include "common/common.h"
#include "model/data.h"
#include "kernels/kernels.h"
#include "common/rng.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  char checkpoint[WT_CONFIG_STR_MAX];
  char prompt[WT_CONFIG_STR_MAX];
  int tokens;
  double temperature;
  long long seed;
  char device[WT_CONFIG_STR_MAX], precision[WT_CONFIG_STR_MAX];
  int tf32;
} sample_args;

#define F(x) offsetof(sample_args, x)
static const wt_option s_options[] = {
    {"checkpoint", WT_OPT_STRING, F(checkpoint), 0, 0, "",
     "run directory (its latest step) or step directory (required)", 0},
    {"prompt", WT_OPT_STRING, F(prompt), 0, 0, "", "text to continue (empty: a start token)", 0},
    {"tokens", WT_OPT_INT, F(tokens), 0, 1e6, "200", "tokens to generate", 0},
    {"temperature", WT_OPT_FLOAT, F(temperature), 0, 100, "1.0", "softmax temperature (0 = greedy)",
     0},
    {"seed", WT_OPT_INT64, F(seed), 0, 9e15, "1", "sampling seed", 0},
    CLI_DEVICE_OPTIONS(sample_args),
    {0}};
#undef F

static const char *s_usage = "usage: wantrain sample --checkpoint PATH [options]\n\n"
                             "Prints the prompt followed by generated text.";

/* Draws a token from logits (V) at temperature temp. */
static int s_draw(const float *logits, int V, double temp, wt_rng *rng) {
  int best = 0;
  for (int v = 1; v < V; v++)
    if (logits[v] > logits[best]) best = v;
  if (temp <= 0) return best;
  double sum = 0, u;
  for (int v = 0; v < V; v++) sum += exp((logits[v] - logits[best]) / temp);
  u = wt_rng_double(rng) * sum;
  for (int v = 0; v < V; v++) {
    u -= exp((logits[v] - logits[best]) / temp);
    if (u < 0) return v;
  }
  return best;
}

static void s_print(data_tokenizer tok, const int *ids, int n) {
  char buf[32];
  for (int i = 0; i < n; i++) {
    data_token_text(tok, ids[i], buf, sizeof buf);
    fputs(buf, stdout);
  }
  fflush(stdout);
}

static int s_generate(gpt_stage *m, data_tokenizer tok, const sample_args *a) {
  const gpt_config *c = gpt_stage_config(m);
  const int T = c->max_seq, V = c->vocab_size, cap = 4096 + a->tokens;
  int *ids = wt_xmalloc((size_t)cap * sizeof(int)), *dummy = wt_xcalloc((size_t)T, sizeof(int));
  int n = 0, rc = data_text_encode(tok, a->prompt, ids, 4096, &n);
  if (rc != WT_OK) n = 0;
  if (rc == WT_OK && n == 0) /* a start token: newline for bytes, end-of-text for GPT-2 */
    ids[n++] = tok == DATA_TOKENIZER_BYTES ? '\n' : tok == DATA_TOKENIZER_GPT2 ? 50256 : 0;
  if (rc == WT_OK) s_print(tok, ids, n);
  wt_rng rng;
  wt_rng_seed(&rng, (uint64_t)a->seed);
  for (int i = 0; i < a->tokens && rc == WT_OK; i++) {
    int ctx = WT_MIN(n, T); /* the last T tokens are all the model can see */
    rc = gpt_stage_forward(m, ids + n - ctx, NULL, dummy, 1, ctx, NULL);
    if (rc != WT_OK) break;
    ids[n] = s_draw(gpt_stage_logits(m) + (size_t)(ctx - 1) * V, V, a->temperature, &rng);
    s_print(tok, ids + n, 1);
    n++;
  }
  if (n > 0) printf("\n"); /* end the printed text (nothing was printed if the prompt failed) */
  free(ids);
  free(dummy);
  return rc;
}

int cmd_sample(int argc, char **argv) {
  sample_args a;
  int rc = cli_parse("sample", s_usage, s_options, &a, argc, argv);
  if (rc) return rc < 0 ? CLI_OK : rc;
  if (!a.checkpoint[0]) {
    fprintf(stderr, "wantrain sample: error: --checkpoint is required (see --help)\n");
    return CLI_USAGE;
  }
  const kernels_ops *ops = NULL;
  if ((rc = cli_device("sample", a.device, a.precision, a.tf32, &ops)) != CLI_OK) return rc;
  gpt_config cfg;
  checkpoint_meta meta;
  if (parallel_run_read_config(a.checkpoint, &cfg, &meta) != WT_OK) return cli_fail("sample");
  gpt_stage *m = gpt_stage_new_on(&cfg, 0, cfg.n_layer, 1, cfg.max_seq, ops);
  rc = m ? parallel_run_load_model(a.checkpoint, m, &meta) : WT_EINVAL;
  if (rc == WT_OK) rc = s_generate(m, meta.tokenizer, &a);
  gpt_stage_destroy(&m);
  return rc == WT_OK ? CLI_OK : cli_fail("sample");
}
