/* cmd_demo — `wantrain demo`: the decentralized run on one machine, showing what the project is
 * for. A coordinator and nine peerd processes (eight train 2 stages x 4 replicas, one waits as a
 * standby) train a byte-level GPT on the Shakespeare text that ships in data/, over an emulated
 * 4-region WAN (coordinator/scenarios/wan4.json) with a WAN communication preset (DiLoCo and sign
 * gradients) and int8 activations; part-way one training peer is killed with SIGKILL and the
 * standby takes over. Then eight fresh peerd train a short run on the same WAN with the
 * placement chosen at random, so that the GA's placement is measured, not only predicted. Ends
 * with a summary (loss, GA vs random placement predicted and measured, WAN bytes against
 * uncompressed training, recovery time, the loss curve as a PNG when gnuplot is there, a text
 * sample from the trained model) and, with --json, one JSON line. Everything runs on loopback
 * with ephemeral ports, in a scratch directory. */
#include "tools/wantrain/cli.h"

#include "common/common.h"
#include "common/plot.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define S_PEERS 9 /* 2 x 4 tasklets + 1 standby */
#define S_SEATS 8

typedef struct {
  double minutes;
  int steps, compare_steps, json, kill_peer;
  char dir[WT_CONFIG_STR_MAX], scenario[WT_CONFIG_STR_MAX], data[WT_CONFIG_STR_MAX];
  char act_codec[WT_CONFIG_STR_MAX], preset[WT_CONFIG_STR_MAX];
  double time_scale;
} demo_args;

#define F(x) offsetof(demo_args, x)
static const wt_option s_options[] = {
    {"minutes", WT_OPT_FLOAT, F(minutes), 0.2, 600, "3", "bound on the demo's length", 0},
    {"steps", WT_OPT_INT, F(steps), 20, 1e6, "500", "training steps (fewer if time runs out)", 0},
    {"compare-steps", WT_OPT_INT, F(compare_steps), 0, 1e6, "60",
     "steps of the run with random placement that measures the GA's gain (0 = no such run)", 0},
    {"json", WT_OPT_FLAG, F(json), 0, 1, "0", "end with one JSON line of the results", 0},
    {"dir", WT_OPT_STRING, F(dir), 0, 0, "", "working directory (default: a new temp dir)", 0},
    {"kill", WT_OPT_FLAG, F(kill_peer), 0, 1, "1", "kill one training peer part-way", 0},
    {"scenario", WT_OPT_STRING, F(scenario), 0, 0, "",
     "WAN scenario (default: the shipped coordinator/scenarios/wan4.json)", 0},
    {"data", WT_OPT_STRING, F(data), 0, 0, "",
     "training text, read as bytes (default: the shipped data/shakespeare.txt)", 0},
    {"preset", WT_OPT_CHOICE, F(preset), 0, 0, "wan",
     "communication preset of the data-parallel sync (docs/compression.md)",
     "none|lan|wan|slow-wan"},
    {"act-codec", WT_OPT_CHOICE, F(act_codec), 0, 0, "direct8",
     "activation compression (stateless: the standby takes over from the members' memory)",
     "none|direct8"},
    {"time-scale", WT_OPT_FLOAT, F(time_scale), 0.001, 10, "0.1",
     "wall seconds per emulated second of the WAN", 0},
    {0}};
#undef F

static const char *s_usage =
    "usage: wantrain demo [options]\n\n"
    "Runs a coordinator and 9 peerd on this machine over an emulated 4-region WAN: 2 stages x 4 "
    "replicas plus a standby train on Shakespeare's text with the WAN preset; one peer is killed "
    "part-way and the standby takes over. Then a short run with random placement on the same WAN "
    "measures what the GA's placement gains.";

static const char *s_regions[S_PEERS] = {"eu-west", "us-east", "asia",    "oceania", "eu-west",
                                         "us-east", "asia",    "oceania", "eu-west"};

/* ---- processes ------------------------------------------------------------------------------ */

static pid_t s_pids[2 * S_PEERS + 2];
static int s_npids;

