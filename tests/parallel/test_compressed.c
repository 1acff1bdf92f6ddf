/* test_compressed — the compressed ring all-reduce (two-stage error feedback) and the sparse
 * (top-k) all-reduce, for every codec over the in-process transport:
 *  - all ranks end with identical bytes, for world 1..8 and sizes 0..N not divisible by world;
 *  - the fp32 codec reproduces the plain all-reduce bitwise, lossy codecs stay within a bound
 *    derived from their per-encode error;
 *  - with error feedback, Σ_t out_t + Σ residuals == Σ_t Σ_r g (the telescoping identity that
 *    makes EF work), so the accumulated result tracks the uncompressed sum;
 *  - the sparse all-reduce equals the dense sum of each rank's selected entries;
 *  - a damaged compressed message fails cleanly on the receiving rank; residual checkpoints.
 * It also prints the bytes each rank sends per all-reduce for every codec (docs/parallel.md). */
#include "parallel/collectives/collectives.h"
#include "parallel/transport/comm.h"

#include "compress/codec.h"
#include "common/common.h"
#include "compress/ef.h"
#include "common/rng.h"
#include "common/testing.h"

#include "tests/parallel/faulty.h"

#include <stdlib.h>

static const char *s_codecs[] = {"fp32", "fp16", "bf16", "int8", "int4", "sign", "topk", "randk"};

/* Per-encode error bound as a fraction of the largest |value| encoded (nearest rounding):
 * fp16 half an ulp (2^-11 relative), bf16 2^-8, int8/int4 half a quantisation step
 * (absmax/127/2, absmax/7/2). Biased codecs (sign, top-k, rand-k) have no per-step bound:
 * their guarantee is the error-feedback identity below. */
static double s_encode_bound(const char *codec) {
  if (!strcmp(codec, "fp32")) return 0;
  if (!strcmp(codec, "fp16")) return 0x1p-11;
  if (!strcmp(codec, "bf16")) return 0x1p-8;
  if (!strcmp(codec, "int8")) return 0.5 / 127;
  if (!strcmp(codec, "int4")) return 0.5 / 7;
  return -1;
}

typedef struct {
  int world;
  size_t n;
  parallel_op op;
  const compress_codec *codec;
  int sparse;        /* 1: parallel_allreduce_sparse */
  float **x;         /* [world][n], in place */
  parallel_ef **ef;  /* [world] or NULL (ring) */
  compress_ef **sef; /* [world] or NULL (sparse) */
  uint64_t *bytes;   /* [world] bytes sent by the last call */
  int one_stage;     /* ablation: forget the owner's (stage-2) residual after every call */
  int rcs[8];
} s_job;

static int s_fn(parallel_comm *c, void *arg) {
  s_job *j = arg;
  int r = parallel_comm_rank(c);
  parallel_comm_reset_counters(c);
  int rc = j->sparse ? parallel_allreduce_sparse(c, j->codec, j->x[r], j->n, j->op,
                                                 j->sef ? j->sef[r] : NULL)
                     : parallel_allreduce_compressed(c, j->codec, j->x[r], j->n, j->op,
                                                     j->ef ? j->ef[r] : NULL);
  j->bytes[r] = parallel_comm_bytes_sent(c);
  if (j->one_stage && j->ef)
    compress_ef_reset(parallel_ef_chunk(j->ef[r], (r + 1) % j->world)); /* the chunk r owns */
  j->rcs[r] = rc;
  if (rc != WT_OK && rc != WT_EIO) fprintf(stderr, "rank %d: %s\n", r, wt_last_error());
  return rc;
}

static s_job s_job_new(int world, size_t n, const compress_codec *codec, int sparse, int ef) {
  s_job j = {.world = world,
             .n = n,
             .op = PARALLEL_OP_SUM,
             .codec = codec,
             .sparse = sparse,
             .x = wt_xcalloc((size_t)world, sizeof(float *)),
             .bytes = wt_xcalloc((size_t)world, sizeof(uint64_t))};
  for (int r = 0; r < world; r++) j.x[r] = wt_xcalloc(n + 1, sizeof(float));
  if (ef && !sparse) {
    j.ef = wt_xcalloc((size_t)world, sizeof *j.ef);
    for (int r = 0; r < world; r++) j.ef[r] = parallel_ef_new(n, r, world);
  }
  if (ef && sparse) {
    j.sef = wt_xcalloc((size_t)world, sizeof *j.sef);
    for (int r = 0; r < world; r++) j.sef[r] = compress_ef_new(n);
  }
  return j;
}

