/* gpt_forward — the forward pass of a layer-range stage (stub until implemented). */
#include "common.h"
#include "gpt_internal.h"

int gpt_stage_forward(gpt_stage *s, const int *tokens, const float *act_in, const int *targets,
                      int B, int T, float *act_out) {
  (void)s, (void)tokens, (void)act_in, (void)targets, (void)B, (void)T, (void)act_out;
  return wt_fail(WT_ENOTSUP, "gpt_stage_forward is not implemented yet");
}
