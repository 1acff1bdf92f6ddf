/* test_runtime_resume — checkpoints of a 2 x 2 run (one directory per stage plus the manifest):
 *   - a run whose tasklet dies mid-run (its link fails) stops on every tasklet with an error;
 *     resuming from the step the manifest names (the last checkpoint every stage completed)
 *     continues bitwise as the run that never stopped;
 *   - ZeRO-1 (AdamW, sharded state gathered into the ordinary format) resumes bitwise, and its
 *     checkpoint resumes bitwise in an unsharded run too;
 *   - a 4-stage run directory loads as one whole model (what `wantrain eval` / `sample` do)
 *     bitwise equal to the single-process trainer's model after the same steps;
 *   - DiLoCo, error-feedback codecs (ring and sparse) and delta activations: every tasklet saves
 *     its own state beside the stage checkpoint, and a killed run resumes bitwise; a missing state
 *     file is refused;
 *   - a time limit stops every tasklet after the same step (world rank 0 decides), validating and
 *     checkpointing there, and the resumed run continues bitwise, validation losses included;
 *   - a damaged manifest, a missing one and a different stage count are refused with a message;
 *   - private directories (one per tasklet, no file system shared): every tasklet writes the
 *     manifest into its own, and a resume from an older step than the manifests name
 *     (resume_step), the stage checkpoint copied to the replicas that did not write it,
 *     continues bitwise. */
#include "model/trainer.h"
#include "tests/runtime/runtime_harness.h"

#include <cjson/cJSON.h>

enum { STEPS = 8 };

static data_set *s_data, *s_small;
static char s_tmp[512];

static parallel_tasklet_config s_config(int zero, const char *dir) {
  parallel_tasklet_config c = parallel_tasklet_config_default();
  c.run.stages = 2, c.run.replicas = 2, c.run.zero = zero;
  snprintf(c.run.schedule, sizeof c.run.schedule, "1f1b");
  c.run.seq = 16, c.run.layers = 2, c.run.heads = 2, c.run.channels = 16; /* V 64: the data's */
  c.run.batch = 8, c.run.micro_batches = 2, c.run.val_batches = 1, c.run.seed = 9;
  c.run.steps = STEPS;
  h_run_optim_default(&c.run);
  c.run.lr = 3e-3f;
  c.run.warmup = 2;
  c.run.grad_clip = 0.5f;
  c.data = s_data;
  snprintf(c.run.checkpoint_dir, sizeof c.run.checkpoint_dir, "%s/%s", s_tmp, dir);
  return c;
}

static long s_manifest_step(const char *dir) {
  char path[1100], text[8192] = "";
  snprintf(path, sizeof path, "%s/manifest.json", dir);
  FILE *f = fopen(path, "rb");
  WT_TEST_REQUIRE(f, "no manifest in %s", dir);
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = 0;
  cJSON *j = cJSON_Parse(text);
  long step = j ? (long)cJSON_GetObjectItem(j, "step")->valuedouble : -1;
  cJSON_Delete(j);
  return step;
}

static void s_same_from(const h_run *a, const h_run *b, long from, const char *what) {
  for (long i = from; i < STEPS; i++)
    for (int w = 0; w < 4; w++)
      WT_TEST_ASSERT(a->loss[0][i] == b->loss[w][i], "%s step %ld rank %d: %.9g vs %.9g", what,
                     i + 1, w, b->loss[w][i], a->loss[0][i]);
}

static void test_killed_run_resumes(void) {
  static h_run straight, killed, resumed;
  parallel_tasklet_config c = s_config(0, "straight");
  h_init(&straight, &c);
  WT_TEST_REQUIRE(h_run_all(&straight) == WT_OK, "%s", straight.err[0]);
  c = s_config(0, "killed");
  c.run.checkpoint_every = 2;
  h_init(&killed, &c);
  /* Rank 3's link goes down after about 5 steps' messages (counted in the straight run, whose
   * only checkpoint agreement, at the end, sends a few more). */
  killed.fail_rank = 3;
  killed.fail_after = (int)(straight.msgs[3] / STEPS * 5 + 2);
  WT_TEST_ASSERT(h_run_all(&killed) != WT_OK, "the run with a dead link failed");
  for (int w = 0; w < 4; w++)
    WT_TEST_ASSERT(killed.rcs[w] != WT_OK && killed.steps[w] < STEPS,
                   "rank %d returned %d after %ld steps", w, killed.rcs[w], killed.steps[w]);
  WT_TEST_ASSERT(strstr(killed.err[3], "injected"), "rank 3: %s", killed.err[3]);
  long at = s_manifest_step(c.run.checkpoint_dir);
  /* A checkpoint every 2 steps; the link may die inside one, which then does not count. */
  WT_TEST_ASSERT(at >= 2 && at <= 6 && at % 2 == 0, "the manifest names step %ld", at);
  c.resume = 1;
  c.run.checkpoint_every = 0;
  h_init(&resumed, &c);
  WT_TEST_REQUIRE(h_run_all(&resumed) == WT_OK, "%s", resumed.err[0]);
  WT_TEST_ASSERT(resumed.steps[0] == STEPS, "resumed to %ld", resumed.steps[0]);
  s_same_from(&straight, &resumed, at, "killed + resumed");
  printf("killed in step %ld..%ld, resumed from step %ld: steps %ld-%d bitwise\n",
         killed.steps[3] + 1, killed.steps[0] + 1, at, at + 1, STEPS);
}

