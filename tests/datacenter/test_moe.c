/* test_moe — the Mixture-of-Experts layer (parallel/datacenter/moe.h).
 *
 * 1. The one-device layer (EP 1) against a brute-force forward written here from the definition
 *    (softmax router, top-k, capacity in GShard order, GPT-2 MLP experts), and its gradients
 *    against central finite differences of L = Σ y·dy + aux_weight·aux (aux_weight 1, so that
 *    a wrong aux gradient shows above the tolerance).
 * 2. EP e = 2, 4 with E = 4 and 8 experts, k = 2: each rank's outputs, input gradient, aux loss,
 *    dropped count, per-expert load and router gradient equal the one-device layer run on that
 *    rank's tokens, and each rank's expert gradients equal the one-device ones summed over all
 *    ranks' batches — with a loose capacity (nothing dropped) and a tight one (tokens dropped).
 *    Bytes sent equal 4·(P−1)·(E/P)·cap·C·4.
 * 3. A rank that passes another token count than its peers is refused with a message.
 * Tolerances: EP vs one device atol 1e-5 + rtol 1e-4 (the same kernels on the same rows, but
 * padded expert batches of other sizes may sum in another order); brute force 1e-5 + 1e-4;
 * finite differences (float32, step 1e-2) 2e-3 + 2e-2·|ref|. */
#include "kernels/kernels.h"
#include "parallel/datacenter/mesh.h"
#include "parallel/datacenter/moe.h"

#include "common/common.h"
#include "common/testing.h"

#include <math.h>

enum { C = 8, N = 12, K = 2, EMAX = 8, PMAX = 4 };

typedef struct {
  parallel_moe_config cfg;
  float router[C * EMAX];
  float experts[EMAX][C * 4 * C + 4 * C + 4 * C * C + C]; /* fc_w, fc_b, proj_w, proj_b */
  float x[PMAX][N * C], dy[PMAX][N * C];
  /* the one-device results per rank's batch */
  float y[PMAX][N * C], dx[PMAX][N * C], d_router[PMAX][C * EMAX], aux[PMAX];
  int dropped[PMAX], kept[PMAX][EMAX];
  float d_experts[EMAX][C * 4 * C + 4 * C + 4 * C * C + C]; /* summed over batches */
} s_case;

static uint64_t s_rng;
static float s_uniform(void) { /* xorshift64*, in [-1, 1) */
  s_rng ^= s_rng >> 12, s_rng ^= s_rng << 25, s_rng ^= s_rng >> 27;
  return (float)((double)((s_rng * 2685821657736338717ull) >> 40) / (double)(1ull << 24)) * 2 - 1;
}

static size_t s_off(parallel_moe_tensor i) {
  static const size_t off[] = {0, C * 4 * C, C * 4 * C + 4 * C, C * 4 * C + 4 * C + 4 * C * C};
  return off[i];
}

/* Loads the router and this layer's experts from the case. */
static void s_load(parallel_moe *m, const s_case *k) {
  memcpy(parallel_moe_router(m, NULL), k->router, sizeof(float) * C * k->cfg.experts);
  int first, count;
  parallel_moe_experts(m, &first, &count);
  for (int le = 0; le < count; le++)
    for (int i = 0; i < PARALLEL_MOE_TENSORS; i++) {
      size_t n;
      float *p = parallel_moe_expert(m, le, (parallel_moe_tensor)i, &n);
      memcpy(p, k->experts[first + le] + s_off((parallel_moe_tensor)i), sizeof(float) * n);
    }
}

/* ---- 1. brute force and finite differences -------------------------------------------------- */

static float s_gelu(float x) {
  return 0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x)));
}

