/* test_diloco — DiLoCo's outer step on in-process replicas:
 *  - H = 1, plain SGD inner steps, outer lr 1, no momentum == synchronous data parallelism
 *    (average the gradients, then step): bitwise when every intermediate is exactly
 *    representable (checked), within a few ulps of |θ| per step on general data;
 *  - the outer Nesterov step against values computed by hand;
 *  - compressed pseudo-gradients (int8, sign with error feedback; top-k sparse) keep replicas
 *    identical and still train the toy problem;
 *  - config validation.
 * The toy problem: least squares, replica i minimises 1/(2B)·|A_i θ − b_i|² on its own rows. */
#include "parallel/runtime/diloco.h"

#include "parallel/collectives/collectives.h"
#include "parallel/transport/comm.h"
#include "common/common.h"
#include "common/rng.h"
#include "common/testing.h"

#include <float.h>
#include <stdlib.h>

#define D 8 /* parameters */
#define B 4 /* rows per replica */
#define MAXW 4

typedef struct {
  int world, steps, H;
  float eta; /* inner SGD learning rate */
  float A[MAXW][B][D], b[MAXW][B];
  float theta0[D];
  float theta[MAXW][D]; /* result per replica */
  diloco_config cfg;
  int rcs[MAXW];
} s_toy;

/* g = A^T (A θ − b) / B, in a fixed order (float). */
static void s_grad(const s_toy *t, int r, const float *theta, float *g) {
  float res[B];
  for (int i = 0; i < B; i++) {
    float s = 0;
    for (int k = 0; k < D; k++) s += t->A[r][i][k] * theta[k];
    res[i] = s - t->b[r][i];
  }
  for (int k = 0; k < D; k++) {
    float s = 0;
    for (int i = 0; i < B; i++) s += t->A[r][i][k] * res[i];
    g[k] = s / (float)B;
  }
}

static double s_loss(const s_toy *t, const float *theta) {
  double l = 0;
  for (int r = 0; r < t->world; r++)
    for (int i = 0; i < B; i++) {
      double s = -t->b[r][i];
      for (int k = 0; k < D; k++) s += (double)t->A[r][i][k] * theta[k];
      l += s * s / (2.0 * B * t->world);
    }
  return l;
}

/* Synchronous data parallelism: average the gradients, every replica takes the same step. */
static int s_dp_fn(parallel_comm *c, void *arg) {
  s_toy *t = arg;
  int r = parallel_comm_rank(c);
  float *theta = t->theta[r], g[D];
  memcpy(theta, t->theta0, sizeof t->theta0);
  for (int s = 0; s < t->steps; s++) {
    s_grad(t, r, theta, g);
    WT_CHECK(parallel_allreduce(c, g, D, PARALLEL_OP_AVG));
    for (int k = 0; k < D; k++) theta[k] -= t->eta * g[k];
  }
  return WT_OK;
}

/* DiLoCo: H local SGD steps, then the outer step. */
static int s_diloco_fn(parallel_comm *c, void *arg) {
  s_toy *t = arg;
  int r = parallel_comm_rank(c), rc = WT_OK;
  float *theta = t->theta[r], g[D];
  memcpy(theta, t->theta0, sizeof t->theta0);
  diloco *d = diloco_new(D, &t->cfg);
  if (!d) return WT_EINVAL;
  diloco_init(d, theta);
  for (int s = 0; s < t->steps && rc == WT_OK; s++) {
    for (int h = 0; h < t->H; h++) {
      s_grad(t, r, theta, g);
      for (int k = 0; k < D; k++) theta[k] -= t->eta * g[k];
    }
    rc = diloco_outer_step(d, c, theta);
  }
  if (rc == WT_OK && diloco_step_count(d) != t->steps) rc = WT_EINVAL;
  diloco_destroy(&d);
  t->rcs[r] = rc;
  return rc;
}

