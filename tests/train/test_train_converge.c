/* test_train_converge — a small GPT trained on the synthetic Markov corpus gets its validation
 * loss within 10% of the corpus' exact entropy rate, and not meaningfully below it (no model can
 * beat the entropy rate; a loss far under it would mean a broken loss or leaking targets). */
#include "common/common.h"
#include "common/testing.h"
#include "model/trainer.h"

enum { MAX_STEPS = 250, CHECK_EVERY = 25 };

int main(void) {
  data_synth_config sc = data_synth_default();
  sc.n_tokens = 200000;
  data_set *d = data_set_synthetic(&sc);
  WT_TEST_REQUIRE(d, "%s", wt_last_error());
  const double bound = data_synthetic_entropy(sc.successors);
  trainer_config c = {
      .model = {.vocab_size = 64, .max_seq = 16, .n_layer = 1, .n_head = 1, .channels = 32},
      .batch = 16,
      .micro_batches = 1,
      .steps = MAX_STEPS,
      .val_batches = 16,
      .seed = 3};
  c.optim = optim_config_default();
  c.optim.lr = 2e-2f;
  c.optim.min_lr = 1e-3f;
  c.optim.warmup_steps = 10;
  c.optim.weight_decay = 0;
  trainer *t = trainer_new(&c, d);
  WT_TEST_REQUIRE(t, "%s", wt_last_error());
  float val = 1e9f, first = 0;
  long step = 0;
  while (step < MAX_STEPS && !(val <= 1.10 * bound)) {
    trainer_step_info info;
    WT_TEST_REQUIRE(trainer_step(t, &info) == WT_OK, "%s", wt_last_error());
    if (info.step == 1) first = info.loss;
    step = info.step;
    if (step % CHECK_EVERY == 0) {
      WT_TEST_REQUIRE(trainer_val_loss(t, &val) == WT_OK, "%s", wt_last_error());
      printf("step %4ld  train %.4f  val %.4f  (bound %.4f)\n", step, info.loss, val, bound);
    }
  }
  WT_TEST_ASSERT(first > 3.5, "an untrained model is near ln(64) = 4.16: %g", first);
  WT_TEST_ASSERT(val <= 1.10 * bound,
                 "validation loss %.4f not within 10%% of the entropy rate "
                 "%.4f after %ld steps",
                 val, bound, step);
  /* 16 x 16 x 16 = 4096 validation targets: the mean's sampling noise is ~0.015 nats. */
  WT_TEST_ASSERT(val >= bound - 0.06, "validation loss %.4f is below the entropy rate %.4f", val,
                 bound);
  trainer_destroy(&t);
  data_set_destroy(&d);
  return wt_test_finish("test_train_converge");
}
