/* test_deadline — common/deadline.h: the cap until enough samples, then margin × quantile within
 * [floor, cap]; a slow sample moves the quantile only once it is more than 1 − q of the window;
 * the window forgets old samples; junk samples are ignored; a wait on measured links gets the
 * margin times its links' transfer times (bytes / rate + round trip) within [floor, cap]. */
#include "common/common.h"
#include "common/deadline.h"
#include "common/testing.h"

#include <math.h>

static void test_deadline(void) {
  wt_deadline d;
  wt_deadline_init(
      &d, &(wt_deadline_config){
              .quantile = 0.9, .margin = 4, .floor_s = 0.05, .cap_s = 10, .min_samples = 5});
  WT_TEST_ASSERT(wt_deadline_s(&d) == 10 && isnan(wt_deadline_quantile(&d)), "no samples: the cap");
  for (int i = 0; i < 4; i++) wt_deadline_add(&d, 0.1);
  WT_TEST_ASSERT(wt_deadline_s(&d) == 10, "4 samples of 5 needed: %g", wt_deadline_s(&d));
  wt_deadline_add(&d, 0.1);
  WT_TEST_ASSERT(fabs(wt_deadline_s(&d) - 0.4) < 1e-6, "5 x 0.1 s: %g, expected 0.4",
                 wt_deadline_s(&d));
  for (int i = 0; i < 15; i++) wt_deadline_add(&d, 0.1);
  wt_deadline_add(&d, 1.0); /* one slow step in 21: above the 90th percentile's rank */
  WT_TEST_ASSERT(fabs(wt_deadline_s(&d) - 0.4) < 1e-6, "one outlier moved it: %g",
                 wt_deadline_s(&d));
  for (int i = 0; i < 3; i++) wt_deadline_add(&d, 1.0); /* 4 in 24: it counts now */
  WT_TEST_ASSERT(fabs(wt_deadline_s(&d) - 4.0) < 1e-6, "4 slow of 24: %g, expected 4",
                 wt_deadline_s(&d));
  for (int i = 0; i < WT_DEADLINE_WINDOW; i++) wt_deadline_add(&d, 0.001);
  WT_TEST_ASSERT(fabs(wt_deadline_s(&d) - 0.05) < 1e-6, "fast run: the floor, got %g",
                 wt_deadline_s(&d));
  for (int i = 0; i < WT_DEADLINE_WINDOW; i++) wt_deadline_add(&d, 100);
  WT_TEST_ASSERT(wt_deadline_s(&d) == 10, "slow run: the cap, got %g", wt_deadline_s(&d));
  wt_deadline_add(&d, NAN), wt_deadline_add(&d, -1), wt_deadline_add(&d, INFINITY);
  WT_TEST_ASSERT(wt_deadline_samples(&d) == WT_DEADLINE_WINDOW && wt_deadline_quantile(&d) == 100,
                 "junk samples were taken");
}

/* Links: the slowest link's bytes / rate + round trip, times the margin, within [floor, cap];
 * an unmeasured link, or none, gives the cap. */
static void test_links(void) {
  const wt_deadline_config cfg = {
      .quantile = 1, .margin = 3, .floor_s = 1, .cap_s = 30, .min_samples = 5};
  /* 1 MB over 1 MB/s with a 0.1 s round trip, beside 1 MB over 1 GB/s: 3 x 1.1 s */
  const double bytes[] = {1e6, 1e6}, slow[] = {1e6, 1e9}, rtt[] = {0.1, 0.001};
  WT_TEST_CLOSE(wt_deadline_links_s(&cfg, bytes, slow, rtt, 2), 3.3, 1e-6, 0, "a slow link");
  const double fast[] = {1e9, 1e9};
  WT_TEST_CLOSE(wt_deadline_links_s(&cfg, bytes, fast, rtt, 2), 1.0, 0, 0, "fast: the floor");
  const double big[] = {1e8, 1e6};
  WT_TEST_CLOSE(wt_deadline_links_s(&cfg, big, slow, rtt, 2), 30, 0, 0,
                "100 MB at 1 MB/s: the cap");
  const double unmeasured[] = {1e9, 0};
  WT_TEST_CLOSE(wt_deadline_links_s(&cfg, bytes, unmeasured, rtt, 2), 30, 0, 0,
                "an unmeasured link: the cap");
  const double nan_rtt[] = {0.1, NAN};
  WT_TEST_CLOSE(wt_deadline_links_s(&cfg, bytes, fast, nan_rtt, 2), 30, 0, 0,
                "an unmeasured round trip: the cap");
  WT_TEST_CLOSE(wt_deadline_links_s(&cfg, bytes, fast, rtt, 0), 30, 0, 0, "no link: the cap");
  /* the median of three links' times (0.5 s, 2 s, 5 s), not the slowest */
  const wt_deadline_config median = {
      .quantile = 0.5, .margin = 2, .floor_s = 0.1, .cap_s = 60, .min_samples = 1};
  const double b3[] = {5e5, 2e6, 5e6}, r3[] = {1e6, 1e6, 1e6}, t3[] = {0, 0, 0};
  WT_TEST_CLOSE(wt_deadline_links_s(&median, b3, r3, t3, 3), 4.0, 1e-6, 0, "the median link");
}

int main(void) {
  test_deadline();
  test_links();
  return wt_test_finish("test_deadline");
}
