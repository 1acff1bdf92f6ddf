/* test_comm — the in-process transport: point-to-point order and tags, bounded mailboxes,
 * barrier, peers that leave, timeouts, refusal of oversized messages. */
#include "parallel/transport/comm.h"

#include "common/common.h"
#include "common/testing.h"

#include <stdatomic.h>

/* Rank 0 sends 100 numbered messages alternating two tags; rank 1 receives all of tag 2 first,
 * then tag 1: a receive picks its tag out of the queue, and within a tag order is kept. (The
 * tag-1 messages pile up meanwhile, so the mailbox is made just big enough for all of them.) */
static int s_order_fn(parallel_comm *c, void *arg) {
  (void)arg;
  if (parallel_comm_rank(c) == 0) {
    for (int i = 0; i < 100; i++) WT_CHECK(parallel_comm_send(c, 1, 1 + i % 2, &i, sizeof i));
    return WT_OK;
  }
  for (int tag = 2; tag >= 1; tag--) {
    for (int want = tag == 1 ? 0 : 1; want < 100; want += 2) {
      int v = -1;
      size_t got = 0;
      WT_CHECK(parallel_comm_recv(c, 0, tag, &v, sizeof v, &got));
      if (got != sizeof v || v != want) return wt_fail(WT_ECORRUPT, "got %d want %d", v, want);
    }
  }
  return WT_OK;
}

static void test_order_and_tags(void) {
  parallel_inproc_group *g = parallel_inproc_group_new(2);
  parallel_inproc_group_set_max_queue(g, 100 * sizeof(int));
  int rcs[2];
  int rc = parallel_inproc_run(g, s_order_fn, NULL, rcs);
  WT_TEST_ASSERT(rc == WT_OK && rcs[0] == WT_OK && rcs[1] == WT_OK, "rcs %d %d", rcs[0], rcs[1]);
  parallel_inproc_group_destroy(&g);
  WT_TEST_ASSERT(g == NULL, "destroy sets NULL");
}

/* Bounded memory: 200 messages of 1 KiB through a 2 KiB mailbox; the sender must block and
 * resume as the receiver drains, and every byte must arrive. */
static int s_bounded_fn(parallel_comm *c, void *arg) {
  (void)arg;
  unsigned char buf[1024];
  for (int i = 0; i < 200; i++) {
    if (parallel_comm_rank(c) == 0) {
      memset(buf, i & 0xff, sizeof buf);
      WT_CHECK(parallel_comm_send(c, 1, 7, buf, sizeof buf));
    } else {
      size_t got = 0;
      WT_CHECK(parallel_comm_recv(c, 0, 7, buf, sizeof buf, &got));
      if (got != sizeof buf || buf[0] != (i & 0xff) || buf[1023] != (i & 0xff))
        return wt_fail(WT_ECORRUPT, "message %d damaged", i);
    }
  }
  return WT_OK;
}

static void test_bounded(void) {
  parallel_inproc_group *g = parallel_inproc_group_new(2);
  parallel_inproc_group_set_max_queue(g, 2048);
  WT_TEST_ASSERT(parallel_inproc_run(g, s_bounded_fn, NULL, NULL) == WT_OK, "bounded transfer");
  parallel_comm *c0 = parallel_inproc_group_comm(g, 0);
  WT_TEST_ASSERT(parallel_comm_bytes_sent(c0) == 200 * 1024, "bytes counted: %llu",
                 (unsigned long long)parallel_comm_bytes_sent(c0));
  WT_TEST_ASSERT(parallel_comm_msgs_sent(c0) == 200, "messages counted");
  parallel_comm_reset_counters(c0);
  WT_TEST_ASSERT(parallel_comm_bytes_sent(c0) == 0, "counters reset");
  parallel_inproc_group_destroy(&g);
}

/* Barrier: no rank may leave round k before every rank has entered it. Each rank bumps a shared
 * counter then waits; after the barrier the counter must show all ranks. */
