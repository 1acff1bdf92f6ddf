/* tasklet_state — a stage's training state as one blob in memory (tasklet.h's hand-over): what
 * a checkpoint holds, without a file, so peerd can move a stage to another process over its data
 * links; in a DiLoCo run the outer state too, so a replacement replica can start from a live
 * one's. */
#include "parallel/runtime/tasklet_internal.h"

#include "common/bytes.h" /* defines: wt_put_le32/64, wt_get_le32/64 */
#include "common/common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_MAGIC "WTSTATE1"
#define S_HEADER 64

/* Header fields: magic (8), stage, first_layer, last_layer, optimizer states (4 each), steps done,
 * optimizer step count, parameters (8 each), data position bytes (4), outer steps done (4), the
 * DiLoCo record's bytes (8; 0 without DiLoCo). The record follows the optimizer states. */
typedef struct {
  int stage, first, last, n_states;
  long step, opt_steps, outer_steps;
  size_t n_params, pos_bytes, outer_bytes;
} s_header;

static int s_parse(const uint8_t *b, size_t bytes, s_header *h) {
  if (bytes < S_HEADER || memcmp(b, S_MAGIC, 8))
    return wt_fail(WT_ECORRUPT, "state blob of %zu bytes has no %s header", bytes, S_MAGIC);
  h->stage = (int)wt_get_le32(b + 8), h->first = (int)wt_get_le32(b + 12);
  h->last = (int)wt_get_le32(b + 16), h->n_states = (int)wt_get_le32(b + 20);
  h->step = (long)wt_get_le64(b + 24), h->opt_steps = (long)wt_get_le64(b + 32);
  h->n_params = (size_t)wt_get_le64(b + 40), h->pos_bytes = wt_get_le32(b + 48);
  h->outer_steps = (long)wt_get_le32(b + 52), h->outer_bytes = (size_t)wt_get_le64(b + 56);
  int sane = h->stage >= 0 && h->first >= 0 && h->last > h->first && h->n_states >= 0 &&
             h->n_states <= 8 && h->step >= 0 && h->opt_steps >= 0 &&
             h->n_params < ((size_t)1 << 40) && h->pos_bytes == sizeof(data_position) &&
             h->outer_bytes < ((size_t)1 << 42) && h->outer_steps <= h->step;
  if (!sane || bytes != S_HEADER + h->pos_bytes +
                            sizeof(float) * h->n_params * (1 + h->n_states) + h->outer_bytes)
    return wt_fail(WT_ECORRUPT, "state blob of %zu bytes: its header does not match its size",
                   bytes);
  return WT_OK;
}

int parallel_tasklet_state_info(const void *blob, size_t bytes, int *stage, long *step) {
  s_header h;
  WT_CHECK(s_parse(blob, bytes, &h));
  *stage = h.stage, *step = h.step;
  return WT_OK;
}

int parallel_tasklet_state_outer(const void *blob, size_t bytes, long *outer) {
  s_header h;
  WT_CHECK(s_parse(blob, bytes, &h));
  *outer = h.outer_bytes ? h.outer_steps : -1;
  return WT_OK;
}

/* The DiLoCo record (diloco_save) in a malloc'd buffer; none without DiLoCo. */
static int s_outer_record(parallel_tasklet *k, char **rec, size_t *len) {
  *rec = NULL, *len = 0;
  if (!k->outer) return WT_OK;
  FILE *m = open_memstream(rec, len);
  if (!m) return wt_fail(WT_EIO, "cannot buffer the DiLoCo state");
  int rc = diloco_save(k->outer, m);
  if (fclose(m) != 0 && rc == WT_OK) rc = wt_fail(WT_EIO, "cannot buffer the DiLoCo state");
  if (rc != WT_OK) free(*rec), *rec = NULL;
  return rc;
}

int parallel_tasklet_state_save(parallel_tasklet *k, void **out, size_t *out_bytes) {
  gpt_stage *s = trainer_model(k->t);
  optim *o = trainer_optim(k->t);
  size_t n, m;
  const float *params = gpt_stage_params_host(s, &n);
  int ns = o ? optim_num_states(o) : 0;
  for (int i = 0; i < ns; i++)
    if (optim_state_host(o, i, &m), m != n)
      return wt_fail(WT_EINVAL, "optimizer state %d holds %zu values for %zu parameters", i, m, n);
  char *rec = NULL;
  size_t rec_len = 0;
  WT_CHECK(s_outer_record(k, &rec, &rec_len));
  const size_t floats = sizeof(float) * n * (size_t)(1 + ns);
  size_t bytes = S_HEADER + sizeof(data_position) + floats + rec_len;
  uint8_t *b = wt_xcalloc(bytes, 1);
  memcpy(b, S_MAGIC, 8);
  wt_put_le32(b + 8, (uint32_t)k->cfg.stage);
  wt_put_le32(b + 12, (uint32_t)gpt_stage_first(s));
  wt_put_le32(b + 16, (uint32_t)gpt_stage_last(s));
  wt_put_le32(b + 20, (uint32_t)ns);
  wt_put_le64(b + 24, (uint64_t)trainer_steps_done(k->t));
  wt_put_le64(b + 32, (uint64_t)(o ? optim_step_count(o) : 0));
  wt_put_le64(b + 40, (uint64_t)n);
  wt_put_le32(b + 48, (uint32_t)sizeof(data_position));
  wt_put_le32(b + 52, (uint32_t)(k->outer ? diloco_step_count(k->outer) : 0));
  wt_put_le64(b + 56, (uint64_t)rec_len);
  data_position pos = trainer_data_position(k->t);
  uint8_t *p = b + S_HEADER;
  memcpy(p, &pos, sizeof pos);
  p += sizeof pos;
  memcpy(p, params, sizeof(float) * n);
  for (int i = 0; i < ns; i++)
    memcpy(p + sizeof(float) * n * (size_t)(i + 1), optim_state_host(o, i, NULL),
           sizeof(float) * n);
  if (rec_len) memcpy(p + floats, rec, rec_len);
  free(rec);
  *out = b, *out_bytes = bytes;
  return WT_OK;
}

