/* runtime_harness — runs S x R tasklets as threads over the in-process transport and records
 * every step's loss and norm per tasklet; optionally one tasklet's transport fails after a
 * number of sends, or one tasklet stalls before it starts. Header-only; for tests/runtime. */
#ifndef WT_TESTS_RUNTIME_HARNESS_H
#define WT_TESTS_RUNTIME_HARNESS_H

#include "common/common.h"
#include "common/testing.h"
#include "parallel/transport/comm.h"
#include "parallel/runtime/tasklet.h"
#include "tests/runtime/optim_defaults.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

enum { H_MAX_RANKS = 8, H_MAX_STEPS = 32 };

typedef struct {
  parallel_tasklet_config base; /* stage / replica filled per rank */
  double timeout_s;             /* the transport's deadline (default 30 s) */
  int fail_rank, fail_after;    /* this rank's sends fail from its fail_after-th on; -1: none */
  int stall_rank;               /* this rank sleeps stall_s before it starts; -1: none */
  double stall_s;
  int site_ranks[H_MAX_RANKS]; /* > 0: this rank's site_ranks instead of base's */
  int private_dirs;            /* 1: each rank checkpoints into base's dir/rank-<w>, its own
                                  (private_dir), as peers with no shared file system do */
  /* results */
  float loss[H_MAX_RANKS][H_MAX_STEPS], norm[H_MAX_RANKS][H_MAX_STEPS];
  float val[H_MAX_RANKS][H_MAX_STEPS]; /* validation loss after the step, NAN when none */
  long steps[H_MAX_RANKS];
  int rcs[H_MAX_RANKS];
  char err[H_MAX_RANKS][512];
  double returned_s[H_MAX_RANKS]; /* seconds from the start until the tasklet returned */
  uint64_t msgs[H_MAX_RANKS];     /* messages each tasklet sent on the world (splits included) */
  double t0;
  parallel_tasklet_result res[H_MAX_RANKS];
} h_run;

/* A transport over another communicator whose sends fail with WT_EIO after a count. */
typedef struct {
  parallel_comm *inner;
  int left;
} h_dying;

static int h_dying_send(void *ctx, int peer, int tag, const void *buf, size_t bytes) {
  h_dying *d = ctx;
  if (d->left-- <= 0) return wt_fail(WT_EIO, "injected fault: this tasklet's link is down");
  return parallel_comm_send(d->inner, peer, tag, buf, bytes);
}

static int h_dying_recv(void *ctx, int peer, int tag, void *buf, size_t cap, size_t *got) {
  h_dying *d = ctx;
  return parallel_comm_recv(d->inner, peer, tag, buf, cap, got);
}

static const parallel_transport_ops h_dying_ops = {
    .name = "dying", .send = h_dying_send, .recv = h_dying_recv};

static void h_on_step(void *arg, const parallel_tasklet_step *st) {
  h_run *h = arg;
  int w = st->stage * h->base.run.replicas + st->replica;
  long i = st->info.step - 1;
  if (i >= 0 && i < H_MAX_STEPS) {
    h->loss[w][i] = st->info.loss, h->norm[w][i] = st->info.grad_norm;
    h->val[w][i] = st->val_loss;
  }
}

static int h_rank(parallel_comm *world, void *arg) {
  h_run *h = arg;
  int w = parallel_comm_rank(world);
  parallel_tasklet_config c = h->base;
  c.stage = w / c.run.replicas;
  c.replica = w % c.run.replicas;
  c.on_step = h_on_step;
  c.on_step_arg = h;
  if (h->site_ranks[w] > 0) c.run.site_ranks = h->site_ranks[w];
  if (h->private_dirs) {
    char dir[sizeof c.run.checkpoint_dir];
    snprintf(dir, sizeof dir, "%.900s/rank-%d", h->base.run.checkpoint_dir, w);
    snprintf(c.run.checkpoint_dir, sizeof c.run.checkpoint_dir, "%s", dir);
    c.private_dir = 1;
  }
  h_dying dying = {world, h->fail_after};
  parallel_comm *use = world, *wrapped = NULL;
  if (w == h->fail_rank) {
    wrapped = parallel_comm_new(&h_dying_ops, &dying, w, parallel_comm_size(world));
    use = wrapped;
  }
  if (w == h->stall_rank) usleep((useconds_t)(h->stall_s * 1e6));
  int rc = parallel_tasklet_run(&c, use, &h->res[w]);
  h->rcs[w] = rc;
  h->steps[w] = h->res[w].steps_done;
  snprintf(h->err[w], sizeof h->err[w], "%s", rc == WT_OK ? "" : wt_last_error());
  h->returned_s[w] = wt_now_s() - h->t0;
  h->msgs[w] = parallel_comm_msgs_sent(world);
  parallel_comm_destroy(&wrapped);
  return rc;
}

/* Runs base.run.stages x base.run.replicas tasklets; returns parallel_inproc_run's status. */
static int h_run_all(h_run *h) {
  int n = h->base.run.stages * h->base.run.replicas;
  parallel_inproc_group *g = parallel_inproc_group_new(n);
  parallel_inproc_group_set_timeout(g, h->timeout_s > 0 ? h->timeout_s : 30);
  for (int w = 0; w < H_MAX_RANKS; w++)
    for (int i = 0; i < H_MAX_STEPS; i++) h->loss[w][i] = h->norm[w][i] = h->val[w][i] = NAN;
  h->t0 = wt_now_s();
  int rc = parallel_inproc_run(g, h_rank, h, NULL);
  parallel_inproc_group_destroy(&g);
  return rc;
}

static void h_init(h_run *h, const parallel_tasklet_config *base) {
  memset(h, 0, sizeof *h);
  h->base = *base;
  h->fail_rank = h->stall_rank = -1;
}

#endif
