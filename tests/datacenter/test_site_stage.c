/* test_site_stage — a pipeline stage run by a site of t tensor-parallel × c context-parallel ranks
 * (parallel/datacenter/site.h) against the single-device stage (model/gpt.h) on the same weights
 * and micro-batches:
 *   - t × c = 1×1, 2×1, 4×1, 1×2, 2×2, 1×4 for a first, middle, last and whole-model stage:
 *     act_out, the loss, grad_in and
 *     every gradient (two micro-batches accumulated, loss_scale 1/2, gathered back into gpt_stage
 *     layout by parallel_site_grads) agree within atol 1e-5 + rtol 1e-4 (tp.h: the split inner
 *     sums round differently in float32; a wrong shard or a lost gradient is off by ~1e-1);
 *     the max error is printed;
 *   - the site's bytes equal the formula of docs/parallel.md (TP all-reduces on each CP rank's
 *     rows, ring attention blocks) for its forwards and backwards;
 *   - a sequence length that is not a multiple of 2c is refused, at construction and per batch;
 *   - a bad token (first stage) or target (last stage) is returned as WT_EINVAL naming it, not
 *     hung, and the site works again afterwards;
 *   - a TP degree that does not divide the heads and a device back end are refused with a
 *     message;
 *   - an MoE model (every block MoE, E = 4, top-2) on sites of 1, 2 and 4 EP ranks, the same four
 *     stages: with a capacity that drops nothing and no aux loss, act_out, the loss, grad_in and
 *     every gradient (dense, router, each expert) equal the single-device stage on the whole
 *     micro-batches; with a tight capacity (tokens dropped) and an aux loss, they equal one device
 *     that runs each rank's rows as its own micro-batch, and so do the dropped pairs; the bytes
 *     equal moe.h's all-to-all formula; E or rows not a multiple of the ranks, MoE with CP, a
 *     dense stage and a bad token are refused;
 *   - parallel_site_device reports N × efficiency × one device's FLOP/s and N × its memory for a
 *     site, one device as itself.
 * Both sides run the reference kernels. */
#include "kernels/kernels.h"
#include "model/gpt.h"
#include "parallel/datacenter/site.h"

#include "common/common.h"
#include "common/testing.h"

#include <math.h>
#include <string.h>

enum { B = 2, T = 8, C = 32, NH = 4, L = 3, V = 67, N = B * T, MB = 2 };
#define ATOL 1e-5
#define RTOL 1e-4

static const gpt_config s_cfg = {
    .vocab_size = V, .max_seq = T, .n_layer = L, .n_head = NH, .channels = C};

static uint64_t s_rng;
static float s_uniform(void) { /* xorshift64*, in [-1, 1) */
  s_rng ^= s_rng >> 12, s_rng ^= s_rng << 25, s_rng ^= s_rng >> 27;
  return (float)((double)((s_rng * 2685821657736338717ull) >> 40) / (double)(1ull << 24)) * 2 - 1;
}

static double s_max_err;

static int s_close(const float *got, const float *want, size_t n, const char *what) {
  for (size_t i = 0; i < n; i++) s_max_err = fmax(s_max_err, fabs((double)got[i] - want[i]));
  return wt_test_allclose(got, want, n, ATOL, RTOL, what);
}

static gpt_stage *s_stage(int first, int last) {
  gpt_stage *st = gpt_stage_new(&s_cfg, first, last, B, T);
  WT_TEST_REQUIRE(st, "stage: %s", wt_last_error());
  gpt_stage_set_kernels(st, kernels_ref());
  return st;
}

/* Random weights (LayerNorm weights around 1) drawn by tensor name, so every stage holding a
 * tensor gets the same values. */
static void s_fill(gpt_stage *st) {
  float *p = gpt_stage_params(st, NULL);
  for (int k = 0; k < gpt_stage_num_tensors(st); k++) {
    const gpt_tensor_info *ti = gpt_stage_tensor(st, k);
    s_rng = 0x2545f4914f6cdd1dull;
    for (const char *c = ti->name; *c; c++) s_rng = (s_rng ^ (uint8_t)*c) * 1099511628211ull;
    for (size_t j = 0; j < ti->numel; j++)
      p[ti->offset + j] = 0.2f * s_uniform() +
                          (strstr(ti->name, "ln_") && strstr(ti->name, "weight") ? 1.0f : 0.0f);
  }
}