typedef struct {
  atomic_int count;
  atomic_int violations;
  int world, rounds;
} s_barrier_arg;

static int s_barrier_fn(parallel_comm *c, void *arg) {
  s_barrier_arg *a = arg;
  for (int k = 1; k <= a->rounds; k++) {
    atomic_fetch_add(&a->count, 1);
    WT_CHECK(parallel_comm_barrier(c));
    if (atomic_load(&a->count) < k * a->world) atomic_fetch_add(&a->violations, 1);
    WT_CHECK(parallel_comm_barrier(c)); /* nobody starts round k+1 before all checked round k */
  }
  return WT_OK;
}

static void test_barrier(void) {
  for (int world = 1; world <= 7; world++) {
    parallel_inproc_group *g = parallel_inproc_group_new(world);
    s_barrier_arg a = {.world = world, .rounds = 20};
    atomic_init(&a.count, 0);
    atomic_init(&a.violations, 0);
    WT_TEST_ASSERT(parallel_inproc_run(g, s_barrier_fn, &a, NULL) == WT_OK, "world %d", world);
    WT_TEST_ASSERT(atomic_load(&a.violations) == 0, "world %d: %d ranks passed early", world,
                   atomic_load(&a.violations));
    parallel_inproc_group_destroy(&g);
  }
}

/* Rank 1 returns at once; rank 0's receive from it must fail with WT_EIO (not hang). A message
 * larger than the receive buffer is refused with WT_EMISMATCH. */
static int s_leave_fn(parallel_comm *c, void *arg) {
  int *seen = arg;
  if (parallel_comm_rank(c) == 1) {
    char big[64] = {0};
    return parallel_comm_send(c, 0, 3, big, sizeof big);
  }
  char small[8];
  size_t got = 0;
  seen[0] = parallel_comm_recv(c, 1, 3, small, sizeof small, &got);
  seen[1] = parallel_comm_recv(c, 1, 3, small, sizeof small, &got);
  return WT_OK;
}

static int s_timeout_fn(parallel_comm *c, void *arg) {
  int *seen = arg;
  if (parallel_comm_rank(c) == 1) {
    /* Stay alive, silent, until rank 0 has left: rank 0 must time out, not see us leave. */
    char b;
    size_t got;
    int rc;
    while ((rc = parallel_comm_recv(c, 0, 9, &b, 1, &got)) == WT_ETIMEOUT) {
    }
    return rc == WT_EIO ? WT_OK : WT_EINVAL;
  }
  char b;
  size_t got;
  seen[2] = parallel_comm_recv(c, 1, 9, &b, 1, &got);
  return WT_OK;
}

static void test_failures(void) {
  parallel_inproc_group *g = parallel_inproc_group_new(2);
  int seen[3] = {0, 0, 0};
  parallel_inproc_run(g, s_leave_fn, seen, NULL);
  WT_TEST_ASSERT(seen[0] == WT_EMISMATCH, "oversized message: %s", wt_status_name(seen[0]));
  WT_TEST_ASSERT(seen[1] == WT_EIO, "peer left: %s", wt_status_name(seen[1]));
  parallel_inproc_group_set_timeout(g, 0.2);
  int rcs[2];
  parallel_inproc_run(g, s_timeout_fn, seen, rcs);
  WT_TEST_ASSERT(seen[2] == WT_ETIMEOUT, "silent peer: %s", wt_status_name(seen[2]));
  WT_TEST_ASSERT(rcs[1] == WT_OK, "rank 1 saw rank 0 leave");
  parallel_inproc_group_destroy(&g);
  WT_TEST_ASSERT(parallel_inproc_group_new(0) == NULL, "size 0 refused");
}

int main(void) {
  test_order_and_tags();
  test_bounded();
  test_barrier();
  test_failures();
  return wt_test_finish("test_parallel_comm");
}
