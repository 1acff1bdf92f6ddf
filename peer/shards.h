/* shards — peerd's checkpoint store when the run keeps its checkpoints on the peers
 * (coordinator --checkpoint-storage peers; docs/coordinator.md "Checkpoints on the peers"):
 * DATA_DIR/runs/<run>/ holds the shards this peer's tasklets wrote and the copies it was asked
 * to keep (parallel/transport/shards.h has the layout and the digest). It serves them to the
 * peers the coordinator names, reports what it holds, copies a shard when told to (on its own
 * thread, so the control loop keeps beating), and, before a tasklet resumes, checks its local
 * copy of each shard the seat needs or fetches it from a holder. Included by peer/ only. */
#ifndef WT_PEER_SHARDS_H
#define WT_PEER_SHARDS_H

#include <cjson/cJSON.h>
#include <stdint.h>

typedef struct peer_shards peer_shards;

/* The store over DATA_DIR/runs with this peer's key pair; no port is open until
 * peer_shards_serve. NULL with wt_last_error() set (the directory cannot be made). */
peer_shards *peer_shards_new(const char *data_dir, const char *pub, const char *sec,
                             const char *coordinator_pub);

/* Opens the shard server (the run keeps its checkpoints on the peers): binds it at tcp://host:*
 * once and lets the coordinator's key in; with relay (its key: the coordinator's) it also serves
 * through the coordinator's shard relay, for when this peer accepts no inbound connection (a
 * later call, after a coordinator restart, moves it to the new relay). WT_OK, or the bind's
 * error. Until the server is open, reports, copies and allows are no-ops. */
int peer_shards_serve(peer_shards *s, const char *host, const char *relay);
void peer_shards_destroy(peer_shards **self_p);

/* DATA_DIR/runs: the root every run directory lies under (owned by s). */
const char *peer_shards_root(const peer_shards *s);

/* A SHARDS body (endpoint, held[]) when what the store holds changed since the last one, or
 * `force`; NULL otherwise, and always NULL while the server is not open. The caller sends and frees
 * it. Reads only SHA256SUMS and .state files, and only of shards it has not named before. */
cJSON *peer_shards_report(peer_shards *s, int force);

/* REPLICATE: queues the copy (fetched on the store's thread, newest step first, then reported
 * by the next peer_shards_report; a full queue gives up its oldest step's copy). SHARD_ALLOW and an epoch's keys[]: lets those keys fetch from here.
 * Malformed bodies are logged and dropped. */
void peer_shards_on_replicate(peer_shards *s, const cJSON *body);
void peer_shards_on_allow(peer_shards *s, const cJSON *keys);

/* An ACK's `pinned` ({run, step, keep}: the newest step the coordinator knows every stage held
 * at): remembered, and the store pruned by parallel_shard_prune's rule — what this peer's
 * tasklets wrote and the copies alike, so no peer removes the pinned step or a newer one. Also
 * applied after every copy. Skipped (until the next ACK) while a copy is being fetched. A
 * malformed body is logged and dropped. Copies wait WT_TEST_PEERD_COPY_DELAY_S seconds first when
 * that is set: a test-only knob for copies that lag. */
void peer_shards_on_pin(peer_shards *s, const cJSON *pinned);

/* Before a tasklet resumes from the store: for each entry of the seat's "fetch" list ({step,
 * stage, replica, digest, holders[]}), checks the local copy under root against the digest
 * and, when it is missing or does not match (a damaged copy is removed), fetches it from the
 * holders (not this peer),
 * each within timeout_s. Returns WT_OK once every shard is in place and verified, else the
 * fetch's error naming the shard and every holder tried. */
int peer_shards_prepare(const char *root, uint64_t run, const cJSON *fetch, const char *pub,
                        const char *sec, double timeout_s);

#endif
