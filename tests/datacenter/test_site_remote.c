/* test_site_remote — a site whose ranks are processes (parallel/datacenter/site.h) against the
 * threaded site on the same weights and micro-batches. Member processes are forked at the start
 * (before any ZeroMQ context or OpenMP region) and serve two declared sites: A of 2 processes and B
 * of 4.
 *   - t × c = 2×1 (A), 4×1 and 2×2 (B) for a first, middle and last stage, and an MoE model
 *     (every block MoE, E = 4, top-2, capacity 0.5 so that tokens drop, aux loss 0.01) on 2 EP
 *     ranks (A): act_out, the loss, grad_in and every gradient (two micro-batches, loss_scale
 *     1/2, gathered twice), and the MoE routing statistics, are BITWISE equal to the threaded
 *     site's: the same rank code runs the same collectives in the same order, and rank 0 adds
 *     the members' gradient buffers in the threaded site's order;
 *   - a member killed (SIGKILL) in the middle of a session makes rank 0's next call fail within
 *     5 s (not the 30 s timeout) with an error naming "site member rank 1"; the failed site
 *     refuses later calls; a member restarted at the same entry serves a new site that works;
 *   - a bad token fails the call with rank 0's WT_EINVAL naming it, quickly;
 *   - site files: bad JSON, no ranks, one rank, a non-tcp endpoint, a short key and a repeated
 *     endpoint are refused naming the file and the field; a wrong key and a rank out of range
 *     are refused by parallel_site_link_new; a site of another size by new_linked;
 *   - the members stop on SIGTERM within 5 s and exit 0. */
#include "kernels/kernels.h"
#include "model/gpt.h"
#include "parallel/datacenter/site.h"
#include "parallel/transport/zmq.h"

#include "common/common.h"
#include "common/testing.h"

#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

enum { B = 2, T = 8, C = 32, NH = 4, L = 3, V = 67, N = B * T, MB = 2 };

static const gpt_config s_cfg = {
    .vocab_size = V, .max_seq = T, .n_layer = L, .n_head = NH, .channels = C};

static uint64_t s_rng;
static float s_uniform(void) { /* xorshift64*, in [-1, 1) */
  s_rng ^= s_rng >> 12, s_rng ^= s_rng << 25, s_rng ^= s_rng >> 27;
  return (float)((double)((s_rng * 2685821657736338717ull) >> 40) / (double)(1ull << 24)) * 2 - 1;
}

static gpt_config s_moe; /* every block MoE, E = 4, top-2, a capacity that drops, an aux loss */

static gpt_stage *s_stage_of(const gpt_config *cfg, int first, int last) {
  gpt_stage *st = gpt_stage_new(cfg, first, last, B, T);
  WT_TEST_REQUIRE(st, "stage: %s", wt_last_error());
  gpt_stage_set_kernels(st, kernels_ref());
  float *p = gpt_stage_params(st, NULL);
  s_rng = 0x2545f4914f6cdd1dull + (uint64_t)first;
  size_t n = 0;
  gpt_stage_params(st, &n);
  for (size_t j = 0; j < n; j++) p[j] = 0.2f * s_uniform();
  for (int k = 0; k < gpt_stage_num_tensors(st); k++) { /* LayerNorm weights around 1 */
    const gpt_tensor_info *ti = gpt_stage_tensor(st, k);
    if (strstr(ti->name, "ln_") && strstr(ti->name, "weight"))
      for (size_t j = 0; j < ti->numel; j++) p[ti->offset + j] += 1.0f;
  }
  return st;
}

static gpt_stage *s_stage(int first, int last) {
  return s_stage_of(&s_cfg, first, last);
}

