/* test_cli_moe — `wantrain train` with the Mixture-of-Experts flags:
 *   - --help documents every --moe-* flag;
 *   - bad values and combinations are usage errors (exit 2) with a message naming the flag;
 *   - an MoE model (4 experts, top-2, block 1) trains: the loss falls by more than 1 nat over
 *     40 steps, the progress line shows the experts' load, and every JSON step line carries the
 *     per-expert load whose sum plus the dropped pairs is batch · seq · k · MoE blocks;
 *   - its checkpoint records the MoE model, so `wantrain eval` rebuilds and scores it and
 *     `wantrain sample` generates from it;
 *   - a run stopped and resumed from its checkpoint logs bitwise the same losses and expert loads
 *     as one that never stopped (router, experts and optimizer state all round-trip);
 *   - `wantrain launch` trains the MoE model on 2 stages × 2 replicas (each stage recomputing its
 *     forwards, one in flight) with every step's loss equal to `wantrain train`'s with the same
 *     global batch and R·m micro-batches to a relative 1e-5, for both schedules; its MoE flags
 *     are checked as train's. */
#include "tests/cli/cli_harness.h"

#include <math.h>

static void test_help_and_refusals(void) {
  EXPECT("train --help", 0, "--moe-experts");
  const char *flags[] = {"--moe-top-k", "--moe-layers", "--moe-capacity", "--moe-aux-weight"};
  for (size_t i = 0; i < sizeof flags / sizeof *flags; i++)
    WT_TEST_ASSERT(strstr(g_out, flags[i]), "--help lacks %s", flags[i]);
  EXPECT("train --moe-experts 4 --moe-top-k 5", 2, "--moe-top-k 5 must be at most --moe-experts 4");
  EXPECT("train --moe-experts 4 --moe-layers 3", 2, "block 3 does not exist");
  EXPECT("train --moe-experts 4 --moe-layers 0,x", 2, "\"x\" is not a block number");
  EXPECT("train --moe-experts -1", 2, "moe-experts");
  EXPECT("train --moe-experts 4 --moe-capacity 0", 2, "moe-capacity");
  EXPECT("train --moe-experts 4 --device cuda:0", 2, "--device cpu only");
  EXPECT("train --moe-top-k 2", 2, "add --moe-experts E");
}

/* The text, as numbers, of `key` in a JSON line (after its first occurrence). */
static double s_num(const char *line, const char *key) {
  const char *p = strstr(line, key);
  return p ? strtod(p + strlen(key), NULL) : NAN;
}

static void test_train_and_eval(void) {
  char text[16384];
  size_t n = 0;
  while (n + 64 < sizeof text)
    n += (size_t)snprintf(text + n, sizeof text - n, "the cat sat on the mat %zu times. ", n % 7);
  s_write("corpus.txt", text, n);
  EXPECT("train --data corpus.txt --layers 2 --channels 32 --heads 2 --seq 32 --batch 8 "
         "--steps 40 --moe-experts 4 --moe-top-k 2 --moe-layers 1 --val-every 0 --log-every 10 "
         "--json-log moe.jsonl --checkpoint-dir run",
         0, "moe load");
  WT_TEST_ASSERT(strstr(g_out, "moe: 4 experts, top-2"), "no MoE summary in:\n%s", g_out);
  char path[700], line[4096];
  snprintf(path, sizeof path, "%s/moe.jsonl", g_tmp);
  FILE *f = fopen(path, "r");
  WT_TEST_REQUIRE(f, "no JSON log");
  double first = NAN, last = NAN;
  int steps = 0;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "{\"step\":", 8) != 0) continue;
    const char *load = strstr(line, "\"moe\":{\"load\":[");
    WT_TEST_REQUIRE(load, "step line without the experts' load: %s", line);
    long sum = 0;
    char *p = (char *)load + 15;
    for (int e = 0; e < 4; e++) sum += strtol(p, &p, 10), p += *p == ',';
    long dropped = (long)s_num(line, "\"dropped\":");
    WT_TEST_ASSERT(*p == ']' && sum + dropped == 8L * 32 * 2 * 1,
                   "load %ld + dropped %ld (want 512) in %s", sum, dropped, line);
    double loss = s_num(line, "\"loss\":");
    if (steps++ == 0) first = loss;
    last = loss;
  }
  fclose(f);
  WT_TEST_ASSERT(steps == 40 && last < first - 1.0, "%d steps, loss %.4f -> %.4f", steps, first,
                 last);
  printf("MoE training: loss %.4f -> %.4f in %d steps\n", first, last, steps);
  EXPECT("eval --checkpoint run --data corpus.txt --json", 0, "\"loss\":");
  double eval = s_num(g_out, "\"loss\":");
  WT_TEST_ASSERT(eval < first - 1.0, "eval of the MoE checkpoint: %.4f", eval);
}

