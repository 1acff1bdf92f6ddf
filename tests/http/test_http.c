/* test_http — the coordinator's status server over real loopback sockets: /status and /metrics
 * serve the callback's current snapshot (and change when it does), the Prometheus text is well
 * formed and escapes hostile labels, bad methods, paths and raw garbage get errors while the
 * server keeps serving, bad options are refused with a clear message, and a server with a refresh
 * period answers from its cache while the caller holds its lock. */
#include "coordinator/http.h"

#include "common/common.h"
#include "common/testing.h"
#include "tests/http/fake_status.h"

#include <arpa/inet.h>
#include <curl/curl.h>
#include <netinet/in.h>
#include <regex.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

typedef struct {
  long code;
  char *body;
  size_t len;
  char headers[4096];
} s_reply;

static size_t s_body_cb(char *data, size_t size, size_t n, void *arg) {
  s_reply *r = arg;
  r->body = wt_xrealloc(r->body, r->len + size * n + 1, 1);
  memcpy(r->body + r->len, data, size * n);
  r->len += size * n;
  r->body[r->len] = '\0';
  return size * n;
}

static size_t s_header_cb(char *data, size_t size, size_t n, void *arg) {
  s_reply *r = arg;
  strncat(r->headers, data, WT_MIN(size * n, sizeof r->headers - strlen(r->headers) - 1));
  return size * n;
}

/* One request with curl, answered within timeout_s; method NULL = GET. Fails the test when curl
 * itself fails. */
static s_reply s_request_within(int port, const char *method, const char *path, long timeout_s) {
  s_reply r = {0};
  r.body = wt_xstrdup("");
  char url[256];
  snprintf(url, sizeof url, "http://127.0.0.1:%d%s", port, path);
  CURL *c = curl_easy_init();
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, timeout_s);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, s_body_cb);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, s_header_cb);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &r);
  if (method && strcmp(method, "HEAD") == 0)
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  else if (method && strcmp(method, "POST") == 0)
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, "step=999999");
  else if (method)
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
  CURLcode rc = curl_easy_perform(c);
  WT_TEST_ASSERT(rc == CURLE_OK, "%s %s: %s", method ? method : "GET", path,
                 curl_easy_strerror(rc));
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.code);
  curl_easy_cleanup(c);
  return r;
}

static s_reply s_request(int port, const char *method, const char *path) {
  return s_request_within(port, method, path, 10);
}

static void s_reply_free(s_reply *r) {
  free(r->body);
  r->body = NULL;
}

/* /status must be generation g of the fake: its step, epoch and every peer on its seat. */
static void s_check_status(int port, fake_status *f, int g) {
  s_reply r = s_request(port, NULL, "/status");
  WT_TEST_ASSERT(r.code == 200, "GET /status: %ld", r.code);
  WT_TEST_ASSERT(strstr(r.headers, "Content-Type: application/json"), "headers: %s", r.headers);
  cJSON *st = cJSON_Parse(r.body);
  WT_TEST_REQUIRE(st, "/status is not JSON: %.200s", r.body);
  WT_TEST_ASSERT(coordinator_http_status_check(st) == WT_OK, "schema: %s", wt_last_error());
  const cJSON *step = cJSON_GetObjectItem(st, "step"), *epoch = cJSON_GetObjectItem(st, "epoch");
  WT_TEST_ASSERT(cJSON_IsNumber(step) && step->valueint == fake_step(g), "step %d, want %d",
                 step ? step->valueint : -1, fake_step(g));
  WT_TEST_ASSERT(cJSON_IsNumber(epoch) && epoch->valueint == fake_epoch(g), "epoch");
  const cJSON *peers = cJSON_GetObjectItem(st, "peers");
  WT_TEST_ASSERT(cJSON_GetArraySize(peers) == f->stages * f->replicas + 1, "peer count %d",
                 cJSON_GetArraySize(peers));
  int seen = 0;
  const cJSON *p;
  cJSON_ArrayForEach(p, peers) {
    int s = cJSON_GetObjectItem(p, "stage")->valueint,
        rep = cJSON_GetObjectItem(p, "replica")->valueint;
    if (s < 0) continue;
    char want[64];
    fake_peer_id(want, sizeof want, g, s, rep);
    WT_TEST_ASSERT(strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(p, "id")), want) == 0,
                   "peer at stage %d replica %d is %s, want %s", s, rep,
                   cJSON_GetStringValue(cJSON_GetObjectItem(p, "id")), want);
    seen++;
  }
  WT_TEST_ASSERT(seen == f->stages * f->replicas, "seated peers %d", seen);
  cJSON_Delete(st);
  s_reply_free(&r);
}

