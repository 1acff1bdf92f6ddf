/* gpt — configuration, parameter layout, initialisation and accessors of a layer-range stage.
 * The forward and backward passes live in gpt_forward.c and gpt_backward.c. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __AVX__
#include <immintrin.h> /* _mm256_stream_ps: zeroing gradients without reading them */
#endif

#include "common/common.h"
#include "model/gpt_internal.h"
#include "common/rng.h"

/* ---- layout ------------------------------------------------------------------------------- */

static void s_add_tensor(gpt_stage *s, const char *name, int d0, int d1, int decay) {
  gpt_tensor_info *t = &s->tensors[s->n_tensors++];
  snprintf(t->name, sizeof t->name, "%s", name);
  t->ndim = d1 > 0 ? 2 : 1;
  t->shape[0] = d0;
  t->shape[1] = d1 > 0 ? d1 : 0;
  t->numel = (size_t)d0 * (size_t)(d1 > 0 ? d1 : 1);
  t->offset = s->n_params;
  t->weight_decay = decay;
  s->n_params += t->numel;
}

/* Experts per MoE block held here: E / (EP degree). */
static int s_local_experts(const gpt_stage *s) {
  return s->cfg.moe_experts / s->ep.size;
}

/* An MoE block's router and this rank's experts, under their global names. */
static void s_add_moe_tensors(gpt_stage *s, int l) {
  static const struct {
    const char *suffix;
    int rows, cols, decay;
  } expert[] = {{"c_fc.weight", 1, 4, 1},
                {"c_fc.bias", 4, 0, 0},
                {"c_proj.weight", 4, 1, 1},
                {"c_proj.bias", 1, 0, 0}};
  int C = s->cfg.channels, El = s_local_experts(s);
  char name[64];
  snprintf(name, sizeof name, "h.%d.moe.router.weight", l);
  s_add_tensor(s, name, C, s->cfg.moe_experts, 1);
  for (int e = s->ep.rank * El; e < (s->ep.rank + 1) * El; e++)
    for (size_t k = 0; k < WT_ARRAY_LEN(expert); k++) {
      snprintf(name, sizeof name, "h.%d.moe.experts.%d.%s", l, e, expert[k].suffix);
      s_add_tensor(s, name, expert[k].rows * C, expert[k].cols * C, expert[k].decay);
    }
}

/* Lists the stage's tensors in Hugging Face state-dict order; a stage holding either end starts
 * with (its copy of) wte.weight. */
static void s_build_layout(gpt_stage *s) {
  int C = s->cfg.channels;
  char name[64];
  int El = s_local_experts(s);
  s->tensors = wt_xcalloc((size_t)(4 + (12 + 1 + 4 * El) * s->n_local), sizeof *s->tensors);
  if (gpt_is_first(s) || gpt_is_last(s)) s_add_tensor(s, "wte.weight", s->cfg.vocab_size, C, 1);
  if (gpt_is_first(s)) s_add_tensor(s, "wpe.weight", s->cfg.max_seq, C, 1);
  static const struct {
    const char *suffix;
    int rows, cols, decay;
  } block[] = {{"ln_1.weight", 1, 0, 0},        {"ln_1.bias", 1, 0, 0},
               {"attn.c_attn.weight", 1, 3, 1}, {"attn.c_attn.bias", 3, 0, 0},
               {"attn.c_proj.weight", 1, 1, 1}, {"attn.c_proj.bias", 1, 0, 0},
               {"ln_2.weight", 1, 0, 0},        {"ln_2.bias", 1, 0, 0},
               {"mlp.c_fc.weight", 1, 4, 1},    {"mlp.c_fc.bias", 4, 0, 0},
               {"mlp.c_proj.weight", 4, 1, 1},  {"mlp.c_proj.bias", 1, 0, 0}};
  for (int l = s->first; l < s->last; l++) {
    int moe = gpt_config_is_moe(&s->cfg, l);
    for (size_t k = 0; k < (moe ? 8 : WT_ARRAY_LEN(block)); k++) {
      snprintf(name, sizeof name, "h.%d.%s", l, block[k].suffix);
      s_add_tensor(s, name, block[k].rows * C, block[k].cols * C, block[k].decay);
    }
    if (moe) s_add_moe_tensors(s, l);
  }
  if (gpt_is_last(s)) {
    s_add_tensor(s, "ln_f.weight", C, 0, 0);
    s_add_tensor(s, "ln_f.bias", C, 0, 0);
  }
}

