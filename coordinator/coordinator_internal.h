/* coordinator_internal — the daemon's state shared between its files (coordinator.h is the
 * contract). Included only by coordinator/ and tests/coordinator. */
#ifndef WT_COORDINATOR_INTERNAL_H
#define WT_COORDINATOR_INTERNAL_H

#include "assign/assign.h"
#include "coordinator/coordinator.h"
#include "coordinator/http.h"
#include "coordinator/protocol.h"
#include "netsim/netsim.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdint.h>

#define COORD_MAX_PEERS 256
#define COORD_KEY_LEN 40
#define COORD_LOSS_HIST 2000
#define COORD_PROBE_MAX 64 /* members of one probe epoch */

typedef enum { PEER_GONE = 0, PEER_LIVE = 1 } coord_peer_status;

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
  int promote_refused; /* its measured links did not keep a promotion's gain: not asked again */
  /* its access link as the probes estimated it (coordinator/probe.c): capacities in bytes/s
   * (0 = not measured) and the link's id (the peer id of its first peer; peers that share one
   * have the same), and the contention rounds' together/alone ratios (-1 = none) */
  double up_Bps, down_Bps;
  int access_link;
  double up_ratio, down_ratio;
} coord_peer;

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
  coord_peer peers[COORD_MAX_PEERS]; /* slots; those of peers gone for good are reused */
  int n_peers;
  int next_peer_id;     /* ids are never reused: one more than any the state database holds */
  double refusal_log_t; /* start of the window of refusals logged (s_refusal_log) */
  int refusal_log_n;    /* lines logged in that window */
  uint64_t refusal_log_skipped; /* refusals not logged in it */
  /* scenario (WAN emulation) */
  netsim_scenario_set *scenario_set;
  const netsim_scenario *scenario; /* the emulated WAN, or NULL */
  /* the run */
  uint64_t run_id;
  int run_complete;
  long committed_step; /* latest complete checkpoint */
  int epoch;           /* current epoch number (0 = none yet) */
  char epoch_kind[8];  /* "probe" or "train" */
  coord_epoch_phase phase;
  double phase_deadline;
  int members[COORD_MAX_PEERS]; /* peer indices by epoch rank */
  int n_members;
  int plan_members[COORD_MAX_PEERS]; /* the last train epoch's peers, by world rank */
  /* each stage's data-parallel ring in the last placement: rings[s*R + i] is the replica at
   * position i of stage s's ring (rings[s*R] = 0); n_rings = S·R entries, 0 = replica order */
  int rings[COORD_MAX_PEERS];
  int n_rings;
  /* where the train epoch's tasklets start: from_peers = 1: at start_step from the members'
   * held states, rank r's from rank state_from[r]; 0: from the latest complete checkpoint */
  int from_peers, state_from[COORD_MAX_PEERS];
  long start_step;
  int promote; /* peer index of a standby to place at the next train epoch, -1 = none */
  int n_plan;
  double cost_ga, cost_random;
  int failed_epochs;      /* consecutive train epochs that ended without progress */
  int missed_checkpoints; /* failed train epochs since the last commit that trained past a
                           * checkpoint step they did not commit (a checkpoint that cannot be
                           * saved, e.g. on a full disk) */
  int ckpt_unchecked;     /* the checkpoint directory is not visible here (said once) */
  char last_error[1024];
  int last_error_echo; /* last_error is a neighbour's lost link, not a cause */
  double first_loss, last_loss;
  long last_step;
  double lost_at, recovery_s;
  int it_epoch; /* measured iteration time: epoch, start time and step, result */
  double it_t0, iteration_s;
  long it_step0; /* when a member was lost; how long until training resumed */
  /* the loss curve (from heartbeats; thinned to half when full) and link rates */
  int n_hist;
  long hist_step[COORD_LOSS_HIST];
  float hist_loss[COORD_LOSS_HIST];
  double rate_t, rate_intra, rate_inter, prev_intra, prev_inter;
  pthread_mutex_t mu; /* held while the loop handles messages; the HTTP thread reads under it */
  coordinator_http *http;
  /* probed links between peer ids: latency (s) and bandwidth (B/s), -1 = not measured */
  double *lat, *bw; /* COORD_MAX_PEERS² by peer index; lat[a][b], bw[a][b]: a to b */
  /* the running probe epoch's contention rounds by epoch rank: [from * COORD_PROBE_MAX + to],
   * bytes/s while the region of `from` (up) or of `to` (down) sent or received at once */
  double probe_up[COORD_PROBE_MAX * COORD_PROBE_MAX], probe_down[COORD_PROBE_MAX * COORD_PROBE_MAX];
};

/* state.c — SQLite */
int coord_state_open(coordinator *c);
void coord_state_close(coordinator *c);
int coord_state_load(coordinator *c);
void coord_event(coordinator *c, const char *kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void coord_state_save_peer(coordinator *c, const coord_peer *p);
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
/* The measured directed matrix and access links of the live peers, for /status. */
cJSON *coord_probe_json(coordinator *c);

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

/* daemon.c */
void coord_send(coordinator *c, coord_peer *p, coordinator_cmd cmd, const cJSON *body);

/* status.c */
cJSON *coord_status(coordinator *c);
void coord_status_tick(coordinator *c);
/* A point of the loss curve: record keeps it in memory (thinned to half when full) and in the
 * state database, from which a restarted coordinator loads it with keep. */
void coord_loss_record(coordinator *c, long step, float loss);
void coord_loss_keep(coordinator *c, long step, float loss);

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
/* The cost model's constants over the live peers, for /status: the gradient bytes of a stage
 * (c_dp_bytes), the activation bytes of a cut (c_pp_bytes) and a tasklet's compute on the
 * fastest peer (compute_s, seconds per iteration), and whether access links are known. */
cJSON *coord_epoch_problem_json(coordinator *c);
int coord_region_index(coordinator *c, const char *label, char *why, size_t size);

#endif
