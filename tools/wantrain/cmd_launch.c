/* cmd_launch — `wantrain launch`: trains one model with S stages × R replicas as S·R local
 * processes over the ZeroMQ transport, with live progress and a run summary.
 *
 * The launcher makes a private run directory (mode 0700) with one CURVE key pair per rank and
 * the ipc:// sockets, then fork+execs this binary once per rank as the hidden command
 *   wantrain __tasklet RANK RUN_DIR STATUS_FD <the launch options>
 * which builds its communicator (parallel/transport/zmq.h) and runs the per-process entry point
 * (parallel_tasklet_run). Each worker reports on its status pipe, one line per event:
 *   step STEP LOSS SECONDS BYTES_PIPELINE BYTES_DATA BYTES_CONTROL VAL_LOSS
 *   done STEPS LOSS SECONDS COMPUTE_S BYTES_PIPELINE BYTES_DATA BYTES_CONTROL WIRE_BYTES WAIT_S
 *        REFUSED PIPELINE_S TIED_S REDUCE_S NORM_S TIME_LIMITED VAL_LOSS RECOMPUTES
 *   error MESSAGE
 * (VAL_LOSS is nan after a step without validation). --time-limit is decided by world rank 0 and
 * agreed on inside the step (parallel/runtime/tasklet.h), so every process stops after the same
 * step, validating and checkpointing as after the last. The launcher prints progress when every
 * rank has finished a step, and the summary at the end. A worker that fails or dies ends the run:
 * the others notice through the transport (a dropped connection or a goodbye) and stop with their
 * own errors; whoever is still running after a grace period is terminated, and the launcher exits 1
 * naming the first failure. */
#include "tools/wantrain/cli.h"

#include "common/common.h"
#include "compress/preset.h"
#include "kernels/kernels.h"
#include "model/data.h"
#include "model/trainer.h"
#include "netsim/netsim.h"
#include "assign/assign.h"
#include "parallel/datacenter/site.h" /* defines: PARALLEL_SITE_MAX_RANKS */
#include "parallel/runtime/tasklet.h"
#include "parallel/transport/zmq.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define S_MAX_RANKS 64
#define S_GRACE_S 3.0 /* after a failure, time the others get to stop on their own */

typedef struct {
  char config[WT_CONFIG_STR_MAX];
  int stages, replicas;
  char schedule[WT_CONFIG_STR_MAX];
  compress_sync_args sync; /* --grad-codec, --diloco, --outer-*, --grad-ef, --preset */
  char act_codec[WT_CONFIG_STR_MAX];
  int zero;
  char robust[WT_CONFIG_STR_MAX];
  char device[WT_CONFIG_STR_MAX], precision[WT_CONFIG_STR_MAX];
  int tf32, act_slots, site_ranks, site_cp;
  double timeout;
  int insecure;
  char scenario[WT_CONFIG_STR_MAX], scenario_name[WT_CONFIG_STR_MAX];
  char assignment[WT_CONFIG_STR_MAX], solver[WT_CONFIG_STR_MAX];
  double time_scale;
  char data[WT_CONFIG_STR_MAX];
  char data_sha256[WT_CONFIG_STR_MAX];
  char cache_dir[WT_CONFIG_STR_MAX];
  cli_train_options t;
  int log_every, val_every;
  double time_limit;
  char checkpoint_dir[WT_CONFIG_STR_MAX];
  int checkpoint_every, keep, resume;
  char json_log[WT_CONFIG_STR_MAX];
} launch_args;

/* The data, model and optimizer rows are `wantrain train`'s (cli.h), so a command line moves
 * between the two; micro-batches here are per replica. */
#define F(x) offsetof(launch_args, x)
static const wt_option s_options[] = {
    {"config", WT_OPT_STRING, F(config), 0, 0, "", "JSON file of options (flags override it)", 0},
    {"stages", WT_OPT_INT, F(stages), 1, S_MAX_RANKS, "1", "pipeline stages S", 0},
    {"replicas", WT_OPT_INT, F(replicas), 1, S_MAX_RANKS, "1",
     "data-parallel replicas R (S x R processes)", 0},
    {"schedule", WT_OPT_CHOICE, F(schedule), 0, 0, "1f1b", "pipeline schedule", "1f1b|gpipe"},
    COMPRESS_SYNC_OPTIONS(launch_args, sync),
    {"act-codec", WT_OPT_CHOICE, F(act_codec), 0, 0, "none",
     "activation compression across pipeline cuts", "none|delta2|delta4|delta8|direct8"},
    {"zero", WT_OPT_INT, F(zero), 0, 1, "0", "1 = ZeRO-1 optimizer-state sharding", 0},
    PARALLEL_RUN_ROBUST_OPTION(launch_args, ),
    {"device", WT_OPT_STRING, F(device), 0, 0, "cpu",
     "kernels back end of every process: cpu; cuda:N = all on GPU N; cuda = process w on GPU "
     "w mod (visible GPUs) (CUDA builds)",
     0},
    {"precision", WT_OPT_CHOICE, F(precision), 0, 0, "fp32",
     "matmul precision; bf16: bf16 tensor-core inputs, fp32 weights, optimizer and loss (GPU)",
     "fp32|bf16"},
    {"tf32", WT_OPT_FLAG, F(tf32), 0, 1, "0", "fp32 matmuls on TF32 tensor cores (GPU)", 0},
    {"act-slots", WT_OPT_INT, F(act_slots), 0, GPT_MAX_SLOTS, "0",
     "activation slots per stage (0 = one per micro-batch in flight; fewer recompute forwards)", 0},
    {"site-ranks", WT_OPT_INT, F(site_ranks), 1, PARALLEL_SITE_MAX_RANKS, "1",
     "run every stage on a site of this many ranks (threads of each process; --device cpu): "
     "--site-ranks / --site-cp tensor-parallel ranks, a divisor of --heads (an MoE model: "
     "--site-ranks expert-parallel ranks, a divisor of --moe-experts and of each micro-batch's "
     "rows)",
     0},
    {"site-cp", WT_OPT_INT, F(site_cp), 1, PARALLEL_SITE_MAX_RANKS, "1",
     "context parallelism inside each site: split every sequence over this many of its ranks "
     "(ring attention; --site-ranks a multiple of it, --seq of twice it)",
     0},
    {"timeout", WT_OPT_FLOAT, F(timeout), 0.1, 1e6, "60",
     "seconds any process waits for a peer before failing", 0},
    {"insecure", WT_OPT_FLAG, F(insecure), 0, 1, "0",
     "plaintext links without CurveZMQ (debugging only)", 0},
    {"scenario", WT_OPT_STRING, F(scenario), 0, 0, "",
     "emulate this netsim scenario's links (JSON; it must have S x R devices)", 0},
    {"scenario-name", WT_OPT_STRING, F(scenario_name), 0, 0, "",
     "which scenario of the file (default: its only one)", 0},
    {"assignment", WT_OPT_STRING, F(assignment), 0, 0, "",
     "device of each tasklet (netsim's assignment JSON; default: rank s*R+r on device s*R+r)", 0},
    {"solver", WT_OPT_CHOICE, F(solver), 0, 0, "ga",
     "with --scenario and no --assignment, place the tasklets on the scenario's devices with "
     "this assign/ solver (none: in rank order; reproducible: a fixed budget of evaluations, "
     "seeded by --seed), as the coordinator does",
     "none|random|megatron|deepspeed|greedy|ga|exact"},
    {"time-scale", WT_OPT_FLOAT, F(time_scale), 1e-6, 1e6, "1",
     "wall seconds per emulated second of network time", 0},
    CLI_DATA_OPTIONS(launch_args),
    {"steps", WT_OPT_INT, F(t.steps), 1, 1e9, "300", "optimizer steps in total", 0},
    {"batch", WT_OPT_INT, F(t.batch), 1, 65536, "16",
     "global batch: sequences per step, split over the replicas", 0},
    {"micro-batches", WT_OPT_INT, F(t.micro_batches), 1, 65536, "1",
     "micro-batches per replica per step (the pipeline's m)", 0},
    CLI_MODEL_OPTIONS(launch_args, t),
    GPT_MOE_OPTIONS(launch_args, t.moe),
    {"log-every", WT_OPT_INT, F(log_every), 1, 1e9, "10", "print progress every N steps", 0},
    {"val-every", WT_OPT_INT, F(val_every), 0, 1e9, "50",
     "validate every N steps and after the last (0 = after the last only)", 0},
    {"val-batches", WT_OPT_INT, F(t.val_batches), 1, 1e6, "8",
     "micro-batches per validation (run by replica 0's pipeline)", 0},
    {"time-limit", WT_OPT_FLOAT, F(time_limit), 0, 1e9, "0",
     "stop every process after the step in which this many seconds passed, validating and "
     "checkpointing (0 = none)",
     0},
    {"checkpoint-dir", WT_OPT_STRING, F(checkpoint_dir), 0, 0, "",
     "run directory for checkpoints: one directory per stage plus a manifest (none if empty)", 0},
    {"checkpoint-every", WT_OPT_INT, F(checkpoint_every), 0, 1e9, "0",
     "save every N steps (0 = only at the end)", 0},
    {"keep", WT_OPT_INT, F(keep), 1, 1000, "2", "checkpoints kept per stage", 0},
    {"resume", WT_OPT_FLAG, F(resume), 0, 1, "0", "continue from --checkpoint-dir's manifest", 0},
    {"json-log", WT_OPT_STRING, F(json_log), 0, 0, "", "append one JSON object per step here", 0},
    {0}};
