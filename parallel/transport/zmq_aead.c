/* zmq_aead — keys and seal of a sealed ZeroMQ link (construction in zmq_aead.h). */
#include "parallel/transport/zmq_aead.h"

#include "common/bytes.h" // defines: little-endian field access
#include "parallel/transport/zmq_protocol.h"

#include <openssl/evp.h>
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

void parallel_zmq_aead_free(parallel_zmq_aead *a) {
  EVP_CIPHER_CTX_free(a->ctx);
  sodium_memzero(a, sizeof *a);
}

int parallel_zmq_aead_session(parallel_zmq_aead *a, const uint8_t base[32],
                              const uint8_t sender_random[32], const uint8_t receiver_random[32],
                              uint8_t sender_caps, uint8_t receiver_caps) {
  parallel_zmq_aead_free(a);
  a->use_aes = (sender_caps & receiver_caps & PARALLEL_ZMQ_CAP_AES) != 0;
  uint8_t cipher = (uint8_t)a->use_aes;
  crypto_generichash_state st;
  crypto_generichash_init(&st, base, 32, sizeof a->key);
  crypto_generichash_update(&st, (const uint8_t *)S_DOMAIN, sizeof S_DOMAIN - 1);
  crypto_generichash_update(&st, &cipher, 1);
  crypto_generichash_update(&st, sender_random, PARALLEL_ZMQ_RANDOM_BYTES);
  crypto_generichash_update(&st, receiver_random, PARALLEL_ZMQ_RANDOM_BYTES);
  crypto_generichash_final(&st, a->key, sizeof a->key);
  EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
  /* The key schedule once per session; each message sets only its nonce. Encrypt and decrypt
   * contexts are set up alike: a direction only ever does one of them. */
  const EVP_CIPHER *c = a->use_aes ? EVP_aes_256_gcm() : EVP_chacha20_poly1305();
  if (!ctx || EVP_CipherInit_ex(ctx, c, NULL, a->key, NULL, 1) != 1) {
    EVP_CIPHER_CTX_free(ctx);
    sodium_memzero(a, sizeof *a);
    return -1;
  }
  a->ctx = ctx;
  return 0;
}

/* One AEAD pass: enc = 1 seals in[0, nin) into out (writes tag), 0 opens (checks tag). Returns
 * 0 or -1. */
static int s_aead(const parallel_zmq_aead *a, int enc, uint64_t counter, const uint8_t *ad,
                  size_t adlen, const parallel_zmq_span *in, int nin, uint8_t *out, uint8_t *tag) {
  EVP_CIPHER_CTX *ctx = a->ctx;
  uint8_t nonce[12] = {0};
  wt_put_le64(nonce, counter);
  int len = 0;
  if (!ctx || EVP_CipherInit_ex(ctx, NULL, NULL, NULL, nonce, enc) != 1) return -1;
  if (!enc && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_SET_TAG, PARALLEL_ZMQ_TAG_BYTES, tag) != 1)
    return -1;
  if (EVP_CipherUpdate(ctx, NULL, &len, ad, (int)adlen) != 1) return -1;
  size_t done = 0;
  for (int i = 0; i < nin; i++) {
    if (in[i].bytes > (size_t)INT32_MAX) return -1;
    if (in[i].bytes && EVP_CipherUpdate(ctx, out + done, &len, in[i].data, (int)in[i].bytes) != 1)
      return -1;
    done += in[i].bytes;
  }
  if (EVP_CipherFinal_ex(ctx, out + done, &len) != 1) return -1; /* writes nothing for an AEAD */
  if (enc && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_AEAD_GET_TAG, PARALLEL_ZMQ_TAG_BYTES, tag) != 1)
    return -1;
  return 0;
}

void parallel_zmq_aead_seal_spans(const parallel_zmq_aead *a, uint64_t counter, const uint8_t *ad,
                                  size_t adlen, const parallel_zmq_span *in, int nin, uint8_t *out,
                                  uint8_t *tag) {
  if (s_aead(a, 1, counter, ad, adlen, in, nin, out, tag) != 0)
    memset(tag, 0, PARALLEL_ZMQ_TAG_BYTES); /* a tag that opens nothing: the peer refuses it */
}

void parallel_zmq_aead_seal(const parallel_zmq_aead *a, uint64_t counter, const uint8_t *ad,
                            size_t adlen, uint8_t *buf, size_t n, uint8_t *tag) {
  parallel_zmq_span in = {buf, n};
  parallel_zmq_aead_seal_spans(a, counter, ad, adlen, &in, 1, buf, tag);
}

int parallel_zmq_aead_open(const parallel_zmq_aead *a, uint64_t counter, const uint8_t *ad,
                           size_t adlen, uint8_t *buf, size_t n, const uint8_t *tag) {
  uint8_t t[PARALLEL_ZMQ_TAG_BYTES];
  memcpy(t, tag, sizeof t);
  parallel_zmq_span in = {buf, n};
  return s_aead(a, 0, counter, ad, adlen, &in, 1, buf, t);
}

void parallel_zmq_aead_hello_mac(uint8_t mac[16], const uint8_t base[32], const uint8_t *header,
                                 size_t hlen, const uint8_t *body, size_t n) {
  crypto_generichash_state st;
  crypto_generichash_init(&st, base, 32, 16);
  crypto_generichash_update(&st, header, hlen);
  crypto_generichash_update(&st, body, n);
  crypto_generichash_final(&st, mac, 16);
}
