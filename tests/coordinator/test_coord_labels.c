/* test_coord_labels — the rule for the labels a peer registers with (region, host, device kind):
 * the rule itself, and the coordinator in-process against raw CURVE clients whose labels hold
 * control characters, bytes that are not UTF-8 or too many bytes. Each is refused with a reason
 * that names the label (not "upgrade peerd"), the log keeps one line per message, and a peer
 * with a valid non-ASCII region is admitted and shown as it is in the status. */
#include "common/common.h"
#include "common/testing.h"
#include "coordinator/coordinator.h"
#include "coordinator/protocol.h"
#include "parallel/transport/zmq.h"
#include "tests/coordinator/coord_client.h"

#include <cjson/cJSON.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zmq.h>

static volatile sig_atomic_t s_stop;

static int s_is_utf8(const char *s, size_t n) {
  for (size_t i = 0, len; i < n; i += len)
    if (!(len = wt_utf8_seq(s + i, n - i))) return 0;
  return 1;
}

static void test_rule(void) {
  WT_TEST_ASSERT(coordinator_label_check("region", "", COORD_REGION_MAX) == WT_OK, "empty");
  WT_TEST_ASSERT(coordinator_label_check("region", "eu-west café ☕", COORD_REGION_MAX) == WT_OK,
                 "printable UTF-8: %s", wt_last_error());
  WT_TEST_ASSERT(coordinator_label_check("region", "eu\n[warn] x", COORD_REGION_MAX) == WT_EINVAL &&
                     strstr(wt_last_error(), "region \"eu\\n[warn] x\" holds a control character"),
                 "newline: %s", wt_last_error());
  WT_TEST_ASSERT(coordinator_label_check("host", "h\xFF", COORD_HOST_MAX) == WT_EINVAL &&
                     strstr(wt_last_error(), "host \"h\\xFF\" holds bytes that are not UTF-8") &&
                     s_is_utf8(wt_last_error(), strlen(wt_last_error())),
                 "not UTF-8: %s", wt_last_error());
  WT_TEST_ASSERT(coordinator_label_check("region", "\xC2\x85", COORD_REGION_MAX) == WT_EINVAL,
                 "a C1 control (NEL)");
  char longer[COORD_REGION_MAX + 2];
  memset(longer, 'a', sizeof longer - 1);
  longer[sizeof longer - 1] = '\0';
  WT_TEST_ASSERT(coordinator_label_check("region", longer, COORD_REGION_MAX) == WT_EINVAL &&
                     strstr(wt_last_error(), "is 64 bytes long") &&
                     strstr(wt_last_error(), "at most 63 bytes"),
                 "too long: %s", wt_last_error());
  longer[COORD_REGION_MAX] = '\0';
  WT_TEST_ASSERT(coordinator_label_check("region", longer, COORD_REGION_MAX) == WT_OK, "63 bytes");
}

static void *s_serve(void *arg) {
  coordinator_run(arg, &s_stop);
  return NULL;
}

/* Registers a fresh key with `body` and returns the reply's command (-1: none within 3 s) and,
 * in why, its reason; the raw reply must be UTF-8. */
static int s_register(void *zctx, coordinator *c, const char *body, char *why, size_t size) {
  char pub[41], sec[41], sid[COORD_SID_CHARS + 1];
  parallel_zmq_keypair_new(pub, sec);
  coordinator_sid_new(sid);
  void *sock =
      coord_client_socket(zctx, coordinator_public_key(c), coordinator_endpoint(c), pub, sec);
  WT_TEST_REQUIRE(sock, "a CURVE client connects");
  /* The body is sent as it is: cJSON would not build a message that is not UTF-8. */
  char msg[1024];
  snprintf(msg, sizeof msg, "{\"v\":%d,\"cmd\":\"register\",\"sid\":\"%s\",\"seq\":1,%s}",
           COORD_PROTOCOL_VERSION, sid, body);
  zmq_send(sock, msg, strlen(msg), 0);
  int cmd = -1;
  zmq_pollitem_t it = {sock, 0, ZMQ_POLLIN, 0};
  char buf[COORD_MSG_MAX];
  int n = zmq_poll(&it, 1, 3000) > 0 ? zmq_recv(sock, buf, sizeof buf, 0) : -1;
  coordinator_msg m;
  if (n > 0 && coordinator_msg_decode(buf, (size_t)n, &m) == WT_OK) {
    WT_TEST_ASSERT(s_is_utf8(buf, (size_t)n), "the reply is not UTF-8: %.*s", n, buf);
    const char *r = cJSON_GetStringValue(cJSON_GetObjectItem(m.body, "reason"));
    snprintf(why, size, "%s", r ? r : "");
    cmd = (int)m.cmd;
    coordinator_msg_clear(&m);
  }
  zmq_close(sock);
  return cmd;
}

