/* registry — the one place that knows which kernels back ends this binary holds. */
#include <string.h>

#include "kernels/cpu/cpu_internal.h"

const kernels_ops *kernels_backend(const char *name) {
  if (!name) return NULL;
  if (strcmp(name, "cpu") == 0) return &kernels_cpu_table;
  if (strcmp(name, "ref") == 0) return &kernels_ref_table;
#ifdef WT_KERNELS_HAVE_CUDA
  if (strcmp(name, "cuda") == 0) return kernels_cuda();
#endif
  return NULL;
}

const kernels_ops *kernels_cpu(void) {
  return &kernels_cpu_table;
}
const kernels_ops *kernels_ref(void) {
  return &kernels_ref_table;
}
