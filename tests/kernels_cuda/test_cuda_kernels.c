/* test_cuda_kernels — every op of the "cuda" back end against the "ref" back end on the same
 * random inputs (the STYLE.md rule: fast paths are tested against the readable reference).
 *
 * Tolerances: the reference accumulates in double where it matters, the GPU in fp32 with a
 * different summation order. For sums of K products of O(1) values the fp32 rounding error is
 * about sqrt(K)·2^-24·|terms|, far below 1e-4 for K ≤ 256, so atol 1e-4 + rtol 1e-4 separates
 * rounding from a wrong index or a missing term (which give O(0.1) errors). Exits 77 when no
 * CUDA device is present.
 *
 * The back end's kernels are chosen by WANTRAIN_CUDA_KERNELS (plain by default, or fused);
 * CTest runs this test once for each. The fused ops (matmul_gelu_forward,
 * crossentropy_forward_backward, adamw_update_tensors) are checked against the separate
 * reference ops they replace, and run twice to check they are deterministic. */
#include <cuda_runtime.h>

#include "common/common.h"
#include "kernels/kernels.h"
#include "common/rng.h"
#include "common/testing.h"

#define ATOL 1e-4
#define RTOL 1e-4

static wt_rng s_rng;

static float *s_host_random(size_t n, float scale) {
  float *x = wt_xmalloc(n * sizeof(float));
  for (size_t i = 0; i < n; i++) x[i] = scale * (float)wt_rng_normal(&s_rng);
  return x;
}

static void *s_to_device(const void *host, size_t bytes) {
  void *d = NULL;
  WT_TEST_REQUIRE(cudaMalloc(&d, bytes) == cudaSuccess, "cudaMalloc %zu", bytes);
  WT_TEST_REQUIRE(cudaMemcpy(d, host, bytes, cudaMemcpyHostToDevice) == cudaSuccess, "h2d");
  return d;
}

