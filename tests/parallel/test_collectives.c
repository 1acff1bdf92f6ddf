/* test_collectives — the plain collectives over the in-process transport: ring all-reduce
 * against a serial sum for every size 0..N and world 1..8, broadcast from every root,
 * all-gather-v of unequal sizes, and clean failure on garbled, truncated or foreign messages
 * injected by a test transport that wraps the in-process one. */
#include "parallel/collectives/collectives.h"
#include "parallel/transport/comm.h"
#include "parallel/collectives/frame_internal.h"

#include "common/common.h"
#include "common/rng.h"
#include "common/testing.h"

#include "tests/parallel/faulty.h"

#include <float.h>
#include <stdlib.h>

/* ---- a job: per-rank inputs and outputs, run on one thread per rank ------------------------ */

typedef struct {
  int world;
  size_t n;
  parallel_op op;
  float **in, **out; /* [world][n] */
} s_job;

static s_job s_job_new(int world, size_t n, parallel_op op) {
  s_job j = {world, n, op, wt_xcalloc((size_t)world, sizeof(float *)),
             wt_xcalloc((size_t)world, sizeof(float *))};
  for (int r = 0; r < world; r++) {
    j.in[r] = wt_xcalloc(n + 1, sizeof(float));
    j.out[r] = wt_xcalloc(n + 1, sizeof(float));
  }
  return j;
}

static void s_job_free(s_job *j) {
  for (int r = 0; r < j->world; r++) {
    free(j->in[r]);
    free(j->out[r]);
  }
  free(j->in);
  free(j->out);
}

static int s_allreduce_fn(parallel_comm *c, void *arg) {
  s_job *j = arg;
  int r = parallel_comm_rank(c);
  memcpy(j->out[r], j->in[r], j->n * sizeof(float));
  int rc = parallel_allreduce(c, j->out[r], j->n, j->op);
  if (rc != WT_OK) fprintf(stderr, "rank %d: %s\n", r, wt_last_error());
  return rc;
}

/* Every rank must hold exactly the same bytes: chunks are copied, never re-summed. */
static int s_ranks_identical(const s_job *j) {
  for (int r = 1; r < j->world; r++)
    if (memcmp(j->out[r], j->out[0], j->n * sizeof(float)) != 0) return 0;
  return 1;
}

/* ---- all-reduce ---------------------------------------------------------------------------- */

/* Integer-valued floats below 2^24 / world: every partial sum in any order is exact, so the ring
 * result must equal the serial sum BITWISE. For AVG with a power-of-two world the division is
 * exact too. */
static void test_allreduce_exact(void) {
  wt_rng rng;
  wt_rng_seed(&rng, 11);
  size_t sizes[] = {1000, 1237, 4099};
  for (int world = 1; world <= 8; world++) {
    parallel_inproc_group *g = parallel_inproc_group_new(world);
    for (size_t t = 0; t < 21 + WT_ARRAY_LEN(sizes); t++) {
      size_t n = t < 21 ? t : sizes[t - 21];
      for (int op = 0; op < 2; op++) {
        if (op == PARALLEL_OP_AVG && (world & (world - 1))) continue; /* see the next test */
        s_job j = s_job_new(world, n, (parallel_op)op);
        float *want = wt_xcalloc(n + 1, sizeof(float));
        for (int r = 0; r < world; r++)
          for (size_t i = 0; i < n; i++) {
            j.in[r][i] = (float)((int)wt_rng_below(&rng, 2001) - 1000);
            want[i] += j.in[r][i];
          }
        if (op == PARALLEL_OP_AVG)
          for (size_t i = 0; i < n; i++) want[i] /= (float)world;
        int rc = parallel_inproc_run(g, s_allreduce_fn, &j, NULL);
        WT_TEST_ASSERT(rc == WT_OK, "world %d n %zu op %d", world, n, op);
        WT_TEST_ASSERT(!memcmp(j.out[0], want, n * sizeof(float)),
                       "world %d n %zu op %d: not the exact serial sum", world, n, op);
        WT_TEST_ASSERT(s_ranks_identical(&j), "world %d n %zu: ranks differ", world, n);
        free(want);
        s_job_free(&j);
      }
    }
    parallel_inproc_group_destroy(&g);
  }
}

