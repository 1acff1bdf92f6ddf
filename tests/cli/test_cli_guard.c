/* test_cli_guard — `wantrain` refuses what would lose or mix up a run, before it starts: a
 * directory as data, a checkpoint directory it cannot write, one that holds another run or is
 * in use by one, a JSON log that holds another run's lines; reports what it could not write
 * (a full disk under --json-log); recovers from a dangling `latest`; ends a stalled download on
 * SIGTERM; prints JSON for a non-finite loss; and refuses a --device it cannot use. */
#include "common/common.h"
#include "common/testing.h"
#include "tests/cli/cli_harness.h"
#include "tests/data/stall_server.h"

#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define MODEL                                                                                      \
  "--data corpus.txt --layers 1 --channels 16 --heads 2 --seq 16 --batch 4 --val-every 0 "         \
  "--val-batches 1 --lr 1e-2 "

static void s_sh(const char *cmd) {
  char full[2048];
  snprintf(full, sizeof full, "cd %s && %s", g_tmp, cmd);
  WT_TEST_REQUIRE(system(full) == 0, "%s", full);
}

static int s_count_lines(const char *name) {
  char path[700], line[4096];
  snprintf(path, sizeof path, "%s/%s", g_tmp, name);
  FILE *f = fopen(path, "r");
  int n = 0;
  while (f && fgets(line, sizeof line, f)) n++;
  if (f) fclose(f);
  return n;
}

static void test_data_directory(void) {
  s_sh("mkdir -p adir");
  EXPECT("train " MODEL "--data adir --steps 1", 1, "adir is a directory");
  EXPECT("eval --checkpoint run --data adir", 1, "adir is a directory");
}

/* A checkpoint directory that cannot take a checkpoint fails before the first step, not at the
 * first save (which, by default, comes after the whole run). */
static void test_bad_checkpoint_dir(void) {
  EXPECT("train " MODEL "--steps 3 --checkpoint-dir corpus.txt", 1, "not a directory");
  WT_TEST_ASSERT(!strstr(g_out, "model:"), "refused before training:\n%s", g_out);
  EXPECT("train " MODEL "--steps 3 --checkpoint-dir corpus.txt/run", 1, "cannot create");
  WT_TEST_ASSERT(!strstr(g_out, "model:"), "refused before training:\n%s", g_out);
  EXPECT("train " MODEL "--steps 3 --checkpoint-dir /proc/self/wt-run", 1, "/proc/self/wt-run");
  WT_TEST_ASSERT(!strstr(g_out, "model:"), "refused before training:\n%s", g_out);
}

/* A fresh run never writes over another run's steps, whatever state `latest` is in; a resumed
 * one finds the newest complete step when `latest` dangles. */
static void test_existing_run(void) {
  EXPECT("train " MODEL "--steps 4 --checkpoint-every 2 --checkpoint-dir run --json-log run.jsonl",
         0, "done: step 4");
  s_sh("rm run/latest");
  EXPECT("train " MODEL "--steps 4 --checkpoint-dir run", 1, "already holds a run");
  s_sh("echo garbage > run/latest");
  EXPECT("train " MODEL "--steps 4 --checkpoint-dir run", 1, "already holds a run");
  s_sh("test -d run/step-00000004 && test -d run/step-00000002");
  /* The newest step deleted, as a message about a damaged checkpoint says to do. */
  s_sh("echo step-00000004 > run/latest && rm -r run/step-00000004");
  EXPECT("train " MODEL "--steps 4 --checkpoint-dir run --resume --json-log run.jsonl", 0,
         "resumed from step 2");
  WT_TEST_ASSERT(strstr(g_out, "digests verify"), "says which step it fell back to:\n%s", g_out);
  EXPECT("eval --checkpoint run --data corpus.txt --json", 0, "\"tokens\":");
  /* A step directory is not a run directory: resuming "into" it would nest steps inside it. */
  EXPECT("train " MODEL "--steps 6 --checkpoint-dir run/step-00000004 --resume", 1,
         "pass the run directory");
  s_sh("test ! -e run/step-00000004/step-00000006 && test ! -e run/step-00000004/.lock");
  /* A fresh run's log is a new file; --resume appends. */
  int before = s_count_lines("run.jsonl");
  EXPECT("train " MODEL "--steps 2 --json-log run.jsonl --checkpoint-dir run2", 1,
         "already holds a log");
  s_sh("test ! -e run2"); /* refused before anything was created */
  WT_TEST_ASSERT(s_count_lines("run.jsonl") == before, "log untouched: %d -> %d lines", before,
                 s_count_lines("run.jsonl"));
}

