/* test_runtime_bind — the run binding (parallel/runtime/tasklet.h): every stage checkpoint and the
 * manifest of a 2 x 2 run record the run id and the settings that change its arithmetic, and a
 * resume that would continue another run, or this run differently, is refused by name:
 *   - a stage directory copied from a run with another seed;
 *   - a stage directory that is a symbolic link to another run's;
 *   - another batch;
 *   - a run trained with int8 + error feedback resumed without the codec (its state files would
 *     be dropped), or with error feedback off;
 *   - a run trained with a robust aggregate resumed with another, or with the ring;
 *   - more steps are allowed: the resume goes on and the manifest records the change;
 *   - a run directory written before the binding resumes, and refuses the state files a run
 *     without their codec would drop;
 *   - parallel_run_binding_check names the first field that differs, both values and the flag,
 *     and leaves alone what does not change the numbers or says where a stage runs. */
#include "tests/runtime/runtime_harness.h"

#include <cjson/cJSON.h>

enum { STEPS = 4 };

static data_set *s_data;
static char s_tmp[512];

static parallel_tasklet_config s_config(const char *dir, uint64_t seed) {
  parallel_tasklet_config c = parallel_tasklet_config_default();
  c.run.stages = 2, c.run.replicas = 2;
  snprintf(c.run.schedule, sizeof c.run.schedule, "1f1b");
  c.run.seq = 16, c.run.layers = 2, c.run.heads = 2, c.run.channels = 16; /* V 64: the data's */
  c.run.batch = 8, c.run.micro_batches = 2, c.run.val_batches = 1, c.run.seed = seed;
  c.run.steps = STEPS;
  h_run_optim_default(&c.run);
  c.data = s_data;
  snprintf(c.run.checkpoint_dir, sizeof c.run.checkpoint_dir, "%s/%s", s_tmp, dir);
  return c;
}

/* Runs c for 2 steps into its directory (a checkpoint at step 2); returns the config. */
static parallel_tasklet_config s_start(parallel_tasklet_config c) {
  static h_run h;
  c.stop_after = 2;
  h_init(&h, &c);
  WT_TEST_REQUIRE(h_run_all(&h) == WT_OK, "%s: %s", c.run.checkpoint_dir, h.err[0]);
  c.stop_after = 0;
  c.resume = 1;
  return c;
}

/* Resumes c; every tasklet must refuse with `words` in its error. */
static void s_refused(const parallel_tasklet_config *c, const char *what, const char *words) {
  static h_run h;
  h_init(&h, c);
  int rc = h_run_all(&h);
  WT_TEST_ASSERT(rc != WT_OK, "%s: resumed instead of refusing", what);
  int rank = -1;
  for (int w = 0; w < 4 && rank < 0; w++)
    if (strstr(h.err[w], words)) rank = w;
  WT_TEST_ASSERT(rank >= 0, "%s: want '%s' in: %s | %s | %s | %s", what, words, h.err[0], h.err[1],
                 h.err[2], h.err[3]);
  for (int w = 0; w < 4; w++)
    WT_TEST_ASSERT(h.steps[w] <= 2, "%s: rank %d trained on to step %ld", what, w, h.steps[w]);
  if (rank >= 0) printf("%s: refused: %s\n", what, h.err[rank]);
}

static void s_sh(const char *cmd) {
  char line[2048];
  snprintf(line, sizeof line, "cd '%s' && %s", s_tmp, cmd);
  WT_TEST_REQUIRE(system(line) == 0, "%s", cmd);
}

