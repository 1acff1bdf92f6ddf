/* test_launch_device — `wantrain launch`'s --device and --act-slots flags, through the binary.
 *   errors  (unit) a device this build or machine does not have, a malformed device name, a GPU
 *           precision on the CPU and a negative --act-slots are refused before any worker starts,
 *           with exit status 1 (no such device) or 2 (a usage error) and a message saying what to
 *           do: `--device cuda:0` in a CPU-only build names the missing CUDA back end, in a CUDA
 *           build without a GPU the missing device; `--device cuda:99` the missing GPU 99.
 *   slots   (integration) 2 x 2 processes with 4 micro-batches and --act-slots 1 recompute
 *           forwards (the summary counts them) and give bitwise the losses of --act-slots 0.
 *   site    (integration) 2 x 2 processes whose stages run on sites of 2 tensor-parallel ranks
 *           (--site-ranks 2), and on sites of 2 context-parallel ranks (--site-ranks 2
 *           --site-cp 2), give the losses of --site-ranks 1 within 1e-4 relative, and the
 *           summary counts the bytes between the sites' ranks; the MoE model (E = 4, top-2, a
 *           capacity that drops nothing, no aux loss) on sites of 2 expert-parallel ranks gives
 *           the losses of --site-ranks 1 within 1e-4 relative; --site-ranks 2 on a GPU device,
 *           a --site-ranks that is not a multiple of --site-cp, and an MoE site whose ranks do
 *           not divide the experts are refused before any worker starts. */
#include "common/common.h"
#include "common/testing.h"
#include "kernels/kernels.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static char s_out[1 << 16];

/* Runs `wantrain launch ARGS` (stderr with stdout into s_out); returns its exit status. */
static int s_launch(const char *args) {
  const char *bin = getenv("WT_BIN_DIR");
  WT_TEST_REQUIRE(bin, "WT_BIN_DIR is not set (run through ctest)");
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "cd /tmp && %s/wantrain launch %s 2>&1", bin, args);
  FILE *p = popen(cmd, "r");
  WT_TEST_REQUIRE(p, "popen");
  size_t n = fread(s_out, 1, sizeof s_out - 1, p);
  s_out[n] = 0;
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

static void s_refused(const char *args, int want_rc, const char *want_msg) {
  int rc = s_launch(args);
  WT_TEST_ASSERT(rc == want_rc && strstr(s_out, want_msg),
                 "launch %s: exit %d (want %d), output (want \"%s\"):\n%s", args, rc, want_rc,
                 want_msg, s_out);
  WT_TEST_ASSERT(!strstr(s_out, "step "), "launch %s started training:\n%s", args, s_out);
}

static void s_errors(void) {
  const kernels_ops *ops;
  int cuda_build = kernels_backend("cuda") != NULL;
  int have_gpu = cuda_build && kernels_for_device("cuda:0", &ops) == WT_OK;
  const char *no_cuda = "this build has no CUDA back end (configure with -DWANTRAIN_CUDA=ON";
  if (!cuda_build)
    s_refused("--stages 2 --device cuda:0 --steps 2", 1, no_cuda);
  else if (!have_gpu)
    s_refused("--stages 2 --device cuda:0 --steps 2", 1, "no CUDA device 0");
  s_refused("--stages 2 --device cuda:99 --steps 2", 1, cuda_build ? "no CUDA device 99" : no_cuda);
  s_refused("--stages 2 --device gpu0 --steps 2", 2, "device 'gpu0' is not cpu, cuda or cuda:N");
  s_refused("--stages 2 --precision bf16 --steps 2", 1, "drop --precision bf16");
  s_refused("--stages 2 --act-slots -1 --steps 2", 2, "act-slots");
  s_refused("--stages 2 --site-ranks 0 --steps 2", 2, "site-ranks");
  printf("launch refuses missing devices, bad names and GPU precisions on the CPU (%s build%s)\n",
         cuda_build ? "CUDA" : "CPU-only",
         cuda_build ? (have_gpu ? ", GPU present" : ", no GPU") : "");
}

/* The losses in s_out's progress lines ("step N/M | loss X | ..."), at most max. */
static int s_losses(float *loss, int max) {
  int n = 0;
  const char *end = strstr(s_out, "\ndone:");
  for (const char *p = s_out; (p = strstr(p, "| loss ")) && p < end && n < max; p += 7)
    loss[n++] = (float)atof(p + 7);
  return n;
}

