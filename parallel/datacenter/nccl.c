/* nccl — the NCCL back end on device buffers (nccl.h). With WT_HAVE_NCCL the calls go to NCCL on
 * the communicator's own stream and wait with a deadline; without it the same functions refuse
 * with WT_ENOTSUP, so no caller needs an #ifdef. */
#include "parallel/datacenter/nccl.h"

#include "common/common.h"

#include <stdlib.h>
#include <string.h>

#ifdef WT_HAVE_NCCL

#include <cuda_runtime.h> // defines: cudaStream_t, cudaMalloc, cudaStreamQuery
#include <nccl.h>
#include <time.h>

struct parallel_nccl {
  ncclComm_t comm;
  cudaStream_t stream;
  int rank, size, device, aborted;
  double timeout_s;
};

int parallel_nccl_available(void) {
  int count = 0;
  cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess || count == 0) {
    wt_fail(WT_ENOTSUP, "nccl: no CUDA device is visible (%s); NCCL needs a GPU per rank",
            e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
    return 0;
  }
  return 1;
}

static void s_pause(void) {
  struct timespec ts = {0, 50 * 1000}; /* 50 µs: NCCL progresses on its own threads */
  nanosleep(&ts, NULL);
}

/* Aborts the communicator after a timeout or an asynchronous error: NCCL cannot cancel one
 * operation, only the whole communicator. */
static int s_abort(parallel_nccl *n, int code, const char *why) {
  if (!n->aborted) ncclCommAbort(n->comm);
  n->aborted = 1;
  return wt_fail(code,
                 "nccl rank %d/%d: %s; the communicator is aborted — destroy it and form a "
                 "new one",
                 n->rank, n->size, why);
}

/* Waits until the communicator is no longer busy initialising or enqueuing, with the deadline. */
static int s_wait_ready(parallel_nccl *n, double deadline) {
  ncclResult_t state = ncclInProgress;
  while (ncclCommGetAsyncError(n->comm, &state) == ncclSuccess && state == ncclInProgress) {
    if (wt_now_s() > deadline) return s_abort(n, WT_ETIMEOUT, "a peer did not join in time");
    s_pause();
  }
  if (state != ncclSuccess) return s_abort(n, WT_EIO, ncclGetErrorString(state));
  return WT_OK;
}

/* Checks an enqueue's result, then waits for the stream to finish with the deadline. */
static int s_finish(parallel_nccl *n, ncclResult_t r, const char *what) {
  if (r != ncclSuccess && r != ncclInProgress) {
    char why[256];
    snprintf(why, sizeof why, "%s failed: %s (%s)", what, ncclGetErrorString(r),
             ncclGetLastError(n->comm));
    return s_abort(n, WT_EIO, why);
  }
  double deadline = wt_now_s() + n->timeout_s;
  WT_CHECK(s_wait_ready(n, deadline));
  for (;;) {
    cudaError_t e = cudaStreamQuery(n->stream);
    if (e == cudaSuccess) return WT_OK;
    if (e != cudaErrorNotReady) return s_abort(n, WT_EIO, cudaGetErrorString(e));
    ncclResult_t state = ncclSuccess;
    ncclCommGetAsyncError(n->comm, &state);
    if (state != ncclSuccess && state != ncclInProgress)
      return s_abort(n, WT_EIO, ncclGetErrorString(state));
    if (wt_now_s() > deadline) return s_abort(n, WT_ETIMEOUT, "an operation did not complete");
    s_pause();
  }
}

static int s_usable(const parallel_nccl *n) {
  return n->aborted ? wt_fail(WT_EIO, "nccl: the communicator was aborted; form a new one") : WT_OK;
}

/* What rank 0 broadcasts: whether it could make an id, and the id. Every rank learns a failure
 * at rank 0 together instead of waiting for an id that never comes. */
typedef struct {
  int32_t status;
  ncclUniqueId id;
} s_hello;

