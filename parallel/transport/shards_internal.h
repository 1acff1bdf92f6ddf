/* shards_internal — what the shard server (shards.c) and the shard relay (shard_relay.c) share:
 * the set of CURVE client keys a socket lets in, and the ZAP handler (RFC 27) that enforces it,
 * and the seal of a shard request or reply that crosses a relay (docs/protocol.md "Shards
 * through a relay"). Internal to parallel/transport and its tests. */
#ifndef WT_PARALLEL_SHARDS_INTERNAL_H
#define WT_PARALLEL_SHARDS_INTERNAL_H

#include "parallel/transport/zmq_aead.h" /* defines: parallel_zmq_aead, the links' seal */

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* ---- allowed keys ---------------------------------------------------------------------------- */

typedef struct {
  pthread_mutex_t mu;
  uint8_t (*keys)[32];
  int n;
} parallel_shard_keyset;

void parallel_shard_keyset_init(parallel_shard_keyset *ks);
void parallel_shard_keyset_free(parallel_shard_keyset *ks);
/* Adds a Z85 public key (the oldest makes room when full). Returns WT_OK or WT_EINVAL. */
int parallel_shard_keyset_add(parallel_shard_keyset *ks, const char *public_z85);
int parallel_shard_keyset_has(parallel_shard_keyset *ks, const uint8_t key[32]);

/* Reads one ZAP request from the REP socket zap and answers it: 200 with the client's key (Z85)
 * as its User-Id for a CURVE client whose key is in ks, 400 for everyone else. Returns 1 when it
 * let the client in, 0 when it refused it. */
int parallel_shard_zap_answer(void *zap, parallel_shard_keyset *ks);

/* ---- failed handshakes ---------------------------------------------------------------------- */

/* A monitor of sock's failed handshakes that no ZAP request counted (bytes that are not ZMTP, a
 * mechanism other than CURVE, a CURVE hello that does not open): a PAIR socket for the owner's
 * poll loop, or NULL (zmq_errno() says why). Each socket monitored needs its own name. */
void *parallel_shard_monitor_open(void *ctx, void *sock, const char *name);

/* Reads one event from the monitor; returns 1 when it was such a failed handshake, else 0. */
int parallel_shard_monitor_refused(void *monitor);

/* ---- the relayed seal ---------------------------------------------------------------------- */

#define PARALLEL_SHARD_KEY_BYTES 32
#define PARALLEL_SHARD_RANDOM_BYTES 32
#define PARALLEL_SHARD_TAG_BYTES 16
/* a request: fetch random, counter (8 bytes, little-endian), tag, sealed JSON */
#define PARALLEL_SHARD_REQ_HEAD (PARALLEL_SHARD_RANDOM_BYTES + 8 + PARALLEL_SHARD_TAG_BYTES)
/* a reply: counter, tag, sealed (head length, 4 bytes LE; JSON head; data) */
#define PARALLEL_SHARD_REP_HEAD (8 + PARALLEL_SHARD_TAG_BYTES)

typedef struct {
  parallel_zmq_aead to_holder, to_client; /* one key per direction */
} parallel_shard_seal;

/* The two session keys between a client and a holder for one fetch (its random). Each side
 * passes its own key pair (binary: 32-byte X25519 public and secret) and the other's public
 * key; is_client says which side this is. Returns 0, or -1 (not a usable key). */
int parallel_shard_seal_new(parallel_shard_seal *s, int is_client, const uint8_t self_pk[32],
                            const uint8_t self_sk[32], const uint8_t other_pk[32],
                            const uint8_t random[32]);
void parallel_shard_seal_free(parallel_shard_seal *s);

#endif
