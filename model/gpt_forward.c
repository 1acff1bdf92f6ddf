/* gpt_forward — the forward pass of a layer-range stage: embed (first stage) or take the
 * incoming activations, run the stage's blocks, and either hand the residual stream on or
 * (last stage) apply ln_f, the tied LM head and the cross-entropy. */
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "model/gpt_internal.h"

/* Checks the ids and the batch shape before anything is computed. */
static int s_check_inputs(const gpt_stage *s, const int *tokens, const float *act_in,
                          const int *targets, int B, int T, const float *act_out) {
  if (B < 1 || B > s->max_batch || T < 1 || T > s->max_seq)
    return wt_fail(WT_EINVAL, "batch %dx%d does not fit the stage (at most %dx%d)", B, T,
                   s->max_batch, s->max_seq);
  if (gpt_is_first(s) ? !tokens : !act_in)
    return wt_fail(WT_EINVAL, "stage [%d,%d) needs %s", s->first, s->last,
                   gpt_is_first(s) ? "tokens" : "act_in");
  if (gpt_is_last(s) ? !targets : !act_out)
    return wt_fail(WT_EINVAL, "stage [%d,%d) needs %s", s->first, s->last,
                   gpt_is_last(s) ? "targets" : "act_out");
  int V = s->cfg.vocab_size;
  for (int i = 0; i < B * T; i++) {
    if (gpt_is_first(s) && (tokens[i] < 0 || tokens[i] >= V))
      return wt_fail(WT_EINVAL, "token id %d at position %d is outside [0, %d)", tokens[i], i, V);
    if (gpt_is_last(s) && (targets[i] < 0 || targets[i] >= V))
      return wt_fail(WT_EINVAL, "target id %d at position %d is outside [0, %d)", targets[i], i, V);
  }
  return WT_OK;
}

/* An MoE block's MLP: tmp = moe(ln2), and its routing added to the stage's statistics. */
static int s_moe_forward(gpt_stage *s, moe_layer *m, const gpt_block_acts *a, int N) {
  WT_CHECK(moe_layer_forward(m, a->ln2, s->tmp, N));
  int *kept = wt_xmalloc(sizeof(int) * (size_t)s->cfg.moe_experts);
  moe_layer_load(m, kept);
  for (int e = 0; e < s->cfg.moe_experts; e++) s->moe_kept[e] += kept[e];
  free(kept);
  s->moe_dropped += moe_layer_dropped(m);
  s->moe_aux_sum += moe_layer_aux_loss(m);
  return WT_OK;
}

void gpt_linear_forward(const kernels_ops *k, float *out, void *inp_bf16, const float *inp,
                        const float *w, const float *b, int N, int C, int OC) {
  if (inp_bf16)
    k->matmul_forward_keep(out, inp_bf16, inp, w, b, N, C, OC, KERNELS_W_IN_OUT);
  else
    k->matmul_forward(out, inp, w, b, N, C, OC, KERNELS_W_IN_OUT);
}

/* One transformer block: x (N,C) -> y (N,C), saving what the backward needs in a; m is the
 * block's MoE layer, or NULL for a dense MLP. */
static int s_block_forward(gpt_stage *s, const gpt_block_ptrs *p, gpt_block_acts *a, moe_layer *m,
                           const float *x, float *y, int B, int T) {
  const kernels_ops *k = s->ops;
  int C = s->cfg.channels, N = B * T, NH = s->cfg.n_head;
  size_t NC = (size_t)N * C;
  k->layernorm_forward(a->ln1, a->ln1_mean, a->ln1_rstd, x, p->ln1w, p->ln1b, N, C);
  gpt_linear_forward(k, a->qkv, a->ln1_bf16, a->ln1, p->qkvw, p->qkvb, N, C, 3 * C);
  k->attention_forward(a->atty, a->att, a->qkv, B, T, C, NH);
  gpt_linear_forward(k, s->tmp, a->atty_bf16, a->atty, p->attprojw, p->attprojb, N, C, C);
  k->residual_forward(a->resid2, x, s->tmp, NC);
  k->layernorm_forward(a->ln2, a->ln2_mean, a->ln2_rstd, a->resid2, p->ln2w, p->ln2b, N, C);
  if (m) {
    WT_CHECK(s_moe_forward(s, m, a, N));
  } else {
    if (k->matmul_gelu_forward) {
      k->matmul_gelu_forward(a->fch_gelu, a->fch, a->ln2_bf16, a->ln2, p->fcw, p->fcb, N, C, 4 * C,
                             KERNELS_W_IN_OUT);
    } else {
      gpt_linear_forward(k, a->fch, a->ln2_bf16, a->ln2, p->fcw, p->fcb, N, C, 4 * C);
      k->gelu_forward(a->fch_gelu, a->fch, (size_t)N * 4 * C);
    }
    gpt_linear_forward(k, s->tmp, a->fch_gelu_bf16, a->fch_gelu, p->fcprojw, p->fcprojb, N, 4 * C,
                       C);
  }
  k->residual_forward(y, a->resid2, s->tmp, NC);
  return WT_OK;
}

