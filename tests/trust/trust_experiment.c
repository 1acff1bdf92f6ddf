/* trust_experiment — one run of S x R tasklets of a tiny model over the in-process transport,
 * some of them lying (liar.h), and one JSON line of what came of it: the final loss, when and
 * how often each replica was flagged, whom the run's exclusion rule would exclude, and the
 * data-parallel bytes and time per sync. scripts/trust-experiments.sh runs it over lies,
 * aggregates and seeds for docs/trust.md. Built with the tests (it uses the test-only harness);
 * not a test itself. Set WT_LOG_LEVEL=error to silence the tasklets' warnings.
 *
 *   trust_experiment --lie scale --robust median --replicas 4 --liars 1 --seed 3 --steps 60 */
#include "common/config.h"
#include "model/trainer.h"
#include "tests/trust/liar.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct {
  char lie[WT_CONFIG_STR_MAX], robust[WT_CONFIG_STR_MAX], grad_codec[WT_CONFIG_STR_MAX];
  int stages, replicas, liars, liar_stage, steps, batch, diloco, from, trust_flags, channels,
      spot_every;
  long long seed;
} s_args;

#define F(x) offsetof(s_args, x)
static const wt_option s_options[] = {
    {"lie", WT_OPT_CHOICE, F(lie), 0, 0, "honest", "what the liars do",
     "honest|nan|scale|flip|noise|zero|stale|act|drift|moments"},
    {"robust", WT_OPT_CHOICE, F(robust), 0, 0, "none", "the sync's aggregate",
     "none|trimmed-mean|median|centered-clip"},
    {"grad-codec", WT_OPT_CHOICE, F(grad_codec), 0, 0, "none", "gradient codec",
     "none|fp16|bf16|int8|int4|sign|topk"},
    {"stages", WT_OPT_INT, F(stages), 1, 4, "1", "pipeline stages (a layer each past 2)", 0},
    {"replicas", WT_OPT_INT, F(replicas), 1, 8, "4", "replicas", 0},
    {"liars", WT_OPT_INT, F(liars), 0, 8, "1", "lying replicas (the last ones of liar-stage)", 0},
    {"liar-stage", WT_OPT_INT, F(liar_stage), 0, 3, "0", "the stage the liars serve", 0},
    {"steps", WT_OPT_INT, F(steps), 1, LR_MAX_STEPS, "60", "steps", 0},
    {"batch", WT_OPT_INT, F(batch), 1, 1024, "32", "global batch", 0},
    {"diloco", WT_OPT_INT, F(diloco), 0, 100, "0", "DiLoCo H (0: every step)", 0},
    {"from", WT_OPT_INT, F(from), 1, LR_MAX_STEPS, "1", "the first step the liars lie at", 0},
    {"trust-flags", WT_OPT_INT, F(trust_flags), 0, 1000, "5", "the run's exclusion threshold", 0},
    {"channels", WT_OPT_INT, F(channels), 8, 512, "32", "model width C (2 heads, 2 layers)", 0},
    {"spot-check-every", WT_OPT_INT, F(spot_every), 0, 1000, "0",
     "a spot check every N syncs (0: none)", 0},
    {"seed", WT_OPT_INT64, F(seed), 0, 1e9, "1", "seed of the weights and data", 0},
    {0}};

static parallel_tasklet_config s_config(const s_args *a, const data_set *data) {
  parallel_tasklet_config c = parallel_tasklet_config_default();
  c.run.stages = a->stages, c.run.replicas = a->replicas;
  snprintf(c.run.schedule, sizeof c.run.schedule, "1f1b");
  c.run.seq = 16, c.run.layers = WT_MAX(2, a->stages), c.run.heads = 2; /* V 64: the data's */
  c.run.channels = a->channels;
  c.run.batch = a->batch, c.run.micro_batches = 1, c.run.val_batches = 4, c.run.seed = a->seed;
  c.run.steps = a->steps;
  h_run_optim_default(&c.run);
  c.run.lr = 1e-2f;
  c.data = data;
  c.run.sync.diloco = a->diloco;
  snprintf(c.run.robust, sizeof c.run.robust, "%.15s", a->robust); /* choices: short */
  snprintf(c.run.sync.grad_codec, sizeof c.run.sync.grad_codec, "%.15s", a->grad_codec);
  c.run.spot_check_every = a->spot_every;
  return c;
}

/* A number for JSON: null when not finite. */
static const char *s_num(double v, char *buf) {
  snprintf(buf, 32, isfinite(v) ? "%.6g" : "null", v);
  return buf;
}

