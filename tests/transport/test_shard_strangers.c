/* test_shard_strangers — what a shard server's and a shard relay's ports do with strangers
 * (parallel/transport/shards.h, shard_relay.h): random bytes and a ZMTP greeting of another
 * mechanism from plain TCP clients, a connection that sends half a greeting and then hangs, a
 * CURVE client whose key was never allowed, and an allowed client sending malformed requests
 * (one a read whose path holds a newline, so that it parses as two listing lines). Nothing
 * crashes, nothing is served to a stranger, the refusals that reach the ports are counted
 * (failed handshakes, refused keys, malformed requests), and while the hanging connection is
 * open a real fetch, straight and through the relay, still works and verifies. Scratch in a
 * temp dir. */
#include "parallel/transport/shard_relay.h"
#include "parallel/transport/shards.h"
#include "parallel/transport/zmq.h"

#include "common/common.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                                         \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fprintf(stderr, "\n");                                                                       \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

static const uint64_t RUN = 0x77aa00ff12345678ull;

static void s_write(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  CHECK(f && fputs(text, f) >= 0, "cannot write %s", path);
  fclose(f);
}

/* A replica-0 shard: one stage file, its SHA256SUMS, the .state file. */
static void s_make_shard(const char *root) {
  char dir[600], path[700], cmd[1400];
  snprintf(dir, sizeof dir, "%s/%016llx/stage-0/step-00000007", root, (unsigned long long)RUN);
  snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
  CHECK(system(cmd) == 0, "mkdir");
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  s_write(path, "stranger-test model bytes");
  snprintf(cmd, sizeof cmd, "cd %s && sha256sum model.safetensors > SHA256SUMS", dir);
  CHECK(system(cmd) == 0, "sha256sum");
  snprintf(path, sizeof path, "%s/%016llx/stage-0/replica-0-step-00000007.state", root,
           (unsigned long long)RUN);
  s_write(path, "WTTS-state");
}

/* A plain TCP connection to a tcp://127.0.0.1:PORT endpoint; sends n bytes. */
static int s_tcp_send(const char *endpoint, const void *bytes, size_t n) {
  const char *colon = strrchr(endpoint, ':');
  CHECK(colon, "endpoint %s", endpoint);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  CHECK(fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof a) == 0, "connect %s", endpoint);
  CHECK(send(fd, bytes, n, MSG_NOSIGNAL) == (ssize_t)n, "send");
  return fd;
}

/* What plain TCP strangers send: random bytes, random bytes after a ZMTP signature's first
 * byte, and a ZMTP 3 greeting for the NULL mechanism (the ports speak only CURVE). Each
 * connection is closed after a pause. The last two fail a handshake, which the ports count;
 * the first reads as a ZMTP 1.0 peer, which libzmq drops before any handshake. */
static void s_tcp_strangers(const char *endpoint) {
  unsigned char junk[4096];
  for (size_t i = 0; i < sizeof junk; i++) junk[i] = (unsigned char)(rand() & 0xff);
  junk[0] = 0x42;
  unsigned char greeting[64] = {0xff, 0, 0, 0, 0, 0, 0, 0, 1, 0x7f, 3, 0, 'N', 'U', 'L', 'L'};
  int a = s_tcp_send(endpoint, junk, sizeof junk), b = s_tcp_send(endpoint, greeting, 64);
  junk[0] = 0xff, junk[9] = 0x7f; /* a signature libzmq takes for ZMTP 2 or later */
  int c = s_tcp_send(endpoint, junk, sizeof junk);
  usleep(200 * 1000);
  close(a), close(b), close(c);
}

/* A CURVE client under `key` sends one frame (and a second one when part2 is given) and waits
 * up to wait_ms for anything back; returns the bytes of the first part received, or -1. */
