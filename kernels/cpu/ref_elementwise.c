/* ref_elementwise — reference GELU (tanh approximation) and residual add. */
#include <math.h>

#include "backends.h"

#define GELU_K 0.7978845608028654 /* sqrt(2/pi) */

void ref_gelu_forward(float *out, const float *inp, size_t n) {
  for (size_t i = 0; i < n; i++) {
    double x = inp[i];
    out[i] = (float)(0.5 * x * (1.0 + tanh(GELU_K * (x + 0.044715 * x * x * x))));
  }
}

void ref_gelu_backward(float *dinp, const float *inp, const float *dout, size_t n) {
  for (size_t i = 0; i < n; i++) {
    double x = inp[i];
    double u = GELU_K * (x + 0.044715 * x * x * x);
    double th = tanh(u);
    double du = GELU_K * (1.0 + 3.0 * 0.044715 * x * x);
    double grad = 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * du;
    dinp[i] += (float)(grad * dout[i]);
  }
}

void ref_residual_forward(float *out, const float *a, const float *b, size_t n) {
  for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}

void ref_residual_backward(float *da, float *db, const float *dout, size_t n) {
  for (size_t i = 0; i < n; i++) {
    da[i] += dout[i];
    db[i] += dout[i];
  }
}
