/* cmd_tokenize — `wantrain tokenize`: a text file to llm.c .bin shards of GPT-2 token ids.
 *
 * The input is encoded with the BPE of --tokenizer DIR (tokenizer/bpe.h) in pieces cut where
 * cutting changes no id (tokenizer_bpe_next_cut), so a file of any size streams through a
 * bounded buffer. Each document starts with <|endoftext|>, as llm.c's data scripts do; what a
 * document is comes from --documents. The first --val-fraction of the text goes to val_*.bin,
 * the rest to train_*.bin; a shard holds at most --shard-tokens ids. A shard is written as
 * NAME.tmp and renamed when complete, so a cut-short run leaves no shard that looks whole. */
#include "tools/wantrain/cli.h"

#include "common/common.h"
#include "model/data.h" /* DATA_SHARD_MAGIC, DATA_SHARD_VERSION */
#include "tokenizer/bpe.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

enum { CHUNK_BYTES = 1 << 20 }; /* text encoded at a time (then cut at the next safe place) */

typedef struct {
  char tokenizer[WT_CONFIG_STR_MAX], in[WT_CONFIG_STR_MAX], out[WT_CONFIG_STR_MAX];
  char documents[WT_CONFIG_STR_MAX];
  double val_fraction;
  long long shard_tokens;
  int quiet;
} tokenize_args;

#define F(x) offsetof(tokenize_args, x)
static const wt_option s_options[] = {
    {"tokenizer", WT_OPT_STRING, F(tokenizer), 0, 0, "",
     "directory with GPT-2's vocab.json + merges.txt (or encoder.json + vocab.bpe) (required)", 0},
    {"in", WT_OPT_STRING, F(in), 0, 0, "", "text file to encode (required)", 0},
    {"out", WT_OPT_STRING, F(out), 0, 0, "",
     "directory for the shards, created if missing (required)", 0},
    {"documents", WT_OPT_CHOICE, F(documents), 0, 0, "whole",
     "what <|endoftext|> precedes: the whole file, each paragraph (text up to a blank line), "
     "each line, or nothing",
     "whole|paragraphs|lines|none"},
    {"val-fraction", WT_OPT_FLOAT, F(val_fraction), 0, 0.9, "0.1",
     "leading fraction of the text written to val_*.bin (0: no validation shard)", 0},
    {"shard-tokens", WT_OPT_INT64, F(shard_tokens), 1024, 2147483647, "100000000",
     "tokens per shard at most (llm.c's fineweb shards hold 1e8)", 0},
    {"quiet", WT_OPT_FLAG, F(quiet), 0, 1, "0", "no progress lines on stderr", 0},
    {0}};
#undef F

static const char *s_usage =
    "usage: wantrain tokenize --tokenizer DIR --in TEXT --out DIR [options]\n\n"
    "Encodes TEXT with GPT-2's byte-level BPE into llm.c token shards: DIR/val_000000.bin\n"
    "(the first --val-fraction of the text) and DIR/train_000000.bin, ... (the rest), each a\n"
    "256 x int32 header (magic 20240520, version 1, token count) then uint16 ids. Train with\n"
    "`wantrain train --data DIR/train_000000.bin` (train takes one shard and validates on its\n"
    "last 10%). Progress goes to stderr every few seconds.";

/* ---- shards -------------------------------------------------------------------------------- */

typedef struct {
  const char *dir, *split; /* "train" or "val" */
  int index;               /* number of the open shard */
  FILE *f;
  char path[WT_CONFIG_STR_MAX + 64];
  long long count, limit; /* tokens in the open shard, at most */
  long long total;        /* tokens in every shard of this split */
  uint16_t buf[4096];
  size_t nbuf;
} s_shard;

static int s_shard_flush(s_shard *s) {
  if (s->nbuf && fwrite(s->buf, sizeof *s->buf, s->nbuf, s->f) != s->nbuf)
    return wt_fail(WT_EIO, "writing %s.tmp: %s (is the disk full?)", s->path, strerror(errno));
  s->nbuf = 0;
  return WT_OK;
}

