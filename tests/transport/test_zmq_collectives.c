/* test_zmq_collectives — the collectives of collectives.h over the ZeroMQ transport among 4
 * forked processes (CURVE on, loopback ephemeral ports) give BITWISE the results of the same
 * calls over the in-process transport: plain ring all-reduce (sum and average, n not divisible
 * by the world), broadcast, all-gather-v of unequal sizes, the compressed all-reduce (int8 with
 * two-stage error feedback, three steps) and the sparse top-k all-reduce. Each child computes the
 * in-process reference itself (threads) from the same deterministic inputs and compares. */
#include "parallel/collectives/collectives.h"
#include "parallel/transport/comm.h"
#include "parallel/transport/zmq.h"

#include "common/common.h"
#include "common/testing.h"
#include "compress/codec.h"
#include "compress/ef.h"

#include <math.h>
#include <stdlib.h>

#define S_WORLD 4
#define S_N 100003 /* floats; prime, so chunks are uneven */
#define S_BCAST ((size_t)3 << 20)
#define S_STEPS 3

/* What one rank ends with after the sequence of collectives. */
typedef struct {
  float *sum, *avg, *comp, *sparse;
  uint8_t *bcast, *gathered;
  size_t offsets[S_WORLD + 1];
} s_result;

static float s_input(int rank, int step, size_t i) {
  return sinf((float)i * 0.001f * (float)(rank + 1) + (float)step) * (float)(rank + 2);
}

static int s_sequence(parallel_comm *c, s_result *o) {
  int r = parallel_comm_rank(c), p = parallel_comm_size(c);
  o->sum = wt_xmalloc(S_N * sizeof(float));
  o->avg = wt_xmalloc(S_N * sizeof(float));
  o->comp = wt_xcalloc(S_N, sizeof(float));
  o->sparse = wt_xcalloc(S_N, sizeof(float));
  o->bcast = wt_xmalloc(S_BCAST);
  for (size_t i = 0; i < S_N; i++) o->sum[i] = o->avg[i] = s_input(r, 0, i);
  WT_CHECK(parallel_allreduce(c, o->sum, S_N, PARALLEL_OP_SUM));
  WT_CHECK(parallel_allreduce(c, o->avg, S_N, PARALLEL_OP_AVG));
  for (size_t i = 0; i < S_BCAST; i++) o->bcast[i] = (uint8_t)(r == 2 ? i * 13 + 1 : 0);
  WT_CHECK(parallel_broadcast(c, o->bcast, S_BCAST, 2));
  size_t mine = 1000 + 777 * (size_t)r + 300000 * (size_t)r; /* several 256 KiB pieces */
  uint8_t *buf = wt_xmalloc(mine);
  for (size_t i = 0; i < mine; i++) buf[i] = (uint8_t)(i + (size_t)r * 31);
  int rc = parallel_allgatherv(c, buf, mine, (size_t)1 << 23, &o->gathered, o->offsets);
  free(buf);
  WT_CHECK(rc);

  compress_params prm = compress_params_default();
  compress_codec *int8 = NULL, *topk = NULL;
  WT_CHECK_NEW(int8, compress_codec_new("int8", &prm));
  WT_CHECK_NEW(topk, compress_codec_new("topk", &prm));
  parallel_ef *ef = NULL;
  compress_ef *sef = NULL;
  WT_CHECK_NEW(ef, parallel_ef_new(S_N, r, p));
  sef = compress_ef_new(S_N);
  float *x = wt_xmalloc(S_N * sizeof(float));
  for (int step = 0; step < S_STEPS && rc == WT_OK; step++) {
    for (size_t i = 0; i < S_N; i++) x[i] = s_input(r, step + 1, i);
    rc = parallel_allreduce_compressed(c, int8, x, S_N, PARALLEL_OP_AVG, ef);
    for (size_t i = 0; rc == WT_OK && i < S_N; i++) o->comp[i] += x[i];
    for (size_t i = 0; rc == WT_OK && i < S_N; i++) x[i] = s_input(r, step + 1, i);
    if (rc == WT_OK) rc = parallel_allreduce_sparse(c, topk, x, S_N, PARALLEL_OP_SUM, sef);
    for (size_t i = 0; rc == WT_OK && i < S_N; i++) o->sparse[i] += x[i];
  }
  free(x);
  parallel_ef_destroy(&ef);
  compress_ef_destroy(&sef);
  compress_codec_destroy(&int8);
  compress_codec_destroy(&topk);
  return rc;
}

static void s_result_free(s_result *o) {
  free(o->sum);
  free(o->avg);
  free(o->comp);
  free(o->sparse);
  free(o->bcast);
  free(o->gathered);
  memset(o, 0, sizeof *o);
}

static int s_inproc_fn(parallel_comm *c, void *arg) {
  s_result *all = arg;
  return s_sequence(c, &all[parallel_comm_rank(c)]);
}

/* One forked rank: the sequence over ZeroMQ, then the in-process reference, then compare. */
static int s_zmq_fn(parallel_comm *c, void *arg) {
  (void)arg;
  int me = parallel_comm_rank(c);
  s_result got = {0};
  WT_CHECK(s_sequence(c, &got));
  uint64_t refused = parallel_zmq_refused(c);
  s_result ref[S_WORLD] = {{0}};
  parallel_inproc_group *g = parallel_inproc_group_new(S_WORLD);
  int rc = parallel_inproc_run(g, s_inproc_fn, ref, NULL);
  parallel_inproc_group_destroy(&g);
  WT_CHECK(rc);
  const s_result *w = &ref[me];
  const char *diff = NULL;
  if (memcmp(got.sum, w->sum, S_N * sizeof(float)))
    diff = "all-reduce sum";
  else if (memcmp(got.avg, w->avg, S_N * sizeof(float)))
    diff = "all-reduce avg";
  else if (memcmp(got.bcast, w->bcast, S_BCAST))
    diff = "broadcast";
  else if (memcmp(got.offsets, w->offsets, sizeof got.offsets) ||
           memcmp(got.gathered, w->gathered, got.offsets[S_WORLD]))
    diff = "all-gather-v";
  else if (memcmp(got.comp, w->comp, S_N * sizeof(float)))
    diff = "compressed all-reduce";
  else if (memcmp(got.sparse, w->sparse, S_N * sizeof(float)))
    diff = "sparse all-reduce";
  else if (refused)
    diff = "refused messages on a healthy group";
  /* A non-trivial check: the sum is not just this rank's own input. */
  else if (got.sum[1] == s_input(me, 0, 1))
    diff = "sum equals own input";
  s_result_free(&got);
  for (int r = 0; r < S_WORLD; r++) s_result_free(&ref[r]);
  if (diff) return wt_fail(WT_EMISMATCH, "rank %d: %s over zmq differs from inproc", me, diff);
  return WT_OK;
}

int main(void) {
  parallel_zmq_config base = parallel_zmq_config_default();
  base.run_id = 0x5eed;
  base.timeout_s = 30;
  int rcs[S_WORLD];
  double t0 = wt_now_s();
  int rc = parallel_zmq_fork_run(S_WORLD, &base, s_zmq_fn, NULL, rcs);
  for (int r = 0; r < S_WORLD; r++) WT_TEST_ASSERT(rcs[r] == WT_OK, "rank %d rc %d", r, rcs[r]);
  WT_TEST_ASSERT(rc == WT_OK, "fork group: %s", wt_last_error());
  printf("test_zmq_collectives: 4 processes, zmq == inproc bitwise, %.1f s\n", wt_now_s() - t0);
  return wt_test_failures ? 1 : 0;
}
