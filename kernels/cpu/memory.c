/* memory — host buffers for the CPU back end. Large float buffers (parameters, gradients,
 * optimizer moments, logits) are 2 MiB aligned and asked to live on transparent huge pages:
 * a 124M-parameter model touches ~3 GB of them every step, and with 4 KiB pages that is
 * ~750k page faults on first touch and TLB misses on every later step. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "kernels/kernels.h"

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
