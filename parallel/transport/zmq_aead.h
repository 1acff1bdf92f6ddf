/* zmq_aead — the seal of a sealed ZeroMQ link (docs/protocol.md, "Sealed links"): the keys of
 * one link and direction, and the AEAD that seals payload parts under them. Built only from
 * documented libsodium constructions, nothing hand-made:
 *
 *  - base keys: crypto_kx_client_session_keys / crypto_kx_server_session_keys over the two
 *    ranks' long-term X25519 key pairs (the CURVE keys, whose secret is an X25519 scalar); the
 *    lower rank is the kx client. Each side gets (rx, tx) with one side's tx = the other's rx,
 *    so each direction has its own base key. Only the holders of the two secret keys know it.
 *  - hello MAC: crypto_generichash (keyed BLAKE2b, 16 bytes) under the sender's base tx key over
 *    the hello's header and body, so a hello cannot be forged, only replayed.
 *  - session key of direction a → b: crypto_generichash (keyed BLAKE2b-256) under the base key
 *    over a domain string, the cipher id and both processes' 32-byte session randoms (the
 *    sender's, then the receiver's), so a key never outlives either process and is never
 *    derived twice.
 *  - seal: OpenSSL's EVP AES-256-GCM when both ends have AES-NI and PCLMUL
 *    (crypto_aead_aes256gcm_is_available()), else its ChaCha20-Poly1305 (RFC 8439); a 16-byte
 *    tag kept apart, in place, the 56-byte header as associated data, and the 64-bit counter
 *    (little-endian, zero-padded to the 12-byte nonce) as the nonce. OpenSSL rather than
 *    libsodium's AEADs because it is faster here: 4.2–4.5 GB/s for AES-256-GCM and 3.7 GB/s for
 *    ChaCha20-Poly1305 on one core of this project's machine, against 1.6–1.7 (AES-256-GCM)
 *    and 1.3–1.5 (XChaCha20-Poly1305) for libsodium 1.0.18 (docs/performance.md).
 * Internal to parallel/transport and its tests. */
#ifndef WT_PARALLEL_ZMQ_AEAD_H
#define WT_PARALLEL_ZMQ_AEAD_H

#include <sodium.h> // defines: randombytes_buf, sodium_memcmp for the transport
#include <stddef.h>
#include <stdint.h>

#define PARALLEL_ZMQ_RANDOM_BYTES 32
#define PARALLEL_ZMQ_HELLO_BYTES (2 * PARALLEL_ZMQ_RANDOM_BYTES + 1) /* random, echo, caps */
#define PARALLEL_ZMQ_CAP_AES 0x01 /* caps bit: this process can seal with AES-256-GCM */

/* The session key of one direction and its cipher context. Zeroed memory is an empty one; one
 * thread at a time may use it. */
typedef struct {
  void *ctx; /* EVP_CIPHER_CTX, keyed */
  uint8_t key[32];
  int use_aes; /* 1: AES-256-GCM; 0: ChaCha20-Poly1305 */
} parallel_zmq_aead;

/* Initialises libsodium (idempotent). Returns 0, or -1 when it cannot start. */
int parallel_zmq_aead_init(void);

/* This process's caps byte (PARALLEL_ZMQ_CAP_AES when the CPU has AES-NI and PCLMUL). */
uint8_t parallel_zmq_aead_caps(void);

/* The base keys between rank `self` and rank `peer` (self != peer) from self's X25519 key pair
 * and the peer's public key: rx for peer → self, tx for self → peer. Returns 0, or -1 when the
 * peer's key is not a usable X25519 point. */
int parallel_zmq_aead_base_keys(uint8_t rx[32], uint8_t tx[32], int self, int peer,
                                const uint8_t self_pk[32], const uint8_t self_sk[32],
                                const uint8_t peer_pk[32]);

/* Makes *a (empty, or made before: it is replaced) the session key of direction sender →
 * receiver under base key `base`, from the two session randoms; AES-256-GCM iff both caps have
 * PARALLEL_ZMQ_CAP_AES. Returns 0, or -1 when OpenSSL cannot make the context (*a is then
 * empty and seals nothing that opens). */
int parallel_zmq_aead_session(parallel_zmq_aead *a, const uint8_t base[32],
                              const uint8_t sender_random[32], const uint8_t receiver_random[32],
                              uint8_t sender_caps, uint8_t receiver_caps);

/* Frees a's context and wipes its key; *a is empty after. */
void parallel_zmq_aead_free(parallel_zmq_aead *a);

/* Seals buf[0, n) in place with nonce `counter` and associated data ad[0, adlen); the tag goes
 * to tag[0, PARALLEL_ZMQ_TAG_BYTES). */
void parallel_zmq_aead_seal(const parallel_zmq_aead *a, uint64_t counter, const uint8_t *ad,
                            size_t adlen, uint8_t *buf, size_t n, uint8_t *tag);

/* A piece of plaintext to seal. */
typedef struct {
  const uint8_t *data;
  size_t bytes;
} parallel_zmq_span;

/* Seals the concatenation of in[0, nin) into out (as long as their sum; out may be in[0].data
 * when nin is 1), as parallel_zmq_aead_seal would in place: the cipher reads the caller's
 * bytes and writes the ciphertext, one pass, no copy before. */
void parallel_zmq_aead_seal_spans(const parallel_zmq_aead *a, uint64_t counter, const uint8_t *ad,
                                  size_t adlen, const parallel_zmq_span *in, int nin, uint8_t *out,
                                  uint8_t *tag);

/* Opens buf[0, n) in place. Returns 0 when tag authenticates it (buf then holds the plaintext),
 * -1 otherwise (buf's contents are then unspecified). */
int parallel_zmq_aead_open(const parallel_zmq_aead *a, uint64_t counter, const uint8_t *ad,
                           size_t adlen, uint8_t *buf, size_t n, const uint8_t *tag);

/* The 16-byte MAC of a hello: keyed BLAKE2b under `base` over header[0, hlen) || body[0, n). */
void parallel_zmq_aead_hello_mac(uint8_t mac[16], const uint8_t base[32], const uint8_t *header,
                                 size_t hlen, const uint8_t *body, size_t n);

#endif
