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

int compress_preset_apply(const char *name, int *diloco_h, char *codec, size_t cap) {
  if (!strcmp(name, "none")) return WT_OK;
  const compress_preset *p = compress_preset_find(name);
  if (!p) return WT_ENOTFOUND;
  if (*diloco_h != 0 && *diloco_h != p->diloco_h)
    return wt_fail(WT_EINVAL,
                   "--preset %s sets --diloco %d, but --diloco %d was given; drop one of them",
                   name, p->diloco_h, *diloco_h);
  if (strcmp(codec, "none") && strcmp(codec, p->codec))
    return wt_fail(WT_EINVAL,
                   "--preset %s sets --grad-codec %s, but --grad-codec %s was given; drop one of "
                   "them",
                   name, p->codec, codec);
  assert(strlen(p->codec) < cap);
  *diloco_h = p->diloco_h;
  snprintf(codec, cap, "%s", p->codec);
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