/* Total bytes of one ring all-reduce of n floats over p ranks, all ranks together: each rank
 * sends 2n − (two chunks) floats in 2(p − 1) messages with a 32-byte header (docs/parallel.md);
 * the chunks of all ranks add up to n twice. */
static uint64_t s_allreduce_bytes(size_t n, int p) {
  return p == 1 ? 0 : (uint64_t)(p - 1) * (8 * n + 64 * (uint64_t)p);
}

/* Bytes a site of t × c ranks sends in one forward and one backward of N rows
 * (docs/parallel.md): each of the c TP groups all-reduces its N/c rows; each block's ring
 * attention sends (c − 1) K/V blocks forward and (c − 1) K/V + c dK/dV blocks backward per rank,
 * a block being B·(T/c)·2C/t floats (this rank's heads), so 8·N·C·(c − 1) and 8·N·C·(2c − 1)
 * bytes over all t·c ranks. */
static uint64_t s_pass_bytes(int first, int last, int t, int c) {
  int blocks = last - first, has_first = first == 0, has_last = last == L;
  uint64_t NC = (uint64_t)c * s_allreduce_bytes((size_t)N / c * C, t);
  uint64_t fwd = NC * (uint64_t)(2 * blocks + has_first) +
                 (has_last ? (uint64_t)c * s_allreduce_bytes((size_t)N / c * (t + 1), t) : 0);
  uint64_t bwd = NC * (uint64_t)(2 * blocks + has_last);
  uint64_t ring = c == 1 ? 0 : (uint64_t)blocks * 8 * N * C * (uint64_t)(3 * c - 2);
  return fwd + bwd + ring;
}