static void s_job_free(s_job *j) {
  for (int r = 0; r < j->world; r++) {
    free(j->x[r]);
    if (j->ef) parallel_ef_destroy(&j->ef[r]);
    if (j->sef) compress_ef_destroy(&j->sef[r]);
  }
  free(j->x);
  free(j->ef);
  free(j->sef);
  free(j->bytes);
}

/* Runs the job on every rank; every codec and both all-reduces exist, so anything but WT_OK
 * (WT_ENOTSUP included) fails the test. Returns 1 when it ran. */
static int s_run(parallel_inproc_group *g, s_job *j, const char *what) {
  int rc = parallel_inproc_run(g, s_fn, j, NULL);
  for (int r = 0; r < j->world; r++)
    WT_TEST_ASSERT(j->rcs[r] == WT_OK, "%s: rank %d returned %s", what, r,
                   wt_status_name(j->rcs[r]));
  WT_TEST_ASSERT(rc == WT_OK, "%s: %s", what, wt_status_name(rc));
  return rc == WT_OK;
}

static int s_identical(const s_job *j) {
  for (int r = 1; r < j->world; r++)
    if (memcmp(j->x[r], j->x[0], j->n * sizeof(float))) return 0;
  return 1;
}

static compress_codec *s_codec(const char *name) {
  compress_params p = compress_params_default();
  p.block = 32;
  p.k_frac = 0.1;
  p.seed = 5;
  compress_codec *c = NULL;
  c = compress_codec_new(name, &p);
  WT_TEST_REQUIRE(c != NULL, "%s: %s", name, wt_last_error());
  return c;
}

/* Identical bytes on every rank and the per-codec bound against the exact sum, for world 1..8
 * and n = 0..12 plus two sizes not divisible by any world. The bound: every element goes
 * through at most `world` encodes (world-1 hops, one owner encode), each off by at most
 * bound × (the largest partial sum, itself at most Σ_r max|x_r|, plus earlier errors). */
static void test_ring_bounds(const char *name) {
  compress_codec *codec = s_codec(name);
  double b = s_encode_bound(name);
  wt_rng rng;
  wt_rng_seed(&rng, 21);
  for (int world = 1; world <= 8; world++) {
    parallel_inproc_group *g = parallel_inproc_group_new(world);
    for (size_t t = 0; t < 15; t++) {
      size_t n = t < 13 ? t : (t == 13 ? 1009 : 841);
      for (int ef = 0; ef < 2; ef++) {
        s_job j = s_job_new(world, n, codec, 0, ef);
        j.op = (parallel_op)(t % 2);
        double *exact = wt_xcalloc(n + 1, sizeof(double)), smax = 0;
        for (int r = 0; r < world; r++) {
          double m = 0;
          for (size_t i = 0; i < n; i++) {
            j.x[r][i] = (float)wt_rng_normal(&rng);
            exact[i] += j.x[r][i];
            m = fmax(m, fabs(j.x[r][i]));
          }
          smax += m;
        }
        if (s_run(g, &j, name)) {
          WT_TEST_ASSERT(s_identical(&j), "%s world %d n %zu: ranks differ", name, world, n);
          double scale = j.op == PARALLEL_OP_AVG ? 1.0 / world : 1.0;
          double tol = b < 0 ? INFINITY : 1.1 * world * b * smax * scale + 4e-7 * smax;
          for (size_t i = 0; i < n; i++)
            if (!(fabs(j.x[0][i] - exact[i] * scale) <= tol)) {
              WT_TEST_ASSERT(0, "%s world %d n %zu i %zu: got %.7g want %.7g tol %.3g", name, world,
                             n, i, j.x[0][i], exact[i] * scale, tol);
              break;
            }
        }
        free(exact);
        s_job_free(&j);
      }
    }
    parallel_inproc_group_destroy(&g);
  }
  compress_codec_destroy(&codec);
}