/* Points the end and block pointer structs into one flat buffer (params or grads). */
static void s_bind(const gpt_stage *s, float *base, gpt_end_ptrs *end, gpt_block_ptrs *blk) {
  int i = 0;
  memset(end, 0, sizeof *end);
  if (gpt_is_first(s) || gpt_is_last(s)) end->wte = base + s->tensors[i++].offset;
  if (gpt_is_first(s)) end->wpe = base + s->tensors[i++].offset;
  for (int l = 0; l < s->n_local; l++) {
    float **f[12] = {&blk[l].ln1w,     &blk[l].ln1b,     &blk[l].qkvw,    &blk[l].qkvb,
                     &blk[l].attprojw, &blk[l].attprojb, &blk[l].ln2w,    &blk[l].ln2b,
                     &blk[l].fcw,      &blk[l].fcb,      &blk[l].fcprojw, &blk[l].fcprojb};
    if (!gpt_config_is_moe(&s->cfg, s->first + l)) {
      for (int k = 0; k < 12; k++) *f[k] = base + s->tensors[i++].offset;
      continue;
    }
    for (int k = 0; k < 8; k++) *f[k] = base + s->tensors[i++].offset;
    blk[l].router = base + s->tensors[i++].offset;
    blk[l].experts = base + s->tensors[i].offset; /* the experts' tensors follow one another */
    i += 4 * s_local_experts(s);
  }
  if (gpt_is_last(s)) {
    end->lnfw = base + s->tensors[i++].offset;
    end->lnfb = base + s->tensors[i++].offset;
  }
}

/* ---- activations -------------------------------------------------------------------------- */

/* Zeroed float buffers from the back end's allocator (huge pages for the big ones on the
 * host). The size was checked against the back end's memory in gpt_stage_new_on, so running
 * out here is fatal. */
/* Staging host memory (pinned on a GPU) for n floats; aborts like gpt_floats. */
static float *s_host_floats(const gpt_stage *s, size_t n) {
  float *p = s->ops->host_alloc(n * sizeof(float));
  if (!p) {
    WT_ERROR("gpt: out of host memory allocating %zu floats", n);
    abort();
  }
  return p;
}

float *gpt_floats(const gpt_stage *s, size_t n) {
  float *p = s->ops->alloc(n * sizeof(float));
  if (!p) {
    WT_ERROR("gpt: out of %s memory allocating %zu floats", s->ops->name, n);
    abort();
  }
  return p;
}

/* The buffers of one activation slot (what a forward keeps for its backward), into the stage's
 * current fields. */
static void s_alloc_slot(gpt_stage *s) {
  size_t N = (size_t)s->max_batch * s->max_seq, C = (size_t)s->cfg.channels;
  size_t att = (size_t)s->max_batch * s->cfg.n_head * s->max_seq * s->max_seq;
  s->resid = gpt_floats(s, (size_t)(s->n_local + 1) * N * C);
  s->acts = wt_xcalloc((size_t)s->n_local, sizeof *s->acts);
  for (int l = 0; l < s->n_local; l++) {
    gpt_block_acts *a = &s->acts[l];
    a->ln1 = gpt_floats(s, N * C), a->ln1_mean = gpt_floats(s, N), a->ln1_rstd = gpt_floats(s, N);
    a->qkv = gpt_floats(s, N * 3 * C), a->att = gpt_floats(s, att), a->atty = gpt_floats(s, N * C);
    a->resid2 = gpt_floats(s, N * C);
    a->ln2 = gpt_floats(s, N * C), a->ln2_mean = gpt_floats(s, N), a->ln2_rstd = gpt_floats(s, N);
    a->fch = gpt_floats(s, N * 4 * C), a->fch_gelu = gpt_floats(s, N * 4 * C);
    if (s->ops->matmul_forward_keep) { /* 2-byte values: half as many floats */
      a->ln1_bf16 = gpt_floats(s, N * C / 2 + 1), a->atty_bf16 = gpt_floats(s, N * C / 2 + 1);
      a->ln2_bf16 = gpt_floats(s, N * C / 2 + 1), a->fch_gelu_bf16 = gpt_floats(s, N * 2 * C);
    }
  }
  s->lnf = s->lnf_mean = s->lnf_rstd = s->logits = s->lse = s->losses = s->losses_host = NULL;
  s->lnf_bf16 = NULL;
  if (gpt_is_last(s)) {
    size_t V = (size_t)s->cfg.vocab_size;
    s->lnf = gpt_floats(s, N * C), s->lnf_mean = gpt_floats(s, N), s->lnf_rstd = gpt_floats(s, N);
    if (s->ops->matmul_forward_keep) s->lnf_bf16 = gpt_floats(s, N * C / 2 + 1);
    s->logits = gpt_floats(s, N * V);
    s->lse = gpt_floats(s, N), s->losses = gpt_floats(s, N);
  }
  s->tokens = wt_xcalloc(N, sizeof(int));
  s->targets = wt_xcalloc(N, sizeof(int));
  s->tokens_dev = s->tokens, s->targets_dev = s->targets;
  if (s->ops->device) {
    s->tokens_dev = (int *)gpt_floats(s, N), s->targets_dev = (int *)gpt_floats(s, N);
    if (gpt_is_last(s)) s->losses_host = s_host_floats(s, N);
  }
  s->B = s->T = 0;
  s->loss = 0;
}

