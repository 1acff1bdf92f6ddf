/* moe — expert parallelism: the Mixture-of-Experts MLP of model/moe.h (top-k router, capacity
 * and token dropping, Switch load-balancing loss; its maths and routing rules are described
 * there) with its E experts spread over the ranks of the mesh's EP group, tokens dispatched and
 * combined by the group's all-to-all.
 *
 * Two ways to use it:
 *   - parallel_moe: one standalone layer that owns its router and local experts (below);
 *   - parallel_moe_exchange: the EP group as a moe_exchange, for a whole GPT whose MoE blocks
 *     hold only this rank's experts (gpt_stage_new_ep). Expert tensors keep their global names
 *     (h.L.moe.experts.E.*), so a checkpoint loads on any EP degree.
 *
 * Rank p of P holds experts [p·E/P, (p+1)·E/P). All ranks of the EP group must pass the same N
 * (a block of the wrong size is WT_ECORRUPT).
 *
 * Bytes per rank per forward + backward: 4 · (P − 1) · (E/P) · cap · C · 4 (four all-to-alls).
 * Expert gradients are complete on their owner (summed over all source ranks' tokens); the
 * router's gradient covers this rank's tokens and is averaged over the dense-gradient group by
 * the caller, like any replicated weight.
 *
 *   parallel_moe_config cfg = {.experts = 8, .top_k = 2, .capacity_factor = 1.25f,
 *                              .aux_weight = 0.01f};
 *   parallel_moe *m = parallel_moe_new(mesh, kernels_cpu(), C, &cfg, N);
 *   parallel_moe_forward(m, x, y, N);            // y (N, C)
 *   parallel_moe_backward(m, dy, dx);            // dx +=
 */
#ifndef WT_PARALLEL_MOE_H
#define WT_PARALLEL_MOE_H

#include "model/moe.h"
#include "parallel/datacenter/mesh.h"

struct kernels_ops;

/* The layer's configuration and its expert tensors are the model's (model/moe.h); the EP layer
 * only adds where the experts live. */
typedef moe_config parallel_moe_config;

/* One local expert's tensors, in this order in parallel_moe_expert's block. */
typedef moe_tensor parallel_moe_tensor;
#define PARALLEL_MOE_FC_W MOE_FC_W     /* (C, 4C) */
#define PARALLEL_MOE_FC_B MOE_FC_B     /* (4C) */
#define PARALLEL_MOE_PROJ_W MOE_PROJ_W /* (4C, C) */
#define PARALLEL_MOE_PROJ_B MOE_PROJ_B /* (C) */
#define PARALLEL_MOE_TENSORS MOE_TENSORS

typedef struct parallel_moe parallel_moe;

/* The mesh's EP group as a model/moe.h exchange (borrowed: the mesh must outlive its users).
 * Returns WT_OK, or WT_ENOTSUP for a group whose back end keeps device buffers. */
int parallel_moe_exchange(const parallel_mesh *mesh, moe_exchange *ex);

/* Gathers a whole model from the EP ranks' stages: copies this rank's stage `local` (built with
 * parallel_moe_exchange) into `full`, a stage of the same config and layers holding every expert
 * (EP degree 1, e.g. gpt_stage_new), and fills in the other ranks' experts through one sum
 * all-reduce per MoE block over the EP group (each rank contributes its experts, zeros
 * elsewhere: the sums are exact). Every EP rank calls it with its own `full`; any of them can
 * then checkpoint_save it, and the checkpoint loads on any EP degree (checkpoint_load picks a
 * rank's experts by name). Costs one whole model per rank while it runs. Returns WT_OK,
 * WT_EINVAL if the stages do not match, or the communicator's status. */
struct gpt_stage;
int parallel_moe_gather_stage(const parallel_mesh *mesh, struct gpt_stage *local,
                              struct gpt_stage *full);

/* A layer of width C for up to max_tokens tokens per rank on the mesh's EP group (the mesh must
 * outlive it). Returns NULL with wt_last_error() set on a bad config. Parameters start at 0. */
parallel_moe *parallel_moe_new(const parallel_mesh *mesh, const struct kernels_ops *k, int channels,
                               const parallel_moe_config *cfg, int max_tokens);
void parallel_moe_destroy(parallel_moe **self_p);

/* This rank's experts: global indices [*first, *first + *count). */
void parallel_moe_experts(const parallel_moe *m, int *first, int *count);

/* The router Wr (C, E) and tensor i of local expert `local` (0 .. count−1), and their gradients;
 * *n receives the element count. Owned by the layer. */
float *parallel_moe_router(parallel_moe *m, size_t *n);
float *parallel_moe_router_grad(parallel_moe *m, size_t *n);
float *parallel_moe_expert(parallel_moe *m, int local, parallel_moe_tensor i, size_t *n);
float *parallel_moe_expert_grad(parallel_moe *m, int local, parallel_moe_tensor i, size_t *n);
void parallel_moe_zero_grad(parallel_moe *m);

/* y (N, C) = the layer's output for x (N, C) (x is copied). Returns WT_EINVAL if N is outside
 * [1, max_tokens], WT_ECORRUPT if a peer's block has the wrong size, or the communicator's
 * error. */
int parallel_moe_forward(parallel_moe *m, const float *x, float *y, int N);

/* After a forward: the load-balancing loss of this rank's tokens (not yet weighted), the number
 * of dropped (token, choice) pairs, and kept[e] (E ints) the choices each expert accepted from
 * this rank — the per-rank token load. */
float parallel_moe_aux_loss(const parallel_moe *m);
int parallel_moe_dropped(const parallel_moe *m);
void parallel_moe_load(const parallel_moe *m, int *kept);

/* dx (N, C) += the input gradient of the last forward for dy (N, C), plus aux_weight × the aux
 * loss's; router and local expert gradients +=. Errors as the forward. */
int parallel_moe_backward(parallel_moe *m, const float *dy, float *dx);

#endif
