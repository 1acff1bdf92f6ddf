/* fuzz_shard_relay — libFuzzer target for the shard relay's routing of what peers send it
 * (parallel/transport/shard_relay.c: hellos, requests, replies, and everything else). The input
 * is a sequence of messages, each: a byte choosing the sender (one of four keys, or a connection
 * no handshake authenticated), a part count, then each part as a length byte and its bytes (a
 * length byte of 0xF0 or more stands for one of the four keys, so routes match). Every message
 * goes through the relay's own routing code with a ROUTER that reaches no one; the tables must
 * stay within their bounds and a message from no key must never be routed. Includes
 * shard_relay.c for its static routing; seeds are a hello, a request and a reply.
 *
 * fuzz-sources: parallel/transport/shard_keys.c parallel/transport/zmq_aead.c common/common.c
 * fuzz-libs: -lzmq -lsodium -lcrypto -lm -lpthread
 */
#include "parallel/transport/shard_relay.c"

static uint8_t keys[4][32];

static parallel_shard_relay *fuzz_relay(void) {
  static parallel_shard_relay r;
  if (!r.ctx) {
    for (int i = 0; i < 4; i++) memset(keys[i], 0x11 * (i + 1), 32);
    r.holders.r = wt_xcalloc(S_MAX_ROUTES, sizeof(s_route));
    r.clients.r = wt_xcalloc(S_MAX_ROUTES, sizeof(s_route));
    r.ctx = zmq_ctx_new();
    r.router = zmq_socket(r.ctx, ZMQ_ROUTER);
    int one = 1;
    zmq_setsockopt(r.router, ZMQ_ROUTER_MANDATORY, &one, sizeof one);
  }
  return &r;
}

static void fuzz_check_table(const s_table *t) {
  if (t->n < 0 || t->n > S_MAX_ROUTES) abort();
  for (int i = 0; i < t->n; i++)
    if (t->r[i].id_len > sizeof t->r[i].id) abort();
}

/* One message from the input at *p; returns 0 when the input is used up. */
static int fuzz_message(parallel_shard_relay *r, const uint8_t **p, const uint8_t *end) {
  if (end - *p < 2) return 0;
  const int sender = **p % 5, parts = 1 + (*p)[1] % 6;
  *p += 2;
  zmq_msg_t part[6];
  int n = 0;
  while (n < parts && *p < end) {
    const uint8_t len_byte = *(*p)++;
    const uint8_t *bytes = len_byte >= 0xF0 ? keys[len_byte & 3] : *p;
    size_t len = len_byte >= 0xF0 ? 32 : len_byte;
    if (len_byte < 0xF0) {
      if (len > (size_t)(end - *p)) len = (size_t)(end - *p);
      *p += len;
    }
    zmq_msg_init_size(&part[n], len);
    if (len) memcpy(zmq_msg_data(&part[n]), bytes, len);
    n++;
  }
  const uint64_t refused = r->refused;
  const int holders = r->holders.n;
  s_route_message(r, sender < 4 ? keys[sender] : NULL, part, n > 4 ? 5 : n);
  if (sender == 4 && (r->refused != refused + 1 || r->holders.n != holders)) abort();
  fuzz_check_table(&r->holders);
  fuzz_check_table(&r->clients);
  for (int i = 0; i < n; i++) zmq_msg_close(&part[i]);
  return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t n) {
  parallel_shard_relay *r = fuzz_relay();
  r->holders.n = r->clients.n = 0; /* each input starts with no routes */
  const uint8_t *p = data, *end = data + n;
  while (fuzz_message(r, &p, end)) {
  }
  return 0;
}
