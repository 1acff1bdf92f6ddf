/* mesh — the dp × pp × tp × cp × ep layout of the world's ranks and one sub-communicator per
 * kind of group (mesh.h). */
#include "parallel/datacenter/mesh.h"

#include "common/common.h"

#include <assert.h>
#include <stdlib.h>

struct parallel_mesh {
  parallel_mesh_shape shape;
  parallel_mesh_coord coord;
  parallel_comm *groups[PARALLEL_GROUP_COUNT];
  int *members[PARALLEL_GROUP_COUNT]; /* world ranks, group-rank order */
  int sizes[PARALLEL_GROUP_COUNT];
  parallel_group_comm coll[PARALLEL_GROUP_COUNT]; /* the back end the layers call (group.h) */
};

/* Axes in layout order, fastest first: the index into these arrays is the axis number. */
enum { S_TP, S_CP, S_EP, S_DP, S_PP, S_AXES };

static void s_dims(const parallel_mesh_shape *s, int d[S_AXES]) {
  d[S_TP] = s->tp, d[S_CP] = s->cp, d[S_EP] = s->ep, d[S_DP] = s->dp, d[S_PP] = s->pp;
}

/* The axes along which a group of kind g varies, as a bit mask of S_* axes. */
static unsigned s_axes(parallel_group g) {
  switch (g) {
  case PARALLEL_GROUP_TP:
    return 1u << S_TP;
  case PARALLEL_GROUP_CP:
    return 1u << S_CP;
  case PARALLEL_GROUP_EP:
    return 1u << S_EP;
  case PARALLEL_GROUP_DP:
    return 1u << S_DP;
  case PARALLEL_GROUP_PP:
    return 1u << S_PP;
  case PARALLEL_GROUP_DENSE_GRAD:
    return 1u << S_DP | 1u << S_CP | 1u << S_EP;
  case PARALLEL_GROUP_EXPERT_GRAD:
    return 1u << S_DP | 1u << S_CP;
  default:
    assert(!"unknown group");
    return 0;
  }
}

const char *parallel_mesh_group_name(parallel_group g) {
  static const char *names[PARALLEL_GROUP_COUNT] = {"tp", "cp",         "ep",         "dp",
                                                    "pp", "dense_grad", "expert_grad"};
  assert(g >= 0 && g < PARALLEL_GROUP_COUNT);
  return names[g];
}

parallel_mesh_coord parallel_mesh_coord_of(const parallel_mesh_shape *s, int rank) {
  parallel_mesh_coord c;
  c.tp = rank % s->tp, rank /= s->tp;
  c.cp = rank % s->cp, rank /= s->cp;
  c.ep = rank % s->ep, rank /= s->ep;
  c.dp = rank % s->dp, rank /= s->dp;
  c.pp = rank;
  return c;
}

int parallel_mesh_rank_of(const parallel_mesh_shape *s, parallel_mesh_coord c) {
  return c.tp + s->tp * (c.cp + s->cp * (c.ep + s->ep * (c.dp + s->dp * c.pp)));
}

static void s_coord_array(parallel_mesh_coord c, int a[S_AXES]) {
  a[S_TP] = c.tp, a[S_CP] = c.cp, a[S_EP] = c.ep, a[S_DP] = c.dp, a[S_PP] = c.pp;
}

/* The world ranks that agree with `me` on every axis outside `axes`, in increasing order. */
static int s_collect(const parallel_mesh_shape *s, int world, parallel_mesh_coord me, unsigned axes,
                     int *out) {
  int mine[S_AXES], n = 0;
  s_coord_array(me, mine);
  for (int r = 0; r < world; r++) {
    int other[S_AXES], same = 1;
    s_coord_array(parallel_mesh_coord_of(s, r), other);
    for (int a = 0; a < S_AXES; a++)
      if (!(axes & 1u << a) && other[a] != mine[a]) same = 0;
    if (same) out[n++] = r;
  }
  return n;
}

