/* tasklet — one pipeline stage of one data-parallel replica for a whole run: builds the stage's
 * trainer, the pipeline executor and the data-parallel machinery, and plugs them into
 * trainer_step's hooks (tasklet.h). */
#include "parallel/runtime/tasklet.h"

#include "common/bytes.h" /* defines: wt_put_le64 / wt_get_le64 for the norm message */
#include "common/common.h"
#include "kernels/kernels.h" /* defines: kernels_for_device, the back end's copies */
#include "parallel/collectives/collectives.h"
#include "parallel/runtime/diloco.h"
#include "parallel/runtime/pipeline.h"
#include "parallel/runtime/tasklet_internal.h"
#include "parallel/runtime/zero.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Split ids (comm.h): no two ranks share both a stage and a replica, so every data-parallel
 * group can use one id and every pipeline another. */
#define S_SPLIT_DP 1
#define S_SPLIT_PIPE 2
/* The world's user tag of the per-step norm exchange (below 2^24: comm.h's split rule). */
#define S_TAG_NORM 1
#define S_TAG_VAL 2 /* the validation loss, from the last stage of replica 0 */
/* 3, 4: tasklet_spot.c's activation checks */

/* Tasklets of this process running on the CUDA back end, whose state is process-wide (its
 * cuBLAS handle, scratch buffers and copy stream: tasklet.h): at most one at a time. */
static atomic_int s_cuda_tasklets;

/* Takes the CUDA back end for tasklet k when its stage runs there; refuses a second one. */
static int s_claim_backend(parallel_tasklet *k, const kernels_ops *ops) {
  if (!ops || strcmp(ops->name, "cuda")) return WT_OK;
  if (atomic_fetch_add(&s_cuda_tasklets, 1) > 0) {
    atomic_fetch_sub(&s_cuda_tasklets, 1);
    return wt_fail(WT_ENOTSUP, "another tasklet of this process already runs on the CUDA back end, "
                               "whose state is process-wide; run one tasklet per process "
                               "(wantrain launch, peerd)");
  }
  k->holds_cuda = 1;
  return WT_OK;
}

/* The device parallel_tasklet_config_default names (parallel_tasklet_set_default_device). */
static char s_default_device[PARALLEL_TASKLET_DEVICE_MAX];

int parallel_tasklet_set_default_device(const char *name) {
  const kernels_ops *ops;
  if (!name || strlen(name) >= sizeof s_default_device)
    return wt_fail(WT_EINVAL, "device '%s' is not cpu, cuda or cuda:N", name ? name : "");
  WT_CHECK(kernels_for_device(name, &ops));
  snprintf(s_default_device, sizeof s_default_device, "%s", name);
  return WT_OK;
}

parallel_tasklet_config parallel_tasklet_config_default(void) {
  parallel_tasklet_config c;
  memset(&c, 0, sizeof c);
  c.run = parallel_run_config_default();
  snprintf(c.device, sizeof c.device, "%s", s_default_device);
  return c;
}

int parallel_tasklet_config_from_run(const parallel_run_config *run, int stage, int replica,
                                     const data_set *data, parallel_tasklet_config *cfg) {
  parallel_tasklet_config c = parallel_tasklet_config_default();
  c.run = *run;
  c.stage = stage, c.replica = replica;
  c.data = data;
  trainer_config t;
  WT_CHECK(parallel_tasklet_trainer_config(&c, &t));
  *cfg = c;
  return WT_OK;
}

/* A ring order must name every replica once and start at replica 0, which stays data-parallel
 * rank 0 (the rank that gathers and saves). */
static int s_check_ring(const int *ring, int R) {
  if (ring[0] != 0) return wt_fail(WT_EINVAL, "dp_ring starts at replica %d, not 0", ring[0]);
  for (int i = 0; i < R; i++) {
    int seen = 0;
    for (int j = 0; j < R; j++) seen += ring[j] == i;
    if (seen != 1)
      return wt_fail(WT_EINVAL,
                     "dp_ring names replica %d %d times; it must be a permutation of "
                     "0..%d",
                     i, seen, R - 1);
  }
  return WT_OK;
}