/* One run per checkpoint directory at a time. */
static void test_lock(void) {
  pid_t pid;
  FILE *out =
      s_spawn("train " MODEL "--steps 1000000 --log-every 1 --checkpoint-dir held", 0, &pid);
  WT_TEST_REQUIRE(s_wait_line(out, "step "), "the first run started");
  EXPECT("train " MODEL "--steps 1000000 --checkpoint-dir held --resume", 1,
         "in use by another run");
  WT_TEST_ASSERT(strstr(g_out, "held"), "names the directory: %s", g_out);
  EXPECT("train " MODEL "--steps 1000000 --checkpoint-dir held", 1, "in use by another run");
  kill(pid, SIGTERM);
  char line[1024];
  while (fgets(line, sizeof line, out)) {
  }
  fclose(out);
  int st = s_wait_deadline(pid, 60);
  WT_TEST_ASSERT(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 128 + SIGTERM,
                 "the first run stopped at the signal (status %d)", st);
}

static void test_log_write_error(void) {
  EXPECT("train " MODEL "--steps 2 --json-log /dev/full", 1, "cannot write --json-log /dev/full");
  WT_TEST_ASSERT(strstr(g_out, "done: step 2") && strstr(g_out, "the log is incomplete"),
                 "trains on, then fails:\n%s", g_out);
}

static void test_messages(void) {
  EXPECT("train " MODEL "--steps 50 --time-limit 1e-9", 0, "time limit of 1e-09 s");
  EXPECT("eval --checkpoint nowhere --data corpus.txt", 1, "no checkpoint in nowhere");
  WT_TEST_ASSERT(!strstr(g_out, "--resume"), "eval does not talk about --resume: %s", g_out);
  EXPECT("train " MODEL "--steps 2 --checkpoint-dir nowhere --resume", 1, "train without --resume");
  EXPECT("train --config adir", 2, "config file adir is not a regular file");
  s_write("bool.json", "{\"steps\": true}", 15);
  EXPECT("train --config bool.json", 2, "\"steps\" must be a number");
  s_write("str.json", "{\"data\": 5}", 11);
  EXPECT("train --config str.json", 2, "\"data\" must be a string");
  s_write("flag.json", "{\"resume\": \"yes\"}", 17);
  EXPECT("train --config flag.json", 2, "\"resume\" must be true or false");
}

/* Overwrites every tensor byte of a safetensors file (after its 8-byte header length and JSON
 * header) with 0xff, which reads back as NaN in every float32. */
static void s_fill_tensors_with_nan(const char *name) {
  char path[700];
  snprintf(path, sizeof path, "%s/%s", g_tmp, name);
  FILE *f = fopen(path, "r+b");
  WT_TEST_ASSERT(f, "open %s", path);
  unsigned char len_le[8];
  WT_TEST_ASSERT(fread(len_le, 1, 8, f) == 8, "read the header length of %s", path);
  long header = 0;
  for (int i = 7; i >= 0; i--) header = header * 256 + len_le[i];
  fseek(f, 0, SEEK_END);
  long end = ftell(f);
  fseek(f, 8 + header, SEEK_SET);
  for (long i = 8 + header; i < end; i++) fputc(0xff, f);
  fclose(f);
}

/* A checkpoint whose weights are all NaN, re-hashed: eval --json still prints JSON. */
static void test_eval_nan(void) {
  s_sh("cp -r run nanrun && rm -f nanrun/latest");
  s_fill_tensors_with_nan("nanrun/step-00000002/model.safetensors");
  s_sh("cd nanrun/step-00000002 && "
       "sha256sum model.safetensors optimizer.safetensors state.json > SHA256SUMS");
  EXPECT("eval --checkpoint nanrun/step-00000002 --data corpus.txt --json", 0, "{\"loss\":null,");
  WT_TEST_ASSERT(strstr(g_out, "not a finite number") && !strstr(g_out, "nan,"), "says why: %s",
                 g_out);
}

static int s_count_files(const char *name) {
  char path[700];
  snprintf(path, sizeof path, "%s/%s", g_tmp, name);
  DIR *d = opendir(path);
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));)
    n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
  if (d) closedir(d);
  return n;
}

/* SIGTERM during a download that has stalled ends train or eval at once and keeps nothing. */
/* --device: a malformed name is a usage error (exit 2) in every command; a GPU this build or
 * machine does not have is a failure (exit 1) that says which and what to do, never a crash.
 * cuda:999 is absent everywhere; cuda:0 is absent here (no GPU, or a CPU-only build) and, on a
 * machine that has it, trains. */
