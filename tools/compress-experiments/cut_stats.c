/* cut_stats — what an activation codec faces at a pipeline cut of the multi-process runtime
 * (docs/compression.md, "Why 4-bit activations break under DiLoCo").
 *
 * Two measurements, one JSON line:
 *  - the AC-SGD delta cache's hit rate on the runtime's sampler: replica 0's windows of `steps`
 *    global batches (workers × batch rows, drawn as --data-order global draws them) pass through
 *    an LRU cache of --cache-samples samples keyed as parallel/runtime/pipeline.c keys them (FNV-1a
 * of the window's tokens), as the sender's ACSGD_OVERFLOW_EVICT policy keeps them; a hit is a DELTA
 * message, a miss a FIRST one;
 *  - with --checkpoint (a stage directory holding layers [0, cut) of a run, e.g.
 *    RUN/stage-0): stage 0's output on eval_batches validation batches — each token row's RMS
 *    and range / RMS, the per-channel offset shared by all tokens against the part that varies,
 *    and the error of compress/acsgd.h's per-row quantiser at 4 and 8 bits relative to the
 *    whole activation and to its varying part; and the RMS of each of the stage's tensors. */
#include "tools/compress-experiments/experiments.h"

#include "common/common.h"
#include "compress/acsgd.h"
#include "model/checkpoint.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t s_window_id(const int *tokens,
                            int T) { /* parallel/runtime/pipeline.c's sample id */
  uint64_t h = 1469598103934665603ull;
  for (int t = 0; t < T; t++) h = (h ^ (uint32_t)tokens[t]) * 1099511628211ull;
  return h;
}

/* Replays the sends of replica 0 through an LRU cache; adds hit counts to j. */
static void s_cache_hits(const exp_config *cfg, const data_set *d, cJSON *j) {
  const int T = cfg->seq, B = cfg->batch;
  const size_t cap = (size_t)cfg->cache_samples;
  uint64_t *ids = wt_xcalloc(cap, sizeof *ids);
  long *last = wt_xcalloc(cap, sizeof *last);
  int *in = wt_xmalloc(sizeof(int) * B * T), *tg = wt_xmalloc(sizeof(int) * B * T);
  size_t used = 0;
  long sends = 0, hits = 0, age = 0;
  data_position pos;
  exp_config g = *cfg;
  snprintf(g.data_order, sizeof g.data_order, "global");
  exp_data_position_init(&g, 0, &pos);
  for (int step = 0; step < cfg->steps; step++) {
    exp_next_batch(&g, d, &pos, 0, in, tg);
    for (int b = 0; b < B; b++, sends++) {
      uint64_t id = s_window_id(in + (size_t)b * T, T);
      size_t k = 0, old = 0;
      while (k < used && ids[k] != id) k++;
      if (k < used) {
        hits++, age += step - last[k], last[k] = step;
        continue;
      }
      if (used < cap) {
        ids[used] = id, last[used++] = step;
        continue;
      }
      for (k = 1; k < used; k++)
        if (last[k] < last[old]) old = k;
      ids[old] = id, last[old] = step;
    }
  }
  cJSON_AddNumberToObject(j, "cache_samples", (double)cap);
  cJSON_AddNumberToObject(j, "sends", (double)sends);
  cJSON_AddNumberToObject(j, "delta_fraction", sends ? (double)hits / sends : 0);
  cJSON_AddNumberToObject(j, "mean_hit_age_steps", hits ? (double)age / hits : 0);
  free(ids), free(last), free(in), free(tg);
}

/* Sums over one (T, C) sample x: squared values, quantisation errors at 4 and 8 bits. */
static void s_quant_errors(const float *x, int T, int C, double err[2]) {
  float *q = wt_xmalloc(sizeof(float) * T * C);
  uint8_t *payload = wt_xmalloc(acsgd_payload_bytes(T, C, 8));
  for (int i = 0; i < 2; i++) {
    int bits = i ? 8 : 4;
    acsgd_quantize_rows(x, T, C, bits, payload);
    acsgd_dequantize_rows(payload, T, C, bits, q, 0);
    for (int k = 0; k < T * C; k++) err[i] += ((double)q[k] - x[k]) * ((double)q[k] - x[k]);
  }
  free(q), free(payload);
}

