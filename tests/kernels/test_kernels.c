/* test_kernels — each op of the CPU back ends:
 *   1. the reference backward against central finite differences of the reference forward;
 *   2. the fast "cpu" ops against the "ref" ops on the same random inputs (forward outputs and
 *      every gradient), at a small size and at one big enough to reach sgemm's blocked paths;
 *   3. determinism: the fast ops give bitwise the same result twice;
 *   4. OpenBLAS is loaded in-process with the expected core, leaving the environment as it was;
 *   5. the memory entries of the host tables, the device-name parser and the precision switch.
 *
 * Tolerances (|got - want| <= atol + rtol |want|):
 *   - finite differences: objective L = sum(out * r) in double, step h = 1e-2 on inputs of size
 *     ~1. Truncation error is h^2/6 |f'''| ~ 2e-5; the float outputs carry ~6e-8 relative
 *     rounding each, so over <= 200 outputs the objective is off by ~1e-6 and the quotient by
 *     ~1e-6 / 2h = 5e-5. atol 1e-3, rtol 1e-2 leave a wide margin yet catch any wrong term
 *     (a missing factor or sign is an O(1) error).
 *   - fast vs reference: float sums (sgemm, softmax) against double sums over K <= 256 terms
 *     of size ~1: error ~ K * 6e-8 ~ 2e-5; atol 1e-4, rtol 1e-4.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/common.h"
#include "kernels/cpu/fastmath_internal.h" /* private to kernels/, tested here directly */
#include "kernels/kernels.h"
#include "common/rng.h"
#include "common/testing.h"

#ifdef _OPENMP
#include <omp.h>
#endif

#define FD_H 1e-2
#define FD_ATOL 1e-3
#define FD_RTOL 1e-2
#define FAST_ATOL 1e-4
#define FAST_RTOL 1e-4

static wt_rng g_rng;

static float *s_randn(size_t n, float std) {
  float *a = wt_xmalloc(sizeof(float) * n);
  for (size_t i = 0; i < n; i++) a[i] = (float)(std * wt_rng_normal(&g_rng));
  return a;
}

static float *s_zeros(size_t n) {
  return wt_xcalloc(n, sizeof(float));
}

static float *s_copy(const float *a, size_t n) {
  float *b = wt_xmalloc(sizeof(float) * n);
  memcpy(b, a, sizeof(float) * n);
  return b;
}

static double s_dot(const float *a, const float *r, size_t n) {
  double acc = 0;
  for (size_t i = 0; i < n; i++) acc += (double)a[i] * r[i];
  return acc;
}

/* Central differences of objective() w.r.t. up to 12 random entries of x, against grad. */
typedef double (*objective_fn)(void *ctx);
static void s_check_fd(const char *what, objective_fn objective, void *ctx, float *x, size_t n,
                       const float *grad) {
  for (int k = 0; k < 12; k++) {
    size_t i = wt_rng_below(&g_rng, n);
    float saved = x[i];
    float xp = (float)(saved + FD_H), xm = (float)(saved - FD_H);
    x[i] = xp;
    double lp = objective(ctx);
    x[i] = xm;
    double lm = objective(ctx);
    x[i] = saved;
    double fd = (lp - lm) / ((double)xp - (double)xm);
    char label[96];
    snprintf(label, sizeof label, "%s[%zu] vs finite difference", what, i);
    WT_TEST_CLOSE(grad[i], fd, FD_ATOL, FD_RTOL, label);
  }
}

/* ---- encoder --------------------------------------------------------------------------- */

typedef struct {
  int B, T, C, V;
  int *tokens;
  float *wte, *wpe, *out, *r;
} encoder_case;

static double s_encoder_obj(void *p) {
  encoder_case *e = p;
  kernels_ref()->encoder_forward(e->out, e->tokens, e->wte, e->wpe, e->B, e->T, e->C);
  return s_dot(e->out, e->r, (size_t)e->B * e->T * e->C);
}

