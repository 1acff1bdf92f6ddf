/* cmd_sample — `wantrain sample`: text from a checkpoint, one token at a time, each drawn from
 * the softmax of the last position's logits at a temperature (0 = always the likeliest).
 * A checkpoint trained on GPT-2 ids reads and writes text through --tokenizer DIR's BPE; the
 * bytes of its tokens are printed as UTF-8, a character split across tokens once it is whole. */
#include "tools/wantrain/cli.h"

#include "model/checkpoint.h"
#include "parallel/runtime/tasklet.h" /* a multi-stage run directory as one model */
#include "common/common.h"
#include "model/data.h"
#include "kernels/kernels.h"
#include "common/rng.h"
#include "tokenizer/bpe.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
  char checkpoint[WT_CONFIG_STR_MAX];
  char prompt[WT_CONFIG_STR_MAX];
  char tokenizer[WT_CONFIG_STR_MAX];
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
    {"tokenizer", WT_OPT_STRING, F(tokenizer), 0, 0, "",
     "for a GPT-2-vocabulary checkpoint: directory with vocab.json + merges.txt, to encode the "
     "prompt and print text (without it, ids print as <id>)",
     0},
    {"tokens", WT_OPT_INT, F(tokens), 0, 1e6, "200", "tokens to generate", 0},
    {"temperature", WT_OPT_FLOAT, F(temperature), 0, 100, "1.0", "softmax temperature (0 = greedy)",
     0},
    {"seed", WT_OPT_INT64, F(seed), 0, 9e15, "1", "sampling seed", 0},
    CLI_DEVICE_OPTIONS(sample_args, ),
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

/* Prints tokens as text: one character per token for bytes and synthetic, the BPE's bytes for
 * GPT-2 ids (held back while a UTF-8 character is incomplete, invalid bytes as U+FFFD). */
typedef struct {
  data_tokenizer tok;
  const tokenizer_bpe *bpe; /* NULL: GPT-2 ids print as <id> */
  char pending[64];         /* bytes of an unfinished character */
  size_t n_pending;
} s_printer;

static void s_print(s_printer *p, const int *ids, int n) {
  char buf[3 * sizeof p->pending];
  for (int i = 0; i < n; i++) {
    size_t len, used;
    const char *b = p->bpe ? tokenizer_bpe_token_bytes(p->bpe, ids[i], &len) : NULL;
    if (!b) {
      data_token_text(p->tok, ids[i], buf, sizeof buf);
      fputs(buf, stdout);
      continue;
    }
    while (len > 0) {
      size_t take = WT_MIN(len, sizeof p->pending - p->n_pending);
      memcpy(p->pending + p->n_pending, b, take);
      p->n_pending += take, b += take, len -= take;
      fwrite(buf, 1, tokenizer_utf8_repair(p->pending, p->n_pending, 0, buf, &used), stdout);
      memmove(p->pending, p->pending + used, p->n_pending - used);
      p->n_pending -= used;
    }
  }
  fflush(stdout);
}

/* Prints what is still held back (an incomplete character, as U+FFFD). */
static void s_print_end(s_printer *p) {
  char buf[3 * sizeof p->pending];
  fwrite(buf, 1, tokenizer_utf8_repair(p->pending, p->n_pending, 1, buf, NULL), stdout);
  p->n_pending = 0;
}

/* The prompt's ids into ids (at most max): the BPE's when there is one, else data's tokens. */
static int s_encode(const s_printer *p, tokenizer_bpe *bpe, const char *text, int *ids, int max,
                    int *n) {
  if (!bpe) return data_text_encode(p->tok, text, ids, max, n);
  tokenizer_ids out = {0};
  tokenizer_bpe_encode(bpe, text, strlen(text), &out);
  int count = (int)WT_MIN(out.n, (size_t)max);
  for (int i = 0; i < count; i++) ids[i] = out.ids[out.n - (size_t)count + i]; /* the last max */
  tokenizer_ids_free(&out);
  *n = count;
  return WT_OK;
}

static int s_generate(gpt_stage *m, data_tokenizer tok, tokenizer_bpe *bpe, const sample_args *a) {
  const gpt_config *c = gpt_stage_config(m);
  const int T = c->max_seq, V = c->vocab_size, cap = 4096 + a->tokens;
  int *ids = wt_xmalloc((size_t)cap * sizeof(int)), *dummy = wt_xcalloc((size_t)T, sizeof(int));
  s_printer p = {.tok = tok, .bpe = bpe};
  int n = 0, rc = s_encode(&p, bpe, a->prompt, ids, 4096, &n);
  if (rc != WT_OK) n = 0;
  if (rc == WT_OK && n == 0) /* a start token: newline for bytes, end-of-text for GPT-2 */
    ids[n++] = tok == DATA_TOKENIZER_BYTES ? '\n' : tok == DATA_TOKENIZER_GPT2 ? 50256 : 0;
  if (rc == WT_OK) s_print(&p, ids, n);
  wt_rng rng;
  wt_rng_seed(&rng, (uint64_t)a->seed);
  for (int i = 0; i < a->tokens && rc == WT_OK; i++) {
    int ctx = WT_MIN(n, T); /* the last T tokens are all the model can see */
    rc = gpt_stage_forward(m, ids + n - ctx, NULL, dummy, 1, ctx, NULL);
    if (rc != WT_OK) break;
    ids[n] = s_draw(gpt_stage_logits(m) + (size_t)(ctx - 1) * V, V, a->temperature, &rng);
    s_print(&p, ids + n, 1);
    n++;
  }
  s_print_end(&p);
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
  tokenizer_bpe *bpe = NULL;
  if (a.tokenizer[0] && meta.tokenizer != DATA_TOKENIZER_GPT2) {
    fprintf(stderr,
            "wantrain sample: error: --tokenizer is for checkpoints trained on GPT-2 ids "
            "(llm.c .bin shards); this one reads %s, so leave --tokenizer out\n",
            meta.tokenizer == DATA_TOKENIZER_BYTES ? "bytes" : "synthetic tokens");
    return CLI_USAGE;
  }
  if (a.tokenizer[0] && !(bpe = tokenizer_bpe_new(a.tokenizer))) return cli_fail("sample");
  if (bpe && tokenizer_bpe_vocab_size(bpe) > cfg.vocab_size) {
    wt_fail(WT_EMISMATCH, "tokenizer %s has %d tokens but the checkpoint's model has %d",
            a.tokenizer, tokenizer_bpe_vocab_size(bpe), cfg.vocab_size);
    tokenizer_bpe_destroy(&bpe);
    return cli_fail("sample");
  }
  gpt_stage *m = gpt_stage_new_on(&cfg, 0, cfg.n_layer, 1, cfg.max_seq, ops);
  rc = m ? parallel_run_load_model(a.checkpoint, m, &meta) : WT_EINVAL;
  if (rc == WT_OK) rc = s_generate(m, meta.tokenizer, bpe, &a);
  gpt_stage_destroy(&m);
  tokenizer_bpe_destroy(&bpe);
  return rc == WT_OK ? CLI_OK : cli_fail("sample");
}
