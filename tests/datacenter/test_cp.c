/* test_cp — ring attention (parallel/datacenter/cp.h) on c = 1, 2, 4 in-process ranks against
 * single-device causal attention (the reference kernels): each rank's output rows and its rows of
 * the qkv gradient agree, the load-balanced split gives every rank the same number of unmasked
 * query-key pairs, the bytes sent equal the formula in cp.h, and a rank whose batch differs from
 * its peers' is refused with a message instead of hanging.
 *
 * Tolerance atol 1e-5 + rtol 1e-4: the ring adds each query's softmax in c blocks merged by the
 * online-softmax recurrence instead of one pass, so float32 rounding differs by a few ulps; a
 * wrong mask, position or merge is off by ~1e-1. */
#include "kernels/kernels.h"
#include "parallel/datacenter/cp.h"
#include "parallel/datacenter/mesh.h"

#include "common/common.h"
#include "common/testing.h"

enum { B = 2, T = 16, C = 16, NH = 2 };

typedef struct {
  const float *qkv, *out, *dout, *dqkv; /* full single-device tensors */
} s_ref;

static uint64_t s_rng;
static float s_uniform(void) { /* xorshift64*, in [-1, 1) */
  s_rng ^= s_rng >> 12, s_rng ^= s_rng << 25, s_rng ^= s_rng >> 27;
  return (float)((double)((s_rng * 2685821657736338717ull) >> 40) / (double)(1ull << 24)) * 2 - 1;
}

/* Copies the rows at positions pos (Tl of them) of each sequence: (B, T, w) → (B, Tl, w). */
static void s_take_rows(const float *full, float *local, const int *pos, int Tl, int w) {
  for (int b = 0; b < B; b++)
    for (int i = 0; i < Tl; i++)
      memcpy(local + ((size_t)b * Tl + i) * w, full + ((size_t)b * T + pos[i]) * w,
             sizeof(float) * w);
}

static int s_close(const float *got, const float *want, size_t n, const char *what, int r) {
  if (!wt_test_allclose(got, want, n, 1e-5, 1e-4, what))
    return wt_fail(WT_EMISMATCH, "rank %d: %s differs from single-device attention", r, what);
  return WT_OK;
}

static int s_rank_fn(parallel_comm *world, void *arg) {
  const s_ref *ref = arg;
  int c = parallel_comm_size(world), r = parallel_comm_rank(world), Tl = T / c, rc = WT_OK;
  parallel_mesh_shape shape = {.dp = 1, .pp = 1, .tp = 1, .cp = c, .ep = 1};
  parallel_mesh *mesh = parallel_mesh_new(world, &shape, 1);
  parallel_cp_attention *a = mesh ? parallel_cp_attention_new(mesh, C, NH, B, T) : NULL;
  if (!a) {
    parallel_mesh_destroy(&mesh);
    return WT_EINVAL;
  }
  size_t rows = (size_t)B * Tl;
  int pos[T];
  float *qkv = wt_xmalloc(sizeof(float) * rows * 3 * C), *dqkv = wt_xcalloc(rows * 3 * C, 4);
  float *want = wt_xmalloc(sizeof(float) * rows * 3 * C),
        *out = wt_xmalloc(sizeof(float) * rows * C);
  float *dout = wt_xmalloc(sizeof(float) * rows * C);
  parallel_cp_positions(a, T, pos);
  /* Load balance: query at position p sees p + 1 keys; every rank must see T(T+1)/2 / c. */
  int pairs = 0;
  for (int i = 0; i < Tl; i++) pairs += pos[i] + 1;
  if (pairs * c != T * (T + 1) / 2) {
    rc = wt_fail(WT_EMISMATCH, "rank %d has %d unmasked pairs, not 1/%d of %d", r, pairs, c,
                 T * (T + 1) / 2);
    goto done;
  }
  s_take_rows(ref->qkv, qkv, pos, Tl, 3 * C);
  s_take_rows(ref->dout, dout, pos, Tl, C);
  parallel_comm *cp = parallel_mesh_group(mesh, PARALLEL_GROUP_CP);
  parallel_comm_reset_counters(cp);
  WT_CHECK_GOTO(parallel_cp_attention_forward(a, out, qkv, B, T), rc, done);
  uint64_t block = rows * 2 * C * sizeof(float), fwd = parallel_comm_bytes_sent(cp);
  if (fwd != (uint64_t)(c - 1) * block) {
    rc = wt_fail(WT_EMISMATCH, "rank %d forward sent %llu bytes, formula %llu", r,
                 (unsigned long long)fwd, (unsigned long long)((c - 1) * block));
    goto done;
  }
  s_take_rows(ref->out, want, pos, Tl, C);
  WT_CHECK_GOTO(s_close(out, want, rows * C, "attention output", r), rc, done);
  parallel_comm_reset_counters(cp);
  WT_CHECK_GOTO(parallel_cp_attention_backward(a, dqkv, dout), rc, done);
  uint64_t bwd = parallel_comm_bytes_sent(cp), bwd_want = c > 1 ? (uint64_t)(2 * c - 1) * block : 0;
  if (bwd != bwd_want) {
    rc = wt_fail(WT_EMISMATCH, "rank %d backward sent %llu bytes, formula %llu", r,
                 (unsigned long long)bwd, (unsigned long long)bwd_want);
    goto done;
  }
  s_take_rows(ref->dqkv, want, pos, Tl, 3 * C);
  rc = s_close(dqkv, want, rows * 3 * C, "qkv gradient", r);
  if (r == 0)
    printf("cp %d: forward %llu bytes, backward %llu bytes per rank (B %d, T %d, C %d)\n", c,
           (unsigned long long)fwd, (unsigned long long)bwd, B, T, C);
done:
  if (rc != WT_OK) fprintf(stderr, "rank %d: %s\n", r, wt_last_error());
  free(qkv), free(dqkv), free(want), free(out), free(dout);
  parallel_cp_attention_destroy(&a);
  parallel_mesh_destroy(&mesh);
  return rc;
}