static void s_free_slot(gpt_stage *s) {
  for (int l = 0; s->acts && l < s->n_local; l++) {
    gpt_block_acts *a = &s->acts[l];
    float *bufs[] = {a->ln1,    a->ln1_mean, a->ln1_rstd, a->qkv,      a->att, a->atty,
                     a->resid2, a->ln2,      a->ln2_mean, a->ln2_rstd, a->fch, a->fch_gelu};
    for (size_t k = 0; k < WT_ARRAY_LEN(bufs); k++) s->ops->free(bufs[k]);
    void *copies[] = {a->ln1_bf16, a->atty_bf16, a->ln2_bf16, a->fch_gelu_bf16};
    for (size_t k = 0; k < WT_ARRAY_LEN(copies); k++) s->ops->free(copies[k]);
  }
  free(s->acts);
  float *bufs[] = {s->resid, s->lnf, s->lnf_mean, s->lnf_rstd, s->logits, s->lse, s->losses};
  for (size_t k = 0; k < WT_ARRAY_LEN(bufs); k++) s->ops->free(bufs[k]);
  s->ops->free(s->lnf_bf16);
  if (s->ops->device) {
    s->ops->free(s->tokens_dev);
    s->ops->free(s->targets_dev);
  }
  free(s->tokens);
  free(s->targets);
  s->ops->host_free(s->losses_host);
}

static void s_slot_store(const gpt_stage *s, gpt_slot *o) {
  *o = (gpt_slot){.resid = s->resid,
                  .acts = s->acts,
                  .lnf = s->lnf,
                  .lnf_mean = s->lnf_mean,
                  .lnf_rstd = s->lnf_rstd,
                  .lnf_bf16 = s->lnf_bf16,
                  .logits = s->logits,
                  .lse = s->lse,
                  .losses = s->losses,
                  .losses_host = s->losses_host,
                  .tokens = s->tokens,
                  .targets = s->targets,
                  .tokens_dev = s->tokens_dev,
                  .targets_dev = s->targets_dev,
                  .B = s->B,
                  .T = s->T,
                  .loss = s->loss};
}

static void s_slot_load(gpt_stage *s, const gpt_slot *o) {
  s->resid = o->resid, s->acts = o->acts;
  s->lnf = o->lnf, s->lnf_mean = o->lnf_mean, s->lnf_rstd = o->lnf_rstd, s->lnf_bf16 = o->lnf_bf16;
  s->logits = o->logits, s->lse = o->lse, s->losses = o->losses, s->losses_host = o->losses_host;
  s->tokens = o->tokens, s->targets = o->targets;
  s->tokens_dev = o->tokens_dev, s->targets_dev = o->targets_dev;
  s->B = o->B, s->T = o->T, s->loss = o->loss;
}

static void s_alloc_acts(gpt_stage *s) {
  size_t N = (size_t)s->max_batch * s->max_seq, C = (size_t)s->cfg.channels;
  size_t att = (size_t)s->max_batch * s->cfg.n_head * s->max_seq * s->max_seq;
  s_alloc_slot(s);
  s->dlogits = gpt_is_last(s) ? gpt_floats(s, N * (size_t)s->cfg.vocab_size) : NULL;
  s->tmp = gpt_floats(s, N * C), s->dres = gpt_floats(s, N * C), s->dln = gpt_floats(s, N * C);
  s->datty = gpt_floats(s, N * C), s->dqkv = gpt_floats(s, N * 3 * C);
  s->dfch = gpt_floats(s, N * 4 * C), s->dfch_gelu = gpt_floats(s, N * 4 * C);
  s->datt = gpt_floats(s, att);
}

static void s_free_acts(gpt_stage *s) {
  if (s->slots) { /* every slot but the current, then the current */
    s_slot_store(s, &s->slots[s->cur_slot]);
    for (int i = 0; i < s->n_slots; i++) {
      if (i == s->cur_slot) continue;
      s_slot_load(s, &s->slots[i]);
      s_free_slot(s);
    }
    s_slot_load(s, &s->slots[s->cur_slot]);
    free(s->slots);
  }
  s_free_slot(s);
  float *bufs[] = {s->dlogits, s->tmp,  s->dres,      s->dln, s->datty,
                   s->dqkv,    s->dfch, s->dfch_gelu, s->datt};
  for (size_t k = 0; k < WT_ARRAY_LEN(bufs); k++) s->ops->free(bufs[k]);
}

