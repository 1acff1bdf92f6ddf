/* hostdev — a kernels back end for tests that is a device in everything but speed: it computes
 * with the CPU back end's ops, but its buffers live in "device memory" the host cannot touch.
 *
 * Its alloc hands out addresses in a range mapped PROT_NONE; the bytes live in a second, private
 * mapping at the same offsets. Every op of the table translates its pointer arguments to that
 * mapping before calling the CPU op, and upload / download / copy are real copies between host
 * memory and it. So:
 *   - host code that dereferences a device pointer (a runtime that reduces the gradient in place
 *     instead of downloading it) dies at once with SIGSEGV, and the handler says why;
 *   - an op handed a host pointer where a device pointer belongs aborts with a message;
 *   - what is computed is bitwise what the CPU back end computes, so a run on it must give the
 *     CPU run's numbers exactly (same OpenMP thread count);
 *   - download_async / upload_async keep their contract strictly (see hd_wait): a host read of a
 *     download before copy_wait sees NaNs, a rewrite of an upload's source aborts.
 * Thread-safe (tasklets run as threads). Header-only; for tests/runtime.
 *
 *   const kernels_ops *ops = hostdev_ops();   // NULL with a message if the range cannot be mapped
 *   trainer_cfg.kernels = ops;                 // or gpt_stage_new_on(..., ops)
 */
#ifndef WT_TESTS_RUNTIME_HOSTDEV_H
#define WT_TESTS_RUNTIME_HOSTDEV_H

#include "kernels/kernels.h"

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define HD_PAGE ((size_t)4096)

static struct {
  pthread_mutex_t mu;
  char *dev, *mem; /* the PROT_NONE range handed out, and where its bytes are */
  size_t cap, used;
  unsigned long allocs, uploads, downloads; /* counters, for tests to see the device was used */
} hd = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* The bytes behind device pointer p; aborts on a host pointer. */
static void *hd_m(const void *p) {
  if (!p) return NULL;
  uintptr_t a = (uintptr_t)p, d = (uintptr_t)hd.dev;
  if (a < d || a >= d + hd.cap) {
    fprintf(stderr, "hostdev: an op was given host pointer %p where a device pointer belongs\n", p);
    abort();
  }
  return hd.mem + (a - d);
}
#define HD(p) hd_m(p)

static void *hd_alloc(size_t bytes) {
  size_t sz = HD_PAGE + (bytes + HD_PAGE - 1) / HD_PAGE * HD_PAGE; /* a page for the size */
  pthread_mutex_lock(&hd.mu);
  char *p = NULL;
  if (hd.used + sz <= hd.cap) {
    p = hd.dev + hd.used + HD_PAGE;
    *(size_t *)(hd.mem + hd.used) = sz;
    hd.used += sz;
    hd.allocs++;
  }
  pthread_mutex_unlock(&hd.mu);
  return p; /* fresh pages: zero */
}

static void hd_free(void *p) {
  if (!p) return;
  char *m = (char *)HD(p) - HD_PAGE;
  madvise(m, *(size_t *)m, MADV_DONTNEED); /* give the memory back; the range is not reused */
}

static void hd_upload(void *dst, const void *src, size_t bytes) {
  memcpy(HD(dst), src, bytes);
  __atomic_add_fetch(&hd.uploads, 1, __ATOMIC_RELAXED);
}
static void hd_download(void *dst, const void *src, size_t bytes) {
  memcpy(dst, HD(src), bytes);
  __atomic_add_fetch(&hd.downloads, 1, __ATOMIC_RELAXED);
}
static void hd_copy(void *dst, const void *src, size_t bytes) {
  memmove(HD(dst), HD(src), bytes);
}
static void hd_zero(void *p, size_t bytes) {
  memset(HD(p), 0, bytes);
}

/* The asynchronous copies, emulated strictly, so that a runtime that touches a copy's host buffer
 * before copy_wait gets other numbers or an abort instead of the CPU run's: a download takes its
 * bytes when it is queued (as a copy stream does, after the work queued before it) but lands in
 * host memory only at copy_wait, and until then the host buffer holds NaNs (all bits set); an
 * upload lands at once, and copy_wait aborts if its host source was rewritten meanwhile. The
 * queue is per thread, as each tasklet thread has its own stage. */
typedef struct {
  void *host;     /* a download's destination, or an upload's source */
  void *snapshot; /* a download's bytes; NULL for an upload */
  size_t bytes;
  uint64_t digest; /* an upload's source when it was queued (FNV-1a) */
} hd_pending;
static _Thread_local hd_pending *hd_q;
static _Thread_local size_t hd_qn, hd_qcap;