static void test_stage(int first, int last, int t, int c) {
  const int has_first = first == 0, has_last = last == L;
  gpt_stage *ref = s_stage(first, last), *canon = s_stage(first, last);
  s_fill(ref), s_fill(canon);
  parallel_site *site = parallel_site_new(&s_cfg, first, last, B, T, t, c, kernels_ref());
  WT_TEST_REQUIRE(site, "site t=%d c=%d: %s", t, c, wt_last_error());
  WT_TEST_ASSERT(parallel_site_ranks(site) == t * c && parallel_site_tp(site) == t &&
                     parallel_site_cp(site) == c,
                 "site t=%d c=%d reports %d ranks, tp %d, cp %d", t, c, parallel_site_ranks(site),
                 parallel_site_tp(site), parallel_site_cp(site));
  parallel_site_set_timeout(site, 30);
  WT_TEST_REQUIRE(parallel_site_load(site, canon) == WT_OK, "%s", wt_last_error());
  int tokens[MB][N], targets[MB][N];
  static float act_in[MB][N * C], grad_out[MB][N * C];
  static float out_ref[N * C], out_site[N * C], gin_ref[N * C], gin_site[N * C];
  s_rng = 0x9e3779b97f4a7c15ull + (uint64_t)first * 7 + (uint64_t)last;
  for (int j = 0; j < MB; j++)
    for (int i = 0; i < N; i++) {
      tokens[j][i] = (int)(fabsf(s_uniform()) * V) % V;
      targets[j][i] = (int)(fabsf(s_uniform()) * V) % V;
    }
  for (int j = 0; j < MB; j++)
    for (int i = 0; i < N * C; i++) act_in[j][i] = s_uniform(), grad_out[j][i] = 0.1f * s_uniform();
  s_max_err = 0;
  uint64_t bytes0 = parallel_site_bytes(site);
  char what[96];
  for (int j = 0; j < MB; j++) {
    const int *tok = has_first ? tokens[j] : NULL, *tgt = has_last ? targets[j] : NULL;
    const float *in = has_first ? NULL : act_in[j], *gout = has_last ? NULL : grad_out[j];
    WT_TEST_REQUIRE(gpt_stage_forward(ref, tok, in, tgt, B, T, has_last ? NULL : out_ref) == WT_OK,
                    "%s", wt_last_error());
    WT_TEST_REQUIRE(parallel_site_forward(site, tok, in, tgt, B, T, has_last ? NULL : out_site) ==
                        WT_OK,
                    "site forward: %s", wt_last_error());
    if (has_last) {
      float a = parallel_site_loss(site), b = gpt_stage_loss(ref);
      s_max_err = fmax(s_max_err, fabs((double)a - b));
      WT_TEST_ASSERT(fabsf(a - b) <= 1e-5f + 1e-5f * fabsf(b), "loss %.7f, single device %.7f", a,
                     b);
    } else {
      snprintf(what, sizeof what, "act_out [%d,%d) t=%d c=%d", first, last, t, c);
      s_close(out_site, out_ref, (size_t)N * C, what);
    }
    WT_TEST_REQUIRE(gpt_stage_backward(ref, gout, has_first ? NULL : gin_ref, 0.5f) == WT_OK, "%s",
                    wt_last_error());
    WT_TEST_REQUIRE(parallel_site_backward(site, gout, has_first ? NULL : gin_site, 0.5f) == WT_OK,
                    "site backward: %s", wt_last_error());
    if (!has_first) {
      snprintf(what, sizeof what, "grad_in [%d,%d) t=%d c=%d", first, last, t, c);
      s_close(gin_site, gin_ref, (size_t)N * C, what);
    }
  }
  uint64_t sent = parallel_site_bytes(site) - bytes0, want = MB * s_pass_bytes(first, last, t, c);
  WT_TEST_ASSERT(sent == want, "[%d,%d) t=%d c=%d sent %llu bytes, formula %llu", first, last, t, c,
                 (unsigned long long)sent, (unsigned long long)want);
  /* Gathered back twice: the second adds nothing (the site's gradients were moved, not copied). */
  for (int rep = 0; rep < 2; rep++)
    WT_TEST_REQUIRE(parallel_site_grads(site, canon) == WT_OK, "%s", wt_last_error());
  const float *gr = gpt_stage_grads(ref, NULL), *gs = gpt_stage_grads(canon, NULL);
  for (int k = 0; k < gpt_stage_num_tensors(ref); k++) {
    const gpt_tensor_info *ti = gpt_stage_tensor(ref, k);
    snprintf(what, sizeof what, "grad %s [%d,%d) t=%d c=%d", ti->name, first, last, t, c);
    s_close(gs + ti->offset, gr + ti->offset, ti->numel, what);
  }
  printf("site [%d,%d) of %d layers, %d tp x %d cp ranks: max error %.3g, %llu bytes in the "
         "site\n",
         first, last, L, t, c, s_max_err, (unsigned long long)sent);
  parallel_site_destroy(&site);
  gpt_stage_destroy(&ref), gpt_stage_destroy(&canon);
}

/* A bad id is refused on every rank before anything is sent; the site then works again. */
static void test_bad_input(void) {
  gpt_stage *st = s_stage(0, L);
  s_fill(st);
  parallel_site *site = parallel_site_new(&s_cfg, 0, L, B, T, 2, 1, kernels_ref());
  WT_TEST_REQUIRE(site && parallel_site_load(site, st) == WT_OK, "%s", wt_last_error());
  parallel_site_set_timeout(site, 10);
  int tokens[N] = {0}, targets[N] = {0};
  tokens[3] = V;
  double t0 = wt_now_s();
  int rc = parallel_site_forward(site, tokens, NULL, targets, B, T, NULL);
  WT_TEST_ASSERT(rc == WT_EINVAL && strstr(wt_last_error(), "token 67") &&
                     strstr(wt_last_error(), "rank"),
                 "bad token: rc %d '%s'", rc, wt_last_error());
  tokens[3] = 0, targets[5] = -1;
  rc = parallel_site_forward(site, tokens, NULL, targets, B, T, NULL);
  WT_TEST_ASSERT(rc == WT_EINVAL && strstr(wt_last_error(), "target -1"), "bad target: rc %d '%s'",
                 rc, wt_last_error());
  WT_TEST_ASSERT(wt_now_s() - t0 < 5, "refusals took %.1f s: someone waited", wt_now_s() - t0);
  rc = parallel_site_backward(site, NULL, NULL, 1.0f);
  WT_TEST_ASSERT(rc == WT_EINVAL, "backward after a failed forward: rc %d", rc);
  targets[5] = 1;
  rc = parallel_site_forward(site, tokens, NULL, targets, B, T, NULL);
  WT_TEST_ASSERT(rc == WT_OK && isfinite(parallel_site_loss(site)),
                 "the site does not work after a refusal: %s", wt_last_error());
  WT_TEST_ASSERT(parallel_site_forward(site, tokens, NULL, targets, B + 1, T, NULL) == WT_EINVAL,
                 "a batch larger than the site was accepted");
  gpt_stage *other = s_stage(0, 1);
  WT_TEST_ASSERT(parallel_site_load(site, other) == WT_EINVAL && strstr(wt_last_error(), "[0, 1)"),
                 "another stage was loaded: %s", wt_last_error());
  gpt_stage_destroy(&other);
  parallel_site_destroy(&site);
  gpt_stage_destroy(&st);
}

