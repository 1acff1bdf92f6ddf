/* test_deadline — common/deadline.h: the cap until enough samples, then margin × quantile within
 * [floor, cap]; a slow sample moves the quantile only once it is more than 1 − q of the window;
 * the window forgets old samples; junk samples are ignored. */
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

int main(void) {
  test_deadline();
  return wt_test_finish("test_deadline");
}
