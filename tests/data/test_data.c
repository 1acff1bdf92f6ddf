/* test_data — the synthetic corpus and its entropy, text files, llm.c shards (good and
 * malformed), batches and the restorable position, URL fetching with SHA-256 verification. */
#include "common/common.h"
#include "model/data.h"
#include "common/testing.h"
#include "tests/data/stall_server.h"

#include <stdlib.h>

#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <utime.h>

static char g_tmp[512];

static void s_write_file(const char *path, const void *data, size_t n) {
  FILE *f = fopen(path, "wb");
  WT_TEST_REQUIRE(f != NULL, "cannot create %s", path);
  fwrite(data, 1, n, f);
  fclose(f);
}

/* Writes an llm.c shard with the given header fields and ntok_written tokens (i % mod). */
static void s_write_shard(const char *path, int magic, int version, int ntok_header,
                          int ntok_written, int mod) {
  int32_t header[256] = {magic, version, ntok_header};
  FILE *f = fopen(path, "wb");
  WT_TEST_REQUIRE(f != NULL, "cannot create %s", path);
  fwrite(header, sizeof header, 1, f);
  for (int i = 0; i < ntok_written; i++) {
    uint16_t t = (uint16_t)(i % mod);
    fwrite(&t, 2, 1, f);
  }
  fclose(f);
}

static void test_synthetic(void) {
  data_synth_config c = data_synth_default();
  c.n_tokens = 200000;
  data_set *a = data_set_synthetic(&c), *b = data_set_synthetic(&c);
  WT_TEST_REQUIRE(a && b, "%s", wt_last_error());
  WT_TEST_ASSERT(data_set_vocab_size(a) == 64 && data_set_num_tokens(a) == c.n_tokens, "size");
  WT_TEST_ASSERT(!memcmp(data_set_tokens(a), data_set_tokens(b), c.n_tokens * 2),
                 "same seed, same corpus");
  c.seed++;
  data_set *other = data_set_synthetic(&c);
  WT_TEST_ASSERT(memcmp(data_set_tokens(a), data_set_tokens(other), c.n_tokens * 2),
                 "another seed, another corpus");
  /* The empirical conditional entropy H(next | prev) must match the closed form, and no state
   * may have more than K successors. */
  static double count[64][64];
  memset(count, 0, sizeof count);
  const uint16_t *t = data_set_tokens(a);
  for (size_t i = 0; i + 1 < c.n_tokens; i++) count[t[i]][t[i + 1]]++;
  double h = 0, total = (double)(c.n_tokens - 1);
  for (int s = 0; s < 64; s++) {
    double row = 0;
    int distinct = 0;
    for (int n = 0; n < 64; n++) row += count[s][n], distinct += count[s][n] > 0;
    WT_TEST_ASSERT(distinct <= c.successors, "state %d has %d successors", s, distinct);
    for (int n = 0; n < 64; n++)
      if (count[s][n] > 0) h -= count[s][n] / total * log(count[s][n] / row);
  }
  double want = data_synthetic_entropy(c.successors);
  WT_TEST_CLOSE(h, want, 0.01, 0, "empirical entropy rate");
  WT_TEST_CLOSE(data_synthetic_entropy(1), 0.0, 1e-12, 0, "one successor is deterministic");
  WT_TEST_CLOSE(data_synthetic_entropy(2), -(2.0 / 3 * log(2.0 / 3) + 1.0 / 3 * log(1.0 / 3)),
                1e-12, 0, "two successors");
  c.vocab_size = 65;
  WT_TEST_ASSERT(data_set_synthetic(&c) == NULL && strstr(wt_last_error(), "vocab_size"),
                 "bad vocab refused: %s", wt_last_error());
  data_set_destroy(&a);
  data_set_destroy(&b);
  data_set_destroy(&other);
  WT_TEST_ASSERT(a == NULL, "destroy clears the pointer");
}

static void test_text_file(void) {
  char path[600];
  snprintf(path, sizeof path, "%s/tiny.txt", g_tmp);
  char text[1000];
  for (int i = 0; i < 1000; i++) text[i] = (char)(' ' + i % 90);
  s_write_file(path, text, sizeof text);
  data_set *d = data_set_open(path, NULL, NULL);
  WT_TEST_REQUIRE(d != NULL, "%s", wt_last_error());
  WT_TEST_ASSERT(data_set_vocab_size(d) == 256 && data_set_tokenizer(d) == DATA_TOKENIZER_BYTES,
                 "bytes");
  WT_TEST_ASSERT(data_set_num_train(d) == 900 && data_set_num_val(d) == 100, "90/10 split");
  WT_TEST_ASSERT(data_set_tokens(d)[7] == (uint16_t)text[7], "token = byte");
  WT_TEST_ASSERT(data_set_check_seq(d, 99) == WT_OK, "99+1 fits the validation split");
  WT_TEST_ASSERT(data_set_check_seq(d, 100) == WT_EINVAL && strstr(wt_last_error(), "--seq"),
                 "too short: %s", wt_last_error());
  data_set_destroy(&d);
  snprintf(path, sizeof path, "%s/empty.txt", g_tmp);
  s_write_file(path, "", 0);
  WT_TEST_ASSERT(!data_set_open(path, NULL, NULL) && strstr(wt_last_error(), "empty"), "empty");
  snprintf(path, sizeof path, "%s/missing.txt", g_tmp);
  WT_TEST_ASSERT(!data_set_open(path, NULL, NULL) && strstr(wt_last_error(), "missing.txt"),
                 "missing file: %s", wt_last_error());
}