static void test_cp(int c) {
  size_t n = (size_t)B * T;
  float *qkv = wt_xmalloc(sizeof(float) * n * 3 * C), *out = wt_xmalloc(sizeof(float) * n * C);
  float *dout = wt_xmalloc(sizeof(float) * n * C), *dqkv = wt_xcalloc(n * 3 * C, sizeof(float));
  float *att = wt_xmalloc(sizeof(float) * B * NH * T * T),
        *scratch = wt_xmalloc(sizeof(float) * B * NH * T * T);
  s_rng = 0x853c49e6748fea9bull;
  for (size_t i = 0; i < n * 3 * C; i++) qkv[i] = 2 * s_uniform(); /* peaked softmax rows too */
  for (size_t i = 0; i < n * C; i++) dout[i] = s_uniform();
  kernels_ref()->attention_forward(out, att, qkv, B, T, C, NH);
  kernels_ref()->attention_backward(dqkv, scratch, dout, qkv, att, B, T, C, NH);
  s_ref ref = {qkv, out, dout, dqkv};
  parallel_inproc_group *g = parallel_inproc_group_new(c);
  parallel_inproc_group_set_timeout(g, 30);
  WT_TEST_ASSERT(parallel_inproc_run(g, s_rank_fn, &ref, NULL) == WT_OK,
                 "cp %d failed (rank messages above)", c);
  parallel_inproc_group_destroy(&g);
  free(qkv), free(out), free(dout), free(dqkv), free(att), free(scratch);
}

/* A sequence that does not split into 2c equal chunks is refused with a message. */
static int s_bad_fn(parallel_comm *world, void *arg) {
  (void)arg;
  parallel_mesh_shape shape = {.dp = 1, .pp = 1, .tp = 1, .cp = parallel_comm_size(world), .ep = 1};
  parallel_mesh *mesh = parallel_mesh_new(world, &shape, 1);
  parallel_cp_attention *a = parallel_cp_attention_new(mesh, C, NH, B, 12); /* 12 % 8 */
  int rc = !a && strstr(wt_last_error(), "multiple of 8") ? WT_OK : WT_EINVAL;
  parallel_cp_attention_destroy(&a);
  parallel_mesh_destroy(&mesh);
  return rc;
}

/* A rank whose batch differs from its peers' is refused with a message, and nobody hangs. */
static int s_mismatch_fn(parallel_comm *world, void *arg) {
  const float *qkv = arg;
  int r = parallel_comm_rank(world);
  parallel_mesh_shape shape = {.dp = 1, .pp = 1, .tp = 1, .cp = parallel_comm_size(world), .ep = 1};
  parallel_mesh *mesh = parallel_mesh_new(world, &shape, 1);
  parallel_cp_attention *a = parallel_cp_attention_new(mesh, C, NH, B, T);
  float *out = wt_xcalloc((size_t)B * T * C, sizeof(float));
  int rc = parallel_cp_attention_forward(a, out, qkv, r == 1 ? 1 : B, T);
  if (rc == WT_ECORRUPT && !strstr(wt_last_error(), "disagree on the batch shape")) rc = WT_EINVAL;
  free(out);
  parallel_cp_attention_destroy(&a);
  parallel_mesh_destroy(&mesh);
  return rc;
}

static void test_mismatch(void) {
  float *qkv = wt_xcalloc((size_t)B * T * 3 * C, sizeof(float));
  parallel_inproc_group *g = parallel_inproc_group_new(2);
  parallel_inproc_group_set_timeout(g, 10);
  int rcs[2];
  parallel_inproc_run(g, s_mismatch_fn, qkv, rcs);
  WT_TEST_ASSERT((rcs[0] == WT_ECORRUPT || rcs[1] == WT_ECORRUPT) && rcs[0] != WT_EINVAL &&
                     rcs[1] != WT_EINVAL,
                 "a mismatched batch was not refused with a message: rcs %d %d", rcs[0], rcs[1]);
  parallel_inproc_group_destroy(&g);
  free(qkv);
}

int main(void) {
  test_mismatch();
  test_cp(1);
  test_cp(2);
  test_cp(4);
  parallel_inproc_group *g = parallel_inproc_group_new(4);
  WT_TEST_ASSERT(parallel_inproc_run(g, s_bad_fn, NULL, NULL) == WT_OK, "bad sequence accepted");
  parallel_inproc_group_destroy(&g);
  return wt_test_failures ? 1 : 0;
}
