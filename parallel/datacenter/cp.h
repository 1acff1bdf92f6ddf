/* cp — context parallelism: causal multi-head attention over a sequence split across the c ranks
 * of the mesh's CP group, by ring attention (Liu et al. 2023; Megatron-LM's context parallelism).
 *
 * Load-balanced split: the T positions are cut into 2c chunks of S = T/(2c); rank r holds chunks
 * r and 2c−1−r (one early, one late), so under the causal mask every rank does the same work.
 * Its local rows are [chunk r | chunk 2c−1−r], Tl = T/c rows per sequence (parallel_cp_positions
 * gives each row's position). With c = 1 the rank holds the whole sequence in order.
 *
 * Forward: each rank keeps its queries; the K/V rows travel around the ring (c − 1 hops, rank r
 * sends to r + 1). Against each visiting block a rank computes, for every (batch, head, query),
 * the block's max score, normaliser and weighted sum of values under the causal mask (by global
 * position), and merges them into its running result with the online-softmax recurrence
 *   m' = max(m, m_b), l' = l·e^(m−m') + l_b·e^(m_b−m'), acc' = acc·e^(m−m') + acc_b·e^(m_b−m'),
 * finally out = acc / l; the log-sum-exp m + log l of every query is kept for the backward.
 * Backward: the K/V block travels the ring again with its gradient accumulator dK/dV, which makes
 * one extra hop at the end to return to the block's owner. Per step, from the saved
 * log-sum-exp: P = exp(q·k·scale − lse), dV += P·dO, dS = P·(dO·v − Σ dO·O), dQ += scale·dS·K,
 * dK += scale·dS·Q.
 *
 * Bytes per rank (4 per float; plain send/recv on the CP group, no frame headers), one block
 * being B·Tl·2C floats:
 *   forward   (c − 1) blocks (K/V)
 *   backward  (c − 1) blocks (K/V) + c blocks (dK/dV), for c > 1; nothing for c = 1
 *
 * Layout as kernels.h's attention: qkv (B, Tl, 3C) with [q | k | v] per row, head h at columns
 * h·C/NH, scale 1/sqrt(C/NH). The maths runs as host loops (the kernels table has no blockwise
 * attention op yet); results equal single-device attention within float32 rounding.
 *
 *   parallel_cp_attention *a = parallel_cp_attention_new(mesh, C, NH, B, T);
 *   parallel_cp_attention_forward(a, out, qkv_local, B, T);
 *   parallel_cp_attention_backward(a, dqkv_local, dout_local);   // dqkv +=
 */
#ifndef WT_PARALLEL_CP_H
#define WT_PARALLEL_CP_H

#include "parallel/datacenter/mesh.h"

typedef struct parallel_cp_attention parallel_cp_attention;

/* Attention of width C with NH heads for up to max_batch sequences of max_seq (full) positions,
 * on the mesh's CP group (the mesh must outlive it). Returns NULL with wt_last_error() set unless
 * NH divides C and, with c > 1, 2c divides max_seq. */
parallel_cp_attention *parallel_cp_attention_new(const parallel_mesh *mesh, int channels,
                                                 int n_head, int max_batch, int max_seq);
void parallel_cp_attention_destroy(parallel_cp_attention **self_p);

/* The global position of local row i (0 .. T/c − 1) of CP rank `rank` of c, for a sequence of T
 * (pure layout; T a multiple of 2c when c > 1). */
int parallel_cp_position(int c, int rank, int T, int i);

/* The global positions of this rank's T/c local rows for a sequence of T, into pos (T/c ints). */
void parallel_cp_positions(const parallel_cp_attention *a, int T, int *pos);

/* out (B, T/c, C) from this rank's qkv rows (B, T/c, 3C) (copied: the caller may reuse it).
 * Returns WT_EINVAL for a batch larger than the layer was made for or T not a multiple of 2c,
 * WT_ECORRUPT for a block of the wrong size from a peer, or the communicator's error. */
int parallel_cp_attention_forward(parallel_cp_attention *a, float *out, const float *qkv, int B,
                                  int T);

/* dqkv (B, T/c, 3C) += the gradient of the last forward's qkv, given dout (B, T/c, C). Errors as
 * the forward. */
int parallel_cp_attention_backward(parallel_cp_attention *a, float *dqkv, const float *dout);

#endif
