/* test_cuda_kernels — every op of the "cuda" back end against the "ref" back end on the same
 * random inputs (the STYLE.md rule: fast paths are tested against the readable reference).
 *
 * Tolerances: the reference accumulates in double where it matters, the GPU in fp32 with a
 * different summation order. For sums of K products of O(1) values the fp32 rounding error is
 * about sqrt(K)·2^-24·|terms|, far below 1e-4 for K ≤ 256, so atol 1e-4 + rtol 1e-4 separates
 * rounding from a wrong index or a missing term (which give O(0.1) errors). Exits 77 when no
 * CUDA device is present. */
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

int main(void) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    printf("test_cuda_kernels: no CUDA device; skipped\n");
    return WT_TEST_SKIP;
  }
  const kernels_ops *ref = kernels_ref(), *gpu = kernels_backend("cuda");
  WT_TEST_REQUIRE(gpu != NULL, "CUDA build without a cuda back end");
  wt_rng_seed(&s_rng, 2026);
  test_matmul(ref, gpu, KERNELS_W_IN_OUT, 80);
  test_matmul(ref, gpu, KERNELS_W_OUT_IN, 80);
  test_matmul(ref, gpu, KERNELS_W_IN_OUT, 83);
  test_matmul(ref, gpu, KERNELS_W_OUT_IN, 83);
  test_layernorm(ref, gpu);
  test_attention(ref, gpu);
  test_encoder_and_loss(ref, gpu);
  test_elementwise_and_adamw(ref, gpu);
  return wt_test_finish("test_cuda_kernels");
}
