/* data — the data set type: split, training and validation batches, tokenizers, file loading.
 * The synthetic corpus lives in data_synth.c, URL fetching and SHA-256 in data_fetch.c. */
#include "model/data_internal.h"

#include "common/common.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct data_set {
  uint16_t *tokens; /* (n,) */
  size_t n;
  size_t n_train; /* tokens [0, n_train) train, [n_train, n) validate */
  int vocab_size;
  data_tokenizer tokenizer;
};

data_set *data_set_from_tokens(uint16_t *tokens, size_t n, int vocab_size, data_tokenizer tok) {
  for (size_t i = 0; i < n; i++) {
    if (tokens[i] >= vocab_size) {
      wt_fail(WT_ECORRUPT, "token %u at index %zu is outside the vocabulary of %d",
              (unsigned)tokens[i], i, vocab_size);
      free(tokens);
      return NULL;
    }
  }
  data_set *d = wt_xcalloc(1, sizeof *d);
  d->tokens = tokens;
  d->n = n;
  d->n_train = n - n / 10;
  d->vocab_size = vocab_size;
  d->tokenizer = tok;
  return d;
}

data_set *data_set_synthetic(const data_synth_config *cfg) {
  uint16_t *tok = data_synth_tokens(cfg);
  return tok ? data_set_from_tokens(tok, cfg->n_tokens, cfg->vocab_size, DATA_TOKENIZER_SYNTHETIC)
             : NULL;
}

void data_set_destroy(data_set **self_p) {
  if (!self_p || !*self_p) return;
  free((*self_p)->tokens);
  free(*self_p);
  *self_p = NULL;
}

int data_set_vocab_size(const data_set *d) {
  return d->vocab_size;
}
data_tokenizer data_set_tokenizer(const data_set *d) {
  return d->tokenizer;
}
size_t data_set_num_tokens(const data_set *d) {
  return d->n;
}
size_t data_set_num_train(const data_set *d) {
  return d->n_train;
}
size_t data_set_num_val(const data_set *d) {
  return d->n - d->n_train;
}
const uint16_t *data_set_tokens(const data_set *d) {
  return d->tokens;
}

int data_set_check_seq(const data_set *d, int T) {
  size_t need = (size_t)T + 1;
  if (T < 1 || d->n_train < need || data_set_num_val(d) < need)
    return wt_fail(WT_EINVAL,
                   "corpus of %zu tokens is too short for sequences of %d: each of the train "
                   "(90%%) and validation (10%%) splits needs at least %zu tokens, so use at "
                   "least %zu tokens or a shorter --seq",
                   d->n, T, need, need * 10);
  return WT_OK;
}

void data_position_init(data_position *pos, uint64_t seed) {
  /* A distinct stream from the model's init seed, so data order and weights do not correlate. */
  wt_rng_seed(&pos->rng, seed ^ 0x64617461ull /* "data" */);
  pos->batches = 0;
}

static void s_window(const uint16_t *src, int T, int *inputs, int *targets) {
  for (int t = 0; t < T; t++) {
    inputs[t] = src[t];
    targets[t] = src[t + 1];
  }
}

void data_set_next_batch(const data_set *d, data_position *pos, int B, int T, int *inputs,
                         int *targets) {
  uint64_t n_offsets = d->n_train - (size_t)T; /* windows [o, o+T] inside the train split */
  for (int b = 0; b < B; b++) {
    size_t o = (size_t)wt_rng_below(&pos->rng, n_offsets);
    s_window(d->tokens + o, T, inputs + (size_t)b * T, targets + (size_t)b * T);
  }
  pos->batches++;
}

size_t data_set_num_val_windows(const data_set *d, int T) {
  return (data_set_num_val(d) - 1) / (size_t)T;
}

void data_set_val_batch(const data_set *d, size_t first, int B, int T, int *inputs, int *targets) {
  size_t nw = data_set_num_val_windows(d, T);
  for (int b = 0; b < B; b++) {
    size_t w = (first + (size_t)b) % nw;
    const uint16_t *src = d->tokens + d->n_train + w * (size_t)T;
    s_window(src, T, inputs + (size_t)b * T, targets + (size_t)b * T);
  }
}

/* ---- tokenizers ---------------------------------------------------------------------------- */

void data_token_text(data_tokenizer tok, int token, char *buf, size_t size) {
  if (tok == DATA_TOKENIZER_SYNTHETIC && token >= 0 && token < 64)
    snprintf(buf, size, "%c", data_synthetic_alphabet[token]);
  else if (tok == DATA_TOKENIZER_BYTES && token >= 0 && token < 256)
    snprintf(buf, size, "%c", token);
  else
    snprintf(buf, size, "<%d>", token);
}

int data_text_encode(data_tokenizer tok, const char *text, int *out, int max, int *n) {
  int count = 0;
  if (tok == DATA_TOKENIZER_GPT2 && *text)
    return wt_fail(WT_EINVAL, "this model reads GPT-2 token ids: a prompt needs GPT-2's BPE "
                              "(sample --tokenizer DIR with vocab.json + merges.txt)");
  for (const unsigned char *c = (const unsigned char *)text; *c && count < max; c++) {
    if (tok == DATA_TOKENIZER_BYTES) {
      out[count++] = *c;
      continue;
    }
    const char *hit = memchr(data_synthetic_alphabet, *c, 64);
    if (!hit)
      return wt_fail(WT_EINVAL, "prompt character '%c' is not in the synthetic alphabet \"%s\"", *c,
                     data_synthetic_alphabet);
    out[count++] = (int)(hit - data_synthetic_alphabet);
  }
  *n = count;
  return WT_OK;
}

/* ---- files --------------------------------------------------------------------------------- */

