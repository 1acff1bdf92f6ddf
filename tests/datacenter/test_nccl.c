/* test_nccl — the NCCL back end (parallel/datacenter/nccl.h).
 *
 *   test_nccl refuse   (unit) where NCCL or a GPU is missing, forming a communicator fails with
 *                      WT_ENOTSUP and a message that says what is missing, nothing crashes;
 *                      skipped (77) on a machine where NCCL does work
 *   test_nccl          (gpu)  a one-rank NCCL communicator on device 0: every collective and
 *                      send/recv moves the right numbers; skipped (77) without NCCL or a GPU
 *   test_nccl tp       (gpu)  the TP block with t = 1 on device buffers and the CUDA kernels,
 *                      its TP group on a one-rank NCCL communicator (parallel_nccl_attach), so
 *                      the block's collectives, allocations and copies go through the NCCL group
 *                      table — the code path the in-process tests run on the host table; output,
 *                      input gradient and every parameter gradient equal the host block within
 *                      atol 1e-4 + rtol 1e-3 (fp32 on both sides, cuBLAS in pedantic fp32 mode;
 *                      only the order of the GEMMs' inner sums differs, ~1e-6 on values ~1). A
 *                      missing all-reduce, bias or copy gives errors of order 1e-1. Skipped (77)
 *                      without NCCL, a GPU or the CUDA kernels
 * One GPU cannot host several ranks of one NCCL communicator, so multi-rank behaviour rests on the
 * in-process tests of the layers. */
#include "parallel/datacenter/nccl.h"

#include "kernels/kernels.h"
#include "parallel/datacenter/mesh.h"
#include "parallel/datacenter/tp.h"

#include "common/common.h"
#include "common/testing.h"

#include <math.h>

enum { N = 8 };

static int test_refuse(void) {
  if (parallel_nccl_available()) return WT_TEST_SKIP;
  const char *why = wt_last_error();
  WT_TEST_ASSERT(strstr(why, "nccl:") && (strstr(why, "no NCCL") || strstr(why, "no CUDA device")),
                 "availability message: %s", why);
  parallel_inproc_group *g = parallel_inproc_group_new(1);
  parallel_nccl *n = parallel_nccl_new(parallel_inproc_group_comm(g, 0), 0);
  WT_TEST_ASSERT(n == NULL, "a communicator formed without NCCL or a GPU");
  WT_TEST_ASSERT(strstr(wt_last_error(), "nccl:"), "message: %s", wt_last_error());
  WT_TEST_ASSERT(parallel_nccl_mem_alloc(64) == NULL || parallel_nccl_available(),
                 "device memory without a device");
  parallel_inproc_group_destroy(&g);
  return wt_test_failures ? 1 : 0;
}

static void s_expect(const float *dev, const float *want, size_t n, const char *what) {
  float got[4 * N];
  WT_TEST_REQUIRE(parallel_nccl_mem_download(got, dev, n * sizeof(float)) == WT_OK, "%s",
                  wt_last_error());
  wt_test_allclose(got, want, n, 0, 0, what); /* one rank: exact copies */
  for (size_t i = 0; i < n; i++) WT_TEST_ASSERT(got[i] == want[i], "%s[%zu]", what, i);
}