/* Every line of the exposition text is a HELP, a TYPE or a sample with a float value. */
static void s_check_exposition(const char *text) {
  regex_t sample, help, type;
  WT_TEST_REQUIRE(
      regcomp(&sample,
              "^[a-zA-Z_:][a-zA-Z0-9_:]*(\\{([a-zA-Z_][a-zA-Z0-9_]*=\"([^\"\\\\]|\\\\.)*\""
              ",?)*\\})? (-?[0-9.eE+-]+|NaN|[+-]Inf)$",
              REG_EXTENDED | REG_NOSUB) == 0,
      "regex");
  regcomp(&help, "^# HELP [a-zA-Z_:][a-zA-Z0-9_:]* .+$", REG_EXTENDED | REG_NOSUB);
  regcomp(&type, "^# TYPE [a-zA-Z_:][a-zA-Z0-9_:]* (gauge|counter)$", REG_EXTENDED | REG_NOSUB);
  char *copy = wt_xstrdup(text), *save = NULL;
  int lines = 0;
  WT_TEST_ASSERT(text[0] && text[strlen(text) - 1] == '\n', "metrics must end with a newline");
  for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
    lines++;
    WT_TEST_ASSERT(!regexec(&sample, line, 0, NULL, 0) || !regexec(&help, line, 0, NULL, 0) ||
                       !regexec(&type, line, 0, NULL, 0),
                   "not an exposition line: '%s'", line);
  }
  WT_TEST_ASSERT(lines > 20, "only %d lines", lines);
  free(copy);
  regfree(&sample), regfree(&help), regfree(&type);
}

static void s_check_metrics(int port, int g) {
  s_reply r = s_request(port, NULL, "/metrics");
  WT_TEST_ASSERT(r.code == 200, "GET /metrics: %ld", r.code);
  WT_TEST_ASSERT(strstr(r.headers, "Content-Type: text/plain; version=0.0.4"), "%s", r.headers);
  s_check_exposition(r.body);
  char want[256];
  snprintf(want, sizeof want, "\nwantrain_step %d\n", fake_step(g));
  WT_TEST_ASSERT(strstr(r.body, want), "no '%s' in metrics", want + 1);
  snprintf(want, sizeof want, "\nwantrain_epoch %d\n", fake_epoch(g));
  WT_TEST_ASSERT(strstr(r.body, want), "no epoch %d", fake_epoch(g));
  snprintf(want, sizeof want, "\nwantrain_link_bytes_per_second{class=\"inter_region\"} %d\n",
           125000 + g);
  WT_TEST_ASSERT(strstr(r.body, want), "no inter_region link line");
  snprintf(want, sizeof want,
           "\nwantrain_peer_info{id=\"g%d-s1r0\",region=\"eu-west\",stage=\"1\",replica=\"0\","
           "state=\"training\"} 1\n",
           g);
  WT_TEST_ASSERT(strstr(r.body, want), "no peer_info for g%d-s1r0:\n%s", g, r.body);
  WT_TEST_ASSERT(strstr(r.body, "\nwantrain_peers{state=\"training\"} 6\n"), "training count");
  WT_TEST_ASSERT(strstr(r.body, "\nwantrain_peers{state=\"standby\"} 1\n"), "standby count");
  WT_TEST_ASSERT(strstr(r.body, "\nwantrain_peers{state=\"lost\"} 0\n"), "lost count");
  WT_TEST_ASSERT(strstr(r.body, "# TYPE wantrain_step gauge\n"), "TYPE line");
  s_reply_free(&r);
}