parallel_nccl *parallel_nccl_new(parallel_comm *bootstrap, int device) {
  int rank = parallel_comm_rank(bootstrap), size = parallel_comm_size(bootstrap);
  s_hello hello;
  memset(&hello, 0, sizeof hello);
  if (rank == 0) {
    if (!parallel_nccl_available())
      hello.status = WT_ENOTSUP;
    else if (ncclGetUniqueId(&hello.id) != ncclSuccess)
      hello.status = WT_EIO;
  }
  if (parallel_broadcast(bootstrap, &hello, sizeof hello, 0) != WT_OK) return NULL;
  if (hello.status != WT_OK) {
    if (rank != 0) wt_fail(hello.status, "nccl: rank 0 could not make an NCCL id (no GPU or NCCL)");
    return NULL;
  }
  if (cudaSetDevice(device) != cudaSuccess) {
    wt_fail(WT_ENOTSUP, "nccl: rank %d cannot use CUDA device %d; give each rank a visible GPU",
            rank, device);
    return NULL;
  }
  parallel_nccl *n = wt_xcalloc(1, sizeof *n);
  n->rank = rank, n->size = size, n->device = device, n->timeout_s = 120;
  if (cudaStreamCreateWithFlags(&n->stream, cudaStreamNonBlocking) != cudaSuccess) {
    wt_fail(WT_EIO, "nccl: cannot create a CUDA stream on device %d", device);
    free(n);
    return NULL;
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0; /* so that joining has a deadline too */
  ncclResult_t r = ncclCommInitRankConfig(&n->comm, size, hello.id, rank, &config);
  int rc = r == ncclSuccess || r == ncclInProgress
               ? s_wait_ready(n, wt_now_s() + n->timeout_s)
               : wt_fail(WT_EIO, "nccl: joining failed: %s", ncclGetErrorString(r));
  if (rc != WT_OK) {
    if (r == ncclSuccess || r == ncclInProgress) ncclCommDestroy(n->comm);
    cudaStreamDestroy(n->stream);
    free(n);
    return NULL;
  }
  return n;
}

void parallel_nccl_destroy(parallel_nccl **self_p) {
  if (!self_p || !*self_p) return;
  parallel_nccl *n = *self_p;
  /* Finalize flushes outstanding work; with a non-blocking communicator it may still be in
   * progress when it returns, so wait (with the deadline) before freeing. */
  if (!n->aborted && ncclCommFinalize(n->comm) != ncclInternalError)
    (void)s_wait_ready(n, wt_now_s() + n->timeout_s);
  ncclCommDestroy(n->comm);
  cudaStreamDestroy(n->stream);
  free(n);
  *self_p = NULL;
}

static ncclRedOp_t s_op(parallel_op op) {
  return op == PARALLEL_OP_AVG ? ncclAvg : ncclSum;
}

int parallel_nccl_allreduce(parallel_nccl *n, float *x, size_t count, parallel_op op) {
  WT_CHECK(s_usable(n));
  return s_finish(n, ncclAllReduce(x, x, count, ncclFloat32, s_op(op), n->comm, n->stream),
                  "all-reduce");
}

int parallel_nccl_reduce_scatter(parallel_nccl *n, const float *send, float *recv, size_t count,
                                 parallel_op op) {
  WT_CHECK(s_usable(n));
  return s_finish(n,
                  ncclReduceScatter(send, recv, count, ncclFloat32, s_op(op), n->comm, n->stream),
                  "reduce-scatter");
}

int parallel_nccl_allgather(parallel_nccl *n, const float *send, float *recv, size_t count) {
  WT_CHECK(s_usable(n));
  return s_finish(n, ncclAllGather(send, recv, count, ncclFloat32, n->comm, n->stream),
                  "all-gather");
}

int parallel_nccl_broadcast(parallel_nccl *n, void *buf, size_t bytes, int root) {
  WT_CHECK(s_usable(n));
  return s_finish(n, ncclBroadcast(buf, buf, bytes, ncclUint8, root, n->comm, n->stream),
                  "broadcast");
}

int parallel_nccl_sendrecv(parallel_nccl *n, const void *send, int send_peer, void *recv,
                           int recv_peer, size_t bytes) {
  WT_CHECK(s_usable(n));
  ncclResult_t r = ncclGroupStart();
  if (r == ncclSuccess && send_peer >= 0)
    r = ncclSend(send, bytes, ncclUint8, send_peer, n->comm, n->stream);
  if ((r == ncclSuccess || r == ncclInProgress) && recv_peer >= 0)
    r = ncclRecv(recv, bytes, ncclUint8, recv_peer, n->comm, n->stream);
  ncclResult_t end = ncclGroupEnd();
  return s_finish(n, r == ncclSuccess || r == ncclInProgress ? end : r, "send/recv");
}

int parallel_nccl_alltoall(parallel_nccl *n, const void *send, void *recv, size_t bytes) {
  WT_CHECK(s_usable(n));
  ncclResult_t r = ncclGroupStart();
  for (int peer = 0; peer < n->size && (r == ncclSuccess || r == ncclInProgress); peer++) {
    r = ncclSend((const char *)send + (size_t)peer * bytes, bytes, ncclUint8, peer, n->comm,
                 n->stream);
    if (r == ncclSuccess || r == ncclInProgress)
      r = ncclRecv((char *)recv + (size_t)peer * bytes, bytes, ncclUint8, peer, n->comm, n->stream);
  }
  ncclResult_t end = ncclGroupEnd();
  return s_finish(n, r == ncclSuccess || r == ncclInProgress ? end : r, "all-to-all");
}

int parallel_nccl_rank(const parallel_nccl *n) {
  return n->rank;
}
int parallel_nccl_size(const parallel_nccl *n) {
  return n->size;
}
void parallel_nccl_set_timeout(parallel_nccl *n, double timeout_s) {
  n->timeout_s = timeout_s;
}

void *parallel_nccl_mem_alloc(size_t bytes) {
  void *p = NULL;
  cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
  if (e != cudaSuccess) {
    wt_fail(WT_ENOMEM, "nccl: cudaMalloc of %zu bytes failed: %s", bytes, cudaGetErrorString(e));
    return NULL;
  }
  return p;
}

void parallel_nccl_mem_free(void *p) {
  if (p) cudaFree(p);
}

int parallel_nccl_mem_upload(void *dst, const void *src, size_t bytes) {
  cudaError_t e = cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice);
  return e == cudaSuccess ? WT_OK
                          : wt_fail(WT_EIO, "nccl: upload failed: %s", cudaGetErrorString(e));
}

