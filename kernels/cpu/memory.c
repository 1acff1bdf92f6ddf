/* memory — host buffers for the CPU back end. Large float buffers (parameters, gradients,
 * optimizer moments, logits) are 2 MiB aligned and asked to live on transparent huge pages:
 * a 124M-parameter model touches ~3 GB of them every step, and with 4 KiB pages that is
 * ~750k page faults on first touch and TLB misses on every later step. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "kernels/cpu/cpu_internal.h"

#define HUGE_PAGE ((size_t)2 << 20)

void *kernels_cpu_alloc(size_t bytes) {
  size_t align = bytes >= HUGE_PAGE ? HUGE_PAGE : 64;
  size_t size = bytes ? (bytes + align - 1) / align * align : align;
  void *p = NULL;
  if (posix_memalign(&p, align, size) != 0) return NULL;
#ifdef MADV_HUGEPAGE
  if (align == HUGE_PAGE) (void)madvise(p, size, MADV_HUGEPAGE); /* advice only; may be off */
#endif
  memset(p, 0, size);
  return p;
}

void kernels_cpu_free(void *p) {
  free(p);
}

/* The memory entries of the two host tables: plain host memory, so device-neutral callers
 * (model/gpt.c, model/optim.c) cost the CPU path one memcpy where they used one before. */
void kernels_cpu_upload(void *dst, const void *src, size_t bytes) {
  if (bytes) memcpy(dst, src, bytes);
}

void kernels_cpu_download(void *dst, const void *src, size_t bytes) {
  if (bytes) memcpy(dst, src, bytes);
}

void kernels_cpu_copy(void *dst, const void *src, size_t bytes) {
  if (bytes) memmove(dst, src, bytes);
}

void kernels_cpu_zero(void *p, size_t bytes) {
  if (bytes) memset(p, 0, bytes);
}

double kernels_cpu_mem_total(void) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? (double)pages * page : INFINITY;
}

void kernels_cpu_copy_wait(void) {}
