/* test_zmq_p2p — the ZeroMQ transport's point-to-point contract, on threads of one process with
 * one transport (context, sockets, CURVE key pair) each: per (peer, tag) order with demux of
 * other tags, empty and large messages, refusal of an oversized message, barrier, the
 * zero-copy send_owned / recv_view paths, the message
 * context in the header (seen in a refusal), per-link counters, several streams per link (order
 * restored), config errors, key files, ipc endpoints, and the insecure warning. */
#include "parallel/transport/zmq.h"

#include "common/common.h"
#include "common/testing.h"
#include "tests/transport/harness.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

/* Rank 0 sends 100 numbered ints alternating tags 1 and 2 to every other rank; each receiver
 * takes all of tag 2 first, then tag 1: order holds within a tag, other tags wait. */
static int s_order_fn(parallel_comm *c, void *arg) {
  (void)arg;
  int me = parallel_comm_rank(c), p = parallel_comm_size(c);
  if (me == 0) {
    for (int i = 0; i < 100; i++)
      for (int r = 1; r < p; r++) WT_CHECK(parallel_comm_send(c, r, 1 + i % 2, &i, sizeof i));
    return WT_OK;
  }
  for (int tag = 2; tag >= 1; tag--)
    for (int want = tag == 1 ? 0 : 1; want < 100; want += 2) {
      int v = -1;
      size_t got = 0;
      WT_CHECK(parallel_comm_recv(c, 0, tag, &v, sizeof v, &got));
      if (got != sizeof v || v != want)
        return wt_fail(WT_ECORRUPT, "rank %d tag %d: got %d want %d", me, tag, v, want);
    }
  return WT_OK;
}

/* Sizes 0, 1 and 5 MiB + 3 in both directions, then a message longer than the receive
 * capacity (refused, consumed: the next message still arrives), then a barrier. */
static int s_sizes_fn(parallel_comm *c, void *arg) {
  (void)arg;
  int me = parallel_comm_rank(c), peer = 1 - me;
  size_t big = ((size_t)5 << 20) + 3;
  uint8_t *buf = wt_xmalloc(big), *in = wt_xmalloc(big);
  for (size_t i = 0; i < big; i++) buf[i] = (uint8_t)(i * 7 + (size_t)me);
  size_t sizes[3] = {0, 1, big}, got = 99;
  int rc = WT_OK;
  for (int k = 0; k < 3 && rc == WT_OK; k++) {
    rc = parallel_comm_send(c, peer, 10 + k, buf, sizes[k]);
    if (rc == WT_OK) rc = parallel_comm_recv(c, peer, 10 + k, in, big, &got);
    if (rc == WT_OK && got != sizes[k])
      rc = wt_fail(WT_ECORRUPT, "size %zu got %zu", sizes[k], got);
    for (size_t i = 0; rc == WT_OK && i < got; i++)
      if (in[i] != (uint8_t)(i * 7 + (size_t)peer)) rc = wt_fail(WT_ECORRUPT, "byte %zu", i);
  }
  if (rc == WT_OK) rc = parallel_comm_send(c, peer, 20, buf, 64);
  if (rc == WT_OK) rc = parallel_comm_send(c, peer, 20, buf, 8);
  if (rc == WT_OK) {
    int r1 = parallel_comm_recv(c, peer, 20, in, 16, &got);
    if (r1 != WT_EMISMATCH || !strstr(wt_last_error(), "64 bytes"))
      rc = wt_fail(WT_ECORRUPT, "oversized message: rc %d, '%s'", r1, wt_last_error());
  }
  if (rc == WT_OK) rc = parallel_comm_recv(c, peer, 20, in, 16, &got);
  if (rc == WT_OK && got != 8) rc = wt_fail(WT_ECORRUPT, "after a refused message got %zu", got);
  if (rc == WT_OK) rc = parallel_comm_barrier(c);
  free(buf);
  free(in);
  return rc;
}