static void test_encoder(void) {
  encoder_case e = {.B = 2, .T = 6, .C = 8, .V = 5}; /* V < B*T: tokens repeat */
  size_t N = (size_t)e.B * e.T, NC = N * e.C;
  e.tokens = wt_xmalloc(sizeof(int) * N);
  for (size_t i = 0; i < N; i++) e.tokens[i] = (int)wt_rng_below(&g_rng, (uint64_t)e.V);
  e.wte = s_randn((size_t)e.V * e.C, 1), e.wpe = s_randn((size_t)e.T * e.C, 1);
  e.out = s_zeros(NC), e.r = s_randn(NC, 1);
  float *dwte = s_zeros((size_t)e.V * e.C), *dwpe = s_zeros((size_t)e.T * e.C);
  kernels_ref()->encoder_backward(dwte, dwpe, e.r, e.tokens, e.B, e.T, e.C);
  s_check_fd("encoder dwte", s_encoder_obj, &e, e.wte, (size_t)e.V * e.C, dwte);
  s_check_fd("encoder dwpe", s_encoder_obj, &e, e.wpe, (size_t)e.T * e.C, dwpe);
  float *out2 = s_zeros(NC), *dwte2 = s_zeros((size_t)e.V * e.C),
        *dwpe2 = s_zeros((size_t)e.T * e.C);
  s_encoder_obj(&e);
  kernels_cpu()->encoder_forward(out2, e.tokens, e.wte, e.wpe, e.B, e.T, e.C);
  kernels_cpu()->encoder_backward(dwte2, dwpe2, e.r, e.tokens, e.B, e.T, e.C);
  wt_test_allclose(out2, e.out, NC, 0, 0, "encoder fwd cpu vs ref"); /* one add: exact */
  wt_test_allclose(dwte2, dwte, (size_t)e.V * e.C, 0, 0, "encoder dwte cpu vs ref");
  wt_test_allclose(dwpe2, dwpe, (size_t)e.T * e.C, 0, 0, "encoder dwpe cpu vs ref");
  free(e.tokens), free(e.wte), free(e.wpe), free(e.out), free(e.r);
  free(dwte), free(dwpe), free(out2), free(dwte2), free(dwpe2);
}

/* ---- layernorm ------------------------------------------------------------------------- */

typedef struct {
  int N, C;
  float *x, *w, *b, *out, *mean, *rstd, *r;
} ln_case;

static double s_ln_obj(void *p) {
  ln_case *l = p;
  kernels_ref()->layernorm_forward(l->out, l->mean, l->rstd, l->x, l->w, l->b, l->N, l->C);
  return s_dot(l->out, l->r, (size_t)l->N * l->C);
}

static void test_layernorm(int N, int C) {
  ln_case l = {.N = N, .C = C};
  size_t NC = (size_t)N * C;
  l.x = s_randn(NC, 1), l.w = s_randn((size_t)C, 1), l.b = s_randn((size_t)C, 1);
  l.out = s_zeros(NC), l.mean = s_zeros((size_t)N), l.rstd = s_zeros((size_t)N),
  l.r = s_randn(NC, 1);
  float *dx = s_randn(NC, 1), *dw = s_randn((size_t)C, 1), *db = s_randn((size_t)C, 1);
  float *dx2 = s_copy(dx, NC), *dw2 = s_copy(dw, (size_t)C), *db2 = s_copy(db, (size_t)C);
  float *dx0 = s_copy(dx, NC), *dw0 = s_copy(dw, (size_t)C), *db0 = s_copy(db, (size_t)C);
  s_ln_obj(&l);
  kernels_ref()->layernorm_backward(dx, dw, db, l.r, l.x, l.w, l.mean, l.rstd, N, C);
  /* The ops accumulate: subtract the starting values to get the gradient itself. */
  for (size_t i = 0; i < NC; i++) dx0[i] = dx[i] - dx0[i];
  for (int i = 0; i < C; i++) dw0[i] = dw[i] - dw0[i], db0[i] = db[i] - db0[i];
  if (NC <= 200) {
    s_check_fd("layernorm dinp", s_ln_obj, &l, l.x, NC, dx0);
    s_check_fd("layernorm dweight", s_ln_obj, &l, l.w, (size_t)C, dw0);
    s_check_fd("layernorm dbias", s_ln_obj, &l, l.b, (size_t)C, db0);
  }
  float *out2 = s_zeros(NC), *mean2 = s_zeros((size_t)N), *rstd2 = s_zeros((size_t)N);
  s_ln_obj(&l);
  kernels_cpu()->layernorm_forward(out2, mean2, rstd2, l.x, l.w, l.b, N, C);
  wt_test_allclose(out2, l.out, NC, FAST_ATOL, FAST_RTOL, "layernorm fwd cpu vs ref");
  wt_test_allclose(rstd2, l.rstd, (size_t)N, FAST_ATOL, FAST_RTOL, "layernorm rstd cpu vs ref");
  kernels_cpu()->layernorm_backward(dx2, dw2, db2, l.r, l.x, l.w, l.mean, l.rstd, N, C);
  wt_test_allclose(dx2, dx, NC, FAST_ATOL, FAST_RTOL, "layernorm dinp cpu vs ref");
  wt_test_allclose(dw2, dw, (size_t)C, FAST_ATOL, FAST_RTOL, "layernorm dweight cpu vs ref");
  wt_test_allclose(db2, db, (size_t)C, FAST_ATOL, FAST_RTOL, "layernorm dbias cpu vs ref");
  free(l.x), free(l.w), free(l.b), free(l.out), free(l.mean), free(l.rstd), free(l.r);
  free(dx), free(dw), free(db), free(dx2), free(dw2), free(db2), free(dx0), free(dw0), free(db0);
  free(out2), free(mean2), free(rstd2);
}

