/* group — the collectives of one mesh group as a table, so the tensor-, context- and
 * expert-parallel layers run the SAME code over the host ring (collectives.h on a parallel_comm,
 * host buffers) and over NCCL (nccl.h, device buffers). A layer never calls a back end directly:
 * it asks the mesh for its group (parallel_mesh_coll) and calls parallel_group_* on it. The
 * in-process tests therefore exercise the dispatch and the buffer handling that a GPU site runs;
 * only the table differs.
 *
 * A table also says where the layer's buffers live: alloc / free / copy / zero / upload /
 * download are host malloc and memcpy for the host table and cudaMalloc / cudaMemcpy for NCCL.
 *
 * Reduce-scatter chunk ownership (one convention for every table): the n floats are cut into
 * `size` chunks by parallel_chunk_range, and after parallel_group_reduce_scatter rank r holds the
 * full reduction of chunk (r + 1) mod size — the chunk the host ring leaves there
 * (parallel_chunk_owner). parallel_group_allgather takes the same ownership. NCCL implements
 * this by grouped reduces and broadcasts rooted at each chunk's owner (same bytes per rank as
 * its ring reduce-scatter / all-gather), so the host ring stays bitwise what it was and the
 * data-parallel code (ZeRO shards, the compressed ring's stage-2 residuals) keeps its owners.
 *
 * Point-to-point: sendrecv sends `send` to rank `to` and receives `bytes` from rank `from` into
 * `recv` as one step (either peer may be −1); alltoall moves block j of send to rank j. A message
 * of another length than expected is WT_ECORRUPT. `tag` separates a layer's streams on the host
 * (tags below PARALLEL_TAG_RESERVED); NCCL orders by call and ignores it.
 *
 *   const parallel_group_comm *tp = parallel_mesh_coll(mesh, PARALLEL_GROUP_TP);
 *   parallel_group_allreduce(tp, x, n, PARALLEL_OP_SUM);
 */
#ifndef WT_PARALLEL_GROUP_H
#define WT_PARALLEL_GROUP_H

#include "parallel/collectives/collectives.h"

#include <stddef.h>

typedef struct {
  const char *name;   /* "host", "nccl" */
  int device_buffers; /* 1: buffers are device memory (layers with host maths refuse the table) */
  int (*allreduce)(void *ctx, float *x, size_t n, parallel_op op);
  int (*reduce_scatter)(void *ctx, float *x, size_t n, parallel_op op); /* in place */
  int (*allgather)(void *ctx, float *x, size_t n);                      /* in place */
  int (*sendrecv)(void *ctx, int tag, const void *send, int to, void *recv, int from, size_t bytes);
  int (*alltoall)(void *ctx, int tag, const void *send, void *recv, size_t block_bytes);
  /* Buffers of this back end. alloc returns zeroed memory, or NULL with wt_last_error() set. */
  void *(*alloc)(size_t bytes);
  void (*free)(void *p);
  int (*copy)(void *dst, const void *src, size_t bytes); /* both this back end's buffers */
  int (*zero)(void *p, size_t bytes);
  int (*upload)(void *dst, const void *host_src, size_t bytes);
  int (*download)(void *host_dst, const void *src, size_t bytes);
} parallel_group_ops;

/* One group's back end: the table, its context (a parallel_comm * for the host table, a
 * parallel_nccl * for NCCL), and this rank's place in the group. */
typedef struct {
  const parallel_group_ops *ops;
  void *ctx;
  int rank, size;
} parallel_group_comm;

/* The host table: ctx is a parallel_comm *, buffers are host memory. */
const parallel_group_ops *parallel_group_host_ops(void);

/* Dispatch (each returns the back end's status). */
int parallel_group_allreduce(const parallel_group_comm *g, float *x, size_t n, parallel_op op);
int parallel_group_reduce_scatter(const parallel_group_comm *g, float *x, size_t n, parallel_op op);
int parallel_group_allgather(const parallel_group_comm *g, float *x, size_t n);
int parallel_group_sendrecv(const parallel_group_comm *g, int tag, const void *send, int to,
                            void *recv, int from, size_t bytes);
int parallel_group_alltoall(const parallel_group_comm *g, int tag, const void *send, void *recv,
                            size_t block_bytes);

/* Buffers: NULL (alloc, with wt_last_error() set) or the back end's status on failure. */
float *parallel_group_alloc(const parallel_group_comm *g, size_t n_floats);
void parallel_group_free(const parallel_group_comm *g, void *p);
int parallel_group_copy(const parallel_group_comm *g, void *dst, const void *src, size_t bytes);
int parallel_group_zero(const parallel_group_comm *g, void *p, size_t bytes);
int parallel_group_upload(const parallel_group_comm *g, void *dst, const void *src, size_t bytes);
int parallel_group_download(const parallel_group_comm *g, void *dst, const void *src, size_t bytes);

#endif
