/* tp — tensor parallelism (Shoeybi et al. 2019, Megatron-LM) for a GPT-2 transformer block, with
 * optional sequence parallelism (Korthikanti et al. 2022), over the kernels ops table and the
 * tensor-parallel group of a device mesh.
 *
 * One block = ln_1, attn.c_attn (C→3C), attention, attn.c_proj (C→C), ln_2, mlp.c_fc (C→4C),
 * GELU, mlp.c_proj (4C→C), two residuals: the same maths as a block of model/gpt.h. With t ranks
 * in the TP group, rank r holds:
 *   c_attn     column-parallel: the q, k and v columns of heads [r·NH/t, (r+1)·NH/t), (C, 3C/t)
 *   attention  its NH/t heads, entirely local
 *   attn.c_proj row-parallel: rows [r·C/t, (r+1)·C/t) of (C, C); its bias is added once, by
 *              rank 0's matmul into its partial product before the reduction
 *   mlp.c_fc   column-parallel: columns [r·4C/t, (r+1)·4C/t), (C, 4C/t)
 *   mlp.c_proj row-parallel: rows [r·4C/t, (r+1)·4C/t) of (4C, C); bias added as attn.c_proj's
 *   ln_1, ln_2 replicated
 * and the f / g conjugate operators join them: f (before each column-parallel matmul) is the
 * identity forward and an all-reduce of the input gradient backward; g (after each row-parallel
 * matmul) is an all-reduce forward and the identity backward. So a forward + backward makes
 * exactly 4 all-reduces of (B·T, C) floats on the TP group (docs/parallel.md has the byte count).
 *
 * Sequence parallelism (sequence_parallel = 1): outside the two column/row-parallel regions —
 * LayerNorms and residuals — each rank holds only its 1/t of the B·T token rows.
 * f becomes an all-gather forward (reduce-scatter backward), g a reduce-scatter forward (all-gather
 * backward): the same bytes as the all-reduces, but LayerNorm work and its activations shrink by t.
 * The LayerNorm weight and bias gradients, then partial sums over each rank's rows, are summed
 * over the group once per backward (one all-reduce of 4C floats). Rank r's rows are chunk
 * (r + 1) mod t of the flattened (B·T) rows — the chunk a group reduce-scatter leaves on it
 * (group.h); parallel_tp_block_rows() says which. B·T must be a multiple of t.
 *
 * Numbers: splitting a matmul's inner sum into t partial sums that the all-reduce adds changes
 * float32 rounding, so results equal the single-device block within rounding (tests use
 * atol 1e-5 + rtol 1e-4 and report the max error), not bitwise. Every rank of the group ends up
 * with bitwise the same replicated activations and gradients (the ring all-reduce hands each
 * chunk's one sum to all ranks), so replicated weights never drift apart.
 *
 * Context parallelism: when the mesh's CP group has c > 1 ranks, each rank holds B × T/c rows
 * (its positions of the load-balanced split, cp.h) and the block's attention runs as ring
 * attention over the CP group on this rank's heads; everything else in the block is row-wise and
 * unchanged. B and T passed to the block are then the full shape (T a multiple of 2c).
 *
 * Buffers: the block allocates, copies and zeroes its buffers, and runs its collectives, only
 * through the TP group's back end (parallel_mesh_coll, group.h), and computes only through the
 * kernels table. With the default host back end everything is host memory; with an NCCL back end
 * and a device kernels table (kernels_backend("cuda")) every pointer the block takes or returns
 * (x, out, dout, dx, parameters, gradients) is device memory, and the same code runs. Ring
 * attention is host code, so a device back end needs CP = 1.
 *
 *   parallel_tp_block *b = parallel_tp_block_new(mesh, kernels_cpu(), C, NH, B, T, 0);
 *   parallel_tp_block_load(b, full);              // 12 GPT-2 tensors, each rank takes its shard
 *   parallel_tp_block_forward(b, x, y, B, T);     // x, y (B, T, C) (or this rank's rows with SP)
 *   parallel_tp_block_backward(b, dy, dx);        // dx +=; parameter gradients +=
 */
#ifndef WT_PARALLEL_TP_H
#define WT_PARALLEL_TP_H

#include "parallel/datacenter/mesh.h"

#include <stddef.h>

struct kernels_ops;