/* ---- matmul ---------------------------------------------------------------------------- */

typedef struct {
  int N, C, OC;
  kernels_wlayout layout;
  float *x, *w, *b, *out, *r;
} mm_case;

static double s_mm_obj(void *p) {
  mm_case *m = p;
  kernels_ref()->matmul_forward(m->out, m->x, m->w, m->b, m->N, m->C, m->OC, m->layout);
  return s_dot(m->out, m->r, (size_t)m->N * m->OC);
}

static void test_matmul(int N, int C, int OC, kernels_wlayout layout, int with_bias) {
  mm_case m = {.N = N, .C = C, .OC = OC, .layout = layout};
  size_t NC = (size_t)N * C, NO = (size_t)N * OC, W = (size_t)C * OC;
  m.x = s_randn(NC, 1), m.w = s_randn(W, 1), m.b = with_bias ? s_randn((size_t)OC, 1) : NULL;
  m.out = s_zeros(NO), m.r = s_randn(NO, 1);
  float *dx = s_zeros(NC), *dw = s_zeros(W), *db = s_zeros((size_t)OC);
  kernels_ref()->matmul_backward(dx, dw, with_bias ? db : NULL, m.r, m.x, m.w, N, C, OC, layout);
  if (NO <= 200) {
    s_check_fd("matmul dinp", s_mm_obj, &m, m.x, NC, dx);
    s_check_fd("matmul dweight", s_mm_obj, &m, m.w, W, dw);
    if (with_bias) s_check_fd("matmul dbias", s_mm_obj, &m, m.b, (size_t)OC, db);
  }
  /* Fast path: also starts from nonzero gradients to check it accumulates. */
  float *out2 = s_zeros(NO), *dx2 = s_randn(NC, 1), *dw2 = s_randn(W, 1),
        *db2 = s_randn((size_t)OC, 1);
  float *dx0 = s_copy(dx2, NC), *dw0 = s_copy(dw2, W), *db0 = s_copy(db2, (size_t)OC);
  s_mm_obj(&m);
  kernels_cpu()->matmul_forward(out2, m.x, m.w, m.b, N, C, OC, layout);
  double atol = FAST_ATOL * sqrt((double)WT_MAX(C, N) / 16.0); /* sums of up to max(C,N) terms */
  wt_test_allclose(out2, m.out, NO, atol, FAST_RTOL, "matmul fwd cpu vs ref");
  kernels_cpu()->matmul_backward(dx2, dw2, with_bias ? db2 : NULL, m.r, m.x, m.w, N, C, OC, layout);
  for (size_t i = 0; i < NC; i++) dx2[i] -= dx0[i];
  for (size_t i = 0; i < W; i++) dw2[i] -= dw0[i];
  for (int i = 0; i < OC; i++) db2[i] -= db0[i];
  wt_test_allclose(dx2, dx, NC, atol, FAST_RTOL, "matmul dinp cpu vs ref");
  wt_test_allclose(dw2, dw, W, atol, FAST_RTOL, "matmul dweight cpu vs ref");
  if (with_bias) wt_test_allclose(db2, db, (size_t)OC, atol, FAST_RTOL, "matmul dbias cpu vs ref");
  free(m.x), free(m.w), free(m.b), free(m.out), free(m.r), free(dx), free(dw), free(db);
  free(out2), free(dx2), free(dw2), free(db2), free(dx0), free(dw0), free(db0);
}

