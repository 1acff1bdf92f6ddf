/* cmd_demo — `wantrain demo`: the decentralized run on one machine. A coordinator and nine
 * peerd processes (eight train 2 stages x 4 replicas, one waits as a standby) on an emulated
 * 4-region WAN (coordinator/scenarios/wan4.json), GA placement, int8 activations (direct8);
 * part-way one training peer is killed with SIGKILL and the standby takes over. Ends with a summary
 * (predicted GA vs random cost, measured iteration time, WAN bytes with and without compression,
 * recovery time, the loss curve as a PNG when gnuplot is there, a text sample from the trained
 * model) and, with --json, one JSON line. Everything runs on loopback with
 * ephemeral ports, in a scratch directory. */
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

typedef struct {
  double minutes;
  int steps, json, keep, kill_peer;
  char dir[WT_CONFIG_STR_MAX], scenario[WT_CONFIG_STR_MAX];
  char act_codec[WT_CONFIG_STR_MAX];
  double time_scale;
} demo_args;

#define F(x) offsetof(demo_args, x)
static const wt_option s_options[] = {
    {"minutes", WT_OPT_FLOAT, F(minutes), 0.2, 600, "3", "bound on the demo's length", 0},
    {"steps", WT_OPT_INT, F(steps), 20, 1e6, "300", "training steps (fewer if time runs out)", 0},
    {"json", WT_OPT_FLAG, F(json), 0, 1, "0", "end with one JSON line of the results", 0},
    {"dir", WT_OPT_STRING, F(dir), 0, 0, "", "working directory (default: a new temp dir)", 0},
    {"keep", WT_OPT_FLAG, F(keep), 0, 1, "0", "keep the working directory", 0},
    {"kill", WT_OPT_FLAG, F(kill_peer), 0, 1, "1", "kill one training peer part-way", 0},
    {"scenario", WT_OPT_STRING, F(scenario), 0, 0, "",
     "WAN scenario (default: the shipped coordinator/scenarios/wan4.json)", 0},
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
    "replicas plus a standby; one peer is killed part-way and the standby takes over.";

static pid_t s_pids[S_PEERS + 1];
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
  if (pid > 0) s_pids[s_npids++] = pid;
  return pid;
}

static void s_kill_all(void) {
  for (int i = 0; i < s_npids; i++)
    if (s_pids[i] > 0) kill(s_pids[i], SIGKILL);
  for (int i = 0; i < s_npids; i++)
    if (s_pids[i] > 0) waitpid(s_pids[i], NULL, 0);
  s_npids = 0;
}

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

/* The newest line of the coordinator log containing `what`, copied to out; 0 if none. */
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

static int s_find_scenario(demo_args *a, const char *exe_dir) {
  if (a->scenario[0])
    return access(a->scenario, R_OK) == 0
               ? WT_OK
               : wt_fail(WT_ENOTFOUND, "--scenario %s: %s", a->scenario, strerror(errno));
  const char *env = getenv("WANTRAIN_SCENARIO");
  char cand[3][WT_CONFIG_STR_MAX];
  snprintf(cand[0], sizeof cand[0], "%s", env ? env : "");
  snprintf(cand[1], sizeof cand[1], "%s/coordinator/scenarios/wan4.json", WT_SOURCE_DIR);
  snprintf(cand[2], sizeof cand[2], "%.900s/../share/wantrain/scenarios/wan4.json", exe_dir);
  for (int i = 0; i < 3; i++)
    if (cand[i][0] && access(cand[i], R_OK) == 0) {
      snprintf(a->scenario, sizeof a->scenario, "%.1000s", cand[i]);
      return WT_OK;
    }
  return wt_fail(WT_ENOTFOUND, "the WAN scenario wan4.json is not at %s or %s; pass --scenario",
                 cand[1], cand[2]);
}

static const char *s_regions[S_PEERS] = {"eu-west", "us-east", "asia",    "oceania", "eu-west",
                                         "us-east", "asia",    "oceania", "eu-west"};

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

/* A text sample from the run's latest complete checkpoint, by `wantrain sample` (the multi-stage
 * run directory loads as one model): its output with line breaks shown as spaces, in out. */
