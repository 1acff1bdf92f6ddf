/* zmq_aead — keys and seal of a sealed ZeroMQ link (construction in zmq_aead.h). */
#include "parallel/transport/zmq_aead.h"

#include "common/bytes.h" // defines: little-endian field access
#include "parallel/transport/zmq_protocol.h"

#include <string.h>

#define S_DOMAIN "wantrain zmq v2 session key"

int parallel_zmq_aead_init(void) {
  return sodium_init() < 0 ? -1 : 0;
}

uint8_t parallel_zmq_aead_caps(void) {
  return crypto_aead_aes256gcm_is_available() ? PARALLEL_ZMQ_CAP_AES : 0;
}

int parallel_zmq_aead_base_keys(uint8_t rx[32], uint8_t tx[32], int self, int peer,
                                const uint8_t self_pk[32], const uint8_t self_sk[32],
                                const uint8_t peer_pk[32]) {
  if (self < peer) return crypto_kx_client_session_keys(rx, tx, self_pk, self_sk, peer_pk);
  return crypto_kx_server_session_keys(rx, tx, self_pk, self_sk, peer_pk);
}

void parallel_zmq_aead_session(parallel_zmq_aead *a, const uint8_t base[32],
                               const uint8_t sender_random[32], const uint8_t receiver_random[32],
                               uint8_t sender_caps, uint8_t receiver_caps) {
  memset(a, 0, sizeof *a);
  a->use_aes = (sender_caps & receiver_caps & PARALLEL_ZMQ_CAP_AES) != 0;
  uint8_t cipher = (uint8_t)a->use_aes;
  crypto_generichash_state st;
  crypto_generichash_init(&st, base, 32, sizeof a->key);
  crypto_generichash_update(&st, (const uint8_t *)S_DOMAIN, sizeof S_DOMAIN - 1);
  crypto_generichash_update(&st, &cipher, 1);
  crypto_generichash_update(&st, sender_random, PARALLEL_ZMQ_RANDOM_BYTES);
  crypto_generichash_update(&st, receiver_random, PARALLEL_ZMQ_RANDOM_BYTES);
  crypto_generichash_final(&st, a->key, sizeof a->key);
  if (a->use_aes) crypto_aead_aes256gcm_beforenm(&a->aes, a->key);
}

/* The counter as a nonce: little-endian in the first 8 bytes, the rest zero. */
static void s_nonce(uint8_t nonce[crypto_aead_xchacha20poly1305_ietf_NPUBBYTES], uint64_t counter) {
  memset(nonce, 0, crypto_aead_xchacha20poly1305_ietf_NPUBBYTES);
  wt_put_le64(nonce, counter);
}

void parallel_zmq_aead_seal(const parallel_zmq_aead *a, uint64_t counter, const uint8_t *ad,
                            size_t adlen, uint8_t *buf, size_t n, uint8_t *tag) {
  uint8_t nonce[crypto_aead_xchacha20poly1305_ietf_NPUBBYTES];
  s_nonce(nonce, counter);
  unsigned long long taglen = 0;
  if (a->use_aes)
    crypto_aead_aes256gcm_encrypt_detached_afternm(buf, tag, &taglen, buf, n, ad, adlen, NULL,
                                                   nonce, &a->aes);
  else
    crypto_aead_xchacha20poly1305_ietf_encrypt_detached(buf, tag, &taglen, buf, n, ad, adlen, NULL,
                                                        nonce, a->key);
}

int parallel_zmq_aead_open(const parallel_zmq_aead *a, uint64_t counter, const uint8_t *ad,
                           size_t adlen, uint8_t *buf, size_t n, const uint8_t *tag) {
  uint8_t nonce[crypto_aead_xchacha20poly1305_ietf_NPUBBYTES];
  s_nonce(nonce, counter);
  if (a->use_aes)
    return crypto_aead_aes256gcm_decrypt_detached_afternm(buf, NULL, buf, n, tag, ad, adlen, nonce,
                                                          &a->aes) == 0
               ? 0
               : -1;
  return crypto_aead_xchacha20poly1305_ietf_decrypt_detached(buf, NULL, buf, n, tag, ad, adlen,
                                                             nonce, a->key) == 0
             ? 0
             : -1;
}

void parallel_zmq_aead_hello_mac(uint8_t mac[16], const uint8_t base[32], const uint8_t *header,
                                 size_t hlen, const uint8_t *body, size_t n) {
  crypto_generichash_state st;
  crypto_generichash_init(&st, base, 32, 16);
  crypto_generichash_update(&st, header, hlen);
  crypto_generichash_update(&st, body, n);
  crypto_generichash_final(&st, mac, 16);
}
