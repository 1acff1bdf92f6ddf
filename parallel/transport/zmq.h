/* zmq — the ZeroMQ transport: a parallel_transport_ops back end (comm.h) between processes,
 * tcp:// between hosts and ipc:// on one host, every message sealed (encrypted and
 * authenticated) under per-link, per-direction keys derived from the ranks' CURVE key pairs,
 * every wait bounded by a deadline, and optional WAN emulation (per-link latency and bandwidth)
 * in user space. The collectives (collectives.h) run over it unchanged.
 *
 * Shape: each rank binds ONE receiving socket at its own endpoint (a PULL) and connects one
 * sending socket to every peer's endpoint (a PUSH per peer). So every ordered pair (i → j) is
 * one connection with its own FIFO order. A rank that accepts no inbound connection (cfg.reachable)
 * connects out instead: to outboxes that reachable ranks bind for it, and to a relay for the
 * links between two such ranks (zmq_relay.h). The sockets speak plain ZMTP; security lives in the
 * frames (zmq_aead.h, docs/protocol.md "Sealed links"): the two processes of a link exchange
 * session randoms in hellos MAC'd with keys that only the holders of the two ranks' secret keys
 * can compute (crypto_kx over the X25519 CURVE keys), and every payload part is then sealed with
 * AES-256-GCM (or ChaCha20-Poly1305 without AES-NI) under a key of both randoms, a counter as
 * nonce and the header as associated data. A message opens only with the key of the rank its
 * header names, so the receiver knows which rank each message really comes from.
 *
 * Contract (on top of comm.h's):
 *  - send copies the buffer into a per-link queue and returns (on a sealed link with a session
 *    the copy is the seal itself: the cipher reads the caller's bytes and writes the frame;
 *    send_gather does the same for a header and a body apart); a sender thread puts it on the
 *    wire (after its emulated delay), so compute overlaps sending. When the link's queue holds
 *    max_queue_bytes, send blocks (one larger message is always admitted) until the sender thread
 *    drains it or timeout_s passes (WT_ETIMEOUT naming the peer). Once a peer is known to be
 *    gone, send fails with WT_EIO.
 *  - recv returns the oldest message from `peer` with `tag` (per (peer, tag) FIFO; messages for
 *    other tags wait in a per-peer mailbox). It fails within timeout_s with WT_ETIMEOUT, or
 *    earlier with WT_EIO when the peer has said goodbye (its comm was destroyed) or its
 *    connection dropped (its process died): the error names this rank, the peer and its
 *    endpoint, the tag, the current step and what was expected. A peer process that comes back
 *    at its endpoint (a new handshake, after the old connection dropped) is live again.
 *  - recv may be called from one thread at a time per (peer); send from any thread.
 *  - A message that is not well-formed (zmq_protocol.h), carries another run id or epoch or a
 *    length that does not match, does not open under its claimed source's key (forged, altered,
 *    cut short, parts swapped), or repeats or precedes a counter already accepted (replayed,
 *    reordered) is dropped, logged at warn level and counted (parallel_zmq_refused); the
 *    transport goes on. So is a hello that is not MAC'd with a group key, or that brings back an
 *    earlier session's random.
 *  - insecure = 1 turns sealing off (plaintext, no authentication); it logs a warning once per
 *    communicator. It is never chosen silently: without it, missing keys are an error. Both ends
 *    of a link must agree: a plaintext message on a sealed link is refused, and vice versa.
 *
 * Header fields per message: step, micro-batch, tensor id, codec id and kind are taken from the
 * communicator's message context (parallel_zmq_set_context) at send time; the tag is the op's
 * tag. The receiver uses the header's run id, epoch, source and length for checks, the tag for
 * matching, and logs the rest when it refuses a message.
 *
 * WAN emulation (latency_s / bandwidth_Bps given): a message of b bytes to peer j, handed to
 * send at t, starts serialising at s = max(t, when the link's previous message finished
 * serialising) and occupies the link for b/β_j; its bytes leave in parts of at most 256 KiB,
 * part k at s + α_j + (k+1)·part/β_j, so the last byte arrives α_j + b/β_j after s — a pipe of
 * latency α_j and rate β_j with back-to-back messages not paying α twice. time_scale multiplies
 * every emulated duration into wall time (1 = real time; 0.01 emulates a 100 ms link with 1 ms).
 *
 * Usage (each process):
 *   parallel_zmq_config cfg = parallel_zmq_config_default();
 *   cfg.rank = r; cfg.size = p; cfg.endpoints = eps;   // eps[r] may be "tcp://127.0.0.1:*"
 *   cfg.run_id = 42; cfg.timeout_s = 30;
 *   cfg.secret_key = my_sec; cfg.public_key = my_pub; cfg.peer_public_keys = pubs;
 *   parallel_comm *c = parallel_zmq_comm_new(&cfg);    // binds eps[r], connects to the others
 *   if (!c) { fprintf(stderr, "%s\n", wt_last_error()); return 1; }
 *   parallel_allreduce(c, x, n, PARALLEL_OP_SUM);
 *   parallel_comm_destroy(&c);                          // says goodbye to the peers
 * When the peers' ports are not known in advance, bind first and connect later:
 *   parallel_zmq_transport *t = parallel_zmq_transport_new(&cfg);      // binds
 *   publish(parallel_zmq_transport_endpoint(t)); gather(eps);
 *   parallel_comm *c = parallel_zmq_transport_connect(&t, eps);       // takes t
 * With unreachable ranks, the outboxes (transport_outbox) and relay inboxes are gathered too and
 * given to parallel_zmq_transport_connect_routes.
 * parallel_zmq_fork_run() does exactly that for `size` forked processes on loopback (the test
 * and benchmark harness, like parallel_inproc_run for threads).
 */
