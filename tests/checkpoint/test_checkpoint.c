/* test_checkpoint — save/load round trip (bit-exact), the safetensors header read back with a
 * separate little cJSON reader (HF GPT2Model names and shapes), and every refusal: flipped byte,
 * truncation, wrong model config, wrong optimizer, a save that fails half-way. */
#include "model/checkpoint.h"
#include "common/common.h"
#include "model/safetensors.h"
#include "common/testing.h"

#include <stdlib.h>

#include <cjson/cJSON.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_tmp[512];
static const gpt_config g_cfg = {
    .vocab_size = 64, .max_seq = 16, .n_layer = 2, .n_head = 4, .channels = 32};

typedef struct {
  gpt_stage *model;
  optim *opt;
} run;

static run s_run_new(const gpt_config *cfg, optim_kind kind, uint64_t seed) {
  run r;
  r.model = gpt_stage_new(cfg, 0, cfg->n_layer, 2, cfg->max_seq);
  WT_TEST_REQUIRE(r.model, "%s", wt_last_error());
  gpt_stage_init_weights(r.model, seed);
  optim_config oc = optim_config_default();
  oc.kind = kind;
  r.opt = optim_new(&oc, gpt_stage_tensor(r.model, 0), gpt_stage_num_tensors(r.model));
  WT_TEST_REQUIRE(r.opt, "%s", wt_last_error());
  /* Recognisable optimizer state, as if some steps had run. */
  for (int i = 0; i < optim_num_states(r.opt); i++) {
    size_t n;
    float *st = optim_state(r.opt, i, &n);
    for (size_t j = 0; j < n; j++) st[j] = (float)(seed + i) * 1e-3f + (float)j * 1e-7f;
  }
  optim_set_step_count(r.opt, 7);
  return r;
}

static void s_run_destroy(run *r) {
  gpt_stage_destroy(&r->model);
  optim_destroy(&r->opt);
}

static checkpoint_meta s_meta(long step) {
  checkpoint_meta m = {.step = step, .tokenizer = DATA_TOKENIZER_SYNTHETIC};
  data_position_init(&m.data_pos, 99);
  m.data_pos.batches = (uint64_t)step;
  snprintf(m.train_json, sizeof m.train_json, "{\"lr\":0.001}");
  return m;
}

static int s_same_params(gpt_stage *a, gpt_stage *b) {
  size_t na, nb;
  const float *pa = gpt_stage_params(a, &na), *pb = gpt_stage_params(b, &nb);
  return na == nb && !memcmp(pa, pb, na * sizeof(float));
}

static void test_round_trip(const char *dir) {
  run a = s_run_new(&g_cfg, OPTIM_ADAMW, 1), b = s_run_new(&g_cfg, OPTIM_ADAMW, 2);
  checkpoint_meta m = s_meta(7), got;
  WT_TEST_REQUIRE(checkpoint_save(dir, a.model, a.opt, &m, 2) == WT_OK, "%s", wt_last_error());
  WT_TEST_ASSERT(!s_same_params(a.model, b.model), "different seeds differ before loading");
  optim_set_step_count(b.opt, 0);
  WT_TEST_REQUIRE(checkpoint_load(dir, b.model, b.opt, &got) == WT_OK, "%s", wt_last_error());
  WT_TEST_ASSERT(s_same_params(a.model, b.model), "weights bit-exact");
  for (int i = 0; i < optim_num_states(a.opt); i++) {
    size_t n;
    const float *sa = optim_state(a.opt, i, &n), *sb = optim_state(b.opt, i, &n);
    WT_TEST_ASSERT(!memcmp(sa, sb, n * sizeof(float)), "optimizer state %d bit-exact", i);
  }
  WT_TEST_ASSERT(optim_step_count(b.opt) == 7, "step count %ld", optim_step_count(b.opt));
  WT_TEST_ASSERT(got.step == 7 && got.data_pos.batches == 7 &&
                     !memcmp(&got.data_pos.rng, &m.data_pos.rng, sizeof m.data_pos.rng) &&
                     got.tokenizer == DATA_TOKENIZER_SYNTHETIC,
                 "meta restored");
  WT_TEST_ASSERT(strstr(got.train_json, "\"lr\""), "train config echo: %s", got.train_json);
  gpt_config c;
  WT_TEST_ASSERT(checkpoint_read_config(dir, &c, &got) == WT_OK && !memcmp(&c, &g_cfg, sizeof c),
                 "config read back: %s", wt_last_error());
  s_run_destroy(&a);
  s_run_destroy(&b);
}