/* Exact equality; the first difference and the max error when not. */
static void s_same(const float *got, const float *want, size_t n, const char *what) {
  double max = 0;
  size_t first = n;
  for (size_t i = 0; i < n; i++)
    if (memcmp(&got[i], &want[i], sizeof(float))) {
      max = fmax(max, fabs((double)got[i] - want[i]));
      if (first == n) first = i;
    }
  WT_TEST_ASSERT(first == n, "%s: [%zu] %.9g vs threads %.9g, max error %.3g", what, first,
                 first < n ? got[first] : 0, first < n ? want[first] : 0, max);
}

/* ---- the declared sites and their member processes ------------------------------------------ */

enum { S_A = 2, S_B = 4 };
static char s_pub[S_A + S_B][41], s_sec[S_A + S_B][41];
static char s_dir[256], s_file_a[300], s_file_b[300];
static volatile sig_atomic_t s_stop;

static void s_on_term(int sig) {
  (void)sig;
  s_stop = 1;
}

static int s_free_port(void) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof a;
  WT_TEST_REQUIRE(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
                      getsockname(fd, (struct sockaddr *)&a, &len) == 0,
                  "no free port");
  close(fd);
  return ntohs(a.sin_port);
}

/* Writes a site file of n entries with keys s_pub[k0 ..]. */
static void s_write_site(const char *path, int n, int k0) {
  FILE *f = fopen(path, "w");
  WT_TEST_REQUIRE(f, "cannot write %s", path);
  fprintf(f, "{\"ranks\": [");
  for (int r = 0; r < n; r++)
    fprintf(f, "%s{\"endpoint\": \"tcp://127.0.0.1:%d\", \"public_key\": \"%s\"}", r ? ", " : "",
            s_free_port(), s_pub[k0 + r]);
  fprintf(f, "]}\n");
  fclose(f);
}

/* A member process: rank r of `file` with key k until SIGTERM; `go` (>= 0) a pipe to wait on
 * first (a member restarted later). */
static pid_t s_member(const char *file, int r, int k, int go) {
  fflush(stdout), fflush(stderr);
  pid_t pid = fork();
  WT_TEST_REQUIRE(pid >= 0, "fork");
  if (pid) return pid;
  struct sigaction sa = {.sa_handler = s_on_term}; /* no SA_RESTART: a waiting standby leaves */
  sigaction(SIGTERM, &sa, NULL);
  prctl(PR_SET_PDEATHSIG, SIGTERM); /* a test that ends early takes its members with it */
  char byte;
  if (go >= 0 && read(go, &byte, 1) != 1) _exit(3);
  parallel_site_decl decl;
  parallel_site_link *link = NULL;
  if (parallel_site_decl_load(file, &decl) != WT_OK ||
      !(link = parallel_site_link_new(&decl, r, s_pub[k], s_sec[k], 10))) {
    fprintf(stderr, "member %d: %s\n", r, wt_last_error());
    _exit(2);
  }
  int rc = parallel_site_serve(link, kernels_ref(), &s_stop);
  parallel_site_link_destroy(&link);
  _exit(rc == WT_OK ? 0 : 1);
}

static parallel_site_link *s_leader(const char *file, int k) {
  parallel_site_decl decl;
  WT_TEST_REQUIRE(parallel_site_decl_load(file, &decl) == WT_OK, "%s", wt_last_error());
  parallel_site_link *link = parallel_site_link_new(&decl, 0, s_pub[k], s_sec[k], 10);
  WT_TEST_REQUIRE(link, "leader: %s", wt_last_error());
  return link;
}

/* ---- the comparison -------------------------------------------------------------------------- */

