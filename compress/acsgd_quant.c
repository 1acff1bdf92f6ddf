/* acsgd_quant — the per-row affine b-bit quantizer of AC-SGD (2, 4 or 8 bits). */
#include "compress/acsgd.h"

#include "common/common.h"

#include <math.h>
#include <string.h>

static int s_bits_ok(int bits) {
  return bits == 2 || bits == 4 || bits == 8;
}

size_t acsgd_payload_bytes(int rows, int cols, int bits) {
  size_t codes = (size_t)rows * (size_t)cols * (size_t)bits;
  return (size_t)rows * 2 * sizeof(float) + (codes + 7) / 8;
}

size_t acsgd_msg_bytes(int rows, int cols, int bits) {
  return ACSGD_HEADER_BYTES + acsgd_payload_bytes(rows, cols, bits);
}

/* ---- quantizer -------------------------------------------------------------------------- */

static int s_row_range(const float *x, int cols, float *lo, float *hi) {
  float mn = x[0], mx = x[0];
  for (int j = 0; j < cols; j++) {
    if (!isfinite(x[j])) return WT_EINVAL;
    mn = x[j] < mn ? x[j] : mn;
    mx = x[j] > mx ? x[j] : mx;
  }
  *lo = mn;
  *hi = mx;
  return WT_OK;
}

/* Codes are packed row-major, `bits` each, low bits of each byte first. Since 8 is a multiple of
 * every supported width, a code never straddles two bytes. */
static void s_put_code(uint8_t *codes, size_t k, int bits, unsigned q) {
  size_t bit = k * (size_t)bits;
  codes[bit >> 3] |= (uint8_t)(q << (bit & 7));
}

static unsigned s_get_code(const uint8_t *codes, size_t k, int bits) {
  size_t bit = k * (size_t)bits;
  return (codes[bit >> 3] >> (bit & 7)) & ((1u << bits) - 1u);
}

int acsgd_quantize_rows(const float *x, int rows, int cols, int bits, uint8_t *payload) {
  if (!s_bits_ok(bits) || rows <= 0 || cols <= 0)
    return wt_fail(WT_EINVAL, "acsgd: cannot quantize %dx%d at %d bits (bits must be 2, 4 or 8)",
                   rows, cols, bits);
  const unsigned levels = (1u << bits) - 1u;
  uint8_t *codes = payload + (size_t)rows * 2 * sizeof(float);
  memset(codes, 0, acsgd_payload_bytes(rows, cols, bits) - (size_t)rows * 2 * sizeof(float));
  for (int i = 0; i < rows; i++) {
    const float *row = x + (size_t)i * cols;
    float lo, hi;
    if (s_row_range(row, cols, &lo, &hi) != WT_OK)
      return wt_fail(WT_EINVAL, "acsgd: row %d holds a NaN or Inf; the model has diverged", i);
    float step = (hi - lo) / (float)levels;
    memcpy(payload + (size_t)i * 8, &lo, 4); // hosts are little-endian (x86-64, aarch64)
    memcpy(payload + (size_t)i * 8 + 4, &step, 4);
    for (int j = 0; j < cols; j++) {
      float t = step > 0 ? (row[j] - lo) / step : 0.0f;
      unsigned q = (unsigned)fminf(fmaxf(floorf(t + 0.5f), 0.0f), (float)levels);
      s_put_code(codes, (size_t)i * cols + j, bits, q);
    }
  }
  return WT_OK;
}

#define S_CHUNK 256

/* Kept out of line (noinline) for the same reason as the buffer above. */
__attribute__((noinline)) static void s_store(float *o, const float *prod, int n, float lo,
                                              int add) {
  if (add)
    for (int j = 0; j < n; j++) o[j] += lo + prod[j];
  else
    for (int j = 0; j < n; j++) o[j] = lo + prod[j];
}

int acsgd_dequantize_rows(const uint8_t *payload, int rows, int cols, int bits, float *out,
                          int add) {
  const uint8_t *codes = payload + (size_t)rows * 2 * sizeof(float);
  for (int i = 0; i < rows; i++) {
    float lo, step;
    memcpy(&lo, payload + (size_t)i * 8, 4);
    memcpy(&step, payload + (size_t)i * 8 + 4, 4);
    float top = lo + (float)((1u << bits) - 1u) * step; // the largest value it can decode to
    if (!isfinite(lo) || !isfinite(step) || step < 0 || !isfinite(top))
      return wt_fail(WT_ECORRUPT,
                     "acsgd message: row %d has scale (lo %g, step %g); the "
                     "message is corrupt",
                     i, (double)lo, (double)step);
  }
  for (int i = 0; i < rows; i++) {
    float lo, step;
    memcpy(&lo, payload + (size_t)i * 8, 4);
    memcpy(&step, payload + (size_t)i * 8 + 4, 4);
    float *o = out + (size_t)i * cols;
    // The products go through memory before the sums so that no compiler can fuse them into an
    // fma: both sides of a cut, maybe built differently, must compute the same bits.
    float prod[S_CHUNK];
    for (int j0 = 0; j0 < cols; j0 += S_CHUNK) {
      int n = WT_MIN(S_CHUNK, cols - j0);
      for (int j = 0; j < n; j++)
        prod[j] = (float)s_get_code(codes, (size_t)i * cols + j0 + j, bits) * step;
      s_store(o + j0, prod, n, lo, add);
    }
  }
  return WT_OK;
}
