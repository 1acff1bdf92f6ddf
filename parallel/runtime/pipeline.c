/* pipeline — runs one stage's GPipe / 1F1B action list: passes on the gpt_stage, each
 * micro-batch's forward in its own activation slot, activations and gradients across the cuts
 * (raw floats or AC-SGD messages); a forward is recomputed only when fewer slots than
 * micro-batches in flight were allowed (pipeline.h).
 *
 * On a device the passes' host copies run on the back end's copy stream
 * (gpt_stage_forward_async): a pass returns once its kernels and copies are queued, and the
 * stage waits for the copies (s_copy_wait) only where the host touches their buffers — before a
 * send reads act_out or gin, before a receive overwrites gout that a backward may still be
 * uploading, and at the end of a step. */
#include "parallel/runtime/pipeline.h"

#include "common/common.h"
#include "compress/acsgd.h"
#include "kernels/kernels.h" /* defines: the stage's back end, its host buffers and copies */

#include <stdlib.h>
#include <string.h>

/* Pipeline tags (user tags of the pipeline communicator): micro-batch j's activation 2j, its
 * gradient 2j + 1, the tied embedding's gradient S_TAG_TIED. */
#define S_TAG_TIED (1 << 22)
#define S_TAG_EVAL (S_TAG_TIED + 1) /* + j: evaluation micro-batch j's activation */
#define S_GRAD_BITS 8

struct parallel_pipeline {
  parallel_pipeline_config cfg;
  gpt_stage *s;
  const kernels_ops *ops; /* the stage's back end: its host_alloc makes the buffers below */
  parallel_comm *pipe;
  int S, me, first, last;
  size_t TC, mb_floats; /* T·C, rows·T·C */
  int bits, delta;      /* activation codec: bits 0 = none */
  /* Host buffers (page-locked on a GPU: the stage copies them to and from the device). */
  float *act_in;     /* (m, rows, T, C) inputs received, stages > 0 */
  float *act_out;    /* (rows, T, C) */
  float *gout, *gin; /* (rows, T, C) gradient from the next stage / to the previous */
  float *tied;       /* (V, C) on a device: the tied wte gradient's host copy, or NULL */
  float *losses;     /* (m) last stage */
  uint64_t *ids;     /* (m·rows) AC-SGD sample ids */
  uint8_t *msg;
  size_t msg_cap;
  acsgd_sender *snd;   /* cut to the next stage */
  acsgd_receiver *rcv; /* cut from the previous stage */
  int slots;           /* activation slots of the stage (pipeline.h) */
  int slots_peak;      /* micro-batches in flight at most: holder's capacity */
  int *slot_of;        /* (m) slot holding micro-batch j's forward, or -1 */
  int *holder;         /* (slots) micro-batch a slot holds, or -1 */
  long recomputes;     /* forwards run again for a backward */
  double compute_s;
  int copies_pending; /* a pass's copies may still be running (s_copy_wait) */

  parallel_site *site; /* or NULL: the passes run on the site's ranks (pipeline.h) */
  int keep_j;          /* parallel_pipeline_keep_sent: the micro-batch to copy, -1: none */
  float *keep_to;
};

/* Waits for the copies of the passes queued so far (nothing to wait for on host back ends). */
static void s_copy_wait(parallel_pipeline *p) {
  if (!p->copies_pending) return;
  if (p->ops->copy_wait) p->ops->copy_wait();
  p->copies_pending = 0;
}

int parallel_pipeline_codec_check(const char *c) {
  static const char *names[] = {"none", "delta2", "delta4", "delta8", "direct8"};
  for (size_t i = 0; i < WT_ARRAY_LEN(names); i++)
    if (!strcmp(c, names[i])) return WT_OK;
  return wt_fail(WT_EINVAL,
                 "activation codec '%s' is unknown; use none, delta2, delta4, delta8 "
                 "or direct8",
                 c);
}

static int s_make_codec(parallel_pipeline *p, int T, int C) {
  const char *c = p->cfg.act_codec;
  if (!strcmp(c, "none")) return WT_OK;
  p->delta = !strncmp(c, "delta", 5);
  p->bits = atoi(c + (p->delta ? 5 : 6));
  acsgd_options o = {.bits = p->bits,
                     .delta = p->delta,
                     .rows = T,
                     .cols = C,
                     .max_samples = p->cfg.act_cache_samples ? p->cfg.act_cache_samples : 4096,
                     .max_bytes = (size_t)1 << 30, /* GPT-2 sized rows: 341 samples of T=1024 */
                     .overflow = ACSGD_OVERFLOW_EVICT};
  if (!p->last && !(p->snd = acsgd_sender_new(&o))) return WT_EINVAL;
  if (!p->first && !(p->rcv = acsgd_receiver_new(&o))) return WT_EINVAL;
  return WT_OK;
}

