/* test_zmq_faults — what the ZeroMQ transport does when the outside misbehaves:
 *  - malformed or foreign frames (an older protocol version, bad magic, kind, codec, flags, run
 *    id, epoch, length, a short header, a source rank outside the group or the receiver's own,
 *    a plaintext message on a sealed link, a forged tag, a flood of payload frames) sent with a
 *    raw socket are refused, logged and counted, and the rank goes on receiving good messages;
 *  - a hello from a key outside the group is refused: nothing of a stranger's is delivered;
 *  - on the wire between two ranks (a tap that relays rank 1's frames to rank 0), a flipped
 *    payload or header byte, a replayed message, two messages swapped, and in a large message
 *    sent as chunks a chunk dropped (the last one, one in the middle), two chunks swapped, a
 *    chunk one byte short or without its tag are each refused and counted (with the chunks
 *    that then belong to no message), and the good messages around them arrive; on a paced
 *    link, where a large message stays one multipart message, a part dropped, a part one byte
 *    short, no trailer and two parts swapped are each refused; after the sender restarts with
 *    the same keys its new session works, and the old session's message and hello are refused;
 *    with two streams per link, frames crossing out of order are put back in order while a
 *    replay, a flipped byte and a chunk cut out are still refused; messages sealed at enqueue
 *    for a peer that restarts before they leave are sealed again for its new session;
 *  - a peer process that dies mid-step makes every other process fail with a clear error well
 *    within the deadline; a silent (stuck) peer makes them fail at the deadline, never hang. */
#include "parallel/collectives/collectives.h"
#include "parallel/transport/zmq.h"
#include "parallel/transport/zmq_aead.h"
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
                           .flags = PARALLEL_ZMQ_FLAG_SEALED,
                           .run_id = 77,
                           .epoch = 3,
                           .src_rank = src,
                           .tag = tag,
                           .length = len,
                           .counter = 1000}; /* ahead of the link's: only the tag can refuse */
  return h;
}

/* Sends header bytes (possibly damaged), a payload and a trailer (when tlen > 0) as one
 * multipart message. */
static void s_raw_send(void *sock, const uint8_t *header, size_t hlen, const void *payload,
                       size_t plen, const uint8_t *trailer, size_t tlen) {
  zmq_send(sock, header, hlen, plen || tlen ? ZMQ_SNDMORE : 0);
  if (plen) zmq_send(sock, payload, plen, tlen ? ZMQ_SNDMORE : 0);
  if (tlen) zmq_send(sock, trailer, tlen, 0);
}

/* A plain ZMTP client: the data links run no CURVE, the seal inside the frames protects them. */
static void *s_raw_client(void *zctx, const char *endpoint) {
  void *s = zmq_socket(zctx, ZMQ_PUSH);
  int linger = 1000;
  zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
  zmq_connect(s, endpoint);
  return s;
}

/* Waits until the refused counter reaches `want` (the receiver thread works asynchronously). */
static uint64_t s_wait_refused(parallel_comm *c, uint64_t want) {
  double end = wt_now_s() + 5;
  while (parallel_zmq_refused(c) < want && wt_now_s() < end) usleep(10000);
  return parallel_zmq_refused(c);
}

/* Redirects stderr to a temp file until s_capture_end, which reads it into text. */
static int s_capture_begin(int *saved) {
  char path[] = "/tmp/wt-faults-XXXXXX";
  int fd = mkstemp(path);
  unlink(path);
  fflush(stderr);
  *saved = dup(2);
  dup2(fd, 2);
  return fd;
}

static void s_capture_end(int fd, int saved, char *text, size_t cap) {
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  lseek(fd, 0, SEEK_SET);
  ssize_t n = read(fd, text, cap - 1);
  text[n > 0 ? n : 0] = 0;
  close(fd);
}

