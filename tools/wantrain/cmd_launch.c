/* cmd_launch — `wantrain launch`: trains one model with S stages × R replicas on this machine as
 * the decentralized run does it: a coordinator (in this process, on its own thread) and S·R
 * `peerd` processes on loopback. The coordinator places the tasklets (--solver, --assignment),
 * emulates --scenario's WAN (netsim_emulation_row: latency, path bandwidth and access links) and
 * sends every peer the run; launch only starts them, watches them and reports.
 *
 * Every peerd appends its progress to a pipe (peerd --json-log): a "start" object when its train
 * epoch begins (its world rank, stage, replica and ring), one object per step, and a "done" object
 * with what its tasklet and transport counted. Launch prints progress when every rank has
 * finished a step, and the summary at the end, with netsim's prediction for the coordinator's
 * placement beside the measured iteration time when a scenario is emulated. A peer that fails or
 * dies ends the run: the others notice through the transport and stop with their own errors;
 * whoever still runs after a grace period is terminated, and launch exits 1 naming the first
 * failure. Everything lives in a private run directory (mode 0700) removed at the end. */
#define _XOPEN_SOURCE 700 /* nftw */
#include "tools/wantrain/cli.h"

#include "common/common.h"
#include "compress/preset.h"
#include "coordinator/coordinator.h"
#include "kernels/kernels.h"
#include "model/data.h"
#include "netsim/netsim.h"
#include "parallel/runtime/tasklet.h" /* defines: a tasklet's check of the run */
#include "parallel/transport/zmq.h"   /* defines: the peers' key pairs */

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define S_MAX_RANKS PARALLEL_RUN_MAX_RANKS
#define S_GRACE_S 3.0 /* after a failure, time the others get to stop on their own */
#define S_LOG_FD 3    /* the peerd's --json-log, a pipe to launch */

typedef struct {
  parallel_run_config run;
  char config[WT_CONFIG_STR_MAX];
  double timeout;
  char scenario[WT_CONFIG_STR_MAX], scenario_name[WT_CONFIG_STR_MAX];
  char assignment[WT_CONFIG_STR_MAX], solver[WT_CONFIG_STR_MAX];
  double time_scale;
  char cache_dir[WT_CONFIG_STR_MAX];
  int log_every, resume;
  char json_log[WT_CONFIG_STR_MAX];
} launch_args;

/* The run's rows are `wantrain train`'s and the coordinator's (parallel/runtime/run_config.h), so
 * a command line moves between them; micro-batches here are per replica. */
#define F(x) offsetof(launch_args, x)
static const wt_option s_options[] = {
    {"config", WT_OPT_STRING, F(config), 0, 0, "", "JSON file of options (flags override it)", 0},
    PARALLEL_RUN_PIPELINE_OPTIONS(launch_args, run.),
    PARALLEL_RUN_SYNC_OPTIONS(launch_args, run.),
    {"device", WT_OPT_STRING, F(run.device), 0, 0, "cpu",
     "kernels back end of every peerd: cpu; cuda:N = all on GPU N; cuda = peerd w on GPU "
     "w mod (visible GPUs) (CUDA builds)",
     0},
    {"precision", WT_OPT_CHOICE, F(run.precision), 0, 0, "fp32",
     "matmul precision; bf16: bf16 tensor-core inputs, fp32 weights, optimizer and loss (GPU)",
     "fp32|bf16"},
    {"tf32", WT_OPT_FLAG, F(run.tf32), 0, 1, "0", "fp32 matmuls on TF32 tensor cores (GPU)", 0},
    PARALLEL_RUN_SITE_OPTIONS(launch_args, run.),
    {"timeout", WT_OPT_FLOAT, F(timeout), 1, 3600, "60",
     "seconds any peer waits for another before failing (the coordinator's --peer-timeout)", 0},
    {"scenario", WT_OPT_STRING, F(scenario), 0, 0, "",
     "emulate this netsim scenario's links (JSON; it must have S x R devices); the coordinator "
     "places on its links",
     0},
    {"scenario-name", WT_OPT_STRING, F(scenario_name), 0, 0, "",
     "which scenario of the file (default: its only one)", 0},
    {"assignment", WT_OPT_STRING, F(assignment), 0, 0, "",
     "device of each tasklet (netsim's assignment JSON; the coordinator's --assignment)", 0},
    {"solver", WT_OPT_CHOICE, F(solver), 0, 0, "ga",
     "with --scenario and no --assignment, the coordinator's placement solver (none: rank w on "
     "device w)",
     "none|random|megatron|deepspeed|greedy|ga|exact"},
    {"time-scale", WT_OPT_FLOAT, F(time_scale), 1e-6, 1e6, "1",
     "wall seconds per emulated second of network time", 0},
    CLI_DATA_OPTIONS(launch_args, run.),
    PARALLEL_RUN_STEPS_OPTIONS(launch_args, run.),
    PARALLEL_RUN_LIMIT_OPTIONS(launch_args, run.),
    PARALLEL_RUN_MODEL_OPTIONS(launch_args, run.),
    PARALLEL_RUN_OPTIM_OPTIONS(launch_args, run.),
    GPT_MOE_OPTIONS(launch_args, run.moe),
    {"log-every", WT_OPT_INT, F(log_every), 1, 1e9, "10", "print progress every N steps", 0},
    PARALLEL_RUN_CHECKPOINT_OPTIONS(launch_args, run.),
    {"resume", WT_OPT_FLAG, F(resume), 0, 1, "0", "continue from --checkpoint-dir's manifest", 0},
    {"json-log", WT_OPT_STRING, F(json_log), 0, 0, "", "append one JSON object per step here", 0},
    {0}};
#undef F

static const char *s_usage =
    "usage: wantrain launch --stages S --replicas R [options]\n\n"
    "Trains one GPT on this machine as a decentralized run: a coordinator and S x R peerd (one "
    "pipeline stage of one data-parallel replica each) on loopback, over sealed ZeroMQ links. "
    "Progress goes to the terminal, one JSON object per step to --json-log, a summary with the "
    "bytes sent per link class at the end.";

