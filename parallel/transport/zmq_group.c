/* zmq_group — runs a function on `size` forked processes joined by ZeroMQ communicators on
 * loopback: the multi-process counterpart of parallel_inproc_run (contract in zmq.h). Each child
 * binds an ephemeral port and reports it through a pipe; the parent hands every child the full
 * list, then reaps the children within a deadline. */
#include "parallel/transport/zmq.h"

#include "common/common.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define S_EP_CHARS 128 /* one endpoint line in the pipes, NUL-padded */

static int s_write_all(int fd, const void *buf, size_t n) {
  const char *p = buf;
  while (n) {
    ssize_t w = write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* Reads exactly n bytes before `deadline` (wt_now_s clock); -1 on EOF, error or timeout. */
static int s_read_all(int fd, void *buf, size_t n, double deadline) {
  char *p = buf;
  while (n) {
    struct pollfd pfd = {fd, POLLIN, 0};
    int ms = (int)((deadline - wt_now_s()) * 1e3);
    if (ms <= 0 || poll(&pfd, 1, ms) <= 0) return -1;
    ssize_t r = read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return -1;
    p += r;
    n -= (size_t)r;
  }
  return 0;
}

/* The body of one child: bind, report the endpoint, learn everyone's, connect, run fn. The
 * arrays (size entries each) are the caller's. */
static int s_child_run(int rank, int size, parallel_zmq_config *cfg, const char **eps,
                       char (*lines)[S_EP_CHARS], int up, int down, parallel_rank_fn fn,
                       void *arg) {
  char mine[S_EP_CHARS] = "";
  parallel_zmq_transport *t = parallel_zmq_transport_new(cfg);
  if (t) snprintf(mine, sizeof mine, "%s", parallel_zmq_transport_endpoint(t));
  /* An empty line tells the parent this rank could not start. */
  if (s_write_all(up, mine, sizeof mine) != 0 || !t) {
    if (!t) fprintf(stderr, "rank %d: %s\n", rank, wt_last_error());
    parallel_zmq_transport_destroy(&t);
    return WT_EIO;
  }
  double deadline = wt_now_s() + cfg->timeout_s + 30;
  if (s_read_all(down, lines, (size_t)size * S_EP_CHARS, deadline) != 0) {
    fprintf(stderr, "rank %d: the group did not start (another rank failed)\n", rank);
    parallel_zmq_transport_destroy(&t);
    return WT_EIO;
  }
  for (int r = 0; r < size; r++) {
    lines[r][S_EP_CHARS - 1] = 0;
    eps[r] = lines[r];
  }
  parallel_comm *c = parallel_zmq_transport_connect(&t, eps);
  if (!c) {
    fprintf(stderr, "rank %d: %s\n", rank, wt_last_error());
    return WT_EIO;
  }
  int rc = fn(c, arg);
  if (rc != WT_OK) fprintf(stderr, "rank %d failed: %s\n", rank, wt_last_error());
  parallel_comm_destroy(&c);
  return rc;
}

static int s_child(int rank, int size, const parallel_zmq_config *base, char (*pub)[41],
                   char (*sec)[41], int up, int down, parallel_rank_fn fn, void *arg) {
  parallel_zmq_config cfg = *base;
  cfg.rank = rank;
  cfg.size = size;
  const char **eps = wt_xcalloc((size_t)size, sizeof *eps);
  char(*lines)[S_EP_CHARS] = wt_xcalloc((size_t)size, S_EP_CHARS);
  const char **pubs = wt_xcalloc((size_t)size, sizeof *pubs);
  eps[rank] = "tcp://127.0.0.1:*";
  cfg.endpoints = eps;
  if (!cfg.insecure && !cfg.secret_key) {
    for (int r = 0; r < size; r++) pubs[r] = pub[r];
    cfg.secret_key = sec[rank];
    cfg.public_key = pub[rank];
    cfg.peer_public_keys = pubs;
  }
  int rc = s_child_run(rank, size, &cfg, eps, lines, up, down, fn, arg);
  free(eps);
  free(lines);
  free(pubs);
  return rc;
}

int parallel_zmq_fork_run(int size, const parallel_zmq_config *base, parallel_rank_fn fn, void *arg,
                          int *rcs) {
  if (size < 1 || size > 1024)
    return wt_fail(WT_EINVAL, "zmq fork group: size %d out of range [1, 1024]", size);
  char(*pub)[41] = wt_xcalloc((size_t)size, 41);
  char(*sec)[41] = wt_xcalloc((size_t)size, 41);
  if (!base->insecure && !base->secret_key)
    for (int r = 0; r < size; r++) WT_CHECK(parallel_zmq_keypair_new(pub[r], sec[r]));
  pid_t *pids = wt_xcalloc((size_t)size, sizeof *pids);
  int *up = wt_xcalloc((size_t)size, sizeof *up), *down = wt_xcalloc((size_t)size, sizeof *down);
  int *st = wt_xcalloc((size_t)size, sizeof *st);
  fflush(stdout);
  fflush(stderr);
  int started = 0, rc = WT_OK;
  for (; started < size; started++) {
    int pu[2], pd[2];
    if (pipe(pu) != 0 || pipe(pd) != 0) break;
    pid_t pid = fork();
    if (pid < 0) break;
    if (pid == 0) {
      close(pu[0]);
      close(pd[1]);
      for (int r = 0; r < started; r++) {
        close(up[r]);
        close(down[r]);
      }
      int crc = s_child(started, size, base, pub, sec, pu[1], pd[0], fn, arg);
      fflush(stdout);
      fflush(stderr);
      _exit(crc <= 0 && crc >= -100 ? -crc : 100);
    }
    close(pu[1]);
    close(pd[0]);
    pids[started] = pid;
    up[started] = pu[0];
    down[started] = pd[1];
  }
  if (started < size) rc = wt_fail(WT_EIO, "zmq fork group: could not start rank %d", started);
  /* Gather every bound endpoint, then give each child the full list. */
  char(*lines)[S_EP_CHARS] = wt_xcalloc((size_t)size, S_EP_CHARS);
  double deadline = wt_now_s() + base->timeout_s + 30;
  for (int r = 0; r < started && rc == WT_OK; r++)
    if (s_read_all(up[r], lines[r], S_EP_CHARS, deadline) != 0 || lines[r][0] == 0)
      rc = wt_fail(WT_EIO, "zmq fork group: rank %d could not bind (see its message above)", r);
  for (int r = 0; r < started; r++) {
    if (rc == WT_OK) s_write_all(down[r], lines, (size_t)size * S_EP_CHARS);
    close(down[r]);
    close(up[r]);
  }
  /* Reap within a deadline; a child that outlives it is killed. */
  double reap_deadline = wt_now_s() + base->timeout_s * 4 + 30;
  int left = started;
  for (int r = 0; r < size; r++) st[r] = r < started ? 1 : -1; /* 1: running */
  while (left > 0) {
    int reaped = 0;
    for (int r = 0; r < started; r++) {
      int status;
      if (st[r] != 1 || waitpid(pids[r], &status, WNOHANG) != pids[r]) continue;
      st[r] = 0;
      left--;
      reaped = 1;
      int code = WIFEXITED(status) ? WEXITSTATUS(status) : 100;
      int v = code < 100 ? -code : WT_EIO; /* 100: killed by a signal or an odd status */
      if (rcs) rcs[r] = v;
      if (rc == WT_OK && v != WT_OK) rc = v;
    }
    if (reaped) continue;
    if (wt_now_s() > reap_deadline) {
      for (int r = 0; r < started; r++)
        if (st[r] == 1) {
          kill(pids[r], SIGKILL);
          waitpid(pids[r], NULL, 0);
          st[r] = 0;
          if (rcs) rcs[r] = WT_ETIMEOUT;
        }
      if (rc == WT_OK) rc = wt_fail(WT_ETIMEOUT, "zmq fork group: ranks did not finish in time");
      break;
    }
    struct timespec ts = {0, 5000000};
    nanosleep(&ts, NULL);
  }
  for (int r = started; r < size; r++)
    if (rcs) rcs[r] = WT_EIO;
  memset(sec, 0, (size_t)size * 41);
  free(pub);
  free(sec);
  free(pids);
  free(up);
  free(down);
  free(st);
  free(lines);
  return rc;
}
