/* gpt_backward — the backward pass of a layer-range stage. The residual-stream gradient lives
 * in one (N, C) buffer that every block updates in place, and each block's computation is the
 * same whichever stage runs it: this is what makes split and unsplit gradients bitwise equal. */
#include <string.h>

#include "common/common.h"
#include "model/gpt_internal.h"

void gpt_linear_backward(const kernels_ops *k, float *dinp, float *dw, float *db, const float *dout,
                         const float *inp, const void *inp_bf16, const float *w, int N, int C,
                         int OC) {
  if (inp_bf16)
    k->matmul_backward_kept(dinp, dw, db, dout, inp, inp_bf16, w, N, C, OC, KERNELS_W_IN_OUT);
  else
    k->matmul_backward(dinp, dw, db, dout, inp, w, N, C, OC, KERNELS_W_IN_OUT);
}

/* One transformer block. On entry s->dres holds dL/dy; on return dL/dx. m is the block's MoE
 * layer (its load-balancing gradient scaled by aux_scale), or NULL for a dense MLP. */
static int s_block_backward(gpt_stage *s, const gpt_block_ptrs *p, gpt_block_ptrs *g,
                            const gpt_block_acts *a, moe_layer *m, float aux_scale, const float *x,
                            int B, int T) {
  const kernels_ops *k = s->ops;
  int C = s->cfg.channels, N = B * T, NH = s->cfg.n_head;
  size_t NC = (size_t)N * C, N4C = (size_t)N * 4 * C;
  /* y = resid2 + mlp(resid2): dres already is dL/dresid2's pass-through part. */
  if (m) {
    k->zero(s->dln, NC * sizeof(float));
    WT_CHECK(moe_layer_backward(m, s->dres, s->dln, aux_scale));
  } else {
    k->zero(s->dfch_gelu, N4C * sizeof(float));
    gpt_linear_backward(k, s->dfch_gelu, g->fcprojw, g->fcprojb, s->dres, a->fch_gelu,
                        a->fch_gelu_bf16, p->fcprojw, N, 4 * C, C);
    k->zero(s->dfch, N4C * sizeof(float));
    k->gelu_backward(s->dfch, a->fch, s->dfch_gelu, N4C);
    k->zero(s->dln, NC * sizeof(float));
    gpt_linear_backward(k, s->dln, g->fcw, g->fcb, s->dfch, a->ln2, a->ln2_bf16, p->fcw, N, C,
                        4 * C);
  }
  k->layernorm_backward(s->dres, g->ln2w, g->ln2b, s->dln, a->resid2, p->ln2w, a->ln2_mean,
                        a->ln2_rstd, N, C);
  /* resid2 = x + attn(x): dres now is dL/dresid2, the pass-through part of dL/dx. */
  k->zero(s->datty, NC * sizeof(float));
  gpt_linear_backward(k, s->datty, g->attprojw, g->attprojb, s->dres, a->atty, a->atty_bf16,
                      p->attprojw, N, C, C);
  k->zero(s->dqkv, NC * 3 * sizeof(float));
  k->attention_backward(s->dqkv, s->datt, s->datty, a->qkv, a->att, B, T, C, NH);
  k->zero(s->dln, NC * sizeof(float));
  gpt_linear_backward(k, s->dln, g->qkvw, g->qkvb, s->dqkv, a->ln1, a->ln1_bf16, p->qkvw, N, C,
                      3 * C);
  k->layernorm_backward(s->dres, g->ln1w, g->ln1b, s->dln, x, p->ln1w, a->ln1_mean, a->ln1_rstd, N,
                        C);
  return WT_OK;
}

/* Last stage: cross-entropy, LM head and ln_f; leaves dL/d(top residual) in s->dres. */
static void s_head_backward(gpt_stage *s, const float *top, float loss_scale, int N) {
  const kernels_ops *k = s->ops;
  int C = s->cfg.channels, V = s->cfg.vocab_size;
  size_t NC = (size_t)N * C;
  float dloss = loss_scale / (float)N;
  if (s->dlogits_of != s->logits || s->dlogits_dloss != dloss) /* not written by the forward */
    k->crossentropy_backward(s->dlogits, s->logits, s->lse, s->targets_dev, dloss, N, V);
  s->last_loss_scale = loss_scale;
  k->zero(s->dln, NC * sizeof(float));
  if (s->lnf_bf16)
    k->matmul_backward_kept(s->dln, s->g_end.wte, NULL, s->dlogits, s->lnf, s->lnf_bf16,
                            s->p_end.wte, N, C, V, KERNELS_W_OUT_IN);
  else
    k->matmul_backward(s->dln, s->g_end.wte, NULL, s->dlogits, s->lnf, s->p_end.wte, N, C, V,
                       KERNELS_W_OUT_IN);
  k->zero(s->dres, NC * sizeof(float));
  k->layernorm_backward(s->dres, s->g_end.lnfw, s->g_end.lnfb, s->dln, top, s->p_end.lnfw,
                        s->lnf_mean, s->lnf_rstd, N, C);
}

