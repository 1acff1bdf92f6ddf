/* test_cli_launch — `wantrain launch` reports what it could not write (a full disk under
 * --json-log: the run trains on and exits 1, as `wantrain train` does), and its --resume
 * refuses a run continued with another setting that changes the numbers, naming the setting,
 * both values and the flag, while more --steps resume and say so. */
#include "common/testing.h"
#include "tests/cli/cli_harness.h"

#include <stdlib.h>
#include <string.h>

#define RUN                                                                                        \
  "launch --stages 2 --replicas 1 --data synthetic --layers 2 --channels 16 --heads 2 --seq 16 "   \
  "--val-every 0 --val-batches 1 "

static void test_log_write_error(void) {
  EXPECT(RUN "--batch 4 --steps 2 --json-log /dev/full", 1, "cannot write --json-log /dev/full");
  WT_TEST_ASSERT(strstr(g_out, "done: 2 steps") && strstr(g_out, "the log is incomplete"),
                 "trains on, then fails:\n%s", g_out);
}

static void test_resume_binding(void) {
  EXPECT(RUN "--batch 4 --steps 2 --checkpoint-dir run", 0, "done: 2 steps");
  EXPECT(RUN "--batch 8 --steps 4 --checkpoint-dir run --resume", 1,
         "batch was 4, this run asks 8; resume with --batch 4 or start a new run directory");
  EXPECT(RUN "--batch 4 --steps 4 --seed 5 --checkpoint-dir run --resume", 1,
         "seed was 1, this run asks 5; resume with --seed 1");
  EXPECT(RUN "--batch 4 --steps 4 --checkpoint-dir run --resume", 0,
         "steps was 2, this run asks 4");
  WT_TEST_ASSERT(strstr(g_out, "done: 4 steps"), "more steps resume:\n%s", g_out);
}

int main(void) {
  cli_harness_init();
  test_log_write_error();
  test_resume_binding();
  if (!wt_test_failures) {
    char rm[700];
    snprintf(rm, sizeof rm, "rm -rf '%s'", g_tmp);
    if (system(rm) != 0) fprintf(stderr, "could not remove %s\n", g_tmp);
  }
  return wt_test_finish("test_cli_launch");
}