/* ---- attention ------------------------------------------------------------------------- */

typedef struct {
  int B, T, C, NH;
  float *qkv, *out, *att, *r;
} att_case;

static double s_att_obj(void *p) {
  att_case *a = p;
  kernels_ref()->attention_forward(a->out, a->att, a->qkv, a->B, a->T, a->C, a->NH);
  return s_dot(a->out, a->r, (size_t)a->B * a->T * a->C);
}

static void test_attention(int B, int T, int C, int NH) {
  att_case a = {.B = B, .T = T, .C = C, .NH = NH};
  size_t N = (size_t)B * T, NA = (size_t)B * NH * T * T;
  a.qkv = s_randn(N * 3 * C, 1), a.out = s_zeros(N * C), a.att = s_zeros(NA);
  a.r = s_randn(N * C, 1);
  float *dqkv = s_zeros(N * 3 * C), *scratch = s_zeros(NA);
  s_att_obj(&a);
  kernels_ref()->attention_backward(dqkv, scratch, a.r, a.qkv, a.att, B, T, C, NH);
  if (N * C <= 200) s_check_fd("attention dqkv", s_att_obj, &a, a.qkv, N * 3 * C, dqkv);
  s_att_obj(&a);
  float *out2 = s_zeros(N * C), *att2 = s_zeros(NA), *dqkv2 = s_zeros(N * 3 * C);
  kernels_cpu()->attention_forward(out2, att2, a.qkv, B, T, C, NH);
  wt_test_allclose(out2, a.out, N * C, FAST_ATOL, FAST_RTOL, "attention fwd cpu vs ref");
  wt_test_allclose(att2, a.att, NA, FAST_ATOL, FAST_RTOL, "attention probs cpu vs ref");
  kernels_cpu()->attention_backward(dqkv2, scratch, a.r, a.qkv, a.att, B, T, C, NH);
  wt_test_allclose(dqkv2, dqkv, N * 3 * C, FAST_ATOL, FAST_RTOL, "attention dqkv cpu vs ref");
  /* Causality: the output at time t must not depend on inputs after t. */
  float *qkv2 = s_copy(a.qkv, N * 3 * C), *out3 = s_zeros(N * C);
  for (int c = 0; c < 3 * C; c++) qkv2[(size_t)(T - 1) * 3 * C + c] += 1.0f; /* b=0, last t */
  kernels_cpu()->attention_forward(out3, att2, qkv2, B, T, C, NH);
  wt_test_allclose(out3, out2, (size_t)(T - 1) * C, 0, 0, "attention causal mask");
  free(a.qkv), free(a.out), free(a.att), free(a.r), free(dqkv), free(scratch);
  free(out2), free(att2), free(dqkv2), free(qkv2), free(out3);
}

/* ---- gelu and residual ----------------------------------------------------------------- */

typedef struct {
  size_t n;
  float *x, *y, *out, *r;
} ew_case;

static double s_gelu_obj(void *p) {
  ew_case *e = p;
  kernels_ref()->gelu_forward(e->out, e->x, e->n);
  return s_dot(e->out, e->r, e->n);
}

static double s_res_obj(void *p) {
  ew_case *e = p;
  kernels_ref()->residual_forward(e->out, e->x, e->y, e->n);
  return s_dot(e->out, e->r, e->n);
}

static void test_elementwise(size_t n) {
  ew_case e = {.n = n};
  e.x = s_randn(n, 2), e.y = s_randn(n, 1), e.out = s_zeros(n), e.r = s_randn(n, 1);
  float *dx = s_zeros(n), *dy = s_zeros(n), *dx2 = s_zeros(n), *dy2 = s_zeros(n), *o2 = s_zeros(n);
  kernels_ref()->gelu_backward(dx, e.x, e.r, n);
  if (n <= 200) s_check_fd("gelu dinp", s_gelu_obj, &e, e.x, n, dx);
  s_gelu_obj(&e);
  kernels_cpu()->gelu_forward(o2, e.x, n);
  wt_test_allclose(o2, e.out, n, 1e-6, 1e-5, "gelu fwd cpu vs ref"); /* tanhf vs tanh */
  kernels_cpu()->gelu_backward(dx2, e.x, e.r, n);
  wt_test_allclose(dx2, dx, n, 1e-5, 1e-5, "gelu dinp cpu vs ref");
  memset(dx, 0, n * sizeof(float));
  kernels_ref()->residual_backward(dx, dy, e.r, n);
  if (n <= 200) {
    s_check_fd("residual da", s_res_obj, &e, e.x, n, dx);
    s_check_fd("residual db", s_res_obj, &e, e.y, n, dy);
  }
  s_res_obj(&e);
  kernels_cpu()->residual_forward(o2, e.x, e.y, n);
  wt_test_allclose(o2, e.out, n, 0, 0, "residual fwd cpu vs ref");
  memset(dx2, 0, n * sizeof(float));
  kernels_cpu()->residual_backward(dx2, dy2, e.r, n);
  wt_test_allclose(dx2, dx, n, 0, 0, "residual da cpu vs ref");
  wt_test_allclose(dy2, dy, n, 0, 0, "residual db cpu vs ref");
  free(e.x), free(e.y), free(e.out), free(e.r), free(dx), free(dy), free(dx2), free(dy2), free(o2);
}

