/* compress-experiments — trains a small GPT under one compression setting (gradient codecs in
 * synchronous data parallelism, DiLoCo, or AC-SGD activation compression at a pipeline cut) and
 * prints one JSON result line. scripts/run_compression_experiments.sh sweeps the settings;
 * docs/compression.md holds the tables. */
#include "tools/compress-experiments/experiments.h"

#include "common/common.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define F(field) offsetof(exp_config, field)
const wt_option exp_options[] = {
    {"experiment", WT_OPT_CHOICE, F(experiment), 0, 0, "dp", "what to run",
     "dp|diloco|acsgd|cut-stats"},
    {"data", WT_OPT_STRING, F(data), 0, 0, "synthetic",
     "corpus: a text file (bytes) or 'synthetic' (the built-in Markov corpus)", NULL},
    {"steps", WT_OPT_INT, F(steps), 1, 1e7, "200",
     "dp: optimizer steps; diloco: inner steps per worker (tokens match dp)", NULL},
    {"workers", WT_OPT_INT, F(workers), 1, 64, "4", "data-parallel workers (threads)", NULL},
    {"layers", WT_OPT_INT, F(layers), 1, 64, "2", "transformer blocks L", NULL},
    {"channels", WT_OPT_INT, F(channels), 8, 4096, "64", "model width C", NULL},
    {"heads", WT_OPT_INT, F(heads), 1, 64, "4", "attention heads (divides C)", NULL},
    {"seq", WT_OPT_INT, F(seq), 2, 4096, "64", "sequence length T", NULL},
    {"batch", WT_OPT_INT, F(batch), 1, 4096, "4", "sequences per worker per step", NULL},
    {"codec", WT_OPT_CHOICE, F(codec), 0, 0, "none",
     "gradient (dp) or pseudo-gradient (diloco) codec; int8 = blocks of 64, int8-tensor = one "
     "scale per ring chunk, topk = top 1%",
     "none|fp16|bf16|int8|int8-tensor|int4|topk|sign"},
    {"ef", WT_OPT_FLAG, F(ef), 0, 1, "0", "error feedback around the codec", NULL},
    {"optimizer", WT_OPT_CHOICE, F(optimizer), 0, 0, "adamw", "inner optimizer", "adamw|sgd"},
    {"lr", WT_OPT_FLOAT, F(lr), 0, 100, "0",
     "peak lr; 0 = 3e-3 for AdamW, 0.3 for SGD (tuned: docs/compression.md)", NULL},
    {"momentum", WT_OPT_FLOAT, F(momentum), 0, 0.999, "0.9", "SGD momentum", NULL},
    {"local-momentum", WT_OPT_FLAG, F(local_momentum), 0, 1, "0",
     "dp with sgd: each worker keeps its own momentum and sends (compresses) it instead of the "
     "gradient; the averaged momentum is applied as plain SGD (DGC's momentum correction)",
     NULL},
    {"clip", WT_OPT_FLOAT, F(clip), 0, 1e6, "1", "global gradient-norm clip (0 = off)", NULL},
    {"warmup", WT_OPT_INT, F(warmup), 0, 1e6, "20", "linear warmup steps", NULL},
    {"H", WT_OPT_INT, F(H), 1, 1e6, "10", "diloco: inner steps between synchronisations", NULL},
    {"outer-lr", WT_OPT_FLOAT, F(outer_lr), 0, 10, "0.7",
     "diloco: outer lr (1 with momentum 0 = plain averaging)", NULL},
    {"outer-momentum", WT_OPT_FLOAT, F(outer_momentum), 0, 0.999, "0.9",
     "diloco: outer Nesterov momentum", NULL},
    {"fragments", WT_OPT_INT, F(fragments), 1, 1e6, "1",
     "diloco: streaming DiLoCo; contiguous parameter fragments, fragment f synchronised at "
     "steps where step % H == f*H/fragments (1 = all at once)",
     NULL},
    {"overlap", WT_OPT_INT, F(overlap), 0, 1e6, "0",
     "diloco: inner steps a sync's averaged result takes to arrive (all-reduce overlapped "
     "with compute); must be below H",
     NULL},
    {"merge-alpha", WT_OPT_FLOAT, F(merge_alpha), 0, 1, "0.5",
     "diloco with --overlap: on arrival theta = alpha*theta_local + (1-alpha)*theta_outer", NULL},
    {"eval-every", WT_OPT_INT, F(eval_every), 0, 1e7, "0",
     "dp, diloco: validation loss every N steps into the JSON's val_curve (diloco: of the "
     "replicas' mean); 0 = off",
     NULL},
    {"data-order", WT_OPT_CHOICE, F(data_order), 0, 0, "worker",
     "dp, diloco: worker = each worker its own stream of windows; global = as `wantrain "
     "launch` draws them (each worker its slice of one global batch), so both give the same "
     "losses",
     "worker|global"},
    {"acsgd", WT_OPT_CHOICE, F(acsgd), 0, 0, "delta", "acsgd: activation path across the cut",
     "none|direct|delta"},
    {"bits", WT_OPT_INT, F(bits), 2, 8, "4", "acsgd: bits per value (2, 4 or 8)", NULL},
    {"grad-bits", WT_OPT_INT, F(grad_bits), 2, 8, "8",
     "acsgd: bits of the activation gradient sent back (2, 4 or 8; direct quantization)", NULL},
    {"cut", WT_OPT_INT, F(cut), 1, 63, "1", "acsgd: stage 0 = layers [0,cut), 1 = [cut,L)", NULL},
    {"subset", WT_OPT_INT, F(subset), 1, 1e6, "64", "acsgd: training samples (windows)", NULL},
    {"epochs", WT_OPT_INT, F(epochs), 1, 1e5, "20", "acsgd: passes over the subset", NULL},
    {"cache-path", WT_OPT_STRING, F(cache_path), 0, 0, "",
     "acsgd: keep the activation caches in mmapped files PATH.send / PATH.recv", NULL},
    {"checkpoint", WT_OPT_STRING, F(checkpoint), 0, 0, "",
     "cut-stats: a run's stage directory (RUN/stage-0) whose activations at --cut to measure",
     NULL},
    {"cache-samples", WT_OPT_INT, F(cache_samples), 1, 1e7, "4096",
     "cut-stats: the delta cache's bound (the runtime's default), samples", NULL},
    {"eval-batches", WT_OPT_INT, F(eval_batches), 1, 1e5, "8",
     "validation batches (of `batch` sequences) for the final loss", NULL},
    {"seed", WT_OPT_INT64, F(seed), 0, 9.2e18, "1", "weights, data order, codecs", NULL},
    {"threads", WT_OPT_INT, F(threads), 1, 256, "1",
     "OpenMP threads for the model's kernels (results are bitwise reproducible per count; 1 "
     "is fastest for this tiny model on a shared machine)",
     NULL},
    {"config", WT_OPT_STRING, F(config), 0, 0, "", "JSON file of options (flags override it)",
     NULL},
    {0}};