/* Stops a ZeRO-1 run after 3 steps in DIR, then resumes it (sharded or not) to the end. */
static void s_zero_part_then_resume(h_run *h, const char *dir, int zero_on_resume) {
  parallel_tasklet_config c = s_config(1, dir);
  c.stop_after = 3;
  h_init(h, &c);
  WT_TEST_REQUIRE(h_run_all(h) == WT_OK, "%s", h->err[0]);
  WT_TEST_ASSERT(h->steps[0] == 3 && s_manifest_step(c.run.checkpoint_dir) == 3, "stopped at 3");
  c.stop_after = 0;
  c.resume = 1;
  c.run.zero = zero_on_resume;
  h_init(h, &c);
  WT_TEST_REQUIRE(h_run_all(h) == WT_OK, "%s", h->err[0]);
}

static void test_zero_resumes(void) {
  static h_run straight, resumed;
  parallel_tasklet_config c = s_config(1, "zero-straight");
  h_init(&straight, &c);
  WT_TEST_REQUIRE(h_run_all(&straight) == WT_OK, "%s", straight.err[0]);
  s_zero_part_then_resume(&resumed, "zero-part", 1);
  s_same_from(&straight, &resumed, 3, "zero-1 resumed");
  /* The same checkpoint into an unsharded run: the optimizer state was gathered whole. */
  s_zero_part_then_resume(&resumed, "zero-part-unsharded", 0);
  s_same_from(&straight, &resumed, 3, "zero-1 checkpoint resumed unsharded");
}

/* int8 gradients without error feedback and 8-bit activations are stateless: they checkpoint
 * and resume bitwise like an uncompressed run. */
static void test_stateless_codecs_resume(void) {
  static h_run straight, resumed;
  parallel_tasklet_config c = s_config(0, "int8-straight");
  snprintf(c.run.sync.grad_codec, sizeof c.run.sync.grad_codec, "int8");
  snprintf(c.run.act_codec, sizeof c.run.act_codec, "direct8");
  snprintf(c.run.sync.grad_ef, sizeof c.run.sync.grad_ef, "off");
  h_init(&straight, &c);
  WT_TEST_REQUIRE(h_run_all(&straight) == WT_OK, "%s", straight.err[0]);
  snprintf(c.run.checkpoint_dir, sizeof c.run.checkpoint_dir, "%s/int8-part", s_tmp);
  c.stop_after = 5;
  h_init(&resumed, &c);
  WT_TEST_REQUIRE(h_run_all(&resumed) == WT_OK, "%s", resumed.err[0]);
  c.stop_after = 0, c.resume = 1;
  h_init(&resumed, &c);
  WT_TEST_REQUIRE(h_run_all(&resumed) == WT_OK, "%s", resumed.err[0]);
  s_same_from(&straight, &resumed, 5, "int8 without error feedback, resumed");
}

/* Runs that keep state across steps: DiLoCo (each replica's own parameters and inner optimizer,
 * θ_outer, the outer momentum, the pseudo-gradient residuals), the gradient codecs' error
 * feedback (ring and sparse) and the delta activation caches. Each tasklet saves its own state
 * beside the stage checkpoint; a run whose link dies after checkpointing resumes bitwise as the
 * run that never stopped. The corpus is small, so samples repeat and the delta caches are hit. */