static void s_toy_random(s_toy *t, int world, uint64_t seed) {
  wt_rng rng;
  wt_rng_seed(&rng, seed);
  t->world = world;
  for (int r = 0; r < world; r++)
    for (int i = 0; i < B; i++) {
      for (int k = 0; k < D; k++) t->A[r][i][k] = (float)wt_rng_normal(&rng);
      t->b[r][i] = (float)wt_rng_normal(&rng);
    }
  for (int k = 0; k < D; k++) t->theta0[k] = (float)wt_rng_normal(&rng);
}

static s_toy *s_toy_new(void) {
  s_toy *t = wt_xcalloc(1, sizeof *t);
  t->cfg = diloco_config_default();
  t->cfg.lr = 1.0f;
  t->cfg.momentum = 0.0f;
  t->H = 1;
  return t;
}

static void s_run(s_toy *t, parallel_rank_fn fn) {
  parallel_inproc_group *g = parallel_inproc_group_new(t->world);
  int rc = parallel_inproc_run(g, fn, t, NULL);
  WT_TEST_ASSERT(rc == WT_OK, "run failed: %s", wt_status_name(rc));
  parallel_inproc_group_destroy(&g);
  for (int r = 1; r < t->world; r++)
    WT_TEST_ASSERT(!memcmp(t->theta[r], t->theta[0], sizeof t->theta[0]), "replica %d differs", r);
}

/* Small integers, B and world powers of two, eta = 1/16: every product, sum, /B, /world and
 * θ − η·g in two steps is an exact float (the test checks it against double arithmetic), so
 * DiLoCo(H=1, lr 1, μ 0) and data parallelism must agree BITWISE: θ − Δ̄ with Δ_i = θ − θ_i
 * exact equals θ − η·mean(g_i) exactly. */
static void test_h1_bitwise(void) {
  s_toy *dp = s_toy_new(), *dl = s_toy_new();
  wt_rng rng;
  wt_rng_seed(&rng, 31);
  dp->world = 4;
  for (int r = 0; r < dp->world; r++)
    for (int i = 0; i < B; i++) {
      for (int k = 0; k < D; k++) dp->A[r][i][k] = (float)((int)wt_rng_below(&rng, 3) - 1);
      dp->b[r][i] = (float)((int)wt_rng_below(&rng, 9) - 4);
    }
  for (int k = 0; k < D; k++) dp->theta0[k] = (float)((int)wt_rng_below(&rng, 5) - 2);
  dp->steps = 2;
  dp->eta = 1.0f / 16;
  memcpy(dl->A, dp->A, sizeof dp->A);
  memcpy(dl->b, dp->b, sizeof dp->b);
  memcpy(dl->theta0, dp->theta0, sizeof dp->theta0);
  dl->world = dp->world, dl->steps = dp->steps, dl->eta = dp->eta;
  s_run(dp, s_dp_fn);
  s_run(dl, s_diloco_fn);
  /* the premise: the same steps in double give the same numbers (so nothing was rounded) */
  double th[D];
  for (int k = 0; k < D; k++) th[k] = dp->theta0[k];
  for (int s = 0; s < dp->steps; s++) {
    double gsum[D] = {0};
    for (int r = 0; r < dp->world; r++)
      for (int k = 0; k < D; k++) {
        double gk = 0;
        for (int i = 0; i < B; i++) {
          double res = -dp->b[r][i];
          for (int q = 0; q < D; q++) res += dp->A[r][i][q] * th[q];
          gk += dp->A[r][i][k] * res;
        }
        gsum[k] += gk / B;
      }
    for (int k = 0; k < D; k++) th[k] -= dp->eta * gsum[k] / dp->world;
  }
  for (int k = 0; k < D; k++)
    WT_TEST_ASSERT(th[k] == dp->theta[0][k], "premise: element %d rounded (%.17g vs %.9g)", k,
                   th[k], dp->theta[0][k]);
  WT_TEST_ASSERT(!memcmp(dp->theta[0], dl->theta[0], sizeof dp->theta[0]),
                 "H=1 DiLoCo differs from data parallelism on exact data");
  free(dp);
  free(dl);
}

