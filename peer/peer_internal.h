/* peer_internal — the work of one epoch (a link probe or a training tasklet) running on its own
 * thread beside peerd's control loop. Included only by peer/ and tests/peer*. */
#ifndef WT_PEER_INTERNAL_H
#define WT_PEER_INTERNAL_H

#include "common/deadline.h"
#include "model/data.h"
#include "parallel/runtime/run_config.h"
#include "parallel/transport/comm.h"
#include "parallel/transport/zmq.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdint.h>

/* The stage state a peer keeps between epochs (parallel/runtime/tasklet.h's state blob), to start
 * the next epoch from or to hand to a replacement of the same stage. Owned by peerd; the work
 * thread reads and replaces it only while it runs. */
typedef struct {
  void *blob;
  size_t bytes;
  int stage;
  long step;  /* 0: nothing held */
  long outer; /* DiLoCo: the outer steps the state has done; -1 without DiLoCo */
} peer_held;

typedef struct {
  int epoch, rank, size, is_train;
  peer_held *held;         /* borrowed from peerd */
  cJSON *body;             /* the EPOCH message, owned */
  parallel_run_config run; /* a train epoch's run, as the coordinator sent it (checked) */
  int dp_ring[64];         /* its stage's data-parallel ring (the tasklet's dp_ring) */
  parallel_zmq_transport *transport;
  char keys[64][41];
  double *lat, *bw; /* emulated link rows, or NULL */
  pthread_t thread;
  int started;
  volatile int finished;
  volatile sig_atomic_t abort;
  const data_set *data; /* borrowed from peerd's cache */
  /* written by the worker, read after it finished (or under mu for progress) */
  pthread_mutex_t mu;
  int rc;
  char error[1024];
  long steps, step, total_steps;
  double first_loss; /* the loss of step 1 when this epoch ran it, else NaN */
  double loss, tokens_s, bytes_sent, bytes_recv, t_last;
  double bytes_intra, bytes_inter; /* sent over links inside / between regions */
  double bytes_inter_raw;          /* bytes_inter had activations gone as float32 and gradients been
                                      all-reduced in float32 every step */
  long start_step;                 /* the step the epoch's tasklet started from, -1 = none yet */
  double act_saved_row;            /* bytes the activation codec saves per sample row sent */
  double dp_raw_step; /* bytes a plain float32 ring all-reduce sends to the ring's next per step */
  int dp_next;        /* world rank of the ring's next member, -1 = none */
  void *zc;                        /* the zmq communicator while the work runs */
  int stage, replica;
  int site_ranks; /* --gpus: the tasklet's site (set before peer_work_start) */
  struct parallel_site_link *site_link; /* --site, rank 0: the site's processes (borrowed) */
  FILE *log;        /* --json-log (borrowed; written by the work thread only), or NULL */
  int peer_id;      /* the coordinator's id of this peer, for the log */
  int *same_access; /* emulated: members behind this one's access link, or NULL */
  double uplink_Bps, downlink_Bps;
  /* the epoch has unreachable members: BOUND and START carry routes; this peer may host the
   * epoch's relay; relay endpoints on a wildcard address are reached at the coordinator's host */
  int routed;
  struct parallel_zmq_relay *relay;
  char coordinator[300];
  int time_limited; /* the tasklet stopped at the run's time limit */
  /* the robust sync's evidence this epoch (under mu): its syncs, and per replica of this stage
   * the syncs that left its contribution out and the reasons (PARALLEL_ROBUST_FLAG_* bits) */
  long trust_syncs;
  long trust_flagged[64];
  uint32_t trust_why[64];
  /* a probe's rows, size entries each, -1 unmeasured: the latency to each rank and the
   * bandwidth to it alone, and to it in a contention round of this peer's region (up) or of
   * its region (down) */
  double *probe_lat, *probe_bw, *probe_up_round, *probe_down_round;
  /* the spot checks this peer made this epoch (under mu), per replica of its stage checked */
  long spot_checked[64], spot_failed[64];
  /* this epoch's measured compute (under mu): the steps taken and their forward / backward
   * seconds, which the coordinator sets against the peer's claimed FLOP/s */
  long compute_steps;
  double compute_s;
  /* deadline.c: the receive deadline from this epoch's step times (under mu) */
  wt_deadline dl_step, dl_sync; /* usual steps; DiLoCo's outer steps */
  double dl_cap_s, dl_recv_s;   /* the coordinator's timeout_s; the deadline now */
  double dl_link_recv_s, dl_link_sync_s; /* the epoch's link floors (0: none) */
  /* checkpoints on the peers (peer/shards.h): the store's root, "" = the run's own directory;
   * this peer's keys, to fetch the shards its seat resumes from */
  char shard_root[2048];
  char pub[41], sec[41];
  uint64_t run_id; /* the coordinator's run id, which names the run's directory in the store */
} peer_work;

