/* options — the coordinator's option table (the run's rows and its own) and its check. */
#include "coordinator/coordinator_internal.h"

#include "common/common.h"

#include <stddef.h>
#include <stdio.h>
#include <string.h>

#define F(x) offsetof(coordinator_config, x)
static const wt_option s_options[] = {
    {"state-dir", WT_OPT_STRING, F(state_dir), 0, 0, "coordinator-state",
     "directory of the state database, keys and tokens (made if missing)", 0},
    {"bind", WT_OPT_STRING, F(bind), 0, 0, "tcp://127.0.0.1:*",
     "control endpoint (tcp://HOST:PORT; port * picks a free one)", 0},
    {"open", WT_OPT_FLAG, F(open), 0, 1, "0", "admit peers without a join token", 0},
    PARALLEL_RUN_MODEL_OPTIONS(coordinator_config, run.),
    GPT_MOE_OPTIONS(coordinator_config, run.moe),
    PARALLEL_RUN_DATA_OPTIONS(coordinator_config, run.),
    PARALLEL_RUN_STEPS_OPTIONS(coordinator_config, run.),
    PARALLEL_RUN_OPTIM_OPTIONS(coordinator_config, run.),
    PARALLEL_RUN_PIPELINE_OPTIONS(coordinator_config, run.),
    PARALLEL_RUN_SYNC_OPTIONS(coordinator_config, run.),
    PARALLEL_RUN_CHECKPOINT_OPTIONS(coordinator_config, run.),
    PARALLEL_RUN_SITE_OPTIONS(coordinator_config, run.),
    PARALLEL_RUN_LIMIT_OPTIONS(coordinator_config, run.),
    {"solver", WT_OPT_CHOICE, F(solver), 0, 0, "ga",
     "placement solver (none: world rank w on --scenario's device w, else in the order the peers "
     "joined; random: the best of many random partitions; shuffle: one random placement, the "
     "baseline the GA's gain is measured against)",
     "none|ga|random|greedy|megatron|deepspeed|exact|shuffle"},
    {"assignment", WT_OPT_STRING, F(assignment), 0, 0, "",
     "a fixed placement instead of --solver: netsim's assignment JSON of --scenario's devices "
     "(world rank w on the peer emulating its device w)",
     0},
    {"links", WT_OPT_CHOICE, F(links), 0, 0, "probe",
     "where placement takes the links from: probe them, or --scenario's own (no probe epoch)",
     "probe|scenario"},
    {"resume", WT_OPT_FLAG, F(resume), 0, 1, "0",
     "continue the run in --checkpoint-dir from its manifest (a state directory that has "
     "committed nothing yet)",
     0},
    {"checkpoint-storage", WT_OPT_CHOICE, F(checkpoint_storage), 0, 0, "auto",
     "where checkpoints live: shared (--checkpoint-dir, which every peer reaches), peers (each "
     "peer's --data-dir; the coordinator names holders and keeps --checkpoint-copies of each "
     "committed shard on distinct live peers), or auto: peers for a run that keeps state across "
     "steps (DiLoCo, error feedback, delta activation caches) and names no --checkpoint-dir, or "
     "that gives --checkpoint-store; shared otherwise",
     "auto|shared|peers"},
    {"checkpoint-copies", WT_OPT_INT, F(checkpoint_copies), 1, 64, "2",
     "with checkpoints on the peers: live peers that hold every committed shard", 0},
    {"checkpoint-store", WT_OPT_STRING, F(checkpoint_store), 0, 0, "",
     "with checkpoints on the peers: a directory on the coordinator's machine that receives "
     "every committed shard too (fetched from the peers, digest checked)",
     0},
    {"probe-kib", WT_OPT_INT, F(probe_kib), 16, 65536, "512",
     "bytes of each link's bandwidth probe, KiB", 0},
    {"scenario", WT_OPT_STRING, F(scenario), 0, 0, "",
     "netsim scenario file to emulate the WAN from (peers give --region)", 0},
    {"scenario-name", WT_OPT_STRING, F(scenario_name), 0, 0, "",
     "the scenario in --scenario (default: its first)", 0},
    {"time-scale", WT_OPT_FLOAT, F(time_scale), 1e-6, 1e6, "1", "wall seconds per emulated second",
     0},
    {"heartbeat", WT_OPT_FLOAT, F(heartbeat_s), 0.05, 60, "0.5", "heartbeat interval, seconds", 0},
    {"liveness", WT_OPT_INT, F(liveness), 2, 100, "6", "missed heartbeats before a peer is dropped",
     0},
    {"peer-timeout", WT_OPT_FLOAT, F(peer_timeout_s), 1, 3600, "15",
     "deadline of every data-plane wait on the peers, seconds", 0},
    {"max-peers", WT_OPT_INT, F(max_peers), 16, 1e6, "10000",
     "peers the coordinator holds at once: live ones and those the run still needs (a "
     "registration past them is refused, logged and counted)",
     0},
    {"bind-timeout", WT_OPT_FLOAT, F(bind_timeout_s), 1, 3600, "30",
     "seconds an epoch's members have to bind their data sockets, and then to start", 0},
    {"sideline", WT_OPT_FLOAT, F(sideline_s), 1, 86400, "60",
     "seconds a member that missed an epoch's deadline is left out of epochs (doubling with "
     "each miss in a row, up to 64 times)",
     0},
    {"max-connections", WT_OPT_INT, F(max_connections), 16, 1e6, "12000",
     "control connections open at once, from all addresses (lowered at start to fit the "
     "open-file limit, ulimit -n)",
     0},
    {"max-connections-per-source", WT_OPT_INT, F(max_per_source), 1, 1e6, "64",
     "control connections open at once from one address (the peers behind one NAT or on one "
     "host share it); a peer admitted before is not held to it",
     0},
    {"relay", WT_OPT_CHOICE, F(relay), 0, 0, "coordinator",
     "who relays between unreachable members: the coordinator, or the reachable member with "
     "the largest probed uplink (peer; the coordinator when none is reachable)",
     "coordinator|peer"},
    {"relay-host", WT_OPT_STRING, F(relay_host), 0, 0, "",
     "address the relay between unreachable peers binds and announces (default: --bind's host)", 0},
    {"relay-port-min", WT_OPT_INT, F(relay_port_min), 0, 65535, "0",
     "first port of the relay's range: two per unreachable member of an epoch, one for the "
     "shard relay (0: ephemeral ports)",
     0},
    {"relay-port-max", WT_OPT_INT, F(relay_port_max), 0, 65535, "0",
     "last port of the relay's range (0 with --relay-port-min 0)", 0},
    {"exit-when-done", WT_OPT_FLAG, F(exit_when_done), 0, 1, "0", "exit once the run is complete",
     0},
    {"http-bind", WT_OPT_STRING, F(http_bind), 0, 0, "127.0.0.1",
     "address of the status server (/status, /metrics, dashboard)", 0},
    {"http-port", WT_OPT_INT, F(http_port), -1, 65535, "0",
     "port of the status server (0 = a free one, -1 = no server)", 0},
    {0}};