/* ---- checks before anything starts -------------------------------------------------------- */

/* Runs kernels_for_device(device) in a child process, so that launch itself never holds a GPU
 * context while its peers run; with `cuda`, also counts the visible GPUs (*gpus; 0 for the other
 * names). Returns WT_OK, or kernels_for_device's status and message. */
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

/* Checks --device, --precision, --tf32 and the site before any peer starts; *gpus: the GPUs
 * `cuda` spreads the peers over (0 otherwise). Returns WT_OK, WT_EINVAL (a usage error) or
 * WT_ENOTSUP (no CUDA in this build, no such GPU, a GPU precision on the CPU). */
static int s_device_check(const parallel_run_config *run, int *gpus) {
  kernels_precision p;
  const kernels_ops *o;
  *gpus = 0;
  WT_CHECK(kernels_parse_precision(run->precision, run->tf32, &p));
  if (run->site_cp > 1 && run->site_ranks % run->site_cp)
    return wt_fail(WT_EINVAL,
                   "--site-cp %d splits each site's ranks along the sequence: give --site-ranks "
                   "a multiple of it (not %d)",
                   run->site_cp, run->site_ranks);
  if (run->site_ranks > 1 && strcmp(run->device, "cpu"))
    return wt_fail(WT_EINVAL,
                   "--site-ranks %d with --device %s: a site runs its ranks as threads of one "
                   "process and the CUDA back end's state is process-wide; use --device cpu",
                   run->site_ranks, run->device);
  if (!strcmp(run->device, "cpu")) return kernels_set_precision(kernels_cpu(), p);
  if (!kernels_backend("cuda")) return kernels_for_device(run->device, &o); /* says why not */
  return s_device_probe(run->device, gpus);
}

/* Loads --scenario when given: it must have one device per peer. NULL set without one. */
static int s_scenario(const launch_args *a, netsim_scenario_set **set, const netsim_scenario **sc) {
  *set = NULL, *sc = NULL;
  if (!a->scenario[0]) {
    if (a->assignment[0]) return wt_fail(WT_EINVAL, "--assignment needs --scenario");
    return WT_OK;
  }
  WT_CHECK_NEW(*set, netsim_scenario_set_load(a->scenario));
  int rc = netsim_scenario_set_find(*set, a->scenario_name, sc);
  if (rc != WT_OK) {
    char why[2300];
    snprintf(why, sizeof why, "%s", wt_last_error());
    wt_fail(rc, "--scenario %s: %s (--scenario-name NAME)", a->scenario, why);
  }
  const int world = a->run.stages * a->run.replicas;
  if (rc == WT_OK && netsim_scenario_network(*sc)->n != world)
    rc = wt_fail(WT_EINVAL,
                 "scenario %s has %d devices but the run has %d x %d = %d peers; choose --stages "
                 "and --replicas to match, or a scenario of that size",
                 netsim_scenario_name(*sc), netsim_scenario_network(*sc)->n, a->run.stages,
                 a->run.replicas, world);
  if (rc != WT_OK) netsim_scenario_set_destroy(set);
  return rc;
}

/* Everything a peer would refuse, refused here before anything starts; prints the run's line.
 * Returns CLI_OK, or the exit status with the message printed. */
static int s_check(launch_args *a, int *gpus, int *vocab) {
  if (compress_sync_args_apply(&a->run.sync) != WT_OK) {
    fprintf(stderr, "wantrain launch: error: %s\n", wt_last_error());
    return CLI_USAGE;
  }
  if (strcmp(a->run.sync.preset, "none")) {
    char line[512];
    compress_preset_describe(compress_preset_find(a->run.sync.preset), line, sizeof line);
    printf("launch: preset %s: %s\n", a->run.sync.preset, line);
  }
  /* Measured (docs/compression.md, "Stacked on a pipeline"): the Nesterov outer step lets the
   * activations at a cut grow far beyond synchronous training's, and 2-4-bit codecs, whose
   * per-row range those large values set, then lose the small ones. 8 bits do not. */
  if (a->run.sync.diloco > 0 && a->run.sync.outer_momentum > 0 &&
      (!strcmp(a->run.act_codec, "delta2") || !strcmp(a->run.act_codec, "delta4")))
    fprintf(stderr,
            "wantrain launch: warning: --act-codec %s quantises activations to %c bits, and "
            "under DiLoCo's Nesterov outer step the activations at a cut grow large with a few "
            "dominant channels: measured, it costs several percent of loss or more "
            "(docs/compression.md, \"Stacked on a pipeline\"); --act-codec delta8 or direct8 "
            "cost nothing measurable there\n",
            a->run.act_codec, a->run.act_codec[5]);
  if (cli_check_model(&a->run) != WT_OK) {
    fprintf(stderr, "wantrain launch: error: %s\n", wt_last_error());
    return CLI_USAGE;
  }
  data_set *d = data_set_open(a->run.data, a->cache_dir, a->run.data_sha256);
  if (!d) return cli_fail("launch");
  /* a tasklet's own check first: its messages say what a stage or a site needs */
  parallel_tasklet_config c;
  *vocab = data_set_vocab_size(d);
  int rc = parallel_tasklet_config_from_run(&a->run, 0, 0, d, &c);
  if (rc == WT_OK) rc = parallel_tasklet_config_validate(&c, a->run.stages * a->run.replicas);
  if (rc == WT_OK) rc = parallel_run_config_check(&a->run);
  if (rc == WT_OK && a->resume && !a->run.checkpoint_dir[0])
    rc = wt_fail(WT_EINVAL, "--resume needs --checkpoint-dir (the run directory to resume)");
  data_set_destroy(&d);
  if (rc != WT_OK) {
    fprintf(stderr, "wantrain launch: error: %s\n", wt_last_error());
    return CLI_USAGE;
  }
  gpt_config model; /* from_run made it above */
  if (parallel_run_config_model(&a->run, *vocab, &model) != WT_OK) return cli_fail("launch");
  rc = s_device_check(&a->run, gpus);
  if (rc != WT_OK) {
    fprintf(stderr, "wantrain launch: error: %s\n", wt_last_error());
    return rc == WT_EINVAL ? CLI_USAGE : CLI_FAIL;
  }
  char where[64];
  snprintf(where, sizeof where, "%.20s", a->run.device);
  if (*gpus) snprintf(where, sizeof where, "%d GPUs round-robin", *gpus);
  printf("launch: %d stages x %d replicas = %d peerd on %s (%s), %s, grad codec %s, act codec %s, "
         "sealed links, a coordinator in this process; model %.3f M parameters; data %s\n",
         a->run.stages, a->run.replicas, a->run.stages * a->run.replicas, where, a->run.precision,
         a->run.schedule, a->run.sync.grad_codec, a->run.act_codec,
         (double)gpt_config_num_params(&model) / 1e6, a->run.data);
  return CLI_OK;
}