static void test_shards(void) {
  char path[600];
  snprintf(path, sizeof path, "%s/good.bin", g_tmp);
  s_write_shard(path, DATA_SHARD_MAGIC, 1, 3000, 3000, 50257);
  data_set *d = data_set_open(path, NULL, NULL);
  WT_TEST_REQUIRE(d != NULL, "%s", wt_last_error());
  WT_TEST_ASSERT(data_set_vocab_size(d) == 50257 && data_set_num_tokens(d) == 3000, "shard");
  WT_TEST_ASSERT(data_set_tokens(d)[2999] == 2999, "token values");
  data_set_destroy(&d);
  struct {
    int magic, version, header, written, mod;
    const char *expect;
  } bad[] = {
      {12345, 1, 100, 100, 100, "magic"},
      {DATA_SHARD_MAGIC, 2, 100, 100, 100, "version"},
      {DATA_SHARD_MAGIC, 1, 100, 50, 100, "truncated"},
      {DATA_SHARD_MAGIC, 1, 100, 150, 100, "truncated"},
      {DATA_SHARD_MAGIC, 1, -5, 0, 100, "tokens"},
      {DATA_SHARD_MAGIC, 1, 60000, 60000, 65535, "vocabulary"},
  };
  for (size_t i = 0; i < WT_ARRAY_LEN(bad); i++) {
    snprintf(path, sizeof path, "%s/bad%zu.bin", g_tmp, i);
    s_write_shard(path, bad[i].magic, bad[i].version, bad[i].header, bad[i].written, bad[i].mod);
    d = data_set_open(path, NULL, NULL);
    WT_TEST_ASSERT(d == NULL && strstr(wt_last_error(), bad[i].expect),
                   "bad shard %zu: want '%s', got '%s'", i, bad[i].expect, wt_last_error());
    data_set_destroy(&d);
  }
  /* The out-of-vocabulary message keeps its token and position (wt_fail once formatted its own
     buffer into itself here). */
  snprintf(path, sizeof path, "%s/bad5.bin", g_tmp);
  d = data_set_open(path, NULL, NULL);
  WT_TEST_ASSERT(!d && strstr(wt_last_error(), "bad5.bin: token 50257 at index 50257 is outside "
                                               "the vocabulary of 50257"),
                 "OOV message: %s", wt_last_error());
  snprintf(path, sizeof path, "%s/short.bin", g_tmp);
  s_write_file(path, "hello", 5);
  WT_TEST_ASSERT(!data_set_open(path, NULL, NULL) && strstr(wt_last_error(), "header"),
                 "short .bin: %s", wt_last_error());
}

static void test_batches(void) {
  data_synth_config c = data_synth_default();
  c.n_tokens = 5000;
  data_set *d = data_set_synthetic(&c);
  enum { B = 3, T = 16 };
  int x[B * T], y[B * T], x2[B * T], y2[B * T];
  data_position pos, saved;
  data_position_init(&pos, 7);
  data_set_next_batch(d, &pos, B, T, x, y);
  for (int i = 0; i < B * T; i++)
    if (i % T != T - 1) WT_TEST_ASSERT(y[i] == x[i + 1], "targets are inputs shifted, i=%d", i);
  saved = pos;
  data_set_next_batch(d, &pos, B, T, x, y);
  data_set_next_batch(d, &saved, B, T, x2, y2);
  WT_TEST_ASSERT(!memcmp(x, x2, sizeof x) && !memcmp(y, y2, sizeof y) && pos.batches == 2,
                 "a restored position serves the same batch");
  data_set_next_batch(d, &pos, B, T, x2, y2);
  WT_TEST_ASSERT(memcmp(x, x2, sizeof x), "the next batch differs");
  size_t nw = data_set_num_val_windows(d, T);
  WT_TEST_ASSERT(nw == (500 - 1) / T, "validation windows: %zu", nw);
  data_set_val_batch(d, 0, B, T, x, y);
  WT_TEST_ASSERT(x[0] == data_set_tokens(d)[4500] && x[T] == data_set_tokens(d)[4500 + T],
                 "validation windows start at the split, stride T");
  data_set_val_batch(d, nw, 1, T, x2, y2);
  WT_TEST_ASSERT(!memcmp(x, x2, T * sizeof(int)), "validation windows wrap");
  data_set_destroy(&d);
}

