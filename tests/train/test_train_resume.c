/* test_train_resume — a run stopped after K steps and resumed from its checkpoint produces
 * bitwise the same losses and weights as the run that never stopped; gradient accumulation over
 * micro-batches matches one big batch up to rounding; a bad trainer config is refused. */
#include "common/common.h"
#include "common/testing.h"

#include <stdlib.h>
#include "model/trainer.h"

#include <string.h>

enum { N_STEPS = 10, K_STEPS = 4 };

static trainer_config s_config(optim_kind kind, int micro) {
  trainer_config c = {
      .model = {.vocab_size = 64, .max_seq = 16, .n_layer = 2, .n_head = 2, .channels = 16},
      .batch = 4,
      .micro_batches = micro,
      .steps = N_STEPS,
      .val_batches = 2,
      .seed = 11};
  c.optim = optim_config_default();
  c.optim.kind = kind;
  c.optim.lr = 3e-3f;
  c.optim.warmup_steps = 3; /* the schedule must continue where it stopped, too */
  c.optim.grad_clip = 0.5f; /* and clipping be active */
  return c;
}

static void s_run(const trainer_config *c, const data_set *d, trainer *t, int from, int to,
                  float *losses) {
  (void)c, (void)d;
  for (int i = from; i < to; i++) {
    trainer_step_info info;
    WT_TEST_REQUIRE(trainer_step(t, &info) == WT_OK, "step %d: %s", i, wt_last_error());
    WT_TEST_ASSERT(info.step == i + 1, "step numbering %ld", info.step);
    losses[i] = info.loss;
  }
}

static void test_resume(const data_set *d, optim_kind kind, const char *dir) {
  trainer_config c = s_config(kind, 2);
  float straight[N_STEPS], resumed[N_STEPS];
  trainer *a = trainer_new(&c, d);
  WT_TEST_REQUIRE(a, "%s", wt_last_error());
  s_run(&c, d, a, 0, N_STEPS, straight);

  trainer *b = trainer_new(&c, d);
  s_run(&c, d, b, 0, K_STEPS, resumed);
  WT_TEST_REQUIRE(trainer_save(b, dir, 2, NULL) == WT_OK, "%s", wt_last_error());
  trainer_destroy(&b);
  trainer_config c2 = c;
  c2.seed = 999; /* a resumed run takes everything from the checkpoint, not from its seed */
  trainer *r = trainer_new(&c2, d);
  WT_TEST_REQUIRE(trainer_resume(r, dir) == WT_OK, "%s", wt_last_error());
  WT_TEST_ASSERT(trainer_steps_done(r) == K_STEPS, "resumed at %ld", trainer_steps_done(r));
  s_run(&c, d, r, K_STEPS, N_STEPS, resumed);
  for (int i = 0; i < N_STEPS; i++)
    WT_TEST_ASSERT(straight[i] == resumed[i], "%s step %d: %.9g vs %.9g",
                   kind == OPTIM_SGD ? "sgd" : "adamw", i + 1, straight[i], resumed[i]);
  size_t n;
  const float *pa = gpt_stage_params(trainer_model(a), &n);
  const float *pr = gpt_stage_params(trainer_model(r), &n);
  WT_TEST_ASSERT(!memcmp(pa, pr, n * sizeof(float)), "final weights bit-exact");
  WT_TEST_ASSERT(straight[N_STEPS - 1] < straight[0], "loss went down: %g -> %g", straight[0],
                 straight[N_STEPS - 1]);
  float va, vr;
  WT_TEST_ASSERT(trainer_val_loss(a, &va) == WT_OK && trainer_val_loss(r, &vr) == WT_OK && va == vr,
                 "validation loss equal");
  trainer_destroy(&a);
  trainer_destroy(&r);
}

/* Accumulating 4 micro-batches of 1 must give the step a 1-micro-batch run of 4 gives. */
static void test_accumulation(const data_set *d) {
  trainer_config c1 = s_config(OPTIM_ADAMW, 1), c4 = s_config(OPTIM_ADAMW, 4);
  trainer *a = trainer_new(&c1, d), *b = trainer_new(&c4, d);
  WT_TEST_REQUIRE(a && b, "%s", wt_last_error());
  for (int i = 0; i < 3; i++) {
    trainer_step_info ia, ib;
    WT_TEST_REQUIRE(trainer_step(a, &ia) == WT_OK && trainer_step(b, &ib) == WT_OK, "%s",
                    wt_last_error());
    /* Float sums in another order: agree to ~1e-6 relative, not bitwise. */
    WT_TEST_CLOSE(ib.loss, ia.loss, 1e-5, 1e-5, "micro-batched loss");
    WT_TEST_CLOSE(ib.grad_norm, ia.grad_norm, 1e-5, 1e-4, "micro-batched gradient norm");
  }
  trainer_destroy(&a);
  trainer_destroy(&b);
}

static void test_bad_config(const data_set *d) {
  trainer_config c = s_config(OPTIM_ADAMW, 3); /* 4 is not a multiple of 3 */
  WT_TEST_ASSERT(!trainer_new(&c, d) && strstr(wt_last_error(), "--micro-batches"),
                 "batch/micro: %s", wt_last_error());
  c = s_config(OPTIM_ADAMW, 1);
  c.model.vocab_size = 256;
  WT_TEST_ASSERT(!trainer_new(&c, d) && strstr(wt_last_error(), "vocabulary"), "vocab: %s",
                 wt_last_error());
  c = s_config(OPTIM_ADAMW, 1);
  c.model.max_seq = 5000; /* the validation split holds 1000 tokens */
  WT_TEST_ASSERT(!trainer_new(&c, d) && strstr(wt_last_error(), "too short"), "seq: %s",
                 wt_last_error());
}

int main(void) {
  char tmp[512], dir[600];
  wt_test_tmpdir(tmp, sizeof tmp);
  data_synth_config sc = data_synth_default();
  sc.n_tokens = 10000;
  data_set *d = data_set_synthetic(&sc);
  WT_TEST_REQUIRE(d, "%s", wt_last_error());
  snprintf(dir, sizeof dir, "%s/adamw", tmp);
  test_resume(d, OPTIM_ADAMW, dir);
  snprintf(dir, sizeof dir, "%s/sgd", tmp);
  test_resume(d, OPTIM_SGD, dir);
  test_accumulation(d);
  test_bad_config(d);
  data_set_destroy(&d);
  if (!wt_test_failures) { /* scratch is kept when a check failed, for a look at it */
    char rm[700];
    snprintf(rm, sizeof rm, "rm -rf '%s'", tmp);
    if (system(rm) != 0) fprintf(stderr, "could not remove %s\n", tmp);
  }
  return wt_test_finish("test_train_resume");
}