static void test_bad_frames(void) {
  parallel_zmq_config base = parallel_zmq_config_default();
  base.run_id = 77;
  base.epoch = 3;
  base.timeout_s = 1;
  s_group g;
  WT_TEST_REQUIRE(s_group_open(&g, 3, &base, NULL, NULL) == WT_OK, "%s", wt_last_error());
  /* Sessions first: a sealed frame before its claimed sender's hello is refused for that. */
  uint32_t payload = 0xabcd, v = 0;
  size_t got = 0;
  for (int r = 1; r <= 2; r++)
    WT_TEST_REQUIRE(parallel_comm_send(g.comms[r], 0, 9, &payload, sizeof payload) == WT_OK &&
                        parallel_comm_recv(g.comms[0], r, 9, &v, sizeof v, &got) == WT_OK,
                    "rank %d's session: %s", r, wt_last_error());
  void *zctx = zmq_ctx_new();
  void *raw = s_raw_client(zctx, g.eps[0]);
  uint8_t tag[PARALLEL_ZMQ_TAG_BYTES] = {0};
  uint8_t hb[PARALLEL_ZMQ_HEADER_BYTES + 1];
  struct {
    const char *what;
    int offset; /* byte to overwrite, -1 for none */
    uint8_t value;
    parallel_zmq_header h;
    size_t hlen;
  } cases[] = {
      {"protocol version older than this build", 4, 1, s_good_header(1, 5, 4),
       PARALLEL_ZMQ_HEADER_BYTES},
      {"bad magic", 0, 'X', s_good_header(1, 5, 4), PARALLEL_ZMQ_HEADER_BYTES},
      {"unknown message kind", 5, 77, s_good_header(1, 5, 4), PARALLEL_ZMQ_HEADER_BYTES},
      {"unknown codec", 6, 200, s_good_header(1, 5, 4), PARALLEL_ZMQ_HEADER_BYTES},
      {"unknown flags", 7, 0x81, s_good_header(1, 5, 4), PARALLEL_ZMQ_HEADER_BYTES},
      {"FIRST without CHUNK", 7, PARALLEL_ZMQ_FLAG_SEALED | PARALLEL_ZMQ_FLAG_FIRST,
       s_good_header(1, 5, 4), PARALLEL_ZMQ_HEADER_BYTES},
      {"a chunk empty or longer than its payload", 7,
       PARALLEL_ZMQ_FLAG_SEALED | PARALLEL_ZMQ_FLAG_CHUNK | PARALLEL_ZMQ_FLAG_FIRST,
       s_good_header(1, 5, 3), PARALLEL_ZMQ_HEADER_BYTES},
      {"a plaintext message on a sealed link", 7, 0, s_good_header(1, 5, 4),
       PARALLEL_ZMQ_HEADER_BYTES},
      {"wrong run id", 8, 78, s_good_header(1, 5, 4), PARALLEL_ZMQ_HEADER_BYTES},
      {"wrong epoch", 16, 4, s_good_header(1, 5, 4), PARALLEL_ZMQ_HEADER_BYTES},
      {"length does not match", -1, 0, s_good_header(1, 5, 5), PARALLEL_ZMQ_HEADER_BYTES},
      {"length does not match", -1, 0, s_good_header(1, 5, 3), PARALLEL_ZMQ_HEADER_BYTES},
      {"wrong size", -1, 0, s_good_header(1, 5, 4), PARALLEL_ZMQ_HEADER_BYTES - 1},
      {"wrong size", -1, 0, s_good_header(1, 5, 4), PARALLEL_ZMQ_HEADER_BYTES + 1},
      {"the receiver's own rank", -1, 0, s_good_header(0, 5, 4), PARALLEL_ZMQ_HEADER_BYTES},
      {"outside the group", -1, 0, s_good_header(7, 5, 4), PARALLEL_ZMQ_HEADER_BYTES},
      /* A well-formed header but a tag nobody with the key made. */
      {"authentication failed", -1, 0, s_good_header(1, 5, 4), PARALLEL_ZMQ_HEADER_BYTES},
      {"authentication failed", -1, 0, s_good_header(2, 5, 4), PARALLEL_ZMQ_HEADER_BYTES},
  };
  int ncases = (int)WT_ARRAY_LEN(cases);
  char text[16384];
  int saved, fd = s_capture_begin(&saved);
  for (int k = 0; k < ncases; k++) {
    memset(hb, 0, sizeof hb);
    parallel_zmq_header_encode(&cases[k].h, hb);
    if (cases[k].offset >= 0) hb[cases[k].offset] = cases[k].value;
    s_raw_send(raw, hb, cases[k].hlen, &payload, sizeof payload, tag, sizeof tag);
  }
  /* A flood of empty payload frames, more than any sender makes (2^18 + 2). */
  parallel_zmq_header flood = s_good_header(1, 5, 0);
  parallel_zmq_header_encode(&flood, hb);
  zmq_send(raw, hb, PARALLEL_ZMQ_HEADER_BYTES, ZMQ_SNDMORE);
  for (int k = 0; k < (1 << 18) + 1; k++) zmq_send(raw, "", 0, ZMQ_SNDMORE);
  zmq_send(raw, "", 0, 0);
  ncases++;
  uint64_t refused = s_wait_refused(g.comms[0], (uint64_t)ncases);
  /* A hello that claims rank 1 but is MAC'd with a stranger's key: refused, so the stranger
   * never gets a session and nothing it seals can be opened. */
  char opub[41], osec[41];
  parallel_zmq_keypair_new(opub, osec);
  uint8_t spk[32], ssk[32], pk0[32], rx[32], tx[32], body[PARALLEL_ZMQ_HELLO_BYTES] = {0};
  zmq_z85_decode(spk, opub);
  zmq_z85_decode(ssk, osec);
  zmq_z85_decode(pk0, g.pub[0]);
  parallel_zmq_aead_base_keys(rx, tx, 1, 0, spk, ssk, pk0);
  randombytes_buf(body, PARALLEL_ZMQ_RANDOM_BYTES);
  parallel_zmq_header hh = s_good_header(1, 0, sizeof body);
  hh.kind = PARALLEL_ZMQ_KIND_HELLO;
  parallel_zmq_header_encode(&hh, hb);
  parallel_zmq_aead_hello_mac(tag, tx, hb, PARALLEL_ZMQ_HEADER_BYTES, body, sizeof body);
  s_raw_send(raw, hb, PARALLEL_ZMQ_HEADER_BYTES, body, sizeof body, tag, sizeof tag);
  refused = s_wait_refused(g.comms[0], (uint64_t)ncases + 1);
  s_capture_end(fd, saved, text, sizeof text);
  WT_TEST_ASSERT(refused == (uint64_t)ncases + 1, "refused %llu of %d bad frames",
                 (unsigned long long)refused, ncases + 1);
  for (int k = 0; k < ncases - 1; k++)
    WT_TEST_ASSERT(strstr(text, cases[k].what), "the log names '%s': %s", cases[k].what, text);
  WT_TEST_ASSERT(strstr(text, "more payload frames") && strstr(text, "not made with the claimed "
                                                                     "rank's key"),
                 "the flood and the stranger's hello are named: %s", text);
  /* The rank goes on: a good message from rank 1 arrives, and none of the bad ones (all tag 5)
   * is delivered. */
  WT_TEST_ASSERT(parallel_comm_send(g.comms[1], 0, 6, &payload, sizeof payload) == WT_OK, "send");
  WT_TEST_ASSERT(parallel_comm_recv(g.comms[0], 1, 6, &v, sizeof v, &got) == WT_OK && v == payload,
                 "good message after bad ones: %s", wt_last_error());
  WT_TEST_ASSERT(parallel_zmq_link_stats_get(g.comms[0], 1).msgs_recv == 2,
                 "only the good messages were accepted");
  int rc = parallel_comm_recv(g.comms[0], 1, 5, &v, sizeof v, &got);
  WT_TEST_ASSERT(rc == WT_ETIMEOUT, "nothing of the bad frames is delivered: rc %d", rc);
  zmq_close(raw);
  zmq_ctx_term(zctx);
  s_group_close(&g);
}

