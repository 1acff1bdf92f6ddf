/* test_shards — a checkpoint shard between processes' stores (parallel/transport/shards.h):
 * three holders on loopback CURVE, one whose copy is corrupt on disk and one that lies about its
 * listing, then an intact one. The fetch refuses the first two by the digest, takes the third,
 * and the files it installs verify; a client whose key no holder allows gets nothing; a shard
 * nobody serves intact fails with a message naming every holder; the store lists what it holds.
 * A lying server that streams more bytes than its listing gives is refused at the first extra
 * byte. Through a shard relay: a holder that only connects out serves a fetch, sealed end to
 * end; a sealed request with one bit flipped, or sent back as a reply, does not open; a
 * stranger's key gets no handshake at the relay.
 * Scratch in a temp dir. */
#include "parallel/transport/shard_relay.h"
#include "parallel/transport/shards.h"
#include "parallel/transport/shards_internal.h" /* defines: parallel_shard_seal */
#include "parallel/transport/zmq.h"

#include "common/common.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static const uint64_t RUN = 0x1234abcd5678ef00ull;

static void s_write(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  CHECK(f, "cannot write %s", path);
  fputs(text, f);
  fclose(f);
}

/* A stage checkpoint directory (two files and their SHA256SUMS) and replica 0's .state, as the
 * tasklet writes them, under root. */
static void s_make_shard(const char *root) {
  char dir[600], path[700], cmd[1400];
  snprintf(dir, sizeof dir, "%s/%016llx/stage-1/step-00000040", root, (unsigned long long)RUN);
  snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
  CHECK(system(cmd) == 0, "mkdir");
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  char big[300000];
  for (size_t i = 0; i + 1 < sizeof big; i++) big[i] = (char)('a' + i % 26);
  big[sizeof big - 1] = 0;
  s_write(path, big);
  snprintf(path, sizeof path, "%s/state.json", dir);
  s_write(path, "{\"step\": 40}\n");
  snprintf(cmd, sizeof cmd, "cd %s && sha256sum model.safetensors state.json > SHA256SUMS", dir);
  CHECK(system(cmd) == 0, "sha256sum");
  snprintf(path, sizeof path, "%s/%016llx/stage-1/replica-0-step-00000040.state", root,
           (unsigned long long)RUN);
  s_write(path, "WTTS-state-bytes");
}

/* ---- a lying holder: the true listing, then endless bytes for every read ------------------- */

typedef struct {
  void *ctx, *router;
  char listing_json[4096];
  atomic_int stop;
  atomic_int reads;
} s_liar;

static void *s_liar_main(void *arg) {
  s_liar *l = arg;
  static char junk[1 << 20];
  while (!l->stop) {
    zmq_pollitem_t it = {l->router, 0, ZMQ_POLLIN, 0};
    if (zmq_poll(&it, 1, 100) <= 0) continue;
    zmq_msg_t who, req;
    zmq_msg_init(&who), zmq_msg_init(&req);
    zmq_msg_recv(&who, l->router, 0);
    zmq_msg_recv(&req, l->router, 0);
    int is_list = zmq_msg_size(&req) > 0 && strstr(zmq_msg_data(&req), "\"list\"") != NULL;
    zmq_send(l->router, zmq_msg_data(&who), zmq_msg_size(&who), ZMQ_SNDMORE);
    if (is_list) {
      zmq_send(l->router, l->listing_json, strlen(l->listing_json), 0);
    } else {
      l->reads++;
      const char *head = "{\"ok\":true,\"eof\":false}";
      zmq_send(l->router, head, strlen(head), ZMQ_SNDMORE);
      zmq_send(l->router, junk, sizeof junk, 0);
    }
    zmq_msg_close(&who), zmq_msg_close(&req);
  }
  return NULL;
}