static int s_read_all(const char *path, unsigned char **buf, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return wt_fail(errno == ENOENT ? WT_ENOTFOUND : WT_EIO, "data file %s: %s", path,
                   strerror(errno));
  /* fopen succeeds on a directory, and seeking there reports a size of LONG_MAX. */
  struct stat st;
  int rc = WT_OK;
  if (fstat(fileno(f), &st) != 0)
    rc = wt_fail(WT_EIO, "data file %s: %s", path, strerror(errno));
  else if (S_ISDIR(st.st_mode))
    rc = wt_fail(WT_EINVAL,
                 "data file %s is a directory; pass one file inside it (a text file or an "
                 "llm.c .bin shard)",
                 path);
  else if (!S_ISREG(st.st_mode))
    rc = wt_fail(WT_EINVAL, "data file %s is not a regular file; pass a text file or a .bin shard",
                 path);
  else if (st.st_size == 0)
    rc = wt_fail(WT_EINVAL, "data file %s is empty", path);
  if (rc == WT_OK) {
    size_t size = (size_t)st.st_size;
    *buf = wt_xmalloc(size);
    *len = fread(*buf, 1, size, f);
    if (*len != size) {
      free(*buf);
      rc = wt_fail(WT_EIO, "data file %s: read %zu of %zu bytes", path, *len, size);
    }
  }
  fclose(f);
  return rc;
}

static int32_t s_le32(const unsigned char *p) {
  return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                   (uint32_t)p[3] << 24);
}

static int s_ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), m = strlen(suffix);
  return n >= m && !strcmp(s + n - m, suffix);
}

/* Validates the llm.c header and converts the payload; takes ownership of buf. */
static data_set *s_open_shard(const char *path, unsigned char *buf, size_t len) {
  const size_t header = 256 * sizeof(int32_t);
  int32_t magic = len >= 4 ? s_le32(buf) : 0;
  int32_t version = len >= 8 ? s_le32(buf + 4) : 0;
  int64_t ntok = len >= 12 ? s_le32(buf + 8) : -1;
  int rc = WT_OK;
  if (len < header)
    rc = wt_fail(WT_ECORRUPT, "shard %s: %zu bytes is shorter than the 1024-byte llm.c header",
                 path, len);
  else if (magic != DATA_SHARD_MAGIC)
    rc = wt_fail(WT_ECORRUPT, "shard %s: magic %d is not %d; not an llm.c token shard", path, magic,
                 DATA_SHARD_MAGIC);
  else if (version != DATA_SHARD_VERSION)
    rc = wt_fail(WT_ECORRUPT, "shard %s: version %d is not supported (only %d)", path, version,
                 DATA_SHARD_VERSION);
  else if (ntok <= 0 || (size_t)ntok * 2 != len - header)
    rc = wt_fail(WT_ECORRUPT,
                 "shard %s: header says %lld tokens (%lld bytes) but the file holds "
                 "%zu bytes after the header; the file is truncated or corrupt",
                 path, (long long)ntok, (long long)ntok * 2, len - header);
  if (rc != WT_OK) {
    free(buf);
    return NULL;
  }
  uint16_t *tok = wt_xmalloc((size_t)ntok * sizeof *tok);
  for (int64_t i = 0; i < ntok; i++)
    tok[i] = (uint16_t)(buf[header + 2 * i] | buf[header + 2 * i + 1] << 8);
  free(buf);
  data_set *d = data_set_from_tokens(tok, (size_t)ntok, DATA_GPT2_VOCAB, DATA_TOKENIZER_GPT2);
  if (!d) {
    /* wt_fail writes the buffer wt_last_error() points at: copy the message out first. */
    char msg[512];
    snprintf(msg, sizeof msg, "%s", wt_last_error());
    wt_fail(WT_ECORRUPT, "shard %s: %s", path, msg);
  }
  return d;
}

data_set *data_set_open_file(const char *path) {
  unsigned char *buf = NULL;
  size_t len = 0;
  if (s_read_all(path, &buf, &len) != WT_OK) return NULL;
  if (s_ends_with(path, ".bin") || (len >= 4 && s_le32(buf) == DATA_SHARD_MAGIC))
    return s_open_shard(path, buf, len);
  uint16_t *tok = wt_xmalloc(len * sizeof *tok);
  for (size_t i = 0; i < len; i++) tok[i] = buf[i];
  free(buf);
  return data_set_from_tokens(tok, len, 256, DATA_TOKENIZER_BYTES);
}

static int s_is_url(const char *spec) {
  return !strncmp(spec, "http://", 7) || !strncmp(spec, "https://", 8) ||
         !strncmp(spec, "file://", 7);
}

data_set *data_set_open(const char *spec, const char *cache_dir, const char *sha256_hex) {
  int has_sha = sha256_hex && *sha256_hex;
  if (!strcmp(spec, "synthetic")) {
    if (has_sha) {
      wt_fail(WT_EINVAL, "--data-sha256 applies to files and URLs, not the synthetic corpus");
      return NULL;
    }
    data_synth_config c = data_synth_default();
    return data_set_synthetic(&c);
  }
  char path[4096];
  if (s_is_url(spec)) {
    char dir[2048];
    if (!cache_dir || !*cache_dir)
      data_default_cache_dir(dir, sizeof dir);
    else
      snprintf(dir, sizeof dir, "%s", cache_dir);
    if (data_fetch(spec, dir, sha256_hex, path, sizeof path) != WT_OK) return NULL;
  } else {
    snprintf(path, sizeof path, "%s", spec);
    if (has_sha && data_fetch_verify(path, sha256_hex) != WT_OK) return NULL;
  }
  return data_set_open_file(path);
}