/* General floats: each element is a sum of `world` terms in some order, so it is within
 * (world-1)·eps·Σ|x| of the exact (double) sum — the classic bound for recursive summation.
 * AVG adds one more rounding: half an ulp of the result. */
static void test_allreduce_random(void) {
  wt_rng rng;
  wt_rng_seed(&rng, 12);
  for (int world = 1; world <= 8; world++) {
    parallel_inproc_group *g = parallel_inproc_group_new(world);
    for (int op = 0; op < 2; op++) {
      size_t n = 777 + (size_t)world;
      s_job j = s_job_new(world, n, (parallel_op)op);
      for (int r = 0; r < world; r++)
        for (size_t i = 0; i < n; i++) j.in[r][i] = (float)wt_rng_normal(&rng);
      WT_TEST_ASSERT(parallel_inproc_run(g, s_allreduce_fn, &j, NULL) == WT_OK, "world %d", world);
      WT_TEST_ASSERT(s_ranks_identical(&j), "world %d op %d: ranks differ", world, op);
      for (size_t i = 0; i < n; i++) {
        double exact = 0, abs_sum = 0;
        for (int r = 0; r < world; r++) {
          exact += j.in[r][i];
          abs_sum += fabs(j.in[r][i]);
        }
        double scale = op == PARALLEL_OP_AVG ? 1.0 / world : 1.0;
        double bound = ((world - 1) * FLT_EPSILON * abs_sum + FLT_EPSILON * fabs(exact)) * scale;
        if (fabs(j.out[0][i] - exact * scale) > bound) {
          WT_TEST_ASSERT(0, "world %d op %d i %zu: got %.9g want %.9g (bound %.3g)", world, op, i,
                         j.out[0][i], exact * scale, bound);
          break;
        }
      }
      s_job_free(&j);
    }
    parallel_inproc_group_destroy(&g);
  }
}

/* Reduce-scatter alone leaves the full sum in the owner's chunk; with a 1 KiB mailbox cap the
 * ring must still make progress (one message always fits). */
static int s_rs_fn(parallel_comm *c, void *arg) {
  s_job *j = arg;
  int r = parallel_comm_rank(c);
  memcpy(j->out[r], j->in[r], j->n * sizeof(float));
  WT_CHECK(parallel_reduce_scatter(c, j->out[r], j->n, j->op));
  WT_CHECK(parallel_allgather_chunks(c, j->out[r], j->n));
  return WT_OK;
}

static void test_reduce_scatter_small_queue(void) {
  int world = 5;
  size_t n = 10000;
  parallel_inproc_group *g = parallel_inproc_group_new(world);
  parallel_inproc_group_set_max_queue(g, 1024);
  s_job j = s_job_new(world, n, PARALLEL_OP_SUM);
  float *want = wt_xcalloc(n, sizeof(float));
  for (int r = 0; r < world; r++)
    for (size_t i = 0; i < n; i++) want[i] += j.in[r][i] = (float)((int)(i % 97) - r);
  WT_TEST_ASSERT(parallel_inproc_run(g, s_rs_fn, &j, NULL) == WT_OK, "small queue");
  for (int r = 0; r < world; r++)
    WT_TEST_ASSERT(!memcmp(j.out[r], want, n * sizeof(float)), "rank %d wrong", r);
  WT_TEST_ASSERT(parallel_chunk_owner(0, world) == world - 1, "owner of chunk 0");
  free(want);
  s_job_free(&j);
  parallel_inproc_group_destroy(&g);
}

/* ---- pipelined pieces ------------------------------------------------------------------------ */

typedef struct {
  s_job job;
  size_t piece;
  int split; /* 1: reduce-scatter and all-gather as two calls */
} s_piece_job;

static int s_piece_fn(parallel_comm *c, void *arg) {
  s_piece_job *pj = arg;
  s_job *j = &pj->job;
  int r = parallel_comm_rank(c);
  memcpy(j->out[r], j->in[r], j->n * sizeof(float));
  if (!pj->split)
    return parallel_ring_allreduce(c, j->out[r], j->n, j->op, pj->piece,
                                   PARALLEL_RING_REDUCE_SCATTER | PARALLEL_RING_ALLGATHER);
  WT_CHECK(
      parallel_ring_allreduce(c, j->out[r], j->n, j->op, pj->piece, PARALLEL_RING_REDUCE_SCATTER));
  return parallel_ring_allreduce(c, j->out[r], j->n, j->op, pj->piece, PARALLEL_RING_ALLGATHER);
}