static int test_one_rank(void) {
  if (!parallel_nccl_available()) {
    fprintf(stderr, "skipped: %s\n", wt_last_error());
    return WT_TEST_SKIP;
  }
  parallel_inproc_group *g = parallel_inproc_group_new(1);
  parallel_nccl *n = parallel_nccl_new(parallel_inproc_group_comm(g, 0), 0);
  WT_TEST_REQUIRE(n, "%s", wt_last_error());
  WT_TEST_ASSERT(parallel_nccl_rank(n) == 0 && parallel_nccl_size(n) == 1, "rank/size");
  parallel_nccl_set_timeout(n, 30);
  float host[N], zero[N] = {0};
  for (int i = 0; i < N; i++) host[i] = (float)(i + 1) * 0.5f;
  float *a = parallel_nccl_mem_alloc(sizeof host), *b = parallel_nccl_mem_alloc(sizeof host);
  WT_TEST_REQUIRE(a && b, "%s", wt_last_error());
  WT_TEST_REQUIRE(parallel_nccl_mem_upload(a, host, sizeof host) == WT_OK, "%s", wt_last_error());
  WT_TEST_ASSERT(parallel_nccl_allreduce(n, a, N, PARALLEL_OP_SUM) == WT_OK, "%s", wt_last_error());
  s_expect(a, host, N, "all-reduce sum");
  WT_TEST_ASSERT(parallel_nccl_allreduce(n, a, N, PARALLEL_OP_AVG) == WT_OK, "%s", wt_last_error());
  s_expect(a, host, N, "all-reduce avg");
  parallel_nccl_mem_upload(b, zero, sizeof zero);
  WT_TEST_ASSERT(parallel_nccl_reduce_scatter(n, a, b, N, PARALLEL_OP_SUM) == WT_OK, "%s",
                 wt_last_error());
  s_expect(b, host, N, "reduce-scatter");
  parallel_nccl_mem_upload(b, zero, sizeof zero);
  WT_TEST_ASSERT(parallel_nccl_allgather(n, a, b, N) == WT_OK, "%s", wt_last_error());
  s_expect(b, host, N, "all-gather");
  WT_TEST_ASSERT(parallel_nccl_broadcast(n, a, sizeof host, 0) == WT_OK, "%s", wt_last_error());
  s_expect(a, host, N, "broadcast");
  parallel_nccl_mem_upload(b, zero, sizeof zero);
  WT_TEST_ASSERT(parallel_nccl_sendrecv(n, a, 0, b, 0, sizeof host) == WT_OK, "%s",
                 wt_last_error());
  s_expect(b, host, N, "send/recv to self");
  parallel_nccl_mem_upload(b, zero, sizeof zero);
  WT_TEST_ASSERT(parallel_nccl_alltoall(n, a, b, sizeof host) == WT_OK, "%s", wt_last_error());
  s_expect(b, host, N, "all-to-all");
  parallel_nccl_mem_free(a);
  parallel_nccl_mem_free(b);
  parallel_nccl_destroy(&n);
  WT_TEST_ASSERT(n == NULL, "destroy sets NULL");
  parallel_inproc_group_destroy(&g);
  return wt_test_failures ? 1 : 0;
}

enum { TB = 2, TT = 8, TC = 32, TNH = 4, TN = TB * TT };

static uint64_t s_rng = 0x9e3779b97f4a7c15ull;
static float s_uniform(void) { /* xorshift64*, in [-1, 1) */
  s_rng ^= s_rng >> 12, s_rng ^= s_rng << 25, s_rng ^= s_rng >> 27;
  return (float)((double)((s_rng * 2685821657736338717ull) >> 40) / (double)(1ull << 24)) * 2 - 1;
}

/* One forward + backward of a block made on mesh m with kernels k; x, dout, out, dx and the
 * gradients are host arrays, uploaded / downloaded through the block's group table. */
static int s_tp_run(parallel_mesh *m, const kernels_ops *k, const float *const *full,
                    const float *x, const float *dout, float *out, float *dx, float *grads,
                    size_t *n_grads) {
  const parallel_group_comm *g = parallel_mesh_coll(m, PARALLEL_GROUP_TP);
  parallel_tp_block *b = parallel_tp_block_new(m, k, TC, TNH, TB, TT, 0);
  if (!b) return wt_last_status();
  size_t bytes = sizeof(float) * TN * TC, n = 0;
  float *dx_dev = parallel_group_alloc(g, TN * TC), *x_dev = parallel_group_alloc(g, TN * TC);
  float *out_dev = parallel_group_alloc(g, TN * TC), *dout_dev = parallel_group_alloc(g, TN * TC);
  int rc = x_dev && dx_dev && out_dev && dout_dev ? WT_OK : wt_last_status();
  if (rc == WT_OK) rc = parallel_tp_block_load(b, full);
  if (rc == WT_OK) rc = parallel_group_upload(g, x_dev, x, bytes);
  if (rc == WT_OK) rc = parallel_group_upload(g, dout_dev, dout, bytes);
  if (rc == WT_OK) rc = parallel_tp_block_forward(b, x_dev, out_dev, TB, TT);
  if (rc == WT_OK) rc = parallel_tp_block_backward(b, dout_dev, dx_dev);
  if (rc == WT_OK) rc = parallel_group_download(g, out, out_dev, bytes);
  if (rc == WT_OK) rc = parallel_group_download(g, dx, dx_dev, bytes);
  const float *g_dev = parallel_tp_block_grads(b, &n);
  if (rc == WT_OK) rc = parallel_group_download(g, grads, g_dev, sizeof(float) * n);
  *n_grads = n;
  parallel_group_free(g, x_dev), parallel_group_free(g, dx_dev);
  parallel_group_free(g, out_dev), parallel_group_free(g, dout_dev);
  parallel_tp_block_destroy(&b);
  return rc;
}