/* Fetching from the liar: refused with "more bytes" after one read, not at the deadline. */
static void s_check_liar(const char *root, const parallel_shard_id *id, const char *digest,
                         const char *listing, const char *pub, const char *sec) {
  s_liar l = {.ctx = zmq_ctx_new()};
  char lpub[41], lsec[41];
  CHECK(parallel_zmq_keypair_new(lpub, lsec) == WT_OK, "keypair");
  l.router = zmq_socket(l.ctx, ZMQ_ROUTER);
  int one = 1, linger = 0;
  zmq_setsockopt(l.router, ZMQ_CURVE_SERVER, &one, sizeof one);
  zmq_setsockopt(l.router, ZMQ_CURVE_SECRETKEY, lsec, 40);
  zmq_setsockopt(l.router, ZMQ_LINGER, &linger, sizeof linger);
  CHECK(zmq_bind(l.router, "tcp://127.0.0.1:*") == 0, "bind");
  char ep[256];
  size_t len = sizeof ep;
  zmq_getsockopt(l.router, ZMQ_LAST_ENDPOINT, ep, &len);
  /* the listing as a JSON string */
  char esc[4000];
  size_t k = 0;
  for (const char *p = listing; *p && k + 3 < sizeof esc; p++) {
    if (*p == '\n')
      esc[k++] = '\\', esc[k++] = 'n';
    else
      esc[k++] = *p;
  }
  esc[k] = 0;
  snprintf(l.listing_json, sizeof l.listing_json, "{\"ok\":true,\"listing\":\"%s\"}", esc);
  pthread_t t;
  pthread_create(&t, NULL, s_liar_main, &l);
  parallel_shard_holder h = {.endpoint = ep, .public_key = lpub};
  int from = -1;
  int rc = parallel_shard_fetch(root, id, digest, &h, 1, pub, sec, 30, &from);
  CHECK(rc == WT_ECORRUPT && strstr(wt_last_error(), "more bytes than"),
        "a holder that streams past the listed size: rc %d: %s", rc, wt_last_error());
  CHECK(l.reads == 1, "refused at its first oversized reply, not after %d", (int)l.reads);
  printf("lying server refused after %d read: %.200s\n", (int)l.reads, wt_last_error());
  l.stop = 1;
  pthread_join(t, NULL);
  zmq_close(l.router);
  zmq_ctx_term(l.ctx);
}

/* ---- through the relay ------------------------------------------------------------------------
 */

/* The relayed seal: what one side seals the other opens; a bit flipped, or a request reflected
 * back to its sender as a reply, does not open. */
static void s_check_seal(void) {
  uint8_t cpk[32], csk[32], hpk[32], hsk[32], random[32] = {7};
  char pub[41], sec[41];
  CHECK(parallel_zmq_keypair_new(pub, sec) == WT_OK, "keypair");
  zmq_z85_decode(cpk, pub), zmq_z85_decode(csk, sec);
  CHECK(parallel_zmq_keypair_new(pub, sec) == WT_OK, "keypair");
  zmq_z85_decode(hpk, pub), zmq_z85_decode(hsk, sec);
  parallel_shard_seal client, holder;
  CHECK(parallel_shard_seal_new(&client, 1, cpk, csk, hpk, random) == 0 &&
            parallel_shard_seal_new(&holder, 0, hpk, hsk, cpk, random) == 0,
        "seal keys");
  uint8_t ad[8] = {1}, tag[16], buf[32] = "{\"op\":\"list\"}", copy[32];
  parallel_zmq_aead_seal(&client.to_holder, 3, ad, 8, buf, sizeof buf, tag);
  memcpy(copy, buf, sizeof buf);
  CHECK(parallel_zmq_aead_open(&holder.to_client, 3, ad, 8, copy, sizeof copy, tag) != 0,
        "a request reflected as a reply must not open");
  memcpy(copy, buf, sizeof buf), copy[5] ^= 1;
  CHECK(parallel_zmq_aead_open(&holder.to_holder, 3, ad, 8, copy, sizeof copy, tag) != 0,
        "a flipped bit must not open");
  CHECK(parallel_zmq_aead_open(&holder.to_holder, 3, ad, 8, buf, sizeof buf, tag) == 0 &&
            !strcmp((char *)buf, "{\"op\":\"list\"}"),
        "the holder opens the client's request");
  parallel_shard_seal_free(&client), parallel_shard_seal_free(&holder);
}

