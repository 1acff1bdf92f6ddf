/* inproc — the in-process transport: ranks are threads, messages are copied through bounded
 * mailboxes (one per ordered src→dst pair), and a rank that returns is "closed" so that its
 * peers fail fast instead of waiting for a message that will never come. */
#include "parallel/transport/comm.h"

#include "common/common.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct s_msg {
  struct s_msg *next;
  int tag;
  size_t bytes;
  unsigned char data[];
} s_msg;

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t not_empty; /* signalled on every push and on close */
  pthread_cond_t not_full;  /* signalled on every pop and on close */
  s_msg *head, *tail;
  size_t queued_bytes;
} s_mailbox;

typedef struct {
  parallel_inproc_group *group;
  int rank;
} s_rank_ctx;

struct parallel_inproc_group {
  int size;
  double timeout_s;
  size_t max_queue;
  s_mailbox *boxes; /* size*size, index src*size + dst */
  atomic_int *closed;
  s_rank_ctx *ctxs;
  parallel_comm **comms;
};

static s_mailbox *s_box(parallel_inproc_group *g, int src, int dst) {
  return &g->boxes[(size_t)src * (size_t)g->size + (size_t)dst];
}

/* Absolute CLOCK_MONOTONIC deadline timeout_s from now (the conds are made on that clock). */
static struct timespec s_deadline(double timeout_s) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  double whole = (double)(long long)timeout_s;
  ts.tv_sec += (time_t)whole;
  ts.tv_nsec += (long)((timeout_s - whole) * 1e9);
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  return ts;
}

static void s_box_clear(s_mailbox *b) {
  for (s_msg *m = b->head, *next; m; m = next) {
    next = m->next;
    free(m);
  }
  b->head = b->tail = NULL;
  b->queued_bytes = 0;
}

static int s_send(void *vctx, int peer, int tag, const void *buf, size_t bytes) {
  s_rank_ctx *ctx = vctx;
  parallel_inproc_group *g = ctx->group;
  s_mailbox *b = s_box(g, ctx->rank, peer);
  s_msg *m = wt_xmalloc(sizeof *m + bytes);
  m->next = NULL;
  m->tag = tag;
  m->bytes = bytes;
  if (bytes) memcpy(m->data, buf, bytes);
  struct timespec deadline = s_deadline(g->timeout_s);
  int rc = WT_OK;
  pthread_mutex_lock(&b->mu);
  /* Bounded memory: wait while the mailbox is non-empty and this message would overflow it. */
  while (rc == WT_OK && b->queued_bytes > 0 && b->queued_bytes + bytes > g->max_queue) {
    if (atomic_load(&g->closed[peer]))
      rc = WT_EIO;
    else if (pthread_cond_timedwait(&b->not_full, &b->mu, &deadline) == ETIMEDOUT)
      rc = WT_ETIMEOUT;
  }
  if (rc == WT_OK && atomic_load(&g->closed[peer])) rc = WT_EIO;
  if (rc == WT_OK) {
    if (b->tail)
      b->tail->next = m;
    else
      b->head = m;
    b->tail = m;
    b->queued_bytes += bytes;
    pthread_cond_broadcast(&b->not_empty);
  }
  pthread_mutex_unlock(&b->mu);
  if (rc == WT_OK) return WT_OK;
  free(m);
  if (rc == WT_EIO)
    return wt_fail(WT_EIO, "inproc: rank %d cannot send to rank %d: it has left", ctx->rank, peer);
  return wt_fail(WT_ETIMEOUT, "inproc: rank %d: send to rank %d blocked for %.1f s (queue full)",
                 ctx->rank, peer, g->timeout_s);
}