static int s_sample(const char *exe, const char *state, char *out, size_t size) {
  char cmd[3 * PATH_MAX];
  snprintf(cmd, sizeof cmd,
           "'%s/wantrain' sample --checkpoint '%s/checkpoints' --tokens 120 --temperature 0.8 "
           "--seed 1 2>&1",
           exe, state);
  FILE *p = popen(cmd, "r");
  if (!p) return wt_fail(WT_EIO, "cannot run wantrain sample: %s", strerror(errno));
  size_t n = fread(out, 1, size - 1, p);
  out[n] = 0;
  int status = pclose(p);
  for (size_t i = 0; i < n; i++)
    if (out[i] == '\n' || out[i] == '\r') out[i] = ' ';
  while (n > 0 && out[n - 1] == ' ') out[--n] = 0;
  return status == 0 ? WT_OK : wt_fail(WT_EIO, "wantrain sample failed: %s", out);
}

static double s_num(const cJSON *o, const char *k) {
  const cJSON *v = cJSON_GetObjectItem(o, k);
  return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static int s_run(demo_args *a) {
  char exe[PATH_MAX], coord[PATH_MAX + 32], peerd[PATH_MAX + 32];
  s_exe_dir(exe, sizeof exe);
  snprintf(coord, sizeof coord, "%s/coordinator", exe);
  snprintf(peerd, sizeof peerd, "%s/peerd", exe);
  if (access(coord, X_OK) || access(peerd, X_OK))
    return wt_fail(WT_ENOTFOUND,
                   "the demo needs coordinator and peerd beside wantrain in %s; "
                   "build them (cmake --build build)",
                   exe);
  WT_CHECK(s_find_scenario(a, exe));
  if (!a->dir[0]) {
    snprintf(a->dir, sizeof a->dir, "%s/wantrain-demo-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(a->dir)) return wt_fail(WT_EIO, "cannot make a temp dir: %s", strerror(errno));
  } else if (mkdir(a->dir, 0700) && errno != EEXIST) {
    return wt_fail(WT_EIO, "cannot make --dir %s: %s", a->dir, strerror(errno));
  }
  char state[WT_CONFIG_STR_MAX + 16], log[WT_CONFIG_STR_MAX + 16];
  static char line[1 << 18]; /* the final status holds the whole loss curve */
  snprintf(state, sizeof state, "%s/state", a->dir);
  snprintf(log, sizeof log, "%s/coordinator.log", a->dir);
  /* a join token for the nine peers, as an operator would mint it */
  char tokcmd[3 * PATH_MAX], token[256] = "";
  snprintf(tokcmd, sizeof tokcmd, "'%s' token new --state-dir '%s' --uses %d --expires 1h", coord,
           state, S_PEERS);
  FILE *tp = popen(tokcmd, "r");
  if (!tp || !fgets(token, sizeof token, tp)) {
    if (tp) pclose(tp);
    return wt_fail(WT_EIO, "could not mint a join token with %s", coord);
  }
  pclose(tp);
  token[strcspn(token, "\n")] = 0;
  char steps[32], ts[32];
  snprintf(steps, sizeof steps, "%d", a->steps);
  snprintf(ts, sizeof ts, "%g", a->time_scale);
  /* the demo's run: 2 x 4 of a small model, so that a minute on two cores shows a whole run */
  char *cargv[] = {
      coord,       "--state-dir",  state, "--stages",        "2",          "--replicas",
      "4",         "--steps",      steps, "--micro-batches", "2",          "--seq",
      "32",        "--channels",   "32",  "--heads",         "2",          "--warmup",
      "0",         "--val-every",  "0",   "--val-batches",   "1",          "--scenario",
      a->scenario, "--time-scale", ts,    "--act-codec",     a->act_codec, "--checkpoint-every",
      "10",        "--keep",       "3",   "--probe-kib",     "128",        "--heartbeat",
      "0.25",      "--liveness",   "6",   "--peer-timeout",  "20",         "--exit-when-done",
      NULL};
  pid_t cpid = s_spawn(cargv, log);
  char endpoint_file[WT_CONFIG_STR_MAX + 32], pub[WT_CONFIG_STR_MAX + 32], ep[256] = "";
  snprintf(endpoint_file, sizeof endpoint_file, "%s/endpoint", state);
  snprintf(pub, sizeof pub, "%s/coordinator.pub", state);
  for (int i = 0; i < 100 && !ep[0]; i++) {
    usleep(100000);
    char *t = s_slurp(endpoint_file);
    if (t) snprintf(ep, sizeof ep, "%.*s", (int)strcspn(t, "\n"), t);
    free(t);
  }
  if (!ep[0]) return wt_fail(WT_EIO, "the coordinator did not start; see %s", log);
  printf("wantrain demo: coordinator at %s (public key in %s)\n", ep, pub);
  printf("  scenario %s, time scale %g; working directory %s\n", a->scenario, a->time_scale,
         a->dir);
  char port_file[WT_CONFIG_STR_MAX + 32];
  snprintf(port_file, sizeof port_file, "%s/http_port", state);
  char *port = s_slurp(port_file);
  if (port) printf("  dashboard              http://127.0.0.1:%d/ (while it runs)\n", atoi(port));
  free(port);
  pid_t peer_pid[S_PEERS];
  for (int i = 0; i < S_PEERS; i++) {
    char data[WT_CONFIG_STR_MAX + 16], plog[WT_CONFIG_STR_MAX + 16];
    snprintf(data, sizeof data, "%s/peer%d", a->dir, i + 1);
    snprintf(plog, sizeof plog, "%s/peer%d.log", a->dir, i + 1);
    char *pargv[] = {peerd,
                     "--coordinator",
                     ep,
                     "--coordinator-key",
                     pub,
                     "--token",
                     token,
                     "--region",
                     (char *)s_regions[i],
                     "--data-dir",
                     data,
                     NULL};
    peer_pid[i] = s_spawn(pargv, plog);
  }
  printf("  started %d peerd (regions eu-west, us-east, asia, oceania; the 9th is a standby)\n",
         S_PEERS);
  double t0 = wt_now_s(), deadline = t0 + a->minutes * 60, last_print = 0;
  int killed = 0, victim_id = -1, status = 0, exited = 0;
  long kill_after = a->steps / 3;
  while (wt_now_s() < deadline) {
    if (waitpid(cpid, &status, WNOHANG) == cpid) {
      exited = 1;
      for (int i = 0; i < s_npids; i++)
        if (s_pids[i] == cpid) s_pids[i] = -1;
      break;
    }
    usleep(200000);
    long committed = 0;
    if (s_last_line(log, "checkpoint: step", line, sizeof line))
      sscanf(strstr(line, "checkpoint: step") + 16, "%ld", &committed);
    if (wt_now_s() - last_print > 10) {
      last_print = wt_now_s();
      printf("  [%3.0f s] committed step %ld of %d\n", wt_now_s() - t0, committed, a->steps);
      fflush(stdout);
    }
    if (a->kill_peer && !killed && committed >= kill_after &&
        s_last_line(log, "peers by world rank [", line, sizeof line)) {
      int ids[8], n = 0;
      char *p = strstr(line, "peers by world rank [") + 21;
      while (n < 8 && sscanf(p, "%d", &ids[n]) == 1) {
        n++;
        p += strcspn(p, " ]");
        if (*p == ']') break;
        p++;
      }
      srand((unsigned)time(NULL));
      victim_id = ids[rand() % (n ? n : 1)];
      for (int i = 0; i < S_PEERS; i++) { /* peerd N prints "peerd N: admitted" */
        char plog[WT_CONFIG_STR_MAX + 16], want[64];
        snprintf(plog, sizeof plog, "%s/peer%d.log", a->dir, i + 1);
        snprintf(want, sizeof want, "peerd %d: admitted", victim_id);
        if (s_last_line(plog, want, line, sizeof line)) {
          kill(peer_pid[i], SIGKILL);
          printf("  [%3.0f s] killed peer %d (%s, pid %d) with SIGKILL after committed step %ld\n",
                 wt_now_s() - t0, victim_id, s_regions[i], (int)peer_pid[i], committed);
          killed = 1;
        }
      }
    }
  }
  if (!exited) {
    printf("  the time bound (--minutes %g) ran out; stopping the coordinator\n", a->minutes);
    kill(cpid, SIGTERM);
    waitpid(cpid, &status, 0);
    for (int i = 0; i < s_npids; i++)
      if (s_pids[i] == cpid) s_pids[i] = -1;
  }
  s_kill_all();
  if (!s_last_line(log, "coordinator: final ", line, sizeof line))
    return wt_fail(WT_EIO, "the coordinator left no final status; see %s", log);
  cJSON *st = cJSON_Parse(strstr(line, "coordinator: final ") + 19);
  if (!st) return wt_fail(WT_EIO, "the coordinator's final status is not JSON; see %s", log);
  double first = s_num(st, "first_loss"), final = s_num(st, "loss");
  double ga = s_num(st, "predicted_cost_ga_s"), rnd = s_num(st, "predicted_cost_random_s");
  double it = s_num(st, "measured_iteration_s"), wan = s_num(st, "wan_bytes");
  double rec = s_num(st, "recovery_s"), step = s_num(st, "step");
  printf("\nwantrain demo: summary\n");
  printf("  training               %.0f steps, loss %.3f -> %.3f (%s)\n", step, first, final,
         cJSON_GetStringValue(cJSON_GetObjectItem(st, "state")));
  printf("  placement (model)      GA %.4f s per iteration vs random %.4f s (%.2fx)\n", ga, rnd,
         rnd / ga);
  printf("  measured iteration     %.3f s wall (emulated WAN at time scale %g)\n", it,
         a->time_scale);
  double wan_raw = s_num(st, "wan_bytes_uncompressed");
  printf("  WAN bytes              %.1f MB sent between regions with activations %s; %.1f MB "
         "without compression (float32 activations, %.2fx)\n",
         wan / 1e6, a->act_codec, wan_raw / 1e6, wan > 0 ? wan_raw / wan : 0);
  if (killed) { /* the coordinator's last epoch line says where it started from */
    char from[512] = "?";
    if (s_last_line(log, "from step ", line, sizeof line))
      snprintf(from, sizeof from, "%s", strstr(line, "from step "));
    printf("  churn                  peer %d killed; training resumed %.1f s later %s\n", victim_id,
           rec, from);
  }
  s_plot(a->dir, st);
  static char sample[4096];
  int sampled = s_sample(exe, state, sample, sizeof sample) == WT_OK;
  if (sampled)
    printf("  text sample            %s\n", sample);
  else
    printf("  text sample            none: %s\n", wt_last_error());
  printf("  logs                   %s/coordinator.log, %s/peer*.log\n", a->dir, a->dir);
  if (a->json) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "peers", S_PEERS);
    cJSON_AddNumberToObject(j, "steps", step);
    cJSON_AddNumberToObject(j, "first_loss", first);
    cJSON_AddNumberToObject(j, "final_loss", final);
    cJSON_AddNumberToObject(j, "predicted_cost_ga_s", ga);
    cJSON_AddNumberToObject(j, "predicted_cost_random_s", rnd);
    cJSON_AddNumberToObject(j, "measured_iteration_s", it);
    cJSON_AddNumberToObject(j, "wan_bytes", wan);
    cJSON_AddNumberToObject(j, "wan_bytes_uncompressed", wan_raw);
    cJSON_AddNumberToObject(j, "peer_killed", killed ? victim_id : -1);
    cJSON_AddNumberToObject(j, "recovery_s", killed ? rec : 0);
    if (sampled) cJSON_AddStringToObject(j, "sample", sample);
    char *text = cJSON_PrintUnformatted(j);
    printf("%s\n", text);
    free(text);
    cJSON_Delete(j);
  }
  int ok = !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(st, "state")), "done");
  cJSON_Delete(st);
  return ok || !exited ? WT_OK : wt_fail(WT_EIO, "the run did not finish; see %s", log);
}

int cmd_demo(int argc, char **argv) {
  demo_args a;
  int rc = cli_parse("demo", s_usage, s_options, &a, argc, argv);
  if (rc != CLI_OK) return rc < 0 ? CLI_OK : rc;
  signal(SIGPIPE, SIG_IGN);
  rc = s_run(&a);
  s_kill_all();
  if (!a.keep && !a.json && rc == WT_OK) {
    /* the summary names files in the directory: keep it; --keep is for failures */
  }
  return rc == WT_OK ? CLI_OK : cli_fail("demo");
}