static void test_order_sizes_barrier(void) {
  parallel_zmq_config base = parallel_zmq_config_default();
  base.timeout_s = 20;
  s_group g;
  WT_TEST_REQUIRE(s_group_open(&g, 3, &base, NULL, NULL) == WT_OK, "%s", wt_last_error());
  WT_TEST_ASSERT(s_group_run(&g, s_order_fn, NULL, NULL, NULL) == WT_OK, "order and tags");
  parallel_zmq_link_stats st = parallel_zmq_link_stats_get(g.comms[0], 1);
  WT_TEST_ASSERT(st.msgs_sent == 100 && st.bytes_sent == 100 * sizeof(int),
                 "counters 0->1: %llu msgs %llu bytes", (unsigned long long)st.msgs_sent,
                 (unsigned long long)st.bytes_sent);
  st = parallel_zmq_link_stats_get(g.comms[2], 0);
  WT_TEST_ASSERT(st.msgs_recv == 100 && st.bytes_recv == 100 * sizeof(int),
                 "counters 2<-0: %llu msgs", (unsigned long long)st.msgs_recv);
  WT_TEST_ASSERT(parallel_zmq_refused(g.comms[1]) == 0, "nothing refused");
  s_group_close(&g);

  WT_TEST_REQUIRE(s_group_open(&g, 2, &base, NULL, NULL) == WT_OK, "%s", wt_last_error());
  WT_TEST_ASSERT(s_group_run(&g, s_sizes_fn, NULL, NULL, NULL) == WT_OK, "sizes and barrier");
  s_group_close(&g);
}

/* Several streams per link: rank 0 streams messages of 17 B to 2 MiB + 5 (chunked: 1 MiB
 * chunks spread over the streams) and frames sent with send_gather; rank 1 must see every one,
 * in order, byte for byte, although the streams deliver them out of counter order. */
#define S_STREAM_MSGS 120
static size_t s_stream_size(int i) {
  static const size_t sizes[4] = {17, 65536, 300000, ((size_t)2 << 20) + 5};
  return sizes[i % 4];
}

static int s_streams_fn(parallel_comm *c, void *arg) {
  (void)arg;
  size_t cap = s_stream_size(3) + 64;
  uint8_t *buf = wt_xmalloc(cap);
  int rc = WT_OK;
  for (int i = 0; i < S_STREAM_MSGS && rc == WT_OK; i++) {
    size_t n = s_stream_size(i), got = 0;
    if (parallel_comm_rank(c) == 0) {
      for (size_t k = 0; k < n; k++) buf[k] = (uint8_t)(k * 13 + (size_t)i);
      rc = i % 3 ? parallel_comm_send(c, 1, 7, buf, n)
                 : parallel_comm_send_gather(c, 1, 7, buf, 5, buf + 5, n - 5);
      continue;
    }
    rc = parallel_comm_recv(c, 0, 7, buf, cap, &got);
    if (rc == WT_OK && got != n)
      rc = wt_fail(WT_ECORRUPT, "message %d: %zu bytes, not %zu", i, got, n);
    for (size_t k = 0; rc == WT_OK && k < n; k++)
      if (buf[k] != (uint8_t)(k * 13 + (size_t)i))
        rc = wt_fail(WT_ECORRUPT, "message %d byte %zu", i, k);
  }
  if (rc == WT_OK) rc = parallel_comm_barrier(c);
  free(buf);
  return rc;
}

static void test_streams(void) {
  parallel_zmq_config base = parallel_zmq_config_default();
  base.timeout_s = 20;
  base.streams = 3;
  s_group g;
  WT_TEST_REQUIRE(s_group_open(&g, 2, &base, NULL, NULL) == WT_OK, "%s", wt_last_error());
  WT_TEST_ASSERT(s_group_run(&g, s_streams_fn, NULL, NULL, NULL) == WT_OK, "three streams: %s",
                 wt_last_error());
  parallel_zmq_link_stats st = parallel_zmq_link_stats_get(g.comms[1], 0);
  WT_TEST_ASSERT(parallel_zmq_refused(g.comms[1]) == 0, "nothing refused");
  WT_TEST_ASSERT(st.msgs_recv == S_STREAM_MSGS + 1,
                 "all %d messages (and the barrier's) taken: %llu", S_STREAM_MSGS,
                 (unsigned long long)st.msgs_recv);
  /* 80–110 of the ~300 messages and chunks in this test's runs: the reordering is exercised. */
  WT_TEST_ASSERT(st.msgs_held > 0, "some came ahead of their turn on another stream");
  s_group_close(&g);
}