/* ---- the run: its directory, the coordinator, the peers ----------------------------------- */

typedef struct {
  pid_t pid;
  int fd;          /* its --json-log pipe, -1 once closed */
  char line[8192]; /* partial line */
  size_t len;
  int running, exit_code; /* exit_code: status, or 128+signal */
  int rank, peer_id;      /* world rank and coordinator id, from its start record; -1 before */
  int ring[S_MAX_RANKS];  /* its stage's data-parallel ring */
  long steps;             /* last step reported */
  float loss, val;        /* of that step; val NAN when it validated nothing */
  double step_s;
  uint64_t bytes[3]; /* pipeline, data, control: sent so far */
  int done, ok, code, time_limited;
  float last_val; /* the run's last validation loss */
  double seconds, compute_s, wait_s;
  double phase_s[4]; /* pipeline, tied exchange, reduce, norm exchange (all steps) */
  double wire_bytes, refused, site_bytes;
  long recomputes;
  char error[2048];
} s_peer;

typedef struct {
  const launch_args *a;
  int world, gpus, vocab;
  char dir[PATH_MAX];
  coordinator *coord;
  pthread_t coord_thread;
  int coord_started;
  volatile sig_atomic_t coord_stop;
  int coord_rc;
  volatile int coord_done; /* coordinator_run returned */
  char coord_error[1024];
  const netsim_scenario *sc;
  assign_plan *plan; /* with a scenario: the coordinator's placement, once every peer started */
  s_peer p[S_MAX_RANKS];
  cli_json_log log;
  long printed;    /* last step printed; -1 before the first */
  long first_step; /* the first step this launch ran (later than 1 on --resume) */
  double t0;
  double step_sum; /* sum of the slowest rank's step seconds, from the second step on */
  long step_count;
  int failed; /* a peer failed or a signal came */
  double failed_at;
} s_run;

static volatile sig_atomic_t s_signal = 0;
static void s_on_signal(int sig) {
  s_signal = sig;
}

static void *s_coord_main(void *arg) {
  s_run *r = arg;
  r->coord_rc = coordinator_run(r->coord, &r->coord_stop);
  if (r->coord_rc != WT_OK) snprintf(r->coord_error, sizeof r->coord_error, "%s", wt_last_error());
  r->coord_done = 1;
  return NULL;
}

/* The coordinator's options: the run as launch has it, placement and emulation from launch's
 * flags, on loopback, no status server, its state in the run directory. */
static void s_coord_config(const launch_args *a, const char *dir, coordinator_config *cc) {
  wt_config_defaults(coordinator_options(), cc); /* the table's defaults always parse */
  snprintf(cc->state_dir, sizeof cc->state_dir, "%.1000s/coordinator", dir);
  cc->run = a->run;
  if (!cc->run.checkpoint_dir[0]) /* launch without checkpoints: the run's own, removed after */
    snprintf(cc->run.checkpoint_dir, sizeof cc->run.checkpoint_dir, "%.1000s/checkpoints", dir);
  /* without a scenario there is nothing to place on: world rank w is the w-th peer to join */
  snprintf(cc->solver, sizeof cc->solver, "%s", a->scenario[0] ? a->solver : "none");
  snprintf(cc->assignment, sizeof cc->assignment, "%s", a->assignment);
  snprintf(cc->scenario, sizeof cc->scenario, "%s", a->scenario);
  snprintf(cc->scenario_name, sizeof cc->scenario_name, "%s", a->scenario_name);
  snprintf(cc->links, sizeof cc->links, "%s", a->scenario[0] ? "scenario" : "probe");
  cc->time_scale = a->time_scale;
  cc->peer_timeout_s = a->timeout;
  cc->heartbeat_s = 0.25;
  cc->resume = a->resume;
  cc->http_port = -1;
}

static int s_start_coordinator(s_run *r, char *token, size_t token_size) {
  coordinator_config cc;
  s_coord_config(r->a, r->dir, &cc);
  WT_CHECK(coordinator_config_check(&cc));
  WT_CHECK_NEW(r->coord, coordinator_new(&cc));
  WT_CHECK(coordinator_token_new(cc.state_dir, 3600, r->world, token, token_size));
  if (pthread_create(&r->coord_thread, NULL, s_coord_main, r) != 0)
    return wt_fail(WT_EIO, "cannot start the coordinator's thread");
  r->coord_started = 1;
  return WT_OK;
}

static void s_stop_coordinator(s_run *r) {
  if (r->coord_started) {
    r->coord_stop = 1;
    pthread_join(r->coord_thread, NULL);
    r->coord_started = 0;
  }
  coordinator_destroy(&r->coord);
}

/* peerd beside this program (the build's bin/, an install's bin/). */
static int s_peerd_path(char *out, size_t size) {
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return wt_fail(WT_EIO, "cannot find this program's path: %s", strerror(errno));
  self[n] = 0;
  char *slash = strrchr(self, '/');
  if (slash) *slash = 0;
  snprintf(out, size, "%.4000s/peerd", self);
  if (access(out, X_OK) != 0)
    return wt_fail(WT_ENOTFOUND,
                   "launch runs its peers with peerd, which is not beside wantrain in %s; build "
                   "it (cmake --build build)",
                   self);
  return WT_OK;
}

