/* blas — OpenBLAS, loaded at run time, and the one sgemm every CPU matmul goes through.
 *
 * Why dlopen instead of linking: OpenBLAS (Debian's DYNAMIC_ARCH build) picks its kernels in a
 * constructor when the library loads, from OPENBLAS_CORETYPE or its own CPU detection, and
 * 0.3.21 does not know Sapphire-Rapids-class CPUs: it falls back to Prescott (SSE3) kernels,
 * about 5x slower. A linked library has made that choice before main() runs. Loaded here, its
 * choice can be read and, when it is such a fallback on a CPU with AVX-512, the library closed
 * and opened again with OPENBLAS_CORETYPE=SkylakeX, without restarting the host program. A
 * good choice of its own (e.g. Cooperlake on AMD Zen 4) stands. Variables are set only for the
 * load and removed again, so the host's environment (and its children's) is unchanged.
 *
 * Why one thread pool: OpenBLAS' own pthreads and the OpenMP threads of the other ops each spin
 * for a while when idle, and on few cores each steals the other's cores; the only cure for two
 * pools is a wait policy set before libgomp loads, which a library cannot do for its host. So
 * OpenBLAS runs single threaded and kernels_cpu_sgemm splits the output among the OpenMP
 * threads instead. */
#include <cblas.h> /* the sgemm prototype and enums only: the symbols come from dlsym */
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h> /* strcasecmp */

#include "common/common.h"
#include "kernels/cpu/cpu_internal.h"

/* The library's SONAME (Debian's alternatives point it at the pthread or OpenMP build). */
#ifndef WT_OPENBLAS_SONAME
#define WT_OPENBLAS_SONAME "libopenblas.so.0"
#endif

static struct {
  __typeof__(cblas_sgemm) *sgemm;
  __typeof__(openblas_get_corename) *corename;
  int status; /* WT_OK once loaded; else the failure, with message below */
  char message[512];
} s_blas;
static pthread_once_t s_blas_once = PTHREAD_ONCE_INIT;

/* True when the CPU runs the instructions OpenBLAS' SkylakeX kernels use. */
static int s_cpu_has_avx512(void) {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
}

/* Sets `name` to `value` for the load unless the user set it (theirs wins); returns 1 if set. */
static int s_env_default(const char *name, const char *value) {
  const char *user = getenv(name);
  if (user && *user) return 0;
  setenv(name, value, 1);
  return 1;
}

/* OpenBLAS' names for the cores it falls back to on a CPU it does not know. */
static int s_generic_core(const char *name) {
  static const char *generic[] = {"Prescott", "Core2", "Penryn", "Dunnington",
                                  "Nehalem",  "Atom",  "Unknown"};
  for (size_t i = 0; i < WT_ARRAY_LEN(generic); i++)
    if (!name || strcasecmp(name, generic[i]) == 0) return 1;
  return 0;
}

/* dlopen with `core` as OPENBLAS_CORETYPE (NULL: none of ours) and no thread pool of its own
 * (OPENBLAS_NUM_THREADS=1), unless the user set either; the environment is restored after. */
