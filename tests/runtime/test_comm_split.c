/* test_comm_split — sub-communicators over a 6-rank in-process world: the rows and columns of a
 * 3 x 2 grid run ring all-reduces at the same time as the world does, each gets the sum over
 * its own members only, user messages with equal tags on different communicators never mix, and
 * bad splits are refused with a message. */
#include "common/common.h"
#include "common/testing.h"
#include "parallel/collectives/collectives.h"
#include "parallel/transport/comm.h"

enum { S = 3, R = 2, N = 1001 };

/* World rank w = s*R + r. Row s: ranks s*R..s*R+R-1 (id 1+s); column r: r, R+r, ... (id 10+r). */
static int s_rank_fn(parallel_comm *world, void *arg) {
  (void)arg;
  int w = parallel_comm_rank(world), s = w / R, r = w % R;
  int row[R], col[S];
  for (int i = 0; i < R; i++) row[i] = s * R + i;
  for (int i = 0; i < S; i++) col[i] = i * R + r;
  parallel_comm *rc = parallel_comm_split(world, row, R, 1 + s);
  parallel_comm *cc = parallel_comm_split(world, col, S, 10 + r);
  WT_TEST_REQUIRE(rc && cc, "%s", wt_last_error());
  WT_TEST_ASSERT(parallel_comm_rank(rc) == r && parallel_comm_size(rc) == R, "row rank");
  WT_TEST_ASSERT(parallel_comm_rank(cc) == s && parallel_comm_size(cc) == S, "column rank");
  /* The same user tag on the column, the row and the world, received in the other order. */
  int tag = 7, got_v = -1;
  size_t got = 0;
  if (s == 0) {
    int v = 100 + r;
    WT_TEST_ASSERT(parallel_comm_send(cc, 1, tag, &v, sizeof v) == WT_OK, "column send");
    v = 200 + r;
    WT_TEST_ASSERT(parallel_comm_send(world, R + r, tag, &v, sizeof v) == WT_OK, "world send");
  }
  if (s == 1) {
    WT_TEST_ASSERT(parallel_comm_recv(world, r, tag, &got_v, sizeof got_v, &got) == WT_OK &&
                       got_v == 200 + r,
                   "world message %d", got_v);
    WT_TEST_ASSERT(parallel_comm_recv(cc, 0, tag, &got_v, sizeof got_v, &got) == WT_OK &&
                       got_v == 100 + r,
                   "column message %d", got_v);
  }
  /* All-reduces on all three communicators, interleaved: every rank contributes w + 1. */
  float xr[N], xc[N], xw[N];
  for (int i = 0; i < N; i++) xr[i] = xc[i] = xw[i] = (float)(w + 1);
  WT_TEST_ASSERT(parallel_allreduce(rc, xr, N, PARALLEL_OP_SUM) == WT_OK, "%s", wt_last_error());
  WT_TEST_ASSERT(parallel_allreduce(cc, xc, N, PARALLEL_OP_SUM) == WT_OK, "%s", wt_last_error());
  WT_TEST_ASSERT(parallel_allreduce(world, xw, N, PARALLEL_OP_SUM) == WT_OK, "%s", wt_last_error());
  float want_r = 0, want_c = 0;
  for (int i = 0; i < R; i++) want_r += (float)(row[i] + 1);
  for (int i = 0; i < S; i++) want_c += (float)(col[i] + 1);
  WT_TEST_ASSERT(xr[0] == want_r && xr[N - 1] == want_r, "row sum %g want %g", xr[0], want_r);
  WT_TEST_ASSERT(xc[0] == want_c && xc[N - 1] == want_c, "column sum %g want %g", xc[0], want_c);
  WT_TEST_ASSERT(xw[N / 2] == (float)(S * R * (S * R + 1) / 2), "world sum %g", xw[N / 2]);
  WT_TEST_ASSERT(parallel_comm_bytes_sent(rc) > 0 &&
                     parallel_comm_bytes_sent(world) > parallel_comm_bytes_sent(rc),
                 "bytes count on the split and on the parent");
  /* Refusals. */
  int other[2] = {(w + 1) % (S * R), (w + 2) % (S * R)}, dup[2] = {w, w}, far[2] = {w, 99};
  WT_TEST_ASSERT(!parallel_comm_split(world, other, 2, 3), "a split without this rank");
  WT_TEST_ASSERT(strstr(wt_last_error(), "do not include"), "%s", wt_last_error());
  WT_TEST_ASSERT(!parallel_comm_split(world, dup, 2, 3), "a repeated rank");
  WT_TEST_ASSERT(!parallel_comm_split(world, far, 2, 3), "a rank out of range");
  WT_TEST_ASSERT(!parallel_comm_split(world, row, R, 0), "id 0");
  WT_TEST_ASSERT(!parallel_comm_split(rc, &r, 1, 5) && strstr(wt_last_error(), "nest"), "nesting");
  parallel_comm_destroy(&rc);
  parallel_comm_destroy(&cc);
  WT_TEST_ASSERT(rc == NULL, "destroy clears the pointer");
  return WT_OK;
}

int main(void) {
  parallel_inproc_group *g = parallel_inproc_group_new(S * R);
  parallel_inproc_group_set_timeout(g, 20);
  int rcs[S * R];
  WT_TEST_ASSERT(parallel_inproc_run(g, s_rank_fn, NULL, rcs) == WT_OK, "%s", wt_last_error());
  parallel_inproc_group_destroy(&g);
  return wt_test_finish("test_comm_split");
}
