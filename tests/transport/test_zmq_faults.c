/* test_zmq_faults — what the ZeroMQ transport does when the outside misbehaves:
 *  - malformed or foreign frames (wrong version, kind, codec, flags, run id, epoch, length, a
 *    short header, a source rank that is not the sender's key, a flood of payload frames) sent
 *    with a raw socket are
 *    refused, logged and counted, and the rank goes on receiving good messages;
 *  - a connection with a key outside the group is refused by the ZAP handler, and so is a
 *    plaintext client on a CURVE link: nothing of theirs is delivered;
 *  - a peer process that dies mid-step makes every other process fail with a clear error well
 *    within the deadline; a silent (stuck) peer makes them fail at the deadline, never hang. */
#include "parallel/collectives/collectives.h"
#include "parallel/transport/zmq.h"
#include "parallel/transport/zmq_protocol.h"

#include "common/common.h"
#include "common/testing.h"
#include "tests/transport/harness.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zmq.h>

/* ---- refused frames ------------------------------------------------------------------------ */

static parallel_zmq_header s_good_header(int src, int tag, uint64_t len) {
  parallel_zmq_header h = {.kind = PARALLEL_ZMQ_KIND_DATA,
                           .run_id = 77,
                           .epoch = 3,
                           .src_rank = src,
                           .tag = tag,
                           .length = len};
  return h;
}

/* Sends header bytes (possibly damaged) and a payload as one multipart message. */
static void s_raw_send(void *sock, const uint8_t *header, size_t hlen, const void *payload,
                       size_t plen) {
  zmq_send(sock, header, hlen, plen ? ZMQ_SNDMORE : 0);
  if (plen) zmq_send(sock, payload, plen, 0);
}

static void *s_raw_client(void *zctx, const char *endpoint, const char *server_pub, const char *pub,
                          const char *sec) {
  void *s = zmq_socket(zctx, ZMQ_PUSH);
  int linger = 1000;
  zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
  if (pub) {
    zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, server_pub, 40);
    zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, pub, 40);
    zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, sec, 40);
  }
  zmq_connect(s, endpoint);
  return s;
}

/* Waits until the refused counter reaches `want` (the receiver thread works asynchronously). */
static uint64_t s_wait_refused(parallel_comm *c, uint64_t want) {
  double end = wt_now_s() + 5;
  while (parallel_zmq_refused(c) < want && wt_now_s() < end) usleep(10000);
  return parallel_zmq_refused(c);
}

