/* memory — the CUDA back end's memory entries (device buffers, copies to and from the host),
 * the device sum of squares behind the global gradient norm, and device selection.
 *
 * Copies use cudaMemcpy on the default stream, which also waits for the kernels queued before
 * them: a download after a forward sees its results without another synchronisation. */
#include <math.h>
#include <string.h>

#include "kernels/cuda/cuda_internal.cuh"

extern "C" int kernels_cuda_select(int dev, int *count, char *why, size_t why_len) {
  int n = 0;
  cudaError_t err = cudaGetDeviceCount(&n);
  *count = err == cudaSuccess ? n : 0;
  if (err == cudaSuccess && dev < n) err = cudaSetDevice(dev);
  if (err == cudaSuccess && dev < n) return 0;
  snprintf(why, why_len, "%s", err == cudaSuccess ? "" : cudaGetErrorString(err));
  return -1;
}

void *kernels_cuda_alloc(size_t bytes) {
  void *p = NULL;
  if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
    (void)cudaGetLastError(); /* an allocation failure is reported as NULL, not kept sticky */
    return NULL;
  }
  WT_CUDA_CHECK(cudaMemset(p, 0, bytes));
  return p;
}

void *wt_cuda_scratch(wt_cuda_scratch_slot slot, size_t bytes) {
  static void *buf[WT_SCRATCH_COUNT];
  static size_t cap[WT_SCRATCH_COUNT];
  if (bytes > cap[slot]) {
    if (buf[slot]) WT_CUDA_CHECK(cudaFree(buf[slot]));
    WT_CUDA_CHECK(cudaMalloc(&buf[slot], bytes));
    cap[slot] = bytes;
  }
  return buf[slot];
}

void kernels_cuda_free(void *p) {
  if (p) WT_CUDA_CHECK(cudaFree(p));
}

void kernels_cuda_upload(void *dst, const void *src, size_t bytes) {
  if (bytes) WT_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}

void kernels_cuda_download(void *dst, const void *src, size_t bytes) {
  if (bytes) WT_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}

void kernels_cuda_copy(void *dst, const void *src, size_t bytes) {
  if (bytes && dst != src) WT_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToDevice));
}

void kernels_cuda_zero(void *p, size_t bytes) {
  if (bytes) WT_CUDA_CHECK(cudaMemset(p, 0, bytes));
}

void *kernels_cuda_host_alloc(size_t bytes) {
  void *p = NULL;
  if (cudaMallocHost(&p, bytes ? bytes : 1) != cudaSuccess) {
    (void)cudaGetLastError();
    return NULL;
  }
  memset(p, 0, bytes);
  return p;
}

void kernels_cuda_host_free(void *p) {
  if (p) WT_CUDA_CHECK(cudaFreeHost(p));
}

/* The copy stream of the asynchronous copies: non-blocking, so that it does not synchronise
 * with the legacy default stream the ops run on; events order it against that stream. */
static cudaStream_t s_copy_stream;
static cudaEvent_t s_ops_done, s_upload_done;

static void s_copy_stream_init(void) {
  if (s_copy_stream) return;
  WT_CUDA_CHECK(cudaStreamCreateWithFlags(&s_copy_stream, cudaStreamNonBlocking));
  WT_CUDA_CHECK(cudaEventCreateWithFlags(&s_ops_done, cudaEventDisableTiming));
  WT_CUDA_CHECK(cudaEventCreateWithFlags(&s_upload_done, cudaEventDisableTiming));
}

void kernels_cuda_download_async(void *dst, const void *src, size_t bytes) {
  if (!bytes) return;
  s_copy_stream_init();
  WT_CUDA_CHECK(cudaEventRecord(s_ops_done, 0)); /* after everything queued so far */
  WT_CUDA_CHECK(cudaStreamWaitEvent(s_copy_stream, s_ops_done, 0));
  WT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s_copy_stream));
}

void kernels_cuda_upload_async(void *dst, const void *src, size_t bytes) {
  if (!bytes) return;
  s_copy_stream_init();
  WT_CUDA_CHECK(cudaEventRecord(s_ops_done, 0)); /* the buffer's earlier readers go first */
  WT_CUDA_CHECK(cudaStreamWaitEvent(s_copy_stream, s_ops_done, 0));
  WT_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s_copy_stream));
  WT_CUDA_CHECK(cudaEventRecord(s_upload_done, s_copy_stream));
  WT_CUDA_CHECK(cudaStreamWaitEvent(0, s_upload_done, 0)); /* later ops see the data */
}

void kernels_cuda_copy_wait(void) {
  if (s_copy_stream) WT_CUDA_CHECK(cudaStreamSynchronize(s_copy_stream));
}

double kernels_cuda_mem_total(void) {
  size_t free_b = 0, total_b = 0;
  if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return (double)free_b; /* what this process can still allocate: other jobs may share the GPU */
}

/* Sum of squares: block b of NORM_THREADS threads covers elements [b·NORM_BLOCK, (b+1)·NORM_BLOCK)
 * with thread i summing its strided elements in double, then a fixed shared-memory tree; the
 * per-block partials are summed on the host in block order. Every grouping depends on n alone:
 * the result is bitwise the same on every run (no atomics). */
#define NORM_THREADS 256
#define NORM_BLOCK (1 << 16)

__global__ static void k_sq_norm(double *partial, const float *x, size_t n) {
  __shared__ double sh[NORM_THREADS];
  size_t lo = (size_t)blockIdx.x * NORM_BLOCK;
  size_t hi = lo + NORM_BLOCK < n ? lo + NORM_BLOCK : n;
  double acc = 0.0;
  for (size_t i = lo + threadIdx.x; i < hi; i += NORM_THREADS) acc += (double)x[i] * x[i];
  sh[threadIdx.x] = acc;
  __syncthreads();
  for (int w = NORM_THREADS / 2; w > 0; w >>= 1) {
    if ((int)threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) partial[blockIdx.x] = sh[0];
}

double kernels_cuda_sq_norm(const float *x, size_t n) {
  size_t nb = (n + NORM_BLOCK - 1) / NORM_BLOCK;
  if (nb == 0) return 0.0;
  double *d_part = NULL;
  WT_CUDA_CHECK(cudaMalloc(&d_part, nb * sizeof(double)));
  k_sq_norm<<<(unsigned)nb, NORM_THREADS>>>(d_part, x, n);
  WT_CUDA_CHECK(cudaGetLastError());
  double *part = (double *)malloc(nb * sizeof(double));
  if (!part) {
    fprintf(stderr, "kernels_cuda_sq_norm: out of host memory\n");
    abort();
  }
  WT_CUDA_CHECK(cudaMemcpy(part, d_part, nb * sizeof(double), cudaMemcpyDeviceToHost));
  WT_CUDA_CHECK(cudaFree(d_part));
  double sum = 0.0;
  for (size_t b = 0; b < nb; b++) sum += part[b];
  free(part);
  return sum;
}