/* A peer's data directory with its key pair (made here: the run directory is private). */
static int s_peer_key(const char *data) {
  char pub[PARALLEL_ZMQ_KEY_CHARS + 1], sec[PARALLEL_ZMQ_KEY_CHARS + 1], path[PATH_MAX + 48];
  if (mkdir(data, 0700) != 0) return wt_fail(WT_EIO, "cannot create %s: %s", data, strerror(errno));
  snprintf(path, sizeof path, "%.4000s/peer.key", data);
  WT_CHECK(parallel_zmq_keypair_new(pub, sec));
  int rc = parallel_zmq_keypair_save(path, pub, sec);
  memset(sec, 0, sizeof sec);
  return rc;
}

/* Starts peerd number w: its log on fd S_LOG_FD, its region the one of scenario device w (the
 * coordinator gives it a device of that region). */
static int s_spawn_peer(s_run *r, const char *peerd, const char *token, int w) {
  const launch_args *a = r->a;
  const char *ep = coordinator_endpoint(r->coord);
  char key[PATH_MAX + 32], data[PATH_MAX + 32], device[32], gpus[16], region[128] = "";
  snprintf(key, sizeof key, "%.1000s/coordinator/coordinator.pub", r->dir);
  snprintf(data, sizeof data, "%.1000s/peer-%d", r->dir, w);
  snprintf(device, sizeof device, "%.20s", a->run.device);
  if (r->gpus) snprintf(device, sizeof device, "cuda:%d", w % r->gpus);
  snprintf(gpus, sizeof gpus, "%d", a->run.site_ranks);
  if (r->sc)
    snprintf(region, sizeof region, "%.100s",
             netsim_scenario_region_name(r->sc, netsim_scenario_region_of(r->sc, w)));
  char logfd[32];
  snprintf(logfd, sizeof logfd, "/dev/fd/%d", S_LOG_FD);
  const char *argv[40];
  int n = 0;
  const char *fixed[] = {peerd,
                         "--coordinator",
                         ep,
                         "--coordinator-key",
                         key,
                         "--token",
                         token,
                         "--data-dir",
                         data,
                         "--device",
                         device,
                         "--precision",
                         a->run.precision,
                         "--gpus",
                         gpus,
                         "--site-efficiency",
                         "1",
                         "--flops",
                         "1e12",
                         "--quiet",
                         "--json-log",
                         logfd};
  for (size_t i = 0; i < sizeof fixed / sizeof *fixed; i++) argv[n++] = fixed[i];
  if (a->run.tf32) argv[n++] = "--tf32";
  if (region[0]) argv[n++] = "--region", argv[n++] = region;
  if (a->cache_dir[0]) argv[n++] = "--cache-dir", argv[n++] = a->cache_dir;
  argv[n] = NULL;
  int fds[2];
  WT_CHECK(s_peer_key(data));
  if (pipe(fds) != 0) return wt_fail(WT_EIO, "pipe: %s", strerror(errno));
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) return wt_fail(WT_EIO, "cannot start peerd %d: %s", w, strerror(errno));
  if (pid == 0) {
    close(fds[0]);
    if (dup2(fds[1], S_LOG_FD) < 0) _exit(127);
    if (fds[1] != S_LOG_FD) close(fds[1]);
    execv(peerd, (char *const *)argv);
    fprintf(stderr, "wantrain launch: cannot run %s: %s\n", peerd, strerror(errno));
    _exit(127);
  }
  close(fds[1]);
  fcntl(fds[0], F_SETFD, FD_CLOEXEC);
  r->p[w] = (s_peer){.pid = pid,
                     .fd = fds[0],
                     .running = 1,
                     .rank = -1,
                     .peer_id = -1,
                     .loss = NAN,
                     .val = NAN,
                     .last_val = NAN};
  return WT_OK;
}

static int s_rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  remove(path);
  return 0;
}