/* ---- a tap on the wire between two ranks ---------------------------------------------------- */

/* One multipart message as it crossed the wire: its frames' bytes. */
typedef struct {
  int n;
  uint8_t *f[64];
  size_t len[64];
} s_wire_msg;

static void s_wire_free(s_wire_msg *m) {
  for (int i = 0; i < m->n; i++) free(m->f[i]);
  m->n = 0;
}

static void s_wire_put(void *sock, const s_wire_msg *m) {
  for (int i = 0; i < m->n; i++) zmq_send(sock, m->f[i], m->len[i], i + 1 < m->n ? ZMQ_SNDMORE : 0);
}

static s_wire_msg s_first_hello; /* the first hello relayed: an old session's, after a restart */

static void s_wire_copy(s_wire_msg *to, const s_wire_msg *from) {
  to->n = from->n;
  for (int i = 0; i < from->n; i++) {
    to->len[i] = from->len[i];
    to->f[i] = wt_xmalloc(from->len[i] + 1);
    memcpy(to->f[i], from->f[i], from->len[i]);
  }
}

/* Takes the next data message from the tap, relaying hellos (kind 6) untouched. Returns 0, or
 * -1 when nothing came within the socket's receive timeout. */
static int s_wire_take(void *tap, void *relay, s_wire_msg *m) {
  for (;;) {
    m->n = 0;
    int more = 1;
    while (more && m->n < 64) {
      zmq_msg_t f;
      zmq_msg_init(&f);
      if (zmq_msg_recv(&f, tap, 0) < 0) {
        zmq_msg_close(&f);
        s_wire_free(m);
        return -1;
      }
      m->len[m->n] = zmq_msg_size(&f);
      m->f[m->n] = wt_xmalloc(m->len[m->n] + 1);
      memcpy(m->f[m->n], zmq_msg_data(&f), m->len[m->n]);
      m->n++;
      more = zmq_msg_more(&f);
      zmq_msg_close(&f);
    }
    if (m->len[0] < 6 || m->f[0][5] != PARALLEL_ZMQ_KIND_HELLO) return 0;
    if (s_first_hello.n == 0) s_wire_copy(&s_first_hello, m);
    s_wire_put(relay, m);
    s_wire_free(m);
  }
}

/* Takes the n chunks of one large message from the tap. Returns 0, or -1 when one is missing. */
static int s_wire_chunks(void *tap, void *relay, s_wire_msg *ch, int n) {
  for (int k = 0; k < n; k++)
    if (s_wire_take(tap, relay, &ch[k]) != 0) return -1;
  return 0;
}

static void s_wire_chunks_free(s_wire_msg *ch, int n) {
  for (int k = 0; k < n; k++) s_wire_free(&ch[k]);
}