/* Reads the DiLoCo record into k->outer. From another replica (a replacement), only θ_outer, the
 * momentum and the outer step count are kept: the residuals start at zero, and the inner
 * parameters start from θ_outer. */
static int s_outer_load(parallel_tasklet *k, const uint8_t *rec, size_t len, int replica) {
  if (!k->outer != !len)
    return wt_fail(WT_EMISMATCH, "the state handed over %s a DiLoCo record; this run %s DiLoCo",
                   len ? "holds" : "lacks", k->outer ? "uses" : "does not use");
  if (!len) return WT_OK;
  FILE *m = fmemopen((void *)rec, len, "rb");
  if (!m) return wt_fail(WT_EIO, "cannot read the DiLoCo record");
  int rc = diloco_load(k->outer, m);
  if (rc == WT_OK && ftell(m) != (long)len)
    rc = wt_fail(WT_ECORRUPT, "the DiLoCo record has %ld stray bytes", (long)len - ftell(m));
  fclose(m);
  if (rc != WT_OK || !replica) return rc;
  size_t n, nm;
  float *params = gpt_stage_params_host(trainer_model(k->t), &n);
  const float *outer = diloco_theta_outer(k->outer, NULL);
  float *mom = diloco_momentum(k->outer, &nm);
  float *keep = wt_xmalloc(sizeof(float) * (nm + 1));
  memcpy(keep, mom, sizeof(float) * nm);
  long steps = diloco_step_count(k->outer);
  memcpy(params, outer, sizeof(float) * n);
  diloco_init(k->outer, params); /* θ_outer again; clears momentum, residuals, count */
  memcpy(diloco_momentum(k->outer, NULL), keep, sizeof(float) * nm);
  diloco_set_step_count(k->outer, steps);
  free(keep);
  gpt_stage_params_upload(trainer_model(k->t));
  return WT_OK;
}

int parallel_tasklet_state_load(parallel_tasklet *k, const void *blob, size_t bytes) {
  s_header h;
  WT_CHECK(s_parse(blob, bytes, &h));
  gpt_stage *s = trainer_model(k->t);
  optim *o = trainer_optim(k->t);
  size_t n;
  float *params = gpt_stage_params_host(s, &n);
  int ns = o ? optim_num_states(o) : 0;
  if (h.stage != k->cfg.stage || h.first != gpt_stage_first(s) || h.last != gpt_stage_last(s) ||
      h.n_params != n || h.n_states != ns)
    return wt_fail(WT_EMISMATCH,
                   "the state handed over is stage %d, layers [%d, %d), %zu parameters, %d "
                   "optimizer states; this tasklet is stage %d, layers [%d, %d), %zu, %d",
                   h.stage, h.first, h.last, h.n_params, h.n_states, k->cfg.stage,
                   gpt_stage_first(s), gpt_stage_last(s), n, ns);
  const uint8_t *p = (const uint8_t *)blob + S_HEADER;
  data_position pos;
  memcpy(&pos, p, sizeof pos);
  p += sizeof pos;
  memcpy(params, p, sizeof(float) * n);
  gpt_stage_params_upload(s);
  for (int i = 0; i < ns; i++) {
    memcpy(optim_state_host(o, i, NULL), p + sizeof(float) * n * (size_t)(i + 1),
           sizeof(float) * n);
    optim_state_upload(o, i);
  }
  if (o) optim_set_step_count(o, h.opt_steps);
  trainer_set_progress(k->t, h.step, &pos);
  return s_outer_load(k, p + sizeof(float) * n * (size_t)(1 + ns), h.outer_bytes,
                      k->cfg.state_in_replica);
}

int parallel_tasklet_state_advance(parallel_tasklet *k, long step) {
  const long at = trainer_steps_done(k->t);
  if (step <= at) return WT_OK;
  /* the outer steps before `step` must be in the state (one at `step` itself may follow) */
  const long H = k->cfg.run.sync.diloco, done = k->outer ? diloco_step_count(k->outer) : -1;
  if (!k->outer || done < (step - 1) / H)
    return wt_fail(WT_EINVAL,
                   "cannot move stage %d from step %ld to step %ld: %s", k->cfg.stage, at, step,
                   k->outer ? "an outer step it has not taken lies between" : "the run has no DiLoCo");
  const trainer_config *tc = trainer_get_config(k->t);
  const size_t cells = (size_t)tc->batch * (size_t)tc->model.max_seq;
  int *in = wt_xmalloc(sizeof(int) * cells), *tg = wt_xmalloc(sizeof(int) * cells);
  data_position pos = trainer_data_position(k->t);
  for (long s = at; s < step; s++) /* the batch trainer_step would have drawn */
    data_set_next_batch(trainer_data(k->t), &pos, tc->batch, tc->model.max_seq, in, tg);
  free(in), free(tg);
  trainer_set_progress(k->t, step, &pos);
  WT_INFO("tasklet stage %d replica %d: starts at step %ld from its state of step %ld (the "
          "batches of %ld steps skipped, none trained again)",
          k->cfg.stage, k->cfg.replica, step, at, step - at);
  return WT_OK;
}
