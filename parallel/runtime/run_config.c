/* run_config — the run's option table, its one validator, the stateful rule and the JSON form
 * (run_config.h). Only the model's shape and the sync presets: no kernels, no codecs. */
#include "parallel/runtime/run_config.h"

#include "common/common.h"

#include <assert.h>
#include <cjson/cJSON.h>
#include <string.h>

static const wt_option s_options[] = {PARALLEL_RUN_OPTIONS(parallel_run_config, ), {0}};

const wt_option *parallel_run_options(void) {
  return s_options;
}

parallel_run_config parallel_run_config_default(void) {
  parallel_run_config run;
  memset(&run, 0, sizeof run);
  int rc = wt_config_defaults(s_options, &run);
  assert(rc == WT_OK && "the run's option table has a malformed default");
  (void)rc;
  return run;
}

int parallel_run_config_model(const parallel_run_config *run, int vocab, gpt_config *out) {
  if (run->channels % run->heads)
    return wt_fail(WT_EINVAL, "heads %d do not divide channels %d", run->heads, run->channels);
  gpt_config m = {.vocab_size = vocab,
                  .max_seq = run->seq,
                  .n_layer = run->layers,
                  .n_head = run->heads,
                  .channels = run->channels};
  WT_CHECK(gpt_moe_options_apply(&run->moe, &m));
  WT_CHECK(gpt_config_validate(&m));
  *out = m;
  return WT_OK;
}

/* The pipeline and batch: S stages of at least one layer, B split evenly into R x m. */
static int s_check_pipeline(const parallel_run_config *run) {
  if (run->stages > run->layers)
    return wt_fail(WT_EINVAL, "stages %d exceed layers %d: every stage needs a layer", run->stages,
                   run->layers);
  const int parts = run->replicas * run->micro_batches;
  if (run->batch % parts)
    return wt_fail(WT_EINVAL,
                   "batch %d is not a multiple of replicas x micro-batches = %d x %d = %d",
                   run->batch, run->replicas, run->micro_batches, parts);
  if (run->min_lr > run->lr)
    return wt_fail(WT_EINVAL, "min-lr %g is above lr %g", run->min_lr, run->lr);
  return WT_OK;
}

/* ZeRO-1 shards the optimizer over the replicas of a plain synchronous reduce. */
static int s_check_zero(const parallel_run_config *run) {
  if (!run->zero) return WT_OK;
  if (run->replicas < 2)
    return wt_fail(WT_EINVAL, "zero 1 shards the optimizer over the replicas; it needs replicas "
                              "of 2 or more");
  if (strcmp(run->sync.grad_codec, "none") || run->sync.diloco)
    return wt_fail(WT_EINVAL,
                   "zero 1 needs plain synchronous sync: grad-codec none and diloco 0, not "
                   "grad-codec %s, diloco %d",
                   run->sync.grad_codec, run->sync.diloco);
  return WT_OK;
}

/* The robust aggregate all-gathers whole contributions, which ZeRO-1's sharded reduce never
 * forms. */
static int s_check_robust(const parallel_run_config *run) {
  if (strcmp(run->robust, "none") && run->zero)
    return wt_fail(WT_EINVAL,
                   "robust %s all-gathers whole gradients, which zero 1 shards; use "
                   "zero 0 or robust none",
                   run->robust);
  return WT_OK;
}

/* A site's ranks split a dense stage's heads (and sequences, with site-cp) or, for an MoE
 * model, its experts and each micro-batch's rows. site-cp is checked on its own too: in a
 * coordinator run the sites are the peers' (--gpus), known only when they register. */
static int s_check_site(const parallel_run_config *run) {
  const int n = run->site_ranks, c = run->site_cp;
  if (c > 1 && run->moe.experts > 0)
    return wt_fail(WT_EINVAL,
                   "site-cp %d: a site runs an MoE model's stages expert-parallel, without "
                   "context parallelism; use site-cp 1 or a dense model",
                   c);
  if (c > 1 && run->seq % (2 * c))
    return wt_fail(WT_EINVAL, "seq %d is not a multiple of 2 x site-cp = %d", run->seq, 2 * c);
  if (n <= 1) return WT_OK;
  if (run->moe.experts > 0) {
    const int rows = run->batch / (run->replicas * run->micro_batches);
    if (run->moe.experts % n || rows % n)
      return wt_fail(WT_EINVAL,
                     "site-ranks %d must divide moe-experts %d and each micro-batch's %d rows "
                     "(batch / (replicas x micro-batches))",
                     n, run->moe.experts, rows);
    return WT_OK;
  }
  if (n % c) return wt_fail(WT_EINVAL, "site-cp %d does not divide site-ranks %d", c, n);
  if (run->heads % (n / c))
    return wt_fail(WT_EINVAL,
                   "heads %d are not a multiple of the site's %d tensor-parallel ranks "
                   "(site-ranks / site-cp)",
                   run->heads, n / c);
  return WT_OK;
}

int parallel_run_config_check(parallel_run_config *run) {
  gpt_config model;
  WT_CHECK(parallel_run_config_model(run, 256, &model));
  WT_CHECK(s_check_pipeline(run));
  WT_CHECK(compress_sync_args_apply(&run->sync));
  WT_CHECK(s_check_zero(run));
  WT_CHECK(s_check_robust(run));
  return s_check_site(run);
}

int parallel_run_config_stateful(const parallel_run_config *run) {
  const int lossy_ef = strcmp(run->sync.grad_codec, "none") && strcmp(run->sync.grad_ef, "off");
  return run->sync.diloco > 0 || lossy_ef || !strncmp(run->act_codec, "delta", 5) || run->zero;
}

int parallel_run_config_live_recovery(const parallel_run_config *run) {
  return run->sync.diloco > 0 && !run->zero;
}

int parallel_run_config_excludes(const parallel_run_config *run, long flagged, long syncs) {
  return strcmp(run->robust, "none") && run->trust_flags > 0 && flagged >= run->trust_flags &&
         4 * flagged >= syncs;
}

int parallel_run_config_spot_excludes(const parallel_run_config *run, int checkers) {
  return strcmp(run->robust, "none") && run->trust_flags > 0 && run->spot_check_every > 0 &&
         checkers >= 2;
}

char *parallel_run_config_to_json(const parallel_run_config *run) {
  return wt_config_to_json(s_options, run);
}

int parallel_run_config_from_json(const struct cJSON *object, const char *origin,
                                  parallel_run_config *run) {
  parallel_run_config got = parallel_run_config_default();
  WT_CHECK(wt_config_apply_json(s_options, &got, object, origin));
  *run = got;
  return WT_OK;
}
