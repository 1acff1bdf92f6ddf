/* test_bpe — GPT-2 BPE against an independent reference, and round trips.
 *
 * tests/fixtures/bpe/expected.json holds the ids that the npm package gpt-3-encoder gives for
 * corpus.txt (unicode, whitespace runs, contractions, code, emoji), each of its lines and some
 * edge cases (make_fixture.js made it); every case must encode to exactly those ids and decode
 * back to its text, and cutting the corpus at any tokenizer_bpe_next_cut changes no id. When
 * ../shared holds tinyshakespeare.txt, its 338025 ids must match the reference's count, first ids
 * and hash. Also: the pre-tokenizer's pieces on a few strings, cutting at tokenizer_bpe_next_cut
 * changes nothing, arbitrary bytes (invalid UTF-8) round trip, UTF-8 repair, and the errors for
 * missing or corrupt files. */
#include "tokenizer/bpe.h"

#include "common/common.h"
#include "common/rng.h"
#include "common/testing.h"
#include "tokenizer/bpe_internal.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *s_read(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  *len = fread(buf, 1, (size_t)n, f);
  buf[*len] = 0;
  fclose(f);
  return buf;
}

/* Encodes text and compares with want (n ids); reports the first difference. */
static int s_expect_ids(tokenizer_bpe *t, const char *text, size_t len, const int32_t *want,
                        size_t n, const char *what) {
  tokenizer_ids got = {0};
  tokenizer_bpe_encode(t, text, len, &got);
  size_t i = 0;
  while (i < got.n && i < n && got.ids[i] == want[i]) i++;
  int ok = i == n && got.n == n;
  WT_TEST_ASSERT(ok, "%s: %zu ids, reference %zu; first difference at %zu (got %d want %d)", what,
                 got.n, n, i, i < got.n ? got.ids[i] : -1, i < n ? want[i] : -1);
  size_t back_len;
  char *back = tokenizer_bpe_decode(t, got.ids, got.n, &back_len);
  WT_TEST_ASSERT(back_len == len && !memcmp(back, text, len), "%s: decode(encode) differs", what);
  free(back);
  tokenizer_ids_free(&got);
  return ok;
}

/* Cutting text at every cut tokenizer_bpe_next_cut offers changes no id. Returns the cuts. */
static int s_expect_cuts(tokenizer_bpe *t, const char *text, size_t len, const char *what) {
  tokenizer_ids whole = {0}, parts = {0};
  tokenizer_bpe_encode(t, text, len, &whole);
  int cuts = 0, bad = 0;
  for (size_t p = tokenizer_bpe_next_cut(text, len, 1); p < len;
       p = tokenizer_bpe_next_cut(text, len, p + 1), cuts++) {
    parts.n = 0;
    tokenizer_bpe_encode(t, text, p, &parts);
    tokenizer_bpe_encode(t, text + p, len - p, &parts);
    if (parts.n != whole.n || memcmp(parts.ids, whole.ids, whole.n * sizeof *whole.ids)) {
      if (!bad++) WT_TEST_ASSERT(0, "%s: a cut at byte %zu changes the ids", what, p);
    }
  }
  WT_TEST_ASSERT(!bad, "%s: %d of %d cuts change the ids", what, bad, cuts);
  tokenizer_ids_free(&whole);
  tokenizer_ids_free(&parts);
  return cuts;
}

/* Cuts next to non-ASCII text: after a non-space code point before an ASCII space, never after
 * a non-ASCII space (U+3000) or inside a contraction. */
static void test_cuts(tokenizer_bpe *t) {
  static const struct {
    const char *text;
    int cuts;
  } cases[] = {{"a\xe3\x80\x80\n", 0}, {"\xe0\xa5\xa4\n", 1},
               {"\x80\x80 x", 1},      {"'s\n", 1},
               {"x\xc3 y", 1},         {"\xe6\x97\xa5 \xe6\x9c\xac\n", 2}};
  for (size_t i = 0; i < WT_ARRAY_LEN(cases); i++) {
    char what[32];
    snprintf(what, sizeof what, "cuts of case %zu", i);
    int n = s_expect_cuts(t, cases[i].text, strlen(cases[i].text), what);
    WT_TEST_ASSERT(n == cases[i].cuts, "%s: %d cuts, want %d", what, n, cases[i].cuts);
  }
}

