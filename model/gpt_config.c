/* gpt_config — the model's shape: validation, the MoE layer list, parameter counts. Pure
 * arithmetic on gpt_config, so programs that only check or size a model (the coordinator) link
 * this without the kernels. */
#include "model/gpt.h"

#include "common/common.h"

#include <stdlib.h>
#include <string.h>

/* The MoE fields: all zero for a dense model; else a valid moe_config and MoE blocks that exist. */
static int s_validate_moe(const gpt_config *c) {
  int any = 0;
  for (int l = 0; l < GPT_MOE_MAX_LAYERS; l++) {
    if (!c->moe_layer[l]) continue;
    any = 1;
    if (l >= c->n_layer)
      return wt_fail(WT_EINVAL, "MoE block %d does not exist: the model has blocks 0..%d", l,
                     c->n_layer - 1);
  }
  if (c->moe_experts == 0) {
    if (any || c->moe_top_k || c->moe_capacity != 0 || c->moe_aux_weight != 0)
      return wt_fail(WT_EINVAL,
                     "MoE settings (top-k %d, capacity %g, aux weight %g%s) need "
                     "moe_experts > 0",
                     c->moe_top_k, c->moe_capacity, c->moe_aux_weight, any ? ", MoE blocks" : "");
    return WT_OK;
  }
  if (c->moe_experts < 0 || c->moe_experts > 65536)
    return wt_fail(WT_EINVAL, "moe_experts %d must be in [0, 65536]", c->moe_experts);
  moe_config mc = {c->moe_experts, c->moe_top_k, c->moe_capacity, c->moe_aux_weight};
  WT_CHECK(moe_config_validate(&mc, 1));
  if (!any) return wt_fail(WT_EINVAL, "an MoE model needs at least one MoE block");
  return WT_OK;
}

int gpt_config_validate(const gpt_config *c) {
  if (!c) return wt_fail(WT_EINVAL, "gpt config is missing");
  if (c->vocab_size < 1 || c->vocab_size > (1 << 24))
    return wt_fail(WT_EINVAL, "vocab_size %d must be in [1, 16777216]", c->vocab_size);
  if (c->max_seq < 1 || c->max_seq > (1 << 20))
    return wt_fail(WT_EINVAL, "max_seq %d must be in [1, 1048576]", c->max_seq);
  if (c->n_layer < 1 || c->n_layer > 4096)
    return wt_fail(WT_EINVAL, "n_layer %d must be in [1, 4096]", c->n_layer);
  if (c->channels < 1 || c->channels > 65536)
    return wt_fail(WT_EINVAL, "channels %d must be in [1, 65536]", c->channels);
  if (c->n_head < 1 || c->channels % c->n_head != 0)
    return wt_fail(WT_EINVAL, "n_head %d must be >= 1 and divide channels %d", c->n_head,
                   c->channels);
  return s_validate_moe(c);
}

/* One item of a --moe-layers list, "a" or "a-b", into [*lo, *hi]; 0 if malformed. */
static int s_parse_range(const char *item, size_t len, long *lo, long *hi) {
  char buf[32], *end;
  if (len == 0 || len >= sizeof buf) return 0;
  memcpy(buf, item, len), buf[len] = 0;
  *lo = strtol(buf, &end, 10);
  if (end == buf || *lo < 0) return 0;
  *hi = *lo;
  if (*end == '-') {
    char *from = end + 1;
    *hi = strtol(from, &end, 10);
    if (end == from || *hi < *lo) return 0;
  }
  return *end == 0;
}

