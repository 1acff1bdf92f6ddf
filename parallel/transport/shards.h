/* shards — a run's checkpoint shards where no file system is shared: how a peer stores them,
 * what names and digests them, and how one moves between two processes.
 *
 * A shard is what one tasklet of a run wrote at one checkpoint step: (run, step, stage,
 * replica). Replica 0's holds the stage checkpoint directory (model/checkpoint.h:
 * safetensors, state.json, SHA256SUMS) and, in a run that keeps state across steps, its
 * replica's .state file; another replica's holds only its .state file (nothing in a stateless
 * run). Under a store's root they lie where the tasklet writes them:
 *
 *   ROOT/<run id, 16 hex>/stage-<s>/step-<08 step>/...           (replica 0)
 *   ROOT/<run id, 16 hex>/stage-<s>/replica-<r>-step-<08 step>.state
 *
 * Digest: the SHA-256 (lowercase hex) of the shard's listing, one line "<sha256>  <size>  <path>\n"
 * per file (size in bytes, decimal), path relative to the run directory, in byte order of the
 * paths. The stage files' hashes are taken from their SHA256SUMS (so naming a shard reads only
 * SHA256SUMS, the .state file and the files' sizes); fetching and verifying hash every byte. Two
 * holders of one shard have one digest, and a fetch reads no more bytes of a file than its size.
 *
 * Transfer: every holder runs a shard server, a ZeroMQ ROUTER with CurveZMQ (its peer key pair,
 * the same X25519 keys the data links derive theirs from): the link is authenticated both ways
 * and encrypted, and the server answers only clients whose public keys it was told to allow
 * (its ZAP handler refuses the others' handshakes). A fetch asks holders in turn, checks the
 * listing against the digest it was given, then every file against the listing, and only then
 * moves the files into place: a corrupt, lying or dead holder is skipped, and nothing of it is
 * kept. Every wait has the fetch's deadline.
 *
 * Through a relay: a holder that accepts no inbound connection also connects out to a shard
 * relay (shard_relay.h), and a fetch given the relay for it sends each request there, sealed end
 * to end under keys from the two peers' own key pairs (crypto_kx + ChaCha20-Poly1305, the data
 * links' construction, zmq_aead.h); the relay passes bytes it can neither read nor alter
 * unnoticed, and the digest check stays the last line (docs/protocol.md "Shards through a
 * relay"). *
 *   parallel_shard_server *s = parallel_shard_server_new("tcp://10.0.0.5:*", root, pub, sec);
 *   parallel_shard_server_allow(s, client_pub);
 *   ... elsewhere:
 *   parallel_shard_holder h[2] = {{ep1, key1}, {ep2, key2}};
 *   parallel_shard_id id = {.run = run, .step = 40, .stage = 1, .replica = 0};
 *   int from;
 *   if (parallel_shard_fetch(root, &id, digest, h, 2, my_pub, my_sec, 30, &from) != WT_OK)
 *     log(wt_last_error());   // names each holder tried and why it was refused
 */
#ifndef WT_PARALLEL_SHARDS_H
#define WT_PARALLEL_SHARDS_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  uint64_t run;
  long step;
  int stage, replica;
} parallel_shard_id;

#define PARALLEL_SHARD_DIGEST_CHARS 64

/* The run directory of `run` under root: ROOT/<16 hex>. Writes at most `size` bytes. */
void parallel_shard_run_dir(const char *root, uint64_t run, char *out, size_t size);

/* The shard's listing (malloc'd text, the caller frees) and its digest, from the files under
 * root. Returns WT_OK, WT_ENOTFOUND (the shard is not there: no stage directory for replica 0,
 * no .state for another replica) or WT_ECORRUPT (a SHA256SUMS that is malformed or names a path
 * outside its directory). listing may be NULL. */
int parallel_shard_digest(const char *root, const parallel_shard_id *id, char hex[65],
                          char **listing);

/* Hashes every file of the shard under root and checks it against `digest`. Returns WT_OK,
 * WT_ENOTFOUND, or WT_ECORRUPT naming the file whose bytes do not match. */
