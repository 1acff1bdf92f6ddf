/* collectives — ring all-reduce, broadcast, all-gather of variable-size bytes, and the
 * compressed all-reduces of data-parallel training, written only against the transport ops of
 * comm.h (send/recv of bytes), so they run unchanged over any transport.
 *
 * Every rank of the communicator calls the same collectives in the same order with the same n
 * (an SPMD contract). Each call stamps a sequence number on its messages; a peer that runs a
 * different collective, or sends a truncated, extended or bit-flipped message, makes the call
 * return WT_ECORRUPT on the receiving rank (never a crash; the rank's buffer is then undefined
 * and the caller should drop the step or rebuild the group). A peer that has left gives WT_EIO.
 * Memory is bounded: a call allocates O(n / world + one message) scratch besides its buffers,
 * except parallel_allgatherv and parallel_allreduce_sparse, which hold every rank's message.
 *
 * ---- ring geometry ----------------------------------------------------------------------------
 * A buffer of n floats is cut into `world` chunks (parallel_chunk_range: the first n % world
 * chunks are one element longer). Reduce-scatter runs world-1 steps; in step s rank r sends
 * chunk (r - s) mod world to rank r+1 and adds the chunk it receives from rank r-1 into its own.
 * Afterwards rank r holds the full reduction of chunk (r + 1) mod world — it "owns" that chunk
 * (parallel_chunk_owner). The all-gather then passes owned chunks around the ring. Each rank
 * sends 2 (world-1)/world × 4n bytes plus headers: optimal bandwidth, 2 (world-1) latencies.
 * The plain ring (and parallel_broadcast) moves each chunk as pieces of at most 256 KiB, streamed
 * with two in flight per link so that the link moves one piece while the rank reduces the other;
 * a transport must therefore queue at least two 256 KiB messages per link (both in this module
 * queue 64 MiB by default). The pieces change the number of messages, never a result.
 *
 * Rounding: chunk c is summed in the fixed order rank c, c+1, …, c-1 (float32 adds), so the
 * result is deterministic and, after the all-gather, BITWISE IDENTICAL on every rank (chunks are
 * copied, never re-summed). It equals a serial sum exactly when every partial sum is exactly
 * representable (e.g. small integers or dyadic values); otherwise within the usual bound
 * (world-1) · eps · Σ|x| per element.
 *
 * ---- compressed all-reduce: two-stage error feedback -----------------------------------------
 * parallel_allreduce_compressed keeps the ring but every chunk is encoded with a codec before it
 * leaves a rank:
 *   stage 1 (reduce-scatter): before sending chunk c, rank r encodes v = partial_c + e1[r][c]
 *     and keeps e1[r][c] = v − decode(payload). The receiver decodes and adds its own values.
 *     One residual per chunk a rank sends (world-1 of them).
 *   stage 2 (owner): the owner of chunk c has the full sum S_c (scaled by 1/world for AVG). It
 *     encodes v = S_c + e2[c] ONCE, keeps e2[c] = v − decode(payload), and replaces its own S_c by
 *     decode(payload). The all-gather forwards these exact bytes, never re-encoding, and every
 *     rank decodes them with the same deterministic decoder.
 * So all ranks end with IDENTICAL bytes, and what the codec dropped in either stage is re-sent
 * in a later step, so the running sum over steps tracks the uncompressed one with a bounded
 * error (the residuals), as for single-worker error feedback (Tang et al. 2021, 1-bit Adam).
 *
 * Why two stages and not one:
 *  - EF only at the senders, all-gather uncompressed: correct but saves nothing on half the
 *    traffic (the all-gather is as large as the reduce-scatter).
 *  - EF only at the senders, all-gather compressed WITHOUT a residual at the owner: the owner's
 *    compression error is dropped every step — for a biased codec (sign, top-k) that is a
 *    systematic bias the optimizer never sees corrected, and training stalls or diverges.
 *  - Re-compressing at every hop of the all-gather, or letting each rank decode with its own
 *    residual: ranks end with DIFFERENT values and the replicas drift apart silently.
 * The residuals are per (tensor, rank, chunk) — a parallel_ef holds them — and depend on the
 * ring geometry (n, world), never on anything global to the process. Where 1-bit Adam went wrong
 * in DeepSpeed: its compressed all-reduce ran over the whole world instead of the data-parallel
 * group of one pipeline stage, so under pipeline parallelism it waited for ranks of other stages
 * and hung (DeepSpeed issue #818; the fix left tied embeddings open), and it keeps one error
 * buffer per rank for the whole flattened model while ZeRO partitions gradients and optimizer
 * state, so the two were declared incompatible (#1197, #5046). Here the caller passes the
 * communicator of ONE stage's data-parallel group, each stage keeps one parallel_ef per tensor it
 * owns (tied wte gradients are summed across stages first, gpt.h), the stage-2 residual lives at
 * the chunk's owner — the rank a ZeRO shard would live on — and a change of world size resets
 * the residuals (parallel_ef_reset), dropping at most one step of un-sent error.
 *
 * ---- sparse all-reduce ----------------------------------------------------------------------
 * parallel_allreduce_sparse is for top-k / rand-k: each rank encodes x + e (one compress_ef per
 * tensor, error feedback at the sender), the encoded vectors (indices + values) are all-gathered,
 * and every rank sums the world decoded vectors locally in rank order 0..world-1, so every rank
 * gets identical bytes and the result equals the dense sum of the selected entries. Sparse
 * vectors are never summed inside the ring, because the union of supports grows hop by hop.
 * Cost: (world-1) × the payload per rank.
 *
 * Bytes: parallel_comm_bytes_sent(c) counts everything a rank sent (headers included); read it
 * before and after a call to measure a collective (docs/parallel.md has a table per codec).
 */
