/* pretokenize — GPT-2's pre-tokenizer pattern matched by hand over UTF-8 code points:
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * The alternatives are tried in order at each position, so a piece is a contraction, else an
 * optional space and a run of one class, else a run of spaces; the lookahead (?!\S) makes a run
 * of spaces before a non-space leave its last space to the next piece. */
#include "tokenizer/bpe_internal.h"
#include "tokenizer/bpe.h"

#include <utf8proc.h> // defines: utf8proc_category, the Unicode general categories

/* ASCII classes, the bulk of most text: letters, digits, \t\n\v\f\r and ' '. */
static const unsigned char s_ascii[128] = {
    ['\t'] = BPE_CLASS_SPACE,
    ['\n'] = BPE_CLASS_SPACE,
    ['\v'] = BPE_CLASS_SPACE,
    ['\f'] = BPE_CLASS_SPACE,
    ['\r'] = BPE_CLASS_SPACE,
    [' '] = BPE_CLASS_SPACE,
    ['0'] = BPE_CLASS_NUMBER,
    ['1'] = BPE_CLASS_NUMBER,
    ['2'] = BPE_CLASS_NUMBER,
    ['3'] = BPE_CLASS_NUMBER,
    ['4'] = BPE_CLASS_NUMBER,
    ['5'] = BPE_CLASS_NUMBER,
    ['6'] = BPE_CLASS_NUMBER,
    ['7'] = BPE_CLASS_NUMBER,
    ['8'] = BPE_CLASS_NUMBER,
    ['9'] = BPE_CLASS_NUMBER,
#define L(c) [c] = BPE_CLASS_LETTER
    L('A'),
    L('B'),
    L('C'),
    L('D'),
    L('E'),
    L('F'),
    L('G'),
    L('H'),
    L('I'),
    L('J'),
    L('K'),
    L('L'),
    L('M'),
    L('N'),
    L('O'),
    L('P'),
    L('Q'),
    L('R'),
    L('S'),
    L('T'),
    L('U'),
    L('V'),
    L('W'),
    L('X'),
    L('Y'),
    L('Z'),
    L('a'),
    L('b'),
    L('c'),
    L('d'),
    L('e'),
    L('f'),
    L('g'),
    L('h'),
    L('i'),
    L('j'),
    L('k'),
    L('l'),
    L('m'),
    L('n'),
    L('o'),
    L('p'),
    L('q'),
    L('r'),
    L('s'),
    L('t'),
    L('u'),
    L('v'),
    L('w'),
    L('x'),
    L('y'),
    L('z'),
#undef L
};

size_t bpe_utf8_next(const unsigned char *s, size_t len, int32_t *cp) {
  unsigned c = s[0];
  if (c < 0x80) {
    *cp = (int32_t)c;
    return 1;
  }
  /* lead byte: sequence length and the range its first continuation byte must lie in (which
   * rules out overlong forms, surrogates and code points above U+10FFFF) */
  size_t n;
  unsigned lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF)
    n = 2;
  else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    *cp = -1;
    return 1;
  }
  if (len < n || s[1] < lo || s[1] > hi) {
    *cp = -1;
    return 1;
  }
  int32_t v = (int32_t)(c & (0x7Fu >> n));
  for (size_t i = 1; i < n; i++) {
    if ((s[i] & 0xC0) != 0x80) {
      *cp = -1;
      return 1;
    }
    v = v << 6 | (s[i] & 0x3F);
  }
  *cp = v;
  return n;
}

