/* test_launch — drives `wantrain launch`, a coordinator and S × R peerd on loopback:
 *  - usage errors exit 2 with a message (unknown flag, bad schedule, a split that cannot work);
 *  - 2 stages × 2 replicas, 4 × 1 and 1 × 4 with SGD and no compression: every step's loss (from
 *    --json-log) equals `wantrain train` with the same global batch and R·m micro-batches to a
 *    relative 1e-5, and the summary reports bytes per link class; so does 1 × 2 with ZeRO-1;
 *  - --scenario emulates a netsim scenario's links (a 40 ms pipeline cut makes every iteration
 *    take at least 80 ms), the coordinator places the tasklets with --solver or as --assignment
 *    says, and netsim's prediction is printed beside the measured iteration time;
 *  - a process that dies in step 3 ends the run: exit 1 within the deadline, naming the process,
 *    its stage and replica, and the errors the others stopped with; a checkpointed run killed
 *    in step 4 and resumed continues with the losses of a run that never stopped;
 *  - --val-every / --val-batches: the validation losses in the launch log equal `wantrain train`'s
 *    to a relative 1e-5; --time-limit stops every process after the same step with a checkpoint,
 *    and --resume continues with the losses of the run that had no limit;
 *  - a DiLoCo run with int8 pseudo-gradients and delta4 activations, killed and resumed, continues
 *    with the unbroken run's losses. */
#include "common/common.h"
#include "common/testing.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char g_tmp[512], g_bin[1024], g_out[1 << 16];

/* Runs `[env] wantrain <args>` in the temp dir with stderr merged into g_out; the exit status. */
static int s_wantrain(const char *env, const char *args) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "cd %s && %s %s %s 2>&1", g_tmp, env, g_bin, args);
  FILE *p = popen(cmd, "r");
  WT_TEST_REQUIRE(p, "popen");
  size_t n = fread(g_out, 1, sizeof g_out - 1, p);
  g_out[n] = 0;
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

#define MODEL "--layers 4 --channels 16 --heads 2 --seq 16 --batch 8 --optimizer sgd --steps 5"

/* Losses of steps 1..5 from a JSON-lines log ({"step":N,"loss":X,...}). */
static int s_losses(const char *name, double *loss) {
  char path[700], line[1024];
  snprintf(path, sizeof path, "%s/%s", g_tmp, name);
  FILE *f = fopen(path, "r");
  int n = 0;
  while (f && fgets(line, sizeof line, f)) {
    long step;
    double v;
    if (sscanf(line, "{\"step\":%ld,\"loss\":%lf", &step, &v) == 2 && step >= 1 && step <= 5) {
      loss[step - 1] = v;
      n++;
    }
  }
  if (f) fclose(f);
  return n;
}

static void test_usage(void) {
  WT_TEST_ASSERT(s_wantrain("", "launch --bogus 1") == 2 && strstr(g_out, "--bogus"), "%s", g_out);
  WT_TEST_ASSERT(s_wantrain("", "launch --schedule zigzag") == 2 && strstr(g_out, "1f1b|gpipe"),
                 "%s", g_out);
  WT_TEST_ASSERT(s_wantrain("", "launch --stages 2 --replicas 3 --batch 8") == 2 &&
                     strstr(g_out, "error"),
                 "a batch of 8 over 3 replicas is refused before any process starts: %s", g_out);
  WT_TEST_ASSERT(s_wantrain("", "launch --help") == 0 && strstr(g_out, "--stages") &&
                     strstr(g_out, "--grad-codec"),
                 "%s", g_out);
}

static void s_equivalence(int stages, int replicas, int m, const char *extra) {
  char args[1024], log[64];
  snprintf(log, sizeof log, "launch-%dx%d%s.jsonl", stages, replicas, extra[0] ? "-x" : "");
  snprintf(args, sizeof args,
           "launch " MODEL " --stages %d --replicas %d --micro-batches %d --timeout 30 "
           "--json-log %s %s",
           stages, replicas, m, log, extra);
  int rc = s_wantrain("", args);
  WT_TEST_ASSERT(rc == 0 && strstr(g_out, "done: 5 steps") && strstr(g_out, "bytes sent:") &&
                     strstr(g_out, "0 messages refused"),
                 "%dx%d: exit %d\n%s", stages, replicas, rc, g_out);
  if (stages > 1)
    WT_TEST_ASSERT(!strstr(g_out, "pipeline 0.000 MB"), "%dx%d sends activations: %s", stages,
                   replicas, g_out);
  if (replicas > 1)
    WT_TEST_ASSERT(!strstr(g_out, "data-parallel 0.000 MB"), "%dx%d reduces gradients: %s", stages,
                   replicas, g_out);
  char targs[1024], tlog[64];
  snprintf(tlog, sizeof tlog, "train-%d.jsonl", replicas * m);
  snprintf(targs, sizeof targs, "train " MODEL " --micro-batches %d --val-every 0 --json-log %s",
           replicas * m, tlog);
  char tpath[700];
  snprintf(tpath, sizeof tpath, "%s/%s", g_tmp, tlog);
  unlink(tpath); /* the logs append */
  WT_TEST_ASSERT(s_wantrain("", targs) == 0, "train: %s", g_out);
  double a[5] = {NAN, NAN, NAN, NAN, NAN}, b[5] = {NAN, NAN, NAN, NAN, NAN};
  WT_TEST_ASSERT(s_losses(log, a) == 5, "%dx%d: five steps in the launch log", stages, replicas);
  WT_TEST_ASSERT(s_losses(tlog, b) == 5, "five steps in the train log");
  for (int i = 0; i < 5; i++) WT_TEST_CLOSE(a[i], b[i], 0, 1e-5, "launch vs train loss");
}

