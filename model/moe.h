/* moe — the maths of a Mixture-of-Experts MLP (GShard / Switch Transformer): top-k routing,
 * capacity and token dropping, GPT-2 MLP experts and the Switch load-balancing loss, with its
 * experts spread over the ranks of an expert-parallel (EP) group reached through one all-to-all
 * callback. The GPT's MoE blocks (gpt.h, cfg->moe_experts > 0) run it with EP degree 1 (no
 * callback: every expert is local); parallel/datacenter/moe.h binds the callback to a mesh's EP
 * group.
 *
 * For each token x (C) of this rank:
 *   router    probs = softmax(x @ Wr), Wr (C, E) replicated on every rank
 *   top-k     the k experts of highest probability (ties to the lower index), gate = their
 *             probabilities (not renormalised, as in Switch for k = 1)
 *   capacity  each expert takes at most cap = ceil(capacity_factor · N·k / E) of this rank's N
 *             tokens; slots are given first choices first, then second choices, each in token
 *             order (GShard); a choice that finds its expert full is dropped (counted) and adds
 *             nothing — the block's residual carries the token on
 *   experts   GPT-2 MLPs: c_fc (C, 4C) + bias, GELU, c_proj (4C, C) + bias; rank p of P holds
 *             experts [p·E/P, (p+1)·E/P)
 *   output    y = Σ over kept choices gate · expert(x)
 *   aux loss  Switch load balancing: aux = E · Σ_e f_e · P_e, f_e the fraction of this rank's
 *             N·k choices that picked e (before dropping), P_e the mean router probability of e;
 *             the backward adds aux_scale · aux_weight · ∂aux/∂probs (f_e is a count and has no
 *             gradient).
 * Dispatch: each rank packs, for every destination, a (E/P, cap, C) block of the rows routed to
 * that destination's experts (unused slots zero), and one all-to-all delivers them; the expert
 * outputs return the same way, and the same all-to-all runs twice more in the backward. All
 * ranks of the group must pass the same N (cap must agree). Capacity and dropping are per rank's
 * batch, so one device that processes each rank's batch with all E experts drops exactly the
 * same tokens.
 *
 * Parameters live outside the layer (in a GPT stage's flat buffer, or in parallel_moe's own):
 * moe_layer_bind points it at the router (C, E) and at El local experts laid out one after the
 * other, each as [c_fc.weight (C, 4C) | c_fc.bias (4C) | c_proj.weight (4C, C) | c_proj.bias (C)]
 * (moe_expert_numel floats), with gradients of the same shapes. Gradients accumulate (+=).
 *
 * Host memory only: a kernels back end with device buffers is refused.
 *
 *   moe_config cfg = {.experts = 8, .top_k = 2, .capacity_factor = 1.25f, .aux_weight = 0.01f};
 *   moe_layer *m = moe_layer_new(kernels_cpu(), C, &cfg, N, NULL);   // EP degree 1
 *   moe_layer_bind(m, router, d_router, experts, d_experts);
 *   moe_layer_forward(m, x, y, N);                // y (N, C)
 *   moe_layer_backward(m, dy, dx, 1.0f);          // dx +=
 */
#ifndef WT_MODEL_MOE_H
#define WT_MODEL_MOE_H

#include <stddef.h>

struct kernels_ops;

typedef struct {
  int experts;           /* E, a multiple of the EP degree */
  int top_k;             /* k in [1, E] */
  float capacity_factor; /* > 0 */
  float aux_weight;      /* weight of the load-balancing loss in the objective (>= 0) */
} moe_config;

/* Where the experts live: this rank's place in the EP group and the group's all-to-all, which
 * moves block j of `send` to rank j and block i from rank i into `recv`, each `bytes` long, and
 * returns WT_OK or an error status with wt_fail's message. With size 1 alltoall may be NULL. */
typedef struct {
  int rank, size;
  void *ctx;
  int (*alltoall)(void *ctx, const float *send, float *recv, size_t bytes);
} moe_exchange;

/* One expert's tensors, in this order in its block. */
typedef enum { MOE_FC_W = 0, MOE_FC_B, MOE_PROJ_W, MOE_PROJ_B, MOE_TENSORS } moe_tensor;

/* Floats of one expert (8C² + 5C), and the offset and size of tensor i inside it. */
size_t moe_expert_numel(int channels);
size_t moe_tensor_offset(int channels, moe_tensor i);
size_t moe_tensor_numel(int channels, moe_tensor i);

/* Returns WT_OK, or WT_EINVAL with a message naming the bad field, for EP degree ep_size. */
int moe_config_validate(const moe_config *cfg, int ep_size);

typedef struct moe_layer moe_layer;

/* A layer of width C for up to max_tokens tokens per rank; ex NULL means EP degree 1. Returns
 * NULL with wt_last_error() set on a bad config or a device back end. Unbound until
 * moe_layer_bind. */
moe_layer *moe_layer_new(const struct kernels_ops *k, int channels, const moe_config *cfg,
                         int max_tokens, const moe_exchange *ex);
void moe_layer_destroy(moe_layer **self_p);

/* Points the layer at its parameters and gradients (see the top; borrowed). */
void moe_layer_bind(moe_layer *m, float *router, float *d_router, float *experts, float *d_experts);
/* Switches to another back end on the same (host) memory. */
void moe_layer_set_kernels(moe_layer *m, const struct kernels_ops *k);

/* This rank's experts: global indices [*first, *first + *count). */
void moe_layer_experts(const moe_layer *m, int *first, int *count);

/* y (N, C) = the layer's output for x (N, C) (x is copied). Returns WT_EINVAL if N is outside
 * [1, max_tokens], or the all-to-all's status. */
int moe_layer_forward(moe_layer *m, const float *x, float *y, int N);

/* dx (N, C) += the input gradient of the last forward for dy (N, C), plus aux_scale ·
 * aux_weight × the aux loss's; router and local expert gradients +=. Errors as the forward. */
int moe_layer_backward(moe_layer *m, const float *dy, float *dx, float aux_scale);

/* After a forward: the load-balancing loss of this rank's tokens (not yet weighted), the number
 * of dropped (token, choice) pairs, and kept[e] (E ints) the choices each expert accepted from
 * this rank — the per-rank token load. */
float moe_layer_aux_loss(const moe_layer *m);
int moe_layer_dropped(const moe_layer *m);
void moe_layer_load(const moe_layer *m, int *kept);

/* The capacity of the last forward (slots per expert per source rank). */
int moe_layer_capacity(const moe_layer *m);

#endif