static void s_stateful(const char *name, int diloco, const char *grad, const char *act) {
  static h_run straight, killed, resumed;
  parallel_tasklet_config c = s_config(0, name);
  c.data = s_small;
  c.run.sync.diloco = diloco;
  c.run.val_every = 4;
  snprintf(c.run.sync.grad_codec, sizeof c.run.sync.grad_codec, "%s", grad);
  snprintf(c.run.act_codec, sizeof c.run.act_codec, "%s", act);
  c.run.checkpoint_dir[0] = 0;
  h_init(&straight, &c);
  WT_TEST_REQUIRE(h_run_all(&straight) == WT_OK, "%s: %s", name, straight.err[0]);
  snprintf(c.run.checkpoint_dir, sizeof c.run.checkpoint_dir, "%s/%s", s_tmp, name);
  c.run.checkpoint_every = 2;
  h_init(&killed, &c);
  killed.fail_rank = 2;
  killed.fail_after = (int)(straight.msgs[2] / STEPS * 5 + 2);
  WT_TEST_ASSERT(h_run_all(&killed) != WT_OK, "%s: the run with a dead link failed", name);
  long at = s_manifest_step(c.run.checkpoint_dir);
  WT_TEST_ASSERT(at >= 2 && at <= 6, "%s: the manifest names step %ld", name, at);
  c.resume = 1, c.run.checkpoint_every = 0;
  h_init(&resumed, &c);
  WT_TEST_REQUIRE(h_run_all(&resumed) == WT_OK, "%s: %s", name, resumed.err[0]);
  s_same_from(&straight, &resumed, at, name);
  for (int w = 0; w < 4; w++)
    WT_TEST_ASSERT(resumed.val[w][STEPS - 1] == straight.val[w][STEPS - 1],
                   "%s rank %d: final validation %.9g vs %.9g", name, w,
                   resumed.val[w][STEPS - 1], straight.val[w][STEPS - 1]);
  printf("%s: killed after step %ld's checkpoint, resumed: steps %ld-%d bitwise\n", name, at,
         at + 1, STEPS);
  /* Without its state file a replica refuses to resume (it would continue differently). */
  char path[1200];
  snprintf(path, sizeof path, "%s/stage-1/replica-1-step-%08d.state", c.run.checkpoint_dir, STEPS);
  WT_TEST_REQUIRE(unlink(path) == 0, "%s: the final state file %s exists", name, path);
  h_init(&resumed, &c);
  WT_TEST_ASSERT(h_run_all(&resumed) != WT_OK && strstr(resumed.err[3], "no tasklet state"),
                 "%s: a missing state file: %s", name, resumed.err[3]);
  /* One flipped byte in another replica's file is refused too. */
  snprintf(path, sizeof path, "%s/stage-0/replica-0-step-%08d.state", c.run.checkpoint_dir, STEPS);
  FILE *f = fopen(path, "r+b");
  WT_TEST_REQUIRE(f && fseek(f, 40, SEEK_SET) == 0, "%s: open %s", name, path);
  int byte = fgetc(f);
  fseek(f, 40, SEEK_SET), fputc(byte ^ 1, f), fclose(f);
  h_init(&resumed, &c);
  WT_TEST_ASSERT(h_run_all(&resumed) != WT_OK && strstr(resumed.err[0], "damaged"),
                 "%s: a damaged state file: %s", name, resumed.err[0]);
}

static void test_stateful_resume(void) {
  s_stateful("diloco-int8", 3, "int8", "none");
  s_stateful("diloco-topk", 2, "topk", "delta4");
  s_stateful("int8-ef-delta4", 0, "int8", "delta4");
  s_stateful("topk-ef-delta8", 0, "topk", "delta8");
}

