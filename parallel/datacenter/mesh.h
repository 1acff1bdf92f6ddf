/* mesh — a device mesh: the world's ranks laid out as dp × pp × tp × cp × ep, with one named
 * sub-communicator per kind of group, so a layer asks for "my tensor-parallel group" and can
 * never run its collective on the data-parallel ranks by mistake.
 *
 * Layout (Megatron-LM's order, tp fastest so a tensor-parallel group sits on neighbouring ranks,
 * i.e. on one NVLink island when ranks are numbered by GPU):
 *
 *   world rank = tp + TP·(cp + CP·(ep + EP·(dp + DP·pp)))
 *
 * Groups (each rank belongs to exactly one group of each kind; a group holds the ranks whose
 * coordinates equal this rank's on every axis but the group's own):
 *   PARALLEL_GROUP_TP           axis tp: ranks that split one layer's matrices
 *   PARALLEL_GROUP_CP           axis cp: ranks that split one sequence (ring attention)
 *   PARALLEL_GROUP_EP           axis ep: ranks that split the experts of a MoE layer
 *   PARALLEL_GROUP_DP           axis dp: plain data-parallel replicas
 *   PARALLEL_GROUP_PP           axis pp: the stages of one pipeline
 *   PARALLEL_GROUP_DENSE_GRAD   axes dp, cp, ep: ranks holding the same dense weights, over which
 *                               dense gradients are averaged (CP and EP ranks see other tokens)
 *   PARALLEL_GROUP_EXPERT_GRAD  axes dp, cp: ranks holding the same experts
 * Member order inside a group is by world rank, so group rank order follows the axis order.
 *
 * Sub-communicators are made with parallel_comm_split on the world communicator; the mesh uses
 * split ids id_base .. id_base + PARALLEL_GROUP_COUNT - 1, which must not collide with other
 * splits of the same world. The world must outlive the mesh.
 *
 *   parallel_mesh_shape s = {.dp = 2, .pp = 1, .tp = 2, .cp = 2, .ep = 1};
 *   parallel_mesh *m = parallel_mesh_new(world, &s, 1);
 *   parallel_comm *tp = parallel_mesh_group(m, PARALLEL_GROUP_TP);
 *   parallel_mesh_destroy(&m);
 */
#ifndef WT_PARALLEL_MESH_H
#define WT_PARALLEL_MESH_H

#include "parallel/transport/comm.h"
#include "parallel/datacenter/group.h"

typedef struct {
  int dp, pp, tp, cp, ep; /* each >= 1; the product must equal the world size */
} parallel_mesh_shape;

typedef enum {
  PARALLEL_GROUP_TP = 0,
  PARALLEL_GROUP_CP,
  PARALLEL_GROUP_EP,
  PARALLEL_GROUP_DP,
  PARALLEL_GROUP_PP,
  PARALLEL_GROUP_DENSE_GRAD,
  PARALLEL_GROUP_EXPERT_GRAD,
  PARALLEL_GROUP_COUNT
} parallel_group;

/* A rank's coordinate on each axis. */
typedef struct {
  int dp, pp, tp, cp, ep;
} parallel_mesh_coord;

typedef struct parallel_mesh parallel_mesh;

/* Builds this rank's view of the mesh: every rank of `world` calls it with the same shape and
 * id_base (1 .. PARALLEL_SPLIT_MAX_ID - PARALLEL_GROUP_COUNT + 1). Creating it sends nothing.
 * Returns NULL with wt_last_error() set if an axis is < 1, the product differs from the world
 * size, the id range does not fit, or world is itself a sub-communicator. */
parallel_mesh *parallel_mesh_new(parallel_comm *world, const parallel_mesh_shape *shape,
                                 int id_base);
void parallel_mesh_destroy(parallel_mesh **self_p);

/* The communicator of this rank's group of kind g (owned by the mesh). */
parallel_comm *parallel_mesh_group(const parallel_mesh *m, parallel_group g);

/* The back end the parallel layers call for group g (group.h): by default the host ring on
 * parallel_mesh_group(m, g). The pointer stays valid for the mesh's life and follows
 * parallel_mesh_set_coll. */
const parallel_group_comm *parallel_mesh_coll(const parallel_mesh *m, parallel_group g);

/* Makes group g's layers call `ops` on ctx (e.g. parallel_nccl_group_ops() on an NCCL
 * communicator formed over parallel_mesh_group(m, g)); rank and size must be this rank's place in
 * the group (WT_EINVAL otherwise, nothing changed). Set it before making the layers of the
 * group: they allocate their buffers from the table. ctx must outlive the mesh's use. */
int parallel_mesh_set_coll(parallel_mesh *m, parallel_group g, const parallel_group_ops *ops,
                           void *ctx, int rank, int size);

/* The name of a group kind ("tp", "dense_grad", ...), for logs. */
const char *parallel_mesh_group_name(parallel_group g);

/* Writes the world ranks of this rank's group g, in group-rank order, to out (capacity at least
 * the group's size) and returns the count. */
int parallel_mesh_members(const parallel_mesh *m, parallel_group g, int *out);

parallel_mesh_shape parallel_mesh_get_shape(const parallel_mesh *m);
parallel_mesh_coord parallel_mesh_get_coord(const parallel_mesh *m);

/* Pure layout arithmetic (no mesh needed): the coordinate of a world rank and back. */
parallel_mesh_coord parallel_mesh_coord_of(const parallel_mesh_shape *s, int rank);
int parallel_mesh_rank_of(const parallel_mesh_shape *s, parallel_mesh_coord c);

#endif
