/* shard_relay — where a holder that accepts no inbound connection (behind NAT or a firewall) is
 * reached for its checkpoint shards (shards.h). One CURVE ROUTER, bound where every peer can
 * connect (the coordinator's host): holders and fetchers both connect out to it, and it passes
 * each message on to the peer it names.
 *
 * Wire (docs/protocol.md "Shards through a relay"), every part after the first from the peer's
 * DEALER: a holder says hello, [""], every 2 s, so the relay knows its connection. A fetch sends
 * [to][payload], `to` the holder's 32-byte public key; the holder gets [from][return][payload],
 * `from` the client's key as its CURVE handshake proved it and `return` an opaque name of the
 * client's connection, and answers [from][return][payload'], which the client gets as
 * [holder][payload'] (one peer may fetch on several connections at once and hold shards too:
 * replies go to the connection that asked). A request for a holder that is not connected comes
 * back as [to][""] (empty payload: "not here").
 *
 * What the relay can do: it sees who talks to whom, the sizes and the timing; it cannot read or
 * change a payload unnoticed (the fetch seals them end to end, shards_internal.h); it can drop or
 * delay them, which the fetch meets as its deadline. Only keys it was told to allow complete
 * the handshake (its ZAP handler refuses the rest): a stranger connecting gets nothing.
 *
 *   parallel_shard_relay *r = parallel_shard_relay_new("tcp://203.0.113.7:*", pub, sec);
 *   parallel_shard_relay_allow(r, peer_key);          // each member, as it registers
 *   ... holders: parallel_shard_server_relay(srv, parallel_shard_relay_endpoint(r), pub);
 *   parallel_shard_relay_destroy(&r);
 */
#ifndef WT_PARALLEL_SHARD_RELAY_H
#define WT_PARALLEL_SHARD_RELAY_H

#include <stdint.h>

typedef struct parallel_shard_relay parallel_shard_relay;

/* Binds the relay at `bind` (tcp://HOST:* picks a port) with the key pair public_z85 /
 * secret_z85 and starts its thread. Returns NULL with wt_last_error() set (WT_EINVAL: a bad key;
 * WT_EIO: the bind failed). */
parallel_shard_relay *parallel_shard_relay_new(const char *bind, const char *public_z85,
                                               const char *secret_z85);

/* The endpoint bound (the port resolved); owned by the relay. */
const char *parallel_shard_relay_endpoint(const parallel_shard_relay *r);

/* Lets the peer with this public key (Z85) connect from now on. WT_OK or WT_EINVAL. Thread-safe. */
int parallel_shard_relay_allow(parallel_shard_relay *r, const char *public_z85);

typedef struct {
  uint64_t messages, bytes; /* passed on, and their payload bytes */
  uint64_t refused;         /* handshakes of keys not allowed or that fail, malformed messages */
} parallel_shard_relay_stats;

parallel_shard_relay_stats parallel_shard_relay_stats_get(const parallel_shard_relay *r);

/* Stops the thread, closes the socket (messages in flight are dropped); sets *r_p = NULL. */
void parallel_shard_relay_destroy(parallel_shard_relay **r_p);

#endif