/* The unpipelined ring's order for element i of chunk c: rank c's value, then + rank c+1's, …,
 * + rank c−1's, each add rounded to float32; AVG divides the rounded sum once. */
static float s_ring_order(const s_job *j, size_t i) {
  int p = j->world, c = 0;
  for (int k = 0; k < p; k++) {
    size_t off, len;
    parallel_chunk_range(j->n, p, k, &off, &len);
    if (i >= off && i < off + len) c = k;
  }
  float acc = j->in[c][i];
  for (int k = 1; k < p; k++) acc = j->in[(c + k) % p][i] + acc;
  return j->op == PARALLEL_OP_AVG ? acc / (float)p : acc;
}

/* Chunks cut into pieces of 1, 3 and 64 floats and the default: general floats (so any other
 * order of the adds would show in the last bits) must give bitwise the unpipelined ring's sums,
 * on odd sizes for world 2..5, with one call or the two halves. */
static void test_pieces_bitwise(void) {
  wt_rng rng;
  wt_rng_seed(&rng, 13);
  size_t sizes[] = {1, 7, 33, 101, 1237, 4099}, pieces[] = {1, 3, 64, PARALLEL_RING_PIECE_FLOATS};
  for (int world = 2; world <= 5; world++) {
    parallel_inproc_group *g = parallel_inproc_group_new(world);
    for (size_t t = 0; t < WT_ARRAY_LEN(sizes); t++)
      for (size_t q = 0; q < WT_ARRAY_LEN(pieces); q++)
        for (int op = 0; op < 2; op++) {
          s_piece_job pj = {s_job_new(world, sizes[t], (parallel_op)op), pieces[q],
                            (int)(t + q) % 2};
          for (int r = 0; r < world; r++)
            for (size_t i = 0; i < pj.job.n; i++) pj.job.in[r][i] = (float)wt_rng_normal(&rng);
          int rc = parallel_inproc_run(g, s_piece_fn, &pj, NULL);
          WT_TEST_ASSERT(rc == WT_OK, "world %d n %zu piece %zu", world, sizes[t], pieces[q]);
          WT_TEST_ASSERT(s_ranks_identical(&pj.job), "world %d n %zu piece %zu: ranks differ",
                         world, sizes[t], pieces[q]);
          for (size_t i = 0; i < pj.job.n; i++) {
            float want = s_ring_order(&pj.job, i);
            if (memcmp(&pj.job.out[0][i], &want, sizeof want) != 0) {
              WT_TEST_ASSERT(0, "world %d n %zu piece %zu op %d i %zu: %.9g, ring order gives %.9g",
                             world, sizes[t], pieces[q], op, i, pj.job.out[0][i], want);
              break;
            }
          }
          s_job_free(&pj.job);
        }
    parallel_inproc_group_destroy(&g);
  }
}

/* Two pieces in flight per link: a mailbox that holds exactly two piece frames must suffice. */
static void test_pieces_two_frame_queue(void) {
  int world = 5;
  size_t piece = 16;
  parallel_inproc_group *g = parallel_inproc_group_new(world);
  parallel_inproc_group_set_max_queue(g, 2 * (PARALLEL_FRAME_HEADER + piece * sizeof(float)));
  parallel_inproc_group_set_timeout(g, 20.0);
  s_piece_job pj = {s_job_new(world, 10001, PARALLEL_OP_SUM), piece, 0};
  float *want = wt_xcalloc(pj.job.n, sizeof(float));
  for (int r = 0; r < world; r++)
    for (size_t i = 0; i < pj.job.n; i++) want[i] += pj.job.in[r][i] = (float)((int)(i % 89) - r);
  WT_TEST_ASSERT(parallel_inproc_run(g, s_piece_fn, &pj, NULL) == WT_OK, "two-frame queue: %s",
                 wt_last_error());
  for (int r = 0; r < world; r++)
    WT_TEST_ASSERT(!memcmp(pj.job.out[r], want, pj.job.n * sizeof(float)), "rank %d wrong", r);
  free(want);
  s_job_free(&pj.job);
  parallel_inproc_group_destroy(&g);
}

