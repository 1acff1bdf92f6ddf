/* test_cli_tokenize — `wantrain tokenize` and `sample --tokenizer` end to end: usage and file
 * errors, shards in llm.c's format whose ids are exactly the BPE of the whole text (cut into
 * chunks and shards without changing an id), one <|endoftext|> per document, and a model
 * trained on a shard that takes a text prompt and prints text. */
#include "common/common.h"
#include "common/testing.h"
#include "tests/cli/cli_harness.h"
#include "tokenizer/bpe.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static char g_fixtures[1024];

/* Every id of the shards SPLIT_000000.bin, SPLIT_000001.bin, ... in dir, appended to *ids;
 * checks each header. Returns the number of shards. */
static int s_read_shards(const char *dir, const char *split, tokenizer_ids *ids) {
  int k = 0;
  for (;; k++) {
    char path[2048];
    snprintf(path, sizeof path, "%s/%s/%s_%06d.bin", g_tmp, dir, split, k);
    FILE *f = fopen(path, "rb");
    if (!f) break;
    int32_t header[256];
    WT_TEST_REQUIRE(fread(header, sizeof header, 1, f) == 1, "%s: short header", path);
    WT_TEST_ASSERT(header[0] == 20240520 && header[1] == 1 && header[2] > 0, "%s: header %d %d %d",
                   path, header[0], header[1], header[2]);
    uint16_t tok;
    int32_t n = 0;
    while (fread(&tok, sizeof tok, 1, f) == 1) {
      if (ids->n == ids->cap) {
        ids->cap = 2 * ids->cap + 4096;
        ids->ids = realloc(ids->ids, ids->cap * sizeof *ids->ids);
      }
      ids->ids[ids->n++] = tok;
      n++;
    }
    WT_TEST_ASSERT(n == header[2], "%s: header says %d tokens, file holds %d", path, header[2], n);
    fclose(f);
  }
  return k;
}

/* The fixture corpus repeated `times` times, written to `name`; returned (malloc'd). */
static char *s_corpus(const char *name, int times, size_t *len) {
  char path[1100];
  snprintf(path, sizeof path, "%s/corpus.txt", g_fixtures);
  FILE *f = fopen(path, "rb");
  WT_TEST_REQUIRE(f, "cannot open %s", path);
  char one[8192];
  size_t n = fread(one, 1, sizeof one, f);
  fclose(f);
  char *text = malloc(n * (size_t)times);
  for (int i = 0; i < times; i++) memcpy(text + n * (size_t)i, one, n);
  *len = n * (size_t)times;
  s_write(name, text, *len);
  return text;
}

static void test_errors(void) {
  char args[4096];
  EXPECT("tokenize", 2, "--tokenizer is required");
  EXPECT("tokenize --help", 0, "--documents");
  EXPECT("tokenize --help", 0, "20240520");
  EXPECT("tokenize --tokenizer nodir --in x.txt --out shards", 1, "does not exist");
  EXPECT("tokenize --tokenizer . --in x.txt --out shards", 1, "vocab.json or encoder.json");
  s_write("bad/vocab.json", "{\"a\":", 5); /* the harness writes into g_tmp/bad */
  s_write("bad/merges.txt", "#version: 0.2\n", 14);
  EXPECT("tokenize --tokenizer bad --in x.txt --out shards", 1, "not a JSON object");
  snprintf(args, sizeof args, "tokenize --tokenizer %s --in missing.txt --out shards", g_fixtures);
  EXPECT(args, 1, "missing.txt");
  snprintf(args, sizeof args, "tokenize --tokenizer %s --in x.txt --out shards --val-fraction 2",
           g_fixtures);
  EXPECT(args, 2, "out of range");
}

/* Whole-file mode: the shards' ids, in order and less the leading <|endoftext|>, are the BPE of
 * the whole text although the run cut it into 1 MiB chunks, a validation split and shards. */
static void test_whole(tokenizer_bpe *bpe) {
  size_t len;
  char *text = s_corpus("big.txt", 600, &len), args[4096];
  snprintf(args, sizeof args,
           "tokenize --tokenizer %s --in big.txt --out whole --shard-tokens 100000", g_fixtures);
  EXPECT(args, 0, "wrote whole/train_000000.bin");
  WT_TEST_ASSERT(strstr(g_out, "tokenize: 1.3 of 1.3 MB (100%)"), "progress line:\n%s", g_out);
  tokenizer_ids got = {0}, want = {0};
  int nv = s_read_shards("whole", "val", &got), nt = s_read_shards("whole", "train", &got);
  WT_TEST_ASSERT(nv == 1 && nt >= 4, "%d val and %d train shards", nv, nt);
  tokenizer_bpe_encode(bpe, text, len, &want);
  WT_TEST_REQUIRE(got.n > 0, "no tokens");
  WT_TEST_ASSERT(got.ids[0] == 50256, "starts with <|endoftext|>, not %d", got.ids[0]);
  size_t i = 0;
  while (i < want.n && i + 1 < got.n && got.ids[i + 1] == want.ids[i]) i++;
  WT_TEST_ASSERT(got.n == want.n + 1 && i == want.n,
                 "%zu ids in shards, %zu in the text; first "
                 "difference at %zu",
                 got.n - 1, want.n, i);
  tokenizer_ids_free(&got);
  tokenizer_ids_free(&want);
  free(text);
}