static void test_stage_from_another_run(void) {
  s_start(s_config("other-seed", 10));
  parallel_tasklet_config c = s_start(s_config("copied", 9));
  s_sh("rm -rf copied/stage-1 && cp -r other-seed/stage-1 copied/stage-1");
  s_refused(&c, "a stage directory of a run with another seed", "belongs to another run: run_id");
  s_refused(&c, "the same, naming the seed", "seed was 10, the manifest's 9");
  c = s_start(s_config("linked", 9));
  s_sh("rm -rf linked/stage-1 && ln -s ../other-seed/stage-1 linked/stage-1");
  s_refused(&c, "a stage directory linked to another run's", "outside the run directory");
  /* A link to a run of the same settings (the same derived run id) would give the same numbers,
   * but the stage's checkpoints still live outside the run: refused too. */
  s_start(s_config("same-seed", 9));
  c = s_start(s_config("linked-same", 9));
  s_sh("rm -rf linked-same/stage-1 && ln -s ../same-seed/stage-1 linked-same/stage-1");
  s_refused(&c, "a stage directory linked to a run of the same settings",
            "outside the run directory");
}

static void test_changed_batch(void) {
  parallel_tasklet_config c = s_start(s_config("batch", 9));
  c.run.batch = 16;
  s_refused(&c, "another batch",
            "batch was 8, this run asks 16; resume with --batch 8 or start a new run directory");
  c.run.batch = 8;
  c.run.micro_batches = 1;
  s_refused(&c, "other micro-batches", "micro_batches was 2, this run asks 1");
}

static void test_dropped_codec(void) {
  parallel_tasklet_config c = s_config("int8-ef", 9);
  snprintf(c.run.sync.grad_codec, sizeof c.run.sync.grad_codec, "int8");
  c = s_start(c);
  char path[1200];
  snprintf(path, sizeof path, "%s/stage-0/replica-1-step-00000002.state", c.run.checkpoint_dir);
  WT_TEST_REQUIRE(access(path, F_OK) == 0, "int8 + error feedback saved %s", path);
  snprintf(c.run.sync.grad_codec, sizeof c.run.sync.grad_codec, "none");
  s_refused(&c, "int8 + error feedback resumed without a codec",
            "grad_codec was int8, this run asks none; resume with --grad-codec int8");
  snprintf(c.run.sync.grad_codec, sizeof c.run.sync.grad_codec, "int8");
  snprintf(c.run.sync.grad_ef, sizeof c.run.sync.grad_ef, "off");
  s_refused(&c, "int8 + error feedback resumed without error feedback",
            "grad_ef was on, this run asks off");
  snprintf(c.run.sync.grad_ef, sizeof c.run.sync.grad_ef, "on");
  static h_run h;
  h_init(&h, &c);
  WT_TEST_ASSERT(h_run_all(&h) == WT_OK && h.steps[0] == STEPS, "resumed as saved: %s", h.err[0]);
}

static void test_changed_robust(void) {
  parallel_tasklet_config c = s_config("robust", 9);
  snprintf(c.run.robust, sizeof c.run.robust, "centered-clip");
  c = s_start(c);
  snprintf(c.run.robust, sizeof c.run.robust, "none");
  s_refused(&c, "a robust run resumed with the ring",
            "robust was centered-clip, this run asks none; resume with --robust centered-clip");
  snprintf(c.run.robust, sizeof c.run.robust, "median");
  s_refused(&c, "a robust run resumed with another aggregate",
            "robust was centered-clip, this run asks median");
  snprintf(c.run.robust, sizeof c.run.robust, "centered-clip");
  static h_run h;
  h_init(&h, &c);
  WT_TEST_ASSERT(h_run_all(&h) == WT_OK && h.steps[0] == STEPS, "resumed as saved: %s", h.err[0]);
}

/* A run directory as an older wantrain wrote it: no binding in the manifest or in any stage
 * checkpoint (state.json's "train" removed, the digests made again). It still resumes with the
 * options it was saved with; resumed without its codec, the state files it finds are refused
 * instead of dropped. */