/* The step lines of a JSON log from "{\"step\":" to the end, without the timing field. */
static int s_step_lines(const char *log, char lines[][2048], int max) {
  char path[700], line[1024];
  snprintf(path, sizeof path, "%s/%s", g_tmp, log);
  FILE *f = fopen(path, "r");
  int n = 0;
  while (f && fgets(line, sizeof line, f) && n < max) {
    if (strncmp(line, "{\"step\":", 8) != 0) continue;
    char *t = strstr(line, ",\"tokens_per_s\":"), *m = strstr(line, ",\"moe\":");
    WT_TEST_REQUIRE(t && m, "no timing or moe field in %s", line);
    *t = 0;
    snprintf(lines[n++], 2048, "%s%s", line, m);
  }
  if (f) fclose(f);
  return n;
}

static void test_resume(void) {
  const char *model = "--data corpus.txt --layers 2 --channels 16 --heads 2 --seq 16 --batch 4 "
                      "--steps 6 --moe-experts 4 --moe-top-k 2 --moe-layers 0 --val-every 0";
  char args[1024];
  snprintf(args, sizeof args, "train %s --json-log full.jsonl", model);
  EXPECT(args, 0, "done: step 6");
  snprintf(args, sizeof args,
           "train %s --checkpoint-dir rrun --checkpoint-every 3 --time-limit 1e-9 "
           "--json-log part.jsonl",
           model);
  EXPECT(args, 0, "time limit");
  snprintf(args, sizeof args, "train %s --checkpoint-dir rrun --resume --json-log part.jsonl",
           model);
  EXPECT(args, 0, "resumed from step 1");
  static char full[8][2048], part[8][2048];
  int nf = s_step_lines("full.jsonl", full, 8), np = s_step_lines("part.jsonl", part, 8);
  WT_TEST_ASSERT(nf == 6 && np == 6, "%d and %d step lines", nf, np);
  for (int i = 0; i < nf && i < np; i++)
    WT_TEST_ASSERT(!strcmp(full[i], part[i]), "step %d differs after resume:\n%s\n%s", i + 1,
                   full[i], part[i]);
  EXPECT("sample --checkpoint rrun --tokens 20", 0, "");
}

/* Losses of steps 1..n of a JSON log ({"step":N,"loss":X,...}) into loss[]; the number found. */
static int s_losses(const char *log, double *loss, int n) {
  char path[700], line[4096];
  snprintf(path, sizeof path, "%s/%s", g_tmp, log);
  FILE *f = fopen(path, "r");
  int found = 0;
  long step;
  double v;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "{\"step\":%ld,\"loss\":%lf", &step, &v) == 2 && step >= 1 && step <= n)
      loss[step - 1] = v, found++;
  if (f) fclose(f);
  return found;
}

static void test_launch(void) {
  EXPECT("launch --moe-experts 4 --moe-top-k 5", 2,
         "--moe-top-k 5 must be at most --moe-experts 4");
  EXPECT("launch --moe-capacity 2", 2, "add --moe-experts E");
  const char *model = "--layers 2 --channels 32 --heads 2 --seq 16 --batch 8 --steps 5 "
                      "--optimizer sgd --moe-experts 4 --moe-top-k 2 --moe-layers 1 "
                      "--moe-capacity 1.0";
  char args[1024];
  snprintf(args, sizeof args, "train %s --micro-batches 4 --val-every 0 --json-log moe-ref.jsonl",
           model);
  EXPECT(args, 0, "done");
  double ref[5], got[5];
  WT_TEST_REQUIRE(s_losses("moe-ref.jsonl", ref, 5) == 5, "five steps in the train log");
  const char *schedules[] = {"gpipe", "1f1b"};
  for (int k = 0; k < 2; k++) {
    char log[64];
    snprintf(log, sizeof log, "moe-launch-%s.jsonl", schedules[k]);
    snprintf(args, sizeof args,
             "launch %s --stages 2 --replicas 2 --micro-batches 2 --schedule %s --timeout 30 "
             "--json-log %s",
             model, schedules[k], log);
    EXPECT(args, 0, "an MoE stage keeps one forward in flight");
    WT_TEST_REQUIRE(s_losses(log, got, 5) == 5, "%s: five steps in the launch log", schedules[k]);
    for (int i = 0; i < 5; i++) WT_TEST_CLOSE(got[i], ref[i], 0, 1e-5, schedules[k]);
  }
}

int main(void) {
  cli_harness_init();
  test_help_and_refusals();
  test_train_and_eval();
  test_resume();
  test_launch();
  return wt_test_finish("test_cli_moe");
}