static void test_bad_frames(void) {
  parallel_zmq_config base = parallel_zmq_config_default();
  base.run_id = 77;
  base.epoch = 3;
  base.timeout_s = 1;
  s_group g;
  WT_TEST_REQUIRE(s_group_open(&g, 3, &base, NULL, NULL) == WT_OK, "%s", wt_last_error());
  void *zctx = zmq_ctx_new();
  /* Authenticated as rank 1 (its real key pair), so only the header checks can refuse. */
  void *raw = s_raw_client(zctx, g.eps[0], g.pub[0], g.pub[1], g.sec[1]);
  uint32_t payload = 0xabcd;
  uint8_t hb[PARALLEL_ZMQ_HEADER_BYTES + 1];
  struct {
    const char *what;
    int offset; /* byte to overwrite, -1 for none */
    uint8_t value;
    parallel_zmq_header h;
    size_t hlen;
  } cases[] = {
      {"wrong version", 4, 9, s_good_header(1, 5, 4), PARALLEL_ZMQ_HEADER_BYTES},
      {"bad magic", 0, 'X', s_good_header(1, 5, 4), PARALLEL_ZMQ_HEADER_BYTES},
      {"unknown kind", 5, 77, s_good_header(1, 5, 4), PARALLEL_ZMQ_HEADER_BYTES},
      {"unknown codec", 6, 200, s_good_header(1, 5, 4), PARALLEL_ZMQ_HEADER_BYTES},
      {"flags", 7, 1, s_good_header(1, 5, 4), PARALLEL_ZMQ_HEADER_BYTES},
      {"wrong run id", 8, 78, s_good_header(1, 5, 4), PARALLEL_ZMQ_HEADER_BYTES},
      {"wrong epoch", 16, 4, s_good_header(1, 5, 4), PARALLEL_ZMQ_HEADER_BYTES},
      {"length too long", -1, 0, s_good_header(1, 5, 5), PARALLEL_ZMQ_HEADER_BYTES},
      {"length too short", -1, 0, s_good_header(1, 5, 3), PARALLEL_ZMQ_HEADER_BYTES},
      {"short header", -1, 0, s_good_header(1, 5, 4), PARALLEL_ZMQ_HEADER_BYTES - 1},
      {"long header", -1, 0, s_good_header(1, 5, 4), PARALLEL_ZMQ_HEADER_BYTES + 1},
      {"claims the receiver's rank", -1, 0, s_good_header(0, 5, 4), PARALLEL_ZMQ_HEADER_BYTES},
      {"claims another rank than its key", -1, 0, s_good_header(2, 5, 4),
       PARALLEL_ZMQ_HEADER_BYTES},
      {"rank outside the group", -1, 0, s_good_header(7, 5, 4), PARALLEL_ZMQ_HEADER_BYTES},
  };
  int ncases = (int)WT_ARRAY_LEN(cases);
  for (int k = 0; k < ncases; k++) {
    memset(hb, 0, sizeof hb);
    parallel_zmq_header_encode(&cases[k].h, hb);
    if (cases[k].offset >= 0) hb[cases[k].offset] = cases[k].value;
    s_raw_send(raw, hb, cases[k].hlen, &payload, sizeof payload);
  }
  /* A flood of empty payload frames, more than any sender makes (2^18 + 1). */
  parallel_zmq_header flood = s_good_header(1, 5, 0);
  parallel_zmq_header_encode(&flood, hb);
  zmq_send(raw, hb, PARALLEL_ZMQ_HEADER_BYTES, ZMQ_SNDMORE);
  for (int k = 0; k < (1 << 18); k++) zmq_send(raw, "", 0, ZMQ_SNDMORE);
  zmq_send(raw, "", 0, 0);
  ncases++;
  uint64_t refused = s_wait_refused(g.comms[0], (uint64_t)ncases);
  WT_TEST_ASSERT(refused == (uint64_t)ncases, "refused %llu of %d bad frames",
                 (unsigned long long)refused, ncases);
  /* The rank goes on: a good frame from the same raw socket arrives, and none of the bad ones
   * (all tag 5) is delivered. */
  parallel_zmq_header h = s_good_header(1, 6, sizeof payload);
  parallel_zmq_header_encode(&h, hb);
  s_raw_send(raw, hb, PARALLEL_ZMQ_HEADER_BYTES, &payload, sizeof payload);
  uint32_t v = 0;
  size_t got = 0;
  WT_TEST_ASSERT(parallel_comm_recv(g.comms[0], 1, 6, &v, sizeof v, &got) == WT_OK && v == payload,
                 "good frame after bad ones: %s", wt_last_error());
  WT_TEST_ASSERT(parallel_zmq_link_stats_get(g.comms[0], 1).msgs_recv == 1,
                 "only the good frame was accepted");
  zmq_close(raw);

  /* A key outside the group: the ZAP handler refuses the connection. */
  char opub[41], osec[41];
  parallel_zmq_keypair_new(opub, osec);
  void *stranger = s_raw_client(zctx, g.eps[0], g.pub[0], opub, osec);
  h = s_good_header(1, 7, sizeof payload);
  parallel_zmq_header_encode(&h, hb);
  s_raw_send(stranger, hb, PARALLEL_ZMQ_HEADER_BYTES, &payload, sizeof payload);
  refused = s_wait_refused(g.comms[0], (uint64_t)ncases + 1);
  WT_TEST_ASSERT(refused >= (uint64_t)ncases + 1, "ZAP refused the stranger (%llu)",
                 (unsigned long long)refused);
  /* A plaintext client on a CURVE link cannot even handshake. */
  void *plain = s_raw_client(zctx, g.eps[0], NULL, NULL, NULL);
  s_raw_send(plain, hb, PARALLEL_ZMQ_HEADER_BYTES, &payload, sizeof payload);
  int rc = parallel_comm_recv(g.comms[0], 1, 7, &v, sizeof v, &got);
  WT_TEST_ASSERT(rc == WT_ETIMEOUT, "nothing from the stranger or the plaintext client: rc %d", rc);
  zmq_close(stranger);
  zmq_close(plain);
  zmq_ctx_term(zctx);
  s_group_close(&g);
}