static void test_tokenizers(void) {
  int tok[16], n = 0;
  char buf[16];
  WT_TEST_ASSERT(data_text_encode(DATA_TOKENIZER_SYNTHETIC, "ab Z", tok, 16, &n) == WT_OK &&
                     n == 4 && tok[0] == 0 && tok[1] == 1,
                 "synthetic encode");
  data_token_text(DATA_TOKENIZER_SYNTHETIC, tok[3], buf, sizeof buf);
  WT_TEST_ASSERT(!strcmp(buf, "Z"), "synthetic decode: %s", buf);
  WT_TEST_ASSERT(data_text_encode(DATA_TOKENIZER_SYNTHETIC, "a!", tok, 16, &n) == WT_EINVAL,
                 "'!' is outside the alphabet");
  WT_TEST_ASSERT(data_text_encode(DATA_TOKENIZER_GPT2, "hi", tok, 16, &n) == WT_EINVAL, "gpt2");
  data_token_text(DATA_TOKENIZER_GPT2, 50256, buf, sizeof buf);
  WT_TEST_ASSERT(!strcmp(buf, "<50256>"), "gpt2 decode: %s", buf);
}

static int s_count_files(const char *dir) {
  DIR *d = opendir(dir);
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));) n += e->d_name[0] != '.' || strlen(e->d_name) > 2;
  if (d) closedir(d);
  return n;
}

static void test_fetch(void) {
  char src[600], url[700], cache[600], out[4096], sha[65];
  snprintf(src, sizeof src, "%s/remote.txt", g_tmp);
  snprintf(cache, sizeof cache, "%s/cache", g_tmp);
  const char *text = "the quick brown fox jumps over the lazy dog";
  s_write_file(src, text, strlen(text));
  WT_TEST_REQUIRE(data_file_sha256(src, sha) == WT_OK, "%s", wt_last_error());
  snprintf(url, sizeof url, "file://%s", src);
  WT_TEST_ASSERT(data_fetch(url, cache, sha, out, sizeof out) == WT_OK, "%s", wt_last_error());
  char again[65];
  WT_TEST_ASSERT(data_file_sha256(out, again) == WT_OK && !strcmp(sha, again), "cached copy");
  /* A matching cached copy is reused even when the source changes. */
  s_write_file(src, "changed", 7);
  WT_TEST_ASSERT(data_fetch(url, cache, sha, out, sizeof out) == WT_OK, "%s", wt_last_error());
  WT_TEST_ASSERT(data_file_sha256(out, again) == WT_OK && !strcmp(sha, again), "cache reused");
  /* Now the cache holds the old file and the source a new one: a digest of neither is refused
   * and leaves nothing behind. */
  char bad[65];
  memcpy(bad, sha, 65);
  bad[0] = bad[0] == '0' ? '1' : '0';
  int n_before = s_count_files(cache);
  WT_TEST_ASSERT(data_fetch(url, cache, bad, out, sizeof out) == WT_ECORRUPT &&
                     strstr(wt_last_error(), "SHA-256"),
                 "mismatch refused: %s", wt_last_error());
  WT_TEST_ASSERT(s_count_files(cache) == n_before - 1, "the bad copy is not kept (%d -> %d)",
                 n_before, s_count_files(cache));
  WT_TEST_ASSERT(data_set_open(url, cache, bad) == NULL, "data_set_open refuses too");
  WT_TEST_ASSERT(data_fetch(url, cache, "xyz", out, sizeof out) == WT_EINVAL, "bad digest");
  WT_TEST_ASSERT(data_fetch("http://127.0.0.1:1/data.txt", cache, NULL, out, sizeof out) ==
                         WT_EIO &&
                     strstr(wt_last_error(), "127.0.0.1"),
                 "refused connection: %s", wt_last_error());
  snprintf(url, sizeof url, "file://%s/nope.txt", g_tmp);
  WT_TEST_ASSERT(data_fetch(url, cache, NULL, out, sizeof out) == WT_EIO, "missing file URL");
  WT_TEST_ASSERT(data_fetch("ftp://x/y", cache, NULL, out, sizeof out) == WT_EINVAL, "scheme");
  /* A local path with a digest is verified too. */
  WT_TEST_ASSERT(data_set_open(src, NULL, sha) == NULL && strstr(wt_last_error(), "SHA-256"),
                 "local path mismatch: %s", wt_last_error());
}