/* --scenario: the links between the two sites (40 ms one way) carry the pipeline cut, so every
 * iteration takes at least a forward and a backward crossing (80 ms); the summary shows netsim's
 * prediction beside the measurement. A scenario of the wrong size is a usage error. */
static void test_scenario(void) {
  char path[700];
  snprintf(path, sizeof path, "%s/two_sites.json", g_tmp);
  FILE *f = fopen(path, "w");
  WT_TEST_REQUIRE(f, "create %s", path);
  fprintf(f, "{\"cost_model_constants\":{\"c_dp_bytes_per_stage\":1e6,\"c_pp_bytes_per_cut\":1e5,"
             "\"d_pp\":2,\"d_dp\":2},\"scenarios\":[{\"name\":\"two_sites\","
             "\"gpus_per_region\":[2,2],\"latency_ms\":[[1,40],[40,1]],"
             "\"bandwidth_gbps\":[[1,0.02],[0.02,1]]}]}\n");
  fclose(f);
  int rc =
      s_wantrain("", "launch " MODEL " --stages 2 --replicas 2 --micro-batches 2 "
                     "--timeout 30 --scenario two_sites.json --solver ga --json-log scen.jsonl");
  WT_TEST_ASSERT(rc == 0 && strstr(g_out, "emulating scenario two_sites") &&
                     strstr(g_out, "netsim predicts") && strstr(g_out, "(ga)"),
                 "exit %d\n%s", rc, g_out);
  const char *it = strstr(g_out, "iteration time ");
  double iter = it ? atof(it + strlen("iteration time ")) : 0;
  WT_TEST_ASSERT(iter >= 0.08, "an iteration across a 40 ms cut took %.4f s", iter);
  /* a fixed assignment: the coordinator puts each world rank on the peer emulating its device */
  char fixed[700];
  snprintf(fixed, sizeof fixed, "%s/fixed.json", g_tmp);
  f = fopen(fixed, "w");
  WT_TEST_REQUIRE(f, "create %s", fixed);
  fprintf(f, "{\"pipelines\":[[1,3],[0,2]]}\n");
  fclose(f);
  rc = s_wantrain("", "launch " MODEL " --stages 2 --replicas 2 --micro-batches 2 --timeout 30 "
                      "--scenario two_sites.json --assignment fixed.json");
  WT_TEST_ASSERT(rc == 0 && strstr(g_out, "device of each peer: 1 0 3 2 (fixed.json)") &&
                     strstr(g_out, "netsim predicts"),
                 "exit %d\n%s", rc, g_out);
  rc = s_wantrain("", "launch " MODEL " --stages 4 --replicas 2 --micro-batches 1 "
                      "--scenario two_sites.json");
  WT_TEST_ASSERT(rc == 2 && strstr(g_out, "has 4 devices"), "exit %d\n%s", rc, g_out);
  /* a file of two scenarios without --scenario-name: the error lists them and names the flag */
  f = fopen(path, "w");
  WT_TEST_REQUIRE(f, "rewrite %s", path);
  fprintf(f, "{\"cost_model_constants\":{\"c_dp_bytes_per_stage\":1e6,\"c_pp_bytes_per_cut\":1e5,"
             "\"d_pp\":2,\"d_dp\":2},\"scenarios\":["
             "{\"name\":\"east\",\"gpus_per_region\":[4],\"latency_ms\":[[1]],"
             "\"bandwidth_gbps\":[[1]]},"
             "{\"name\":\"west\",\"gpus_per_region\":[4],\"latency_ms\":[[1]],"
             "\"bandwidth_gbps\":[[1]]}]}\n");
  fclose(f);
  rc = s_wantrain("", "launch " MODEL " --stages 2 --replicas 2 --scenario two_sites.json");
  WT_TEST_ASSERT(rc == 2 && strstr(g_out, "(east, west)") && strstr(g_out, "--scenario-name"),
                 "exit %d\n%s", rc, g_out);
  WT_TEST_ASSERT(s_wantrain("", "launch " MODEL " --assignment a.json") == 2 &&
                     strstr(g_out, "--assignment needs --scenario"),
                 "%s", g_out);
}