/* The zero-copy paths: send_owned gives the transport a buffer; recv_view hands a message of
 * one part (up to 1 MiB unshaped) out in ZeroMQ's memory with a handle, and copies a larger one
 * (several parts) into the caller's buffer; a too-small buffer is refused and the next message
 * still arrives. */
static int s_view_fn(parallel_comm *c, void *arg) {
  (void)arg;
  int me = parallel_comm_rank(c), peer = 1 - me;
  size_t sizes[3] = {1000, (size_t)1 << 20, ((size_t)3 << 20) + 5}, big = sizes[2];
  uint8_t *in = wt_xmalloc(big);
  int rc = WT_OK;
  for (int k = 0; k < 3 && rc == WT_OK; k++) {
    uint8_t *out = wt_xmalloc(sizes[k]);
    for (size_t i = 0; i < sizes[k]; i++) out[i] = (uint8_t)(i * 11 + (size_t)me + (size_t)k);
    rc = parallel_comm_send_owned(c, peer, 30 + k, out, sizes[k]);
    const void *data = NULL;
    void *handle = NULL;
    size_t got = 0;
    if (rc == WT_OK) rc = parallel_comm_recv_view(c, peer, 30 + k, in, big, &data, &got, &handle);
    if (rc == WT_OK && (got != sizes[k] || (k < 2) != (handle != NULL) ||
                        (handle != NULL) == (data == in)))
      rc = wt_fail(WT_ECORRUPT, "view of %zu bytes: got %zu, handle %p, in place %d", sizes[k],
                   got, handle, data != in);
    for (size_t i = 0; rc == WT_OK && i < got; i++)
      if (((const uint8_t *)data)[i] != (uint8_t)(i * 11 + (size_t)peer + (size_t)k))
        rc = wt_fail(WT_ECORRUPT, "view of %zu bytes: byte %zu", sizes[k], i);
    parallel_comm_release(c, handle);
  }
  if (rc == WT_OK) {
    uint8_t *out = wt_xmalloc(64), *out2 = wt_xmalloc(8);
    memset(out, 1, 64), memset(out2, 2, 8);
    rc = parallel_comm_send_owned(c, peer, 40, out, 64);
    if (rc == WT_OK) rc = parallel_comm_send_owned(c, peer, 40, out2, 8);
    else free(out2);
  }
  if (rc == WT_OK) {
    const void *data = NULL;
    void *handle = NULL;
    size_t got = 0;
    int r1 = parallel_comm_recv_view(c, peer, 40, in, 16, &data, &got, &handle);
    if (r1 != WT_EMISMATCH || handle)
      rc = wt_fail(WT_ECORRUPT, "oversized view: rc %d, '%s'", r1, wt_last_error());
    if (rc == WT_OK) rc = parallel_comm_recv_view(c, peer, 40, in, 16, &data, &got, &handle);
    if (rc == WT_OK && (got != 8 || ((const uint8_t *)data)[7] != 2))
      rc = wt_fail(WT_ECORRUPT, "after a refused view got %zu", got);
    parallel_comm_release(c, handle);
  }
  if (rc == WT_OK) rc = parallel_comm_barrier(c);
  free(in);
  return rc;
}

static void test_views(void) {
  parallel_zmq_config base = parallel_zmq_config_default();
  base.timeout_s = 20;
  s_group g;
  WT_TEST_REQUIRE(s_group_open(&g, 2, &base, NULL, NULL) == WT_OK, "%s", wt_last_error());
  WT_TEST_ASSERT(s_group_run(&g, s_view_fn, NULL, NULL, NULL) == WT_OK, "send_owned / recv_view");
  s_group_close(&g);
}

