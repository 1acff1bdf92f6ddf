/* crossentropy — softmax + cross-entropy fused with the logits, rows in parallel. The forward
 * keeps only each row's log-sum-exp; the backward recomputes the probabilities from it instead
 * of storing a (N, V) softmax, which for GPT-2's V = 50257 would be another logits-sized array. */
#include <math.h>

#include "backends.h"

void cpu_crossentropy_forward(float *losses, float *lse, const float *logits, const int *targets,
                              int N, int V) {
#pragma omp parallel for schedule(static)
  for (int n = 0; n < N; n++) {
    const float *z = logits + (size_t)n * V;
    float maxv = -INFINITY;
    for (int v = 0; v < V; v++) maxv = z[v] > maxv ? z[v] : maxv;
    double sum = 0; /* double: V terms, and the loss is compared against PyTorch */
    for (int v = 0; v < V; v++) sum += expf(z[v] - maxv);
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
    for (int v = 0; v < V; v++) dz[v] = expf(z[v] - l) * dloss;
    dz[targets[n]] -= dloss;
  }
}