/* Bytes of one slot's bf16 copies of the linear layers' inputs (ln1, atty, ln2: N*C; fch_gelu:
 * N*4C; the last stage's lnf: N*C; 2 bytes each), on back ends that keep them (mirrors
 * s_alloc_slot). */
static double s_bf16_copy_bytes(const kernels_ops *ops, const gpt_config *c, int first, int last,
                                int max_batch, int max_seq) {
  if (!ops->matmul_forward_keep) return 0;
  double per_layer = 7.0, head = last == c->n_layer ? 1.0 : 0.0;
  return 2.0 * ((last - first) * per_layer + head) * max_batch * max_seq * c->channels;
}

/* Bytes of one activation slot (mirrors s_alloc_slot, but for s_bf16_copy_bytes). */
static double s_slot_bytes(const gpt_config *c, int first, int last, int max_batch, int max_seq) {
  double N = (double)max_batch * max_seq, C = c->channels, V = c->vocab_size, nl = last - first;
  double att = (double)max_batch * c->n_head * max_seq * max_seq;
  double floats = (nl + 1) * N * C + nl * (N * 15 * C + 4 * N + att) + 2 * N;
  if (last == c->n_layer) floats += N * C + N * V + 4 * N;
  return 4 * floats;
}

int gpt_stage_set_slots(gpt_stage *s, int n) {
  if (n < 1 || n > GPT_MAX_SLOTS)
    return wt_fail(WT_EINVAL, "gpt: %d activation slots; use 1..%d", n, GPT_MAX_SLOTS);
  int have = s->slots ? s->n_slots : 1;
  if (n == have) return WT_OK;
  if (n > 1 && s->moe) /* a block's routing and expert activations are kept once, not per slot */
    return wt_fail(WT_ENOTSUP,
                   "gpt: an MoE model keeps one forward in flight; run its pipeline with one "
                   "activation slot");
  if (n > have) {
    double need = (n - have) *
                  (s_slot_bytes(&s->cfg, s->first, s->last, s->max_batch, s->max_seq) +
                   s_bf16_copy_bytes(s->ops, &s->cfg, s->first, s->last, s->max_batch, s->max_seq));
    if (need > s->ops->mem_total())
      return wt_fail(WT_ENOMEM,
                     "gpt: %d more activation slots need %.1f GiB but %s has %.1f GiB; keep "
                     "fewer micro-batches in flight",
                     n - have, need / 1073741824.0, s->ops->device ? "the GPU" : "this machine",
                     s->ops->mem_total() / 1073741824.0);
  }
  if (!s->slots) {
    s->slots = wt_xcalloc(1, sizeof *s->slots);
    s->n_slots = 1, s->cur_slot = 0;
  }
  if (s->cur_slot >= n) gpt_stage_use_slot(s, 0);
  gpt_slot cur;
  s_slot_store(s, &cur);
  for (int i = n; i < s->n_slots; i++) { /* shrink */
    s_slot_load(s, &s->slots[i]);
    s_free_slot(s);
  }
  s->slots = wt_xrealloc(s->slots, (size_t)n, sizeof *s->slots);
  for (int i = s->n_slots; i < n; i++) { /* grow */
    s_alloc_slot(s);
    s_slot_store(s, &s->slots[i]);
  }
  s->n_slots = n;
  s_slot_load(s, &cur);
  return WT_OK;
}

int gpt_stage_num_slots(const gpt_stage *s) {
  return s->slots ? s->n_slots : 1;
}

int gpt_stage_use_slot(gpt_stage *s, int slot) {
  if (slot < 0 || slot >= gpt_stage_num_slots(s))
    return wt_fail(WT_EINVAL, "gpt: activation slot %d of %d", slot, gpt_stage_num_slots(s));
  if (slot == s->cur_slot) return WT_OK;
  s_slot_store(s, &s->slots[s->cur_slot]);
  s_slot_load(s, &s->slots[slot]);
  s->cur_slot = slot;
  return WT_OK;
}

int gpt_stage_slot(const gpt_stage *s) {
  return s->cur_slot;
}

/* ---- lifetime ----------------------------------------------------------------------------- */

/* Bytes the stage will allocate: parameters and gradients, the tied-wte accumulators, and the
 * activations of its layers (mirrors s_alloc_acts; double precision so nothing overflows). */