static void s_remove_dir(const char *dir) {
  if (dir[0]) nftw(dir, s_rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- what the peers report ---------------------------------------------------------------- */

static void s_fail(s_run *r) {
  if (r->failed) return;
  r->failed = 1;
  r->failed_at = wt_now_s();
}

/* Progress of `step`, which every peer has finished; `slow` finished it last, so its loss and
 * time are that step's (the loss is the same on every peer). */
static void s_progress(s_run *r, long step, const s_peer *slow) {
  const launch_args *a = r->a;
  float loss = slow->loss, val = slow->steps == step ? slow->val : NAN;
  double step_s = slow->step_s;
  uint64_t b[3] = {0, 0, 0};
  for (int w = 0; w < r->world; w++)
    for (int k = 0; k < 3; k++) b[k] += r->p[w].bytes[k];
  double tok_s = (double)a->run.batch * a->run.seq / step_s;
  char vbuf[32] = "";
  if (!isnan(val)) snprintf(vbuf, sizeof vbuf, " | val %.4f", val);
  if (step % a->log_every == 0 || step == r->first_step || step == a->run.steps || vbuf[0]) {
    printf("step %6ld/%d | loss %.4f%s | %8.0f tok/s | sent MB: pipeline %.2f, data-parallel "
           "%.2f, control %.3f\n",
           step, a->run.steps, loss, vbuf, tok_s, b[0] / 1e6, b[1] / 1e6, b[2] / 1e6);
    fflush(stdout);
  }
  if (r->log.f) {
    char jval[32] = "null";
    if (!isnan(val)) snprintf(jval, sizeof jval, "%.6f", val);
    cli_json_log_line(&r->log,
                      "{\"step\":%ld,\"loss\":%.6f,\"val_loss\":%s,\"tokens_per_s\":%.1f,"
                      "\"step_s\":%.6f,\"bytes_pipeline\":%llu,\"bytes_data\":%llu,"
                      "\"bytes_control\":%llu}\n",
                      step, loss, jval, tok_s, step_s, (unsigned long long)b[0],
                      (unsigned long long)b[1], (unsigned long long)b[2]);
  }
  if (step > r->first_step || a->run.steps == r->first_step) { /* the first includes start-up */
    r->step_sum += step_s;
    r->step_count++;
  }
}

static double s_num(const cJSON *o, const char *key) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static int s_placement(s_run *r);

static void s_on_step(s_run *r, s_peer *p, const cJSON *o) {
  if (!r->plan) s_placement(r); /* said before the first progress line */
  p->steps = (long)s_num(o, "step");
  p->loss = (float)s_num(o, "loss");
  p->val = (float)s_num(o, "val_loss");
  p->step_s = s_num(o, "step_s");
  p->bytes[0] = (uint64_t)s_num(o, "bytes_pipeline");
  p->bytes[1] = (uint64_t)s_num(o, "bytes_data");
  p->bytes[2] = (uint64_t)s_num(o, "bytes_control");
  int slow = 0;
  for (int k = 0; k < r->world; k++)
    if (r->p[k].steps < r->p[slow].steps) slow = k;
  long all = r->p[slow].steps;
  if (r->printed < 0 && all > 0) r->printed = (r->first_step = all) - 1;
  while (r->printed >= 0 && r->printed < all) s_progress(r, ++r->printed, &r->p[slow]);
}

static void s_on_start(s_peer *p, const cJSON *o) {
  p->rank = (int)s_num(o, "rank");
  p->peer_id = (int)s_num(o, "peer_id");
  const cJSON *ring = cJSON_GetObjectItemCaseSensitive(o, "dp_ring");
  for (int i = 0; i < cJSON_GetArraySize(ring) && i < S_MAX_RANKS; i++)
    p->ring[i] = (int)cJSON_GetNumberValue(cJSON_GetArrayItem(ring, i));
}

static void s_on_done(s_run *r, s_peer *p, const cJSON *o) {
  p->done = 1;
  p->ok = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "ok"));
  const char *err = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "error"));
  if (err) snprintf(p->error, sizeof p->error, "%s", err);
  p->code = (int)s_num(o, "code");
  p->steps = (long)s_num(o, "steps");
  p->loss = (float)s_num(o, "loss");
  p->last_val = (float)s_num(o, "val_loss");
  p->time_limited = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "time_limited"));
  p->seconds = s_num(o, "seconds"), p->compute_s = s_num(o, "compute_s");
  p->bytes[0] = (uint64_t)s_num(o, "bytes_pipeline");
  p->bytes[1] = (uint64_t)s_num(o, "bytes_data");
  p->bytes[2] = (uint64_t)s_num(o, "bytes_control");
  p->site_bytes = s_num(o, "bytes_site"), p->wire_bytes = s_num(o, "wire_bytes");
  p->wait_s = s_num(o, "wait_s"), p->refused = s_num(o, "refused");
  const char *ph[4] = {"pipeline_s", "tied_s", "reduce_s", "norm_s"};
  for (int k = 0; k < 4; k++) p->phase_s[k] = s_num(o, ph[k]);
  p->recomputes = (long)s_num(o, "recomputes");
  if (!p->ok) s_fail(r);
}

static void s_handle_line(s_run *r, s_peer *p, const char *line) {
  cJSON *o = cJSON_Parse(line);
  const char *event = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "event"));
  if (!o) return;
  if (!event)
    s_on_step(r, p, o);
  else if (!strcmp(event, "start"))
    s_on_start(p, o);
  else if (!strcmp(event, "done"))
    s_on_done(r, p, o);
  cJSON_Delete(o);
}

/* Reads what a peer wrote; returns 0 at end of file. */
static int s_read_log(s_run *r, s_peer *p) {
  ssize_t n = read(p->fd, p->line + p->len, sizeof p->line - 1 - p->len);
  if (n < 0 && errno == EINTR) return 1;
  if (n <= 0) return 0;
  p->len += (size_t)n;
  p->line[p->len] = 0;
  char *start = p->line, *nl;
  while ((nl = strchr(start, '\n'))) {
    *nl = 0;
    s_handle_line(r, p, start);
    start = nl + 1;
  }
  p->len = strlen(start);
  memmove(p->line, start, p->len + 1);
  if (p->len == sizeof p->line - 1) p->len = 0; /* an over-long line: drop it */
  return 1;
}

static void s_reap(s_run *r) {
  for (int w = 0; w < r->world; w++) {
    s_peer *p = &r->p[w];
    int st;
    if (!p->running || waitpid(p->pid, &st, WNOHANG) != p->pid) continue;
    p->running = 0;
    p->exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (p->exit_code != 0) s_fail(r);
  }
}

static int s_all_done(const s_run *r) {
  for (int w = 0; w < r->world; w++)
    if (!r->p[w].done || !r->p[w].ok) return 0;
  return 1;
}

/* A run that cannot start or go on fails, saying why: the coordinator's loop ended, or no peer
 * started training within the deadline (a registration or a placement that never succeeds). */
static void s_check_progress(s_run *r) {
  if (r->failed) return;
  int started = 0;
  for (int w = 0; w < r->world; w++) started += r->p[w].rank >= 0;
  const double deadline = r->a->timeout + 60;
  if (r->coord_done && !s_all_done(r)) {
    fprintf(stderr, "wantrain launch: error: the coordinator stopped: %s\n",
            r->coord_error[0] ? r->coord_error : "its loop ended before the run");
    s_fail(r);
  } else if (!started && wt_now_s() - r->t0 > deadline) {
    fprintf(stderr,
            "wantrain launch: error: the coordinator placed no tasklet within %.0f s "
            "(--timeout + 60 s); run coordinator and peerd by hand with WT_LOG_LEVEL=info to see "
            "why\n",
            deadline);
    s_fail(r);
  }
}

/* Runs until every peer has exited: the coordinator tells them the run is complete once each has
 * reported; after a failure the others get S_GRACE_S to stop on their own, then SIGTERM, then
 * SIGKILL. */