/* A holder whose server port nobody is told about: reached only through the relay. */
static void s_check_relay(const char *holder_root, const char *client_root,
                          const parallel_shard_id *id, const char *digest) {
  char rpub[41], rsec[41], hpub[41], hsec[41], cpub[41], csec[41], spub[41], ssec[41];
  CHECK(parallel_zmq_keypair_new(rpub, rsec) == WT_OK &&
            parallel_zmq_keypair_new(hpub, hsec) == WT_OK &&
            parallel_zmq_keypair_new(cpub, csec) == WT_OK &&
            parallel_zmq_keypair_new(spub, ssec) == WT_OK,
        "keypairs");
  parallel_shard_relay *relay = parallel_shard_relay_new("tcp://127.0.0.1:*", rpub, rsec);
  CHECK(relay, "%s", wt_last_error());
  CHECK(parallel_shard_relay_allow(relay, hpub) == WT_OK &&
            parallel_shard_relay_allow(relay, cpub) == WT_OK,
        "allow");
  CHECK(parallel_shard_relay_allow(relay, "short") == WT_EINVAL, "a bad key is refused");
  parallel_shard_server *srv =
      parallel_shard_server_new("tcp://127.0.0.1:*", holder_root, hpub, hsec);
  CHECK(srv, "%s", wt_last_error());
  CHECK(parallel_shard_server_allow(srv, cpub) == WT_OK, "allow");
  const char *rep = parallel_shard_relay_endpoint(relay);
  CHECK(parallel_shard_server_relay(srv, rep, rpub) == WT_OK, "relay");
  CHECK(parallel_shard_server_relay(srv, "udp://x", rpub) == WT_EINVAL, "a bad relay is refused");
  CHECK(parallel_shard_server_relay(srv, rep, rpub) == WT_OK, "relay again");
  /* the client is a holder too, its own server connected to the relay under the same key:
   * the replies must still reach the connection that asked */
  parallel_shard_server *own =
      parallel_shard_server_new("tcp://127.0.0.1:*", client_root, cpub, csec);
  CHECK(own && parallel_shard_server_relay(own, rep, rpub) == WT_OK, "the client's own server");
  usleep(300 * 1000);
  /* no direct endpoint a fetch could use: an address where nothing listens */
  parallel_shard_holder h = {"tcp://127.0.0.1:9", hpub, rep, rpub};
  int from = -1, rc = WT_EIO;
  for (int tries = 0; tries < 20 && rc != WT_OK; tries++) { /* until the holder's hello landed */
    rc = parallel_shard_fetch(client_root, id, digest, &h, 1, cpub, csec, 5, &from);
    if (rc != WT_OK) usleep(100 * 1000);
  }
  CHECK(rc == WT_OK && from == 0, "fetch through the relay: rc %d: %s", rc, wt_last_error());
  CHECK(parallel_shard_verify(client_root, id, digest) == WT_OK, "relayed copy: %s",
        wt_last_error());
  parallel_shard_relay_stats st = parallel_shard_relay_stats_get(relay);
  CHECK(st.messages >= 4 && st.bytes > 300000,
        "the relay passed the shard: %llu messages, %llu "
        "bytes",
        (unsigned long long)st.messages, (unsigned long long)st.bytes);
  printf("fetched through the relay: %llu messages, %llu bytes\n", (unsigned long long)st.messages,
         (unsigned long long)st.bytes);
  parallel_shard_remove(client_root, id);

  /* a client the relay does not know: no handshake, the fetch times out, nothing installed */
  rc = parallel_shard_fetch(client_root, id, digest, &h, 1, spub, ssec, 1.5, &from);
  CHECK(rc == WT_ETIMEOUT || rc == WT_EIO, "a stranger at the relay: rc %d: %s", rc,
        wt_last_error());
  CHECK(parallel_shard_relay_stats_get(relay).refused > st.refused, "the stranger is counted");

  /* a holder the relay has never seen: "not connected", at once */
  char npub[41], nsec[41];
  CHECK(parallel_zmq_keypair_new(npub, nsec) == WT_OK, "keypair");
  parallel_shard_holder none = {"tcp://127.0.0.1:9", npub, rep, rpub};
  rc = parallel_shard_fetch(client_root, id, digest, &none, 1, cpub, csec, 5, &from);
  CHECK(rc == WT_EIO && strstr(wt_last_error(), "not connected"), "an absent holder: rc %d: %s", rc,
        wt_last_error());

  /* the holder given under another key: its replies do not open under the key the fetch used,
   * and it does not answer a client whose seal it cannot open */
  parallel_shard_holder wrong = {"tcp://127.0.0.1:9", cpub, rep, rpub};
  rc = parallel_shard_fetch(client_root, id, digest, &wrong, 1, hpub, hsec, 1.5, &from);
  CHECK(rc != WT_OK, "a holder named under the wrong key must fail");
  char d[65];
  CHECK(parallel_shard_digest(client_root, id, d, NULL) == WT_ENOTFOUND, "nothing installed");
  parallel_shard_server_destroy(&srv);
  parallel_shard_server_destroy(&own);
  parallel_shard_relay_destroy(&relay);
  CHECK(!relay, "destroy clears the pointer");
}