/* ---- cross-entropy --------------------------------------------------------------------- */

typedef struct {
  int N, V;
  float dloss;
  int *targets;
  float *logits, *losses, *lse;
} ce_case;

static double s_ce_obj(void *p) {
  ce_case *c = p;
  kernels_ref()->crossentropy_forward(c->losses, c->lse, c->logits, c->targets, c->N, c->V);
  double sum = 0;
  for (int i = 0; i < c->N; i++) sum += c->losses[i];
  return sum * c->dloss;
}

static void test_crossentropy(int N, int V) {
  ce_case c = {.N = N, .V = V, .dloss = 0.7f};
  size_t NV = (size_t)N * V;
  c.targets = wt_xmalloc(sizeof(int) * (size_t)N);
  for (int i = 0; i < N; i++) c.targets[i] = (int)wt_rng_below(&g_rng, (uint64_t)V);
  c.logits = s_randn(NV, 3), c.losses = s_zeros((size_t)N), c.lse = s_zeros((size_t)N);
  float *dz = s_zeros(NV), *dz2 = s_zeros(NV), *l2 = s_zeros((size_t)N), *lse2 = s_zeros((size_t)N);
  s_ce_obj(&c);
  kernels_ref()->crossentropy_backward(dz, c.logits, c.lse, c.targets, c.dloss, N, V);
  if (NV <= 200) s_check_fd("crossentropy dlogits", s_ce_obj, &c, c.logits, NV, dz);
  s_ce_obj(&c);
  kernels_cpu()->crossentropy_forward(l2, lse2, c.logits, c.targets, N, V);
  wt_test_allclose(l2, c.losses, (size_t)N, FAST_ATOL, FAST_RTOL, "crossentropy loss cpu vs ref");
  kernels_cpu()->crossentropy_backward(dz2, c.logits, lse2, c.targets, c.dloss, N, V);
  wt_test_allclose(dz2, dz, NV, 1e-6, FAST_RTOL, "crossentropy dlogits cpu vs ref");
  /* In place (dlogits aliasing logits) gives the same bits as out of place. */
  float *z = s_copy(c.logits, NV);
  kernels_cpu()->crossentropy_backward(z, z, lse2, c.targets, c.dloss, N, V);
  wt_test_allclose(z, dz2, NV, 0, 0, "crossentropy in place");
  free(c.targets), free(c.logits), free(c.losses), free(c.lse), free(dz), free(dz2), free(l2);
  free(lse2), free(z);
}

/* ---- adamw ----------------------------------------------------------------------------- */

static void test_adamw(size_t n) {
  float *p = s_randn(n, 1), *g = s_randn(n, 1), *m = s_randn(n, 0.1f), *v = s_zeros(n);
  for (size_t i = 0; i < n; i++) v[i] = (float)fabs(wt_rng_normal(&g_rng)) * 0.01f;
  float *p2 = s_copy(p, n), *m2 = s_copy(m, n), *v2 = s_copy(v, n);
  for (int step = 1; step <= 3; step++) {
    float bc1 = 1.0f - powf(0.9f, (float)step), bc2 = 1.0f - powf(0.95f, (float)step);
    kernels_ref()->adamw_update(p, g, m, v, n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, bc1, bc2, 0.5f);
    kernels_cpu()->adamw_update(p2, g, m2, v2, n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, bc1, bc2, 0.5f);
  }
  /* Same formula, float either way; only FMA contraction may differ between the two. */
  wt_test_allclose(p2, p, n, 1e-6, 1e-5, "adamw params cpu vs ref");
  wt_test_allclose(m2, m, n, 1e-6, 1e-5, "adamw m cpu vs ref");
  wt_test_allclose(v2, v, n, 1e-7, 1e-5, "adamw v cpu vs ref");
  free(p), free(g), free(m), free(v), free(p2), free(m2), free(v2);
}

