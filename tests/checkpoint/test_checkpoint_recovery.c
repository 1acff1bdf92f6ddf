/* test_checkpoint_recovery — what keeps a run directory usable when things go wrong: a re-save
 * killed at every point between its file-system steps still loads; a dangling, missing or
 * garbage `latest` falls back to the newest verified step; a run directory takes one run at a
 * time (flock) and a fresh run refuses one that holds steps; impossible values in a re-hashed
 * checkpoint are refused naming the file and field. */
#include "model/checkpoint.h"
#include "common/common.h"
#include "model/safetensors.h"
#include "common/testing.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static char g_tmp[512];
static const gpt_config g_cfg = {
    .vocab_size = 64, .max_seq = 8, .n_layer = 1, .n_head = 2, .channels = 16};

typedef struct {
  gpt_stage *model;
  optim *opt;
} run;

static run s_run_new(uint64_t seed, long opt_steps) {
  run r;
  r.model = gpt_stage_new(&g_cfg, 0, g_cfg.n_layer, 1, g_cfg.max_seq);
  WT_TEST_REQUIRE(r.model, "%s", wt_last_error());
  gpt_stage_init_weights(r.model, seed);
  optim_config oc = optim_config_default();
  r.opt = optim_new(&oc, gpt_stage_tensor(r.model, 0), gpt_stage_num_tensors(r.model));
  WT_TEST_REQUIRE(r.opt, "%s", wt_last_error());
  optim_set_step_count(r.opt, opt_steps);
  return r;
}

static void s_run_destroy(run *r) {
  gpt_stage_destroy(&r->model);
  optim_destroy(&r->opt);
}

static checkpoint_meta s_meta(long step) {
  checkpoint_meta m = {.step = step, .tokenizer = DATA_TOKENIZER_SYNTHETIC};
  data_position_init(&m.data_pos, 5);
  m.data_pos.batches = (uint64_t)step;
  return m;
}

static void s_save(const char *dir, uint64_t seed, long step) {
  run r = s_run_new(seed, step);
  checkpoint_meta m = s_meta(step);
  WT_TEST_REQUIRE(checkpoint_save(dir, r.model, r.opt, &m, 10) == WT_OK, "%s", wt_last_error());
  s_run_destroy(&r);
}

/* Loads dir; returns the step loaded (-1 on failure) and whether its weights are seed's. */
static long s_load(const char *dir, uint64_t seed, int *same) {
  run r = s_run_new(999, 0), want = s_run_new(seed, 0);
  checkpoint_meta got;
  long step = checkpoint_load(dir, r.model, r.opt, &got) == WT_OK ? got.step : -1;
  size_t n;
  const float *a = gpt_stage_params(r.model, &n), *b = gpt_stage_params(want.model, &n);
  *same = !memcmp(a, b, n * sizeof(float));
  s_run_destroy(&r);
  s_run_destroy(&want);
  return step;
}

static void s_sh(const char *fmt, const char *arg) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, fmt, arg, arg, arg);
  WT_TEST_REQUIRE(system(cmd) == 0, "%s", cmd);
}

static const char *g_stop_at;
static int g_no_exchange;

static int s_hook(const char *point) {
  if (g_stop_at && !strcmp(point, g_stop_at)) _exit(0); /* as a kill would, mid-save */
  return g_no_exchange && !strcmp(point, "exchange");
}

/* Re-saving step 4 (as a resumed run with --steps 4 does), killed at each point in turn: the
 * run directory always loads step 4, with the old or the new weights, never a dangling one. */
