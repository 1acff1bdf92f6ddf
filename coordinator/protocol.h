/* protocol — the control protocol between `coordinator` and `peerd` (docs/coordinator.md is the
 * written spec): version and command constants, and the envelope codec both daemons use.
 *
 * Transport: the coordinator binds a ZeroMQ ROUTER, each peer connects a DEALER; CurveZMQ is
 * always on (the coordinator's ZAP handler tells it which public key sent each message). One
 * message = one frame holding one JSON object:
 *   {"v": 1, "cmd": "heartbeat", "sid": "<32 hex>", "seq": 17, ...command fields...}
 *   v    protocol version; anything else is refused (the sender is told which one we speak)
 *   cmd  one of the commands below
 *   sid  the sender's session: a peer draws a fresh one for every `register`
 *   seq  1, 2, 3, ... per session; a message whose seq is not above the last one accepted in
 *        its session is a replay and is refused
 *
 * Contract: coordinator_msg_decode never trusts its input. Empty, oversized (> COORD_MSG_MAX),
 * truncated or non-JSON text, a non-object, a missing or mistyped field, another version or an
 * unknown command are refused with a status and a message saying what was wrong; the caller
 * logs it, drops the message and keeps serving. Replay checks need the session state and live
 * with the coordinator (coordinator_seq_accept is the rule).
 *
 *   coordinator_msg m;
 *   if (coordinator_msg_decode(buf, n, &m) != WT_OK) { WT_WARN("dropped: %s", wt_last_error()); }
 *   else { ...m.cmd, m.body (cJSON object, owned by m)...; coordinator_msg_clear(&m); }
 */
#ifndef WT_COORDINATOR_PROTOCOL_H
#define WT_COORDINATOR_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>

struct cJSON;

#define COORD_PROTOCOL_VERSION 2
#define COORD_MSG_MAX 65536 /* bytes of one control message */
#define COORD_SID_CHARS 32  /* hex characters of a session id */
/* 10^15 - 1: cJSON prints a number with 15 significant digits whenever that reads back within
 * its relative tolerance, so larger integers would not re-encode exactly. */
#define COORD_SEQ_MAX 999999999999999.0

/* Commands. Peer → coordinator: REGISTER .. LEAVE and SHARDS; coordinator → peer: WELCOME ..
 * FINISH, REPLICATE and SHARD_ALLOW. */
typedef enum {
  COORD_CMD_REGISTER = 0, /* token, device {kind, flops, memory, region}, host */
  COORD_CMD_HEARTBEAT,    /* epoch, state, step, loss, tokens_s, bytes_sent, bytes_recv, trust */
  COORD_CMD_BOUND,        /* epoch, endpoint: the peer's data socket for that epoch is bound */
  COORD_CMD_RESULT,       /* epoch, ok, error, steps, loss | probe rows (latency_s, bandwidth) */
  COORD_CMD_CHECKPOINT,   /* epoch, step, stage, digest: this stage's shard of step is on disk */
  COORD_CMD_LEAVE,        /* the peer is going away */
  COORD_CMD_WELCOME,      /* peer_id, role: admitted */
  COORD_CMD_REFUSED,      /* reason: not admitted (the peer prints it and exits) */
  COORD_CMD_ACK,          /* reply to a heartbeat: the coordinator is alive */
  COORD_CMD_EPOCH,        /* a numbered group: kind probe|train, rank, size, keys, links, config */
  COORD_CMD_START,        /* epoch, endpoints: connect and run */
  COORD_CMD_ABORT,        /* epoch: stop that group's work (a member was lost) */
  COORD_CMD_STANDBY,      /* no role now; stay connected */
  COORD_CMD_FINISH,       /* the run is complete, or with error: it stopped; the peer exits */
  COORD_CMD_SHARDS,       /* peer →: endpoint (its shard server), held[] {run, step, stage,
                             replica, digest}: every checkpoint shard in its store */
  COORD_CMD_REPLICATE,    /* → peer: run, step, stage, replica, digest, holders[] {endpoint,
                             key}: fetch that shard into the store */
  COORD_CMD_SHARD_ALLOW,  /* → peer: keys[]: let these peers fetch from the shard server */
  COORD_CMD_COUNT
} coordinator_cmd;

/* "register", "heartbeat", ...; "?" for a value out of range. */
const char *coordinator_cmd_name(coordinator_cmd cmd);

typedef struct {
  coordinator_cmd cmd;
  char sid[COORD_SID_CHARS + 1];
  uint64_t seq;
  struct cJSON *body; /* the whole object (v, cmd, sid, seq included); owned */
} coordinator_msg;

/* Parses and checks one message (see the contract). On WT_OK *out holds the message (free it
 * with coordinator_msg_clear). WT_EINVAL for garbage, a truncated or oversized message, a missing
 * or mistyped field or an unknown command; WT_EMISMATCH for another protocol version. *out is
 * zeroed on failure. */
int coordinator_msg_decode(const void *data, size_t n, coordinator_msg *out);

void coordinator_msg_clear(coordinator_msg *m);

/* Serialises body (borrowed; may be NULL for no fields) with the envelope fields set to
 * (COORD_PROTOCOL_VERSION, cmd, sid, seq). Returns a malloc'd NUL-terminated string, or NULL
 * with wt_last_error() set when it would exceed COORD_MSG_MAX. */
char *coordinator_msg_encode(coordinator_cmd cmd, const char *sid, uint64_t seq,
                             const struct cJSON *body);

/* The replay rule: a message of session `sid` with sequence `seq` is accepted when the session
 * is the current one and seq > *last (then *last = seq). Returns WT_OK or WT_EINVAL naming why
 * (stale session, replayed or out-of-order sequence). */
int coordinator_seq_accept(const char *current_sid, uint64_t *last, const char *sid, uint64_t seq);

/* Fields of a message body from outside, read without trusting it: the number (or `def` when
 * the field is missing, not a number or not finite); the same clamped to [-1e9, 1e9] so the
 * cast to int is defined; the string ("" when missing or not a string; owned by `o`). */
double coordinator_field_num(const struct cJSON *o, const char *name, double def);
int coordinator_field_int(const struct cJSON *o, const char *name, int def);
const char *coordinator_field_str(const struct cJSON *o, const char *name);

/* Bytes of the labels a peer registers with (its region, the host its peers reach it at, its
 * device kind), NUL excluded. */
#define COORD_REGION_MAX 63
#define COORD_HOST_MAX 255
#define COORD_KIND_MAX 31

/* The rule for a label: at most `max` bytes of printable UTF-8 text (no control characters, no
 * ill-formed sequences), "" allowed. peerd checks its --region and --host with it before it
 * registers; the coordinator refuses a registration that breaks it. Returns WT_OK, or WT_EINVAL
 * with wt_last_error() naming `name`, quoting the value escaped and saying what is wrong. */
int coordinator_label_check(const char *name, const char *value, size_t max);

/* coordinator_label_check on the labels of a register body: "region", "host" and device
 * "kind" (each "" when missing or not a string). */
int coordinator_register_labels_check(const struct cJSON *body);

/* A fresh random session id (libsodium randombytes), 32 hex chars + NUL. */
void coordinator_sid_new(char sid[COORD_SID_CHARS + 1]);

#endif
