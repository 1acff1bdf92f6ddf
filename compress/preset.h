/* preset — named communication settings a user picks by the link they have (`wantrain launch
 * --preset lan|wan|slow-wan`), each the setting that measured best within a byte budget.
 *
 * A preset fixes how replicas synchronise: every step (synchronous data parallelism) or every H
 * steps (DiLoCo, with its outer step's lr and momentum), the codec of what crosses the link
 * (gradients, or DiLoCo's pseudo-gradients) and error feedback around it. The table holds the
 * numbers it was chosen by, measured with scripts/run_compression_long.sh (docs/compression.md,
 * "Long runs"): final validation loss of the preset's setting and of synchronous fp32 training
 * on the same tokens, and the bytes each worker sent as a fraction of fp32 synchronous traffic.
 *
 *   budget        preset     what it is for
 *   <= 1/10       lan        a local network that should not carry every gradient
 *   <= 1/1000     wan        links between sites or over the internet
 *   <= 1/10000    slow-wan   home connections, shared or metered links
 *
 * Applying a preset to a command's options (compress_preset_apply): an option still at its
 * unset value (H = 0, codec "none", outer lr 0.7 and momentum 0.9, error feedback -1) takes
 * the preset's value; an option the user set to the
 * preset's own value is fine; any other value conflicts, and the call fails naming both so
 * the user drops one of them. (An option set explicitly to its unset value cannot be told
 * apart from an unset one, so the preset wins there.)
 */
#ifndef WT_COMPRESS_PRESET_H
#define WT_COMPRESS_PRESET_H

#include <stddef.h>

typedef struct {
  const char *name;     /* "lan", "wan", "slow-wan" */
  double budget;        /* the byte budget it was chosen for, as a fraction of fp32 sync */
  int diloco_h;         /* 0: synchronous every step; H: DiLoCo, one outer step per H steps */
  float outer_lr;       /* DiLoCo's outer SGD lr (1 with momentum 0 = plain averaging) */
  float outer_momentum; /* DiLoCo's outer Nesterov momentum */
  const char *codec;    /* what crosses the link: "none" (fp32) or a codec.h name */
  int error_feedback;   /* 1: error feedback around the codec */
  double loss;          /* measured final validation loss of this setting (seed mean) */
  double sync_loss;     /* synchronous fp32 data parallelism on the same tokens */
  double fraction;      /* measured bytes per worker, as a fraction of fp32 sync */
} compress_preset;

/* The presets' option help (one line, for a WT_OPT_CHOICE row whose choices are
 * "none|" COMPRESS_PRESET_NAMES). Its numbers are the table's (checked by tests/compress). */
#define COMPRESS_PRESET_NAMES "lan|wan|slow-wan"
#define COMPRESS_PRESET_HELP                                                                       \
  "communication preset, the measured best per byte budget (docs/compression.md; 6,000-step "      \
  "runs of a 120k-parameter GPT, sync fp32 loss 1.6096); lan: DiLoCo H=30, int8 with error "       \
  "feedback, loss 1.6616 at 1/113 of fp32-sync bytes; wan: DiLoCo H=100, sign, 1.7869 at "         \
  "1/2121; slow-wan: DiLoCo H=500, sign, 1.9337 at 1/10607 (worse than one worker alone, "         \
  "1.8108); all with outer Nesterov lr 0.7, momentum 0.9. Sets --diloco and --grad-codec, "        \
  "which may otherwise only repeat its values"

/* Number of presets, and preset i (0 <= i < count; static, never freed). */
int compress_preset_count(void);
const compress_preset *compress_preset_at(int i);

/* The preset called `name`, or NULL with wt_last_error() set (WT_ENOTFOUND, listing the names). */
const compress_preset *compress_preset_find(const char *name);

/* One line describing what the preset sets, e.g. "DiLoCo H=100 (outer lr 1, momentum 0.5),
 * int4 pseudo-gradients with error feedback; measured loss 1.6255 vs 1.6097 sync fp32 at 1/710
 * of its bytes", into buf[0..cap) (truncated to fit, always NUL-terminated). */
void compress_preset_describe(const compress_preset *p, char *buf, size_t cap);

/* How a command's replicas synchronise, as its options hold them before a preset is applied.
 * Each field has an unset value, which a preset replaces; a set field must equal the preset's. */
#define COMPRESS_OUTER_LR_DEFAULT 0.7       /* DiLoCo's published outer lr */
#define COMPRESS_OUTER_MOMENTUM_DEFAULT 0.9 /* and its Nesterov momentum */
typedef struct {
  int diloco_h;          /* --diloco: 0 (unset) = synchronous */
  double outer_lr;       /* --outer-lr: unset = COMPRESS_OUTER_LR_DEFAULT */
  double outer_momentum; /* --outer-momentum: unset = COMPRESS_OUTER_MOMENTUM_DEFAULT */
  char codec[16];        /* --grad-codec: "none" (unset) = fp32 */
  int error_feedback;    /* --grad-ef: -1 unset, 0 off, 1 on */
} compress_sync_options;

/* Options with every field unset. */
compress_sync_options compress_sync_options_default(void);

/* Applies preset `name` to *o. "none" as the name changes nothing. Returns WT_OK,
 * WT_ENOTFOUND for an unknown name, or WT_EINVAL when a field holds another value than the
 * preset's (the message names the preset, the option and both values, e.g. "--preset wan sets
 * --grad-codec sign, but --grad-codec int8 was given; drop one of them"); *o is unchanged on
 * error. */
int compress_preset_apply(const char *name, compress_sync_options *o);

#endif
