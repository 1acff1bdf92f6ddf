/* ref_adamw — reference AdamW update (PyTorch's order of operations). */
#include <math.h>

#include "kernels/cpu/cpu_internal.h"

void kernels_ref_adamw_update(float *param, const float *grad, float *m, float *v, size_t n,
                              float lr, float b1, float b2, float eps, float wd, float bc1,
                              float bc2, float grad_scale) {
  for (size_t i = 0; i < n; i++) {
    float g = grad[i] * grad_scale;
    param[i] *= 1.0f - lr * wd;
    m[i] = b1 * m[i] + (1.0f - b1) * g;
    v[i] = b2 * v[i] + (1.0f - b2) * g * g;
    float denom = sqrtf(v[i]) / sqrtf(bc2) + eps;
    param[i] -= (lr / bc1) * m[i] / denom;
  }
}
