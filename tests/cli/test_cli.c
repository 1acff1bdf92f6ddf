/* test_cli — drives the `wantrain` binary: every usage error exits 2, every run-time failure
 * (missing file, bad URL, SHA-256 mismatch, bad shard, corrupt or mismatched checkpoint) exits 1
 * with a message, and the happy paths (train with JSON log and checkpoints, resume, eval --json,
 * sample) produce what they document. */
#include "common/common.h"
#include "common/testing.h"
#include "tests/cli/cli_harness.h"

#include <stdlib.h>

#include <stdint.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

static void test_usage_errors(void) {
  EXPECT("", 2, "usage");
  EXPECT("frobnicate", 2, "unknown command");
  EXPECT("train --bogus 1", 2, "unknown option --bogus");
  EXPECT("train --steps abc", 2, "not a number");
  EXPECT("train --steps 0", 2, "out of range");
  EXPECT("train --optimizer adam", 2, "adamw|sgd");
  EXPECT("train --steps", 2, "needs a value");
  EXPECT("train --config missing.json", 2, "missing.json");
  EXPECT("eval --data x.txt", 2, "--checkpoint");
  EXPECT("sample", 2, "--checkpoint");
  EXPECT("--help", 0, "sample");
  const char *train_opts[] = {"--config",
                              "--data ",
                              "--data-sha256",
                              "--steps",
                              "--batch",
                              "--micro-batches",
                              "--seq",
                              "--layers",
                              "--channels",
                              "--heads",
                              "--lr",
                              "--warmup",
                              "--weight-decay",
                              "--grad-clip",
                              "--optimizer",
                              "--seed",
                              "--val-every",
                              "--checkpoint-dir",
                              "--checkpoint-every",
                              "--resume",
                              "--json-log",
                              "--time-limit"};
  WT_TEST_ASSERT(s_wantrain("train --help") == 0, "train --help");
  for (size_t i = 0; i < WT_ARRAY_LEN(train_opts); i++)
    WT_TEST_ASSERT(strstr(g_out, train_opts[i]), "train --help lacks %s", train_opts[i]);
  WT_TEST_ASSERT(strstr(g_out, "(default: 300)"), "defaults shown");
  EXPECT("eval --help", 0, "--json");
  EXPECT("sample --help", 0, "--temperature");
}

static void test_data_errors(void) {
  EXPECT("train --data nonexistent.txt --steps 1", 1, "nonexistent.txt");
  EXPECT("train --data http://127.0.0.1:1/corpus.txt --cache-dir cache --steps 1", 1,
         "cannot fetch");
  char args[2048], text[4000];
  for (size_t i = 0; i < sizeof text; i++) text[i] = (char)('a' + (i * 7 + i / 13) % 26);
  s_write("corpus.txt", text, sizeof text);
  snprintf(args, sizeof args,
           "train --data file://%s/corpus.txt --data-sha256 %064d "
           "--cache-dir cache --steps 1",
           g_tmp, 0);
  EXPECT(args, 1, "SHA-256");
  EXPECT("train --data corpus.txt --data-sha256 abc --steps 1", 2, "64 hexadecimal");
  EXPECT("eval --checkpoint run --data corpus.txt --data-sha256 xyz", 2, "64 hexadecimal");
  int32_t header[256] = {20240520, 1, 1000}; /* claims 1000 tokens, holds none */
  s_write("bad.bin", header, sizeof header);
  EXPECT("train --data bad.bin --steps 1", 1, "truncated");
  header[0] = 7;
  s_write("bad.bin", header, sizeof header);
  EXPECT("train --data bad.bin --steps 1", 1, "magic");
  EXPECT("train --data corpus.txt --seq 1000 --steps 1", 1, "too short");
  EXPECT("train --data corpus.txt --channels 30 --heads 4 --steps 1", 2,
         "--heads 4 must divide --channels 30");
  EXPECT("train --data corpus.txt --batch 5 --micro-batches 2 --steps 1", 1, "multiple");
  EXPECT("train --resume --steps 1", 1, "--checkpoint-dir");
  EXPECT("train --resume --checkpoint-dir nowhere --steps 1", 1, "no checkpoint");
  EXPECT("eval --checkpoint nowhere --data corpus.txt", 1, "no checkpoint");
  /* A config file sets options; a flag beside it wins; an unknown key is a usage error. */
  const char *cfg = "{\"data\": \"corpus.txt\", \"steps\": 3, \"layers\": 1, \"channels\": 16, "
                    "\"heads\": 2, \"seq\": 16, \"batch\": 4}";
  s_write("cfg.json", cfg, strlen(cfg));
  EXPECT("train --config cfg.json --steps 2", 0, "done: step 2");
  WT_TEST_ASSERT(strstr(g_out, "1 layers, 16 channels"), "config applied: %s", g_out);
  s_write("bad.json", "{\"stepz\": 3}", 12);
  EXPECT("train --config bad.json", 2, "stepz");
}

