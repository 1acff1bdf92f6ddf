/* test_gpu_launch — `wantrain launch --device cuda:0`: 2 stages x 2 replicas as four processes on
 * the GPU train what the same run computes on the CPU. Exits 77 (skipped) when no CUDA device is
 * present. Checked, over 20 steps of each run against the CPU run with the same flags:
 *   - fp32, plain all-reduce: every step's loss within 1e-3 relative, and the loss falls;
 *   - bf16 (--precision bf16): within 3e-2 relative;
 *   - fp32 DiLoCo H = 5: within 1e-3; fp32 with ZeRO-1 and AC-SGD delta8 activations: 1e-2;
 *   - --grad-codec randk and topk, encoded on the device (tasklet_device_sync.c): randk keeps
 *     the same indices on both back ends, so 1e-3; topk can swap two near-equal magnitudes at
 *     its threshold, which the later steps carry on: 1e-2;
 *   - `--device cuda` (round-robin over the visible GPUs): within 1e-3;
 *   - `--device cuda:99`: refused with exit status 1 and a message naming the device;
 *   - two tasklets of one process on cuda:0 (threads): the second is refused, since the CUDA
 *     back end's state is process-wide (parallel/runtime/tasklet.h).
 * Tolerances are test_gpu_model's for 20 training steps, argued there: the GPU sums in another
 * order than the CPU (fp32: ~1e-5 relative per op, drifting to ~1e-4 over the steps), bf16 rounds
 * the GEMM inputs to 8 mantissa bits (~2e-3 per input). With 8-bit activation deltas a rounding
 * difference can move a code by one step (1/255 of its row's range) on one side only, which the
 * later steps carry on: 1e-2 there. The runtime adds host copies only, which are exact
 * (tests/runtime/test_runtime_device.c checks that part bit for bit). */
#include "common/common.h"
#include "common/testing.h"
#include "kernels/kernels.h"
#include "model/data.h"
#include "parallel/transport/comm.h"
#include "parallel/runtime/tasklet.h"
#include "tests/runtime/optim_defaults.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

enum { STEPS = 20 };

static char s_tmp[512], s_bin[1024];

static const char *const COMMON =
    "--stages 2 --replicas 2 --micro-batches 2 --batch 8 --seq 32 --layers 2 --channels 64 "
    "--heads 4 --lr 3e-3 --warmup 2 --grad-clip 1 --val-every 0 --log-every 100 --timeout 120";

/* Where the wantrain binary is, into s_bin: $WT_BIN_DIR (ctest sets it), else this test's own
 * directory (scripts/gpu-pack.sh puts both in one), else its parent (build/bin/tests/..). */
static int s_find_wantrain(void) {
  char self[900] = "", path[1100];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) self[n] = 0;
  char *slash = strrchr(self, '/');
  if (slash) *slash = 0;
  const char *env = getenv("WT_BIN_DIR");
  char up[1000];
  snprintf(up, sizeof up, "%s/..", self);
  const char *dirs[] = {env ? env : "", self, up};
  for (size_t i = 0; i < WT_ARRAY_LEN(dirs); i++) {
    snprintf(path, sizeof path, "%s/wantrain", dirs[i]);
    if (dirs[i][0] && access(path, X_OK) == 0) {
      snprintf(s_bin, sizeof s_bin, "%s", dirs[i]);
      return 1;
    }
  }
  return 0;
}

/* Runs `wantrain launch COMMON extra`, its output to tmp/NAME.out; returns the exit status. */
static int s_launch(const char *name, const char *extra) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd,
           "%s/wantrain launch %s --steps %d --json-log %s/%s.jsonl %s >%s/%s.out 2>&1", s_bin,
           COMMON, STEPS, s_tmp, name, extra, s_tmp, name);
  int st = system(cmd);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* The per-step losses of NAME's JSON log into loss[STEPS]; returns how many steps it has. */
static int s_losses(const char *name, float *loss) {
  char path[700], line[2048];
  snprintf(path, sizeof path, "%s/%s.jsonl", s_tmp, name);
  FILE *f = fopen(path, "r");
  int n = 0;
  while (f && fgets(line, sizeof line, f)) {
    const char *st = strstr(line, "{\"step\":"), *l = strstr(line, "\"loss\":");
    if (!st || !l) continue;
    long step = atol(st + 8);
    if (step >= 1 && step <= STEPS) loss[step - 1] = (float)atof(l + 7), n = (int)WT_MAX(n, step);
  }
  if (f) fclose(f);
  return n;
}

static void s_show(const char *name) {
  char cmd[800];
  snprintf(cmd, sizeof cmd, "tail -n 5 %s/%s.out", s_tmp, name);
  if (system(cmd) != 0) fprintf(stderr, "(no output of %s)\n", name);
}