/* Writes raw bytes to the server and reads whatever comes back (bounded in time); returns the
 * status code of the reply, or 0 when the server closed without one. */
static int s_raw(int port, const char *data, size_t len) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  struct timeval tv = {.tv_sec = 5};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  WT_TEST_REQUIRE(connect(fd, (struct sockaddr *)&a, sizeof a) == 0, "connect");
  (void)!send(fd, data, len, MSG_NOSIGNAL);
  shutdown(fd, SHUT_WR);
  char buf[512] = {0};
  ssize_t n = recv(fd, buf, sizeof buf - 1, 0);
  close(fd);
  int code = 0;
  if (n > 0) sscanf(buf, "HTTP/1.%*d %d", &code);
  return code;
}

static void s_bad_requests(int port, fake_status *f) {
  s_reply r = s_request(port, "POST", "/status");
  WT_TEST_ASSERT(r.code == 405, "POST: %ld", r.code);
  WT_TEST_ASSERT(strstr(r.headers, "Allow: GET, HEAD"), "405 names the allowed methods");
  s_reply_free(&r);
  r = s_request(port, "DELETE", "/metrics");
  WT_TEST_ASSERT(r.code == 405, "DELETE: %ld", r.code);
  s_reply_free(&r);
  r = s_request(port, NULL, "/nope");
  WT_TEST_ASSERT(r.code == 404 && strstr(r.body, "/status"), "unknown path: %ld %s", r.code,
                 r.body);
  s_reply_free(&r);
  r = s_request(port, NULL, "/status/extra");
  WT_TEST_ASSERT(r.code == 404, "/status/extra: %ld", r.code);
  s_reply_free(&r);
  r = s_request(port, "HEAD", "/status");
  WT_TEST_ASSERT(r.code == 200 && r.len == 0, "HEAD: %ld, %zu body bytes", r.code, r.len);
  s_reply_free(&r);
  r = s_request(port, NULL, "/");
  WT_TEST_ASSERT(r.code == 200 && strstr(r.body, "<svg") && strstr(r.headers, "text/html"),
                 "dashboard page: %ld", r.code);
  s_reply_free(&r);

  /* Raw garbage: each gets a 4xx or a closed connection, never a hang or a crash. */
  const char garbage[] = "\x00\x01\x02 not http at all\r\n\r\n";
  int code = s_raw(port, garbage, sizeof garbage);
  WT_TEST_ASSERT(code == 0 || (code >= 400 && code < 500), "garbage: %d", code);
  code = s_raw(port, "GET /status HTTP/1.1\r\nHost: x", 29); /* truncated, then EOF */
  WT_TEST_ASSERT(code == 0 || (code >= 400 && code < 500), "truncated: %d", code);
  size_t big = 200 * 1024;
  char *huge = wt_xmalloc(big);
  int off = snprintf(huge, big, "GET /status HTTP/1.1\r\nHost: x\r\nX-Big: ");
  memset(huge + off, 'a', big - off - 4);
  memcpy(huge + big - 4, "\r\n\r\n", 4);
  code = s_raw(port, huge, big);
  WT_TEST_ASSERT(code == 0 || (code >= 400 && code < 500), "200 KiB header: %d", code);
  snprintf(huge, big, "GET /");
  memset(huge + 5, 'p', big - 5 - 20);
  memcpy(huge + big - 20, " HTTP/1.1\r\nHost: x\r\n\r\n", 20);
  code = s_raw(port, huge, big);
  WT_TEST_ASSERT(code == 0 || (code >= 400 && code < 500), "200 KiB path: %d", code);
  free(huge);

  /* No status yet: 503, and the page still loads. */
  pthread_mutex_lock(&f->lock);
  f->unavailable = 1;
  pthread_mutex_unlock(&f->lock);
  r = s_request(port, NULL, "/status");
  WT_TEST_ASSERT(r.code == 503, "no snapshot: %ld", r.code);
  s_reply_free(&r);
  r = s_request(port, NULL, "/metrics");
  WT_TEST_ASSERT(r.code == 503, "no snapshot, metrics: %ld", r.code);
  s_reply_free(&r);
  pthread_mutex_lock(&f->lock);
  f->unavailable = 0;
  pthread_mutex_unlock(&f->lock);
}

