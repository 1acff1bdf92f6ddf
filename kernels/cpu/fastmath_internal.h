/* fastmath_internal — an exp() the compiler can vectorise, for the CPU back end's elementwise
 * loops.
 *
 * glibc's expf/tanhf are calls the compiler cannot vectorise without -ffast-math (which we do
 * not use: tests compare bitwise and against PyTorch), and GELU and softmax spend most of their
 * time in them. This version is plain arithmetic, so loops around it vectorise:
 *   exp(x) = 2^k * exp(r),  k = round(x / ln 2),  r = x - k ln 2 in [-ln2/2, ln2/2],
 * with exp(r) as its degree-7 Taylor polynomial (remainder r^8/8! < 6e-9 relative) and 2^k
 * built in the exponent bits. ln 2 is split in two parts so r keeps full precision. Inputs are
 * clamped to [-87, 88] so 2^k stays a normal float: exp(-87) = 1.6e-38 stands in for smaller
 * values, which only ever add to sums of much larger terms here. Accuracy: within 2 ulp of
 * expf over the clamped range (test_kernels compares against double exp). */
#ifndef WT_KERNELS_FASTMATH_INTERNAL_H
#define WT_KERNELS_FASTMATH_INTERNAL_H

#include <stdint.h>
#include <string.h>

static inline float wt_fast_expf(float x) {
  x = x < -87.0f ? -87.0f : (x > 88.0f ? 88.0f : x);
  float k = __builtin_floorf(x * 1.44269504089f + 0.5f);
  float r = x - k * 0.693145751953125f;   /* ln 2, high part (exact in float) */
  r = r - k * 1.42860682030941723212e-6f; /* ln 2, low part */
  float p = 1.0f / 5040;
  p = p * r + 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  k = k == k ? k : 0.0f; /* NaN in: p is NaN already; keep the int conversion defined */
  int32_t bits = ((int32_t)k + 127) << 23;
  float scale;
  memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

/* tanh(u) = 1 - 2 / (1 + e^{2u}); saturates cleanly to +-1 through the clamp above. */
static inline float wt_fast_tanhf(float u) {
  return 1.0f - 2.0f / (1.0f + wt_fast_expf(2.0f * u));
}

#endif