/* ---- the vectorisable exp/tanh behind GELU and softmax ---------------------------------- */

static void test_fastmath(void) {
  double worst = 0, worst_tanh = 0;
  for (int i = -870000; i <= 880000; i++) { /* every 1e-4 over the unclamped range */
    float x = (float)(i * 1e-4);
    double want = exp((double)x), rel = fabs(wt_fast_expf(x) - want) / want;
    worst = rel > worst ? rel : worst;
    double t = fabs(wt_fast_tanhf(x * 0.1f) - tanh((double)(x * 0.1f)));
    worst_tanh = t > worst_tanh ? t : worst_tanh;
  }
  /* 3 ulp of float (2^-23 = 1.19e-7 each): the polynomial and the 2^k scaling add < 1 ulp to
   * the rounding of r; tanh = 1 - 2/(1+e^2u) loses ~1 ulp of 1 near u = 0 (absolute). */
  WT_TEST_ASSERT(worst < 3.6e-7, "fast expf max relative error %.3g", worst);
  WT_TEST_ASSERT(worst_tanh < 2.4e-7, "fast tanhf max absolute error %.3g", worst_tanh);
  WT_TEST_ASSERT(wt_fast_expf(-1e30f) > 0 && wt_fast_expf(-1e30f) < 1e-37f, "clamped below");
  WT_TEST_ASSERT(isfinite(wt_fast_expf(1e30f)) && wt_fast_expf(1e30f) > 1e38f, "clamped above");
  WT_TEST_ASSERT(wt_fast_tanhf(1e4f) == 1.0f && wt_fast_tanhf(-1e4f) == -1.0f, "tanh saturates");
  WT_TEST_ASSERT(isnan(wt_fast_expf(NAN)), "NaN propagates");
}

/* ---- determinism and the registry ------------------------------------------------------ */

static void test_determinism(void) {
  int B = 2, T = 33, C = 48, NH = 3;
  size_t N = (size_t)B * T;
  float *qkv = s_randn(N * 3 * C, 1), *w = s_randn((size_t)C * 3 * C, 1);
  float *o1 = s_zeros(N * 3 * C), *o2 = s_zeros(N * 3 * C);
  float *a1 = s_zeros(N * C), *a2 = s_zeros(N * C), *p = s_zeros((size_t)B * NH * T * T);
  kernels_cpu()->matmul_forward(o1, qkv, w, NULL, (int)N, C, 3 * C, KERNELS_W_IN_OUT);
  kernels_cpu()->matmul_forward(o2, qkv, w, NULL, (int)N, C, 3 * C, KERNELS_W_IN_OUT);
  WT_TEST_ASSERT(memcmp(o1, o2, N * 3 * C * sizeof(float)) == 0, "sgemm is not repeatable");
  kernels_cpu()->attention_forward(a1, p, qkv, B, T, C, NH);
  kernels_cpu()->attention_forward(a2, p, qkv, B, T, C, NH);
  WT_TEST_ASSERT(memcmp(a1, a2, N * C * sizeof(float)) == 0, "attention is not repeatable");
  free(qkv), free(w), free(o1), free(o2), free(a1), free(a2), free(p);
}

static void test_registry(void) {
  WT_TEST_ASSERT(kernels_backend("cpu") == kernels_cpu(), "cpu table");
  WT_TEST_ASSERT(kernels_backend("ref") == kernels_ref(), "ref table");
  WT_TEST_ASSERT(kernels_backend("nope") == NULL, "unknown back end must be NULL");
  WT_TEST_ASSERT(kernels_backend(NULL) == NULL, "NULL name must be NULL");
}

/* The device names every program parses through kernels_for_device, and the precision switch:
 * malformed names are usage errors (WT_EINVAL), GPUs this build or machine lacks WT_ENOTSUP. */