static void test_failure(void) {
  double t0 = wt_now_s();
  int rc = s_wantrain("WANTRAIN_PEERD_DIE=1:3",
                      "launch " MODEL " --stages 2 --replicas 2 --micro-batches 2 --timeout 20");
  double took = wt_now_s() - t0;
  WT_TEST_ASSERT(rc == 1, "a dead process fails the run: exit %d\n%s", rc, g_out);
  WT_TEST_ASSERT(strstr(g_out, "process 1 (stage 0, replica 1) failed") &&
                     strstr(g_out, "exit status 3") && strstr(g_out, "stopped: tasklet"),
                 "names the dead process and what the others stopped with:\n%s", g_out);
  WT_TEST_ASSERT(took < 15, "the run ended %.1f s after it started (deadline 20 s)", took);
  printf("a process dying in step 3 ended the run in %.1f s\n", took);

  /* Killed in step 4 of a checkpointed run, then resumed: steps 3..5 equal a run that never
   * stopped (the launch log prints losses to 6 decimals; the tasklets resume bit-exactly). */
  WT_TEST_ASSERT(s_wantrain("", "launch " MODEL " --stages 2 --replicas 2 --micro-batches 2 "
                                "--json-log straight.jsonl") == 0,
                 "%s", g_out);
  rc = s_wantrain("WANTRAIN_PEERD_DIE=3:4", "launch " MODEL " --stages 2 --replicas 2 "
                                            "--micro-batches 2 --checkpoint-dir ck "
                                            "--checkpoint-every 2 --timeout 20");
  WT_TEST_ASSERT(rc == 1 && strstr(g_out, "process 3 (stage 1, replica 1) failed"), "%s", g_out);
  rc = s_wantrain("", "launch " MODEL " --stages 2 --replicas 2 --micro-batches 2 "
                      "--checkpoint-dir ck --resume --json-log resumed.jsonl");
  WT_TEST_ASSERT(rc == 0 && strstr(g_out, "done: 5 steps"), "resume: exit %d\n%s", rc, g_out);
  double a[5] = {NAN, NAN, NAN, NAN, NAN}, b[5] = {NAN, NAN, NAN, NAN, NAN};
  s_losses("straight.jsonl", a);
  WT_TEST_ASSERT(s_losses("resumed.jsonl", b) == 3 && isnan(b[1]) && !isnan(b[2]),
                 "the resumed launch ran steps 3..5");
  for (int i = 2; i < 5; i++)
    WT_TEST_ASSERT(a[i] == b[i], "step %d: resumed %.6f, straight %.6f", i + 1, b[i], a[i]);
}

/* The value of "key": in the log line of step `step` (or of the line containing `event`), NAN if
 * absent or null. */
static double s_log_value(const char *name, long step, const char *event, const char *key) {
  char path[700], line[2048], want[64], k[64];
  snprintf(path, sizeof path, "%s/%s", g_tmp, name);
  snprintf(want, sizeof want, "{\"step\":%ld,", step);
  snprintf(k, sizeof k, "\"%s\":", key);
  FILE *f = fopen(path, "r");
  double v = NAN;
  while (f && fgets(line, sizeof line, f)) {
    if (event ? !strstr(line, event) : strncmp(line, want, strlen(want))) continue;
    const char *at = strstr(line, k);
    if (at && strncmp(at + strlen(k), "null", 4)) v = atof(at + strlen(k));
  }
  if (f) fclose(f);
  return v;
}