static void test_reference(tokenizer_bpe *t, const char *fixtures) {
  char path[8192];
  size_t len;
  snprintf(path, sizeof path, "%s/expected.json", fixtures);
  char *json = s_read(path, &len);
  WT_TEST_REQUIRE(json, "cannot read %s", path);
  cJSON *root = cJSON_Parse(json);
  WT_TEST_REQUIRE(root, "%s is not JSON", path);
  const cJSON *c, *cases = cJSON_GetObjectItem(root, "cases");
  int k = 0, passed = 0;
  cJSON_ArrayForEach(c, cases) {
    const char *text = cJSON_GetObjectItem(c, "text")->valuestring;
    const cJSON *ids = cJSON_GetObjectItem(c, "ids");
    size_t n = (size_t)cJSON_GetArraySize(ids), i = 0;
    int32_t *want = malloc((n + 1) * sizeof *want);
    const cJSON *e;
    cJSON_ArrayForEach(e, ids) want[i++] = (int32_t)e->valueint;
    char what[96];
    snprintf(what, sizeof what, "case %d \"%.40s\"", k++, text);
    passed += s_expect_ids(t, text, strlen(text), want, n, what);
    if (k == 1) /* the whole corpus */
      WT_TEST_ASSERT(s_expect_cuts(t, text, strlen(text), what) > 300, "the corpus has cuts");
    free(want);
  }
  WT_TEST_ASSERT(k > 40 && passed == k, "%d of %d reference cases match", passed, k);
  printf("reference: %d of %d cases match gpt-3-encoder\n", passed, k);
  cJSON_Delete(root);
  free(json);
}

static uint32_t s_fnv1a(const int32_t *ids, size_t n) {
  uint32_t h = 0x811c9dc5u;
  for (size_t i = 0; i < n; i++)
    for (int k = 0; k < 4; k++) h = (h ^ (((uint32_t)ids[i] >> (8 * k)) & 0xff)) * 0x01000193u;
  return h;
}

/* The larger file the fixture summarises, when ../shared has it; cut at every ~4 KiB too. */
static void test_big_file(tokenizer_bpe *t, const char *fixtures) {
  char path[8192];
  size_t len, jlen;
  snprintf(path, sizeof path, "%s/expected.json", fixtures);
  char *json = s_read(path, &jlen);
  cJSON *root = cJSON_Parse(json);
  const cJSON *file = cJSON_GetObjectItem(root, "file");
  const char *shared = getenv("WT_SHARED_DIR");
  snprintf(path, sizeof path, "%s/data/%s", shared ? shared : "../shared",
           cJSON_GetObjectItem(file, "name")->valuestring);
  char *text = s_read(path, &len);
  if (!text) {
    printf("big file: %s not found, not compared\n", path);
  } else {
    tokenizer_ids got = {0}, cut = {0};
    tokenizer_bpe_encode(t, text, len, &got);
    size_t want_n = (size_t)cJSON_GetObjectItem(file, "tokens")->valuedouble;
    uint32_t want_h = (uint32_t)cJSON_GetObjectItem(file, "fnv1a")->valuedouble;
    const cJSON *first = cJSON_GetObjectItem(file, "first"), *e;
    int i = 0, first_ok = 1;
    cJSON_ArrayForEach(e, first) first_ok &= (size_t)i < got.n && got.ids[i++] == e->valueint;
    WT_TEST_ASSERT(got.n == want_n && first_ok && s_fnv1a(got.ids, got.n) == want_h,
                   "%s: %zu ids (reference %zu), hash %08x (reference %08x), first ids %s", path,
                   got.n, want_n, s_fnv1a(got.ids, got.n), want_h, first_ok ? "match" : "differ");
    for (size_t start = 0; start < len;) {
      size_t end = tokenizer_bpe_next_cut(text, len, start + 4096);
      tokenizer_bpe_encode(t, text + start, end - start, &cut);
      start = end;
    }
    WT_TEST_ASSERT(cut.n == got.n && !memcmp(cut.ids, got.ids, got.n * sizeof *got.ids),
                   "encoding in pieces cut at tokenizer_bpe_next_cut differs from whole");
    printf("big file: %s, %zu ids match the reference\n", path, got.n);
    tokenizer_ids_free(&got);
    tokenizer_ids_free(&cut);
  }
  free(text);
  cJSON_Delete(root);
  free(json);
}

