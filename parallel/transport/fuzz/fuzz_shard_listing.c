/* fuzz_shard_listing — libFuzzer target for the parser of a shard listing, the text a holder
 * returns for "list" (parallel/transport/shards.h: "<sha256>  <size>  <path>\n" lines). The input
 * is parsed as the listing of replica 0 and of replica 1 of one shard. A listing it accepts must
 * name only files of that shard (no path that leaves its stage directory, no dot file, no
 * absolute path), sizes no bigger than the parser's bound, and print back to exactly the input
 * (nothing is silently normalised, so the digest of what was accepted is the digest checked).
 * Includes shards.c for its static parser. Run by scripts/fuzz.sh; seeds are valid listings.
 *
 * fuzz-sources: parallel/transport/shard_keys.c parallel/transport/zmq_aead.c common/common.c
 * fuzz-libs: -lzmq -lsodium -lcjson -lcrypto -lm -lpthread
 */
#include "parallel/transport/shards.c"

static void s_check_accepted(const char *text, const parallel_shard_id *id, const s_entry *e,
                             int n) {
  char step_rel[96], state_rel[96];
  s_step_rel(id, step_rel, sizeof step_rel);
  s_state_rel(id, state_rel, sizeof state_rel);
  if (n < 1 || n > S_MAX_FILES) abort();
  for (int i = 0; i < n; i++) {
    const char *p = e[i].path;
    /* no component "." or "..": no component starts with a dot */
    if (p[0] == '/' || p[0] == '.' || strstr(p, "/.") || strstr(p, "//")) abort();
    if (strcmp(p, state_rel) &&
        (strncmp(p, step_rel, strlen(step_rel)) || strchr(p + strlen(step_rel) + 1, '/')))
      abort();
    if (e[i].size < 0 || e[i].size >= 1000000000000000LL) abort();
    if (strlen(e[i].hex) != 64) abort();
  }
  char *again = s_listing_text(e, n);
  if (strcmp(again, text)) abort();
  free(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  char *text = malloc(n + 1);
  memcpy(text, data, n), text[n] = 0;
  for (int replica = 0; replica < 2; replica++) {
    parallel_shard_id id = {.run = 1, .step = 40, .stage = 1, .replica = replica};
    s_entry e[S_MAX_FILES];
    int count = 0;
    if (s_parse_listing(text, &id, e, S_MAX_FILES, &count) == WT_OK)
      s_check_accepted(text, &id, e, count);
  }
  free(text);
  return 0;
}