/* The most micro-batches whose forward has run and backward has not, at any point of the
 * stage's action list: the activation slots it needs to recompute nothing (at least 1). */
static int s_peak_in_flight(assign_schedule_kind kind, int stage, int S, int m) {
  assign_action *acts = wt_xmalloc(sizeof *acts * ASSIGN_SCHEDULE_MAX_ACTIONS(m));
  int n = assign_schedule_stage(kind, stage, S, m, acts), live = 0, peak = 1;
  for (int k = 0; k < n; k++) {
    live += acts[k].kind == ASSIGN_ACT_FORWARD;
    live -= acts[k].kind == ASSIGN_ACT_BACKWARD;
    peak = WT_MAX(peak, live);
  }
  free(acts);
  return peak;
}

/* No micro-batch's activations are held (between steps, and after an evaluation overwrote the
 * stage's slots). */
static void s_release_all(parallel_pipeline *p) {
  for (int j = 0; j < p->cfg.micro_batches; j++) p->slot_of[j] = -1;
  for (int k = 0; k < p->slots; k++) p->holder[k] = -1;
}

/* The gpt_stage's activation slots: the peak in flight, bounded by act_slots. */
static int s_stage_slots(const parallel_pipeline *p) {
  if (gpt_stage_config(p->s)->moe_experts > 0) return 1; /* MoE: one forward in flight */
  return p->cfg.act_slots > 0 ? WT_MIN(p->slots_peak, p->cfg.act_slots) : p->slots_peak;
}

parallel_pipeline *parallel_pipeline_new(const parallel_pipeline_config *cfg, gpt_stage *stage,
                                         parallel_comm *pipe) {
  const gpt_config *g = gpt_stage_config(stage);
  int S = parallel_comm_size(pipe), me = parallel_comm_rank(pipe);
  if (parallel_pipeline_codec_check(cfg->act_codec) != WT_OK) return NULL;
  if (cfg->micro_batches < 1 || cfg->micro_batches >= (1 << 21) || cfg->rows < 1 || cfg->seq < 1 ||
      cfg->seq > g->max_seq) {
    wt_fail(WT_EINVAL, "pipeline: %d micro-batches of %d x %d tokens is not a valid shape",
            cfg->micro_batches, cfg->rows, cfg->seq);
    return NULL;
  }
  int first = gpt_stage_first(stage) == 0, last = gpt_stage_last(stage) == g->n_layer;
  if (first != (me == 0) || last != (me == S - 1)) {
    wt_fail(WT_EINVAL,
            "pipeline: stage %d of %d holds layers [%d, %d) of %d, which does not fit "
            "its place in the pipeline",
            me, S, gpt_stage_first(stage), gpt_stage_last(stage), g->n_layer);
    return NULL;
  }
  parallel_pipeline *p = wt_xcalloc(1, sizeof *p);
  p->cfg = *cfg;
  p->keep_j = -1;
  p->s = stage, p->pipe = pipe, p->S = S, p->me = me, p->first = first, p->last = last;
  p->ops = gpt_stage_kernels(stage);
  const int m = cfg->micro_batches, rows = cfg->rows, T = cfg->seq, C = g->channels;
  p->TC = (size_t)T * C;
  p->mb_floats = (size_t)rows * p->TC;
  const size_t mb_bytes = sizeof(float) * p->mb_floats;
  if (!first) p->act_in = p->ops->host_alloc(mb_bytes * (size_t)m);
  p->act_out = p->ops->host_alloc(mb_bytes);
  p->gout = p->ops->host_alloc(mb_bytes);
  p->gin = p->ops->host_alloc(mb_bytes);
  if ((!first && !p->act_in) || !p->act_out || !p->gout || !p->gin) {
    wt_fail(WT_ENOMEM, "pipeline: no host memory for %d micro-batches of %zu activation bytes", m,
            mb_bytes);
    parallel_pipeline_destroy(&p);
    return NULL;
  }
  p->losses = wt_xcalloc((size_t)m, sizeof(float));
  p->ids = wt_xcalloc((size_t)m * rows, sizeof(uint64_t));
  p->slots_peak = s_peak_in_flight(cfg->schedule, me, S, m);
  p->slots = s_stage_slots(p);
  p->slot_of = wt_xmalloc(sizeof(int) * (size_t)m);
  p->holder = wt_xmalloc(sizeof(int) * (size_t)p->slots_peak);
  s_release_all(p);
  if (gpt_stage_set_slots(stage, p->slots) != WT_OK || s_make_codec(p, T, C) != WT_OK) {
    parallel_pipeline_destroy(&p);
    return NULL;
  }
  p->msg_cap = sizeof(float) * p->mb_floats;
  if (p->bits) p->msg_cap = (size_t)rows * acsgd_msg_bytes(T, C, WT_MAX(p->bits, S_GRAD_BITS));
  p->msg = wt_xmalloc(p->msg_cap);
  return p;
}