/* ---- broadcast and all-gather-v ---------------------------------------------------------- */

typedef struct {
  int root;
  size_t bytes;
  uint8_t **bufs;
} s_bcast_job;

static int s_bcast_fn(parallel_comm *c, void *arg) {
  s_bcast_job *b = arg;
  return parallel_broadcast(c, b->bufs[parallel_comm_rank(c)], b->bytes, b->root);
}

/* Small buffers (one message per tree edge) and one of three and a bit pieces, which every
 * rank forwards piece by piece. */
static void test_broadcast(void) {
  for (int world = 1; world <= 8; world++) {
    parallel_inproc_group *g = parallel_inproc_group_new(world);
    for (int root = 0; root < world; root++)
      for (int large = 0; large < 2; large++) {
        size_t bytes =
            large ? 3 * PARALLEL_RING_PIECE_FLOATS * sizeof(float) + 5 : 1 + (size_t)root * 37;
        s_bcast_job b = {root, bytes, wt_xcalloc((size_t)world, sizeof(uint8_t *))};
        for (int r = 0; r < world; r++) {
          b.bufs[r] = wt_xmalloc(bytes);
          for (size_t i = 0; i < bytes; i++) b.bufs[r][i] = (uint8_t)(r * 31 + i * 7 + i / 251);
        }
        WT_TEST_ASSERT(parallel_inproc_run(g, s_bcast_fn, &b, NULL) == WT_OK, "bcast: %s",
                       wt_last_error());
        for (int r = 0; r < world; r++)
          WT_TEST_ASSERT(!memcmp(b.bufs[r], b.bufs[root], bytes), "world %d root %d rank %d %zu B",
                         world, root, r, bytes);
        for (int r = 0; r < world; r++) free(b.bufs[r]);
        free(b.bufs);
      }
    parallel_inproc_group_destroy(&g);
  }
}

typedef struct {
  size_t max_total;
  uint8_t **outs;
  size_t **offsets;
} s_gatherv_job;

/* Rank r contributes r*5 bytes (rank 0 none), each byte (r, i) distinguishable. */
static int s_gatherv_fn(parallel_comm *c, void *arg) {
  s_gatherv_job *j = arg;
  int r = parallel_comm_rank(c);
  uint8_t mine[64];
  for (int i = 0; i < r * 5; i++) mine[i] = (uint8_t)(r * 16 + i);
  return parallel_allgatherv(c, mine, (size_t)r * 5, j->max_total, &j->outs[r], j->offsets[r]);
}

static void test_allgatherv(void) {
  for (int world = 1; world <= 8; world++) {
    parallel_inproc_group *g = parallel_inproc_group_new(world);
    for (int limited = 0; limited < 2; limited++) {
      size_t total = 5 * (size_t)world * (size_t)(world - 1) / 2;
      s_gatherv_job j = {limited ? total - 1 : total, wt_xcalloc((size_t)world, sizeof(uint8_t *)),
                         wt_xcalloc((size_t)world, sizeof(size_t *))};
      for (int r = 0; r < world; r++) j.offsets[r] = wt_xcalloc((size_t)world + 1, sizeof(size_t));
      int rcs[8];
      parallel_inproc_run(g, s_gatherv_fn, &j, rcs);
      for (int r = 0; r < world; r++) {
        if (limited && total > 0) {
          WT_TEST_ASSERT(rcs[r] == WT_EMISMATCH && !j.outs[r], "world %d: limit not enforced",
                         world);
          continue;
        }
        WT_TEST_ASSERT(rcs[r] == WT_OK && j.offsets[r][world] == total, "world %d rank %d", world,
                       r);
        for (int s = 0; s < world && rcs[r] == WT_OK; s++)
          for (int i = 0; i < s * 5; i++)
            if (j.outs[r][j.offsets[r][s] + (size_t)i] != (uint8_t)(s * 16 + i)) {
              WT_TEST_ASSERT(0, "world %d rank %d: block of rank %d wrong", world, r, s);
              break;
            }
      }
      for (int r = 0; r < world; r++) {
        free(j.outs[r]);
        free(j.offsets[r]);
      }
      free(j.outs);
      free(j.offsets);
    }
    parallel_inproc_group_destroy(&g);
  }
}