static pid_t s_spawn(char *const argv[], const char *log) {
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) dup2(fd, 1), dup2(fd, 2), close(fd);
    execv(argv[0], argv);
    fprintf(stderr, "cannot run %s: %s\n", argv[0], strerror(errno));
    _exit(127);
  }
  if (pid > 0 && s_npids < (int)WT_ARRAY_LEN(s_pids)) s_pids[s_npids++] = pid;
  return pid;
}

static void s_forget(pid_t pid) {
  for (int i = 0; i < s_npids; i++)
    if (s_pids[i] == pid) s_pids[i] = -1;
}

static void s_kill_all(void) {
  for (int i = 0; i < s_npids; i++)
    if (s_pids[i] > 0) kill(s_pids[i], SIGKILL);
  for (int i = 0; i < s_npids; i++)
    if (s_pids[i] > 0) waitpid(s_pids[i], NULL, 0);
  s_npids = 0;
}

/* ---- files ---------------------------------------------------------------------------------- */

/* The whole text of a file (malloc'd, NUL-terminated), or NULL. */
static char *s_slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = wt_xmalloc((size_t)(n > 0 ? n : 0) + 1);
  size_t got = fread(buf, 1, (size_t)(n > 0 ? n : 0), f);
  buf[got] = 0;
  fclose(f);
  return buf;
}

/* The newest line of a log containing `what`, copied to out; 0 if none. */
static int s_last_line(const char *log, const char *what, char *out, size_t size) {
  char *text = s_slurp(log);
  int found = 0;
  for (char *line = text ? strtok(text, "\n") : NULL; line; line = strtok(NULL, "\n"))
    if (strstr(line, what)) {
      snprintf(out, size, "%s", line);
      found = 1;
    }
  free(text);
  return found;
}

static void s_exe_dir(char *out, size_t size) {
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  self[n > 0 ? n : 0] = 0;
  char *slash = strrchr(self, '/');
  if (slash) *slash = 0;
  snprintf(out, size, "%s", self);
}

/* A file that ships with wantrain, into path as an absolute path (the peers read it too): the
 * one --flag named (already in path), else $env, else the one in the source tree this program
 * was built from, else the one beside the installed program (PREFIX/share/wantrain/installed). */
static int s_find_shipped(char *path, size_t size, const char *flag, const char *env,
                          const char *in_source, const char *installed, const char *exe_dir) {
  char cand[3][PATH_MAX], real[PATH_MAX];
  if (path[0]) {
    if (!realpath(path, real) || access(real, R_OK))
      return wt_fail(WT_ENOTFOUND, "--%s %s: %s", flag, path, strerror(errno));
    snprintf(path, size, "%.*s", (int)size - 1, real);
    return WT_OK;
  }
  snprintf(cand[0], sizeof cand[0], "%s", getenv(env) ? getenv(env) : "");
  snprintf(cand[1], sizeof cand[1], "%s/%s", WT_SOURCE_DIR, in_source);
  snprintf(cand[2], sizeof cand[2], "%.2000s/../share/wantrain/%s", exe_dir, installed);
  for (int i = 0; i < 3; i++)
    if (cand[i][0] && realpath(cand[i], real) && access(real, R_OK) == 0) {
      snprintf(path, size, "%.*s", (int)size - 1, real);
      return WT_OK;
    }
  return wt_fail(WT_ENOTFOUND, "%s is not at %s or %s; pass --%s FILE", in_source, cand[1], cand[2],
                 flag);
}

/* ---- a local cluster: a coordinator and its peers ------------------------------------------- */

typedef struct {
  char dir[WT_CONFIG_STR_MAX + 32]; /* its state directory and logs */
  char state[WT_CONFIG_STR_MAX + 48], log[WT_CONFIG_STR_MAX + 48], ckpt[WT_CONFIG_STR_MAX + 64];
  char endpoint[256], pub[WT_CONFIG_STR_MAX + 80], http_port[16];
  pid_t coord, peer[S_PEERS];
  int n_peers;
} demo_cluster;

