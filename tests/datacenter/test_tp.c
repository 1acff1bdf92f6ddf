/* test_tp — the tensor-parallel block (parallel/datacenter/tp.h) with t = 1, 2, 4 in-process ranks,
 * with and without sequence parallelism, against one block of the single-device model (model/gpt.h,
 * a stage holding layer 1 of 3), both on the reference kernels (threads of their own would crowd
 * the in-process ranks): outputs, input gradient and every parameter gradient agree, one
 * SGD step gives the same weights, and the bytes sent per step equal the formula of
 * docs/parallel.md.
 *
 * Tolerance: atol 1e-5 + rtol 1e-4. The row-parallel matmuls split an inner sum of C or 4C
 * products into t partial sums that the all-reduce adds in ring order, and the bias is added after
 * the reduction rather than inside the GEMM: float32 rounding of values of size ~1 differs by a
 * few ulps (~1e-7 each) accumulated over ≤ 128 terms, well under 1e-5. A wrong shard, head or
 * missing reduction gives errors of order 1e-1. */
#include "kernels/kernels.h"
#include "model/gpt.h"
#include "parallel/collectives/collectives.h"
#include "parallel/datacenter/mesh.h"
#include "parallel/datacenter/tp.h"

#include "common/common.h"
#include "common/testing.h"

#include <math.h>

enum { B = 2, T = 8, C = 32, NH = 4, N = B * T };
#define ATOL 1e-5
#define RTOL 1e-4
#define LR 0.1f
/* Bytes of the frame header on every collective message (parallel/collectives/frame_internal.h). */
#define FRAME_HEADER 32

typedef struct {
  int sp;
  const float *full[PARALLEL_TP_TENSORS];      /* reference weights */
  const float *full_grad[PARALLEL_TP_TENSORS]; /* reference gradients */
  const float *full_new[PARALLEL_TP_TENSORS];  /* reference weights after one SGD step */
  const float *x, *dout, *out, *dx;            /* (N, C) each */
  double max_err;
} s_ref;

static uint64_t s_rng = 0x9e3779b97f4a7c15ull;
static float s_uniform(void) { /* xorshift64*, in [-1, 1) */
  s_rng ^= s_rng >> 12, s_rng ^= s_rng << 25, s_rng ^= s_rng >> 27;
  return (float)((double)((s_rng * 2685821657736338717ull) >> 40) / (double)(1ull << 24)) * 2 - 1;
}

