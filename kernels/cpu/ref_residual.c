/* ref_residual — reference residual connection: out = a + b and its gradient to both. */
#include "kernels/cpu/cpu_internal.h"

void kernels_ref_residual_forward(float *out, const float *a, const float *b, size_t n) {
  for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void kernels_ref_residual_backward(float *da, float *db, const float *dout, size_t n) {
  for (size_t i = 0; i < n; i++) {
    da[i] += dout[i];
    db[i] += dout[i];
  }
}