/* A stage with both ends (see gpt_internal.h): before the LM head accumulates into grads' wte,
 * the rows that hold head + emb get their head part back.
 *
 * On a device back end the same sums are made densely over all of wte (V x C floats, a fraction
 * of a millisecond at GPU bandwidth) instead of per listed row, which would take one launch
 * per row: emb is exactly +0 on the rows no token touched, and head + (+0) is head bitwise. */
static void s_tied_restore(gpt_stage *s) {
  size_t C = (size_t)s->cfg.channels;
  if (s->ops->device) {
    if (s->tied_summed)
      s->ops->copy(s->g_end.wte, s->wte_head_rows, (size_t)s->cfg.vocab_size * C * sizeof(float));
    s->tied_summed = 0;
    return;
  }
  for (int i = 0; i < s->n_tied_rows; i++) {
    size_t off = (size_t)s->tied_rows[i] * C;
    memcpy(s->g_end.wte + off, s->wte_head_rows + off, C * sizeof(float));
  }
}

/* After the embedding backward: lists the rows it touched, then writes head + emb into them,
 * the single addition gpt_tied_grads_sum makes for two stages. */
static void s_tied_sum(gpt_stage *s, const int *tokens, int N) {
  size_t C = (size_t)s->cfg.channels;
  if (s->ops->device) { /* head part kept whole, then g = head + emb (the host order) */
    size_t n = (size_t)s->cfg.vocab_size * C;
    s->ops->copy(s->wte_head_rows, s->g_end.wte, n * sizeof(float));
    s->ops->residual_forward(s->g_end.wte, s->wte_head_rows, s->dwte_emb, n);
    s->tied_summed = 1;
    return;
  }
  for (int i = 0; i < N; i++)
    if (!s->tied_listed[tokens[i]]) {
      s->tied_listed[tokens[i]] = 1;
      s->tied_rows[s->n_tied_rows++] = tokens[i];
    }
  for (int i = 0; i < s->n_tied_rows; i++) {
    size_t off = (size_t)s->tied_rows[i] * C;
    float *g = s->g_end.wte + off, *head = s->wte_head_rows + off;
    const float *emb = s->dwte_emb + off;
    for (size_t c = 0; c < C; c++) head[c] = g[c], g[c] = head[c] + emb[c];
  }
}

int gpt_stage_backward(gpt_stage *s, const float *grad_out, float *grad_in, float loss_scale) {
  if (s->B == 0) return wt_fail(WT_EINVAL, "gpt_stage_backward called before any forward");
  if (!gpt_is_last(s) && !grad_out)
    return wt_fail(WT_EINVAL, "stage [%d,%d) needs grad_out", s->first, s->last);
  if (!gpt_is_first(s) && !grad_in)
    return wt_fail(WT_EINVAL, "stage [%d,%d) needs grad_in", s->first, s->last);
  int B = s->B, T = s->T, N = B * T, C = s->cfg.channels;
  size_t NC = (size_t)N * C, slice = (size_t)s->max_batch * s->max_seq * C;
  if (s->dwte_emb) s_tied_restore(s);
  if (gpt_is_last(s))
    s_head_backward(s, s->resid + (size_t)s->n_local * slice, loss_scale, N);
  else
    gpt_copy_up(s, s->dres, grad_out, NC * sizeof(float));
  for (int l = s->n_local - 1; l >= 0; l--)
    WT_CHECK(s_block_backward(s, &s->p_blk[l], &s->g_blk[l], &s->acts[l], s->moe ? s->moe[l] : NULL,
                              loss_scale, s->resid + l * slice, B, T));
  if (gpt_is_first(s)) {
    float *dwte = s->dwte_emb ? s->dwte_emb : s->g_end.wte;
    s->ops->encoder_backward(dwte, s->g_end.wpe, s->dres, s->tokens_dev, B, T, C);
  } else {
    gpt_copy_down(s, grad_in, s->dres, NC * sizeof(float));
  }
  if (s->dwte_emb) s_tied_sum(s, s->tokens, N);
  return WT_OK;
}

int gpt_stage_backward_async(gpt_stage *s, const float *grad_out, float *grad_in,
                             float loss_scale) {
  s->async_copies = 1;
  int rc = gpt_stage_backward(s, grad_out, grad_in, loss_scale);
  s->async_copies = 0;
  return rc;
}
