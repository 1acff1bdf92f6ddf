/* gelu — GELU with the tanh approximation (GPT-2's gelu_new), elementwise, threads over
 * contiguous chunks; tanh through fastmath_internal.h so the loops vectorise. */
#include <math.h>

#include "kernels/cpu/cpu_internal.h"
#include "kernels/cpu/fastmath_internal.h"

#define GELU_K 0.7978845608f /* sqrt(2/pi) */

void kernels_cpu_gelu_forward(float *out, const float *inp, size_t n) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; i++) {
    float x = inp[i];
    out[i] = 0.5f * x * (1.0f + wt_fast_tanhf(GELU_K * (x + 0.044715f * x * x * x)));
  }
}

void kernels_cpu_gelu_backward(float *dinp, const float *inp, const float *dout, size_t n) {
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; i++) {
    float x = inp[i];
    float th = wt_fast_tanhf(GELU_K * (x + 0.044715f * x * x * x));
    float du = GELU_K * (1.0f + 3.0f * 0.044715f * x * x);
    float grad = 0.5f * (1.0f + th) + 0.5f * x * (1.0f - th * th) * du;
    dinp[i] += grad * dout[i];
  }
}
