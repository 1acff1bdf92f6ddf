/* test_preset — the communication presets (compress/preset.h) and `wantrain launch --preset`:
 * the table is well formed and agrees with the help text users read; applying a preset sets the
 * sync interval and codec, keeps an option that repeats the preset's value, and refuses one that
 * contradicts it (naming both, changing nothing); launch prints what a preset set and refuses a
 * conflicting option before starting anything. */
#include "common/common.h"
#include "common/testing.h"
#include "compress/codec.h"
#include "compress/preset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

/* Budgets grow tighter down the table, each preset keeps within its own, and the help names
 * each one's sync interval, loss and byte fraction as the table has them. */
static void test_table(void) {
  WT_TEST_REQUIRE(compress_preset_count() == 3, "lan, wan, slow-wan");
  const char *help = COMPRESS_PRESET_HELP;
  double prev = 1;
  for (int i = 0; i < compress_preset_count(); i++) {
    const compress_preset *p = compress_preset_at(i);
    WT_TEST_ASSERT(compress_preset_find(p->name) == p, "find %s", p->name);
    WT_TEST_ASSERT(p->budget < prev, "%s: budgets tighten down the table", p->name);
    prev = p->budget;
    WT_TEST_ASSERT(p->fraction <= p->budget, "%s: 1/%.0f of fp32 bytes exceeds its budget 1/%.0f",
                   p->name, 1 / p->fraction, 1 / p->budget);
    WT_TEST_ASSERT(!strcmp(p->codec, "none") || compress_codec_ops_by_name(p->codec),
                   "%s: codec %s exists", p->name, p->codec);
    char want[64];
    snprintf(want, sizeof want, "%s: DiLoCo H=%d, %s", p->name, p->diloco_h, p->codec);
    WT_TEST_ASSERT(p->diloco_h > 0, "%s: every measured preset is DiLoCo", p->name);
    WT_TEST_ASSERT(strstr(help, want), "help lacks '%s'", want);
    snprintf(want, sizeof want, "%.4f", p->loss);
    WT_TEST_ASSERT(strstr(help, want), "help lacks %s's loss %s", p->name, want);
    snprintf(want, sizeof want, "1/%.0f", 1 / p->fraction);
    WT_TEST_ASSERT(strstr(help, want), "help lacks %s's byte fraction %s", p->name, want);
    char line[512];
    compress_preset_describe(p, line, sizeof line);
    WT_TEST_ASSERT(strstr(line, want) && strstr(line, p->codec), "describe: %s", line);
  }
  WT_TEST_ASSERT(compress_preset_find("fast") == NULL && wt_last_status() == WT_ENOTFOUND,
                 "unknown preset refused");
  WT_TEST_ASSERT(strstr(wt_last_error(), "slow-wan"), "the error lists the presets: %s",
                 wt_last_error());
}

/* Each sets one option of wan's to another value. */
static void s_set_h(compress_sync_options *o) {
  o->diloco_h = 30;
}
static void s_set_codec(compress_sync_options *o) {
  snprintf(o->codec, sizeof o->codec, "int8");
}
static void s_set_lr(compress_sync_options *o) {
  o->outer_lr = 1;
}
static void s_set_momentum(compress_sync_options *o) {
  o->outer_momentum = 0;
}
static void s_set_ef(compress_sync_options *o) {
  o->error_feedback = 1;
}

static void test_apply(void) {
  const compress_preset *wan = compress_preset_find("wan"), *lan = compress_preset_find("lan");
  WT_TEST_REQUIRE(wan && lan, "wan and lan exist");
  compress_sync_options o = compress_sync_options_default();
  WT_TEST_ASSERT(compress_preset_apply("wan", &o) == WT_OK, "apply wan");
  WT_TEST_ASSERT(o.diloco_h == wan->diloco_h && !strcmp(o.codec, wan->codec) &&
                     o.outer_lr == wan->outer_lr && o.outer_momentum == wan->outer_momentum &&
                     o.error_feedback == wan->error_feedback,
                 "wan sets H=%d %s lr %g m %g ef %d", o.diloco_h, o.codec, o.outer_lr,
                 o.outer_momentum, o.error_feedback);
  // Repeating the preset's own values is fine.
  WT_TEST_ASSERT(compress_preset_apply("wan", &o) == WT_OK, "same values");
  // A contradicting option is refused with both values named, and nothing changes.
  struct {
    const char *opt;
    void (*set)(compress_sync_options *);
  } bad[] = {{"--diloco", s_set_h},
             {"--grad-codec", s_set_codec},
             {"--outer-lr", s_set_lr},
             {"--outer-momentum", s_set_momentum},
             {"--grad-ef", s_set_ef}};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    o = compress_sync_options_default();
    bad[i].set(&o);
    compress_sync_options before = o;
    WT_TEST_ASSERT(compress_preset_apply("wan", &o) == WT_EINVAL, "%s conflict", bad[i].opt);
    WT_TEST_ASSERT(strstr(wt_last_error(), bad[i].opt) && strstr(wt_last_error(), "--preset wan"),
                   "message: %s", wt_last_error());
    WT_TEST_ASSERT(!memcmp(&o, &before, sizeof o), "%s: unchanged on error", bad[i].opt);
  }
  // lan turns error feedback on; saying so again is fine, saying off is not.
  o = compress_sync_options_default();
  o.error_feedback = 1;
  WT_TEST_ASSERT(compress_preset_apply("lan", &o) == WT_OK && o.error_feedback == 1, "lan + ef");
  o = compress_sync_options_default();
  o.error_feedback = 0;
  WT_TEST_ASSERT(compress_preset_apply("lan", &o) == WT_EINVAL, "lan without ef refused");
  // "none" leaves the options alone.
  o = compress_sync_options_default();
  o.diloco_h = 7, o.outer_lr = 1, o.outer_momentum = 0;
  WT_TEST_ASSERT(compress_preset_apply("none", &o) == WT_OK && o.diloco_h == 7 && o.outer_lr == 1 &&
                     o.error_feedback == -1,
                 "no preset");
}