bpe_class bpe_classify(int32_t cp) {
  if (cp < 0) return BPE_CLASS_OTHER;
  if (cp < 128) return (bpe_class)s_ascii[cp];
  if (cp == 0x85) return BPE_CLASS_SPACE; /* White_Space = Zs, Zl, Zp, \t..\r and U+0085 */
  switch (utf8proc_category(cp)) {
  case UTF8PROC_CATEGORY_LU:
  case UTF8PROC_CATEGORY_LL:
  case UTF8PROC_CATEGORY_LT:
  case UTF8PROC_CATEGORY_LM:
  case UTF8PROC_CATEGORY_LO:
    return BPE_CLASS_LETTER;
  case UTF8PROC_CATEGORY_ND:
  case UTF8PROC_CATEGORY_NL:
  case UTF8PROC_CATEGORY_NO:
    return BPE_CLASS_NUMBER;
  case UTF8PROC_CATEGORY_ZS:
  case UTF8PROC_CATEGORY_ZL:
  case UTF8PROC_CATEGORY_ZP:
    return BPE_CLASS_SPACE;
  default:
    return BPE_CLASS_OTHER;
  }
}

/* The class of the code point at s[pos] and its length. */
static inline bpe_class s_class_at(const unsigned char *s, size_t len, size_t pos, size_t *n) {
  if (s[pos] < 0x80) {
    *n = 1;
    return (bpe_class)s_ascii[s[pos]];
  }
  int32_t cp;
  *n = bpe_utf8_next(s + pos, len - pos, &cp);
  return bpe_classify(cp);
}

/* 's 't 're 've 'm 'll 'd (lowercase only, as GPT-2's pattern): its length, or 0. */
static size_t s_contraction(const unsigned char *s, size_t len, size_t pos) {
  if (s[pos] != '\'' || pos + 1 >= len) return 0;
  unsigned char a = s[pos + 1];
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (pos + 2 >= len) return 0;
  unsigned char b = s[pos + 2];
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

size_t bpe_piece_end(const unsigned char *s, size_t len, size_t pos) {
  size_t n = s_contraction(s, len, pos), step;
  if (n) return pos + n;
  /* ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+': an optional space, then a run of one class */
  size_t i = pos + (s[pos] == ' ' && pos + 1 < len);
  bpe_class cls = s_class_at(s, len, i, &step);
  if (cls != BPE_CLASS_SPACE) {
    i += step;
    while (i < len && s_class_at(s, len, i, &step) == cls) i += step;
    return i;
  }
  /* '\s+(?!\S)|\s+': the run of spaces, less its last one when a non-space follows */
  size_t last = pos;
  for (i = pos; i < len && s_class_at(s, len, i, &step) == BPE_CLASS_SPACE; i += step) last = i;
  if (i < len && last > pos) return last;
  return i;
}

/* The class of the code point that ends at s[p-1] (p >= 1, s[p] not a continuation byte). A
 * lead byte always starts a code point, so the nearest one behind p says where it starts; a
 * continuation byte that no valid sequence covers is an invalid byte of its own (OTHER). */
static bpe_class s_class_before(const unsigned char *s, size_t p) {
  if (s[p - 1] < 0x80) return (bpe_class)s_ascii[s[p - 1]];
  for (size_t k = 1; k <= 4 && k <= p; k++) {
    if ((s[p - k] & 0xC0) == 0x80) continue;
    int32_t cp;
    return bpe_utf8_next(s + p - k, k, &cp) == k ? bpe_classify(cp) : BPE_CLASS_OTHER;
  }
  return BPE_CLASS_OTHER;
}

size_t tokenizer_bpe_next_cut(const char *text, size_t len, size_t from) {
  const unsigned char *s = (const unsigned char *)text;
  for (size_t p = from ? from : 1; p < len; p++) {
    unsigned a = s[p - 1], b = s[p];
    if (b >= 0x80) continue;
    /* ASCII pairs: a run of one class ends where the class changes (an apostrophe may start a
     * contraction, a space belongs to the piece after it) */
    if (a < 0x80 && a != '\'' && s_ascii[a] != BPE_CLASS_SPACE && s_ascii[a] != s_ascii[b])
      return p;
    /* any non-space code point before an ASCII space ends its piece there */
    if (a >= 0x80 && s_ascii[b] == BPE_CLASS_SPACE && s_class_before(s, p) != BPE_CLASS_SPACE)
      return p;
  }
  return len;
}
