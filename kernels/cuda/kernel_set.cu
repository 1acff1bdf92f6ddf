/* Which set of kernels the CUDA back end runs (cuda_internal.cuh, wt_cuda_fused): read once per
 * process from WANTRAIN_CUDA_KERNELS. Its own file because the kernels ask it and the ops table
 * (cuda_table.cu) names the kernels: here, neither calls back into the other. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/cuda/cuda_internal.cuh"

static int s_fused;
static pthread_once_t s_fused_once = PTHREAD_ONCE_INIT;

static void s_read_kernel_set(void) {
  const char *v = getenv("WANTRAIN_CUDA_KERNELS");
  s_fused = v && strcmp(v, "fused") == 0;
  if (v && *v && !s_fused && strcmp(v, "plain") != 0)
    fprintf(stderr, "WANTRAIN_CUDA_KERNELS=%s is not fused or plain; running plain\n", v);
}

int wt_cuda_fused(void) {
  pthread_once(&s_fused_once, s_read_kernel_set);
  return s_fused;
}
