/* coordinator_internal — the daemon's state shared between its files (coordinator.h is the
 * contract). Included only by coordinator/ and tests/coordinator. */
#ifndef WT_COORDINATOR_INTERNAL_H
#define WT_COORDINATOR_INTERNAL_H

#include "common/deadline.h"
#include "assign/assign.h"
#include "coordinator/coordinator.h"
#include "coordinator/http.h"
#include "coordinator/protocol.h"
#include "netsim/netsim.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdint.h>

/* Members of one epoch: a train epoch's stages x replicas seats (each at most
 * PARALLEL_RUN_MAX_RANKS) or a probe group. The peer table itself holds cfg.max_peers. */
#define COORD_MAX_MEMBERS 4096
#define COORD_KEY_LEN 40
#define COORD_LOSS_HIST 2000
#define COORD_EVENTS_KEPT 64 /* the newest events /status shows (all stay in the database) */
#define COORD_EVENT_DETAIL 320
#define COORD_TRUST_REPLICAS 64 /* replicas of a stage a trust report covers */
#define COORD_MAX_EXCLUDED 256  /* liars listed in /status (all are counted, and refused by key) */
#define COORD_PROBE_MAX 64 /* members of one probe epoch */
/* Up to this many live peers, a probe epoch measures every pair among them; past it, swarm.c
 * chooses a bounded set (newcomers with landmarks, then the placement's links) */
#define COORD_PROBE_ALL_PAIRS 12
#define COORD_PROBE_NEWCOMERS 32 /* newcomers one probe epoch measures */
#define COORD_PROBE_LANDMARKS 4  /* probed peers every newcomer is paired with */
#define COORD_PROBE_MATES 1      /* newcomers of its own region, and of others, it is paired with */
#define COORD_PROBE_PAIRS_MAX (4 * COORD_PROBE_MAX) /* pairs one probe epoch measures */
#define COORD_REFINE_ROUNDS 2 /* probe epochs that refine one placement's estimated links */

typedef enum { PEER_GONE = 0, PEER_LIVE = 1 } coord_peer_status;

/* Whether a peer accepts inbound connections (reach.c): untested when it offered no port to
 * test (taken as reachable), testing until the connect-back answers or its deadline passes. */
typedef enum {
  COORD_REACH_UNTESTED = 0,
  COORD_REACH_TESTING,
  COORD_REACH_YES,
  COORD_REACH_NO
} coord_reach;
#define COORD_REACH_TIMEOUT_S 2.0 /* the connect-back's deadline */

/* A probed link from a peer to the peer with this id (peers.c keeps each peer's sorted by id). */
typedef struct {
  int peer_id;
  double latency_s, bandwidth_Bps;
} coord_link;

/* deadline.c: a train epoch member's deadlines from the measured links into it (NaN: not a
 * member): a step's receives (each link's per-step bytes), an outer DiLoCo step's receives (the
 * ring's pseudo-gradient bytes; NaN without one), and a stage's state or checkpoint shard sent to
 * it (a replica's hand-over, a fetch); the slowest of its step links: the peer id it comes from,
 * its rate and round trip. */
typedef struct {
  double recv_s, sync_s, state_s;
  int slow_from;
  double slow_Bps, slow_rtt_s;
} coord_link_deadlines;

