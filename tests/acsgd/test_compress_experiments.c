/* test_compress_experiments — runs the compress-experiments tool for a few steps on the
 * synthetic corpus in three settings (int8 gradients with error feedback in data parallelism,
 * DiLoCo with fp16 pseudo-gradients, AC-SGD 2-bit deltas at a pipeline cut) and checks that each
 * prints one well-formed JSON line whose loss went down and whose byte counts fit the codec.
 * Also checks that local momentum equals global momentum without compression, that with
 * --data-order global the tool computes what `wantrain launch --stages 1` computes (the same
 * final losses), that cut-stats measures a checkpoint's activations at the cut, and that bad
 * flags are refused with a nonzero status. */
#include "common/common.h"
#include "common/testing.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char s_tool[1100], s_bin[1000];

/* Runs the tool with `args`; returns its parsed JSON line (caller frees) or NULL. */
static cJSON *s_run(const char *args, int *status) {
  char cmd[2048], line[8192] = "";
  snprintf(cmd, sizeof cmd, "'%s' %s 2>/dev/null", s_tool, args);
  FILE *p = popen(cmd, "r");
  WT_TEST_REQUIRE(p != NULL, "popen %s", cmd);
  int lines = 0;
  char buf[8192];
  while (fgets(buf, sizeof buf, p)) {
    lines++;
    snprintf(line, sizeof line, "%s", buf);
  }
  int st = pclose(p);
  *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  if (*status != 0) return NULL;
  WT_TEST_ASSERT(lines == 1, "%s: %d output lines, want exactly one", args, lines);
  cJSON *j = cJSON_Parse(line);
  WT_TEST_ASSERT(j && cJSON_IsObject(j), "%s: output is not a JSON object: %s", args, line);
  return j;
}

static double s_num(const cJSON *j, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, key);
  WT_TEST_ASSERT(cJSON_IsNumber(v), "field %s missing or not a number", key);
  return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

static void s_check_common(const cJSON *j, const char *what) {
  double v0 = s_num(j, "initial_val_loss"), v1 = s_num(j, "final_val_loss");
  WT_TEST_ASSERT(v1 < v0 - 0.05, "%s: validation loss %.4f -> %.4f did not decrease", what, v0, v1);
  WT_TEST_ASSERT(cJSON_IsFalse(cJSON_GetObjectItem(j, "diverged")), "%s diverged", what);
}

static void test_dp_int8_ef(void) {
  int st;
  cJSON *j = s_run("--experiment dp --codec int8 --ef --steps 30 --seed 3", &st);
  WT_TEST_REQUIRE(j, "dp run failed with status %d", st);
  s_check_common(j, "dp int8+ef");
  WT_TEST_ASSERT(!strcmp(cJSON_GetObjectItem(j, "codec")->valuestring, "int8"), "codec field");
  // int8 with a float scale per 64 values: ~ 4 / (1 + 4/64) = 3.76x fewer bytes than fp32.
  double ratio = s_num(j, "ratio_vs_fp32_ring");
  WT_TEST_ASSERT(ratio > 3.3 && ratio < 4.0, "int8 compression ratio %.3f", ratio);
  cJSON_Delete(j);
}

static void test_diloco_fp16(void) {
  int st;
  cJSON *j = s_run("--experiment diloco --codec fp16 --steps 30 --H 10 --seed 3", &st);
  WT_TEST_REQUIRE(j, "diloco run failed with status %d", st);
  s_check_common(j, "diloco fp16");
  WT_TEST_ASSERT(s_num(j, "rounds") == 3, "30 inner steps at H=10 are 3 outer rounds");
  cJSON *dp = s_run("--experiment dp --codec fp16 --steps 30 --seed 3", &st);
  WT_TEST_REQUIRE(dp, "dp fp16 run failed with status %d", st);
  // Same tokens, one exchange per 10 steps instead of every step.
  double a = s_num(j, "bytes_per_worker_per_step"), b = s_num(dp, "bytes_per_worker_per_step");
  WT_TEST_ASSERT(a < 0.15 * b && a > 0.05 * b, "diloco H=10 bytes %.0f vs dp %.0f", a, b);
  cJSON_Delete(j);
  cJSON_Delete(dp);
}

/* Streaming DiLoCo: 5 fragments at staggered times move the same bytes per step as one sync of
 * everything (plus the final sync of the fragments whose round was cut short) but 1/5 per sync;
 * with a 3-step delay the run still learns; impossible schedules are refused. */