static void test_resave_killed(void) {
  static const char *points[] = {"exchange",   "exchanged",   "installed",
                                 "latest-tmp", "moved-aside", "moved-in"};
  char dir[700];
  for (size_t i = 0; i < WT_ARRAY_LEN(points); i++) {
    int fallback = i >= 3; /* the path for file systems without RENAME_EXCHANGE */
    snprintf(dir, sizeof dir, "%s/resave-%zu", g_tmp, i);
    s_save(dir, 1, 2);
    s_save(dir, 1, 4);
    pid_t pid = fork();
    if (pid == 0) {
      g_stop_at = points[i];
      g_no_exchange = fallback;
      checkpoint_set_fault_hook(s_hook);
      s_save(dir, 2, 4);
      _exit(3); /* the hook did not fire */
    }
    int st = 0;
    waitpid(pid, &st, 0);
    WT_TEST_ASSERT(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: the save stopped there (%d)",
                   points[i], st);
    int old_w = 0, new_w = 0;
    long step = s_load(dir, 1, &old_w);
    s_load(dir, 2, &new_w);
    WT_TEST_ASSERT(step == 4 && (old_w || new_w), "killed at %s: loads step %ld (%s)", points[i],
                   step,
                   step < 0 ? wt_last_error()
                   : old_w  ? "old"
                            : "new");
    /* And the next save cleans up and moves on. */
    s_save(dir, 3, 6);
    WT_TEST_ASSERT(s_load(dir, 3, &new_w) == 6 && new_w, "after %s: the next save loads",
                   points[i]);
  }
  /* Without a kill, both paths end with the new weights under the old name. */
  for (int fallback = 0; fallback < 2; fallback++) {
    snprintf(dir, sizeof dir, "%s/resave-ok-%d", g_tmp, fallback);
    s_save(dir, 1, 4);
    g_stop_at = NULL;
    g_no_exchange = fallback;
    checkpoint_set_fault_hook(s_hook);
    s_save(dir, 2, 4);
    checkpoint_set_fault_hook(NULL);
    int same = 0;
    WT_TEST_ASSERT(s_load(dir, 2, &same) == 4 && same, "re-save (fallback %d) replaced step 4",
                   fallback);
    char path[800];
    snprintf(path, sizeof path, "%s/latest", dir);
    FILE *f = fopen(path, "r");
    char name[64] = "";
    if (f) fgets(name, sizeof name, f), fclose(f);
    WT_TEST_ASSERT(!strcmp(name, "step-00000004\n"), "latest names step 4: %s", name);
  }
}

/* A missing, garbage or dangling `latest` (the step it named deleted, as the error message tells
 * the user to) falls back to the newest step whose digests verify. */
static void test_dangling_latest(void) {
  char dir[700], path[800];
  snprintf(dir, sizeof dir, "%s/dangle", g_tmp);
  s_save(dir, 1, 2);
  s_save(dir, 2, 4);
  s_save(dir, 3, 6);
  int same = 0;
  s_sh("rm -r %s/step-00000006", dir);
  WT_TEST_ASSERT(s_load(dir, 2, &same) == 4 && same, "deleted latest step: falls back to 4: %s",
                 wt_last_error());
  s_sh("echo garbage > %s/latest", dir);
  WT_TEST_ASSERT(s_load(dir, 2, &same) == 4 && same, "garbage latest: %s", wt_last_error());
  s_sh("rm %s/latest", dir);
  WT_TEST_ASSERT(s_load(dir, 2, &same) == 4 && same, "missing latest: %s", wt_last_error());
  /* An incomplete newest step (no SHA256SUMS) and a corrupt one are skipped, not loaded. */
  s_sh("mkdir %s/step-00000009 && echo x > %s/step-00000009/state.json", dir);
  snprintf(path, sizeof path, "%s/step-00000004/state.json", dir);
  s_sh("echo ' ' >> %s", path);
  WT_TEST_ASSERT(s_load(dir, 1, &same) == 2 && same, "newest verified step is 2: %s",
                 wt_last_error());
  s_sh("rm -r %s/step-00000002", dir);
  WT_TEST_ASSERT(s_load(dir, 1, &same) == -1 && strstr(wt_last_error(), "no checkpoint in"),
                 "none verifies: %s", wt_last_error());
  WT_TEST_ASSERT(!strstr(wt_last_error(), "--resume"), "no train flag in a loader's message: %s",
                 wt_last_error());
}

/* One run per directory; a fresh run refuses a directory that holds steps; a step directory or
 * a file is not a run directory. */
static void test_run_open(void) {
  char dir[700], path[800];
  snprintf(dir, sizeof dir, "%s/held", g_tmp);
  checkpoint_run *a = checkpoint_run_open(dir, 1);
  WT_TEST_REQUIRE(a, "%s", wt_last_error());
  checkpoint_run *b = checkpoint_run_open(dir, 0);
  WT_TEST_ASSERT(!b && strstr(wt_last_error(), "in use by another run") &&
                     strstr(wt_last_error(), dir),
                 "second run refused: %s", wt_last_error());
  checkpoint_run_close(&a);
  WT_TEST_ASSERT(a == NULL, "close sets NULL");
  b = checkpoint_run_open(dir, 0);
  WT_TEST_ASSERT(b, "lock released on close: %s", wt_last_error());
  checkpoint_run_close(&b);

  s_save(dir, 1, 3);
  s_sh("rm %s/latest", dir);
  WT_TEST_ASSERT(!checkpoint_run_open(dir, 1) && strstr(wt_last_error(), "already holds a run") &&
                     strstr(wt_last_error(), "step-00000003"),
                 "fresh run, steps without latest: %s", wt_last_error());
  s_sh("echo garbage > %s/latest", dir);
  WT_TEST_ASSERT(!checkpoint_run_open(dir, 1) && strstr(wt_last_error(), "already holds"),
                 "fresh run, garbage latest: %s", wt_last_error());
  snprintf(path, sizeof path, "%s/step-00000003", dir);
  WT_TEST_ASSERT(!checkpoint_run_open(path, 0) && strstr(wt_last_error(), "its parent"),
                 "step directory refused: %s", wt_last_error());
  snprintf(path, sizeof path, "%s/step-00000003/state.json", dir);
  WT_TEST_ASSERT(!checkpoint_run_open(path, 1) && strstr(wt_last_error(), "not a directory"),
                 "a file refused: %s", wt_last_error());
  snprintf(path, sizeof path, "%s/step-00000003/state.json/sub", dir);
  WT_TEST_ASSERT(!checkpoint_run_open(path, 1) && strstr(wt_last_error(), "cannot create"),
                 "under a file refused: %s", wt_last_error());
}