/* A join token for the cluster's peers, as an operator would mint it. */
static int s_mint_token(const char *coord, const demo_cluster *cl, char *token, size_t size) {
  char cmd[3 * PATH_MAX];
  snprintf(cmd, sizeof cmd, "'%s' token new --state-dir '%s' --uses %d --expires 1h", coord,
           cl->state, cl->n_peers);
  FILE *tp = popen(cmd, "r");
  token[0] = 0;
  if (!tp || !fgets(token, (int)size, tp)) {
    if (tp) pclose(tp);
    return wt_fail(WT_EIO, "could not mint a join token with %s", coord);
  }
  pclose(tp);
  token[strcspn(token, "\n")] = 0;
  return WT_OK;
}

/* Starts the coordinator of a run of `steps` placed by `solver` and waits for its endpoint. */
static int s_start_coordinator(const demo_args *a, const char *coord, demo_cluster *cl,
                               const char *solver, int steps) {
  char steps_s[32], ts[32];
  snprintf(steps_s, sizeof steps_s, "%d", steps);
  snprintf(ts, sizeof ts, "%g", a->time_scale);
  /* 2 x 4 of a small byte-level model, so that a minute on two cores shows a whole run */
  /* one option and its value a pair */
  // clang-format off
  char *argv[] = {(char *)coord,
      "--state-dir", cl->state,           "--stages", "2",
      "--replicas", "4",                  "--steps", steps_s,
      "--micro-batches", "2",             "--seq", "32",
      "--channels", "32",                 "--heads", "2",
      "--warmup", "0",                    "--val-every", "0",
      "--val-batches", "1",               "--data", (char *)a->data,
      "--scenario", (char *)a->scenario,  "--time-scale", ts,
      "--preset", (char *)a->preset,      "--act-codec", (char *)a->act_codec,
      "--solver", (char *)solver,         "--checkpoint-dir", cl->ckpt,
      "--checkpoint-every", "10",         "--keep", "3",
      "--probe-kib", "128",               "--heartbeat", "0.25",
      "--liveness", "6",                  "--peer-timeout", "20",
      "--exit-when-done", NULL};
  // clang-format on
  cl->coord = s_spawn(argv, cl->log);
  char endpoint_file[sizeof cl->state + 16], port_file[sizeof cl->state + 16];
  snprintf(endpoint_file, sizeof endpoint_file, "%s/endpoint", cl->state);
  snprintf(port_file, sizeof port_file, "%s/http_port", cl->state);
  snprintf(cl->pub, sizeof cl->pub, "%s/coordinator.pub", cl->state);
  for (int i = 0; i < 100 && !cl->endpoint[0]; i++) {
    usleep(100000);
    if (waitpid(cl->coord, NULL, WNOHANG) == cl->coord) { /* it refused the run */
      s_forget(cl->coord);
      char *text = s_slurp(cl->log);
      int rc = wt_fail(WT_EIO, "the coordinator exited: %s", text ? text : "(no output)");
      free(text);
      return rc;
    }
    char *t = s_slurp(endpoint_file);
    if (t) snprintf(cl->endpoint, sizeof cl->endpoint, "%.*s", (int)strcspn(t, "\n"), t);
    free(t);
  }
  if (!cl->endpoint[0]) return wt_fail(WT_EIO, "the coordinator did not start; see %s", cl->log);
  char *port = s_slurp(port_file);
  snprintf(cl->http_port, sizeof cl->http_port, "%d", port ? atoi(port) : 0);
  free(port);
  return WT_OK;
}

static void s_start_peers(demo_cluster *cl, const char *peerd, const char *token) {
  for (int i = 0; i < cl->n_peers; i++) {
    char data[sizeof cl->dir + 32], plog[sizeof cl->dir + 32];
    snprintf(data, sizeof data, "%s/peer%d", cl->dir, i + 1);
    snprintf(plog, sizeof plog, "%s/peer%d.log", cl->dir, i + 1);
    char *argv[] = {(char *)peerd,
                    "--coordinator",
                    cl->endpoint,
                    "--coordinator-key",
                    cl->pub,
                    "--token",
                    (char *)token,
                    "--region",
                    (char *)s_regions[i],
                    "--data-dir",
                    data,
                    NULL};
    cl->peer[i] = s_spawn(argv, plog);
  }
}

