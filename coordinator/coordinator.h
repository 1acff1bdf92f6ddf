/* coordinator — the daemon that admits peers, measures their links, places tasklets with
 * `assign`, publishes numbered epochs, watches heartbeats and re-places after churn. The
 * protocol is coordinator/protocol.h (docs/coordinator.md); this header is the daemon's API,
 * used by the `coordinator` program and the tests.
 *
 * State lives in SQLite (WAL) in <state_dir>/state.db: run config, peers seen with their session
 * and last sequence number, tokens, probed links, epochs with their assignments, reported
 * checkpoint shards and the latest complete checkpoint, and an event history. Every change is
 * written before it is acted on, so a coordinator killed with kill -9 and started again on the
 * same state directory carries on: peers keep their sessions and their running epoch.
 * <state_dir>/coordinator.key holds the CURVE key pair (0600, made on first start),
 * coordinator.pub its public key, token.key the 32-byte token key (0600) and `endpoint` the
 * bound address (an ephemeral port resolved).
 *
 * Failure semantics: nothing a peer sends can stop the daemon. Malformed, oversized, truncated,
 * wrong-version or replayed messages and messages from unregistered keys are logged at warn
 * level, counted (coordinator_refused) and dropped. Every wait has a deadline: heartbeats
 * (liveness × interval), binding of an epoch, results of an aborted epoch.
 */
#ifndef WT_COORDINATOR_H
#define WT_COORDINATOR_H

#include "common/config.h"
#include "parallel/runtime/run_config.h" /* defines: parallel_run_config */

#include <signal.h>
#include <stdint.h>

typedef struct {
  char state_dir[WT_CONFIG_STR_MAX];
  char bind[WT_CONFIG_STR_MAX]; /* tcp://127.0.0.1:* by default */
  int open;                     /* 1: admit peers without a token */
  /* the training run the peers carry out: S x R tasklets, S·R peers start it. Its device rows
   * are not the coordinator's options: each peer computes on its own --device. An empty
   * checkpoint_dir means <state_dir>/checkpoints. */
  parallel_run_config run;
  /* placement: the solver (ga by default; none = world rank w on scenario device w, or in
   * admission order without a scenario), or a fixed assignment (a netsim assignment JSON file:
   * world rank w on the peer that emulates device w's entry; "" = solve), and where the links
   * placement prices come from: "probe" (measured by a probe epoch) or "scenario" (the emulated
   * scenario's own, no probe) */
  char solver[WT_CONFIG_STR_MAX];
  char assignment[WT_CONFIG_STR_MAX];
  char links[WT_CONFIG_STR_MAX];
  int probe_kib; /* bytes of each link's bandwidth probe, KiB */
  int resume;    /* 1: a run with nothing committed here starts from checkpoint_dir's manifest */
  /* where checkpoints live: "shared" (run.checkpoint_dir, which every peer reaches) or "peers"
   * (each tasklet's own data directory; the coordinator names holders and keeps
   * checkpoint_copies live copies of every committed shard, holders.c). The option's "auto" is
   * resolved by coordinator_config_check, which sets checkpoint_storage_auto */
  char checkpoint_storage[WT_CONFIG_STR_MAX];
  int checkpoint_storage_auto;
  int checkpoint_copies;
  char checkpoint_store[WT_CONFIG_STR_MAX]; /* with "peers": a directory here that receives
                                               every committed shard too ("" = none) */
  /* WAN emulation: a netsim scenario file and the name of one of its scenarios ("" = none) */
  char scenario[WT_CONFIG_STR_MAX], scenario_name[WT_CONFIG_STR_MAX];
  double time_scale;
  /* liveness */
  double heartbeat_s;
  int liveness;
  double peer_timeout_s; /* the data transport's deadline, sent to the peers */
  /* control connections open at once, in total (lowered at start to fit the open-file limit)
   * and from one source address; peers admitted before are not held to the second */
  int max_connections, max_per_source;
  /* slots of the peer table: live peers and those the run still needs (members, plan ranks);
   * a registration past them is refused, logged and counted */
  int max_peers;
  /* an epoch's members bind their data sockets within bind_timeout_s of EPOCH and start
   * within it of START; one that does not is left out of epochs for sideline_s, doubling */
  double bind_timeout_s, sideline_s;
  /* the relay between unreachable members: its address ("" = the control endpoint's host)
   * and the ports its inboxes bind, two each (0, 0 = ephemeral) */
  char relay[WT_CONFIG_STR_MAX]; /* who hosts it: "coordinator" or "peer" (a reachable member) */
  char relay_host[WT_CONFIG_STR_MAX];
  int relay_port_min, relay_port_max;
  int exit_when_done;    /* 1: exit once the run is complete */
  /* status server (/status, /metrics, dashboard): port 0 = ephemeral, -1 = none */
  char http_bind[WT_CONFIG_STR_MAX];
  int http_port;
} coordinator_config;

