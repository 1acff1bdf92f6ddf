/* optim_defaults — the optimizer the tests' tasklet runs start from (tests only). */
#ifndef WT_TESTS_RUNTIME_OPTIM_DEFAULTS_H
#define WT_TESTS_RUNTIME_OPTIM_DEFAULTS_H

#include "model/optim.h"
#include "parallel/runtime/run_config.h"

#include <stdio.h>

/* Sets the run's optimizer rows to optim_config_default's values (AdamW, lr 3e-4, no warmup and
 * no floor, weight decay 0.1, clip 1) and validation to after the last step only. The float
 * values go in as they are, so the trainer gets them back bit for bit. */
static inline void h_run_optim_default(parallel_run_config *run) {
  const optim_config o = optim_config_default();
  snprintf(run->optimizer, sizeof run->optimizer, "adamw");
  run->lr = o.lr, run->min_lr = o.min_lr, run->warmup = o.warmup_steps;
  run->weight_decay = o.weight_decay, run->grad_clip = o.grad_clip;
  run->val_every = 0;
}

#endif
