/* test_common — the option table (parse, bounds, choices, files, help), the RNG, the aborting
 * allocators, and UTF-8 checks and escaping of outside text (also in a log line). */
#include "common/common.h"
#include "common/config.h"
#include "common/rng.h"
#include "common/testing.h"

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
  int steps;
  double lr;
  char data[WT_CONFIG_STR_MAX];
  char opt[WT_CONFIG_STR_MAX];
  int resume;
  char config[WT_CONFIG_STR_MAX];
} demo_cfg;

static const wt_option demo_options[] = {
    {"config", WT_OPT_STRING, offsetof(demo_cfg, config), 0, 0, "", "JSON config file", NULL},
    {"steps", WT_OPT_INT, offsetof(demo_cfg, steps), 1, 1000, "10", "steps", NULL},
    {"lr", WT_OPT_FLOAT, offsetof(demo_cfg, lr), 0, 1, "3e-4", "learning rate", NULL},
    {"data", WT_OPT_STRING, offsetof(demo_cfg, data), 0, 0, "synthetic", "corpus", NULL},
    {"optimizer", WT_OPT_CHOICE, offsetof(demo_cfg, opt), 0, 0, "adamw", "opt", "adamw|sgd"},
    {"resume", WT_OPT_FLAG, offsetof(demo_cfg, resume), 0, 1, "0", "resume", NULL},
    {0}};

static void test_parse(void) {
  demo_cfg c;
  WT_TEST_REQUIRE(wt_config_defaults(demo_options, &c) == WT_OK, "%s", wt_last_error());
  WT_TEST_ASSERT(c.steps == 10 && c.lr == 3e-4 && !strcmp(c.data, "synthetic"), "defaults");
  char *argv[] = {"prog", "--steps", "20", "--lr=0.5", "--resume", "--optimizer", "sgd", "pos"};
  const char *pos[2];
  int npos = 0, help = 0;
  int rc = wt_config_parse_args(demo_options, &c, 8, argv, 1, pos, 2, &npos, &help);
  WT_TEST_ASSERT(rc == WT_OK, "%s", wt_last_error());
  WT_TEST_ASSERT(c.steps == 20 && c.lr == 0.5 && c.resume == 1 && !strcmp(c.opt, "sgd"),
                 "parsed values");
  WT_TEST_ASSERT(npos == 1 && !strcmp(pos[0], "pos"), "positional");
}

static void test_errors(void) {
  demo_cfg c;
  wt_config_defaults(demo_options, &c);
  char *bad[][3] = {{"p", "--steps", "0"},       {"p", "--steps", "1.5"},
                    {"p", "--lr", "abc"},         {"p", "--nope", "1"},
                    {"p", "--optimizer", "lamb"}, {"p", "--steps", NULL}};
  for (size_t i = 0; i < WT_ARRAY_LEN(bad); i++) {
    int argc = bad[i][2] ? 3 : 2;
    int rc = wt_config_parse_args(demo_options, &c, argc, bad[i], 1, NULL, 0, NULL, NULL);
    WT_TEST_ASSERT(rc == WT_EINVAL, "case %zu accepted", i);
    WT_TEST_ASSERT(strstr(wt_last_error(), "--") != NULL, "message names the option: %s",
                   wt_last_error());
  }
}

static void test_file(void) {
  char dir[256], path[300];
  wt_test_tmpdir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/c.json", dir);
  FILE *f = fopen(path, "w");
  fputs("{\"steps\": 42, \"data\": \"x.txt\", \"resume\": true}", f);
  fclose(f);
  demo_cfg c;
  wt_config_defaults(demo_options, &c);
  char *argv[] = {"p", "--config", path, "--steps", "7"};
  int rc = wt_config_parse_args(demo_options, &c, 5, argv, 1, NULL, 0, NULL, NULL);
  WT_TEST_ASSERT(rc == WT_OK, "%s", wt_last_error());
  WT_TEST_ASSERT(c.steps == 7 && !strcmp(c.data, "x.txt") && c.resume, "flags override file");
  f = fopen(path, "w");
  fputs("{\"stepz\": 1}", f);
  fclose(f);
  WT_TEST_ASSERT(wt_config_load_file(demo_options, &c, path) == WT_EINVAL, "unknown key");
  WT_TEST_ASSERT(strstr(wt_last_error(), "stepz"), "names key: %s", wt_last_error());
  remove(path);
  rmdir(dir);
}

static void test_rng(void) {
  wt_rng a, b;
  wt_rng_seed(&a, 7);
  wt_rng_seed(&b, 7);
  for (int i = 0; i < 100; i++) WT_TEST_ASSERT(wt_rng_u64(&a) == wt_rng_u64(&b), "stream %d", i);
  double sum = 0, sq = 0;
  for (int i = 0; i < 100000; i++) {
    double x = wt_rng_normal(&a);
    sum += x;
    sq += x * x;
  }
  /* mean and variance of 1e5 normals: standard errors 0.003 and 0.0045, so 0.02 is > 4 sigma */
  WT_TEST_CLOSE(sum / 1e5, 0.0, 0.02, 0, "normal mean");
  WT_TEST_CLOSE(sq / 1e5, 1.0, 0.02, 0, "normal variance");
  int counts[5] = {0};
  for (int i = 0; i < 50000; i++) counts[wt_rng_below(&a, 5)]++;
  for (int k = 0; k < 5; k++) WT_TEST_CLOSE(counts[k], 10000, 400, 0, "below(5) bucket");
}