/* The option table of coordinator_config (names, bounds, defaults, help), for the program. */
const wt_option *coordinator_options(void);

/* Checks a parsed config: the run with parallel_run_config_check (which applies its preset), and
 * that a stateful run (parallel_run_config_stateful) can recover: its checkpoints on the peers,
 * or in a checkpoint_dir it names. Resolves checkpoint_storage "auto" to "peers" (a stateful run
 * without checkpoint_dir, or one with checkpoint_store) or "shared". Returns WT_OK, or
 * WT_EINVAL / WT_ENOTFOUND with wt_last_error() saying what to change. */
int coordinator_config_check(coordinator_config *cfg);
/* Why a checked config's checkpoint_storage is what it is, for the log and /status: a static
 * string ("--checkpoint-storage" when the operator chose it, else "auto: ..."). */
const char *coordinator_checkpoint_storage_why(const coordinator_config *cfg);

typedef struct coordinator coordinator;

/* Opens (or creates) the state directory, loads the state, makes or loads the key pair, binds
 * the ROUTER socket and writes `endpoint` and coordinator.pub. The run config of an existing
 * state directory wins over cfg's training fields (logged when they differ). Returns NULL with
 * wt_last_error() set (a bad state directory or database, a bind failure, a bad scenario). */
coordinator *coordinator_new(const coordinator_config *cfg);
void coordinator_destroy(coordinator **self_p);

/* The public key (Z85, 40 chars) and bound endpoint, owned by the coordinator. */
const char *coordinator_public_key(const coordinator *c);
const char *coordinator_endpoint(const coordinator *c);

/* The status server's TCP port, or -1 when it is off. The port is also written to
 * <state_dir>/http_port and printed at start ("coordinator: dashboard http://ADDR:PORT/"). */
int coordinator_http_port_get(const coordinator *c);

/* Serves until *stop becomes nonzero (a signal handler sets it) or, with exit_when_done, the
 * run completes. Returns WT_OK, or an error if the socket itself fails. */
int coordinator_run(coordinator *c, const volatile sig_atomic_t *stop);

/* A JSON snapshot of the state for /status (peers, roles, epoch, step, loss, tokens/s, bytes),
 * malloc'd; the HTTP side calls it. */
char *coordinator_status_json(coordinator *c);

/* Control messages refused since start. */
uint64_t coordinator_refused(const coordinator *c);

/* ---- tokens -------------------------------------------------------------------------------- */

/* Mints a join token for the state directory: usable until now + expires_s (0 = no expiry) and
 * at most `uses` times (0 = unlimited). Writes it (NUL-terminated) into out. Returns WT_OK or
 * WT_EIO / WT_EINVAL. */
int coordinator_token_new(const char *state_dir, double expires_s, int uses, char *out,
                          size_t size);

/* Parses a duration: "90", "90s", "15m", "2h", "7d" → seconds. WT_EINVAL on anything else. */
int coordinator_duration_parse(const char *text, double *seconds);

#endif