/* ln_f, logits = x @ wte^T, and the mean cross-entropy over the N positions. A back end with
 * the fused cross-entropy also writes dlogits for a backward with the last backward's
 * loss_scale, which gpt_stage_backward then uses instead of reading the logits again. */
static void s_head_forward(gpt_stage *s, const float *x, int N) {
  const kernels_ops *k = s->ops;
  int C = s->cfg.channels, V = s->cfg.vocab_size;
  k->layernorm_forward(s->lnf, s->lnf_mean, s->lnf_rstd, x, s->p_end.lnfw, s->p_end.lnfb, N, C);
  if (s->lnf_bf16)
    k->matmul_forward_keep(s->logits, s->lnf_bf16, s->lnf, s->p_end.wte, NULL, N, C, V,
                           KERNELS_W_OUT_IN);
  else
    k->matmul_forward(s->logits, s->lnf, s->p_end.wte, NULL, N, C, V, KERNELS_W_OUT_IN);
  if (k->crossentropy_forward_backward) {
    float dloss = (s->last_loss_scale != 0 ? s->last_loss_scale : 1.0f) / (float)N;
    k->crossentropy_forward_backward(s->losses, s->lse, s->dlogits, s->logits, s->targets_dev,
                                     dloss, N, V);
    s->dlogits_of = s->logits, s->dlogits_dloss = dloss;
  } else {
    k->crossentropy_forward(s->losses, s->lse, s->logits, s->targets_dev, N, V);
    s->dlogits_of = NULL;
  }
  const float *losses = s->losses;
  if (k->device) {
    k->download(s->losses_host, s->losses, (size_t)N * sizeof(float));
    losses = s->losses_host;
  }
  double sum = 0; /* in position order: the same in every stage layout */
  for (int i = 0; i < N; i++) sum += losses[i];
  s->loss = (float)(sum / N);
}

int gpt_stage_forward(gpt_stage *s, const int *tokens, const float *act_in, const int *targets,
                      int B, int T, float *act_out) {
  WT_CHECK(s_check_inputs(s, tokens, act_in, targets, B, T, act_out));
  int C = s->cfg.channels, N = B * T;
  size_t NC = (size_t)N * C;
  s->B = B, s->T = T;
  const kernels_ops *k = s->ops;
  if (gpt_is_first(s)) {
    memcpy(s->tokens, tokens, sizeof(int) * (size_t)N);
    if (k->device) k->upload(s->tokens_dev, tokens, sizeof(int) * (size_t)N);
    k->encoder_forward(s->resid, s->tokens_dev, s->p_end.wte, s->p_end.wpe, B, T, C);
  } else {
    gpt_copy_up(s, s->resid, act_in, sizeof(float) * NC);
  }
  if (gpt_is_last(s)) {
    memcpy(s->targets, targets, sizeof(int) * (size_t)N);
    if (k->device) k->upload(s->targets_dev, targets, sizeof(int) * (size_t)N);
  }
  /* resid holds n_local + 1 slices of the max batch size; slice l is block l's input. */
  size_t slice = (size_t)s->max_batch * s->max_seq * C;
  for (int l = 0; l < s->n_local; l++)
    WT_CHECK(s_block_forward(s, &s->p_blk[l], &s->acts[l], s->moe ? s->moe[l] : NULL,
                             s->resid + l * slice, s->resid + (l + 1) * slice, B, T));
  if (s->moe_blocks) s->moe_forwards++;
  const float *top = s->resid + (size_t)s->n_local * slice;
  if (gpt_is_last(s))
    s_head_forward(s, top, N);
  else
    gpt_copy_down(s, act_out, top, sizeof(float) * NC);
  return WT_OK;
}

int gpt_stage_forward_async(gpt_stage *s, const int *tokens, const float *act_in,
                            const int *targets, int B, int T, float *act_out) {
  s->async_copies = 1;
  int rc = gpt_stage_forward(s, tokens, act_in, targets, B, T, act_out);
  s->async_copies = 0;
  return rc;
}