/* Unlinks and returns the oldest message with `tag`, or NULL. Caller holds b->mu. */
static s_msg *s_box_take(s_mailbox *b, int tag) {
  s_msg *prev = NULL;
  for (s_msg *m = b->head; m; prev = m, m = m->next) {
    if (m->tag != tag) continue;
    if (prev)
      prev->next = m->next;
    else
      b->head = m->next;
    if (b->tail == m) b->tail = prev;
    b->queued_bytes -= m->bytes;
    return m;
  }
  return NULL;
}

static int s_recv(void *vctx, int peer, int tag, void *buf, size_t cap, size_t *got) {
  s_rank_ctx *ctx = vctx;
  parallel_inproc_group *g = ctx->group;
  s_mailbox *b = s_box(g, peer, ctx->rank);
  struct timespec deadline = s_deadline(g->timeout_s);
  s_msg *m = NULL;
  int timed_out = 0, closed = 0;
  pthread_mutex_lock(&b->mu);
  while (!(m = s_box_take(b, tag))) {
    if ((closed = atomic_load(&g->closed[peer]))) break;
    if (pthread_cond_timedwait(&b->not_empty, &b->mu, &deadline) == ETIMEDOUT) {
      if ((m = s_box_take(b, tag))) break;
      timed_out = 1;
      break;
    }
  }
  if (m) pthread_cond_broadcast(&b->not_full);
  pthread_mutex_unlock(&b->mu);
  if (got) *got = 0;
  if (closed)
    return wt_fail(WT_EIO, "inproc: rank %d waits for rank %d, which has left", ctx->rank, peer);
  if (timed_out)
    return wt_fail(WT_ETIMEOUT, "inproc: rank %d: no message from rank %d (tag %d) in %.1f s",
                   ctx->rank, peer, tag, g->timeout_s);
  int rc = WT_OK;
  if (m->bytes > cap)
    rc = wt_fail(WT_EMISMATCH,
                 "inproc: rank %d: message from rank %d is %zu bytes, expected at "
                 "most %zu",
                 ctx->rank, peer, m->bytes, cap);
  else {
    if (m->bytes) memcpy(buf, m->data, m->bytes);
    if (got) *got = m->bytes;
  }
  free(m);
  return rc;
}

static const parallel_transport_ops s_inproc_ops = {
    .name = "inproc", .send = s_send, .recv = s_recv, .destroy = NULL};

static void s_box_init(s_mailbox *b) {
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_mutex_init(&b->mu, NULL);
  pthread_cond_init(&b->not_empty, &attr);
  pthread_cond_init(&b->not_full, &attr);
  pthread_condattr_destroy(&attr);
  b->head = b->tail = NULL;
  b->queued_bytes = 0;
}

parallel_inproc_group *parallel_inproc_group_new(int size) {
  if (size < 1 || size > 1024) {
    wt_fail(WT_EINVAL, "inproc group: size %d out of range [1, 1024]", size);
    return NULL;
  }
  parallel_inproc_group *g = wt_xcalloc(1, sizeof *g);
  g->size = size;
  g->timeout_s = 120.0;
  g->max_queue = (size_t)64 << 20;
  g->boxes = wt_xcalloc((size_t)size * (size_t)size, sizeof *g->boxes);
  for (size_t i = 0; i < (size_t)size * (size_t)size; i++) s_box_init(&g->boxes[i]);
  g->closed = wt_xcalloc((size_t)size, sizeof *g->closed);
  g->ctxs = wt_xcalloc((size_t)size, sizeof *g->ctxs);
  g->comms = wt_xcalloc((size_t)size, sizeof *g->comms);
  for (int r = 0; r < size; r++) {
    atomic_init(&g->closed[r], 0);
    g->ctxs[r] = (s_rank_ctx){g, r};
    g->comms[r] = parallel_comm_new(&s_inproc_ops, &g->ctxs[r], r, size);
  }
  return g;
}

