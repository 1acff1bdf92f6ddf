/* bytes — little-endian field access and CRC-32 for the project's self-describing messages
 * (codec wire format, collective frames, AC-SGD messages, checkpointed residuals).
 *
 * Every wire header in wantrain is little-endian whatever the host, and is checked with the
 * CRC-32 of zlib (a well-kept library, not a hand-written table). One copy of these helpers
 * keeps the formats consistent with each other.
 */
#ifndef WT_BYTES_H
#define WT_BYTES_H

#include <stddef.h>
#include <stdint.h>

static inline void wt_put_le32(uint8_t *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static inline void wt_put_le64(uint8_t *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint32_t wt_get_le32(const uint8_t *p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; i++) v |= (uint32_t)p[i] << (8 * i);
  return v;
}

static inline uint64_t wt_get_le64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

/* Continues a CRC-32 (zlib's polynomial) over n bytes; start with crc = 0. Any length: zlib
 * takes 32-bit lengths, so long buffers are fed in pieces. */
uint32_t wt_crc32(uint32_t crc, const void *data, size_t n);

#endif