/* A directory is not a data file (fopen accepts it and its "size" is LONG_MAX). */
static void test_directory(void) {
  char path[600];
  snprintf(path, sizeof path, "%s/adir", g_tmp);
  WT_TEST_REQUIRE(mkdir(path, 0755) == 0, "mkdir %s", path);
  data_set *d = data_set_open(path, NULL, NULL);
  WT_TEST_ASSERT(!d && strstr(wt_last_error(), "is a directory") && strstr(wt_last_error(), path),
                 "directory refused: %s", wt_last_error());
  data_set_destroy(&d);
}

static volatile sig_atomic_t g_alarm;
static void s_on_alarm(int sig) {
  g_alarm = sig;
}

/* A server that stops sending: the download ends after the stall timeout, or at once when the
 * abort flag is raised, and nothing is left in the cache. */
static void test_stalled_fetch(void) {
  static const char *replies[] = {"", "HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\nabc"};
  char cache[600], url[128], out[1024];
  for (size_t i = 0; i < WT_ARRAY_LEN(replies); i++) {
    stall_server srv;
    WT_TEST_REQUIRE(stall_server_start(&srv, replies[i]) == 0, "loopback server");
    snprintf(cache, sizeof cache, "%s/stall-cache-%zu", g_tmp, i);
    snprintf(url, sizeof url, "http://127.0.0.1:%d/corpus.txt", srv.port);
    data_fetch_configure(1, NULL);
    double t0 = wt_now_s();
    int rc = data_fetch(url, cache, NULL, out, sizeof out);
    double took = wt_now_s() - t0;
    WT_TEST_ASSERT(rc == WT_ETIMEOUT && strstr(wt_last_error(), "stalled") && took < 30,
                   "stalled server (reply %zu): rc %d after %.1f s: %s", i, rc, took,
                   wt_last_error());
    WT_TEST_ASSERT(s_count_files(cache) == 0, "no partial file left: %d", s_count_files(cache));
    /* The abort flag ends a download that the stall timeout would let run for a minute. */
    data_fetch_configure(60, &g_alarm);
    g_alarm = 0;
    signal(SIGALRM, s_on_alarm);
    alarm(1);
    t0 = wt_now_s();
    rc = data_fetch(url, cache, NULL, out, sizeof out);
    took = wt_now_s() - t0;
    WT_TEST_ASSERT(rc == WT_EIO && strstr(wt_last_error(), "interrupted") && took < 30,
                   "aborted download (reply %zu): rc %d after %.1f s: %s", i, rc, took,
                   wt_last_error());
    WT_TEST_ASSERT(s_count_files(cache) == 0, "no partial file left: %d", s_count_files(cache));
    data_fetch_configure(0, NULL);
    stall_server_stop(&srv);
  }
}

/* A kill during a download (the second signal) leaves its temporary file; the next fetch into
 * that cache removes it once it is older than any live download's could be. */
static void test_stale_downloads(void) {
  char cache[600], old[700], young[700], src[600], url[700], out[1024];
  snprintf(cache, sizeof cache, "%s/stale-cache", g_tmp);
  WT_TEST_REQUIRE(mkdir(cache, 0755) == 0, "mkdir");
  snprintf(old, sizeof old, "%s/.fetch-old123", cache);
  snprintf(young, sizeof young, "%s/.fetch-new123", cache);
  s_write_file(old, "x", 1);
  s_write_file(young, "x", 1);
  struct utimbuf day_ago = {.actime = time(NULL) - 86400, .modtime = time(NULL) - 86400};
  WT_TEST_REQUIRE(utime(old, &day_ago) == 0, "utime");
  snprintf(src, sizeof src, "%s/stale-src.txt", g_tmp);
  s_write_file(src, "hello", 5);
  snprintf(url, sizeof url, "file://%s", src);
  WT_TEST_ASSERT(data_fetch(url, cache, NULL, out, sizeof out) == WT_OK, "%s", wt_last_error());
  WT_TEST_ASSERT(access(old, F_OK) != 0, "the day-old temporary file is removed");
  WT_TEST_ASSERT(access(young, F_OK) == 0, "a young one (maybe a live download) stays");
}

int main(void) {
  wt_test_tmpdir(g_tmp, sizeof g_tmp);
  test_synthetic();
  test_text_file();
  test_shards();
  test_batches();
  test_tokenizers();
  test_fetch();
  test_directory();
  test_stalled_fetch();
  test_stale_downloads();
  if (!wt_test_failures) { /* scratch is kept when a check failed, for a look at it */
    char rm[700];
    snprintf(rm, sizeof rm, "rm -rf '%s'", g_tmp);
    if (system(rm) != 0) fprintf(stderr, "could not remove %s\n", g_tmp);
  }
  return wt_test_finish("test_data");
}