/* General floats, world 1..4 (3 is not a power of two), 20 steps. Per step the two differ by
 * the rounding of θ_i = θ − η g_i (half an ulp of |θ| per replica, averaged), of the average
 * (an ulp of |Δ̄|) and of the final subtraction: a few ulps of |θ|. The problem is contractive
 * (η below 2/λ_max), so differences do not amplify: after s steps allow s · 4 ulp(max|θ|). */
static void test_h1_tolerance(void) {
  for (int world = 1; world <= MAXW; world++) {
    s_toy *dp = s_toy_new(), *dl = s_toy_new();
    s_toy_random(dp, world, 40 + (uint64_t)world);
    dp->steps = 20;
    dp->eta = 0.05f;
    *dl = *dp;
    dl->cfg = diloco_config_default();
    dl->cfg.lr = 1.0f;
    dl->cfg.momentum = 0.0f;
    dl->H = 1;
    s_run(dp, s_dp_fn);
    s_run(dl, s_diloco_fn);
    double max_theta = 0;
    for (int k = 0; k < D; k++) max_theta = fmax(max_theta, fabs(dp->theta[0][k]));
    double tol = dp->steps * 4 * FLT_EPSILON * fmax(max_theta, 1.0);
    wt_test_allclose(dl->theta[0], dp->theta[0], D, tol, 0, "H=1 DiLoCo vs data parallel");
    WT_TEST_ASSERT(s_loss(dp, dp->theta[0]) < s_loss(dp, dp->theta0), "world %d: no progress",
                   world);
    free(dp);
    free(dl);
  }
}

/* One parameter, two replicas, two outer rounds, lr 0.7, μ 0.9, Nesterov — by hand:
 *   θ = 1; inner θ_i = 0.5, 0.7 → Δ = 0.5, 0.3, Δ̄ = 0.4; m = 0.4;
 *   θ = 1 − 0.7·(0.4 + 0.9·0.4) = 1 − 0.7·0.76 = 0.468
 *   inner θ_i = θ − 0.2, θ − 0.1 → Δ̄ = 0.15; m = 0.9·0.4 + 0.15 = 0.51;
 *   θ = 0.468 − 0.7·(0.15 + 0.9·0.51) = 0.468 − 0.7·0.609 = 0.0417
 * Heavy-ball (nesterov 0): θ = 1 − 0.7·0.4 = 0.72, then 0.72 − 0.7·0.51 = 0.363. */
typedef struct {
  int nesterov;
  float got[2][2]; /* [rank][round] θ after each round */
  float mom[2];
} s_hand;

static int s_hand_fn(parallel_comm *c, void *arg) {
  s_hand *h = arg;
  int r = parallel_comm_rank(c);
  diloco_config cfg = diloco_config_default();
  cfg.nesterov = h->nesterov;
  diloco *d = diloco_new(1, &cfg);
  float theta = 1.0f;
  diloco_init(d, &theta);
  const float drift[2][2] = {{0.5f, 0.3f}, {0.2f, 0.1f}}; /* [round][rank] */
  for (int round = 0; round < 2; round++) {
    theta -= drift[round][r];
    WT_CHECK(diloco_outer_step(d, c, &theta));
    h->got[r][round] = theta;
  }
  size_t n = 0;
  h->mom[r] = diloco_momentum(d, &n)[0];
  WT_TEST_ASSERT(n == 1 && diloco_theta_outer(d, NULL)[0] == theta, "state accessors");
  diloco_destroy(&d);
  return WT_OK;
}