/* An independent reader: 8-byte length, cJSON header, names/shapes/offsets of GPT2Model. */
static void test_safetensors_layout(const char *dir) {
  char path[700];
  snprintf(path, sizeof path, "%s/step-00000007/model.safetensors", dir);
  FILE *f = fopen(path, "rb");
  WT_TEST_REQUIRE(f, "no %s", path);
  unsigned char len_le[8];
  WT_TEST_REQUIRE(fread(len_le, 1, 8, f) == 8, "length");
  uint64_t hlen = 0;
  for (int i = 0; i < 8; i++) hlen |= (uint64_t)len_le[i] << (8 * i);
  WT_TEST_ASSERT(hlen % 8 == 0, "header padded to 8 bytes: %llu", (unsigned long long)hlen);
  char *json = calloc(1, hlen + 1);
  WT_TEST_REQUIRE(fread(json, 1, hlen, f) == hlen, "header");
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fclose(f);
  cJSON *h = cJSON_Parse(json);
  WT_TEST_REQUIRE(cJSON_IsObject(h), "header is JSON");
  const int C = g_cfg.channels, V = g_cfg.vocab_size;
  struct {
    const char *name;
    int d0, d1;
  } want[] = {{"wte.weight", V, C},
              {"wpe.weight", g_cfg.max_seq, C},
              {"h.0.ln_1.weight", C, 0},
              {"h.0.attn.c_attn.weight", C, 3 * C},
              {"h.0.attn.c_attn.bias", 3 * C, 0},
              {"h.1.attn.c_proj.weight", C, C},
              {"h.1.mlp.c_fc.weight", C, 4 * C},
              {"h.1.mlp.c_proj.weight", 4 * C, C},
              {"h.1.ln_2.bias", C, 0},
              {"ln_f.weight", C, 0}};
  for (size_t i = 0; i < WT_ARRAY_LEN(want); i++) {
    cJSON *e = cJSON_GetObjectItemCaseSensitive(h, want[i].name);
    cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
    int nd = want[i].d1 ? 2 : 1;
    WT_TEST_ASSERT(e && cJSON_GetArraySize(shape) == nd &&
                       cJSON_GetArrayItem(shape, 0)->valueint == want[i].d0 &&
                       (nd == 1 || cJSON_GetArrayItem(shape, 1)->valueint == want[i].d1) &&
                       !strcmp(cJSON_GetObjectItem(e, "dtype")->valuestring, "F32"),
                   "tensor %s", want[i].name);
  }
  /* Offsets tile the data section exactly. */
  double total = 0;
  int n = 0;
  for (cJSON *e = h->child; e; e = e->next) {
    if (!strcmp(e->string, "__metadata__")) continue;
    cJSON *o = cJSON_GetObjectItem(e, "data_offsets");
    total += cJSON_GetArrayItem(o, 1)->valuedouble - cJSON_GetArrayItem(o, 0)->valuedouble;
    n++;
  }
  WT_TEST_ASSERT(n == 4 + 12 * g_cfg.n_layer, "tensor count %d", n);
  WT_TEST_ASSERT(total == (double)gpt_config_num_params(&g_cfg) * 4 &&
                     (double)size == 8 + (double)hlen + total,
                 "data bytes %.0f, file %ld", total, size);
  cJSON *meta = cJSON_GetObjectItem(h, "__metadata__");
  WT_TEST_ASSERT(meta && !strcmp(cJSON_GetObjectItem(meta, "n_layer")->valuestring, "2") &&
                     !strcmp(cJSON_GetObjectItem(meta, "channels")->valuestring, "32"),
                 "config in __metadata__");
  cJSON_Delete(h);
  free(json);
}

/* Runs f on a copy of the checkpoint's file, expects `code` and `words` in the message. */
static void s_expect_refused(const char *dir, const char *what, int code, const char *words) {
  run r = s_run_new(&g_cfg, OPTIM_ADAMW, 5);
  checkpoint_meta got;
  int rc = checkpoint_load(dir, r.model, r.opt, &got);
  WT_TEST_ASSERT(rc == code && strstr(wt_last_error(), words), "%s: rc %d (want %d), message: %s",
                 what, rc, code, wt_last_error());
  run fresh = s_run_new(&g_cfg, OPTIM_ADAMW, 5);
  WT_TEST_ASSERT(s_same_params(r.model, fresh.model), "%s: model unchanged", what);
  s_run_destroy(&r);
  s_run_destroy(&fresh);
}

static void s_flip_byte(const char *path, long at) {
  FILE *f = fopen(path, "r+b");
  WT_TEST_REQUIRE(f, "open %s", path);
  fseek(f, at, SEEK_SET);
  int c = fgetc(f);
  fseek(f, at, SEEK_SET);
  fputc(c ^ 0x01, f);
  fclose(f);
}

static void test_corruption(const char *dir) {
  char path[700];
  snprintf(path, sizeof path, "%s/step-00000007/model.safetensors", dir);
  s_flip_byte(path, 5000);
  s_expect_refused(dir, "flipped byte", WT_ECORRUPT, "model.safetensors does not match");
  WT_TEST_ASSERT(strstr(wt_last_error(), "earlier step"), "says what to do: %s", wt_last_error());
  s_flip_byte(path, 5000);
  snprintf(path, sizeof path, "%s/step-00000007/optimizer.safetensors", dir);
  struct stat st;
  stat(path, &st);
  char backup[800];
  snprintf(backup, sizeof backup, "%s.bak", path);
  link(path, backup);
  unlink(path);
  FILE *in = fopen(backup, "rb"), *out = fopen(path, "wb");
  for (long i = 0; i < st.st_size - 100; i++) fputc(fgetc(in), out);
  fclose(in);
  fclose(out);
  s_expect_refused(dir, "truncated", WT_ECORRUPT, "optimizer.safetensors");
  rename(backup, path);
  snprintf(path, sizeof path, "%s/step-00000007/state.json", dir);
  s_flip_byte(path, 3);
  s_expect_refused(dir, "flipped state byte", WT_ECORRUPT, "state.json");
  s_flip_byte(path, 3);
  s_expect_refused("/nonexistent/run", "missing", WT_ENOTFOUND, "no checkpoint");
}

