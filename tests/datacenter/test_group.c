/* test_group — the group table (parallel/datacenter/group.h) that every parallel layer calls.
 *
 *   dispatch  a counting table wrapped around the host ring, installed on the TP group of 2
 *             in-process ranks: the TP block (with and without sequence parallelism) makes all
 *             its collectives through it — 4 all-reduces per forward + backward, or 4
 *             reduce-scatter + all-gather pairs and one all-reduce with SP — and gives bitwise
 *             the outputs and gradients of the default table; the chunk each rank holds after
 *             the table's reduce-scatter is the one parallel_tp_block_rows names.
 *   refuse    a back end whose rank or size differ from the group's is refused (WT_EINVAL);
 *             layers whose maths runs on the host (ring attention, vocab-parallel loss, MoE, a TP
 *             block with CP) refuse a table of device buffers with WT_ENOTSUP and a message. */
#include "kernels/kernels.h"
#include "parallel/datacenter/cp.h"
#include "parallel/datacenter/group.h"
#include "parallel/datacenter/mesh.h"
#include "parallel/datacenter/moe.h"
#include "parallel/datacenter/tp.h"

#include "common/common.h"
#include "common/testing.h"

#include <string.h>

enum { B = 2, T = 8, C = 32, NH = 4, N = B * T };

typedef struct {
  parallel_comm *inner;
  int allreduce, reduce_scatter, allgather;
} s_counting;

static int s_c_allreduce(void *ctx, float *x, size_t n, parallel_op op) {
  s_counting *c = ctx;
  c->allreduce++;
  return parallel_group_host_ops()->allreduce(c->inner, x, n, op);
}
static int s_c_reduce_scatter(void *ctx, float *x, size_t n, parallel_op op) {
  s_counting *c = ctx;
  c->reduce_scatter++;
  return parallel_group_host_ops()->reduce_scatter(c->inner, x, n, op);
}
static int s_c_allgather(void *ctx, float *x, size_t n) {
  s_counting *c = ctx;
  c->allgather++;
  return parallel_group_host_ops()->allgather(c->inner, x, n);
}

static parallel_group_ops s_counting_ops(void) {
  parallel_group_ops ops = *parallel_group_host_ops();
  ops.name = "counting";
  ops.allreduce = s_c_allreduce, ops.reduce_scatter = s_c_reduce_scatter;
  ops.allgather = s_c_allgather;
  return ops;
}

static const size_t s_numel[PARALLEL_TP_TENSORS] = {
    C, C, (size_t)C * 3 * C, 3 * C, (size_t)C *C,     C,
    C, C, (size_t)C * 4 * C, 4 * C, (size_t)4 * C *C, C};

typedef struct {
  int sp;
  float *full[PARALLEL_TP_TENSORS];
  float x[N * C], dout[N * C];
} s_case;

/* Runs one forward + backward; out, dx (N·C each, this rank's rows at the front) and grads. */
static int s_run(parallel_mesh *m, const s_case *k, float *out, float *dx, float **grads,
                 size_t *n_grads) {
  parallel_tp_block *b = parallel_tp_block_new(m, kernels_ref(), C, NH, B, T, k->sp);
  if (!b) return wt_last_status();
  int first, rows, rc = WT_OK;
  parallel_tp_block_load(b, (const float *const *)k->full);
  parallel_tp_block_rows(b, B, T, &first, &rows);
  WT_CHECK_GOTO(parallel_tp_block_forward(b, k->x + (size_t)first * C, out, B, T), rc, done);
  WT_CHECK_GOTO(parallel_tp_block_backward(b, k->dout + (size_t)first * C, dx), rc, done);
  size_t n;
  const float *g = parallel_tp_block_grads(b, &n);
  *grads = wt_xmalloc(sizeof(float) * n);
  memcpy(*grads, g, sizeof(float) * n);
  *n_grads = n;
done:
  parallel_tp_block_destroy(&b);
  return rc;
}

