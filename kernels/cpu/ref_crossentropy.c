/* ref_crossentropy — reference softmax + cross-entropy on logits, in double. */
#include <math.h>

#include "kernels/cpu/cpu_internal.h"

void kernels_ref_crossentropy_forward(float *losses, float *lse, const float *logits,
                                      const int *targets, int N, int V) {
  for (int n = 0; n < N; n++) {
    const float *z = logits + (size_t)n * V;
    double maxv = -INFINITY, sum = 0;
    for (int v = 0; v < V; v++) maxv = z[v] > maxv ? z[v] : maxv;
    for (int v = 0; v < V; v++) sum += exp(z[v] - maxv);
    double l = maxv + log(sum);
    lse[n] = (float)l;
    losses[n] = (float)(l - z[targets[n]]);
  }
}

void kernels_ref_crossentropy_backward(float *dlogits, const float *logits, const float *lse,
                                       const int *targets, float dloss, int N, int V) {
  for (int n = 0; n < N; n++) {
    const float *z = logits + (size_t)n * V;
    float *dz = dlogits + (size_t)n * V;
    for (int v = 0; v < V; v++) {
      double p = exp((double)z[v] - lse[n]);
      dz[v] = (float)((p - (v == targets[n] ? 1.0 : 0.0)) * dloss);
    }
  }
}