static void test_wire_tap(void) {
  char pub[2][41], sec[2][41];
  const char *pubs[2] = {pub[0], pub[1]};
  parallel_zmq_transport *ts[2];
  char eps[2][256];
  for (int r = 0; r < 2; r++)
    WT_TEST_REQUIRE(parallel_zmq_keypair_new(pub[r], sec[r]) == WT_OK, "keys");
  for (int r = 0; r < 2; r++) {
    parallel_zmq_config cfg = parallel_zmq_config_default();
    const char *bind[2] = {"tcp://127.0.0.1:*", "tcp://127.0.0.1:*"};
    cfg.rank = r, cfg.size = 2, cfg.endpoints = bind, cfg.timeout_s = 5;
    cfg.secret_key = sec[r], cfg.public_key = pub[r], cfg.peer_public_keys = pubs;
    ts[r] = parallel_zmq_transport_new(&cfg);
    WT_TEST_REQUIRE(ts[r], "%s", wt_last_error());
    snprintf(eps[r], sizeof eps[r], "%s", parallel_zmq_transport_endpoint(ts[r]));
  }
  /* Rank 1 talks to the tap, which relays to rank 0; rank 0 talks to rank 1 directly. */
  void *zctx = zmq_ctx_new();
  void *tap = zmq_socket(zctx, ZMQ_PULL);
  int tmo = 5000, zero = 0;
  zmq_setsockopt(tap, ZMQ_RCVTIMEO, &tmo, sizeof tmo);
  zmq_setsockopt(tap, ZMQ_LINGER, &zero, sizeof zero);
  WT_TEST_REQUIRE(zmq_bind(tap, "tcp://127.0.0.1:*") == 0, "bind the tap");
  char tap_ep[256];
  size_t tlen = sizeof tap_ep;
  zmq_getsockopt(tap, ZMQ_LAST_ENDPOINT, tap_ep, &tlen);
  void *relay = s_raw_client(zctx, eps[0]);
  const char *eps0[2] = {eps[0], eps[1]}, *eps1[2] = {tap_ep, eps[1]};
  parallel_comm *c0 = parallel_zmq_transport_connect(&ts[0], eps0);
  parallel_comm *c1 = parallel_zmq_transport_connect(&ts[1], eps1);
  WT_TEST_REQUIRE(c0 && c1, "%s", wt_last_error());

  static uint8_t big[12 << 20], out[12 << 20]; /* 12 chunks of 1 MiB */
  for (size_t i = 0; i < sizeof big; i++) big[i] = (uint8_t)(i * 7);
  uint32_t v = 0x11223344, w = 0;
  size_t got = 0;
  s_wire_msg a, b, c, d;
  char text[16384];
  int saved, fd = s_capture_begin(&saved);
  /* A good message, then the same bytes again: a replay. */
  parallel_comm_send(c1, 0, 5, &v, sizeof v);
  WT_TEST_REQUIRE(s_wire_take(tap, relay, &a) == 0 && a.n == 3, "a sealed message on the wire");
  WT_TEST_ASSERT(memcmp(a.f[1], &v, sizeof v) != 0, "the payload crosses the wire encrypted");
  s_wire_put(relay, &a);
  WT_TEST_ASSERT(parallel_comm_recv(c0, 1, 5, &w, sizeof w, &got) == WT_OK && w == v,
                 "relayed intact it arrives: %s", wt_last_error());
  s_wire_put(relay, &a);
  WT_TEST_ASSERT(s_wait_refused(c0, 1) == 1, "a replayed message is refused");
  /* A flipped payload byte; a flipped header byte (the header is the associated data). */
  parallel_comm_send(c1, 0, 6, &v, sizeof v);
  s_wire_take(tap, relay, &b);
  b.f[1][2] ^= 0x10;
  s_wire_put(relay, &b);
  WT_TEST_ASSERT(s_wait_refused(c0, 2) == 2, "a flipped payload bit is refused");
  b.f[1][2] ^= 0x10;
  b.f[0][28] ^= 0x01; /* the step */
  s_wire_put(relay, &b);
  WT_TEST_ASSERT(s_wait_refused(c0, 3) == 3, "a flipped header bit is refused");
  s_wire_free(&b);
  /* Two messages swapped: the later one is taken, the earlier one is then refused. */
  parallel_comm_send(c1, 0, 7, &v, sizeof v);
  parallel_comm_send(c1, 0, 8, &v, sizeof v);
  s_wire_take(tap, relay, &c);
  s_wire_take(tap, relay, &d);
  s_wire_put(relay, &d);
  s_wire_put(relay, &c);
  WT_TEST_ASSERT(parallel_comm_recv(c0, 1, 8, &w, sizeof w, &got) == WT_OK,
                 "the later one arrives");
  WT_TEST_ASSERT(s_wait_refused(c0, 4) == 4, "the reordered earlier one is refused");
  s_wire_free(&c);
  /* A 12 MiB message crosses as 12 chunks, each its own message: header, part, tag. */
  uint64_t want = 4;
  s_wire_msg ch[12];
  parallel_comm_send(c1, 0, 9, big, sizeof big);
  WT_TEST_REQUIRE(s_wire_chunks(tap, relay, ch, 12) == 0, "12 chunks on the wire");
  for (int k = 0; k < 12; k++)
    WT_TEST_ASSERT(ch[k].n == 3 && ch[k].len[1] == (1 << 20) &&
                       ch[k].f[0][7] == (PARALLEL_ZMQ_FLAG_SEALED | PARALLEL_ZMQ_FLAG_CHUNK |
                                         (k == 0 ? PARALLEL_ZMQ_FLAG_FIRST : 0)),
                   "chunk %d: %d frames, flags 0x%x", k, ch[k].n, ch[k].f[0][7]);
  /* Cut short: the last chunk dropped. The next message shows it (chunks come back to back). */
  for (int k = 0; k < 11; k++) s_wire_put(relay, &ch[k]);
  s_wire_chunks_free(ch, 12);
  parallel_comm_send(c1, 0, 13, &v, sizeof v);
  s_wire_take(tap, relay, &b);
  s_wire_put(relay, &b);
  s_wire_free(&b);
  WT_TEST_ASSERT(parallel_comm_recv(c0, 1, 13, &w, sizeof w, &got) == WT_OK,
                 "the message after the cut one arrives: %s", wt_last_error());
  WT_TEST_ASSERT(s_wait_refused(c0, want + 1) == want + 1, "a message without its last chunk");
  want += 1;
  /* A chunk dropped in the middle: the next one is out of order, the rest have no message. */
  parallel_comm_send(c1, 0, 14, big, sizeof big);
  s_wire_chunks(tap, relay, ch, 12);
  for (int k = 0; k < 12; k++)
    if (k != 5) s_wire_put(relay, &ch[k]);
  s_wire_chunks_free(ch, 12);
  WT_TEST_ASSERT(s_wait_refused(c0, want + 6) == want + 6, "a chunk dropped: 6 refused");
  want += 6;
  /* Two chunks swapped: the later one is out of order, the earlier one then replayed. */
  parallel_comm_send(c1, 0, 15, big, sizeof big);
  s_wire_chunks(tap, relay, ch, 12);
  for (int k = 0; k < 12; k++) s_wire_put(relay, &ch[k == 2 ? 3 : k == 3 ? 2 : k]);
  s_wire_chunks_free(ch, 12);
  WT_TEST_ASSERT(s_wait_refused(c0, want + 10) == want + 10, "swapped chunks: 10 refused");
  want += 10;
  /* A chunk one byte short; a chunk without its tag. */
  for (int cut_tag = 0; cut_tag < 2; cut_tag++) {
    parallel_comm_send(c1, 0, 16, big, sizeof big);
    s_wire_chunks(tap, relay, ch, 12);
    if (cut_tag)
      ch[3].n = 2;
    else
      ch[3].len[1]--;
    for (int k = 0; k < 12; k++) s_wire_put(relay, &ch[k]);
    ch[3].n = 3;
    s_wire_chunks_free(ch, 12);
    WT_TEST_ASSERT(s_wait_refused(c0, want + 9) == want + 9, "a chunk %s: 9 refused",
                   cut_tag ? "without its tag" : "one byte short");
    want += 9;
  }
  s_capture_end(fd, saved, text, sizeof text);
  WT_TEST_ASSERT(strstr(text, "replayed or reordered") && strstr(text, "authentication failed") &&
                     strstr(text, "cut short") && strstr(text, "out of order") &&
                     strstr(text, "without the first chunk") && strstr(text, "empty or longer"),
                 "the refusals say why: %s", text);
  /* The link still works, and only the four good messages were accepted. */
  parallel_comm_send(c1, 0, 10, big, sizeof big);
  WT_TEST_REQUIRE(s_wire_chunks(tap, relay, ch, 12) == 0, "12 chunks on the wire");
  for (int k = 0; k < 12; k++) s_wire_put(relay, &ch[k]);
  s_wire_chunks_free(ch, 12);
  WT_TEST_ASSERT(parallel_comm_recv(c0, 1, 10, out, sizeof out, &got) == WT_OK &&
                     got == sizeof big && memcmp(out, big, sizeof big) == 0,
                 "a large message after the bad ones arrives intact: %s", wt_last_error());
  WT_TEST_ASSERT(parallel_zmq_link_stats_get(c0, 1).msgs_recv == 4, "accepted %llu messages",
                 (unsigned long long)parallel_zmq_link_stats_get(c0, 1).msgs_recv);

  /* Rank 1 restarts at its endpoint with the same keys: the new process's session works, and
   * neither the old session's messages nor its hello are taken. */
  parallel_comm_destroy(&c1);
  WT_TEST_REQUIRE(s_wire_take(tap, relay, &b) == 0 && b.f[0][5] == PARALLEL_ZMQ_KIND_BYE,
                  "the old process's goodbye (lost on the way)");
  s_wire_free(&b);
  parallel_zmq_config cfg = parallel_zmq_config_default();
  const char *again[2] = {"tcp://127.0.0.1:*", eps[1]};
  cfg.rank = 1, cfg.size = 2, cfg.endpoints = again, cfg.timeout_s = 5;
  cfg.secret_key = sec[1], cfg.public_key = pub[1], cfg.peer_public_keys = pubs;
  parallel_zmq_transport *t1 = parallel_zmq_transport_new(&cfg);
  WT_TEST_REQUIRE(t1, "rank 1 binds its endpoint again: %s", wt_last_error());
  c1 = parallel_zmq_transport_connect(&t1, eps1);
  WT_TEST_REQUIRE(c1, "%s", wt_last_error());
  fd = s_capture_begin(&saved);
  parallel_comm_send(c1, 0, 11, &v, sizeof v);
  WT_TEST_REQUIRE(s_wire_take(tap, relay, &b) == 0, "the new process's message");
  s_wire_put(relay, &b);
  s_wire_free(&b);
  w = 0;
  WT_TEST_ASSERT(parallel_comm_recv(c0, 1, 11, &w, sizeof w, &got) == WT_OK && w == v,
                 "the restarted peer's message arrives: %s", wt_last_error());
  s_wire_put(relay, &a);
  WT_TEST_ASSERT(s_wait_refused(c0, want + 1) == want + 1,
                 "an old session's first message is refused");
  s_wire_put(relay, &d);
  WT_TEST_ASSERT(s_wait_refused(c0, want + 2) == want + 2,
                 "an old session's later message is refused");
  s_wire_put(relay, &s_first_hello);
  WT_TEST_ASSERT(s_wait_refused(c0, want + 3) == want + 3, "an old session's hello is refused");
  parallel_comm_send(c1, 0, 12, &v, sizeof v);
  s_wire_take(tap, relay, &b);
  s_wire_put(relay, &b);
  s_wire_free(&b);
  WT_TEST_ASSERT(parallel_comm_recv(c0, 1, 12, &w, sizeof w, &got) == WT_OK,
                 "the new session goes on: %s", wt_last_error());
  s_capture_end(fd, saved, text, sizeof text);
  /* The old first message's counter is below the new session's next one; the later one's is
   * not, but the new session's key does not open it. */
  WT_TEST_ASSERT(strstr(text, "replayed or reordered") && strstr(text, "authentication failed") &&
                     strstr(text, "replayed hello"),
                 "the old session's frames are named: %s", text);
  s_wire_free(&d);
  s_wire_free(&a);
  s_wire_free(&s_first_hello);
  parallel_comm_destroy(&c1);
  parallel_comm_destroy(&c0);
  zmq_close(tap);
  zmq_close(relay);
  zmq_ctx_term(zctx);
  printf("wire tap: replay, flipped payload and header, reorder; a chunk dropped at the end and "
         "in the middle, swapped, one byte short, without its tag; an old session's message and "
         "hello refused\n");
}