static void test_unbound_run(void) {
  parallel_tasklet_config c = s_config("unbound", 9);
  snprintf(c.run.sync.grad_codec, sizeof c.run.sync.grad_codec, "int8");
  c = s_start(c);
  s_sh("cd unbound && python3 -c \"import json; m=json.load(open('manifest.json')); "
       "m.pop('run', None); json.dump(m, open('manifest.json', 'w'))\" && "
       "for d in stage-*/step-00000002; do (cd $d && python3 -c \"import json; "
       "s=json.load(open('state.json')); s.pop('train', None); "
       "json.dump(s, open('state.json', 'w'))\" && "
       "sha256sum model.safetensors optimizer.safetensors state.json > SHA256SUMS) || exit 1; "
       "done");
  snprintf(c.run.sync.grad_codec, sizeof c.run.sync.grad_codec, "none");
  s_refused(&c, "an unbound int8 + error feedback run resumed without a codec",
            "holds ring-residuals but this run keeps nothing");
  snprintf(c.run.sync.grad_codec, sizeof c.run.sync.grad_codec, "int8");
  static h_run h;
  h_init(&h, &c);
  WT_TEST_ASSERT(h_run_all(&h) == WT_OK && h.steps[0] == STEPS, "an unbound run resumes: %s",
                 h.err[0]);
}

static cJSON *s_manifest(const char *dir) {
  char path[1100], text[16384] = "";
  snprintf(path, sizeof path, "%s/manifest.json", dir);
  FILE *f = fopen(path, "rb");
  WT_TEST_REQUIRE(f, "no manifest in %s", dir);
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = 0;
  return cJSON_Parse(text);
}

/* More steps change the lr schedule's horizon, which a run may do: it goes on and says so. */
static void test_more_steps(void) {
  parallel_tasklet_config c = s_start(s_config("longer", 9));
  cJSON *m = s_manifest(c.run.checkpoint_dir);
  const cJSON *id = cJSON_GetObjectItem(cJSON_GetObjectItem(m, "run"), "run_id");
  char was[32] = "";
  if (cJSON_IsString(id)) snprintf(was, sizeof was, "%s", id->valuestring);
  cJSON_Delete(m);
  WT_TEST_ASSERT(strlen(was) == 16, "the manifest records the run id");
  c.run.steps = STEPS + 2;
  static h_run h;
  h_init(&h, &c);
  WT_TEST_REQUIRE(h_run_all(&h) == WT_OK, "more steps: %s", h.err[0]);
  WT_TEST_ASSERT(h.steps[0] == STEPS + 2, "ran to %ld", h.steps[0]);
  m = s_manifest(c.run.checkpoint_dir);
  const cJSON *run = cJSON_GetObjectItem(m, "run");
  const cJSON *ch = cJSON_GetArrayItem(cJSON_GetObjectItem(m, "changes"), 0);
  const cJSON *text = cJSON_GetObjectItem(ch, "change");
  const cJSON *steps = cJSON_GetObjectItem(run, "steps");
  id = cJSON_GetObjectItem(run, "run_id");
  WT_TEST_ASSERT(cJSON_IsString(text) &&
                     strstr(text->valuestring, "steps was 4, this run asks 6") &&
                     cJSON_GetObjectItem(ch, "step")->valuedouble == 2,
                 "the manifest records the change");
  WT_TEST_ASSERT(cJSON_IsString(steps) && !strcmp(steps->valuestring, "6"),
                 "the binding now holds the new steps");
  WT_TEST_ASSERT(cJSON_IsString(id) && !strcmp(id->valuestring, was), "the run id is kept");
  cJSON_Delete(m);
}

