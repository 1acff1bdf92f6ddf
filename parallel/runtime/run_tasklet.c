/* run_tasklet — a run description (run_config.h) turned into what one process runs: the
 * trainer's config and a tasklet's config (tasklet.h). The one place that maps option values
 * (schedule names, "on"/"off") onto the runtime's fields. */
#include "parallel/runtime/run_config.h"
#include "parallel/runtime/tasklet.h"

#include "common/common.h"

#include <string.h>

int parallel_run_trainer_config(const parallel_run_config *run, int vocab, trainer_config *tc) {
  trainer_config t;
  memset(&t, 0, sizeof t);
  WT_CHECK(parallel_run_config_model(run, vocab, &t.model));
  t.batch = run->batch;
  t.micro_batches = run->micro_batches;
  t.steps = run->steps;
  t.val_batches = run->val_batches;
  t.seed = (uint64_t)run->seed;
  t.optim = optim_config_default();
  t.optim.kind = !strcmp(run->optimizer, "sgd") ? OPTIM_SGD : OPTIM_ADAMW;
  t.optim.lr = (float)run->lr;
  t.optim.min_lr = (float)WT_MIN(run->min_lr, run->lr);
  t.optim.warmup_steps = run->warmup;
  t.optim.weight_decay = (float)run->weight_decay;
  t.optim.grad_clip = (float)run->grad_clip;
  *tc = t;
  return WT_OK;
}

int parallel_tasklet_config_from_run(const parallel_run_config *run, int stage, int replica,
                                     const data_set *data, parallel_tasklet_config *cfg) {
  parallel_tasklet_config c = parallel_tasklet_config_default();
  WT_CHECK(parallel_run_trainer_config(run, data_set_vocab_size(data), &c.train));
  c.stages = run->stages, c.replicas = run->replicas;
  c.stage = stage, c.replica = replica;
  c.schedule = !strcmp(run->schedule, "gpipe") ? ASSIGN_SCHEDULE_GPIPE : ASSIGN_SCHEDULE_1F1B;
  c.data = data;
  /* the option choices are short names: they fit the tasklet's fields */
  snprintf(c.grad_codec, sizeof c.grad_codec, "%.*s", (int)sizeof c.grad_codec - 1,
           run->sync.grad_codec);
  c.grad_ef = strcmp(run->sync.grad_ef, "off") != 0;
  snprintf(c.act_codec, sizeof c.act_codec, "%.*s", (int)sizeof c.act_codec - 1, run->act_codec);
  c.diloco_h = run->sync.diloco;
  c.diloco_lr = (float)run->sync.outer_lr;
  c.diloco_momentum = (float)run->sync.outer_momentum;
  c.zero = run->zero;
  snprintf(c.robust, sizeof c.robust, "%.*s", (int)sizeof c.robust - 1, run->robust);
  c.spot_check_every = run->spot_check_every;
  c.act_slots = run->act_slots;
  c.site_ranks = run->site_ranks;
  c.site_cp = run->site_cp;
  snprintf(c.checkpoint_dir, sizeof c.checkpoint_dir, "%s", run->checkpoint_dir);
  c.checkpoint_every = run->checkpoint_every;
  c.keep = run->keep;
  c.val_every = run->val_every;
  c.time_limit_s = run->time_limit;
  *cfg = c;
  return WT_OK;
}