#undef F

static const char *s_usage =
    "usage: wantrain launch --stages S --replicas R [options]\n\n"
    "Trains one GPT as S x R local processes (one pipeline stage of one data-parallel replica "
    "each) over CurveZMQ-encrypted ZeroMQ links. Progress goes to the terminal, one JSON object "
    "per step to --json-log, a summary with the bytes sent per link class at the end.";

/* ---- the configuration both sides build from the options ---------------------------------- */

static void s_tasklet_config(const launch_args *a, const data_set *d, parallel_tasklet_config *c) {
  *c = parallel_tasklet_config_default();
  c->stages = a->stages;
  c->replicas = a->replicas;
  c->schedule = !strcmp(a->schedule, "gpipe") ? ASSIGN_SCHEDULE_GPIPE : ASSIGN_SCHEDULE_1F1B;
  /* only a malformed --moe-layers fails here, and cmd_launch refused it before */
  (void)cli_trainer_config(&a->t, data_set_vocab_size(d), &c->train);
  c->data = d;
  snprintf(c->grad_codec, sizeof c->grad_codec, "%.15s", a->sync.grad_codec); /* a choice: short */
  snprintf(c->act_codec, sizeof c->act_codec, "%.15s", a->act_codec);
  c->diloco_h = a->sync.diloco; /* with the preset applied (compress_sync_args_apply) */
  c->diloco_lr = (float)a->sync.outer_lr;
  c->diloco_momentum = (float)a->sync.outer_momentum;
  c->grad_ef = strcmp(a->sync.grad_ef, "off") != 0; /* auto without a preset: on */
  c->zero = a->zero;
  snprintf(c->robust, sizeof c->robust, "%.15s", a->robust); /* a choice: short */
  c->act_slots = a->act_slots;
  c->site_ranks = a->site_ranks;
  c->site_cp = a->site_cp;
  snprintf(c->checkpoint_dir, sizeof c->checkpoint_dir, "%s", a->checkpoint_dir);
  c->checkpoint_every = a->checkpoint_every;
  c->keep = a->keep;
  c->resume = a->resume;
  c->val_every = a->val_every;
  c->time_limit_s = a->time_limit;
}

/* ---- devices ------------------------------------------------------------------------------ */

/* Runs kernels_for_device(device) in a child process, so that the launcher itself never holds a
 * GPU context while its workers run; with `cuda`, also counts the visible GPUs (*gpus; 0 for the
 * other names). Returns WT_OK, or kernels_for_device's status and message. */
static int s_device_probe(const char *device, int *gpus) {
  int fds[2];
  if (pipe(fds) != 0) return wt_fail(WT_EIO, "pipe: %s", strerror(errno));
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) return wt_fail(WT_EIO, "cannot start the device check: %s", strerror(errno));
  if (pid == 0) {
    close(fds[0]);
    const kernels_ops *o;
    int rc = kernels_for_device(device, &o), n = 0;
    if (rc == WT_OK && !strcmp(device, "cuda"))
      for (n = 1; n < S_MAX_RANKS; n++) {
        char name[16];
        snprintf(name, sizeof name, "cuda:%d", n);
        if (kernels_for_device(name, &o) != WT_OK) break;
      }
    char msg[1200];
    int len = snprintf(msg, sizeof msg, "%d %d %s", rc, n, rc == WT_OK ? "" : wt_last_error());
    ssize_t wrote = write(fds[1], msg, (size_t)WT_MIN(len, (int)sizeof msg - 1));
    _exit(wrote > 0 ? 0 : 1);
  }
  close(fds[1]);
  char msg[1200];
  size_t got = 0;
  ssize_t r;
  while (got < sizeof msg - 1 &&
         ((r = read(fds[0], msg + got, sizeof msg - 1 - got)) > 0 || (r < 0 && errno == EINTR)))
    if (r > 0) got += (size_t)r;
  close(fds[0]);
  waitpid(pid, NULL, 0);
  msg[got] = 0;
  int rc = 0, n = 0, at = 0;
  if (sscanf(msg, "%d %d %n", &rc, &n, &at) < 2)
    return wt_fail(WT_EIO, "the check of --device %s died without an answer", device);
  if (rc != WT_OK) return wt_fail(rc, "%s", msg + at);
  *gpus = n;
  return WT_OK;
}

/* Checks --device, --precision, --tf32, --site-ranks and --site-cp before any worker starts; *gpus:
 * the GPUs `cuda` spreads the processes over (0 otherwise). Returns WT_OK, WT_EINVAL (a usage
 * error) or WT_ENOTSUP (no CUDA in this build, no such GPU, a GPU precision on the CPU). */