static void test_whole_model_from_stages(void) {
  static h_run h;
  parallel_tasklet_config c = s_config(0, "four-stages");
  c.run.stages = 4, c.run.replicas = 1;
  c.run.layers = 4;
  h_init(&h, &c);
  WT_TEST_REQUIRE(h_run_all(&h) == WT_OK, "%s", h.err[0]);
  trainer_config tc;
  WT_TEST_REQUIRE(parallel_run_trainer_config(&c.run, data_set_vocab_size(s_data), &tc) == WT_OK,
                  "%s", wt_last_error());
  trainer *t = trainer_new(&tc, s_data); /* one process, the same m: bitwise (gpt.h) */
  WT_TEST_REQUIRE(t, "%s", wt_last_error());
  for (int i = 0; i < STEPS; i++) WT_TEST_REQUIRE(trainer_step(t, NULL) == WT_OK, "step");
  gpt_config cfg;
  checkpoint_meta meta;
  WT_TEST_ASSERT(parallel_run_is_multistage(c.run.checkpoint_dir), "a run directory");
  WT_TEST_REQUIRE(parallel_run_read_config(c.run.checkpoint_dir, &cfg, &meta) == WT_OK, "%s",
                  wt_last_error());
  WT_TEST_ASSERT(cfg.n_layer == 4 && meta.step == STEPS, "config and step");
  gpt_stage *m = gpt_stage_new(&cfg, 0, cfg.n_layer, 1, cfg.max_seq);
  WT_TEST_REQUIRE(m && parallel_run_load_model(c.run.checkpoint_dir, m, &meta) == WT_OK, "%s",
                  wt_last_error());
  size_t n, n_ref;
  const float *p = gpt_stage_params(m, &n), *ref = gpt_stage_params(trainer_model(t), &n_ref);
  WT_TEST_ASSERT(n == n_ref && !memcmp(p, ref, sizeof(float) * n),
                 "the stages put together are the one-process model");
  /* A stage missing from the manifest's ranges is refused and leaves the model as it was. */
  char path[1100];
  snprintf(path, sizeof path, "%s/manifest.json", c.run.checkpoint_dir);
  FILE *f = fopen(path, "r+b");
  char text[8192];
  size_t len = fread(text, 1, sizeof text - 1, f);
  text[len] = 0;
  char *hole = strstr(text, "\"last_layer\":\t2");
  WT_TEST_REQUIRE(hole, "manifest layout: %s", text);
  hole[14] = '1'; /* stage 1 now claims [1, 1): malformed */
  rewind(f), fwrite(text, 1, len, f), fclose(f);
  WT_TEST_ASSERT(parallel_run_load_model(c.run.checkpoint_dir, m, &meta) == WT_ECORRUPT,
                 "a bad stage entry: %s", wt_last_error());
  WT_TEST_ASSERT(!memcmp(gpt_stage_params(m, &n), ref, sizeof(float) * n), "model unchanged");
  gpt_stage_destroy(&m);
  trainer_destroy(&t);
}

/* A limit every step exceeds stops the run after step 1 on every tasklet (rank 0's clock alone
 * decides, so the stop is the same step everywhere); the validation after it and the checkpoint
 * are those of a last step, and the resumed run goes on bitwise. */
static void test_time_limit(void) {
  static h_run straight, limited;
  parallel_tasklet_config c = s_config(0, "time-straight");
  c.run.val_every = 3;
  h_init(&straight, &c);
  WT_TEST_REQUIRE(h_run_all(&straight) == WT_OK, "%s", straight.err[0]);
  snprintf(c.run.checkpoint_dir, sizeof c.run.checkpoint_dir, "%s/time-limited", s_tmp);
  c.run.time_limit = 1e-9;
  h_init(&limited, &c);
  WT_TEST_REQUIRE(h_run_all(&limited) == WT_OK, "%s", limited.err[0]);
  for (int w = 0; w < 4; w++) {
    WT_TEST_ASSERT(limited.steps[w] == 1 && limited.res[w].time_limited,
                   "rank %d stopped after %ld steps (time_limited %d)", w, limited.steps[w],
                   limited.res[w].time_limited);
    WT_TEST_ASSERT(!isnan(limited.val[w][0]) && isnan(straight.val[w][0]),
                   "rank %d validated after the step it stopped at", w);
  }
  WT_TEST_ASSERT(s_manifest_step(c.run.checkpoint_dir) == 1, "checkpointed at the stop");
  c.run.time_limit = 0, c.resume = 1;
  h_init(&limited, &c);
  WT_TEST_REQUIRE(h_run_all(&limited) == WT_OK, "%s", limited.err[0]);
  WT_TEST_ASSERT(limited.steps[0] == STEPS && !limited.res[0].time_limited, "resumed to the end");
  s_same_from(&straight, &limited, 1, "time-limited + resumed");
  for (int i = 1; i < STEPS; i++)
    for (int w = 0; w < 4; w++)
      WT_TEST_ASSERT(straight.val[0][i] == limited.val[w][i] ||
                         (isnan(straight.val[0][i]) && isnan(limited.val[w][i])),
                     "validation after step %d, rank %d: %.9g vs %.9g", i + 1, w,
                     limited.val[w][i], straight.val[0][i]);
  WT_TEST_ASSERT(!isnan(straight.val[0][2]) && !isnan(straight.val[0][STEPS - 1]),
                 "validated every 3 steps and after the last");
}

