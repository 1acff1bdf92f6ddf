/* frame — builds and checks the envelope of collective messages (layout in frame_internal.h). */
#include "parallel/collectives/frame_internal.h"

#include "common/bytes.h" // defines: little-endian fields
#include "common/common.h"

#include <string.h>

#define S_MAGIC "WTPC"
#define S_VERSION 3
#define S_FLAG_PAYLOAD_CRC 0x01
#define S_TAG_BASE (PARALLEL_TAG_RESERVED + 16)
#define S_CRC32C_POLY 0x82f63b78u /* Castagnoli, reflected */

/* CRC32C, one byte at a time: the reference, and the path of CPUs without SSE4.2. */
static uint32_t s_crc32c_ref(uint32_t crc, const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++) {
    crc ^= p[i];
    for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (S_CRC32C_POLY & (0u - (crc & 1u)));
  }
  return crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/* The same with SSE4.2's crc32 instruction, 8 bytes per instruction. */
__attribute__((target("sse4.2"))) static uint32_t s_crc32c_sse42(uint32_t crc, const uint8_t *p,
                                                                 size_t n) {
  uint64_t c = crc;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    c = __builtin_ia32_crc32di(c, w);
  }
  crc = (uint32_t)c;
  for (; n; p++, n--) crc = __builtin_ia32_crc32qi(crc, *p);
  return crc;
}
#define S_HAVE_SSE42() __builtin_cpu_supports("sse4.2")
#else
#define s_crc32c_sse42 s_crc32c_ref
#define S_HAVE_SSE42() 0
#endif

/* CRC32C (Castagnoli, as iSCSI and ext4) of data, continuing crc (0 to start). */
static uint32_t s_crc32c(uint32_t crc, const void *data, size_t n) {
  crc = ~crc;
  crc = S_HAVE_SSE42() ? s_crc32c_sse42(crc, data, n) : s_crc32c_ref(crc, data, n);
  return ~crc;
}

/* CRC32C of header[0,24), then of the payload when the header's flag says it is covered. */
static uint32_t s_crc(const uint8_t *header, const uint8_t *payload, size_t bytes) {
  uint32_t crc = s_crc32c(0, header, 24);
  return header[6] & S_FLAG_PAYLOAD_CRC ? s_crc32c(crc, payload, bytes) : crc;
}

/* Writes the header for a payload of `bytes` at `payload`. */
static void s_header(parallel_comm *c, uint8_t *h, parallel_frame_id id, const uint8_t *payload,
                     size_t bytes) {
  memset(h, 0, PARALLEL_FRAME_HEADER);
  memcpy(h, S_MAGIC, 4);
  h[4] = S_VERSION;
  h[5] = (uint8_t)id.kind;
  h[6] = parallel_comm_integrity(c) ? 0 : S_FLAG_PAYLOAD_CRC;
  wt_put_le32(h + 8, id.seq);
  wt_put_le32(h + 12, id.index);
  wt_put_le64(h + 16, bytes);
  wt_put_le32(h + 24, s_crc(h, payload, bytes));
}

int parallel_frame_send(parallel_comm *c, int peer, parallel_frame_id id, const void *payload,
                        size_t bytes, uint8_t *scratch) {
  if (bytes && payload != scratch + PARALLEL_FRAME_HEADER)
    memmove(scratch + PARALLEL_FRAME_HEADER, payload, bytes);
  s_header(c, scratch, id, scratch + PARALLEL_FRAME_HEADER, bytes);
  return parallel_comm_send(c, peer, S_TAG_BASE + (int)id.kind, scratch,
                            PARALLEL_FRAME_HEADER + bytes);
}

int parallel_frame_send_copy(parallel_comm *c, int peer, parallel_frame_id id, const void *payload,
                             size_t bytes) {
  uint8_t h[PARALLEL_FRAME_HEADER];
  s_header(c, h, id, payload, bytes);
  return parallel_comm_send_gather(c, peer, S_TAG_BASE + (int)id.kind, h, sizeof h, payload, bytes);
}

/* Names the first header field that is not what the receiver expects, or NULL. */
static const char *s_header_problem(const uint8_t *h, size_t got, parallel_frame_id id,
                                    int integrity) {
  if (memcmp(h, S_MAGIC, 4) != 0) return "bad magic";
  if (h[4] != S_VERSION) return "unknown version";
  if (h[5] != (uint8_t)id.kind) return "wrong collective phase";
  if (h[6] & ~S_FLAG_PAYLOAD_CRC || h[7]) return "unknown flags";
  if (!integrity && !(h[6] & S_FLAG_PAYLOAD_CRC))
    return "payload not checksummed on a link that does not guarantee integrity";
  if (wt_get_le32(h + 8) != id.seq) return "wrong sequence number (peer runs another collective)";
  if (wt_get_le32(h + 12) != id.index) return "wrong chunk or rank index";
  if (wt_get_le64(h + 16) != got - PARALLEL_FRAME_HEADER) return "length does not match message";
  if (wt_get_le32(h + 24) != s_crc(h, h + PARALLEL_FRAME_HEADER, got - PARALLEL_FRAME_HEADER))
    return "checksum mismatch";
  return NULL;
}

/* Checks a received frame; on a problem fails naming the peer and what was wrong. */
static int s_check(parallel_comm *c, int peer, parallel_frame_id id, const uint8_t *buf,
                   size_t got) {
  const char *problem = got < PARALLEL_FRAME_HEADER
                            ? "shorter than a header"
                            : s_header_problem(buf, got, id, parallel_comm_integrity(c));
  if (problem)
    return wt_fail(WT_ECORRUPT,
                   "collective: rank %d refused a %zu-byte message from rank %d (phase %d, "
                   "chunk %u, call %u): %s; the peer is faulty or the link corrupts data",
                   parallel_comm_rank(c), got, peer, (int)id.kind, id.index, id.seq, problem);
  return WT_OK;
}

int parallel_frame_recv(parallel_comm *c, int peer, parallel_frame_id id, uint8_t *buf, size_t cap,
                        const uint8_t **payload, size_t *bytes) {
  size_t got = 0;
  WT_CHECK(parallel_comm_recv(c, peer, S_TAG_BASE + (int)id.kind, buf, cap, &got));
  WT_CHECK(s_check(c, peer, id, buf, got));
  *payload = buf + PARALLEL_FRAME_HEADER;
  *bytes = got - PARALLEL_FRAME_HEADER;
  return WT_OK;
}

int parallel_frame_recv_view(parallel_comm *c, int peer, parallel_frame_id id, uint8_t *scratch,
                             size_t cap, const uint8_t **payload, size_t *bytes, void **handle) {
  size_t got = 0;
  const void *data = NULL;
  WT_CHECK(parallel_comm_recv_view(c, peer, S_TAG_BASE + (int)id.kind, scratch, cap, &data, &got,
                                   handle));
  int rc = s_check(c, peer, id, data, got);
  if (rc != WT_OK) {
    parallel_comm_release(c, *handle);
    *handle = NULL;
    return rc;
  }
  *payload = (const uint8_t *)data + PARALLEL_FRAME_HEADER;
  *bytes = got - PARALLEL_FRAME_HEADER;
  return WT_OK;
}
