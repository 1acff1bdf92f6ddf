/* norm — the sum of squares behind the global gradient norm, on host memory. Both host tables
 * use it; model/optim.c's optim_grad_sq_norm is this function. */
#include <stdlib.h>

#include "common/common.h"
#include "kernels/cpu/cpu_internal.h"

/* Sum of squares of one block in 16 running sums: four vectors of four doubles, so the adds of
 * consecutive iterations do not wait on each other (with one chain of four the loop ran at a
 * third of the memory bandwidth: 0.08 s for GPT-2 124M's 124M gradients). The grouping depends
 * on the block alone, so the result stays independent of the thread count. */
static double s_block_sq(const float *g, size_t n) {
  enum { LANES = 16 };
  double acc[LANES] = {0};
  size_t i = 0;
  for (; i + LANES <= n; i += LANES)
    for (int k = 0; k < LANES; k++) acc[k] += (double)g[i + k] * g[i + k];
  for (; i < n; i++) acc[0] += (double)g[i] * g[i];
  for (int w = LANES / 2; w > 0; w /= 2) /* pairwise: a fixed tree over the lanes */
    for (int k = 0; k < w; k++) acc[k] += acc[k + w];
  return acc[0];
}

double kernels_cpu_sq_norm(const float *grads, size_t n) {
  /* Fixed-size blocks summed in block order: threads share the work, yet the grouping depends
   * on n alone, so the result is the same for any thread count. */
  enum { BLOCK = 1 << 16 };
  size_t nb = (n + BLOCK - 1) / BLOCK;
  double *part = wt_xmalloc(sizeof(double) * (nb ? nb : 1));
#pragma omp parallel for schedule(static)
  for (size_t b = 0; b < nb; b++)
    part[b] = s_block_sq(grads + b * BLOCK, WT_MIN(BLOCK, n - b * BLOCK));
  double sum = 0;
  for (size_t b = 0; b < nb; b++) sum += part[b];
  free(part);
  return sum;
}
