/* codec_half — the driver shared by the 16-bit codecs (fp16, bf16): 2 bytes per element, work
 * split into fixed chunks over OpenMP (so the bytes never depend on the thread count), and large
 * outputs written piece by piece through a cached buffer with non-temporal stores. */
#include "compress/codec_internal.h"

#define S_CHUNK 16384 /* elements per OpenMP work item */

int compress_half_encode(const compress_half_kernels *k, const float *x, size_t n, uint8_t *out,
                         size_t cap, size_t *len) {
  WT_CHECK(compress_check_cap(k->name, 2 * n, cap));
  int stream = k->simd && compress_stream_wanted(2 * n);
  size_t chunks = (n + S_CHUNK - 1) / S_CHUNK;
#pragma omp parallel for if (n >= COMPRESS_OMP_MIN) schedule(static)
  for (size_t c = 0; c < chunks; c++) {
    size_t i0 = c * S_CHUNK, m = WT_MIN((size_t)S_CHUNK, n - i0);
    if (!stream) {
      k->encode(x + i0, m, out + 2 * i0);
      continue;
    }
    uint8_t piece[2 * COMPRESS_STREAM_PIECE]; // cache-resident, then past the caches
    for (size_t j = i0; j < i0 + m; j += COMPRESS_STREAM_PIECE) {
      size_t pm = WT_MIN((size_t)COMPRESS_STREAM_PIECE, i0 + m - j);
      k->encode(x + j, pm, piece);
      compress_stream_store(out + 2 * j, piece, 2 * pm);
    }
  }
  *len = 2 * n;
  return WT_OK;
}

int compress_half_decode(const compress_half_kernels *k, const uint8_t *in, size_t len, size_t n,
                         float alpha, int add, float *y) {
  WT_CHECK(compress_check_len(k->name, len, 2 * n, n));
  int stream = k->simd && !add && compress_stream_wanted(n * sizeof(float));
  size_t chunks = (n + S_CHUNK - 1) / S_CHUNK;
#pragma omp parallel for if (n >= COMPRESS_OMP_MIN) schedule(static)
  for (size_t c = 0; c < chunks; c++) {
    size_t i0 = c * S_CHUNK, m = WT_MIN((size_t)S_CHUNK, n - i0);
    if (!stream) {
      k->decode(in + 2 * i0, m, alpha, add, y + i0);
      continue;
    }
    float piece[COMPRESS_STREAM_PIECE];
    for (size_t j = i0; j < i0 + m; j += COMPRESS_STREAM_PIECE) {
      size_t pm = WT_MIN((size_t)COMPRESS_STREAM_PIECE, i0 + m - j);
      k->decode(in + 2 * j, pm, alpha, 0, piece);
      compress_stream_store(y + j, piece, pm * sizeof(float));
    }
  }
  return WT_OK;
}