/* Copies n floats back from the device and compares them with `want`. */
static void s_check(const float *dev, const float *want, size_t n, const char *what) {
  float *got = wt_xmalloc(n * sizeof(float));
  WT_TEST_REQUIRE(cudaMemcpy(got, dev, n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess,
                  "d2h %s", what);
  wt_test_allclose(got, want, n, ATOL, RTOL, what);
  free(got);
}

static float *s_copy(const float *x, size_t n) {
  float *y = wt_xmalloc(n * sizeof(float));
  memcpy(y, x, n * sizeof(float));
  return y;
}

/* OC = 83 (rows not a multiple of 8 floats) takes the padded-output path, as the LM head does. */
static void test_matmul(const kernels_ops *ref, const kernels_ops *gpu, kernels_wlayout layout,
                        int OC) {
  int N = 37, C = 48;
  float *inp = s_host_random((size_t)N * C, 1), *w = s_host_random((size_t)C * OC, 0.2f);
  float *bias = s_host_random(OC, 1), *dout = s_host_random((size_t)N * OC, 1);
  float *out = wt_xcalloc((size_t)N * OC, 4), *dinp = s_host_random((size_t)N * C, 1);
  float *dw = s_host_random((size_t)C * OC, 1), *db = s_host_random(OC, 1);
  float *d_inp = s_to_device(inp, (size_t)N * C * 4), *d_w = s_to_device(w, (size_t)C * OC * 4);
  float *d_bias = s_to_device(bias, OC * 4), *d_dout = s_to_device(dout, (size_t)N * OC * 4);
  float *d_out = s_to_device(out, (size_t)N * OC * 4);
  float *d_dinp = s_to_device(dinp, (size_t)N * C * 4), *d_dw = s_to_device(dw, (size_t)C * OC * 4);
  float *d_db = s_to_device(db, OC * 4);
  ref->matmul_forward(out, inp, w, bias, N, C, OC, layout);
  gpu->matmul_forward(d_out, d_inp, d_w, d_bias, N, C, OC, layout);
  s_check(d_out, out, (size_t)N * OC, layout ? "matmul_forward out_in" : "matmul_forward in_out");
  ref->matmul_backward(dinp, dw, db, dout, inp, w, N, C, OC, layout);
  gpu->matmul_backward(d_dinp, d_dw, d_db, d_dout, d_inp, d_w, N, C, OC, layout);
  s_check(d_dinp, dinp, (size_t)N * C, "matmul dinp (accumulated)");
  s_check(d_dw, dw, (size_t)C * OC, "matmul dweight (accumulated)");
  s_check(d_db, db, OC, "matmul dbias (accumulated)");
  void *all[] = {d_inp, d_w, d_bias, d_dout, d_out, d_dinp, d_dw, d_db};
  for (size_t i = 0; i < WT_ARRAY_LEN(all); i++) cudaFree(all[i]);
  free(inp), free(w), free(bias), free(dout), free(out), free(dinp), free(dw), free(db);
}

static void test_layernorm(const kernels_ops *ref, const kernels_ops *gpu) {
  int N = 19, C = 96;
  size_t nc = (size_t)N * C;
  float *inp = s_host_random(nc, 2), *w = s_host_random(C, 1), *b = s_host_random(C, 1);
  float *dout = s_host_random(nc, 1), *out = wt_xcalloc(nc, 4), *mean = wt_xcalloc(N, 4),
        *rstd = wt_xcalloc(N, 4);
  float *dinp = s_host_random(nc, 1), *dw = s_host_random(C, 1), *db = s_host_random(C, 1);
  float *d_inp = s_to_device(inp, nc * 4), *d_w = s_to_device(w, C * 4),
        *d_b = s_to_device(b, C * 4);
  float *d_dout = s_to_device(dout, nc * 4), *d_out = s_to_device(out, nc * 4);
  float *d_mean = s_to_device(mean, N * 4), *d_rstd = s_to_device(rstd, N * 4);
  float *d_dinp = s_to_device(dinp, nc * 4), *d_dw = s_to_device(dw, C * 4),
        *d_db = s_to_device(db, C * 4);
  ref->layernorm_forward(out, mean, rstd, inp, w, b, N, C);
  gpu->layernorm_forward(d_out, d_mean, d_rstd, d_inp, d_w, d_b, N, C);
  s_check(d_out, out, nc, "layernorm out");
  s_check(d_mean, mean, N, "layernorm mean");
  s_check(d_rstd, rstd, N, "layernorm rstd");
  ref->layernorm_backward(dinp, dw, db, dout, inp, w, mean, rstd, N, C);
  gpu->layernorm_backward(d_dinp, d_dw, d_db, d_dout, d_inp, d_w, d_mean, d_rstd, N, C);
  s_check(d_dinp, dinp, nc, "layernorm dinp");
  s_check(d_dw, dw, C, "layernorm dweight");
  s_check(d_db, db, C, "layernorm dbias");
  void *all[] = {d_inp, d_w, d_b, d_dout, d_out, d_mean, d_rstd, d_dinp, d_dw, d_db};
  for (size_t i = 0; i < WT_ARRAY_LEN(all); i++) cudaFree(all[i]);
  free(inp), free(w), free(b), free(dout), free(out), free(mean), free(rstd), free(dinp), free(dw),
      free(db);
}

static void test_attention(const kernels_ops *ref, const kernels_ops *gpu) {
  int B = 2, T = 13, C = 32, NH = 4;
  size_t nqkv = (size_t)B * T * 3 * C, nout = (size_t)B * T * C, natt = (size_t)B * NH * T * T;
  float *qkv = s_host_random(nqkv, 1), *dout = s_host_random(nout, 1);
  float *out = wt_xcalloc(nout, 4), *att = wt_xcalloc(natt, 4), *scratch = wt_xcalloc(natt, 4);
  float *dqkv = s_host_random(nqkv, 1);
  float *d_qkv = s_to_device(qkv, nqkv * 4), *d_dout = s_to_device(dout, nout * 4);
  float *d_out = s_to_device(out, nout * 4), *d_att = s_to_device(att, natt * 4);
  float *d_scratch = s_to_device(scratch, natt * 4), *d_dqkv = s_to_device(dqkv, nqkv * 4);
  ref->attention_forward(out, att, qkv, B, T, C, NH);
  gpu->attention_forward(d_out, d_att, d_qkv, B, T, C, NH);
  s_check(d_out, out, nout, "attention out");
  s_check(d_att, att, natt, "attention probabilities");
  ref->attention_backward(dqkv, scratch, dout, qkv, att, B, T, C, NH);
  gpu->attention_backward(d_dqkv, d_scratch, d_dout, d_qkv, d_att, B, T, C, NH);
  s_check(d_dqkv, dqkv, nqkv, "attention dqkv");
  void *all[] = {d_qkv, d_dout, d_out, d_att, d_scratch, d_dqkv};
  for (size_t i = 0; i < WT_ARRAY_LEN(all); i++) cudaFree(all[i]);
  free(qkv), free(dout), free(out), free(att), free(scratch), free(dqkv);
}

static void test_encoder_and_loss(const kernels_ops *ref, const kernels_ops *gpu) {
  int B = 3, T = 7, C = 16, V = 50;
  size_t nbt = (size_t)B * T;
  int tokens[21];
  for (size_t i = 0; i < nbt; i++) tokens[i] = (int)wt_rng_below(&s_rng, 5); /* repeats */
  float *wte = s_host_random((size_t)V * C, 1), *wpe = s_host_random((size_t)T * C, 1);
  float *out = wt_xcalloc(nbt * C, 4), *dout = s_host_random(nbt * C, 1);
  float *dwte = s_host_random((size_t)V * C, 1), *dwpe = s_host_random((size_t)T * C, 1);
  int *d_tok = s_to_device(tokens, sizeof tokens);
  float *d_wte = s_to_device(wte, (size_t)V * C * 4), *d_wpe = s_to_device(wpe, (size_t)T * C * 4);
  float *d_out = s_to_device(out, nbt * C * 4), *d_dout = s_to_device(dout, nbt * C * 4);
  float *d_dwte = s_to_device(dwte, (size_t)V * C * 4),
        *d_dwpe = s_to_device(dwpe, (size_t)T * C * 4);
  ref->encoder_forward(out, tokens, wte, wpe, B, T, C);
  gpu->encoder_forward(d_out, d_tok, d_wte, d_wpe, B, T, C);
  s_check(d_out, out, nbt * C, "encoder out");
  ref->encoder_backward(dwte, dwpe, dout, tokens, B, T, C);
  gpu->encoder_backward(d_dwte, d_dwpe, d_dout, d_tok, B, T, C);
  s_check(d_dwte, dwte, (size_t)V * C, "encoder dwte");
  s_check(d_dwpe, dwpe, (size_t)T * C, "encoder dwpe");

  /* cross-entropy over logits (nbt, V) with targets = tokens */
  float *logits = s_host_random(nbt * V, 3), *losses = wt_xcalloc(nbt, 4),
        *lse = wt_xcalloc(nbt, 4);
  float *dlogits = wt_xcalloc(nbt * V, 4);
  float *d_logits = s_to_device(logits, nbt * V * 4), *d_losses = s_to_device(losses, nbt * 4);
  float *d_lse = s_to_device(lse, nbt * 4), *d_dlogits = s_to_device(dlogits, nbt * V * 4);
  ref->crossentropy_forward(losses, lse, logits, tokens, (int)nbt, V);
  gpu->crossentropy_forward(d_losses, d_lse, d_logits, d_tok, (int)nbt, V);
  s_check(d_losses, losses, nbt, "crossentropy losses");
  s_check(d_lse, lse, nbt, "crossentropy lse");
  ref->crossentropy_backward(dlogits, logits, lse, tokens, 0.25f, (int)nbt, V);
  gpu->crossentropy_backward(d_dlogits, d_logits, d_lse, d_tok, 0.25f, (int)nbt, V);
  s_check(d_dlogits, dlogits, nbt * V, "crossentropy dlogits");
  void *all[] = {d_tok,  d_wte,    d_wpe,    d_out, d_dout,   d_dwte,
                 d_dwpe, d_logits, d_losses, d_lse, d_dlogits};
  for (size_t i = 0; i < WT_ARRAY_LEN(all); i++) cudaFree(all[i]);
  free(wte), free(wpe), free(out), free(dout), free(dwte), free(dwpe), free(logits), free(losses),
      free(lse), free(dlogits);
}

static void test_elementwise_and_adamw(const kernels_ops *ref, const kernels_ops *gpu) {
  size_t n = 1000;
  float *x = s_host_random(n, 2), *y = s_host_random(n, 1), *dout = s_host_random(n, 1);
  float *out = wt_xcalloc(n, 4), *dx = s_host_random(n, 1), *dy = s_copy(dx, n);
  float *d_x = s_to_device(x, n * 4), *d_y = s_to_device(y, n * 4);
  float *d_dout = s_to_device(dout, n * 4), *d_out = s_to_device(out, n * 4);
  float *d_dx = s_to_device(dx, n * 4), *d_dy = s_to_device(dy, n * 4);
  ref->gelu_forward(out, x, n);
  gpu->gelu_forward(d_out, d_x, n);
  s_check(d_out, out, n, "gelu out");
  ref->gelu_backward(dx, x, dout, n);
  gpu->gelu_backward(d_dx, d_x, d_dout, n);
  s_check(d_dx, dx, n, "gelu dinp");
  ref->residual_forward(out, x, y, n);
  gpu->residual_forward(d_out, d_x, d_y, n);
  s_check(d_out, out, n, "residual out");
  ref->residual_backward(dx, dy, dout, n);
  gpu->residual_backward(d_dx, d_dy, d_dout, n);
  s_check(d_dx, dx, n, "residual da");
  s_check(d_dy, dy, n, "residual db");
  /* AdamW: param x, grad dout, m = y, v = y^2 */
  float *v = wt_xmalloc(n * 4);
  for (size_t i = 0; i < n; i++) v[i] = y[i] * y[i];
  float *d_v = s_to_device(v, n * 4);
  for (int step = 1; step <= 3; step++) {
    float bc1 = 1.0f - powf(0.9f, (float)step), bc2 = 1.0f - powf(0.999f, (float)step);
    ref->adamw_update(x, dout, y, v, n, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.1f, bc1, bc2, 0.5f);
    gpu->adamw_update(d_x, d_dout, d_y, d_v, n, 1e-2f, 0.9f, 0.999f, 1e-8f, 0.1f, bc1, bc2, 0.5f);
  }
  s_check(d_x, x, n, "adamw param");
  s_check(d_y, y, n, "adamw m");
  s_check(d_v, v, n, "adamw v");
  void *all[] = {d_x, d_y, d_dout, d_out, d_dx, d_dy, d_v};
  for (size_t i = 0; i < WT_ARRAY_LEN(all); i++) cudaFree(all[i]);
  free(x), free(y), free(dout), free(out), free(dx), free(dy), free(v);
}

/* Copies n floats back from the device and requires them bitwise equal to `want` (host). */
static void s_check_same(const float *dev, const float *want, size_t n, const char *what) {
  float *got = wt_xmalloc(n * sizeof(float));
  WT_TEST_REQUIRE(cudaMemcpy(got, dev, n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess,
                  "d2h %s", what);
  WT_TEST_ASSERT(memcmp(got, want, n * sizeof(float)) == 0, "%s: a second run differs", what);
  free(got);
}

static float *s_download(const float *dev, size_t n) {
  float *x = wt_xmalloc(n * sizeof(float));
  WT_TEST_REQUIRE(cudaMemcpy(x, dev, n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess,
                  "d2h");
  return x;
}

/* matmul_gelu_forward against matmul_forward + gelu_forward of the reference; with and without
 * a bias, in both weight layouts; OC = 83 takes the separate kernels (no epilogue for it). */
static void test_matmul_gelu(const kernels_ops *ref, const kernels_ops *gpu, kernels_wlayout layout,
                             int OC, int with_bias) {
  int N = 45, C = 64;
  size_t no = (size_t)N * OC;
  float *inp = s_host_random((size_t)N * C, 1), *w = s_host_random((size_t)C * OC, 0.2f);
  float *bias = with_bias ? s_host_random(OC, 1) : NULL;
  float *pre = wt_xcalloc(no, 4), *out = wt_xcalloc(no, 4);
  float *d_inp = s_to_device(inp, (size_t)N * C * 4), *d_w = s_to_device(w, (size_t)C * OC * 4);
  float *d_bias = bias ? s_to_device(bias, OC * 4) : NULL;
  float *d_pre = s_to_device(pre, no * 4), *d_out = s_to_device(out, no * 4);
  ref->matmul_forward(pre, inp, w, bias, N, C, OC, layout);
  ref->gelu_forward(out, pre, no);
  WT_TEST_REQUIRE(gpu->matmul_gelu_forward != NULL, "the cuda table has matmul_gelu_forward");
  gpu->matmul_gelu_forward(d_out, d_pre, NULL, d_inp, d_w, d_bias, N, C, OC, layout);
  s_check(d_pre, pre, no, "matmul_gelu_forward pre-activation");
  s_check(d_out, out, no, "matmul_gelu_forward gelu");
  float *first = s_download(d_out, no);
  gpu->matmul_gelu_forward(d_out, d_pre, NULL, d_inp, d_w, d_bias, N, C, OC, layout);
  s_check_same(d_out, first, no, "matmul_gelu_forward");
  void *all[] = {d_inp, d_w, d_bias, d_pre, d_out};
  for (size_t i = 0; i < WT_ARRAY_LEN(all); i++) cudaFree(all[i]);
  free(inp), free(w), free(bias), free(pre), free(out), free(first);
}

/* The bias gradient (a cuBLASLt epilogue in the fused kernels) accumulates, and is the same
 * on a second run: matmul_backward twice from the same state gives the same bits. */
static void test_matmul_backward_deterministic(const kernels_ops *gpu, kernels_wlayout layout) {
  int N = 200, C = 64, OC = 96;
  float *inp = s_host_random((size_t)N * C, 1), *w = s_host_random((size_t)C * OC, 0.2f);
  float *dout = s_host_random((size_t)N * OC, 1), *db = s_host_random(OC, 1);
  float *dw = s_host_random((size_t)C * OC, 1), *dinp = s_host_random((size_t)N * C, 1);
  float *d_inp = s_to_device(inp, (size_t)N * C * 4), *d_w = s_to_device(w, (size_t)C * OC * 4);
  float *d_dout = s_to_device(dout, (size_t)N * OC * 4), *d_db = s_to_device(db, OC * 4);
  float *d_dw = s_to_device(dw, (size_t)C * OC * 4), *d_dinp = s_to_device(dinp, (size_t)N * C * 4);
  gpu->matmul_backward(d_dinp, d_dw, d_db, d_dout, d_inp, d_w, N, C, OC, layout);
  float *db1 = s_download(d_db, OC), *dw1 = s_download(d_dw, (size_t)C * OC);
  WT_TEST_REQUIRE(cudaMemcpy(d_db, db, OC * 4, cudaMemcpyHostToDevice) == cudaSuccess, "h2d");
  WT_TEST_REQUIRE(cudaMemcpy(d_dw, dw, (size_t)C * OC * 4, cudaMemcpyHostToDevice) == cudaSuccess,
                  "h2d");
  gpu->matmul_backward(d_dinp, d_dw, d_db, d_dout, d_inp, d_w, N, C, OC, layout);
  s_check_same(d_db, db1, OC, "matmul dbias");
  s_check_same(d_dw, dw1, (size_t)C * OC, "matmul dweight");
  void *all[] = {d_inp, d_w, d_dout, d_db, d_dw, d_dinp};
  for (size_t i = 0; i < WT_ARRAY_LEN(all); i++) cudaFree(all[i]);
  free(inp), free(w), free(dout), free(db), free(dw), free(dinp), free(db1), free(dw1);
}

/* crossentropy_forward_backward against the reference's forward then backward: a small
 * vocabulary, and GPT-2's (50,257: many elements per thread, rows not 16-byte aligned). */
static void test_crossentropy_fused(const kernels_ops *ref, const kernels_ops *gpu, int N, int V) {
  size_t nv = (size_t)N * V;
  int *targets = wt_xmalloc(sizeof(int) * (size_t)N);
  for (int i = 0; i < N; i++) targets[i] = (int)wt_rng_below(&s_rng, (uint64_t)V);
  float *logits = s_host_random(nv, 3), *losses = wt_xcalloc(N, 4), *lse = wt_xcalloc(N, 4);
  float *dlogits = wt_xcalloc(nv, 4);
  int *d_targets = s_to_device(targets, sizeof(int) * (size_t)N);
  float *d_logits = s_to_device(logits, nv * 4), *d_losses = s_to_device(losses, N * 4);
  float *d_lse = s_to_device(lse, N * 4), *d_dlogits = s_to_device(dlogits, nv * 4);
  float dloss = 0.5f; /* large enough that dlogits of 1e-4 and more occur at V = 50,257 */
  ref->crossentropy_forward(losses, lse, logits, targets, N, V);
  ref->crossentropy_backward(dlogits, logits, lse, targets, dloss, N, V);
  WT_TEST_REQUIRE(gpu->crossentropy_forward_backward != NULL,
                  "the cuda table has crossentropy_forward_backward");
  gpu->crossentropy_forward_backward(d_losses, d_lse, d_dlogits, d_logits, d_targets, dloss, N, V);
  s_check(d_losses, losses, N, "crossentropy_forward_backward losses");
  s_check(d_lse, lse, N, "crossentropy_forward_backward lse");
  s_check(d_dlogits, dlogits, nv, "crossentropy_forward_backward dlogits");
  s_check(d_logits, logits, nv, "crossentropy_forward_backward leaves the logits");
  float *first = s_download(d_dlogits, nv), *first_lse = s_download(d_lse, N);
  gpu->crossentropy_forward_backward(d_losses, d_lse, d_dlogits, d_logits, d_targets, dloss, N, V);
  s_check_same(d_dlogits, first, nv, "crossentropy_forward_backward dlogits");
  s_check_same(d_lse, first_lse, N, "crossentropy_forward_backward lse");
  /* the forward alone (the one-read kernel in the fused set) */
  WT_TEST_REQUIRE(cudaMemset(d_lse, 0, N * 4) == cudaSuccess, "memset");
  gpu->crossentropy_forward(d_losses, d_lse, d_logits, d_targets, N, V);
  s_check(d_losses, losses, N, "crossentropy_forward losses (large V)");
  s_check(d_lse, lse, N, "crossentropy_forward lse (large V)");
  void *all[] = {d_targets, d_logits, d_losses, d_lse, d_dlogits};
  for (size_t i = 0; i < WT_ARRAY_LEN(all); i++) cudaFree(all[i]);
  free(targets), free(logits), free(losses), free(lse), free(dlogits), free(first), free(first_lse);
}

/* adamw_update_tensors over tensors of several sizes (one empty, one of a single element, one
 * spanning many blocks) and two decays, against the reference's adamw_update per tensor. */
static void test_adamw_tensors(const kernels_ops *ref, const kernels_ops *gpu) {
  const size_t sizes[] = {300, 0, 1, 70000, 256, 257, 4097};
  enum { NT = sizeof sizes / sizeof sizes[0] };
  kernels_adamw_tensor ts[NT];
  size_t n = 0;
  for (int i = 0; i < NT; i++) {
    ts[i] = (kernels_adamw_tensor){.offset = n, .numel = sizes[i], .wd = i % 2 ? 0.0f : 0.1f};
    n += sizes[i];
  }
  float *p = s_host_random(n, 1), *g = s_host_random(n, 1), *m = s_host_random(n, 0.1f);
  float *v = wt_xmalloc(n * 4);
  for (size_t i = 0; i < n; i++) v[i] = m[i] * m[i];
  float *d_p = s_to_device(p, n * 4), *d_g = s_to_device(g, n * 4), *d_m = s_to_device(m, n * 4);
  float *d_v = s_to_device(v, n * 4);
  WT_TEST_REQUIRE(gpu->adamw_update_tensors != NULL, "the cuda table has adamw_update_tensors");
  for (int step = 1; step <= 3; step++) {
    float bc1 = 1.0f - powf(0.9f, (float)step), bc2 = 1.0f - powf(0.95f, (float)step);
    for (int i = 0; i < NT; i++) {
      size_t o = ts[i].offset;
      ref->adamw_update(p + o, g + o, m + o, v + o, ts[i].numel, 3e-3f, 0.9f, 0.95f, 1e-8f,
                        ts[i].wd, bc1, bc2, 0.7f);
    }
    gpu->adamw_update_tensors(d_p, d_g, d_m, d_v, ts, NT, 3e-3f, 0.9f, 0.95f, 1e-8f, bc1, bc2,
                              0.7f);
  }
  s_check(d_p, p, n, "adamw_update_tensors param");
  s_check(d_m, m, n, "adamw_update_tensors m");
  s_check(d_v, v, n, "adamw_update_tensors v");
  /* a second list on the same buffers (re-uploaded): only the first tensor moves */
  float *before = s_download(d_p, n);
  kernels_adamw_tensor one = ts[0];
  gpu->adamw_update_tensors(d_p, d_g, d_m, d_v, &one, 1, 3e-3f, 0.9f, 0.95f, 1e-8f, 0.5f, 0.5f,
                            0.7f);
  float *after = s_download(d_p, n);
  WT_TEST_ASSERT(memcmp(after + one.numel, before + one.numel, (n - one.numel) * 4) == 0,
                 "adamw_update_tensors with one tensor leaves the others alone");
  WT_TEST_ASSERT(memcmp(after, before, one.numel * 4) != 0,
                 "adamw_update_tensors with one tensor updates it");
  void *all[] = {d_p, d_g, d_m, d_v};
  for (size_t i = 0; i < WT_ARRAY_LEN(all); i++) cudaFree(all[i]);
  free(p), free(g), free(m), free(v), free(before), free(after);
}

/* bf16 bits of x, rounded to nearest even (finite x), as the GPU's __float2bfloat16_rn. */
static uint16_t s_bf16_bits(float x) {
  uint32_t u;
  memcpy(&u, &x, 4);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* matmul_forward_keep / matmul_backward_kept: at fp32 the same results as the reference, the
 * copy is inp rounded to bf16; at bf16 the same bits as matmul_forward / matmul_backward
 * (which round inp themselves), also when the forward ran at fp32 before the precision
 * changed. matmul_gelu_forward with a copy writes the same copy. */
static void test_matmul_keep(const kernels_ops *ref, const kernels_ops *gpu, kernels_wlayout layout,
                             int OC) {
  int N = 40, C = 64;
  size_t nx = (size_t)N * C, no = (size_t)N * OC, nw = (size_t)C * OC;
  float *inp = s_host_random(nx, 1), *w = s_host_random(nw, 0.2f), *bias = s_host_random(OC, 1);
  float *dout = s_host_random(no, 1), *out = wt_xcalloc(no, 4);
  float *dinp = wt_xcalloc(nx, 4), *dw = wt_xcalloc(nw, 4), *db = wt_xcalloc(OC, 4);
  float *d_inp = s_to_device(inp, nx * 4), *d_w = s_to_device(w, nw * 4);
  float *d_bias = s_to_device(bias, OC * 4), *d_dout = s_to_device(dout, no * 4);
  float *d_out = s_to_device(out, no * 4), *d_dinp = s_to_device(dinp, nx * 4);
  float *d_dw = s_to_device(dw, nw * 4), *d_db = s_to_device(db, OC * 4);
  void *d_kept = NULL;
  WT_TEST_REQUIRE(cudaMalloc(&d_kept, nx * 2) == cudaSuccess, "cudaMalloc");
  WT_TEST_REQUIRE(gpu->matmul_forward_keep && gpu->matmul_backward_kept, "the cuda table keeps");
  ref->matmul_forward(out, inp, w, bias, N, C, OC, layout);
  gpu->matmul_forward_keep(d_out, d_kept, d_inp, d_w, d_bias, N, C, OC, layout);
  s_check(d_out, out, no, "matmul_forward_keep out");
  uint16_t *kept = wt_xmalloc(nx * 2);
  WT_TEST_REQUIRE(cudaMemcpy(kept, d_kept, nx * 2, cudaMemcpyDeviceToHost) == cudaSuccess, "d2h");
  size_t wrong = 0;
  for (size_t i = 0; i < nx; i++) wrong += kept[i] != s_bf16_bits(inp[i]);
  const char *set = getenv("WANTRAIN_CUDA_KERNELS");
  if (!set || strcmp(set, "fused") != 0) wrong = 0; /* the plain kernels keep no copy */
  WT_TEST_ASSERT(wrong == 0, "matmul_forward_keep: %zu of %zu kept values are not bf16(inp)", wrong,
                 nx);
  ref->matmul_backward(dinp, dw, db, dout, inp, w, N, C, OC, layout);
  gpu->matmul_backward_kept(d_dinp, d_dw, d_db, d_dout, d_inp, d_kept, d_w, N, C, OC, layout);
  s_check(d_dinp, dinp, nx, "matmul_backward_kept dinp");
  s_check(d_dw, dw, nw, "matmul_backward_kept dweight");
  s_check(d_db, db, OC, "matmul_backward_kept dbias");
  /* bf16: the kept copy of the fp32 forward above against a fresh rounding */
  WT_TEST_REQUIRE(kernels_set_precision(gpu, KERNELS_PREC_BF16) == WT_OK, "bf16");
  float *dws[2], *dinps[2];
  for (int kept_copy = 0; kept_copy < 2; kept_copy++) {
    WT_TEST_REQUIRE(cudaMemset(d_dw, 0, nw * 4) == cudaSuccess &&
                        cudaMemset(d_db, 0, OC * 4) == 0 &&
                        cudaMemset(d_dinp, 0, nx * 4) == cudaSuccess,
                    "memset");
    if (kept_copy)
      gpu->matmul_backward_kept(d_dinp, d_dw, d_db, d_dout, d_inp, d_kept, d_w, N, C, OC, layout);
    else
      gpu->matmul_backward(d_dinp, d_dw, d_db, d_dout, d_inp, d_w, N, C, OC, layout);
    dws[kept_copy] = s_download(d_dw, nw), dinps[kept_copy] = s_download(d_dinp, nx);
  }
  WT_TEST_ASSERT(memcmp(dws[0], dws[1], nw * 4) == 0, "bf16 dweight: kept copy = fresh rounding");
  WT_TEST_ASSERT(memcmp(dinps[0], dinps[1], nx * 4) == 0, "bf16 dinp: kept copy = fresh rounding");
  /* a bf16 forward with the GELU op writes the same copy */
  WT_TEST_REQUIRE(cudaMemset(d_kept, 0, nx * 2) == cudaSuccess, "memset");
  if (OC % 8 == 0) {
    float *d_pre = s_to_device(out, no * 4);
    gpu->matmul_gelu_forward(d_out, d_pre, d_kept, d_inp, d_w, d_bias, N, C, OC, layout);
    uint16_t *kept2 = wt_xmalloc(nx * 2);
    WT_TEST_REQUIRE(cudaMemcpy(kept2, d_kept, nx * 2, cudaMemcpyDeviceToHost) == cudaSuccess,
                    "d2h");
    WT_TEST_ASSERT(memcmp(kept, kept2, nx * 2) == 0 || (set && strcmp(set, "plain") == 0),
                   "matmul_gelu_forward keeps the same copy");
    free(kept2);
    cudaFree(d_pre);
  }
  WT_TEST_REQUIRE(kernels_set_precision(gpu, KERNELS_PREC_FP32) == WT_OK, "fp32");
  void *all[] = {d_inp, d_w, d_bias, d_dout, d_out, d_dinp, d_dw, d_db, d_kept};
  for (size_t i = 0; i < WT_ARRAY_LEN(all); i++) cudaFree(all[i]);
  free(inp), free(w), free(bias), free(dout), free(out), free(dinp), free(dw), free(db), free(kept);
  for (int i = 0; i < 2; i++) free(dws[i]), free(dinps[i]);
}

int main(void) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    printf("test_cuda_kernels: no CUDA device; skipped\n");
    return WT_TEST_SKIP;
  }
  const kernels_ops *ref = kernels_ref(), *gpu = kernels_backend("cuda");
  WT_TEST_REQUIRE(gpu != NULL, "CUDA build without a cuda back end");
  const char *kernels = getenv("WANTRAIN_CUDA_KERNELS");
  printf("test_cuda_kernels: WANTRAIN_CUDA_KERNELS=%s\n", kernels ? kernels : "(unset: plain)");
  wt_rng_seed(&s_rng, 2026);
  test_matmul(ref, gpu, KERNELS_W_IN_OUT, 80);
  test_matmul(ref, gpu, KERNELS_W_OUT_IN, 80);
  test_matmul(ref, gpu, KERNELS_W_IN_OUT, 83);
  test_matmul(ref, gpu, KERNELS_W_OUT_IN, 83);
  test_layernorm(ref, gpu);
  test_attention(ref, gpu);
  test_encoder_and_loss(ref, gpu);
  test_elementwise_and_adamw(ref, gpu);
  for (int layout = 0; layout < 2; layout++) {
    test_matmul_gelu(ref, gpu, (kernels_wlayout)layout, 80, 1);
    test_matmul_gelu(ref, gpu, (kernels_wlayout)layout, 80, 0);
    test_matmul_gelu(ref, gpu, (kernels_wlayout)layout, 83, 1);
    test_matmul_backward_deterministic(gpu, (kernels_wlayout)layout);
    test_matmul_keep(ref, gpu, (kernels_wlayout)layout, 96);
    test_matmul_keep(ref, gpu, (kernels_wlayout)layout, 83);
  }
  test_crossentropy_fused(ref, gpu, 21, 50);
  test_crossentropy_fused(ref, gpu, 6, 50257);
  test_adamw_tensors(ref, gpu);
  return wt_test_finish("test_cuda_kernels");
}