static int s_dispatch_rank(parallel_comm *world, void *arg) {
  const s_case *k = arg;
  parallel_mesh_shape shape = {.dp = 1, .pp = 1, .tp = 2, .cp = 1, .ep = 1};
  parallel_mesh *m = parallel_mesh_new(world, &shape, 1);
  if (!m) return wt_last_status();
  float out0[N * C] = {0}, dx0[N * C] = {0}, out1[N * C] = {0}, dx1[N * C] = {0};
  float *g0 = NULL, *g1 = NULL;
  size_t n0 = 0, n1 = 0;
  int rc = s_run(m, k, out0, dx0, &g0, &n0);
  parallel_group_ops ops = s_counting_ops();
  s_counting cnt = {.inner = parallel_mesh_group(m, PARALLEL_GROUP_TP)};
  if (rc == WT_OK)
    rc = parallel_mesh_set_coll(m, PARALLEL_GROUP_TP, &ops, &cnt, parallel_comm_rank(world), 2);
  if (rc == WT_OK) rc = s_run(m, k, out1, dx1, &g1, &n1);
  if (rc == WT_OK) {
    int want_ar = k->sp ? 1 : 4, want_pair = k->sp ? 4 : 0;
    if (cnt.allreduce != want_ar || cnt.reduce_scatter != want_pair || cnt.allgather != want_pair)
      rc = wt_fail(WT_EMISMATCH,
                   "sp %d: the block made %d all-reduces, %d reduce-scatters, %d all-gathers "
                   "through the table; expected %d, %d, %d",
                   k->sp, cnt.allreduce, cnt.reduce_scatter, cnt.allgather, want_ar, want_pair,
                   want_pair);
    if (rc == WT_OK && (memcmp(out0, out1, sizeof out0) || memcmp(dx0, dx1, sizeof dx0) ||
                        n0 != n1 || memcmp(g0, g1, sizeof(float) * n0)))
      rc = wt_fail(WT_EMISMATCH, "sp %d: the counting table changed the block's numbers", k->sp);
  }
  /* The table's reduce-scatter leaves on this rank the chunk the block says it holds. */
  if (rc == WT_OK) {
    float x[N * C];
    int r = parallel_comm_rank(world);
    for (int i = 0; i < N * C; i++) x[i] = (float)(i + r);
    rc = parallel_group_reduce_scatter(parallel_mesh_coll(m, PARALLEL_GROUP_TP), x, N * C,
                                       PARALLEL_OP_SUM);
    size_t off, len;
    parallel_chunk_range(N * C, 2, (r + 1) % 2, &off, &len);
    for (size_t i = off; rc == WT_OK && i < off + len; i++)
      if (x[i] != (float)(2 * i + 1))
        rc = wt_fail(WT_EMISMATCH, "rank %d: element %zu of its chunk is %g, want %g", r, i, x[i],
                     (double)(2 * i + 1));
  }
  if (rc != WT_OK) fprintf(stderr, "rank %d: %s\n", parallel_comm_rank(world), wt_last_error());
  free(g0), free(g1);
  parallel_mesh_destroy(&m);
  return rc;
}

static uint64_t s_rng = 0x2545f4914f6cdd1dull;
static float s_uniform(void) {
  s_rng ^= s_rng >> 12, s_rng ^= s_rng << 25, s_rng ^= s_rng >> 27;
  return (float)((double)((s_rng * 2685821657736338717ull) >> 40) / (double)(1ull << 24)) * 2 - 1;
}

static void test_dispatch(void) {
  s_case k;
  for (int i = 0; i < PARALLEL_TP_TENSORS; i++) {
    k.full[i] = wt_xmalloc(sizeof(float) * s_numel[i]);
    int ln_w = i == PARALLEL_TP_LN1_W || i == PARALLEL_TP_LN2_W;
    for (size_t j = 0; j < s_numel[i]; j++) k.full[i][j] = (ln_w ? 1.0f : 0) + 0.2f * s_uniform();
  }
  for (int i = 0; i < N * C; i++) k.x[i] = s_uniform(), k.dout[i] = s_uniform();
  parallel_inproc_group *g = parallel_inproc_group_new(2);
  parallel_inproc_group_set_timeout(g, 20);
  for (k.sp = 0; k.sp <= 1; k.sp++) {
    int rcs[2];
    int rc = parallel_inproc_run(g, s_dispatch_rank, &k, rcs);
    WT_TEST_ASSERT(rc == WT_OK, "sp %d: ranks returned %d %d (messages above)", k.sp, rcs[0],
                   rcs[1]);
  }
  parallel_inproc_group_destroy(&g);
  for (int i = 0; i < PARALLEL_TP_TENSORS; i++) free(k.full[i]);
}

