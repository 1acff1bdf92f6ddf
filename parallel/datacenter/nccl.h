/* nccl — the NCCL back end: collectives and point-to-point on device buffers among the GPUs of
 * one site, for the tensor-, context- and expert-parallel groups of a device mesh.
 *
 * An NCCL communicator is created from an NCCL unique id that rank 0 makes and broadcasts over an
 * existing communicator (the site's ZeroMQ control channel, or any parallel_comm; in-process for
 * tests). Every rank of `bootstrap` calls parallel_nccl_new together; NCCL rank = bootstrap rank.
 *
 * Buffers are device pointers (cudaMalloc'd, or from parallel_nccl_mem_alloc). Operations are
 * enqueued on the communicator's own CUDA stream and each call waits for its completion with a
 * deadline (the timeout, default 120 s): a peer that never joins makes the call abort the NCCL
 * communicator and return WT_ETIMEOUT instead of hanging; an NCCL or CUDA failure gives WT_EIO
 * with NCCL's message. After an abort the communicator is unusable (every call returns WT_EIO):
 * destroy it and form a new one.
 *
 * Built when the CUDA toolkit and NCCL are found (parallel/CMakeLists.txt). Without them — or on
 * a machine with no GPU — the same functions exist: parallel_nccl_new returns NULL with WT_ENOTSUP
 * and a message saying why, and parallel_nccl_available() returns 0, so callers need no #ifdef.
 *
 *   parallel_nccl *n = parallel_nccl_new(tp_group, 0);          // device 0
 *   float *x = parallel_nccl_mem_alloc(bytes);                  // device memory
 *   parallel_nccl_allreduce(n, x, count, PARALLEL_OP_SUM);
 *   parallel_nccl_destroy(&n);
 */
#ifndef WT_PARALLEL_NCCL_H
#define WT_PARALLEL_NCCL_H

#include "parallel/collectives/collectives.h"
#include "parallel/datacenter/group.h"
#include "parallel/datacenter/mesh.h"

#include <stddef.h>

typedef struct parallel_nccl parallel_nccl;

/* 1 when this build has NCCL and a CUDA device is visible; else 0 and wt_last_error() says why. */
int parallel_nccl_available(void);

/* Collective over `bootstrap` (all its ranks call it): rank 0 makes the unique id, broadcasts it,
 * and each rank joins on CUDA device `device`. Returns NULL with wt_last_error() set: WT_ENOTSUP
 * without NCCL or a GPU, WT_ETIMEOUT if the group does not form in time, WT_EIO on NCCL failure,
 * or the bootstrap's error. */
parallel_nccl *parallel_nccl_new(parallel_comm *bootstrap, int device);
void parallel_nccl_destroy(parallel_nccl **self_p);

int parallel_nccl_rank(const parallel_nccl *n);
int parallel_nccl_size(const parallel_nccl *n);
void parallel_nccl_set_timeout(parallel_nccl *n, double timeout_s);

/* In place over count floats: every rank's x becomes the sum (or average). */
int parallel_nccl_allreduce(parallel_nccl *n, float *x, size_t count, parallel_op op);
/* recv (count floats) = rank's block of the reduction of send (size·count floats). */
int parallel_nccl_reduce_scatter(parallel_nccl *n, const float *send, float *recv, size_t count,
                                 parallel_op op);
/* recv (size·count floats) = every rank's send (count floats), in rank order. */
int parallel_nccl_allgather(parallel_nccl *n, const float *send, float *recv, size_t count);
/* root's buf (bytes) to every rank. */
int parallel_nccl_broadcast(parallel_nccl *n, void *buf, size_t bytes, int root);
/* One grouped send to send_peer and receive from recv_peer (bytes each; either peer may be -1 to
 * skip that half), so a ring step cannot deadlock. */
int parallel_nccl_sendrecv(parallel_nccl *n, const void *send, int send_peer, void *recv,
                           int recv_peer, size_t bytes);
/* All-to-all by grouped send/recv: block j (bytes) of send goes to rank j, block i of recv comes
 * from rank i. */
int parallel_nccl_alltoall(parallel_nccl *n, const void *send, void *recv, size_t bytes);

/* The group table (group.h) over an NCCL communicator (ctx = the parallel_nccl *): the
 * collectives on device buffers, reduce-scatter / all-gather with the chunk ownership of group.h
 * (rank r holds chunk (r + 1) mod size, by grouped ncclReduce / ncclBroadcast rooted at each
 * owner), buffers from cudaMalloc. Each call first waits for the device's outstanding work, so
 * kernels on any stream are complete before NCCL reads their output. */
const parallel_group_ops *parallel_nccl_group_ops(void);

/* Makes mesh group g's layers use n (formed over parallel_mesh_group(mesh, g)): WT_OK, or
 * WT_EINVAL when n's rank or size differ from the group's. */
int parallel_nccl_attach(parallel_nccl *n, parallel_mesh *mesh, parallel_group g);

/* Device memory for tests and callers without a device allocator: NULL with wt_last_error() set
 * on failure or without CUDA. Copies are synchronous; each returns WT_OK or WT_EIO / WT_ENOTSUP. */
void *parallel_nccl_mem_alloc(size_t bytes);
void parallel_nccl_mem_free(void *p);
int parallel_nccl_mem_upload(void *dst_device, const void *src_host, size_t bytes);
int parallel_nccl_mem_download(void *dst_host, const void *src_device, size_t bytes);

#endif
