/* deadline — a wait's deadline from measured durations (deadline.h). */
#include "common/deadline.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void wt_deadline_init(wt_deadline *d, const wt_deadline_config *cfg) {
  memset(d, 0, sizeof *d);
  d->cfg = *cfg;
}

void wt_deadline_add(wt_deadline *d, double seconds) {
  if (!isfinite(seconds) || seconds < 0) return;
  d->samples[d->next] = (float)seconds;
  d->next = (d->next + 1) % WT_DEADLINE_WINDOW;
  if (d->n < WT_DEADLINE_WINDOW) d->n++;
}

static int s_cmp(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

double wt_deadline_quantile(const wt_deadline *d) {
  if (d->n == 0) return NAN;
  float sorted[WT_DEADLINE_WINDOW];
  memcpy(sorted, d->samples, sizeof(float) * (size_t)d->n);
  qsort(sorted, (size_t)d->n, sizeof(float), s_cmp);
  /* the nearest-rank quantile: the smallest sample with at least q of the window at or below */
  int rank = (int)ceil(d->cfg.quantile * d->n);
  if (rank < 1) rank = 1;
  if (rank > d->n) rank = d->n;
  return sorted[rank - 1];
}

double wt_deadline_s(const wt_deadline *d) {
  if (d->n < d->cfg.min_samples || d->n == 0) return d->cfg.cap_s;
  double t = fmax(d->cfg.margin * wt_deadline_quantile(d), d->cfg.floor_s);
  return fmin(t, d->cfg.cap_s);
}

int wt_deadline_samples(const wt_deadline *d) {
  return d->n;
}

double wt_deadline_links_s(const wt_deadline_config *cfg, const double *bytes,
                           const double *rate_Bps, const double *rtt_s, int n) {
  wt_deadline d;
  wt_deadline_init(&d, cfg);
  d.cfg.min_samples = 1;
  for (int i = 0; i < n && i < WT_DEADLINE_WINDOW; i++) {
    if (!(rate_Bps[i] > 0) || !isfinite(rate_Bps[i]) || !isfinite(rtt_s[i]) || rtt_s[i] < 0)
      return cfg->cap_s;
    wt_deadline_add(&d, fmax(bytes[i], 0) / rate_Bps[i] + rtt_s[i]);
  }
  return wt_deadline_s(&d);
}
