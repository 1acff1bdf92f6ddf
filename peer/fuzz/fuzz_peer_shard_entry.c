/* fuzz_peer_shard_entry — libFuzzer target for peerd's reading of a shard the coordinator names
 * (peer/shards.c: a REPLICATE body, or one entry of a welcome's "fetch" list): the shard's id and
 * digest, and its holders with this peer left out. Any JSON is either refused or yields an id
 * that names a shard (step ≥ 1, stage and replica ≥ 0, a 64-character digest) and at most 16
 * holders, each with an endpoint, a 40-character key that is not this peer's, and a relay key
 * whenever it names a relay. Includes peer/shards.c for its static readers; seeds are valid
 * entries.
 *
 * fuzz-sources: coordinator/protocol.c parallel/transport/shards.c
 * fuzz-sources: parallel/transport/shard_keys.c parallel/transport/zmq_aead.c common/common.c
 * fuzz-libs: -lzmq -lsodium -lcjson -lcrypto -lm -lpthread
 */
#include "peer/shards.c"

#define SELF_KEY "selfselfselfselfselfselfselfselfselfself"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  char *text = malloc(n + 1);
  memcpy(text, data, n), text[n] = 0;
  cJSON *b = cJSON_Parse(text);
  free(text);
  if (!b) return 0;
  parallel_shard_id id;
  const char *digest;
  if (s_parse_id(b, &id, &digest) == WT_OK &&
      (id.step < 1 || id.stage < 0 || id.replica < 0 || strlen(digest) != 64))
    abort();
  parallel_shard_holder h[16];
  const int count = s_holders(cJSON_GetObjectItemCaseSensitive(b, "holders"), SELF_KEY, h, 16);
  if (count < 0 || count > 16) abort();
  for (int i = 0; i < count; i++) {
    if (!h[i].endpoint[0] || strlen(h[i].public_key) != 40 || !strcmp(h[i].public_key, SELF_KEY))
      abort();
    if (h[i].relay && !h[i].relay_key) abort();
  }
  cJSON_Delete(b);
  return 0;
}
