/* data_synth — the built-in synthetic corpus: a Markov chain over at most 64 tokens whose
 * entropy rate, the lowest loss any model can reach on it, is known exactly.
 *
 * This module only draws the tokens; model/data.h wraps them into a data set
 * (data_set_synthetic). No I/O, no allocation but the token array it returns.
 */
#ifndef WT_DATA_SYNTH_H
#define WT_DATA_SYNTH_H

#include <stddef.h>
#include <stdint.h>

#define DATA_SYNTH_SEED 1234 /* the seed of the built-in corpus used by the CLI */

/* Parameters of the synthetic corpus. */
typedef struct {
  int vocab_size;  /* V in [2, 64]: tokens print as the first V characters of the alphabet */
  int successors;  /* K in [1, min(V, 8)]: possible next tokens per state */
  size_t n_tokens; /* corpus length, >= 1024 */
  uint64_t seed;   /* chooses the successor sets; the same seed gives the same corpus */
} data_synth_config;

/* The built-in corpus: V = 64, K = 4, 1 Mi tokens, seed DATA_SYNTH_SEED. */
data_synth_config data_synth_default(void);

/* Draws the corpus: cfg->n_tokens tokens, each below cfg->vocab_size. The caller owns the
 * array (free()). Returns NULL with wt_last_error() set on a bad config. */
uint16_t *data_synth_tokens(const data_synth_config *cfg);

/* The entropy rate (nats/token) of the synthetic corpus with K successors: -Σ p_k ln p_k over
 * the fixed probability profile. The lowest mean loss any model can reach on it. */
double data_synthetic_entropy(int successors);

/* The 64 printable characters synthetic tokens map to (token i ↔ alphabet[i]). */
extern const char data_synthetic_alphabet[65];

#endif