/* A region label that tries to forge a sample is escaped into its label value. */
static void s_hostile_label(int port, fake_status *f) {
  pthread_mutex_lock(&f->lock);
  f->region0 = "eu\"}\nwantrain_step 999\\";
  pthread_mutex_unlock(&f->lock);
  s_reply r = s_request(port, NULL, "/metrics");
  WT_TEST_ASSERT(r.code == 200, "metrics: %ld", r.code);
  WT_TEST_ASSERT(!strstr(r.body, "\nwantrain_step 999"), "a label forged a sample:\n%s", r.body);
  WT_TEST_ASSERT(strstr(r.body, "region=\"eu\\\"}\\nwantrain_step 999\\\\\""), "escaped label");
  s_check_exposition(r.body);
  s_reply_free(&r);
  pthread_mutex_lock(&f->lock);
  f->region0 = NULL;
  pthread_mutex_unlock(&f->lock);
}

static int s_is_utf8(const char *s, size_t n) {
  for (size_t i = 0, len; i < n; i += len)
    if (!(len = wt_utf8_seq(s + i, n - i))) return 0;
  return 1;
}

/* Labels that are not UTF-8 (a stray byte, a cut sequence, one cut by the label length) are
 * served as U+FFFD: /status stays valid JSON and /metrics valid exposition text. */
static void s_non_utf8_label(int port, fake_status *f) {
  char cut[COORDINATOR_HTTP_STR_MAX + 8];
  memset(cut, 'a', COORDINATOR_HTTP_STR_MAX - 1);
  snprintf(cut + COORDINATOR_HTTP_STR_MAX - 1, 8, "\xC3\xA9z"); /* é across the cut */
  const char *labels[] = {"eu\xFF\xFE-west\xC3", cut};
  for (size_t k = 0; k < WT_ARRAY_LEN(labels); k++) {
    pthread_mutex_lock(&f->lock);
    f->region0 = labels[k];
    pthread_mutex_unlock(&f->lock);
    s_reply r = s_request(port, NULL, "/status");
    WT_TEST_ASSERT(r.code == 200 && s_is_utf8(r.body, r.len), "/status is not UTF-8: %.80s",
                   r.body);
    cJSON *st = cJSON_Parse(r.body);
    const char *region = cJSON_GetStringValue(
        cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(st, "peers"), 0), "region"));
    WT_TEST_ASSERT(k > 0 ||
                       (region && !strcmp(region, "eu\xEF\xBF\xBD\xEF\xBF\xBD-west\xEF\xBF\xBD")),
                   "repaired region: %s", region ? region : "(none)");
    WT_TEST_ASSERT(k == 0 || (region && !strcmp(region, cut)), "a valid label is kept as it is");
    cJSON_Delete(st);
    s_reply_free(&r);
    r = s_request(port, NULL, "/metrics");
    WT_TEST_ASSERT(r.code == 200 && s_is_utf8(r.body, r.len), "/metrics is not UTF-8");
    s_check_exposition(r.body);
    s_reply_free(&r);
  }
  pthread_mutex_lock(&f->lock);
  f->region0 = NULL;
  pthread_mutex_unlock(&f->lock);
}

/* 200 connections that trickle a request that never ends, one byte a second, or send nothing,
 * half from the client's own address and half from 100 others of 127/8: a request on a new
 * connection is still answered within 3 s (not after the 10 s idle timeout frees a place) for
 * as long as they are held. */