/* A coordinator and n_peers peerd in dir, training `steps` placed by `solver`. */
static int s_cluster_start(const demo_args *a, const char *exe, const char *dir, int n_peers,
                           const char *solver, int steps, demo_cluster *cl) {
  memset(cl, 0, sizeof *cl);
  cl->n_peers = n_peers;
  snprintf(cl->dir, sizeof cl->dir, "%s", dir);
  if (mkdir(cl->dir, 0700) && errno != EEXIST)
    return wt_fail(WT_EIO, "cannot make %s: %s", cl->dir, strerror(errno));
  snprintf(cl->state, sizeof cl->state, "%s/state", cl->dir);
  snprintf(cl->log, sizeof cl->log, "%s/coordinator.log", cl->dir);
  snprintf(cl->ckpt, sizeof cl->ckpt, "%s/checkpoints", cl->state);
  char coord[PATH_MAX + 32], peerd[PATH_MAX + 32], token[256];
  snprintf(coord, sizeof coord, "%s/coordinator", exe);
  snprintf(peerd, sizeof peerd, "%s/peerd", exe);
  WT_CHECK(s_mint_token(coord, cl, token, sizeof token));
  WT_CHECK(s_start_coordinator(a, coord, cl, solver, steps));
  s_start_peers(cl, peerd, token);
  return WT_OK;
}

/* The latest committed step the coordinator logged. */
static long s_committed(const demo_cluster *cl) {
  static char line[1 << 16];
  long committed = 0;
  if (s_last_line(cl->log, "checkpoint: step", line, sizeof line))
    sscanf(strstr(line, "checkpoint: step") + 16, "%ld", &committed);
  return committed;
}

/* The coordinator's id of the cluster's i-th peerd (it prints "peerd N: admitted"), or -1. */
static int s_peer_id(const demo_cluster *cl, int i) {
  static char line[1 << 12];
  char plog[sizeof cl->dir + 32];
  snprintf(plog, sizeof plog, "%s/peer%d.log", cl->dir, i + 1);
  int id = -1;
  if (s_last_line(plog, ": admitted", line, sizeof line) && sscanf(line, "peerd %d:", &id) != 1)
    id = -1;
  return id;
}

/* The newest train epoch's members by peer id and the step it started from (from its log
 * line); their count. */
static int s_members(const demo_cluster *cl, int *ids, long *from) {
  static char line[1 << 16];
  if (!s_last_line(cl->log, "peers by world rank [", line, sizeof line)) return 0;
  const char *f = strstr(line, "from step ");
  *from = f ? atol(f + 10) : 0;
  int n = 0;
  char *p = strstr(line, "peers by world rank [") + 21;
  while (n < S_SEATS && sscanf(p, "%d", &ids[n]) == 1) {
    n++;
    p += strcspn(p, " ]");
    if (*p == ']') break;
    p++;
  }
  return n;
}

/* Kills one member of the running train epoch with SIGKILL: one in the region where the standby
 * waits, as when a spot VM dies in a region that keeps a spare (the re-placement can then keep
 * every pipeline inside a region), else one at random. Returns its peer id, or -1 when no train
 * epoch has committed a checkpoint of its own yet (one just re-placed may not run yet: a loss
 * then is no member's). */
