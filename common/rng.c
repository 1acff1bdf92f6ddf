/* rng — xoshiro256** (Blackman & Vigna) seeded through splitmix64. */
#include "common/rng.h"

#include <math.h>

static uint64_t s_splitmix64(uint64_t *x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static uint64_t s_rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

void wt_rng_seed(wt_rng *rng, uint64_t seed) {
  uint64_t x = seed;
  for (int i = 0; i < 4; i++) rng->s[i] = s_splitmix64(&x);
}

uint64_t wt_rng_u64(wt_rng *rng) {
  uint64_t *s = rng->s;
  uint64_t result = s_rotl(s[1] * 5, 7) * 9;
  uint64_t t = s[1] << 17;
  s[2] ^= s[0];
  s[3] ^= s[1];
  s[1] ^= s[2];
  s[0] ^= s[3];
  s[2] ^= t;
  s[3] = s_rotl(s[3], 45);
  return result;
}

uint64_t wt_rng_below(wt_rng *rng, uint64_t n) {
  /* Rejection sampling: discard the top partial range so every residue is equally likely. */
  uint64_t limit = UINT64_MAX - UINT64_MAX % n;
  uint64_t x;
  do x = wt_rng_u64(rng);
  while (x >= limit);
  return x % n;
}

float wt_rng_float(wt_rng *rng) { return (float)(wt_rng_u64(rng) >> 40) * 0x1.0p-24f; }

double wt_rng_double(wt_rng *rng) { return (double)(wt_rng_u64(rng) >> 11) * 0x1.0p-53; }

double wt_rng_normal(wt_rng *rng) {
  double u1 = wt_rng_double(rng), u2 = wt_rng_double(rng);
  if (u1 < 1e-300) u1 = 1e-300;
  return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

void wt_rng_shuffle_int(wt_rng *rng, int *a, int n) {
  for (int i = n - 1; i > 0; i--) {
    int j = (int)wt_rng_below(rng, (uint64_t)i + 1);
    int t = a[i];
    a[i] = a[j];
    a[j] = t;
  }
}
