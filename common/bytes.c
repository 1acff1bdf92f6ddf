/* bytes — CRC-32 through zlib in pieces of at most 1 GiB (zlib's length type is 32-bit). */
#include "common/bytes.h"

#include <zlib.h> // defines: crc32

uint32_t wt_crc32(uint32_t crc, const void *data, size_t n) {
  const Bytef *p = data;
  uLong c = crc;
  while (n > 0) {
    uInt piece = n > ((size_t)1 << 30) ? (uInt)1 << 30 : (uInt)n;
    c = crc32(c, p, piece);
    p += piece;
    n -= piece;
  }
  return (uint32_t)c;
}