static void test_diloco_streaming(void) {
  int st;
  const char *base = "--experiment diloco --steps 60 --H 10 --seed 3 --eval-every 20";
  char args[512];
  cJSON *one = s_run(base, &st);
  WT_TEST_REQUIRE(one, "diloco run failed with status %d", st);
  snprintf(args, sizeof args, "%s --fragments 5", base);
  cJSON *five = s_run(args, &st);
  WT_TEST_REQUIRE(five, "streaming run failed with status %d", st);
  snprintf(args, sizeof args, "%s --fragments 5 --overlap 3", base);
  cJSON *late = s_run(args, &st);
  WT_TEST_REQUIRE(late, "streaming run with overlap failed with status %d", st);
  s_check_common(five, "streaming");
  s_check_common(late, "streaming with overlap");
  double b1 = s_num(one, "bytes_per_worker_per_step"),
         b5 = s_num(five, "bytes_per_worker_per_step");
  // 6 syncs of everything against 6-7 of each fragment (the final sync completes cut rounds).
  WT_TEST_ASSERT(b5 > 0.98 * b1 && b5 < 1.2 * b1, "bytes per step %.0f vs %.0f", b5, b1);
  double p1 = s_num(one, "peak_bytes_per_sync"), p5 = s_num(five, "peak_bytes_per_sync");
  WT_TEST_ASSERT(p5 > 0.18 * p1 && p5 < 0.22 * p1, "peak bytes per sync %.0f vs %.0f", p5, p1);
  WT_TEST_ASSERT(s_num(one, "rounds") == 6 && s_num(five, "rounds") == 6,
                 "fragment 0 syncs 6 times");
  // The curve: steps 20, 40 and the end, whose point is the final loss.
  const cJSON *curve = cJSON_GetObjectItem(five, "val_curve");
  WT_TEST_REQUIRE(cJSON_GetArraySize(curve) == 3, "3 curve points, got %d",
                  cJSON_GetArraySize(curve));
  const cJSON *last = cJSON_GetArrayItem(curve, 2);
  WT_TEST_ASSERT(cJSON_GetArrayItem(last, 0)->valuedouble == 60, "last point at step 60");
  WT_TEST_ASSERT(cJSON_GetArrayItem(last, 1)->valuedouble == s_num(five, "final_val_loss"),
                 "last curve point is the final loss");
  cJSON_Delete(one);
  cJSON_Delete(five);
  cJSON_Delete(late);
  WT_TEST_ASSERT(s_run("--experiment diloco --H 10 --overlap 10", &st) == NULL && st != 0,
                 "a delay of H steps refused");
  WT_TEST_ASSERT(s_run("--experiment diloco --H 10 --fragments 11", &st) == NULL && st != 0,
                 "more fragments than H refused");
}

/* Pseudo-gradient codecs: the bytes per worker are the codec's size once per H steps. */
static void test_diloco_codec_bytes(void) {
  static const struct {
    const char *codec;
    double bytes_per_float; /* payload per value, scales of 64-value blocks included */
  } cases[] = {{"int4", 0.5 + 4.0 / 64}, {"sign", 1.0 / 8 + 4.0 / 64}};
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char args[256];
    int st;
    snprintf(args, sizeof args, "--experiment diloco --steps 40 --H 10 --seed 3 --ef --codec %s",
             cases[i].codec);
    cJSON *j = s_run(args, &st);
    WT_TEST_REQUIRE(j, "%s run failed with status %d", cases[i].codec, st);
    s_check_common(j, cases[i].codec);
    double want = cases[i].bytes_per_float / 4 / 10; // vs fp32, once per 10 steps
    double got = s_num(j, "fraction_of_fp32_sync");
    WT_TEST_ASSERT(fabs(got - want) <= 0.05 * want,
                   "%s: fraction of fp32 sync bytes %.5f, want %.5f", cases[i].codec, got, want);
    cJSON_Delete(j);
  }
}