/* fp32 through the compressed ring must give bitwise the plain all-reduce: same chunks, same
 * order of additions, lossless payloads. */
static int s_plain_fn(parallel_comm *c, void *arg) {
  s_job *j = arg;
  return parallel_allreduce(c, j->x[parallel_comm_rank(c)], j->n, j->op);
}

static void test_fp32_is_plain(void) {
  compress_codec *codec = s_codec("fp32");
  int world = 6;
  size_t n = 1001;
  parallel_inproc_group *g = parallel_inproc_group_new(world);
  s_job a = s_job_new(world, n, codec, 0, 1), b = s_job_new(world, n, codec, 0, 0);
  wt_rng rng;
  wt_rng_seed(&rng, 22);
  for (int r = 0; r < world; r++)
    for (size_t i = 0; i < n; i++) a.x[r][i] = b.x[r][i] = (float)wt_rng_normal(&rng);
  a.op = b.op = PARALLEL_OP_AVG;
  s_run(g, &a, "fp32 compressed");
  WT_TEST_ASSERT(parallel_inproc_run(g, s_plain_fn, &b, NULL) == WT_OK, "plain");
  WT_TEST_ASSERT(!memcmp(a.x[0], b.x[0], n * sizeof(float)), "fp32 ring differs from plain");
  WT_TEST_ASSERT(parallel_ef_sq_norm(a.ef[0]) == 0, "fp32 leaves no residual");
  s_job_free(&a);
  s_job_free(&b);
  parallel_inproc_group_destroy(&g);
  compress_codec_destroy(&codec);
}

/* Error feedback over T steps with SUM: the decoded sum of every step equals the true sum plus
 * (old − new) of every residual the chunk passed through, so over T steps
 *     Σ_t out_t  +  Σ_ranks residual_T  ==  Σ_t Σ_r g_r,t      (up to float rounding)
 * and, the residuals being bounded, the relative gap between the accumulated output and the
 * uncompressed sum shrinks like 1/T. The gradients share a fixed direction (as real ones do), so
 * without EF a biased codec keeps a constant relative bias instead. rand-k draws new indices
 * every step (a new seed; the same on every rank), else it would never send the other entries. */
typedef struct {
  double gap_half, gap; /* relative gap after steps/2 and after steps; NAN: a step failed */
  double identity;      /* max |Σ out + Σ residual − Σ g|, relative to the mean |Σ g| */
} s_track_result;

static double s_rel_gap(const double *acc, const double *truth, size_t n) {
  double gap = 0, norm = 0;
  for (size_t i = 0; i < n; i++) {
    gap += (acc[i] - truth[i]) * (acc[i] - truth[i]);
    norm += truth[i] * truth[i];
  }
  return sqrt(gap / norm);
}

/* The residual this job's ranks hold for element i, summed over ranks. */
static double s_residual_at(const s_job *j, size_t i) {
  double resid = 0;
  for (int r = 0; r < j->world; r++) {
    if (j->sef) {
      resid += compress_ef_residual(j->sef[r])[i];
    } else if (j->ef) {
      int c = 0;
      size_t off = 0, len = 0;
      while (parallel_chunk_range(j->n, j->world, c, &off, &len), i >= off + len) c++;
      resid += compress_ef_residual(parallel_ef_chunk(j->ef[r], c))[i - off];
    }
  }
  return resid;
}

