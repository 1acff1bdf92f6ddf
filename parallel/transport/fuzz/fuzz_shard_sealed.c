/* fuzz_shard_sealed — libFuzzer target for the two openings of a shard message that crossed the
 * shard relay (parallel/transport/shards.c; the seal's layout in shards_internal.h): the holder
 * opening a client's sealed request, then answering what opened, and the client opening a
 * holder's sealed reply. The first input byte picks the path (bit 0: reply, else request) and
 * whether the rest is sealed here first under the true keys (bit 1: so the fuzzer reaches what
 * lies behind the tag) or passed on raw; bit 2 names the wrong holder in a reply. Raw input must
 * never open, and whatever opens must yield a bounded head and data that account for every byte.
 * Includes shards.c for its static openers; seeds cover each path.
 *
 * fuzz-sources: parallel/transport/shard_keys.c parallel/transport/zmq_aead.c common/common.c
 * fuzz-libs: -lzmq -lsodium -lcjson -lcrypto -lm -lpthread
 */
#define _GNU_SOURCE /* memmem */
#include "parallel/transport/shards.c"

#include "parallel/transport/fuzz/fuzz_shard_setup.h"

static uint8_t client_pk[32], client_sk[32];
static const uint8_t fetch_random[32] = {7};

static parallel_shard_server *fuzz_holder(void) {
  parallel_shard_server *s = fuzz_server();
  if (!client_pk[0] && !client_pk[1]) {
    if (sodium_init() < 0) abort();
    crypto_box_keypair(client_pk, client_sk);
    crypto_box_keypair(s->pk, s->sk);
  }
  return s;
}

/* The holder's side: [random][counter][tag][sealed request] from the client. */
static void fuzz_request(parallel_shard_server *s, int seal_it, const uint8_t *in, size_t n) {
  size_t bn = seal_it ? PARALLEL_SHARD_REQ_HEAD + n : n;
  uint8_t *buf = malloc(bn ? bn : 1);
  if (seal_it) {
    parallel_shard_seal cs;
    if (parallel_shard_seal_new(&cs, 1, client_pk, client_sk, s->pk, fetch_random) != 0) abort();
    memcpy(buf, fetch_random, 32);
    wt_put_le64(buf + 32, 0);
    memcpy(buf + PARALLEL_SHARD_REQ_HEAD, in, n);
    parallel_zmq_aead_seal(&cs.to_holder, 0, buf, 40, buf + PARALLEL_SHARD_REQ_HEAD, n, buf + 40);
    parallel_shard_seal_free(&cs);
  } else if (n) {
    memcpy(buf, in, n);
  }
  parallel_shard_seal seal;
  uint64_t counter;
  if (s_relay_open(s, client_pk, buf, bn, &seal, &counter) == 0) {
    if (!seal_it) abort(); /* bytes nobody sealed opened */
    s_answer a;
    s_answer_request(s, (const char *)buf + PARALLEL_SHARD_REQ_HEAD, bn - PARALLEL_SHARD_REQ_HEAD,
                     &a);
    fuzz_check_answer(&a);
    s_answer_free(&a);
    parallel_shard_seal_free(&seal);
  }
  free(buf);
}

/* The client's side: [holder key][counter][tag][sealed (head length, head, data)]. */
static void fuzz_reply(parallel_shard_server *s, int seal_it, int wrong_holder, const uint8_t *in,
                       size_t n) {
  s_client c = {.relayed = 1};
  memcpy(c.holder_pk, s->pk, 32);
  if (parallel_shard_seal_new(&c.seal, 1, client_pk, client_sk, s->pk, fetch_random) != 0) abort();
  size_t bn = seal_it ? PARALLEL_SHARD_REP_HEAD + n : n;
  uint8_t *buf = malloc(bn ? bn : 1);
  if (seal_it) {
    parallel_shard_seal hs;
    if (parallel_shard_seal_new(&hs, 0, s->pk, s->sk, client_pk, fetch_random) != 0) abort();
    wt_put_le64(buf, 0);
    memcpy(buf + PARALLEL_SHARD_REP_HEAD, in, n);
    parallel_zmq_aead_seal(&hs.to_client, 0, buf, 8, buf + PARALLEL_SHARD_REP_HEAD, n, buf + 8);
    parallel_shard_seal_free(&hs);
  } else if (n) {
    memcpy(buf, in, n);
  }
  zmq_msg_t part[2];
  uint8_t holder[32];
  memcpy(holder, s->pk, 32);
  holder[0] ^= (uint8_t)wrong_holder;
  zmq_msg_init_size(&part[0], 32), memcpy(zmq_msg_data(&part[0]), holder, 32);
  zmq_msg_init_size(&part[1], bn);
  if (bn) memcpy(zmq_msg_data(&part[1]), buf, bn);
  char *head = NULL;
  void *data = NULL;
  size_t len = 0;
  if (s_open_reply(&c, part, 2, &head, &data, &len) == WT_OK) {
    if (!seal_it || wrong_holder) abort(); /* opened what the holder never sealed */
    if (4 + strlen(head) + len > n) abort();
  }
  free(head), free(data), free(buf);
  zmq_msg_close(&part[0]), zmq_msg_close(&part[1]);
  parallel_shard_seal_free(&c.seal);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  if (n < 1) return 0;
  parallel_shard_server *s = fuzz_holder();
  if (data[0] & 1)
    fuzz_reply(s, (data[0] & 2) != 0, (data[0] & 4) != 0, data + 1, n - 1);
  else
    fuzz_request(s, (data[0] & 2) != 0, data + 1, n - 1);
  return 0;
}