int parallel_tasklet_config_validate(const parallel_tasklet_config *c, int world_size) {
  if (c->run.stages < 1 || c->run.replicas < 1 || c->run.stages * c->run.replicas != world_size)
    return wt_fail(WT_EINVAL, "%d stages x %d replicas do not make the world of %d processes",
                   c->run.stages, c->run.replicas, world_size);
  if (c->stage < 0 || c->stage >= c->run.stages || c->replica < 0 || c->replica >= c->run.replicas)
    return wt_fail(WT_EINVAL, "tasklet (stage %d, replica %d) is outside %d x %d", c->stage,
                   c->replica, c->run.stages, c->run.replicas);
  const int parts = c->run.replicas * c->run.micro_batches;
  if (parts < 1 || c->run.batch % parts)
    return wt_fail(WT_EINVAL,
                   "batch %d is not a multiple of replicas x micro-batches = %d x %d: every "
                   "replica takes batch / replicas rows in micro-batches of equal size",
                   c->run.batch, c->run.replicas, c->run.micro_batches);
  if (c->first_layer == 0 && c->last_layer == 0 && c->run.layers < c->run.stages)
    return wt_fail(WT_EINVAL, "%d layers cannot be split into %d stages; use fewer --stages",
                   c->run.layers, c->run.stages);
  if (!c->data) return wt_fail(WT_EINVAL, "tasklet: no data set");
  if (strcmp(c->run.sync.grad_codec, "none") && !compress_codec_ops_by_name(c->run.sync.grad_codec))
    return wt_fail(WT_EINVAL, "--grad-codec %s is unknown; use none or one of %s",
                   c->run.sync.grad_codec, compress_codec_names());
  WT_CHECK(parallel_pipeline_codec_check(c->run.act_codec));
  if (c->run.sync.diloco < 0)
    return wt_fail(WT_EINVAL, "--diloco %d must be >= 0", c->run.sync.diloco);
  if (c->run.val_every < 0)
    return wt_fail(WT_EINVAL, "--val-every %d must be >= 0", c->run.val_every);
  if (!(c->run.time_limit >= 0))
    return wt_fail(WT_EINVAL, "--time-limit %g must be >= 0 seconds", c->run.time_limit);
  if (c->run.zero != 0 && c->run.zero != 1)
    return wt_fail(WT_EINVAL, "--zero %d: use 0 or 1", c->run.zero);
  parallel_robust_kind robust;
  if (parallel_robust_kind_parse(c->run.robust, &robust) != WT_OK)
    return wt_fail(WT_EINVAL, "--robust %s is unknown; use one of %s", c->run.robust,
                   PARALLEL_ROBUST_NAMES);
  if (c->run.zero && robust != PARALLEL_ROBUST_NONE)
    return wt_fail(WT_EINVAL,
                   "--robust %s all-gathers whole gradients, which --zero 1 shards; "
                   "drop one of them",
                   c->run.robust);
  if (c->run.zero && (strcmp(c->run.sync.grad_codec, "none") || c->run.sync.diloco))
    return wt_fail(WT_EINVAL, "--zero 1 shards the uncompressed synchronous update; drop "
                              "--grad-codec and --diloco");
  if (c->run.keep < 1) return wt_fail(WT_EINVAL, "keep %d must be >= 1", c->run.keep);
  if (c->run.act_slots < 0 || c->run.act_slots > GPT_MAX_SLOTS)
    return wt_fail(WT_EINVAL, "act_slots %d: use 0 (as many as needed) to %d", c->run.act_slots,
                   GPT_MAX_SLOTS);
  if (c->dp_ring) WT_CHECK(s_check_ring(c->dp_ring, c->run.replicas));
  if (c->run.site_ranks < 0 || c->run.site_ranks > PARALLEL_SITE_MAX_RANKS)
    return wt_fail(WT_EINVAL, "site ranks %d: use 1 (no site) to %d", c->run.site_ranks,
                   PARALLEL_SITE_MAX_RANKS);
  const int site_cp = c->run.site_cp > 1 ? c->run.site_cp : 1;
  if (c->run.site_cp < 0 || c->run.site_cp > PARALLEL_SITE_MAX_RANKS)
    return wt_fail(WT_EINVAL, "site cp %d: use 1 (no context parallelism) to %d", c->run.site_cp,
                   PARALLEL_SITE_MAX_RANKS);
  if (c->run.site_ranks > 1 && c->run.moe.experts) {
    /* An MoE site's ranks are expert-parallel: each holds E/n experts and B/n rows. */
    const int n = c->run.site_ranks, E = c->run.moe.experts;
    const int per = c->run.replicas * c->run.micro_batches;
    const int rows = per > 0 ? c->run.batch / per : 0;
    if (site_cp > 1)
      return wt_fail(WT_EINVAL,
                     "a site runs an MoE model with its %d GPUs as expert-parallel ranks, "
                     "without context parallelism: drop the site's CP degree %d",
                     n, site_cp);
    if (E % n || rows % n)
      return wt_fail(WT_EINVAL,
                     "a site of %d GPUs runs an MoE model as %d expert-parallel ranks, which "
                     "split its %d experts and each micro-batch's %d rows evenly: use a GPU count "
                     "that divides both",
                     n, n, E, rows);
  }
  if (site_cp > 1 && c->run.site_ranks > 1 && c->run.site_ranks % site_cp)
    return wt_fail(WT_EINVAL,
                   "a site of %d GPUs cannot split each sequence over %d of them: use a GPU "
                   "count that is a multiple of the context-parallel degree %d",
                   c->run.site_ranks, site_cp, site_cp);
  if (c->run.site_ranks > 1 && !c->run.moe.experts && c->run.heads % (c->run.site_ranks / site_cp))
    return wt_fail(WT_EINVAL,
                   "a site of %d GPUs (%d tensor-parallel × %d context-parallel) splits the %d "
                   "heads over %d ranks: use a GPU count whose tensor-parallel part divides them",
                   c->run.site_ranks, c->run.site_ranks / site_cp, site_cp, c->run.heads,
                   c->run.site_ranks / site_cp);
  if (site_cp > 1 && c->run.site_ranks > 1 && c->run.seq % (2 * site_cp))
    return wt_fail(WT_EINVAL,
                   "a site with context parallelism %d splits each sequence into %d chunks: "
                   "use a sequence length that is a multiple of %d, not %d",
                   site_cp, 2 * site_cp, 2 * site_cp, c->run.seq);
  if (c->resume && !c->run.checkpoint_dir[0])
    return wt_fail(WT_EINVAL, "--resume needs --checkpoint-dir");
  if ((c->state_in || c->state_out) && !parallel_run_config_live_recovery(&c->run) &&
      parallel_run_config_stateful(&c->run))
    return wt_fail(WT_EINVAL, "a state hand-over holds the model, optimizer and data position, "
                              "and DiLoCo's outer state: it needs --diloco, or --zero 0, no error "
                              "feedback and no delta --act-codec");
  if ((c->state_in_replica || c->start_step) && (!c->state_in || !c->run.sync.diloco))
    return wt_fail(WT_EINVAL, "starting as a replacement replica or at a later step needs a "
                              "handed-over state in a DiLoCo run");
  if (c->state_in && c->resume)
    return wt_fail(WT_EINVAL, "start from a handed-over state or resume, not both");
  return WT_OK;
}