static uint64_t hd_fnv(const void *p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; i++) h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ull;
  return h;
}
static void hd_queue(hd_pending r) {
  if (hd_qn == hd_qcap) {
    hd_qcap = hd_qcap ? 2 * hd_qcap : 16;
    hd_q = realloc(hd_q, hd_qcap * sizeof *hd_q);
    if (!hd_q) abort();
  }
  hd_q[hd_qn++] = r;
}
static void hd_download_async(void *dst, const void *src, size_t bytes) {
  void *snap = malloc(bytes ? bytes : 1);
  if (!snap) abort();
  memcpy(snap, HD(src), bytes);
  memset(dst, 0xff, bytes);
  hd_queue((hd_pending){dst, snap, bytes, 0});
  __atomic_add_fetch(&hd.downloads, 1, __ATOMIC_RELAXED);
}
static void hd_upload_async(void *dst, const void *src, size_t bytes) {
  hd_upload(dst, src, bytes);
  hd_queue((hd_pending){(void *)src, NULL, bytes, hd_fnv(src, bytes)});
}
static void hd_wait(void) {
  for (size_t i = 0; i < hd_qn; i++) {
    hd_pending *r = &hd_q[i];
    if (r->snapshot) {
      memcpy(r->host, r->snapshot, r->bytes);
      free(r->snapshot);
    } else if (hd_fnv(r->host, r->bytes) != r->digest) {
      fprintf(stderr,
              "hostdev: the host source of an upload_async (%zu bytes at %p) was "
              "rewritten before copy_wait\n",
              r->bytes, r->host);
      abort();
    }
  }
  /* the queue is thread-local: freed when drained, so a tasklet thread that ends leaks none */
  free(hd_q);
  hd_q = NULL, hd_qn = hd_qcap = 0;
}
static double hd_sq_norm(const float *x, size_t n) {
  return kernels_cpu()->sq_norm(HD(x), n);
}
static double hd_mem_total(void) {
  return (double)hd.cap;
}

/* ---- the ops: the CPU back end's, on translated pointers ---------------------------------- */
#define K kernels_cpu()
static void hd_encoder_forward(float *out, const int *tok, const float *wte, const float *wpe,
                               int B, int T, int C) {
  K->encoder_forward(HD(out), HD(tok), HD(wte), HD(wpe), B, T, C);
}
static void hd_encoder_backward(float *dwte, float *dwpe, const float *dout, const int *tok, int B,
                                int T, int C) {
  K->encoder_backward(HD(dwte), HD(dwpe), HD(dout), HD(tok), B, T, C);
}
static void hd_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                                 const float *w, const float *b, int N, int C) {
  K->layernorm_forward(HD(out), HD(mean), HD(rstd), HD(inp), HD(w), HD(b), N, C);
}
static void hd_layernorm_backward(float *dinp, float *dw, float *db, const float *dout,
                                  const float *inp, const float *w, const float *mean,
                                  const float *rstd, int N, int C) {
  K->layernorm_backward(HD(dinp), HD(dw), HD(db), HD(dout), HD(inp), HD(w), HD(mean), HD(rstd), N,
                        C);
}
static void hd_matmul_forward(float *out, const float *inp, const float *w, const float *b, int N,
                              int C, int OC, kernels_wlayout l) {
  K->matmul_forward(HD(out), HD(inp), HD(w), HD(b), N, C, OC, l);
}
static void hd_matmul_backward(float *dinp, float *dw, float *db, const float *dout,
                               const float *inp, const float *w, int N, int C, int OC,
                               kernels_wlayout l) {
  K->matmul_backward(HD(dinp), HD(dw), HD(db), HD(dout), HD(inp), HD(w), N, C, OC, l);
}
static void hd_attention_forward(float *out, float *att, const float *qkv, int B, int T, int C,
                                 int NH) {
  K->attention_forward(HD(out), HD(att), HD(qkv), B, T, C, NH);
}
static void hd_attention_backward(float *dqkv, float *scratch, const float *dout, const float *qkv,
                                  const float *att, int B, int T, int C, int NH) {
  K->attention_backward(HD(dqkv), HD(scratch), HD(dout), HD(qkv), HD(att), B, T, C, NH);
}
static void hd_gelu_forward(float *out, const float *inp, size_t n) {
  K->gelu_forward(HD(out), HD(inp), n);
}
static void hd_gelu_backward(float *dinp, const float *inp, const float *dout, size_t n) {
  K->gelu_backward(HD(dinp), HD(inp), HD(dout), n);
}
static void hd_residual_forward(float *out, const float *a, const float *b, size_t n) {
  K->residual_forward(HD(out), HD(a), HD(b), n);
}
static void hd_residual_backward(float *da, float *db, const float *dout, size_t n) {
  K->residual_backward(HD(da), HD(db), HD(dout), n);
}
static void hd_crossentropy_forward(float *losses, float *lse, const float *logits,
                                    const int *targets, int N, int V) {
  K->crossentropy_forward(HD(losses), HD(lse), HD(logits), HD(targets), N, V);
}
static void hd_crossentropy_backward(float *dlogits, const float *logits, const float *lse,
                                     const int *targets, float dloss, int N, int V) {
  K->crossentropy_backward(HD(dlogits), HD(logits), HD(lse), HD(targets), dloss, N, V);
}
static void hd_adamw_update(float *p, const float *g, float *m, float *v, size_t n, float lr,
                            float b1, float b2, float eps, float wd, float bc1, float bc2,
                            float gs) {
  K->adamw_update(HD(p), HD(g), HD(m), HD(v), n, lr, b1, b2, eps, wd, bc1, bc2, gs);
}
static void *hd_host_alloc(size_t bytes) {
  return K->host_alloc(bytes);
}
static void hd_host_free(void *p) {
  K->host_free(p);
}
#undef K