/* The run with `extra` on the CPU and with `device` (and the extra GPU flags) must agree. */
static void s_case(const char *name, const char *extra, const char *gpu, double tol) {
  char cpu_name[64], gpu_name[64], flags[512];
  snprintf(cpu_name, sizeof cpu_name, "%s-cpu", name);
  snprintf(gpu_name, sizeof gpu_name, "%s-gpu", name);
  int rc = s_launch(cpu_name, extra);
  if (rc != 0) s_show(cpu_name);
  WT_TEST_REQUIRE(rc == 0, "%s: the CPU run exited %d", name, rc);
  snprintf(flags, sizeof flags, "%s %s", extra, gpu);
  rc = s_launch(gpu_name, flags);
  if (rc != 0) s_show(gpu_name);
  WT_TEST_REQUIRE(rc == 0, "%s: the GPU run (%s) exited %d", name, gpu, rc);
  float cpu[STEPS], dev[STEPS];
  WT_TEST_REQUIRE(s_losses(cpu_name, cpu) == STEPS && s_losses(gpu_name, dev) == STEPS,
                  "%s: the JSON logs do not hold %d steps", name, STEPS);
  double worst = 0;
  for (int i = 0; i < STEPS; i++) {
    double rel = fabs(dev[i] - cpu[i]) / cpu[i];
    worst = WT_MAX(worst, rel);
    WT_TEST_ASSERT(rel <= tol, "%s step %d: GPU loss %.6f, CPU %.6f (rel %.2e > %.0e)", name, i + 1,
                   dev[i], cpu[i], rel, tol);
  }
  WT_TEST_ASSERT(dev[STEPS - 1] < dev[0] - 0.1f, "%s: the GPU run does not train (%.4f -> %.4f)",
                 name, dev[0], dev[STEPS - 1]);
  printf("%-16s %-28s loss %.4f -> %.4f, CPU %.4f -> %.4f, worst rel diff %.2e (tol %.0e)\n", name,
         gpu, dev[0], dev[STEPS - 1], cpu[0], cpu[STEPS - 1], worst, tol);
}

typedef struct {
  parallel_tasklet_config c;
  char err[2][512];
} s_pair;

static int s_pair_rank(parallel_comm *world, void *arg) {
  s_pair *p = arg;
  int w = parallel_comm_rank(world);
  parallel_tasklet_config c = p->c;
  c.stage = w;
  int rc = parallel_tasklet_run(&c, world, NULL);
  snprintf(p->err[w], sizeof p->err[w], "%s", rc == WT_OK ? "" : wt_last_error());
  return rc;
}

/* Two stages as threads of this process, both on cuda:0: one of them is refused. */
static void s_two_in_one_process(void) {
  data_synth_config sc = data_synth_default();
  sc.n_tokens = 20000;
  data_set *d = data_set_synthetic(&sc);
  WT_TEST_REQUIRE(d, "%s", wt_last_error());
  static s_pair p;
  p.c = parallel_tasklet_config_default();
  p.c.run.stages = 2;
  snprintf(p.c.run.schedule, sizeof p.c.run.schedule, "gpipe");
  p.c.run.seq = 16, p.c.run.layers = 2, p.c.run.heads = 2,
  p.c.run.channels = 32; /* V 64: the data's */
  p.c.run.batch = 4, p.c.run.micro_batches = 1, p.c.run.val_batches = 1, p.c.run.seed = 1;
  p.c.run.steps = 2;
  h_run_optim_default(&p.c.run);
  p.c.data = d;
  snprintf(p.c.device, sizeof p.c.device, "cuda:0");
  parallel_inproc_group *g = parallel_inproc_group_new(2);
  parallel_inproc_group_set_timeout(g, 30);
  int rcs[2];
  parallel_inproc_run(g, s_pair_rank, &p, rcs);
  parallel_inproc_group_destroy(&g);
  int refused = 0;
  for (int w = 0; w < 2; w++)
    refused += rcs[w] == WT_ENOTSUP && strstr(p.err[w], "run one tasklet per process");
  WT_TEST_ASSERT(refused == 1, "two tasklets on cuda:0 in one process: %d refused (%s | %s)",
                 refused, p.err[0], p.err[1]);
  data_set_destroy(&d);
}

int main(void) {
  const kernels_ops *gpu;
  if (kernels_for_device("cuda:0", &gpu) != WT_OK) {
    printf("test_gpu_launch: skipped: %s\n", wt_last_error());
    return WT_TEST_SKIP;
  }
  WT_TEST_REQUIRE(s_find_wantrain(), "no wantrain binary in $WT_BIN_DIR, beside this test or in "
                                     "its parent directory");
  wt_test_tmpdir(s_tmp, sizeof s_tmp);
  s_two_in_one_process();
  s_case("fp32", "", "--device cuda:0", 1e-3);
  s_case("bf16", "", "--device cuda:0 --precision bf16", 3e-2);
  s_case("zero-delta8", "--zero 1 --act-codec delta8", "--device cuda:0", 1e-2);
  s_case("diloco", "--diloco 5", "--device cuda:0", 1e-3);
  s_case("randk", "--grad-codec randk", "--device cuda:0", 1e-3);
  s_case("topk", "--grad-codec topk", "--device cuda:0", 1e-2);
  s_case("round-robin", "", "--device cuda", 1e-3);
  int rc = s_launch("cuda99", "--device cuda:99");
  char path[700], out[4096] = "";
  snprintf(path, sizeof path, "%s/cuda99.out", s_tmp);
  FILE *f = fopen(path, "r");
  size_t n = f ? fread(out, 1, sizeof out - 1, f) : 0;
  out[n] = 0;
  if (f) fclose(f);
  WT_TEST_ASSERT(rc == 1 && strstr(out, "no CUDA device 99"),
                 "--device cuda:99: exit %d, output: %s", rc, out);
  char rm[600];
  snprintf(rm, sizeof rm, "rm -rf '%s'", s_tmp);
  if (system(rm) != 0) fprintf(stderr, "could not remove %s\n", s_tmp);
  return wt_test_finish("test_gpu_launch");
}