static s_track_result s_track(parallel_inproc_group *g, compress_codec *codec, int sparse, int ef,
                              int world, size_t n, int steps, int one_stage) {
  s_job j = s_job_new(world, n, codec, sparse, ef);
  j.one_stage = one_stage;
  double *acc = wt_xcalloc(n, sizeof(double)), *truth = wt_xcalloc(n, sizeof(double));
  wt_rng rng;
  wt_rng_seed(&rng, 23);
  float *dir = wt_xcalloc(n, sizeof(float));
  for (size_t i = 0; i < n; i++) dir[i] = (float)wt_rng_normal(&rng);
  s_track_result res = {NAN, NAN, NAN};
  double abs_total = 0;
  int t = 0;
  for (; t < steps; t++) {
    for (int r = 0; r < world; r++)
      for (size_t i = 0; i < n; i++) {
        j.x[r][i] = dir[i] + 0.5f * (float)wt_rng_normal(&rng);
        truth[i] += j.x[r][i];
        abs_total += fabs(j.x[r][i]);
      }
    compress_codec_set_seed(codec, 1000 + (uint64_t)t);
    if (!s_run(g, &j, compress_codec_name(codec))) break;
    for (size_t i = 0; i < n; i++) acc[i] += j.x[0][i];
    if (t + 1 == steps / 2) res.gap_half = s_rel_gap(acc, truth, n);
  }
  if (t == steps) {
    res.gap = s_rel_gap(acc, truth, n);
    res.identity = 0;
    for (size_t i = 0; i < n; i++)
      res.identity = fmax(res.identity, fabs(acc[i] + s_residual_at(&j, i) - truth[i]));
    res.identity /= abs_total / (double)n;
  }
  free(acc);
  free(truth);
  free(dir);
  s_job_free(&j);
  return res;
}

static void test_error_feedback(const char *name, int sparse) {
  compress_codec *codec = s_codec(name);
  int world = 4, steps = 60;
  size_t n = 517;
  parallel_inproc_group *g = parallel_inproc_group_new(world);
  s_track_result ef = s_track(g, codec, sparse, 1, world, n, steps, 0);
  s_track_result none = s_track(g, codec, sparse, 0, world, n, steps, 0);
  WT_TEST_ASSERT(!isnan(ef.gap) && !isnan(none.gap), "%s %s: a step failed (gaps %g, %g)", name,
                 sparse ? "sparse" : "ring", ef.gap, none.gap);
  printf("  %-5s %-6s relative gap to the exact sum after %d / %d steps: with EF %.2e / %.2e,"
         " without %.2e / %.2e\n",
         name, sparse ? "sparse" : "ring", steps / 2, steps, ef.gap_half, ef.gap, none.gap_half,
         none.gap);
  WT_TEST_ASSERT(ef.identity < 1e-4, "%s: EF identity off by %.3g", name, ef.identity);
  /* bounded residual: the gap must shrink (like 1/T: ratio ~0.5; a residual growing
   * linearly would give 1) */
  if (ef.gap_half > 1e-4)
    WT_TEST_ASSERT(ef.gap < 0.8 * ef.gap_half,
                   "%s: with EF the gap does not shrink (%.3g -> "
                   "%.3g): the residual grows",
                   name, ef.gap_half, ef.gap);
  WT_TEST_ASSERT(ef.gap <= none.gap * 1.0001 + 1e-7, "%s: EF made it worse (%.3g vs %.3g)", name,
                 ef.gap, none.gap);
  if (!strcmp(name, "sign") || !strcmp(name, "topk") || !strcmp(name, "randk"))
    WT_TEST_ASSERT(ef.gap < 0.5 * none.gap, "%s: EF did not help (%.3g vs %.3g)", name, ef.gap,
                   none.gap);
  parallel_inproc_group_destroy(&g);
  compress_codec_destroy(&codec);
}

/* Why the owner needs its own residual: the same run with the stage-2 residual forgotten after
 * every step (EF at the senders only). For a biased codec the owner's compression error is then
 * lost each step, the gap to the exact sum stops shrinking and stays well above two-stage EF. */
static void test_one_stage_ablation(const char *name) {
  compress_codec *codec = s_codec(name);
  int world = 4, steps = 60;
  parallel_inproc_group *g = parallel_inproc_group_new(world);
  s_track_result two = s_track(g, codec, 0, 1, world, 517, steps, 0);
  s_track_result one = s_track(g, codec, 0, 1, world, 517, steps, 1);
  WT_TEST_ASSERT(!isnan(two.gap) && !isnan(one.gap), "%s: a step failed (gaps %g, %g)", name,
                 two.gap, one.gap);
  printf("  %-5s ring   gap after %d / %d steps: two-stage EF %.2e / %.2e, sender-only EF "
         "%.2e / %.2e\n",
         name, steps / 2, steps, two.gap_half, two.gap, one.gap_half, one.gap);
  WT_TEST_ASSERT(one.gap > 1.5 * two.gap,
                 "%s: sender-only EF as good as two-stage (%.3g vs "
                 "%.3g)",
                 name, one.gap, two.gap);
  parallel_inproc_group_destroy(&g);
  compress_codec_destroy(&codec);
}