#ifndef WT_PARALLEL_COLLECTIVES_H
#define WT_PARALLEL_COLLECTIVES_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "compress/codec.h"
#include "parallel/transport/comm.h"
#include "compress/ef.h"

typedef enum {
  PARALLEL_OP_SUM = 0, /* x = Σ_ranks x */
  PARALLEL_OP_AVG = 1, /* x = (Σ_ranks x) · (1/world), scaled once by the chunk's owner */
} parallel_op;

/* Chunk `chunk` of an n-element buffer split over `world` ranks: [*off, *off + *len). */
void parallel_chunk_range(size_t n, int world, int chunk, size_t *off, size_t *len);

/* The rank that holds the full reduction of `chunk` after a reduce-scatter: (chunk-1) mod world. */
int parallel_chunk_owner(int chunk, int world);

/* ---- plain collectives ---------------------------------------------------------------------- */

/* In place: every rank's x[0..n) becomes the sum (or average) over ranks. n may be 0 or smaller
 * than world. Returns WT_OK, WT_ECORRUPT (bad message), or the transport's status. */
int parallel_allreduce(parallel_comm *c, float *x, size_t n, parallel_op op);

/* The two halves of parallel_allreduce. After parallel_reduce_scatter, only the chunk this rank
 * owns (parallel_chunk_owner) holds the reduction; the rest of x is partial sums.
 * parallel_allgather_chunks copies each owner's chunk to every rank. */
int parallel_reduce_scatter(parallel_comm *c, float *x, size_t n, parallel_op op);
int parallel_allgather_chunks(parallel_comm *c, float *x, size_t n);

/* Copies root's buf[0..bytes) to every rank (binomial tree, ceil(log2 world) rounds). Every rank
 * passes the same `bytes`. Returns WT_OK, WT_ECORRUPT or the transport's status. */
int parallel_broadcast(parallel_comm *c, void *buf, size_t bytes, int root);

/* All-gather of one byte buffer per rank, sizes may differ. On success *out (malloc'd, the
 * caller frees it) holds the buffers of ranks 0..world-1 back to back, offsets[r] (world+1
 * entries, caller-allocated) where rank r's begins, offsets[world] the total. A total above
 * max_total (a guard against a peer announcing a huge size) gives WT_EMISMATCH; *out is NULL on
 * any failure. */
int parallel_allgatherv(parallel_comm *c, const void *mine, size_t bytes, size_t max_total,
                        uint8_t **out, size_t *offsets);

/* ---- error-feedback state of the compressed ring -------------------------------------------- */

/* The residuals of one tensor on one rank: one compress_ef per chunk of the ring (stage-1
 * residuals for the chunks this rank sends, the stage-2 residual for the chunk it owns). */
typedef struct parallel_ef parallel_ef;

/* Zero residuals for a tensor of n floats on rank `rank` of `world`. The caller owns the result.
 * Returns NULL with wt_last_error() set (WT_EINVAL) when rank/world are out of range. */
parallel_ef *parallel_ef_new(size_t n, int rank, int world);
void parallel_ef_destroy(parallel_ef **self_p);

size_t parallel_ef_size(const parallel_ef *self);
int parallel_ef_world(const parallel_ef *self);
int parallel_ef_rank(const parallel_ef *self);

/* The residual of one chunk (owned by self), for inspection or checkpointing via ef.h. */
compress_ef *parallel_ef_chunk(parallel_ef *self, int chunk);

/* Sum of squares of every residual (a bounded number when error feedback works). */
double parallel_ef_sq_norm(const parallel_ef *self);

/* Sets every residual to zero (e.g. after the world size or the codec changed). */
void parallel_ef_reset(parallel_ef *self);

/* Checkpoint: magic "WTPE", u32 version 1, u64 n, u32 world, u32 rank, then one ef.h checkpoint
 * per chunk. Load requires the same n, world and rank (WT_EMISMATCH otherwise), WT_ECORRUPT on a
 * damaged file, WT_EIO on a read error; on failure the residuals may be partly loaded: reset. */
int parallel_ef_save(const parallel_ef *self, FILE *f);
int parallel_ef_load(parallel_ef *self, FILE *f);

/* ---- compressed collectives ----------------------------------------------------------------- */

/* In place, like parallel_allreduce, but each chunk is encoded with `codec` before it is sent
 * (two-stage error feedback above when ef is not NULL; plain lossy compression when it is). ef
 * must have been made for (n, this rank, world). All ranks end with identical bytes. With one
 * rank nothing travels, so x is left exact (not compressed). rand-k should get a new seed each
 * step, the same on every rank (compress_codec_set_seed between calls). Returns WT_OK,
 * WT_EMISMATCH (ef made for another geometry), WT_ECORRUPT (bad message) or the transport's /
 * codec's status. */
int parallel_allreduce_compressed(parallel_comm *c, const compress_codec *codec, float *x, size_t n,
                                  parallel_op op, parallel_ef *ef);

/* In place: x becomes Σ_r decode(encode_r(x_r + e_r)) (times 1/world for AVG), summed in rank
 * order on every rank (also with one rank: the result is then this rank's decoded selection).
 * ef (a compress_ef of n floats, or NULL for none) is this rank's sender residual. Returns as
 * parallel_allreduce_compressed. */
int parallel_allreduce_sparse(parallel_comm *c, const compress_codec *codec, float *x, size_t n,
                              parallel_op op, compress_ef *ef);

#endif