static double s_bytes_needed(const gpt_config *c, int first, int last, int max_batch, int max_seq,
                             int ep_size) {
  double N = (double)max_batch * max_seq, C = c->channels, V = c->vocab_size, nl = last - first;
  double att = (double)max_batch * c->n_head * max_seq * max_seq;
  double params = 0;
  for (int l = first; l < last; l++)
    params += (double)gpt_config_block_params(c, l, c->moe_experts / ep_size);
  if (first == 0) params += V * C + (double)c->max_seq * C;
  if (last == c->n_layer) params += (first == 0 ? 0 : V * C) + 2 * C;
  double floats = 2 * params + (first == 0 && last == c->n_layer ? 2 * V * C : 0);
  floats += (nl + 1) * N * C + nl * (N * 15 * C + 4 * N + att);
  if (last == c->n_layer) floats += N * C + 2 * N * V + 4 * N;
  floats += N * 15 * C + att;
  for (int l = first; l < last; l++) /* an MoE layer's routing state and dispatch buffers */
    if (gpt_config_is_moe(c, l)) {
      double E = c->moe_experts, rows = ceil(c->moe_capacity * N * c->moe_top_k / E) * E;
      floats += N * C + 2 * N * E + rows * 23 * C;
    }
  return 4 * floats;
}

/* Refuses a stage that cannot fit in the back end's memory (this machine's, or the GPU's), with
 * the sizes, instead of letting an allocation abort or the OOM killer end the process later. */
static int s_check_memory(const gpt_config *c, int first, int last, int max_batch, int max_seq,
                          const kernels_ops *ops, int ep_size) {
  double need = s_bytes_needed(c, first, last, max_batch, max_seq, ep_size) +
                s_bf16_copy_bytes(ops, c, first, last, max_batch, max_seq);
  double have = ops->mem_total();
  if (need > have)
    return wt_fail(WT_ENOMEM,
                   "layers [%d, %d) with batch %dx%d need %.1f GiB but %s has %.1f "
                   "GiB; use a smaller batch, sequence or model, or split it into more stages",
                   first, last, max_batch, max_seq, need / 1073741824.0,
                   ops->device ? "the GPU" : "this machine", have / 1073741824.0);
  return WT_OK;
}

gpt_stage *gpt_stage_new(const gpt_config *cfg, int first, int last, int max_batch, int max_seq) {
  return gpt_stage_new_on(cfg, first, last, max_batch, max_seq, kernels_cpu());
}

gpt_stage *gpt_stage_new_on(const gpt_config *cfg, int first, int last, int max_batch, int max_seq,
                            const kernels_ops *ops) {
  return gpt_stage_new_ep(cfg, first, last, max_batch, max_seq, ops, NULL);
}

/* The MoE layers of the stage's MoE blocks, bound to their parameters and gradients. */
static int s_make_moe(gpt_stage *s) {
  const gpt_config *c = &s->cfg;
  moe_config mc = {c->moe_experts, c->moe_top_k, c->moe_capacity, c->moe_aux_weight};
  s->moe = wt_xcalloc((size_t)s->n_local, sizeof *s->moe);
  s->moe_kept = wt_xcalloc((size_t)c->moe_experts, sizeof *s->moe_kept);
  for (int l = 0; l < s->n_local; l++) {
    if (!gpt_config_is_moe(c, s->first + l)) continue;
    s->moe_blocks++;
    s->moe[l] = moe_layer_new(s->ops, c->channels, &mc, s->max_batch * s->max_seq, &s->ep);
    if (!s->moe[l]) return WT_EINVAL;
    moe_layer_bind(s->moe[l], s->p_blk[l].router, s->g_blk[l].router, s->p_blk[l].experts,
                   s->g_blk[l].experts);
  }
  return WT_OK;
}

