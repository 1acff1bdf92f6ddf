/* test_sim_real — `wantrain launch` on an emulated WAN against netsim's prediction for the same
 * run: 2 stages × 2 replicas on netsim/scenarios/emulated-wan.json's two_sites (the pipeline
 * cut crosses a 40 ms link), GPipe and 1F1B, 4 micro-batches. The measured iteration time must
 * be within 35% of the launcher's netsim prediction (fed with the run's own compute and bytes),
 * and the latency-bound part must be real (several link latencies per step), so a simulator
 * that leaves out a message the runtime sends, or a runtime that sends one more, fails. */
#include "common/common.h"
#include "common/testing.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static char g_tmp[512], g_cmd[2048], g_out[1 << 16];

static int s_run(const char *cmd) {
  FILE *p = popen(cmd, "r");
  WT_TEST_REQUIRE(p, "popen");
  size_t n = fread(g_out, 1, sizeof g_out - 1, p);
  g_out[n] = 0;
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* The last value of "key": in a JSON-lines file (the launcher's done event); NAN if absent. */
static double s_json_value(const char *path, const char *key) {
  char line[2048], pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  double v = NAN;
  FILE *f = fopen(path, "r");
  while (f && fgets(line, sizeof line, f)) {
    const char *at = strstr(line, pat);
    if (at && strstr(line, "\"event\":\"done\"")) v = atof(at + strlen(pat));
  }
  if (f) fclose(f);
  return v;
}

static void s_case(const char *bin, const char *src, const char *schedule) {
  char log[700];
  snprintf(log, sizeof log, "%s/%s.jsonl", g_tmp, schedule);
  snprintf(g_cmd, sizeof g_cmd,
           "cd %s && %s/wantrain launch --stages 2 --replicas 2 --schedule %s --micro-batches 4 "
           "--batch 8 --seq 32 --layers 2 --channels 32 --heads 2 --steps 12 --log-every 12 "
           "--timeout 30 --scenario %s/netsim/scenarios/emulated-wan.json --scenario-name "
           "two_sites --solver none --json-log %s 2>&1", /* rank order: each pipeline crosses */
           g_tmp, bin, schedule, src, log);
  int rc = s_run(g_cmd);
  WT_TEST_ASSERT(rc == 0 && strstr(g_out, "netsim predicts"), "exit %d\n%s", rc, g_out);
  double measured = s_json_value(log, "iteration_s");
  double predicted = s_json_value(log, "predicted_iteration_s");
  printf("%s: measured %.4f s, netsim %.4f s (%+.1f%%)\n", schedule, measured, predicted,
         100 * (measured / predicted - 1));
  /* a forward and a backward crossing, the tied and the norm exchanges: >= 4 x 40 ms */
  WT_TEST_ASSERT(measured >= 0.16,
                 "%s: %.4f s per iteration is too fast for 4 crossings of "
                 "a 40 ms link: is the emulation on?",
                 schedule, measured);
  WT_TEST_ASSERT(predicted > 0 && fabs(measured / predicted - 1) <= 0.35,
                 "%s: measured %.4f s vs netsim %.4f s: more than 35%% apart\n%s", schedule,
                 measured, predicted, g_out);
}

int main(void) {
  const char *bin = getenv("WT_BIN_DIR"), *src = getenv("WT_SOURCE_DIR");
  if (!bin || !src) {
    fprintf(stderr, "test_sim_real: WT_BIN_DIR / WT_SOURCE_DIR not set (run through ctest)\n");
    return WT_TEST_SKIP;
  }
  snprintf(g_tmp, sizeof g_tmp, "/tmp/wt_simrealXXXXXX");
  WT_TEST_REQUIRE(mkdtemp(g_tmp), "mkdtemp");
  s_case(bin, src, "gpipe");
  s_case(bin, src, "1f1b");
  if (!wt_test_failures) {
    char rm[700];
    snprintf(rm, sizeof rm, "rm -rf '%s'", g_tmp);
    if (system(rm) != 0) fprintf(stderr, "could not remove %s\n", g_tmp);
  }
  if (wt_test_failures) fprintf(stderr, "test_sim_real: %d failure(s)\n", wt_test_failures);
  return wt_test_failures ? 1 : 0;
}