/* A send queue of 4 KiB and 300 messages of 1 KiB: send blocks and resumes as the link drains,
 * and every message arrives intact. */
static int s_bounded_fn(parallel_comm *c, void *arg) {
  (void)arg;
  uint8_t buf[1024];
  for (int i = 0; i < 300; i++) {
    size_t got = 0;
    if (parallel_comm_rank(c) == 0) {
      memset(buf, i & 0xff, sizeof buf);
      WT_CHECK(parallel_comm_send(c, 1, 7, buf, sizeof buf));
    } else {
      WT_CHECK(parallel_comm_recv(c, 0, 7, buf, sizeof buf, &got));
      if (got != sizeof buf || buf[0] != (i & 0xff) || buf[1023] != (i & 0xff))
        return wt_fail(WT_ECORRUPT, "message %d damaged", i);
    }
  }
  return WT_OK;
}

static void test_bounded_queue(void) {
  parallel_zmq_config base = parallel_zmq_config_default();
  base.timeout_s = 20;
  base.max_queue_bytes = 4096;
  s_group g;
  WT_TEST_REQUIRE(s_group_open(&g, 2, &base, NULL, NULL) == WT_OK, "%s", wt_last_error());
  WT_TEST_ASSERT(s_group_run(&g, s_bounded_fn, NULL, NULL, NULL) == WT_OK, "bounded queue");
  s_group_close(&g);
}

/* Rank 0 of a group joins with another epoch (a process of another assignment). */
static void s_epoch9(int rank, parallel_zmq_config *cfg, void *user) {
  (void)user;
  if (rank == 0) cfg->epoch = 9;
}

/* Runs fn with stderr captured into text (cap bytes). */
static void s_capture_stderr(void (*fn)(void *), void *arg, char *text, size_t cap) {
  char logp[] = "/tmp/wt_zmq_logXXXXXX";
  int lfd = mkstemp(logp);
  WT_TEST_REQUIRE(lfd >= 0, "mkstemp");
  fflush(stderr);
  int saved = dup(2);
  dup2(lfd, 2);
  fn(arg);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  lseek(lfd, 0, SEEK_SET);
  ssize_t n = read(lfd, text, cap - 1);
  text[n > 0 ? n : 0] = 0;
  close(lfd);
  unlink(logp);
}

static void s_send_foreign_epoch(void *arg) {
  s_group *g = arg;
  parallel_zmq_msg_context ctx = {PARALLEL_ZMQ_KIND_ACTIVATION, 2, 17, 3, 5};
  WT_TEST_ASSERT(parallel_zmq_set_context(g->comms[0], &ctx) == WT_OK, "%s", wt_last_error());
  int v = 42;
  WT_TEST_ASSERT(parallel_comm_send(g->comms[0], 1, 3, &v, sizeof v) == WT_OK, "send");
  double end = wt_now_s() + 5;
  while (parallel_zmq_refused(g->comms[1]) < 1 && wt_now_s() < end) usleep(10000);
}

/* The message context travels in the header: a message from another epoch is refused, and the
 * refusal names the step, micro-batch and tensor its sender set. The setter checks its input,
 * and a receive that times out names the peer, its endpoint, the tag and this rank's step. */
