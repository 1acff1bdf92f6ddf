/* preset — the table of measured communication presets, and applying one to a command's options. */
#include "compress/preset.h"

#include "common/common.h"

#include <assert.h>
#include <stdio.h>
#include <string.h>

/* From scripts/run_compression_long.sh's tables (docs/compression.md, "Long runs"): the
 * lowest-loss non-streaming setting within each budget, losses the mean of seeds 1-3. */
static const compress_preset s_presets[] = {
    {"lan", 1.0 / 10, 30, 0.7f, 0.9f, "int8", 1, 1.6616, 1.6096, 1.0 / 112.8},
    {"wan", 1.0 / 1000, 100, 0.7f, 0.9f, "sign", 0, 1.7869, 1.6096, 1.0 / 2121},
    {"slow-wan", 1.0 / 10000, 500, 0.7f, 0.9f, "sign", 0, 1.9337, 1.6096, 1.0 / 10607},
};
#define S_N ((int)(sizeof s_presets / sizeof s_presets[0]))

int compress_preset_count(void) {
  return S_N;
}

const compress_preset *compress_preset_at(int i) {
  assert(i >= 0 && i < S_N);
  return &s_presets[i];
}

const compress_preset *compress_preset_find(const char *name) {
  for (int i = 0; i < S_N; i++)
    if (!strcmp(s_presets[i].name, name)) return &s_presets[i];
  wt_fail(WT_ENOTFOUND, "unknown preset '%s'; the presets are %s", name, COMPRESS_PRESET_NAMES);
  return NULL;
}

compress_sync_options compress_sync_options_default(void) {
  return (compress_sync_options){.outer_lr = COMPRESS_OUTER_LR_DEFAULT,
                                 .outer_momentum = COMPRESS_OUTER_MOMENTUM_DEFAULT,
                                 .codec = "none",
                                 .error_feedback = -1};
}

/* A set option that is not the preset's value: refused, naming both. */
static int s_conflict(const char *preset, const char *opt, const char *want, const char *got) {
  return wt_fail(WT_EINVAL, "--preset %s sets --%s %s, but --%s %s was given; drop one of them",
                 preset, opt, want, opt, got);
}

int compress_preset_apply(const char *name, compress_sync_options *o) {
  if (!strcmp(name, "none")) return WT_OK;
  const compress_preset *p = compress_preset_find(name);
  if (!p) return WT_ENOTFOUND;
  char want[32], got[32];
  if (o->diloco_h != 0 && o->diloco_h != p->diloco_h) {
    snprintf(want, sizeof want, "%d", p->diloco_h), snprintf(got, sizeof got, "%d", o->diloco_h);
    return s_conflict(name, "diloco", want, got);
  }
  if (o->outer_lr != COMPRESS_OUTER_LR_DEFAULT && o->outer_lr != (double)p->outer_lr) {
    snprintf(want, sizeof want, "%g", p->outer_lr), snprintf(got, sizeof got, "%g", o->outer_lr);
    return s_conflict(name, "outer-lr", want, got);
  }
  if (o->outer_momentum != COMPRESS_OUTER_MOMENTUM_DEFAULT &&
      o->outer_momentum != (double)p->outer_momentum) {
    snprintf(want, sizeof want, "%g", p->outer_momentum);
    snprintf(got, sizeof got, "%g", o->outer_momentum);
    return s_conflict(name, "outer-momentum", want, got);
  }
  if (strcmp(o->codec, "none") && strcmp(o->codec, p->codec))
    return s_conflict(name, "grad-codec", p->codec, o->codec);
  if (o->error_feedback >= 0 && o->error_feedback != p->error_feedback)
    return s_conflict(name, "grad-ef", p->error_feedback ? "on" : "off",
                      o->error_feedback ? "on" : "off");
  assert(strlen(p->codec) < sizeof o->codec);
  o->diloco_h = p->diloco_h;
  o->outer_lr = p->outer_lr, o->outer_momentum = p->outer_momentum;
  snprintf(o->codec, sizeof o->codec, "%s", p->codec);
  o->error_feedback = p->error_feedback;
  return WT_OK;
}

void compress_preset_describe(const compress_preset *p, char *buf, size_t cap) {
  char how[160];
  if (p->diloco_h)
    snprintf(how, sizeof how, "DiLoCo H=%d (outer lr %g, momentum %g), %s pseudo-gradients",
             p->diloco_h, p->outer_lr, p->outer_momentum, p->codec);
  else
    snprintf(how, sizeof how, "synchronous, %s gradients", p->codec);
  snprintf(buf, cap, "%s%s; measured loss %.4f vs %.4f sync fp32 at 1/%.0f of its bytes", how,
           p->error_feedback ? " with error feedback" : "", p->loss, p->sync_loss,
           1.0 / p->fraction);
}

int compress_sync_args_apply(compress_sync_args *a) {
  compress_sync_options o = {.diloco_h = a->diloco,
                             .outer_lr = a->outer_lr,
                             .outer_momentum = a->outer_momentum,
                             .error_feedback = !strcmp(a->grad_ef, "auto") ? -1
                                               : !strcmp(a->grad_ef, "on") ? 1
                                                                           : 0};
  snprintf(o.codec, sizeof o.codec, "%.15s", a->grad_codec); /* a choice: short */
  WT_CHECK(compress_preset_apply(a->preset[0] ? a->preset : "none", &o));
  a->diloco = o.diloco_h;
  a->outer_lr = o.outer_lr, a->outer_momentum = o.outer_momentum;
  snprintf(a->grad_codec, sizeof a->grad_codec, "%s", o.codec);
  snprintf(a->grad_ef, sizeof a->grad_ef, "%s", o.error_feedback == 0 ? "off" : "on");
  return WT_OK;
}
