/* netsim — network scenarios, random topologies and a discrete-event simulator of one training
 * iteration for an assignment (assign_plan). The `netsim` program (netsim/cli/) builds the
 * experiments on top of it: compare solvers, sweep scenarios, simulate and trace one plan.
 *
 * Scenario files are JSON (the format of shared/scenarios/dtfm-2022.json; the project ships its
 * own copy in netsim/scenarios/dtfm-2022.json):
 *   { "cost_model_constants": { "c_dp_bytes_per_stage": B, "c_pp_bytes_per_cut": B,
 *                               "d_pp": S, "d_dp": R, ...optional... },
 *     "scenarios": [ {"name": .., region form or datacenter form, ...optional...}, ... ] }
 *   region form:     "gpus_per_region": [g0, g1, ..], "latency_ms": k×k, "bandwidth_gbps": k×k
 *                    (the diagonal is the link within a region), optional "regions": [names]
 *   datacenter form: "groups": [g0, ..], "intra_gbps": x, "inter_gbps": y, "latency_ms": z
 * Optional fields (per scenario, or in cost_model_constants as the default for all):
 *   "d_pp", "d_dp"          override the document's pipeline/data-parallel degrees
 *   "gpus"                  total devices; checked against the layout when present
 *   "device_tflops"         effective FLOP/s ×1e-12 of one device: a number, or one per region
 *                           (group) — default 30 (a V100 at ~25% of its fp16 tensor peak)
 *   "nic_gbps"              each device's NIC (ingress and egress each); a number or one per
 *                           region — default: the device's fastest link
 *   "memory_gb"             a number or one per region; default unlimited
 *   "site_gpus"             GPUs inside each device of the region (group), a number or one per
 *                           region; default 1. A device with N > 1 is a site that runs its stage
 *                           with TP/CP/EP inside (parallel/datacenter/mesh.h); the solvers and the
 *                           simulator see one device of N × site_efficiency × device_tflops and
 *                           N × memory_gb (assign_site_device); its NIC stays nic_gbps
 *   "site_efficiency"       the fraction of linear scaling a site keeps, in (0, 1]; a number or
 *                           one per region (also a constant); default 1
 *   "hidden_size", "activation_bytes"  (constants only) to derive tokens per iteration from
 *                           c_pp (defaults 2048 and 2, GPT3-XL in fp16)
 *   "uplink_gbps", "downlink_gbps"  access-link capacities (per scenario): a number or one per
 *                           region, 0 = unlimited; absent = unlimited (the paper's model)
 *   "access"                "device" (default: each device has its own access link of those
 *                           capacities) or "region" (the devices of a region share one access
 *                           link: a home, or a site behind one uplink; traffic inside it does
 *                           not cross it)
 * Units on load: latency ms one way → s; bandwidth Gbit/s → bytes/s = Gbps·1e9/8. Devices are
 * numbered region by region (group by group). Matrices are directed, row = from, column = to:
 * a symmetric matrix is both directions (old files load exactly as before).
 *
 * Simulator model (netsim_simulate):
 *   - every tasklet (stage s of replica r) runs forward and backward passes of m micro-batches
 *     in the schedule's order (GPipe: all forwards then all backwards; 1F1B: S−s−1 warm-up
 *     forwards, then one-forward-one-backward, then the remaining backwards). A pass takes
 *     fwd_s / speed (bwd_s / speed) on a device of relative speed `speed`.
 *   - an activation (forward) and its gradient (backward) cross each pipeline cut per
 *     micro-batch as transfers of act_bytes: arrival = sending done + one-way latency.
 *   - concurrent transfers share bandwidth max-min fairly (progressive filling): each transfer
 *     is capped by its pair's bandwidth, all transfers leaving (entering) a device share its
 *     egress (ingress) NIC, and transfers between different access links share the sender's
 *     uplink and the receiver's downlink (cfg.access). Rates are recomputed whenever a
 *     transfer starts or ends.
 *   - after its last backward pass each stage's data-parallel group reduces grad_bytes:
 *     ring (2(D−1) steps of grad_bytes/D around the replicas in the plan's ring order, see
 *     netsim_sim_config.dp_ring) or sharded
 *     parameter server (every device sends shard j to device j, then j sends it back reduced).
 *   - what wantrain's runtime adds, each switched on in the config: passes timed per stage;
 *     recomputation (the executor holds one micro-batch's activations, so any other backward
 *     runs its forward again first); the tied embedding's gradient swapped between the first
 *     and last stage of each replica before their reduce; and a one-round exchange of a small
 *     message (gradient-norm share, loss) between every pair of tasklets after the reduce,
 *     which ends the step.
 *   - breakdown: compute = the busiest device's compute time; bubble = the end of the pipeline
 *     phase with free pipeline transfers minus compute; pipeline comm = what real pipeline
 *     transfers add to that end; data-parallel comm = iteration − end of the pipeline phase.
 *     The four sum to the iteration time.
 */
