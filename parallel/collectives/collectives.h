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
 * ---- robust all-reduce ---------------------------------------------------------------------
 * parallel_robust_allreduce is for groups whose members may lie (docs/trust.md). A ring sum lets
 * no one see another replica's contribution, so one NaN, a gradient ×1000 or a flipped sign
 * reaches every replica unseen. Here each rank's contribution (encoded with the run's codec and
 * sender error feedback, or raw fp32) is all-gathered, so every rank holds the same bytes of
 * every contribution; each rank decodes them all and computes, with the same arithmetic in the
 * same order, a robust estimate of their mean — so the result is BITWISE IDENTICAL on every rank:
 *   trimmed-mean   per coordinate, the mean after dropping the b lowest and b highest values,
 *                  b = floor(m / 4) (at least 1 once m >= 3) of the m contributions used;
 *   median         per coordinate (the mean of the two middle values for even m);
 *   centered-clip  Karimireddy et al. 2021: from the coordinate-wise median v, three rounds of
 *                  v += (1/m) Σ_j (x_j − v) · min(1, τ / |x_j − v|), τ the median of |x_j − v₀|.
 * Values sort by a total order (NaN above +inf), so a NaN that got in is trimmed like a huge value.
 * Detection runs before the aggregate, on what every rank saw, so every rank flags alike: a
 * contribution that does not decode, holds NaN/Inf, is all zeros (a free rider), repeats the
 * bytes of one of its sender's last PARALLEL_ROBUST_REPLAY contributions (a stale copy), whose
 * log-norm lies further from the median of the group's history than max(ln norm_ratio, norm_k ·
 * σ) (σ = 1.4826 · MAD), or whose cosine to the aggregate is below median − max(cos_k · σ,
 * median / 2) of the history's cosines (the lowest first, never a majority of what is left), is
 * left out; the aggregate is recomputed without it, and
 * the report carries the evidence. The history (the norms and cosines of accepted contributions,
 * the last `history` of them plus this step's) lives in the parallel_robust object: every rank
 * of a group must make its object at the same step (a tasklet does, at its start), or their
 * thresholds, and then their results, differ. The norm and cosine tests need m >= 3 (a majority
 * to compare with). Cost: each rank sends (world−1) × its payload, world/2 times the ring's
 * 2 (world−1)/world × payload, and decodes world payloads.
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
/* The same from this rank's payload mine[0..len), already encoded (e.g. on a GPU by
 * compress/codec_gpu.h, whose bytes are the CPU codec's): all-gathers the payloads (none may
 * exceed compress_codec_max_size(codec, n)) and writes the sum, in rank order, into x[0..n).
 * Returns as parallel_allreduce_sparse. */
int parallel_allreduce_sparse_payload(parallel_comm *c, const compress_codec *codec,
                                      const uint8_t *mine, size_t len, float *x, size_t n,
                                      parallel_op op);

/* ---- robust all-reduce (see the top) -------------------------------------------------------- */

typedef enum {
  PARALLEL_ROBUST_NONE = 0,      /* no robust aggregate: the plain (or compressed) ring */
  PARALLEL_ROBUST_TRIMMED_MEAN,  /* coordinate-wise trimmed mean */
  PARALLEL_ROBUST_MEDIAN,        /* coordinate-wise median */
  PARALLEL_ROBUST_CENTERED_CLIP, /* centered clipping around the median */
} parallel_robust_kind;

/* The names, as an option's choices take them. */
#define PARALLEL_ROBUST_NAMES "none|trimmed-mean|median|centered-clip"
#define PARALLEL_ROBUST_MAX_RANKS 64
#define PARALLEL_ROBUST_REPLAY 8 /* recent contributions per sender a replay is checked against */

/* The kind called `name`. Returns WT_OK or WT_EINVAL listing the names (*kind unchanged). */
int parallel_robust_kind_parse(const char *name, parallel_robust_kind *kind);
const char *parallel_robust_kind_name(parallel_robust_kind kind);

/* out[0..n) = the aggregate of the rows j < world with use[j] != 0 (use NULL: all) of rows
 * (world × n floats, row j = contribution j). NONE is their mean in row order. With no row used
 * out is all zeros. Deterministic: the same inputs give the same bits on every machine with
 * IEEE floats. Never fails. */
void parallel_robust_aggregate(parallel_robust_kind kind, const float *rows, int world, size_t n,
                               const uint8_t *use, float *out);

/* Why a contribution was left out (bits of parallel_robust_evidence.flags). */
enum {
  PARALLEL_ROBUST_FLAG_CORRUPT = 1 << 0,   /* its payload did not decode */
  PARALLEL_ROBUST_FLAG_NONFINITE = 1 << 1, /* NaN or Inf in it */
  PARALLEL_ROBUST_FLAG_ZERO = 1 << 2,      /* all zeros */
  PARALLEL_ROBUST_FLAG_REPLAY = 1 << 3,    /* the same bytes as one of its sender's recent ones */
  PARALLEL_ROBUST_FLAG_NORM = 1 << 4,      /* norm outside the history's band */
  PARALLEL_ROBUST_FLAG_COSINE = 1 << 5,    /* cosine to the aggregate below the history's band */
};

/* "nonfinite,norm" for flags (or "" for none) into buf[0..cap), always NUL-terminated. */
void parallel_robust_flags_str(uint32_t flags, char *buf, size_t cap);

typedef struct {
  uint32_t flags; /* PARALLEL_ROBUST_FLAG_* bits; 0: used in the aggregate */
  double norm;    /* L2 norm of the decoded contribution (NAN when it did not decode) */
  double cosine;  /* cosine to the final aggregate (NAN when either is zero or non-finite) */
} parallel_robust_evidence;

/* One call's evidence: per rank of the communicator, and the band each test used. */
typedef struct {
  int world, used;                      /* contributions, and how many the aggregate used */
  double norm_median, norm_lo, norm_hi; /* accepted norms lay in [norm_lo, norm_hi] (0, inf: off) */
  double cos_median, cos_min;           /* accepted cosines were >= cos_min (-inf: off) */
  parallel_robust_evidence rank[PARALLEL_ROBUST_MAX_RANKS];
} parallel_robust_report;

typedef struct {
  parallel_robust_kind kind; /* not NONE */
  int history;               /* accepted contributions whose norms and cosines are kept (64) */
  double norm_ratio;         /* norms within this factor of the median always pass (3) */
  double norm_k;             /* ... else within norm_k robust deviations of the log-norm (6) */
  double cos_k;              /* cosine band: median − max(cos_k·σ, median/2) (4) */
} parallel_robust_config;

/* The defaults above, for `kind`. */
parallel_robust_config parallel_robust_config_default(parallel_robust_kind kind);

/* The state of one tensor's robust syncs on one rank: the detection history and each sender's
 * recent digests. Returns NULL with wt_last_error() (WT_EINVAL) for kind NONE or bounds out of
 * range. The caller owns it. */
typedef struct parallel_robust parallel_robust;
parallel_robust *parallel_robust_new(const parallel_robust_config *cfg);
void parallel_robust_destroy(parallel_robust **self_p);
const parallel_robust_config *parallel_robust_get_config(const parallel_robust *self);

/* In place: x[0..n) becomes the robust aggregate (an estimate of the mean) of every rank's x,
 * each sent as codec's payload of x + e (ef: this rank's sender residual of n floats, or NULL),
 * or as raw fp32 when codec is NULL. report (may be NULL) receives the evidence, the same on
 * every rank. A contribution that is malformed or flagged is left out, never an error. Returns
 * WT_OK, WT_EINVAL (world above PARALLEL_ROBUST_MAX_RANKS), WT_EMISMATCH (ef of another size, or
 * the ranks announcing more than world × (4n + 64) bytes in all), or the transport's / codec's
 * status; x is then unchanged (the residual may have advanced). */
int parallel_robust_allreduce(parallel_robust *self, parallel_comm *c, const compress_codec *codec,
                              compress_ef *ef, float *x, size_t n, parallel_robust_report *report);

/* Asks the next parallel_robust_allreduce (that one only) to copy rank `rank`'s decoded
 * contribution, n floats, into out — what every rank received from it, for a spot check. A
 * contribution that did not decode (flagged corrupt) leaves out undefined; a failed call leaves
 * it untouched. */
void parallel_robust_keep_next(parallel_robust *self, int rank, float *out);

#endif