/* A save into a new directory that fails says so, not "the previous checkpoint is unchanged". */
static void test_failed_first_save(void) {
  char dir[700];
  snprintf(dir, sizeof dir, "%s/first", g_tmp);
  run r = s_run_new(1, 1);
  checkpoint_meta m = s_meta(1);
  struct rlimit old, small = {.rlim_cur = 4096};
  getrlimit(RLIMIT_FSIZE, &old);
  small.rlim_max = old.rlim_max;
  signal(SIGXFSZ, SIG_IGN);
  setrlimit(RLIMIT_FSIZE, &small);
  int rc = checkpoint_save(dir, r.model, r.opt, &m, 2);
  setrlimit(RLIMIT_FSIZE, &old);
  WT_TEST_ASSERT(rc == WT_EIO && strstr(wt_last_error(), "no checkpoint was written") &&
                     !strstr(wt_last_error(), "unchanged"),
                 "first save failed: %s", wt_last_error());
  s_run_destroy(&r);
}

/* Rewrites SHA256SUMS so that an edited file passes the digest check (as a careless repair or an
 * attacker would): only the field checks stand between it and the model. */
static void s_rehash(const char *stepdir) {
  s_sh("cd %s && sha256sum model.safetensors optimizer.safetensors state.json > SHA256SUMS",
       stepdir);
}

static void s_expect_field(const char *dir, const char *what, const char *words) {
  run r = s_run_new(7, 0);
  checkpoint_meta got;
  int rc = checkpoint_load(dir, r.model, r.opt, &got);
  WT_TEST_ASSERT(rc == WT_ECORRUPT && strstr(wt_last_error(), words), "%s: rc %d, want '%s' in: %s",
                 what, rc, words, wt_last_error());
  s_run_destroy(&r);
}

/* Rewrites optimizer.safetensors with the same tensors and another step_count. */
static void s_set_opt_steps(const char *stepdir, const char *count) {
  char path[800];
  snprintf(path, sizeof path, "%s/optimizer.safetensors", stepdir);
  safetensors *st = safetensors_load(path);
  WT_TEST_REQUIRE(st, "%s", wt_last_error());
  int n = safetensors_num_tensors(st);
  safetensors_tensor t[4];
  float *bufs[4];
  for (int i = 0; i < n && i < 4; i++) {
    size_t b, e;
    WT_TEST_REQUIRE(safetensors_tensor_info(st, i, &t[i].name, &t[i].ndim, t[i].shape, &b, &e) ==
                        WT_OK,
                    "info");
    bufs[i] = malloc(e - b + 4);
    WT_TEST_REQUIRE(safetensors_read(st, t[i].name, t[i].ndim, t[i].shape, bufs[i]) == WT_OK, "%s",
                    wt_last_error());
    t[i].data = bufs[i];
  }
  const char *kv[] = {"kind", "adamw", "step_count", count};
  FILE *f = fopen(path, "wb");
  WT_TEST_REQUIRE(f && safetensors_write(f, path, t, n, kv, 2) == WT_OK, "rewrite");
  fclose(f);
  for (int i = 0; i < n && i < 4; i++) free(bufs[i]);
  safetensors_destroy(&st);
  s_rehash(stepdir);
}