static void test_validation_and_time_limit(void) {
  const char *shape = "launch " MODEL " --stages 2 --replicas 2 --micro-batches 2 --timeout 30 ";
  char args[1024];
  snprintf(args, sizeof args, "%s --val-every 2 --val-batches 2 --json-log val.jsonl", shape);
  int rc = s_wantrain("", args);
  WT_TEST_ASSERT(rc == 0 && strstr(g_out, "| val "), "exit %d\n%s", rc, g_out);
  WT_TEST_ASSERT(s_wantrain("", "train " MODEL " --micro-batches 4 --val-every 2 --val-batches 2 "
                                "--json-log train-val.jsonl") == 0,
                 "train: %s", g_out);
  for (long step = 1; step <= 5; step++) {
    double a = s_log_value("val.jsonl", step, NULL, "val_loss");
    double b = step == 5 ? s_log_value("train-val.jsonl", 0, "\"done\"", "val_loss")
                         : s_log_value("train-val.jsonl", step, NULL, "val_loss");
    WT_TEST_ASSERT(isnan(a) == (step % 2 == 1 && step != 5), "step %ld: val %g", step, a);
    if (!isnan(a) || !isnan(b)) WT_TEST_CLOSE(a, b, 0, 1e-5, "launch vs train validation loss");
  }
  /* A limit the first step already exceeds: every process stops after step 1, checkpointed. */
  snprintf(args, sizeof args, "%s --time-limit 1e-6 --checkpoint-dir tl --json-log tl.jsonl",
           shape);
  rc = s_wantrain("", args);
  WT_TEST_ASSERT(rc == 0 && strstr(g_out, "time limit of 1e-06 s reached at step 1 of 5") &&
                     strstr(g_out, "--resume continues") && strstr(g_out, "done: 1 steps"),
                 "exit %d\n%s", rc, g_out);
  WT_TEST_ASSERT(!isnan(s_log_value("tl.jsonl", 1, NULL, "val_loss")), "validated at the stop");
  snprintf(args, sizeof args, "%s --checkpoint-dir tl --resume --json-log tl.jsonl", shape);
  rc = s_wantrain("", args);
  WT_TEST_ASSERT(rc == 0 && strstr(g_out, "done: 5 steps") && !strstr(g_out, "time limit"),
                 "resume: exit %d\n%s", rc, g_out);
  for (long step = 1; step <= 5; step++)
    WT_TEST_ASSERT(s_log_value("tl.jsonl", step, NULL, "loss") ==
                       s_log_value("val.jsonl", step, NULL, "loss"),
                   "step %ld: the stopped and resumed run's loss is the unlimited run's", step);
}

/* DiLoCo with int8 pseudo-gradients and delta4 activations keeps state across steps; a process
 * killed in step 4 of a checkpointed run, resumed, gives the losses of the unbroken run. */
static void test_stateful_resume(void) {
  const char *shape = "launch " MODEL " --stages 2 --replicas 2 --micro-batches 2 --timeout 20 "
                      "--diloco 3 --grad-codec int8 --act-codec delta4";
  char args[1024];
  snprintf(args, sizeof args, "%s --json-log st-straight.jsonl", shape);
  WT_TEST_ASSERT(s_wantrain("", args) == 0, "%s", g_out);
  snprintf(args, sizeof args, "%s --checkpoint-dir st --checkpoint-every 2", shape);
  int rc = s_wantrain("WANTRAIN_PEERD_DIE=2:4", args);
  WT_TEST_ASSERT(rc == 1 && strstr(g_out, "process 2 (stage 1, replica 0) failed"), "%s", g_out);
  snprintf(args, sizeof args, "%s --checkpoint-dir st --resume --json-log st-resumed.jsonl",
           shape);
  rc = s_wantrain("", args);
  WT_TEST_ASSERT(rc == 0 && strstr(g_out, "done: 5 steps"), "resume: exit %d\n%s", rc, g_out);
  double a[5] = {NAN, NAN, NAN, NAN, NAN}, b[5] = {NAN, NAN, NAN, NAN, NAN};
  s_losses("st-straight.jsonl", a);
  WT_TEST_ASSERT(s_losses("st-resumed.jsonl", b) == 3, "the resumed launch ran steps 3..5");
  for (int i = 2; i < 5; i++)
    WT_TEST_ASSERT(a[i] == b[i], "step %d: resumed %.6f, straight %.6f", i + 1, b[i], a[i]);
}

int main(void) {
  const char *bin = getenv("WT_BIN_DIR");
  if (!bin) {
    fprintf(stderr, "test_launch: WT_BIN_DIR not set (run through ctest)\n");
    return WT_TEST_SKIP;
  }
  snprintf(g_bin, sizeof g_bin, "%s/wantrain", bin);
  snprintf(g_tmp, sizeof g_tmp, "/tmp/wt_launchXXXXXX");
  WT_TEST_REQUIRE(mkdtemp(g_tmp), "mkdtemp");
  test_usage();
  s_equivalence(2, 2, 2, "");
  s_equivalence(4, 1, 2, "");
  s_equivalence(1, 4, 1, "");
  s_equivalence(1, 2, 1, "--zero 1");
  test_scenario();
  test_failure();
  test_validation_and_time_limit();
  test_stateful_resume();
  if (!wt_test_failures) {
    char rm[700];
    snprintf(rm, sizeof rm, "rm -rf '%s'", g_tmp);
    if (system(rm) != 0) fprintf(stderr, "could not remove %s\n", g_tmp);
  }
  if (wt_test_failures) fprintf(stderr, "test_launch: %d failure(s)\n", wt_test_failures);
  return wt_test_failures ? 1 : 0;
}