/* On a paced (WAN-emulated) link a large payload stays one multipart message of 256 KiB parts,
 * which the tap cuts short three ways (the last part dropped, a part one byte short, the
 * trailer dropped) and reorders inside (two parts swapped): each is refused and counted, and an
 * intact one arrives after them. */
/* Two ranks whose link 1 → 0 crosses a tap: rank 1 sends to the tap's PULL (over `streams`
 * connections), the test relays through `relay` to rank 0; rank 1 paces at lat/bw when given. */
typedef struct {
  char pub[2][41], sec[2][41], eps[2][256];
  void *zctx, *tap, *relay;
  parallel_comm *c0, *c1;
} s_tap_pair;

/* tap_hwm: messages the tap's socket may hold (0: ZeroMQ's default). */
static void s_tap_open(s_tap_pair *w, const double *lat, const double *bw, int streams,
                       int tap_hwm) {
  const char *pubs[2] = {w->pub[0], w->pub[1]};
  parallel_zmq_transport *ts[2];
  char(*eps)[256] = w->eps;
  for (int r = 0; r < 2; r++)
    WT_TEST_REQUIRE(parallel_zmq_keypair_new(w->pub[r], w->sec[r]) == WT_OK, "keys");
  for (int r = 0; r < 2; r++) {
    parallel_zmq_config cfg = parallel_zmq_config_default();
    const char *bind[2] = {"tcp://127.0.0.1:*", "tcp://127.0.0.1:*"};
    cfg.rank = r, cfg.size = 2, cfg.endpoints = bind, cfg.timeout_s = 5, cfg.streams = streams;
    cfg.secret_key = w->sec[r], cfg.public_key = w->pub[r], cfg.peer_public_keys = pubs;
    if (r == 1) cfg.latency_s = lat, cfg.bandwidth_Bps = bw;
    ts[r] = parallel_zmq_transport_new(&cfg);
    WT_TEST_REQUIRE(ts[r], "%s", wt_last_error());
    snprintf(eps[r], sizeof eps[r], "%s", parallel_zmq_transport_endpoint(ts[r]));
  }
  w->zctx = zmq_ctx_new();
  w->tap = zmq_socket(w->zctx, ZMQ_PULL);
  int tmo = 5000, zero = 0;
  zmq_setsockopt(w->tap, ZMQ_RCVTIMEO, &tmo, sizeof tmo);
  zmq_setsockopt(w->tap, ZMQ_LINGER, &zero, sizeof zero);
  if (tap_hwm) zmq_setsockopt(w->tap, ZMQ_RCVHWM, &tap_hwm, sizeof tap_hwm);
  WT_TEST_REQUIRE(zmq_bind(w->tap, "tcp://127.0.0.1:*") == 0, "bind the tap");
  char tap_ep[256];
  size_t tlen = sizeof tap_ep;
  zmq_getsockopt(w->tap, ZMQ_LAST_ENDPOINT, tap_ep, &tlen);
  w->relay = s_raw_client(w->zctx, eps[0]);
  const char *eps0[2] = {eps[0], eps[1]}, *eps1[2] = {tap_ep, eps[1]};
  w->c0 = parallel_zmq_transport_connect(&ts[0], eps0);
  w->c1 = parallel_zmq_transport_connect(&ts[1], eps1);
  WT_TEST_REQUIRE(w->c0 && w->c1, "%s", wt_last_error());
}