/* Sparse all-reduce = the dense sum, in rank order, of what each rank's codec selected. */
static void test_sparse_equals_dense(const char *name) {
  compress_codec *codec = s_codec(name);
  for (int world = 1; world <= 8; world++) {
    size_t n = 300 + (size_t)world;
    parallel_inproc_group *g = parallel_inproc_group_new(world);
    s_job j = s_job_new(world, n, codec, 1, 0);
    wt_rng rng;
    wt_rng_seed(&rng, 24 + (uint64_t)world);
    float *want = wt_xcalloc(n, sizeof(float)), *dec = wt_xcalloc(n, sizeof(float));
    size_t cap = compress_codec_max_size(codec, n), len = 0;
    uint8_t *buf = wt_xmalloc(cap);
    int ok = 1;
    for (int r = 0; r < world; r++) {
      for (size_t i = 0; i < n; i++) j.x[r][i] = (float)wt_rng_normal(&rng);
      if (compress_codec_encode(codec, j.x[r], n, buf, cap, &len) != WT_OK ||
          compress_codec_decode(codec, buf, len, dec, n) != WT_OK) {
        ok = 0;
        break;
      }
      for (size_t i = 0; i < n; i++) want[i] += dec[i];
    }
    WT_TEST_ASSERT(ok, "%s: encode/decode of rank inputs: %s", name, wt_last_error());
    if (ok && s_run(g, &j, name)) {
      WT_TEST_ASSERT(s_identical(&j), "%s sparse world %d: ranks differ", name, world);
      WT_TEST_ASSERT(!memcmp(j.x[0], want, n * sizeof(float)),
                     "%s sparse world %d: not the "
                     "dense sum of the selected entries",
                     name, world);
      size_t nnz = 0;
      for (size_t i = 0; i < n; i++) nnz += j.x[0][i] != 0;
      WT_TEST_ASSERT(nnz <= (size_t)world * compress_topk_count(n, 0.1), "%s: %zu nonzeros", name,
                     nnz);
    }
    free(want);
    free(dec);
    free(buf);
    s_job_free(&j);
    parallel_inproc_group_destroy(&g);
    if (!ok) break;
  }
  compress_codec_destroy(&codec);
}

/* parallel_allreduce_sparse_payload: each rank hands in a payload it encoded itself (as a GPU
 * peer does with the GPU codec's CPU-identical bytes), and every rank gets what
 * parallel_allreduce_sparse gives from the raw vectors, bit for bit, averaged. */
typedef struct {
  s_job job;
  float **out; /* [world][n]: the payload path's result */
} s_payload_job;

static int s_payload_fn(parallel_comm *c, void *arg) {
  s_payload_job *pj = arg;
  s_job *j = &pj->job;
  int r = parallel_comm_rank(c);
  size_t cap = compress_codec_max_size(j->codec, j->n), len = 0;
  uint8_t *mine = wt_xmalloc(cap);
  int rc = compress_codec_encode(j->codec, j->x[r], j->n, mine, cap, &len);
  if (rc == WT_OK)
    rc = parallel_allreduce_sparse_payload(c, j->codec, mine, len, pj->out[r], j->n,
                                           PARALLEL_OP_AVG);
  if (rc == WT_OK)
    rc = parallel_allreduce_sparse(c, j->codec, j->x[r], j->n, PARALLEL_OP_AVG, NULL);
  free(mine);
  j->rcs[r] = rc;
  return rc;
}