typedef struct {
  int id;
  char key[COORD_KEY_LEN + 1];
  unsigned char route[256]; /* ROUTER routing id of its latest message */
  size_t route_len;
  char sid[COORD_SID_CHARS + 1];
  uint64_t last_seq;
  coord_peer_status status;
  char region[64], kind[32], host[256];
  int region_index;     /* in the scenario, -1 without one */
  int device_index;     /* the scenario device it emulates (coord_scenario_device), -1 = none */
  double flops, memory; /* a site's aggregate (peerd --gpus) */
  int gpus;             /* GPUs of the site behind it (1: a single device) */
  double last_seen;     /* wt_now_s() */
  /* last heartbeat */
  long step;
  double loss, tokens_s, bytes_sent, bytes_recv;
  double bytes_intra, bytes_inter;        /* sent in the current epoch, by link class */
  double done_intra, done_inter;          /* sent in the epochs before */
  double bytes_inter_raw, done_inter_raw; /* bytes_inter had activations gone as float32 */
  /* per epoch */
  int epoch_rank;     /* rank in the current epoch, -1 = not a member */
  char endpoint[256]; /* bound for the current epoch */
  int result;         /* 0 none yet, 1 ok, -1 failed */
  long steps_done;
  int held_stage;      /* the stage state it keeps between epochs (from RESULT / REGISTER) */
  long held_step;      /* 0: none */
  long held_outer;     /* DiLoCo: the outer steps its held state has done (-1: none reported) */
  double shards_due;   /* registered, its store not reported yet: waited for until then (0: in) */
  /* deadline.c: its heartbeat gaps (dl_ready = 0: not set up yet), and the receive deadline
   * and step time its last heartbeat reported (NaN / 0 until then) */
  wt_deadline dl_heartbeat;
  int dl_ready;
  double recv_deadline_s, step_q90_s;
  coord_link_deadlines dl_links; /* as a member of the running train epoch */
  int promote_refused; /* its measured links did not keep a promotion's gain: not asked again */
  int finished;        /* told the run is complete (it then exits): gone, but not lost */
  /* trust.c: the robust sync's evidence. Its own last report of the epoch trust_report_epoch
   * (0: none): its stage's robust syncs and how often each replica's contribution was left out */
  int trust_report_epoch;
  long trust_report_syncs, trust_report[COORD_TRUST_REPLICAS];
  /* what its stage agreed about it: in the epochs before trust_epoch, and in trust_epoch */
  long trust_flagged, trust_syncs, trust_ep_flagged, trust_ep_syncs;
  int trust_epoch;
  char trust_why[64]; /* the reasons its stage gave */
  coord_link *links;  /* probed links from it, by the other end's id; owned (peers.c) */
  int n_links, cap_links;
  int seq_dirty;     /* its sequence number is newer than its row (state.c flushes it) */
  int started_epoch; /* the last epoch its heartbeats said it works in */
  /* left out of epochs until sidelined_until (wt_now_s()) after failing one in silence
   * (sideline.c): why, and how many times in a row (the backoff doubles with each) */
  double sidelined_until;
  int sidelinings;
  char sidelined_why[160];
  /* the other members whose failed RESULTs of epoch accused_epoch timed out waiting for it, and
   * the last epoch whose failure it blamed on another (one accusation per member and epoch) */
  int accused_epoch, accusations, accusing_epoch;
  /* its access link as the probes estimated it (coordinator/probe.c): capacities in bytes/s
   * (0 = not measured) and the link's id (the peer id of its first peer; peers that share one
   * have the same), and the contention rounds' together/alone ratios (-1 = none) */
  double up_Bps, down_Bps;
  int access_link;
  double up_ratio, down_ratio;
  /* reach.c: the connect-back test to host:reach_port (its socket while testing) */
  int reach, reach_port, reach_fd;
  double reach_deadline;
  char reach_why[96];
  /* swarm.c: its network coordinates (a point in the plane and a height, seconds of one-way
   * latency), their error estimate, and the samples that placed them (0: not placed) */
  double vivaldi[2], vivaldi_h, vivaldi_err;
  long vivaldi_n;
  double region_lat; /* the sum of region_n latencies it measured to peers of its region */
  long region_n;
  /* spot checks: the counts of failed and of all checks its own last report of epoch
   * spot_report_epoch gave per replica; and of it: the checks and failed checks reported over
   * the run, and the ids of the distinct peers that reported failures */
  int spot_report_epoch;
  long spot_report[COORD_TRUST_REPLICAS], spot_report_checked[COORD_TRUST_REPLICAS];
  long spot_checks, spot_fails;
  int spot_checkers[4], n_spot_checkers;
  /* claims.c: its measured compute in epoch claim_epoch (0: none) over claim_steps steps, in
   * FLOP/s; the reports in a row whose claim was out of line; flagged, and the figure it is
   * placed by then */
  int claim_epoch, claim_strikes, claim_flagged;
  long claim_steps;
  double claim_measured, claim_placed;
  uint64_t trust_saved; /* state.c: a digest of its trust record as last written, 0: none */
} coord_peer;

/* One line of the event log as /status shows it. */
typedef struct {
  double t; /* Unix time */
  char kind[16];
  char detail[COORD_EVENT_DETAIL];
} coord_event_line;

/* holders.c: a copy of a shard asked of a peer and not yet reported */
#define COORD_HOLDERS_PENDING 64
typedef struct {
  long step;
  int stage, replica, peer;
  double t; /* when it was asked, 0 = a free entry */
} coord_copy_pending;

typedef enum {
  EPOCH_NONE = 0,
  EPOCH_BINDING, /* sent EPOCH, waiting for every member's BOUND */
  EPOCH_RUNNING, /* sent START, waiting for RESULTs */
  EPOCH_DRAINING /* aborted, waiting for the live members' RESULTs */
} coord_epoch_phase;