static void test_equal(const gpt_config *cfg, parallel_site_link *link, int first, int last, int t,
                       int c) {
  const int has_first = first == 0, has_last = last == L;
  gpt_stage *canon_t = s_stage_of(cfg, first, last), *canon_p = s_stage_of(cfg, first, last);
  parallel_site *thr = parallel_site_new(cfg, first, last, B, T, t, c, kernels_ref());
  double t0 = wt_now_s();
  parallel_site *proc = parallel_site_new_linked(cfg, first, last, B, T, t, c, kernels_ref(), link);
  double t_open = wt_now_s() - t0;
  WT_TEST_REQUIRE(thr && proc, "sites t=%d c=%d: %s", t, c, wt_last_error());
  WT_TEST_ASSERT(parallel_site_ranks(proc) == t * c && parallel_site_cp(proc) == c &&
                     (cfg->moe_experts ? parallel_site_ep(proc) == t : parallel_site_tp(proc) == t),
                 "process site reports %d ranks", parallel_site_ranks(proc));
  WT_TEST_REQUIRE(parallel_site_load(thr, canon_t) == WT_OK, "%s", wt_last_error());
  WT_TEST_REQUIRE(parallel_site_load(proc, canon_p) == WT_OK, "load: %s", wt_last_error());
  static int tokens[N], targets[N];
  static float in[N * C], gout[N * C], out_t[N * C], out_p[N * C], gin_t[N * C], gin_p[N * C];
  char what[96];
  for (int j = 0; j < MB; j++) {
    s_rng = 0x9e3779b97f4a7c15ull + (uint64_t)(first * 7 + last + j);
    for (int i = 0; i < N; i++)
      tokens[i] = (int)(fabsf(s_uniform()) * V) % V, targets[i] = (int)(fabsf(s_uniform()) * V) % V;
    for (int i = 0; i < N * C; i++) in[i] = s_uniform(), gout[i] = 0.1f * s_uniform();
    const int *tok = has_first ? tokens : NULL, *tgt = has_last ? targets : NULL;
    const float *ain = has_first ? NULL : in, *go = has_last ? NULL : gout;
    memset(out_p, 0xff, sizeof out_p), memset(gin_p, 0xff, sizeof gin_p);
    WT_TEST_REQUIRE(parallel_site_forward(thr, tok, ain, tgt, B, T, has_last ? NULL : out_t) ==
                        WT_OK,
                    "%s", wt_last_error());
    WT_TEST_REQUIRE(parallel_site_forward(proc, tok, ain, tgt, B, T, has_last ? NULL : out_p) ==
                        WT_OK,
                    "process forward: %s", wt_last_error());
    snprintf(what, sizeof what, "[%d,%d) t=%d c=%d mb %d", first, last, t, c, j);
    if (has_last) {
      float a = parallel_site_loss(proc), b = parallel_site_loss(thr);
      s_same(&a, &b, 1, what);
    } else {
      s_same(out_p, out_t, (size_t)N * C, what);
    }
    WT_TEST_REQUIRE(parallel_site_backward(thr, go, has_first ? NULL : gin_t, 0.5f) == WT_OK, "%s",
                    wt_last_error());
    WT_TEST_REQUIRE(parallel_site_backward(proc, go, has_first ? NULL : gin_p, 0.5f) == WT_OK,
                    "process backward: %s", wt_last_error());
    if (!has_first) s_same(gin_p, gin_t, (size_t)N * C, what);
  }
  if (cfg->moe_experts) { /* the routing, summed over the ranks as the threaded site does */
    long kt[4], kp[4], dt = -1, dp = -2;
    double at = -1, ap = -2;
    int ft = -1, fp = -2;
    int bt = parallel_site_moe_stats(thr, kt, &dt, &at, &ft),
        bp = parallel_site_moe_stats(proc, kp, &dp, &ap, &fp);
    WT_TEST_ASSERT(bt == bp && bt == last - first && !memcmp(kt, kp, sizeof kt) && dt == dp &&
                       !memcmp(&at, &ap, sizeof at) && ft == fp && ft == MB,
                   "%s routing: blocks %d/%d dropped %ld/%ld aux %.9g/%.9g forwards %d/%d", what,
                   bp, bt, dp, dt, ap, at, fp, ft);
  }
  for (int rep = 0; rep < 2; rep++) { /* the second adds nothing */
    WT_TEST_REQUIRE(parallel_site_grads(thr, canon_t) == WT_OK, "%s", wt_last_error());
    WT_TEST_REQUIRE(parallel_site_grads(proc, canon_p) == WT_OK, "gather: %s", wt_last_error());
  }
  size_t n = 0;
  const float *gt = gpt_stage_grads(canon_t, &n), *gp = gpt_stage_grads(canon_p, NULL);
  snprintf(what, sizeof what, "gradients [%d,%d) t=%d c=%d", first, last, t, c);
  s_same(gp, gt, n, what);
  printf("%s site of processes [%d,%d), %d x %d ranks: bitwise equal to threads; opened in %.2f s, "
         "%llu bytes sent in the site\n",
         cfg->moe_experts ? "MoE" : "dense", first, last, t, c, t_open,
         (unsigned long long)parallel_site_bytes(proc));
  parallel_site_destroy(&proc), parallel_site_destroy(&thr);
  gpt_stage_destroy(&canon_t), gpt_stage_destroy(&canon_p);
}