static int test_tp_block(void) {
  if (!parallel_nccl_available()) {
    fprintf(stderr, "skipped: %s\n", wt_last_error());
    return WT_TEST_SKIP;
  }
  const kernels_ops *cuda = kernels_backend("cuda");
  if (!cuda) {
    fprintf(stderr, "skipped: this build has NCCL but no CUDA kernels table\n");
    return WT_TEST_SKIP;
  }
  const size_t numel[PARALLEL_TP_TENSORS] = {
      TC, TC, (size_t)TC * 3 * TC, 3 * TC, (size_t)TC * TC,     TC,
      TC, TC, (size_t)TC * 4 * TC, 4 * TC, (size_t)4 * TC * TC, TC};
  float *full[PARALLEL_TP_TENSORS];
  size_t total = 0;
  for (int i = 0; i < PARALLEL_TP_TENSORS; i++) {
    full[i] = wt_xmalloc(sizeof(float) * numel[i]);
    int ln_w = i == PARALLEL_TP_LN1_W || i == PARALLEL_TP_LN2_W;
    for (size_t j = 0; j < numel[i]; j++) full[i][j] = (ln_w ? 1.0f : 0) + 0.2f * s_uniform();
    total += numel[i];
  }
  static float x[TN * TC], dout[TN * TC], out_h[TN * TC], dx_h[TN * TC], out_d[TN * TC],
      dx_d[TN * TC];
  for (int i = 0; i < TN * TC; i++) x[i] = s_uniform(), dout[i] = s_uniform();
  float *g_h = wt_xcalloc(total, sizeof(float)), *g_d = wt_xcalloc(total, sizeof(float));

  parallel_inproc_group *grp = parallel_inproc_group_new(1);
  parallel_comm *world = parallel_inproc_group_comm(grp, 0);
  parallel_mesh_shape shape = {.dp = 1, .pp = 1, .tp = 1, .cp = 1, .ep = 1};
  parallel_mesh *host = parallel_mesh_new(world, &shape, 1);
  parallel_mesh *dev = parallel_mesh_new(world, &shape, 1 + PARALLEL_GROUP_COUNT);
  WT_TEST_REQUIRE(host && dev, "%s", wt_last_error());
  size_t n_h = 0, n_d = 0;
  WT_TEST_REQUIRE(s_tp_run(host, kernels_ref(), (const float *const *)full, x, dout, out_h, dx_h,
                           g_h, &n_h) == WT_OK,
                  "host block: %s", wt_last_error());
  parallel_nccl *n = parallel_nccl_new(parallel_mesh_group(dev, PARALLEL_GROUP_TP), 0);
  WT_TEST_REQUIRE(n, "%s", wt_last_error());
  parallel_nccl_set_timeout(n, 30);
  WT_TEST_REQUIRE(parallel_nccl_attach(n, dev, PARALLEL_GROUP_TP) == WT_OK, "%s", wt_last_error());
  WT_TEST_ASSERT(strcmp(parallel_mesh_coll(dev, PARALLEL_GROUP_TP)->ops->name, "nccl") == 0,
                 "the TP group does not use the NCCL table");
  WT_TEST_REQUIRE(
      s_tp_run(dev, cuda, (const float *const *)full, x, dout, out_d, dx_d, g_d, &n_d) == WT_OK,
      "device block: %s", wt_last_error());
  WT_TEST_ASSERT(n_h == total && n_d == total, "gradient sizes %zu %zu, want %zu", n_h, n_d, total);
  wt_test_allclose(out_d, out_h, TN * TC, 1e-4, 1e-3, "block output (device vs host)");
  wt_test_allclose(dx_d, dx_h, TN * TC, 1e-4, 1e-3, "input gradient (device vs host)");
  wt_test_allclose(g_d, g_h, total, 1e-4, 1e-3, "parameter gradients (device vs host)");
  double max_err = 0;
  for (int i = 0; i < TN * TC; i++) max_err = fmax(max_err, fabs((double)out_d[i] - out_h[i]));
  printf("tp 1 on nccl + cuda: max abs output error vs host %.3g\n", max_err);
  parallel_nccl_destroy(&n);
  parallel_mesh_destroy(&dev);
  parallel_mesh_destroy(&host);
  parallel_inproc_group_destroy(&grp);
  for (int i = 0; i < PARALLEL_TP_TENSORS; i++) free(full[i]);
  free(g_h), free(g_d);
  return wt_test_failures ? 1 : 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "refuse") == 0) return test_refuse();
  if (argc > 1 && strcmp(argv[1], "tp") == 0) return test_tp_block();
  return test_one_rank();
}