/* The "loss" values of step lines in a JSON log, as text (compared exactly). */
static int s_losses(const char *log, char losses[][32], int max) {
  char path[700], line[2048];
  snprintf(path, sizeof path, "%s/%s", g_tmp, log);
  FILE *f = fopen(path, "r");
  int n = 0;
  while (f && fgets(line, sizeof line, f) && n < max) {
    const char *p = strstr(line, "{\"step\":");
    const char *l = p ? strstr(line, "\"loss\":") : NULL;
    if (l) sscanf(l + 7, "%31[^,]", losses[n++]);
  }
  if (f) fclose(f);
  return n;
}

static void test_train_resume_eval_sample(void) {
  const char *model = "--data corpus.txt --layers 1 --channels 16 --heads 2 --seq 16 --batch 4 "
                      "--micro-batches 2 --val-every 2 --val-batches 2 --lr 1e-2";
  char args[2048];
  snprintf(args, sizeof args, "train %s --steps 6 --json-log full.jsonl", model);
  EXPECT(args, 0, "done: step 6");
  snprintf(args, sizeof args,
           "train %s --steps 6 --checkpoint-dir run --checkpoint-every 2 "
           "--time-limit 1e-9 --json-log part.jsonl",
           model);
  EXPECT(args, 0, "time limit");
  snprintf(args, sizeof args,
           "train %s --steps 6 --checkpoint-dir run --resume "
           "--json-log part.jsonl",
           model);
  EXPECT(args, 0, "resumed from step 1");
  char full[16][32], part[16][32];
  int nf = s_losses("full.jsonl", full, 16), np = s_losses("part.jsonl", part, 16);
  WT_TEST_ASSERT(nf == 6 && np == 6, "log lines: %d and %d", nf, np);
  for (int i = 0; i < nf && i < np; i++)
    WT_TEST_ASSERT(!strcmp(full[i], part[i]), "step %d loss %s vs resumed %s", i + 1, full[i],
                   part[i]);
  char path[700], line[2048] = "", last[2048] = "";
  snprintf(path, sizeof path, "%s/full.jsonl", g_tmp);
  FILE *f = fopen(path, "r");
  while (f && fgets(line, sizeof line, f)) {
    if (strstr(line, "\"step\":2,"))
      WT_TEST_ASSERT(strstr(line, "\"val_loss\":") && !strstr(line, "\"val_loss\":null") &&
                         strstr(line, "\"lr\":") && strstr(line, "\"tokens_per_s\":"),
                     "step line: %s", line);
    memcpy(last, line, sizeof line);
  }
  if (f) fclose(f);
  WT_TEST_ASSERT(strstr(last, "{\"event\":\"done\",\"step\":6,\"loss\":") &&
                     strstr(last, "\"val_loss\":"),
                 "last line: %s", last);

  /* eval: windows of 17 at stride 16 over 4000 bytes = 249 windows, 3984 targets. */
  EXPECT("eval --checkpoint run --data corpus.txt --json", 0, "\"tokens\":3984}");
  double loss = -1;
  sscanf(g_out, "{\"loss\":%lf", &loss);
  WT_TEST_ASSERT(loss > 0 && loss < 6, "eval loss %g", loss);
  EXPECT("sample --checkpoint run --prompt hello --tokens 20 --temperature 0.8", 0, "hello");
  WT_TEST_ASSERT(strlen(g_out) >= 5 + 1, "sample output: %s", g_out);
  EXPECT("sample --checkpoint run --prompt hi --tokens 8 --temperature 0", 0, "hi");

  /* Refusals of checkpoints the command cannot use. */
  snprintf(args, sizeof args, "train %s --channels 32 --steps 8 --checkpoint-dir run --resume",
           model);
  EXPECT(args, 1, "was written for");
  snprintf(args, sizeof args, "train %s --steps 8 --checkpoint-dir run", model);
  EXPECT(args, 1, "--resume to continue");
  EXPECT("eval --checkpoint run --data synthetic", 1, "vocabulary");
  snprintf(path, sizeof path, "%s/run/step-00000006/model.safetensors", g_tmp);
  f = fopen(path, "r+b");
  WT_TEST_REQUIRE(f, "open %s", path);
  fseek(f, 3000, SEEK_SET);
  int c = fgetc(f);
  fseek(f, 3000, SEEK_SET);
  fputc(c ^ 0x40, f);
  fclose(f);
  EXPECT("eval --checkpoint run --data corpus.txt", 1, "SHA-256");
  EXPECT("sample --checkpoint run", 1, "corrupt");
}