static void test_context(void) {
  parallel_zmq_config base = parallel_zmq_config_default();
  base.timeout_s = 10;
  base.epoch = 3;
  s_group g;
  WT_TEST_REQUIRE(s_group_open(&g, 2, &base, s_epoch9, NULL) == WT_OK, "%s", wt_last_error());
  parallel_zmq_msg_context bad = {PARALLEL_ZMQ_KIND_BYE, 0, 0, 0, 0};
  WT_TEST_ASSERT(parallel_zmq_set_context(g.comms[0], &bad) == WT_EINVAL, "BYE is reserved");
  bad.kind = PARALLEL_ZMQ_KIND_DATA;
  bad.codec = PARALLEL_ZMQ_CODEC_MAX + 1;
  WT_TEST_ASSERT(parallel_zmq_set_context(g.comms[0], &bad) == WT_EINVAL, "codec range");
  char text[4096];
  s_capture_stderr(s_send_foreign_epoch, &g, text, sizeof text);
  WT_TEST_ASSERT(parallel_zmq_refused(g.comms[1]) == 1, "the foreign epoch was refused");
  WT_TEST_ASSERT(strstr(text, "wrong epoch") && strstr(text, "epoch 9 step 17 micro-batch 3 "
                                                             "tensor 5"),
                 "the refusal shows the sender's context: '%s'", text);
  s_group_close(&g);

  base.timeout_s = 0.3;
  WT_TEST_REQUIRE(s_group_open(&g, 2, &base, NULL, NULL) == WT_OK, "%s", wt_last_error());
  parallel_zmq_msg_context ctx = {PARALLEL_ZMQ_KIND_DATA, 0, 99, 0, 0};
  parallel_zmq_set_context(g.comms[1], &ctx);
  int w = 0;
  size_t got = 0;
  double t0 = wt_now_s();
  int rc = parallel_comm_recv(g.comms[1], 0, 4, &w, sizeof w, &got);
  double dt = wt_now_s() - t0;
  WT_TEST_ASSERT(rc == WT_ETIMEOUT, "silent peer gives a timeout, rc %d", rc);
  WT_TEST_ASSERT(dt >= 0.25 && dt < 3.0, "timeout took %.2f s for a 0.3 s deadline", dt);
  const char *e = wt_last_error();
  WT_TEST_ASSERT(strstr(e, "rank 0") && strstr(e, g.eps[0]) && strstr(e, "tag 4") &&
                     strstr(e, "step 99"),
                 "message names peer, endpoint, tag and step: %s", e);
  s_group_close(&g);
}

static void test_config_errors(void) {
  const char *eps[2] = {"tcp://127.0.0.1:*", "tcp://127.0.0.1:1"};
  parallel_zmq_config cfg = parallel_zmq_config_default();
  cfg.size = 2;
  cfg.endpoints = eps;
  WT_TEST_ASSERT(!parallel_zmq_comm_new(&cfg) && strstr(wt_last_error(), "key pair"),
                 "no keys and not insecure is refused, not a silent fallback: %s", wt_last_error());
  cfg.insecure = 1;
  cfg.rank = 2;
  WT_TEST_ASSERT(!parallel_zmq_comm_new(&cfg) && strstr(wt_last_error(), "rank 2"), "rank: %s",
                 wt_last_error());
  cfg.rank = 0;
  cfg.timeout_s = 0;
  WT_TEST_ASSERT(!parallel_zmq_comm_new(&cfg) && strstr(wt_last_error(), "timeout"), "%s",
                 wt_last_error());
  cfg.timeout_s = 1;
  const char *bad_eps[2] = {"nonsense://x", "tcp://127.0.0.1:1"};
  cfg.endpoints = bad_eps;
  WT_TEST_ASSERT(!parallel_zmq_comm_new(&cfg) && strstr(wt_last_error(), "nonsense://x"),
                 "bad endpoint named: %s", wt_last_error());
  double lat[2] = {0, -1};
  cfg.endpoints = eps;
  cfg.latency_s = lat;
  WT_TEST_ASSERT(!parallel_zmq_comm_new(&cfg) && strstr(wt_last_error(), "latency"), "%s",
                 wt_last_error());
  WT_TEST_ASSERT(parallel_zmq_set_context(NULL, &(parallel_zmq_msg_context){1, 0, 0, 0, 0}) ==
                     WT_EINVAL,
                 "set_context on a non-zmq comm");
  cfg.latency_s = NULL;
  cfg.streams = 9;
  WT_TEST_ASSERT(!parallel_zmq_comm_new(&cfg) && strstr(wt_last_error(), "streams 9"), "%s",
                 wt_last_error());
  cfg.streams = 2; /* still insecure */
  WT_TEST_ASSERT(!parallel_zmq_comm_new(&cfg) && strstr(wt_last_error(), "needs sealed links"),
                 "%s", wt_last_error());
}