parallel_mesh *parallel_mesh_new(parallel_comm *world, const parallel_mesh_shape *shape,
                                 int id_base) {
  int d[S_AXES], world_size = parallel_comm_size(world);
  s_dims(shape, d);
  long product = 1;
  for (int a = 0; a < S_AXES; a++) {
    if (d[a] < 1) {
      wt_fail(WT_EINVAL, "mesh: every axis must be >= 1 (dp %d pp %d tp %d cp %d ep %d)", shape->dp,
              shape->pp, shape->tp, shape->cp, shape->ep);
      return NULL;
    }
    product *= d[a];
  }
  if (product != world_size) {
    wt_fail(WT_EINVAL,
            "mesh: dp %d × pp %d × tp %d × cp %d × ep %d = %ld ranks, but the world has %d; "
            "choose axes whose product is the world size",
            shape->dp, shape->pp, shape->tp, shape->cp, shape->ep, product, world_size);
    return NULL;
  }
  if (id_base < 1 || id_base + PARALLEL_GROUP_COUNT - 1 > PARALLEL_SPLIT_MAX_ID) {
    wt_fail(WT_EINVAL, "mesh: split ids %d..%d must lie in 1..%d", id_base,
            id_base + PARALLEL_GROUP_COUNT - 1, PARALLEL_SPLIT_MAX_ID);
    return NULL;
  }
  parallel_mesh *m = wt_xcalloc(1, sizeof *m);
  m->shape = *shape;
  m->coord = parallel_mesh_coord_of(shape, parallel_comm_rank(world));
  for (int g = 0; g < PARALLEL_GROUP_COUNT; g++) {
    m->members[g] = wt_xmalloc(sizeof(int) * (size_t)world_size);
    m->sizes[g] = s_collect(shape, world_size, m->coord, s_axes(g), m->members[g]);
    m->groups[g] = parallel_comm_split(world, m->members[g], m->sizes[g], id_base + g);
    if (!m->groups[g]) {
      parallel_mesh_destroy(&m);
      return NULL;
    }
    m->coll[g] = (parallel_group_comm){.ops = parallel_group_host_ops(),
                                       .ctx = m->groups[g],
                                       .rank = parallel_comm_rank(m->groups[g]),
                                       .size = m->sizes[g]};
  }
  return m;
}

void parallel_mesh_destroy(parallel_mesh **self_p) {
  if (!self_p || !*self_p) return;
  parallel_mesh *m = *self_p;
  for (int g = 0; g < PARALLEL_GROUP_COUNT; g++) {
    parallel_comm_destroy(&m->groups[g]);
    free(m->members[g]);
  }
  free(m);
  *self_p = NULL;
}

parallel_comm *parallel_mesh_group(const parallel_mesh *m, parallel_group g) {
  assert(g >= 0 && g < PARALLEL_GROUP_COUNT);
  return m->groups[g];
}

const parallel_group_comm *parallel_mesh_coll(const parallel_mesh *m, parallel_group g) {
  assert(g >= 0 && g < PARALLEL_GROUP_COUNT);
  return &m->coll[g];
}

int parallel_mesh_set_coll(parallel_mesh *m, parallel_group g, const parallel_group_ops *ops,
                           void *ctx, int rank, int size) {
  assert(g >= 0 && g < PARALLEL_GROUP_COUNT);
  if (!ops || rank != parallel_comm_rank(m->groups[g]) || size != m->sizes[g])
    return wt_fail(WT_EINVAL,
                   "mesh: the %s group is rank %d of %d, but its new back end says rank %d of %d; "
                   "form that back end over this group's communicator (parallel_mesh_group)",
                   parallel_mesh_group_name(g), parallel_comm_rank(m->groups[g]), m->sizes[g], rank,
                   size);
  m->coll[g] = (parallel_group_comm){.ops = ops, .ctx = ctx, .rank = rank, .size = size};
  return WT_OK;
}

int parallel_mesh_members(const parallel_mesh *m, parallel_group g, int *out) {
  assert(g >= 0 && g < PARALLEL_GROUP_COUNT);
  for (int i = 0; i < m->sizes[g]; i++) out[i] = m->members[g][i];
  return m->sizes[g];
}

parallel_mesh_shape parallel_mesh_get_shape(const parallel_mesh *m) {
  return m->shape;
}
parallel_mesh_coord parallel_mesh_get_coord(const parallel_mesh *m) {
  return m->coord;
}
