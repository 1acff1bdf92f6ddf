/* test_run_config — the run description: every option survives the JSON round trip, the one
 * validator refuses what cannot train with a message naming the option, the preset is applied,
 * the stateful rule, and JSON from outside (a coordinator's epoch) is refused when malformed. */
#include "parallel/runtime/run_config.h"

#include "common/common.h"
#include "model/data.h"
#include "parallel/runtime/tasklet.h"
#include "common/testing.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

/* A value for option o that is valid and differs from its default, as text. */
static void s_other_value(const wt_option *o, char *buf, size_t cap) {
  switch (o->type) {
  case WT_OPT_INT:
  case WT_OPT_INT64: {
    long long d = atoll(o->def);
    snprintf(buf, cap, "%lld", d + 1 <= o->max ? d + 1 : d - 1);
    break;
  }
  case WT_OPT_FLOAT: {
    double d = atof(o->def), v = d * 0.5 + (o->max - d) * 0.25;
    snprintf(buf, cap, "%.17g", v > o->min && v != d ? v : (o->min + o->max) / 2);
    break;
  }
  case WT_OPT_FLAG:
    snprintf(buf, cap, "%s", atoi(o->def) ? "0" : "1");
    break;
  case WT_OPT_STRING:
    snprintf(buf, cap, "x-%s", o->name);
    break;
  case WT_OPT_CHOICE: { /* the last choice, or the first when the default is the last */
    const char *last = strrchr(o->choices, '|');
    last = last ? last + 1 : o->choices;
    if (strcmp(last, o->def))
      snprintf(buf, cap, "%s", last);
    else
      snprintf(buf, cap, "%.*s", (int)strcspn(o->choices, "|"), o->choices);
    break;
  }
  }
}

/* Option o's value in run as text, in the form s_other_value writes. */
static void s_value_of(const wt_option *o, const parallel_run_config *run, char *buf, size_t cap) {
  const char *f = (const char *)run + o->offset;
  switch (o->type) {
  case WT_OPT_INT:
  case WT_OPT_FLAG:
    snprintf(buf, cap, "%d", *(const int *)f);
    break;
  case WT_OPT_INT64:
    snprintf(buf, cap, "%lld", *(const long long *)f);
    break;
  case WT_OPT_FLOAT:
    snprintf(buf, cap, "%.17g", *(const double *)f);
    break;
  case WT_OPT_STRING:
  case WT_OPT_CHOICE:
    snprintf(buf, cap, "%s", f);
    break;
  }
}

/* Every option set to a value other than its default, to JSON and back: each arrives. */
static void test_round_trip_every_option(void) {
  const wt_option *t = parallel_run_options();
  parallel_run_config run = parallel_run_config_default(), dflt = run;
  int n = 0;
  for (const wt_option *o = t; o->name; o++, n++) {
    char v[128];
    s_other_value(o, v, sizeof v);
    WT_TEST_REQUIRE(wt_config_set(t, &run, o->name, v) == WT_OK, "%s", wt_last_error());
  }
  char *json = parallel_run_config_to_json(&run);
  cJSON *obj = cJSON_Parse(json);
  WT_TEST_REQUIRE(cJSON_IsObject(obj), "to_json gives an object: %s", json);
  WT_TEST_ASSERT(cJSON_GetArraySize(obj) == n, "one key per option: %d keys, %d options",
                 cJSON_GetArraySize(obj), n);
  parallel_run_config back;
  WT_TEST_REQUIRE(parallel_run_config_from_json(obj, "test", &back) == WT_OK, "%s",
                  wt_last_error());
  for (const wt_option *o = t; o->name; o++) {
    char want[WT_CONFIG_STR_MAX + 16], got[WT_CONFIG_STR_MAX + 16], was[WT_CONFIG_STR_MAX + 16];
    s_value_of(o, &run, want, sizeof want);
    s_value_of(o, &back, got, sizeof got);
    s_value_of(o, &dflt, was, sizeof was);
    WT_TEST_ASSERT(!strcmp(want, got), "%s: sent %s, received %s", o->name, want, got);
    WT_TEST_ASSERT(strcmp(want, was), "%s: the test's value %s is the default", o->name, want);
  }
  char *again = parallel_run_config_to_json(&back);
  WT_TEST_ASSERT(!strcmp(json, again), "the JSON of the received run is the sent one");
  free(again), free(json);
  cJSON_Delete(obj);
}

/* Expects parallel_run_config_check to refuse `run` with a message containing `part`. */
static void s_expect_refused(parallel_run_config run, const char *part) {
  int rc = parallel_run_config_check(&run);
  WT_TEST_ASSERT(rc != WT_OK && strstr(wt_last_error(), part),
                 "wanted a refusal naming '%s', "
                 "got rc %d: %s",
                 part, rc, rc ? wt_last_error() : "accepted");
}

