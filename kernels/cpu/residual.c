/* residual — the residual connection: out = a + b, and its gradient to both branches. */
#include "kernels/cpu/cpu_internal.h"

void kernels_cpu_residual_forward(float *out, const float *a, const float *b, size_t n) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void kernels_cpu_residual_backward(float *da, float *db, const float *dout, size_t n) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; i++) {
    da[i] += dout[i];
    db[i] += dout[i];
  }
}