#undef F

const wt_option *coordinator_options(void) {
  return s_options;
}

/* The run's device rows are not the coordinator's options (each peer computes on its own
 * --device): the run it sends names their defaults. */
static void s_default_device_rows(parallel_run_config *run) {
  const parallel_run_config d = parallel_run_config_default();
  memcpy(run->device, d.device, sizeof run->device);
  memcpy(run->precision, d.precision, sizeof run->precision);
  run->tf32 = d.tf32;
}

/* Resolves --checkpoint-storage auto and refuses contradicting checkpoint flags. A replacement
 * peer of a run that keeps state across steps must find the lost replica's .state file: in a
 * --checkpoint-dir every peer shares, or on the peers that hold copies of it. A volunteer run
 * names no shared directory (the default one under the coordinator's state directory is shared
 * only when all run on its host), so auto keeps such a run's checkpoints on the peers. */
static int s_checkpoint_storage(coordinator_config *cfg) {
  const char *dir = cfg->run.checkpoint_dir;
  cfg->checkpoint_storage_auto = !strcmp(cfg->checkpoint_storage, "auto");
  if (cfg->checkpoint_storage_auto && dir[0] && cfg->checkpoint_store[0])
    return wt_fail(WT_EINVAL,
                   "--checkpoint-store receives the shards the peers store, and "
                   "--checkpoint-dir %s is a directory every peer shares instead; "
                   "give one of them",
                   dir);
  if (cfg->checkpoint_storage_auto) {
    const int peers =
        cfg->checkpoint_store[0] || (!dir[0] && parallel_run_config_stateful(&cfg->run));
    snprintf(cfg->checkpoint_storage, sizeof cfg->checkpoint_storage, "%s",
             peers ? "peers" : "shared");
  }
  if (dir[0] && !strcmp(cfg->checkpoint_storage, "peers"))
    return wt_fail(WT_EINVAL,
                   "--checkpoint-dir %s is a directory every peer shares, and "
                   "--checkpoint-storage peers keeps the checkpoints in each peer's "
                   "--data-dir instead; give one of them",
                   dir);
  if (cfg->checkpoint_store[0] && strcmp(cfg->checkpoint_storage, "peers"))
    return wt_fail(WT_EINVAL, "--checkpoint-store receives the shards the peers store: it needs "
                              "--checkpoint-storage peers or auto (with a shared --checkpoint-dir "
                              "the checkpoints are in that directory already)");
  const parallel_run_config *r = &cfg->run;
  if (parallel_run_config_stateful(r) && !dir[0] && strcmp(cfg->checkpoint_storage, "peers"))
    return wt_fail(
        WT_EINVAL,
        "this run keeps state across steps (DiLoCo, error feedback or delta activation "
        "caches: --diloco %d, --grad-codec %s, --grad-ef %s, --act-codec %s) that "
        "only checkpoints carry to a peer replacing a lost one, and --checkpoint-storage "
        "shared names no --checkpoint-dir; give --checkpoint-dir, a directory every "
        "peer shares, or --checkpoint-storage peers or auto",
        r->sync.diloco, r->sync.grad_codec, r->sync.grad_ef, r->act_codec);
  return WT_OK;
}