static void test_check_names_the_option(void) {
  parallel_run_config ok = parallel_run_config_default(), r;
  WT_TEST_ASSERT(parallel_run_config_check(&ok) == WT_OK, "the defaults train: %s",
                 wt_last_error());
  r = ok, r.channels = 30, r.heads = 4;
  s_expect_refused(r, "heads 4 do not divide channels 30");
  r = ok, r.stages = 3, r.layers = 2;
  s_expect_refused(r, "stages 3 exceed layers 2");
  r = ok, r.replicas = 3, r.micro_batches = 2, r.batch = 16;
  s_expect_refused(r, "batch 16 is not a multiple of replicas x micro-batches = 3 x 2 = 6");
  r = ok, r.min_lr = 0.1, r.lr = 0.01;
  s_expect_refused(r, "min-lr 0.1 is above lr 0.01");
  r = ok, r.zero = 1, r.replicas = 2;
  snprintf(r.sync.grad_codec, sizeof r.sync.grad_codec, "int8");
  s_expect_refused(r, "zero 1 needs plain synchronous sync");
  r = ok, r.zero = 1;
  s_expect_refused(r, "it needs replicas of 2 or more");
  r = ok, r.zero = 1, r.replicas = 2;
  snprintf(r.robust, sizeof r.robust, "median");
  s_expect_refused(r, "robust median all-gathers whole gradients, which zero 1 shards");
  r = ok, r.site_ranks = 3;
  s_expect_refused(r, "heads 4 are not a multiple of the site's 3 tensor-parallel ranks");
  r = ok, r.site_ranks = 4, r.site_cp = 2, r.seq = 66;
  s_expect_refused(r, "seq 66 is not a multiple of 2 x site-cp = 4");
  r = ok, r.site_ranks = 4, r.site_cp = 3, r.seq = 66;
  s_expect_refused(r, "site-cp 3 does not divide site-ranks 4");
  r = ok, r.site_cp = 3; /* the sites are the peers' in a coordinator run: site-cp alone */
  s_expect_refused(r, "seq 64 is not a multiple of 2 x site-cp = 6");
  r = ok, r.moe.experts = 4, r.site_cp = 2;
  s_expect_refused(r, "expert-parallel, without context parallelism");
  r = ok, r.moe.experts = 3, r.site_ranks = 2;
  s_expect_refused(r, "site-ranks 2 must divide moe-experts 3");
  r = ok;
  snprintf(r.sync.preset, sizeof r.sync.preset, "wan");
  snprintf(r.sync.grad_codec, sizeof r.sync.grad_codec, "int8");
  s_expect_refused(r, "--preset wan sets --grad-codec sign");
}

static void test_preset_and_stateful(void) {
  parallel_run_config r = parallel_run_config_default();
  WT_TEST_REQUIRE(parallel_run_config_check(&r) == WT_OK, "%s", wt_last_error());
  WT_TEST_ASSERT(!strcmp(r.sync.grad_ef, "on"), "grad-ef auto becomes on: %s", r.sync.grad_ef);
  WT_TEST_ASSERT(!parallel_run_config_stateful(&r), "plain sync keeps no state");
  r = parallel_run_config_default();
  snprintf(r.sync.preset, sizeof r.sync.preset, "wan");
  WT_TEST_REQUIRE(parallel_run_config_check(&r) == WT_OK, "%s", wt_last_error());
  WT_TEST_ASSERT(r.sync.diloco == 100 && !strcmp(r.sync.grad_codec, "sign"),
                 "the wan preset sets DiLoCo H=100 and sign: H=%d, %s", r.sync.diloco,
                 r.sync.grad_codec);
  WT_TEST_ASSERT(parallel_run_config_stateful(&r), "DiLoCo keeps its outer state");
  parallel_run_config s = parallel_run_config_default();
  snprintf(s.sync.grad_codec, sizeof s.sync.grad_codec, "int8");
  snprintf(s.sync.grad_ef, sizeof s.sync.grad_ef, "off");
  WT_TEST_ASSERT(!parallel_run_config_stateful(&s), "int8 without error feedback keeps none");
  snprintf(s.sync.grad_ef, sizeof s.sync.grad_ef, "on");
  WT_TEST_ASSERT(parallel_run_config_stateful(&s), "int8 with error feedback keeps residuals");
  s = parallel_run_config_default();
  snprintf(s.act_codec, sizeof s.act_codec, "delta4");
  WT_TEST_ASSERT(parallel_run_config_stateful(&s), "delta activations keep caches");
  snprintf(s.act_codec, sizeof s.act_codec, "direct8");
  WT_TEST_ASSERT(!parallel_run_config_stateful(&s), "direct8 keeps none");
  s = r, s.zero = 1;
  WT_TEST_ASSERT(parallel_run_config_stateful(&s), "ZeRO-1 shards its optimizer state");
}