static int s_kill_member(const demo_cluster *cl, double t0, long committed) {
  long from = 0;
  int ids[S_SEATS], n = s_members(cl, ids, &from), victim = -1, standby = -1;
  if (n == 0 || committed <= from) return -1;
  int by_index[S_PEERS];
  for (int i = 0; i < cl->n_peers; i++) {
    by_index[i] = s_peer_id(cl, i);
    int member = 0;
    for (int k = 0; k < n; k++) member |= ids[k] == by_index[i];
    if (!member && by_index[i] >= 0) standby = i;
  }
  srand((unsigned)time(NULL));
  for (int tries = 0; tries < 64 && victim < 0; tries++) {
    int i = rand() % cl->n_peers, member = 0;
    for (int k = 0; k < n; k++) member |= ids[k] == by_index[i];
    if (member && (standby < 0 || tries >= 48 || !strcmp(s_regions[i], s_regions[standby])))
      victim = i;
  }
  if (victim < 0) return -1;
  kill(cl->peer[victim], SIGKILL);
  printf("  [%3.0f s] killed peer %d (%s, pid %d) with SIGKILL after committed step %ld\n",
         wt_now_s() - t0, by_index[victim], s_regions[victim], (int)cl->peer[victim], committed);
  return by_index[victim];
}

/* Waits until the coordinator exits or `deadline` (then stops it), printing progress and, with
 * kill_after > 0, killing one member once that step is committed. Returns 1 if it exited by
 * itself; *victim is the killed peer's id or -1. */
static int s_cluster_wait(demo_cluster *cl, double t0, double deadline, int steps, long kill_after,
                          int *victim) {
  double last_print = 0;
  int status = 0;
  *victim = -1;
  while (wt_now_s() < deadline) {
    if (waitpid(cl->coord, &status, WNOHANG) == cl->coord) {
      s_forget(cl->coord);
      return 1;
    }
    usleep(200000);
    long committed = s_committed(cl);
    if (wt_now_s() - last_print > 10) {
      last_print = wt_now_s();
      printf("  [%3.0f s] committed step %ld of %d\n", wt_now_s() - t0, committed, steps);
      fflush(stdout);
    }
    if (kill_after > 0 && *victim < 0 && committed >= kill_after)
      *victim = s_kill_member(cl, t0, committed);
  }
  kill(cl->coord, SIGTERM);
  waitpid(cl->coord, &status, 0);
  s_forget(cl->coord);
  return 0;
}

/* The coordinator's final status line as JSON (caller deletes), or NULL with the error set. */
static cJSON *s_final_status(const demo_cluster *cl) {
  static char line[1 << 18]; /* the final status holds the whole loss curve */
  if (!s_last_line(cl->log, "coordinator: final ", line, sizeof line)) {
    wt_fail(WT_EIO, "the coordinator left no final status; see %s", cl->log);
    return NULL;
  }
  cJSON *st = cJSON_Parse(strstr(line, "coordinator: final ") + 19);
  if (!st) wt_fail(WT_EIO, "the coordinator's final status is not JSON; see %s", cl->log);
  return st;
}

/* ---- the summary ---------------------------------------------------------------------------- */