/* This stage's layers: the config's, or an even split. */
static void s_layers(const parallel_tasklet_config *c, int *first, int *last) {
  if (c->first_layer || c->last_layer) {
    *first = c->first_layer, *last = c->last_layer;
    return;
  }
  int L = c->run.layers;
  *first = c->stage * L / c->run.stages;
  *last = (c->stage + 1) * L / c->run.stages;
}

/* ---- hooks ---------------------------------------------------------------------------------- */

static int s_grads(void *ctx, trainer *t, const int *inputs, const int *targets, int rows,
                   float *loss) {
  parallel_tasklet *k = ctx;
  (void)t, (void)rows;
  const long step = trainer_steps_done(t) + 1;
  double t0 = wt_now_s();
  parallel_tasklet_spot_act_before(k, step);
  int rc = parallel_pipeline_run(k->pipeline, inputs, targets, loss);
  k->pipeline_s += wt_now_s() - t0;
  return rc == WT_OK ? parallel_tasklet_spot_act_after(k, step) : rc;
}

/* Keeps the robust sync's evidence in replica order (data-parallel rank i is replica
 * dp_ring[i]) for the step's report, and logs what was left out (once per stage: its replica 0
 * logs, whose view is everyone's). */
static void s_robust_ran(parallel_tasklet *k, const parallel_robust_report *rep, long step) {
  parallel_robust_report *mine = &k->robust_report;
  *mine = *rep;
  for (int i = 0; i < rep->world; i++) {
    const int r = k->cfg.dp_ring ? k->cfg.dp_ring[i] : i;
    const parallel_robust_evidence *e = &rep->rank[i];
    mine->rank[r] = *e;
    if (!e->flags || k->cfg.replica != 0) continue;
    char why[96];
    parallel_robust_flags_str(e->flags, why, sizeof why);
    WT_WARN("stage %d step %ld: replica %d's contribution left out (%s): norm %.4g (band %.4g to "
            "%.4g), cosine %.3f (at least %.3f)",
            k->cfg.stage, step, r, why, e->norm, rep->norm_lo, rep->norm_hi, e->cosine,
            rep->cos_min);
  }
  k->robust_ran = 1;
}

/* The test harness's view of this tasklet's contribution (tasklet.h: test_tamper). */
static void s_tamper(parallel_tasklet *k, long step, float *x, size_t n) {
  if (k->cfg.test_tamper) k->cfg.test_tamper(k->cfg.test_tamper_arg, step, x, n);
}

static void s_tamper_act(void *arg, int micro_batch, float *act, size_t n) {
  parallel_tasklet *k = arg;
  (void)micro_batch;
  k->cfg.test_tamper_act(k->cfg.test_tamper_arg, trainer_steps_done(k->t) + 1, act, n);
}

/* The collective of the step on host gradients g (n floats). */
static int s_reduce_host(parallel_tasklet *k, trainer *t, float *g, size_t n) {
  if (k->zero) return parallel_zero_reduce(k->zero, g);
  if (k->codec) compress_codec_set_seed(k->codec, (uint64_t)trainer_steps_done(t) + 1); /* randk */
  if (k->robust) {
    parallel_robust_report rep;
    parallel_tasklet_spot_before_sync(k, trainer_steps_done(t) + 1);
    WT_CHECK(parallel_robust_allreduce(k->robust, k->dp, k->codec, k->sef, g, n, &rep));
    s_robust_ran(k, &rep, trainer_steps_done(t) + 1);
    return WT_OK;
  }
  if (!k->codec) return parallel_allreduce(k->dp, g, n, PARALLEL_OP_AVG);
  if (k->sparse) return parallel_allreduce_sparse(k->dp, k->codec, g, n, PARALLEL_OP_AVG, k->sef);
  return parallel_allreduce_compressed(k->dp, k->codec, g, n, PARALLEL_OP_AVG, k->ef);
}

/* Puts the reduced gradient g back on a device: all of it, or with ZeRO-1 only this replica's
 * shard, the one part the norm and the update read. */
static void s_grads_upload(parallel_tasklet *k, gpt_stage *s, const float *g) {
  if (!k->ops->device) return;
  if (!k->zero) {
    gpt_stage_grads_upload(s);
    return;
  }
  size_t n, off, len;
  parallel_zero_shard(k->zero, &off, &len);
  k->ops->upload(gpt_stage_grads(s, &n) + off, g + off, sizeof(float) * len);
}