int parallel_nccl_mem_download(void *dst, const void *src, size_t bytes) {
  cudaError_t e = cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost);
  return e == cudaSuccess ? WT_OK
                          : wt_fail(WT_EIO, "nccl: download failed: %s", cudaGetErrorString(e));
}

/* The layers' kernels may run on another stream than the communicator's (its stream does not
 * wait for the legacy default stream): finish all device work before a collective reads it. */
static int s_sync(void) {
  cudaError_t e = cudaDeviceSynchronize();
  return e == cudaSuccess ? WT_OK
                          : wt_fail(WT_EIO, "nccl: device work before a collective failed: %s",
                                    cudaGetErrorString(e));
}

/* Chunk c of the n floats reduced onto its owner (group.h): one grouped launch of reduces. */
static int s_reduce_owned(parallel_nccl *n, float *x, size_t count, parallel_op op) {
  WT_CHECK(s_usable(n));
  ncclResult_t r = ncclGroupStart();
  for (int c = 0; c < n->size && (r == ncclSuccess || r == ncclInProgress); c++) {
    size_t off, len;
    parallel_chunk_range(count, n->size, c, &off, &len);
    if (len)
      r = ncclReduce(x + off, x + off, len, ncclFloat32, s_op(op), parallel_chunk_owner(c, n->size),
                     n->comm, n->stream);
  }
  ncclResult_t end = ncclGroupEnd();
  return s_finish(n, r == ncclSuccess || r == ncclInProgress ? end : r, "reduce-scatter");
}

