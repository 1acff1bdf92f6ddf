/* test_http_dashboard — the dashboard page in headless Chromium: while the fake status changes
 * generation every 150 ms, Chromium loads `/`, runs its script (which polls /status) and dumps
 * the DOM; the DOM must show one generation's step and the peers of that same generation on
 * their stage × replica seats, the standby among the other peers, and a drawn loss curve.
 * Skips (77) when no Chromium is installed.
 *
 *   test_http_dashboard             the test
 *   test_http_dashboard --serve [PORT]
 *                                   serves the page on the fake status until interrupted, for
 *                                   looking at it or taking a screenshot (docs/dashboard.md) */
#include "coordinator/http.h"

#include "common/common.h"
#include "common/testing.h"
#include "tests/http/fake_status.h"

#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>

#define S_CHROMIUM_DEADLINE_S 90

static atomic_int s_stop;

typedef struct {
  fake_status *f;
  int interval_ms;
} s_ticker_args;

/* Advances the fake's generation until told to stop, like a run making progress. */
static void *s_ticker(void *arg) {
  s_ticker_args *a = arg;
  struct timespec ts = {.tv_sec = a->interval_ms / 1000,
                        .tv_nsec = (long)(a->interval_ms % 1000) * 1000000L};
  while (!atomic_load(&s_stop)) {
    nanosleep(&ts, NULL);
    pthread_mutex_lock(&a->f->lock);
    a->f->generation++;
    pthread_mutex_unlock(&a->f->lock);
  }
  return NULL;
}

static const char *s_find_chromium(void) {
  static const char *const names[] = {"/usr/bin/chromium", "/usr/bin/chromium-browser",
                                      "/usr/bin/google-chrome"};
  const char *env = getenv("WT_CHROMIUM");
  if (env && *env) return access(env, X_OK) == 0 ? env : NULL;
  for (size_t i = 0; i < WT_ARRAY_LEN(names); i++)
    if (access(names[i], X_OK) == 0) return names[i];
  return NULL;
}

/* Runs Chromium headless on `url` and returns its DOM dump (caller frees), or NULL when it
 * failed or ran past the deadline (it is killed then). */
static char *s_dump_dom(const char *chromium, const char *url, const char *dir) {
  char profile_arg[600], log[560];
  snprintf(profile_arg, sizeof profile_arg, "--user-data-dir=%s/profile", dir);
  snprintf(log, sizeof log, "%s/chromium.log", dir);
  int out[2];
  WT_TEST_REQUIRE(pipe(out) == 0, "pipe");
  pid_t pid = fork();
  WT_TEST_REQUIRE(pid >= 0, "fork");
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    /* Chromium logs much (D-Bus, GPU) even when all is well: kept in a file, shown on failure. */
    FILE *err = fopen(log, "w");
    if (err) dup2(fileno(err), STDERR_FILENO);
    close(out[0]);
    close(out[1]);
    /* The page polls every second; 4 s of virtual time lets several polls complete. */
    execl(chromium, chromium, "--headless", "--no-sandbox", "--disable-gpu",
          "--disable-dev-shm-usage", "--no-first-run", "--disable-extensions",
          "--disable-background-networking", "--virtual-time-budget=4000", profile_arg,
          "--dump-dom", url, (char *)NULL);
    _exit(127);
  }
  close(out[1]);
  size_t cap = 1 << 16, len = 0;
  char *dom = wt_xmalloc(cap);
  double deadline = wt_now_s() + S_CHROMIUM_DEADLINE_S;
  int timed_out = 0;
  for (;;) {
    struct timeval tv = {.tv_sec = 1};
    fd_set rd;
    FD_ZERO(&rd);
    FD_SET(out[0], &rd);
    if (wt_now_s() > deadline) {
      timed_out = 1;
      break;
    }
    if (select(out[0] + 1, &rd, NULL, NULL, &tv) <= 0) continue;
    if (len + 4096 > cap) dom = wt_xrealloc(dom, cap *= 2, 1);
    ssize_t n = read(out[0], dom + len, cap - len - 1);
    if (n <= 0) break;
    len += (size_t)n;
  }
  close(out[0]);
  if (timed_out) kill(pid, SIGKILL);
  int status = 0;
  waitpid(pid, &status, 0);
  dom[len] = '\0';
  WT_TEST_ASSERT(!timed_out, "chromium ran past %d s", S_CHROMIUM_DEADLINE_S);
  WT_TEST_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "chromium exit status %d", status);
  if (timed_out || len == 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "tail -n 30 '%s' >&2", log);
    if (system(cmd) != 0) fprintf(stderr, "(no chromium log at %s)\n", log);
    free(dom);
    return NULL;
  }
  return dom;
}