static void test_refusals(void) {
  WT_TEST_ASSERT(!parallel_site_new(&s_cfg, 0, L, B, T, 3, 1, kernels_ref()) &&
                     wt_last_status() == WT_EINVAL && strstr(wt_last_error(), "heads"),
                 "3 ranks for 4 heads: %s", wt_last_error());
  kernels_ops gpu = *kernels_ref();
  gpu.name = "cuda", gpu.device = 1;
  WT_TEST_ASSERT(!parallel_site_new(&s_cfg, 0, L, B, T, 2, 1, &gpu) &&
                     wt_last_status() == WT_ENOTSUP && strstr(wt_last_error(), "process-wide"),
                 "device back end: %s", wt_last_error());
  WT_TEST_ASSERT(!parallel_site_new(&s_cfg, 2, 2, B, T, 2, 1, kernels_ref()),
                 "an empty layer range was accepted");
  /* T = 8 splits into 2c chunks for c = 2 and 4, not for c = 3. */
  WT_TEST_ASSERT(!parallel_site_new(&s_cfg, 0, L, B, T, 1, 3, kernels_ref()) &&
                     wt_last_status() == WT_EINVAL && strstr(wt_last_error(), "multiple of 6"),
                 "cp 3 with T = 8: %s", wt_last_error());
  WT_TEST_ASSERT(!parallel_site_new(&s_cfg, 0, L, B, T, 2, 40, kernels_ref()) &&
                     wt_last_status() == WT_EINVAL,
                 "80 ranks accepted");
}

/* A batch whose length does not split into 2c chunks is refused before any rank runs. */
static void test_bad_length(void) {
  gpt_stage *st = s_stage(1, 2);
  s_fill(st);
  parallel_site *site = parallel_site_new(&s_cfg, 1, 2, B, T, 1, 2, kernels_ref());
  WT_TEST_REQUIRE(site && parallel_site_load(site, st) == WT_OK, "%s", wt_last_error());
  static float in[N * C], out[N * C];
  int rc = parallel_site_forward(site, NULL, in, NULL, B, 6, out);
  WT_TEST_ASSERT(rc == WT_EINVAL && strstr(wt_last_error(), "multiple of 4"),
                 "T = 6 on cp 2: rc %d '%s'", rc, wt_last_error());
  WT_TEST_ASSERT(parallel_site_forward(site, NULL, in, NULL, B, 4, out) == WT_OK,
                 "T = 4 on cp 2: %s", wt_last_error());
  parallel_site_destroy(&site);
  gpt_stage_destroy(&st);
}

/* The device a site reports: the aggregate for several, itself for one. */
static void test_device(void) {
  double f = -1, m = -1;
  WT_TEST_ASSERT(parallel_site_device(2, 0.9, 1e9, 8e9, &f, &m) == WT_OK && fabs(f - 1.8e9) < 1 &&
                     m == 16e9,
                 "site of 2: %g FLOP/s, %g bytes", f, m);
  WT_TEST_ASSERT(parallel_site_device(1, 0.9, 1e9, 8e9, &f, &m) == WT_OK && f == 1e9 && m == 8e9,
                 "one device: %g FLOP/s, %g bytes", f, m);
  f = m = -1;
  WT_TEST_ASSERT(parallel_site_device(0, 0.9, 1e9, 8e9, &f, &m) == WT_EINVAL && f == -1,
                 "0 devices accepted");
}

/* ---- MoE: the site's ranks as EP ranks --------------------------------------------------- */

enum { BM = 4, NM = BM * T, E = 4, K = 2 };