/* ---- a peer that dies or goes silent, across processes -------------------------------------- */

typedef struct {
  int victim; /* the rank that misbehaves */
  int silent; /* 1: it sleeps (stuck); 0: it dies (_exit) */
  double elapsed[4];
  int rc[4];
  char err[4][400];
} s_fault_shared;

static int s_fault_fn(parallel_comm *c, void *arg) {
  s_fault_shared *sh = arg;
  int me = parallel_comm_rank(c);
  float x[1000];
  for (int i = 0; i < 1000; i++) x[i] = (float)(me + i);
  double t0 = wt_now_s();
  int rc = parallel_allreduce(c, x, 1000, PARALLEL_OP_SUM); /* step 1 works */
  if (rc == WT_OK && me == sh->victim) {
    usleep(200000);            /* its step-1 messages leave */
    if (!sh->silent) _exit(9); /* dies mid-step, without a goodbye */
    sleep(4);                  /* stuck: neither sends nor leaves */
    return WT_OK;
  }
  if (rc == WT_OK) {
    t0 = wt_now_s();
    rc = parallel_allreduce(c, x, 1000, PARALLEL_OP_SUM);
  }
  sh->elapsed[me] = wt_now_s() - t0;
  sh->rc[me] = rc;
  snprintf(sh->err[me], sizeof sh->err[me], "%s", rc ? wt_last_error() : "");
  return rc;
}

static void s_fault_case(int silent) {
  s_fault_shared *sh =
      mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  WT_TEST_REQUIRE(sh != MAP_FAILED, "mmap");
  memset(sh, 0, sizeof *sh);
  sh->victim = 2;
  sh->silent = silent;
  parallel_zmq_config base = parallel_zmq_config_default();
  base.timeout_s = silent ? 1.5 : 20;
  int rcs[4];
  double t0 = wt_now_s();
  parallel_zmq_fork_run(4, &base, s_fault_fn, sh, rcs);
  double total = wt_now_s() - t0;
  const char *what = silent ? "silent peer" : "dead peer";
  for (int r = 0; r < 4; r++) {
    if (r == sh->victim) {
      WT_TEST_ASSERT(silent ? rcs[r] == WT_OK : rcs[r] != WT_OK, "%s: victim rc %d", what, rcs[r]);
      continue;
    }
    WT_TEST_ASSERT(sh->rc[r] == WT_EIO || sh->rc[r] == WT_ETIMEOUT, "%s: rank %d rc %d (%s)", what,
                   r, sh->rc[r], sh->err[r]);
    /* A death is noticed from the connection, long before the 20 s deadline; a stuck peer at
     * its deadline (the ranks that wait on someone who already gave up may add one more). */
    double bound = silent ? 2 * base.timeout_s + 2 : 8;
    WT_TEST_ASSERT(sh->elapsed[r] < bound, "%s: rank %d failed after %.2f s (bound %.1f)", what, r,
                   sh->elapsed[r], bound);
    WT_TEST_ASSERT(strstr(sh->err[r], "rank") && strstr(sh->err[r], "tcp://127.0.0.1:"),
                   "%s: rank %d's error names a peer and its endpoint: %s", what, r, sh->err[r]);
  }
  /* Rank 3 receives from rank 2 in the ring: its error is about rank 2 itself. */
  WT_TEST_ASSERT(strstr(sh->err[3], "rank 2"), "%s: rank 3 names rank 2: %s", what, sh->err[3]);
  if (!silent)
    WT_TEST_ASSERT(sh->rc[3] == WT_EIO && strstr(sh->err[3], "dropped"),
                   "death is reported as a dropped connection: %s", sh->err[3]);
  printf("%s: others failed in %.2f/%.2f/%.2f s (deadline %.1f s), group done in %.1f s\n", what,
         sh->elapsed[0], sh->elapsed[1], sh->elapsed[3], base.timeout_s, total);
  munmap(sh, sizeof *sh);
}

int main(void) {
  signal(SIGPIPE, SIG_IGN);
  test_bad_frames();
  s_fault_case(0);
  s_fault_case(1);
  if (wt_test_failures) fprintf(stderr, "test_zmq_faults: %d failure(s)\n", wt_test_failures);
  return wt_test_failures ? 1 : 0;
}