#ifndef WT_NETSIM_H
#define WT_NETSIM_H

#include "assign/assign.h"

#include <stdint.h>

/* ---- scenarios ------------------------------------------------------------------------------ */

typedef struct netsim_scenario netsim_scenario;
typedef struct netsim_scenario_set netsim_scenario_set;

/* Loads and validates a scenario document into a new set the caller destroys. A bad file
 * (unreadable, not JSON, a missing field, a wrong type, a non-square matrix, a negative or zero
 * bandwidth, d_pp×d_dp ≠ devices) returns NULL with wt_last_error() naming the file, the
 * scenario and the field, and wt_last_status() WT_EINVAL or WT_ENOTFOUND. */
netsim_scenario_set *netsim_scenario_set_load(const char *path);
void netsim_scenario_set_destroy(netsim_scenario_set **self_p);
int netsim_scenario_set_count(const netsim_scenario_set *self);
/* The i-th scenario, owned by the set. */
const netsim_scenario *netsim_scenario_set_get(const netsim_scenario_set *self, int i);
/* The scenario named `name`; or, when name is NULL or "", the only one (WT_EINVAL if the set
 * holds several). WT_ENOTFOUND lists the names the file holds. */
int netsim_scenario_set_find(const netsim_scenario_set *self, const char *name,
                             const netsim_scenario **out);

/* The project's shipped scenario file: $WT_SOURCE_DIR or the source tree compiled in, then
 * netsim/scenarios/dtfm-2022.json. Static string. */
const char *netsim_scenario_default_path(void);

/* A random world of n_regions regions with gpus_per_region devices each, reproducible from
 * seed: regions are placed uniformly on the Earth's surface; one-way latency = great-circle
 * distance / (2/3 c) + 2 ms of routing overhead (5 ms within a region); bandwidth falls with
 * distance from ~1.2 Gbit/s to ~0.3 Gbit/s (2 Gbit/s within a region), ±10% noise.
 * d_pp = n_regions and d_dp = gpus_per_region; the cost constants are the paper's (GPT3-XL).
 * Caller destroys; NULL when a count is below 1. */
netsim_scenario *netsim_scenario_random(int n_regions, int gpus_per_region, uint64_t seed);
/* A copy of `base` in which every pair of devices has its own link: latency and bandwidth each
 * scaled by a factor drawn uniformly from [1 − jitter, 1 + jitter] (symmetric, 4 significant
 * digits in ms and Gbit/s), and, when shuffle is set, device ids permuted at random, so that no
 * solver can read regions from the numbering. Every device is its own region (a saved file holds
 * n×n matrices); NICs are recomputed as each device's fastest link. Reproducible from seed.
 * Caller destroys; NULL when jitter is outside [0, 1). */
netsim_scenario *netsim_scenario_jitter(const netsim_scenario *base, double jitter, int shuffle,
                                        uint64_t seed);
/* Destroys a scenario made by netsim_scenario_random or netsim_scenario_jitter. */
void netsim_scenario_destroy(netsim_scenario **self_p);

const char *netsim_scenario_name(const netsim_scenario *self);
/* The devices' network (latency s, bandwidth B/s, compute speed, memory), owned by the scenario. */
const assign_network *netsim_scenario_network(const netsim_scenario *self);
/* The cost-model problem of the scenario (d_pp, d_dp, c_dp, c_pp, its access links or NULL;
 * dp_algo the paper's sharded PS — set ASSIGN_DP_RING, or netsim_scenario_default_dp_algo, to
 * price the runtime's ring); problem->net and problem->access point into the scenario. */
void netsim_scenario_problem(const netsim_scenario *self, assign_problem *problem);
/* Region (group) index of device d, and a region's name (a "region K" label when unnamed). */
int netsim_scenario_region_of(const netsim_scenario *self, int d);
int netsim_scenario_region_count(const netsim_scenario *self);
const char *netsim_scenario_region_name(const netsim_scenario *self, int region);
/* Per-device NIC capacity in bytes/s (n entries, owned by the scenario). */
const double *netsim_scenario_nic(const netsim_scenario *self);
/* The scenario's access links (owned by the scenario), or NULL when it has none (unlimited
 * access: the paper's model). netsim_scenario_problem puts it in the problem. */
