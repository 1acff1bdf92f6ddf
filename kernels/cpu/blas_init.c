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

#include "common/common.h"
#include "kernels/kernels.h"

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

/* Sets `name` to `value` unless the user set it; returns 1 if it changed the environment. */
static int s_default_env(const char *name, const char *value) {
  const char *cur = getenv(name);
  if (cur && *cur) return 0;
  setenv(name, value, 1);
  return 1;
}

void kernels_cpu_init(int argc, char **argv) {
  (void)argc;
  const char *reexec = getenv("WANTRAIN_BLAS_REEXEC");
  if ((reexec && strcmp(reexec, "0") == 0) || !argv || !argv[0]) return;
  /* OpenMP threads that spin after a parallel region steal a core from OpenBLAS' threads (and
   * OpenBLAS' from ours): with 2 cores that made small runs 10-50x slower. Passive waiting is
   * read by libgomp when it loads, so it rides on the same re-exec. */
  int changed = 0;
  if (s_needs_skylakex()) changed |= s_default_env("OPENBLAS_CORETYPE", "SkylakeX");
  changed |= s_default_env("OMP_WAIT_POLICY", "PASSIVE");
  if (!changed) {
    WT_DEBUG("kernels: OpenBLAS core %s", kernels_blas_corename());
    return;
  }
  WT_DEBUG("kernels: OpenBLAS chose %s; re-executing with OPENBLAS_CORETYPE=%s "
           "OMP_WAIT_POLICY=%s",
           kernels_blas_corename(), getenv("OPENBLAS_CORETYPE"), getenv("OMP_WAIT_POLICY"));
  execv("/proc/self/exe", argv);
  /* Still here: the exec failed (no /proc, seccomp). Run on with what was loaded. */
  WT_WARN("kernels: could not re-execute with OPENBLAS_CORETYPE=SkylakeX OMP_WAIT_POLICY=PASSIVE "
          "(%s); sgemm runs on OpenBLAS' %s kernels — set those variables yourself",
          strerror(errno), kernels_blas_corename());
}