static gpt_config s_moe_cfg(float capacity, float aux) {
  gpt_config m = s_cfg;
  m.moe_experts = E, m.moe_top_k = K, m.moe_capacity = capacity, m.moe_aux_weight = aux;
  WT_TEST_REQUIRE(gpt_config_set_moe_layers(&m, "all") == WT_OK, "%s", wt_last_error());
  return m;
}

/* An MoE stage (every block MoE, E = 4, top-2) on a site of P EP ranks against one device on
 * the same weights and two micro-batches of BM rows:
 *   per_rank 0: the device runs each micro-batch whole (a capacity that drops nothing and no aux
 *     loss, which is per rank's rows on the site);
 *   per_rank 1: the device runs each rank's BM/P rows as its own micro-batch (loss_scale / P),
 *     so its capacity and aux loss see the rows each EP rank sees: equal with drops too.
 * Checks act_out, the loss, grad_in, every gradient (dense, router, each expert) and the bytes of
 * the all-to-alls (moe.h: 4·(P − 1)·(E/P)·cap·C·4 per rank per MoE block per forward + backward).
 */
static void test_moe_stage(int first, int last, int P, float capacity, float aux, int per_rank) {
  const int has_first = first == 0, has_last = last == L, Bl = BM / P;
  gpt_config cfg = s_moe_cfg(capacity, aux);
  gpt_stage *ref = gpt_stage_new(&cfg, first, last, BM, T),
            *canon = gpt_stage_new(&cfg, first, last, BM, T);
  WT_TEST_REQUIRE(ref && canon, "stage: %s", wt_last_error());
  gpt_stage_set_kernels(ref, kernels_ref()), gpt_stage_set_kernels(canon, kernels_ref());
  s_fill(ref), s_fill(canon);
  parallel_site *site = parallel_site_new(&cfg, first, last, BM, T, P, 1, kernels_ref());
  WT_TEST_REQUIRE(site, "MoE site P=%d: %s", P, wt_last_error());
  WT_TEST_ASSERT(parallel_site_ranks(site) == P && parallel_site_ep(site) == P &&
                     parallel_site_tp(site) == 1 && parallel_site_cp(site) == 1,
                 "MoE site of %d reports %d ranks, ep %d, tp %d", P, parallel_site_ranks(site),
                 parallel_site_ep(site), parallel_site_tp(site));
  parallel_site_set_timeout(site, 30);
  WT_TEST_REQUIRE(parallel_site_load(site, canon) == WT_OK, "%s", wt_last_error());
  static int tokens[MB][NM], targets[MB][NM];
  static float act_in[MB][NM * C], grad_out[MB][NM * C];
  static float out_ref[NM * C], out_site[NM * C], gin_ref[NM * C], gin_site[NM * C];
  s_rng = 0x51ed2701a3c4e5f7ull + (uint64_t)first * 7 + (uint64_t)last;
  for (int j = 0; j < MB; j++)
    for (int i = 0; i < NM; i++) {
      tokens[j][i] = (int)(fabsf(s_uniform()) * V) % V;
      targets[j][i] = (int)(fabsf(s_uniform()) * V) % V;
    }
  for (int j = 0; j < MB; j++)
    for (int i = 0; i < NM * C; i++)
      act_in[j][i] = s_uniform(), grad_out[j][i] = 0.1f * s_uniform();
  s_max_err = 0;
  uint64_t bytes0 = parallel_site_bytes(site);
  long dropped = 0;
  char what[128];
  for (int j = 0; j < MB; j++) {
    const int *tok = has_first ? tokens[j] : NULL, *tgt = has_last ? targets[j] : NULL;
    const float *in = has_first ? NULL : act_in[j], *gout = has_last ? NULL : grad_out[j];
    WT_TEST_REQUIRE(parallel_site_forward(site, tok, in, tgt, BM, T, has_last ? NULL : out_site) ==
                        WT_OK,
                    "MoE site forward: %s", wt_last_error());
    WT_TEST_REQUIRE(parallel_site_backward(site, gout, has_first ? NULL : gin_site, 0.5f) == WT_OK,
                    "MoE site backward: %s", wt_last_error());
    /* The reference: the whole micro-batch, or each rank's rows as one. */
    const int parts = per_rank ? P : 1, rows = BM / parts;
    double loss = 0;
    for (int p = 0; p < parts; p++) {
      const size_t r0 = (size_t)p * rows * T;
      WT_TEST_REQUIRE(gpt_stage_forward(ref, tok ? tok + r0 : NULL, in ? in + r0 * C : NULL,
                                        tgt ? tgt + r0 : NULL, rows, T,
                                        has_last ? NULL : out_ref + r0 * C) == WT_OK,
                      "%s", wt_last_error());
      if (has_last) loss += gpt_stage_loss(ref);
      WT_TEST_REQUIRE(gpt_stage_backward(ref, gout ? gout + r0 * C : NULL,
                                         has_first ? NULL : gin_ref + r0 * C,
                                         0.5f / (float)parts) == WT_OK,
                      "%s", wt_last_error());
    }
    if (has_last) {
      float a = parallel_site_loss(site), b = (float)(loss / parts);
      s_max_err = fmax(s_max_err, fabs((double)a - b));
      WT_TEST_ASSERT(fabsf(a - b) <= 1e-5f + 1e-5f * fabsf(b),
                     "MoE P=%d loss %.7f, single device %.7f", P, a, b);
    } else {
      snprintf(what, sizeof what, "MoE act_out [%d,%d) P=%d", first, last, P);
      s_close(out_site, out_ref, (size_t)NM * C, what);
    }
    if (!has_first) {
      snprintf(what, sizeof what, "MoE grad_in [%d,%d) P=%d", first, last, P);
      s_close(gin_site, gin_ref, (size_t)NM * C, what);
    }
  }
  int cap = (int)ceil((double)capacity * Bl * T * K / E);
  uint64_t want = (uint64_t)MB * (last - first) * P * 4ull * (P - 1) * (E / P) *
                  (uint64_t)(cap < 1 ? 1 : cap) * C * sizeof(float);
  uint64_t sent = parallel_site_bytes(site) - bytes0;
  WT_TEST_ASSERT(sent == want, "MoE [%d,%d) P=%d sent %llu bytes, formula %llu", first, last, P,
                 (unsigned long long)sent, (unsigned long long)want);
  WT_TEST_REQUIRE(parallel_site_moe_stats(site, NULL, &dropped, NULL, NULL) == last - first,
                  "MoE stats: %d blocks", parallel_site_moe_stats(site, NULL, NULL, NULL, NULL));
  long ref_dropped = 0;
  gpt_stage_moe_stats(ref, NULL, &ref_dropped, NULL, NULL);
  if (per_rank)
    WT_TEST_ASSERT(dropped == ref_dropped, "MoE P=%d dropped %ld pairs, the device %ld", P, dropped,
                   ref_dropped);
  else
    WT_TEST_ASSERT(dropped == 0 && ref_dropped == 0, "capacity %g dropped %ld / %ld", capacity,
                   dropped, ref_dropped);
  for (int rep = 0; rep < 2; rep++)
    WT_TEST_REQUIRE(parallel_site_grads(site, canon) == WT_OK, "%s", wt_last_error());
  const float *gr = gpt_stage_grads(ref, NULL), *gs = gpt_stage_grads(canon, NULL);
  for (int k = 0; k < gpt_stage_num_tensors(ref); k++) {
    const gpt_tensor_info *ti = gpt_stage_tensor(ref, k);
    snprintf(what, sizeof what, "grad %s [%d,%d) P=%d", ti->name, first, last, P);
    s_close(gs + ti->offset, gr + ti->offset, ti->numel, what);
  }
  printf("MoE site [%d,%d), %d EP ranks, capacity %g%s: max error %.3g, %ld pairs dropped, "
         "%llu bytes in the site\n",
         first, last, P, capacity, per_rank ? " (vs each rank's rows)" : "", s_max_err, dropped,
         (unsigned long long)sent);
  parallel_site_destroy(&site);
  gpt_stage_destroy(&ref), gpt_stage_destroy(&canon);
}

