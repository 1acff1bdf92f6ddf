/* run_tasklet — a run description (run_config.h) as the runtime takes it: the trainer's config
 * of a run and of a tasklet (tasklet.h), the schedule and error feedback. The one place that maps
 * option values (schedule names, "on"/"off", doubles the runtime keeps as floats) onto the
 * runtime's fields. */
#include "parallel/runtime/run_config.h"
#include "parallel/runtime/tasklet.h"
#include "parallel/runtime/tasklet_internal.h"

#include "common/common.h"

#include <string.h>

void parallel_run_trainer_fields(const parallel_run_config *run, trainer_config *tc) {
  trainer_config t;
  memset(&t, 0, sizeof t);
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
}

int parallel_run_trainer_config(const parallel_run_config *run, int vocab, trainer_config *tc) {
  gpt_config model;
  WT_CHECK(parallel_run_config_model(run, vocab, &model));
  parallel_run_trainer_fields(run, tc);
  tc->model = model;
  return WT_OK;
}

assign_schedule_kind parallel_run_schedule(const parallel_run_config *run) {
  return !strcmp(run->schedule, "gpipe") ? ASSIGN_SCHEDULE_GPIPE : ASSIGN_SCHEDULE_1F1B;
}

int parallel_run_grad_ef(const parallel_run_config *run) {
  return strcmp(run->sync.grad_ef, "off") != 0;
}

int parallel_tasklet_trainer_config(const parallel_tasklet_config *c, trainer_config *tc) {
  trainer_config t;
  WT_CHECK(parallel_run_trainer_config(&c->run, data_set_vocab_size(c->data), &t));
  t.replicas = c->run.replicas;
  t.replica = c->replica;
  t.external_optimizer = c->run.zero;
  t.kernels = c->kernels;
  *tc = t;
  return WT_OK;
}