/* The pieces of text joined with '|'. */
static void s_pieces(const char *text, char *out) {
  size_t len = strlen(text), o = 0;
  for (size_t pos = 0; pos < len;) {
    size_t end = bpe_piece_end((const unsigned char *)text, len, pos);
    if (pos) out[o++] = '|';
    memcpy(out + o, text + pos, end - pos);
    o += end - pos;
    pos = end;
  }
  out[o] = 0;
}

static void test_pieces(void) {
  static const char *cases[][2] = {
      {"Hello  world\n\n", "Hello| | world|\n\n"},
      {"I'm here, aren't you?", "I|'m| here|,| aren|'t| you|?"},
      {"a\n\nb", "a|\n|\n|b"}, /* only ' ' joins the next piece, not \n */
      {"x   ", "x|   "},
      {" 's''s", " '|s|''|s"},
      {"abc123 45!!", "abc|123| 45|!!"},
      {"caf\xc3\xa9 \xe6\x97\xa5\xe6\x9c\xac", "caf\xc3\xa9| \xe6\x97\xa5\xe6\x9c\xac"},
      {"a\xc2\xa0\xc2\xa0"
       "b",
       "a|\xc2\xa0|\xc2\xa0|b"}, /* U+00A0 is a space, not ' ' */
      {"\xff\xfe"
       "ab",
       "\xff\xfe|ab"}, /* invalid bytes: one run of other */
  };
  char got[256];
  for (size_t i = 0; i < WT_ARRAY_LEN(cases); i++) {
    s_pieces(cases[i][0], got);
    WT_TEST_ASSERT(!strcmp(got, cases[i][1]), "pieces of case %zu: \"%s\", want \"%s\"", i, got,
                   cases[i][1]);
  }
}

/* Arbitrary bytes, most of them not UTF-8, still round trip: byte-level BPE keeps every byte. */
static void test_bytes_round_trip(tokenizer_bpe *t) {
  wt_rng rng;
  wt_rng_seed(&rng, 7);
  char buf[4096];
  for (int r = 0; r < 50; r++) {
    size_t n = 1 + wt_rng_u64(&rng) % sizeof buf;
    for (size_t i = 0; i < n; i++) buf[i] = (char)(wt_rng_u64(&rng) % (r % 2 ? 256 : 0x90));
    tokenizer_ids ids = {0};
    tokenizer_bpe_encode(t, buf, n, &ids);
    size_t len;
    char *back = tokenizer_bpe_decode(t, ids.ids, ids.n, &len);
    WT_TEST_ASSERT(len == n && !memcmp(back, buf, n), "random bytes %d do not round trip", r);
    free(back);
    tokenizer_ids_free(&ids);
  }
}

static void test_utf8_repair(tokenizer_bpe *t) {
  char out[64];
  size_t used, n;
  /* "é" is 0xC3 0xA9; held back when cut after 0xC3, replaced at the end */
  n = tokenizer_utf8_repair("ab\xc3", 3, 0, out, &used);
  WT_TEST_ASSERT(n == 2 && used == 2, "incomplete tail held back: wrote %zu, used %zu", n, used);
  n = tokenizer_utf8_repair("ab\xc3", 3, 1, out, &used);
  WT_TEST_ASSERT(n == 5 && used == 3 && !memcmp(out, "ab\xef\xbf\xbd", 5),
                 "final incomplete tail becomes U+FFFD: wrote %zu", n);
  n = tokenizer_utf8_repair("\xff"
                            "a\xe6\x97"
                            "b",
                            5, 0, out, &used);
  WT_TEST_ASSERT(n == 8 && used == 5 &&
                     !memcmp(out,
                             "\xef\xbf\xbd"
                             "a\xef\xbf\xbd"
                             "b",
                             8),
                 "invalid byte and broken sequence each become one U+FFFD: wrote %zu", n);
  /* a token that is half a character: " 😀" is [30325, 222], and 222 alone is one byte */
  size_t len;
  const char *b = tokenizer_bpe_token_bytes(t, 222, &len);
  WT_TEST_ASSERT(b && len == 1 && (unsigned char)b[0] == 0x80, "token 222 is the byte 0x80");
  WT_TEST_ASSERT(!tokenizer_bpe_token_bytes(t, 50257, &len), "id past the vocabulary is NULL");
}