/* On a device the gradient goes down once, is reduced on the host and goes up once (tasklet.h);
 * on a host back end gpt_stage_grads_host is the buffer itself and nothing is copied. */
static int s_reduce(parallel_tasklet *k, trainer *t) {
  if (k->cfg.run.replicas == 1 || k->cfg.run.sync.diloco)
    return WT_OK; /* DiLoCo: replicas step alone */
  size_t n;
  gpt_stage *s = trainer_model(t);
  if (k->ops->device) { /* the sparse codecs encode on the device when they can */
    if (k->codec) compress_codec_set_seed(k->codec, (uint64_t)trainer_steps_done(t) + 1);
    int ran = parallel_tasklet_device_sync(k, gpt_stage_grads(s, &n), n);
    if (ran != 0) return ran < 0 ? ran : WT_OK; /* an error status, or done */
  }
  float *g = gpt_stage_grads_host(s, &n);
  s_tamper(k, trainer_steps_done(t) + 1, g, n);
  int rc = s_reduce_host(k, t, g, n);
  if (rc == WT_OK) rc = parallel_tasklet_spot_after_sync(k, g, n);
  if (rc == WT_OK) s_grads_upload(k, s, g);
  k->grads_host = rc == WT_OK ? g : NULL; /* ZeRO-1's update reads the shard from it */
  return rc;
}

static int s_sync(void *ctx, trainer *t) {
  parallel_tasklet *k = ctx;
  double t0 = wt_now_s();
  WT_CHECK(parallel_pipeline_tied_sum(k->pipeline));
  double t1 = wt_now_s();
  int rc = s_reduce(k, t);
  k->tied_s += t1 - t0;
  k->reduce_s += wt_now_s() - t1;
  return rc;
}

/* This tasklet's share of the squared norm: its ZeRO shard, or the whole stage summed chunk by
 * chunk over the ring's chunks (the same grouping as the shards, so both agree bitwise). */
static double s_sq_share(parallel_tasklet *k, gpt_stage *s) {
  size_t n, off, len;
  gpt_stage_grads(s, &n);
  if (k->zero) {
    parallel_zero_shard(k->zero, &off, &len);
    return trainer_grad_sq_norm_range(s, off, off + len);
  }
  double sq = 0;
  for (int c = 0; c < k->cfg.run.replicas; c++) {
    parallel_chunk_range(n, k->cfg.run.replicas, c, &off, &len);
    sq += trainer_grad_sq_norm_range(s, off, off + len);
  }
  return sq;
}

/* One tasklet's entry of the per-step exchange: its norm share, its loss (doubles) and a stop
 * flag (world rank 0's time-limit decision; 0 from everyone else). */
#define S_ENTRY 24

/* Every tasklet's entry to every other, each message stamped with the step: one message latency
 * per step instead of a ring's 2(W-1) (the messages are tiny, so W-1 of them per tasklet cost
 * nothing next to a WAN latency). all receives W entries in world rank order. A peer at another
 * step is refused (WT_ECORRUPT). */
static int s_exchange(parallel_tasklet *k, const uint8_t mine[S_ENTRY], long step, uint8_t *all) {
  const int W = parallel_comm_size(k->world), me = parallel_comm_rank(k->world);
  uint8_t msg[8 + S_ENTRY], got_msg[8 + S_ENTRY];
  wt_put_le64(msg, (uint64_t)step);
  memcpy(msg + 8, mine, S_ENTRY);
  memcpy(all + (size_t)me * S_ENTRY, mine, S_ENTRY);
  for (int w = 0; w < W; w++)
    if (w != me) WT_CHECK(parallel_comm_send(k->world, w, S_TAG_NORM, msg, sizeof msg));
  for (int w = 0; w < W; w++) {
    if (w == me) continue;
    size_t got = 0;
    WT_CHECK(parallel_comm_recv(k->world, w, S_TAG_NORM, got_msg, sizeof got_msg, &got));
    if (got != sizeof got_msg || wt_get_le64(got_msg) != (uint64_t)step)
      return wt_fail(WT_ECORRUPT,
                     "norm exchange: world rank %d sent %zu bytes for step %llu, "
                     "expected %zu for step %ld",
                     w, got, (unsigned long long)(got >= 8 ? wt_get_le64(got_msg) : 0),
                     sizeof got_msg, step);
    memcpy(all + (size_t)w * S_ENTRY, got_msg + 8, S_ENTRY);
  }
  return WT_OK;
}

static double s_get_double(const uint8_t *p) {
  uint64_t bits = wt_get_le64(p);
  double v;
  memcpy(&v, &bits, 8);
  return v;
}

static void s_put_double(uint8_t *p, double v) {
  uint64_t bits;
  memcpy(&bits, &v, 8);
  wt_put_le64(p, bits);
}