/* The block's tensors, in the order of model/gpt.h's block (h.L.<name>). */
typedef enum {
  PARALLEL_TP_LN1_W = 0,   /* (C)        replicated */
  PARALLEL_TP_LN1_B,       /* (C)        replicated */
  PARALLEL_TP_QKV_W,       /* (C, 3C/t)  column shard (q | k | v of this rank's heads) */
  PARALLEL_TP_QKV_B,       /* (3C/t) */
  PARALLEL_TP_ATTN_PROJ_W, /* (C/t, C) row shard */
  PARALLEL_TP_ATTN_PROJ_B, /* (C)        replicated */
  PARALLEL_TP_LN2_W,       /* (C) */
  PARALLEL_TP_LN2_B,       /* (C) */
  PARALLEL_TP_FC_W,        /* (C, 4C/t)  column shard */
  PARALLEL_TP_FC_B,        /* (4C/t) */
  PARALLEL_TP_FC_PROJ_W,   /* (4C/t, C)  row shard */
  PARALLEL_TP_FC_PROJ_B,   /* (C)        replicated */
  PARALLEL_TP_TENSORS
} parallel_tp_tensor;

typedef struct parallel_tp_block parallel_tp_block;

/* A block of width C with NH heads for up to max_batch × max_seq tokens, on the mesh's TP group
 * (the mesh must outlive the block). Returns NULL with wt_last_error() set unless NH and C are
 * multiples of the TP degree t and C of NH. Parameters start at zero. */
parallel_tp_block *parallel_tp_block_new(const parallel_mesh *mesh, const struct kernels_ops *k,
                                         int channels, int n_head, int max_batch, int max_seq,
                                         int sequence_parallel);
void parallel_tp_block_destroy(parallel_tp_block **self_p);

/* This rank's shard of tensor i (owned by the block); *n receives its element count. */
float *parallel_tp_block_param(parallel_tp_block *b, parallel_tp_tensor i, size_t *n);
float *parallel_tp_block_grad(parallel_tp_block *b, parallel_tp_tensor i, size_t *n);

/* All local parameters / gradients as one flat buffer (tensor after tensor, enum order). */
float *parallel_tp_block_params(parallel_tp_block *b, size_t *n);
float *parallel_tp_block_grads(parallel_tp_block *b, size_t *n);
int parallel_tp_block_zero_grad(parallel_tp_block *b);

/* Writes rank `rank`'s shard (of `t`) of the full single-device tensor i (GPT-2 layout, as in
 * model/gpt.h) to `local`. Pure layout: the inverse view of what each rank holds. */
void parallel_tp_shard(parallel_tp_tensor i, int channels, int n_head, int rank, int t,
                       const float *full, float *local);

/* The inverse of parallel_tp_shard, accumulating: full's elements that form rank `rank`'s shard
 * += local. Pure layout; the ranks' shards of a split tensor are disjoint, so t ranks may add
 * theirs into one full tensor at the same time. For a replicated tensor (LayerNorms, the
 * row-parallel biases) every rank's shard is the whole tensor: let one rank add it. */
void parallel_tp_unshard_add(parallel_tp_tensor i, int channels, int n_head, int rank, int t,
                             const float *local, float *full);

/* 1 if tensor i is replicated on every rank of the group (the same whole tensor everywhere). */
int parallel_tp_replicated(parallel_tp_tensor i);

/* Loads this rank's shards from the 12 full host tensors (enum order), uploading them where the
 * block's buffers live. Returns WT_OK or the back end's copy error. */
int parallel_tp_block_load(parallel_tp_block *b, const float *const full[PARALLEL_TP_TENSORS]);

/* With sequence parallelism: this rank's token rows of the flattened (B·T/c) rows it holds are
 * [*first, *first + *count); without it, all of them. */
void parallel_tp_block_rows(const parallel_tp_block *b, int B, int T, int *first, int *count);

/* Forward. x and out hold this rank's rows (parallel_tp_block_rows) × C. Returns WT_EINVAL for a
 * batch larger than the block was made for (or B·T not a multiple of t with SP), else WT_OK or
 * the communicator's error. The block keeps what its backward needs. */
int parallel_tp_block_forward(parallel_tp_block *b, const float *x, float *out, int B, int T);

/* Backward of the last forward: dx (rows × C) += the input gradient, parameter gradients +=.
 * Returns WT_OK or the communicator's error. */
int parallel_tp_block_backward(parallel_tp_block *b, const float *dout, float *dx);