/* y for x from the definition; returns the dropped count. */
static int s_brute(const s_case *k, const float *x, float *y) {
  int E = k->cfg.experts, cap = (int)ceil((double)k->cfg.capacity_factor * N * K / E), dropped = 0;
  if (cap < 1) cap = 1;
  float probs[N][EMAX];
  int choice[N][K], used[EMAX] = {0};
  for (int n = 0; n < N; n++) {
    float mx = -INFINITY, s = 0;
    for (int e = 0; e < E; e++) {
      float l = 0;
      for (int c = 0; c < C; c++) l += x[n * C + c] * k->router[c * E + e];
      probs[n][e] = l, mx = fmaxf(mx, l);
    }
    for (int e = 0; e < E; e++) s += probs[n][e] = expf(probs[n][e] - mx);
    for (int e = 0; e < E; e++) probs[n][e] /= s;
    for (int j = 0; j < K; j++) {
      int best = -1;
      for (int e = 0; e < E; e++)
        if ((j == 0 || e != choice[n][0]) && (best < 0 || probs[n][e] > probs[n][best])) best = e;
      choice[n][j] = best;
    }
  }
  memset(y, 0, sizeof(float) * N * C);
  for (int j = 0; j < K; j++)
    for (int n = 0; n < N; n++) {
      int e = choice[n][j];
      if (used[e] >= cap) {
        dropped++;
        continue;
      }
      used[e]++;
      const float *w = k->experts[e];
      float hid[4 * C];
      for (int o = 0; o < 4 * C; o++) {
        float s = w[s_off(PARALLEL_MOE_FC_B) + o];
        for (int c = 0; c < C; c++) s += x[n * C + c] * w[c * 4 * C + o];
        hid[o] = s_gelu(s);
      }
      for (int c = 0; c < C; c++) {
        float s = w[s_off(PARALLEL_MOE_PROJ_B) + c];
        for (int o = 0; o < 4 * C; o++) s += hid[o] * w[s_off(PARALLEL_MOE_PROJ_W) + o * C + c];
        y[n * C + c] += probs[n][e] * s;
      }
    }
  return dropped;
}

/* L = Σ y·dy + aux_weight·aux of the one-device layer. */
static double s_objective(parallel_moe *m, const s_case *k) {
  float y[N * C];
  WT_TEST_REQUIRE(parallel_moe_forward(m, k->x[0], y, N) == WT_OK, "%s", wt_last_error());
  double L = k->cfg.aux_weight * (double)parallel_moe_aux_loss(m);
  for (int i = 0; i < N * C; i++) L += (double)y[i] * k->dy[0][i];
  return L;
}

static void s_fd(parallel_moe *m, s_case *k, float *p, float g, const char *what) {
  const float h = 1e-2f;
  float keep = *p;
  *p = keep + h;
  s_load(m, k);
  double up = s_objective(m, k);
  *p = keep - h;
  s_load(m, k);
  double down = s_objective(m, k);
  *p = keep;
  s_load(m, k);
  double fd = (up - down) / (2 * h);
  WT_TEST_CLOSE(g, fd, 2e-3, 2e-2, what);
}