/* Activation statistics of stage 0 of the checkpoint; adds them to j. */
static int s_activations(const exp_config *cfg, const data_set *d, cJSON *j) {
  gpt_config gc;
  checkpoint_meta meta;
  WT_CHECK(checkpoint_read_config(cfg->checkpoint, &gc, &meta));
  const int B = cfg->batch, T = gc.max_seq, C = gc.channels, R = B * T;
  if (cfg->cut < 1 || cfg->cut >= gc.n_layer)
    return wt_fail(WT_EINVAL, "--cut %d must be inside the checkpoint's %d layers", cfg->cut,
                   gc.n_layer);
  gpt_stage *s = gpt_stage_new(&gc, 0, cfg->cut, B, T);
  if (!s) return WT_EINVAL;
  int rc = checkpoint_load(cfg->checkpoint, s, NULL, &meta);
  float *a = wt_xmalloc(sizeof(float) * R * C); // (B, T, C)
  int *in = wt_xmalloc(sizeof(int) * R), *tg = wt_xmalloc(sizeof(int) * R);
  double *mean = wt_xmalloc(sizeof(double) * C);
  double sq = 0, var = 0, offset = 0, range = 0, rms = 0, err[2] = {0, 0};
  for (int i = 0; i < cfg->eval_batches && rc == WT_OK; i++) {
    data_set_val_batch(d, (size_t)i * B, B, T, in, tg);
    rc = gpt_stage_forward(s, in, NULL, NULL, B, T, a);
    for (int c = 0; c < C; c++) mean[c] = 0;
    for (int r = 0; r < R; r++) {
      double lo = INFINITY, hi = -INFINITY, row = 0;
      for (int c = 0; c < C; c++) {
        double v = a[(size_t)r * C + c];
        lo = fmin(lo, v), hi = fmax(hi, v), row += v * v, mean[c] += v / R;
      }
      sq += row, rms += sqrt(row / C), range += (hi - lo) / sqrt(row / C);
    }
    for (int k = 0; k < R * C; k++) var += (a[k] - mean[k % C]) * (a[k] - mean[k % C]);
    for (int c = 0; c < C; c++) offset += mean[c] * mean[c];
    for (int b = 0; b < B; b++) s_quant_errors(a + (size_t)b * T * C, T, C, err);
  }
  const double rows = (double)R * cfg->eval_batches;
  cJSON_AddNumberToObject(j, "checkpoint_step", (double)meta.step);
  cJSON *norms = cJSON_AddObjectToObject(j, "tensor_rms"); // how far the weights have grown
  int nt;
  size_t np;
  const gpt_tensor_info *ti = gpt_stage_tensors(s, &nt);
  const float *p = gpt_stage_params(s, &np);
  for (int t = 0; t < nt; t++) {
    double ss = 0;
    for (size_t k = 0; k < ti[t].numel; k++)
      ss += (double)p[ti[t].offset + k] * p[ti[t].offset + k];
    cJSON_AddNumberToObject(norms, ti[t].name, sqrt(ss / (double)ti[t].numel));
  }
  cJSON_AddNumberToObject(j, "row_rms", rms / rows);
  cJSON_AddNumberToObject(j, "row_range_over_rms", range / rows);
  cJSON_AddNumberToObject(j, "channel_offset_rms", sqrt(offset / ((double)C * cfg->eval_batches)));
  cJSON_AddNumberToObject(j, "varying_rms", sqrt(var / (rows * C)));
  cJSON_AddNumberToObject(j, "rel_err_4bit", sqrt(err[0] / sq));
  cJSON_AddNumberToObject(j, "rel_err_8bit", sqrt(err[1] / sq));
  cJSON_AddNumberToObject(j, "rel_err_4bit_of_varying", sqrt(err[0] / var));
  free(a), free(in), free(tg), free(mean);
  gpt_stage_destroy(&s);
  return rc;
}

int exp_run_cut_stats(const exp_config *cfg) {
  data_set *d = exp_data_open(cfg);
  if (!d) return WT_EINVAL;
  cJSON *j = exp_result_new(cfg);
  s_cache_hits(cfg, d, j);
  int rc = cfg->checkpoint[0] ? s_activations(cfg, d, j) : WT_OK;
  if (rc == WT_OK)
    exp_print(j);
  else
    cJSON_Delete(j);
  data_set_destroy(&d);
  return rc;
}
