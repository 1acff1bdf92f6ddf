/* test_coord_protocol — the control message decoder refuses garbage, truncated, oversized,
 * wrong-version and malformed messages with a reason; the replay rule; join tokens (forged,
 * expired, used up, missing) and durations. No sockets. */
#include "common/common.h"
#include "common/testing.h"
#include "coordinator/coordinator_internal.h"
#include "coordinator/protocol.h"

#include <sodium.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char s_tmp[1024];

static int s_decode(const char *text, coordinator_msg *m) {
  return coordinator_msg_decode(text, strlen(text), m);
}

static void test_decode(void) {
  coordinator_msg m;
  const char *good = "{\"v\":2,\"cmd\":\"heartbeat\",\"sid\":\"0123456789abcdef0123456789abcdef\","
                     "\"seq\":7,\"step\":3}";
  WT_TEST_REQUIRE(s_decode(good, &m) == WT_OK, "a valid message decodes: %s", wt_last_error());
  WT_TEST_ASSERT(m.cmd == COORD_CMD_HEARTBEAT && m.seq == 7, "fields read back");
  WT_TEST_ASSERT(cJSON_GetObjectItem(m.body, "step")->valueint == 3, "the body is kept");
  coordinator_msg_clear(&m);
  static const struct {
    const char *text, *why;
    int rc;
  } bad[] = {
      {"", "empty", WT_EINVAL},
      {"\x01\x02garbage\xff", "not JSON", WT_EINVAL},
      {"{\"v\":2,\"cmd\":\"heartbeat\",\"sid\":\"0123456789abcdef0123456789abcdef\",\"se",
       "not JSON", WT_EINVAL},
      {"[1,2,3]", "not a JSON object", WT_EINVAL},
      {"{\"v\":1,\"cmd\":\"heartbeat\",\"sid\":\"0123456789abcdef0123456789abcdef\",\"seq\":1}",
       "protocol version 1", WT_EMISMATCH},
      {"{\"cmd\":\"heartbeat\",\"sid\":\"0123456789abcdef0123456789abcdef\",\"seq\":1}",
       "no version", WT_EINVAL},
      {"{\"v\":2,\"cmd\":\"explode\",\"sid\":\"0123456789abcdef0123456789abcdef\",\"seq\":1}",
       "unknown command", WT_EINVAL},
      {"{\"v\":2,\"cmd\":\"heartbeat\",\"sid\":\"0123\",\"seq\":1}", "session id", WT_EINVAL},
      {"{\"v\":2,\"cmd\":\"heartbeat\",\"sid\":\"0123456789abcdef0123456789abcdef\",\"seq\":0}",
       "sequence number", WT_EINVAL},
      {"{\"v\":2,\"cmd\":\"heartbeat\",\"sid\":\"0123456789abcdef0123456789abcdef\",\"seq\":1.5}",
       "sequence number", WT_EINVAL},
      /* found by the fuzzer: cJSON would re-encode it as 5e+15 */
      {"{\"v\":2,\"cmd\":\"heartbeat\",\"sid\":\"0123456789abcdef0123456789abcdef\","
       "\"seq\":4999999999999999}",
       "sequence number", WT_EINVAL},
      {"{\"v\":2,\"cmd\":\"heartbeat\",\"sid\":\"0123456789abcdef0123456789abcdef\",\"seq\":1} x",
       "bytes after", WT_EINVAL},
      {"{\"v\":2,\"cmd\":\"heartbeat\",\"sid\":\"0123456789abcdef0123456789abcdef\",\"seq\":2,"
       "\"seq\":1}",
       "repeats the field", WT_EINVAL},
  };
  for (size_t i = 0; i < WT_ARRAY_LEN(bad); i++) {
    int rc = s_decode(bad[i].text, &m);
    WT_TEST_ASSERT(rc == bad[i].rc, "case %zu (%s): status %d", i, bad[i].why, rc);
    WT_TEST_ASSERT(strstr(wt_last_error(), bad[i].why), "case %zu: message '%s' says '%s'", i,
                   wt_last_error(), bad[i].why);
    WT_TEST_ASSERT(m.body == NULL, "case %zu: nothing kept", i);
  }
  char nul[] = "{\"v\":1}\0{}";
  WT_TEST_ASSERT(coordinator_msg_decode(nul, sizeof nul - 1, &m) == WT_EINVAL &&
                     strstr(wt_last_error(), "NUL"),
                 "a NUL byte is refused");
  size_t big = COORD_MSG_MAX + 1;
  char *huge = wt_xmalloc(big);
  memset(huge, ' ', big);
  WT_TEST_ASSERT(coordinator_msg_decode(huge, big, &m) == WT_EINVAL &&
                     strstr(wt_last_error(), "limit"),
                 "an oversized message is refused");
  free(huge);
}