static void test_check_api(void) {
  parallel_tasklet_config c = s_config("api", 9);
  char *a = parallel_run_binding(&c, 0x1234), *b = parallel_run_binding(&c, 0), notes[256];
  WT_TEST_ASSERT(parallel_run_binding_id(a) == 0x1234, "the id given is recorded");
  WT_TEST_ASSERT(parallel_run_binding_id(b) != 0, "an id derived from the settings");
  WT_TEST_ASSERT(parallel_run_binding_check("x", a, b, notes, sizeof notes) == WT_OK && !notes[0],
                 "the same settings under another id: %s", wt_last_error());
  free(b);
  c.run.lr *= 2;
  b = parallel_run_binding(&c, 0x1234);
  WT_TEST_ASSERT(parallel_run_binding_check("run", a, b, NULL, 0) == WT_EMISMATCH &&
                     strstr(wt_last_error(), "run: lr was ") &&
                     strstr(wt_last_error(), "; resume with --lr "),
                 "another lr: %s", wt_last_error());
  free(b);
  c = s_config("api", 9);
  c.run.sync.outer_lr = 0.5f; /* without DiLoCo the outer step takes no part */
  snprintf(c.run.sync.grad_codec, sizeof c.run.sync.grad_codec, "none");
  snprintf(c.run.sync.grad_ef, sizeof c.run.sync.grad_ef,
           "off"); /* nor error feedback without a codec */
  c.run.zero = 1, c.run.act_slots = 1, c.run.val_every = 3, c.run.checkpoint_every = 5,
  c.run.keep = 4;
  c.run.site_ranks = 2, c.run.site_cp = 2; /* where a stage runs: placement */
  b = parallel_run_binding(&c, 0x1234);
  WT_TEST_ASSERT(parallel_run_binding_check("run", a, b, NULL, 0) == WT_OK,
                 "settings that do not change the numbers: %s", wt_last_error());
  free(b);
  /* A binding written before robust was bound lacks the field: it reads as the ring, and the
   * settings' derived id is the one such a binding recorded. */
  cJSON *old = cJSON_Parse(a);
  cJSON_DeleteItemFromObject(old, "robust");
  char *unbound = cJSON_PrintUnformatted(old);
  cJSON_Delete(old);
  c = s_config("api", 9);
  b = parallel_run_binding(&c, 0x1234);
  WT_TEST_ASSERT(parallel_run_binding_check("run", unbound, b, NULL, 0) == WT_OK,
                 "a binding without robust resumes with the ring: %s", wt_last_error());
  free(b);
  snprintf(c.run.robust, sizeof c.run.robust, "median");
  b = parallel_run_binding(&c, 0x1234);
  WT_TEST_ASSERT(parallel_run_binding_check("run", unbound, b, NULL, 0) == WT_EMISMATCH &&
                     strstr(wt_last_error(), "robust was none, this run asks median"),
                 "a binding without robust refuses an aggregate: %s", wt_last_error());
  free(b), free(unbound);
  c = s_config("api", 9);
  b = parallel_run_binding(&c, 0);
  snprintf(c.run.robust, sizeof c.run.robust, "median");
  char *d = parallel_run_binding(&c, 0);
  WT_TEST_ASSERT(parallel_run_binding_id(b) != parallel_run_binding_id(d),
                 "the aggregate takes part in the derived id");
  free(b), free(d);
  WT_TEST_ASSERT(parallel_run_binding_check("run", "{\"seed\":\"9\"}", a, NULL, 0) == WT_ECORRUPT,
                 "a binding without a run id is malformed");
  free(a);
}

int main(void) {
  wt_test_tmpdir(s_tmp, sizeof s_tmp);
  data_synth_config sc = data_synth_default();
  sc.n_tokens = 10000;
  s_data = data_set_synthetic(&sc);
  WT_TEST_REQUIRE(s_data, "%s", wt_last_error());
  test_check_api();
  test_stage_from_another_run();
  test_changed_batch();
  test_dropped_codec();
  test_changed_robust();
  test_more_steps();
  test_unbound_run();
  data_set_destroy(&s_data);
  if (!wt_test_failures) {
    char rm[700];
    snprintf(rm, sizeof rm, "rm -rf '%s'", s_tmp);
    if (system(rm) != 0) fprintf(stderr, "could not remove %s\n", s_tmp);
  }
  return wt_test_finish("test_runtime_bind");
}