#ifndef WT_PARALLEL_ZMQ_H
#define WT_PARALLEL_ZMQ_H

#include "parallel/transport/comm.h"
#include "parallel/transport/zmq_protocol.h" // defines: parallel_zmq_kind, the header layout

#include <stddef.h>
#include <stdint.h>

#define PARALLEL_ZMQ_KEY_CHARS 40 /* a Z85-encoded CURVE key; buffers need 41 with the NUL */

typedef struct {
  int rank, size;               /* this process's rank in [0, size), size in [1, 1024] */
  const char *const *endpoints; /* size entries: "tcp://host:port" or "ipc:///path"; the own one
                                 * may use port * (ephemeral; see transport_endpoint) */
  uint64_t run_id;              /* every message carries it; others are refused */
  uint32_t epoch;               /* the assignment version; ditto */
  double timeout_s;             /* deadline of every recv and blocked send (default 60) */
  size_t max_queue_bytes;       /* per-link send queue bound (default 64 MiB) */
  /* Security: Z85 keys (40 chars). secret_key/public_key are this rank's; peer_public_keys has
   * `size` entries (the own entry is ignored). Required unless insecure = 1. */
  const char *secret_key, *public_key;
  const char *const *peer_public_keys;
  int insecure; /* 1: plaintext, no authentication (debugging); warns */
  /* WAN emulation, off when NULL: `size` entries each, the link from this rank to peer j. */
  const double *latency_s;     /* one-way latency α_j in seconds (≥ 0) */
  const double *bandwidth_Bps; /* bandwidth β_j in bytes/s (> 0, or 0 for unlimited) */
  double time_scale;           /* wall seconds per emulated second (default 1) */
  /* Access links (with latency_s / bandwidth_Bps; 0 = unlimited): this rank's uplink and downlink
   * capacity, shared by every message that crosses them, and same_access (`size` entries, or
   * NULL = none shared) marking the peers behind the same access link, whose messages cross
   * neither. */
  double uplink_Bps, downlink_Bps;
  const int *same_access;
  /* Reachability (docs/protocol.md "Reachability and relays"); NULL = every rank accepts
   * inbound connections. reachable[r] = 0 marks a rank behind NAT or a firewall: nobody can
   * connect to it, so every connection of its links starts at it:
   *  - to a reachable rank r: its PUSH connects to r's PULL (endpoints[r]), as between two
   *    reachable ranks; r's PUSH for it binds an outbox (transport_outbox) that its PULL
   *    connects to (parallel_zmq_routes.outboxes);
   *  - to another unreachable rank r: its PUSH connects to r's inbox at a relay, and its PULL
   *    to its own inbox's outlet (parallel_zmq_routes.relay_in / relay_out;
   *    parallel/transport/zmq_relay.h), which forwards sealed frames it cannot open.
   * The endpoints of outboxes and relays are known only once everyone has bound, so they are
   * given at connect (transport_connect_routes). */
  const int *reachable;
  int io_threads; /* ZeroMQ I/O threads (1..16, default 1): sealing runs on the sending
                     thread (or the transport's sender thread) and opening on the transport's
                     receiver thread, so ZeroMQ's threads only move bytes; one keeps up with
                     loopback TCP (docs/protocol.md) */
  int streams;    /* TCP connections per link to a reachable peer (1..8, default 1; more than
                     one needs sealed links and no WAN emulation): for a link one TCP stream
                     cannot fill. Messages and chunks go round-robin over them by counter, and
                     the receiver puts them back in counter order (docs/protocol.md) */
} parallel_zmq_config;

