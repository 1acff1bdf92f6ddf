/* ref_matmul — reference matrix product with bias: triple loops, double accumulators. */
#include "kernels/cpu/cpu_internal.h"

/* Element (i, o) of W in either layout. */
static float s_w(const float *w, int C, int OC, int i, int o, kernels_wlayout layout) {
  return layout == KERNELS_W_IN_OUT ? w[(size_t)i * OC + o] : w[(size_t)o * C + i];
}

void kernels_ref_matmul_forward(float *out, const float *inp, const float *weight,
                                const float *bias, int N, int C, int OC, kernels_wlayout layout) {
  for (int n = 0; n < N; n++)
    for (int o = 0; o < OC; o++) {
      double acc = bias ? bias[o] : 0.0;
      for (int i = 0; i < C; i++)
        acc += (double)inp[(size_t)n * C + i] * s_w(weight, C, OC, i, o, layout);
      out[(size_t)n * OC + o] = (float)acc;
    }
}

void kernels_ref_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                                 const float *inp, const float *weight, int N, int C, int OC,
                                 kernels_wlayout layout) {
  for (int n = 0; dinp && n < N; n++)
    for (int i = 0; i < C; i++) {
      double acc = 0;
      for (int o = 0; o < OC; o++)
        acc += (double)dout[(size_t)n * OC + o] * s_w(weight, C, OC, i, o, layout);
      dinp[(size_t)n * C + i] += (float)acc;
    }
  for (int i = 0; i < C; i++)
    for (int o = 0; o < OC; o++) {
      double acc = 0;
      for (int n = 0; n < N; n++) acc += (double)inp[(size_t)n * C + i] * dout[(size_t)n * OC + o];
      size_t at = layout == KERNELS_W_IN_OUT ? (size_t)i * OC + o : (size_t)o * C + i;
      dweight[at] += (float)acc;
    }
  for (int o = 0; dbias && o < OC; o++) {
    double acc = 0;
    for (int n = 0; n < N; n++) acc += dout[(size_t)n * OC + o];
    dbias[o] += (float)acc;
  }
}