/* A member killed mid-session: rank 0's next call fails fast naming it; a restarted member
 * serves the next site. */
static void test_member_dies(parallel_site_link *link, pid_t *member, int go) {
  gpt_stage *st = s_stage(1, 2);
  parallel_site *site = parallel_site_new_linked(&s_cfg, 1, 2, B, T, 2, 1, kernels_ref(), link);
  WT_TEST_REQUIRE(site, "%s", wt_last_error());
  parallel_site_set_timeout(site, 30);
  static float in[N * C], out[N * C], gin[N * C];
  WT_TEST_REQUIRE(parallel_site_load(site, st) == WT_OK &&
                      parallel_site_forward(site, NULL, in, NULL, B, T, out) == WT_OK,
                  "%s", wt_last_error());
  kill(*member, SIGKILL);
  waitpid(*member, NULL, 0);
  double t0 = wt_now_s();
  int rc = parallel_site_backward(site, in, gin, 1.0f);
  double took = wt_now_s() - t0;
  WT_TEST_ASSERT(rc != WT_OK && strstr(wt_last_error(), "site member rank 1 of 2") && took < 5,
                 "backward after the member died: rc %d after %.1f s: '%s'", rc, took,
                 wt_last_error());
  printf("member killed: the next call failed after %.2f s: %s\n", took, wt_last_error());
  rc = parallel_site_forward(site, NULL, in, NULL, B, T, out);
  WT_TEST_ASSERT(rc == WT_EIO && strstr(wt_last_error(), "open a new one"),
                 "a failed site took another call: rc %d '%s'", rc, wt_last_error());
  parallel_site_destroy(&site);
  /* Opening now waits for the member; the restarted one answers. */
  WT_TEST_REQUIRE(write(go, "g", 1) == 1, "cannot restart the member");
  *member = -1; /* the standby's pid is the caller's */
  t0 = wt_now_s();
  site = parallel_site_new_linked(&s_cfg, 1, 2, B, T, 2, 1, kernels_ref(), link);
  WT_TEST_REQUIRE(site, "after the restart: %s", wt_last_error());
  WT_TEST_ASSERT(parallel_site_load(site, st) == WT_OK &&
                     parallel_site_forward(site, NULL, in, NULL, B, T, out) == WT_OK &&
                     parallel_site_backward(site, in, gin, 1.0f) == WT_OK &&
                     parallel_site_grads(site, st) == WT_OK,
                 "the restarted member's site: %s", wt_last_error());
  printf("restarted member: a new site opened and ran in %.2f s\n", wt_now_s() - t0);
  parallel_site_destroy(&site);
  gpt_stage_destroy(&st);
}