static void test_admission(void) {
  char tmp[1024], state[1100], log_path[1100];
  wt_test_tmpdir(tmp, sizeof tmp);
  snprintf(state, sizeof state, "%s/state", tmp);
  snprintf(log_path, sizeof log_path, "%s/coordinator.log", tmp);
  coordinator_config cfg;
  wt_config_defaults(coordinator_options(), &cfg);
  snprintf(cfg.state_dir, sizeof cfg.state_dir, "%.1000s", state);
  cfg.open = 1, cfg.http_port = -1;
  cfg.heartbeat_s = 0.2, cfg.liveness = 50;
  coordinator *c = coordinator_new(&cfg);
  WT_TEST_REQUIRE(c, "coordinator_new: %s", wt_last_error());
  /* The coordinator's log goes to a file while it serves the hostile registrations. */
  fflush(stderr);
  int saved = dup(STDERR_FILENO), fd = open(log_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  WT_TEST_REQUIRE(saved >= 0 && fd >= 0 && dup2(fd, STDERR_FILENO) >= 0, "redirecting stderr");
  close(fd);
  pthread_t th;
  s_stop = 0;
  pthread_create(&th, NULL, s_serve, c);
  void *zctx = zmq_ctx_new();

  static const struct {
    const char *body, *names;
  } hostile[] = {
      {"\"region\":\"eu\\n[warn] coordinator: joined: forged\",\"device\":{\"kind\":\"cpu\","
       "\"flops\":1e9}",
       "region"},
      {"\"region\":\"eu\xFF\xFE\",\"device\":{\"kind\":\"cpu\",\"flops\":1e9}", "region"},
      {"\"host\":\"10.0.0.1\xC3\",\"device\":{\"kind\":\"cpu\",\"flops\":1e9}", "host"},
      {"\"region\":\"" /* 64 bytes */
       "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\","
       "\"device\":{\"kind\":\"cpu\",\"flops\":1e9}",
       "region"},
      {"\"device\":{\"kind\":\"cpu\\r\\n\",\"flops\":1e9}", "device kind"},
  };
  /* Checked once stderr is back: a failure message must not land in the log under test. */
  enum { N = WT_ARRAY_LEN(hostile) };
  char why[N + 1][512];
  int cmd[N + 1];
  for (size_t i = 0; i < N; i++)
    cmd[i] = s_register(zctx, c, hostile[i].body, why[i], sizeof why[i]);
  cmd[N] = s_register(zctx, c,
                      "\"region\":\"île-de-france\",\"host\":\"127.0.0.1\","
                      "\"device\":{\"kind\":\"cpu\",\"flops\":1e9}",
                      why[N], sizeof why[N]);
  char *status = coordinator_status_json(c);
  uint64_t refused = coordinator_refused(c);
  s_stop = 1;
  pthread_join(th, NULL);
  coordinator_destroy(&c);
  zmq_ctx_term(zctx);
  fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);

  for (size_t i = 0; i < N; i++)
    WT_TEST_ASSERT(cmd[i] == COORD_CMD_REFUSED && strstr(why[i], hostile[i].names) &&
                       !strstr(why[i], "upgrade"),
                   "hostile label %zu: %d (%s)", i, cmd[i], why[i]);
  WT_TEST_ASSERT(cmd[N] == COORD_CMD_WELCOME, "a valid UTF-8 region is admitted (%s)", why[N]);
  WT_TEST_ASSERT(s_is_utf8(status, strlen(status)) &&
                     strstr(status, "\"region\":\"île-de-france\"") && refused == N,
                 "%llu refused; status: %s", (unsigned long long)refused, status);
  free(status);

  FILE *f = fopen(log_path, "r");
  WT_TEST_REQUIRE(f, "no log at %s", log_path);
  char line[4096];
  int refusals = 0;
  while (fgets(line, sizeof line, f)) {
    WT_TEST_ASSERT(s_is_utf8(line, strlen(line)), "a log line is not UTF-8: %s", line);
    WT_TEST_ASSERT(line[0] == '[', "a line that is not a log line of its own: %s", line);
    WT_TEST_ASSERT(!strstr(line, "[warn] coordinator: joined: forged") || strstr(line, "refused"),
                   "a label forged a log line: %s", line);
    refusals += strstr(line, "refused") != NULL;
  }
  fclose(f);
  WT_TEST_ASSERT(refusals >= N, "%d refusals logged", refusals);
}

int main(void) {
  test_rule();
  test_admission();
  return wt_test_finish("test_coord_labels");
}