static int s_device_check(const launch_args *a, int *gpus) {
  kernels_precision p;
  const kernels_ops *o;
  *gpus = 0;
  WT_CHECK(kernels_parse_precision(a->precision, a->tf32, &p));
  if (a->site_cp > 1 && a->site_ranks % a->site_cp)
    return wt_fail(WT_EINVAL,
                   "--site-cp %d splits each site's ranks along the sequence: give --site-ranks "
                   "a multiple of it (not %d)",
                   a->site_cp, a->site_ranks);
  if (a->site_ranks > 1 && strcmp(a->device, "cpu"))
    return wt_fail(WT_EINVAL,
                   "--site-ranks %d with --device %s: a site runs its ranks as threads of one "
                   "process and the CUDA back end's state is process-wide; use --device cpu",
                   a->site_ranks, a->device);
  if (!strcmp(a->device, "cpu")) return kernels_set_precision(kernels_cpu(), p);
  if (!kernels_backend("cuda")) return kernels_for_device(a->device, &o); /* says why not */
  return s_device_probe(a->device, gpus);
}

/* The worker's back end: kernels_for_device in this (the tasklet's) thread, at the precision of
 * the flags. */
static int s_worker_device(const launch_args *a) {
  const kernels_ops *o;
  kernels_precision p;
  WT_CHECK(kernels_for_device(a->device, &o));
  WT_CHECK(kernels_parse_precision(a->precision, a->tf32, &p));
  return kernels_set_precision(o, p);
}

static void s_key_path(const char *dir, int rank, const char *ext, char *out, size_t cap) {
  snprintf(out, cap, "%s/rank-%d.%s", dir, rank, ext);
}

/* ---- emulated WAN: a netsim scenario and an assignment of tasklets to its devices ---------- */

typedef struct {
  netsim_scenario_set *set;
  const netsim_scenario *sc;
  assign_plan *plan; /* device of world rank w = plan->device[w] */
} s_wan;

static void s_wan_close(s_wan *w) {
  netsim_scenario_set_destroy(&w->set);
  if (w->plan) assign_plan_destroy(&w->plan);
}

/* Loads --scenario (and --assignment) when given; the scenario must have one device per process.
 * Leaves w zeroed without a scenario. */
static int s_wan_open(const launch_args *a, s_wan *w) {
  memset(w, 0, sizeof *w);
  if (!a->scenario[0]) {
    if (a->assignment[0]) return wt_fail(WT_EINVAL, "--assignment needs --scenario");
    return WT_OK; /* no devices to place the tasklets on: --solver has nothing to do */
  }
  WT_CHECK_NEW(w->set, netsim_scenario_set_load(a->scenario));
  int rc = netsim_scenario_set_find(w->set, a->scenario_name, &w->sc);
  if (rc != WT_OK) {
    char why[2300];
    snprintf(why, sizeof why, "%s", wt_last_error());
    wt_fail(rc, "--scenario %s: %s (--scenario-name NAME)", a->scenario, why);
  }
  int n = rc == WT_OK ? netsim_scenario_network(w->sc)->n : 0;
  if (rc == WT_OK && n != a->stages * a->replicas)
    rc = wt_fail(WT_EINVAL,
                 "scenario %s has %d devices but the run has %d x %d = %d processes; choose "
                 "--stages and --replicas to match, or a scenario of that size",
                 netsim_scenario_name(w->sc), n, a->stages, a->replicas, a->stages * a->replicas);
  const int solve = strcmp(a->solver, "none") != 0 && !a->assignment[0]; /* a given one wins */
  if (rc == WT_OK && a->assignment[0])
    rc = netsim_assignment_load(a->assignment, a->stages, a->replicas, &w->plan);
  if (rc == WT_OK && solve) {
    assign_problem prob;
    netsim_scenario_problem(w->sc, &prob);
    prob.d_pp = a->stages;
    prob.d_dp = a->replicas;
    prob.dp_algo = ASSIGN_DP_RING;
    assign_solver kind;
    assign_budget budget = {.max_evals = 2000};
    rc = assign_solver_parse(a->solver, &kind);
    if (rc == WT_OK) rc = assign_solve(&prob, kind, &budget, (uint64_t)a->t.seed, &w->plan, NULL);
  }
  if (rc == WT_OK && !w->plan) {
    w->plan = assign_plan_new(a->stages, a->replicas);
    for (int d = 0; d < n; d++) w->plan->device[d] = d;
  }
  if (rc != WT_OK) s_wan_close(w);
  return rc;
}

/* Writes the plan to DIR/assignment.json, which every worker reads: one placement, decided
 * once by the launcher. */
static int s_wan_save(const s_wan *w, const char *dir) {
  char path[1100];
  snprintf(path, sizeof path, "%s/assignment.json", dir);
  cJSON *j = netsim_assignment_to_json(w->plan);
  char *text = j ? cJSON_PrintUnformatted(j) : NULL;
  cJSON_Delete(j);
  FILE *f = text ? fopen(path, "w") : NULL;
  int ok = f && fprintf(f, "{\"assignment\":%s}\n", text) > 0;
  if (f && fclose(f) != 0) ok = 0;
  free(text);
  return ok ? WT_OK : wt_fail(WT_EIO, "cannot write %s", path);
}

/* The emulated links from world rank `rank` to every rank. */
/* Each stage's data-parallel ring on the emulated network (rings[s·R + i]: the replica at ring
 * position i of stage s): netsim's choice for a stage's share of the gradient bytes. The
 * launcher hands the same rings to netsim and every worker to its tasklet, so the ring that runs
 * is the ring that is simulated. */
static void s_wan_rings(const s_wan *w, const gpt_config *model, int *rings) {
  int S = w->plan->d_pp, R = w->plan->d_dp;
  double grad_bytes = 4.0 * (double)gpt_config_num_params(model) / S;
  const assign_network *net = netsim_scenario_network(w->sc);
  for (int s = 0; s < S; s++) netsim_ring_order(net, w->plan, s, grad_bytes, rings + (size_t)s * R);
}

static void s_wan_links(const s_wan *w, int rank, int world, double *lat, double *bw) {
  const assign_network *net = netsim_scenario_network(w->sc);
  int me = w->plan->device[rank];
  for (int j = 0; j < world; j++) {
    int dj = w->plan->device[j];
    lat[j] = j == rank ? 0 : net->latency_s[me * net->n + dj];
    bw[j] = j == rank ? 0 : net->bandwidth_Bps[me * net->n + dj];
  }
}

/* ---- the worker: one process, one tasklet ------------------------------------------------- */

typedef struct {
  FILE *status;
  parallel_comm *world;
} s_worker;

static void s_worker_on_step(void *arg, const parallel_tasklet_step *st) {
  s_worker *w = arg;
  fprintf(w->status, "step %ld %.9g %.6f %llu %llu %llu %.9g\n", st->info.step, st->info.loss,
          st->info.seconds, (unsigned long long)st->bytes_pipeline,
          (unsigned long long)st->bytes_data, (unsigned long long)st->bytes_control, st->val_loss);
  fflush(w->status);
}

/* Fault injection for the tests: WANTRAIN_LAUNCH_DIE=RANK:STEP makes that process exit
 * abruptly after that step (no goodbye, no error line), as a crash would. */
static int s_worker_die_rank = -1, s_worker_die_step = -1, s_worker_rank = -1;

static void s_worker_step(void *arg, const parallel_tasklet_step *st) {
  s_worker *w = arg;
  /* The next messages belong to the next step: the transport stamps it on them and names it in
   * its errors. */
  parallel_zmq_msg_context ctx = {.kind = PARALLEL_ZMQ_KIND_DATA,
                                  .step = (uint32_t)st->info.step + 1};
  parallel_zmq_set_context(w->world, &ctx);
  s_worker_on_step(arg, st);
  if (s_worker_rank == s_worker_die_rank && st->info.step == s_worker_die_step) _exit(3);
}

