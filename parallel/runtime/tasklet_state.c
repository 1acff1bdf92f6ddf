/* tasklet_state — a stage's training state as one blob in memory (tasklet.h's hand-over): what
 * a checkpoint holds, without a file, so peerd can move a stage to another process over its data
 * links. */
#include "parallel/runtime/tasklet_internal.h"

#include "common/bytes.h" /* defines: wt_put_le32/64, wt_get_le32/64 */
#include "common/common.h"

#include <stdlib.h>
#include <string.h>

#define S_MAGIC "WTSTATE1"
#define S_HEADER 64

/* Header fields: magic (8), stage, first_layer, last_layer, optimizer states (4 each), steps done,
 * optimizer step count, parameters (8 each), data position bytes (4), zero padding to 64. */
typedef struct {
  int stage, first, last, n_states;
  long step, opt_steps;
  size_t n_params, pos_bytes;
} s_header;

static int s_parse(const uint8_t *b, size_t bytes, s_header *h) {
  if (bytes < S_HEADER || memcmp(b, S_MAGIC, 8))
    return wt_fail(WT_ECORRUPT, "state blob of %zu bytes has no %s header", bytes, S_MAGIC);
  h->stage = (int)wt_get_le32(b + 8), h->first = (int)wt_get_le32(b + 12);
  h->last = (int)wt_get_le32(b + 16), h->n_states = (int)wt_get_le32(b + 20);
  h->step = (long)wt_get_le64(b + 24), h->opt_steps = (long)wt_get_le64(b + 32);
  h->n_params = (size_t)wt_get_le64(b + 40), h->pos_bytes = wt_get_le32(b + 48);
  int sane = h->stage >= 0 && h->first >= 0 && h->last > h->first && h->n_states >= 0 &&
             h->n_states <= 8 && h->step >= 0 && h->opt_steps >= 0 &&
             h->n_params < ((size_t)1 << 40) && h->pos_bytes == sizeof(data_position);
  if (!sane || bytes != S_HEADER + h->pos_bytes + sizeof(float) * h->n_params * (1 + h->n_states))
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

int parallel_tasklet_state_save(parallel_tasklet *k, void **out, size_t *out_bytes) {
  gpt_stage *s = trainer_model(k->t);
  optim *o = trainer_optim(k->t);
  size_t n, m;
  const float *params = gpt_stage_params_host(s, &n);
  int ns = o ? optim_num_states(o) : 0;
  for (int i = 0; i < ns; i++)
    if (optim_state_host(o, i, &m), m != n)
      return wt_fail(WT_EINVAL, "optimizer state %d holds %zu values for %zu parameters", i, m, n);
  size_t bytes = S_HEADER + sizeof(data_position) + sizeof(float) * n * (size_t)(1 + ns);
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
  data_position pos = trainer_data_position(k->t);
  uint8_t *p = b + S_HEADER;
  memcpy(p, &pos, sizeof pos);
  p += sizeof pos;
  memcpy(p, params, sizeof(float) * n);
  for (int i = 0; i < ns; i++)
    memcpy(p + sizeof(float) * n * (size_t)(i + 1), optim_state_host(o, i, NULL),
           sizeof(float) * n);
  *out = b, *out_bytes = bytes;
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
  return WT_OK;
}