static void test_acsgd_delta(void) {
  int st;
  cJSON *j =
      s_run("--experiment acsgd --acsgd delta --bits 2 --subset 16 --epochs 6 --seed 3", &st);
  WT_TEST_REQUIRE(j, "acsgd run failed with status %d", st);
  s_check_common(j, "acsgd delta 2-bit");
  const cJSON *curve = cJSON_GetObjectItem(j, "epoch_train_loss");
  int n = cJSON_GetArraySize(curve);
  WT_TEST_REQUIRE(n == 6, "6 epochs, got %d entries", n);
  double first = cJSON_GetArrayItem(curve, 0)->valuedouble;
  double last = cJSON_GetArrayItem(curve, n - 1)->valuedouble;
  WT_TEST_ASSERT(last < first - 0.1, "training loss %.4f -> %.4f", first, last);
  // 2-bit codes + 8 bytes of scale per 64-float row: far below the 16 KiB per sample of floats.
  WT_TEST_ASSERT(s_num(j, "fwd_bytes_per_step") < 0.15 * 4 * 64 * 64 * 4, "forward bytes");
  WT_TEST_ASSERT(s_num(j, "cache_bytes") == 16.0 * 64 * 64 * 4, "cache holds the 16 samples");
  cJSON_Delete(j);
}

/* Momentum is linear: workers that apply it locally and send their momenta (uncompressed) take
 * the same steps as a global momentum on the averaged gradient, up to float rounding. */
static void test_local_momentum_is_global(void) {
  int st;
  cJSON *g = s_run("--experiment dp --optimizer sgd --clip 0 --steps 20 --seed 3", &st);
  cJSON *l =
      s_run("--experiment dp --optimizer sgd --clip 0 --local-momentum --steps 20 --seed 3", &st);
  WT_TEST_REQUIRE(g && l, "sgd runs failed with status %d", st);
  WT_TEST_ASSERT(cJSON_IsTrue(cJSON_GetObjectItem(l, "local_momentum")), "flag reported");
  double a = s_num(g, "final_val_loss"), b = s_num(l, "final_val_loss");
  WT_TEST_CLOSE(b, a, 0, 1e-4, "final loss, local vs global momentum");
  cJSON_Delete(g);
  cJSON_Delete(l);
}

/* The final validation loss `wantrain launch` prints for `args` (its JSON log's done event). */
static double s_launch_val(const char *args) {
  char dir[] = "/tmp/wt_cexp_XXXXXX", cmd[4096], log[1100];
  WT_TEST_REQUIRE(mkdtemp(dir), "mkdtemp");
  snprintf(log, sizeof log, "%s/log.jsonl", dir);
  snprintf(cmd, sizeof cmd, "'%s/wantrain' launch %s --json-log %s >%s/out 2>&1", s_bin, args, log,
           dir);
  int st = system(cmd);
  WT_TEST_ASSERT(st == 0, "wantrain launch %s: status %d", args, st);
  double val = NAN;
  FILE *f = fopen(log, "r");
  char line[4096];
  while (f && fgets(line, sizeof line, f)) {
    cJSON *j = cJSON_Parse(line);
    const cJSON *e = j ? cJSON_GetObjectItem(j, "event") : NULL;
    if (cJSON_IsString(e) && !strcmp(e->valuestring, "done")) val = s_num(j, "val_loss");
    cJSON_Delete(j);
  }
  if (f) fclose(f);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  WT_TEST_ASSERT(system(cmd) == 0, "rm %s", dir);
  return val;
}

/* In-process and multi-process are the same arithmetic once the batches are drawn alike: the
 * same model, optimizer, DiLoCo outer step and sign codec give the same final validation loss
 * (launch prints it with 6 decimals); with each worker's own data stream they differ. */
static void test_same_as_runtime(void) {
  const char *model = "--layers 2 --channels 32 --heads 2 --seq 32 --warmup 5 --seed 2";
  char args[1024];
  snprintf(args, sizeof args,
           "--stages 1 --replicas 4 --batch 16 --steps 30 --diloco 10 --grad-codec sign "
           "--grad-ef off --weight-decay 0.1 --val-every 0 --val-batches 8 --data synthetic %s",
           model);
  double rt = s_launch_val(args);
  const char *tool = "--experiment diloco --workers 4 --batch 4 --steps 30 --H 10 --codec sign "
                     "--eval-batches 8";
  int st;
  snprintf(args, sizeof args, "%s %s --data-order global", tool, model);
  cJSON *g = s_run(args, &st);
  snprintf(args, sizeof args, "%s %s", tool, model);
  cJSON *w = s_run(args, &st);
  WT_TEST_REQUIRE(g && w, "tool runs failed");
  double vg = s_num(g, "final_val_loss"), vw = s_num(w, "final_val_loss");
  WT_TEST_ASSERT(fabs(vg - rt) < 2e-6, "--data-order global %.7f vs wantrain launch %.7f", vg, rt);
  WT_TEST_ASSERT(fabs(vw - rt) > 1e-4, "per-worker streams %.7f should differ from launch %.7f", vw,
                 rt);
  cJSON_Delete(g);
  cJSON_Delete(w);
}