/* Writes the header with the token count, closes the shard and gives it its final name. */
static int s_shard_close(s_shard *s) {
  if (!s->f) return WT_OK;
  int32_t header[256] = {DATA_SHARD_MAGIC, DATA_SHARD_VERSION, (int32_t)s->count};
  char tmp[sizeof s->path + 8];
  snprintf(tmp, sizeof tmp, "%s.tmp", s->path);
  int rc = s_shard_flush(s);
  if (rc == WT_OK && (fseek(s->f, 0, SEEK_SET) != 0 || fwrite(header, sizeof header, 1, s->f) != 1))
    rc = wt_fail(WT_EIO, "writing the header of %s: %s", tmp, strerror(errno));
  if (fclose(s->f) != 0 && rc == WT_OK)
    rc = wt_fail(WT_EIO, "closing %s: %s (is the disk full?)", tmp, strerror(errno));
  s->f = NULL;
  if (rc == WT_OK && rename(tmp, s->path) != 0)
    rc = wt_fail(WT_EIO, "renaming %s to %s: %s", tmp, s->path, strerror(errno));
  if (rc == WT_OK)
    printf("wrote %s: %lld tokens\n", s->path, s->count);
  else
    unlink(tmp);
  s->index++;
  return rc;
}

/* Closes and removes an unfinished shard (after a failure). */
static void s_shard_abandon(s_shard *s) {
  char tmp[sizeof s->path + 8];
  if (!s->f) return;
  snprintf(tmp, sizeof tmp, "%s.tmp", s->path);
  fclose(s->f);
  s->f = NULL;
  unlink(tmp);
}

static int s_shard_open(s_shard *s) {
  int32_t header[256] = {0}; /* rewritten with the count on close */
  char tmp[sizeof s->path + 8];
  snprintf(s->path, sizeof s->path, "%s/%s_%06d.bin", s->dir, s->split, s->index);
  snprintf(tmp, sizeof tmp, "%s.tmp", s->path);
  s->f = fopen(tmp, "wb");
  if (!s->f) return wt_fail(WT_EIO, "cannot create %s: %s", tmp, strerror(errno));
  s->count = 0;
  if (fwrite(header, sizeof header, 1, s->f) != 1)
    return wt_fail(WT_EIO, "writing %s: %s", tmp, strerror(errno));
  return WT_OK;
}

static int s_shard_put(s_shard *s, const int32_t *ids, size_t n) {
  for (size_t i = 0; i < n; i++) {
    if (!s->f) WT_CHECK(s_shard_open(s));
    s->buf[s->nbuf++] = (uint16_t)ids[i];
    s->count++, s->total++;
    if (s->nbuf == WT_ARRAY_LEN(s->buf)) WT_CHECK(s_shard_flush(s));
    if (s->count == s->limit) WT_CHECK(s_shard_close(s));
  }
  return WT_OK;
}

/* ---- the run ------------------------------------------------------------------------------- */

typedef struct {
  const tokenize_args *a;
  tokenizer_bpe *bpe;
  tokenizer_ids ids;
  s_shard val, train;
  const char *text;
  size_t len, val_end; /* text[0, val_end) goes to the val shards */
  double start_s, last_report_s;
} s_run;

static s_shard *s_target(s_run *r, size_t pos) {
  return pos < r->val_end ? &r->val : &r->train;
}

static void s_progress(s_run *r, size_t pos, int final) {
  double now = wt_now_s();
  if (r->a->quiet || (!final && now - r->last_report_s < 2.0)) return;
  r->last_report_s = now;
  double mb = (double)pos / 1e6, total = (double)r->len / 1e6;
  fprintf(stderr, "tokenize: %.1f of %.1f MB (%.0f%%), %lld tokens, %.1f MB/s\n", mb, total,
          100.0 * mb / total, r->val.total + r->train.total, mb / WT_MAX(now - r->start_s, 1e-9));
}

/* Encodes the document text[start, end) (after an <|endoftext|> when documents have one). */
static int s_document(s_run *r, size_t start, size_t end) {
  if (strcmp(r->a->documents, "none") != 0) {
    int32_t eot = tokenizer_bpe_eot(r->bpe);
    WT_CHECK(s_shard_put(s_target(r, start), &eot, 1));
  }
  for (size_t pos = start; pos < end;) {
    /* the next cut: after a chunk, but no later than where the val split ends */
    size_t want = pos < r->val_end ? WT_MIN(r->val_end, pos + CHUNK_BYTES) : pos + CHUNK_BYTES;
    size_t cut =
        want >= end ? end : pos + tokenizer_bpe_next_cut(r->text + pos, end - pos, want - pos);
    r->ids.n = 0;
    tokenizer_bpe_encode(r->bpe, r->text + pos, cut - pos, &r->ids);
    WT_CHECK(s_shard_put(s_target(r, pos), r->ids.ids, r->ids.n));
    pos = cut;
    s_progress(r, pos, 0);
  }
  return WT_OK;
}