static double s_num(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItem(o, k);
  return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static void s_plot(const char *dir, const cJSON *st) {
  const cJSON *hist = cJSON_GetObjectItem(st, "loss_history");
  int n = cJSON_GetArraySize(hist);
  double *step = wt_xcalloc((size_t)n + 1, sizeof(double));
  double *loss = wt_xcalloc((size_t)n + 1, sizeof(double));
  for (int i = 0; i < n; i++) {
    step[i] = cJSON_GetNumberValue(cJSON_GetArrayItem(cJSON_GetArrayItem(hist, i), 0));
    loss[i] = cJSON_GetNumberValue(cJSON_GetArrayItem(cJSON_GetArrayItem(hist, i), 1));
  }
  char png[WT_CONFIG_STR_MAX + 16];
  snprintf(png, sizeof png, "%s/loss.png", dir);
  if (wt_plot_loss_png(png, step, loss, (size_t)n,
                       "wantrain demo: 2 stages x 4 replicas over an emulated 4-region WAN") ==
      WT_OK)
    printf("  loss curve             %s\n", png);
  else
    printf("  loss curve             not drawn: %s\n", wt_last_error());
  free(step);
  free(loss);
}

#define S_PROMPT "ROMEO:"

/* A text sample from the run's latest complete checkpoint, by `wantrain sample` (the multi-stage
 * run directory loads as one model): its output with line breaks shown as " / " and bytes that
 * are not printable ASCII as '?', in out. */
static int s_sample(const char *exe, const char *state, char *out, size_t size) {
  char cmd[3 * PATH_MAX];
  snprintf(cmd, sizeof cmd,
           "'%s/wantrain' sample --checkpoint '%s/checkpoints' --prompt '" S_PROMPT
           "' --tokens 160 --temperature 0.7 --seed 1 2>&1",
           exe, state);
  FILE *p = popen(cmd, "r");
  if (!p) return wt_fail(WT_EIO, "cannot run wantrain sample: %s", strerror(errno));
  size_t n = 0;
  int c;
  while (n + 4 < size && (c = fgetc(p)) != EOF) {
    if (c == '\r') continue;
    if (c == '\n') {
      memcpy(out + n, " / ", 3), n += 3;
    } else { /* a byte-level model may emit any byte: the summary and JSON stay ASCII */
      out[n++] = c >= 0x20 && c < 0x7f ? (char)c : '?';
    }
  }
  while (n >= 3 && !memcmp(out + n - 3, " / ", 3)) n -= 3;
  out[n] = 0;
  while (fgetc(p) != EOF) {
  }
  int status = pclose(p);
  return status == 0 ? WT_OK : wt_fail(WT_EIO, "wantrain sample failed: %s", out);
}

/* What the two runs measured, for the summary and the JSON line. */
typedef struct {
  double first, final, steps, wan, wan_raw, recovery;
  double ga_pred, ga_meas, random_mean_pred; /* the GA run: its plan, and random plans' mean */
  double rnd_pred, rnd_meas;                 /* the run placed at random */
  int victim, compare_steps;
  const char *state;
} demo_result;

static void s_result_of(const cJSON *st, const cJSON *rnd, double time_scale, demo_result *r) {
  r->first = s_num(st, "first_loss"), r->final = s_num(st, "loss"), r->steps = s_num(st, "step");
  r->wan = s_num(st, "wan_bytes"), r->wan_raw = s_num(st, "wan_bytes_uncompressed");
  r->recovery = s_num(st, "recovery_s");
  /* predicted: the cost model's communication per iteration, in wall seconds at the time scale */
  r->ga_pred = s_num(st, "predicted_cost_ga_s") * time_scale;
  r->random_mean_pred = s_num(st, "predicted_cost_random_s") * time_scale;
  r->ga_meas = s_num(st, "measured_iteration_s");
  r->rnd_pred = rnd ? s_num(rnd, "predicted_cost_ga_s") * time_scale : NAN;
  r->rnd_meas = rnd ? s_num(rnd, "measured_iteration_s") : NAN;
  r->state = cJSON_GetStringValue(cJSON_GetObjectItem(st, "state"));
}

static void s_print_placement(const demo_result *r) {
  printf("  placement, GA          predicted %.3f s of communication per iteration, measured "
         "%.3f s per iteration\n",
         r->ga_pred, r->ga_meas);
  if (isfinite(r->rnd_meas))
    printf("  placement, random      predicted %.3f s, measured %.3f s: the GA's placement is "
           "%.2fx faster predicted, %.2fx measured\n",
           r->rnd_pred, r->rnd_meas, r->rnd_pred / r->ga_pred, r->rnd_meas / r->ga_meas);
  else
    printf("  placement, random      not measured (%s); predicted %.3f s on average, %.2fx the "
           "GA's\n",
           r->compare_steps > 0 ? "the reason is above" : "--compare-steps 0", r->random_mean_pred,
           r->random_mean_pred / r->ga_pred);
}

static void s_print_summary(const demo_args *a, const demo_result *r, const char *log) {
  printf("\nwantrain demo: summary\n");
  printf("  training               %.0f steps on %s (bytes), loss %.3f -> %.3f (%s)\n", r->steps,
         a->data, r->first, r->final, r->state ? r->state : "?");
  s_print_placement(r);
  printf("  WAN bytes              %.1f MB between regions with --preset %s and %s activations; "
         "%.1f MB uncompressed (fp32 gradients every step, fp32 activations): %.0fx less\n",
         r->wan / 1e6, a->preset, a->act_codec, r->wan_raw / 1e6,
         r->wan > 0 ? r->wan_raw / r->wan : 0);
  if (r->victim >= 0) { /* the coordinator's last epoch line says where it started from */
    static char line[1 << 16];
    char from[512] = "?";
    if (s_last_line(log, "from step ", line, sizeof line))
      snprintf(from, sizeof from, "%s", strstr(line, "from step "));
    printf("  churn                  peer %d killed; training resumed %.1f s later %s\n", r->victim,
           r->recovery, from);
  }
}

static void s_print_json(const demo_result *r, const char *sample) {
  cJSON *j = cJSON_CreateObject();
  cJSON_AddNumberToObject(j, "peers", S_PEERS);
  cJSON_AddNumberToObject(j, "steps", r->steps);
  cJSON_AddNumberToObject(j, "first_loss", r->first);
  cJSON_AddNumberToObject(j, "final_loss", r->final);
  cJSON_AddNumberToObject(j, "predicted_iteration_ga_s", r->ga_pred);
  cJSON_AddNumberToObject(j, "measured_iteration_ga_s", r->ga_meas);
  cJSON_AddNumberToObject(j, "predicted_iteration_random_mean_s", r->random_mean_pred);
  if (isfinite(r->rnd_meas)) {
    cJSON_AddNumberToObject(j, "predicted_iteration_random_s", r->rnd_pred);
    cJSON_AddNumberToObject(j, "measured_iteration_random_s", r->rnd_meas);
  }
  cJSON_AddNumberToObject(j, "wan_bytes", r->wan);
  cJSON_AddNumberToObject(j, "wan_bytes_uncompressed", r->wan_raw);
  cJSON_AddNumberToObject(j, "peer_killed", r->victim);
  cJSON_AddNumberToObject(j, "recovery_s", r->victim >= 0 ? r->recovery : 0);
  if (sample) cJSON_AddStringToObject(j, "sample", sample);
  char *text = cJSON_PrintUnformatted(j);
  printf("%s\n", text);
  free(text);
  cJSON_Delete(j);
}

/* ---- the two runs --------------------------------------------------------------------------- */

static int s_prepare(demo_args *a, const char *exe) {
  char coord[PATH_MAX + 32], peerd[PATH_MAX + 32];
  snprintf(coord, sizeof coord, "%s/coordinator", exe);
  snprintf(peerd, sizeof peerd, "%s/peerd", exe);
  if (access(coord, X_OK) || access(peerd, X_OK))
    return wt_fail(WT_ENOTFOUND,
                   "the demo needs coordinator and peerd beside wantrain in %s; "
                   "build them (cmake --build build)",
                   exe);
  WT_CHECK(s_find_shipped(a->scenario, sizeof a->scenario, "scenario", "WANTRAIN_SCENARIO",
                          "coordinator/scenarios/wan4.json", "scenarios/wan4.json", exe));
  WT_CHECK(s_find_shipped(a->data, sizeof a->data, "data", "WANTRAIN_DEMO_DATA",
                          "data/shakespeare.txt", "data/shakespeare.txt", exe));
  if (!a->dir[0]) {
    snprintf(a->dir, sizeof a->dir, "%s/wantrain-demo-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(a->dir)) return wt_fail(WT_EIO, "cannot make a temp dir: %s", strerror(errno));
  } else if (mkdir(a->dir, 0700) && errno != EEXIST) {
    return wt_fail(WT_EIO, "cannot make --dir %s: %s", a->dir, strerror(errno));
  }
  return WT_OK;
}

/* The main run: GA placement, nine peers, one killed part-way. *exited: it ended by itself. */
static int s_ga_run(const demo_args *a, const char *exe, double t0, double deadline,
                    demo_cluster *cl, int *victim, int *exited) {
  char dir[WT_CONFIG_STR_MAX + 16];
  snprintf(dir, sizeof dir, "%s/ga", a->dir);
  WT_CHECK(s_cluster_start(a, exe, dir, S_PEERS, "ga", a->steps, cl));
  printf("wantrain demo: coordinator at %s (public key in %s)\n", cl->endpoint, cl->pub);
  printf("  scenario %s, time scale %g; text %s; preset %s\n", a->scenario, a->time_scale, a->data,
         a->preset);
  printf("  working directory      %s\n", a->dir);
  printf("  dashboard              http://127.0.0.1:%s/ (while it runs)\n", cl->http_port);
  printf("  started %d peerd (regions eu-west, us-east, asia, oceania; the 9th is a standby)\n",
         S_PEERS);
  fflush(stdout);
  *exited = s_cluster_wait(cl, t0, deadline, a->steps, a->kill_peer ? a->steps / 3 : 0, victim);
  if (!*exited) printf("  the time bound (--minutes %g) ran out; stopped the run\n", a->minutes);
  s_kill_all();
  return WT_OK;
}

/* The same WAN, eight fresh peers, the placement drawn at random: its final status, or NULL
 * when --compare-steps is 0 or it did not finish (said). */
static cJSON *s_random_run(const demo_args *a, const char *exe, double t0, double deadline) {
  if (a->compare_steps <= 0) return NULL;
  char dir[WT_CONFIG_STR_MAX + 16];
  snprintf(dir, sizeof dir, "%s/random", a->dir);
  demo_cluster cl;
  printf("  [%3.0f s] the same WAN with a random placement: %d fresh peerd, %d steps\n",
         wt_now_s() - t0, S_SEATS, a->compare_steps);
  fflush(stdout);
  cJSON *st = NULL;
  int victim;
  if (s_cluster_start(a, exe, dir, S_SEATS, "shuffle", a->compare_steps, &cl) != WT_OK)
    printf("  random placement       not measured: %s\n", wt_last_error());
  else if (!s_cluster_wait(&cl, t0, deadline, a->compare_steps, 0, &victim))
    printf("  random placement       not measured: the time bound ran out\n");
  else if (!(st = s_final_status(&cl)))
    printf("  random placement       not measured: %s\n", wt_last_error());
  s_kill_all();
  return st;
}

static int s_run(demo_args *a) {
  char exe[PATH_MAX];
  s_exe_dir(exe, sizeof exe);
  WT_CHECK(s_prepare(a, exe));
  double t0 = wt_now_s(), deadline = t0 + a->minutes * 60;
  demo_cluster ga;
  int victim = -1, exited = 0;
  WT_CHECK(s_ga_run(a, exe, t0, deadline, &ga, &victim, &exited));
  cJSON *st = s_final_status(&ga);
  if (!st) return WT_EIO;
  const char *state = cJSON_GetStringValue(cJSON_GetObjectItem(st, "state"));
  cJSON *rnd = state && !strcmp(state, "done") ? s_random_run(a, exe, t0, deadline) : NULL;
  demo_result r;
  s_result_of(st, rnd, a->time_scale, &r);
  r.victim = victim, r.compare_steps = a->compare_steps;
  s_print_summary(a, &r, ga.log);
  s_plot(a->dir, st);
  static char sample[4096];
  int sampled = s_sample(exe, ga.state, sample, sizeof sample) == WT_OK;
  if (sampled)
    printf("  text sample            %s\n", sample);
  else
    printf("  text sample            none: %s\n", wt_last_error());
  printf("  logs                   %s/{ga,random}/coordinator.log, peer*.log\n", a->dir);
  if (a->json) s_print_json(&r, sampled ? sample : NULL);
  int ok = r.state && !strcmp(r.state, "done");
  cJSON_Delete(st);
  cJSON_Delete(rnd);
  return ok || !exited ? WT_OK : wt_fail(WT_EIO, "the run did not finish; see %s", ga.log);
}

int cmd_demo(int argc, char **argv) {
  demo_args a;
  int rc = cli_parse("demo", s_usage, s_options, &a, argc, argv);
  if (rc != CLI_OK) return rc < 0 ? CLI_OK : rc;
  signal(SIGPIPE, SIG_IGN);
  rc = s_run(&a);
  s_kill_all();
  return rc == WT_OK ? CLI_OK : cli_fail("demo");
}
