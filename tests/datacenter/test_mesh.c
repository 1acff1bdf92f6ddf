/* test_mesh — the device mesh on 1, 2, 4 and 8 in-process ranks: every rank's groups hold the
 * right members in the right order (checked by talking over each group, against a hand-written
 * table and against the coordinates the members report), collectives stay inside their group,
 * and shapes that do not fit the world are refused with a message. */
#include "parallel/collectives/collectives.h"
#include "parallel/datacenter/mesh.h"

#include "common/common.h"
#include "common/testing.h"

typedef struct {
  parallel_mesh_shape shape;
} s_case;

/* Axes a group varies along, written out independently of mesh.c: 1 = varies. */
static void s_varies(parallel_group g, parallel_mesh_coord *v) {
  *v = (parallel_mesh_coord){0};
  if (g == PARALLEL_GROUP_TP) v->tp = 1;
  if (g == PARALLEL_GROUP_CP) v->cp = 1;
  if (g == PARALLEL_GROUP_EP) v->ep = 1;
  if (g == PARALLEL_GROUP_DP) v->dp = 1;
  if (g == PARALLEL_GROUP_PP) v->pp = 1;
  if (g == PARALLEL_GROUP_DENSE_GRAD) v->dp = v->cp = v->ep = 1;
  if (g == PARALLEL_GROUP_EXPERT_GRAD) v->dp = v->cp = 1;
}

static int s_expected_size(const parallel_mesh_shape *s, parallel_group g) {
  parallel_mesh_coord v;
  s_varies(g, &v);
  return (v.tp ? s->tp : 1) * (v.cp ? s->cp : 1) * (v.ep ? s->ep : 1) * (v.dp ? s->dp : 1) *
         (v.pp ? s->pp : 1);
}

/* Each member announces (world rank, coordinate) over the group; every member must agree with
 * this rank on the axes the group does not vary along, appear in increasing world-rank order
 * (so group rank order follows the axis), and match parallel_mesh_members. */
static int s_check_group(parallel_comm *world, parallel_mesh *m, parallel_group g) {
  parallel_comm *c = parallel_mesh_group(m, g);
  parallel_mesh_shape s = parallel_mesh_get_shape(m);
  parallel_mesh_coord me = parallel_mesh_get_coord(m), v;
  s_varies(g, &v);
  const char *name = parallel_mesh_group_name(g);
  int n = parallel_comm_size(c);
  if (n != s_expected_size(&s, g))
    return wt_fail(WT_EMISMATCH, "%s group has %d ranks, want %d", name, n, s_expected_size(&s, g));
  int mine[6] = {parallel_comm_rank(world), me.tp, me.cp, me.ep, me.dp, me.pp};
  uint8_t *all = NULL;
  size_t offsets[65];
  WT_CHECK(parallel_allgatherv(c, mine, sizeof mine, 64 * sizeof mine, &all, offsets));
  int members[64];
  int nm = parallel_mesh_members(m, g, members);
  int rc = nm == n ? WT_OK : wt_fail(WT_EMISMATCH, "%s: members() gives %d, size %d", name, nm, n);
  for (int i = 0; i < n && rc == WT_OK; i++) {
    const int *o = (const int *)(all + offsets[i]);
    int agree = (v.tp || o[1] == me.tp) && (v.cp || o[2] == me.cp) && (v.ep || o[3] == me.ep) &&
                (v.dp || o[4] == me.dp) && (v.pp || o[5] == me.pp);
    if (!agree || o[0] != members[i] || (i > 0 && o[0] <= members[i - 1]))
      rc =
          wt_fail(WT_EMISMATCH, "%s group of world rank %d: member %d is world rank %d (listed %d)",
                  name, mine[0], i, o[0], members[i]);
    if (o[0] == mine[0] && i != parallel_comm_rank(c))
      rc = wt_fail(WT_EMISMATCH, "%s: my group rank %d but I sit at %d", name,
                   parallel_comm_rank(c), i);
  }
  free(all);
  return rc;
}

/* A sum over each group must add exactly the members' world ranks: a collective that leaked
 * into another group's messages would add the wrong ranks or hang. */
static int s_check_sums(parallel_comm *world, parallel_mesh *m) {
  for (int g = 0; g < PARALLEL_GROUP_COUNT; g++) {
    int members[64], n = parallel_mesh_members(m, (parallel_group)g, members);
    float x = (float)parallel_comm_rank(world), want = 0;
    for (int i = 0; i < n; i++) want += (float)members[i];
    WT_CHECK(parallel_allreduce(parallel_mesh_group(m, (parallel_group)g), &x, 1, PARALLEL_OP_SUM));
    if (x != want)
      return wt_fail(WT_EMISMATCH, "%s sum on rank %d: %g, want %g",
                     parallel_mesh_group_name((parallel_group)g), parallel_comm_rank(world), x,
                     want);
  }
  return WT_OK;
}

static int s_mesh_fn(parallel_comm *world, void *arg) {
  s_case *k = arg;
  parallel_mesh *m = parallel_mesh_new(world, &k->shape, 1);
  if (!m) return WT_EINVAL;
  int rc = WT_OK;
  parallel_mesh_coord c = parallel_mesh_get_coord(m);
  if (parallel_mesh_rank_of(&k->shape, c) != parallel_comm_rank(world))
    rc =
        wt_fail(WT_EMISMATCH, "coordinate does not map back to rank %d", parallel_comm_rank(world));
  for (int g = 0; g < PARALLEL_GROUP_COUNT && rc == WT_OK; g++)
    rc = s_check_group(world, m, (parallel_group)g);
  if (rc == WT_OK) rc = s_check_sums(world, m);
  if (rc != WT_OK) fprintf(stderr, "rank %d: %s\n", parallel_comm_rank(world), wt_last_error());
  parallel_mesh_destroy(&m);
  return rc;
}