static void test_moe_refusals(void) {
  gpt_config moe = s_moe_cfg(2.0f, 0);
  WT_TEST_ASSERT(!parallel_site_new(&moe, 0, L, 6, T, 3, 1, kernels_ref()) &&
                     wt_last_status() == WT_EINVAL && strstr(wt_last_error(), "4 experts"),
                 "4 experts on 3 EP ranks: %s", wt_last_error());
  WT_TEST_ASSERT(!parallel_site_new(&moe, 0, L, 3, T, 2, 1, kernels_ref()) &&
                     wt_last_status() == WT_EINVAL && strstr(wt_last_error(), "3 rows"),
                 "3 rows on 2 EP ranks: %s", wt_last_error());
  WT_TEST_ASSERT(!parallel_site_new(&moe, 0, L, BM, T, 1, 2, kernels_ref()) &&
                     wt_last_status() == WT_EINVAL && strstr(wt_last_error(), "context"),
                 "MoE with CP: %s", wt_last_error());
  gpt_stage *st = gpt_stage_new(&moe, 1, 2, BM, T);
  parallel_site *site = parallel_site_new(&moe, 1, 2, BM, T, 2, 1, kernels_ref());
  WT_TEST_REQUIRE(st && site && parallel_site_load(site, st) == WT_OK, "%s", wt_last_error());
  static float in[NM * C], out[NM * C];
  int rc = parallel_site_forward(site, NULL, in, NULL, 3, T, out);
  WT_TEST_ASSERT(rc == WT_EINVAL && strstr(wt_last_error(), "multiple of 2"),
                 "3 rows on 2 EP ranks: rc %d '%s'", rc, wt_last_error());
  WT_TEST_ASSERT(parallel_site_forward(site, NULL, in, NULL, 2, T, out) == WT_OK, "2 rows: %s",
                 wt_last_error());
  WT_TEST_ASSERT(parallel_site_forward(site, NULL, NULL, NULL, 2, T, out) == WT_EINVAL,
                 "a middle stage without act_in was accepted");
  gpt_stage *dense = s_stage(1, 2);
  WT_TEST_ASSERT(parallel_site_load(site, dense) == WT_EINVAL, "a dense stage loaded into MoE");
  gpt_stage_destroy(&dense);
  parallel_site_destroy(&site);
  gpt_stage_destroy(&st);
  /* A bad token in rank 1's rows: its peers' all-to-all fails at once instead of waiting. */
  st = gpt_stage_new(&moe, 0, L, BM, T);
  site = parallel_site_new(&moe, 0, L, BM, T, 2, 1, kernels_ref());
  WT_TEST_REQUIRE(st && site && parallel_site_load(site, st) == WT_OK, "%s", wt_last_error());
  parallel_site_set_timeout(site, 10);
  static int tokens[NM], targets[NM];
  tokens[NM - 1] = V;
  double t0 = wt_now_s();
  rc = parallel_site_forward(site, tokens, NULL, targets, BM, T, NULL);
  WT_TEST_ASSERT(rc == WT_EINVAL && strstr(wt_last_error(), "rank 1"),
                 "bad token on EP rank 1: rc %d '%s'", rc, wt_last_error());
  WT_TEST_ASSERT(wt_now_s() - t0 < 5, "the refusal took %.1f s", wt_now_s() - t0);
  tokens[NM - 1] = 0;
  WT_TEST_ASSERT(parallel_site_forward(site, tokens, NULL, targets, BM, T, NULL) == WT_OK &&
                     isfinite(parallel_site_loss(site)),
                 "the MoE site does not work after a refusal: %s", wt_last_error());
  parallel_site_destroy(&site);
  gpt_stage_destroy(&st);
}

int main(void) {
  test_device();
  const int ranges[4][2] = {{0, 1}, {1, 2}, {2, L}, {0, L}};
  const int shapes[6][2] = {{1, 1}, {2, 1}, {4, 1}, {1, 2}, {2, 2}, {1, 4}}; /* t × c */
  for (int i = 0; i < 4; i++)
    for (int j = 0; j < 6; j++) test_stage(ranges[i][0], ranges[i][1], shapes[j][0], shapes[j][1]);
  test_bad_input();
  test_bad_length();
  test_refusals();
  for (int i = 0; i < 4; i++)
    for (int P = 1; P <= 4; P *= 2) {
      test_moe_stage(ranges[i][0], ranges[i][1], P, 2.0f, 0, 0);     /* cap = every choice */
      test_moe_stage(ranges[i][0], ranges[i][1], P, 0.5f, 0.01f, 1); /* tokens dropped */
    }
  test_moe_refusals();
  return wt_test_failures ? 1 : 0;
}