static void test_encode_and_replay(void) {
  char sid[COORD_SID_CHARS + 1], other[COORD_SID_CHARS + 1];
  coordinator_sid_new(sid);
  coordinator_sid_new(other);
  WT_TEST_ASSERT(strcmp(sid, other), "fresh session ids differ");
  cJSON *b = cJSON_CreateObject();
  cJSON_AddStringToObject(b, "token", "x");
  cJSON_AddNumberToObject(b, "v", 99); /* the envelope wins over a body field of the same name */
  char *text = coordinator_msg_encode(COORD_CMD_REGISTER, sid, 1, b);
  coordinator_msg m;
  WT_TEST_REQUIRE(text && s_decode(text, &m) == WT_OK, "encode then decode: %s", wt_last_error());
  WT_TEST_ASSERT(m.cmd == COORD_CMD_REGISTER && !strcmp(m.sid, sid), "round trip");
  coordinator_msg_clear(&m);
  free(text);
  cJSON_Delete(b);
  uint64_t last = 0;
  WT_TEST_ASSERT(coordinator_seq_accept(sid, &last, sid, 1) == WT_OK && last == 1, "seq 1");
  WT_TEST_ASSERT(coordinator_seq_accept(sid, &last, sid, 5) == WT_OK && last == 5, "gaps are fine");
  WT_TEST_ASSERT(coordinator_seq_accept(sid, &last, sid, 5) == WT_EINVAL &&
                     strstr(wt_last_error(), "replayed"),
                 "the same seq again is a replay");
  WT_TEST_ASSERT(coordinator_seq_accept(sid, &last, sid, 3) == WT_EINVAL, "an older seq too");
  WT_TEST_ASSERT(coordinator_seq_accept(sid, &last, other, 9) == WT_EINVAL &&
                     strstr(wt_last_error(), "session"),
                 "another session is stale");
  WT_TEST_ASSERT(last == 5, "refusals leave the state alone");
}

static void test_tokens(void) {
  char dir[1100], tok[256], why[512];
  snprintf(dir, sizeof dir, "%s/state", s_tmp);
  WT_TEST_REQUIRE(coordinator_token_new(dir, 0, 2, tok, sizeof tok) == WT_OK, "%s",
                  wt_last_error());
  coordinator c = {0};
  snprintf(c.dir, sizeof c.dir, "%s", dir);
  c.cfg.run.stages = 1;
  WT_TEST_REQUIRE(coord_token_key_load(dir, c.token_key) == WT_OK && coord_state_open(&c) == WT_OK,
                  "%s", wt_last_error());
  WT_TEST_ASSERT(coord_token_verify(&c, tok, why, sizeof why) == WT_OK, "first use: %s", why);
  WT_TEST_ASSERT(coord_token_verify(&c, tok, why, sizeof why) == WT_OK, "second use: %s", why);
  WT_TEST_ASSERT(coord_token_verify(&c, tok, why, sizeof why) == WT_EINVAL &&
                     strstr(why, "used up"),
                 "third use refused: %s", why);
  WT_TEST_ASSERT(coord_token_verify(&c, "", why, sizeof why) == WT_EINVAL &&
                     strstr(why, "no join token"),
                 "no token: %s", why);
  WT_TEST_ASSERT(coord_token_verify(&c, "hello", why, sizeof why) == WT_EINVAL &&
                     strstr(why, "malformed"),
                 "garbage token: %s", why);
  char forged[256];
  WT_TEST_REQUIRE(coordinator_token_new(dir, 0, 0, tok, sizeof tok) == WT_OK, "%s",
                  wt_last_error());
  snprintf(forged, sizeof forged, "%s", tok);
  size_t k = strlen(forged) - 3; /* a character of the tag */
  forged[k] = forged[k] == 'A' ? 'B' : 'A';
  WT_TEST_ASSERT(coord_token_verify(&c, forged, why, sizeof why) == WT_EINVAL &&
                     strstr(why, "does not verify"),
                 "forged tag: %s", why);
  snprintf(forged, sizeof forged, "%s", tok);
  forged[5] = forged[5] == 'A' ? 'B' : 'A'; /* the id: the tag no longer matches */
  WT_TEST_ASSERT(coord_token_verify(&c, forged, why, sizeof why) == WT_EINVAL &&
                     strstr(why, "does not verify"),
                 "forged id: %s", why);
  for (int i = 0; i < 3; i++)
    WT_TEST_ASSERT(coord_token_verify(&c, tok, why, sizeof why) == WT_OK, "unlimited: %s", why);
  /* a token of another coordinator (another key) does not verify here */
  char dir2[1100], tok2[256];
  snprintf(dir2, sizeof dir2, "%s/state2", s_tmp);
  WT_TEST_REQUIRE(coordinator_token_new(dir2, 0, 0, tok2, sizeof tok2) == WT_OK, "%s",
                  wt_last_error());
  WT_TEST_ASSERT(coord_token_verify(&c, tok2, why, sizeof why) == WT_EINVAL &&
                     strstr(why, "does not verify"),
                 "foreign token: %s", why);
  WT_TEST_REQUIRE(coordinator_token_new(dir, 1, 0, tok, sizeof tok) == WT_OK, "%s",
                  wt_last_error());
  sleep(2);
  WT_TEST_ASSERT(coord_token_verify(&c, tok, why, sizeof why) == WT_EINVAL &&
                     strstr(why, "expired"),
                 "expired: %s", why);
  coord_state_close(&c);
}

static void test_durations(void) {
  double s;
  WT_TEST_ASSERT(coordinator_duration_parse("90", &s) == WT_OK && s == 90, "plain seconds");
  WT_TEST_ASSERT(coordinator_duration_parse("15m", &s) == WT_OK && s == 900, "minutes");
  WT_TEST_ASSERT(coordinator_duration_parse("2h", &s) == WT_OK && s == 7200, "hours");
  WT_TEST_ASSERT(coordinator_duration_parse("7d", &s) == WT_OK && s == 604800, "days");
  WT_TEST_ASSERT(coordinator_duration_parse("5y", &s) == WT_EINVAL, "unknown unit");
  WT_TEST_ASSERT(coordinator_duration_parse("-5m", &s) == WT_EINVAL, "negative");
  WT_TEST_ASSERT(coordinator_duration_parse("soon", &s) == WT_EINVAL, "not a number");
}

int main(void) {
  WT_TEST_REQUIRE(sodium_init() >= 0, "libsodium");
  wt_test_tmpdir(s_tmp, sizeof s_tmp);
  test_decode();
  test_encode_and_replay();
  test_tokens();
  test_durations();
  return wt_test_finish("test_coord_protocol");
}