/* The text of element id="<id>" (up to the next '<'), or "" when absent. */
static void s_element_text(const char *dom, const char *id, char *buf, size_t size) {
  char key[64];
  snprintf(key, sizeof key, "id=\"%s\"", id);
  buf[0] = '\0';
  const char *p = strstr(dom, key);
  if (!p || !(p = strchr(p, '>'))) return;
  p++;
  size_t n = strcspn(p, "<");
  snprintf(buf, size, "%.*s", (int)WT_MIN(n, size - 1), p);
}

/* The contents of the seat cell for (stage, replica), up to its closing tag, or "". */
static void s_seat(const char *dom, int s, int r, char *buf, size_t size) {
  char key[96];
  snprintf(key, sizeof key, "data-stage=\"%d\" data-replica=\"%d\">", s, r);
  buf[0] = '\0';
  const char *p = strstr(dom, key);
  if (!p) return;
  p += strlen(key);
  const char *end = strstr(p, "</td>");
  size_t n = end ? (size_t)(end - p) : strlen(p);
  snprintf(buf, size, "%.*s", (int)WT_MIN(n, size - 1), p);
}

/* The text inside the probed-links cell from peer a to peer b, or "". */
static void s_link_cell(const char *dom, int a, int b, char *buf, size_t size) {
  char key[96];
  snprintf(key, sizeof key, "data-from=\"%d\" data-to=\"%d\">", a, b);
  buf[0] = '\0';
  const char *p = strstr(dom, key);
  if (!p) return;
  p += strlen(key);
  snprintf(buf, size, "%.*s", (int)WT_MIN(strcspn(p, "<"), size - 1), p);
}

/* The coordinator's own members of generation g: progress, checkpoint, iteration times,
 * refusals, the probed links' matrix and the event log, newest first. */
static void s_check_progress(const char *dom, int g) {
  char text[256], want[256];
  s_element_text(dom, "steps", text, sizeof text);
  WT_TEST_ASSERT(atoi(text) == FAKE_STEPS, "total steps '%s'", text);
  s_element_text(dom, "progress", text, sizeof text);
  snprintf(want, sizeof want, "%.1f %%", 100 * ((double)fake_step(g) / FAKE_STEPS)); /* as JS */
  WT_TEST_ASSERT(!strcmp(text, want), "progress '%s', want '%s'", text, want);
  s_element_text(dom, "eta", text, sizeof text);
  snprintf(want, sizeof want, "%.1f min", (FAKE_STEPS - fake_step(g)) * 0.5 / 60);
  WT_TEST_ASSERT(!strcmp(text, want), "time left '%s', want '%s'", text, want);
  s_element_text(dom, "ckpt", text, sizeof text);
  snprintf(want, sizeof want, "step %d", fake_checkpoint(g));
  WT_TEST_ASSERT(!strcmp(text, want), "checkpoint '%s', want '%s'", text, want);
  s_element_text(dom, "it-measured", text, sizeof text);
  WT_TEST_ASSERT(!strcmp(text, "500.0 ms"), "measured iteration '%s'", text);
  s_element_text(dom, "it-predicted", text, sizeof text);
  WT_TEST_ASSERT(!strcmp(text, "250.0 ms (time scale 0.1)"), "predicted iteration '%s'", text);
  s_element_text(dom, "it-gain", text, sizeof text);
  WT_TEST_ASSERT(!strcmp(text, "2.00x faster"), "placement gain '%s'", text);
  s_element_text(dom, "refused", text, sizeof text);
  WT_TEST_ASSERT(atoi(text) == 3 + g, "refused '%s', want %d", text, 3 + g);
  s_element_text(dom, "handshakes", text, sizeof text);
  WT_TEST_ASSERT(!strcmp(text, "7"), "failed handshakes '%s'", text);
  s_link_cell(dom, 2, 3, text, sizeof text);
  WT_TEST_ASSERT(!strcmp(text, "23.0 ms 40.0 Mbit/s"), "link 2 -> 3 shows '%s'", text);
  s_link_cell(dom, 3, 1, text, sizeof text);
  WT_TEST_ASSERT(!strcmp(text, "31.0 ms 32.0 Mbit/s"), "link 3 -> 1 shows '%s'", text);
  s_link_cell(dom, 4, 1, text, sizeof text);
  WT_TEST_ASSERT(!text[0], "a link of a peer that was not probed: '%s'", text);
  char first[32], last[32];
  snprintf(first, sizeof first, "<td>g%d-event2</td>", g);
  snprintf(last, sizeof last, "<td>g%d-event0</td>", g);
  const char *newest = strstr(dom, first), *oldest = strstr(dom, last);
  WT_TEST_ASSERT(newest && oldest && newest < oldest,
                 "the event log of generation %d, newest first", g);
  WT_TEST_ASSERT(strstr(dom, "<td class=\"kind\">checkpoint</td>"), "event kinds not shown");
}