const char *coordinator_checkpoint_storage_why(const coordinator_config *cfg) {
  if (!cfg->checkpoint_storage_auto) return "--checkpoint-storage";
  if (!strcmp(cfg->checkpoint_storage, "shared"))
    return cfg->run.checkpoint_dir[0] ? "auto: --checkpoint-dir names a shared directory"
                                      : "auto: the run keeps no state across steps";
  return cfg->checkpoint_store[0] ? "auto: --checkpoint-store takes the peers' shards"
                                  : "auto: the run keeps state across steps and names no "
                                    "--checkpoint-dir";
}

int coordinator_config_check(coordinator_config *cfg) {
  s_default_device_rows(&cfg->run);
  WT_CHECK(parallel_run_config_check(&cfg->run));
  if (cfg->assignment[0] && !cfg->scenario[0])
    return wt_fail(WT_EINVAL, "--assignment needs --scenario (it places the tasklets on the "
                              "scenario's devices)");
  if (!strcmp(cfg->links, "scenario") && !cfg->scenario[0])
    return wt_fail(WT_EINVAL, "--links scenario takes the links from --scenario: give one");
  WT_CHECK(s_checkpoint_storage(cfg));
  if (cfg->resume && !cfg->run.checkpoint_dir[0])
    return wt_fail(WT_EINVAL, "--resume needs --checkpoint-dir (the run directory to resume)");
  if ((cfg->relay_port_min == 0) != (cfg->relay_port_max == 0) ||
      cfg->relay_port_min > cfg->relay_port_max)
    return wt_fail(WT_EINVAL,
                   "--relay-port-min %d / --relay-port-max %d: give both (min <= max), or neither",
                   cfg->relay_port_min, cfg->relay_port_max);
  return WT_OK;
}