const assign_access *netsim_scenario_access(const netsim_scenario *self);
/* 1 when some pair's two directions differ (latency or bandwidth). */
int netsim_scenario_directed(const netsim_scenario *self);
/* The data-parallel algorithm a scenario is priced with by default: the paper's sharded
 * parameter server when it has symmetric pairs and no access links (so its numbers are the
 * paper's), else the ring the runtime runs. */
assign_dp_algo netsim_scenario_default_dp_algo(const netsim_scenario *self);
/* Forward+backward FLOPs of one stage for one whole iteration (all micro-batches), derived as
 * 6 · (c_dp/4 parameters) · (c_pp / (hidden·activation_bytes) tokens). */
double netsim_scenario_stage_flops(const netsim_scenario *self);
/* Effective FLOP/s of a speed-1 device (compute_speed is relative to it). */
double netsim_scenario_reference_flops(const netsim_scenario *self);

/* Writes the scenario as a one-scenario document in the region form (loadable again): links
 * (each direction), region sizes, access links when they are per region or per device with
 * one capacity per region, cost constants and the reference FLOP/s; per-region compute speed,
 * NIC and memory are not written. Returns WT_OK or WT_EIO naming the path. */
int netsim_scenario_save(const netsim_scenario *self, const char *path);

/* ---- assignment files ------------------------------------------------------------------------ */

/* Reads an "assignment" object ({"groups": [[stage 0 devices], ...], "pipelines": [[device of
 * stage 0, ...] per replica], "rings": [[replica at ring position 0, ...] per stage]}; groups
 * or pipelines alone is enough, and when both are given they must agree; rings is optional
 * and, when given, must hold each stage's replicas once, starting with replica 0; a whole
 * compare result entry {"assignment": {...}} is accepted too) and checks it against d_pp × d_dp
 * devices: right shape, every device exactly once. On WT_OK *out is a new plan.
 * WT_EINVAL names the file and the problem. */
int netsim_assignment_load(const char *path, int d_pp, int d_dp, assign_plan **out);
/* Builds the JSON "assignment" object of a plan, with "rings" when the plan has them (caller
 * frees with cJSON_Delete). */
struct cJSON *netsim_assignment_to_json(const assign_plan *plan);

/* ---- WAN emulation ----------------------------------------------------------------------------

   The one place that turns a scenario into what the transport emulates (parallel/transport/zmq.h):
   for a group of n peers, member j emulating scenario device device[j], member `me`'s rows. Two
   members on one device (more peers than a region has devices) talk over their region's own link.
   Access links: the member's uplink and downlink capacities (0 = unlimited, as the scenario's
   INFINITY), and which members share its access link, whose traffic crosses neither. */
typedef struct {
  double *latency_s;     /* n, caller's: one-way latency to member j (0 to itself) */
  double *bandwidth_Bps; /* n, caller's: path bandwidth to member j (0 to itself) */
  int *same_access;      /* n, caller's: 1 when member j is behind this member's access link */
  double up_Bps, down_Bps;
} netsim_emulation;

/* Fills *out (its arrays, n entries each, are the caller's) for member `me`. Returns WT_OK, or
 * WT_EINVAL when me or a device is out of range. */
int netsim_emulation_row(const netsim_scenario *sc, const int *device, int n, int me,
                         netsim_emulation *out);

/* ---- simulator ------------------------------------------------------------------------------- */

typedef enum { NETSIM_GPIPE = 0, NETSIM_1F1B = 1 } netsim_schedule;

typedef struct {
  netsim_schedule schedule;
  int micro_batches;      /* m >= 1 */
  double fwd_s, bwd_s;    /* one micro-batch through one stage on a speed-1 device */
  double act_bytes;       /* bytes crossing one cut per micro-batch, each direction */
  double grad_bytes;      /* gradient bytes of one stage, reduced across its replicas */
  assign_dp_algo dp_algo; /* ring or sharded parameter server */
  const double *nic_Bps;  /* n per-device NIC capacities; NULL = each device's fastest link */
  double max_seconds;     /* wall-clock limit of one netsim_simulate call; 0 = none */
  /* What wantrain's runtime does besides (all off when zero, as in the cost model): */
  const double *stage_fwd_s; /* d_pp forward times, one per stage (backward = 2×); NULL = fwd_s */
  int recompute;     /* a backward whose micro-batch is not the latest forward reruns it first */
  double tied_bytes; /* first and last stage swap the tied embedding's gradient before reducing */
  int norm_exchange; /* after its reduce each tasklet sends norm_bytes to every other */
  double norm_bytes;
  const int *dp_ring; /* d_pp × d_dp: each stage's replicas in ring order; NULL = the plan's
                         rings (plan->ring), or without them the order netsim_ring_order picks */
  const assign_access *access; /* access links shared by transfers; NULL = none */
} netsim_sim_config;

