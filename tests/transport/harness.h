/* harness — runs one function per rank on threads of this process, each rank with its own
 * ZeroMQ transport (own context, own sockets, own key pair) on loopback ephemeral ports: the
 * threaded counterpart of parallel_zmq_fork_run, for tests that inspect ranks from one process.
 * Header-only; for tests. */
#ifndef WT_TESTS_TRANSPORT_HARNESS_H
#define WT_TESTS_TRANSPORT_HARNESS_H

#include "parallel/transport/zmq.h"

#include "common/common.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S_MAX_RANKS 8

typedef struct {
  int size;
  char pub[S_MAX_RANKS][41], sec[S_MAX_RANKS][41];
  const char *pubs[S_MAX_RANKS];
  char eps[S_MAX_RANKS][256];
  const char *ep_ptrs[S_MAX_RANKS];
  parallel_comm *comms[S_MAX_RANKS];
} s_group;

/* Builds `size` connected communicators from *base (rank/size/endpoints/keys filled in here;
 * per-rank shaping arrays come from shape(rank, &cfg, user) when given). Returns WT_OK or the
 * first failure, with every comm made so far destroyed. */
static inline int s_group_open(s_group *g, int size, const parallel_zmq_config *base,
                               void (*shape)(int rank, parallel_zmq_config *cfg, void *user),
                               void *user) {
  memset(g, 0, sizeof *g);
  g->size = size;
  for (int r = 0; r < size; r++) {
    WT_CHECK(parallel_zmq_keypair_new(g->pub[r], g->sec[r]));
    g->pubs[r] = g->pub[r];
  }
  parallel_zmq_transport *ts[S_MAX_RANKS] = {0};
  int rc = WT_OK;
  for (int r = 0; r < size && rc == WT_OK; r++) {
    parallel_zmq_config cfg = *base;
    const char *eps[S_MAX_RANKS] = {0};
    eps[r] = "tcp://127.0.0.1:*";
    cfg.rank = r;
    cfg.size = size;
    cfg.endpoints = eps;
    cfg.secret_key = g->sec[r];
    cfg.public_key = g->pub[r];
    cfg.peer_public_keys = g->pubs;
    if (shape) shape(r, &cfg, user);
    ts[r] = parallel_zmq_transport_new(&cfg);
    if (!ts[r]) {
      rc = WT_EIO;
      break;
    }
    snprintf(g->eps[r], sizeof g->eps[r], "%s", parallel_zmq_transport_endpoint(ts[r]));
    g->ep_ptrs[r] = g->eps[r];
  }
  for (int r = 0; r < size; r++) {
    if (rc == WT_OK) {
      g->comms[r] = parallel_zmq_transport_connect(&ts[r], g->ep_ptrs);
      if (!g->comms[r]) rc = WT_EIO;
    } else {
      parallel_zmq_transport_destroy(&ts[r]);
    }
  }
  if (rc != WT_OK)
    for (int r = 0; r < size; r++) parallel_comm_destroy(&g->comms[r]);
  return rc;
}

static inline void s_group_close(s_group *g) {
  for (int r = 0; r < g->size; r++) parallel_comm_destroy(&g->comms[r]);
}

typedef struct {
  parallel_comm *c;
  parallel_rank_fn fn;
  void *arg;
  int rc;
  char err[512];
} s_thread_job;

static void *s_thread_main(void *p) {
  s_thread_job *j = p;
  j->rc = j->fn(j->c, j->arg);
  snprintf(j->err, sizeof j->err, "%s", j->rc ? wt_last_error() : "");
  return NULL;
}

/* Runs fn on one thread per rank; rcs[r] and errs[r] (may be NULL) receive each result and
 * message. Returns the first nonzero status, else WT_OK. */
static inline int s_group_run(s_group *g, parallel_rank_fn fn, void *arg, int *rcs,
                              char (*errs)[512]) {
  s_thread_job jobs[S_MAX_RANKS];
  pthread_t th[S_MAX_RANKS];
  for (int r = 0; r < g->size; r++) {
    jobs[r] = (s_thread_job){g->comms[r], fn, arg, 0, ""};
    pthread_create(&th[r], NULL, s_thread_main, &jobs[r]);
  }
  int rc = WT_OK;
  for (int r = 0; r < g->size; r++) {
    pthread_join(th[r], NULL);
    if (rcs) rcs[r] = jobs[r].rc;
    if (errs) memcpy(errs[r], jobs[r].err, sizeof jobs[r].err);
    if (jobs[r].rc != WT_OK) {
      fprintf(stderr, "rank %d: %s\n", r, jobs[r].err);
      if (rc == WT_OK) rc = jobs[r].rc;
    }
  }
  return rc;
}

#endif