/* Each owner's chunk to every rank: one grouped launch of broadcasts. */
static int s_gather_owned(parallel_nccl *n, float *x, size_t count) {
  WT_CHECK(s_usable(n));
  ncclResult_t r = ncclGroupStart();
  for (int c = 0; c < n->size && (r == ncclSuccess || r == ncclInProgress); c++) {
    size_t off, len;
    parallel_chunk_range(count, n->size, c, &off, &len);
    if (len)
      r = ncclBroadcast(x + off, x + off, len, ncclFloat32, parallel_chunk_owner(c, n->size),
                        n->comm, n->stream);
  }
  ncclResult_t end = ncclGroupEnd();
  return s_finish(n, r == ncclSuccess || r == ncclInProgress ? end : r, "all-gather");
}

static int s_mem_copy(void *dst, const void *src, size_t bytes) {
  cudaError_t e = cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice);
  return e == cudaSuccess ? WT_OK
                          : wt_fail(WT_EIO, "nccl: device copy failed: %s", cudaGetErrorString(e));
}

static int s_mem_zero(void *p, size_t bytes) {
  cudaError_t e = cudaMemset(p, 0, bytes);
  return e == cudaSuccess
             ? WT_OK
             : wt_fail(WT_EIO, "nccl: device memset failed: %s", cudaGetErrorString(e));
}

#else /* no NCCL in this build: the same functions, refusing */

struct parallel_nccl {
  int rank, size;
};

static int s_none(void) {
  return wt_fail(WT_ENOTSUP, "nccl: this build has no NCCL; build with the CUDA toolkit and its "
                             "NCCL (WANTRAIN_CUDA=AUTO or ON) to use GPU communicators");
}

int parallel_nccl_available(void) {
  s_none();
  return 0;
}

parallel_nccl *parallel_nccl_new(parallel_comm *bootstrap, int device) {
  (void)bootstrap, (void)device;
  s_none();
  return NULL;
}

void parallel_nccl_destroy(parallel_nccl **self_p) {
  if (!self_p || !*self_p) return;
  free(*self_p);
  *self_p = NULL;
}

int parallel_nccl_rank(const parallel_nccl *n) {
  return n->rank;
}
int parallel_nccl_size(const parallel_nccl *n) {
  return n->size;
}
void parallel_nccl_set_timeout(parallel_nccl *n, double timeout_s) {
  (void)n, (void)timeout_s;
}

int parallel_nccl_allreduce(parallel_nccl *n, float *x, size_t count, parallel_op op) {
  (void)n, (void)x, (void)count, (void)op;
  return s_none();
}
int parallel_nccl_reduce_scatter(parallel_nccl *n, const float *send, float *recv, size_t count,
                                 parallel_op op) {
  (void)n, (void)send, (void)recv, (void)count, (void)op;
  return s_none();
}
int parallel_nccl_allgather(parallel_nccl *n, const float *send, float *recv, size_t count) {
  (void)n, (void)send, (void)recv, (void)count;
  return s_none();
}
int parallel_nccl_broadcast(parallel_nccl *n, void *buf, size_t bytes, int root) {
  (void)n, (void)buf, (void)bytes, (void)root;
  return s_none();
}
int parallel_nccl_sendrecv(parallel_nccl *n, const void *send, int send_peer, void *recv,
                           int recv_peer, size_t bytes) {
  (void)n, (void)send, (void)send_peer, (void)recv, (void)recv_peer, (void)bytes;
  return s_none();
}
int parallel_nccl_alltoall(parallel_nccl *n, const void *send, void *recv, size_t bytes) {
  (void)n, (void)send, (void)recv, (void)bytes;
  return s_none();
}