static void test_bad_token(parallel_site_link *link) {
  gpt_stage *st = s_stage(0, L);
  parallel_site *site = parallel_site_new_linked(&s_cfg, 0, L, B, T, 2, 1, kernels_ref(), link);
  WT_TEST_REQUIRE(site && parallel_site_load(site, st) == WT_OK, "%s", wt_last_error());
  int tokens[N] = {0}, targets[N] = {0};
  tokens[3] = V;
  double t0 = wt_now_s();
  int rc = parallel_site_forward(site, tokens, NULL, targets, B, T, NULL);
  WT_TEST_ASSERT(rc == WT_EINVAL && strstr(wt_last_error(), "token 67") && wt_now_s() - t0 < 5,
                 "bad token: rc %d '%s' after %.1f s", rc, wt_last_error(), wt_now_s() - t0);
  parallel_site_destroy(&site);
  gpt_stage_destroy(&st);
}

/* ---- site files and links that are refused --------------------------------------------------- */

static void s_expect_bad(const char *name, const char *text, const char *field) {
  char path[400];
  snprintf(path, sizeof path, "%s/%s.json", s_dir, name);
  FILE *f = fopen(path, "w");
  WT_TEST_REQUIRE(f, "cannot write %s", path);
  fputs(text, f);
  fclose(f);
  parallel_site_decl d;
  int rc = parallel_site_decl_load(path, &d);
  WT_TEST_ASSERT(rc == WT_EINVAL && strstr(wt_last_error(), path) && strstr(wt_last_error(), field),
                 "%s: rc %d '%s' (want the file and '%s')", name, rc, wt_last_error(), field);
}

static void test_refusals(void) {
  const char *k1 = s_pub[0], *k2 = s_pub[1];
  char text[600];
  s_expect_bad("json", "{\"ranks\": [", "not valid JSON");
  s_expect_bad("noranks", "{\"rank\": []}", "\"ranks\" is missing");
  snprintf(text, sizeof text,
           "{\"ranks\": [{\"endpoint\": \"tcp://h:1\", \"public_key\": \"%s\"}]}", k1);
  s_expect_bad("one", text, "1 entries");
  snprintf(text, sizeof text,
           "{\"ranks\": [{\"endpoint\": \"tcp://h:1\", \"public_key\": \"%s\"}, "
           "{\"endpoint\": \"ipc:///tmp/x\", \"public_key\": \"%s\"}]}",
           k1, k2);
  s_expect_bad("ipc", text, "ranks[1].endpoint");
  snprintf(text, sizeof text,
           "{\"ranks\": [{\"endpoint\": \"tcp://h:1\", \"public_key\": \"short\"}, "
           "{\"endpoint\": \"tcp://h:2\", \"public_key\": \"%s\"}]}",
           k2);
  s_expect_bad("key", text, "ranks[0].public_key");
  snprintf(text, sizeof text,
           "{\"ranks\": [{\"endpoint\": \"tcp://h:1\", \"public_key\": \"%s\"}, "
           "{\"endpoint\": \"tcp://h:1\", \"public_key\": \"%s\"}]}",
           k1, k2);
  s_expect_bad("dup", text, "ranks[1] repeats the endpoint of ranks[0]");
  parallel_site_decl d;
  char missing[400];
  snprintf(missing, sizeof missing, "%s/none.json", s_dir);
  WT_TEST_ASSERT(parallel_site_decl_load(missing, &d) == WT_ENOTFOUND, "a missing file");
  WT_TEST_REQUIRE(parallel_site_decl_load(s_file_a, &d) == WT_OK, "%s", wt_last_error());
  WT_TEST_ASSERT(!parallel_site_link_new(&d, 0, s_pub[1], s_sec[1], 10) &&
                     strstr(wt_last_error(), "ranks[0].public_key"),
                 "rank 0 with rank 1's key: %s", wt_last_error());
  WT_TEST_ASSERT(!parallel_site_link_new(&d, 2, s_pub[1], s_sec[1], 10) &&
                     strstr(wt_last_error(), "rank 2 is not one of the site file's 2 ranks"),
                 "rank 2 of 2: %s", wt_last_error());
}