/* Defaults: timeout 60 s, queue 64 MiB, time_scale 1, 1 I/O thread, 1 stream, everything else
 * 0 / NULL. */
parallel_zmq_config parallel_zmq_config_default(void);

typedef struct parallel_zmq_transport parallel_zmq_transport;

/* Validates cfg, creates the sockets and threads, and binds cfg->endpoints[rank]. Copies what
 * it needs of cfg. The first call in a process also tunes glibc's malloc for short-lived large
 * buffers (keeps up to 256 MiB of freed heap, mmap only from 32 MiB) unless GLIBC_TUNABLES or
 * MALLOC_TRIM_THRESHOLD_ / MALLOC_MMAP_THRESHOLD_ is set: a process-wide setting. Returns NULL with
 * wt_last_error() set on a bad config (WT_EINVAL: which field and why), a bind failure (WT_EIO: the
 * endpoint and zmq's reason). */
parallel_zmq_transport *parallel_zmq_transport_new(const parallel_zmq_config *cfg);

/* The endpoint actually bound (ephemeral port resolved), owned by the transport. */
const char *parallel_zmq_transport_endpoint(const parallel_zmq_transport *t);

/* Connects to every peer's endpoint (endpoints[rank] is ignored) and wraps the transport as a
 * communicator, taking ownership of *t_p (set to NULL, also on failure, when it is destroyed).
 * Returns NULL with wt_last_error() set on a bad endpoint. */
parallel_comm *parallel_zmq_transport_connect(parallel_zmq_transport **t_p,
                                              const char *const *endpoints);

/* Frees a transport that was never connected (e.g. when another rank failed to start); sets
 * *t_p = NULL. */
void parallel_zmq_transport_destroy(parallel_zmq_transport **t_p);

/* The outbox this reachable rank bound for unreachable rank `peer` ("tcp://host:port", owned by
 * the transport): the endpoint that peer's PULL connects to. NULL for any other peer. */
const char *parallel_zmq_transport_outbox(const parallel_zmq_transport *t, int peer);

/* Where an unreachable rank's connections go (zmq.h "Reachability"); unused fields NULL. */
typedef struct {
  /* size entries: rank r's outbox for this rank (transport_outbox of r's transport), needed
   * where this rank is unreachable and r reachable, NULL elsewhere */
  const char *const *outboxes;
  /* size entries: the relay inbox of each unreachable rank r (where this rank sends for r),
   * needed where both are unreachable; and this rank's own inbox's outlet */
  const char *const *relay_in;
  const char *relay_out;
} parallel_zmq_routes;

/* transport_connect for a group with unreachable ranks (cfg.reachable), with their routes
 * (NULL when this rank needs none: every rank reachable). Takes *t_p as transport_connect does.
 * Returns NULL with wt_last_error() set (WT_EINVAL naming the rank and the missing route) when
 * a route this rank needs is missing or does not connect. */
parallel_comm *parallel_zmq_transport_connect_routes(parallel_zmq_transport **t_p,
                                                     const char *const *endpoints,
                                                     const parallel_zmq_routes *routes);

/* transport_new + transport_connect(cfg->endpoints); the endpoints must be concrete. */
parallel_comm *parallel_zmq_comm_new(const parallel_zmq_config *cfg);

/* ---- per-message context and counters (for communicators made here) -------------------------
 * These take the communicator; on one of another transport they return WT_EINVAL (setters) or
 * zeros (getters). */