#undef F

static const char s_usage[] =
    "usage: compress-experiments [--experiment dp|diloco|acsgd] [options]\n"
    "Trains a small GPT under one compression setting and prints one JSON result line.\n";

int main(int argc, char **argv) {
  wt_program_init(argv); /* OMP_WAIT_POLICY=PASSIVE unless the user chose */
  exp_config cfg;
  int help = 0;
  if (wt_config_defaults(exp_options, &cfg) != WT_OK ||
      wt_config_parse_args(exp_options, &cfg, argc, argv, 1, NULL, 0, NULL, &help) != WT_OK) {
    fprintf(stderr, "compress-experiments: %s (see --help)\n", wt_last_error());
    return 2;
  }
  if (help) {
    wt_config_print_help(stdout, s_usage, exp_options);
    return 0;
  }
  exp_threads_apply(&cfg);
  int rc;
  if (!strcmp(cfg.experiment, "dp"))
    rc = exp_run_dp(&cfg);
  else if (!strcmp(cfg.experiment, "diloco"))
    rc = exp_run_diloco(&cfg);
  else if (!strcmp(cfg.experiment, "acsgd"))
    rc = exp_run_acsgd(&cfg);
  else
    rc = exp_run_cut_stats(&cfg);
  if (rc != WT_OK) {
    fprintf(stderr, "compress-experiments: %s\n", wt_last_error());
    return 1;
  }
  return 0;
}
