/* gpt_internal — the gpt_stage struct, shared by gpt.c (layout, init, accessors),
 * gpt_forward.c and gpt_backward.c. Not part of the public API. */
#ifndef WT_GPT_INTERNAL_H
#define WT_GPT_INTERNAL_H

#include "model/gpt.h"
#include "kernels/kernels.h"
#include "model/moe.h"

/* Pointers into a flat buffer (parameters or gradients) for one transformer block. */
typedef struct {
  float *ln1w, *ln1b;         /* (C) */
  float *qkvw, *qkvb;         /* (C, 3C), (3C) */
  float *attprojw, *attprojb; /* (C, C), (C) */
  float *ln2w, *ln2b;         /* (C) */
  float *fcw, *fcb;           /* (C, 4C), (4C) */
  float *fcprojw, *fcprojb;   /* (4C, C), (C) */
  float *router, *experts;    /* MoE blocks, in place of fc*: (C, E), El × moe_expert_numel */
} gpt_block_ptrs;

/* The ends of the model (NULL where the stage does not hold them). */
typedef struct {
  float *wte;         /* (V, C) */
  float *wpe;         /* (maxT, C) */
  float *lnfw, *lnfb; /* (C) */
} gpt_end_ptrs;

/* Saved activations of one block for the backward. N = B*T rows. */
typedef struct {
  float *ln1, *ln1_mean, *ln1_rstd; /* (N, C), (N), (N) */
  float *qkv;                       /* (N, 3C) */
  float *att;                       /* (B, NH, T, T) softmax probabilities */
  float *atty;                      /* (N, C) attention output before c_proj */
  float *resid2;                    /* (N, C) residual after attention */
  float *ln2, *ln2_mean, *ln2_rstd; /* (N, C), (N), (N) */
  float *fch, *fch_gelu;            /* (N, 4C) MLP pre- and post-GELU */
  /* bf16 copies of the linear layers' inputs (ln1, atty, ln2: N*C; fch_gelu: N*4C 2-byte
   * values) for a back end with matmul_forward_keep, so the backward does not round them
   * again; NULL on the others */
  void *ln1_bf16, *atty_bf16, *ln2_bf16, *fch_gelu_bf16;
} gpt_block_acts;

/* What one forward leaves for its backward (an activation slot, gpt_stage_use_slot): the
 * current slot's pointers live in the gpt_stage fields of the same names, the others here. */
typedef struct {
  float *resid;
  gpt_block_acts *acts;
  float *lnf, *lnf_mean, *lnf_rstd, *logits, *lse, *losses, *losses_host;
  void *lnf_bf16;
  int *tokens, *targets, *tokens_dev, *targets_dev;
  int B, T;
  float loss;
} gpt_slot;

struct gpt_stage {
  gpt_config cfg;
  int first, last, n_local; /* layers [first, last); n_local = last - first */
  int max_batch, max_seq;
  const kernels_ops *ops;

  gpt_tensor_info *tensors;
  int n_tensors;
  float *params, *grads;
  size_t n_params;
  gpt_end_ptrs p_end, g_end;
  gpt_block_ptrs *p_blk, *g_blk; /* n_local each */

  /* A stage holding both ends must give d(wte) = head part + embedding part, the same two
   * partial sums and the same final addition as two stages joined by gpt_tied_grads_sum
   * (bitwise equal). The LM head accumulates straight into grads' wte; the embedding part only
   * touches the rows of the tokens seen, so it is kept apart for those rows alone: after every
   * backward, grads' wte holds head + emb on the listed rows (their head part saved in
   * wte_head_rows, put back before the next backward) and the head part elsewhere, which equals
   * head + 0 bitwise because an accumulation that starts from +0 never yields -0. This avoids
   * zeroing and summing two more (V, C) arrays (~0.8 GB of memory traffic for GPT-2 124M). */
  float *dwte_emb;            /* (V, C) embedding part; nonzero only on the listed rows, or NULL */
  float *wte_head_rows;       /* (V, C) head part of the listed rows while grads hold the sum */
  int *tied_rows;             /* (V) rows of wte the embedding backward touched since zero_grad */
  unsigned char *tied_listed; /* (V) 1 where a row is in tied_rows */
  int n_tied_rows;

