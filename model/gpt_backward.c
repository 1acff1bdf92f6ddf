/* gpt_backward — the backward pass of a layer-range stage (stub until implemented). */
#include "common.h"
#include "gpt_internal.h"

int gpt_stage_backward(gpt_stage *s, const float *grad_out, float *grad_in, float loss_scale) {
  (void)s, (void)grad_out, (void)grad_in, (void)loss_scale;
  return wt_fail(WT_ENOTSUP, "gpt_stage_backward is not implemented yet");
}