/* Blocks of several pipelined pieces, of different lengths (rank 0's one byte, rank r's
 * r × 300000 + 1: up to 5 pieces of 256 KiB), every byte distinguishable. */
static size_t s_piece_len(int r) {
  return (size_t)r * 300000 + 1;
}

static int s_gatherv_pieces_fn(parallel_comm *c, void *arg) {
  s_gatherv_job *j = arg;
  int r = parallel_comm_rank(c);
  uint8_t *mine = wt_xmalloc(s_piece_len(r));
  for (size_t i = 0; i < s_piece_len(r); i++) mine[i] = (uint8_t)(r * 37 + i * 7 + i / 251);
  int rc = parallel_allgatherv(c, mine, s_piece_len(r), j->max_total, &j->outs[r], j->offsets[r]);
  free(mine);
  return rc;
}

static void test_allgatherv_pieces(void) {
  for (int world = 2; world <= 5; world++) {
    parallel_inproc_group *g = parallel_inproc_group_new(world);
    s_gatherv_job j = {(size_t)1 << 24, wt_xcalloc((size_t)world, sizeof(uint8_t *)),
                       wt_xcalloc((size_t)world, sizeof(size_t *))};
    for (int r = 0; r < world; r++) j.offsets[r] = wt_xcalloc((size_t)world + 1, sizeof(size_t));
    int rcs[8];
    parallel_inproc_run(g, s_gatherv_pieces_fn, &j, rcs);
    for (int r = 0; r < world; r++) {
      WT_TEST_ASSERT(rcs[r] == WT_OK, "world %d rank %d: %d", world, r, rcs[r]);
      int bad = -1;
      for (int s = 0; s < world && rcs[r] == WT_OK && bad < 0; s++) {
        WT_TEST_ASSERT(j.offsets[r][s + 1] - j.offsets[r][s] == s_piece_len(s), "block length");
        for (size_t i = 0; i < s_piece_len(s) && bad < 0; i++)
          if (j.outs[r][j.offsets[r][s] + i] != (uint8_t)(s * 37 + i * 7 + i / 251)) bad = s;
      }
      WT_TEST_ASSERT(bad < 0, "world %d rank %d: block of rank %d wrong", world, r, bad);
      free(j.outs[r]);
      free(j.offsets[r]);
    }
    free(j.outs);
    free(j.offsets);
    parallel_inproc_group_destroy(&g);
  }
}

typedef struct {
  s_job job;
  s_faulty_ctx *ctxs;
  int rcs[8];
} s_fault_job;

static int s_fault_fn(parallel_comm *inner, void *arg) {
  s_fault_job *fj = arg;
  int r = parallel_comm_rank(inner);
  fj->ctxs[r].inner = inner;
  parallel_comm *c = parallel_comm_new(&s_faulty_ops, &fj->ctxs[r], r, parallel_comm_size(inner));
  memcpy(fj->job.out[r], fj->job.in[r], fj->job.n * sizeof(float));
  fj->rcs[r] = parallel_allreduce(c, fj->job.out[r], fj->job.n, PARALLEL_OP_SUM);
  parallel_comm_destroy(&c);
  return fj->rcs[r];
}

/* Rank 1 damages its first message (to rank 2): rank 2 must fail with WT_ECORRUPT (or
 * WT_EMISMATCH for an oversized one, refused by the transport), every rank must return (peers of
 * a failed rank see it leave: WT_EIO), and nothing may crash. */
static void test_faults(void) {
  int world = 4;
  parallel_inproc_group *g = parallel_inproc_group_new(world);
  parallel_inproc_group_set_timeout(g, 10.0);
  for (int d = S_FLIP_HEADER; d <= S_DROP_TO_EMPTY; d++) {
    s_fault_job fj = {s_job_new(world, 103, PARALLEL_OP_SUM),
                      wt_xcalloc((size_t)world, sizeof(s_faulty_ctx)),
                      {0}};
    for (int r = 0; r < world; r++) fj.ctxs[r].victim_msg = r == 1 ? 0 : -1;
    fj.ctxs[1].damage = (s_damage)d;
    int rc = parallel_inproc_run(g, s_fault_fn, &fj, NULL);
    WT_TEST_ASSERT(rc != WT_OK, "damage %d went unnoticed", d);
    int want = d == S_EXTEND ? WT_EMISMATCH : WT_ECORRUPT;
    WT_TEST_ASSERT(fj.rcs[2] == want, "damage %d: rank 2 returned %s", d,
                   wt_status_name(fj.rcs[2]));
    s_job_free(&fj.job);
    free(fj.ctxs);
  }
  parallel_inproc_group_destroy(&g);
}

