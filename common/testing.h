/* testing — the few helpers every wantrain test program uses (header-only).
 *
 * A test is a plain program: it returns 0 on success, nonzero on failure, and 77 when it must
 * be skipped (no GPU, a missing ../shared fixture); ctest reports 77 as "skipped".
 *
 *   WT_TEST_ASSERT(x > 0, "x=%d", x);           // fails the test with file:line and a message
 *   WT_TEST_CLOSE(got, want, atol, rtol, "what");// |got-want| <= atol + rtol*|want|
 *   wt_test_allclose(a, b, n, atol, rtol, "logits"); // reports first bad index and max error
 */
#ifndef WT_TESTING_H
#define WT_TESTING_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WT_TEST_SKIP 77

static int wt_test_failures = 0;

#define WT_TEST_ASSERT(cond, ...)                                                            \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      fprintf(stderr, "%s:%d: FAILED: %s: ", __FILE__, __LINE__, #cond);                     \
      fprintf(stderr, __VA_ARGS__);                                                          \
      fprintf(stderr, "\n");                                                                 \
      wt_test_failures++;                                                                    \
    }                                                                                        \
  } while (0)

/* Asserts and stops this test function at once (for preconditions of later checks). */
#define WT_TEST_REQUIRE(cond, ...)                                                           \
  do {                                                                                       \
    if (!(cond)) {                                                                           \
      fprintf(stderr, "%s:%d: REQUIRED: %s: ", __FILE__, __LINE__, #cond);                   \
      fprintf(stderr, __VA_ARGS__);                                                          \
      fprintf(stderr, "\n");                                                                 \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

#define WT_TEST_CLOSE(got, want, atol, rtol, what)                                           \
  WT_TEST_ASSERT(fabs((double)(got) - (double)(want)) <= (atol) + (rtol) * fabs((double)(want)), \
                 "%s: got %.9g want %.9g", (what), (double)(got), (double)(want))

/* Compares two float arrays element-wise with |a-b| <= atol + rtol*|b|. Prints the first bad
 * index and the max absolute error; returns 1 if all close. */
static inline int wt_test_allclose(const float *got, const float *want, size_t n, double atol,
                                   double rtol, const char *what) {
  size_t bad = n;
  double max_err = 0;
  for (size_t i = 0; i < n; i++) {
    double err = fabs((double)got[i] - (double)want[i]);
    if (err > max_err || isnan(err)) max_err = isnan(err) ? INFINITY : err;
    if (bad == n && !(err <= atol + rtol * fabs((double)want[i]))) bad = i;
  }
  if (bad != n) {
    fprintf(stderr, "FAILED allclose %s: first bad index %zu got %.9g want %.9g; max abs err %.3g"
                    " (atol %.3g rtol %.3g, n=%zu)\n",
            what, bad, (double)got[bad], (double)want[bad], max_err, atol, rtol, n);
    wt_test_failures++;
    return 0;
  }
  return 1;
}

/* The shared/ folder beside the repository (fixtures that may be absent), or NULL. */
static inline const char *wt_test_shared_dir(void) {
  const char *d = getenv("WT_SHARED_DIR");
  return d && *d ? d : NULL;
}

/* The repository root (for the project's own fixtures). */
static inline const char *wt_test_source_dir(void) {
  const char *d = getenv("WT_SOURCE_DIR");
  return d && *d ? d : ".";
}

/* Creates a fresh scratch directory under $TMPDIR (or /tmp); writes its path into buf. */
#include <unistd.h>
static inline const char *wt_test_tmpdir(char *buf, size_t size) {
  const char *base = getenv("TMPDIR");
  snprintf(buf, size, "%s/wt-test-XXXXXX", base && *base ? base : "/tmp");
  if (!mkdtemp(buf)) {
    perror("mkdtemp");
    exit(1);
  }
  return buf;
}

/* The final line: "N passed, N failed" is what CI reads; returns the exit status for main. */
static inline int wt_test_finish(const char *name) {
  if (wt_test_failures) fprintf(stderr, "%s: %d check(s) failed\n", name, wt_test_failures);
  else printf("%s: all checks passed\n", name);
  return wt_test_failures ? 1 : 0;
}

#endif