static void *s_dlopen(const char *core) {
  int set_core = core && s_env_default("OPENBLAS_CORETYPE", core);
  int set_threads = s_env_default("OPENBLAS_NUM_THREADS", "1");
  void *h = dlopen(WT_OPENBLAS_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (set_core) unsetenv("OPENBLAS_CORETYPE");
  if (set_threads) unsetenv("OPENBLAS_NUM_THREADS");
  return h;
}

/* Opens the library. When something else in the process loaded it already, its core stands. */
static void *s_open(void) {
  void *h = dlopen(WT_OPENBLAS_SONAME, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
  if (h) return h;
  h = s_dlopen(NULL);
  const char *user = getenv("OPENBLAS_CORETYPE");
  if (!h || (user && *user) || !s_cpu_has_avx512()) return h;
  __typeof__(openblas_get_corename) *corename =
      (__typeof__(openblas_get_corename) *)dlsym(h, "openblas_get_corename");
  if (!corename || !s_generic_core(corename())) return h;
  /* Closing runs OpenBLAS' destructor and unmaps it, so the next open runs its constructor
   * again. If it stays mapped (someone else holds it), the open just returns it. */
  WT_DEBUG("kernels: OpenBLAS chose %s on an AVX-512 CPU; reloading it with SkylakeX", corename());
  dlclose(h);
  return s_dlopen("SkylakeX");
}

static void s_load(void) {
  s_blas.status = WT_OK;
  void *h = s_open();
  __typeof__(openblas_set_num_threads) *set_threads = NULL;
  if (h) {
    s_blas.sgemm = (__typeof__(cblas_sgemm) *)dlsym(h, "cblas_sgemm");
    s_blas.corename = (__typeof__(openblas_get_corename) *)dlsym(h, "openblas_get_corename");
    set_threads = (__typeof__(openblas_set_num_threads) *)dlsym(h, "openblas_set_num_threads");
  }
  if (!h || !s_blas.sgemm || !s_blas.corename || !set_threads) {
    const char *why = dlerror();
    s_blas.status = wt_fail(WT_ENOTFOUND,
                            "kernels: cannot load OpenBLAS from %s (%s); install the Debian "
                            "package libopenblas0 (scripts/deps.sh installs it)",
                            WT_OPENBLAS_SONAME, why ? why : "symbols missing");
    snprintf(s_blas.message, sizeof s_blas.message, "%s", wt_last_error());
    s_blas.sgemm = NULL;
    return;
  }
  set_threads(1);
  WT_DEBUG("kernels: OpenBLAS %s core, single-threaded under %d OpenMP threads", s_blas.corename(),
           kernels_cpu_threads());
}

int kernels_cpu_init(void) {
  pthread_once(&s_blas_once, s_load);
  if (s_blas.status != WT_OK) return wt_fail(s_blas.status, "%s", s_blas.message);
  return WT_OK;
}

const char *kernels_blas_corename(void) {
  if (kernels_cpu_init() != WT_OK) return "unavailable";
  const char *name = s_blas.corename();
  return name ? name : "unknown";
}

int kernels_cpu_threads(void) {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

/* Start of part p of `parts` along a dimension of n: multiples of 16 so that each part's sgemm
 * keeps whole register tiles, the last part taking the rest. */
static int s_part_start(int n, int parts, int p) {
  if (p >= parts) return n;
  return (int)((long)n * p / parts) / 16 * 16;
}

void kernels_cpu_sgemm(int trans_a, int trans_b, int M, int N, int K, const float *A, int lda,
                       const float *B, int ldb, float beta, float *C, int ldc) {
  pthread_once(&s_blas_once, s_load);
  if (s_blas.status != WT_OK) {
    /* No BLAS means no CPU back end at all: an installation fault, not outside input. */
    fprintf(stderr, "%s\n", s_blas.message);
    abort();
  }
  enum CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans;
  enum CBLAS_TRANSPOSE tb = trans_b ? CblasTrans : CblasNoTrans;
  /* Split the larger output dimension; a part under 64 rows or columns is not worth a thread.
   * The split depends only on the shape and the thread count, so results are repeatable. */
  int rows = M >= N, dim = rows ? M : N;
  int parts = WT_MIN(kernels_cpu_threads(), dim / 64);
  if (parts <= 1) {
    s_blas.sgemm(CblasRowMajor, ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
    return;
  }
#pragma omp parallel for num_threads(parts) schedule(static, 1)
  for (int p = 0; p < parts; p++) {
    int d0 = s_part_start(dim, parts, p), d = s_part_start(dim, parts, p + 1) - d0;
    if (rows) /* rows d0.. of C and of op(A) */
      s_blas.sgemm(CblasRowMajor, ta, tb, d, N, K, 1.0f, trans_a ? A + d0 : A + (size_t)d0 * lda,
                   lda, B, ldb, beta, C + (size_t)d0 * ldc, ldc);
    else /* columns d0.. of C and of op(B) */
      s_blas.sgemm(CblasRowMajor, ta, tb, M, d, K, 1.0f, A, lda,
                   trans_b ? B + (size_t)d0 * ldb : B + d0, ldb, beta, C + d0, ldc);
  }
}
