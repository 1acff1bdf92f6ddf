/* crossentropy — softmax + cross-entropy fused with the logits, rows in parallel. The forward
 * keeps only each row's log-sum-exp; the backward recomputes the probabilities from it instead
 * of storing a (N, V) softmax, which for GPT-2's V = 50257 would be another logits-sized array. */
#include <math.h>

#include "backends.h"
#include "fastmath.h"

void cpu_crossentropy_forward(float *losses, float *lse, const float *logits, const int *targets,
                              int N, int V) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    const float *z = logits + (size_t)n * V;
    float maxv = -INFINITY;
    for (int v = 0; v < V; v++) maxv = z[v] > maxv ? z[v] : maxv;
    double sum = 0; /* double: V terms, and the loss is compared against PyTorch */
    float e[256];   /* exps a block at a time: that loop vectorises, the double sum does not */
    for (int v0 = 0; v0 < V; v0 += 256) {
      int len = V - v0 < 256 ? V - v0 : 256;
      for (int v = 0; v < len; v++) e[v] = wt_fast_expf(z[v0 + v] - maxv);
      for (int v = 0; v < len; v++) sum += e[v];
    }
    float l = maxv + (float)log(sum);
    lse[n] = l;
    losses[n] = l - z[targets[n]];
  }
}

void cpu_crossentropy_backward(float *dlogits, const float *logits, const float *lse,
                               const int *targets, float dloss, int N, int V) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    const float *z = logits + (size_t)n * V;
    float *dz = dlogits + (size_t)n * V;
    float l = lse[n];
    for (int v = 0; v < V; v++) dz[v] = wt_fast_expf(z[v] - l) * dloss;
    dz[targets[n]] -= dloss;
  }
}