int gpt_config_set_moe_layers(gpt_config *c, const char *list) {
  int n = WT_MIN(c->n_layer, GPT_MOE_MAX_LAYERS);
  unsigned char set[GPT_MOE_MAX_LAYERS] = {0};
  if (!strcmp(list, "all")) {
    memset(set, 1, (size_t)WT_MAX(n, 0));
    if (c->n_layer > GPT_MOE_MAX_LAYERS)
      return wt_fail(WT_EINVAL,
                     "MoE blocks: \"all\" of %d blocks exceeds the %d blocks that "
                     "may be MoE blocks; list them (0-%d)",
                     c->n_layer, GPT_MOE_MAX_LAYERS, GPT_MOE_MAX_LAYERS - 1);
  } else {
    for (const char *p = list;;) {
      size_t len = strcspn(p, ",");
      long lo, hi;
      if (!s_parse_range(p, len, &lo, &hi))
        return wt_fail(WT_EINVAL,
                       "MoE blocks \"%s\": \"%.*s\" is not a block number or a "
                       "range a-b; give e.g. \"1,3\", \"0-3\" or \"all\"",
                       list, (int)WT_MIN(len, 32), p);
      if (hi >= n)
        return wt_fail(WT_EINVAL,
                       "MoE blocks \"%s\": block %ld does not exist; the model's blocks "
                       "are 0..%d",
                       list, hi, n - 1);
      for (long l = lo; l <= hi; l++) set[l] = 1;
      if (!p[len]) break;
      p += len + 1;
    }
  }
  memcpy(c->moe_layer, set, sizeof set);
  return WT_OK;
}

int gpt_moe_options_apply(const gpt_moe_options *o, gpt_config *cfg) {
  if (o->experts == 0) {
    if (o->top_k != 1 || strcmp(o->layers, "all") != 0 || o->capacity != 1.25 ||
        o->aux_weight != 0.01)
      return wt_fail(WT_EINVAL, "--moe-top-k, --moe-layers, --moe-capacity and --moe-aux-weight "
                                "shape an MoE model; add --moe-experts E (> 0) or drop them");
    cfg->moe_experts = cfg->moe_top_k = 0;
    cfg->moe_capacity = cfg->moe_aux_weight = 0;
    memset(cfg->moe_layer, 0, sizeof cfg->moe_layer);
    return WT_OK;
  }
  if (o->top_k > o->experts)
    return wt_fail(WT_EINVAL, "--moe-top-k %d must be at most --moe-experts %d", o->top_k,
                   o->experts);
  gpt_config c = *cfg;
  if (gpt_config_set_moe_layers(&c, o->layers) != WT_OK) {
    char msg[600];
    snprintf(msg, sizeof msg, "%s", wt_last_error());
    return wt_fail(WT_EINVAL, "--moe-layers: %s (--layers %d)", msg, cfg->n_layer);
  }
  c.moe_experts = o->experts, c.moe_top_k = o->top_k;
  c.moe_capacity = (float)o->capacity, c.moe_aux_weight = (float)o->aux_weight;
  *cfg = c;
  return WT_OK;
}

int gpt_config_is_moe(const gpt_config *c, int l) {
  return c->moe_experts > 0 && l >= 0 && l < GPT_MOE_MAX_LAYERS && c->moe_layer[l];
}

size_t gpt_config_block_params(const gpt_config *c, int l, int experts) {
  size_t C = (size_t)c->channels;
  size_t mlp = moe_expert_numel(c->channels);
  if (!gpt_config_is_moe(c, l)) return 12 * C * C + 13 * C;
  return 12 * C * C + 13 * C - mlp + (size_t)experts * mlp + C * (size_t)c->moe_experts;
}

static size_t s_num_params(const gpt_config *c, int experts) {
  size_t C = (size_t)c->channels, n = (size_t)c->vocab_size * C + (size_t)c->max_seq * C + 2 * C;
  for (int l = 0; l < c->n_layer; l++) n += gpt_config_block_params(c, l, experts);
  return n;
}

size_t gpt_config_num_params(const gpt_config *c) {
  return s_num_params(c, c->moe_experts);
}

size_t gpt_config_num_active_params(const gpt_config *c) {
  return s_num_params(c, c->moe_top_k);
}