int parallel_shard_verify(const char *root, const parallel_shard_id *id, const char *digest);

/* The shards of `run` under root (at most `max`, newest step first). Returns how many. */
int parallel_shard_list(const char *root, uint64_t run, parallel_shard_id *out, int max);

/* Removes a shard's files under root (what parallel_shard_digest lists); a missing one is not an
 * error. */
void parallel_shard_remove(const char *root, const parallel_shard_id *id);

/* The store's pruning rule, for every (stage, replica) of `run` under root: a step goes once it
 * is older than `pinned_step` (the newest step the coordinator knows every stage to be held at,
 * docs/coordinator.md "Checkpoints on the peers") and `keep` newer steps of the same (stage,
 * replica) are in the store. So the pinned step and everything newer stay, whoever wrote them;
 * pinned_step 0 (none known yet) removes nothing. Returns how many shards it removed. */
int parallel_shard_prune(const char *root, uint64_t run, long pinned_step, int keep);

/* ---- the server ------------------------------------------------------------------------------ */

typedef struct parallel_shard_server parallel_shard_server;

/* Binds a CURVE ROUTER at `bind` (tcp://HOST:* picks a port) that serves the shards under root
 * from its own thread, with the key pair public_z85 / secret_z85 (40 Z85 characters each).
 * Returns NULL with wt_last_error() set (WT_EINVAL: a bad key; WT_EIO: the bind failed). */
parallel_shard_server *parallel_shard_server_new(const char *bind, const char *root,
                                                 const char *public_z85, const char *secret_z85);

/* The endpoint bound (the port resolved); owned by the server. */
const char *parallel_shard_server_endpoint(const parallel_shard_server *s);

/* Lets the client with this public key (Z85) connect from now on. Returns WT_OK or WT_EINVAL (not
 * a key). Thread-safe. */
int parallel_shard_server_allow(parallel_shard_server *s, const char *public_z85);

/* Requests answered and refused (a path outside the shard names, a handshake from a key not
 * allowed or one that fails, a malformed request) since creation. Bytes that do not start like
 * ZMTP 2 or later are dropped by libzmq before any handshake and are not counted. */
uint64_t parallel_shard_server_served(const parallel_shard_server *s);
uint64_t parallel_shard_server_refused(const parallel_shard_server *s);

/* Also serves through the shard relay at relay_endpoint (its CURVE public key relay_key_z85):
 * the server's thread connects out to it, says hello every 2 s, and answers the sealed requests
 * of allowed clients that arrive there. Replaces an earlier relay. Returns WT_OK or WT_EINVAL.
 * Thread-safe. */
int parallel_shard_server_relay(parallel_shard_server *s, const char *relay_endpoint,
                                const char *relay_key_z85);

/* Stops the thread, closes the socket; sets *s_p = NULL. */
void parallel_shard_server_destroy(parallel_shard_server **s_p);

/* ---- fetching -------------------------------------------------------------------------------- */

typedef struct {
  const char *endpoint;   /* the holder's shard server */
  const char *public_key; /* its CURVE public key, Z85 */
  const char *relay;      /* NULL: straight to endpoint; else the shard relay it is reached at */
  const char *relay_key;  /* the relay's CURVE public key, Z85 (with relay) */
} parallel_shard_holder;

/* Fetches shard `id` with digest `digest` into root from the first of the n holders that serves
 * it intact (in the order given), as the client with key pair public_z85 / secret_z85, each
 * holder within timeout_s. On WT_OK the shard's files are in place under root (replacing a
 * local copy of the same shard) and *from (may be NULL) is the holder's index. Returns WT_OK;
 * WT_ECORRUPT when every holder that answered sent a listing or bytes that do not match the
 * digest; WT_ETIMEOUT / WT_EIO when none answered; WT_EINVAL for a bad argument. The message
 * names every holder tried and why it was refused. Writes only under ROOT/<run>/. */
int parallel_shard_fetch(const char *root, const parallel_shard_id *id, const char *digest,
                         const parallel_shard_holder *holders, int n, const char *public_z85,
                         const char *secret_z85, double timeout_s, int *from);

#endif