static void test_device(void) {
  EXPECT("train " MODEL "--steps 1 --device gpu7", 2, "device 'gpu7' is not cpu, cuda or cuda:N");
  EXPECT("train " MODEL "--steps 1 --device cuda:x", 2, "is not cpu, cuda or cuda:N");
  EXPECT("train " MODEL "--steps 1 --device cuda:-1", 2, "is not cpu, cuda or cuda:N");
  EXPECT("eval --checkpoint run --data corpus.txt --device tpu", 2, "is not cpu, cuda or cuda:N");
  EXPECT("sample --checkpoint run --device cuda0", 2, "is not cpu, cuda or cuda:N");
  int rc = s_wantrain("train " MODEL "--steps 1 --device cuda:999");
  WT_TEST_ASSERT(rc == 1 && (strstr(g_out, "no CUDA device 999 (cudaGetDeviceCount says") ||
                             strstr(g_out, "this build has no CUDA back end (configure with "
                                           "-DWANTRAIN_CUDA=ON")),
                 "cuda:999: exit %d:\n%s", rc, g_out);
  WT_TEST_ASSERT(!strstr(g_out, "model:"), "refused before training:\n%s", g_out);
  rc = s_wantrain("train " MODEL "--steps 1 --device cuda:0");
  int absent = strstr(g_out, "no CUDA device 0 (cudaGetDeviceCount says") ||
               strstr(g_out, "this build has no CUDA back end");
  WT_TEST_ASSERT((rc == 1 && absent) || (rc == 0 && strstr(g_out, "done: step 1")),
                 "cuda:0: exit %d:\n%s", rc, g_out);
  EXPECT("eval --checkpoint run --data corpus.txt --device cuda:999", 1, "CUDA");
  EXPECT("sample --checkpoint run --device cuda:999", 1, "CUDA");
  EXPECT("train " MODEL "--steps 1 --device cpu", 0, "done: step 1");
  /* Precision: the CPU computes in fp32 only, and says so rather than ignoring the flag. */
  EXPECT("train " MODEL "--steps 1 --precision bf16", 1, "bf16 matmuls need a GPU");
  EXPECT("train " MODEL "--steps 1 --tf32", 1, "tf32 matmuls need a GPU");
  EXPECT("eval --checkpoint run --data corpus.txt --precision bf16", 1, "need a GPU");
  EXPECT("train " MODEL "--steps 1 --precision fp16", 2, "'fp16' is not one of fp32|bf16");
  EXPECT("train " MODEL "--steps 1 --precision fp32", 0, "done: step 1");
}

static void test_download_signal(void) {
  static const char *commands[] = {"train " MODEL "--steps 1 --data",
                                   "eval --checkpoint run --data"};
  for (size_t i = 0; i < WT_ARRAY_LEN(commands); i++) {
    stall_server srv;
    WT_TEST_REQUIRE(stall_server_start(&srv, "HTTP/1.1 200 OK\r\nContent-Length: 9999\r\n\r\nab") ==
                        0,
                    "loopback server");
    char args[512], cache[32];
    snprintf(cache, sizeof cache, "dl%zu", i);
    snprintf(args, sizeof args, "%s http://127.0.0.1:%d/corpus.txt --cache-dir %s", commands[i],
             srv.port, cache);
    pid_t pid;
    FILE *out = s_spawn(args, 1, &pid);
    usleep(1500 * 1000); /* connected, two bytes in, stalled */
    kill(pid, SIGTERM);
    int st = s_wait_deadline(pid, 15);
    char text[4096] = "";
    size_t n = fread(text, 1, sizeof text - 1, out);
    text[n] = 0;
    fclose(out);
    stall_server_stop(&srv);
    WT_TEST_ASSERT(
        st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 128 + SIGTERM && strstr(text, "interrupted"),
        "%s: the first SIGTERM ends the download (status %d):\n%s", commands[i], st, text);
    WT_TEST_ASSERT(s_count_files(cache) == 0, "%s: no partial file in the cache: %d", commands[i],
                   s_count_files(cache));
  }
}

int main(void) {
  cli_harness_init();
  char text[4000];
  for (size_t i = 0; i < sizeof text; i++) text[i] = (char)('a' + (i * 7 + i / 13) % 26);
  s_write("corpus.txt", text, sizeof text);
  test_bad_checkpoint_dir();
  test_existing_run();
  test_data_directory();
  test_lock();
  test_log_write_error();
  test_messages();
  test_eval_nan();
  test_device();
  test_download_signal();
  if (!wt_test_failures) { /* scratch is kept when a check failed, for a look at it */
    char rm[700];
    snprintf(rm, sizeof rm, "rm -rf '%s'", g_tmp);
    if (system(rm) != 0) fprintf(stderr, "could not remove %s\n", g_tmp);
  }
  return wt_test_finish("test_cli_guard");
}
