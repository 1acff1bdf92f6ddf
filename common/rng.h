/* rng — a small, fast, seedable random generator (xoshiro256** seeded by splitmix64).
 *
 * Every random choice in wantrain (weight init, data order, GA moves, stochastic rounding) draws
 * from a wt_rng so that a run is reproducible from its seed, and the state is a plain struct so
 * checkpoints can save and restore it bit-exactly.
 */
#ifndef WT_RNG_H
#define WT_RNG_H

#include <stdint.h>

typedef struct {
  uint64_t s[4];
} wt_rng;

/* Seeds the generator; the same seed always gives the same stream. */
void wt_rng_seed(wt_rng *rng, uint64_t seed);

/* A uniformly random 64-bit value. */
uint64_t wt_rng_u64(wt_rng *rng);

/* Uniform integer in [0, n) without modulo bias; n > 0. */
uint64_t wt_rng_below(wt_rng *rng, uint64_t n);

/* Uniform float in [0, 1) with 24 random bits; uniform double in [0, 1) with 53. */
float wt_rng_float(wt_rng *rng);
double wt_rng_double(wt_rng *rng);

/* Standard normal (Box–Muller; uses two uniforms per call, no cached spare, so the state alone
 * determines the stream). */
double wt_rng_normal(wt_rng *rng);

/* Fisher–Yates shuffle of an int array. */
void wt_rng_shuffle_int(wt_rng *rng, int *a, int n);

#endif