void parallel_pipeline_destroy(parallel_pipeline **self_p) {
  if (!self_p || !*self_p) return;
  parallel_pipeline *p = *self_p;
  s_copy_wait(p); /* before the host buffers go */
  acsgd_sender_destroy(&p->snd);
  acsgd_receiver_destroy(&p->rcv);
  p->ops->host_free(p->act_in), p->ops->host_free(p->act_out);
  p->ops->host_free(p->gout), p->ops->host_free(p->gin), p->ops->host_free(p->tied);
  free(p->losses), free(p->ids), free(p->msg), free(p->slot_of), free(p->holder);
  free(p);
  *self_p = NULL;
}

void parallel_pipeline_keep_sent(parallel_pipeline *p, int micro_batch, float *out) {
  p->keep_j = p->last || micro_batch >= p->cfg.micro_batches ? -1 : micro_batch;
  p->keep_to = out;
}

const float *parallel_pipeline_received(const parallel_pipeline *p, int micro_batch, size_t *n) {
  *n = p->mb_floats;
  if (p->first || micro_batch < 0 || micro_batch >= p->cfg.micro_batches) return NULL;
  return p->act_in + (size_t)micro_batch * p->mb_floats;
}

int parallel_pipeline_has_state(const parallel_pipeline *p) {
  return p->delta;
}

int parallel_pipeline_save_state(const parallel_pipeline *p, FILE *f) {
  if (p->snd) WT_CHECK(acsgd_sender_save(p->snd, f));
  if (p->rcv) WT_CHECK(acsgd_receiver_save(p->rcv, f));
  return WT_OK;
}

int parallel_pipeline_load_state(parallel_pipeline *p, FILE *f) {
  if (p->snd) WT_CHECK(acsgd_sender_load(p->snd, f));
  if (p->rcv) WT_CHECK(acsgd_receiver_load(p->rcv, f));
  return WT_OK;
}

double parallel_pipeline_compute_s(const parallel_pipeline *p) {
  return p->compute_s;
}

long parallel_pipeline_recomputes(const parallel_pipeline *p) {
  return p->recomputes;
}

int parallel_pipeline_set_site(parallel_pipeline *p, parallel_site *site) {
  if (site && p->ops->device)
    return wt_fail(WT_ENOTSUP, "pipeline: a site needs a stage in host memory (%s back end)",
                   p->ops->name);
  p->site = site;
  /* A site keeps one forward: the others are recomputed from their stored inputs. */
  p->slots = site ? 1 : s_stage_slots(p);
  s_release_all(p);
  return gpt_stage_set_slots(p->s, p->slots);
}

/* FNV-1a over a sample's tokens: the same window gives the same id on every stage. */
static uint64_t s_sample_id(const int *tokens, int T) {
  uint64_t h = 1469598103934665603ull;
  for (int t = 0; t < T; t++) h = (h ^ (uint32_t)tokens[t]) * 1099511628211ull;
  return h;
}

/* ---- the cut: encode and send, receive and decode ----------------------------------------- */

static int s_send(parallel_pipeline *p, int peer, int tag, int j, const float *x, int grad) {
  const int rows = p->cfg.rows, T = p->cfg.seq, C = (int)(p->TC / (size_t)T);
  if (!p->bits) return parallel_comm_send(p->pipe, peer, tag, x, sizeof(float) * p->mb_floats);
  size_t off = 0;
  for (int b = 0; b < rows; b++) {
    size_t len = 0;
    uint64_t id = p->ids[(size_t)j * rows + b];
    const float *row = x + (size_t)b * p->TC;
    if (grad)
      WT_CHECK(
          acsgd_quant_encode(row, T, C, S_GRAD_BITS, id, p->msg + off, p->msg_cap - off, &len));
    else
      WT_CHECK(acsgd_sender_encode(p->snd, id, row, p->msg + off, p->msg_cap - off, &len, NULL));
    off += len;
  }
  return parallel_comm_send(p->pipe, peer, tag, p->msg, off);
}