/* The launch's random id (s_write_run_id): every message carries it, and a fresh run records it
 * as its run id (parallel/runtime/tasklet.h's run binding). */
static int s_read_run_id(const char *dir, uint64_t *id) {
  char path[1100];
  snprintf(path, sizeof path, "%.1000s/run-id", dir);
  FILE *f = fopen(path, "r");
  unsigned long long run_id = 0;
  int got = f ? fscanf(f, "%llx", &run_id) : 0;
  if (f) fclose(f);
  if (got != 1) return wt_fail(WT_EIO, "cannot read the run id from %s", path);
  *id = run_id;
  return WT_OK;
}

/* This worker's communicator; with a scenario also its links' shaping and, in ring (R entries),
 * its stage's data-parallel ring (ring[0] = -1 without a scenario). */
static int s_worker_comm(const launch_args *a, const gpt_config *model, int rank, const char *dir,
                         parallel_comm **out, int *ring) {
  int world = a->stages * a->replicas;
  static char eps_buf[S_MAX_RANKS][1100], pubs_buf[S_MAX_RANKS][41];
  const char *eps[S_MAX_RANKS], *pubs[S_MAX_RANKS];
  char path[1100], pub[41], sec[41];
  for (int r = 0; r < world; r++) {
    snprintf(eps_buf[r], sizeof eps_buf[r], "ipc://%s/rank-%d.sock", dir, r);
    eps[r] = eps_buf[r];
    if (a->insecure) continue;
    s_key_path(dir, r, "pub", path, sizeof path);
    FILE *f = fopen(path, "r");
    if (!f || fscanf(f, "%40s", pubs_buf[r]) != 1) {
      if (f) fclose(f);
      return wt_fail(WT_EIO, "cannot read the public key of rank %d from %s", r, path);
    }
    fclose(f);
    pubs[r] = pubs_buf[r];
  }
  parallel_zmq_config z = parallel_zmq_config_default();
  z.rank = rank;
  z.size = world;
  z.endpoints = eps;
  z.timeout_s = a->timeout;
  WT_CHECK(s_read_run_id(dir, &z.run_id));
  z.insecure = a->insecure;
  double lat[S_MAX_RANKS], bw[S_MAX_RANKS];
  s_wan wan;
  launch_args placed = *a; /* the launcher's placement, whatever chose it */
  snprintf(placed.assignment, sizeof placed.assignment, "%.1000s/assignment.json", dir);
  snprintf(placed.solver, sizeof placed.solver, "none");
  WT_CHECK(s_wan_open(a->scenario[0] ? &placed : a, &wan));
  ring[0] = -1;
  if (wan.sc) {
    int rings[S_MAX_RANKS];
    s_wan_rings(&wan, model, rings);
    memcpy(ring, rings + (size_t)(rank / a->replicas) * a->replicas, sizeof(int) * a->replicas);
    s_wan_links(&wan, rank, world, lat, bw);
    z.latency_s = lat;
    z.bandwidth_Bps = bw;
    z.time_scale = a->time_scale;
  }
  s_wan_close(&wan);
  if (!a->insecure) {
    s_key_path(dir, rank, "key", path, sizeof path);
    WT_CHECK(parallel_zmq_keypair_load(path, pub, sec));
    z.public_key = pub;
    z.secret_key = sec;
    z.peer_public_keys = pubs;
  }
  *out = parallel_zmq_comm_new(&z);
  memset(sec, 0, sizeof sec);
  return *out ? WT_OK : WT_EIO;
}

int cmd_launch_worker(int argc, char **argv) {
  if (argc < 5) {
    fprintf(stderr, "wantrain __tasklet: internal command of `wantrain launch`\n");
    return CLI_USAGE;
  }
  int rank = atoi(argv[2]), fd = atoi(argv[4]);
  const char *dir = argv[3];
  FILE *status = fdopen(fd, "w");
  launch_args a;
  int help = 0;
  if (!status || wt_config_defaults(s_options, &a) != WT_OK ||
      wt_config_parse_args(s_options, &a, argc, argv, 5, NULL, 0, NULL, &help) != WT_OK ||
      compress_sync_args_apply(&a.sync) != WT_OK) {
    fprintf(stderr, "wantrain __tasklet %d: %s\n", rank, wt_last_error());
    return CLI_USAGE;
  }
  const char *die = getenv("WANTRAIN_LAUNCH_DIE");
  if (die) sscanf(die, "%d:%d", &s_worker_die_rank, &s_worker_die_step);
  s_worker_rank = rank;
  s_worker w = {status, NULL};
  data_set *d = data_set_open(a.data, a.cache_dir, a.data_sha256);
  parallel_comm *world = NULL;
  parallel_tasklet_config c;
  int ring[S_MAX_RANKS];
  if (d) s_tasklet_config(&a, d, &c);
  int rc = d ? s_worker_device(&a) : WT_EINVAL;
  if (rc == WT_OK) {
    snprintf(c.device, sizeof c.device, "%.31s", a.device);
    rc = s_read_run_id(dir, &c.run_id);
  }
  if (rc == WT_OK) {
    rc = s_worker_comm(&a, &c.train.model, rank, dir, &world, ring);
  }
  parallel_tasklet_result res;
  memset(&res, 0, sizeof res);
  if (rc == WT_OK) {
    w.world = world;
    if (!a.resume) {
      parallel_zmq_msg_context ctx = {.kind = PARALLEL_ZMQ_KIND_DATA, .step = 1};
      parallel_zmq_set_context(world, &ctx);
    }
    if (ring[0] >= 0) c.dp_ring = ring;
    c.stage = rank / a.replicas;
    c.replica = rank % a.replicas;
    c.on_step = s_worker_step;
    c.on_step_arg = &w;
    rc = parallel_tasklet_run(&c, world, &res);
  }
  /* The transport's own counters, over every link of this process. */
  parallel_zmq_link_stats tot = {0};
  for (int peer = 0; world && peer < parallel_comm_size(world); peer++) {
    parallel_zmq_link_stats st = parallel_zmq_link_stats_get(world, peer);
    tot.bytes_sent += st.bytes_sent;
    tot.wait_s += st.wait_s;
  }
  if (rc == WT_OK)
    fprintf(status,
            "done %ld %.9g %.6f %.6f %llu %llu %llu %llu %.6f %llu %.6f %.6f %.6f %.6f %d %.9g "
            "%ld %llu\n",
            res.steps_done, res.last_loss, res.seconds, res.compute_s,
            (unsigned long long)res.bytes_pipeline, (unsigned long long)res.bytes_data,
            (unsigned long long)res.bytes_control, (unsigned long long)tot.bytes_sent, tot.wait_s,
            (unsigned long long)parallel_zmq_refused(world), res.pipeline_s, res.tied_s,
            res.reduce_s, res.norm_s, res.time_limited, res.last_val_loss, res.recomputes,
            (unsigned long long)res.bytes_site);
  else
    fprintf(status, "error %s\n", wt_last_error());
  fclose(status);
  parallel_comm_destroy(&world);
  data_set_destroy(&d);
  return rc == WT_OK ? CLI_OK : CLI_FAIL;
}

/* ---- the launcher ------------------------------------------------------------------------- */