static void s_tap_close(s_tap_pair *w) {
  parallel_comm_destroy(&w->c1);
  parallel_comm_destroy(&w->c0);
  zmq_close(w->tap);
  zmq_close(w->relay);
  zmq_ctx_term(w->zctx);
}

static void test_wire_tap_paced(void) {
  double lat[2] = {0, 0}, bw[2] = {1e9, 1e9}; /* rank 1 paces at 1 GB/s */
  s_tap_pair w;
  s_tap_open(&w, lat, bw, 1, 0);
  void *tap = w.tap, *relay = w.relay;
  parallel_comm *c0 = w.c0, *c1 = w.c1;

  static uint8_t big[3 << 20], out[3 << 20]; /* 12 parts of 256 KiB */
  for (size_t i = 0; i < sizeof big; i++) big[i] = (uint8_t)(i * 5 + 1);
  size_t got = 0;
  s_wire_msg b;
  char text[16384];
  int saved, fd = s_capture_begin(&saved);
  parallel_comm_send(c1, 0, 9, big, sizeof big);
  WT_TEST_REQUIRE(s_wire_take(tap, relay, &b) == 0 && b.n == 14, "12 parts and a trailer (%d)",
                  b.n);
  s_wire_msg cut = b;
  cut.f[12] = b.f[13], cut.len[12] = b.len[13], cut.n = 13;
  s_wire_put(relay, &cut);
  WT_TEST_ASSERT(s_wait_refused(c0, 1) == 1, "a message without its last part is refused");
  b.len[3]--;
  s_wire_put(relay, &b);
  b.len[3]++;
  WT_TEST_ASSERT(s_wait_refused(c0, 2) == 2, "a part one byte short is refused");
  cut = b, cut.n = 13;
  s_wire_put(relay, &cut);
  WT_TEST_ASSERT(s_wait_refused(c0, 3) == 3, "a message without its trailer is refused");
  uint8_t *p2 = b.f[2];
  b.f[2] = b.f[3], b.f[3] = p2;
  s_wire_put(relay, &b);
  WT_TEST_ASSERT(s_wait_refused(c0, 4) == 4, "swapped parts are refused");
  s_wire_free(&b);
  s_capture_end(fd, saved, text, sizeof text);
  WT_TEST_ASSERT(strstr(text, "length does not match") && strstr(text, "authentication failed"),
                 "the refusals say why: %s", text);
  parallel_comm_send(c1, 0, 10, big, sizeof big);
  WT_TEST_REQUIRE(s_wire_take(tap, relay, &b) == 0 && b.n == 14, "the intact message");
  s_wire_put(relay, &b);
  s_wire_free(&b);
  WT_TEST_ASSERT(parallel_comm_recv(c0, 1, 10, out, sizeof out, &got) == WT_OK &&
                     got == sizeof big && memcmp(out, big, sizeof big) == 0,
                 "a paced message after the bad ones arrives intact: %s", wt_last_error());
  WT_TEST_ASSERT(parallel_zmq_link_stats_get(c0, 1).msgs_recv == 1, "accepted %llu messages",
                 (unsigned long long)parallel_zmq_link_stats_get(c0, 1).msgs_recv);
  s_tap_close(&w);
  printf("paced wire tap: a part dropped, one byte short, no trailer, swapped parts refused\n");
}

