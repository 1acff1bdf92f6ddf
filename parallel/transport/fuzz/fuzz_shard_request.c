/* fuzz_shard_request — libFuzzer target for the shard server's request decoding and answering
 * (parallel/transport/shards.c, what a client's [request] frame reaches): any input is answered
 * with a well-formed JSON head, read answers stay within one piece, and no answer holds a byte of
 * a file outside the shard's names (fuzz_shard_setup.h keeps such a file beside the run). The
 * served and refused counters account for every request. Includes shards.c for its static
 * answering code; seeds are valid "list" and "read" requests.
 *
 * fuzz-sources: parallel/transport/shard_keys.c parallel/transport/zmq_aead.c common/common.c
 * fuzz-libs: -lzmq -lsodium -lcjson -lcrypto -lm -lpthread
 */
#define _GNU_SOURCE /* memmem */
#include "parallel/transport/shards.c"

#include "parallel/transport/fuzz/fuzz_shard_setup.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  parallel_shard_server *s = fuzz_server();
  const uint64_t before = s->served + s->refused;
  s_answer a;
  s_answer_request(s, (const char *)data, n, &a);
  fuzz_check_answer(&a);
  const int ok = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(a.head, "ok"));
  if (ok && s->served + s->refused != before + 1) abort(); /* an answer served is counted */
  s_answer_free(&a);
  return 0;
}