/* The payload CRC is left out only where the transport guarantees integrity: there a damaged
 * header is still refused (the header CRC), and a receiver whose own link gives no such
 * guarantee refuses a frame whose CRC leaves the payload out (a sender that wrongly claims it). */
static void test_integrity_checksums(void) {
  int world = 4;
  parallel_inproc_group *g = parallel_inproc_group_new(world);
  parallel_inproc_group_set_timeout(g, 10.0);
  for (int all = 0; all < 2; all++) {
    s_fault_job fj = {s_job_new(world, 103, PARALLEL_OP_SUM),
                      wt_xcalloc((size_t)world, sizeof(s_faulty_ctx)),
                      {0}};
    for (int r = 0; r < world; r++) {
      fj.ctxs[r].victim_msg = all && r == 1 ? 0 : -1;
      fj.ctxs[r].integrity = all || r == 1;
    }
    fj.ctxs[1].damage = S_FLIP_HEADER;
    int rc = parallel_inproc_run(g, s_fault_fn, &fj, NULL);
    WT_TEST_ASSERT(rc != WT_OK && fj.rcs[2] == WT_ECORRUPT, "%s: rank 2 returned %s",
                   all ? "header flip with integrity" : "unchecksummed payload",
                   wt_status_name(fj.rcs[2]));
    s_job_free(&fj.job);
    free(fj.ctxs);
  }
  /* Every rank with integrity and nothing damaged: the header-only frames go through. */
  s_fault_job fj = {s_job_new(world, 1001, PARALLEL_OP_SUM),
                    wt_xcalloc((size_t)world, sizeof(s_faulty_ctx)),
                    {0}};
  float *want = wt_xcalloc(fj.job.n, sizeof(float));
  for (int r = 0; r < world; r++) {
    fj.ctxs[r].victim_msg = -1;
    fj.ctxs[r].integrity = 1;
    for (size_t i = 0; i < fj.job.n; i++) want[i] += fj.job.in[r][i] = (float)((int)i - r);
  }
  WT_TEST_ASSERT(parallel_inproc_run(g, s_fault_fn, &fj, NULL) == WT_OK, "integrity: %s",
                 wt_last_error());
  WT_TEST_ASSERT(!memcmp(fj.job.out[3], want, fj.job.n * sizeof(float)), "integrity: wrong sum");
  free(want);
  s_job_free(&fj.job);
  free(fj.ctxs);
  parallel_inproc_group_destroy(&g);
}

/* A run in which only rank 0 starts a collective (it fails: its peer has left) must not leave
 * the next run's ranks out of step: each run restarts the sequence numbers. */
static int s_lonely_fn(parallel_comm *c, void *arg) {
  float x[3] = {1, 2, 3};
  (void)arg;
  if (parallel_comm_rank(c) != 0) return WT_OK;
  return parallel_allreduce(c, x, 3, PARALLEL_OP_SUM) == WT_EIO ? WT_OK : WT_EINVAL;
}

static void test_runs_restart_sequence(void) {
  parallel_inproc_group *g = parallel_inproc_group_new(2);
  WT_TEST_ASSERT(parallel_inproc_run(g, s_lonely_fn, NULL, NULL) == WT_OK, "lonely rank");
  s_job j = s_job_new(2, 5, PARALLEL_OP_SUM);
  WT_TEST_ASSERT(parallel_inproc_run(g, s_allreduce_fn, &j, NULL) == WT_OK, "next run");
  s_job_free(&j);
  parallel_inproc_group_destroy(&g);
}

int main(void) {
  test_allreduce_exact();
  test_allreduce_random();
  test_reduce_scatter_small_queue();
  test_pieces_bitwise();
  test_pieces_two_frame_queue();
  test_broadcast();
  test_allgatherv();
  test_allgatherv_pieces();
  test_faults();
  test_integrity_checksums();
  test_runs_restart_sequence();
  return wt_test_finish("test_parallel_collectives");
}
