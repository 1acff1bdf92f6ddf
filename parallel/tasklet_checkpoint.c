/* tasklet_checkpoint — per-stage checkpoints and the run manifest (tasklet.h). */
#include "parallel/tasklet_internal.h"

#include "common/common.h"

int parallel_tasklet_checkpoint(parallel_tasklet *k) {
  (void)k;
  return wt_fail(WT_ENOTSUP, "tasklet checkpoints are not written yet");
}

int parallel_tasklet_resume(parallel_tasklet *k) {
  (void)k;
  return wt_fail(WT_ENOTSUP, "tasklet resume is not written yet");
}
