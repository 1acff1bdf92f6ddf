/* test_zmq_aead — the seal of a sealed link (parallel/transport/zmq_aead.h) on its own: the kx
 * base keys of two ranks pair up (one's tx is the other's rx), both ciphers (AES-256-GCM, and
 * ChaCha20-Poly1305 when either end lacks AES-NI) open in place what they sealed, and a flipped
 * bit, another counter, other associated data, another session random or the other
 * direction's key does not open. */
#include "parallel/transport/zmq_aead.h"
#include "parallel/transport/zmq_protocol.h"

#include "common/common.h"
#include "common/testing.h"

#include <string.h>

static void s_roundtrip(uint8_t caps_a, uint8_t caps_b, const char *what) {
  uint8_t pk[2][32], sk[2][32], rx[2][32], tx[2][32], ra[32], rb[32], rc[32];
  for (int r = 0; r < 2; r++) crypto_kx_keypair(pk[r], sk[r]);
  WT_TEST_REQUIRE(parallel_zmq_aead_base_keys(rx[0], tx[0], 0, 1, pk[0], sk[0], pk[1]) == 0 &&
                      parallel_zmq_aead_base_keys(rx[1], tx[1], 1, 0, pk[1], sk[1], pk[0]) == 0,
                  "base keys");
  WT_TEST_ASSERT(memcmp(tx[0], rx[1], 32) == 0 && memcmp(tx[1], rx[0], 32) == 0 &&
                     memcmp(tx[0], tx[1], 32) != 0,
                 "one key per direction, shared by its two ends");
  randombytes_buf(ra, 32);
  randombytes_buf(rb, 32);
  randombytes_buf(rc, 32);
  parallel_zmq_aead seal = {0}, open = {0}, other = {0}, back = {0};
  WT_TEST_REQUIRE(parallel_zmq_aead_session(&seal, tx[0], ra, rb, caps_a, caps_b) == 0 &&
                      parallel_zmq_aead_session(&open, rx[1], ra, rb, caps_b, caps_a) == 0 &&
                      parallel_zmq_aead_session(&other, rx[1], rc, rb, caps_b, caps_a) == 0 &&
                      parallel_zmq_aead_session(&back, tx[1], rb, ra, caps_b, caps_a) == 0,
                  "sessions");
  WT_TEST_ASSERT(seal.use_aes == open.use_aes, "%s: both ends pick the same cipher", what);
  uint8_t ad[PARALLEL_ZMQ_HEADER_BYTES], buf[1000], ref[1000], tag[16];
  for (size_t i = 0; i < sizeof ad; i++) ad[i] = (uint8_t)i;
  for (size_t i = 0; i < sizeof buf; i++) ref[i] = (uint8_t)(i * 31 + 7);
  memcpy(buf, ref, sizeof buf);
  parallel_zmq_aead_seal(&seal, 42, ad, sizeof ad, buf, sizeof buf, tag);
  WT_TEST_ASSERT(memcmp(buf, ref, sizeof buf) != 0, "%s: sealed in place", what);
  uint8_t keep[1000];
  memcpy(keep, buf, sizeof buf);
  WT_TEST_ASSERT(parallel_zmq_aead_open(&open, 42, ad, sizeof ad, buf, sizeof buf, tag) == 0 &&
                     memcmp(buf, ref, sizeof buf) == 0,
                 "%s: opens in place to the plaintext", what);
  struct {
    const char *why;
    const parallel_zmq_aead *key;
    uint64_t counter;
    int flip_ad, flip_buf, flip_tag;
  } bad[] = {{"another counter", &open, 43, 0, 0, 0},
             {"other associated data", &open, 42, 1, 0, 0},
             {"a flipped payload bit", &open, 42, 0, 1, 0},
             {"a flipped tag bit", &open, 42, 0, 0, 1},
             {"another session random", &other, 42, 0, 0, 0},
             {"the other direction's key", &back, 42, 0, 0, 0}};
  for (size_t k = 0; k < WT_ARRAY_LEN(bad); k++) {
    memcpy(buf, keep, sizeof buf);
    uint8_t t2[16];
    memcpy(t2, tag, 16);
    ad[3] ^= (uint8_t)bad[k].flip_ad;
    buf[500] ^= (uint8_t)(bad[k].flip_buf << 2);
    t2[0] ^= (uint8_t)bad[k].flip_tag;
    WT_TEST_ASSERT(
        parallel_zmq_aead_open(bad[k].key, bad[k].counter, ad, sizeof ad, buf, sizeof buf, t2) != 0,
        "%s: %s does not open", what, bad[k].why);
    ad[3] ^= (uint8_t)bad[k].flip_ad;
  }
  /* An empty payload: the tag seals the header alone. */
  parallel_zmq_aead_seal(&seal, 7, ad, sizeof ad, NULL, 0, tag);
  WT_TEST_ASSERT(parallel_zmq_aead_open(&open, 7, ad, sizeof ad, NULL, 0, tag) == 0, "%s: empty",
                 what);
  ad[40] ^= 1;
  WT_TEST_ASSERT(parallel_zmq_aead_open(&open, 7, ad, sizeof ad, NULL, 0, tag) != 0,
                 "%s: empty with a changed header does not open", what);
  parallel_zmq_aead_free(&seal);
  parallel_zmq_aead_free(&open);
  parallel_zmq_aead_free(&other);
  parallel_zmq_aead_free(&back);
}

int main(void) {
  WT_TEST_REQUIRE(parallel_zmq_aead_init() == 0, "libsodium");
  s_roundtrip(PARALLEL_ZMQ_CAP_AES, PARALLEL_ZMQ_CAP_AES, "AES-256-GCM");
  s_roundtrip(PARALLEL_ZMQ_CAP_AES, 0, "ChaCha20-Poly1305");
  if (wt_test_failures) fprintf(stderr, "test_zmq_aead: %d failure(s)\n", wt_test_failures);
  return wt_test_failures ? 1 : 0;
}
