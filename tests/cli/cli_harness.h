/* cli_harness — running the `wantrain` binary from a test (header-only, one test per program):
 * a scratch directory as the working directory, the exit status and the merged output of a
 * command, and a run started in the background whose progress lines can be read. */
#ifndef WT_TESTS_CLI_HARNESS_H
#define WT_TESTS_CLI_HARNESS_H

#include "common/testing.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

static char g_tmp[512], g_bin[1024], g_out[1 << 16];

/* The binary from $WT_BIN_DIR (set by ctest) and a fresh scratch directory. */
static inline void cli_harness_init(void) {
  const char *bin = getenv("WT_BIN_DIR");
  snprintf(g_bin, sizeof g_bin, "%s/wantrain", bin && *bin ? bin : "bin");
  wt_test_tmpdir(g_tmp, sizeof g_tmp);
}

/* Runs `wantrain <args>` with stderr merged into g_out; returns the exit status. */
static inline int s_wantrain(const char *args) {
  char cmd[4096];
  snprintf(cmd, sizeof cmd, "cd %s && %s %s 2>&1", g_tmp, g_bin, args);
  FILE *p = popen(cmd, "r");
  WT_TEST_REQUIRE(p, "popen");
  size_t n = fread(g_out, 1, sizeof g_out - 1, p);
  g_out[n] = 0;
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

#define EXPECT(args, code, words)                                                                  \
  do {                                                                                             \
    int rc_ = s_wantrain(args);                                                                    \
    WT_TEST_ASSERT(rc_ == (code) && strstr(g_out, words),                                          \
                   "%s %s: exit %d (want %d), "                                                    \
                   "want '%s' in:\n%s",                                                            \
                   g_bin, args, rc_, code, words, g_out);                                          \
  } while (0)

static inline void s_write(const char *name, const void *data, size_t n) {
  char path[700];
  snprintf(path, sizeof path, "%s/%s", g_tmp, name);
  FILE *f = fopen(path, "wb");
  WT_TEST_REQUIRE(f, "create %s", path);
  fwrite(data, 1, n, f);
  fclose(f);
}

/* Starts `wantrain <args>` in the scratch directory; its stdout (and stderr, with merge_err)
 * comes through the returned stream. *pid receives the process (exec'd in place of sh). */
static inline FILE *s_spawn(const char *args, int merge_err, pid_t *pid) {
  int fds[2];
  WT_TEST_REQUIRE(pipe(fds) == 0, "pipe");
  *pid = fork();
  WT_TEST_REQUIRE(*pid >= 0, "fork");
  if (*pid == 0) {
    char cmd[4096];
    dup2(fds[1], 1);
    if (merge_err) dup2(fds[1], 2);
    close(fds[0]);
    snprintf(cmd, sizeof cmd, "cd %s && exec %s %s", g_tmp, g_bin, args);
    execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  return fdopen(fds[0], "r");
}

/* Reads lines from out until one starts with `prefix`; returns 1 if one did. */
static inline int s_wait_line(FILE *out, const char *prefix) {
  char line[1024];
  while (fgets(line, sizeof line, out))
    if (!strncmp(line, prefix, strlen(prefix))) return 1;
  return 0;
}

/* Waits for pid at most `seconds`, then kills it; returns its wait status (-1 if killed). */
static inline int s_wait_deadline(pid_t pid, double seconds) {
  int st = 0;
  for (int i = 0; i < (int)(seconds * 20); i++) {
    if (waitpid(pid, &st, WNOHANG) == pid) return st;
    usleep(50000);
  }
  kill(pid, SIGKILL);
  waitpid(pid, &st, 0);
  return -1;
}

#endif