static void s_slots(void) {
  const char *base = "--stages 2 --replicas 2 --micro-batches 4 --batch 16 --seq 32 --layers 2 "
                     "--channels 32 --heads 2 --steps 4 --log-every 1 --val-every 0 --act-slots";
  char args[512];
  float loss[2][8];
  int n[2];
  for (int k = 0; k < 2; k++) {
    snprintf(args, sizeof args, "%s %d", base, k);
    int rc = s_launch(args);
    WT_TEST_REQUIRE(rc == 0, "launch %s: exit %d\n%s", args, rc, s_out);
    n[k] = s_losses(loss[k], 8);
    const char *want = k ? "bounded by --act-slots; " : "in flight; 0 forward passes recomputed";
    WT_TEST_ASSERT(strstr(s_out, want), "--act-slots %d: the summary does not say \"%s\":\n%s", k,
                   want, s_out);
    const char *at = strstr(s_out, "bounded by --act-slots; ");
    if (k) WT_TEST_ASSERT(at && atol(at + 24) > 0, "--act-slots 1 recomputed nothing:\n%s", s_out);
  }
  WT_TEST_REQUIRE(n[0] == 4 && n[1] == 4, "expected 4 steps' losses, got %d and %d", n[0], n[1]);
  for (int i = 0; i < 4; i++)
    WT_TEST_ASSERT(loss[0][i] == loss[1][i], "step %d: loss %.4f with --act-slots 1, %.4f with 0",
                   i + 1, loss[1][i], loss[0][i]);
  printf("--act-slots 1 recomputes forwards and trains as --act-slots 0\n");
}

static void s_site(void) {
  const char *base = "--stages 2 --replicas 2 --micro-batches 2 --batch 8 --seq 32 --layers 2 "
                     "--channels 32 --heads 2 --steps 4 --log-every 1 --val-every 0";
  /* no site; 2 TP ranks; 2 CP ranks (each holding half of every sequence) */
  const char *sites[3] = {"--site-ranks 1", "--site-ranks 2", "--site-ranks 2 --site-cp 2"};
  const char *lines[3] = {NULL,
                          "sites: every stage on 2 tensor-parallel x 1 context-parallel ranks; ",
                          "sites: every stage on 1 tensor-parallel x 2 context-parallel ranks; "};
  char args[512];
  float loss[3][8];
  int n[3];
  for (int k = 0; k < 3; k++) {
    snprintf(args, sizeof args, "%s %s", base, sites[k]);
    int rc = s_launch(args);
    WT_TEST_REQUIRE(rc == 0, "launch %s: exit %d\n%s", args, rc, s_out);
    n[k] = s_losses(loss[k], 8);
    const char *at = strstr(s_out, k ? lines[k] : "sites: ");
    WT_TEST_ASSERT(!k == !at, "%s: the summary's sites line:\n%s", sites[k], s_out);
    if (at && k)
      WT_TEST_ASSERT(atof(at + strlen(lines[k])) > 0, "%s: no bytes between the sites' ranks:\n%s",
                     sites[k], s_out);
  }
  for (int k = 1; k < 3; k++) {
    WT_TEST_REQUIRE(n[0] == 4 && n[k] == 4, "expected 4 steps' losses, got %d and %d", n[0], n[k]);
    for (int i = 0; i < 4; i++)
      WT_TEST_ASSERT(fabsf(loss[0][i] - loss[k][i]) <= 1e-4f * loss[0][i],
                     "step %d: loss %.4f with %s, %.4f without a site", i + 1, loss[k][i], sites[k],
                     loss[0][i]);
  }
  /* The MoE model on sites of 2 expert-parallel ranks (a capacity that drops nothing, no aux
   * loss: the site's is per rank's rows). */
  const char *moe = "--moe-experts 4 --moe-top-k 2 --moe-capacity 2 --moe-aux-weight 0";
  const char *moe_line = "sites: every stage on 2 expert-parallel ranks; ";
  for (int k = 0; k < 2; k++) {
    snprintf(args, sizeof args, "%s %s --site-ranks %d", base, moe, k + 1);
    int rc = s_launch(args);
    WT_TEST_REQUIRE(rc == 0, "launch %s: exit %d\n%s", args, rc, s_out);
    n[k] = s_losses(loss[k], 8);
    const char *at = strstr(s_out, moe_line);
    WT_TEST_ASSERT(k ? at && atof(at + strlen(moe_line)) > 0 : !strstr(s_out, "sites: "),
                   "MoE --site-ranks %d: the summary's sites line:\n%s", k + 1, s_out);
  }
  WT_TEST_REQUIRE(n[0] == 4 && n[1] == 4, "MoE: expected 4 steps' losses, got %d and %d", n[0],
                  n[1]);
  for (int i = 0; i < 4; i++)
    WT_TEST_ASSERT(fabsf(loss[0][i] - loss[1][i]) <= 1e-4f * loss[0][i],
                   "MoE step %d: loss %.4f on sites of 2, %.4f without", i + 1, loss[1][i],
                   loss[0][i]);
  s_refused("--stages 2 --site-ranks 2 --device cuda:0 --steps 2", 2, "process-wide");
  s_refused("--stages 2 --site-ranks 3 --site-cp 2 --steps 2", 2,
            "multiple of the context-parallel degree 2");
  s_refused("--stages 2 --site-cp 2 --steps 2", 2, "multiple of it (not 1)");
  s_refused("--stages 2 --site-ranks 3 --moe-experts 4 --steps 2", 2, "4 experts");
  printf("--site-ranks 2, --site-ranks 2 --site-cp 2 and an MoE model on --site-ranks 2 train as "
         "--site-ranks 1\n");
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "slots"))
    s_slots();
  else if (argc > 1 && !strcmp(argv[1], "site"))
    s_site();
  else
    s_errors();
  return wt_test_finish("test_launch_device");
}
