/* ref_gelu — reference GELU (tanh approximation, GPT-2's gelu_new), in double. */
#include <math.h>

#include "kernels/cpu/cpu_internal.h"

#define GELU_K 0.7978845608028654 /* sqrt(2/pi) */

void kernels_ref_gelu_forward(float *out, const float *inp, size_t n) {
  for (size_t i = 0; i < n; i++) {
    double x = inp[i];
    out[i] = (float)(0.5 * x * (1.0 + tanh(GELU_K * (x + 0.044715 * x * x * x))));
  }
}

void kernels_ref_gelu_backward(float *dinp, const float *inp, const float *dout, size_t n) {
  for (size_t i = 0; i < n; i++) {
    double x = inp[i];
    double u = GELU_K * (x + 0.044715 * x * x * x);
    double th = tanh(u);
    double du = GELU_K * (1.0 + 3.0 * 0.044715 * x * x);
    double grad = 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * du;
    dinp[i] += (float)(grad * dout[i]);
  }
}