typedef struct {
  pid_t pid;
  int fd;          /* status pipe, -1 once closed */
  char line[4096]; /* partial line */
  size_t len;
  int running, exit_code; /* exit_code: status, or 128+signal */
  long steps;             /* last step reported */
  float loss;
  float val;        /* validation loss of that step, NAN when none was taken */
  int time_limited; /* the run stopped at --time-limit */
  float last_val;   /* the run's last validation loss */
  double step_s;
  uint64_t bytes[3]; /* pipeline, data, control: sent so far */
  int done;
  double seconds, compute_s;
  double phase_s[4]; /* pipeline, tied exchange, reduce, norm exchange (all steps) */
  unsigned long long wire_bytes, refused; /* the transport's counters */
  long recomputes;                        /* forwards run again (--act-slots) */
  unsigned long long site_bytes;          /* sent between the ranks of its site (--site-ranks) */
  double wait_s;
  char error[1024];
} s_proc;

typedef struct {
  const launch_args *a;
  int world;
  s_proc p[S_MAX_RANKS];
  cli_json_log log;
  long printed;    /* last step printed; -1 before the first */
  long first_step; /* the first step this launch ran (later than 1 on --resume) */
  double t0;
  double step_sum; /* sum of rank 0's step seconds, from step 2 on */
  long step_count;
  int failed_rank; /* first failure, -1 none */
  double failed_at;
  s_wan wan;              /* the emulated network, when --scenario is given */
  double tied_bytes;      /* the tied embedding's gradient (V x C floats) */
  int rings[S_MAX_RANKS]; /* with a scenario: each stage's data-parallel ring (s_wan_rings) */
  int gpus;               /* --device cuda: process w runs on GPU w mod gpus; 0 otherwise */
} s_run;

static volatile sig_atomic_t s_signal = 0;
static void s_on_signal(int sig) {
  s_signal = sig;
}

/* Progress of `step`, which every process has finished; `slow` is the process that finished it
 * last, so its loss and time are that step's (the loss is the same on every process). */
static void s_progress(s_run *r, long step, const s_proc *slow) {
  float loss = slow->loss, val = slow->steps == step ? slow->val : NAN;
  double step_s = slow->step_s;
  uint64_t b[3] = {0, 0, 0};
  for (int w = 0; w < r->world; w++)
    for (int k = 0; k < 3; k++) b[k] += r->p[w].bytes[k];
  double tok_s = (double)r->a->t.batch * r->a->t.seq / step_s;
  char vbuf[32] = "";
  if (!isnan(val)) snprintf(vbuf, sizeof vbuf, " | val %.4f", val);
  if (step % r->a->log_every == 0 || step == r->first_step || step == r->a->t.steps || vbuf[0]) {
    printf("step %6ld/%d | loss %.4f%s | %8.0f tok/s | sent MB: pipeline %.2f, data-parallel "
           "%.2f, control %.3f\n",
           step, r->a->t.steps, loss, vbuf, tok_s, b[0] / 1e6, b[1] / 1e6, b[2] / 1e6);
    fflush(stdout);
  }
  if (r->log.f) {
    char jval[32] = "null";
    if (!isnan(val)) snprintf(jval, sizeof jval, "%.6f", val);
    cli_json_log_line(&r->log,
               "{\"step\":%ld,\"loss\":%.6f,\"val_loss\":%s,\"tokens_per_s\":%.1f,"
               "\"step_s\":%.6f,\"bytes_pipeline\":%llu,\"bytes_data\":%llu,"
               "\"bytes_control\":%llu}\n",
               step, loss, jval, tok_s, step_s, (unsigned long long)b[0], (unsigned long long)b[1],
               (unsigned long long)b[2]);
  }
  if (step > r->first_step || r->a->t.steps == r->first_step) { /* the first includes start-up */
    r->step_sum += step_s;
    r->step_count++;
  }
}

static void s_fail(s_run *r, int w) {
  if (r->failed_rank >= 0) return;
  r->failed_rank = w;
  r->failed_at = wt_now_s();
}

static void s_handle_line(s_run *r, int w, char *line) {
  s_proc *p = &r->p[w];
  unsigned long long b0, b1, b2;
  if (!strncmp(line, "step ", 5) && sscanf(line + 5, "%ld %f %lf %llu %llu %llu %f", &p->steps,
                                           &p->loss, &p->step_s, &b0, &b1, &b2, &p->val) == 7) {
    p->bytes[0] = b0, p->bytes[1] = b1, p->bytes[2] = b2;
    int slow = w;
    for (int k = 0; k < r->world; k++)
      if (r->p[k].steps < r->p[slow].steps) slow = k;
    long all = r->p[slow].steps;
    if (r->printed < 0 && all > 0) r->printed = (r->first_step = all) - 1;
    while (r->printed >= 0 && r->printed < all) s_progress(r, ++r->printed, &r->p[slow]);
  } else if (!strncmp(line, "done ", 5) &&
             sscanf(line + 5,
                    "%ld %f %lf %lf %llu %llu %llu %llu %lf %llu %lf %lf %lf %lf %d %f %ld %llu",
                    &p->steps, &p->loss, &p->seconds, &p->compute_s, &b0, &b1, &b2, &p->wire_bytes,
                    &p->wait_s, &p->refused, &p->phase_s[0], &p->phase_s[1], &p->phase_s[2],
                    &p->phase_s[3], &p->time_limited, &p->last_val, &p->recomputes,
                    &p->site_bytes) == 18) {
    p->bytes[0] = b0, p->bytes[1] = b1, p->bytes[2] = b2;
    p->done = 1;
  } else if (!strncmp(line, "error ", 6)) {
    snprintf(p->error, sizeof p->error, "%s", line + 6);
    s_fail(r, w);
  }
}

/* Reads what a worker wrote; returns 0 at end of file. */
static int s_read_status(s_run *r, int w) {
  s_proc *p = &r->p[w];
  ssize_t n = read(p->fd, p->line + p->len, sizeof p->line - 1 - p->len);
  if (n < 0 && errno == EINTR) return 1;
  if (n <= 0) return 0;
  p->len += (size_t)n;
  p->line[p->len] = 0;
  char *start = p->line, *nl;
  while ((nl = strchr(start, '\n'))) {
    *nl = 0;
    s_handle_line(r, w, start);
    start = nl + 1;
  }
  p->len = strlen(start);
  memmove(p->line, start, p->len + 1);
  if (p->len == sizeof p->line - 1) p->len = 0; /* an over-long line: drop it */
  return 1;
}

static void s_reap(s_run *r) {
  for (int w = 0; w < r->world; w++) {
    s_proc *p = &r->p[w];
    int st;
    if (!p->running || waitpid(p->pid, &st, WNOHANG) != p->pid) continue;
    p->running = 0;
    p->exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (p->exit_code != 0) s_fail(r, w);
  }
}

/* Runs until every worker has exited; after a failure the others get S_GRACE_S to stop on their
 * own, then SIGTERM, then SIGKILL. */