static int s_refuse_rank(parallel_comm *world, void *arg) {
  (void)arg;
  int r = parallel_comm_rank(world);
  parallel_mesh_shape shape = {.dp = 1, .pp = 1, .tp = 1, .cp = 2, .ep = 1};
  parallel_mesh *m = parallel_mesh_new(world, &shape, 1);
  if (!m) return wt_last_status();
  int rc = WT_OK;
  parallel_group_ops dev = *parallel_group_host_ops();
  dev.name = "device-like", dev.device_buffers = 1;
  parallel_comm *cp = parallel_mesh_group(m, PARALLEL_GROUP_CP);
  if (parallel_mesh_set_coll(m, PARALLEL_GROUP_CP, &dev, cp, r, 3) != WT_EINVAL ||
      !strstr(wt_last_error(), "rank"))
    rc = wt_fail(WT_EMISMATCH, "a back end of 3 ranks was accepted for a group of 2");
  if (rc == WT_OK &&
      parallel_mesh_set_coll(m, PARALLEL_GROUP_CP, &dev, cp, parallel_comm_rank(cp), 2) != WT_OK)
    rc = wt_last_status();
  if (rc == WT_OK && parallel_mesh_set_coll(m, PARALLEL_GROUP_TP, &dev,
                                            parallel_mesh_group(m, PARALLEL_GROUP_TP), 0, 1))
    rc = wt_last_status();
  /* The CP group is device-like now: ring attention refuses it; the TP group too: a block with
   * CP and the vocab layer refuse it. */
  parallel_cp_attention *a = rc ? NULL : parallel_cp_attention_new(m, C, NH, B, T);
  if (rc == WT_OK && (a || wt_last_status() != WT_ENOTSUP || !strstr(wt_last_error(), "host")))
    rc = wt_fail(WT_EMISMATCH, "ring attention accepted device buffers");
  parallel_tp_block *b = rc ? NULL : parallel_tp_block_new(m, kernels_ref(), C, NH, B, T, 0);
  if (rc == WT_OK && (b || wt_last_status() != WT_ENOTSUP))
    rc = wt_fail(WT_EMISMATCH, "a TP block with CP accepted device buffers");
  parallel_tp_vocab *v = rc ? NULL : parallel_tp_vocab_new(m, kernels_ref(), 64, C, T, B, T);
  if (rc == WT_OK && (v || wt_last_status() != WT_ENOTSUP))
    rc = wt_fail(WT_EMISMATCH, "the vocab layer accepted device buffers");
  parallel_cp_attention_destroy(&a);
  parallel_tp_block_destroy(&b);
  parallel_tp_vocab_destroy(&v);
  if (rc != WT_OK) fprintf(stderr, "rank %d: %s\n", r, wt_last_error());
  parallel_mesh_destroy(&m);
  return rc;
}

static int s_refuse_moe_rank(parallel_comm *world, void *arg) {
  (void)arg;
  parallel_mesh_shape shape = {.dp = 1, .pp = 1, .tp = 1, .cp = 1, .ep = 2};
  parallel_mesh *m = parallel_mesh_new(world, &shape, 1);
  if (!m) return wt_last_status();
  parallel_group_ops dev = *parallel_group_host_ops();
  dev.device_buffers = 1;
  parallel_comm *ep = parallel_mesh_group(m, PARALLEL_GROUP_EP);
  int rc = parallel_mesh_set_coll(m, PARALLEL_GROUP_EP, &dev, ep, parallel_comm_rank(ep), 2);
  parallel_moe_config cfg = {.experts = 4, .top_k = 1, .capacity_factor = 1, .aux_weight = 0};
  parallel_moe *moe = rc ? NULL : parallel_moe_new(m, kernels_ref(), C, &cfg, N);
  if (rc == WT_OK && (moe || wt_last_status() != WT_ENOTSUP))
    rc = wt_fail(WT_EMISMATCH, "moe accepted device buffers");
  parallel_moe_destroy(&moe);
  parallel_mesh_destroy(&m);
  return rc;
}

static void test_refuse(void) {
  parallel_inproc_group *g = parallel_inproc_group_new(2);
  parallel_inproc_group_set_timeout(g, 20);
  WT_TEST_ASSERT(parallel_inproc_run(g, s_refuse_rank, NULL, NULL) == WT_OK, "%s", wt_last_error());
  WT_TEST_ASSERT(parallel_inproc_run(g, s_refuse_moe_rank, NULL, NULL) == WT_OK, "%s",
                 wt_last_error());
  parallel_inproc_group_destroy(&g);
}

int main(void) {
  test_dispatch();
  test_refuse();
  return wt_test_failures ? 1 : 0;
}
