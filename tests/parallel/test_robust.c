/* test_robust — the robust aggregates and the robust all-reduce (collectives.h):
 *  - each aggregate on known inputs, with one outlier and with a NaN;
 *  - over the in-process transport, 4 and 8 ranks: every rank ends with the same bits, with and
 *    without a codec, and a liar of each kind is flagged with the right reason and left out;
 *  - honest ranks over many calls are never flagged;
 *  - the bytes a rank sends, against the plain ring (printed for docs/trust.md). */
#include "parallel/collectives/collectives.h"
#include "parallel/transport/comm.h"

#include "common/common.h"
#include "common/rng.h"
#include "common/testing.h"
#include "compress/codec.h"
#include "compress/ef.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- the aggregates on known inputs -------------------------------------------------------- */

static void s_check(parallel_robust_kind kind, const float *rows, int world, const uint8_t *use,
                    float want, const char *what) {
  float out = -1;
  parallel_robust_aggregate(kind, rows, world, 1, use, &out);
  WT_TEST_CLOSE(out, want, 1e-6, 1e-6, what);
}

static void test_known(void) {
  const float four[] = {1, 2, 3, 100}, five[] = {1, 2, 3, 4, 100};
  const float nan4[] = {1, 2, NAN, 3}, flat[] = {7, 7, 7, 7};
  s_check(PARALLEL_ROBUST_NONE, four, 4, NULL, 26.5f, "mean of 1,2,3,100");
  s_check(PARALLEL_ROBUST_TRIMMED_MEAN, four, 4, NULL, 2.5f, "trimmed mean of 1,2,3,100");
  s_check(PARALLEL_ROBUST_TRIMMED_MEAN, five, 5, NULL, 3.0f, "trimmed mean of 1,2,3,4,100");
  s_check(PARALLEL_ROBUST_MEDIAN, four, 4, NULL, 2.5f, "median of 1,2,3,100");
  s_check(PARALLEL_ROBUST_MEDIAN, five, 5, NULL, 3.0f, "median of 1,2,3,4,100");
  /* |x − 2.5| = 1.5, .5, .5, 97.5, τ = 1: the clipped steps -1, -.5, .5, 1 cancel */
  s_check(PARALLEL_ROBUST_CENTERED_CLIP, four, 4, NULL, 2.5f, "centered clip of 1,2,3,100");
  s_check(PARALLEL_ROBUST_CENTERED_CLIP, flat, 4, NULL, 7.0f, "centered clip of equal rows");
  /* a NaN sorts above everything, so the coordinate-wise aggregates trim it like a huge value */
  s_check(PARALLEL_ROBUST_MEDIAN, nan4, 4, NULL, 2.5f, "median with a NaN");
  s_check(PARALLEL_ROBUST_TRIMMED_MEAN, nan4, 4, NULL, 2.5f, "trimmed mean with a NaN");
  /* the NaN row is at no finite distance, so it never moves v: from 2.5 (τ = 1) the three rounds
   * step by -1/4, -1/8, -1/16 */
  s_check(PARALLEL_ROBUST_CENTERED_CLIP, nan4, 4, NULL, 2.0625f, "centered clip with a NaN");
  const uint8_t skip_last[] = {1, 1, 1, 0};
  s_check(PARALLEL_ROBUST_NONE, four, 4, skip_last, 2.0f, "mean of the used rows");
  const uint8_t none[] = {0, 0, 0, 0};
  s_check(PARALLEL_ROBUST_MEDIAN, four, 4, none, 0.0f, "no row used");
  parallel_robust_kind k;
  WT_TEST_ASSERT(parallel_robust_kind_parse("centered-clip", &k) == WT_OK &&
                     k == PARALLEL_ROBUST_CENTERED_CLIP,
                 "parse centered-clip");
  WT_TEST_ASSERT(parallel_robust_kind_parse("mode", &k) == WT_EINVAL &&
                     strstr(wt_last_error(), "trimmed-mean"),
                 "an unknown name lists the names");
  char buf[64];
  parallel_robust_flags_str(PARALLEL_ROBUST_FLAG_NONFINITE | PARALLEL_ROBUST_FLAG_COSINE, buf,
                            sizeof buf);
  WT_TEST_ASSERT(!strcmp(buf, "nonfinite,cosine"), "flags string: %s", buf);
}