static int s_norm(void *ctx, trainer *t, float local_loss, double *sq, float *loss) {
  parallel_tasklet *k = ctx;
  const int S = k->cfg.run.stages, R = k->cfg.run.replicas;
  uint8_t mine[S_ENTRY] = {0};
  s_put_double(mine, s_sq_share(k, trainer_model(t)));
  s_put_double(mine + 8, local_loss);
  if (parallel_comm_rank(k->world) == 0 && k->cfg.run.time_limit > 0 &&
      wt_now_s() - k->t_start >= k->cfg.run.time_limit)
    mine[16] = 1;
  uint8_t *all = wt_xmalloc((size_t)S * R * S_ENTRY);
  double t0 = wt_now_s();
  int rc = s_exchange(k, mine, trainer_steps_done(t) + 1, all);
  k->norm_s += wt_now_s() - t0;
  if (rc == WT_OK) {
    /* field f (0 sq share, 1 loss) of tasklet (s, r) = world rank s·R + r */
#define ENTRY(s, r, f) s_get_double(all + ((size_t)(s)*R + (size_t)(r)) * S_ENTRY + 8 * (f))
    double total = 0, loss_sum = 0;
    for (int s = 0; s < S; s++) {
      double stage = 0;
      if (k->zero)
        for (int c = 0; c < R; c++) stage += ENTRY(s, parallel_chunk_owner(c, R), 0);
      else
        stage = ENTRY(s, k->cfg.replica, 0);
      total += stage;
    }
    for (int r = 0; r < R; r++) loss_sum += ENTRY(S - 1, r, 1);
#undef ENTRY
    *sq = total;
    *loss = (float)(loss_sum / R);
    k->stop = all[16] != 0; /* world rank 0's entry */
  }
  free(all);
  return rc;
}

/* ZeRO-1's update on host buffers: the reduced gradient s_reduce left on the host, and the
 * parameters — on a device, the shard is downloaded into k->params_host (the all-gather fills
 * in the rest) and the whole is uploaded after the all-gather. */
static int s_update(void *ctx, trainer *t, float lr, float grad_scale) {
  parallel_tasklet *k = ctx;
  size_t n, off, len;
  float *params = gpt_stage_params(trainer_model(t), &n), *dev = params;
  if (!k->grads_host) return wt_fail(WT_EINVAL, "tasklet: ZeRO-1 update without a reduce");
  if (k->ops->device) {
    if (!k->params_host && !(k->params_host = k->ops->host_alloc(sizeof(float) * n)))
      return wt_fail(WT_ENOMEM, "ZeRO-1: no host memory for %zu parameters", n);
    parallel_zero_shard(k->zero, &off, &len);
    k->ops->download(k->params_host + off, dev + off, sizeof(float) * len);
    params = k->params_host;
  }
  int rc = parallel_zero_update(k->zero, params, k->grads_host, lr, grad_scale);
  k->grads_host = NULL;
  if (rc == WT_OK && k->ops->device) k->ops->upload(dev, params, sizeof(float) * n);
  return rc;
}

/* ---- setup ---------------------------------------------------------------------------------- */

static int s_split(parallel_tasklet *k) {
  const int S = k->cfg.run.stages, R = k->cfg.run.replicas, s = k->cfg.stage, r = k->cfg.replica;
  int *ranks = wt_xmalloc(sizeof(int) * (size_t)(S > R ? S : R));
  for (int i = 0; i < R; i++) ranks[i] = s * R + (k->cfg.dp_ring ? k->cfg.dp_ring[i] : i);
  k->dp = parallel_comm_split(k->world, ranks, R, S_SPLIT_DP);
  for (int i = 0; i < S; i++) ranks[i] = i * R + r;
  k->pipe = k->dp ? parallel_comm_split(k->world, ranks, S, S_SPLIT_PIPE) : NULL;
  free(ranks);
  return k->pipe ? WT_OK : WT_EINVAL;
}

static int s_data_parallel(parallel_tasklet *k) {
  const parallel_tasklet_config *c = &k->cfg;
  gpt_stage *s = trainer_model(k->t);
  size_t n;
  gpt_stage_params(s, &n);
  if (c->run.zero) {
    int nt;
    const gpt_tensor_info *ti = gpt_stage_tensors(s, &nt);
    optim_config oc = k->train.optim;
    oc.total_steps = c->run.steps;
    if (!(k->zero = parallel_zero_new(&oc, ti, nt, k->dp))) return WT_EINVAL;
  }
  if (strcmp(c->run.sync.grad_codec, "none")) {
    compress_params p = compress_params_default();
    WT_CHECK_NEW(k->codec, compress_codec_new(c->run.sync.grad_codec, &p));
    k->sparse = !strcmp(c->run.sync.grad_codec, "topk") || !strcmp(c->run.sync.grad_codec, "randk");
  }
  parallel_robust_kind robust = PARALLEL_ROBUST_NONE;
  WT_CHECK(parallel_robust_kind_parse(c->run.robust, &robust));
  if (robust != PARALLEL_ROBUST_NONE && c->run.replicas > 1) {
    parallel_robust_config rc = parallel_robust_config_default(robust);
    WT_CHECK_NEW(k->robust, parallel_robust_new(&rc));
  }
  if (c->run.sync.diloco) {
    diloco_config dc = diloco_config_default();
    dc.robust = k->robust;
    dc.lr = (float)c->run.sync.outer_lr;
    dc.momentum = (float)c->run.sync.outer_momentum;
    dc.codec = k->codec;
    dc.error_feedback = parallel_run_grad_ef(&c->run);
    dc.sparse = k->sparse;
    if (!(k->outer = diloco_new(n, &dc))) return WT_EINVAL;
    diloco_init(k->outer, gpt_stage_params_host(s, &n));
  } else if (k->codec && parallel_run_grad_ef(&c->run) && (k->sparse || k->robust)) {
    k->sef = compress_ef_new(n);
  } else if (k->codec && parallel_run_grad_ef(&c->run)) {
    WT_CHECK_NEW(k->ef, parallel_ef_new(n, parallel_comm_rank(k->dp), c->run.replicas));
  }
  return WT_OK;
}