void parallel_inproc_group_destroy(parallel_inproc_group **self_p) {
  if (!self_p || !*self_p) return;
  parallel_inproc_group *g = *self_p;
  for (size_t i = 0; i < (size_t)g->size * (size_t)g->size; i++) {
    s_box_clear(&g->boxes[i]);
    pthread_mutex_destroy(&g->boxes[i].mu);
    pthread_cond_destroy(&g->boxes[i].not_empty);
    pthread_cond_destroy(&g->boxes[i].not_full);
  }
  for (int r = 0; r < g->size; r++) parallel_comm_destroy(&g->comms[r]);
  free(g->boxes);
  free(g->closed);
  free(g->ctxs);
  free(g->comms);
  free(g);
  *self_p = NULL;
}

void parallel_inproc_group_set_timeout(parallel_inproc_group *g, double timeout_s) {
  assert(timeout_s > 0);
  g->timeout_s = timeout_s;
}

void parallel_inproc_group_set_max_queue(parallel_inproc_group *g, size_t max_queue_bytes) {
  g->max_queue = max_queue_bytes;
}

int parallel_inproc_group_size(const parallel_inproc_group *g) {
  return g->size;
}

parallel_comm *parallel_inproc_group_comm(parallel_inproc_group *g, int rank) {
  assert(rank >= 0 && rank < g->size);
  return g->comms[rank];
}

void parallel_inproc_group_set_closed(parallel_inproc_group *g, int rank, int closed) {
  assert(rank >= 0 && rank < g->size);
  atomic_store(&g->closed[rank], closed);
  /* Wake everyone waiting on a mailbox from or to this rank; they re-check the flag under the
   * mailbox lock, so taking each lock here means no waiter can miss the change. */
  for (int other = 0; other < g->size; other++) {
    s_mailbox *boxes[2] = {s_box(g, rank, other), s_box(g, other, rank)};
    for (int k = 0; k < 2; k++) {
      pthread_mutex_lock(&boxes[k]->mu);
      pthread_cond_broadcast(&boxes[k]->not_empty);
      pthread_cond_broadcast(&boxes[k]->not_full);
      pthread_mutex_unlock(&boxes[k]->mu);
    }
  }
}

typedef struct {
  parallel_inproc_group *g;
  int rank;
  parallel_rank_fn fn;
  void *arg;
  int rc;
} s_thread_arg;

static void *s_thread_main(void *p) {
  s_thread_arg *t = p;
  t->rc = t->fn(t->g->comms[t->rank], t->arg);
  parallel_inproc_group_set_closed(t->g, t->rank, 1);
  return NULL;
}

int parallel_inproc_run(parallel_inproc_group *g, parallel_rank_fn fn, void *arg, int *rcs) {
  for (size_t i = 0; i < (size_t)g->size * (size_t)g->size; i++) s_box_clear(&g->boxes[i]);
  for (int r = 0; r < g->size; r++) {
    atomic_store(&g->closed[r], 0);
    parallel_comm_reset_seq(g->comms[r]);
  }
  s_thread_arg *ts = wt_xcalloc((size_t)g->size, sizeof *ts);
  pthread_t *th = wt_xcalloc((size_t)g->size, sizeof *th);
  int started = 0, rc = WT_OK;
  for (; started < g->size; started++) {
    ts[started] = (s_thread_arg){g, started, fn, arg, WT_OK};
    if (pthread_create(&th[started], NULL, s_thread_main, &ts[started]) != 0) {
      rc = wt_fail(WT_EIO, "inproc: could not start the thread of rank %d", started);
      for (int r = started; r < g->size; r++) parallel_inproc_group_set_closed(g, r, 1);
      break;
    }
  }
  for (int r = 0; r < started; r++) pthread_join(th[r], NULL);
  for (int r = 0; r < g->size; r++) {
    if (rcs) rcs[r] = r < started ? ts[r].rc : WT_EIO;
    if (rc == WT_OK && r < started && ts[r].rc != WT_OK) rc = ts[r].rc;
  }
  free(ts);
  free(th);
  return rc;
}
