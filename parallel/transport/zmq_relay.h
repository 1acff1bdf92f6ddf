/* zmq_relay — inboxes for ranks that accept no inbound connection (behind NAT or a firewall),
 * so that two such ranks can still exchange messages: each inbox is a PULL the senders connect
 * to and a PUSH its owner connects to, both bound here, and one thread forwards whole messages
 * from the first to the second. The ZeroMQ transport (zmq.h, cfg.relay_in / relay_out) uses
 * them for the links between two unreachable ranks.
 *
 * A relay never opens what it forwards: the messages are sealed end-to-end by their two ranks
 * (zmq_aead.h), under keys derived from the ranks' own key pairs, which the relay does not
 * have. It sees the headers (run id, epoch, source, tag, sizes), the sealed bytes and their
 * timing; it can drop or delay messages, which the receiver notices as a deadline, and any
 * change to a message makes it fail to open (docs/protocol.md "Reachability and relays").
 *
 * Contract:
 *  - new binds 2 × n sockets on tcp://host, at ports in [port_min, port_max] (0, 0 = ephemeral
 *    ports), and starts the thread; destroy stops it and closes every socket.
 *  - Each inbox forwards in order (per sender) and only while its owner is connected: a full
 *    outlet stops reading its inbox, so senders feel their receiver's pace, not a relay queue.
 *  - Frames larger than the transport's largest are refused by ZeroMQ (the connection drops).
 *
 * Usage (the coordinator, per epoch with unreachable members):
 *   parallel_zmq_relay *r = parallel_zmq_relay_new("203.0.113.7", n, 0, 0);
 *   if (!r) fail(wt_last_error());
 *   cfg.relay_in[k] = parallel_zmq_relay_in(r, k); cfg.relay_out[k] = parallel_zmq_relay_out(r, k);
 *   ...
 *   parallel_zmq_relay_destroy(&r);
 */
#ifndef WT_PARALLEL_ZMQ_RELAY_H
#define WT_PARALLEL_ZMQ_RELAY_H

#include <stdint.h>

typedef struct parallel_zmq_relay parallel_zmq_relay;

/* n inboxes (1..1024) on host (an address, no port). Returns NULL with wt_last_error() set:
 * WT_EINVAL for a bad n or port range, WT_EIO when a socket cannot bind (which port, why). */
parallel_zmq_relay *parallel_zmq_relay_new(const char *host, int n, int port_min, int port_max);

/* Inbox k's two endpoints ("tcp://host:port", owned by the relay): where senders to its owner
 * connect (in) and where its owner connects (out). NULL for k out of range. */
const char *parallel_zmq_relay_in(const parallel_zmq_relay *r, int k);
const char *parallel_zmq_relay_out(const parallel_zmq_relay *r, int k);

typedef struct {
  uint64_t messages, bytes; /* forwarded whole messages, and their bytes (every frame) */
} parallel_zmq_relay_stats;

/* What the relay forwarded since new, over all inboxes (any thread). */
parallel_zmq_relay_stats parallel_zmq_relay_stats_get(const parallel_zmq_relay *r);

/* Stops the thread, closes the sockets (undelivered messages are dropped), frees; sets *r_p =
 * NULL. */
void parallel_zmq_relay_destroy(parallel_zmq_relay **r_p);

#endif