typedef struct {
  uint8_t kind;  /* parallel_zmq_kind; default PARALLEL_ZMQ_KIND_DATA */
  uint8_t codec; /* 0 raw, or a compress_codec_id */
  uint32_t step, micro_batch, tensor_id;
} parallel_zmq_msg_context;

/* Sets the header fields of the messages this communicator sends from now on. Returns WT_OK or
 * WT_EINVAL (not a zmq communicator, or kind/codec out of range). */
int parallel_zmq_set_context(parallel_comm *c, const parallel_zmq_msg_context *ctx);

/* Sets the deadline of every recv and blocked send from now on (cfg.timeout_s at creation), e.g.
 * short waits while idle, the full deadline inside a call. Returns WT_OK or WT_EINVAL (not a zmq
 * communicator, or timeout_s <= 0). */
int parallel_zmq_set_timeout(parallel_comm *c, double timeout_s);

typedef struct {
  uint64_t bytes_sent, msgs_sent; /* payload bytes / messages put on the wire to the peer */
  uint64_t bytes_recv, msgs_recv; /* accepted from the peer (refused ones are not counted) */
  double wait_s;      /* seconds this rank's recv calls waited for the peer, plus blocked sends */
  double shaped_s;    /* emulated delay on the link: the sum over messages of (emulated arrival −
                         queueing time), so queueing behind earlier messages counts too */
  uint64_t msgs_held; /* several streams: messages (or chunks) from the peer that came before
                         one ahead of them and waited for it */
} parallel_zmq_link_stats;

/* Counters of the link between this rank and `peer` (zeros for self or a non-zmq comm). */
parallel_zmq_link_stats parallel_zmq_link_stats_get(const parallel_comm *c, int peer);

/* Messages refused (malformed, wrong run/epoch/source/length, failed to open, replayed or
 * reordered, a bad hello) since creation. */
uint64_t parallel_zmq_refused(const parallel_comm *c);

/* ---- keys ------------------------------------------------------------------------------------
 * CURVE key pairs (X25519, Z85): CurveZMQ sockets (the control plane) use such pairs as they are;
 * the data links derive their kx keys from them (zmq_aead.h). */

/* A fresh key pair (zmq_curve_keypair), Z85, NUL-terminated. Returns WT_OK or WT_ENOTSUP (libzmq
 * built without CURVE). */
int parallel_zmq_keypair_new(char public_z85[41], char secret_z85[41]);

/* Writes "public <z85>\nsecret <z85>\n" to path, created with mode 0600 (an existing file is
 * replaced atomically). Returns WT_OK or WT_EIO. */
int parallel_zmq_keypair_save(const char *path, const char *public_z85, const char *secret_z85);

/* Reads a file written by keypair_save. Refuses (WT_EINVAL) a file readable by group or others,
 * a malformed file (WT_ECORRUPT) or a public key that does not belong to the secret key
 * (WT_EMISMATCH); WT_ENOTFOUND / WT_EIO when it cannot be read. */
int parallel_zmq_keypair_load(const char *path, char public_z85[41], char secret_z85[41]);

/* ---- process harness ----------------------------------------------------------------------------
 */

/* Forks `size` processes; each builds a zmq communicator from *base (rank, size and endpoints are
 * filled in here: tcp://127.0.0.1 with ephemeral ports, exchanged through pipes; with
 * base->insecure == 0 and no keys, a key pair per rank is made before the fork), calls
 * fn(comm, arg), destroys the comm and exits with fn's status. rcs[rank] (may be NULL) receives
 * each status: fn's return value, or WT_EIO for a process that died or could not start. A child
 * prints wt_last_error() to stderr when fn fails. Returns WT_OK if every rank returned WT_OK,
 * else the first failing rank's status. The parent waits at most base->timeout_s × 4 + 30 s for
 * the children and kills the rest after that (WT_ETIMEOUT). The children are forked without
 * exec, and libgomp is not fork-safe: call it before the calling process runs any OpenMP region
 * (a child forked after one can block in its own first region). */
int parallel_zmq_fork_run(int size, const parallel_zmq_config *base, parallel_rank_fn fn, void *arg,
                          int *rcs);

#endif