/* The stage's site: its TP × CP ranks on this process's threads (or, with a site link, the
 * declared site's processes), in the stage's back end. */
static int s_site(parallel_tasklet *k, const trainer_config *tc) {
  const int cp = k->cfg.run.site_cp > 1 ? k->cfg.run.site_cp : 1;
  if (k->cfg.site_link) {
    WT_CHECK_NEW(k->site, parallel_site_new_linked(&tc->model, tc->first_layer, tc->last_layer,
                                                   trainer_micro_rows(k->t), tc->model.max_seq,
                                                   k->cfg.run.site_ranks / cp, cp, k->ops,
                                                   k->cfg.site_link));
    return parallel_pipeline_set_site(k->pipeline, k->site);
  }
  if (k->ops->device)
    return wt_fail(WT_ENOTSUP,
                   "a site of %d ranks runs its ranks as threads of one process, but the %s back "
                   "end's state is process-wide; run sites on the cpu device",
                   k->cfg.run.site_ranks, k->ops->name);
  WT_CHECK_NEW(k->site, parallel_site_new(&tc->model, tc->first_layer, tc->last_layer,
                                          trainer_micro_rows(k->t), tc->model.max_seq,
                                          k->cfg.run.site_ranks / cp, cp, k->ops));
  return parallel_pipeline_set_site(k->pipeline, k->site);
}

int parallel_tasklet_setup(parallel_tasklet *k, const parallel_tasklet_config *cfg,
                           parallel_comm *world) {
  memset(k, 0, sizeof *k);
  k->cfg = *cfg;
  k->world = world;
  WT_CHECK(parallel_tasklet_config_validate(cfg, parallel_comm_size(world)));
  if (parallel_comm_rank(world) != cfg->stage * cfg->run.replicas + cfg->replica)
    return wt_fail(WT_EINVAL, "tasklet (stage %d, replica %d) must be world rank %d, not %d",
                   cfg->stage, cfg->replica, cfg->stage * cfg->run.replicas + cfg->replica,
                   parallel_comm_rank(world));
  WT_CHECK(s_split(k));
  trainer_config *tc = &k->train;
  WT_CHECK(parallel_tasklet_trainer_config(cfg, tc));
  if (cfg->device[0]) WT_CHECK(kernels_for_device(cfg->device, &tc->kernels)); /* this thread's */
  WT_CHECK(s_claim_backend(k, tc->kernels));
  s_layers(cfg, &tc->first_layer, &tc->last_layer);
  if (!(k->t = trainer_new(tc, cfg->data))) return WT_EINVAL;
  k->ops = gpt_stage_kernels(trainer_model(k->t));
  parallel_pipeline_config pc = {.schedule = parallel_run_schedule(&cfg->run),
                                 .micro_batches = tc->micro_batches,
                                 .rows = trainer_micro_rows(k->t),
                                 .seq = tc->model.max_seq};
  snprintf(pc.act_codec, sizeof pc.act_codec, "%.*s", (int)sizeof pc.act_codec - 1,
           cfg->run.act_codec); /* a choice's short name */
  pc.act_slots = cfg->run.act_slots;
  if (cfg->test_tamper_act) pc.test_tamper_act = s_tamper_act, pc.test_tamper_arg = k;
  if (!(k->pipeline = parallel_pipeline_new(&pc, trainer_model(k->t), k->pipe))) return WT_EINVAL;
  if (cfg->run.site_ranks > 1) WT_CHECK(s_site(k, tc));
  WT_CHECK(s_data_parallel(k));
  parallel_tasklet_spot_init(k);
  parallel_tasklet_spot_round_init(k);
  trainer_hooks h = {.ctx = k, .grads = s_grads, .sync = s_sync, .norm = s_norm};
  if (k->zero) h.update = s_update;
  trainer_set_hooks(k->t, &h);
  return WT_OK;
}

void parallel_tasklet_teardown(parallel_tasklet *k) {
  if (k->ops) k->ops->host_free(k->params_host);
  parallel_pipeline_destroy(&k->pipeline);
  parallel_site_destroy(&k->site);
  parallel_zero_destroy(&k->zero);
  diloco_destroy(&k->outer);
  parallel_robust_destroy(&k->robust);
  parallel_tasklet_spot_free(k);
  parallel_tasklet_spot_round_free(k);
  parallel_ef_destroy(&k->ef);
  parallel_tasklet_device_sync_free(k);
  compress_ef_destroy(&k->sef);
  compress_codec_destroy(&k->codec);
  trainer_destroy(&k->t);
  if (k->holds_cuda) atomic_fetch_sub(&s_cuda_tasklets, 1);
  parallel_comm_destroy(&k->dp);
  parallel_comm_destroy(&k->pipe);
}

/* ---- the run -------------------------------------------------------------------------------- */