static void test_keys(void) {
  char dir[] = "/tmp/wt_zmq_keysXXXXXX";
  WT_TEST_REQUIRE(mkdtemp(dir), "mkdtemp");
  char path[256], pub[41], sec[41], pub2[41], sec2[41];
  snprintf(path, sizeof path, "%s/rank0.key", dir);
  WT_TEST_REQUIRE(parallel_zmq_keypair_new(pub, sec) == WT_OK, "%s", wt_last_error());
  WT_TEST_ASSERT(parallel_zmq_keypair_save(path, pub, sec) == WT_OK, "%s", wt_last_error());
  struct stat st;
  WT_TEST_ASSERT(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600, "mode %o",
                 (unsigned)(st.st_mode & 0777));
  WT_TEST_ASSERT(parallel_zmq_keypair_load(path, pub2, sec2) == WT_OK && strcmp(pub, pub2) == 0 &&
                     strcmp(sec, sec2) == 0,
                 "round trip: %s", wt_last_error());
  chmod(path, 0644);
  WT_TEST_ASSERT(parallel_zmq_keypair_load(path, pub2, sec2) == WT_EINVAL &&
                     strstr(wt_last_error(), "chmod 600"),
                 "world-readable key refused: %s", wt_last_error());
  /* A public key from another pair does not belong to this secret. */
  char other_pub[41], other_sec[41];
  parallel_zmq_keypair_new(other_pub, other_sec);
  parallel_zmq_keypair_save(path, other_pub, sec);
  WT_TEST_ASSERT(parallel_zmq_keypair_load(path, pub2, sec2) == WT_EMISMATCH, "%s",
                 wt_last_error());
  int fd = open(path, O_WRONLY | O_TRUNC);
  WT_TEST_ASSERT(fd >= 0 && write(fd, "public abc\n", 11) == 11, "truncate");
  close(fd);
  WT_TEST_ASSERT(parallel_zmq_keypair_load(path, pub2, sec2) == WT_ECORRUPT, "%s", wt_last_error());
  snprintf(path, sizeof path, "%s/missing.key", dir);
  WT_TEST_ASSERT(parallel_zmq_keypair_load(path, pub2, sec2) == WT_ENOTFOUND, "%s",
                 wt_last_error());
  snprintf(path, sizeof path, "%s/rank0.key", dir);
  unlink(path);
  rmdir(dir);
}

typedef struct {
  s_group g;
  int rc;
} s_insecure;

static void s_open_insecure(void *arg) {
  s_insecure *x = arg;
  parallel_zmq_config base = parallel_zmq_config_default();
  base.insecure = 1;
  base.timeout_s = 10;
  x->rc = s_group_open(&x->g, 2, &base, NULL, NULL);
}

/* insecure = 1 works (small and chunked messages) and says so on stderr, once per rank. */
static void test_insecure_warns(void) {
  s_insecure x;
  char text[4096];
  s_capture_stderr(s_open_insecure, &x, text, sizeof text);
  WT_TEST_REQUIRE(x.rc == WT_OK, "%s", wt_last_error());
  int v = 7, w = 0;
  size_t got;
  WT_TEST_ASSERT(parallel_comm_send(x.g.comms[0], 1, 1, &v, sizeof v) == WT_OK &&
                     parallel_comm_recv(x.g.comms[1], 0, 1, &w, sizeof w, &got) == WT_OK && w == 7,
                 "insecure link carries data: %s", wt_last_error());
  /* Over 1 MiB a payload crosses as plaintext chunks, put together in order. */
  size_t big = ((size_t)5 << 20) + 3;
  uint8_t *out = wt_xmalloc(big), *in = wt_xcalloc(1, big);
  for (size_t i = 0; i < big; i++) out[i] = (uint8_t)(i * 13 + i / 4099);
  WT_TEST_ASSERT(parallel_comm_send(x.g.comms[0], 1, 2, out, big) == WT_OK &&
                     parallel_comm_recv(x.g.comms[1], 0, 2, in, big, &got) == WT_OK &&
                     got == big && memcmp(in, out, big) == 0,
                 "a 5 MiB + 3 message crosses an insecure link intact: %s", wt_last_error());
  free(out);
  free(in);
  s_group_close(&x.g);
  WT_TEST_ASSERT(strstr(text, "INSECURE") && strstr(text, "rank 0") && strstr(text, "rank 1"),
                 "each rank warns: '%s'", text);
}

