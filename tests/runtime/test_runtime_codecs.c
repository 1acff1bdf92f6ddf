/* test_runtime_codecs — the data-parallel and pipeline compression options of a 2 x 2 tasklet
 * run: each gradient codec (with error feedback where the codec wants it), DiLoCo H = 4, and
 * each activation codec train (the loss falls by at least half as much as uncompressed), keep
 * every tasklet on the same loss, and send the bytes the codec promises: fp16 half, int8 ~3.8x
 * fewer, top-k far fewer data-parallel bytes; DiLoCo a quarter; the activations exactly their
 * AC-SGD message sizes. Top-k and rand-k keep 1% of the gradient per step, so in 24 steps they
 * are only required to train at all (a quarter and a fortieth of the uncompressed drop). */
#include "compress/acsgd.h"
#include "model/trainer.h"
#include "tests/runtime/runtime_harness.h"

enum { STEPS = 24 };

static data_set *s_data;

static parallel_tasklet_config s_config(void) {
  parallel_tasklet_config c = parallel_tasklet_config_default();
  c.run.stages = 2, c.run.replicas = 2;
  snprintf(c.run.schedule, sizeof c.run.schedule, "1f1b");
  c.run.seq = 16, c.run.layers = 2, c.run.heads = 2, c.run.channels = 32; /* V 64: the data's */
  c.run.batch = 16, c.run.micro_batches = 2, c.run.val_batches = 1, c.run.seed = 4;
  c.run.steps = STEPS;
  h_run_optim_default(&c.run);
  c.run.lr = 1e-2f;
  c.run.weight_decay = 0;
  c.data = s_data;
  return c;
}

typedef struct {
  double drop;          /* first loss - mean of the last 4 */
  double data_per_step; /* data-parallel bytes per step, tasklet 0 */
  double pipe_per_step; /* pipeline bytes per step, tasklet 0 */
} s_outcome;

static s_outcome s_run(const char *grad, const char *act, int diloco) {
  static h_run h;
  parallel_tasklet_config c = s_config();
  snprintf(c.run.sync.grad_codec, sizeof c.run.sync.grad_codec, "%s", grad);
  snprintf(c.run.act_codec, sizeof c.run.act_codec, "%s", act);
  c.run.sync.diloco = diloco;
  h_init(&h, &c);
  int rc = h_run_all(&h);
  WT_TEST_REQUIRE(rc == WT_OK, "grad %s act %s diloco %d: %s", grad, act, diloco, h.err[0]);
  for (int w = 1; w < 4; w++)
    for (int i = 0; i < STEPS; i++)
      WT_TEST_ASSERT(h.loss[w][i] == h.loss[0][i], "%s/%s rank %d step %d: loss differs", grad, act,
                     w, i + 1);
  s_outcome o = {.data_per_step = (double)h.res[0].bytes_data / STEPS,
                 .pipe_per_step = (double)h.res[0].bytes_pipeline / STEPS};
  double tail = 0;
  for (int i = STEPS - 4; i < STEPS; i++) tail += h.loss[0][i] / 4;
  o.drop = h.loss[0][0] - tail;
  printf("grad %-5s act %-7s diloco %d: loss %.4f -> %.4f, data-parallel %8.0f B/step, "
         "pipeline %8.0f B/step\n",
         grad, act, diloco, h.loss[0][0], tail, o.data_per_step, o.pipe_per_step);
  return o;
}

int main(void) {
  data_synth_config sc = data_synth_default();
  sc.n_tokens = 20000;
  s_data = data_set_synthetic(&sc);
  WT_TEST_REQUIRE(s_data, "%s", wt_last_error());
  s_outcome base = s_run("none", "none", 0);
  WT_TEST_ASSERT(base.drop > 0.1, "uncompressed training: the loss fell by %.3f", base.drop);
  static const struct {
    const char *grad, *act;
    int diloco;
    double data_ratio_lo, data_ratio_hi;
    int act_bits;    /* 0: float activations */
    double min_drop; /* fraction of the uncompressed loss drop required */
  } cases[] = {
      {"fp16", "none", 0, 1.9, 2.1, 0, 0.5}, {"bf16", "none", 0, 1.9, 2.1, 0, 0.5},
      {"int8", "none", 0, 3.3, 4.0, 0, 0.5}, {"int4", "none", 0, 5.5, 8, 0, 0.5},
      {"topk", "none", 0, 8, 1e9, 0, 0.25},  {"randk", "none", 0, 8, 1e9, 0, 0.025},
      {"sign", "none", 0, 10, 40, 0, 0.5},   {"none", "none", 4, 3.5, 4.5, 0, 0.5},
      {"none", "direct8", 0, 1, 1, 8, 0.5},  {"none", "delta8", 0, 1, 1, 8, 0.5},
      {"none", "delta4", 0, 1, 1, 4, 0.5},   {"none", "delta2", 0, 1, 1, 2, 0.5},
  };
  /* Tasklet 0 (stage 0 of replica 0) sends its activations and the tied wte gradient (V x C
   * floats) every step, and once, for the validation after the last step, one batch of
   * micro-batch rows as floats. */
  const parallel_tasklet_config c = s_config();
  const int T = c.run.seq, C = c.run.channels, rows = c.run.batch / 2;
  const double tied = 4.0 * data_set_vocab_size(s_data) * C;
  const double val = 4.0 * (c.run.batch / 4) * T * C / STEPS;
  for (size_t i = 0; i < WT_ARRAY_LEN(cases); i++) {
    s_outcome o = s_run(cases[i].grad, cases[i].act, cases[i].diloco);
    double dr = base.data_per_step / o.data_per_step;
    int b = cases[i].act_bits;
    double acts = b ? (double)rows * acsgd_msg_bytes(T, C, b) : 4.0 * rows * T * C;
    WT_TEST_ASSERT(o.drop > cases[i].min_drop * base.drop,
                   "%s/%s/%d trains: loss fell %.3f (uncompressed %.3f)", cases[i].grad,
                   cases[i].act, cases[i].diloco, o.drop, base.drop);
    WT_TEST_ASSERT(dr >= cases[i].data_ratio_lo * 0.999 && dr <= cases[i].data_ratio_hi * 1.001,
                   "%s/%s/%d: data-parallel bytes %.2fx fewer", cases[i].grad, cases[i].act,
                   cases[i].diloco, dr);
    WT_TEST_ASSERT(fabs(o.pipe_per_step - (tied + acts + val)) < 1e-6,
                   "%s/%s/%d: %.1f pipeline bytes per step, want %.1f", cases[i].grad, cases[i].act,
                   cases[i].diloco, o.pipe_per_step, tied + acts + val);
  }
  data_set_destroy(&s_data);
  return wt_test_finish("test_runtime_codecs");
}