static void s_check_dom(const char *dom, const fake_status *f, int g_first, int g_last) {
  char step_text[64];
  s_element_text(dom, "step", step_text, sizeof step_text);
  int step = atoi(step_text);
  /* Which generation the page shows: it must be one served while Chromium ran. */
  int g = (step - fake_step(0)) / 17;
  WT_TEST_ASSERT(step == fake_step(g) && g >= g_first && g <= g_last,
                 "page shows step '%s'; served steps were %d..%d", step_text, fake_step(g_first),
                 fake_step(g_last));
  char text[256];
  s_element_text(dom, "conn", text, sizeof text);
  WT_TEST_ASSERT(strcmp(text, "live") == 0, "connection indicator says '%s'", text);
  s_element_text(dom, "run", text, sizeof text);
  WT_TEST_ASSERT(strcmp(text, "fake-run") == 0, "run name '%s'", text);
  s_element_text(dom, "epoch", text, sizeof text);
  WT_TEST_ASSERT(atoi(text) == fake_epoch(g), "epoch '%s', want %d", text, fake_epoch(g));
  for (int s = 0; s < f->stages; s++)
    for (int r = 0; r < f->replicas; r++) {
      char cell[512], id[64];
      s_seat(dom, s, r, cell, sizeof cell);
      fake_peer_id(id, sizeof id, g, s, r);
      WT_TEST_ASSERT(strstr(cell, id) && strstr(cell, "eu-west"),
                     "seat stage %d replica %d shows '%s', want peer %s", s, r, cell, id);
    }
  char cell[512];
  s_seat(dom, f->stages, 0, cell, sizeof cell);
  WT_TEST_ASSERT(cell[0] == '\0', "a row for a stage that does not exist");
  char standby[64];
  snprintf(standby, sizeof standby, "<td>g%d-standby</td>", g);
  WT_TEST_ASSERT(strstr(dom, standby), "standby %s not listed", standby);
  WT_TEST_ASSERT(strstr(dom, "<td>inter_region</td>"), "link classes not listed");
  const char *line = strstr(dom, "id=\"loss-line\"");
  const char *points = line ? strstr(line, "points=\"") : NULL;
  int commas = 0;
  for (const char *p = points ? points + 8 : ""; *p && *p != '"'; p++) commas += *p == ',';
  WT_TEST_ASSERT(commas == 21, "loss curve has %d points, want 21", commas);
  s_check_progress(dom, g);
}

static int s_serve(int port) {
  fake_status f = {.lock = PTHREAD_MUTEX_INITIALIZER, .stages = 4, .replicas = 2};
  coordinator_http *h = coordinator_http_new(&(coordinator_http_opts){
      .port = port, .status = fake_status_snapshot, .arg = &f, .lock = &f.lock});
  if (!h) {
    fprintf(stderr, "%s\n", wt_last_error());
    return 1;
  }
  printf("dashboard on fake status: http://127.0.0.1:%d/  (Ctrl-C stops)\n",
         coordinator_http_port(h));
  fflush(stdout);
  s_ticker_args a = {&f, 1000};
  s_ticker(&a); /* until killed */
  coordinator_http_destroy(&h);
  return 0;
}

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "--serve") == 0) return s_serve(argc >= 3 ? atoi(argv[2]) : 0);
  const char *chromium = s_find_chromium();
  if (!chromium) {
    printf("test_http_dashboard: skipped, no chromium (apt-get install chromium, or set "
           "WT_CHROMIUM)\n");
    return WT_TEST_SKIP;
  }
  fake_status f = {.lock = PTHREAD_MUTEX_INITIALIZER, .stages = 2, .replicas = 3};
  coordinator_http *h = coordinator_http_new(&(coordinator_http_opts){
      .port = 0, .status = fake_status_snapshot, .arg = &f, .lock = &f.lock});
  WT_TEST_REQUIRE(h, "coordinator_http_new: %s", wt_last_error());
  char url[64], dir[256];
  snprintf(url, sizeof url, "http://127.0.0.1:%d/", coordinator_http_port(h));
  wt_test_tmpdir(dir, sizeof dir);

  fake_status_set(&f, 5);
  s_ticker_args a = {&f, 150};
  pthread_t ticker;
  pthread_create(&ticker, NULL, s_ticker, &a);
  char *dom = s_dump_dom(chromium, url, dir);
  atomic_store(&s_stop, 1);
  pthread_join(ticker, NULL);
  int g_last = f.generation, calls = f.calls;
  coordinator_http_destroy(&h);
  WT_TEST_REQUIRE(dom, "no DOM from %s", chromium);
  s_check_dom(dom, &f, 5, g_last);
  WT_TEST_ASSERT(calls >= 2, "the page polled /status %d time(s)", calls);
  WT_TEST_ASSERT(f.unlocked_calls == 0, "snapshots without the lock");
  free(dom);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  return wt_test_finish("test_http_dashboard");
}
