/* adamw — the AdamW update, elementwise in PyTorch's order of operations (so a run matches
 * torch.optim.AdamW to float rounding). */
#include <math.h>

#include "kernels/cpu/cpu_internal.h"

void kernels_cpu_adamw_update(float *param, const float *grad, float *m, float *v, size_t n,
                              float lr, float b1, float b2, float eps, float wd, float bc1,
                              float bc2, float grad_scale) {
  float decay = 1.0f - lr * wd, step = lr / bc1, sbc2 = sqrtf(bc2);
  /* The optimizer calls this once per tensor; biases and LayerNorm weights are a few hundred
   * floats, where waking the thread pool costs more than the update. */
#pragma omp parallel for schedule(static) if (n >= 65536)
  for (size_t i = 0; i < n; i++) {
    float g = grad[i] * grad_scale;
    float mi = b1 * m[i] + (1.0f - b1) * g;
    float vi = b2 * v[i] + (1.0f - b2) * g * g;
    m[i] = mi;
    v[i] = vi;
    param[i] = param[i] * decay - step * mi / (sqrtf(vi) / sbc2 + eps);
  }
}