static void test_impossible_values(void) {
  static const struct {
    const char *from, *to, *words;
  } edits[] = {
      {"\"step\":\t5", "\"step\":\t-10", "field \"step\" is -10"},
      {"\"step\":\t5", "\"step\":\t1000000000000000000", "field \"step\""},
      {"\"step\":\t5", "\"step\":\t5.5", "field \"step\" is 5.5"},
      {"\"step\":\t5", "\"step\":\t\"5\"", "field \"step\""},
      {"\"step\":\t5", "\"step\":\t4", "field \"step\" is 4 but the directory is step-00000005"},
      {"\"step\":\t5,", "", "field \"step\" is missing"},
      {"\"data_batches\":\t5", "\"data_batches\":\t-1", "field \"data_batches\" is -1"},
      {"\"tokenizer\":\t\"synthetic\"", "\"tokenizer\":\t\"klingon\"", "field \"tokenizer\""},
      {"\"format\":\t\"wantrain-checkpoint-1\"", "\"format\":\t1", "not a wantrain-checkpoint-1"},
  };
  char dir[700], stepdir[800], path[900];
  snprintf(dir, sizeof dir, "%s/values", g_tmp);
  s_save(dir, 1, 5);
  snprintf(stepdir, sizeof stepdir, "%s/step-00000005", dir);
  snprintf(path, sizeof path, "%s/state.json", stepdir);
  s_sh("cp %s %s.orig", path);
  for (size_t i = 0; i < WT_ARRAY_LEN(edits); i++) {
    FILE *f = fopen(path, "rb");
    static char text[1 << 16], out[1 << 16];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    char *at = strstr(text, edits[i].from);
    WT_TEST_REQUIRE(at, "state.json holds %s:\n%s", edits[i].from, text);
    snprintf(out, sizeof out, "%.*s%s%s", (int)(at - text), text, edits[i].to,
             at + strlen(edits[i].from));
    f = fopen(path, "wb");
    fputs(out, f);
    fclose(f);
    s_rehash(stepdir);
    s_expect_field(dir, edits[i].to, edits[i].words);
    WT_TEST_ASSERT(strstr(wt_last_error(), "state.json"), "names the file: %s", wt_last_error());
    s_sh("cp %s.orig %s", path);
  }
  /* data_rng all zero: no generator state is. */
  s_sh("sed -i 's/\"[0-9a-f]\\{16\\}\"/\"0000000000000000\"/g' %s", path);
  s_rehash(stepdir);
  s_expect_field(dir, "zero rng", "\"data_rng\" is all zero");
  s_sh("cp %s.orig %s", path);
  s_set_opt_steps(stepdir, "-5");
  s_expect_field(dir, "step_count -5", "metadata \"step_count\" is \"-5\"");
  WT_TEST_ASSERT(strstr(wt_last_error(), "optimizer.safetensors"), "names the file: %s",
                 wt_last_error());
  s_set_opt_steps(stepdir, "6"); /* more optimizer steps than the run took */
  s_expect_field(dir, "step_count 6 > step 5", "\"step_count\"");
  s_set_opt_steps(stepdir, "5");
  int same = 0;
  WT_TEST_ASSERT(s_load(dir, 1, &same) == 5 && same, "the repaired checkpoint loads: %s",
                 wt_last_error());
}

/* The safetensors reader refuses fractional dimensions and offsets: [1.5, 2] passed the size
 * check (12 bytes) but read back as [1, 2], so a read copied 12 bytes into the 8 a caller holds
 * for that shape. A tensor named twice (found by fuzz_safetensors) would be listed with one
 * entry's shape and read with the other's. A directory is not a file either. */
static void test_safetensors_shapes(void) {
  static const struct {
    const char *header, *why;
  } cases[] = {
      {"{\"t\":{\"dtype\":\"F32\",\"shape\":[1.5,2],\"data_offsets\":[0,12]}}", "whole number"},
      {"{\"t\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0.5,12.5]}}", "whole number"},
      {"{\"t\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[\"0\",12]}}", "whole number"},
      {"{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
       "\"t\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]}}",
       "twice"},
  };
  char path[700];
  snprintf(path, sizeof path, "%s/frac.safetensors", g_tmp);
  for (size_t i = 0; i < WT_ARRAY_LEN(cases); i++) {
    FILE *f = fopen(path, "wb");
    uint64_t n = strlen(cases[i].header);
    unsigned char len[8], data[16] = {0};
    for (int b = 0; b < 8; b++) len[b] = (unsigned char)(n >> (8 * b));
    fwrite(len, 1, 8, f);
    fwrite(cases[i].header, 1, n, f);
    fwrite(data, 1, 13, f);
    fclose(f);
    safetensors *st = safetensors_load(path);
    WT_TEST_ASSERT(!st && strstr(wt_last_error(), cases[i].why), "header %zu refused: %s", i,
                   st ? "loaded" : wt_last_error());
    safetensors_destroy(&st);
  }
  WT_TEST_ASSERT(!safetensors_load(g_tmp) && strstr(wt_last_error(), "not a regular file"),
                 "a directory: %s", wt_last_error());
}

int main(void) {
  wt_test_tmpdir(g_tmp, sizeof g_tmp);
  test_resave_killed();
  test_dangling_latest();
  test_run_open();
  test_failed_first_save();
  test_impossible_values();
  test_safetensors_shapes();
  if (!wt_test_failures) {
    char rm[700];
    snprintf(rm, sizeof rm, "rm -rf '%s'", g_tmp);
    if (system(rm) != 0) fprintf(stderr, "could not remove %s\n", g_tmp);
  }
  return wt_test_finish("test_checkpoint_recovery");
}