/* SIGTERM in the middle of a run: the step finishes, a checkpoint is written, the exit status is
 * 128 + 15, and --resume then ends with the losses of a run that was never stopped. */
static void test_signal_stop(void) {
  const char *model = "--data corpus.txt --layers 1 --channels 16 --heads 2 --seq 16 --batch 4 "
                      "--val-every 0 --log-every 1 --lr 1e-2 --steps 400";
  char args[2048];
  snprintf(args, sizeof args, "train %s --json-log sig-full.jsonl", model);
  WT_TEST_REQUIRE(s_wantrain(args) == 0, "uninterrupted run: %s", g_out);
  snprintf(args, sizeof args, "train %s --checkpoint-dir sigrun --json-log sig-part.jsonl", model);
  pid_t pid;
  FILE *out = s_spawn(args, 0, &pid);
  s_wait_line(out, "step ");
  kill(pid, SIGTERM); /* after the first step's progress line: mid-run */
  char line[512];
  while (fgets(line, sizeof line, out)) {
  }
  fclose(out);
  int st = 0;
  waitpid(pid, &st, 0);
  WT_TEST_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 128 + SIGTERM,
                 "stopped run exits 143 (status %d)", st);
  snprintf(args, sizeof args,
           "train %s --checkpoint-dir sigrun --resume "
           "--json-log sig-part.jsonl",
           model);
  EXPECT(args, 0, "done: step 400");
  long resumed_at = -1;
  const char *at = strstr(g_out, "resumed from step ");
  if (at) resumed_at = atol(at + 18);
  WT_TEST_ASSERT(resumed_at > 0 && resumed_at < 400, "stopped mid-run, at step %ld", resumed_at);
  static char full[400][32], part[400][32];
  int nf = s_losses("sig-full.jsonl", full, 400), np = s_losses("sig-part.jsonl", part, 400);
  WT_TEST_ASSERT(nf == 400 && np == 400, "log lines: %d and %d", nf, np);
  for (int i = 0; i < nf && i < np; i++)
    if (strcmp(full[i], part[i])) {
      WT_TEST_ASSERT(0, "step %d loss %s vs stopped+resumed %s", i + 1, full[i], part[i]);
      break;
    }
}

int main(void) {
  cli_harness_init();
  test_usage_errors();
  test_data_errors();
  test_train_resume_eval_sample();
  test_signal_stop();
  if (!wt_test_failures) { /* scratch is kept when a check failed, for a look at it */
    char rm[700];
    snprintf(rm, sizeof rm, "rm -rf '%s'", g_tmp);
    if (system(rm) != 0) fprintf(stderr, "could not remove %s\n", g_tmp);
  }
  return wt_test_finish("test_cli");
}
