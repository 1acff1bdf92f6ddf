/* test_runtime_equiv — S x R tasklets (threads over the in-process transport) train the same
 * model as one trainer_step process with the same global batch and seed:
 *   - SGD, no compression, 2x2, 4x1 and 1x4, GPipe and 1F1B: every step's loss within a relative
 *     1e-5 of the single process (which accumulates R·m micro-batches), the same on every
 *     tasklet bitwise;
 *   - AdamW: the largest relative loss difference over the run is printed (docs/runtime.md) and
 *     held under 1e-4;
 *   - ZeRO-1 (2x2, SGD and AdamW): bitwise the losses of the unsharded run;
 *   - activation slots: with the default (one slot per micro-batch in flight) no stage recomputes
 *     a forward in GPipe or 1F1B, and the losses and norms equal bitwise those of stages with one
 *     slot (act_slots 1), which recompute m forwards per step in GPipe.
 * Clipping is on (0.5) so the cross-stage global norm is exercised. The validation loss after the
 * last step (replica 0's pipeline, sent to every tasklet) equals trainer_val_loss to 1e-5, and
 * bitwise when only the layers are split. */
#include "model/trainer.h"
#include "tests/runtime/runtime_harness.h"

enum { STEPS = 8, BATCH = 8, M = 2 };

static data_set *s_data;

/* The run every case trains, on one stage and replica until the case says otherwise. */
static parallel_tasklet_config s_config(optim_kind kind) {
  parallel_tasklet_config c = parallel_tasklet_config_default();
  c.run.seq = 16, c.run.layers = 4, c.run.heads = 2, c.run.channels = 16; /* V 64: the data's */
  c.run.batch = BATCH, c.run.micro_batches = M, c.run.val_batches = 2, c.run.seed = 5;
  c.run.steps = STEPS;
  h_run_optim_default(&c.run);
  snprintf(c.run.optimizer, sizeof c.run.optimizer, "%s", kind == OPTIM_SGD ? "sgd" : "adamw");
  c.run.lr = kind == OPTIM_SGD ? 0.05f : 3e-3f;
  c.run.warmup = 2;
  c.run.grad_clip = 0.5f;
  c.data = s_data;
  return c;
}

/* The single-process losses with R·m micro-batches, and its validation loss at the end. */
static float s_ref_val;

static void s_reference(optim_kind kind, int R, float *loss, float *norm) {
  const parallel_tasklet_config k = s_config(kind);
  trainer_config c;
  WT_TEST_REQUIRE(parallel_run_trainer_config(&k.run, data_set_vocab_size(s_data), &c) == WT_OK,
                  "%s", wt_last_error());
  c.micro_batches = R * M;
  trainer *t = trainer_new(&c, s_data);
  WT_TEST_REQUIRE(t, "%s", wt_last_error());
  for (int i = 0; i < STEPS; i++) {
    trainer_step_info info;
    WT_TEST_REQUIRE(trainer_step(t, &info) == WT_OK, "%s", wt_last_error());
    loss[i] = info.loss, norm[i] = info.grad_norm;
  }
  WT_TEST_REQUIRE(trainer_val_loss(t, &s_ref_val) == WT_OK, "%s", wt_last_error());
  trainer_destroy(&t);
}

static int s_act_slots; /* act_slots of the next s_distributed runs */

static void s_distributed(h_run *h, optim_kind kind, int S, int R, assign_schedule_kind sched,
                          int zero) {
  parallel_tasklet_config c = s_config(kind);
  c.run.stages = S, c.run.replicas = R, c.run.zero = zero;
  snprintf(c.run.schedule, sizeof c.run.schedule, "%s", assign_schedule_name(sched));
  c.run.act_slots = s_act_slots;
  h_init(h, &c);
  int rc = h_run_all(h);
  WT_TEST_REQUIRE(rc == WT_OK, "%dx%d %s: %s", S, R, assign_schedule_name(sched), h->err[0]);
  for (int w = 0; w < S * R; w++) {
    WT_TEST_ASSERT(h->steps[w] == STEPS, "rank %d did %ld steps", w, h->steps[w]);
    WT_TEST_ASSERT(h->res[w].last_val_loss == h->res[0].last_val_loss, "rank %d val loss", w);
    for (int i = 0; i < STEPS; i++)
      WT_TEST_ASSERT(h->loss[w][i] == h->loss[0][i] && h->norm[w][i] == h->norm[0][i],
                     "%dx%d rank %d step %d: loss %.9g norm %.9g differ from rank 0's", S, R, w,
                     i + 1, h->loss[w][i], h->norm[w][i]);
  }
}

/* Largest |a - b| / |b| over the steps. */
static double s_max_rel(const float *a, const float *b) {
  double worst = 0;
  for (int i = 0; i < STEPS; i++) worst = fmax(worst, fabs((double)a[i] - b[i]) / fabs(b[i]));
  return worst;
}