static void s_supervise(s_run *r) {
  int term_sent = 0, kill_sent = 0;
  for (;;) {
    struct pollfd fds[S_MAX_RANKS];
    int idx[S_MAX_RANKS], n = 0, running = 0;
    for (int w = 0; w < r->world; w++) {
      if (r->p[w].fd >= 0) {
        fds[n] = (struct pollfd){r->p[w].fd, POLLIN, 0};
        idx[n++] = w;
      }
      running += r->p[w].running;
    }
    if (!running && !n) break;
    poll(fds, (nfds_t)n, 100);
    for (int i = 0; i < n; i++)
      if ((fds[i].revents & (POLLIN | POLLHUP)) && !s_read_status(r, idx[i])) {
        close(r->p[idx[i]].fd);
        r->p[idx[i]].fd = -1;
      }
    s_reap(r);
    if (s_signal && r->failed_rank < 0) {
      fprintf(stderr, "wantrain launch: stopped by signal %d; stopping every process\n",
              (int)s_signal);
      r->failed_rank = S_MAX_RANKS; /* no rank's fault */
      r->failed_at = wt_now_s() - S_GRACE_S;
    }
    double since = r->failed_rank >= 0 ? wt_now_s() - r->failed_at : 0;
    for (int w = 0; w < r->world; w++) {
      if (!r->p[w].running) continue;
      if (r->failed_rank >= 0 && since > S_GRACE_S && !term_sent) kill(r->p[w].pid, SIGTERM);
      if (r->failed_rank >= 0 && since > S_GRACE_S + 2 && !kill_sent) kill(r->p[w].pid, SIGKILL);
    }
    if (r->failed_rank >= 0 && since > S_GRACE_S) term_sent = 1;
    if (r->failed_rank >= 0 && since > S_GRACE_S + 2) kill_sent = 1;
  }
}

/* A random id every message of this run carries, so a process of another run that reaches one
 * of ours is refused even if it had the keys. */
static int s_write_run_id(const char *dir) {
  uint64_t id = 0;
  FILE *r = fopen("/dev/urandom", "rb");
  int ok = r && fread(&id, sizeof id, 1, r) == 1;
  if (r) fclose(r);
  char path[1100];
  snprintf(path, sizeof path, "%s/run-id", dir);
  FILE *f = ok ? fopen(path, "w") : NULL;
  ok = f && fprintf(f, "%016llx\n", (unsigned long long)id) > 0;
  if (f && fclose(f) != 0) ok = 0;
  return ok ? WT_OK : wt_fail(WT_EIO, "cannot write %s", path);
}

static int s_make_run_dir(const launch_args *a, int world, char *dir, size_t cap) {
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, cap, "%s/wantrain-launch-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
  if (!mkdtemp(dir))
    return wt_fail(WT_EIO, "cannot create a run directory in %s: %s", tmp ? tmp : "/tmp",
                   strerror(errno));
  WT_CHECK(s_write_run_id(dir));
  if (a->insecure) return WT_OK;
  for (int w = 0; w < world; w++) {
    char pub[41], sec[41], path[1100];
    WT_CHECK(parallel_zmq_keypair_new(pub, sec));
    s_key_path(dir, w, "key", path, sizeof path);
    int rc = parallel_zmq_keypair_save(path, pub, sec);
    memset(sec, 0, sizeof sec);
    WT_CHECK(rc);
    s_key_path(dir, w, "pub", path, sizeof path);
    FILE *f = fopen(path, "w");
    if (!f || fprintf(f, "%s\n", pub) < 0 || fclose(f) != 0)
      return wt_fail(WT_EIO, "cannot write %s", path);
  }
  return WT_OK;
}

static void s_remove_run_dir(const char *dir, int world) {
  const char *ext[] = {"key", "pub", "sock"};
  char path[1100];
  snprintf(path, sizeof path, "%s/assignment.json", dir);
  unlink(path);
  snprintf(path, sizeof path, "%s/run-id", dir);
  unlink(path);
  for (int w = 0; w < world; w++)
    for (int k = 0; k < 3; k++) {
      s_key_path(dir, w, ext[k], path, sizeof path);
      unlink(path);
    }
  rmdir(dir);
}

static int s_start(s_run *r, const char *dir, int argc, char **argv) {
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) return wt_fail(WT_EIO, "cannot find this program's path: %s", strerror(errno));
  exe[n] = 0;
  fflush(stdout);
  fflush(stderr);
  for (int w = 0; w < r->world; w++) {
    int fds[2];
    if (pipe(fds) != 0) return wt_fail(WT_EIO, "pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0) return wt_fail(WT_EIO, "cannot start process %d: %s", w, strerror(errno));
    if (pid == 0) {
      close(fds[0]);
      for (int k = 0; k < w; k++)
        if (r->p[k].fd >= 0) close(r->p[k].fd);
      char rank[16], fd[16], gpu[16];
      snprintf(rank, sizeof rank, "%d", w);
      snprintf(fd, sizeof fd, "%d", fds[1]);
      snprintf(gpu, sizeof gpu, "cuda:%d", r->gpus ? w % r->gpus : 0);
      char **args = calloc((size_t)argc + 6, sizeof *args);
      args[0] = argv[0];
      args[1] = "__tasklet";
      args[2] = rank;
      args[3] = (char *)dir;
      args[4] = fd;
      for (int i = 2; i < argc; i++) args[i + 3] = argv[i];
      if (r->gpus) args[argc + 3] = "--device", args[argc + 4] = gpu; /* the last flag wins */
      execv(exe, args);
      fprintf(stderr, "wantrain launch: cannot run %s: %s\n", exe, strerror(errno));
      _exit(127);
    }
    close(fds[1]);
    fcntl(fds[0], F_SETFD, FD_CLOEXEC);
    r->p[w] =
        (s_proc){.pid = pid, .fd = fds[0], .running = 1, .loss = NAN, .val = NAN, .last_val = NAN};
  }
  return WT_OK;
}

/* netsim's iteration time for this run's assignment and schedule, fed with what the run
 * measured: per-pass compute of each stage (mean over its replicas; a backward counts as two
 * forwards), the bytes that crossed a cut per micro-batch, and a stage's gradient bytes; the
 * network's times scaled like the emulation's. It models what the runtime does besides the
 * passes and the reduce: the tied embedding's exchange and the per-step norm exchange
 * (docs/runtime.md). The stages hold one activation slot per micro-batch in flight, so no
 * forward is recomputed (netsim's recompute stays off). */
enum { S_MODEL_TIED = 2, S_MODEL_NORM = 4, S_MODEL_ALL = 6 };