/* A host dereference of the device range: say so, then die of the signal as usual. */
static void hd_on_segv(int sig, siginfo_t *si, void *uctx) {
  (void)uctx;
  uintptr_t a = (uintptr_t)si->si_addr, d = (uintptr_t)hd.dev;
  if (a >= d && a < d + hd.cap) {
    static const char msg[] = "hostdev: host code touched device memory (a device pointer was "
                              "used on the host)\n";
    ssize_t ignored = write(2, msg, sizeof msg - 1);
    (void)ignored;
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

static const kernels_ops hd_table = {
    .name = "hostdev",
    .encoder_forward = hd_encoder_forward,
    .encoder_backward = hd_encoder_backward,
    .layernorm_forward = hd_layernorm_forward,
    .layernorm_backward = hd_layernorm_backward,
    .matmul_forward = hd_matmul_forward,
    .matmul_backward = hd_matmul_backward,
    .attention_forward = hd_attention_forward,
    .attention_backward = hd_attention_backward,
    .gelu_forward = hd_gelu_forward,
    .gelu_backward = hd_gelu_backward,
    .residual_forward = hd_residual_forward,
    .residual_backward = hd_residual_backward,
    .crossentropy_forward = hd_crossentropy_forward,
    .crossentropy_backward = hd_crossentropy_backward,
    .adamw_update = hd_adamw_update,
    .device = 1,
    .alloc = hd_alloc,
    .free = hd_free,
    .upload = hd_upload,
    .download = hd_download,
    .copy = hd_copy,
    .zero = hd_zero,
    .sq_norm = hd_sq_norm,
    .mem_total = hd_mem_total,
    .host_alloc = hd_host_alloc,
    .host_free = hd_host_free,
    .download_async = hd_download_async,
    .upload_async = hd_upload_async,
    .copy_wait = hd_wait,
};

/* Maps the two ranges (8 GiB of address space each, or 1 GiB where the kernel refuses that;
 * pages are only taken when written) and installs the SIGSEGV handler. */
static void hd_init(void) {
  for (size_t cap = (size_t)8 << 30; cap >= ((size_t)1 << 30) && !hd.dev; cap /= 8) {
    void *d = mmap(NULL, cap, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    void *m =
        mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (d != MAP_FAILED && m != MAP_FAILED) {
      hd.dev = d, hd.mem = m, hd.cap = cap;
      break;
    }
    if (d != MAP_FAILED) munmap(d, cap);
    if (m != MAP_FAILED) munmap(m, cap);
  }
  if (!hd.dev) {
    fprintf(stderr, "hostdev: cannot map the device range\n");
    return;
  }
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = hd_on_segv;
  sa.sa_flags = SA_SIGINFO;
  sigaction(SIGSEGV, &sa, NULL);
}

/* The table, or NULL (with a message on stderr) when the ranges cannot be mapped. */
static const kernels_ops *hostdev_ops(void) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, hd_init);
  return hd.dev ? &hd_table : NULL;
}

#endif