int main(void) {
  wt_test_tmpdir(s_dir, sizeof s_dir);
  s_moe = s_cfg;
  s_moe.moe_experts = 4, s_moe.moe_top_k = 2, s_moe.moe_capacity = 0.5f;
  s_moe.moe_aux_weight = 0.01f;
  WT_TEST_REQUIRE(gpt_config_set_moe_layers(&s_moe, "all") == WT_OK, "%s", wt_last_error());
  for (int k = 0; k < S_A + S_B; k++)
    WT_TEST_REQUIRE(parallel_zmq_keypair_new(s_pub[k], s_sec[k]) == WT_OK, "keys");
  snprintf(s_file_a, sizeof s_file_a, "%s/a.json", s_dir);
  snprintf(s_file_b, sizeof s_file_b, "%s/b.json", s_dir);
  s_write_site(s_file_a, S_A, 0);
  s_write_site(s_file_b, S_B, S_A);
  /* Every member is forked now, before this process makes a ZeroMQ context or runs OpenMP. */
  int go[2];
  WT_TEST_REQUIRE(pipe(go) == 0, "pipe");
  pid_t pids[S_B + 1];
  pids[0] = s_member(s_file_a, 1, 1, -1);
  pid_t standby = s_member(s_file_a, 1, 1, go[0]);
  for (int r = 1; r < S_B; r++) pids[r] = s_member(s_file_b, r, S_A + r, -1);
  close(go[0]);

  test_refusals();
  parallel_site_link *a = s_leader(s_file_a, 0), *b = s_leader(s_file_b, S_A);
  WT_TEST_ASSERT(!parallel_site_new_linked(&s_cfg, 0, L, B, T, 4, 1, kernels_ref(), a) &&
                     wt_last_status() == WT_EINVAL && strstr(wt_last_error(), "2 processes"),
                 "4 ranks on a site of 2: %s", wt_last_error());
  const int ranges[3][2] = {{0, 1}, {1, 2}, {2, 3}};
  for (int i = 0; i < 3; i++) {
    test_equal(&s_cfg, a, ranges[i][0], ranges[i][1], 2, 1);
    test_equal(&s_cfg, b, ranges[i][0], ranges[i][1], 4, 1);
    test_equal(&s_cfg, b, ranges[i][0], ranges[i][1], 2, 2);
    test_equal(&s_moe, a, ranges[i][0], ranges[i][1], 2, 1); /* 2 EP ranks */
  }
  test_bad_token(a);
  test_member_dies(a, &pids[0], go[1]);
  pids[0] = standby;
  parallel_site_link_destroy(&a), parallel_site_link_destroy(&b);

  for (int r = 0; r < S_B; r++) kill(pids[r], SIGTERM);
  double deadline = wt_now_s() + 5;
  for (int r = 0; r < S_B; r++) {
    int status = -1;
    pid_t got = 0;
    while ((got = waitpid(pids[r], &status, WNOHANG)) == 0 && wt_now_s() < deadline)
      usleep(20 * 1000);
    if (got == 0) kill(pids[r], SIGKILL), waitpid(pids[r], &status, 0);
    WT_TEST_ASSERT(got == pids[r] && WIFEXITED(status) && WEXITSTATUS(status) == 0,
                   "member %d did not stop cleanly on SIGTERM (status %d)", r, status);
  }
  const char *scratch[] = {"a", "b", "json", "noranks", "one", "ipc", "key", "dup"};
  for (size_t i = 0; i < sizeof scratch / sizeof *scratch; i++) {
    char path[400];
    snprintf(path, sizeof path, "%s/%s.json", s_dir, scratch[i]);
    remove(path);
  }
  WT_TEST_ASSERT(rmdir(s_dir) == 0, "scratch directory %s left with files in it", s_dir);
  return wt_test_finish("test_site_remote");
}