static void s_run(parallel_mesh_shape shape) {
  int n = shape.dp * shape.pp * shape.tp * shape.cp * shape.ep;
  parallel_inproc_group *g = parallel_inproc_group_new(n);
  parallel_inproc_group_set_timeout(g, 20);
  s_case k = {shape};
  int rcs[8];
  int rc = parallel_inproc_run(g, s_mesh_fn, &k, rcs);
  WT_TEST_ASSERT(rc == WT_OK, "mesh dp%d pp%d tp%d cp%d ep%d: %s", shape.dp, shape.pp, shape.tp,
                 shape.cp, shape.ep, wt_last_error());
  parallel_inproc_group_destroy(&g);
}

static void test_shapes(void) {
  const parallel_mesh_shape shapes[] = {
      {1, 1, 1, 1, 1}, {2, 1, 1, 1, 1}, {1, 2, 1, 1, 1}, {1, 1, 2, 1, 1}, {1, 1, 1, 2, 1},
      {1, 1, 1, 1, 2}, {1, 1, 4, 1, 1}, {2, 1, 2, 1, 1}, {1, 1, 2, 2, 1}, {2, 2, 1, 1, 1},
      {1, 1, 2, 1, 2}, {2, 1, 2, 2, 1}, {2, 2, 2, 1, 1}, {2, 1, 2, 1, 2}, {1, 2, 2, 2, 1},
      {2, 1, 1, 2, 2}, {8, 1, 1, 1, 1}, {1, 1, 8, 1, 1}};
  for (size_t i = 0; i < WT_ARRAY_LEN(shapes); i++) s_run(shapes[i]);
}

/* Hand-written: 8 ranks as tp 2 × cp 2 × dp 2 — rank 5 is (tp 1, cp 0, dp 1). */
typedef struct {
  parallel_group g;
  int n, want[4];
} s_row;

static int s_table_fn(parallel_comm *world, void *arg) {
  (void)arg;
  parallel_mesh_shape s = {.dp = 2, .pp = 1, .tp = 2, .cp = 2, .ep = 1};
  parallel_mesh *m = parallel_mesh_new(world, &s, 10);
  if (!m) return WT_EINVAL;
  int rc = WT_OK;
  if (parallel_comm_rank(world) == 5) {
    static const s_row rows[] = {{PARALLEL_GROUP_TP, 2, {4, 5}},
                                 {PARALLEL_GROUP_CP, 2, {5, 7}},
                                 {PARALLEL_GROUP_DP, 2, {1, 5}},
                                 {PARALLEL_GROUP_EP, 1, {5}},
                                 {PARALLEL_GROUP_PP, 1, {5}},
                                 {PARALLEL_GROUP_DENSE_GRAD, 4, {1, 3, 5, 7}},
                                 {PARALLEL_GROUP_EXPERT_GRAD, 4, {1, 3, 5, 7}}};
    for (size_t i = 0; i < WT_ARRAY_LEN(rows); i++) {
      int got[8], n = parallel_mesh_members(m, rows[i].g, got);
      int same = n == rows[i].n;
      for (int j = 0; same && j < n; j++) same = got[j] == rows[i].want[j];
      if (!same)
        rc = wt_fail(WT_EMISMATCH, "%s group of rank 5 differs from the table",
                     parallel_mesh_group_name(rows[i].g));
    }
  }
  parallel_mesh_destroy(&m);
  return rc;
}

static void test_table(void) {
  parallel_inproc_group *g = parallel_inproc_group_new(8);
  int rc = parallel_inproc_run(g, s_table_fn, NULL, NULL);
  WT_TEST_ASSERT(rc == WT_OK, "table: %s", wt_last_error());
  parallel_inproc_group_destroy(&g);
}

static void test_bad_shapes(void) {
  parallel_inproc_group *g = parallel_inproc_group_new(4);
  parallel_comm *c = parallel_inproc_group_comm(g, 0);
  parallel_mesh_shape wrong = {.dp = 2, .pp = 1, .tp = 4, .cp = 1, .ep = 1};
  WT_TEST_ASSERT(parallel_mesh_new(c, &wrong, 1) == NULL, "8-rank shape on 4 ranks accepted");
  WT_TEST_ASSERT(strstr(wt_last_error(), "world has 4"), "message: %s", wt_last_error());
  parallel_mesh_shape zero = {.dp = 0, .pp = 1, .tp = 4, .cp = 1, .ep = 1};
  WT_TEST_ASSERT(parallel_mesh_new(c, &zero, 1) == NULL, "axis 0 accepted");
  WT_TEST_ASSERT(strstr(wt_last_error(), ">= 1"), "message: %s", wt_last_error());
  parallel_mesh_shape ok = {.dp = 1, .pp = 1, .tp = 4, .cp = 1, .ep = 1};
  WT_TEST_ASSERT(parallel_mesh_new(c, &ok, 60) == NULL, "ids beyond 63 accepted");
  parallel_inproc_group_destroy(&g);
}

int main(void) {
  test_shapes();
  test_table();
  test_bad_shapes();
  return wt_test_failures ? 1 : 0;
}