struct coordinator {
  coordinator_config cfg;
  char dir[1200];
  sqlite3 *db;
  void *zctx, *router;
  void *zap_thread;
  struct coord_zap *zap_state; /* zap.c: the connection counts, owned by the ZAP thread */
  char pub[COORD_KEY_LEN + 1], sec[COORD_KEY_LEN + 1], endpoint[256];
  unsigned char token_key[32];
  char sid[COORD_SID_CHARS + 1];
  uint64_t out_seq, refused;
  coord_peer *peers; /* cfg.max_peers slots; those of peers gone for good are reused */
  int n_peers;
  struct coord_key_slot *by_key; /* peers.c: slots sorted by key, n_peers of them */
  int *live;                     /* cfg.max_peers scratch entries for the epoch logic */
  double liveness_next;          /* no live peer's heartbeat window ends before this (daemon.c) */
  double stall_grace_until;      /* after its own stall, the fixed heartbeat window until this */
  uint64_t refused_full;         /* registrations refused because every slot was needed */
  int *dirty, n_dirty;           /* slots whose sequence numbers are to be written (state.c) */
  double dirty_t;                /* when they were last written */
  int next_peer_id;     /* ids are never reused: one more than any the state database holds */
  double refusal_log_t; /* start of the window of refusals logged (s_refusal_log) */
  int refusal_log_n;    /* lines logged in that window */
  uint64_t refusal_log_skipped; /* refusals not logged in it */
  /* scenario (WAN emulation) */
  netsim_scenario_set *scenario_set;
  const netsim_scenario *scenario; /* the emulated WAN, or NULL */
  assign_plan *fixed_plan;         /* --assignment: the scenario device of each world rank */
  /* the run */
  uint64_t run_id;
  int run_complete;
  long committed_step; /* latest complete checkpoint */
  int epoch;           /* current epoch number (0 = none yet) */
  char epoch_kind[8];  /* "probe" or "train" */
  coord_epoch_phase phase;
  double phase_deadline;
  double start_deadline;          /* running: every member works by then (0: not checked) */
  int members[COORD_MAX_MEMBERS]; /* peer indices by epoch rank */
  int n_members;
  int plan_members[COORD_MAX_MEMBERS]; /* the last train epoch's peers, by world rank */
  /* each stage's data-parallel ring in the last placement: rings[s*R + i] is the replica at
   * position i of stage s's ring (rings[s*R] = 0); n_rings = S·R entries, 0 = replica order */
  int rings[COORD_MAX_MEMBERS];
  int n_rings;
  /* where the train epoch's tasklets start: from_peers = 1: at start_step from the members'
   * held states, rank r's from rank state_from[r]; 0: from the latest complete checkpoint */
  int from_peers, state_from[COORD_MAX_MEMBERS];
  long start_step;
  /* deadline.c: how long the bind and the start phases took (measured), and when the running
   * phase began (epoch sent / START sent) */
  wt_deadline dl_bind, dl_start;
  double dl_state_s; /* the running train epoch's slowest member's link state_s (0: none) */
  double bind_began, start_began;
  int promote; /* peer index of a standby to place at the next train epoch, -1 = none */
  int promoted; /* the placement being made swapped a standby in (epoch.c's s_promote) */
  int n_plan;
  double cost_ga, cost_random;
  int failed_epochs;      /* consecutive train epochs that ended without progress */
  int missed_checkpoints; /* failed train epochs since the last commit that trained past a
                           * checkpoint step they did not commit (a checkpoint that cannot be
                           * saved, e.g. on a full disk) */
  int ckpt_unchecked;     /* the checkpoint directory is not visible here (said once) */
  /* holders.c: copies asked for, and what was said once */
  coord_copy_pending copies[COORD_HOLDERS_PENDING];
  int holders_short_said;
  double holders_wait_since; /* when no step could be resumed from live holders (0: it can) */
  double holders_check_t;
  long holders_pinned; /* the step no peer's store may prune, sent in every ACK (0: none yet) */
  struct coord_store *store; /* store.c: --checkpoint-store's thread, or NULL */
  /* the run completed then: FINISH goes out once the store took the last shards from the
   * peers (at most COORD_STORE_DRAIN_S later); 0 = sent */
  double finish_due;
  char last_error[1024];
  int last_error_echo; /* last_error is a neighbour's lost link, not a cause */
  double first_loss, last_loss;
  long last_step;
  double lost_at, recovery_s;
  int lost_member_epoch; /* the last epoch that lost a member (heartbeats, a restart) */
  int it_epoch; /* measured iteration time: epoch, start time and step, result */
  double it_t0, iteration_s;
  long it_step0; /* when a member was lost; how long until training resumed */
  /* the loss curve (from heartbeats; thinned to half when full) and link rates */
  int n_hist;
  long hist_step[COORD_LOSS_HIST];
  float hist_loss[COORD_LOSS_HIST];
  double rate_t, rate_intra, rate_inter, prev_intra, prev_inter;
  /* the newest events, oldest first from events_next (a ring; loaded from the database) */
  coord_event_line events[COORD_EVENTS_KEPT];
  int n_events, events_next;
  pthread_mutex_t mu; /* held while the loop handles messages; the HTTP thread reads under it */
  coordinator_http *http;
  int n_excluded; /* trust.c: peers excluded in this run (state.c loads them back); the first
                     COORD_MAX_EXCLUDED of them listed */
  int excluded_id[COORD_MAX_EXCLUDED];
  char excluded_key[COORD_MAX_EXCLUDED][COORD_KEY_LEN + 1], excluded_why[COORD_MAX_EXCLUDED][256];
  /* the running probe epoch's contention rounds by epoch rank: [from * COORD_PROBE_MAX + to],
   * bytes/s while the region of `from` (up) or of `to` (down) sent or received at once */
  double probe_up[COORD_PROBE_MAX * COORD_PROBE_MAX], probe_down[COORD_PROBE_MAX * COORD_PROBE_MAX];
  /* reach.c: the epoch's relay (NULL when no two members are unreachable), what earlier
   * epochs' relays forwarded, and the outboxes each member reported in BOUND (by epoch rank,
   * n_members entries while binding and running; NULL when no member is unreachable) */
  struct parallel_zmq_relay *relay;
  struct parallel_shard_relay *shard_relay; /* unreachable holders' shards, NULL when unused */
  uint64_t relay_messages, relay_bytes;
  cJSON **outboxes;
  int n_outboxes;
  /* the epoch's relay: its inboxes (one per unreachable member), the member that hosts it
   * (--relay peer; -1: the coordinator, or none) and its endpoints by inbox ({"in", "out"},
   * NULL until known) */
  int relay_inboxes, relay_rank;
  cJSON *relay_eps;
  /* the running probe epoch's pairs of epoch ranks when swarm.c chose them (probe_planned);
   * otherwise it measures every pair of its members that lacks a direction */
  int probe_planned, n_probe_pairs;
  int probe_pairs[COORD_PROBE_PAIRS_MAX][2];
  int refine_rounds; /* probe epochs that refined the links of the placement since it trained */
};