static int s_recv(parallel_pipeline *p, int peer, int tag, int j, float *x, int grad) {
  const int rows = p->cfg.rows;
  const char *what = grad ? "gradient" : "activation";
  size_t got = 0;
  if (!p->bits) {
    WT_CHECK(parallel_comm_recv(p->pipe, peer, tag, x, sizeof(float) * p->mb_floats, &got));
    if (got != sizeof(float) * p->mb_floats)
      return wt_fail(WT_ECORRUPT,
                     "pipeline: the %s of micro-batch %d from stage %d is %zu bytes, "
                     "expected %zu",
                     what, j, peer, got, sizeof(float) * p->mb_floats);
    return WT_OK;
  }
  WT_CHECK(parallel_comm_recv(p->pipe, peer, tag, p->msg, p->msg_cap, &got));
  size_t off = 0;
  for (int b = 0; b < rows; b++) {
    acsgd_msg_info info;
    float *row = x + (size_t)b * p->TC;
    int rc = acsgd_msg_parse(p->msg + off, got - off, &info);
    if (rc == WT_OK && info.sample_id != p->ids[(size_t)j * rows + b])
      rc = wt_fail(WT_ECORRUPT, "names another sample");
    if (rc == WT_OK && grad)
      rc = acsgd_quant_decode(p->msg + off, info.total_bytes, row, p->TC, NULL);
    if (rc == WT_OK && !grad)
      rc = acsgd_receiver_decode(p->rcv, p->msg + off, info.total_bytes, row, p->TC, NULL, NULL);
    if (rc != WT_OK) {
      char why[512];
      snprintf(why, sizeof why, "%s", wt_last_error());
      return wt_fail(rc, "pipeline: the %s of micro-batch %d row %d from stage %d is refused: %s",
                     what, j, b, peer, why);
    }
    off += info.total_bytes;
  }
  if (off != got)
    return wt_fail(WT_ECORRUPT,
                   "pipeline: %zu stray bytes after the %s of micro-batch %d from "
                   "stage %d",
                   got - off, what, j, peer);
  return WT_OK;
}

/* ---- passes ----------------------------------------------------------------------------- */

/* The stage's passes, on the gpt_stage or on the site that runs it (one slot: slot 0). */
static int s_use_slot(parallel_pipeline *p, int slot) {
  return p->site ? WT_OK : gpt_stage_use_slot(p->s, slot);
}

static int s_pass_forward(parallel_pipeline *p, const int *tokens, const float *act_in,
                          const int *targets, int rows, float *act_out) {
  if (p->site)
    return parallel_site_forward(p->site, tokens, act_in, targets, rows, p->cfg.seq, act_out);
  p->copies_pending = 1;
  return gpt_stage_forward_async(p->s, tokens, act_in, targets, rows, p->cfg.seq, act_out);
}

static float s_pass_loss(const parallel_pipeline *p) {
  return p->site ? parallel_site_loss(p->site) : gpt_stage_loss(p->s);
}

static int s_pass_backward(parallel_pipeline *p, const float *grad_out, float *grad_in,
                           float scale) {
  if (p->site) return parallel_site_backward(p->site, grad_out, grad_in, scale);
  p->copies_pending = 1;
  return gpt_stage_backward_async(p->s, grad_out, grad_in, scale);
}

/* A slot for micro-batch j's forward: a free one, else (fewer slots than micro-batches in
 * flight, pipeline_config.act_slots) the one holding the latest micro-batch, whose backward
 * then recomputes it. */
static int s_take_slot(parallel_pipeline *p, int j) {
  int pick = -1;
  for (int k = 0; k < p->slots && pick < 0; k++)
    if (p->holder[k] < 0) pick = k;
  if (pick < 0) {
    pick = 0;
    for (int k = 1; k < p->slots; k++)
      if (p->holder[k] > p->holder[pick]) pick = k;
    p->slot_of[p->holder[pick]] = -1;
  }
  p->holder[pick] = j;
  p->slot_of[j] = pick;
  return pick;
}