/* The run's robust row names exactly the aggregates the collectives know: each choice parses,
 * and a tasklet refuses a name that is not one. */
static void test_robust_choices(void) {
  const wt_option *o = parallel_run_options();
  while (o->name && strcmp(o->name, "robust")) o++;
  WT_TEST_REQUIRE(o->name && o->type == WT_OPT_CHOICE, "the run has a robust choice");
  WT_TEST_ASSERT(!strcmp(o->choices, PARALLEL_ROBUST_NAMES), "robust choices %s, collectives %s",
                 o->choices, PARALLEL_ROBUST_NAMES);
  WT_TEST_ASSERT(!strcmp(o->def, "none"), "robust defaults to none: %s", o->def);
  char names[128];
  snprintf(names, sizeof names, "%s", o->choices);
  for (char *save = NULL, *t = strtok_r(names, "|", &save); t; t = strtok_r(NULL, "|", &save)) {
    parallel_robust_kind k;
    WT_TEST_ASSERT(parallel_robust_kind_parse(t, &k) == WT_OK &&
                       !strcmp(parallel_robust_kind_name(k), t),
                   "robust %s parses: %s", t, wt_last_error());
  }
  parallel_run_config run = parallel_run_config_default();
  WT_TEST_ASSERT(!parallel_run_config_excludes(&run, 100, 100), "robust none excludes nobody");
  snprintf(run.robust, sizeof run.robust, "median");
  WT_TEST_ASSERT(parallel_run_config_excludes(&run, 5, 20), "5 of 20 flagged: excluded");
  WT_TEST_ASSERT(!parallel_run_config_excludes(&run, 4, 4), "4 flagged: below trust-flags 5");
  WT_TEST_ASSERT(!parallel_run_config_excludes(&run, 5, 21), "5 of 21: under a quarter");
  run.trust_flags = 0;
  WT_TEST_ASSERT(!parallel_run_config_excludes(&run, 50, 50), "trust-flags 0 never excludes");
  data_synth_config dc = data_synth_default();
  data_set *data = data_set_synthetic(&dc);
  parallel_tasklet_config c = parallel_tasklet_config_default();
  c.data = data, c.run.batch = 4, c.run.micro_batches = 1, c.run.layers = 2;
  WT_TEST_ASSERT(parallel_tasklet_config_validate(&c, 1) == WT_OK, "%s", wt_last_error());
  snprintf(c.run.robust, sizeof c.run.robust, "mode");
  WT_TEST_ASSERT(parallel_tasklet_config_validate(&c, 1) == WT_EINVAL &&
                     strstr(wt_last_error(), "--robust mode is unknown"),
                 "an unknown robust name: %s", wt_last_error());
  data_set_destroy(&data);
}

/* What the coordinator sends is checked again by each peer: a checked run, through JSON and
 * checked again, is accepted and unchanged, for every preset. */
static void test_check_twice(void) {
  const char *presets[] = {"none", "lan", "wan", "slow-wan"};
  for (size_t i = 0; i < sizeof presets / sizeof *presets; i++) {
    parallel_run_config run = parallel_run_config_default();
    snprintf(run.sync.preset, sizeof run.sync.preset, "%s", presets[i]);
    WT_TEST_REQUIRE(parallel_run_config_check(&run) == WT_OK, "%s", wt_last_error());
    char *json = parallel_run_config_to_json(&run);
    cJSON *obj = cJSON_Parse(json);
    parallel_run_config back;
    int rc = parallel_run_config_from_json(obj, "epoch 2", &back);
    if (rc == WT_OK) rc = parallel_run_config_check(&back);
    WT_TEST_ASSERT(rc == WT_OK, "preset %s, checked again: %s", presets[i], wt_last_error());
    char *again = parallel_run_config_to_json(&back);
    WT_TEST_ASSERT(!strcmp(json, again), "preset %s: the run changed on the second check",
                   presets[i]);
    free(again), free(json);
    cJSON_Delete(obj);
  }
}

/* JSON from a peer's point of view: whatever the coordinator sent, refused with the key named,
 * nothing half-applied. */