static void s_supervise(s_run *r) {
  int term_sent = 0, kill_sent = 0;
  double finished_at = 0;
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
      if ((fds[i].revents & (POLLIN | POLLHUP)) && !s_read_log(r, &r->p[idx[i]])) {
        close(r->p[idx[i]].fd);
        r->p[idx[i]].fd = -1;
      }
    s_reap(r);
    if (!r->failed) s_placement(r); /* once every peer has started training */
    s_check_progress(r);
    if (s_signal && !r->failed) {
      fprintf(stderr, "wantrain launch: stopped by signal %d; stopping every peer\n",
              (int)s_signal);
      s_fail(r);
      r->failed_at -= S_GRACE_S;
    }
    if (!r->failed && s_all_done(r) && finished_at == 0) finished_at = wt_now_s();
    /* the peers leave when the coordinator says the run is complete; a lost FINISH has a bound */
    double since = r->failed         ? wt_now_s() - r->failed_at
                   : finished_at > 0 ? wt_now_s() - finished_at - 10
                                     : 0;
    for (int w = 0; w < r->world; w++) {
      if (!r->p[w].running) continue;
      if (since > S_GRACE_S && !term_sent) kill(r->p[w].pid, SIGTERM);
      if (since > S_GRACE_S + 2 && !kill_sent) kill(r->p[w].pid, SIGKILL);
    }
    if (since > S_GRACE_S) term_sent = 1;
    if (since > S_GRACE_S + 2) kill_sent = 1;
  }
}

/* The peer at world rank w, or NULL. */
static const s_peer *s_at_rank(const s_run *r, int w) {
  for (int k = 0; k < r->world; k++)
    if (r->p[k].rank == w) return &r->p[k];
  return NULL;
}

/* With a scenario, the coordinator's placement once every peer has started: the scenario device
 * of each world rank (its status's "scenario_device" of the peer at that rank) and each stage's
 * ring as the peers run it. */
static int s_placement(s_run *r) {
  if (r->plan || !r->sc) return r->plan != NULL;
  for (int w = 0; w < r->world; w++)
    if (!s_at_rank(r, w)) return 0;
  char *text = coordinator_status_json(r->coord);
  cJSON *st = text ? cJSON_Parse(text) : NULL;
  free(text);
  const int S = r->a->run.stages, R = r->a->run.replicas;
  assign_plan *plan = assign_plan_new(S, R);
  plan->ring = wt_xmalloc(sizeof(int) * (size_t)(S * R));
  int ok = st != NULL;
  for (int w = 0; ok && w < r->world; w++) {
    const s_peer *p = s_at_rank(r, w);
    plan->device[w] = -1;
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(st, "peers")) {
      const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "id"));
      if (id && atoi(id) == p->peer_id) plan->device[w] = (int)s_num(e, "scenario_device");
    }
    ok = plan->device[w] >= 0;
    if (w % R == 0) memcpy(plan->ring + w, p->ring, sizeof(int) * (size_t)R);
  }
  cJSON_Delete(st);
  if (!ok) {
    assign_plan_destroy(&plan);
    return 0;
  }
  r->plan = plan;
  printf("emulating scenario %s (%d devices) at time scale %g; device of each peer:",
         netsim_scenario_name(r->sc), netsim_scenario_network(r->sc)->n, r->a->time_scale);
  for (int w = 0; w < r->world; w++) printf(" %d", plan->device[w]);
  printf(" (%s)\n", r->a->assignment[0]            ? r->a->assignment
                    : strcmp(r->a->solver, "none") ? r->a->solver
                                                   : "rank order");
  fflush(stdout);
  return 1;
}

/* ---- the summary -------------------------------------------------------------------------- */

/* netsim's iteration time for the coordinator's placement and this run's schedule, fed with what
 * the run measured: per-pass compute of each stage (mean over its replicas; a backward counts as
 * two forwards), the bytes that crossed a cut per micro-batch, and a stage's gradient bytes; the
 * network's times (access links included) scaled like the emulation's. It models what the runtime
 * does besides the passes and the reduce: the tied embedding's exchange and the per-step norm
 * exchange (docs/runtime.md). The stages hold one activation slot per micro-batch in flight, so
 * no forward is recomputed (netsim's recompute stays off). */
enum { S_MODEL_TIED = 2, S_MODEL_NORM = 4, S_MODEL_ALL = 6 };

static int s_predict(const s_run *r, int model, double *out) {
  const launch_args *a = r->a;
  int S = a->run.stages, R = a->run.replicas, m = a->run.micro_batches;
  double steps = (double)(r->printed - r->first_step + 1);
  if (r->printed < 0 || steps < 1) return wt_fail(WT_EINVAL, "no step ran");
  if (!r->plan) return wt_fail(WT_EINVAL, "the placement is not known");
  double tied = 4.0 * r->vocab * a->run.channels; /* the tied embedding's gradient, V x C */
  netsim_sim_config cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.schedule = !strcmp(a->run.schedule, "gpipe") ? NETSIM_GPIPE : NETSIM_1F1B;
  cfg.micro_batches = m;
  cfg.norm_bytes = 32;
  double *fwd = wt_xcalloc((size_t)S, sizeof(double)), bp = 0, bd = 0;
  for (int k = 0; k < r->world; k++) {
    const s_peer *p = &r->p[k];
    /* a micro-batch's compute: forward f, backward 2f */
    fwd[p->rank / R] += p->compute_s / steps / (3.0 * m) / R;
    bp += (double)p->bytes[0];
    bd += (double)p->bytes[1];
  }
  cfg.stage_fwd_s = fwd;
  cfg.norm_exchange = !!(model & S_MODEL_NORM);
  /* the pipeline links carry the tied gradient too (both ways, every replica) */
  double act = S > 1 ? bp / steps - (double)R * 2 * tied : 0;
  cfg.act_bytes = S > 1 ? WT_MAX(act, 0.0) / (R * (S - 1) * m * 2) : 0;
  cfg.grad_bytes = R > 1 && !a->run.sync.diloco ? bd / (steps * S * 2 * (R - 1)) : 0;
  cfg.dp_algo = ASSIGN_DP_RING;
  cfg.dp_ring = r->plan->ring;
  cfg.tied_bytes = model & S_MODEL_TIED && S > 1 ? tied : 0;
  const assign_network *net = netsim_scenario_network(r->sc);
  size_t nn = (size_t)net->n * (size_t)net->n;
  assign_network scaled = {.n = net->n,
                           .latency_s = wt_xmalloc(nn * sizeof(double)),
                           .bandwidth_Bps = wt_xmalloc(nn * sizeof(double))};
  for (size_t i = 0; i < nn; i++) {
    scaled.latency_s[i] = net->latency_s[i] * a->time_scale;
    scaled.bandwidth_Bps[i] = net->bandwidth_Bps[i] / a->time_scale;
  }
  const assign_access *acc = netsim_scenario_access(r->sc);
  assign_access sacc;
  double *up = NULL, *down = NULL;
  if (acc) {
    up = wt_xmalloc(sizeof(double) * (size_t)acc->n_links);
    down = wt_xmalloc(sizeof(double) * (size_t)acc->n_links);
    for (int k = 0; k < acc->n_links; k++)
      up[k] = acc->up_Bps[k] / a->time_scale, down[k] = acc->down_Bps[k] / a->time_scale;
    sacc = (assign_access){acc->n_links, acc->link_of, up, down};
    cfg.access = &sacc;
  }
  netsim_sim_result res;
  int rc = netsim_simulate(&scaled, r->plan, &cfg, &res, NULL);
  free(scaled.latency_s), free(scaled.bandwidth_Bps), free(up), free(down), free(fwd);
  if (rc == WT_OK) *out = res.iteration_s;
  return rc;
}