static void s_print(const s_args *a, const lr_run *h, int rc) {
  const int R = a->replicas, S = a->stages;
  parallel_run_config run = parallel_run_config_default();
  snprintf(run.robust, sizeof run.robust, "%s", a->robust);
  run.trust_flags = a->trust_flags;
  long first = 0;
  int liar_flagged = 0, honest_flagged = 0, honest_max = 0, liars_out = 0, honest_out = 0;
  for (int s = 0; s < S; s++)
    for (int r = 0; r < R; r++) {
      const int n = h->flagged[s][r], syncs = h->robust_syncs[s];
      const int out = parallel_run_config_excludes(&run, n, syncs);
      if (lr_is_liar(h, s, r) ||
          (h->lie == LIAR_ACT && s == h->liar_stage + 1 && r >= R - h->liars)) {
        liar_flagged += n, liars_out += out;
        if (h->first_flag[s][r] && (!first || h->first_flag[s][r] < first))
          first = h->first_flag[s][r];
      } else {
        honest_flagged += n, honest_out += out;
        honest_max = WT_MAX(honest_max, n);
      }
    }
  int spot_checks = 0, liar_spot_checks = 0, liar_spot_failed = 0, honest_spot_failed = 0;
  long first_spot = 0, spot_excluded_at = 0;
  int liars_spot_excluded = 0;
  double compute_s = 0;
  for (int s = 0; s < S; s++)
    for (int r = 0; r < R; r++) {
      spot_checks += h->spot_checks[s][r];
      if (!lr_is_liar(h, s, r)) {
        honest_spot_failed += h->spot_failed[s][r];
        continue;
      }
      liar_spot_failed += h->spot_failed[s][r];
      liar_spot_checks += h->spot_checks[s][r];
      const long f = h->first_spot_fail[s][r], second = h->spot_second_checker[s][r];
      if (f && (!first_spot || f < first_spot)) first_spot = f;
      if (second) {
        liars_spot_excluded++;
        if (!spot_excluded_at || second < spot_excluded_at) spot_excluded_at = second;
      }
    }
  for (int w = 0; w < R * S; w++) compute_s += h->res[w].compute_s;
  const parallel_tasklet_result *r0 = &h->res[0];
  char l1[32], l2[32];
  const int syncs = a->diloco ? (a->steps + a->diloco - 1) / a->diloco : a->steps;
  printf(
      "{\"lie\":\"%s\",\"robust\":\"%s\",\"codec\":\"%s\",\"stages\":%d,\"replicas\":%d,"
      "\"liars\":%d,\"seed\":%lld,\"steps\":%d,\"diloco\":%d,\"ok\":%s,\"final_loss\":%s,"
      "\"val_loss\":%s,\"syncs\":%d,\"liar_first_flag\":%ld,\"liar_flagged\":%d,"
      "\"honest_flagged\":%d,\"honest_flagged_max\":%d,\"liars_excluded\":%d,"
      "\"honest_excluded\":%d,\"bytes_data_per_sync\":%.0f,\"reduce_ms_per_sync\":%.3f,"
      "\"spot_check_every\":%d,\"spot_checks\":%d,\"liar_spot_checks\":%d,\"liar_spot_failed\":%d,"
      "\"liar_first_spot_fail\":%ld,\"liars_spot_excluded\":%d,\"spot_excluded_at\":%ld,"
      "\"honest_spot_failed\":%d,\"honest_spot_bound_use\":%.4f,\"compute_s\":%.4f,"
      "\"spot_s\":%.4f,\"seconds\":%.4f}\n",
      a->lie, a->robust, a->grad_codec, S, R, a->liars, a->seed, a->steps, a->diloco,
      rc == WT_OK ? "true" : "false", s_num(rc == WT_OK ? r0->last_loss : NAN, l1),
      s_num(rc == WT_OK ? r0->last_val_loss : NAN, l2), syncs, first, liar_flagged, honest_flagged,
      honest_max, liars_out, honest_out, (double)r0->bytes_data / syncs, 1e3 * r0->reduce_s / syncs,
      a->spot_every, spot_checks, liar_spot_checks, liar_spot_failed, first_spot,
      liars_spot_excluded, spot_excluded_at, honest_spot_failed, h->spot_honest_max_use, compute_s,
      h->spot_seconds, r0->seconds);
}

int main(int argc, char **argv) {
  s_args a;
  memset(&a, 0, sizeof a);
  int help = 0;
  if (wt_config_defaults(s_options, &a) != WT_OK ||
      wt_config_parse_args(s_options, &a, argc, argv, 1, NULL, 0, NULL, &help) != WT_OK) {
    fprintf(stderr, "trust_experiment: %s\n", wt_last_error());
    return 2;
  }
  liar_kind lie = LIAR_HONEST;
  if (liar_kind_parse(a.lie, &lie) != WT_OK || (lie == LIAR_ACT && a.stages < 2) ||
      a.liars > a.replicas || a.batch % a.replicas || a.liar_stage >= a.stages ||
      (lie == LIAR_ACT && a.liar_stage == a.stages - 1)) {
    fprintf(stderr,
            "trust_experiment: bad arguments (act needs a stage after the liars'; liars <= "
            "replicas; batch a multiple of replicas; liar-stage below stages) %s\n",
            wt_last_error());
    return 2;
  }
  data_synth_config sc = data_synth_default();
  sc.n_tokens = 50000;
  sc.seed = (uint64_t)a.seed;
  data_set *data = data_set_synthetic(&sc);
  static lr_run h;
  h.base = s_config(&a, data);
  h.lie = lie, h.liars = a.liars, h.liar_stage = a.liar_stage, h.from = a.from;
  int rc = lr_run_all(&h);
  s_print(&a, &h, rc);
  lr_free(&h);
  data_set_destroy(&data);
  return 0;
}
