/* encoder — token + position embedding on the fast CPU path. */
#include <string.h>

#include "kernels/cpu/cpu_internal.h"

void kernels_cpu_encoder_forward(float *out, const int *tokens, const float *wte, const float *wpe,
                                 int B, int T, int C) {
#pragma omp parallel for schedule(static)
  for (int bt = 0; bt < B * T; bt++) {
    float *o = out + (size_t)bt * C;
    const float *e = wte + (size_t)tokens[bt] * C, *p = wpe + (size_t)(bt % T) * C;
    for (int c = 0; c < C; c++) o[c] = e[c] + p[c];
  }
}

/* Threads split the channels, not the rows: every element still receives its rows in (b, t)
 * order, so repeated tokens sum in the same order as the reference whatever the thread count. */
void kernels_cpu_encoder_backward(float *dwte, float *dwpe, const float *dout, const int *tokens,
                                  int B, int T, int C) {
#pragma omp parallel
  {
    int nt = 1, id = 0;
#ifdef _OPENMP
    nt = omp_get_num_threads(), id = omp_get_thread_num();
#endif
    int c0 = (int)((long)C * id / nt), c1 = (int)((long)C * (id + 1) / nt);
    for (int bt = 0; bt < B * T; bt++) {
      const float *d = dout + (size_t)bt * C;
      float *de = dwte + (size_t)tokens[bt] * C, *dp = dwpe + (size_t)(bt % T) * C;
      for (int c = c0; c < c1; c++) {
        de[c] += d[c];
        dp[c] += d[c];
      }
    }
  }
}