static void test_sparse_payload(const char *name) {
  compress_codec *codec = s_codec(name);
  const int world = 3;
  const size_t n = 1000;
  parallel_inproc_group *g = parallel_inproc_group_new(world);
  s_payload_job pj = {.job = s_job_new(world, n, codec, 1, 0)};
  pj.out = wt_xcalloc((size_t)world, sizeof *pj.out);
  wt_rng rng;
  wt_rng_seed(&rng, 77);
  for (int r = 0; r < world; r++) {
    pj.out[r] = wt_xcalloc(n, sizeof(float));
    for (size_t i = 0; i < n; i++) pj.job.x[r][i] = (float)wt_rng_normal(&rng);
  }
  int rc = parallel_inproc_run(g, s_payload_fn, &pj, NULL);
  WT_TEST_ASSERT(rc == WT_OK, "%s payload all-reduce: %s", name, wt_status_name(rc));
  int same = rc == WT_OK, nonzero = 0;
  for (int r = 0; r < world && same; r++) same = !memcmp(pj.out[r], pj.job.x[0], n * sizeof(float));
  for (size_t i = 0; i < n; i++) nonzero += pj.out[0][i] != 0;
  WT_TEST_ASSERT(same && nonzero > 0,
                 "%s: the sum of pre-encoded payloads is not parallel_allreduce_sparse's", name);
  for (int r = 0; r < world; r++) free(pj.out[r]);
  free(pj.out);
  s_job_free(&pj.job);
  parallel_inproc_group_destroy(&g);
  compress_codec_destroy(&codec);
}

/* A compressed chunk damaged on its way (bit flip in the payload, truncation) is refused on the
 * receiving rank with WT_ECORRUPT; nobody crashes or hangs. */
typedef struct {
  s_job job;
  s_faulty_ctx *ctxs;
} s_fault_job;

static int s_fault_fn(parallel_comm *inner, void *arg) {
  s_fault_job *fj = arg;
  int r = parallel_comm_rank(inner);
  fj->ctxs[r].inner = inner;
  parallel_comm *c = parallel_comm_new(&s_faulty_ops, &fj->ctxs[r], r, parallel_comm_size(inner));
  int rc = parallel_allreduce_compressed(c, fj->job.codec, fj->job.x[r], fj->job.n, PARALLEL_OP_SUM,
                                         fj->job.ef[r]);
  fj->job.rcs[r] = rc;
  parallel_comm_destroy(&c);
  return rc;
}

static void test_faults(void) {
  compress_codec *codec = s_codec("fp16");
  int world = 3;
  parallel_inproc_group *g = parallel_inproc_group_new(world);
  parallel_inproc_group_set_timeout(g, 10.0);
  s_damage damages[] = {S_FLIP_PAYLOAD, S_TRUNCATE, S_FLIP_HEADER};
  for (size_t d = 0; d < WT_ARRAY_LEN(damages); d++) {
    for (int victim = 0; victim < 4; victim++) { /* 2 reduce-scatter + 2 all-gather messages */
      s_fault_job fj = {s_job_new(world, 100, codec, 0, 1),
                        wt_xcalloc((size_t)world, sizeof(s_faulty_ctx))};
      for (int r = 0; r < world; r++) fj.ctxs[r].victim_msg = r == 0 ? victim : -1;
      fj.ctxs[0].damage = damages[d];
      parallel_inproc_run(g, s_fault_fn, &fj, NULL);
      WT_TEST_ASSERT(fj.job.rcs[1] == WT_ECORRUPT, "damage %d to message %d: rank 1 returned %s",
                     (int)damages[d], victim, wt_status_name(fj.job.rcs[1]));
      s_job_free(&fj.job);
      free(fj.ctxs);
    }
  }
  parallel_inproc_group_destroy(&g);
  compress_codec_destroy(&codec);
}