static void test_one_device(s_case *k) {
  parallel_inproc_group *g = parallel_inproc_group_new(1);
  parallel_comm *world = parallel_inproc_group_comm(g, 0);
  parallel_mesh_shape shape = {1, 1, 1, 1, 1};
  parallel_mesh *mesh = parallel_mesh_new(world, &shape, 1);
  parallel_moe *m = parallel_moe_new(mesh, kernels_ref(), C, &k->cfg, N);
  WT_TEST_REQUIRE(m, "%s", wt_last_error());
  s_load(m, k);
  float y[N * C], want[N * C], dx[N * C] = {0};
  WT_TEST_REQUIRE(parallel_moe_forward(m, k->x[0], y, N) == WT_OK, "%s", wt_last_error());
  int dropped = s_brute(k, k->x[0], want);
  wt_test_allclose(y, want, N * C, 1e-5, 1e-4, "MoE output vs brute force");
  WT_TEST_ASSERT(parallel_moe_dropped(m) == dropped, "dropped %d, brute force %d",
                 parallel_moe_dropped(m), dropped);
  parallel_moe_zero_grad(m);
  WT_TEST_REQUIRE(parallel_moe_backward(m, k->dy[0], dx) == WT_OK, "%s", wt_last_error());
  float d_router[C * EMAX], d_fc[16], d_proj_b[C];
  memcpy(d_router, parallel_moe_router_grad(m, NULL), sizeof(float) * C * k->cfg.experts);
  /* Check expert 1's gradients (a popular one with these seeds, see the load printed below). */
  memcpy(d_fc, parallel_moe_expert_grad(m, 1, PARALLEL_MOE_FC_W, NULL), sizeof d_fc);
  memcpy(d_proj_b, parallel_moe_expert_grad(m, 1, PARALLEL_MOE_PROJ_B, NULL), sizeof d_proj_b);
  for (int i = 0; i < 6; i++)
    s_fd(m, k, &k->router[i * 5 % (C * k->cfg.experts)], d_router[i * 5 % (C * k->cfg.experts)],
         "d router");
  for (int i = 0; i < 4; i++) s_fd(m, k, &k->experts[1][i * 3], d_fc[i * 3], "d expert fc_w");
  for (int i = 0; i < 3; i++)
    s_fd(m, k, &k->experts[1][s_off(PARALLEL_MOE_PROJ_B) + i], d_proj_b[i], "d expert proj_b");
  for (int i = 0; i < 4; i++) s_fd(m, k, &k->x[0][i * 7], dx[i * 7], "d x");
  parallel_moe_destroy(&m);
  parallel_mesh_destroy(&mesh);
  parallel_inproc_group_destroy(&g);
}

/* ---- 2. expert parallel vs one device ------------------------------------------------------ */

/* The one-device layer on each of P batches: outputs, gradients and statistics per batch, expert
 * gradients summed over the batches. */
static void s_reference(s_case *k, int P) {
  parallel_inproc_group *g = parallel_inproc_group_new(1);
  parallel_mesh_shape shape = {1, 1, 1, 1, 1};
  parallel_mesh *mesh = parallel_mesh_new(parallel_inproc_group_comm(g, 0), &shape, 1);
  parallel_moe *m = parallel_moe_new(mesh, kernels_ref(), C, &k->cfg, N);
  WT_TEST_REQUIRE(m, "%s", wt_last_error());
  s_load(m, k);
  int E = k->cfg.experts;
  memset(k->d_experts, 0, sizeof k->d_experts);
  for (int r = 0; r < P; r++) {
    parallel_moe_zero_grad(m);
    memset(k->dx[r], 0, sizeof k->dx[r]);
    WT_TEST_REQUIRE(parallel_moe_forward(m, k->x[r], k->y[r], N) == WT_OK, "%s", wt_last_error());
    WT_TEST_REQUIRE(parallel_moe_backward(m, k->dy[r], k->dx[r]) == WT_OK, "%s", wt_last_error());
    k->aux[r] = parallel_moe_aux_loss(m), k->dropped[r] = parallel_moe_dropped(m);
    parallel_moe_load(m, k->kept[r]);
    memcpy(k->d_router[r], parallel_moe_router_grad(m, NULL), sizeof(float) * C * E);
    for (int e = 0; e < E; e++) {
      const float *d = parallel_moe_expert_grad(m, e, 0, NULL);
      for (size_t i = 0; i < WT_ARRAY_LEN(k->d_experts[e]); i++) k->d_experts[e][i] += d[i];
    }
  }
  parallel_moe_destroy(&m);
  parallel_mesh_destroy(&mesh);
  parallel_inproc_group_destroy(&g);
}

static int s_close(const float *got, const float *want, size_t n, const char *what, int r) {
  if (!wt_test_allclose(got, want, n, 1e-5, 1e-4, what))
    return wt_fail(WT_EMISMATCH, "rank %d: %s differs from the one-device layer", r, what);
  return WT_OK;
}