static void test_sgd_equivalence(void) {
  static const int shapes[][2] = {{2, 2}, {4, 1}, {1, 4}};
  static h_run h;
  for (size_t k = 0; k < 3; k++)
    for (int sched = 0; sched < 2; sched++) {
      int S = shapes[k][0], R = shapes[k][1];
      float ref[STEPS], ref_norm[STEPS];
      s_reference(OPTIM_SGD, R, ref, ref_norm);
      s_distributed(&h, OPTIM_SGD, S, R, sched, 0);
      for (int i = 0; i < STEPS; i++) {
        WT_TEST_CLOSE(h.loss[0][i], ref[i], 0, 1e-5, "sgd loss vs one process");
        WT_TEST_CLOSE(h.norm[0][i], ref_norm[i], 0, 1e-4, "sgd grad norm vs one process");
      }
      WT_TEST_CLOSE(h.res[0].last_val_loss, s_ref_val, 0, 1e-5, "validation loss vs one process");
      if (R == 1) /* only the layers are split: bitwise (gpt.h) */
        WT_TEST_ASSERT(h.res[0].last_val_loss == s_ref_val, "%dx1 validation loss %.9g vs %.9g", S,
                       h.res[0].last_val_loss, s_ref_val);
      printf("sgd %dx%d %-5s: max relative loss difference vs one process %.3g (loss %.4f -> "
             "%.4f)\n",
             S, R, assign_schedule_name(sched), s_max_rel(h.loss[0], ref), ref[0], ref[STEPS - 1]);
      WT_TEST_ASSERT(ref[STEPS - 1] < ref[0], "the loss went down");
    }
}

static void test_adamw_divergence(void) {
  static const int shapes[][2] = {{2, 2}, {4, 1}, {1, 4}};
  static h_run h;
  for (size_t k = 0; k < 3; k++) {
    int S = shapes[k][0], R = shapes[k][1];
    float ref[STEPS], ref_norm[STEPS];
    s_reference(OPTIM_ADAMW, R, ref, ref_norm);
    s_distributed(&h, OPTIM_ADAMW, S, R, ASSIGN_SCHEDULE_1F1B, 0);
    double d = s_max_rel(h.loss[0], ref);
    printf("adamw %dx%d 1f1b: max relative loss difference vs one process %.3g\n", S, R, d);
    WT_TEST_ASSERT(d < 1e-4, "adamw %dx%d drifts %.3g from one process", S, R, d);
  }
}

static void test_zero_bitwise(void) {
  static h_run plain, zero;
  for (int kind = 0; kind < 2; kind++) {
    s_distributed(&plain, kind, 2, 2, ASSIGN_SCHEDULE_1F1B, 0);
    s_distributed(&zero, kind, 2, 2, ASSIGN_SCHEDULE_1F1B, 1);
    for (int i = 0; i < STEPS; i++)
      WT_TEST_ASSERT(plain.loss[0][i] == zero.loss[0][i] && plain.norm[0][i] == zero.norm[0][i],
                     "%s step %d: zero-1 loss %.9g norm %.9g, unsharded %.9g %.9g",
                     kind == OPTIM_SGD ? "sgd" : "adamw", i + 1, zero.loss[0][i], zero.norm[0][i],
                     plain.loss[0][i], plain.norm[0][i]);
    WT_TEST_ASSERT(zero.res[0].bytes_data == plain.res[0].bytes_data,
                   "zero-1 sent %llu data-parallel bytes, the all-reduce %llu",
                   (unsigned long long)zero.res[0].bytes_data,
                   (unsigned long long)plain.res[0].bytes_data);
  }
}

static void test_activation_slots(void) {
  static h_run slots, one;
  for (int S = 2; S <= 4; S += 2)
    for (int sched = 0; sched < 2; sched++) {
      s_act_slots = 0;
      s_distributed(&slots, OPTIM_ADAMW, S, 1, sched, 0);
      s_act_slots = 1;
      s_distributed(&one, OPTIM_ADAMW, S, 1, sched, 0);
      s_act_slots = 0;
      long rec_slots = 0, rec_one = 0;
      for (int s = 0; s < S; s++) rec_slots += slots.res[s].recomputes, rec_one += one.res[s].recomputes;
      WT_TEST_ASSERT(rec_slots == 0, "%d stages %s: %ld forwards recomputed with slots", S,
                     assign_schedule_name(sched), rec_slots);
      /* One slot: a backward whose micro-batch is not the stage's latest forward recomputes it
       * (every stage in GPipe, all but the last in 1F1B), at least m per step in all. */
      WT_TEST_ASSERT(rec_one >= (long)STEPS * M, "%d stages %s: %ld recomputed with one slot", S,
                     assign_schedule_name(sched), rec_one);
      for (int i = 0; i < STEPS; i++)
        WT_TEST_ASSERT(slots.loss[0][i] == one.loss[0][i] && slots.norm[0][i] == one.norm[0][i],
                       "%d stages %s step %d: slots %.9g, one slot %.9g", S,
                       assign_schedule_name(sched), i + 1, slots.loss[0][i], one.loss[0][i]);
      printf("%d stages %-5s m=%d: %ld forwards recomputed with one slot per stage, 0 with slots; "
             "losses bitwise equal\n", S, assign_schedule_name(sched), M, rec_one);
    }
}

int main(void) {
  data_synth_config sc = data_synth_default();
  sc.n_tokens = 10000;
  s_data = data_set_synthetic(&sc);
  WT_TEST_REQUIRE(s_data, "%s", wt_last_error());
  test_sgd_equivalence();
  test_adamw_divergence();
  test_zero_bitwise();
  test_activation_slots();
  data_set_destroy(&s_data);
  return wt_test_finish("test_runtime_equiv");
}