static void test_mismatch(const char *dir) {
  gpt_config other = g_cfg;
  other.channels = 48;
  run r = s_run_new(&other, OPTIM_ADAMW, 3);
  checkpoint_meta got;
  WT_TEST_ASSERT(checkpoint_load(dir, r.model, r.opt, &got) == WT_EMISMATCH &&
                     strstr(wt_last_error(), "channels 32") &&
                     strstr(wt_last_error(), "channels 48"),
                 "wrong config: %s", wt_last_error());
  s_run_destroy(&r);
  run sgd = s_run_new(&g_cfg, OPTIM_SGD, 3), fresh = s_run_new(&g_cfg, OPTIM_SGD, 3);
  WT_TEST_ASSERT(checkpoint_load(dir, sgd.model, sgd.opt, &got) == WT_EMISMATCH &&
                     strstr(wt_last_error(), "--optimizer adamw"),
                 "wrong optimizer: %s", wt_last_error());
  WT_TEST_ASSERT(s_same_params(sgd.model, fresh.model), "refused load changed nothing");
  size_t n;
  WT_TEST_ASSERT(optim_state(sgd.opt, 0, &n)[1] == optim_state(fresh.opt, 0, &n)[1],
                 "optimizer untouched");
  s_run_destroy(&sgd);
  s_run_destroy(&fresh);
}

/* A save that runs out of file size part-way must leave the previous checkpoint as `latest`. */
static void test_failed_save(const char *dir) {
  run r = s_run_new(&g_cfg, OPTIM_ADAMW, 8);
  checkpoint_meta m = s_meta(8);
  struct rlimit old, small = {.rlim_cur = 20000, .rlim_max = RLIM_INFINITY};
  getrlimit(RLIMIT_FSIZE, &old);
  small.rlim_max = old.rlim_max;
  signal(SIGXFSZ, SIG_IGN); /* a write past the limit then fails with EFBIG instead of killing */
  setrlimit(RLIMIT_FSIZE, &small);
  int rc = checkpoint_save(dir, r.model, r.opt, &m, 2);
  setrlimit(RLIMIT_FSIZE, &old);
  WT_TEST_ASSERT(rc == WT_EIO && strstr(wt_last_error(), "unchanged"), "failed save: rc %d %s", rc,
                 wt_last_error());
  char stepdir[1024];
  WT_TEST_ASSERT(checkpoint_resolve(dir, stepdir, sizeof stepdir) == WT_OK &&
                     strstr(stepdir, "step-00000007"),
                 "latest still step 7: %s", stepdir);
  run check = s_run_new(&g_cfg, OPTIM_ADAMW, 8);
  checkpoint_meta got;
  WT_TEST_ASSERT(checkpoint_load(dir, check.model, check.opt, &got) == WT_OK && got.step == 7,
                 "step 7 still loads: %s", wt_last_error());
  /* Successful saves rotate: with keep = 2, step 7 goes once 8 and 9 exist. */
  WT_TEST_ASSERT(checkpoint_save(dir, r.model, r.opt, &m, 2) == WT_OK, "%s", wt_last_error());
  m.step = 9;
  WT_TEST_ASSERT(checkpoint_save(dir, r.model, r.opt, &m, 2) == WT_OK, "%s", wt_last_error());
  char path[700];
  snprintf(path, sizeof path, "%s/step-00000007", dir);
  WT_TEST_ASSERT(access(path, F_OK) != 0, "old step pruned");
  snprintf(path, sizeof path, "%s/step-00000008", dir);
  WT_TEST_ASSERT(checkpoint_load(path, check.model, check.opt, &got) == WT_OK && got.step == 8,
                 "a step directory loads directly: %s", wt_last_error());
  s_run_destroy(&r);
  s_run_destroy(&check);
}

int main(void) {
  wt_test_tmpdir(g_tmp, sizeof g_tmp);
  char dir[600];
  snprintf(dir, sizeof dir, "%s/run", g_tmp);
  test_round_trip(dir);
  test_safetensors_layout(dir);
  test_corruption(dir);
  test_mismatch(dir);
  test_failed_save(dir);
  if (!wt_test_failures) { /* scratch is kept when a check failed, for a look at it */
    char rm[700];
    snprintf(rm, sizeof rm, "rm -rf '%s'", g_tmp);
    if (system(rm) != 0) fprintf(stderr, "could not remove %s\n", g_tmp);
  }
  return wt_test_finish("test_checkpoint");
}