static int s_rank_fn(parallel_comm *world, void *arg) {
  const s_case *k = arg;
  int P = parallel_comm_size(world), r = parallel_comm_rank(world), E = k->cfg.experts, rc = WT_OK;
  parallel_mesh_shape shape = {.dp = 1, .pp = 1, .tp = 1, .cp = 1, .ep = P};
  parallel_mesh *mesh = parallel_mesh_new(world, &shape, 1);
  parallel_moe *m = mesh ? parallel_moe_new(mesh, kernels_ref(), C, &k->cfg, N) : NULL;
  if (!m) {
    parallel_mesh_destroy(&mesh);
    return WT_EINVAL;
  }
  s_load(m, k);
  parallel_moe_zero_grad(m);
  float y[N * C], dx[N * C] = {0};
  int kept[EMAX], first, count;
  parallel_comm *ep = parallel_mesh_group(mesh, PARALLEL_GROUP_EP);
  parallel_comm_reset_counters(ep);
  WT_CHECK_GOTO(parallel_moe_forward(m, k->x[r], y, N), rc, done);
  WT_CHECK_GOTO(parallel_moe_backward(m, k->dy[r], dx), rc, done);
  WT_CHECK_GOTO(s_close(y, k->y[r], N * C, "output", r), rc, done);
  WT_CHECK_GOTO(s_close(dx, k->dx[r], N * C, "input gradient", r), rc, done);
  WT_CHECK_GOTO(s_close(parallel_moe_router_grad(m, NULL), k->d_router[r], (size_t)C * E,
                        "router gradient", r),
                rc, done);
  parallel_moe_experts(m, &first, &count);
  for (int le = 0; le < count; le++)
    WT_CHECK_GOTO(s_close(parallel_moe_expert_grad(m, le, 0, NULL), k->d_experts[first + le],
                          WT_ARRAY_LEN(k->d_experts[0]), "expert gradients", r),
                  rc, done);
  parallel_moe_load(m, kept);
  int same = parallel_moe_dropped(m) == k->dropped[r] &&
             fabsf(parallel_moe_aux_loss(m) - k->aux[r]) <= 1e-5f * (1 + k->aux[r]);
  for (int e = 0; e < E; e++) same &= kept[e] == k->kept[r][e];
  if (!same) {
    rc = wt_fail(WT_EMISMATCH, "rank %d: dropped %d (one device %d), aux or load differ", r,
                 parallel_moe_dropped(m), k->dropped[r]);
    goto done;
  }
  int cap = (int)ceil((double)k->cfg.capacity_factor * N * K / E);
  uint64_t want = 4ull * (P - 1) * (E / P) * (cap < 1 ? 1 : cap) * C * sizeof(float);
  if (parallel_comm_bytes_sent(ep) != want)
    rc = wt_fail(WT_EMISMATCH, "rank %d sent %llu bytes, formula %llu", r,
                 (unsigned long long)parallel_comm_bytes_sent(ep), (unsigned long long)want);
  if (rc == WT_OK && r == 0)
    printf("ep %d, %d experts, capacity factor %.2f: rank 0 dropped %d of %d choices, load", P, E,
           k->cfg.capacity_factor, parallel_moe_dropped(m), N * K);
  for (int e = 0; rc == WT_OK && r == 0 && e < E; e++) printf(" %d", kept[e]);
  if (rc == WT_OK && r == 0) printf(", %llu bytes per rank\n", (unsigned long long)want);
done:
  if (rc != WT_OK) fprintf(stderr, "rank %d: %s\n", r, wt_last_error());
  parallel_moe_destroy(&m);
  parallel_mesh_destroy(&mesh);
  return rc;
}