gpt_stage *gpt_stage_new_ep(const gpt_config *cfg, int first, int last, int max_batch, int max_seq,
                            const kernels_ops *ops, const moe_exchange *ep) {
  moe_exchange one = {.rank = 0, .size = 1};
  if (!ep) ep = &one;
  if (!ops) {
    wt_fail(WT_EINVAL, "gpt_stage_new_on: no kernels back end");
    return NULL;
  }
  if (gpt_config_validate(cfg) != WT_OK) return NULL;
  if (first < 0 || last > cfg->n_layer || first >= last) {
    wt_fail(WT_EINVAL, "layer range [%d, %d) is not a non-empty part of [0, %d)", first, last,
            cfg->n_layer);
    return NULL;
  }
  if (max_batch < 1 || max_seq < 1 || max_seq > cfg->max_seq) {
    wt_fail(WT_EINVAL, "max_batch %d must be >= 1 and max_seq %d in [1, %d]", max_batch, max_seq,
            cfg->max_seq);
    return NULL;
  }
  if (cfg->moe_experts > 0) {
    moe_config mc = {cfg->moe_experts, cfg->moe_top_k, cfg->moe_capacity, cfg->moe_aux_weight};
    if (ops->device) {
      wt_fail(WT_ENOTSUP, "MoE blocks run on host back ends only, not on %s; use --device cpu",
              ops->name);
      return NULL;
    }
    if (moe_config_validate(&mc, ep->size) != WT_OK) return NULL;
    if (ep->rank < 0 || ep->rank >= ep->size || (ep->size > 1 && !ep->alltoall)) {
      wt_fail(WT_EINVAL, "EP rank %d must be in [0, %d), with an all-to-all for several ranks",
              ep->rank, ep->size);
      return NULL;
    }
  }
  if (s_check_memory(cfg, first, last, max_batch, max_seq, ops, ep->size) != WT_OK) return NULL;
  gpt_stage *s = wt_xcalloc(1, sizeof *s);
  s->cfg = *cfg;
  s->ep = cfg->moe_experts > 0 ? *ep : one;
  s->first = first, s->last = last, s->n_local = last - first;
  s->max_batch = max_batch, s->max_seq = max_seq;
  s->ops = ops;
  s_build_layout(s);
  s->params = gpt_floats(s, s->n_params);
  s->grads = gpt_floats(s, s->n_params);
  s->p_blk = wt_xcalloc((size_t)s->n_local, sizeof *s->p_blk);
  s->g_blk = wt_xcalloc((size_t)s->n_local, sizeof *s->g_blk);
  s_bind(s, s->params, &s->p_end, s->p_blk);
  s_bind(s, s->grads, &s->g_end, s->g_blk);
  if (gpt_is_first(s) && gpt_is_last(s)) {
    s->dwte_emb = gpt_floats(s, (size_t)cfg->vocab_size * cfg->channels);
    s->wte_head_rows = gpt_floats(s, (size_t)cfg->vocab_size * cfg->channels);
    s->tied_rows = wt_xcalloc((size_t)cfg->vocab_size, sizeof *s->tied_rows);
    s->tied_listed = wt_xcalloc((size_t)cfg->vocab_size, 1);
  }
  s_alloc_acts(s);
  if (cfg->moe_experts > 0 && s_make_moe(s) != WT_OK) gpt_stage_destroy(&s);
  return s;
}

void gpt_stage_destroy(gpt_stage **self_p) {
  if (!self_p || !*self_p) return;
  gpt_stage *s = *self_p;
  s_free_acts(s);
  for (int l = 0; s->moe && l < s->n_local; l++) moe_layer_destroy(&s->moe[l]);
  free(s->moe);
  free(s->moe_kept);
  free(s->tensors);
  s->ops->free(s->params);
  s->ops->free(s->grads);
  free(s->p_blk);
  free(s->g_blk);
  s->ops->free(s->dwte_emb);
  s->ops->free(s->wte_head_rows);
  s->ops->host_free(s->host_params);
  s->ops->host_free(s->host_grads);
  s->ops->host_free(s->host_logits);
  free(s->tied_rows);
  free(s->tied_listed);
  free(s);
  *self_p = NULL;
}

/* ---- initialisation ----------------------------------------------------------------------- */

/* FNV-1a: mixes a tensor's name into its RNG seed so a layer draws the same weights in any
 * stage, and a tied wte copy equals the original. */
static uint64_t s_name_hash(const char *name) {
  uint64_t h = 1469598103934665603ull;
  for (const char *p = name; *p; p++) h = (h ^ (uint8_t)*p) * 1099511628211ull;
  return h;
}

static int s_ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Draws the weights into a host buffer laid out like the stage's parameters. */
static void s_init_into(const gpt_stage *s, float *base, uint64_t seed) {
  double resid_std = 0.02 / sqrt(2.0 * s->cfg.n_layer);
  for (int i = 0; i < s->n_tensors; i++) {
    const gpt_tensor_info *t = &s->tensors[i];
    float *p = base + t->offset;
    int is_ln = strstr(t->name, "ln_") != NULL;
    if (is_ln || t->ndim == 1) {
      float v = is_ln && s_ends_with(t->name, ".weight") ? 1.0f : 0.0f;
      for (size_t k = 0; k < t->numel; k++) p[k] = v;
      continue;
    }
    double std = s_ends_with(t->name, "c_proj.weight") ? resid_std : 0.02;
    wt_rng rng;
    wt_rng_seed(&rng, seed ^ s_name_hash(t->name));
    for (size_t k = 0; k < t->numel; k++) p[k] = (float)(std * wt_rng_normal(&rng));
  }
}

void gpt_stage_init_weights(gpt_stage *s, uint64_t seed) {
  if (!s->ops->device) {
    s_init_into(s, s->params, seed);
    return;
  }
  float *host = gpt_stage_params_host(s, NULL); /* drawn on the host, then copied over */
  s_init_into(s, host, seed);
  gpt_stage_params_upload(s);
}

/* ---- accessors ---------------------------------------------------------------------------- */

