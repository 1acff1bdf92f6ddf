/* moe_config — the shape of an MoE layer's experts and the checks of its configuration: the
 * arithmetic the model's configuration needs, without the layer's kernels. */
#include "model/moe.h"

#include "common/common.h"

size_t moe_tensor_numel(int C, moe_tensor i) {
  switch (i) {
  case MOE_FC_W:
  case MOE_PROJ_W:
    return (size_t)C * 4 * C;
  case MOE_FC_B:
    return (size_t)4 * C;
  default:
    return (size_t)C;
  }
}

size_t moe_tensor_offset(int C, moe_tensor i) {
  size_t off = 0;
  for (int j = 0; j < (int)i; j++) off += moe_tensor_numel(C, (moe_tensor)j);
  return off;
}

size_t moe_expert_numel(int C) {
  return moe_tensor_offset(C, MOE_TENSORS);
}

int moe_config_validate(const moe_config *cfg, int P) {
  if (P < 1 || cfg->experts < 1 || cfg->experts % P || cfg->top_k < 1 ||
      cfg->top_k > cfg->experts || !(cfg->capacity_factor > 0) || !(cfg->aux_weight >= 0))
    return wt_fail(WT_EINVAL,
                   "moe: %d experts must be a multiple of the EP degree %d, top-k %d in [1, "
                   "experts], capacity factor %g > 0 and aux weight %g >= 0",
                   cfg->experts, P, cfg->top_k, cfg->capacity_factor, cfg->aux_weight);
  return WT_OK;
}