int main(void) {
  char tmpl[] = "/tmp/wt-shards-XXXXXX";
  char *base = mkdtemp(tmpl);
  CHECK(base, "mkdtemp");
  char root[4][300];
  for (int i = 0; i < 4; i++) {
    snprintf(root[i], sizeof root[i], "%s/h%d", base, i);
    mkdir(root[i], 0755);
  }
  for (int i = 0; i < 3; i++) s_make_shard(root[i]);
  parallel_shard_id id = {.run = RUN, .step = 40, .stage = 1, .replica = 0};
  char digest[65], d1[65], *listing = NULL;
  CHECK(parallel_shard_digest(root[2], &id, digest, &listing) == WT_OK, "%s", wt_last_error());
  CHECK(strstr(listing, "stage-1/step-00000040/SHA256SUMS") &&
            strstr(listing, "stage-1/replica-0-step-00000040.state"),
        "listing: %s", listing);
  free(listing);
  CHECK(parallel_shard_verify(root[2], &id, digest) == WT_OK, "%s", wt_last_error());

  /* holder 0: its model file is damaged after it was listed (its SHA256SUMS still claims the
   * old bytes, so its digest reads the same); holder 1: its .state differs (a lying holder) */
  char path[700];
  snprintf(path, sizeof path, "%s/%016llx/stage-1/step-00000040/model.safetensors", root[0],
           (unsigned long long)RUN);
  FILE *f = fopen(path, "r+b");
  CHECK(f, "open");
  fseek(f, 1000, SEEK_SET);
  fputs("XXXX", f);
  fclose(f);
  CHECK(parallel_shard_digest(root[0], &id, d1, NULL) == WT_OK && !strcmp(d1, digest),
        "a damaged file under an intact SHA256SUMS keeps the digest");
  CHECK(parallel_shard_verify(root[0], &id, digest) == WT_ECORRUPT &&
            strstr(wt_last_error(), "model.safetensors"),
        "verify names the damaged file: %s", wt_last_error());
  snprintf(path, sizeof path, "%s/%016llx/stage-1/replica-0-step-00000040.state", root[1],
           (unsigned long long)RUN);
  s_write(path, "other state bytes");

  char pub[4][41], sec[4][41];
  for (int i = 0; i < 4; i++) CHECK(parallel_zmq_keypair_new(pub[i], sec[i]) == WT_OK, "keypair");
  parallel_shard_server *srv[3];
  parallel_shard_holder h[3];
  for (int i = 0; i < 3; i++) {
    srv[i] = parallel_shard_server_new("tcp://127.0.0.1:*", root[i], pub[i], sec[i]);
    CHECK(srv[i], "%s", wt_last_error());
    CHECK(parallel_shard_server_allow(srv[i], pub[3]) == WT_OK, "allow");
    h[i] = (parallel_shard_holder){.endpoint = parallel_shard_server_endpoint(srv[i]),
                                   .public_key = pub[i]};
  }
  CHECK(parallel_shard_server_allow(srv[0], "not a key") == WT_EINVAL, "a bad key is refused");

  /* the client (store 3) asks 0, 1, 2 in turn: 0 and 1 are refused, 2 serves */
  int from = -1;
  int rc = parallel_shard_fetch(root[3], &id, digest, h, 3, pub[3], sec[3], 10, &from);
  CHECK(rc == WT_OK && from == 2, "fetch: rc %d from %d: %s", rc, from, wt_last_error());
  CHECK(parallel_shard_verify(root[3], &id, digest) == WT_OK, "fetched copy: %s", wt_last_error());
  printf("fetched from holder %d after refusing the corrupt and the lying one\n", from);

  /* only the corrupt and the lying holder: refused with both reasons, nothing installed */
  parallel_shard_id id2 = id;
  char root5[400];
  snprintf(root5, sizeof root5, "%s/h5", base);
  mkdir(root5, 0755);
  rc = parallel_shard_fetch(root5, &id2, digest, h, 2, pub[3], sec[3], 10, &from);
  CHECK(rc == WT_ECORRUPT, "two bad holders: rc %d: %s", rc, wt_last_error());
  CHECK(strstr(wt_last_error(), "do not match") && strstr(wt_last_error(), "listing hashes"),
        "the message names both refusals: %s", wt_last_error());
  printf("refused: %.300s...\n", wt_last_error());
  CHECK(parallel_shard_digest(root5, &id2, d1, NULL) == WT_ENOTFOUND, "nothing installed");

  /* a key no holder allows: the handshake is refused, the fetch times out */
  char opub[41], osec[41];
  CHECK(parallel_zmq_keypair_new(opub, osec) == WT_OK, "keypair");
  rc = parallel_shard_fetch(root5, &id2, digest, &h[2], 1, opub, osec, 1.5, &from);
  CHECK(rc == WT_ETIMEOUT || rc == WT_EIO, "a key not allowed: rc %d: %s", rc, wt_last_error());
  CHECK(parallel_shard_server_refused(srv[2]) > 0, "the refused handshake is counted");

  /* a holder given with the wrong server key cannot be spoken to either */
  parallel_shard_holder wrong = {.endpoint = h[2].endpoint, .public_key = pub[1]};
  rc = parallel_shard_fetch(root5, &id2, digest, &wrong, 1, pub[3], sec[3], 1.5, &from);
  CHECK(rc != WT_OK, "the wrong server key must fail");

  /* a lying server: the true listing, then more bytes than it lists */
  char *true_listing = NULL;
  CHECK(parallel_shard_digest(root[2], &id, d1, &true_listing) == WT_OK, "listing");
  s_check_liar(root5, &id, digest, true_listing, pub[3], sec[3]);
  free(true_listing);
  CHECK(parallel_shard_digest(root5, &id2, d1, NULL) == WT_ENOTFOUND, "nothing installed");

  /* through the relay, into a fresh store */
  char root6[400];
  snprintf(root6, sizeof root6, "%s/h6", base);
  mkdir(root6, 0755);
  s_check_seal();
  s_check_relay(root[2], root6, &id, digest);

  /* the store's own listing: one shard held */
  parallel_shard_id list[8];
  int n = parallel_shard_list(root[3], RUN, list, 8);
  CHECK(n == 1 && list[0].step == 40 && list[0].stage == 1 && list[0].replica == 0, "list: %d", n);
  parallel_shard_remove(root[3], &id);
  CHECK(parallel_shard_list(root[3], RUN, list, 8) == 0, "removed");

  for (int i = 0; i < 3; i++) parallel_shard_server_destroy(&srv[i]);
  CHECK(srv[0] == NULL, "destroy clears the pointer");
  char cmd[400];
  snprintf(cmd, sizeof cmd, "rm -rf %s", base);
  system(cmd);
  printf("test_shards: all checks passed\n");
  return 0;
}
