/* test_shards — a checkpoint shard between processes' stores (parallel/transport/shards.h):
 * three holders on loopback CURVE, one whose copy is corrupt on disk and one that lies about its
 * listing, then an intact one. The fetch refuses the first two by the digest, takes the third,
 * and the files it installs verify; a client whose key no holder allows gets nothing; a shard
 * nobody serves intact fails with a message naming every holder; the store lists what it holds.
 * Scratch in a temp dir. */
#include "parallel/transport/shards.h"
#include "parallel/transport/zmq.h"

#include "common/common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

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
    h[i] = (parallel_shard_holder){parallel_shard_server_endpoint(srv[i]), pub[i]};
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
  parallel_shard_holder wrong = {h[2].endpoint, pub[1]};
  rc = parallel_shard_fetch(root5, &id2, digest, &wrong, 1, pub[3], sec[3], 1.5, &from);
  CHECK(rc != WT_OK, "the wrong server key must fail");

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