static void test_device_names(void) {
  const kernels_ops *ops = NULL;
  WT_TEST_ASSERT(kernels_for_device("cpu", &ops) == WT_OK && ops == kernels_cpu(), "cpu");
  static const char *bad[] = {"",          "gpu7",  "cuda:", "cuda:x",     "cuda:-1",
                              "cuda:1024", "cuda0", "CPU",   "cuda:12345", "ref"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    ops = NULL;
    WT_TEST_ASSERT(kernels_for_device(bad[i], &ops) == WT_EINVAL && !ops &&
                       strstr(wt_last_error(), "is not cpu, cuda or cuda:N"),
                   "'%s' is malformed: %s", bad[i], wt_last_error());
  }
  /* cuda:999 names no GPU anywhere: refused for the build or for the machine, never a crash. */
  int rc = kernels_for_device("cuda:999", &ops);
  WT_TEST_ASSERT(rc == WT_ENOTSUP && (strstr(wt_last_error(), "no CUDA device 999") ||
                                      strstr(wt_last_error(), "this build has no CUDA back end")),
                 "cuda:999: %d %s", rc, wt_last_error());
  kernels_precision p;
  WT_TEST_ASSERT(kernels_parse_precision("fp32", 0, &p) == WT_OK && p == KERNELS_PREC_FP32, "fp32");
  WT_TEST_ASSERT(kernels_parse_precision("fp32", 1, &p) == WT_OK && p == KERNELS_PREC_TF32, "tf32");
  WT_TEST_ASSERT(kernels_parse_precision("bf16", 0, &p) == WT_OK && p == KERNELS_PREC_BF16, "bf16");
  WT_TEST_ASSERT(kernels_parse_precision("fp16", 0, &p) == WT_EINVAL, "fp16 is not a precision");
  WT_TEST_ASSERT(kernels_set_precision(kernels_cpu(), KERNELS_PREC_FP32) == WT_OK, "cpu fp32");
  WT_TEST_ASSERT(kernels_set_precision(kernels_ref(), KERNELS_PREC_BF16) == WT_ENOTSUP &&
                     strstr(wt_last_error(), "need a GPU"),
                 "bf16 on a host back end: %s", wt_last_error());
  WT_TEST_ASSERT(kernels_set_precision(kernels_cpu(), KERNELS_PREC_TF32) == WT_ENOTSUP, "tf32");
}

/* The memory entries of both host tables: zeroed allocations, copies, and the sum of squares
 * against a plain double loop (the blocked grouping only reorders double additions, ~1e-16
 * relative per add) and across thread counts (bitwise). */
static void test_memory_entries(void) {
  const kernels_ops *tables[] = {kernels_cpu(), kernels_ref()};
  size_t n = 300007;
  for (int t = 0; t < 2; t++) {
    const kernels_ops *k = tables[t];
    WT_TEST_ASSERT(!k->device && k->mem_total() > 1e8, "%s: host memory", k->name);
    float *x = s_randn(n, 1.0f), *a = k->alloc(n * 4), *b = k->alloc(n * 4);
    float *h = k->host_alloc(n * 4);
    WT_TEST_REQUIRE(a && b && h, "alloc");
    int zero = 1;
    for (size_t i = 0; i < n; i++) zero &= a[i] == 0.0f && h[i] == 0.0f;
    WT_TEST_ASSERT(zero, "%s: alloc and host_alloc return zeroed memory", k->name);
    k->upload(a, x, n * 4);
    k->copy(b, a, n * 4);
    k->download(h, b, n * 4);
    WT_TEST_ASSERT(memcmp(h, x, n * 4) == 0, "%s: upload, copy, download", k->name);
    k->copy(b + 1, b, (n - 1) * 4); /* overlapping: a memmove */
    WT_TEST_ASSERT(b[1] == x[0] && b[n - 1] == x[n - 2], "%s: overlapping copy", k->name);
    double want = 0;
    for (size_t i = 0; i < n; i++) want += (double)x[i] * x[i];
    double got = k->sq_norm(a, n);
    WT_TEST_ASSERT(fabs(got - want) <= 1e-12 * want, "%s: sq_norm %.17g vs %.17g", k->name, got,
                   want);
#ifdef _OPENMP
    int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    double one = k->sq_norm(a, n);
    omp_set_num_threads(threads > 1 ? threads : 3);
    WT_TEST_ASSERT(one == k->sq_norm(a, n), "%s: sq_norm independent of threads", k->name);
    omp_set_num_threads(threads);
#endif
    k->zero(a, n * 4);
    WT_TEST_ASSERT(k->sq_norm(a, n) == 0.0, "%s: zero", k->name);
    k->upload_async(a, x, n * 4);
    memset(h, 0, n * 4);
    k->download_async(h, a, n * 4);
    k->copy_wait();
    WT_TEST_ASSERT(memcmp(h, x, n * 4) == 0, "%s: asynchronous copies", k->name);
    k->free(a), k->free(b), k->host_free(h), k->free(NULL);
    free(x);
  }
}

