/* codec_stream — copying a codec's output past the caches, for outputs far larger than them.
 *
 * A plain store first reads the cache line it writes (read-for-ownership), so decoding 64 Mi
 * floats moves 256 MB more through memory than it needs to. Kernels write a cache-sized piece
 * to a buffer of their own, and this copies it out with non-temporal stores. Below
 * COMPRESS_STREAM_MIN the output would still be in cache for whoever reads it next, so the
 * codecs store directly there.
 */
#include <immintrin.h>
#include <string.h>

#include "compress/codec_internal.h"

__attribute__((target("avx512f"))) static void s_stream_avx512(uint8_t *dst, const uint8_t *src,
                                                               size_t bytes) {
  size_t head = (64 - ((uintptr_t)dst & 63)) & 63, i;
  head = WT_MIN(head, bytes);
  memcpy(dst, src, head);
  for (i = head; i + 64 <= bytes; i += 64)
    _mm512_stream_si512((__m512i *)(dst + i), _mm512_loadu_si512(src + i));
  memcpy(dst + i, src + i, bytes - i);
  _mm_sfence(); // streamed stores are weakly ordered: publish them before the threads join
}

int compress_stream_wanted(size_t out_bytes) {
  return out_bytes >= COMPRESS_STREAM_MIN && compress_simd_enabled() &&
         __builtin_cpu_supports("avx512f");
}

void compress_stream_store(void *dst, const void *src, size_t bytes) {
  if (compress_simd_enabled() && __builtin_cpu_supports("avx512f"))
    s_stream_avx512(dst, src, bytes);
  else
    memcpy(dst, src, bytes);
}
