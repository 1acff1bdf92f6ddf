/* fuzz_zmq_frame — libFuzzer target for the ZeroMQ transport's frame decoder
 * (parallel/transport/zmq_protocol.h): the input's first 56 bytes (or all of it, when shorter) are
 * the header frame, the rest the payload. Decoding must never read out of bounds or crash, and a
 * header it accepts must re-encode to exactly the same bytes (nothing is silently normalised).
 * Run by scripts/fuzz.sh; its seed is a valid header with a 4-byte payload.
 *
 * fuzz-sources: parallel/transport/zmq_protocol.c
 */
#include "parallel/transport/zmq_protocol.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  size_t hlen = n < PARALLEL_ZMQ_HEADER_BYTES ? n : PARALLEL_ZMQ_HEADER_BYTES;
  /* A private copy of exactly hlen bytes, so ASan catches any read past the frame. */
  uint8_t *head = malloc(hlen ? hlen : 1);
  if (hlen) memcpy(head, data, hlen);
  parallel_zmq_header h;
  if (parallel_zmq_header_decode(head, hlen, &h) == NULL) {
    uint8_t again[PARALLEL_ZMQ_HEADER_BYTES];
    parallel_zmq_header_encode(&h, again);
    if (memcmp(again, head, PARALLEL_ZMQ_HEADER_BYTES) != 0) abort();
    parallel_zmq_expect e = {.run_id = 1, .epoch = 0, .size = 4, .self = 0};
    const char *problem = parallel_zmq_header_check(&h, &e, n - hlen);
    /* An accepted header must describe exactly the bytes that follow it (a chunk: some of
     * them, at least one). */
    int chunk = (h.flags & PARALLEL_ZMQ_FLAG_CHUNK) != 0;
    int fits = chunk ? n - hlen >= 1 && n - hlen <= h.length : h.length == n - hlen;
    if (problem == NULL && (!fits || h.src_rank < 1 || h.src_rank > 3)) abort();
  }
  /* Every length, including ones that are not a header, must be handled. */
  parallel_zmq_header_decode(data, n, &h);
  free(head);
  return 0;
}
