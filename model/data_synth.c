/* data_synth — the built-in synthetic corpus: a Markov chain whose entropy rate is exact.
 *
 * Every state s has K successors succ[s][0..K-1] (distinct, drawn from the seed) taken with the
 * fixed probabilities p_k ∝ 2^-k. All rows share that profile, so H(next | s) = H(p) for every
 * s, and the per-token loss floor is H(p) no matter where a window starts.
 */
#include "model/data_synth.h"

#include "common/common.h"
#include "common/rng.h" // defines: wt_rng

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define SYNTH_MAX_VOCAB 64
#define SYNTH_MAX_SUCC 8

const char data_synthetic_alphabet[65] =
    "abcdefghijklmnopqrstuvwxyz ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.";

data_synth_config data_synth_default(void) {
  data_synth_config c = {
      .vocab_size = 64, .successors = 4, .n_tokens = (size_t)1 << 20, .seed = DATA_SYNTH_SEED};
  return c;
}

/* The probability profile: p_k = 2^-k / Σ_j 2^-j, k < K. */
static void s_profile(int K, double *p) {
  double sum = 0;
  for (int k = 0; k < K; k++) sum += p[k] = ldexp(1.0, -k);
  for (int k = 0; k < K; k++) p[k] /= sum;
}

double data_synthetic_entropy(int successors) {
  double p[SYNTH_MAX_SUCC], h = 0;
  assert(successors >= 1 && successors <= SYNTH_MAX_SUCC);
  s_profile(successors, p);
  for (int k = 0; k < successors; k++) h -= p[k] * log(p[k]);
  return h;
}

/* Draws K distinct successors for each of V states: a partial Fisher–Yates shuffle per row. */
static void s_draw_successors(wt_rng *rng, int V, int K, int *succ) {
  int perm[SYNTH_MAX_VOCAB];
  for (int s = 0; s < V; s++) {
    for (int i = 0; i < V; i++) perm[i] = i;
    for (int k = 0; k < K; k++) {
      int j = k + (int)wt_rng_below(rng, (uint64_t)(V - k));
      int t = perm[k];
      perm[k] = perm[j];
      perm[j] = t;
      succ[s * K + k] = perm[k];
    }
  }
}

static int s_validate(const data_synth_config *c) {
  if (c->vocab_size < 2 || c->vocab_size > SYNTH_MAX_VOCAB)
    return wt_fail(WT_EINVAL, "synthetic corpus: vocab_size %d is outside [2, %d]", c->vocab_size,
                   SYNTH_MAX_VOCAB);
  if (c->successors < 1 || c->successors > WT_MIN(c->vocab_size, SYNTH_MAX_SUCC))
    return wt_fail(WT_EINVAL, "synthetic corpus: successors %d is outside [1, min(V, %d)]",
                   c->successors, SYNTH_MAX_SUCC);
  if (c->n_tokens < 1024 || c->n_tokens > ((size_t)1 << 31))
    return wt_fail(WT_EINVAL, "synthetic corpus: n_tokens %zu is outside [1024, 2^31]",
                   c->n_tokens);
  return WT_OK;
}

uint16_t *data_synth_tokens(const data_synth_config *cfg) {
  if (s_validate(cfg) != WT_OK) return NULL;
  const int V = cfg->vocab_size, K = cfg->successors;
  int succ[SYNTH_MAX_VOCAB * SYNTH_MAX_SUCC];
  double p[SYNTH_MAX_SUCC], cdf[SYNTH_MAX_SUCC];
  wt_rng rng;
  wt_rng_seed(&rng, cfg->seed);
  s_draw_successors(&rng, V, K, succ);
  s_profile(K, p);
  for (int k = 0; k < K; k++) cdf[k] = p[k] + (k ? cdf[k - 1] : 0);
  uint16_t *tok = wt_xmalloc(cfg->n_tokens * sizeof *tok);
  int s = (int)wt_rng_below(&rng, (uint64_t)V);
  for (size_t i = 0; i < cfg->n_tokens; i++) {
    tok[i] = (uint16_t)s;
    double u = wt_rng_double(&rng);
    int k = 0;
    while (k < K - 1 && u >= cdf[k]) k++;
    s = succ[s * K + k];
  }
  return tok;
}
