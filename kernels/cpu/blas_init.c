/* blas_init — makes sure OpenBLAS runs its AVX-512 kernels on CPUs it does not recognise.
 *
 * Why a re-exec: OpenBLAS (DYNAMIC_ARCH build) chooses its kernels in a constructor that runs
 * when the library loads, reading OPENBLAS_CORETYPE. By the time main() runs the choice is made,
 * so the only ways to change it are to load the library later (dlopen) or to start the process
 * again with the variable set. A re-exec keeps the normal link (no dlsym table of BLAS symbols)
 * and costs a few milliseconds once per program start. */
#include <cblas.h> /* openblas_get_corename, openblas_set_num_threads */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "common.h"
#include "kernels.h"

const char *kernels_blas_corename(void) {
  const char *name = openblas_get_corename();
  return name ? name : "unknown";
}

int kernels_cpu_threads(void) {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

/* True when OpenBLAS fell back to a generic core although the CPU could run AVX-512 code. */
static int s_needs_skylakex(void) {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx512f")) return 0;
  const char *core = kernels_blas_corename();
  return strcasecmp(core, "Prescott") == 0 || strcasecmp(core, "Core2") == 0 ||
         strcasecmp(core, "Nehalem") == 0 || strcasecmp(core, "unknown") == 0;
}

void kernels_cpu_init(int argc, char **argv) {
  (void)argc;
  const char *user = getenv("OPENBLAS_CORETYPE");
  const char *reexec = getenv("WANTRAIN_BLAS_REEXEC");
  if ((user && *user) || (reexec && strcmp(reexec, "0") == 0) || !s_needs_skylakex()) {
    WT_DEBUG("kernels: OpenBLAS core %s", kernels_blas_corename());
    return;
  }
  if (!argv || !argv[0]) return;
  setenv("OPENBLAS_CORETYPE", "SkylakeX", 1);
  WT_DEBUG("kernels: OpenBLAS chose %s on an AVX-512 CPU; re-executing with SkylakeX",
           kernels_blas_corename());
  execv("/proc/self/exe", argv);
  /* Still here: the exec failed (no /proc, seccomp). Run on with the slow kernels. */
  unsetenv("OPENBLAS_CORETYPE");
  WT_WARN("kernels: could not re-execute with OPENBLAS_CORETYPE=SkylakeX (%s); sgemm runs on "
          "OpenBLAS' %s kernels, several times slower — set OPENBLAS_CORETYPE=SkylakeX yourself",
          strerror(errno), kernels_blas_corename());
}