static int s_predict(const s_run *r, int model, double *out) {
  const launch_args *a = r->a;
  int S = a->stages, R = a->replicas, m = a->t.micro_batches;
  double steps = (double)(r->printed - r->first_step + 1);
  if (r->printed < 0 || steps < 1) return wt_fail(WT_EINVAL, "no step ran");
  netsim_sim_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.schedule = !strcmp(a->schedule, "gpipe") ? NETSIM_GPIPE : NETSIM_1F1B;
  cfg.micro_batches = m;
  cfg.recompute = 0;
  cfg.tied_bytes = S > 1 ? r->tied_bytes : 0;
  cfg.norm_exchange = 1;
  double tied_model = model & S_MODEL_TIED ? cfg.tied_bytes : 0;
  cfg.norm_bytes = 32;
  double *fwd = wt_xcalloc((size_t)S, sizeof(double)), bp = 0, bd = 0;
  for (int w = 0; w < r->world; w++) {
    int s = w / R;
    /* a micro-batch's compute: forward f, backward 2f */
    fwd[s] += r->p[w].compute_s / steps / (3.0 * m) / R;
    bp += (double)r->p[w].bytes[0];
    bd += (double)r->p[w].bytes[1];
  }
  cfg.stage_fwd_s = fwd;
  cfg.norm_exchange = !!(model & S_MODEL_NORM);
  /* the pipeline links carry the tied gradient too (both ways, every replica) */
  double act = S > 1 ? bp / steps - (double)R * 2 * cfg.tied_bytes : 0;
  cfg.act_bytes = S > 1 ? WT_MAX(act, 0.0) / (R * (S - 1) * m * 2) : 0;
  cfg.grad_bytes = R > 1 && !a->sync.diloco ? bd / (steps * S * 2 * (R - 1)) : 0;
  cfg.dp_algo = ASSIGN_DP_RING;
  cfg.dp_ring = r->rings;
  cfg.tied_bytes = tied_model;
  const assign_network *net = netsim_scenario_network(r->wan.sc);
  size_t nn = (size_t)net->n * (size_t)net->n;
  assign_network scaled = {.n = net->n,
                           .latency_s = wt_xmalloc(nn * sizeof(double)),
                           .bandwidth_Bps = wt_xmalloc(nn * sizeof(double))};
  for (size_t i = 0; i < nn; i++) {
    scaled.latency_s[i] = net->latency_s[i] * a->time_scale;
    scaled.bandwidth_Bps[i] = net->bandwidth_Bps[i] / a->time_scale;
  }
  netsim_sim_result res;
  int rc = netsim_simulate(&scaled, r->wan.plan, &cfg, &res, NULL);
  free(scaled.latency_s);
  free(scaled.bandwidth_Bps);
  free(fwd);
  if (rc == WT_OK) *out = res.iteration_s;
  return rc;
}

static int s_summary(s_run *r) {
  const launch_args *a = r->a;
  if (r->failed_rank >= 0) {
    if (r->failed_rank < r->world) {
      s_proc *p = &r->p[r->failed_rank];
      fprintf(stderr, "wantrain launch: error: process %d (stage %d, replica %d) failed: %s\n",
              r->failed_rank, r->failed_rank / a->replicas, r->failed_rank % a->replicas,
              p->error[0]           ? p->error
              : p->exit_code >= 128 ? "it was killed by a signal"
                                    : "it exited without saying why (crashed?)");
      if (!p->error[0] && p->exit_code > 0 && p->exit_code < 128)
        fprintf(stderr, "  (exit status %d)\n", p->exit_code);
    }
    for (int w = 0; w < r->world; w++)
      if (w != r->failed_rank && r->p[w].error[0])
        fprintf(stderr, "  process %d (stage %d, replica %d) stopped: %s\n", w, w / a->replicas,
                w % a->replicas, r->p[w].error);
    return WT_EIO;
  }
  uint64_t b[3] = {0, 0, 0};
  double compute = 0, seconds = 0;
  for (int w = 0; w < r->world; w++) {
    for (int k = 0; k < 3; k++) b[k] += r->p[w].bytes[k];
    compute += r->p[w].compute_s;
    seconds = WT_MAX(seconds, r->p[w].seconds);
  }
  double wall = wt_now_s() - r->t0;
  long steps = r->p[0].steps;
  double iter = r->step_count ? r->step_sum / (double)r->step_count : NAN;
  if (r->p[0].time_limited)
    printf("time limit of %g s reached at step %ld of %d%s\n", a->time_limit, steps, a->t.steps,
           a->checkpoint_dir[0] ? "; --resume continues from the checkpoint" : "");
  printf("done: %ld steps | loss %.6f | val %.4f | %.0f tok/s | %.1f s (%.1f s training)\n", steps,
         r->p[0].loss, r->p[0].last_val,
         (double)a->t.batch * a->t.seq * (double)r->step_count / r->step_sum, wall, seconds);
  printf("iteration time %.4f s (mean of steps %ld..%ld); compute %.0f%% of the processes' "
         "time\n",
         iter, WT_MIN(r->first_step + 1, steps), steps,
         seconds > 0 ? 100 * compute / (seconds * r->world) : 0.0);
  printf("bytes sent: pipeline %.3f MB, data-parallel %.3f MB, control %.3f MB\n", b[0] / 1e6,
         b[1] / 1e6, b[2] / 1e6);
  double wire = 0, wait = 0;
  unsigned long long refused = 0;
  for (int w = 0; w < r->world; w++) {
    wire += (double)r->p[w].wire_bytes;
    wait += r->p[w].wait_s / r->world;
    refused += r->p[w].refused;
  }
  printf("transport: %.3f MB on the wire (collective envelopes included), %.2f s waited on peers "
         "per process, %llu messages refused\n",
         wire / 1e6, wait, refused);
  double ph[4] = {0, 0, 0, 0}, ran = (double)(r->printed - r->first_step + 1);
  for (int w = 0; w < r->world; w++)
    for (int k = 0; k < 4; k++) ph[k] += r->p[w].phase_s[k] / r->world / WT_MAX(ran, 1.0);
  printf("per step (mean over processes): pipeline %.4f s, tied exchange %.4f s, reduce %.4f s, "
         "norm exchange %.4f s\n",
         ph[0], ph[1], ph[2], ph[3]);
  long recomputes = 0;
  for (int w = 0; w < r->world; w++) recomputes += r->p[w].recomputes;
  printf("activation slots: %s; %ld forward passes recomputed in all processes\n",
         a->t.moe.experts    ? "one (an MoE stage keeps one forward in flight)"
         : a->site_ranks > 1 ? "one per stage (a site keeps one forward)"
         : a->act_slots      ? "bounded by --act-slots"
                             : "one per micro-batch in flight",
         recomputes);
  if (a->site_ranks > 1) {
    double site = 0;
    for (int w = 0; w < r->world; w++) site += (double)r->p[w].site_bytes;
    if (a->t.moe.experts)
      printf("sites: every stage on %d expert-parallel ranks; %.3f MB between their ranks in all "
             "processes\n",
             a->site_ranks, site / 1e6);
    else
      printf("sites: every stage on %d tensor-parallel x %d context-parallel ranks; %.3f MB "
             "between their ranks in all processes\n",
             a->site_ranks / a->site_cp, a->site_cp, site / 1e6);
  }
  double predicted = NAN;
  if (r->wan.sc) {
    double part[2];
    if (s_predict(r, S_MODEL_ALL, &predicted) == WT_OK && s_predict(r, 0, &part[0]) == WT_OK &&
        s_predict(r, S_MODEL_TIED, &part[1]) == WT_OK) {
      printf("netsim predicts %.4f s per iteration for scenario %s with this assignment and "
             "schedule (measured %.4f s, %+.1f%%)\n",
             predicted, netsim_scenario_name(r->wan.sc), iter, 100 * (iter / predicted - 1));
      printf("netsim, part by part: passes and reduce %.4f s, + tied exchange %.4f s, "
             "+ norm exchange %.4f s\n",
             part[0], part[1], predicted);
    } else
      printf("netsim prediction unavailable: %s\n", wt_last_error());
  }
  char jval[32] = "null";
  if (!isnan(r->p[0].last_val)) snprintf(jval, sizeof jval, "%.6f", r->p[0].last_val);
  if (r->log.f)
    cli_json_log_line(&r->log,
               "{\"event\":\"done\",\"steps\":%ld,\"loss\":%.6f,\"val_loss\":%s,"
               "\"time_limited\":%s,\"iteration_s\":%.6f,"
               "\"predicted_iteration_s\":%.6f,\"bytes_pipeline\":%llu,\"bytes_data\":%llu,"
               "\"bytes_control\":%llu,\"pipeline_s\":%.6f,\"tied_s\":%.6f,\"reduce_s\":%.6f,"
               "\"norm_s\":%.6f,\"recomputes\":%ld}\n",
               steps, r->p[0].loss, jval, r->p[0].time_limited ? "true" : "false", iter,
               isnan(predicted) ? -1.0 : predicted, (unsigned long long)b[0],
               (unsigned long long)b[1], (unsigned long long)b[2], ph[0], ph[1], ph[2], ph[3],
               recomputes);
  return WT_OK;
}