static void s_slow_clients(int port) {
  enum { N = 200 };
  static const char trickle[] = "GET /status HTTP/1.1\r\nHost: x\r\nX-Slow: ";
  int fds[N];
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  for (int i = 0; i < N; i++) {
    struct sockaddr_in from = {.sin_family = AF_INET};
    from.sin_addr.s_addr = htonl(INADDR_LOOPBACK + (uint32_t)(i < N / 2 ? 0 : i - N / 2 + 1));
    fds[i] = socket(AF_INET, SOCK_STREAM, 0);
    WT_TEST_REQUIRE(fds[i] >= 0 && bind(fds[i], (struct sockaddr *)&from, sizeof from) == 0 &&
                        connect(fds[i], (struct sockaddr *)&a, sizeof a) == 0,
                    "slow connection %d", i);
  }
  for (int round = 0; round < 3; round++) {
    for (int i = 1; i < N; i += 2) (void)!send(fds[i], trickle + round, 1, MSG_NOSIGNAL);
    s_reply r = s_request_within(port, NULL, "/status", 3);
    WT_TEST_ASSERT(r.code == 200, "/status with %d slow connections held: %ld", N, r.code);
    s_reply_free(&r);
    usleep(1000 * 1000);
  }
  for (int i = 0; i < N; i++) close(fds[i]);
}

/* The listening socket is on 127.0.0.1 when no address is given (from /proc/net/tcp). */
static void s_check_loopback_only(int port) {
  FILE *t = fopen("/proc/net/tcp", "r");
  if (!t) return; /* not Linux: nothing to read it from */
  char line[512], want[32];
  snprintf(want, sizeof want, ":%04X ", port);
  int found = 0;
  while (fgets(line, sizeof line, t)) {
    unsigned st = 0;
    char local[64];
    if (sscanf(line, "%*d: %63s %*s %x", local, &st) != 2 || st != 0x0A) continue;
    if (!strstr(line, want)) continue;
    found = 1;
    WT_TEST_ASSERT(strncmp(local, "0100007F:", 9) == 0, "listens on %s, not 127.0.0.1", local);
  }
  fclose(t);
  WT_TEST_ASSERT(found, "no listening socket on port %d", port);
}

typedef struct {
  int port;
  int bad; /* snapshots whose peers belong to another generation than their step */
  int failed;
} s_client;

/* Fetches /status repeatedly while the fake advances: each reply must be one consistent
 * snapshot (its peers from the same generation as its step). */
static void *s_client_run(void *arg) {
  s_client *c = arg;
  for (int i = 0; i < 25; i++) {
    s_reply r = s_request(c->port, NULL, "/status");
    cJSON *st = cJSON_Parse(r.body);
    if (r.code != 200 || !st) {
      c->failed++;
    } else {
      int step = cJSON_GetObjectItem(st, "step")->valueint, g = (step - fake_step(0)) / 17;
      char want[64];
      fake_peer_id(want, sizeof want, g, 0, 0);
      const char *id = cJSON_GetStringValue(
          cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(st, "peers"), 0), "id"));
      if (step != fake_step(g) || !id || strcmp(id, want) != 0) c->bad++;
    }
    cJSON_Delete(st);
    s_reply_free(&r);
  }
  return NULL;
}

/* Four clients at once while the state changes under them. */
static void s_concurrent(int port, fake_status *f) {
  enum { N = 4 };
  s_client clients[N];
  pthread_t threads[N];
  for (int i = 0; i < N; i++) {
    clients[i] = (s_client){.port = port};
    pthread_create(&threads[i], NULL, s_client_run, &clients[i]);
  }
  for (int g = 100; g < 400; g++) {
    fake_status_set(f, g);
    usleep(200);
  }
  for (int i = 0; i < N; i++) {
    pthread_join(threads[i], NULL);
    WT_TEST_ASSERT(clients[i].failed == 0 && clients[i].bad == 0,
                   "client %d: %d failed, %d inconsistent snapshots", i, clients[i].failed,
                   clients[i].bad);
  }
}