/* Vector coordinates 1..n, each column with its own mean: a gradient-like spread. */
static void test_vectors(void) {
  enum { W = 5, N = 64 };
  float rows[W * N], out[N];
  for (int j = 0; j < W; j++)
    for (int i = 0; i < N; i++) rows[j * N + i] = (float)(i + j); /* column i: i..i+4 */
  rows[4 * N + 7] = 1e9f;                                         /* one outlier coordinate */
  parallel_robust_aggregate(PARALLEL_ROBUST_MEDIAN, rows, W, N, NULL, out);
  for (int i = 0; i < N; i++) WT_TEST_CLOSE(out[i], i + 2, 0, 0, "median column");
  parallel_robust_aggregate(PARALLEL_ROBUST_TRIMMED_MEAN, rows, W, N, NULL, out);
  for (int i = 0; i < N; i++) WT_TEST_CLOSE(out[i], i + 2, 1e-5, 0, "trimmed column");
}

/* ---- the collective ------------------------------------------------------------------------ */

typedef enum { L_HONEST, L_NAN, L_SCALE, L_FLIP, L_NOISE, L_ZERO, L_REPLAY, L_CORRUPT } s_lie;

typedef struct {
  int world, liar, calls;
  s_lie lie;
  parallel_robust_kind kind;
  const char *codec; /* NULL: raw fp32 */
  size_t n;
  float *out;                                /* (world, n): each rank's result of the last call */
  uint32_t flags[PARALLEL_ROBUST_MAX_RANKS]; /* rank 0's report: union over calls of the flags */
  int first_flag[PARALLEL_ROBUST_MAX_RANKS]; /* call at which each rank was first flagged, -1 */
  double max_err; /* rank 0's largest distance from the honest mean, relative to its norm */
  int rcs[16];
  uint64_t bytes[16];
} s_job;

/* Honest rank r's contribution at call t: a shared signal plus its own noise (cosine to the
 * mean about 0.8), the same on every run. */
static void s_honest(float *x, size_t n, int r, int t, float *mean, int world) {
  wt_rng rng;
  for (size_t i = 0; i < n; i++) mean[i] = (float)sin(0.37 * (double)i + t);
  wt_rng_seed(&rng, 1000u * (uint64_t)t + (uint64_t)r + 1);
  for (size_t i = 0; i < n; i++) x[i] = mean[i] + 0.5f * (float)wt_rng_normal(&rng);
  (void)world;
}

static void s_lie_apply(s_job *j, float *x, int t, const float *first) {
  wt_rng rng;
  wt_rng_seed(&rng, 77u + (uint64_t)t);
  for (size_t i = 0; i < j->n; i++) switch (j->lie) {
    case L_NAN:
      x[i] = i % 3 ? x[i] : NAN;
      break;
    case L_SCALE:
      x[i] *= 1000;
      break;
    case L_FLIP:
      x[i] = -x[i];
      break;
    case L_NOISE:
      x[i] = (float)wt_rng_normal(&rng);
      break;
    case L_ZERO:
      x[i] = 0;
      break;
    case L_REPLAY:
      x[i] = first[i];
      break;
    default:
      break;
    }
}