static void s_bytes(parallel_tasklet *k, uint64_t *pipe, uint64_t *dp, uint64_t *control) {
  *pipe = parallel_comm_bytes_sent(k->pipe);
  *dp = parallel_comm_bytes_sent(k->dp);
  *control = parallel_comm_bytes_sent(k->world) - *pipe - *dp;
}

/* Validation as trainer_val_loss batches it (run.val_batches batches of the stage's micro-batch
 * rows), run by replica 0's pipeline; the last stage of replica 0 sends the loss to every other
 * tasklet, stamped with the step. */
static int s_validate(parallel_tasklet *k, float *val) {
  const int S = k->cfg.run.stages, R = k->cfg.run.replicas, T = k->cfg.run.seq;
  const int W = S * R, me = parallel_comm_rank(k->world), from = (S - 1) * R;
  const long step = trainer_steps_done(k->t);
  int rc = WT_OK;
  float v = NAN;
  if (k->cfg.replica == 0) {
    const int mb = trainer_micro_rows(k->t);
    size_t windows = data_set_num_val_windows(k->cfg.data, T);
    int nb = (int)WT_MIN((size_t)k->cfg.run.val_batches, (windows + (size_t)mb - 1) / (size_t)mb);
    int b = (int)WT_MIN((size_t)mb, windows);
    nb = WT_MIN(nb, PARALLEL_PIPELINE_MAX_EVAL);
    int *in = wt_xmalloc(sizeof(int) * (size_t)nb * b * T);
    int *tg = wt_xmalloc(sizeof(int) * (size_t)nb * b * T);
    for (int i = 0; i < nb; i++)
      data_set_val_batch(k->cfg.data, (size_t)i * b, b, T, in + (size_t)i * b * T,
                         tg + (size_t)i * b * T);
    rc = parallel_pipeline_eval(k->pipeline, in, tg, nb, b, &v);
    free(in), free(tg);
  }
  uint8_t msg[16];
  if (rc == WT_OK && me == from) {
    uint32_t bits;
    memcpy(&bits, &v, 4);
    wt_put_le64(msg, (uint64_t)step), wt_put_le64(msg + 8, bits);
    for (int w = 0; w < W && rc == WT_OK; w++)
      if (w != me) rc = parallel_comm_send(k->world, w, S_TAG_VAL, msg, sizeof msg);
  } else if (rc == WT_OK) {
    size_t got = 0;
    rc = parallel_comm_recv(k->world, from, S_TAG_VAL, msg, sizeof msg, &got);
    if (rc == WT_OK && (got != sizeof msg || wt_get_le64(msg) != (uint64_t)step))
      rc = wt_fail(WT_ECORRUPT,
                   "validation loss from world rank %d: %zu bytes for step %llu, "
                   "expected 16 for step %ld",
                   from, got, (unsigned long long)(got >= 8 ? wt_get_le64(msg) : 0), step);
    uint32_t bits = rc == WT_OK ? (uint32_t)wt_get_le64(msg + 8) : 0;
    memcpy(&v, &bits, 4);
  }
  *val = v;
  return rc;
}

/* The harness sees DiLoCo's contribution, Δ = θ_outer − θ_inner, and θ_inner becomes
 * θ_outer − (what it made of Δ). Only with test_tamper set. */
static void s_tamper_outer(parallel_tasklet *k, long step, float *theta, size_t n) {
  if (!k->cfg.test_tamper) return;
  const float *outer = diloco_theta_outer(k->outer, NULL);
  float *delta = wt_xmalloc(sizeof(float) * (n + 1));
  for (size_t i = 0; i < n; i++) delta[i] = outer[i] - theta[i];
  s_tamper(k, step, delta, n);
  for (size_t i = 0; i < n; i++) theta[i] = outer[i] - delta[i];
  free(delta);
}

/* DiLoCo's outer step after inner step `done`; returns its seconds in *secs. */
static int s_outer(parallel_tasklet *k, long done, double *secs) {
  size_t n;
  double t0 = wt_now_s();
  gpt_stage *s = trainer_model(k->t);
  float *theta = gpt_stage_params_host(s, &n); /* host θ */
  s_tamper_outer(k, done, theta, n);
  const long round = diloco_step_count(k->outer) + 1;
  parallel_tasklet_spot_round_before(k, round);
  WT_CHECK(diloco_outer_step(k->outer, k->dp, theta));
  if (k->robust) s_robust_ran(k, diloco_last_report(k->outer), done);
  gpt_stage_params_upload(s);
  WT_CHECK(parallel_tasklet_spot_round_after(k, round));
  *secs = wt_now_s() - t0;
  k->reduce_s += *secs;
  return WT_OK;
}

/* One step plus, every H steps and at the end, DiLoCo's outer step. */
static int s_step(parallel_tasklet *k, trainer_step_info *info) {
  WT_CHECK(trainer_step(k->t, info));
  long done = trainer_steps_done(k->t);
  if (k->outer && (done % k->cfg.run.sync.diloco == 0 || done == k->cfg.run.steps)) {
    double secs = 0;
    WT_CHECK(s_outer(k, done, &secs));
    info->seconds += secs; /* the step's time includes its share of the outer sync */
  }
  return WT_OK;
}

/* A DiLoCo tasklet started from a handed-over state: moved on to the epoch's start step, and,
 * when that step ends with an outer step (every H steps and the last) that failed (the state has
 * one outer step fewer than the step asks for), that outer step taken now, by every replica of
 * the stage. Started at the run's last step, it has nothing left to train: it saves the final
 * checkpoint. */