static void test_bad_manifest(void) {
  static h_run h;
  parallel_tasklet_config c = s_config(0, "zero-part"); /* a run directory from above */
  c.resume = 1;
  c.run.stages = 1, c.run.replicas = 4;
  h_init(&h, &c);
  WT_TEST_ASSERT(h_run_all(&h) != WT_OK && strstr(h.err[0], "--stages 2"), "stage count: %s",
                 h.err[0]);
  c = s_config(0, "zero-part");
  c.resume = 1;
  char path[1100];
  snprintf(path, sizeof path, "%s/manifest.json", c.run.checkpoint_dir);
  FILE *f = fopen(path, "wb");
  fputs("{\"format\": \"wantrain-run-1\", \"step\": ", f);
  fclose(f);
  h_init(&h, &c);
  WT_TEST_ASSERT(h_run_all(&h) != WT_OK && strstr(h.err[0], "not JSON"), "damaged: %s", h.err[0]);
  c = s_config(0, "nothing-here");
  c.resume = 1;
  h_init(&h, &c);
  WT_TEST_ASSERT(h_run_all(&h) != WT_OK && strstr(h.err[0], "no run manifest"), "missing: %s",
                 h.err[0]);
}

static void test_private_dirs_resume(void) {
  static h_run straight, part, resumed;
  parallel_tasklet_config c = s_config(0, "private-straight");
  h_init(&straight, &c);
  WT_TEST_REQUIRE(h_run_all(&straight) == WT_OK, "%s", straight.err[0]);
  c = s_config(0, "private");
  c.run.checkpoint_every = 2, c.run.keep = 3;
  c.stop_after = 6;
  h_init(&part, &c);
  part.private_dirs = 1;
  WT_TEST_REQUIRE(h_run_all(&part) == WT_OK, "%s", part.err[0]);
  char dir[1200], cmd[2600];
  for (int w = 0; w < 4; w++) {
    snprintf(dir, sizeof dir, "%s/rank-%d", c.run.checkpoint_dir, w);
    WT_TEST_ASSERT(s_manifest_step(dir) == 6, "rank %d's own manifest names step 6", w);
  }
  /* replica 1 of each stage gets its stage's step-4 directory, as a fetch would bring it */
  for (int s = 0; s < 2; s++) {
    snprintf(cmd, sizeof cmd, "cp -r '%s/rank-%d/stage-%d' '%s/rank-%d/'", c.run.checkpoint_dir,
             2 * s, s, c.run.checkpoint_dir, 2 * s + 1);
    WT_TEST_REQUIRE(system(cmd) == 0, "%s", cmd);
  }
  c.stop_after = 0, c.run.checkpoint_every = 0;
  c.resume = 1, c.resume_step = 4;
  h_init(&resumed, &c);
  resumed.private_dirs = 1;
  WT_TEST_REQUIRE(h_run_all(&resumed) == WT_OK, "%s", resumed.err[0]);
  WT_TEST_ASSERT(resumed.steps[0] == STEPS, "resumed to %ld", resumed.steps[0]);
  WT_TEST_ASSERT(isnan(resumed.loss[0][4 - 1]) && !isnan(resumed.loss[0][4]),
                 "the resume started after step 4, not at the manifests' step 6");
  s_same_from(&straight, &resumed, 4, "private dirs, resumed at step 4");
  /* a step no directory holds is refused naming it */
  c.resume_step = 5;
  h_init(&resumed, &c);
  resumed.private_dirs = 1;
  WT_TEST_ASSERT(h_run_all(&resumed) != WT_OK && strstr(resumed.err[0], "step-00000005"),
                 "a step not saved: %s", resumed.err[0]);
}

int main(void) {
  wt_test_tmpdir(s_tmp, sizeof s_tmp);
  data_synth_config sc = data_synth_default();
  sc.n_tokens = 10000;
  s_data = data_set_synthetic(&sc);
  WT_TEST_REQUIRE(s_data, "%s", wt_last_error());
  /* 200 bytes of text: 164 window offsets, so the 64 windows of a run repeat a few times. */
  char small[600];
  snprintf(small, sizeof small, "%s/small.txt", s_tmp);
  FILE *f = fopen(small, "w");
  WT_TEST_REQUIRE(f, "create %s", small);
  for (int i = 0; i < 200; i++) fputc('a' + (i * 7 + i / 5) % 13, f);
  fclose(f);
  s_small = data_set_open_file(small);
  WT_TEST_REQUIRE(s_small, "%s", wt_last_error());
  test_killed_run_resumes();
  test_zero_resumes();
  test_stateless_codecs_resume();
  test_stateful_resume();
  test_whole_model_from_stages();
  test_time_limit();
  test_bad_manifest();
  test_private_dirs_resume();
  data_set_destroy(&s_data);
  data_set_destroy(&s_small);
  if (!wt_test_failures) {
    char rm[700];
    snprintf(rm, sizeof rm, "rm -rf '%s'", s_tmp);
    if (system(rm) != 0) fprintf(stderr, "could not remove %s\n", s_tmp);
  }
  return wt_test_finish("test_runtime_resume");
}