static uint64_t s_wire_counter(const s_wire_msg *m) {
  uint64_t c = 0;
  for (int i = 7; i >= 0; i--) c = c << 8 | m->f[0][48 + i];
  return c;
}

/* Takes n messages (or chunks) from the tap, which gets them from two streams in either order,
 * and sorts them by counter: the order rank 1 sealed them in. */
static int s_wire_sorted(void *tap, void *relay, s_wire_msg *m, int n) {
  for (int k = 0; k < n; k++)
    if (s_wire_take(tap, relay, &m[k]) != 0) return -1;
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && s_wire_counter(&m[j]) < s_wire_counter(&m[j - 1]); j--) {
      s_wire_msg x = m[j];
      m[j] = m[j - 1], m[j - 1] = x;
    }
  return 0;
}

/* Two streams per link: what crosses in another order than it was sealed in is put back in
 * order (not refused), a replay (of one taken, or of one held) and a flipped byte are still
 * refused, and a chunk cut out of a large message makes the chunk after it refused once the
 * receiver stops waiting for the missing one; good messages arrive around them. */
static void test_wire_tap_streams(void) {
  s_tap_pair w;
  s_tap_open(&w, NULL, NULL, 2, 0);
  uint32_t v = 0x55667788, got_v = 0;
  size_t got = 0;
  s_wire_msg m[4];
  int saved, fd = s_capture_begin(&saved);
  parallel_comm_send(w.c1, 0, 5, &v, sizeof v);
  WT_TEST_REQUIRE(s_wire_sorted(w.tap, w.relay, m, 1) == 0, "a sealed message on the wire");
  s_wire_put(w.relay, &m[0]);
  WT_TEST_ASSERT(parallel_comm_recv(w.c0, 1, 5, &got_v, sizeof got_v, &got) == WT_OK && got_v == v,
                 "relayed intact it arrives: %s", wt_last_error());
  s_wire_put(w.relay, &m[0]);
  WT_TEST_ASSERT(s_wait_refused(w.c0, 1) == 1, "a replayed message is refused");
  m[0].f[1][1] ^= 0x04;
  s_wire_put(w.relay, &m[0]);
  WT_TEST_ASSERT(s_wait_refused(w.c0, 2) == 2, "a flipped payload bit is refused");
  s_wire_free(&m[0]);
  /* Two messages in the wrong order, the later one twice: both taken in order, the copy not. */
  parallel_comm_send(w.c1, 0, 7, &v, sizeof v);
  parallel_comm_send(w.c1, 0, 8, &v, sizeof v);
  WT_TEST_REQUIRE(s_wire_sorted(w.tap, w.relay, m, 2) == 0, "two messages on the wire");
  s_wire_put(w.relay, &m[1]);
  s_wire_put(w.relay, &m[1]);
  WT_TEST_ASSERT(s_wait_refused(w.c0, 3) == 3, "a replay of a held message is refused");
  s_wire_put(w.relay, &m[0]);
  WT_TEST_ASSERT(parallel_comm_recv(w.c0, 1, 7, &got_v, sizeof got_v, &got) == WT_OK &&
                     parallel_comm_recv(w.c0, 1, 8, &got_v, sizeof got_v, &got) == WT_OK,
                 "both arrive, put back in order: %s", wt_last_error());
  WT_TEST_ASSERT(parallel_zmq_link_stats_get(w.c0, 1).msgs_held >= 1, "the later one was held");
  s_wire_free(&m[0]);
  s_wire_free(&m[1]);
  /* A 3 MiB message as 3 chunks over the two streams; the middle one cut out. */
  static uint8_t big[3 << 20];
  for (size_t i = 0; i < sizeof big; i++) big[i] = (uint8_t)(i * 3);
  parallel_comm_send(w.c1, 0, 9, big, sizeof big);
  WT_TEST_REQUIRE(s_wire_sorted(w.tap, w.relay, m, 3) == 0, "3 chunks on the wire");
  s_wire_put(w.relay, &m[0]);
  s_wire_put(w.relay, &m[2]);
  WT_TEST_ASSERT(s_wait_refused(w.c0, 4) == 4,
                 "the chunk after a missing one is refused once the wait for it ends");
  for (int k = 0; k < 3; k++) s_wire_free(&m[k]);
  parallel_comm_send(w.c1, 0, 10, &v, sizeof v);
  WT_TEST_REQUIRE(s_wire_sorted(w.tap, w.relay, m, 1) == 0, "a good message after them");
  s_wire_put(w.relay, &m[0]);
  s_wire_free(&m[0]);
  WT_TEST_ASSERT(parallel_comm_recv(w.c0, 1, 10, &got_v, sizeof got_v, &got) == WT_OK,
                 "a good message after the bad ones arrives: %s", wt_last_error());
  char text[16384];
  s_capture_end(fd, saved, text, sizeof text);
  WT_TEST_ASSERT(strstr(text, "already held") && strstr(text, "never came") &&
                     strstr(text, "chunk out of order"),
                 "the refusals say why: %s", text);
  WT_TEST_ASSERT(parallel_zmq_link_stats_get(w.c0, 1).msgs_recv == 4, "accepted %llu messages",
                 (unsigned long long)parallel_zmq_link_stats_get(w.c0, 1).msgs_recv);
  s_tap_close(&w);
  printf("wire tap, two streams: reordered put back, replays (taken and held) and a flip "
         "refused, a chunk cut out refused after the wait\n");
}