/* cut-stats: the delta cache replay counts every send and can only hit more with a larger
 * cache; on a 2-stage checkpoint, 8-bit quantisation errs less than 4-bit, and 4-bit far less
 * than the activation itself. */
static void test_cut_stats(void) {
  char dir[] = "/tmp/wt_cstats_XXXXXX", cmd[2048], args[1400];
  WT_TEST_REQUIRE(mkdtemp(dir), "mkdtemp");
  snprintf(cmd, sizeof cmd,
           "'%s/wantrain' launch --stages 2 --replicas 1 --batch 4 --steps 5 --layers 2 "
           "--channels 32 --heads 2 --seq 32 --data synthetic --val-every 0 --checkpoint-dir "
           "%s/run >%s/out 2>&1",
           s_bin, dir, dir);
  WT_TEST_REQUIRE(system(cmd) == 0, "launch with a checkpoint: %s", cmd);
  const char *base = "--experiment cut-stats --seq 32 --workers 2 --batch 4 --steps 400 --cut 1 "
                     "--eval-batches 2";
  int st;
  snprintf(args, sizeof args, "%s --cache-samples 1", base);
  cJSON *small = s_run(args, &st);
  snprintf(args, sizeof args, "%s --cache-samples 4096 --checkpoint %s/run/stage-0", base, dir);
  cJSON *big = s_run(args, &st);
  WT_TEST_REQUIRE(small && big, "cut-stats runs failed (status %d)", st);
  WT_TEST_ASSERT(s_num(big, "sends") == 400 * 4, "400 steps of 4 rows: %g sends",
                 s_num(big, "sends"));
  double fs = s_num(small, "delta_fraction"), fb = s_num(big, "delta_fraction");
  WT_TEST_ASSERT(fs >= 0 && fs <= fb && fb <= 1, "hit fractions %g (1 slot) <= %g (4096)", fs, fb);
  double e4 = s_num(big, "rel_err_4bit"), e8 = s_num(big, "rel_err_8bit");
  WT_TEST_ASSERT(e8 > 0 && e8 < e4 && e4 < 0.5, "relative errors 8-bit %g < 4-bit %g < 0.5", e8,
                 e4);
  WT_TEST_ASSERT(s_num(big, "checkpoint_step") == 5, "the checkpoint of step 5");
  cJSON_Delete(small);
  cJSON_Delete(big);
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  WT_TEST_ASSERT(system(cmd) == 0, "rm %s", dir);
}

static void test_bad_flag(void) {
  int st;
  WT_TEST_ASSERT(s_run("--codec int3", &st) == NULL && st != 0, "unknown codec refused");
  WT_TEST_ASSERT(s_run("--experiment acsgd --cut 2 --layers 2", &st) == NULL && st != 0,
                 "a cut beyond the model refused");
  WT_TEST_ASSERT(s_run("--local-momentum --optimizer adamw", &st) == NULL && st != 0,
                 "local momentum with AdamW refused");
}

int main(void) {
  const char *bin = getenv("WT_BIN_DIR");
  snprintf(s_bin, sizeof s_bin, "%s", bin ? bin : "bin");
  snprintf(s_tool, sizeof s_tool, "%s/compress-experiments", s_bin);
  if (access(s_tool, X_OK) != 0) {
    fprintf(stderr,
            "test_compress_experiments: %s is missing or not executable; build the "
            "compress-experiments target (or set WT_BIN_DIR to the folder holding it)\n",
            s_tool);
    return 1;
  }
  test_dp_int8_ef();
  test_diloco_fp16();
  test_diloco_streaming();
  test_diloco_codec_bytes();
  test_acsgd_delta();
  test_same_as_runtime();
  test_cut_stats();
  test_local_momentum_is_global();
  test_bad_flag();
  return wt_test_finish("test_compress_experiments");
}