static void s_bad_options(int port_in_use) {
  fake_status f = {.lock = PTHREAD_MUTEX_INITIALIZER};
  coordinator_http *h = coordinator_http_new(&(coordinator_http_opts){.port = 0});
  WT_TEST_ASSERT(!h && strstr(wt_last_error(), "callback"), "no callback: %s", wt_last_error());
  h = coordinator_http_new(
      &(coordinator_http_opts){.bind = "localhost", .status = fake_status_snapshot, .arg = &f});
  WT_TEST_ASSERT(!h && strstr(wt_last_error(), "numeric IP"), "hostname: %s", wt_last_error());
  h = coordinator_http_new(&(coordinator_http_opts){.port = 70000, .status = fake_status_snapshot});
  WT_TEST_ASSERT(!h && strstr(wt_last_error(), "out of range"), "port: %s", wt_last_error());
  h = coordinator_http_new(
      &(coordinator_http_opts){.port = port_in_use, .status = fake_status_snapshot, .arg = &f});
  WT_TEST_ASSERT(!h && strstr(wt_last_error(), "pick another port"), "in use: %s", wt_last_error());
  coordinator_http_destroy(&h); /* NULL-safe */
}

static void s_schema_check(fake_status *f) {
  pthread_mutex_lock(&f->lock);
  cJSON *st = fake_status_snapshot(f);
  pthread_mutex_unlock(&f->lock);
  f->calls--;
  WT_TEST_ASSERT(coordinator_http_status_check(st) == WT_OK, "%s", wt_last_error());
  cJSON_DeleteItemFromObject(st, "step");
  WT_TEST_ASSERT(coordinator_http_status_check(st) == WT_EINVAL &&
                     strstr(wt_last_error(), "\"step\""),
                 "missing step: %s", wt_last_error());
  cJSON_AddNumberToObject(st, "step", 1.5);
  WT_TEST_ASSERT(coordinator_http_status_check(st) == WT_EINVAL, "fractional step accepted");
  cJSON_ReplaceItemInObject(st, "step", cJSON_CreateNumber(3));
  cJSON *p0 = cJSON_GetArrayItem(cJSON_GetObjectItem(st, "peers"), 0);
  cJSON_ReplaceItemInObject(p0, "stage", cJSON_CreateString("zero"));
  WT_TEST_ASSERT(coordinator_http_status_check(st) == WT_EINVAL &&
                     strstr(wt_last_error(), "peers[0].\"stage\""),
                 "string stage: %s", wt_last_error());
  cJSON_ReplaceItemInObject(p0, "stage", cJSON_CreateNumber(0));
  cJSON_AddItemToArray(cJSON_GetObjectItem(st, "loss_history"), cJSON_CreateString("x"));
  WT_TEST_ASSERT(coordinator_http_status_check(st) == WT_EINVAL &&
                     strstr(wt_last_error(), "loss_history"),
                 "bad history: %s", wt_last_error());
  cJSON_DeleteItemFromArray(cJSON_GetObjectItem(st, "loss_history"),
                            cJSON_GetArraySize(cJSON_GetObjectItem(st, "loss_history")) - 1);
  cJSON *sync = cJSON_Parse("{\"preset\": \"wan\", \"diloco\": 100, \"grad_codec\": \"sign\","
                            " \"grad_ef\": \"on\", \"outer_lr\": 0.7, \"outer_momentum\": 0.9,"
                            " \"act_codec\": \"none\"}");
  cJSON_AddItemToObject(st, "sync", sync);
  WT_TEST_ASSERT(coordinator_http_status_check(st) == WT_OK, "a sync member: %s", wt_last_error());
  cJSON_ReplaceItemInObject(sync, "diloco", cJSON_CreateNumber(-1));
  WT_TEST_ASSERT(coordinator_http_status_check(st) == WT_EINVAL &&
                     strstr(wt_last_error(), "sync.\"diloco\""),
                 "negative H: %s", wt_last_error());
  cJSON_ReplaceItemInObject(sync, "diloco", cJSON_CreateNumber(100));
  cJSON_DeleteItemFromObject(sync, "grad_codec");
  WT_TEST_ASSERT(coordinator_http_status_check(st) == WT_EINVAL &&
                     strstr(wt_last_error(), "sync.\"grad_codec\""),
                 "no codec: %s", wt_last_error());
  cJSON_Delete(st);
  /* /metrics from a partial snapshot: what is there, nothing invented. */
  cJSON *part = cJSON_Parse("{\"step\": 5, \"peers\": [1, {\"id\": 3}]}");
  char *text = coordinator_http_metrics_render(part);
  WT_TEST_ASSERT(text && strstr(text, "wantrain_step 5\n") && !strstr(text, "wantrain_epoch"),
                 "partial: %s", text ? text : wt_last_error());
  free(text);
  cJSON_Delete(part);
  WT_TEST_ASSERT(coordinator_http_metrics_render(NULL) == NULL, "NULL snapshot rendered");
}