static void s_write(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  fputs(text, f);
  fclose(f);
}

static void test_errors(const char *fixtures) {
  char dir[] = "/tmp/test_bpe_XXXXXX", vocab[256], merges[256], good[8192];
  WT_TEST_REQUIRE(mkdtemp(dir), "mkdtemp");
  tokenizer_bpe *t = tokenizer_bpe_new(dir);
  WT_TEST_ASSERT(!t && wt_last_status() == WT_ENOTFOUND &&
                     strstr(wt_last_error(), "vocab.json or encoder.json"),
                 "empty directory: %s", wt_last_error());
  snprintf(vocab, sizeof vocab, "%s/vocab.json", dir);
  snprintf(merges, sizeof merges, "%s/merges.txt", dir);
  s_write(vocab, "{\"a\": 0, ");
  s_write(merges, "#version: 0.2\n");
  t = tokenizer_bpe_new(dir);
  WT_TEST_ASSERT(!t && wt_last_status() == WT_ECORRUPT && strstr(wt_last_error(), "not a JSON"),
                 "truncated JSON: %s", wt_last_error());
  s_write(vocab, "{\"a\": 0, \"b\": 1}");
  t = tokenizer_bpe_new(dir);
  WT_TEST_ASSERT(!t && wt_last_status() == WT_ECORRUPT && strstr(wt_last_error(), "256"),
                 "tiny vocabulary: %s", wt_last_error());
  snprintf(good, sizeof good, "%s/encoder.json", fixtures);
  s_write(merges, "#version: 0.2\n\xc4\xa0 t\nnot-a-token zz\n");
  t = tokenizer_bpe_new_files(good, merges);
  WT_TEST_ASSERT(!t && wt_last_status() == WT_ECORRUPT && strstr(wt_last_error(), "line 3") &&
                     strstr(wt_last_error(), "different tokenizers"),
                 "merge of unknown tokens: %s", wt_last_error());
  s_write(merges, "#version: 0.2\nonetoken\n");
  t = tokenizer_bpe_new_files(good, merges);
  WT_TEST_ASSERT(!t && strstr(wt_last_error(), "line 2") && strstr(wt_last_error(), "two tokens"),
                 "malformed merge line: %s", wt_last_error());
  unlink(vocab);
  unlink(merges);
  rmdir(dir);
}

int main(void) {
  const char *src = getenv("WT_SOURCE_DIR");
  char fixtures[4096];
  snprintf(fixtures, sizeof fixtures, "%s/tests/fixtures/bpe", src ? src : ".");
  tokenizer_bpe *t = tokenizer_bpe_new(fixtures);
  WT_TEST_REQUIRE(t, "loading %s: %s", fixtures, wt_last_error());
  WT_TEST_ASSERT(tokenizer_bpe_vocab_size(t) == 50257, "vocab %d", tokenizer_bpe_vocab_size(t));
  WT_TEST_ASSERT(tokenizer_bpe_eot(t) == 50256, "eot %d", tokenizer_bpe_eot(t));
  test_pieces();
  test_cuts(t);
  test_reference(t, fixtures);
  test_big_file(t, fixtures);
  test_bytes_round_trip(t);
  test_utf8_repair(t);
  test_errors(fixtures);
  tokenizer_bpe_destroy(&t);
  WT_TEST_ASSERT(t == NULL, "destroy sets the pointer to NULL");
  if (wt_test_failures) fprintf(stderr, "test_bpe: %d failures\n", wt_test_failures);
  return wt_test_failures ? 1 : 0;
}