/* The end of the document that starts at pos: after the next "\n\n" (paragraphs) or "\n"
 * (lines), else the end of the text. */
static size_t s_document_end(const s_run *r, size_t pos) {
  const char *sep = !strcmp(r->a->documents, "paragraphs") ? "\n\n"
                    : !strcmp(r->a->documents, "lines")    ? "\n"
                                                           : NULL;
  if (!sep) return r->len;
  size_t k = strlen(sep);
  for (const char *p = r->text + pos; (p = memchr(p, '\n', r->len - (size_t)(p - r->text))); p++) {
    size_t at = (size_t)(p - r->text);
    if (at + k <= r->len && !memcmp(p, sep, k)) return at + k;
  }
  return r->len;
}

static int s_tokenize(s_run *r) {
  size_t pos = 0;
  while (pos < r->len) {
    size_t end = s_document_end(r, pos);
    WT_CHECK(s_document(r, pos, end));
    pos = end;
  }
  WT_CHECK(s_shard_close(&r->val));
  WT_CHECK(s_shard_close(&r->train));
  s_progress(r, r->len, 1);
  return WT_OK;
}

/* Maps the input file read-only. */
static int s_map(const char *path, const char **text, size_t *len) {
  int fd = open(path, O_RDONLY);
  if (fd < 0)
    return wt_fail(errno == ENOENT ? WT_ENOTFOUND : WT_EIO, "input %s: %s", path, strerror(errno));
  struct stat st;
  int rc = WT_OK;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
    rc = wt_fail(WT_EINVAL, "input %s is not a regular file; pass a text file", path);
  else if (st.st_size == 0)
    rc = wt_fail(WT_EINVAL, "input %s is empty", path);
  if (rc == WT_OK) {
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED)
      rc = wt_fail(WT_EIO, "input %s: mmap: %s", path, strerror(errno));
    else
      *text = p, *len = (size_t)st.st_size;
  }
  close(fd);
  return rc;
}

int cmd_tokenize(int argc, char **argv) {
  tokenize_args a;
  int rc = cli_parse("tokenize", s_usage, s_options, &a, argc, argv);
  if (rc) return rc < 0 ? CLI_OK : rc;
  if (!a.tokenizer[0] || !a.in[0] || !a.out[0]) {
    fprintf(stderr, "wantrain tokenize: error: --%s is required (see --help)\n",
            !a.tokenizer[0] ? "tokenizer"
            : !a.in[0]      ? "in"
                            : "out");
    return CLI_USAGE;
  }
  s_run r = {.a = &a};
  r.bpe = tokenizer_bpe_new(a.tokenizer);
  if (!r.bpe) return cli_fail("tokenize");
  if (tokenizer_bpe_vocab_size(r.bpe) > 65536 || tokenizer_bpe_eot(r.bpe) < 0) {
    wt_fail(WT_EINVAL,
            "tokenizer %s has %d tokens%s; llm.c shards hold uint16 ids (at most "
            "65536) and documents start with <|endoftext|>",
            a.tokenizer, tokenizer_bpe_vocab_size(r.bpe),
            tokenizer_bpe_eot(r.bpe) < 0 ? " and no <|endoftext|>" : "");
    tokenizer_bpe_destroy(&r.bpe);
    return cli_fail("tokenize");
  }
  if (mkdir(a.out, 0777) != 0 && errno != EEXIST) {
    wt_fail(WT_EIO, "cannot create the output directory %s: %s", a.out, strerror(errno));
    tokenizer_bpe_destroy(&r.bpe);
    return cli_fail("tokenize");
  }
  rc = s_map(a.in, &r.text, &r.len);
  if (rc == WT_OK) {
    r.val_end = (size_t)(a.val_fraction * (double)r.len);
    r.val = (s_shard){.dir = a.out, .split = "val", .limit = a.shard_tokens};
    r.train = (s_shard){.dir = a.out, .split = "train", .limit = a.shard_tokens};
    r.start_s = r.last_report_s = wt_now_s();
    rc = s_tokenize(&r);
    s_shard_abandon(&r.val); /* after a failure: no half-written shard stays behind */
    s_shard_abandon(&r.train);
    munmap((void *)r.text, r.len);
  }
  tokenizer_ids_free(&r.ids);
  tokenizer_bpe_destroy(&r.bpe);
  return rc == WT_OK ? CLI_OK : cli_fail("tokenize");
}
