/* bpe_internal — the pre-tokenizer and the UTF-8 decoder, shared by bpe.c, the module's test and
 * the benchmark. Not part of the contract in tokenizer/bpe.h. */
#ifndef WT_TOKENIZER_BPE_INTERNAL_H
#define WT_TOKENIZER_BPE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

/* Code point classes the pre-tokenizer pattern distinguishes. */
typedef enum { BPE_CLASS_OTHER, BPE_CLASS_LETTER, BPE_CLASS_NUMBER, BPE_CLASS_SPACE } bpe_class;

/* Decodes the code point at s[0..len) (len >= 1) into *cp and returns its length in bytes. A
 * byte that does not start a valid, shortest-form sequence is one "code point" of length 1 with
 * *cp = -1 (class OTHER). */
size_t bpe_utf8_next(const unsigned char *s, size_t len, int32_t *cp);

/* The class of code point cp (-1: an invalid byte, OTHER). */
bpe_class bpe_classify(int32_t cp);

/* The end of the piece of the GPT-2 pattern that starts at pos (< len) in s[0..len): the
 * pieces of a text are [0, e1), [e1, e2), ... until len. */
size_t bpe_piece_end(const unsigned char *s, size_t len, size_t pos);

#endif