int cmd_launch(int argc, char **argv) {
  launch_args a;
  int rc = cli_parse("launch", s_usage, s_options, &a, argc, argv);
  if (rc) return rc < 0 ? CLI_OK : rc;
  if (compress_sync_args_apply(&a.sync) != WT_OK) {
    fprintf(stderr, "wantrain launch: error: %s\n", wt_last_error());
    return CLI_USAGE;
  }
  if (strcmp(a.sync.preset, "none")) {
    char line[512];
    compress_preset_describe(compress_preset_find(a.sync.preset), line, sizeof line);
    printf("launch: preset %s: %s\n", a.sync.preset, line);
  }
  /* Measured (docs/compression.md, "Stacked on a pipeline"): the Nesterov outer step lets the
   * activations at a cut grow far beyond synchronous training's, and 2-4-bit codecs, whose
   * per-row range those large values set, then lose the small ones. 8 bits do not. */
  if (a.sync.diloco > 0 && a.sync.outer_momentum > 0 &&
      (!strcmp(a.act_codec, "delta2") || !strcmp(a.act_codec, "delta4")))
    fprintf(stderr,
            "wantrain launch: warning: --act-codec %s quantises activations to %c bits, and "
            "under DiLoCo's Nesterov outer step the activations at a cut grow large with a few "
            "dominant channels: measured, it costs several percent of loss or more "
            "(docs/compression.md, \"Stacked on a pipeline\"); --act-codec delta8 or direct8 "
            "cost nothing measurable there\n",
            a.act_codec, a.act_codec[5]);
  if (cli_check_model(&a.t, a.device) != WT_OK) {
    fprintf(stderr, "wantrain launch: error: %s\n", wt_last_error());
    return CLI_USAGE;
  }
  int world = a.stages * a.replicas;
  if (world > S_MAX_RANKS) {
    fprintf(stderr, "wantrain launch: error: %d x %d = %d processes; at most %d on one host\n",
            a.stages, a.replicas, world, S_MAX_RANKS);
    return CLI_USAGE;
  }
  /* Validate everything a worker would, here, before starting anyone. */
  data_set *d = data_set_open(a.data, a.cache_dir, a.data_sha256);
  if (!d) return cli_fail("launch");
  parallel_tasklet_config c;
  s_tasklet_config(&a, d, &c);
  rc = parallel_tasklet_config_validate(&c, world);
  /* The trainer checks this too, but only once every process is up. */
  if (rc == WT_OK && a.t.batch % (a.replicas * a.t.micro_batches) != 0)
    rc = wt_fail(WT_EINVAL,
                 "--batch %d must be a multiple of --replicas %d times --micro-batches %d",
                 a.t.batch, a.replicas, a.t.micro_batches);
  if (rc == WT_OK && a.resume && !a.checkpoint_dir[0])
    rc = wt_fail(WT_EINVAL, "--resume needs --checkpoint-dir (the run directory to resume)");
  int gpus = 0;
  if (rc == WT_OK && (rc = s_device_check(&a, &gpus)) != WT_OK) {
    fprintf(stderr, "wantrain launch: error: %s\n", wt_last_error());
    data_set_destroy(&d);
    return rc == WT_EINVAL ? CLI_USAGE : CLI_FAIL;
  }
  char where[64];
  snprintf(where, sizeof where, "%.20s", a.device);
  if (gpus) snprintf(where, sizeof where, "%d GPUs round-robin", gpus);
  if (rc == WT_OK)
    printf("launch: %d stages x %d replicas = %d processes on %s (%s), %s, grad codec %s, act "
           "codec %s%s; model %.3f M parameters; data %s\n",
           a.stages, a.replicas, world, where, a.precision, a.schedule, a.sync.grad_codec,
           a.act_codec, a.insecure ? ", INSECURE links" : ", CurveZMQ links",
           (double)gpt_config_num_params(&c.train.model) / 1e6, a.data);
  data_set_destroy(&d);
  if (rc != WT_OK) {
    fprintf(stderr, "wantrain launch: error: %s\n", wt_last_error());
    return CLI_USAGE;
  }
  static s_run r;
  memset(&r, 0, sizeof r);
  if (s_wan_open(&a, &r.wan) != WT_OK) {
    fprintf(stderr, "wantrain launch: error: %s\n", wt_last_error());
    return CLI_USAGE;
  }
  if (r.wan.sc) {
    printf("emulating scenario %s (%d devices) at time scale %g; device of each process:",
           netsim_scenario_name(r.wan.sc), netsim_scenario_network(r.wan.sc)->n, a.time_scale);
    for (int w = 0; w < world; w++) printf(" %d", r.wan.plan->device[w]);
    printf(" (%s)\n", a.assignment[0]            ? a.assignment
                      : strcmp(a.solver, "none") ? a.solver
                                                 : "rank order");
  }
  r.a = &a;
  r.world = world;
  r.gpus = gpus;
  r.tied_bytes = 4.0 * c.train.model.vocab_size * c.train.model.channels;
  if (r.wan.sc) s_wan_rings(&r.wan, &c.train.model, r.rings);
  r.printed = -1;
  r.failed_rank = -1;
  if (cli_json_log_open(&r.log, "launch", a.json_log) != WT_OK) return cli_fail("launch");
  char dir[1024];
  rc = s_make_run_dir(&a, world, dir, sizeof dir);
  if (rc == WT_OK && r.wan.sc) rc = s_wan_save(&r.wan, dir);
  if (rc != WT_OK) {
    cli_json_log_close(&r.log, rc);
    return cli_fail("launch");
  }
  signal(SIGINT, s_on_signal);
  signal(SIGTERM, s_on_signal);
  signal(SIGPIPE, SIG_IGN);
  r.t0 = wt_now_s();
  rc = s_start(&r, dir, argc, argv);
  if (rc != WT_OK) {
    fprintf(stderr, "wantrain launch: error: %s\n", wt_last_error());
    for (int w = 0; w < world; w++)
      if (r.p[w].running) kill(r.p[w].pid, SIGTERM);
    s_fail(&r, S_MAX_RANKS);
  }
  s_supervise(&r);
  rc = s_summary(&r);
  rc = cli_json_log_close(&r.log, rc);
  if (rc != WT_OK && r.failed_rank < 0)
    fprintf(stderr, "wantrain launch: error: %s\n", wt_last_error());
  s_remove_run_dir(dir, world);
  s_wan_close(&r.wan);
  if (s_signal) return 128 + (int)s_signal;
  return rc == WT_OK ? CLI_OK : CLI_FAIL;
}
