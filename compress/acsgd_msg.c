/* acsgd_msg — the self-describing AC-SGD message: header layout, checks, PLAIN encode/decode. */
#include "compress/acsgd_internal.h"

#include "common/common.h"

#include <string.h>
#include "common/bytes.h" // defines: wt_crc32 (zlib), little-endian fields

static const uint8_t s_magic[4] = {'A', 'C', 'S', 'G'};
#define S_VERSION 1
/* Largest rows/cols accepted from a message: far above any real (T, C), low enough that the
 * size arithmetic below cannot overflow. */
#define S_MAX_DIM (1 << 24)

/* CRC-32 of header bytes [0, 28) then the payload. */
static uint32_t s_crc(const uint8_t *h, const uint8_t *payload, size_t n) {
  return wt_crc32(wt_crc32(0, h, 28), payload, n);
}


void acsgd_msg_write_header(uint8_t *h, acsgd_kind kind, int bits, uint64_t sample_id, int rows,
                            int cols, uint32_t slot) {
  memset(h, 0, ACSGD_HEADER_BYTES);
  memcpy(h, s_magic, 4);
  h[4] = S_VERSION;
  h[5] = (uint8_t)kind;
  h[6] = (uint8_t)bits;
  wt_put_le64(h + 8, sample_id);
  wt_put_le32(h + 16, (uint32_t)rows);
  wt_put_le32(h + 20, (uint32_t)cols);
  wt_put_le32(h + 24, slot);
  wt_put_le64(h + 32, acsgd_payload_bytes(rows, cols, bits));
  wt_put_le32(h + 28, s_crc(h, h + ACSGD_HEADER_BYTES, acsgd_payload_bytes(rows, cols, bits)));
}

static int s_check_fields(const uint8_t *h, acsgd_msg_info *info) {
  if (memcmp(h, s_magic, 4) != 0)
    return wt_fail(WT_ECORRUPT, "acsgd message: bad magic; not an AC-SGD message");
  if (h[4] != S_VERSION)
    return wt_fail(WT_ECORRUPT,
                   "acsgd message: version %d, this build reads %d; upgrade the "
                   "older peer",
                   h[4], S_VERSION);
  if (h[5] < ACSGD_FIRST || h[5] > ACSGD_PLAIN || h[7] != 0)
    return wt_fail(WT_ECORRUPT, "acsgd message: unknown kind %d or nonzero reserved byte", h[5]);
  if (h[6] != 2 && h[6] != 4 && h[6] != 8)
    return wt_fail(WT_ECORRUPT, "acsgd message: %d bits (must be 2, 4 or 8)", h[6]);
  uint32_t rows = wt_get_le32(h + 16), cols = wt_get_le32(h + 20), slot = wt_get_le32(h + 24);
  if (rows == 0 || cols == 0 || rows > S_MAX_DIM || cols > S_MAX_DIM)
    return wt_fail(WT_ECORRUPT, "acsgd message: shape %ux%u out of range", rows, cols);
  if ((h[5] == ACSGD_PLAIN) != (slot == ACSGD_NO_SLOT))
    return wt_fail(WT_ECORRUPT, "acsgd message: kind %d with slot %u", h[5], slot);
  info->kind = (acsgd_kind)h[5];
  info->bits = h[6];
  info->sample_id = wt_get_le64(h + 8);
  info->rows = (int)rows;
  info->cols = (int)cols;
  info->slot = slot;
  return WT_OK;
}

int acsgd_msg_parse(const void *buf, size_t len, acsgd_msg_info *info) {
  const uint8_t *h = buf;
  if (len < ACSGD_HEADER_BYTES)
    return wt_fail(WT_ECORRUPT, "acsgd message: %zu bytes, shorter than its %d-byte header", len,
                   ACSGD_HEADER_BYTES);
  WT_CHECK(s_check_fields(h, info));
  uint64_t payload = wt_get_le64(h + 32);
  size_t want = acsgd_payload_bytes(info->rows, info->cols, info->bits);
  if (payload != want)
    return wt_fail(WT_ECORRUPT,
                   "acsgd message: payload length %llu, but %dx%d at %d bits needs "
                   "%zu",
                   (unsigned long long)payload, info->rows, info->cols, info->bits, want);
  if (len - ACSGD_HEADER_BYTES < want)
    return wt_fail(WT_ECORRUPT, "acsgd message: truncated (%zu of %zu payload bytes present)",
                   len - ACSGD_HEADER_BYTES, want);
  if (s_crc(h, h + ACSGD_HEADER_BYTES, want) != wt_get_le32(h + 28))
    return wt_fail(WT_ECORRUPT,
                   "acsgd message for sample %llu: CRC mismatch; the bytes were "
                   "damaged in transit",
                   (unsigned long long)info->sample_id);
  info->payload_bytes = want;
  info->total_bytes = ACSGD_HEADER_BYTES + want;
  return WT_OK;
}

int acsgd_quant_encode(const float *x, int rows, int cols, int bits, uint64_t sample_id, void *out,
                       size_t cap, size_t *written) {
  if (rows <= 0 || cols <= 0 || rows > S_MAX_DIM || cols > S_MAX_DIM)
    return wt_fail(WT_EINVAL, "acsgd: cannot encode a %dx%d tensor", rows, cols);
  if (bits != 2 && bits != 4 && bits != 8)
    return wt_fail(WT_EINVAL, "acsgd: %d bits requested (must be 2, 4 or 8)", bits);
  size_t need = acsgd_msg_bytes(rows, cols, bits);
  if (cap < need)
    return wt_fail(WT_EINVAL, "acsgd: output buffer of %zu bytes, message needs %zu", cap, need);
  uint8_t *p = out;
  WT_CHECK(acsgd_quantize_rows(x, rows, cols, bits, p + ACSGD_HEADER_BYTES));
  acsgd_msg_write_header(p, ACSGD_PLAIN, bits, sample_id, rows, cols, ACSGD_NO_SLOT);
  *written = need;
  return WT_OK;
}

int acsgd_quant_decode(const void *msg, size_t len, float *out, size_t out_cap,
                       acsgd_msg_info *info) {
  acsgd_msg_info m;
  WT_CHECK(acsgd_msg_parse(msg, len, &m));
  if (m.kind != ACSGD_PLAIN)
    return wt_fail(WT_EMISMATCH, "acsgd: expected a PLAIN message, got kind %d", m.kind);
  if ((size_t)m.rows * (size_t)m.cols > out_cap)
    return wt_fail(WT_EMISMATCH, "acsgd message: %dx%d does not fit the %zu-float buffer", m.rows,
                   m.cols, out_cap);
  WT_CHECK(acsgd_dequantize_rows((const uint8_t *)msg + ACSGD_HEADER_BYTES, m.rows, m.cols, m.bits,
                                 out, 0));
  if (info) *info = m;
  return WT_OK;
}