const gpt_config *gpt_stage_config(const gpt_stage *s) {
  return &s->cfg;
}
int gpt_stage_first(const gpt_stage *s) {
  return s->first;
}
int gpt_stage_last(const gpt_stage *s) {
  return s->last;
}

float *gpt_stage_params(gpt_stage *s, size_t *n) {
  if (n) *n = s->n_params;
  return s->params;
}

float *gpt_stage_grads(gpt_stage *s, size_t *n) {
  if (n) *n = s->n_params;
  return s->grads;
}

int gpt_stage_num_tensors(const gpt_stage *s) {
  return s->n_tensors;
}

const gpt_tensor_info *gpt_stage_tensor(const gpt_stage *s, int i) {
  return i >= 0 && i < s->n_tensors ? &s->tensors[i] : NULL;
}

const gpt_tensor_info *gpt_stage_tensors(const gpt_stage *s, int *n) {
  if (n) *n = s->n_tensors;
  return s->tensors;
}

int gpt_stage_set_kernels(gpt_stage *s, const struct kernels_ops *ops) {
  if (!ops) return wt_fail(WT_EINVAL, "gpt_stage_set_kernels: no kernels back end");
  if (ops->alloc != s->ops->alloc)
    return wt_fail(WT_EINVAL,
                   "back end %s keeps its buffers in other memory than %s, where this stage's "
                   "live; create the stage on it with gpt_stage_new_on",
                   ops->name, s->ops->name);
  s->ops = ops;
  for (int l = 0; s->moe && l < s->n_local; l++)
    if (s->moe[l]) moe_layer_set_kernels(s->moe[l], ops);
  return WT_OK;
}

const struct kernels_ops *gpt_stage_kernels(const gpt_stage *s) {
  return s->ops;
}

/* A host copy of a back-end buffer of the stage's n_params floats (device back ends). */
static float *s_host_copy(gpt_stage *s, float **host, const float *buf) {
  if (!*host) *host = s_host_floats(s, s->n_params);
  s->ops->download(*host, buf, s->n_params * sizeof(float));
  return *host;
}

float *gpt_stage_params_host(gpt_stage *s, size_t *n) {
  if (n) *n = s->n_params;
  return s->ops->device ? s_host_copy(s, &s->host_params, s->params) : s->params;
}

void gpt_stage_params_upload(gpt_stage *s) {
  if (s->ops->device && s->host_params)
    s->ops->upload(s->params, s->host_params, s->n_params * sizeof(float));
}

float *gpt_stage_grads_host(gpt_stage *s, size_t *n) {
  if (n) *n = s->n_params;
  return s->ops->device ? s_host_copy(s, &s->host_grads, s->grads) : s->grads;
}

void gpt_stage_grads_upload(gpt_stage *s) {
  if (s->ops->device && s->host_grads)
    s->ops->upload(s->grads, s->host_grads, s->n_params * sizeof(float));
}

float gpt_stage_loss(const gpt_stage *s) {
  return s->loss;
}
const float *gpt_stage_logits(gpt_stage *s) {
  if (!s->logits || !s->ops->device) return s->logits;
  size_t n = (size_t)s->B * s->T * s->cfg.vocab_size;
  if (!s->host_logits)
    s->host_logits = s_host_floats(s, (size_t)s->max_batch * s->max_seq * s->cfg.vocab_size);
  s->ops->download(s->host_logits, s->logits, n * sizeof(float));
  return s->host_logits;
}

/* Zeroes one piece with streaming stores: the gradients are far larger than the caches and
 * the backward reads them back much later, so an ordinary store would first fetch every line
 * only to overwrite it (measured 0.057 s vs 0.024 s for 124M floats on one thread). */
static void s_zero_piece(float *a, size_t n) {
#ifdef __AVX__
  size_t i = 0;
  for (; i < n && ((uintptr_t)(a + i) & 31); i++) a[i] = 0.0f;
  for (; i + 8 <= n; i += 8) _mm256_stream_ps(a + i, _mm256_setzero_ps());
  for (; i < n; i++) a[i] = 0.0f;
  _mm_sfence(); /* streaming stores are weakly ordered: the thread that made them fences */
#else
  memset(a, 0, sizeof(float) * n);
#endif
}

/* Zeroes by threads in 1 MiB pieces: a 124M-parameter model zeroes 0.5 GB per step, and one
 * core does not reach the memory bandwidth. */
static void s_zero(float *a, size_t n) {
  enum { PIECE = 1 << 18 };
  size_t np = (n + PIECE - 1) / PIECE;
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < np; i++) s_zero_piece(a + i * PIECE, WT_MIN(PIECE, n - i * PIECE));
}