/* A copy of getenv(name), or NULL when unset (getenv's pointer may not survive a setenv). */
static char *s_env_copy(const char *name) {
  const char *v = getenv(name);
  return v ? strdup(v) : NULL;
}

static int s_same_env(const char *name, const char *before) {
  const char *now = getenv(name);
  return (!now && !before) || (now && before && strcmp(now, before) == 0);
}

/* Loading OpenBLAS: in this process (no restart: main() marks the environment on entry and
 * refuses a second entry), with the core the user asked for or, on an AVX-512 CPU, not one of
 * OpenBLAS' generic fallbacks; and the environment is as it was before the load. */
static void test_blas_load(void) {
  char *core_before = s_env_copy("OPENBLAS_CORETYPE");
  char *threads_before = s_env_copy("OPENBLAS_NUM_THREADS");
  WT_TEST_REQUIRE(kernels_cpu_init() == WT_OK, "%s", wt_last_error());
  WT_TEST_ASSERT(kernels_cpu_init() == WT_OK, "a second call must return the first's result");
  const char *core = kernels_blas_corename();
  printf("BLAS core: %s, %d threads\n", core, kernels_cpu_threads());
  __builtin_cpu_init();
  if (core_before && *core_before) {
    WT_TEST_ASSERT(strcasecmp(core, core_before) == 0, "core %s, but OPENBLAS_CORETYPE=%s", core,
                   core_before);
  } else if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")) {
    static const char *generic[] = {"Prescott", "Core2", "Penryn", "Dunnington",
                                    "Nehalem",  "Atom",  "Unknown"};
    for (size_t i = 0; i < WT_ARRAY_LEN(generic); i++)
      WT_TEST_ASSERT(strcasecmp(core, generic[i]) != 0, "AVX-512 CPU but BLAS core %s", core);
  }
  WT_TEST_ASSERT(s_same_env("OPENBLAS_CORETYPE", core_before), "OPENBLAS_CORETYPE changed");
  WT_TEST_ASSERT(s_same_env("OPENBLAS_NUM_THREADS", threads_before),
                 "OPENBLAS_NUM_THREADS changed");
  free(core_before);
  free(threads_before);
}

/* The CPU sgemm splits the larger output dimension over the OpenMP threads: an uneven split
 * (3 threads, 300 rows) and a single part must both match the reference. */
static void test_matmul_threads(void) {
#ifdef _OPENMP
  int saved = omp_get_max_threads();
  for (int threads = 1; threads <= 3; threads += 2) {
    omp_set_num_threads(threads);
    test_matmul(300, 40, 130, KERNELS_W_IN_OUT, 1);
    test_matmul(40, 72, 300, KERNELS_W_OUT_IN, 0);
  }
  omp_set_num_threads(saved);
#endif
}

int main(void) {
  WT_TEST_REQUIRE(!getenv("WT_TEST_KERNELS_STARTED"), "the program was started again");
  setenv("WT_TEST_KERNELS_STARTED", "1", 1);
  wt_rng_seed(&g_rng, 1234);
  test_blas_load();
  test_registry();
  test_device_names();
  test_memory_entries();
  test_fastmath();
  test_encoder();
  test_layernorm(4, 8);
  test_layernorm(37, 200);
  test_matmul(3, 5, 7, KERNELS_W_IN_OUT, 1);
  test_matmul(3, 5, 7, KERNELS_W_OUT_IN, 0);
  test_matmul(4, 6, 5, KERNELS_W_OUT_IN, 1);
  test_matmul(70, 96, 130, KERNELS_W_IN_OUT, 1);
  test_matmul(70, 96, 257, KERNELS_W_OUT_IN, 0);
  test_matmul_threads();
  test_attention(2, 4, 8, 2);
  test_attention(2, 33, 48, 3);
  test_elementwise(150);
  test_elementwise(100003);
  test_crossentropy(5, 11);
  test_crossentropy(20, 1000);
  test_adamw(10001);
  test_determinism();
  return wt_test_finish("test_kernels");
}