/* peers.c — the peer table: cfg.max_peers slots, found by key in O(log n), and each peer's
 * probed links. init allocates it (WT_OK or WT_ENOMEM); free releases it. */
int coord_peers_init(coordinator *c);
void coord_peers_free(coordinator *c);
/* The slot of the peer with this key, or -1. */
int coord_peer_find(const coordinator *c, const char *key);
/* Whether a slot is free for a new peer, reaping the slots of peers gone for good when the
 * table is full (slot indices change then: call it before holding any, and with no sequence
 * number pending, coord_state_flush). */
int coord_peers_make_room(coordinator *c);
/* Takes a free slot (make_room said there is one) for key: zeroed, id set, not a member. */
int coord_peer_add(coordinator *c, const char *key, int id);
/* Rebuilds the key index after the table was filled directly (state.c's load). */
void coord_peers_reindex(coordinator *c);
/* The link probed from slot a to slot b: 1 and its latency (s) and bandwidth (B/s), or 0 when
 * none was measured. set records one (replacing the previous). */
int coord_link_get(const coordinator *c, int a, int b, double *lat, double *bw);
void coord_link_set(coordinator *c, int a, int b, double lat, double bw);

/* reach.c — the connect-back test and the relay. start begins p's test (port <= 0: none,
 * untested; a register with "reachable": false is declared unreachable instead); tick settles the
 * pending ones (from the loop); settled says p's test is over; reachable is p's answer (untested
 * counts as reachable); name is /status's word for a coord_reach. relay_open makes the epoch's
 * relay with n inboxes (WT_OK, or WT_EIO with wt_last_error set), closing the previous one;
 * relay_close frees it; relay_stats adds up what every relay forwarded. */
void coord_reach_start(coordinator *c, coord_peer *p, int port);
/* p said at registration that it accepts no inbound connection: unreachable, untested. */
void coord_reach_declared_unreachable(coordinator *c, coord_peer *p);
void coord_reach_tick(coordinator *c);
int coord_reach_settled(const coord_peer *p);
int coord_reachable(const coord_peer *p);
const char *coord_reach_name(int reach);
int coord_relay_open(coordinator *c, int n_inboxes);
void coord_relay_close(coordinator *c);
void coord_relay_stats(const coordinator *c, double *messages, double *bytes);
/* Where relays bind and what they announce: --relay-host, else the control endpoint's host. */
void coord_relay_host(const coordinator *c, char *host, size_t cap);
/* An epoch's routes (epochs with unreachable members; reach.c says what goes where): open
 * before EPOCH goes out (makes the relay when two members are unreachable, or picks the member
 * that hosts it), epoch_json adds
 * member rank's to its EPOCH, on_bound takes its BOUND's outboxes (WT_EINVAL when they do not
 * fit), start_json adds an unreachable member's to its START, close ends the epoch's. */
void coord_routes_open(coordinator *c);
void coord_routes_epoch_json(const coordinator *c, int rank, cJSON *b);
int coord_routes_on_bound(coordinator *c, int rank, const cJSON *body);
void coord_routes_start_json(const coordinator *c, int rank, cJSON *b);
void coord_routes_close(coordinator *c);
void coord_epoch_outboxes_free(coordinator *c);