static int s_rank(parallel_comm *c, void *arg) {
  s_job *j = arg;
  const int r = parallel_comm_rank(c);
  parallel_robust_config cfg = parallel_robust_config_default(j->kind);
  parallel_robust *rob = parallel_robust_new(&cfg);
  const char *codec_name = j->codec;
  if (j->lie == L_CORRUPT && r == j->liar)
    codec_name = "int4"; /* payloads the others cannot read */
  compress_params p = compress_params_default();
  compress_codec *codec = codec_name ? compress_codec_new(codec_name, &p) : NULL;
  compress_ef *ef = codec ? compress_ef_new(j->n) : NULL;
  float *x = wt_xcalloc(j->n, sizeof(float)), *mean = wt_xcalloc(j->n, sizeof(float));
  float *first = wt_xcalloc(j->n, sizeof(float));
  int rc = WT_OK;
  for (int t = 0; t < j->calls && rc == WT_OK; t++) {
    s_honest(x, j->n, r, t, mean, j->world);
    if (t == 0) memcpy(first, x, j->n * sizeof(float));
    if (r == j->liar) s_lie_apply(j, x, t, first);
    parallel_robust_report rep;
    rc = parallel_robust_allreduce(rob, c, codec, ef, x, j->n, &rep);
    if (rc != WT_OK || r != 0) continue;
    double err = 0, mm = 0;
    for (size_t i = 0; i < j->n; i++) {
      err += ((double)x[i] - mean[i]) * ((double)x[i] - mean[i]);
      mm += (double)mean[i] * mean[i];
    }
    j->max_err = fmax(j->max_err, sqrt(err / mm));
    for (int q = 0; q < j->world; q++) {
      if (rep.rank[q].flags && j->first_flag[q] < 0) j->first_flag[q] = t;
      j->flags[q] |= rep.rank[q].flags;
    }
  }
  j->bytes[r] = parallel_comm_bytes_sent(c);
  memcpy(j->out + (size_t)r * j->n, x, j->n * sizeof(float));
  if (rc != WT_OK) fprintf(stderr, "rank %d: %s\n", r, wt_last_error());
  j->rcs[r] = rc;
  free(x), free(mean), free(first);
  compress_ef_destroy(&ef);
  compress_codec_destroy(&codec);
  parallel_robust_destroy(&rob);
  return rc;
}

static s_job s_run(int world, int liar, s_lie lie, parallel_robust_kind kind, const char *codec,
                   int calls) {
  s_job j = {.world = world,
             .liar = liar,
             .lie = lie,
             .kind = kind,
             .codec = codec,
             .n = 1000,
             .calls = calls};
  for (int q = 0; q < PARALLEL_ROBUST_MAX_RANKS; q++) j.first_flag[q] = -1;
  j.out = wt_xcalloc((size_t)world * j.n, sizeof(float));
  parallel_inproc_group *g = parallel_inproc_group_new(world);
  parallel_inproc_group_set_timeout(g, 30);
  int rc = parallel_inproc_run(g, s_rank, &j, NULL);
  parallel_inproc_group_destroy(&g);
  WT_TEST_ASSERT(rc == WT_OK, "robust all-reduce over %d ranks failed", world);
  return j;
}

/* Every honest rank holds the same bits (the liar of L_CORRUPT decodes others differently). */
static void s_check_agree(const s_job *j, const char *what) {
  for (int r = 1; r < j->world; r++) {
    if (j->lie == L_CORRUPT && (r == j->liar)) continue;
    WT_TEST_ASSERT(!memcmp(j->out, j->out + (size_t)r * j->n, j->n * sizeof(float)),
                   "%s: rank %d's result differs from rank 0's", what, r);
  }
}

static void test_liars(void) {
  static const struct {
    s_lie lie;
    uint32_t flag;
    const char *name;
  } lies[] = {{L_NAN, PARALLEL_ROBUST_FLAG_NONFINITE, "nan"},
              {L_SCALE, PARALLEL_ROBUST_FLAG_NORM, "scale x1000"},
              {L_FLIP, PARALLEL_ROBUST_FLAG_COSINE, "sign flip"},
              {L_NOISE, PARALLEL_ROBUST_FLAG_COSINE, "noise"},
              {L_ZERO, PARALLEL_ROBUST_FLAG_ZERO, "zeros"},
              {L_REPLAY, PARALLEL_ROBUST_FLAG_REPLAY, "replay"},
              {L_CORRUPT, PARALLEL_ROBUST_FLAG_CORRUPT, "corrupt payload"}};
  const parallel_robust_kind kinds[] = {PARALLEL_ROBUST_TRIMMED_MEAN, PARALLEL_ROBUST_MEDIAN,
                                        PARALLEL_ROBUST_CENTERED_CLIP};
  for (int li = 0; li < (int)WT_ARRAY_LEN(lies); li++)
    for (int ki = 0; ki < 3; ki++) {
      const char *codec = lies[li].lie == L_CORRUPT ? "int8" : NULL;
      s_job j = s_run(4, 2, lies[li].lie, kinds[ki], codec, 6);
      char what[96];
      snprintf(what, sizeof what, "%s, %s", lies[li].name, parallel_robust_kind_name(kinds[ki]));
      s_check_agree(&j, what);
      WT_TEST_ASSERT(j.flags[2] & lies[li].flag, "%s: the liar's flags are %#x, want %#x", what,
                     j.flags[2], lies[li].flag);
      const int by = lies[li].lie == L_REPLAY ? 1 : 0; /* a replay shows from its second call */
      WT_TEST_ASSERT(j.first_flag[2] == by, "%s: liar first flagged at call %d, want %d", what,
                     j.first_flag[2], by);
      for (int q = 0; q < 4; q++)
        WT_TEST_ASSERT(q == 2 || !j.flags[q], "%s: honest rank %d flagged %#x", what, q,
                       j.flags[q]);
      /* three honest rows of noise 0.5 average to within about 0.5/sqrt(3) of the mean */
      WT_TEST_ASSERT(j.max_err < 0.6, "%s: result %.3f (relative) from the honest mean", what,
                     j.max_err);
      free(j.out);
    }
}

