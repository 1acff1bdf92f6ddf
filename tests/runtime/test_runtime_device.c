/* test_runtime_device — the runtime's device plumbing, on a machine without a GPU: 2 x 2 tasklets
 * whose stages live on the hostdev back end (tests/runtime/hostdev.h: the CPU's ops on memory
 * the host cannot touch) go through every place where bytes leave or enter a device — pipeline
 * activations and the tied wte gradient, the plain, compressed and sparse all-reduces, ZeRO-1,
 * DiLoCo, AC-SGD, checkpoints and resume — and must give the CPU run's losses, gradient norms and
 * validation losses bit for bit. A host access to device memory would kill the test (SIGSEGV),
 * which a forked child shows first. Then the device names: a malformed one and a GPU this build
 * or machine lacks are refused with kernels_for_device's messages. */
#include "model/trainer.h"
#include "tests/runtime/hostdev.h"
#include "tests/runtime/runtime_harness.h"

#include <stdlib.h>
#include <sys/wait.h>

enum { STEPS = 6 };

static data_set *s_data;

static parallel_tasklet_config s_config(void) {
  parallel_tasklet_config c = parallel_tasklet_config_default();
  c.run.stages = 2, c.run.replicas = 2;
  snprintf(c.run.schedule, sizeof c.run.schedule, "1f1b");
  c.run.seq = 16, c.run.layers = 2, c.run.heads = 2, c.run.channels = 32; /* V 64: the data's */
  c.run.batch = 8, c.run.micro_batches = 2, c.run.val_batches = 1, c.run.seed = 5;
  c.run.steps = STEPS;
  h_run_optim_default(&c.run);
  c.run.lr = 1e-2f;
  c.data = s_data;
  c.run.val_every = 3;
  return c;
}

/* One variant of the run. */
typedef struct {
  const char *name, *grad, *act;
  int diloco, zero, act_slots, resume; /* resume: stop after 3 steps, then resume to the end */
} s_variant;