static int s_forward(parallel_pipeline *p, int j, const int *inputs, const int *targets) {
  const int rows = p->cfg.rows;
  size_t tok = (size_t)j * rows * p->cfg.seq;
  if (p->slot_of[j] < 0) s_take_slot(p, j);
  WT_CHECK(s_use_slot(p, p->slot_of[j]));
  double t0 = wt_now_s();
  int rc = s_pass_forward(p, p->first ? inputs + tok : NULL,
                          p->first ? NULL : p->act_in + (size_t)j * p->mb_floats,
                          p->last ? targets + tok : NULL, rows, p->last ? NULL : p->act_out);
  p->compute_s += wt_now_s() - t0;
  if (rc != WT_OK) {
    p->holder[p->slot_of[j]] = -1;
    p->slot_of[j] = -1;
  }
  if (rc == WT_OK && p->last) p->losses[j] = s_pass_loss(p);
  return rc;
}

static int s_backward(parallel_pipeline *p, int j, const int *inputs, const int *targets) {
  if (p->slot_of[j] < 0) { /* evicted: recompute (pipeline.h) */
    WT_CHECK(s_forward(p, j, inputs, targets));
    p->recomputes++;
  }
  int slot = p->slot_of[j];
  WT_CHECK(s_use_slot(p, slot));
  double t0 = wt_now_s();
  int rc = s_pass_backward(p, p->last ? NULL : p->gout, p->first ? NULL : p->gin,
                           1.0f / (float)p->cfg.micro_batches);
  p->compute_s += wt_now_s() - t0;
  p->holder[slot] = -1;
  p->slot_of[j] = -1;
  return rc;
}

static int s_action(parallel_pipeline *p, assign_action a, const int *inputs, const int *targets) {
  int j = a.micro_batch;
  switch (a.kind) {
  case ASSIGN_ACT_RECV_ACT:
    return s_recv(p, p->me - 1, 2 * j, j, p->act_in + (size_t)j * p->mb_floats, 0);
  case ASSIGN_ACT_FORWARD:
    return s_forward(p, j, inputs, targets);
  case ASSIGN_ACT_SEND_ACT:
    s_copy_wait(p); /* act_out is down */
    if (p->cfg.test_tamper_act)
      p->cfg.test_tamper_act(p->cfg.test_tamper_arg, j, p->act_out, p->mb_floats);
    if (j == p->keep_j)
      memcpy(p->keep_to, p->act_out, sizeof(float) * p->mb_floats), p->keep_j = -1;
    return s_send(p, p->me + 1, 2 * j, j, p->act_out, 0);
  case ASSIGN_ACT_RECV_GRAD:
    s_copy_wait(p); /* the last backward's upload of gout is done */
    return s_recv(p, p->me + 1, 2 * j + 1, j, p->gout, 1);
  case ASSIGN_ACT_BACKWARD:
    return s_backward(p, j, inputs, targets);
  case ASSIGN_ACT_SEND_GRAD:
    s_copy_wait(p); /* gin is down */
    return s_send(p, p->me - 1, 2 * j + 1, j, p->gin, 1);
  }
  return wt_fail(WT_EINVAL, "pipeline: unknown action %d", (int)a.kind);
}

int parallel_pipeline_run(parallel_pipeline *p, const int *inputs, const int *targets,
                          float *loss) {
  const int m = p->cfg.micro_batches, rows = p->cfg.rows, T = p->cfg.seq;
  for (int i = 0; i < m * rows; i++) p->ids[i] = s_sample_id(inputs + (size_t)i * T, T);
  s_release_all(p);
  if (p->site) WT_CHECK(parallel_site_load(p->site, p->s)); /* this step's parameters */
  assign_action *acts = wt_xmalloc(sizeof *acts * ASSIGN_SCHEDULE_MAX_ACTIONS(m));
  int n = assign_schedule_stage(p->cfg.schedule, p->me, p->S, m, acts), rc = WT_OK;
  if (n < 0) rc = wt_fail(WT_EINVAL, "pipeline: schedule %d is unknown", (int)p->cfg.schedule);
  for (int k = 0; k < n && rc == WT_OK; k++) rc = s_action(p, acts[k], inputs, targets);
  s_copy_wait(p); /* no copy outlives the step (next step's receives reuse act_in) */
  free(acts);
  if (rc == WT_OK && p->site) rc = parallel_site_grads(p->site, p->s);
  double sum = 0;
  for (int j = 0; j < m; j++) sum += p->losses[j];
  *loss = p->last ? (float)(sum / m) : 0.0f;
  return rc;
}