/* The order of stage `stage`'s data-parallel ring: its replicas (ring[0..d_dp-1], starting with
 * replica 0) in the order assign_ring_order picks for hop costs α + (grad_bytes/d_dp)/β between
 * their devices — the cost model's ring on a network without access links. With access links
 * use netsim_ring_order_access (or the rings assign_solve puts in the plan). */
void netsim_ring_order(const assign_network *net, const assign_plan *plan, int stage,
                       double grad_bytes, int *ring);
/* As netsim_ring_order, over the whole network model: assign_ring_choose with access links
 * (NULL = none, the same ring as netsim_ring_order). */
void netsim_ring_order_access(const assign_network *net, const assign_access *access,
                              const assign_plan *plan, int stage, double grad_bytes, int *ring);

typedef struct {
  double iteration_s;    /* the whole iteration: pipeline phase + exposed all-reduce */
  double compute_s;      /* busiest device's compute */
  double bubble_s;       /* idle time that remains with free pipeline transfers */
  double pp_comm_s;      /* what pipeline transfers add */
  double dp_comm_s;      /* data-parallel reduce after the pipeline phase */
  double pipeline_end_s; /* last backward pass ends */
  int n_compute;         /* compute events (2 · m · tasklets) */
  int n_transfers;       /* pipeline + data-parallel transfers */
  int n_recomputes;      /* backward passes that reran their forward (cfg.recompute) */
} netsim_sim_result;

/* Backward passes of stage `stage` (of n_stages, m micro-batches) that rerun their forward when
 * the executor keeps only its latest forward's activations (cfg.recompute): m for GPipe when
 * m > 1, fewer for 1F1B. -1 for a stage or m out of range. */
int netsim_schedule_recomputes(netsim_schedule schedule, int stage, int n_stages, int m);

typedef struct netsim_trace netsim_trace;

/* Fills a config from a scenario: m micro-batches, fwd/bwd from the scenario's stage FLOPs and
 * reference FLOP/s (forward 1/3, backward 2/3), act_bytes = c_pp/m, grad_bytes = c_dp, sharded
 * PS, the scenario's NICs and access links. */
void netsim_sim_config_from_scenario(const netsim_scenario *s, netsim_schedule schedule, int m,
                                     netsim_sim_config *cfg);

/* Simulates one iteration of `plan` on `net`. trace_p may be NULL; otherwise *trace_p receives
 * a new timeline the caller destroys. Returns WT_EINVAL for a plan that does not fit the network
 * (wrong shape, a device out of range or twice), a config out of range, or times that overflow
 * double-precision seconds; WT_ETIMEOUT when cfg->max_seconds of wall time pass first.
 * Any finite latencies and positive bandwidths simulate: every event retires a transfer or a
 * task, so a run takes at most 2·(tasks) events whatever the clock reads. Cost: each start or end
 * of a transfer re-shares the connected group of transfers it touches (through shared NICs), so
 * all-to-all reduces (sharded PS, d_dp replicas) cost ~d_dp² per event; see docs/netsim.md. */
int netsim_simulate(const assign_network *net, const assign_plan *plan,
                    const netsim_sim_config *cfg, netsim_sim_result *out, netsim_trace **trace_p);

/* Transfers alone, for tests and for checking the emulated WAN: transfer i moves bytes[i] from
 * src[i] to dst[i], becoming ready at start_s[i]; writes when each arrives (sending done +
 * latency) into arrive_s[i]. Same sharing model as netsim_simulate. WT_EINVAL for a transfer
 * to itself, an endpoint out of range, or a negative size or start. */
int netsim_transfers_simulate(const assign_network *net, const double *nic_Bps, int count,
                              const int *src, const int *dst, const double *bytes,
                              const double *start_s, double *arrive_s);
/* As netsim_transfers_simulate, with access links shared by the transfers (NULL = none). */
int netsim_transfers_simulate_access(const assign_network *net, const assign_access *access,
                                     const double *nic_Bps, int count, const int *src,
                                     const int *dst, const double *bytes, const double *start_s,
                                     double *arrive_s);

/* The timeline as Chrome trace JSON ({"traceEvents": [...]}: one "X" event per compute pass
 * (cat "compute", tid 0), one per transfer on the sender (cat "send", tids 100+) and one on the
 * receiver (cat "recv", tids 200+), pid = device; overlapping transfers get separate lanes so
 * slices nest; "M" events name processes and lanes). Caller frees the string. */
char *netsim_trace_to_json(const netsim_trace *self);
/* Writes the JSON to path; WT_OK or WT_EIO naming the path. */
int netsim_trace_write(const netsim_trace *self, const char *path);
void netsim_trace_destroy(netsim_trace **self_p);

#endif