/* Messages sealed at enqueue under a session that ends before they leave are sealed again for
 * the next one: rank 1 queues 48 messages of 256 KiB to rank 0 while the tap takes none (its
 * pipe full, the rest wait in rank 1's queue, sealed); rank 0 restarts with the same keys; the
 * tap then relays everything. What was on the wire for the old process is refused, and the
 * messages still queued when the new process's hello came arrive, opened under the new
 * session's key. */
static void test_reseal_after_restart(void) {
  enum { S_N = 48 };
  s_tap_pair w;
  s_tap_open(&w, NULL, NULL, 1, 1);
  static uint8_t msg[256 << 10], in[256 << 10];
  int rc = WT_OK;
  for (int i = 0; i < S_N && rc == WT_OK; i++) {
    memset(msg, i, sizeof msg);
    rc = parallel_comm_send(w.c1, 0, 20 + i, msg, sizeof msg);
  }
  WT_TEST_REQUIRE(rc == WT_OK, "queued: %s", wt_last_error());
  parallel_comm_destroy(&w.c0);
  const char *pubs[2] = {w.pub[0], w.pub[1]}, *again[2] = {w.eps[0], "tcp://127.0.0.1:*"};
  parallel_zmq_config cfg = parallel_zmq_config_default();
  cfg.rank = 0, cfg.size = 2, cfg.endpoints = again, cfg.timeout_s = 5;
  cfg.secret_key = w.sec[0], cfg.public_key = w.pub[0], cfg.peer_public_keys = pubs;
  parallel_zmq_transport *t0 = parallel_zmq_transport_new(&cfg);
  WT_TEST_REQUIRE(t0, "rank 0 binds its endpoint again: %s", wt_last_error());
  const char *eps0[2] = {w.eps[0], w.eps[1]};
  w.c0 = parallel_zmq_transport_connect(&t0, eps0);
  WT_TEST_REQUIRE(w.c0, "%s", wt_last_error());
  usleep(1000000); /* the new process's hello reaches rank 1 directly */
  int saved, fd = s_capture_begin(&saved);
  s_wire_msg m;
  int relayed = 0;
  while (relayed < S_N && s_wire_take(w.tap, w.relay, &m) == 0) {
    s_wire_put(w.relay, &m);
    s_wire_free(&m);
    relayed++;
  }
  int arrived = 0, intact = 1;
  parallel_zmq_set_timeout(w.c0, 0.2);
  for (int i = 0; i < S_N; i++) {
    size_t got = 0;
    if (parallel_comm_recv(w.c0, 1, 20 + i, in, sizeof in, &got) != WT_OK) continue;
    arrived++;
    intact &= got == sizeof in && in[0] == (uint8_t)i && in[sizeof in - 1] == (uint8_t)i;
  }
  char text[16384];
  s_capture_end(fd, saved, text, sizeof text);
  uint64_t refused = parallel_zmq_refused(w.c0);
  WT_TEST_ASSERT(relayed == S_N, "all %d messages crossed the tap (%d)", S_N, relayed);
  WT_TEST_ASSERT(arrived > 0 && intact, "messages queued across the restart arrive intact (%d)",
                 arrived);
  WT_TEST_ASSERT(arrived + (int)refused == S_N, "each is taken or refused: %d + %llu", arrived,
                 (unsigned long long)refused);
  s_tap_close(&w);
  printf("reseal after restart: %d of %d queued messages sealed again for the new session, %llu "
         "on the wire for the old one refused\n",
         arrived, S_N, (unsigned long long)refused);
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
  test_wire_tap();
  test_wire_tap_paced();
  test_wire_tap_streams();
  test_reseal_after_restart();
  s_fault_case(0);
  s_fault_case(1);
  if (wt_test_failures) fprintf(stderr, "test_zmq_faults: %d failure(s)\n", wt_test_failures);
  return wt_test_failures ? 1 : 0;
}
