/* test_nccl — the NCCL back end (parallel/nccl.h).
 *
 *   test_nccl refuse   (unit) where NCCL or a GPU is missing, forming a communicator fails with
 *                      WT_ENOTSUP and a message that says what is missing, nothing crashes;
 *                      skipped (77) on a machine where NCCL does work
 *   test_nccl          (gpu)  a one-rank NCCL communicator on device 0: every collective and
 *                      send/recv moves the right numbers; skipped (77) without NCCL or a GPU
 * One GPU cannot host several ranks of one NCCL communicator, so multi-rank behaviour rests on the
 * in-process tests of the layers. */
#include "parallel/nccl.h"

#include "common/common.h"
#include "common/testing.h"

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

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "refuse") == 0) return test_refuse();
  return test_one_rank();
}