/* Runs `wantrain launch ARGS`; returns the exit status and its output (stdout + stderr). */
static int s_launch(const char *args, char *out, size_t cap) {
  const char *bin = getenv("WT_BIN_DIR");
  char cmd[1024];
  snprintf(cmd, sizeof cmd, "'%s/wantrain' launch %s 2>&1", bin ? bin : "bin", args);
  FILE *p = popen(cmd, "r");
  WT_TEST_REQUIRE(p, "popen %s", cmd);
  size_t n = fread(out, 1, cap - 1, p);
  out[n] = 0;
  int st = pclose(p);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_launch(void) {
  char out[8192];
  int st = s_launch("--help", out, sizeof out);
  WT_TEST_ASSERT(st == 0 && strstr(out, "--preset none|lan|wan|slow-wan"), "help lists presets");
  WT_TEST_ASSERT(strstr(out, "lan: DiLoCo H="), "help shows the measured settings");
  // The preset is applied before validation: its line is printed, then the bad batch refused.
  st = s_launch("--preset wan --replicas 2 --batch 3 --data synthetic", out, sizeof out);
  const compress_preset *wan = compress_preset_find("wan");
  char want[64];
  snprintf(want, sizeof want, "preset wan: DiLoCo H=%d", wan->diloco_h);
  WT_TEST_ASSERT(st == 2 && strstr(out, want) && strstr(out, "batch 3 is not a multiple"),
                 "status %d, output: %s", st, out);
  st = s_launch("--preset wan --grad-codec bf16 --data synthetic", out, sizeof out);
  WT_TEST_ASSERT(st == 2 && strstr(out, "--preset wan sets --grad-codec") &&
                     strstr(out, "--grad-codec bf16 was given"),
                 "conflict refused: status %d, output: %s", st, out);
  st = s_launch("--preset wan --outer-momentum 0 --data synthetic", out, sizeof out);
  WT_TEST_ASSERT(st == 2 && strstr(out, "--preset wan sets --outer-momentum 0.9"),
                 "outer momentum conflict refused: status %d, output: %s", st, out);
  // 4-bit activations under DiLoCo's Nesterov step are warned about (measured to cost loss), not
  // refused; 8 bits, or plain averaging, measured to cost nothing, are not.
  st = s_launch("--preset wan --act-codec delta4 --replicas 2 --batch 3 --data synthetic", out,
                sizeof out);
  WT_TEST_ASSERT(st == 2 && strstr(out, "warning: --act-codec delta4") && strstr(out, "direct8"),
                 "delta codec under DiLoCo warned: status %d, output: %s", st, out);
  const char *quiet[] = {"--preset wan --act-codec direct8", "--preset wan --act-codec delta8",
                         "--diloco 30 --outer-lr 1 --outer-momentum 0 --act-codec delta4"};
  for (size_t i = 0; i < sizeof quiet / sizeof quiet[0]; i++) {
    char args[256];
    snprintf(args, sizeof args, "%s --replicas 2 --batch 3 --data synthetic", quiet[i]);
    st = s_launch(args, out, sizeof out);
    WT_TEST_ASSERT(st == 2 && !strstr(out, "warning:"), "%s is not warned: %s", quiet[i], out);
  }
  st = s_launch("--preset fast --data synthetic", out, sizeof out);
  WT_TEST_ASSERT(st == 2 && strstr(out, "slow-wan"), "unknown preset: status %d: %s", st, out);
}

int main(void) {
  test_table();
  test_apply();
  test_launch();
  return wt_test_finish("test_preset");
}
