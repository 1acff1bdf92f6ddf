/* deadline — how long a wait may last, from what the run measured.
 *
 * A wait (a heartbeat, a receive in a training step, a bind) gets the deadline
 *     clamp(margin × q-quantile of the last samples, floor, cap)
 * where the samples are the durations that wait had when nothing was wrong (heartbeat gaps, step
 * times). The cap is the fixed flag (--peer-timeout, --liveness × --heartbeat, --bind-timeout):
 * it holds until min_samples are in, and bounds the deadline forever after. The floor keeps a
 * fast run's deadline above scheduling noise. Old samples leave as new ones come (a window of
 * WT_DEADLINE_WINDOW), so the deadline follows a run that slows down or speeds up.
 *
 * A wait for transfers over measured links (a receive from a pipeline neighbour, a stage's state
 * from a replica) gets wt_deadline_links_s: each link's time is the bytes it moves over its
 * measured rate plus its round trip, and the deadline is clamp(margin × quantile of those times,
 * floor, cap), the cap when a link was not measured.
 *
 * Plain data, no allocation, not thread-safe (one owner updates and reads it).
 *
 *   wt_deadline d;
 *   wt_deadline_init(&d, &(wt_deadline_config){.quantile = 0.95, .margin = 4, .floor_s = 0.25,
 *                                                .cap_s = 15, .min_samples = 5});
 *   for (each step) wt_deadline_add(&d, step_seconds);
 *   double wait_s = wt_deadline_s(&d);
 */
#ifndef WT_COMMON_DEADLINE_H
#define WT_COMMON_DEADLINE_H

#define WT_DEADLINE_WINDOW 32

typedef struct {
  double quantile; /* in (0, 1]: 0.95 takes the 95th percentile of the window */
  double margin;   /* > 0: how many times that quantile a wait may take */
  double floor_s;  /* the shortest deadline */
  double cap_s;    /* the longest (the fixed flag); also the deadline until min_samples */
  int min_samples; /* samples before the measurement counts (>= 1) */
} wt_deadline_config;

typedef struct {
  wt_deadline_config cfg;
  float samples[WT_DEADLINE_WINDOW]; /* a ring of the newest durations, seconds */
  int n, next;
} wt_deadline;

/* Starts with no samples (the deadline is cfg->cap_s). */
void wt_deadline_init(wt_deadline *d, const wt_deadline_config *cfg);
/* Adds one measured duration (seconds; NaN, infinite or negative ones are ignored). */
void wt_deadline_add(wt_deadline *d, double seconds);
/* The deadline now: the cap with fewer than min_samples, else clamp(margin × quantile, floor,
 * cap). */
double wt_deadline_s(const wt_deadline *d);
/* The quantile of the window (seconds), or NaN with no samples. */
double wt_deadline_quantile(const wt_deadline *d);
/* Number of samples taken so far (up to the window). */
int wt_deadline_samples(const wt_deadline *d);
/* The deadline of a wait on n links (the first WT_DEADLINE_WINDOW count): link i moves bytes[i]
 * at rate_Bps[i] bytes/s after a round trip of rtt_s[i] seconds, taking bytes / rate + rtt; the
 * deadline is clamp(cfg->margin × cfg->quantile of those times, floor, cap) (min_samples is not
 * used). The cap with no link, or when a link's rate is not a positive number or its round trip
 * not a finite one (not measured: it may be the slowest). */
double wt_deadline_links_s(const wt_deadline_config *cfg, const double *bytes,
                           const double *rate_Bps, const double *rtt_s, int n);

#endif