static void test_from_json_refuses(void) {
  const char *bad[][2] = {
      {"{\"sead\": 3}", "unknown option \"sead\""},
      {"{\"steps\": \"many\"}", "\"steps\" must be a number"},
      {"{\"steps\": 0}", "steps"},
      {"{\"tf32\": 1}", "\"tf32\" must be true or false"},
      {"{\"schedule\": \"zigzag\"}", "schedule"},
      {"[1, 2]", "not a JSON object"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    parallel_run_config run = parallel_run_config_default();
    run.steps = 7;
    cJSON *obj = cJSON_Parse(bad[i][0]);
    int rc = parallel_run_config_from_json(obj, "epoch 3", &run);
    WT_TEST_ASSERT(rc == WT_EINVAL && strstr(wt_last_error(), bad[i][1]) &&
                       strstr(wt_last_error(), "epoch 3"),
                   "%s: rc %d, %s", bad[i][0], rc, wt_last_error());
    WT_TEST_ASSERT(run.steps == 7, "%s: the run is unchanged", bad[i][0]);
    cJSON_Delete(obj);
  }
  cJSON *partial = cJSON_Parse("{\"steps\": 12}");
  parallel_run_config run;
  WT_TEST_ASSERT(parallel_run_config_from_json(partial, "epoch 3", &run) == WT_OK, "%s",
                 wt_last_error());
  parallel_run_config d = parallel_run_config_default();
  WT_TEST_ASSERT(run.steps == 12 && run.seq == d.seq && !strcmp(run.schedule, d.schedule),
                 "keys not sent keep the run's defaults");
  cJSON_Delete(partial);
}

/* What a tasklet runs is what the run says: the operator's schedule, min-lr, seq, keep and sync
 * reach the tasklet's and trainer's fields. */
static void test_tasklet_from_run(void) {
  data_synth_config dc = data_synth_default();
  data_set *data = data_set_synthetic(&dc);
  WT_TEST_REQUIRE(data, "%s", wt_last_error());
  parallel_run_config run = parallel_run_config_default();
  run.stages = 2, run.replicas = 2, run.seq = 48, run.keep = 5, run.min_lr = 1e-4;
  run.val_every = 7, run.checkpoint_every = 3, run.warmup = 4, run.act_slots = 1;
  snprintf(run.schedule, sizeof run.schedule, "gpipe");
  snprintf(run.sync.grad_codec, sizeof run.sync.grad_codec, "int8");
  snprintf(run.sync.grad_ef, sizeof run.sync.grad_ef, "off");
  snprintf(run.checkpoint_dir, sizeof run.checkpoint_dir, "ckpt");
  snprintf(run.robust, sizeof run.robust, "centered-clip");
  WT_TEST_REQUIRE(parallel_run_config_check(&run) == WT_OK, "%s", wt_last_error());
  parallel_tasklet_config c;
  WT_TEST_REQUIRE(parallel_tasklet_config_from_run(&run, 1, 0, data, &c) == WT_OK, "%s",
                  wt_last_error());
  WT_TEST_ASSERT(!strcmp(c.run.schedule, "gpipe"), "schedule gpipe");
  WT_TEST_ASSERT(!strcmp(c.run.robust, "centered-clip"), "robust centered-clip: %s", c.run.robust);
  WT_TEST_ASSERT(parallel_tasklet_config_validate(&c, 4) == WT_OK, "%s", wt_last_error());
  WT_TEST_ASSERT(c.stage == 1 && c.replica == 0 && c.run.stages == 2 && c.run.replicas == 2,
                 "seat");
  trainer_config tc;
  WT_TEST_REQUIRE(parallel_run_trainer_config(&c.run, data_set_vocab_size(data), &tc) == WT_OK,
                  "%s", wt_last_error());
  WT_TEST_ASSERT(tc.model.max_seq == 48 && tc.model.vocab_size == dc.vocab_size, "seq %d, vocab %d",
                 tc.model.max_seq, tc.model.vocab_size);
  WT_TEST_ASSERT(tc.optim.min_lr == (float)1e-4 && tc.optim.warmup_steps == 4,
                 "min-lr %g, warmup %d", (double)tc.optim.min_lr, tc.optim.warmup_steps);
  WT_TEST_ASSERT(c.run.keep == 5 && c.run.checkpoint_every == 3 &&
                     !strcmp(c.run.checkpoint_dir, "ckpt"),
                 "checkpoints: keep %d every %d in %s", c.run.keep, c.run.checkpoint_every,
                 c.run.checkpoint_dir);
  WT_TEST_ASSERT(!strcmp(c.run.sync.grad_codec, "int8") && !strcmp(c.run.sync.grad_ef, "off"),
                 "int8 without EF");
  WT_TEST_ASSERT(c.run.val_every == 7 && c.run.act_slots == 1, "validation and slots");
  WT_TEST_ASSERT(parallel_tasklet_config_validate(&c, 4) == WT_OK, "the tasklet is valid: %s",
                 wt_last_error());
  data_set_destroy(&data);
}

int main(void) {
  test_round_trip_every_option();
  test_check_names_the_option();
  test_preset_and_stateful();
  test_from_json_refuses();
  test_check_twice();
  test_robust_choices();
  test_tasklet_from_run();
  return wt_test_finish("test_run_config");
}