/* Two liars among eight, and honest groups over many calls: nobody honest is flagged. */
static void test_groups(void) {
  s_job j = s_run(8, 5, L_SCALE, PARALLEL_ROBUST_TRIMMED_MEAN, "int8", 8);
  s_check_agree(&j, "8 ranks, int8");
  WT_TEST_ASSERT(j.flags[5] & PARALLEL_ROBUST_FLAG_NORM, "8 ranks: the liar is not flagged");
  free(j.out);
  for (int ki = 1; ki <= 3; ki++) {
    s_job h = s_run(4, -1, L_HONEST, (parallel_robust_kind)ki, ki == 2 ? "int8" : NULL, 40);
    s_check_agree(&h, "honest");
    for (int q = 0; q < 4; q++)
      WT_TEST_ASSERT(!h.flags[q], "honest %s: rank %d flagged %#x",
                     parallel_robust_kind_name((parallel_robust_kind)ki), q, h.flags[q]);
    free(h.out);
  }
}

/* Bytes per rank per call of the robust all-gather and of the ring, for 1000 floats. */
static int s_ring(parallel_comm *c, void *arg) {
  uint64_t *bytes = arg;
  float *x = wt_xcalloc(1000, sizeof(float));
  int rc = parallel_allreduce(c, x, 1000, PARALLEL_OP_AVG);
  bytes[parallel_comm_rank(c)] = parallel_comm_bytes_sent(c);
  free(x);
  return rc;
}

static void test_bytes(void) {
  for (int world = 4; world <= 8; world += 4) {
    uint64_t ring[8] = {0};
    parallel_inproc_group *g = parallel_inproc_group_new(world);
    parallel_inproc_run(g, s_ring, ring, NULL);
    parallel_inproc_group_destroy(&g);
    s_job j = s_run(world, -1, L_HONEST, PARALLEL_ROBUST_MEDIAN, NULL, 1);
    printf("bytes per rank, %d ranks, 1000 floats: ring %llu, robust all-gather %llu (%.2fx)\n",
           world, (unsigned long long)ring[0], (unsigned long long)j.bytes[0],
           (double)j.bytes[0] / (double)ring[0]);
    /* (world-1) payloads of 4000 bytes against 2 (world-1)/world of one */
    WT_TEST_ASSERT(j.bytes[0] >= (uint64_t)(world - 1) * 4000, "robust bytes %llu",
                   (unsigned long long)j.bytes[0]);
    WT_TEST_ASSERT(ring[0] < (uint64_t)(2 * 4000 * (world - 1) / world + 1024), "ring bytes %llu",
                   (unsigned long long)ring[0]);
    free(j.out);
  }
}

int main(void) {
  test_known();
  test_vectors();
  test_liars();
  test_groups();
  test_bytes();
  if (wt_test_failures) fprintf(stderr, "%d failure(s)\n", wt_test_failures);
  return wt_test_failures ? 1 : 0;
}
