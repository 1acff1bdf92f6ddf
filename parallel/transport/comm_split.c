/* comm_split — a sub-communicator over some of a parent's ranks: a transport ops table that maps
 * ranks to the parent's and moves tags into a space of their own (comm.h). */
#include "parallel/transport/comm.h"

#include "common/common.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

#define S_ID_SHIFT 24
#define S_RESERVED_BIT (1 << 23)

typedef struct {
  parallel_comm *parent;
  int *ranks; /* sub rank -> parent rank */
  int id;
} s_split;

/* The parent tag of a sub-communicator tag (comm.h): user and reserved tags in separate halves
 * of the id's 2^24 block. A tag outside both halves is a programming error. */
static int s_tag(const s_split *sp, int tag) {
  int base = sp->id << S_ID_SHIFT;
  if (tag >= PARALLEL_TAG_RESERVED) {
    assert(tag - PARALLEL_TAG_RESERVED < S_RESERVED_BIT);
    return base | S_RESERVED_BIT | (tag - PARALLEL_TAG_RESERVED);
  }
  assert(tag >= 0 && tag < S_RESERVED_BIT);
  return base | tag;
}

static int s_explain(const s_split *sp, int rc, int peer, int tag, const char *op);

static int s_send(void *ctx, int peer, int tag, const void *buf, size_t bytes) {
  s_split *sp = ctx;
  int rc = parallel_comm_send(sp->parent, sp->ranks[peer], s_tag(sp, tag), buf, bytes);
  return rc == WT_OK ? WT_OK : s_explain(sp, rc, peer, tag, "send");
}

/* The parent's error names parent ranks and the mapped tag; say what they are here. */
static int s_explain(const s_split *sp, int rc, int peer, int tag, const char *op) {
  char why[900];
  snprintf(why, sizeof why, "%s", wt_last_error());
  return wt_fail(rc, "%s [%s on sub-communicator %d: peer %d is parent rank %d, tag %s%d]", why, op,
                 sp->id, peer, sp->ranks[peer], tag >= PARALLEL_TAG_RESERVED ? "library " : "",
                 tag >= PARALLEL_TAG_RESERVED ? tag - PARALLEL_TAG_RESERVED : tag);
}

static int s_recv(void *ctx, int peer, int tag, void *buf, size_t cap, size_t *got) {
  s_split *sp = ctx;
  int rc = parallel_comm_recv(sp->parent, sp->ranks[peer], s_tag(sp, tag), buf, cap, got);
  return rc == WT_OK ? WT_OK : s_explain(sp, rc, peer, tag, "recv");
}

static int s_send_owned(void *ctx, int peer, int tag, void *buf, size_t bytes) {
  s_split *sp = ctx;
  int rc = parallel_comm_send_owned(sp->parent, sp->ranks[peer], s_tag(sp, tag), buf, bytes);
  return rc == WT_OK ? WT_OK : s_explain(sp, rc, peer, tag, "send");
}

static int s_send_gather(void *ctx, int peer, int tag, const void *head, size_t head_bytes,
                         const void *body, size_t body_bytes) {
  s_split *sp = ctx;
  int rc = parallel_comm_send_gather(sp->parent, sp->ranks[peer], s_tag(sp, tag), head, head_bytes,
                                     body, body_bytes);
  return rc == WT_OK ? WT_OK : s_explain(sp, rc, peer, tag, "send");
}

static int s_recv_view(void *ctx, int peer, int tag, void *buf, size_t cap, const void **data,
                       size_t *got, void **handle) {
  s_split *sp = ctx;
  int rc = parallel_comm_recv_view(sp->parent, sp->ranks[peer], s_tag(sp, tag), buf, cap, data, got,
                                   handle);
  return rc == WT_OK ? WT_OK : s_explain(sp, rc, peer, tag, "recv");
}

static void s_release(void *ctx, void *handle) {
  parallel_comm_release(((s_split *)ctx)->parent, handle);
}

static void s_destroy(void *ctx) {
  s_split *sp = ctx;
  free(sp->ranks);
  free(sp);
}

static int s_integrity(void *ctx) {
  return parallel_comm_integrity(((s_split *)ctx)->parent);
}

static const parallel_transport_ops s_split_ops = {.name = "split",
                                                   .send = s_send,
                                                   .recv = s_recv,
                                                   .destroy = s_destroy,
                                                   .integrity = s_integrity,
                                                   .send_owned = s_send_owned,
                                                   .recv_view = s_recv_view,
                                                   .release = s_release,
                                                   .send_gather = s_send_gather};

parallel_comm *parallel_comm_split(parallel_comm *parent, const int *ranks, int n, int id) {
  int size = parallel_comm_size(parent), me = parallel_comm_rank(parent), sub_rank = -1;
  if (parallel_comm_ops(parent) == &s_split_ops) {
    wt_fail(WT_EINVAL, "comm split: sub-communicators do not nest; split the world instead");
    return NULL;
  }
  if (id < 1 || id > PARALLEL_SPLIT_MAX_ID || n < 1 || n > size) {
    wt_fail(WT_EINVAL, "comm split: id %d must be in [1, %d] and %d ranks in [1, %d]", id,
            PARALLEL_SPLIT_MAX_ID, n, size);
    return NULL;
  }
  for (int i = 0; i < n; i++) {
    int dup = 0;
    for (int k = 0; k < i; k++) dup |= ranks[k] == ranks[i];
    if (ranks[i] < 0 || ranks[i] >= size || dup) {
      wt_fail(WT_EINVAL, "comm split: rank %d (entry %d) is outside [0, %d) or repeated", ranks[i],
              i, size);
      return NULL;
    }
    if (ranks[i] == me) sub_rank = i;
  }
  if (sub_rank < 0) {
    wt_fail(WT_EINVAL, "comm split: the ranks do not include this rank (%d)", me);
    return NULL;
  }
  s_split *sp = wt_xcalloc(1, sizeof *sp);
  sp->parent = parent;
  sp->id = id;
  sp->ranks = wt_xmalloc(sizeof(int) * (size_t)n);
  memcpy(sp->ranks, ranks, sizeof(int) * (size_t)n);
  parallel_comm *c = parallel_comm_new(&s_split_ops, sp, sub_rank, n);
  if (!c) s_destroy(sp);
  return c;
}