/* The stage's wte gradient in host memory: the buffer itself, or on a device a copy downloaded
 * into p->tied (uploaded again by s_tied_put). NULL when host memory is short. */
static float *s_tied_get(parallel_pipeline *p, size_t *n) {
  float *g = gpt_stage_tied_grad(p->s, n);
  if (!p->ops->device) return g;
  if (!p->tied && !(p->tied = p->ops->host_alloc(sizeof(float) * *n))) return NULL;
  p->ops->download(p->tied, g, sizeof(float) * *n);
  return p->tied;
}

static void s_tied_put(parallel_pipeline *p) {
  size_t n;
  float *g = gpt_stage_tied_grad(p->s, &n);
  if (p->ops->device) p->ops->upload(g, p->tied, sizeof(float) * n);
}

int parallel_pipeline_tied_sum(parallel_pipeline *p) {
  if (p->S == 1 || (!p->first && !p->last)) return WT_OK;
  size_t n = 0, got = 0;
  float *mine = s_tied_get(p, &n);
  if (!mine) return wt_fail(WT_ENOMEM, "pipeline: no host memory for the tied wte gradient");
  float *other = wt_xmalloc(sizeof(float) * n);
  int peer = p->first ? p->S - 1 : 0;
  int rc = parallel_comm_send(p->pipe, peer, S_TAG_TIED, mine, sizeof(float) * n);
  if (rc == WT_OK)
    rc = parallel_comm_recv(p->pipe, peer, S_TAG_TIED, other, sizeof(float) * n, &got);
  if (rc == WT_OK && got != sizeof(float) * n)
    rc = wt_fail(WT_ECORRUPT,
                 "pipeline: the tied embedding gradient from stage %d is %zu bytes, "
                 "expected %zu",
                 peer, got, sizeof(float) * n);
  /* last + first on both ends, the order of gpt_tied_grads_sum: bitwise equal copies. */
  const float *first = p->first ? mine : other;
  for (size_t i = 0; rc == WT_OK && i < n; i++) {
    float last_v = p->first ? other[i] : mine[i];
    mine[i] = last_v + first[i];
  }
  free(other);
  if (rc == WT_OK) s_tied_put(p);
  return rc;
}

int parallel_pipeline_eval(parallel_pipeline *p, const int *inputs, const int *targets, int n,
                           int rows, float *loss) {
  if (n < 1 || n > PARALLEL_PIPELINE_MAX_EVAL || rows < 1 || rows > p->cfg.rows)
    return wt_fail(WT_EINVAL, "pipeline eval: %d batches of %d rows (at most %d of %d)", n, rows,
                   PARALLEL_PIPELINE_MAX_EVAL, p->cfg.rows);
  const int T = p->cfg.seq;
  const size_t floats = (size_t)rows * p->TC, bytes = sizeof(float) * floats;
  double sum = 0;
  int rc = WT_OK;
  s_release_all(p); /* the stage's saved activations are overwritten below */
  WT_CHECK(s_use_slot(p, 0));
  if (p->site) WT_CHECK(parallel_site_load(p->site, p->s));
  for (int j = 0; j < n && rc == WT_OK; j++) {
    size_t got = 0, tok = (size_t)j * rows * T;
    s_copy_wait(p); /* the last batch's act_in is up and its act_out down */
    if (!p->first) {
      rc = parallel_comm_recv(p->pipe, p->me - 1, S_TAG_EVAL + j, p->act_in, bytes, &got);
      if (rc == WT_OK && got != bytes)
        rc = wt_fail(WT_ECORRUPT,
                     "pipeline eval: batch %d from stage %d is %zu bytes, expected "
                     "%zu",
                     j, p->me - 1, got, bytes);
    }
    if (rc == WT_OK)
      rc = s_pass_forward(p, p->first ? inputs + tok : NULL, p->first ? NULL : p->act_in,
                          p->last ? targets + tok : NULL, rows, p->last ? NULL : p->act_out);
    if (rc == WT_OK && p->last) sum += s_pass_loss(p);
    s_copy_wait(p);
    if (rc == WT_OK && !p->last)
      rc = parallel_comm_send(p->pipe, p->me + 1, S_TAG_EVAL + j, p->act_out, bytes);
  }
  s_copy_wait(p);
  *loss = p->last ? (float)(sum / n) : 0.0f;
  return rc;
}