static void test_nesterov_by_hand(void) {
  const float want[2][2] = {{0.72f, 0.363f}, {0.468f, 0.0417f}}; /* [nesterov][round] */
  for (int nesterov = 0; nesterov < 2; nesterov++) {
    s_hand h = {.nesterov = nesterov};
    parallel_inproc_group *g = parallel_inproc_group_new(2);
    WT_TEST_ASSERT(parallel_inproc_run(g, s_hand_fn, &h, NULL) == WT_OK, "run");
    parallel_inproc_group_destroy(&g);
    for (int round = 0; round < 2; round++)
      for (int r = 0; r < 2; r++)
        WT_TEST_CLOSE(h.got[r][round], want[nesterov][round], 1e-6, 1e-5,
                      nesterov ? "nesterov" : "heavy ball");
    WT_TEST_CLOSE(h.mom[0], 0.51, 1e-6, 1e-5, "momentum buffer");
  }
}

/* Compressed pseudo-gradients: replicas stay bitwise identical and the toy problem still trains
 * (H = 4 local steps, default outer lr 0.7 / Nesterov 0.9). */
static void test_compressed(void) {
  const char *names[] = {"int8", "sign", "topk"};
  for (size_t k = 0; k < WT_ARRAY_LEN(names); k++) {
    compress_params p = compress_params_default();
    p.block = 4;
    p.k_frac = 0.25;
    compress_codec *codec = NULL;
    codec = compress_codec_new(names[k], &p);
    WT_TEST_REQUIRE(codec != NULL, "%s", wt_last_error());
    s_toy *t = s_toy_new(), *plain = s_toy_new();
    s_toy_random(t, 4, 50);
    t->steps = 30;
    t->H = 4;
    t->eta = 0.02f;
    t->cfg = diloco_config_default();
    *plain = *t;
    t->cfg.codec = codec;
    t->cfg.sparse = !strcmp(names[k], "topk");
    parallel_inproc_group *g = parallel_inproc_group_new(t->world);
    int rc = parallel_inproc_run(g, s_diloco_fn, t, NULL);
    parallel_inproc_group_destroy(&g);
    WT_TEST_ASSERT(rc == WT_OK, "%s: %s", names[k], wt_status_name(rc));
    for (int r = 1; r < t->world; r++)
      WT_TEST_ASSERT(!memcmp(t->theta[r], t->theta[0], sizeof t->theta[0]),
                     "%s: replica %d differs", names[k], r);
    s_run(plain, s_diloco_fn);
    double l0 = s_loss(t, t->theta0), l = s_loss(t, t->theta[0]);
    double lp = s_loss(plain, plain->theta[0]);
    printf("  %-5s loss %.4f -> %.4f (uncompressed %.4f)\n", names[k], l0, l, lp);
    WT_TEST_ASSERT(l - lp < 0.5 * (l0 - lp), "%s: compressed DiLoCo did not train", names[k]);
    free(t);
    free(plain);
    compress_codec_destroy(&codec);
  }
}

static void test_config(void) {
  diloco_config c = diloco_config_default();
  WT_TEST_ASSERT(c.lr == 0.7f && c.momentum == 0.9f && c.nesterov == 1, "defaults");
  c.momentum = 1.0f;
  WT_TEST_ASSERT(diloco_new(10, &c) == NULL, "momentum 1 accepted");
  c = diloco_config_default();
  c.lr = NAN;
  WT_TEST_ASSERT(diloco_config_validate(&c) == WT_EINVAL, "NaN lr accepted");
  c = diloco_config_default();
  diloco *d = diloco_new(0, &c);
  WT_TEST_ASSERT(d != NULL && diloco_step_count(d) == 0, "empty model");
  diloco_destroy(&d);
  WT_TEST_ASSERT(d == NULL, "destroy sets NULL");
}

int main(void) {
  test_config();
  test_h1_bitwise();
  test_h1_tolerance();
  test_nesterov_by_hand();
  test_compressed();
  return wt_test_finish("test_diloco");
}