void *parallel_nccl_mem_alloc(size_t bytes) {
  (void)bytes;
  s_none();
  return NULL;
}
void parallel_nccl_mem_free(void *p) {
  (void)p;
}
int parallel_nccl_mem_upload(void *dst, const void *src, size_t bytes) {
  (void)dst, (void)src, (void)bytes;
  return s_none();
}
int parallel_nccl_mem_download(void *dst, const void *src, size_t bytes) {
  (void)dst, (void)src, (void)bytes;
  return s_none();
}

static int s_sync(void) {
  return s_none();
}
static int s_reduce_owned(parallel_nccl *n, float *x, size_t count, parallel_op op) {
  (void)n, (void)x, (void)count, (void)op;
  return s_none();
}
static int s_gather_owned(parallel_nccl *n, float *x, size_t count) {
  (void)n, (void)x, (void)count;
  return s_none();
}
static int s_mem_copy(void *dst, const void *src, size_t bytes) {
  (void)dst, (void)src, (void)bytes;
  return s_none();
}
static int s_mem_zero(void *p, size_t bytes) {
  (void)p, (void)bytes;
  return s_none();
}

#endif

/* ---- the group table (group.h): the same in both builds, over the functions above ---------- */

static int s_g_allreduce(void *ctx, float *x, size_t n, parallel_op op) {
  WT_CHECK(s_sync());
  return parallel_nccl_allreduce(ctx, x, n, op);
}

static int s_g_reduce_scatter(void *ctx, float *x, size_t n, parallel_op op) {
  WT_CHECK(s_sync());
  return s_reduce_owned(ctx, x, n, op);
}

static int s_g_allgather(void *ctx, float *x, size_t n) {
  WT_CHECK(s_sync());
  return s_gather_owned(ctx, x, n);
}

/* NCCL may receive before it has sent, so a receive into the send buffer goes through a copy. */
static int s_g_sendrecv(void *ctx, int tag, const void *send, int to, void *recv, int from,
                        size_t bytes) {
  (void)tag; /* NCCL matches by call order */
  WT_CHECK(s_sync());
  const char *s0 = send, *r0 = recv;
  int overlap = to >= 0 && from >= 0 && s0 < r0 + bytes && r0 < s0 + bytes;
  if (!overlap) return parallel_nccl_sendrecv(ctx, send, to, recv, from, bytes);
  void *tmp = parallel_nccl_mem_alloc(bytes);
  if (!tmp) return wt_last_status();
  int rc = parallel_nccl_sendrecv(ctx, send, to, tmp, from, bytes);
  if (rc == WT_OK) rc = s_mem_copy(recv, tmp, bytes);
  parallel_nccl_mem_free(tmp);
  return rc;
}

static int s_g_alltoall(void *ctx, int tag, const void *send, void *recv, size_t bytes) {
  (void)tag;
  WT_CHECK(s_sync());
  return parallel_nccl_alltoall(ctx, send, recv, bytes);
}

static void *s_g_alloc(size_t bytes) {
  void *p = parallel_nccl_mem_alloc(bytes);
  if (p && s_mem_zero(p, bytes) != WT_OK) {
    parallel_nccl_mem_free(p);
    return NULL;
  }
  return p;
}

static const parallel_group_ops s_group_ops = {
    .name = "nccl",
    .device_buffers = 1,
    .allreduce = s_g_allreduce,
    .reduce_scatter = s_g_reduce_scatter,
    .allgather = s_g_allgather,
    .sendrecv = s_g_sendrecv,
    .alltoall = s_g_alltoall,
    .alloc = s_g_alloc,
    .free = parallel_nccl_mem_free,
    .copy = s_mem_copy,
    .zero = s_mem_zero,
    .upload = parallel_nccl_mem_upload,
    .download = parallel_nccl_mem_download,
};

const parallel_group_ops *parallel_nccl_group_ops(void) {
  return &s_group_ops;
}

int parallel_nccl_attach(parallel_nccl *n, parallel_mesh *mesh, parallel_group g) {
  return parallel_mesh_set_coll(mesh, g, &s_group_ops, n, parallel_nccl_rank(n),
                                parallel_nccl_size(n));
}