static int s_start_live(parallel_tasklet *k) {
  const parallel_tasklet_config *c = &k->cfg;
  if (!k->outer) return WT_OK;
  if (c->start_step) WT_CHECK(parallel_tasklet_state_advance(k, c->start_step));
  const long done = trainer_steps_done(k->t), H = c->run.sync.diloco;
  const long due = done / H + (done >= c->run.steps && done % H ? 1 : 0);
  if (done > 0 && diloco_step_count(k->outer) < due) {
    double secs = 0;
    WT_CHECK(s_outer(k, done, &secs));
    WT_INFO("tasklet stage %d replica %d: took the outer step of step %ld that the previous "
            "epoch did not finish (%.3f s)",
            c->stage, c->replica, done, secs);
  }
  if (done >= c->run.steps && c->run.checkpoint_dir[0]) WT_CHECK(parallel_tasklet_checkpoint(k));
  return WT_OK;
}

int parallel_tasklet_train(parallel_tasklet *k, parallel_tasklet_result *res) {
  const parallel_tasklet_config *c = &k->cfg;
  long end = c->run.steps;
  if (c->stop_after > 0 && c->stop_after < end) end = c->stop_after;
  int rc = WT_OK;
  while (rc == WT_OK && trainer_steps_done(k->t) < end) {
    parallel_tasklet_step st = {.stage = c->stage, .replica = c->replica, .val_loss = NAN};
    k->robust_ran = 0;
    rc = s_step(k, &st.info);
    if (k->robust_ran) st.robust = &k->robust_report;
    if (k->spot_ran) st.spot = &k->spot;
    if (rc != WT_OK) break;
    if (k->stop && st.info.step < end) { /* the time limit: every tasklet ends here */
      end = st.info.step;
      res->time_limited = 1;
    }
    int last = st.info.step == end;
    if (last || (c->run.val_every > 0 && st.info.step % c->run.val_every == 0))
      rc = s_validate(k, &st.val_loss);
    if (rc != WT_OK) break;
    res->steps_done = st.info.step;
    res->last_loss = st.info.loss;
    if (!isnan(st.val_loss)) res->last_val_loss = st.val_loss;
    s_bytes(k, &st.bytes_pipeline, &st.bytes_data, &st.bytes_control);
    if (k->pipeline) st.compute_s = parallel_pipeline_compute_s(k->pipeline);
    if (c->on_step) c->on_step(c->on_step_arg, &st);
    if (c->run.checkpoint_dir[0] &&
        (last || (c->run.checkpoint_every > 0 && st.info.step % c->run.checkpoint_every == 0)))
      rc = parallel_tasklet_checkpoint(k);
  }
  return rc;
}

int parallel_tasklet_run(const parallel_tasklet_config *cfg, parallel_comm *world,
                         parallel_tasklet_result *result) {
  double t0 = wt_now_s();
  parallel_tasklet_result res = {.last_loss = NAN, .last_val_loss = NAN};
  parallel_tasklet *k = wt_xcalloc(1, sizeof *k);
  int rc = parallel_tasklet_setup(k, cfg, world);
  k->t_start = t0;
  if (rc == WT_OK && cfg->resume) rc = parallel_tasklet_resume(k);
  if (rc == WT_OK && cfg->state_in)
    rc = parallel_tasklet_state_load(k, cfg->state_in, cfg->state_in_bytes);
  if (rc == WT_OK && cfg->state_in) rc = s_start_live(k);
  int started = rc == WT_OK; /* the trainer holds a whole state from here on */
  if (rc == WT_OK) res.steps_done = trainer_steps_done(k->t);
  if (rc == WT_OK) rc = parallel_tasklet_train(k, &res);
  if (rc != WT_OK) {
    char why[1024];
    snprintf(why, sizeof why, "%s", wt_last_error());
    rc = wt_fail(rc, "tasklet stage %d replica %d, step %ld: %s", cfg->stage, cfg->replica,
                 k->t ? trainer_steps_done(k->t) + 1 : 0L, why);
  }
  if (k->pipeline) res.compute_s = parallel_pipeline_compute_s(k->pipeline);
  if (k->pipeline) res.recomputes = parallel_pipeline_recomputes(k->pipeline);
  res.pipeline_s = k->pipeline_s, res.tied_s = k->tied_s;
  res.reduce_s = k->reduce_s, res.norm_s = k->norm_s;
  if (k->pipe && k->dp) s_bytes(k, &res.bytes_pipeline, &res.bytes_data, &res.bytes_control);
  if (k->site) res.bytes_site = parallel_site_bytes(k->site);
  res.seconds = wt_now_s() - t0;
  if (cfg->state_out) {
    /* a failed step never reaches the update, so the trainer is at its last completed step */
    *cfg->state_out = NULL, *cfg->state_out_bytes = 0;
    if (started && parallel_tasklet_state_save(k, cfg->state_out, cfg->state_out_bytes) != WT_OK)
      WT_WARN("tasklet stage %d replica %d: cannot keep its state: %s", cfg->stage, cfg->replica,
              wt_last_error());
  }
  parallel_tasklet_teardown(k);
  free(k);
  if (result) *result = res;
  return rc;
}
