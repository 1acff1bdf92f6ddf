/* wt_program_init: a program started without OMP_WAIT_POLICY comes back re-executed with
 * PASSIVE and its arguments intact; a value the user set is left alone and nothing re-executes. */
#include "common/common.h"
#include "common/testing.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* Runs this program as "child ARG" with OMP_WAIT_POLICY set to `policy` (NULL: unset) and
 * returns its one line of output in out. */
static int s_run_child(const char *self, const char *policy, char *out, size_t cap) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    if (policy)
      setenv("OMP_WAIT_POLICY", policy, 1);
    else
      unsetenv("OMP_WAIT_POLICY");
    unsetenv("WT_TEST_STARTS");
    execl(self, self, "child", "two words", (char *)NULL);
    _exit(127);
  }
  close(fds[1]);
  ssize_t n = read(fds[0], out, cap - 1);
  out[n > 0 ? n : 0] = 0;
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "child")) {
    /* Count the starts through the environment, which survives the exec. */
    const char *starts = getenv("WT_TEST_STARTS");
    char next[16];
    snprintf(next, sizeof next, "%d", starts ? atoi(starts) + 1 : 1);
    setenv("WT_TEST_STARTS", next, 1);
    wt_program_init(argv);
    printf("%s|%s|%s\n", getenv("OMP_WAIT_POLICY") ? getenv("OMP_WAIT_POLICY") : "(unset)",
           getenv("WT_TEST_STARTS"), argv[2]);
    return 0;
  }
  char out[256];
  WT_TEST_ASSERT(s_run_child(argv[0], NULL, out, sizeof out) == 0, "child ran");
  WT_TEST_ASSERT(!strcmp(out, "PASSIVE|2|two words\n"), "unset: re-executed once with PASSIVE (%s)",
                 out);
  WT_TEST_ASSERT(s_run_child(argv[0], "ACTIVE", out, sizeof out) == 0, "child ran");
  WT_TEST_ASSERT(!strcmp(out, "ACTIVE|1|two words\n"), "user's value kept, no re-exec (%s)", out);
  return wt_test_finish("test_program_init");
}