static double s_max_err(const float *a, const float *b, size_t n) {
  double m = 0;
  for (size_t i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
  return m;
}

/* Compares, records the max error; returns WT_OK or a message naming the tensor. */
static int s_close(s_ref *ref, const float *got, const float *want, size_t n, const char *what,
                   int rank) {
  double e = s_max_err(got, want, n);
  if (e > ref->max_err) ref->max_err = e; /* racy max across ranks: only reported */
  if (!wt_test_allclose(got, want, n, ATOL, RTOL, what))
    return wt_fail(WT_EMISMATCH, "rank %d: %s differs from the single-device block", rank, what);
  return WT_OK;
}

/* Expected bytes one rank sends in one forward + backward (docs/parallel.md): 4 all-reduces of
 * N·C floats (or 4 reduce-scatter + all-gather pairs with SP, the same bytes), each 2(t−1) ring
 * messages of N·C/t floats; with SP one more all-reduce of the 4C LayerNorm gradients. */
static uint64_t s_expected_bytes(int t, int sp) {
  if (t == 1) return 0;
  uint64_t msg = (uint64_t)N * C / t * sizeof(float) + FRAME_HEADER;
  uint64_t bytes = 4 * 2 * (uint64_t)(t - 1) * msg;
  if (sp) bytes += 2 * (uint64_t)(t - 1) * ((uint64_t)4 * C / t * sizeof(float) + FRAME_HEADER);
  return bytes;
}

static int s_rank_fn(parallel_comm *world, void *arg) {
  s_ref *ref = arg;
  int t = parallel_comm_size(world), r = parallel_comm_rank(world), rc = WT_OK;
  parallel_mesh_shape shape = {.dp = 1, .pp = 1, .tp = t, .cp = 1, .ep = 1};
  parallel_mesh *m = parallel_mesh_new(world, &shape, 1);
  parallel_tp_block *b = m ? parallel_tp_block_new(m, kernels_ref(), C, NH, B, T, ref->sp) : NULL;
  if (!b) {
    parallel_mesh_destroy(&m);
    return WT_EINVAL;
  }
  parallel_tp_block_load(b, ref->full);
  int first, rows;
  parallel_tp_block_rows(b, B, T, &first, &rows);
  float *out = wt_xcalloc((size_t)rows * C, sizeof(float));
  float *dx = wt_xcalloc((size_t)rows * C, sizeof(float));
  float *shard = wt_xcalloc((size_t)C * 4 * C, sizeof(float));
  size_t off = (size_t)first * C, n_rows = (size_t)rows * C;
  parallel_comm *tp = parallel_mesh_group(m, PARALLEL_GROUP_TP);
  parallel_comm_reset_counters(tp);

  WT_CHECK_GOTO(parallel_tp_block_forward(b, ref->x + off, out, B, T), rc, done);
  WT_CHECK_GOTO(parallel_tp_block_backward(b, ref->dout + off, dx), rc, done);
  WT_CHECK_GOTO(s_close(ref, out, ref->out + off, n_rows, "block output", r), rc, done);
  WT_CHECK_GOTO(s_close(ref, dx, ref->dx + off, n_rows, "input gradient", r), rc, done);
  for (int i = 0; i < PARALLEL_TP_TENSORS; i++) {
    size_t n;
    float *g = parallel_tp_block_grad(b, (parallel_tp_tensor)i, &n);
    parallel_tp_shard((parallel_tp_tensor)i, C, NH, r, t, ref->full_grad[i], shard);
    char what[32];
    snprintf(what, sizeof what, "gradient of tensor %d", i);
    WT_CHECK_GOTO(s_close(ref, g, shard, n, what, r), rc, done);
  }
  uint64_t sent = parallel_comm_bytes_sent(tp);
  if (r == 0)
    printf("tp %d sequence-parallel %d: %llu bytes sent per rank per forward + backward "
           "(B %d, T %d, C %d)\n",
           t, ref->sp, (unsigned long long)sent, B, T, C);
  if (sent != s_expected_bytes(t, ref->sp)) {
    rc = wt_fail(WT_EMISMATCH, "rank %d sent %llu bytes, formula says %llu", r,
                 (unsigned long long)sent, (unsigned long long)s_expected_bytes(t, ref->sp));
    goto done;
  }
  /* One SGD step on the shards vs the same step on the full weights, then sharded. */
  for (int i = 0; i < PARALLEL_TP_TENSORS && rc == WT_OK; i++) {
    size_t n;
    float *p = parallel_tp_block_param(b, (parallel_tp_tensor)i, &n);
    const float *g = parallel_tp_block_grad(b, (parallel_tp_tensor)i, NULL);
    for (size_t j = 0; j < n; j++) p[j] -= LR * g[j];
    parallel_tp_shard((parallel_tp_tensor)i, C, NH, r, t, ref->full_new[i], shard);
    rc = s_close(ref, p, shard, n, "weights after one SGD step", r);
  }
done:
  if (rc != WT_OK) fprintf(stderr, "rank %d: %s\n", r, wt_last_error());
  free(out), free(dx), free(shard);
  parallel_tp_block_destroy(&b);
  parallel_mesh_destroy(&m);
  return rc;
}

/* Indices of the block's 12 tensors among a one-layer stage's tensors, by name. */
static const char *const s_names[PARALLEL_TP_TENSORS] = {
    "h.1.ln_1.weight",      "h.1.ln_1.bias",          "h.1.attn.c_attn.weight",
    "h.1.attn.c_attn.bias", "h.1.attn.c_proj.weight", "h.1.attn.c_proj.bias",
    "h.1.ln_2.weight",      "h.1.ln_2.bias",          "h.1.mlp.c_fc.weight",
    "h.1.mlp.c_fc.bias",    "h.1.mlp.c_proj.weight",  "h.1.mlp.c_proj.bias"};

static void test_tp(int t, int sp) {
  gpt_config cfg = {.vocab_size = 64, .max_seq = T, .n_layer = 3, .n_head = NH, .channels = C};
  gpt_stage *st = gpt_stage_new(&cfg, 1, 2, B, T);
  WT_TEST_REQUIRE(st, "stage: %s", wt_last_error());
  gpt_stage_set_kernels(st, kernels_ref());
  size_t np;
  float *params = gpt_stage_params(st, &np);
  float *grads = gpt_stage_grads(st, NULL);
  /* Random weights everywhere (biases and LayerNorm too, so every term of the block matters). */
  s_rng = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i < np; i++) params[i] = 0.2f * s_uniform();
  s_ref ref = {.sp = sp};
  for (int i = 0; i < PARALLEL_TP_TENSORS; i++) {
    int found = 0;
    for (int k = 0; k < gpt_stage_num_tensors(st); k++) {
      const gpt_tensor_info *ti = gpt_stage_tensor(st, k);
      if (strcmp(ti->name, s_names[i]) == 0) {
        ref.full[i] = params + ti->offset, ref.full_grad[i] = grads + ti->offset, found = 1;
        if (strstr(s_names[i], "ln_") && strstr(s_names[i], "weight"))
          for (size_t j = 0; j < ti->numel; j++) params[ti->offset + j] += 1.0f;
      }
    }
    WT_TEST_REQUIRE(found, "stage has no %s", s_names[i]);
  }
  float *x = wt_xmalloc(sizeof(float) * N * C), *dout = wt_xmalloc(sizeof(float) * N * C);
  float *out = wt_xmalloc(sizeof(float) * N * C), *dx = wt_xcalloc(N * C, sizeof(float));
  for (int i = 0; i < N * C; i++) x[i] = s_uniform(), dout[i] = s_uniform();
  gpt_stage_zero_grad(st);
  WT_TEST_REQUIRE(gpt_stage_forward(st, NULL, x, NULL, B, T, out) == WT_OK, "%s", wt_last_error());
  WT_TEST_REQUIRE(gpt_stage_backward(st, dout, dx, 1.0f) == WT_OK, "%s", wt_last_error());
  float *next = wt_xmalloc(sizeof(float) * np);
  for (size_t i = 0; i < np; i++) next[i] = params[i] - LR * grads[i];
  for (int i = 0; i < PARALLEL_TP_TENSORS; i++) ref.full_new[i] = next + (ref.full[i] - params);
  ref.x = x, ref.dout = dout, ref.out = out, ref.dx = dx;

  parallel_inproc_group *g = parallel_inproc_group_new(t);
  parallel_inproc_group_set_timeout(g, 30);
  int rc = parallel_inproc_run(g, s_rank_fn, &ref, NULL);
  WT_TEST_ASSERT(rc == WT_OK, "tp %d sp %d: %s", t, sp, wt_last_error());
  printf(
      "tp %d sequence-parallel %d: max abs error vs single device %.3g (tolerance %g + %g|ref|)\n",
      t, sp, ref.max_err, ATOL, RTOL);
  parallel_inproc_group_destroy(&g);
  free(x), free(dout), free(out), free(dx), free(next);
  gpt_stage_destroy(&st);
}

/* A degree that does not divide the heads is refused with a message. */
static int s_bad_fn(parallel_comm *world, void *arg) {
  (void)arg;
  parallel_mesh_shape shape = {.dp = 1, .pp = 1, .tp = parallel_comm_size(world), .cp = 1, .ep = 1};
  parallel_mesh *m = parallel_mesh_new(world, &shape, 1);
  parallel_tp_block *b = parallel_tp_block_new(m, kernels_ref(), 24, 6, B, T, 0); /* 6 % 4 */
  int rc = b == NULL && strstr(wt_last_error(), "multiple of the TP degree") ? WT_OK : WT_EINVAL;
  parallel_tp_block_destroy(&b);
  parallel_mesh_destroy(&m);
  return rc;
}

int main(void) {
  for (int sp = 0; sp <= 1; sp++) {
    test_tp(1, sp);
    test_tp(2, sp);
    test_tp(4, sp);
  }
  parallel_inproc_group *g = parallel_inproc_group_new(4);
  WT_TEST_ASSERT(parallel_inproc_run(g, s_bad_fn, NULL, NULL) == WT_OK, "bad degree accepted");
  parallel_inproc_group_destroy(&g);
  return wt_test_failures ? 1 : 0;
}