  /* Activations (sized for max_batch x max_seq). */
  float *resid;                     /* (n_local + 1, N, C): block inputs, then the stage output */
  gpt_block_acts *acts;             /* n_local */
  float *lnf, *lnf_mean, *lnf_rstd; /* last stage: (N, C), (N), (N) */
  void *lnf_bf16;                   /* last stage: lnf's bf16 copy (N*C 2-byte values) or NULL */
  float *logits, *dlogits;          /* last stage: (N, V) each */
  float *lse, *losses;              /* last stage: (N) each */
  int *tokens, *targets;            /* host copies of the last forward's ids (N) */
  int *tokens_dev, *targets_dev;    /* the same in the back end's memory (aliases on a host) */
  float *losses_host;               /* last stage on a device: host copy of losses (N) */
  float *tmp;                       /* (N, C) projection output before the residual add */
  float *dres;                      /* (N, C) gradient of the residual stream */
  float *dln, *datty;               /* (N, C) */
  float *dqkv;                      /* (N, 3C) */
  float *dfch, *dfch_gelu;          /* (N, 4C) */
  float *datt;                      /* (B, NH, T, T) attention backward scratch */
  int B, T;                         /* shape of the last forward; 0 before any */
  float loss;
  /* When the fused cross-entropy of the forward already wrote dlogits: the logits it is the
   * gradient of (the slot's buffer) and the dloss it used; NULL otherwise. The forward guesses
   * the backward's loss_scale to be the last backward's (0 before any: 1), which holds for
   * every micro-batch of a run but the first. */
  const float *dlogits_of;
  float dlogits_dloss;
  float last_loss_scale;
  int async_copies; /* during gpt_stage_forward_async / _backward_async: act_in, act_out,
                       grad_out and grad_in cross on the back end's copy stream */

  /* Activation slots: slots[i] for i != cur_slot hold the other forwards' buffers (slots[cur_slot]
   * is stale while it is current); NULL until gpt_stage_set_slots. */
  gpt_slot *slots;
  int n_slots, cur_slot;

  /* MoE blocks (NULL entries for dense blocks; moe NULL for a dense model), this stage's place in
   * the EP group, and the routing statistics since zero_grad (gpt_stage_moe_stats). */
  moe_layer **moe; /* n_local */
  moe_exchange ep; /* size 1 outside expert parallelism */
  int moe_blocks;  /* MoE blocks in [first, last) */
  long *moe_kept;  /* (E) */
  long moe_dropped;
  double moe_aux_sum;
  int moe_forwards;

  /* Device back ends only: host copies made on request (gpt_stage_params_host, ...), and the
   * tied-wte state of the dense sum (see s_tied_* in gpt_backward.c). */
  float *host_params, *host_grads, *host_logits;
  int tied_summed; /* grads' wte holds head + emb and wte_head_rows the head part */
};

/* A block's linear layer (Conv1D layout): matmul_forward / matmul_backward, or with inp_bf16
 * non-NULL the _keep / _kept pair that keeps the input's bf16 copy between them
 * (gpt_forward.c, gpt_backward.c). */
void gpt_linear_forward(const kernels_ops *k, float *out, void *inp_bf16, const float *inp,
                        const float *w, const float *b, int N, int C, int OC);
void gpt_linear_backward(const kernels_ops *k, float *dinp, float *dw, float *db, const float *dout,
                         const float *inp, const void *inp_bf16, const float *w, int N, int C,
                         int OC);

/* Zeroed back-end memory for n floats; aborts when the back end runs out (gpt_stage_new
 * checked the total against its memory first). */
float *gpt_floats(const gpt_stage *s, size_t n);

/* Is the stage the first / last of the model? */
static inline int gpt_is_first(const gpt_stage *s) {
  return s->first == 0;
}
static inline int gpt_is_last(const gpt_stage *s) {
  return s->last == s->cfg.n_layer;
}

/* The copies of act_in / grad_out up and act_out / grad_in down: on the copy stream during an
 * *_async pass (gpt.h), synchronous otherwise or where the table has no asynchronous copies. */
static inline void gpt_copy_up(const gpt_stage *s, void *dst, const void *src, size_t bytes) {
  int async = s->async_copies && s->ops->upload_async;
  (async ? s->ops->upload_async : s->ops->upload)(dst, src, bytes);
}
static inline void gpt_copy_down(const gpt_stage *s, void *dst, const void *src, size_t bytes) {
  int async = s->async_copies && s->ops->download_async;
  (async ? s->ops->download_async : s->ops->download)(dst, src, bytes);
}

#endif
