/* wire — the framed, self-describing message around a codec payload (layout in codec.h).
 *
 * Everything in the header is checked before the payload is handed to a decoder, and the CRC
 * covers header and payload, so a flipped bit anywhere is refused rather than decoded into a
 * plausible-looking but wrong gradient. zlib's crc32 is the checksum: well kept, and fast
 * enough next to the network it protects.
 */
#include <string.h>
#include "common/bytes.h" // defines: wt_crc32 (zlib), little-endian fields

#include "compress/codec.h"
#include "compress/codec_internal.h"

#define S_CRC_OFFSET 28


/* CRC-32 of the header up to the CRC field, then the payload. */
static uint32_t s_crc(const uint8_t *header, const uint8_t *payload, size_t len) {
  return wt_crc32(wt_crc32(0, header, S_CRC_OFFSET), payload, len);
}

/* The block size the header records: what the decoder must use to find the scales. */
static uint64_t s_header_block(const compress_codec *self, size_t n) {
  compress_codec_id id = compress_codec_get_id(self);
  if (id != COMPRESS_CODEC_INT8 && id != COMPRESS_CODEC_INT4 && id != COMPRESS_CODEC_SIGN) return 1;
  return compress_block_of(n, compress_codec_params(self));
}

size_t compress_wire_max_size(const compress_codec *self, size_t n) {
  return COMPRESS_WIRE_HEADER_SIZE + compress_codec_max_size(self, n);
}

int compress_wire_encode(const compress_codec *self, const float *x, size_t n, void *out,
                         size_t cap, size_t *len) {
  *len = 0;
  uint64_t block = s_header_block(self, n);
  if (block > UINT32_MAX)
    return wt_fail(WT_EINVAL,
                   "wire encode: block size %llu does not fit the 32-bit header "
                   "field; use a block of at most %u elements",
                   (unsigned long long)block, UINT32_MAX);
  if (cap < COMPRESS_WIRE_HEADER_SIZE)
    return compress_check_cap("wire", COMPRESS_WIRE_HEADER_SIZE, cap);
  uint8_t *h = out, *payload = h + COMPRESS_WIRE_HEADER_SIZE;
  size_t plen = 0;
  WT_CHECK(compress_codec_encode(self, x, n, payload, cap - COMPRESS_WIRE_HEADER_SIZE, &plen));
  memcpy(h, COMPRESS_WIRE_MAGIC, 4);
  h[4] = COMPRESS_WIRE_VERSION;
  h[5] = (uint8_t)compress_codec_get_id(self);
  h[6] = h[7] = 0;
  wt_put_le64(h + 8, n);
  wt_put_le32(h + 16, (uint32_t)block);
  wt_put_le64(h + 20, plen);
  wt_put_le32(h + S_CRC_OFFSET, s_crc(h, payload, plen));
  *len = COMPRESS_WIRE_HEADER_SIZE + plen;
  return WT_OK;
}

/* Header checks that need no checksum, so a damaged length field is reported as such. */
static int s_check_header(const uint8_t *h, size_t len, compress_wire_info *info) {
  if (len < COMPRESS_WIRE_HEADER_SIZE)
    return wt_fail(WT_ECORRUPT,
                   "wire: message of %zu bytes is shorter than the %d-byte header; "
                   "it was truncated",
                   len, COMPRESS_WIRE_HEADER_SIZE);
  if (memcmp(h, COMPRESS_WIRE_MAGIC, 4) != 0)
    return wt_fail(WT_ECORRUPT,
                   "wire: bad magic %02x%02x%02x%02x (want \"WTCZ\"); this is not a "
                   "compressed tensor message",
                   h[0], h[1], h[2], h[3]);
  if (h[4] != COMPRESS_WIRE_VERSION)
    return wt_fail(WT_EMISMATCH, "wire: version %u, this build speaks %d; upgrade the older peer",
                   h[4], COMPRESS_WIRE_VERSION);
  if (!compress_codec_ops_by_id(h[5]))
    return wt_fail(WT_EMISMATCH, "wire: unknown codec id %u; known codecs are %s", h[5],
                   compress_codec_names());
  info->codec = (compress_codec_id)h[5];
  info->n = wt_get_le64(h + 8);
  info->block = wt_get_le32(h + 16);
  info->payload_len = wt_get_le64(h + 20);
  if (info->payload_len != len - COMPRESS_WIRE_HEADER_SIZE)
    return wt_fail(WT_ECORRUPT,
                   "wire: header announces a %llu-byte payload but %zu bytes "
                   "follow it; the message is truncated or padded",
                   (unsigned long long)info->payload_len, len - COMPRESS_WIRE_HEADER_SIZE);
  if (info->block == 0 || (info->n > 0 && info->block > info->n) || h[6] || h[7])
    return wt_fail(WT_ECORRUPT,
                   "wire: block size %u for %llu elements (or flags %u) is "
                   "impossible; the header is damaged",
                   info->block, (unsigned long long)info->n, (unsigned)(h[6] | h[7] << 8));
  return WT_OK;
}

int compress_wire_peek(const void *buf, size_t len, compress_wire_info *info) {
  const uint8_t *h = buf;
  memset(info, 0, sizeof *info);
  WT_CHECK(s_check_header(h, len, info));
  uint32_t want = wt_get_le32(h + S_CRC_OFFSET);
  uint32_t got = s_crc(h, h + COMPRESS_WIRE_HEADER_SIZE, len - COMPRESS_WIRE_HEADER_SIZE);
  if (want != got)
    return wt_fail(WT_ECORRUPT,
                   "wire: checksum mismatch (header says %08x, data gives %08x); "
                   "the message was damaged in transit — drop it and resend",
                   want, got);
  return WT_OK;
}

static int s_decode_any(const void *buf, size_t len, float alpha, int add, float *y, size_t n) {
  compress_wire_info info;
  WT_CHECK(compress_wire_peek(buf, len, &info));
  if (info.n != n)
    return wt_fail(WT_EMISMATCH,
                   "wire: message holds %llu elements but the tensor has %zu; "
                   "it belongs to another tensor or chunk",
                   (unsigned long long)info.n, n);
  compress_params p = compress_params_default();
  p.block = info.block;
  const compress_codec_ops *ops = compress_codec_ops_by_id(info.codec);
  const uint8_t *payload = (const uint8_t *)buf + COMPRESS_WIRE_HEADER_SIZE;
  if (add) return ops->decode_add(payload, (size_t)info.payload_len, n, &p, alpha, y);
  return ops->decode(payload, (size_t)info.payload_len, n, &p, y);
}

int compress_wire_decode(const void *buf, size_t len, float *y, size_t n) {
  return s_decode_any(buf, len, 1.0f, 0, y, n);
}

int compress_wire_decode_add(const void *buf, size_t len, float alpha, float *y, size_t n) {
  return s_decode_any(buf, len, alpha, 1, y, n);
}