/* The failure to name: a peer that died without reporting, else one whose error is not a lost
 * link or a deadline (those echo another's failure), else the first that failed. */
static const s_peer *s_cause(const s_run *r) {
  for (int w = 0; w < r->world; w++)
    if (r->p[w].exit_code != 0 && !r->p[w].done) return &r->p[w];
  for (int w = 0; w < r->world; w++)
    if (r->p[w].done && !r->p[w].ok && r->p[w].code != WT_EIO && r->p[w].code != WT_ETIMEOUT)
      return &r->p[w];
  for (int w = 0; w < r->world; w++)
    if ((r->p[w].done && !r->p[w].ok) || r->p[w].exit_code != 0) return &r->p[w];
  return NULL;
}

static void s_name(const s_run *r, const s_peer *p, char *out, size_t size) {
  const int R = r->a->run.replicas;
  if (p->rank >= 0)
    snprintf(out, size, "process %d (stage %d, replica %d)", p->rank, p->rank / R, p->rank % R);
  else
    snprintf(out, size, "peerd %d (not placed yet)", (int)(p - r->p));
}

static int s_report_failure(const s_run *r) {
  const s_peer *cause = s_signal ? NULL : s_cause(r); /* a signal is no peer's fault */
  char name[128];
  if (cause) {
    s_name(r, cause, name, sizeof name);
    fprintf(stderr, "wantrain launch: error: %s failed: %s\n", name,
            cause->error[0]           ? cause->error
            : cause->exit_code >= 128 ? "it was killed by a signal"
                                      : "it exited without saying why (crashed?)");
    if (!cause->error[0] && cause->exit_code > 0 && cause->exit_code < 128)
      fprintf(stderr, "  (exit status %d)\n", cause->exit_code);
  }
  for (int w = 0; w < r->world; w++)
    if (&r->p[w] != cause && r->p[w].error[0]) {
      s_name(r, &r->p[w], name, sizeof name);
      fprintf(stderr, "  %s stopped: %s\n", name, r->p[w].error);
    }
  return WT_EIO;
}