/* Parses an EPOCH body and binds the data socket (tcp://host:*). coordinator is the control
 * endpoint: a relay endpoint on a wildcard address (a coordinator bound to every address) is
 * reached at its host. NULL with wt_last_error(). */
peer_work *peer_work_new(const cJSON *epoch, const char *host, const char *coordinator,
                         const char *pub, const char *sec, const data_set *data, peer_held *held);
const char *peer_work_endpoint(const peer_work *w);
/* The run keeps its checkpoints on the peers: the tasklet writes into its own directory of the
 * store under root (replacing the run's checkpoint-dir) and, when it resumes, first checks or
 * fetches the shards its seat needs (peer/shards.h). */
void peer_work_use_store(peer_work *w, const char *root);

/* BOUND's routes (docs/protocol.md "Reachability and relays"): in an epoch with unreachable
 * members, "outboxes" (this peer's outbox endpoint for each of them, null for the others), and
 * "relay_in" / "relay_out" when it hosts the epoch's relay. */
void peer_work_outboxes_json(const peer_work *w, cJSON *bound);
/* Connects to the endpoints of START and starts the thread. */
int peer_work_start(peer_work *w, const cJSON *start);
/* Asks the work to stop, waits for it (bounded by the epoch's deadline) and frees it. */
void peer_work_destroy(peer_work **self_p);
/* The RESULT body for a finished work (caller frees with cJSON_Delete). */
cJSON *peer_work_result(peer_work *w);

/* Adds the epoch's robust-sync evidence to a HEARTBEAT or RESULT body as "trust" (nothing
 * without a robust run): {"syncs": n, "flagged": [per replica], "why": ["norm,cosine", ...],
 * "spot_checked", "spot_failed": [per replica: the spot checks this peer itself made of it]};
 * and, once a train epoch took a step, its measured compute as "compute": {"steps", "s"}. */
void peer_work_trust_json(peer_work *w, cJSON *body);
/* A probe epoch's measurements (peer/probe.c): fills the probe rows of w. Returns WT_OK or the
 * transport's error (every wait has the transport's deadline, and none lasts longer than one
 * pair's probe). */
int peer_probe_run(peer_work *w, parallel_comm *c);

/* deadline.c — the receive deadline (see there): _start with the cap (the epoch's timeout_s)
 * and the EPOCH message's "deadline" object (may be NULL: no link floors); _on_step after step
 * `step`, which took dt seconds since the previous one, sets the transport's timeout for the next
 * and returns it; _json adds {"deadline": {recv_s, cap_s, step_q90_s, steps_measured, link_s}}
 * to a heartbeat. Call the last two under w->mu. _fetch_s: the deadline of each holder's shard
 * fetch, from the EPOCH message (its "deadline" fetch_s, at most timeout_s). */
void peer_deadline_start(peer_work *w, double cap_s, const cJSON *links);
double peer_deadline_fetch_s(const cJSON *epoch);
double peer_deadline_on_step(peer_work *w, long step, double dt);
void peer_deadline_json(const peer_work *w, cJSON *body);

/* Frees what a peer holds and marks it empty. */
void peer_held_clear(peer_held *h);

/* The state hand-over at the start of a train epoch that names state_from (one source rank per
 * world rank). This rank first sends its held blob — behind a 48-byte header of step, size and
 * SHA-256 — to every rank that names it, whatever stage it now serves itself, then takes its own
 * start: its held blob (*owned = 0; it must hold `stage` at `step`) or one received from its
 * source (*owned = 1, malloc'd), refused unless digest, stage and step match. With live = 1 (a
 * DiLoCo run, parallel_run_config_live_recovery) a state of an earlier step is taken too: the
 * tasklet moves it on to `step` (tasklet.h's start_step). Sources send before anyone receives,
 * so no two ranks wait on each other. Returns WT_OK, WT_EINVAL (a state_from this peer cannot
 * serve), WT_ECORRUPT (a damaged or wrong blob) or the transport's error. */
int peer_state_exchange(const peer_held *held, parallel_comm *world, const cJSON *from, int stage,
                        long step, int live, const void **in, size_t *in_bytes, int *owned);

/* What peerd reports about its device: the best FLOP/s of a few fp32 matmuls on that back end
 * (256³ on the CPU, 2048³ on a GPU) and the memory it holds in all. */
int peer_device_measure(const char *device, double *flops, double *memory);

#endif