/* sideline.c — members that fail an epoch in silence (they never bind, or never bring their
 * data links up) are left out of the next epochs with a doubling backoff, so the run goes on
 * with the others. sideline marks slot i with why (logged as an event, shown in /status);
 * available says whether slot i may be given a seat at time now (wt_now_s()); on_success
 * clears its record. */
void coord_sideline(coordinator *c, int i, const char *why);
int coord_sideline_available(const coordinator *c, int i, double now);
void coord_sideline_on_success(coordinator *c, int i);
/* Members whose data links fail after they started. note_failure reads a member's failed RESULT
 * (code, error): a timeout of the ZeroMQ transport names the rank it waited for ("no message
 * from rank R", "send to rank R … blocked"), one accusation of that member (at most one per
 * reporter and epoch, so a peer repeating its RESULT cannot sideline another alone). on_epoch_over, before
 * the epoch's members are cleared, sidelines a live member that two or more members' timeouts
 * named (more than any other member), and one that started but never reported the epoch's end
 * by its drain deadline. */
void coord_sideline_note_failure(coordinator *c, coord_peer *reporter, int code,
                                 const char *error);
void coord_sideline_on_epoch_over(coordinator *c);

/* state.c — SQLite */
int coord_state_open(coordinator *c);
void coord_state_close(coordinator *c);
int coord_state_load(coordinator *c);
void coord_event(coordinator *c, const char *kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void coord_state_save_peer(coordinator *c, const coord_peer *p);
/* A heartbeat's sequence number: written with the others in one transaction by flush, which
 * runs at most every COORD_SEQ_FLUSH_S (force: now). A coordinator killed meanwhile accepts
 * again the heartbeats of that last fraction of a second, which change nothing durable. */
#define COORD_SEQ_FLUSH_S 0.2
void coord_state_defer_peer(coordinator *c, int i);
/* Groups the writes between them into one transaction (one commit instead of one each). */
void coord_state_begin(coordinator *c);
void coord_state_commit(coordinator *c);
void coord_state_flush(coordinator *c, int force);
void coord_state_save_run(coordinator *c);
void coord_state_save_link(coordinator *c, int a, int b);
int coord_state_checkpoint(coordinator *c, long step, int stage, const char *digest, int *complete);
/* Whether the key's session was admitted before (a replayed registration); read-only. */
int coord_state_session_seen(coordinator *c, const char *key, const char *sid);
/* Records an admitted registration's session: only admitted ones are kept. */
void coord_state_session_add(coordinator *c, const char *key, const char *sid);
/* The id the state database knows the key by (a peer gone from the table), or 0. */
int coord_state_peer_id(coordinator *c, const char *key);
/* Loads the probed links between peer index i and the peers in the table. */
void coord_state_load_links(coordinator *c, int i);
/* The trust record of p's key (coord_trust_record) back into p, as a restart or a returning key
 * finds it; written with the peer's deferred row (coord_state_flush) when it changed. */
void coord_state_load_trust(coordinator *c, coord_peer *p);
void coord_state_save_epoch(coordinator *c, const char *plan_json);
void coord_state_save_loss(coordinator *c, long step, float loss);
int coord_state_meta_get(coordinator *c, const char *key, char *out, size_t size);
void coord_state_meta_set(coordinator *c, const char *key, const char *value);

/* Saves / loads the peers' estimated access links (meta "access", by key): all of them, or
 * with load_access only peer index i's. */
void coord_state_save_access(coordinator *c);
void coord_state_load_access(coordinator *c, int i);

/* probe.c — the network model from a probe epoch */
/* The measured link from peer index a to b: its latency and bandwidth (a to b). 0 when that
 * direction was not measured. */
int coord_probe_link(coordinator *c, int a, int b, double *lat, double *bw);
/* Whether every directed pair among the peer indices who[0..n) and every one's access link
 * was measured; when not, why says what is missing. */
int coord_probe_complete(coordinator *c, const int *who, int n, char *why, size_t size);
/* The pairs of epoch ranks [lo, hi] the running probe epoch measures: those still lacking a
 * direction. */
cJSON *coord_probe_pairs(coordinator *c);
/* The deadline of the running probe epoch, seconds from its start. */
double coord_probe_deadline_s(coordinator *c);
/* A member's RESULT rows of the running probe epoch. */
void coord_probe_on_result(coordinator *c, coord_peer *p, const cJSON *body);
/* Once every member reported: estimates each member's access link (logged, saved). */
void coord_probe_estimate(coordinator *c);
/* The access links of the peer indices list[0..n) (network index = position in list), arrays
 * malloc'd (coord_probe_access_free). 0 (acc zeroed) when a peer's link is not measured. */
int coord_probe_access(coordinator *c, const int *list, int n, assign_access *acc);
void coord_probe_access_free(assign_access *acc);
/* The measured directed matrix and access links of the live peers (the first COORD_PROBE_MAX),
 * for /status. */
cJSON *coord_probe_json(coordinator *c);

/* swarm.c — probing and choosing members among more than COORD_PROBE_ALL_PAIRS live peers.
 * probe_newcomers: 1 when live peers are not probed yet, with the next probe epoch's group in
 * who[0..*n_who) (landmarks first, at most COORD_PROBE_MAX) and its pairs set (probe_planned),
 * and in why what it is for; 0 when every live peer is probed (or a lone one waits).
 * probe_plan_links: the same for the links the placement in members[] (by world rank, rings)
 * uses that are only estimated, at most COORD_REFINE_ROUNDS times until refine_rounds is reset.
 * on_probed: fits the network coordinates to the probe epoch's measured latencies.
 * link: the link a → b measured (coord_probe_link) or else estimated: latency from the
 * coordinates, bandwidth min(a's uplink, b's downlink); 0 when neither is known.
 * choose: the n of live[0..n_live) whose tasklet alone costs least (tasklet_flop at their speed,
 * tasklet_bytes through their access link) into list, the others being standbys. */
int coord_swarm_probe_newcomers(coordinator *c, const int *live, int n_live, int *who,
                                int *n_who, char *why, size_t size);
int coord_swarm_probe_plan_links(coordinator *c, int *who, int *n_who, char *why, size_t size);
void coord_swarm_on_probed(coordinator *c);
int coord_swarm_link(coordinator *c, int a, int b, double *lat, double *bw);
void coord_swarm_choose(coordinator *c, const int *live, int n_live, int *list, int n,
                        double tasklet_flop, double tasklet_bytes);

/* token.c */
int coord_token_verify(coordinator *c, const char *token, char *why, size_t why_size);
int coord_token_key_load(const char *dir, unsigned char key[32]);

/* zap.c — the ZAP handler: any CURVE key may connect (the daemon admits by token), but at most
 * cfg.max_connections at once and cfg.max_per_source from one address, counted from the
 * control socket's monitor; a key the state database knows is not held to the per-source cap.
 * coord_zap_start checks the open-file limit (raising the soft one, lowering max_connections to
 * fit it) and starts the handler on c->router before it binds; coord_zap_stop joins it after
 * zmq_ctx_shutdown. Start returns WT_OK or WT_EIO with wt_last_error() set. */
int coord_zap_start(coordinator *c);
void coord_zap_stop(coordinator *c);
/* CURVE handshakes on the control socket that failed (the client lacks this coordinator's
 * public key, or sent garbage), that the caps refused, and that were cut before they finished
 * (a reset or a timeout); logged, rate-limited. */
void coord_zap_counts(const coordinator *c, uint64_t *failed, uint64_t *refused, uint64_t *cut);

/* daemon.c */
void coord_send(coordinator *c, coord_peer *p, coordinator_cmd cmd, const cJSON *body);

/* status.c; /status lists at most COORD_STATUS_PEERS peers (those of the run first) and counts
 * them all */
#define COORD_STATUS_PEERS 1000
/* /status and /metrics serve a snapshot at most twice this old, rebuilt off the request path
 * (coordinator_http_opts.refresh_s): a request then never waits for the loop's lock */
#define COORD_STATUS_REFRESH_S 0.25
cJSON *coord_status(coordinator *c);
void coord_status_tick(coordinator *c);
/* A point of the loss curve: record keeps it in memory (thinned to half when full) and in the
 * state database, from which a restarted coordinator loads it with keep. */
void coord_loss_record(coordinator *c, long step, float loss);
void coord_loss_keep(coordinator *c, long step, float loss);
/* An event kept in memory for /status (coord_event calls it; the load replays the newest). */
void coord_event_keep(coordinator *c, double t, const char *kind, const char *detail);

/* trust.c — the record per peer key of what the robust sync (--robust) left out. Each member's
 * HEARTBEAT (or its RESULT inside one) carries its stage's counts for every replica; a member's
 * count is the lower median of its stage's reports, so a minority of lying reporters can neither
 * frame an honest peer nor shield a liar. Past the run's rule (parallel_run_config_excludes) the
 * peer is excluded: logged and recorded as an event, dropped like a lost member (the epoch is
 * re-placed without it) and its key refused for the rest of the run. */
void coord_trust_on_heartbeat(coordinator *c, coord_peer *p, const cJSON *body);
/* 1 (with the reason in why) when `key` was excluded from this run. */
int coord_trust_refuses(coordinator *c, const char *key, char *why, size_t size);
/* Tells the sender at route that its key is excluded: REFUSED with the reason (why, from
 * coord_trust_refuses) and "excluded": true, so that peerd stops instead of registering again.
 * Sent when the peer is excluded and to every message it sends after. */
void coord_trust_tell_excluded(coordinator *c, const unsigned char *route, size_t route_len,
                               const char *why);
/* trust_state.c: p's trust record (the counts above, its spot-check report baselines, its
 * claim's standing) as JSON text, malloc'd, or NULL when there is nothing to keep yet; and
 * back into p: 1, or 0 with p unchanged when the text is not a whole, valid record. */
char *coord_trust_record(const coordinator *c, const coord_peer *p);
int coord_trust_record_load(const coordinator *c, coord_peer *p, const char *text);
/* Adds "peers_excluded", "excluded" [{id, key, reason}] and "trust" [{id, flagged, syncs}] to a
 * /status object. */
void coord_trust_status(coordinator *c, cJSON *status);

/* claims.c — a peer's claimed FLOP/s against the compute its heartbeats measure. Called by
 * coord_trust_on_heartbeat; a claim far and lastingly out of line with the other members' is
 * flagged (an event, /status "claims", /metrics) and the placement takes the measured figure. */
void coord_claim_on_heartbeat(coordinator *c, coord_peer *p, const cJSON *body);
/* The FLOP/s the placement takes for p: its claim, or its measured speed once flagged. */
double coord_claim_flops(const coord_peer *p);
/* Adds "peers_claim_flagged" and "claims" [{id, flops_claimed, flops_measured, flops_placed,
 * flagged}] to a /status object. */
void coord_claim_status(coordinator *c, cJSON *status);

/* traffic.c — what a train epoch moves over which link. _scenario_links: placement prices the
 * emulated scenario's links (--links scenario) and nothing is probed. _link: the link from peer
 * index a to b placement prices (the scenario's own, in emulated seconds, or coord_swarm_link);
 * _link_wall: the same in wall time (the scenario's slowed by --time-scale). Both return 1 with
 * *lat (one way, seconds) and *bw (bytes/s), 0 when unknown. _model_params: the model's
 * parameters (all, or the active ones: a token's compute). _step_bytes: what a train step moves
 * over a pipeline cut (each direction), a stage's gradient or pseudo-gradient (the ring reduces
 * it), and a stage's state as a hand-over or checkpoint shard (weights, AdamW moments, DiLoCo's
 * outer weights and momentum). */
int coord_traffic_scenario_links(const coordinator *c);
int coord_traffic_link(coordinator *c, int a, int b, double *lat, double *bw);
int coord_traffic_link_wall(coordinator *c, int a, int b, double *lat, double *bw);
double coord_traffic_model_params(const coordinator_config *g, int active);
void coord_traffic_step_bytes(const coordinator *c, double *cut_bytes, double *grad_bytes,
                              double *state_bytes);

/* deadline.c — the waits' deadlines from measurements (see there). _init once the options are
 * set; _on_heartbeat with the gap since the peer's previous message and the heartbeat's body;
 * _bound / _started with how long an epoch's bind / start phase took; _json: /status's
 * "deadlines"; _peer_json adds a peer's "deadline" to its /status entry. */
void coord_deadline_init(coordinator *c);
void coord_deadline_on_heartbeat(coordinator *c, coord_peer *p, double gap_s, const cJSON *body);
double coord_deadline_heartbeat_s(coordinator *c, coord_peer *p);
double coord_deadline_bind_s(const coordinator *c);
double coord_deadline_start_s(const coordinator *c);
void coord_deadline_bound(coordinator *c, double took_s);
void coord_deadline_started(coordinator *c, double took_s);
cJSON *coord_deadline_json(coordinator *c);
void coord_deadline_peer_json(coordinator *c, coord_peer *p, cJSON *j);
/* The link deadlines of a train epoch being published (members placed): sets every member's
 * dl_links and the start phase's floor; _epoch_json adds member r's "deadline" object to its
 * EPOCH message ({recv_s, sync_s, fetch_s}, the waits peerd derives from the links). */
void coord_deadline_links(coordinator *c);
void coord_deadline_epoch_json(coordinator *c, int r, cJSON *epoch);

/* recovery.c — a DiLoCo run's start after a loss, from the members' held states: fills
 * start_step and state_from (a rank's own index: it keeps its own state) and logs it. Returns 1,
 * or 0 when some stage has no usable live state (then the checkpoint). */
int coord_recovery_live_sources(coordinator *c);

/* epoch.c */
void coord_epoch_tick(coordinator *c);
void coord_epoch_on_bound(coordinator *c, coord_peer *p, const cJSON *body);
void coord_epoch_on_result(coordinator *c, coord_peer *p, const cJSON *body);
void coord_epoch_on_lost(coordinator *c, coord_peer *p, const char *why);
/* A CHECKPOINT report: taken only from the tasklet that saves that stage's shard in the running
 * train epoch, for a step it can have saved, with the SHA-256 of its SHA256SUMS matching the
 * file when the checkpoint directory is visible here; otherwise dropped, logged and counted.
 * Commits the step once every stage has reported it. */
void coord_epoch_on_checkpoint(coordinator *c, coord_peer *p, const cJSON *body);
/* A checkpoint was committed: re-places the run when a standby would cut the cost enough. */
void coord_epoch_on_commit(coordinator *c);
int coord_scenario_load(coordinator *c);
/* The cost model's constants over the live peers (the first COORD_PROBE_MAX), for /status: the
 * gradient bytes of a stage (c_dp_bytes), the activation bytes of a cut (c_pp_bytes) and a
 * tasklet's compute on the fastest peer (compute_s, seconds per iteration), and whether access
 * links are known. */
cJSON *coord_epoch_problem_json(coordinator *c);
int coord_region_index(coordinator *c, const char *label, char *why, size_t size);
/* The scenario device peer index i emulates: the one it had if still free, else the first device
 * of its region no other live peer emulates, else its region's first (it shares that device's
 * links); -1 without a scenario. */
int coord_scenario_device(coordinator *c, int i);
/* Fills member r's emulated links of the current epoch (netsim_emulation_row over the members'
 * devices). Returns WT_OK or WT_EINVAL. */
int coord_scenario_row(coordinator *c, int r, netsim_emulation *out);
void coord_scenario_close(coordinator *c);

/* holders.c — checkpoints stored by the peers (--checkpoint-storage peers). on: that storage is
 * chosen. open creates its tables in state.db (WT_OK or WT_EIO). on_shards takes a peer's
 * report of its store (endpoint, held[]), replacing what it held; a shard's digest is the one
 * its writer (the seat's tasklet in the running epoch) reported, and copies count only with it.
 * check asks live peers to copy the latest committed step's shards until checkpoint_copies
 * live peers hold each (a lost holder's copies are made again). resume_step: the newest step
 * whose needed shards (every stage's replica 0; every replica's in a stateful run) all have a
 * live holder, 0 = none. ready: whether a train epoch may form: 1 yes; 0 while a committed run
 * has no such step (said once), at most --bind-timeout from when every live peer had reported;
 * then -1 with why (size bytes) naming the shards no live peer holds, and the run must stop.
 * pinned_step: the newest committed step whose needed shards have min(checkpoint_copies, live
 * shard servers) live holders each, 0 = none;
 * check keeps it in holders_pinned, and ack_json puts it in an ACK ("pinned": {run, step,
 * keep}) so that no peer prunes it (peer/shards.h). seat_json adds "storage" and, when the seat
 * resumes, "fetch" (the shards it needs with their digests and live holders) to a train epoch's
 * tasklet object, and tells those holders to let the member in. status adds the holders to /status.
 */
int coord_holders_on(const coordinator *c);
int coord_holders_open(coordinator *c);
void coord_holders_on_shards(coordinator *c, coord_peer *p, const cJSON *body);
/* p (re)registered: its shard server's endpoint is unknown until its next report. */
void coord_holders_on_register(coordinator *c, coord_peer *p);
/* WELCOME's "storage": "peers" and "shard_relay" (its endpoint) when the peers hold the
 * checkpoints: a peer opens its shard server only then. */
void coord_holders_welcome_json(const coordinator *c, cJSON *b);
/* holders.c — the shard relay (parallel/transport/shard_relay.h), open for the coordinator's
 * life when the checkpoints live on the peers: at coord_relay_host on an ephemeral port, with
 * the coordinator's key pair; each peer's key is let in as it registers. open: WT_OK (also when
 * not needed), or WT_EIO; close frees it. */
int coord_shard_relay_open(coordinator *c);
void coord_shard_relay_close(coordinator *c);
void coord_holders_check(coordinator *c);
/* Whether the --checkpoint-store holds every shard of the newest committed step (1 without a
 * store): FINISH waits for it, so the peers that hold them are still there to serve. */
int coord_holders_end_stored(coordinator *c);
long coord_holders_resume_step(coordinator *c);
int coord_holders_ready(coordinator *c, char *why, size_t size);
long coord_holders_pinned_step(coordinator *c);
void coord_holders_ack_json(const coordinator *c, cJSON *ack);
void coord_holders_seat_json(coordinator *c, int rank, cJSON *tasklet);
void coord_holders_status(coordinator *c, cJSON *o);

/* store.c — --checkpoint-store: start creates the directory and the thread (WT_OK with none
 * asked for; WT_EIO), stop joins it. offer queues a committed shard with its writer's digest and
 * live holders (endpoints from holders.c) unless state.db says it is stored; collect, from the
 * loop, records and logs what landed. */
#define COORD_STORE_HOLDERS 8
int coord_store_start(coordinator *c);
void coord_store_stop(coordinator *c);
void coord_store_offer(coordinator *c, long step, int stage, int replica, const char *digest,
                       coord_peer **holders, char (*endpoint)[256], int n);
void coord_store_collect(coordinator *c);
/* Whether shards are queued or in flight; an exiting coordinator waits at most
 * COORD_STORE_DRAIN_S for them. */
int coord_store_busy(coordinator *c);
#define COORD_STORE_DRAIN_S 10.0

#endif