void gpt_stage_zero_grad(gpt_stage *s) {
  if (s->moe_kept) memset(s->moe_kept, 0, sizeof(long) * (size_t)s->cfg.moe_experts);
  s->moe_dropped = 0, s->moe_aux_sum = 0, s->moe_forwards = 0;
  if (s->ops->device) { /* the dense tied sum: dwte_emb is zero everywhere again */
    s->ops->zero(s->grads, s->n_params * sizeof(float));
    if (s->dwte_emb) s->ops->zero(s->dwte_emb, (size_t)s->cfg.vocab_size * s->cfg.channels * 4);
    s->tied_summed = 0;
    return;
  }
  s_zero(s->grads, s->n_params);
  size_t C = (size_t)s->cfg.channels;
  for (int i = 0; i < s->n_tied_rows; i++) { /* the embedding part is nonzero only here */
    int r = s->tied_rows[i];
    memset(s->dwte_emb + (size_t)r * C, 0, C * sizeof(float));
    s->tied_listed[r] = 0;
  }
  s->n_tied_rows = 0;
}

float *gpt_stage_tied_grad(gpt_stage *s, size_t *n) {
  if (n) *n = s->g_end.wte ? (size_t)s->cfg.vocab_size * s->cfg.channels : 0;
  return s->g_end.wte;
}

int gpt_tied_grads_sum(gpt_stage *a, gpt_stage *b) {
  if (!a || !b || !gpt_is_first(a) || !gpt_is_last(b))
    return wt_fail(WT_EINVAL, "gpt_tied_grads_sum needs the first stage (first == 0) and the "
                              "last stage (last == n_layer)");
  if (memcmp(&a->cfg, &b->cfg, sizeof a->cfg) != 0)
    return wt_fail(WT_EINVAL, "gpt_tied_grads_sum: the two stages belong to different models");
  if (a == b) return WT_OK; /* one stage: its backward already summed the two uses */
  size_t n = (size_t)a->cfg.vocab_size * a->cfg.channels;
  float *ga = a->g_end.wte, *gb = b->g_end.wte;
  if (a->ops->device || b->ops->device) {
    if (a->ops->alloc != b->ops->alloc)
      return wt_fail(WT_EINVAL,
                     "gpt_tied_grads_sum: the stages live on different back ends "
                     "(%s, %s); exchange gpt_stage_tied_grad through host copies",
                     a->ops->name, b->ops->name);
    a->ops->residual_forward(ga, gb, ga, n); /* ga = gb + ga, elementwise: the host order */
    a->ops->copy(gb, ga, n * sizeof(float));
    return WT_OK;
  }
  for (size_t i = 0; i < n; i++) ga[i] = gb[i] = gb[i] + ga[i];
  return WT_OK;
}

/* ---- MoE ---------------------------------------------------------------------------------- */

int gpt_stage_moe_stats(const gpt_stage *s, long *kept, long *dropped, double *aux, int *forwards) {
  if (!s->moe_blocks) return 0;
  if (kept) memcpy(kept, s->moe_kept, sizeof(long) * (size_t)s->cfg.moe_experts);
  if (dropped) *dropped = s->moe_dropped;
  if (aux) *aux = s->moe_forwards ? s->moe_aux_sum / ((double)s->moe_forwards * s->moe_blocks) : 0;
  if (forwards) *forwards = s->moe_forwards;
  return s->moe_blocks;
}

/* The index of tensor `name` in s, searching from `hint` on (stages list tensors in the same
 * order, so the next match is usually right there); -1 if s does not hold it. */
static int s_find_tensor(const gpt_stage *s, const char *name, int hint) {
  for (int k = 0; k < s->n_tensors; k++) {
    int i = (hint + k) % s->n_tensors;
    if (!strcmp(s->tensors[i].name, name)) return i;
  }
  return -1;
}

int gpt_stage_copy_params(gpt_stage *dst, gpt_stage *src) {
  if (dst->ops->device || src->ops->device) {
    wt_fail(WT_EINVAL, "gpt_stage_copy_params: host back ends only");
    return -1;
  }
  int copied = 0, hint = 0;
  for (int i = 0; i < src->n_tensors; i++) {
    const gpt_tensor_info *ts = &src->tensors[i];
    int j = s_find_tensor(dst, ts->name, hint);
    if (j < 0) continue;
    const gpt_tensor_info *td = &dst->tensors[j];
    if (td->numel != ts->numel || td->shape[0] != ts->shape[0]) {
      wt_fail(WT_EMISMATCH, "tensor %s is %dx%d in one stage and %dx%d in the other", ts->name,
              ts->shape[0], ts->shape[1], td->shape[0], td->shape[1]);
      return -1;
    }
    memcpy(dst->params + td->offset, src->params + ts->offset, ts->numel * sizeof(float));
    copied++, hint = j + 1;
  }
  return copied;
}
