/* stall_server — a loopback HTTP server that stalls, for the download tests (header-only).
 *
 * stall_server_start forks a process that listens on 127.0.0.1 at an ephemeral port, accepts
 * every connection, sends `reply` (may be "" — then it sends nothing at all) and then keeps the
 * connection open without sending another byte, as a hung server would. stall_server_stop kills
 * it. The child also dies with the test (PR_SET_PDEATHSIG), so it cannot outlive a failed run.
 */
#ifndef WT_TESTS_STALL_SERVER_H
#define WT_TESTS_STALL_SERVER_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

typedef struct {
  pid_t pid;
  int port;
} stall_server;

/* Returns 0 and fills *s, or -1 if no socket could be set up. */
static inline int stall_server_start(stall_server *s, const char *reply) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 8) != 0 ||
      getsockname(fd, (struct sockaddr *)&a, &len) != 0)
    return -1;
  s->port = ntohs(a.sin_port);
  s->pid = fork();
  if (s->pid < 0) return -1;
  if (s->pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    for (;;) {
      int c = accept(fd, NULL, NULL);
      if (c < 0) continue;
      char req[4096];
      if (recv(c, req, sizeof req, 0) < 0) continue; /* the request line and headers */
      if (*reply && send(c, reply, strlen(reply), MSG_NOSIGNAL) < 0) close(c);
      /* keep c open and silent */
    }
  }
  close(fd);
  return 0;
}

static inline void stall_server_stop(stall_server *s) {
  if (s->pid <= 0) return;
  kill(s->pid, SIGKILL);
  waitpid(s->pid, NULL, 0);
  s->pid = 0;
}

#endif
