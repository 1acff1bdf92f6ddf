/* robust_aggregate — the robust estimates of the mean of a few contributions (collectives.h):
 * coordinate-wise trimmed mean and median, and centered clipping. Pure arithmetic in a fixed
 * order, so every rank that holds the same rows gets the same bits. */
#include "parallel/collectives/collectives.h"

#include "common/common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *s_names[] = {"none", "trimmed-mean", "median", "centered-clip"};

int parallel_robust_kind_parse(const char *name, parallel_robust_kind *kind) {
  for (int i = 0; i < (int)WT_ARRAY_LEN(s_names); i++)
    if (name && !strcmp(name, s_names[i])) {
      *kind = (parallel_robust_kind)i;
      return WT_OK;
    }
  return wt_fail(WT_EINVAL, "robust aggregate '%s' is unknown; use one of %s", name ? name : "",
                 PARALLEL_ROBUST_NAMES);
}

const char *parallel_robust_kind_name(parallel_robust_kind kind) {
  return (unsigned)kind < WT_ARRAY_LEN(s_names) ? s_names[kind] : "?";
}

/* A float's bits as an unsigned key whose order is the floats' (−inf < … < −0 < +0 < … < +inf),
 * every NaN above +inf (as one canonical NaN): a total order, so the sorted values do not depend
 * on the sort. */
static uint32_t s_key(float v) {
  if (isnan(v)) return UINT32_MAX;
  uint32_t u;
  memcpy(&u, &v, 4);
  return (u & 0x80000000u) ? ~u : u | 0x80000000u;
}

static float s_unkey(uint32_t k) {
  if (k == UINT32_MAX) return NAN;
  uint32_t u = (k & 0x80000000u) ? k & 0x7fffffffu : ~k;
  float v;
  memcpy(&v, &u, 4);
  return v;
}

/* Sorts k[0..m) (insertion sort: m is a group size, at most 64). */
static void s_sort_keys(uint32_t *k, int m) {
  for (int i = 1; i < m; i++) {
    uint32_t x = k[i];
    int j = i - 1;
    for (; j >= 0 && k[j] > x; j--) k[j + 1] = k[j];
    k[j + 1] = x;
  }
}

/* Sorts v[0..m) by s_key. */
static void s_sort(float *v, int m) {
  uint32_t k[PARALLEL_ROBUST_MAX_RANKS];
  for (int j = 0; j < m; j++) k[j] = s_key(v[j]);
  s_sort_keys(k, m);
  for (int j = 0; j < m; j++) v[j] = s_unkey(k[j]);
}

/* The values of coordinate i of the used rows, sorted, into v. */
static void s_column(const float *rows, const int *used, int m, size_t n, size_t i, float *v) {
  uint32_t k[PARALLEL_ROBUST_MAX_RANKS];
  for (int j = 0; j < m; j++) k[j] = s_key(rows[(size_t)used[j] * n + i]);
  s_sort_keys(k, m);
  for (int j = 0; j < m; j++) v[j] = s_unkey(k[j]);
}

/* What trimmed-mean drops at each end of m sorted values. */
static int s_trim(int m) {
  return m >= 3 ? WT_MAX(1, m / 4) : 0;
}

static float s_trimmed(const float *v, int m) {
  const int b = s_trim(m);
  double sum = 0;
  for (int j = b; j < m - b; j++) sum += v[j];
  return (float)(sum / (m - 2 * b));
}

static float s_median(const float *v, int m) {
  return m % 2 ? v[m / 2] : 0.5f * v[m / 2 - 1] + 0.5f * v[m / 2];
}

static void s_coordinatewise(parallel_robust_kind kind, const float *rows, const int *used, int m,
                             size_t n, float *out) {
  float v[PARALLEL_ROBUST_MAX_RANKS];
  for (size_t i = 0; i < n; i++) {
    s_column(rows, used, m, n, i, v);
    out[i] = kind == PARALLEL_ROBUST_MEDIAN ? s_median(v, m) : s_trimmed(v, m);
  }
}

static void s_mean(const float *rows, const int *used, int m, size_t n, float *out) {
  for (size_t i = 0; i < n; i++) {
    double sum = 0;
    for (int j = 0; j < m; j++) sum += rows[(size_t)used[j] * n + i];
    out[i] = (float)(sum / m);
  }
}

/* |x_j − v|, in double, in index order. */
static double s_dist(const float *x, const float *v, size_t n) {
  double sq = 0;
  for (size_t i = 0; i < n; i++) {
    double d = (double)x[i] - (double)v[i];
    sq += d * d;
  }
  return sqrt(sq);
}

/* Centered clipping: three rounds of v += (1/m) Σ_j clip_τ(x_j − v) from the median. A row at
 * a non-finite distance (NaN or Inf inside) moves v by nothing. */
static void s_centered_clip(const float *rows, const int *used, int m, size_t n, float *out) {
  s_coordinatewise(PARALLEL_ROBUST_MEDIAN, rows, used, m, n, out);
  double dist[PARALLEL_ROBUST_MAX_RANKS];
  for (int j = 0; j < m; j++) dist[j] = s_dist(rows + (size_t)used[j] * n, out, n);
  float fd[PARALLEL_ROBUST_MAX_RANKS];
  for (int j = 0; j < m; j++) fd[j] = (float)dist[j];
  s_sort(fd, m);
  const double tau = s_median(fd, m);
  double *step = wt_xcalloc(n + 1, sizeof *step);
  for (int round = 0; round < 3; round++) {
    memset(step, 0, n * sizeof *step);
    for (int j = 0; j < m; j++) {
      const float *x = rows + (size_t)used[j] * n;
      double d = round ? s_dist(x, out, n) : dist[j];
      if (!isfinite(d) || d == 0) continue;
      double scale = d > tau ? tau / d : 1.0;
      for (size_t i = 0; i < n; i++) step[i] += ((double)x[i] - (double)out[i]) * scale;
    }
    for (size_t i = 0; i < n; i++) out[i] = (float)((double)out[i] + step[i] / m);
  }
  free(step);
}

void parallel_robust_aggregate(parallel_robust_kind kind, const float *rows, int world, size_t n,
                               const uint8_t *use, float *out) {
  int used[PARALLEL_ROBUST_MAX_RANKS], m = 0;
  for (int j = 0; j < world && j < PARALLEL_ROBUST_MAX_RANKS; j++)
    if (!use || use[j]) used[m++] = j;
  if (m == 0) {
    memset(out, 0, n * sizeof *out);
    return;
  }
  switch (kind) {
  case PARALLEL_ROBUST_TRIMMED_MEAN:
  case PARALLEL_ROBUST_MEDIAN:
    s_coordinatewise(kind, rows, used, m, n, out);
    return;
  case PARALLEL_ROBUST_CENTERED_CLIP:
    s_centered_clip(rows, used, m, n, out);
    return;
  case PARALLEL_ROBUST_NONE:
    s_mean(rows, used, m, n, out);
    return;
  }
}