static void s_fill(s_case *k, int E, float cf, uint64_t seed) {
  memset(k, 0, sizeof *k);
  k->cfg =
      (parallel_moe_config){.experts = E, .top_k = K, .capacity_factor = cf, .aux_weight = 1.0f};
  s_rng = seed;
  for (int i = 0; i < C * E; i++) k->router[i] = 1.5f * s_uniform(); /* decisive routing */
  for (int e = 0; e < E; e++)
    for (size_t i = 0; i < WT_ARRAY_LEN(k->experts[e]); i++) k->experts[e][i] = 0.3f * s_uniform();
  for (int r = 0; r < PMAX; r++)
    for (int i = 0; i < N * C; i++) k->x[r][i] = s_uniform(), k->dy[r][i] = s_uniform();
}

static void test_ep(int P, int E, float cf, int expect_drops) {
  static s_case k;
  s_fill(&k, E, cf, 0x1234567ull + (uint64_t)E);
  s_reference(&k, P);
  int drops = 0;
  for (int r = 0; r < P; r++) drops += k.dropped[r];
  WT_TEST_ASSERT(expect_drops ? drops > 0 : drops == 0, "E %d cf %.2f: %d drops, expected %s", E,
                 cf, drops, expect_drops ? "some" : "none");
  parallel_inproc_group *g = parallel_inproc_group_new(P);
  parallel_inproc_group_set_timeout(g, 30);
  WT_TEST_ASSERT(parallel_inproc_run(g, s_rank_fn, &k, NULL) == WT_OK,
                 "ep %d E %d cf %.2f failed (rank messages above)", P, E, cf);
  parallel_inproc_group_destroy(&g);
}

/* A rank that passes another token count than its peers (so another capacity) is refused with a
 * message on the rank that receives the odd-sized block, and nobody hangs. */
static int s_mismatch_fn(parallel_comm *world, void *arg) {
  const s_case *k = arg;
  int r = parallel_comm_rank(world);
  parallel_mesh_shape shape = {.dp = 1, .pp = 1, .tp = 1, .cp = 1, .ep = parallel_comm_size(world)};
  parallel_mesh *mesh = parallel_mesh_new(world, &shape, 1);
  parallel_moe *m = parallel_moe_new(mesh, kernels_ref(), C, &k->cfg, N);
  float y[N * C];
  int rc = parallel_moe_forward(m, k->x[r], y, r == 1 ? N / 2 : N);
  int ok = rc == WT_ECORRUPT ? strstr(wt_last_error(), "same number of tokens") != NULL
                             : rc == WT_EIO || rc == WT_OK;
  parallel_moe_destroy(&m);
  parallel_mesh_destroy(&mesh);
  return ok ? rc : WT_EINVAL; /* the run reports the first nonzero: ECORRUPT expected */
}

static void test_mismatch(void) {
  static s_case k;
  s_fill(&k, 4, 4.0f, 5);
  parallel_inproc_group *g = parallel_inproc_group_new(2);
  parallel_inproc_group_set_timeout(g, 10);
  int rcs[2];
  parallel_inproc_run(g, s_mismatch_fn, &k, rcs);
  WT_TEST_ASSERT(rcs[0] == WT_ECORRUPT || rcs[1] == WT_ECORRUPT,
                 "a mismatched token count was not refused: rcs %d %d", rcs[0], rcs[1]);
  WT_TEST_ASSERT(rcs[0] != WT_EINVAL && rcs[1] != WT_EINVAL, "wrong error: rcs %d %d", rcs[0],
                 rcs[1]);
  parallel_inproc_group_destroy(&g);
}

int main(void) {
  test_mismatch();
  static s_case k;
  s_fill(&k, 4, 0.75f, 99); /* tight: the brute force must drop the same tokens */
  test_one_device(&k);
  s_fill(&k, 8, 4.0f, 7);
  test_one_device(&k);
  for (int P = 2; P <= 4; P *= 2) {
    test_ep(P, 4, 4.0f, 0); /* capacity N·k: nothing can drop */
    test_ep(P, 8, 4.0f, 0);
    test_ep(P, 4, 0.5f, 1); /* tight capacity: drops, and the same ones */
    test_ep(P, 8, 0.5f, 1);
  }
  return wt_test_failures ? 1 : 0;
}