/* Runs fn in a child process; returns 1 when the child died of SIGABRT or exited nonzero (an
 * ASan build reports an impossible size itself and exits 1), 0 when it returned normally. */
static int s_child_fails(void (*fn)(void)) {
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    freopen("/dev/null", "w", stderr); /* the expected "out of memory" message */
    fn();
    _exit(0);
  }
  int st = 0;
  if (pid < 0 || waitpid(pid, &st, 0) != pid) return 0;
  return (WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT) || (WIFEXITED(st) && WEXITSTATUS(st) != 0);
}

static void s_huge_malloc(void) {
  (void)wt_xmalloc(SIZE_MAX - 4096);
}
static void s_huge_calloc(void) {
  (void)wt_xcalloc(SIZE_MAX / 2, 4);
}
static void s_overflow_realloc(void) {
  (void)wt_xrealloc(NULL, SIZE_MAX / 2, 3);
}

/* The allocators return usable memory or stop the program; they never return NULL. */
static void test_alloc(void) {
  int *a = wt_xrealloc(NULL, 4, sizeof(int));
  for (int i = 0; i < 4; i++) a[i] = i + 1;
  a = wt_xrealloc(a, 1000, sizeof(int));
  WT_TEST_ASSERT(a[0] == 1 && a[3] == 4, "realloc keeps the contents");
  free(a);
  char *s = wt_xstrdup("wantrain");
  WT_TEST_ASSERT(!strcmp(s, "wantrain"), "strdup copies");
  free(s);
  void *z = wt_xmalloc(0);
  WT_TEST_ASSERT(z != NULL, "a zero size gives a pointer");
  free(z);
  WT_TEST_ASSERT(s_child_fails(s_huge_malloc), "wt_xmalloc of SIZE_MAX returned");
  WT_TEST_ASSERT(s_child_fails(s_huge_calloc), "wt_xcalloc of an overflowing size returned");
  WT_TEST_ASSERT(s_child_fails(s_overflow_realloc), "wt_xrealloc of an overflowing size returned");
}

/* Well-formed UTF-8 is recognised sequence by sequence; the ill-formed kinds RFC 3629 names are
 * not. */
static void test_utf8(void) {
  WT_TEST_ASSERT(wt_utf8_seq("a", 1) == 1 && wt_utf8_seq("\xC3\xA9", 2) == 2, "a, é");
  WT_TEST_ASSERT(wt_utf8_seq("\xE2\x80\xA6", 3) == 3 && wt_utf8_seq("\xF0\x9F\x98\x80", 4) == 4,
                 "…, an emoji");
  static const char *const bad[] = {"\xFF",         "\x80",         "\xC0\xAF",
                                    "\xE0\x80\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80",
                                    "\xE2\x80",     "\xC3("};
  for (size_t i = 0; i < WT_ARRAY_LEN(bad); i++)
    WT_TEST_ASSERT(wt_utf8_seq(bad[i], strlen(bad[i])) == 0, "ill-formed case %zu accepted", i);
  WT_TEST_ASSERT(wt_utf8_seq("\xC3\xA9", 1) == 0, "a sequence cut short by n");
  WT_TEST_ASSERT(wt_utf8_printable("\n", 1) == 0 && wt_utf8_printable("\x7F", 1) == 0 &&
                     wt_utf8_printable("\xC2\x85", 2) == 0 && wt_utf8_printable("\xC2\xA0", 2) == 2,
                 "C0, DEL and C1 are controls; U+00A0 is not");
  char out[64];
  WT_TEST_ASSERT(!strcmp(wt_text_escape(out, sizeof out, "eu\n[warn] forged\t\xFF\xC3\xA9\x01"),
                         "eu\\n[warn] forged\\t\\xFF\xC3\xA9\\x01"),
                 "escaped: %s", out);
  WT_TEST_ASSERT(!strcmp(wt_text_escape(out, 6, "ab\ncd"), "ab\\nc"), "cut: %s", out);
  WT_TEST_ASSERT(!strcmp(wt_text_escape(out, 4, "ab\xFF"), "ab"), "cut before an escape: %s", out);
}

/* A logged message that quotes outside text is still one line of valid UTF-8. */
static void test_log_line(void) {
  char path[] = "/tmp/wt-test-log-XXXXXX";
  int fd = mkstemp(path);
  WT_TEST_REQUIRE(fd >= 0, "mkstemp");
  fflush(stderr);
  int saved = dup(STDERR_FILENO);
  dup2(fd, STDERR_FILENO);
  WT_WARN("peer joined, region '%s'", "eu\n[warn] coordinator: forged\r\xFF");
  fflush(stderr);
  dup2(saved, STDERR_FILENO);
  close(saved);
  char buf[256] = {0};
  ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  close(fd);
  unlink(path);
  WT_TEST_ASSERT(n > 0 && !strcmp(buf, "[warn] peer joined, region 'eu\\n[warn] coordinator: "
                                       "forged\\r\\xFF'\n"),
                 "log line: %s", buf);
}

int main(void) {
  test_parse();
  test_alloc();
  test_errors();
  test_file();
  test_rng();
  test_utf8();
  test_log_line();
  return wt_test_finish("test_common");
}