static int s_curve_send(const char *endpoint, const char *server_key, const char *pub,
                        const char *sec, const char *part1, const char *part2, int wait_ms) {
  void *ctx = zmq_ctx_new(), *s = zmq_socket(ctx, ZMQ_DEALER);
  int linger = 0;
  zmq_setsockopt(s, ZMQ_LINGER, &linger, sizeof linger);
  zmq_setsockopt(s, ZMQ_CURVE_SERVERKEY, server_key, 40);
  zmq_setsockopt(s, ZMQ_CURVE_PUBLICKEY, pub, 40);
  zmq_setsockopt(s, ZMQ_CURVE_SECRETKEY, sec, 40);
  CHECK(zmq_connect(s, endpoint) == 0, "connect");
  zmq_send(s, part1, strlen(part1), part2 ? ZMQ_SNDMORE : 0);
  if (part2) zmq_send(s, part2, strlen(part2), 0);
  zmq_pollitem_t it = {s, 0, ZMQ_POLLIN, 0};
  int got = -1;
  if (zmq_poll(&it, 1, wait_ms) == 1) {
    char buf[4096];
    got = zmq_recv(s, buf, sizeof buf, 0);
  }
  zmq_close(s);
  zmq_ctx_term(ctx);
  return got;
}

int main(void) {
  char tmpl[] = "/tmp/wt-shard-strangers-XXXXXX", holder[400], client[400];
  char *base = mkdtemp(tmpl);
  CHECK(base, "mkdtemp");
  snprintf(holder, sizeof holder, "%s/holder", base);
  snprintf(client, sizeof client, "%s/client", base);
  mkdir(holder, 0755), mkdir(client, 0755);
  s_make_shard(holder);
  parallel_shard_id id = {.run = RUN, .step = 7, .stage = 0, .replica = 0};
  char digest[65];
  CHECK(parallel_shard_digest(holder, &id, digest, NULL) == WT_OK, "%s", wt_last_error());

  char hpub[41], hsec[41], cpub[41], csec[41], xpub[41], xsec[41], rpub[41], rsec[41];
  CHECK(parallel_zmq_keypair_new(hpub, hsec) == WT_OK &&
            parallel_zmq_keypair_new(cpub, csec) == WT_OK &&
            parallel_zmq_keypair_new(xpub, xsec) == WT_OK &&
            parallel_zmq_keypair_new(rpub, rsec) == WT_OK,
        "keypairs");
  parallel_shard_relay *relay = parallel_shard_relay_new("tcp://127.0.0.1:*", rpub, rsec);
  CHECK(relay, "%s", wt_last_error());
  CHECK(parallel_shard_relay_allow(relay, hpub) == WT_OK &&
            parallel_shard_relay_allow(relay, cpub) == WT_OK,
        "relay allow");
  parallel_shard_server *srv = parallel_shard_server_new("tcp://127.0.0.1:*", holder, hpub, hsec);
  CHECK(srv && parallel_shard_server_allow(srv, cpub) == WT_OK, "%s", wt_last_error());
  const char *sep = parallel_shard_server_endpoint(srv),
             *rep = parallel_shard_relay_endpoint(relay);
  CHECK(parallel_shard_server_relay(srv, rep, rpub) == WT_OK, "relay leg");

  /* plain TCP strangers on both ports: dropped by the CURVE handshake, nothing served */
  s_tcp_strangers(sep);
  s_tcp_strangers(rep);
  usleep(200 * 1000);
  CHECK(parallel_shard_server_served(srv) == 0, "nothing served to plain TCP strangers");
  CHECK(parallel_shard_server_refused(srv) >= 2, "the server counted %llu of 2 failed handshakes",
        (unsigned long long)parallel_shard_server_refused(srv));
  CHECK(parallel_shard_relay_stats_get(relay).refused >= 2,
        "the relay counted %llu of 2 failed handshakes",
        (unsigned long long)parallel_shard_relay_stats_get(relay).refused);

  /* a CURVE client whose key nobody allowed: no handshake, no answer, counted at both */
  char req[256];
  snprintf(req, sizeof req,
           "{\"op\":\"list\",\"run\":\"%016llx\",\"step\":7,\"stage\":0,\"replica\":0}",
           (unsigned long long)RUN);
  const uint64_t srv_refused = parallel_shard_server_refused(srv);
  const uint64_t relay_refused = parallel_shard_relay_stats_get(relay).refused;
  CHECK(s_curve_send(sep, hpub, xpub, xsec, req, NULL, 1000) < 0, "a stranger's key got an answer");
  CHECK(parallel_shard_server_refused(srv) > srv_refused, "the stranger's handshake is counted");
  CHECK(s_curve_send(rep, rpub, xpub, xsec, "0123456789abcdef0123456789abcdef", req, 1000) < 0,
        "a stranger got an answer from the relay");
  CHECK(parallel_shard_relay_stats_get(relay).refused > relay_refused,
        "the stranger's handshake at the relay is counted");
  CHECK(parallel_shard_server_served(srv) == 0, "nothing served to a stranger's key");

  /* an allowed client sending what is not a request: refused with a reason, counted */
  const uint64_t before = parallel_shard_server_refused(srv);
  CHECK(s_curve_send(sep, hpub, cpub, csec, "{\"op\":\"list\",\"run\":7}", NULL, 3000) > 0,
        "a malformed request gets an answer");
  CHECK(s_curve_send(sep, hpub, cpub, csec, "\x01\x02 not json", NULL, 3000) > 0,
        "a request that is not JSON gets an answer");
  /* a read whose path holds a newline: two listing lines, not one path of the shard */
  char nl[512];
  snprintf(nl, sizeof nl,
           "{\"op\":\"read\",\"run\":\"%016llx\",\"step\":7,\"stage\":0,\"replica\":0,"
           "\"path\":\"stage-0/step-00000007/model.safetensors\\n%064d  1  "
           "stage-0/step-00000007/SHA256SUMS\",\"offset\":0}",
           (unsigned long long)RUN, 0);
  CHECK(s_curve_send(sep, hpub, cpub, csec, nl, NULL, 3000) > 0,
        "a path with a newline gets an answer");
  CHECK(parallel_shard_server_refused(srv) >= before + 3, "malformed requests are counted");
  const uint64_t relay_before = parallel_shard_relay_stats_get(relay).refused;
  s_curve_send(rep, rpub, cpub, csec, "one frame of nothing", NULL, 300);
  CHECK(parallel_shard_relay_stats_get(relay).refused > relay_before,
        "a malformed message at the relay is counted");
  CHECK(parallel_shard_server_served(srv) == 0, "nothing served for malformed requests");

  /* half a greeting on each port, held open: the ports still serve everyone else */
  const unsigned char half[5] = {0xff, 0, 0, 0, 0};
  int hang_s = s_tcp_send(sep, half, sizeof half), hang_r = s_tcp_send(rep, half, sizeof half);
  parallel_shard_holder straight = {.endpoint = sep, .public_key = hpub};
  int from = -1;
  int rc = parallel_shard_fetch(client, &id, digest, &straight, 1, cpub, csec, 10, &from);
  CHECK(rc == WT_OK && from == 0, "a real fetch after the strangers: %s", wt_last_error());
  CHECK(parallel_shard_verify(client, &id, digest) == WT_OK, "%s", wt_last_error());
  parallel_shard_remove(client, &id);
  parallel_shard_holder relayed = {"tcp://127.0.0.1:9", hpub, rep, rpub};
  rc = WT_EIO;
  for (int tries = 0; tries < 30 && rc != WT_OK; tries++) { /* until the holder's hello landed */
    rc = parallel_shard_fetch(client, &id, digest, &relayed, 1, cpub, csec, 5, &from);
    if (rc != WT_OK) usleep(100 * 1000);
  }
  CHECK(rc == WT_OK, "a relayed fetch after the strangers: %s", wt_last_error());
  CHECK(parallel_shard_verify(client, &id, digest) == WT_OK, "%s", wt_last_error());
  close(hang_s), close(hang_r);
  printf("strangers refused: server %llu, relay %llu; served afterwards: %llu\n",
         (unsigned long long)parallel_shard_server_refused(srv),
         (unsigned long long)parallel_shard_relay_stats_get(relay).refused,
         (unsigned long long)parallel_shard_server_served(srv));
  parallel_shard_server_destroy(&srv);
  parallel_shard_relay_destroy(&relay);
  char cmd[500];
  snprintf(cmd, sizeof cmd, "rm -rf %s", base);
  CHECK(system(cmd) == 0, "cleanup");
  printf("test_shard_strangers: OK\n");
  return 0;
}