/* Runs the variant on `ops` (NULL: the CPU) into *h. */
static void s_run(const s_variant *v, const kernels_ops *ops, h_run *h) {
  parallel_tasklet_config c = s_config();
  c.kernels = ops;
  snprintf(c.run.sync.grad_codec, sizeof c.run.sync.grad_codec, "%s", v->grad);
  snprintf(c.run.act_codec, sizeof c.run.act_codec, "%s", v->act);
  c.run.sync.diloco = v->diloco;
  c.run.zero = v->zero;
  c.run.act_slots = v->act_slots;
  if (v->resume) {
    char dir[512];
    wt_test_tmpdir(dir, sizeof dir);
    snprintf(c.run.checkpoint_dir, sizeof c.run.checkpoint_dir, "%s/run", dir);
    c.run.checkpoint_every = 3;
    c.stop_after = 3;
    h_init(h, &c);
    int rc = h_run_all(h);
    WT_TEST_REQUIRE(rc == WT_OK, "%s on %s, first half: %s", v->name, ops ? ops->name : "cpu",
                    h->err[0]);
    static h_run first; /* the first half's losses: the resumed run records only its own */
    first = *h;
    c.stop_after = 0;
    c.resume = 1;
    h_init(h, &c);
    rc = h_run_all(h);
    WT_TEST_REQUIRE(rc == WT_OK, "%s on %s, resumed: %s", v->name, ops ? ops->name : "cpu",
                    h->err[0]);
    for (int w = 0; w < H_MAX_RANKS; w++)
      for (int i = 0; i < 3; i++) {
        h->loss[w][i] = first.loss[w][i], h->norm[w][i] = first.norm[w][i];
        h->val[w][i] = first.val[w][i];
      }
    char rm[600];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    if (system(rm) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return;
  }
  h_init(h, &c);
  int rc = h_run_all(h);
  WT_TEST_REQUIRE(rc == WT_OK, "%s on %s: %s", v->name, ops ? ops->name : "cpu", h->err[0]);
}

static int s_same(float a, float b) {
  return memcmp(&a, &b, sizeof a) == 0;
}

static void s_compare(const s_variant *v, const kernels_ops *dev) {
  static h_run cpu, onit;
  s_run(v, NULL, &cpu);
  unsigned long up = hd.uploads, down = hd.downloads, allocs = hd.allocs;
  s_run(v, dev, &onit);
  WT_TEST_ASSERT(hd.allocs > allocs && hd.uploads > up && hd.downloads > down,
                 "%s: the stages did not use the device back end", v->name);
  for (int w = 0; w < 4; w++)
    for (int i = 0; i < STEPS; i++) {
      WT_TEST_ASSERT(s_same(cpu.loss[w][i], onit.loss[w][i]),
                     "%s: rank %d step %d loss %.9g on the device, %.9g on the CPU", v->name, w,
                     i + 1, onit.loss[w][i], cpu.loss[w][i]);
      WT_TEST_ASSERT(s_same(cpu.norm[w][i], onit.norm[w][i]),
                     "%s: rank %d step %d gradient norm %.9g on the device, %.9g on the CPU",
                     v->name, w, i + 1, onit.norm[w][i], cpu.norm[w][i]);
      WT_TEST_ASSERT(s_same(cpu.val[w][i], onit.val[w][i]) ||
                         (isnan(cpu.val[w][i]) && isnan(onit.val[w][i])),
                     "%s: rank %d step %d validation loss %.9g on the device, %.9g on the CPU",
                     v->name, w, i + 1, onit.val[w][i], cpu.val[w][i]);
    }
  WT_TEST_ASSERT(!isnan(onit.val[0][STEPS - 1]), "%s: no validation after the last step", v->name);
  printf("%-22s loss %.6f -> %.6f, val %.6f: bitwise the CPU run's\n", v->name, onit.loss[0][0],
         onit.loss[0][STEPS - 1], onit.val[0][STEPS - 1]);
}

/* The table's guard works: a child that reads a stage's device parameters on the host dies. */
static void s_guard(const kernels_ops *dev) {
  printf("a child reads device memory on the host; it must die of SIGSEGV, saying so:\n");
  fflush(stdout);
  pid_t pid = fork();
  WT_TEST_REQUIRE(pid >= 0, "fork");
  if (pid == 0) {
    gpt_config g = {.vocab_size = 64, .max_seq = 16, .n_layer = 1, .n_head = 2, .channels = 32};
    gpt_stage *s = gpt_stage_new_on(&g, 0, 1, 1, 16, dev);
    size_t n;
    volatile float x = s ? gpt_stage_params(s, &n)[0] : 0; /* a device pointer, on the host */
    (void)x;
    _exit(0);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  WT_TEST_ASSERT(WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV,
                 "reading device memory on the host must fault (status 0x%x)", st);
}

/* Device names: kernels_for_device's refusals, through the tasklet and the process default. */
static void s_names(void) {
  static h_run h;
  parallel_tasklet_config c = s_config();
  c.run.stages = c.run.replicas = 1;
  c.run.micro_batches = 1;
  snprintf(c.device, sizeof c.device, "gpu0");
  h_init(&h, &c);
  WT_TEST_ASSERT(h_run_all(&h) == WT_EINVAL && strstr(h.err[0], "not cpu, cuda or cuda:N"),
                 "device gpu0: %s", h.err[0]);
  snprintf(c.device, sizeof c.device, "cuda:99");
  h_init(&h, &c);
  int rc = h_run_all(&h);
  WT_TEST_ASSERT(rc == WT_ENOTSUP, "cuda:99 must be refused (WT_ENOTSUP), got %d: %s", rc,
                 h.err[0]);
  WT_TEST_ASSERT(
      strstr(h.err[0], kernels_backend("cuda") ? "no CUDA device 99" : "no CUDA back end"),
      "cuda:99: %s", h.err[0]);
  WT_TEST_ASSERT(parallel_tasklet_set_default_device("cuda:99") == WT_ENOTSUP,
                 "the process default must refuse cuda:99");
  WT_TEST_ASSERT(parallel_tasklet_config_default().device[0] == 0,
                 "a refused default must change nothing");
  WT_TEST_ASSERT(parallel_tasklet_set_default_device("cpu") == WT_OK, "%s", wt_last_error());
  WT_TEST_ASSERT(!strcmp(parallel_tasklet_config_default().device, "cpu"),
                 "the default device is not taken up");
  snprintf(c.device, sizeof c.device, "cpu");
  h_init(&h, &c);
  WT_TEST_ASSERT(h_run_all(&h) == WT_OK, "device cpu: %s", h.err[0]);
}

int main(void) {
  data_synth_config sc = data_synth_default();
  sc.n_tokens = 20000;
  s_data = data_set_synthetic(&sc);
  WT_TEST_REQUIRE(s_data, "%s", wt_last_error());
  const kernels_ops *dev = hostdev_ops();
  WT_TEST_REQUIRE(dev, "the hostdev back end cannot be set up");
  s_guard(dev);
  static const s_variant variants[] = {
      {"plain all-reduce", "none", "none", 0, 0, 0, 0},
      {"int8 + delta4", "int8", "delta4", 0, 0, 0, 0},
      {"topk, 1 act slot", "topk", "direct8", 0, 0, 1, 0},
      {"ZeRO-1", "none", "none", 0, 1, 0, 0},
      {"DiLoCo H=2 fp16", "fp16", "none", 2, 0, 0, 0},
      {"resume: DiLoCo+delta8", "none", "delta8", 2, 0, 0, 1},
      {"resume: ZeRO-1", "none", "none", 0, 1, 0, 1},
      {"resume: int4 ring", "int4", "none", 0, 0, 0, 1},
  };
  for (size_t i = 0; i < WT_ARRAY_LEN(variants); i++) s_compare(&variants[i], dev);
  s_names();
  data_set_destroy(&s_data);
  return wt_test_finish("test_runtime_device");
}
