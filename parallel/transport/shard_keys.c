/* shard_keys — the allowed client keys, the ZAP handler and the relayed seal shared by the shard
 * server and the shard relay (shards_internal.h). */
#include "parallel/transport/shards_internal.h"

#include "common/common.h"

#include <stdio.h>
#include <string.h>
#include <zmq.h>

#define S_MAX_ALLOWED 4096 /* client keys a socket remembers: a run's members are far fewer */
#define S_DOMAIN "wantrain shard fetch v1"

void parallel_shard_keyset_init(parallel_shard_keyset *ks) {
  pthread_mutex_init(&ks->mu, NULL);
  ks->keys = wt_xcalloc(S_MAX_ALLOWED, 32);
  ks->n = 0;
}

void parallel_shard_keyset_free(parallel_shard_keyset *ks) {
  pthread_mutex_destroy(&ks->mu);
  free(ks->keys);
  ks->keys = NULL, ks->n = 0;
}

int parallel_shard_keyset_has(parallel_shard_keyset *ks, const uint8_t key[32]) {
  pthread_mutex_lock(&ks->mu);
  int ok = 0;
  for (int i = 0; i < ks->n && !ok; i++) ok = !memcmp(ks->keys[i], key, 32);
  pthread_mutex_unlock(&ks->mu);
  return ok;
}

int parallel_shard_keyset_add(parallel_shard_keyset *ks, const char *public_z85) {
  uint8_t k[32];
  if (!public_z85 || strlen(public_z85) != 40 || !zmq_z85_decode(k, public_z85))
    return wt_fail(WT_EINVAL, "%.60s is not a Z85 public key", public_z85 ? public_z85 : "(null)");
  if (parallel_shard_keyset_has(ks, k)) return WT_OK;
  pthread_mutex_lock(&ks->mu);
  if (ks->n == S_MAX_ALLOWED) memmove(ks->keys, ks->keys + 1, 32 * (S_MAX_ALLOWED - 1)), ks->n--;
  memcpy(ks->keys[ks->n++], k, 32);
  pthread_mutex_unlock(&ks->mu);
  return WT_OK;
}

/* One ZAP request: version, request id, domain, address, identity, mechanism, then the CURVE
 * client key; frames beyond those are drained. */
int parallel_shard_zap_answer(void *zap, parallel_shard_keyset *ks) {
  zmq_msg_t part[8];
  int n = 0, more = 1;
  while (more && n < 8) {
    zmq_msg_init(&part[n]);
    if (zmq_msg_recv(&part[n], zap, 0) < 0) {
      zmq_msg_close(&part[n]);
      break;
    }
    more = zmq_msg_more(&part[n]);
    n++;
  }
  while (more) {
    zmq_msg_t x;
    zmq_msg_init(&x);
    more = zmq_msg_recv(&x, zap, 0) >= 0 && zmq_msg_more(&x);
    zmq_msg_close(&x);
  }
  int ok = n == 7 && zmq_msg_size(&part[6]) == 32 && zmq_msg_size(&part[5]) == 5 &&
           !memcmp(zmq_msg_data(&part[5]), "CURVE", 5) &&
           parallel_shard_keyset_has(ks, zmq_msg_data(&part[6]));
  char user[41] = "";
  if (ok) zmq_z85_encode(user, zmq_msg_data(&part[6]), 32);
  zmq_send(zap, "1.0", 3, ZMQ_SNDMORE);
  if (n >= 2)
    zmq_send(zap, zmq_msg_data(&part[1]), zmq_msg_size(&part[1]), ZMQ_SNDMORE);
  else
    zmq_send(zap, "", 0, ZMQ_SNDMORE);
  zmq_send(zap, ok ? "200" : "400", 3, ZMQ_SNDMORE);
  zmq_send(zap, ok ? "OK" : "key not allowed", ok ? 2 : 15, ZMQ_SNDMORE);
  zmq_send(zap, user, strlen(user), ZMQ_SNDMORE);
  zmq_send(zap, "", 0, 0);
  for (int i = 0; i < n; i++) zmq_msg_close(&part[i]);
  return ok;
}

/* Refusals by the ZAP handler (ZMQ_EVENT_HANDSHAKE_FAILED_AUTH) are counted where it answers,
 * so the monitor listens for the other two kinds only. */
void *parallel_shard_monitor_open(void *ctx, void *sock, const char *name) {
  char ep[128];
  snprintf(ep, sizeof ep, "inproc://%.100s", name);
  if (zmq_socket_monitor(sock, ep,
                         ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                             ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL) != 0)
    return NULL;
  void *mon = zmq_socket(ctx, ZMQ_PAIR);
  int linger = 0;
  zmq_setsockopt(mon, ZMQ_LINGER, &linger, sizeof linger);
  if (zmq_connect(mon, ep) != 0) {
    zmq_close(mon);
    return NULL;
  }
  return mon;
}

int parallel_shard_monitor_refused(void *monitor) {
  zmq_msg_t event, address;
  zmq_msg_init(&event), zmq_msg_init(&address);
  int ok = zmq_msg_recv(&event, monitor, ZMQ_DONTWAIT) >= 6 && zmq_msg_more(&event) &&
           zmq_msg_recv(&address, monitor, 0) >= 0;
  uint16_t id = 0;
  if (ok) memcpy(&id, zmq_msg_data(&event), 2);
  zmq_msg_close(&event), zmq_msg_close(&address);
  return ok &&
         (id == ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL || id == ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL);
}

/* The client is the crypto_kx client ("rank 0"), the holder the server: each direction gets its
 * own base key, and the fetch's random makes the session keys of this fetch only. ChaCha20-
 * Poly1305 on both sides (no caps exchange: a shard is small next to the links' traffic). */
int parallel_shard_seal_new(parallel_shard_seal *s, int is_client, const uint8_t self_pk[32],
                            const uint8_t self_sk[32], const uint8_t other_pk[32],
                            const uint8_t random[32]) {
  memset(s, 0, sizeof *s);
  uint8_t rx[32], tx[32];
  if (parallel_zmq_aead_init() != 0 ||
      parallel_zmq_aead_base_keys(rx, tx, is_client ? 0 : 1, is_client ? 1 : 0, self_pk, self_sk,
                                  other_pk) != 0)
    return -1;
  /* the fetch's random under a domain of its own: no shard key is ever a data link's */
  uint8_t r[32];
  crypto_generichash_state st;
  crypto_generichash_init(&st, NULL, 0, sizeof r);
  crypto_generichash_update(&st, (const uint8_t *)S_DOMAIN, sizeof S_DOMAIN - 1);
  crypto_generichash_update(&st, random, 32);
  crypto_generichash_final(&st, r, sizeof r);
  const uint8_t *to_holder = is_client ? tx : rx, *to_client = is_client ? rx : tx;
  int rc = parallel_zmq_aead_session(&s->to_holder, to_holder, r, r, 0, 0) |
           parallel_zmq_aead_session(&s->to_client, to_client, r, r, 0, 0);
  sodium_memzero(rx, 32), sodium_memzero(tx, 32);
  if (rc != 0) parallel_shard_seal_free(s);
  return rc ? -1 : 0;
}

void parallel_shard_seal_free(parallel_shard_seal *s) {
  parallel_zmq_aead_free(&s->to_holder);
  parallel_zmq_aead_free(&s->to_client);
}
