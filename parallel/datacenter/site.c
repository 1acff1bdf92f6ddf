/* site — one pipeline stage on t tensor-parallel × c context-parallel ranks (site.h): the blocks
 * as parallel_tp_block, the ends of the model as the vocabulary-parallel layer, each call run on
 * every rank by parallel_inproc_run over the site's in-process group. */
#include "parallel/datacenter/site.h"

#include "assign/assign.h" /* defines: assign_site_device */
#include "common/common.h"
#include "kernels/kernels.h" /* defines: the back end the ranks compute on */
#include "parallel/transport/comm.h"
#include "parallel/datacenter/cp.h"
#include "parallel/datacenter/mesh.h"
#include "parallel/datacenter/moe.h"
#include "parallel/datacenter/tp.h"
#include "parallel/datacenter/site_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The block tensors' names in gpt.h, in tp.h's enum order. */
static const char *const s_block_names[PARALLEL_TP_TENSORS] = {
    "ln_1.weight",        "ln_1.bias",        "attn.c_attn.weight", "attn.c_attn.bias",
    "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight",        "ln_2.bias",
    "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};

#define S_ABSENT ((size_t)-1) /* a tensor the stage does not hold */

/* ---- the stage's layout -------------------------------------------------------------------- */

/* Fills the layout from a stage's tensor table, checking that it is the site's stage. */
int parallel_site_layout_of(parallel_site *site, gpt_stage *st) {
  const gpt_config *c = gpt_stage_config(st);
  if (memcmp(c, &site->cfg, sizeof *c) || gpt_stage_first(st) != site->first ||
      gpt_stage_last(st) != site->last)
    return wt_fail(WT_EINVAL,
                   "site: the stage holds layers [%d, %d) of another model than the site's "
                   "[%d, %d); make the site for this stage",
                   gpt_stage_first(st), gpt_stage_last(st), site->first, site->last);
  if (site->ep) return WT_OK; /* the EP ranks' stages find their tensors by name */
  site_layout *l = &site->lay;
  l->wte = l->wpe = l->lnfw = l->lnfb = S_ABSENT;
  for (int i = 0; i < site->n_local * PARALLEL_TP_TENSORS; i++) l->blk[i] = S_ABSENT;
  for (int k = 0; k < gpt_stage_num_tensors(st); k++) {
    const gpt_tensor_info *ti = gpt_stage_tensor(st, k);
    int layer, at = 0;
    if (!strcmp(ti->name, "wte.weight")) l->wte = ti->offset;
    if (!strcmp(ti->name, "wpe.weight")) l->wpe = ti->offset;
    if (!strcmp(ti->name, "ln_f.weight")) l->lnfw = ti->offset;
    if (!strcmp(ti->name, "ln_f.bias")) l->lnfb = ti->offset;
    if (sscanf(ti->name, "h.%d.%n", &layer, &at) != 1 || at == 0 || layer < site->first ||
        layer >= site->last)
      continue;
    for (int i = 0; i < PARALLEL_TP_TENSORS; i++)
      if (!strcmp(ti->name + at, s_block_names[i]))
        l->blk[(layer - site->first) * PARALLEL_TP_TENSORS + i] = ti->offset;
  }
  int missing = (site->has_first && l->wpe == S_ABSENT) ||
                (site->has_last && l->lnfw == S_ABSENT) ||
                ((site->has_first || site->has_last) && l->wte == S_ABSENT);
  for (int i = 0; i < site->n_local * PARALLEL_TP_TENSORS; i++) missing |= l->blk[i] == S_ABSENT;
  if (missing) return wt_fail(WT_EINVAL, "site: the stage lacks a tensor of its layers");
  return WT_OK;
}

/* ---- one rank's part of each call ------------------------------------------------------------ */

static int s_load(parallel_site *site, site_rank *rk, const float *p) {
  const site_layout *l = &site->lay;
  const float *full[PARALLEL_TP_TENSORS];
  for (int b = 0; b < site->n_local; b++) {
    for (int i = 0; i < PARALLEL_TP_TENSORS; i++) full[i] = p + l->blk[b * PARALLEL_TP_TENSORS + i];
    WT_CHECK(parallel_tp_block_load(rk->blk[b], full));
  }
  if (rk->voc) parallel_tp_vocab_load(rk->voc, p + l->wte, site->has_first ? p + l->wpe : NULL);
  if (site->has_last) {
    memcpy(rk->lnf_w, p + l->lnfw, sizeof(float) * (size_t)site->cfg.channels);
    memcpy(rk->lnf_b, p + l->lnfb, sizeof(float) * (size_t)site->cfg.channels);
  }
  return WT_OK;
}

/* dst += src, and src = 0: the gradient moves into the stage. */
static void s_add(float *dst, float *src, size_t n) {
  for (size_t j = 0; j < n; j++) dst[j] += src[j];
  memset(src, 0, sizeof(float) * n);
}

/* The gradients back into gpt_stage layout: each rank adds its disjoint TP shards, TP rank 0 the
 * replicated tensors (the same on every TP rank, tp.h); then this rank's are zeroed. The c CP
 * ranks holding one TP shard each hold partial sums over their positions: they add theirs in
 * separate calls (site->call.round), so no two threads add into the same element at once. */
static int s_grads(parallel_site *site, site_rank *rk, float *g) {
  const site_layout *l = &site->lay;
  const int C = site->cfg.channels, NH = site->cfg.n_head, t = site->t, r = rk->tp;
  for (int b = 0; b < site->n_local; b++) {
    for (int i = 0; i < PARALLEL_TP_TENSORS; i++) {
      parallel_tp_tensor ti = (parallel_tp_tensor)i;
      if (r == 0 || !parallel_tp_replicated(ti))
        parallel_tp_unshard_add(ti, C, NH, r, t, parallel_tp_block_grad(rk->blk[b], ti, NULL),
                                g + l->blk[b * PARALLEL_TP_TENSORS + i]);
    }
    WT_CHECK(parallel_tp_block_zero_grad(rk->blk[b]));
  }
  if (rk->voc) {
    int v0, vr;
    size_t n;
    parallel_tp_vocab_range(rk->voc, &v0, &vr);
    float *dwte = parallel_tp_vocab_wte_grad(rk->voc, &n);
    s_add(g + l->wte + (size_t)v0 * C, dwte, n);
    float *dwpe = parallel_tp_vocab_wpe_grad(rk->voc, &n); /* the same on every TP rank */
    if (site->has_first && r == 0) s_add(g + l->wpe, dwpe, n);
    parallel_tp_vocab_zero_grad(rk->voc); /* a last stage's unused wpe gradient too */
  }
  if (site->has_last) {
    if (r == 0) {
      s_add(g + l->lnfw, rk->d_lnf_w, (size_t)C);
      s_add(g + l->lnfb, rk->d_lnf_b, (size_t)C);
    }
    memset(rk->d_lnf_w, 0, sizeof(float) * (size_t)C);
    memset(rk->d_lnf_b, 0, sizeof(float) * (size_t)C);
  }
  return WT_OK;
}

/* With c = 1 a plain copy. */
void parallel_site_rows_copy(const int *pos, int c, void *dst, const void *src, int B, int T,
                             size_t row, int to_full) {
  const int Tl = T / c;
  if (c == 1) {
    memcpy(dst, src, row * (size_t)B * T);
    return;
  }
  for (int b = 0; b < B; b++)
    for (int i = 0; i < Tl; i++) {
      size_t full = (size_t)b * T + pos[i], local = (size_t)b * Tl + i;
      memcpy((char *)dst + (to_full ? full : local) * row,
             (const char *)src + (to_full ? local : full) * row, row);
    }
}

/* The pass over this rank's N = B·T/c rows; the full arrays crossing the stage's boundaries are
 * read at this rank's positions, and written back at them by TP rank 0 of each CP rank (the CP
 * ranks' positions are disjoint, so they write at once). */
static int s_forward(parallel_site *site, site_rank *rk, const site_call *c) {
  const int C = site->cfg.channels, L = site->n_local, cp = site->c;
  const size_t NC = (size_t)c->B * (c->T / cp) * C;
  for (int i = 0; i < c->T / cp; i++) rk->pos[i] = parallel_cp_position(cp, rk->cp, c->T, i);
  if (site->has_first) {
    parallel_site_rows_copy(rk->pos, cp, rk->tokens, c->tokens, c->B, c->T, sizeof(int), 0);
    WT_CHECK(parallel_tp_vocab_embed(rk->voc, rk->tokens, c->B, c->T, rk->act));
  } else {
    parallel_site_rows_copy(rk->pos, cp, rk->act, c->act_in, c->B, c->T, sizeof(float) * (size_t)C,
                            0);
  }
  for (int b = 0; b < L; b++)
    WT_CHECK(parallel_tp_block_forward(rk->blk[b], rk->act + (size_t)b * NC,
                                       rk->act + (size_t)(b + 1) * NC, c->B, c->T));
  const float *h = rk->act + (size_t)L * NC;
  if (!site->has_last) {
    if (rk->tp == 0)
      parallel_site_rows_copy(rk->pos, cp, c->act_out, h, c->B, c->T, sizeof(float) * (size_t)C, 1);
    return WT_OK;
  }
  site->k->layernorm_forward(rk->lnf, rk->mean, rk->rstd, h, rk->lnf_w, rk->lnf_b,
                             c->B * (c->T / cp), C);
  parallel_site_rows_copy(rk->pos, cp, rk->targets, c->targets, c->B, c->T, sizeof(int), 0);
  return parallel_tp_vocab_loss(rk->voc, rk->lnf, rk->targets, c->B, c->T, &rk->loss);
}

static int s_backward(parallel_site *site, site_rank *rk, const site_call *c) {
  const int cp = site->c, N = site->B * (site->T / cp), C = site->cfg.channels, L = site->n_local;
  const size_t NC = (size_t)N * C;
  float *d = rk->d[0], *dx = rk->d[1];
  memset(d, 0, sizeof(float) * NC);
  if (site->has_last) {
    float *d_lnf = dx; /* free until the first block's backward */
    memset(d_lnf, 0, sizeof(float) * NC);
    /* Each rank's loss is the mean over its N rows; the stage's is the mean of the c ranks'. */
    WT_CHECK(parallel_tp_vocab_loss_backward(rk->voc, c->loss_scale / (float)cp, d_lnf));
    site->k->layernorm_backward(d, rk->d_lnf_w, rk->d_lnf_b, d_lnf, rk->act + (size_t)L * NC,
                                rk->lnf_w, rk->mean, rk->rstd, N, C);
  } else {
    parallel_site_rows_copy(rk->pos, cp, d, c->grad_out, site->B, site->T,
                            sizeof(float) * (size_t)C, 0);
  }
  for (int b = L - 1; b >= 0; b--) {
    memset(dx, 0, sizeof(float) * NC);
    WT_CHECK(parallel_tp_block_backward(rk->blk[b], d, dx));
    float *swap = d;
    d = dx, dx = swap;
  }
  if (site->has_first)
    parallel_tp_vocab_embed_backward(rk->voc, d);
  else if (rk->tp == 0)
    parallel_site_rows_copy(rk->pos, cp, c->grad_in, d, site->B, site->T, sizeof(float) * (size_t)C,
                            1);
  return WT_OK;
}

/* ---- an MoE site: EP rank p runs its gpt_stage on rows [p·B/t, (p+1)·B/t) ---------------- */

static int s_ep_load(parallel_site *site, site_rank *rk, const site_call *c) {
  (void)site;
  if (gpt_stage_copy_params(rk->st, c->stage) < 0) return WT_EMISMATCH;
  gpt_stage_params_upload(rk->st);
  return WT_OK;
}

static int s_ep_forward(parallel_site *site, site_rank *rk, const site_call *c) {
  const int Bl = c->B / site->t;
  const size_t row0 = (size_t)rk->tp * Bl * c->T, C = (size_t)site->cfg.channels;
  WT_CHECK(gpt_stage_forward(
      rk->st, c->tokens ? c->tokens + row0 : NULL, c->act_in ? c->act_in + row0 * C : NULL,
      c->targets ? c->targets + row0 : NULL, Bl, c->T, c->act_out ? c->act_out + row0 * C : NULL));
  if (site->has_last) rk->loss = gpt_stage_loss(rk->st);
  return WT_OK;
}

/* Each rank's loss is the mean over its B/t rows, the stage's the mean of the t ranks' means:
 * each rank differentiates loss_scale / t times its own (and so its MoE blocks' aux loss). */
static int s_ep_backward(parallel_site *site, site_rank *rk, const site_call *c) {
  const size_t row0 = (size_t)rk->tp * (site->B / site->t) * site->T,
               C = (size_t)site->cfg.channels;
  return gpt_stage_backward(rk->st, c->grad_out ? c->grad_out + row0 * C : NULL,
                            c->grad_in ? c->grad_in + row0 * C : NULL,
                            c->loss_scale / (float)site->t);
}

/* The canonical offset of each tensor of rank r's stage, found by name once (both stages list
 * their tensors in the same order; the rank's lacks the other ranks' experts). */
static int s_ep_map(site_rank *rk, gpt_stage *canon) {
  if (rk->map) return WT_OK;
  int n, m, j = 0;
  const gpt_tensor_info *t = gpt_stage_tensors(rk->st, &n), *u = gpt_stage_tensors(canon, &m);
  size_t *map = wt_xcalloc((size_t)n, sizeof *map);
  for (int i = 0; i < n; i++) {
    while (j < m && strcmp(u[j].name, t[i].name)) j++;
    if (j == m || u[j].numel != t[i].numel) {
      free(map);
      return wt_fail(WT_EINVAL, "site: the stage lacks tensor %s of its EP ranks", t[i].name);
    }
    map[i] = u[j].offset;
  }
  rk->map = map;
  return WT_OK;
}

/* The canonical gradients += rank rk's: its dense tensors (the router's too) and its experts'
 * (complete there); then its own are zeroed. */
static int s_ep_grads_rank(site_rank *rk, gpt_stage *canon, float *g) {
  WT_CHECK(s_ep_map(rk, canon));
  int n;
  const gpt_tensor_info *t = gpt_stage_tensors(rk->st, &n);
  const float *src = gpt_stage_grads_host(rk->st, NULL);
  for (int i = 0; i < n; i++) {
    float *dst = g + rk->map[i];
    const float *s = src + t[i].offset;
    for (size_t e = 0; e < t[i].numel; e++) dst[e] += s[e];
  }
  gpt_stage_zero_grad(rk->st); /* its tied-embedding partial sums too */
  return WT_OK;
}

/* The canonical gradients += every rank's: the dense tensors summed over the t ranks, each
 * expert's from its one owner. Run by the caller's thread, rank after rank, so no two add into
 * one element at once. */
static int s_ep_grads(parallel_site *site, gpt_stage *canon, float *g) {
  for (int r = 0; r < site->t; r++) WT_CHECK(s_ep_grads_rank(&site->ranks[r], canon, g));
  return WT_OK;
}

int parallel_site_rank_call(parallel_site *site, site_rank *rk) {
  const site_call *c = &site->call;
  int rc = WT_OK;
  if (site->ep) {
    rc = c->op == SITE_LOAD       ? s_ep_load(site, rk, c)
         : c->op == SITE_FORWARD  ? s_ep_forward(site, rk, c)
         : c->op == SITE_BACKWARD ? s_ep_backward(site, rk, c)
                                  : s_ep_grads_rank(rk, c->stage, c->grads); /* a process's */
    if (rc != WT_OK) snprintf(rk->err, sizeof rk->err, "%s", wt_last_error());
    return rc;
  }
  switch (c->op) {
  case SITE_LOAD:
    rc = s_load(site, rk, c->params);
    break;
  case SITE_FORWARD:
    rc = s_forward(site, rk, c);
    break;
  case SITE_BACKWARD:
    rc = s_backward(site, rk, c);
    break;
  case SITE_GRADS:
    if (rk->cp == c->round) rc = s_grads(site, rk, c->grads);
    break;
  }
  if (rc != WT_OK) snprintf(rk->err, sizeof rk->err, "%s", wt_last_error());
  return rc;
}

/* Every rank's thread: the current call's part of this rank. */
static int s_rank_main(parallel_comm *comm, void *arg) {
  parallel_site *site = arg;
  return parallel_site_rank_call(site, &site->ranks[parallel_comm_rank(comm)]);
}

/* ---- the threaded runner: every rank a thread of this process ------------------------------ */

/* Runs the current call on every rank. On failure, names the rank that failed first in cause:
 * one whose error is not a peer having gone (WT_EIO), if any. */
static int s_threads_run(parallel_site *site, const char *what) {
  int rcs[PARALLEL_SITE_MAX_RANKS];
  if (parallel_inproc_run(site->g, s_rank_main, site, rcs) == WT_OK) return WT_OK;
  int bad = -1;
  for (int r = 0; r < site->t * site->c; r++)
    if (rcs[r] != WT_OK && (bad < 0 || (rcs[bad] == WT_EIO && rcs[r] != WT_EIO))) bad = r;
  if (bad < 0) return wt_fail(WT_EIO, "site %s: the ranks could not be started", what);
  return wt_fail(rcs[bad], "site %s: rank %d of %d: %s", what, bad, site->t * site->c,
                 site->ranks[bad].err[0] ? site->ranks[bad].err : wt_status_name(rcs[bad]));
}

/* An MoE site adds rank after rank in this thread; a dense one gathers one CP round a call. */
static int s_threads_gather_grads(parallel_site *site, gpt_stage *stage, float *g) {
  if (site->ep) return s_ep_grads(site, stage, g);
  for (int round = 0; round < site->c; round++) {
    site->call = (site_call){.op = SITE_GRADS, .stage = stage, .grads = g, .round = round};
    WT_CHECK(s_threads_run(site, "gradient gather"));
  }
  return WT_OK;
}

static int s_threads_moe_stats(const parallel_site *site, int r, long *kept, long *dropped,
                               double *aux, int *forwards) {
  return gpt_stage_moe_stats(site->ranks[r].st, kept, dropped, aux, forwards);
}

static void s_threads_set_timeout(parallel_site *site, double timeout_s) {
  parallel_inproc_group_set_timeout(site->g, timeout_s);
}

static uint64_t s_threads_bytes(const parallel_site *site) {
  uint64_t sum = 0;
  for (int r = 0; r < site->t * site->c; r++)
    sum += parallel_comm_bytes_sent(parallel_inproc_group_comm(site->g, r));
  return sum;
}

static const site_runner_ops s_threads = {.name = "threads",
                                          .run = s_threads_run,
                                          .gather_grads = s_threads_gather_grads,
                                          .moe_stats = s_threads_moe_stats,
                                          .set_timeout = s_threads_set_timeout,
                                          .bytes = s_threads_bytes};

/* ---- construction ---------------------------------------------------------------------------- */

int parallel_site_check(const gpt_config *cfg, int first, int last, int max_batch, int max_seq,
                        int t, int c, const kernels_ops *k) {
  WT_CHECK(gpt_config_validate(cfg));
  if (t < 1 || c < 1 || t * c > PARALLEL_SITE_MAX_RANKS)
    return wt_fail(WT_EINVAL, "site: %d × %d ranks; use 1 to %d in all", t, c,
                   PARALLEL_SITE_MAX_RANKS);
  if (first < 0 || last <= first || last > cfg->n_layer)
    return wt_fail(WT_EINVAL, "site: layers [%d, %d) are not a range of the model's %d", first,
                   last, cfg->n_layer);
  if (max_batch < 1 || max_seq < 1 || max_seq > cfg->max_seq)
    return wt_fail(WT_EINVAL, "site: batch %d x %d does not fit a context of %d", max_batch,
                   max_seq, cfg->max_seq);
  if (cfg->moe_experts) {
    if (c > 1)
      return wt_fail(WT_EINVAL,
                     "site: an MoE model runs its %d ranks as expert-parallel ranks, without "
                     "context parallelism; drop the site's CP degree %d",
                     t * c, c);
    if (cfg->moe_experts % t || max_batch % t)
      return wt_fail(WT_EINVAL,
                     "site: %d expert-parallel ranks split the %d experts and the %d rows of a "
                     "micro-batch evenly; use a GPU count that divides both",
                     t, cfg->moe_experts, max_batch);
  } else if (cfg->n_head % t || cfg->vocab_size < t)
    return wt_fail(WT_EINVAL,
                   "site: %d ranks must divide the %d heads (and the vocabulary of %d have a "
                   "row per rank); use a GPU count that divides the heads",
                   t, cfg->n_head, cfg->vocab_size);
  if (c > 1 && max_seq % (2 * c))
    return wt_fail(WT_EINVAL,
                   "site: context parallelism over %d ranks splits each sequence into %d chunks, "
                   "so the sequence length %d must be a multiple of %d",
                   c, 2 * c, max_seq, 2 * c);
  if (k->device)
    return wt_fail(WT_ENOTSUP,
                   "site: the %s back end keeps process-wide state (handles, scratch, streams), "
                   "so %d ranks cannot share it in one process; a site runs on a host back end "
                   "(cpu, ref)",
                   k->name, t * c);
  return WT_OK;
}

/* Rank r's layers and buffers: world rank r = tp + t·cp (mesh.h). */
int parallel_site_rank_new(parallel_site *site, int r, parallel_comm *world) {
  site_rank *rk = &site->ranks[r];
  const gpt_config *cfg = &site->cfg;
  const int C = cfg->channels, B = site->max_batch, T = site->max_seq;
  const size_t N = (size_t)B * (T / site->c);
  parallel_mesh_shape shape = {.dp = 1, .pp = 1, .tp = site->t, .cp = site->c, .ep = 1};
  if (site->ep) shape.tp = 1, shape.ep = site->t;
  rk->tp = r % site->t, rk->cp = r / site->t;
  WT_CHECK_NEW(rk->mesh, parallel_mesh_new(world, &shape, 1));
  if (site->ep) {
    moe_exchange ex;
    WT_CHECK(parallel_moe_exchange(rk->mesh, &ex));
    WT_CHECK_NEW(rk->st,
                 gpt_stage_new_ep(cfg, site->first, site->last, B / site->t, T, site->k, &ex));
    return WT_OK;
  }
  rk->blk = wt_xcalloc((size_t)site->n_local, sizeof *rk->blk);
  for (int b = 0; b < site->n_local; b++)
    WT_CHECK_NEW(rk->blk[b], parallel_tp_block_new(rk->mesh, site->k, C, cfg->n_head, B, T, 0));
  if (site->has_first || site->has_last)
    WT_CHECK_NEW(rk->voc,
                 parallel_tp_vocab_new(rk->mesh, site->k, cfg->vocab_size, C, cfg->max_seq, B, T));
  rk->act = wt_xcalloc((size_t)(site->n_local + 1) * N * C, sizeof(float));
  rk->d[0] = wt_xcalloc(N * C, sizeof(float));
  rk->d[1] = wt_xcalloc(N * C, sizeof(float));
  rk->tokens = wt_xcalloc(N, sizeof(int)), rk->targets = wt_xcalloc(N, sizeof(int));
  rk->pos = wt_xcalloc((size_t)T, sizeof(int));
  if (site->has_last) {
    rk->lnf_w = wt_xcalloc((size_t)C, sizeof(float)),
    rk->lnf_b = wt_xcalloc((size_t)C, sizeof(float));
    rk->d_lnf_w = wt_xcalloc((size_t)C, sizeof(float));
    rk->d_lnf_b = wt_xcalloc((size_t)C, sizeof(float));
    rk->lnf = wt_xcalloc(N * C, sizeof(float));
    rk->mean = wt_xcalloc(N, sizeof(float)), rk->rstd = wt_xcalloc(N, sizeof(float));
  }
  return WT_OK;
}

void parallel_site_rank_destroy(parallel_site *site, site_rank *rk) {
  for (int b = 0; rk->blk && b < site->n_local; b++) parallel_tp_block_destroy(&rk->blk[b]);
  parallel_tp_vocab_destroy(&rk->voc);
  free(rk->blk), free(rk->act), free(rk->d[0]), free(rk->d[1]);
  free(rk->lnf_w), free(rk->lnf_b), free(rk->d_lnf_w), free(rk->d_lnf_b);
  free(rk->lnf), free(rk->mean), free(rk->rstd);
  free(rk->tokens), free(rk->targets), free(rk->pos), free(rk->map);
  gpt_stage_destroy(&rk->st);
  parallel_mesh_destroy(&rk->mesh);
}

parallel_site *parallel_site_new(const gpt_config *cfg, int first, int last, int max_batch,
                                 int max_seq, int tp, int cp, const kernels_ops *k) {
  if (!k) k = kernels_cpu();
  if (parallel_site_check(cfg, first, last, max_batch, max_seq, tp, cp, k) != WT_OK) return NULL;
  const int ranks = tp * cp;
  parallel_site *site = parallel_site_alloc(cfg, first, last, max_batch, max_seq, tp, cp, k);
  if (!(site->g = parallel_inproc_group_new(ranks))) {
    parallel_site_destroy(&site);
    return NULL;
  }
  for (int r = 0; r < ranks; r++)
    if (parallel_site_rank_new(site, r, parallel_inproc_group_comm(site->g, r)) != WT_OK) {
      int code = wt_last_status();
      char why[512];
      snprintf(why, sizeof why, "%s", wt_last_error());
      parallel_site_destroy(&site);
      wt_fail(code ? code : WT_EINVAL, "site: rank %d: %s", r, why);
      return NULL;
    }
  return site;
}

parallel_site *parallel_site_alloc(const gpt_config *cfg, int first, int last, int max_batch,
                                   int max_seq, int tp, int cp, const kernels_ops *k) {
  const int ranks = tp * cp;
  parallel_site *site = wt_xcalloc(1, sizeof *site);
  site->cfg = *cfg, site->first = first, site->last = last, site->n_local = last - first;
  site->t = tp, site->c = cp, site->max_batch = max_batch, site->max_seq = max_seq, site->k = k;
  site->has_first = first == 0, site->has_last = last == cfg->n_layer;
  site->ep = cfg->moe_experts > 0;
  site->lay.blk = wt_xcalloc((size_t)site->n_local * PARALLEL_TP_TENSORS, sizeof(size_t));
  site->ranks = wt_xcalloc((size_t)ranks, sizeof *site->ranks);
  site->runner = &s_threads;
  return site;
}

void parallel_site_destroy(parallel_site **self_p) {
  if (!self_p || !*self_p) return;
  parallel_site *site = *self_p;
  if (site->runner->close) site->runner->close(site); /* before the ranks: it ends a session */
  for (int r = 0; site->ranks && r < site->t * site->c; r++)
    parallel_site_rank_destroy(site, &site->ranks[r]);
  parallel_inproc_group_destroy(&site->g);
  free(site->ranks), free(site->lay.blk);
  free(site);
  *self_p = NULL;
}

int parallel_site_ranks(const parallel_site *site) {
  return site->t * site->c;
}

int parallel_site_tp(const parallel_site *site) {
  return site->ep ? 1 : site->t;
}

int parallel_site_ep(const parallel_site *site) {
  return site->ep ? site->t : 1;
}

int parallel_site_cp(const parallel_site *site) {
  return site->c;
}

void parallel_site_set_timeout(parallel_site *site, double timeout_s) {
  site->runner->set_timeout(site, timeout_s);
}

/* ---- calls ----------------------------------------------------------------------------------- */

int parallel_site_load(parallel_site *site, gpt_stage *stage) {
  WT_CHECK(parallel_site_layout_of(site, stage));
  site->call =
      (site_call){.op = SITE_LOAD, .params = gpt_stage_params_host(stage, NULL), .stage = stage};
  return site->runner->run(site, "load");
}

int parallel_site_grads(parallel_site *site, gpt_stage *stage) {
  WT_CHECK(parallel_site_layout_of(site, stage));
  WT_CHECK(site->runner->gather_grads(site, stage, gpt_stage_grads_host(stage, NULL)));
  gpt_stage_grads_upload(stage);
  return WT_OK;
}

int parallel_site_forward(parallel_site *site, const int *tokens, const float *act_in,
                          const int *targets, int B, int T, float *act_out) {
  if (B < 1 || T < 1 || B > site->max_batch || T > site->max_seq)
    return wt_fail(WT_EINVAL, "site: batch %d x %d is larger than the site was made for (%d x %d)",
                   B, T, site->max_batch, site->max_seq);
  if (site->c > 1 && T % (2 * site->c))
    return wt_fail(WT_EINVAL,
                   "site: context parallelism over %d ranks needs a sequence length that is a "
                   "multiple of %d, not %d",
                   site->c, 2 * site->c, T);
  if (site->ep && B % site->t)
    return wt_fail(WT_EINVAL,
                   "site: %d expert-parallel ranks take equal rows of a micro-batch, so its %d "
                   "rows must be a multiple of %d",
                   site->t, B, site->t);
  if ((site->has_first && !tokens) || (!site->has_first && !act_in) ||
      (site->has_last && !targets) || (!site->has_last && !act_out))
    return wt_fail(WT_EINVAL, "site: forward of layers [%d, %d) without its inputs or outputs",
                   site->first, site->last);
  site->call = (site_call){.op = SITE_FORWARD,
                           .tokens = tokens,
                           .act_in = act_in,
                           .targets = targets,
                           .B = B,
                           .T = T,
                           .act_out = act_out};
  site->B = site->T = 0; /* no forward to differentiate until this one succeeds */
  WT_CHECK(site->runner->run(site, "forward"));
  site->B = B, site->T = T;
  /* Every CP rank holds B·T/c rows: the stage's mean is the mean of the ranks' means. */
  double loss = 0;
  if (site->ep) { /* every EP rank holds B/t rows */
    for (int r = 0; r < site->t; r++) loss += site->ranks[r].loss;
    site->loss = (float)(loss / site->t);
    return WT_OK;
  }
  for (int j = 0; j < site->c; j++) loss += site->ranks[j * site->t].loss;
  site->loss = (float)(loss / site->c);
  return WT_OK;
}

float parallel_site_loss(const parallel_site *site) {
  return site->loss;
}

int parallel_site_backward(parallel_site *site, const float *grad_out, float *grad_in,
                           float loss_scale) {
  if (!site->B) return wt_fail(WT_EINVAL, "site: backward without a forward");
  if ((!site->has_last && !grad_out) || (!site->has_first && !grad_in))
    return wt_fail(WT_EINVAL, "site: backward of layers [%d, %d) without its gradients",
                   site->first, site->last);
  site->call = (site_call){
      .op = SITE_BACKWARD, .grad_out = grad_out, .grad_in = grad_in, .loss_scale = loss_scale};
  return site->runner->run(site, "backward");
}

int parallel_site_moe_stats(const parallel_site *site, long *kept, long *dropped, double *aux,
                            int *forwards) {
  if (!site->ep) return 0;
  const int E = site->cfg.moe_experts;
  long *k = wt_xcalloc((size_t)E, sizeof *k), drop = 0;
  double a = 0;
  int blocks = 0, fw = 0;
  if (kept) memset(kept, 0, sizeof(long) * (size_t)E);
  for (int r = 0; r < site->t; r++) {
    long d = 0;
    double ar = 0;
    blocks = site->runner->moe_stats(site, r, k, &d, &ar, &fw);
    for (int e = 0; kept && e < E; e++) kept[e] += k[e];
    drop += d, a += ar;
  }
  free(k);
  if (dropped) *dropped = drop;
  if (aux) *aux = a / site->t;
  if (forwards) *forwards = fw;
  return blocks;
}

uint64_t parallel_site_bytes(const parallel_site *site) {
  return site->runner->bytes(site);
}

int parallel_site_device(int gpus, double efficiency, double gpu_flops, double gpu_memory,
                         double *flops, double *memory) {
  return assign_site_device(gpus, gpus > 1 ? efficiency : 1, gpu_flops, gpu_memory, flops, memory);
}