/* ipc:// endpoints on one host, through parallel_zmq_comm_new with concrete endpoints. */
typedef struct {
  const char *eps[2];
  char pub[2][41], sec[2][41];
  const char *pubs[2];
} s_ipc;

static int s_ipc_rank_fn(parallel_comm *c, void *arg);

static void *s_ipc_thread(void *p) {
  s_ipc *ipc = ((void **)p)[0];
  intptr_t rank = (intptr_t)((void **)p)[1];
  parallel_zmq_config cfg = parallel_zmq_config_default();
  cfg.rank = (int)rank;
  cfg.size = 2;
  cfg.endpoints = ipc->eps;
  cfg.timeout_s = 10;
  cfg.secret_key = ipc->sec[rank];
  cfg.public_key = ipc->pub[rank];
  cfg.peer_public_keys = ipc->pubs;
  parallel_comm *c = parallel_zmq_comm_new(&cfg);
  intptr_t rc = c ? s_ipc_rank_fn(c, NULL) : WT_EIO;
  if (rc != WT_OK) fprintf(stderr, "ipc rank %d: %s\n", (int)rank, wt_last_error());
  parallel_comm_destroy(&c);
  return (void *)rc;
}

static int s_ipc_rank_fn(parallel_comm *c, void *arg) {
  (void)arg;
  int me = parallel_comm_rank(c), v = 100 + me, w = 0;
  size_t got = 0;
  WT_CHECK(parallel_comm_send(c, 1 - me, 9, &v, sizeof v));
  WT_CHECK(parallel_comm_recv(c, 1 - me, 9, &w, sizeof w, &got));
  if (got != sizeof w || w != 101 - me) return wt_fail(WT_ECORRUPT, "ipc: got %d", w);
  return parallel_comm_barrier(c);
}

static void test_ipc(void) {
  char dir[] = "/tmp/wt_zmq_ipcXXXXXX";
  WT_TEST_REQUIRE(mkdtemp(dir), "mkdtemp");
  char ep0[128], ep1[128];
  snprintf(ep0, sizeof ep0, "ipc://%s/r0", dir);
  snprintf(ep1, sizeof ep1, "ipc://%s/r1", dir);
  s_ipc ipc = {.eps = {ep0, ep1}};
  for (int r = 0; r < 2; r++) {
    parallel_zmq_keypair_new(ipc.pub[r], ipc.sec[r]);
    ipc.pubs[r] = ipc.pub[r];
  }
  pthread_t th[2];
  void *args[2][2] = {{&ipc, (void *)0}, {&ipc, (void *)1}};
  for (int r = 0; r < 2; r++) pthread_create(&th[r], NULL, s_ipc_thread, args[r]);
  for (int r = 0; r < 2; r++) {
    void *rc = NULL;
    pthread_join(th[r], &rc);
    WT_TEST_ASSERT(rc == (void *)WT_OK, "ipc rank %d rc %ld", r, (long)(intptr_t)rc);
  }
  char path[160];
  snprintf(path, sizeof path, "%s/r0", dir);
  unlink(path);
  snprintf(path, sizeof path, "%s/r1", dir);
  unlink(path);
  rmdir(dir);
}

int main(void) {
  test_ipc();
  test_order_sizes_barrier();
  test_streams();
  test_views();
  test_bounded_queue();
  test_context();
  test_config_errors();
  test_keys();
  test_insecure_warns();
  if (wt_test_failures) fprintf(stderr, "test_zmq_p2p: %d failure(s)\n", wt_test_failures);
  return wt_test_failures ? 1 : 0;
}