static int s_summary(s_run *r) {
  const launch_args *a = r->a;
  if (r->failed || !s_all_done(r)) return s_report_failure(r);
  const s_peer *p0 = s_at_rank(r, 0);
  uint64_t b[3] = {0, 0, 0};
  double compute = 0, seconds = 0, wire = 0, wait = 0, refused = 0, site = 0;
  double ph[4] = {0, 0, 0, 0}, ran = (double)(r->printed - r->first_step + 1);
  long recomputes = 0;
  for (int w = 0; w < r->world; w++) {
    const s_peer *p = &r->p[w];
    for (int k = 0; k < 3; k++) b[k] += p->bytes[k];
    compute += p->compute_s;
    seconds = WT_MAX(seconds, p->seconds);
    wire += p->wire_bytes, wait += p->wait_s / r->world, refused += p->refused;
    for (int k = 0; k < 4; k++) ph[k] += p->phase_s[k] / r->world / WT_MAX(ran, 1.0);
    recomputes += p->recomputes;
    site += p->site_bytes;
  }
  double wall = wt_now_s() - r->t0;
  long steps = p0->steps;
  double iter = r->step_count ? r->step_sum / (double)r->step_count : NAN;
  if (p0->time_limited)
    printf("time limit of %g s reached at step %ld of %d%s\n", a->run.time_limit, steps,
           a->run.steps,
           a->run.checkpoint_dir[0] ? "; --resume continues from the checkpoint" : "");
  printf("done: %ld steps | loss %.6f | val %.4f | %.0f tok/s | %.1f s (%.1f s training)\n", steps,
         p0->loss, p0->last_val,
         (double)a->run.batch * a->run.seq * (double)r->step_count / r->step_sum, wall, seconds);
  printf("iteration time %.4f s (mean of steps %ld..%ld); compute %.0f%% of the peers' time\n",
         iter, WT_MIN(r->first_step + 1, steps), steps,
         seconds > 0 ? 100 * compute / (seconds * r->world) : 0.0);
  printf("bytes sent: pipeline %.3f MB, data-parallel %.3f MB, control %.3f MB\n", b[0] / 1e6,
         b[1] / 1e6, b[2] / 1e6);
  printf("transport: %.3f MB on the wire (collective envelopes included), %.2f s waited on peers "
         "per process, %.0f messages refused\n",
         wire / 1e6, wait, refused);
  printf("per step (mean over processes): pipeline %.4f s, tied exchange %.4f s, reduce %.4f s, "
         "norm exchange %.4f s\n",
         ph[0], ph[1], ph[2], ph[3]);
  printf("activation slots: %s; %ld forward passes recomputed in all processes\n",
         a->run.moe.experts      ? "one (an MoE stage keeps one forward in flight)"
         : a->run.site_ranks > 1 ? "one per stage (a site keeps one forward)"
         : a->run.act_slots      ? "bounded by --act-slots"
                                 : "one per micro-batch in flight",
         recomputes);
  if (a->run.site_ranks > 1 && a->run.moe.experts)
    printf("sites: every stage on %d expert-parallel ranks; %.3f MB between their ranks in all "
           "processes\n",
           a->run.site_ranks, site / 1e6);
  else if (a->run.site_ranks > 1)
    printf("sites: every stage on %d tensor-parallel x %d context-parallel ranks; %.3f MB "
           "between their ranks in all processes\n",
           a->run.site_ranks / a->run.site_cp, a->run.site_cp, site / 1e6);
  double predicted = NAN;
  if (r->sc) {
    double part[2];
    if (s_predict(r, S_MODEL_ALL, &predicted) == WT_OK && s_predict(r, 0, &part[0]) == WT_OK &&
        s_predict(r, S_MODEL_TIED, &part[1]) == WT_OK) {
      printf("netsim predicts %.4f s per iteration for scenario %s with this assignment and "
             "schedule (measured %.4f s, %+.1f%%)\n",
             predicted, netsim_scenario_name(r->sc), iter, 100 * (iter / predicted - 1));
      printf("netsim, part by part: passes and reduce %.4f s, + tied exchange %.4f s, "
             "+ norm exchange %.4f s\n",
             part[0], part[1], predicted);
    } else {
      printf("netsim prediction unavailable: %s\n", wt_last_error());
    }
  }
  char jval[32] = "null";
  if (!isnan(p0->last_val)) snprintf(jval, sizeof jval, "%.6f", p0->last_val);
  if (r->log.f)
    cli_json_log_line(
        &r->log,
        "{\"event\":\"done\",\"steps\":%ld,\"loss\":%.6f,\"val_loss\":%s,"
        "\"time_limited\":%s,\"iteration_s\":%.6f,"
        "\"predicted_iteration_s\":%.6f,\"bytes_pipeline\":%llu,\"bytes_data\":%llu,"
        "\"bytes_control\":%llu,\"pipeline_s\":%.6f,\"tied_s\":%.6f,\"reduce_s\":%.6f,"
        "\"norm_s\":%.6f,\"recomputes\":%ld}\n",
        steps, p0->loss, jval, p0->time_limited ? "true" : "false", iter,
        isnan(predicted) ? -1.0 : predicted, (unsigned long long)b[0], (unsigned long long)b[1],
        (unsigned long long)b[2], ph[0], ph[1], ph[2], ph[3], recomputes);
  return WT_OK;
}

/* ---- the command -------------------------------------------------------------------------- */

/* Makes the run directory, starts the coordinator and the peers. WT_OK or the error. */
static int s_start(s_run *r) {
  const char *tmp = getenv("TMPDIR");
  snprintf(r->dir, sizeof r->dir, "%.1000s/wantrain-launch-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
  if (!mkdtemp(r->dir)) {
    r->dir[0] = 0;
    return wt_fail(WT_EIO, "cannot create a run directory in %s: %s", tmp ? tmp : "/tmp",
                   strerror(errno));
  }
  char peerd[PATH_MAX], token[256];
  WT_CHECK(s_peerd_path(peerd, sizeof peerd));
  WT_CHECK(s_start_coordinator(r, token, sizeof token));
  for (int w = 0; w < r->world; w++) WT_CHECK(s_spawn_peer(r, peerd, token, w));
  return WT_OK;
}

int cmd_launch(int argc, char **argv) {
  setenv("WT_LOG_LEVEL", "warn", 0); /* the peers' and the coordinator's warnings only */
  wt_log_reread_level();
  static launch_args a;
  int rc = cli_parse("launch", s_usage, s_options, &a, argc, argv);
  if (rc) return rc < 0 ? CLI_OK : rc;
  int world = a.run.stages * a.run.replicas, gpus = 0, vocab = 0;
  netsim_scenario_set *set = NULL;
  const netsim_scenario *sc = NULL;
  if ((rc = s_check(&a, &gpus, &vocab)) != CLI_OK) return rc;
  if (s_scenario(&a, &set, &sc) != WT_OK) {
    fprintf(stderr, "wantrain launch: error: %s\n", wt_last_error());
    return CLI_USAGE;
  }
  static s_run r;
  memset(&r, 0, sizeof r);
  r.a = &a, r.world = world, r.gpus = gpus, r.sc = sc, r.vocab = vocab;
  r.printed = -1;
  if (cli_json_log_open(&r.log, "launch", a.json_log) != WT_OK) {
    netsim_scenario_set_destroy(&set);
    return cli_fail("launch");
  }
  signal(SIGINT, s_on_signal);
  signal(SIGTERM, s_on_signal);
  signal(SIGPIPE, SIG_IGN);
  r.t0 = wt_now_s();
  rc = s_start(&r);
  int usage = rc == WT_EINVAL && !r.coord; /* the coordinator refused the options */
  if (rc != WT_OK) {
    fprintf(stderr, "wantrain launch: error: %s\n", wt_last_error());
    for (int w = 0; w < world; w++)
      if (r.p[w].running) kill(r.p[w].pid, SIGTERM);
    s_fail(&r);
  }
  s_supervise(&r);
  s_stop_coordinator(&r);
  if (rc == WT_OK) rc = s_summary(&r);
  rc = cli_json_log_close(&r.log, rc);
  if (rc != WT_OK && !r.failed && r.coord_rc == WT_OK)
    fprintf(stderr, "wantrain launch: error: %s\n", wt_last_error());
  s_remove_dir(r.dir);
  if (r.plan) assign_plan_destroy(&r.plan);
  netsim_scenario_set_destroy(&set);
  if (s_signal) return 128 + (int)s_signal;
  if (usage) return CLI_USAGE;
  return rc == WT_OK ? CLI_OK : CLI_FAIL;
}