/* Paragraph mode: one <|endoftext|> before each blank-line-separated paragraph; the rest decodes
 * to the text. */
static void test_paragraphs(tokenizer_bpe *bpe) {
  size_t len, paragraphs = 1;
  char *text = s_corpus("small.txt", 3, &len), args[4096];
  for (size_t i = 0; i + 1 < len; i++)
    if (text[i] == '\n' && text[i + 1] == '\n') paragraphs += i + 2 < len, i++;
  snprintf(args, sizeof args,
           "tokenize --tokenizer %s --in small.txt --out para --documents paragraphs --quiet",
           g_fixtures);
  EXPECT(args, 0, "wrote para/val_000000.bin");
  WT_TEST_ASSERT(!strstr(g_out, "tokenize: "), "--quiet prints no progress:\n%s", g_out);
  tokenizer_ids got = {0};
  s_read_shards("para", "val", &got);
  s_read_shards("para", "train", &got);
  size_t eots = 0, m = 0;
  for (size_t i = 0; i < got.n; i++)
    if (got.ids[i] == 50256)
      eots++;
    else
      got.ids[m++] = got.ids[i];
  size_t back_len;
  char *back = tokenizer_bpe_decode(bpe, got.ids, m, &back_len);
  WT_TEST_ASSERT(eots == paragraphs, "%zu <|endoftext|> for %zu paragraphs", eots, paragraphs);
  WT_TEST_ASSERT(back_len == len && !memcmp(back, text, len), "shards do not decode to the text");
  free(back);
  tokenizer_ids_free(&got);
  free(text);
}

/* A model trained on the shard reads a text prompt and prints text. */
static void test_train_sample(void) {
  char args[4096];
  EXPECT("train --data whole/train_000000.bin --steps 2 --batch 2 --seq 32 --layers 1 "
         "--channels 32 --heads 2 --checkpoint-dir run",
         0, "vocab 50257");
  snprintf(args, sizeof args,
           "sample --checkpoint run --tokenizer %s --prompt 'Hello w\xc3\xb6rld, it'\"'\"'s me' "
           "--tokens 5 --temperature 0",
           g_fixtures);
  EXPECT(args, 0, "Hello w\xc3\xb6rld, it's me");
  WT_TEST_ASSERT(!strstr(g_out, "<"), "ids printed as text, not <id>:\n%s", g_out);
  EXPECT("sample --checkpoint run --prompt Hello --tokens 1", 1, "--tokenizer");
  s_write("bytes.txt", "abcdefghijklmnopqrstuvwxyz0123456789", 36);
  char many[4000];
  for (size_t i = 0; i < sizeof many; i++) many[i] = (char)('a' + i % 26);
  s_write("bytes.txt", many, sizeof many);
  EXPECT("train --data bytes.txt --steps 1 --batch 2 --seq 16 --layers 1 --channels 16 --heads 2 "
         "--checkpoint-dir brun",
         0, "vocab 256");
  snprintf(args, sizeof args, "sample --checkpoint brun --tokenizer %s --tokens 1", g_fixtures);
  EXPECT(args, 2, "leave --tokenizer out");
}

int main(void) {
  cli_harness_init();
  const char *src = getenv("WT_SOURCE_DIR");
  snprintf(g_fixtures, sizeof g_fixtures, "%s/tests/fixtures/bpe", src ? src : "..");
  char bad[700];
  snprintf(bad, sizeof bad, "mkdir -p '%s/bad'", g_tmp);
  WT_TEST_REQUIRE(system(bad) == 0, "mkdir");
  tokenizer_bpe *bpe = tokenizer_bpe_new(g_fixtures);
  WT_TEST_REQUIRE(bpe, "%s", wt_last_error());
  test_errors();
  test_whole(bpe);
  test_paragraphs(bpe);
  test_train_sample();
  tokenizer_bpe_destroy(&bpe);
  if (!wt_test_failures) {
    char rm[700];
    snprintf(rm, sizeof rm, "rm -rf '%s'", g_tmp);
    if (system(rm) != 0) fprintf(stderr, "could not remove %s\n", g_tmp);
  }
  return wt_test_finish("test_cli_tokenize");
}
