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

#include "common/config.h"

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

/* ---- the options of a command that synchronises replicas -------------------------------------
 * `wantrain launch` and `coordinator` read the same six options into a member of this type
 * (COMPRESS_SYNC_OPTIONS lists their rows) and apply the preset with compress_sync_args_apply. */
typedef struct {
  char grad_codec[WT_CONFIG_STR_MAX]; /* none|fp16|bf16|int8|int4|sign|topk|randk */
  int diloco;                         /* H: 0 = synchronous */
  double outer_lr, outer_momentum;
  char grad_ef[WT_CONFIG_STR_MAX]; /* auto|on|off; on or off once applied */
  char preset[WT_CONFIG_STR_MAX];  /* none or a preset's name */
} compress_sync_args;

/* Applies a->preset to the other fields in place (compress_preset_apply's rules; grad_ef auto
 * becomes the preset's choice, else on). Returns its statuses; *a is unchanged on error. */
int compress_sync_args_apply(compress_sync_args *a);

/* The option rows of a compress_sync_args member `m` of `type`. */
// clang-format off
#define COMPRESS_SYNC_OPTIONS(type, m)                                                             \
  {"grad-codec", WT_OPT_CHOICE, offsetof(type, m.grad_codec), 0, 0, "none",                        \
   "gradient compression in the data-parallel reduce (DiLoCo: of its pseudo-gradients)",           \
   "none|fp16|bf16|int8|int4|sign|topk|randk"},                                                    \
  {"diloco", WT_OPT_INT, offsetof(type, m.diloco), 0, 1e9, "0",                                    \
   "DiLoCo: average the replicas every H steps (0 = synchronous)", 0},                             \
  {"outer-lr", WT_OPT_FLOAT, offsetof(type, m.outer_lr), 0, 10, "0.7",                             \
   "DiLoCo's outer lr (1 with --outer-momentum 0 = plain averaging)", 0},                          \
  {"outer-momentum", WT_OPT_FLOAT, offsetof(type, m.outer_momentum), 0, 0.999, "0.9",              \
   "DiLoCo's outer Nesterov momentum", 0},                                                         \
  {"grad-ef", WT_OPT_CHOICE, offsetof(type, m.grad_ef), 0, 0, "auto",                              \
   "error feedback around --grad-codec (gradients, or DiLoCo's pseudo-gradients); auto = the "     \
   "preset's, else on", "auto|on|off"},                                                            \
  {"preset", WT_OPT_CHOICE, offsetof(type, m.preset), 0, 0, "none", COMPRESS_PRESET_HELP,          \
   "none|" COMPRESS_PRESET_NAMES}
// clang-format on

#endif