/* A server with refresh_s 1: twenty requests in a row take a few snapshots, not twenty; a request
 * answers from the cache while the caller holds its lock (the coordinator's loop busy); and a
 * change shows once the cache is older than 2 × refresh_s. */
static void s_cached(void) {
  fake_status f = {.lock = PTHREAD_MUTEX_INITIALIZER, .stages = 2, .replicas = 3};
  fake_status_set(&f, 5);
  coordinator_http *h = coordinator_http_new(&(coordinator_http_opts){
      .port = 0, .status = fake_status_snapshot, .arg = &f, .lock = &f.lock, .refresh_s = 1});
  WT_TEST_REQUIRE(h, "coordinator_http_new: %s", wt_last_error());
  int port = coordinator_http_port(h);
  for (int k = 0; k < 20; k++) s_check_status(port, &f, 5);
  WT_TEST_ASSERT(f.calls <= 4, "20 requests took %d snapshots with a 1 s refresh", f.calls);

  pthread_mutex_lock(&f.lock); /* the loop holds its lock: the cached text still answers */
  s_reply r = s_request_within(port, NULL, "/status", 1);
  pthread_mutex_unlock(&f.lock);
  WT_TEST_ASSERT(r.code == 200 && strstr(r.body, "\"step\""), "GET /status under the lock: %ld",
                 r.code);
  s_reply_free(&r);

  fake_status_set(&f, 6);
  struct timespec wait = {2, 200 * 1000 * 1000}; /* past 2 × refresh_s */
  nanosleep(&wait, NULL);
  s_check_status(port, &f, 6);
  s_check_metrics(port, 6);
  coordinator_http_destroy(&h);
  WT_TEST_ASSERT(f.unlocked_calls == 0, "%d snapshots taken without the caller's lock",
                 f.unlocked_calls);
}

int main(void) {
  /* s_slow_clients holds 200 descriptors, and the server sizes its limit from what is left. */
  struct rlimit nofile;
  if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 && nofile.rlim_cur < 1024) {
    nofile.rlim_cur = WT_MIN(nofile.rlim_max, 1024);
    setrlimit(RLIMIT_NOFILE, &nofile);
  }
  curl_global_init(CURL_GLOBAL_DEFAULT);
  fake_status f = {.lock = PTHREAD_MUTEX_INITIALIZER, .stages = 2, .replicas = 3};
  coordinator_http *h = coordinator_http_new(&(coordinator_http_opts){
      .port = 0, .status = fake_status_snapshot, .arg = &f, .lock = &f.lock});
  WT_TEST_REQUIRE(h, "coordinator_http_new: %s", wt_last_error());
  int port = coordinator_http_port(h);
  WT_TEST_ASSERT(port > 0 && port < 65536, "port %d", port);
  s_check_loopback_only(port);

  /* The served values follow the callback: three generations, each checked on both paths. */
  for (int g = 3; g <= 9; g += 3) {
    fake_status_set(&f, g);
    s_check_status(port, &f, g);
    s_check_metrics(port, g);
  }
  s_bad_requests(port, &f);
  s_hostile_label(port, &f);
  s_non_utf8_label(port, &f);
  s_concurrent(port, &f);
  s_slow_clients(port);
  fake_status_set(&f, 42);
  s_check_status(port, &f, 42); /* still serving after all of the above */
  s_bad_options(port);
  s_schema_check(&f);
  s_cached();

  WT_TEST_ASSERT(f.calls >= 8, "callback called %d times", f.calls);
  WT_TEST_ASSERT(f.unlocked_calls == 0, "%d snapshots taken without the caller's lock",
                 f.unlocked_calls);
  coordinator_http_destroy(&h);
  WT_TEST_ASSERT(h == NULL, "destroy clears the pointer");
  curl_global_cleanup();
  return wt_test_finish("test_http");
}