/* ---- vocabulary-parallel embedding, LM head and cross-entropy ------------------------------- *
 *
 * The token embedding wte (V, C), tied to the LM head, is split by vocabulary rows: rank r holds
 * rows [v0, v0 + Vr) (parallel_chunk_range of V over t). The position embedding wpe (maxT, C) is
 * replicated.
 *   embed:  each rank writes the rows of the tokens it holds (zeros elsewhere), one all-reduce of
 *           (N, C) sums them, then wpe is added: every rank has the full (N, C) embedding.
 *   head:   logits (N, Vr) = h @ wte_rows^T — each rank holds only its own columns of the
 *           logits; no rank ever holds all N × V.
 *   loss:   each rank takes its rows' log-sum-exp over its columns and the target's logit where
 *           it holds the target; one all-reduce of (t + 1)·N floats hands every rank all t
 *           partial log-sum-exps and the target logits, from which the loss follows exactly.
 *   backward: dlogits (N, Vr) = (softmax − onehot)·dloss stays local; dh (N, C) = dlogits @
 *           wte_rows is a partial sum — one all-reduce (the f operator of the head); wte's
 *           gradient rows are local; the embedding's backward needs no communication (its input
 *           gradient is already complete on every rank).
 * Per step: 3 all-reduces of N·C floats (embed, head backward) and (t + 1)·N floats (loss).
 * With context parallelism (CP group of c > 1) a rank holds B × T/c rows — its positions of
 * cp.h's split, which the embedding uses for wpe — so N = B·T/c, and the loss is the mean over
 * this rank's rows (the mean over the sequence is the average over the CP group).
 * The softmax of the loss runs as a host loop over the logits. */
typedef struct parallel_tp_vocab parallel_tp_vocab;

/* Vocabulary V (>= t), width C, wpe of max_pos rows, for up to max_batch × max_seq tokens, on the
 * mesh's TP group. Returns NULL with wt_last_error() set on bad sizes. Parameters start at 0. */
parallel_tp_vocab *parallel_tp_vocab_new(const parallel_mesh *mesh, const struct kernels_ops *k,
                                         int vocab, int channels, int max_pos, int max_batch,
                                         int max_seq);
void parallel_tp_vocab_destroy(parallel_tp_vocab **self_p);

/* This rank's vocabulary rows [*first, *first + *count). */
void parallel_tp_vocab_range(const parallel_tp_vocab *v, int *first, int *count);

/* This rank's wte rows (count × C) and the replicated wpe (max_pos × C), and their gradients
 * (owned by the layer); *n receives the element count. */
float *parallel_tp_vocab_wte(parallel_tp_vocab *v, size_t *n);
float *parallel_tp_vocab_wpe(parallel_tp_vocab *v, size_t *n);
float *parallel_tp_vocab_wte_grad(parallel_tp_vocab *v, size_t *n);
float *parallel_tp_vocab_wpe_grad(parallel_tp_vocab *v, size_t *n);
void parallel_tp_vocab_zero_grad(parallel_tp_vocab *v);

/* Copies this rank's rows of the full wte (V, C) and all of wpe (max_pos, C); wpe_full NULL
 * leaves wpe as it is (a last pipeline stage holds the head but not wpe). */
void parallel_tp_vocab_load(parallel_tp_vocab *v, const float *wte_full, const float *wpe_full);

/* out (N, C) = wte[tokens] + wpe[position] on every rank of the TP group (N = B·T/c rows; with
 * CP tokens are this rank's rows, B and T the full shape). WT_EINVAL for a token outside
 * [0, V) (checked on every rank before anything is sent, so all ranks refuse together) or a batch
 * larger than the layer was made for. */
int parallel_tp_vocab_embed(parallel_tp_vocab *v, const int *tokens, int B, int T, float *out);
/* wte rows += dout of this rank's tokens, wpe += dout summed over the batch. No communication. */
void parallel_tp_vocab_embed_backward(parallel_tp_vocab *v, const float *dout);

/* Logits of this rank's columns for h (B·T, C), then the mean cross-entropy over the B·T rows
 * into *loss (the same on every rank). Targets are checked like tokens. */
int parallel_tp_vocab_loss(parallel_tp_vocab *v, const float *h, const int *targets, int B, int T,
                           float *loss);
/* This rank's logits (B·T, count) of the last parallel_tp_vocab_loss. */
const float *parallel_tp_vocab_logits(const parallel_tp_vocab *v);
/* Backward of loss_scale × mean loss: dh (B·T, C) += (complete on every rank), wte rows +=. */
int parallel_tp_vocab_loss_backward(parallel_tp_vocab *v, float loss_scale, float *dh);

#endif