/* Residual checkpoints round-trip, and a checkpoint of another geometry is refused. */
static void test_ef_checkpoint(void) {
  parallel_ef *a = NULL, *b = NULL, *other = NULL;
  a = parallel_ef_new(50, 1, 3);
  WT_TEST_REQUIRE(a != NULL, "new");
  b = parallel_ef_new(50, 1, 3);
  other = parallel_ef_new(50, 3, 3);
  WT_TEST_ASSERT(!other && wt_last_status() == WT_EINVAL, "rank 3 of 3");
  other = parallel_ef_new(50, 2, 3);
  compress_codec *codec = s_codec("bf16");
  float g[17];
  for (int i = 0; i < 17; i++) g[i] = 1.0f + (float)i / 1000.0f;
  uint8_t buf[256];
  size_t len;
  for (int c = 0; c < 3; c++)
    compress_ef_encode(parallel_ef_chunk(a, c), codec, g, buf, sizeof buf, &len);
  WT_TEST_ASSERT(parallel_ef_sq_norm(a) > 0, "bf16 leaves a residual");
  FILE *f = tmpfile();
  WT_TEST_REQUIRE(f && parallel_ef_save(a, f) == WT_OK, "save");
  rewind(f);
  WT_TEST_ASSERT(parallel_ef_load(b, f) == WT_OK, "load: %s", wt_last_error());
  WT_TEST_ASSERT(parallel_ef_sq_norm(b) == parallel_ef_sq_norm(a), "round trip");
  rewind(f);
  WT_TEST_ASSERT(parallel_ef_load(other, f) == WT_EMISMATCH, "other rank refused");
  fclose(f);
  parallel_ef_reset(b);
  WT_TEST_ASSERT(parallel_ef_sq_norm(b) == 0, "reset");
  parallel_ef_destroy(&a);
  parallel_ef_destroy(&b);
  parallel_ef_destroy(&other);
  WT_TEST_ASSERT(a == NULL, "destroy sets NULL");
  compress_codec_destroy(&codec);
}

/* Bytes each rank sends for one all-reduce of a 1M-element tensor on 4 ranks, per codec (with
 * headers; topk/randk keep 1% and use the sparse all-gather). Printed, not asserted beyond
 * "compression sends less than fp32": the numbers go to docs/parallel.md. */
static void test_bytes_table(void) {
  int world = 4;
  size_t n = (size_t)1 << 20;
  parallel_inproc_group *g = parallel_inproc_group_new(world);
  printf("  bytes sent per rank, one all-reduce of n=%zu floats, world=%d:\n", n, world);
  printf("  %-6s %-7s %12s %10s\n", "codec", "path", "bytes/rank", "vs fp32");
  uint64_t fp32 = 0;
  for (size_t k = 0; k < WT_ARRAY_LEN(s_codecs); k++) {
    compress_params p = compress_params_default();
    p.k_frac = 0.01;
    compress_codec *codec = NULL;
    codec = compress_codec_new(s_codecs[k], &p);
    int sparse = !strcmp(s_codecs[k], "topk") || !strcmp(s_codecs[k], "randk");
    for (int pass = 0; pass < 1 + sparse; pass++) {
      int use_sparse = sparse && pass == 0;
      s_job j = s_job_new(world, n, codec, use_sparse, 1);
      for (int r = 0; r < world; r++)
        for (size_t i = 0; i < n; i++) j.x[r][i] = (float)((i * 7 + (size_t)r) % 13) - 6.0f;
      if (s_run(g, &j, s_codecs[k])) {
        if (k == 0) fp32 = j.bytes[0];
        printf("  %-6s %-7s %12llu %9.1fx\n", s_codecs[k], use_sparse ? "sparse" : "ring",
               (unsigned long long)j.bytes[0], fp32 ? (double)fp32 / (double)j.bytes[0] : 0.0);
        if (k > 0) WT_TEST_ASSERT(j.bytes[0] < fp32, "%s sends no less than fp32", s_codecs[k]);
      }
      s_job_free(&j);
    }
    compress_codec_destroy(&codec);
  }
  parallel_inproc_group_destroy(&g);
}

int main(void) {
  test_fp32_is_plain();
  for (size_t k = 0; k < WT_ARRAY_LEN(s_codecs); k++) test_ring_bounds(s_codecs[k]);
  for (size_t k = 0; k < WT_ARRAY_LEN(s_codecs); k++) test_error_feedback(s_codecs[k], 0);
  test_one_stage_ablation("sign");
  test_one_stage_ablation("topk");
  test_error_feedback("topk", 1);
  test_error_feedback("randk", 1);
  test_sparse_equals_dense("topk");
  test_sparse_equals_dense("randk");
  test_sparse_payload("topk");
  test_sparse_payload("randk");
  test_faults();
  test_ef_checkpoint();
  test_bytes_table();
  return wt_test_finish("test_parallel_compressed");
}
