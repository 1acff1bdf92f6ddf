/* test_zero — ZeRO-1 against the unsharded update on the same gradients, 3 ranks, AdamW and SGD,
 * a buffer whose shards cut through tensors with and without weight decay: after every step the
 * parameters are bitwise equal on every rank, each rank holds 1/3 of the optimizer state, and
 * ZeRO-1 sent exactly the bytes of the ring all-reduce. */
#include "common/common.h"
#include "common/rng.h"
#include "common/testing.h"
#include "parallel/collectives/collectives.h"
#include "parallel/runtime/zero.h"

enum { R = 3, STEPS = 4 };

static const gpt_tensor_info s_tensors[] = {
    {.name = "a", .ndim = 2, .shape = {10, 50}, .offset = 0, .numel = 500, .weight_decay = 1},
    {.name = "b", .ndim = 1, .shape = {301}, .offset = 500, .numel = 301, .weight_decay = 0},
    {.name = "c", .ndim = 2, .shape = {20, 10}, .offset = 801, .numel = 200, .weight_decay = 1}};
enum { N = 1001, NT = 3 };

typedef struct {
  optim_kind kind;
  float params[R][N];
  uint64_t bytes_zero[R], bytes_ring[R];
} s_case;

static void s_grads(float *g, int rank, int step) {
  wt_rng rng;
  wt_rng_seed(&rng, (uint64_t)(rank * 100 + step));
  for (int i = 0; i < N; i++) g[i] = (float)wt_rng_normal(&rng);
}

static void s_init(float *p) {
  wt_rng rng;
  wt_rng_seed(&rng, 7);
  for (int i = 0; i < N; i++) p[i] = (float)wt_rng_normal(&rng);
}

static int s_rank(parallel_comm *c, void *arg) {
  s_case *k = arg;
  int r = parallel_comm_rank(c);
  optim_config oc = optim_config_default();
  oc.kind = k->kind;
  oc.lr = 0.01f;
  float p_ring[N], p_zero[N], g_ring[N], g_zero[N];
  s_init(p_ring), s_init(p_zero);
  optim *full = optim_new(&oc, s_tensors, NT);
  parallel_zero *z = parallel_zero_new(&oc, s_tensors, NT, c);
  WT_TEST_REQUIRE(full && z, "%s", wt_last_error());
  size_t off, len, state_n;
  parallel_zero_shard(z, &off, &len);
  optim_state(parallel_zero_optim(z), 0, &state_n);
  WT_TEST_ASSERT(state_n == len && (len == N / R || len == N / R + 1), "shard state %zu", state_n);
  for (int step = 0; step < STEPS; step++) {
    s_grads(g_ring, r, step), s_grads(g_zero, r, step);
    uint64_t b0 = parallel_comm_bytes_sent(c);
    WT_TEST_ASSERT(parallel_allreduce(c, g_ring, N, PARALLEL_OP_AVG) == WT_OK, "all-reduce");
    uint64_t b1 = parallel_comm_bytes_sent(c);
    WT_TEST_ASSERT(optim_step(full, p_ring, g_ring, 0.01f, 0.7f) == WT_OK, "step");
    uint64_t b2 = parallel_comm_bytes_sent(c);
    WT_TEST_ASSERT(parallel_zero_reduce(z, g_zero) == WT_OK, "reduce-scatter");
    WT_TEST_ASSERT(parallel_zero_update(z, p_zero, g_zero, 0.01f, 0.7f) == WT_OK, "update");
    k->bytes_ring[r] += b1 - b0, k->bytes_zero[r] += parallel_comm_bytes_sent(c) - b2;
    WT_TEST_ASSERT(!memcmp(p_ring, p_zero, sizeof p_ring), "%s rank %d step %d: parameters differ",
                   k->kind == OPTIM_SGD ? "sgd" : "adamw", r, step);
  }
  memcpy(k->params[r], p_zero, sizeof p_zero);
  optim_destroy(&full);
  parallel_zero_destroy(&z);
  return WT_OK;
}

int main(void) {
  static s_case k;
  parallel_inproc_group *g = parallel_inproc_group_new(R);
  for (int kind = 0; kind < 2; kind++) {
    memset(&k, 0, sizeof k);
    k.kind = kind;
    WT_TEST_ASSERT(parallel_inproc_run(g, s_rank, &k, NULL) == WT_OK, "%s", wt_last_error());
    for (int r = 0; r < R; r++) {
      WT_TEST_ASSERT(!memcmp(k.params[r], k.params[0], sizeof k.params[0]), "rank %d params", r);
      WT_TEST_ASSERT(k.bytes_zero[r] == k.bytes_ring[r] && k.bytes_ring[r] > 0,
                     "rank %d: zero-1 sent %llu bytes, the all-reduce %llu", r,
                     (unsigned long long)k.bytes_zero[r], (unsigned long long)k.bytes_ring[r]);
    }
  }
  parallel_inproc_group_destroy(&g);
  return wt_test_finish("test_zero");
}
