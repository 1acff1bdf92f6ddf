/* tasklet_checkpoint — per-stage checkpoints and the run manifest that ties them together
 * (tasklet.h): replica 0 of each stage saves its stage with model/checkpoint.h, every tasklet
 * reports whether its part succeeded in one all-gather, and world rank 0 then writes
 * DIR/manifest.json atomically. Every tasklet also saves what the stage checkpoint does not hold
 * (DiLoCo, error-feedback residuals, AC-SGD caches; below). Each stage checkpoint and the
 * manifest record the run binding (tasklet.h), which resume checks. Resume loads the step the
 * manifest names, never a newer step a stage may have saved before the run stopped. */
#include "parallel/runtime/tasklet_internal.h"

#include "common/bytes.h" /* defines: wt_put_le32 / wt_get_le32, wt_crc32 */
#include "common/common.h"
#include "model/checkpoint.h"

#include <assert.h>
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define S_MANIFEST_FORMAT "wantrain-run-1"

static void s_stage_dir(const parallel_tasklet *k, int stage, char *out, size_t size) {
  snprintf(out, size, "%s/stage-%d", k->cfg.run.checkpoint_dir, stage);
}

static int s_state_save(parallel_tasklet *k);

/* ---- the run binding (tasklet.h) ---------------------------------------------------------------
 * One row per bound field: its name in the JSON object, the launch flag that sets it (NULL: no
 * flag; the message then says "the same <field>"), whether a resume may change it, and what a
 * binding that lacks the field records (NULL: "(none)"): a field bound later reads as the value
 * every run had before it was bound, so those runs still resume. */
typedef struct {
  const char *field, *flag;
  int may_change;
  const char *absent;
} s_bind_row;

static const s_bind_row s_bind[] = {
    {"run_id", NULL, 0, NULL},
    {"seed", "--seed", 0, NULL},
    {"data", "--data", 0, NULL},
    {"stages", "--stages", 0, NULL},
    {"replicas", "--replicas", 0, NULL},
    {"batch", "--batch", 0, NULL},
    {"micro_batches", "--micro-batches", 0, NULL},
    {"schedule", "--schedule", 0, NULL},
    {"model", NULL, 0, NULL},
    {"optimizer", "--optimizer", 0, NULL},
    {"lr", "--lr", 0, NULL},
    {"min_lr", "--min-lr", 0, NULL},
    {"warmup_steps", "--warmup", 0, NULL},
    {"weight_decay", "--weight-decay", 0, NULL},
    {"grad_clip", "--grad-clip", 0, NULL},
    {"betas_eps_momentum", NULL, 0, NULL},
    {"grad_codec", "--grad-codec", 0, NULL},
    {"grad_ef", "--grad-ef", 0, NULL},
    {"act_codec", "--act-codec", 0, NULL},
    {"diloco", "--diloco", 0, NULL},
    {"outer_lr", "--outer-lr", 0, NULL},
    {"outer_momentum", "--outer-momentum", 0, NULL},
    {"steps", "--steps", 1, NULL},
    {"robust", "--robust", 0, "none"},
};
enum { S_BIND_N = (int)WT_ARRAY_LEN(s_bind), S_BIND_VALUE = 96 };

static void s_bind_model(const gpt_config *g, char *out, size_t size) {
  int n = snprintf(out, size, "V%d T%d L%d H%d C%d", g->vocab_size, g->max_seq, g->n_layer,
                   g->n_head, g->channels);
  if (g->moe_experts <= 0 || n < 0 || (size_t)n >= size) return;
  n += snprintf(out + n, size - (size_t)n, " E%d k%d cap %.9g aux %.9g moe ", g->moe_experts,
                g->moe_top_k, g->moe_capacity, g->moe_aux_weight);
  for (int l = 0; l < g->n_layer && l < GPT_MOE_MAX_LAYERS && (size_t)n + 1 < size; l++)
    out[n++] = g->moe_layer[l] ? '1' : '0', out[n] = 0;
}

/* The values of every row but run_id, in s_bind's order: settings of the run, the same on every
 * tasklet (where a stage runs — device, site — is not bound). Settings that take no part in the
 * arithmetic (error feedback without a codec, DiLoCo's outer step without DiLoCo) are recorded
 * as "-" or 0, so that their defaults never differ. */
static void s_bind_values(const parallel_tasklet_config *c, char v[S_BIND_N][S_BIND_VALUE]) {
  trainer_config train;
  parallel_run_trainer_fields(&c->run, &train);
  if (!c->data || parallel_run_config_model(&c->run, data_set_vocab_size(c->data), &train.model))
    train.model = (gpt_config){.vocab_size = c->data ? data_set_vocab_size(c->data) : 0,
                               .max_seq = c->run.seq,
                               .n_layer = c->run.layers,
                               .n_head = c->run.heads,
                               .channels = c->run.channels}; /* a run that cannot train */
  const trainer_config *t = &train;
  const optim_config *o = &t->optim;
  const int coded = strcmp(c->run.sync.grad_codec, "none") != 0, outer = c->run.sync.diloco > 0;
  int i = 1;
  snprintf(v[i++], S_BIND_VALUE, "%llu", (unsigned long long)t->seed);
  if (c->data)
    snprintf(
        v[i++], S_BIND_VALUE, "%zu tokens, tokenizer %s, crc32 %08x", data_set_num_tokens(c->data),
        data_set_tokenizer(c->data) == DATA_TOKENIZER_GPT2    ? "gpt2"
        : data_set_tokenizer(c->data) == DATA_TOKENIZER_BYTES ? "bytes"
                                                              : "synthetic",
        wt_crc32(0, data_set_tokens(c->data), sizeof(uint16_t) * data_set_num_tokens(c->data)));
  else
    snprintf(v[i++], S_BIND_VALUE, "none");
  snprintf(v[i++], S_BIND_VALUE, "%d", c->run.stages);
  snprintf(v[i++], S_BIND_VALUE, "%d", c->run.replicas);
  snprintf(v[i++], S_BIND_VALUE, "%d", t->batch);
  snprintf(v[i++], S_BIND_VALUE, "%d", t->micro_batches);
  snprintf(v[i++], S_BIND_VALUE, "%s",
           parallel_run_schedule(&c->run) == ASSIGN_SCHEDULE_GPIPE ? "gpipe" : "1f1b");
  s_bind_model(&t->model, v[i++], S_BIND_VALUE);
  snprintf(v[i++], S_BIND_VALUE, "%s", o->kind == OPTIM_SGD ? "sgd" : "adamw");
  snprintf(v[i++], S_BIND_VALUE, "%.9g", o->lr);
  snprintf(v[i++], S_BIND_VALUE, "%.9g", o->min_lr);
  snprintf(v[i++], S_BIND_VALUE, "%d", o->warmup_steps);
  snprintf(v[i++], S_BIND_VALUE, "%.9g", o->weight_decay);
  snprintf(v[i++], S_BIND_VALUE, "%.9g", o->grad_clip);
  snprintf(v[i++], S_BIND_VALUE, "%.9g %.9g %.9g %.9g", o->beta1, o->beta2, o->eps, o->momentum);
  snprintf(v[i++], S_BIND_VALUE, "%.*s", S_BIND_VALUE - 1, c->run.sync.grad_codec);
  snprintf(v[i++], S_BIND_VALUE, "%s",
           coded ? (parallel_run_grad_ef(&c->run) ? "on" : "off") : "-");
  snprintf(v[i++], S_BIND_VALUE, "%.*s", S_BIND_VALUE - 1, c->run.act_codec);
  snprintf(v[i++], S_BIND_VALUE, "%d", c->run.sync.diloco);
  snprintf(v[i++], S_BIND_VALUE, "%.9g", outer ? (float)c->run.sync.outer_lr : 0.0);
  snprintf(v[i++], S_BIND_VALUE, "%.9g", outer ? (float)c->run.sync.outer_momentum : 0.0);
  snprintf(v[i++], S_BIND_VALUE, "%ld", t->steps);
  snprintf(v[i++], S_BIND_VALUE, "%.90s", c->run.robust[0] ? c->run.robust : "none");
  assert(i == S_BIND_N);
}

char *parallel_run_binding(const parallel_tasklet_config *cfg, uint64_t run_id) {
  char v[S_BIND_N][S_BIND_VALUE];
  s_bind_values(cfg, v);
  if (!run_id) { /* FNV-1a over the settings, each with its NUL: the same settings, the same id;
                  * a later field holding its absent value leaves the id as it was */
    run_id = 14695981039346656037ull;
    for (int i = 1; i < S_BIND_N; i++)
      if (!s_bind[i].absent || strcmp(v[i], s_bind[i].absent))
        for (size_t j = 0; j <= strlen(v[i]); j++)
          run_id = (run_id ^ (unsigned char)v[i][j]) * 1099511628211ull;
  }
  snprintf(v[0], S_BIND_VALUE, "%016llx", (unsigned long long)run_id);
  cJSON *o = cJSON_CreateObject();
  for (int i = 0; i < S_BIND_N; i++) cJSON_AddStringToObject(o, s_bind[i].field, v[i]);
  char *text = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  return text;
}

static const char *s_bind_get(const cJSON *o, const char *field) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, field);
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

uint64_t parallel_run_binding_id(const char *binding) {
  cJSON *o = binding ? cJSON_Parse(binding) : NULL;
  const char *id = s_bind_get(o, "run_id");
  uint64_t out = id ? strtoull(id, NULL, 16) : 0;
  cJSON_Delete(o);
  return out;
}

/* The first row from `from` on whose values differ in was and now (parsed objects), or -1;
 * may_change rows only when `strict`. A field `was` lacks reads as its row's absent value. */
static int s_bind_diff(const cJSON *was, const cJSON *now, int from, int strict, const char **a,
                       const char **b) {
  for (int i = from; i < S_BIND_N; i++) {
    if (s_bind[i].may_change && !strict) continue;
    const char *absent = s_bind[i].absent ? s_bind[i].absent : "(none)";
    *a = s_bind_get(was, s_bind[i].field), *b = s_bind_get(now, s_bind[i].field);
    if (!*a) *a = absent;
    if (!*b) *b = absent;
    if (strcmp(*a, *b)) return i;
  }
  return -1;
}

int parallel_run_binding_check(const char *what, const char *was, const char *now, char *notes,
                               size_t notes_size) {
  cJSON *w = was ? cJSON_Parse(was) : NULL, *n = now ? cJSON_Parse(now) : NULL;
  const char *a = NULL, *b = NULL;
  int rc = WT_OK;
  if (notes && notes_size) notes[0] = 0;
  if (!cJSON_IsObject(w) || !s_bind_get(w, "run_id") || !cJSON_IsObject(n))
    rc = wt_fail(WT_ECORRUPT,
                 "%s: the recorded run binding is malformed; restore the run "
                 "directory or start a new one",
                 what);
  int i = rc == WT_OK ? s_bind_diff(w, n, 1, 0, &a, &b) : -1;
  if (i >= 0 && s_bind[i].flag)
    rc = wt_fail(WT_EMISMATCH,
                 "%s: %s was %s, this run asks %s; resume with %s %s or start a new run "
                 "directory",
                 what, s_bind[i].field, a, b, s_bind[i].flag, a);
  else if (i >= 0)
    rc = wt_fail(WT_EMISMATCH,
                 "%s: %s was %s, this run asks %s; resume with the same %s or start a new run "
                 "directory",
                 what, s_bind[i].field, a, b, s_bind[i].field);
  for (int k = 0; rc == WT_OK && k < S_BIND_N; k++) {
    if (!s_bind[k].may_change || s_bind_diff(w, n, k, 1, &a, &b) != k) continue;
    size_t len = notes ? strlen(notes) : 0;
    if (notes && len < notes_size)
      snprintf(notes + len, notes_size - len, "%s%s was %s, this run asks %s", len ? "; " : "",
               s_bind[k].field, a, b);
  }
  cJSON_Delete(w);
  cJSON_Delete(n);
  return rc;
}

/* This tasklet's binding, made once (the data's CRC is not free on a large corpus). */
static const char *s_binding(parallel_tasklet *k) {
  if (!k->binding[0]) {
    if (!k->run_id) k->run_id = k->cfg.run_id;
    char *text = parallel_run_binding(&k->cfg, k->run_id);
    snprintf(k->binding, sizeof k->binding, "%s", text);
    free(text);
    if (!k->run_id) k->run_id = parallel_run_binding_id(k->binding);
  }
  return k->binding;
}

/* ZeRO-1: the whole stage's optimizer, its state all-gathered from the shards (every replica of
 * the stage takes part). NULL with wt_last_error() set on failure. */
static optim *s_gather_optim(parallel_tasklet *k) {
  gpt_stage *s = trainer_model(k->t);
  int nt;
  const gpt_tensor_info *ti = gpt_stage_tensors(s, &nt);
  optim *shard = parallel_zero_optim(k->zero), *full = optim_new(optim_get_config(shard), ti, nt);
  size_t off, len, n;
  parallel_zero_shard(k->zero, &off, &len);
  for (int i = 0; full && i < optim_num_states(full); i++) {
    float *buf = optim_state(full, i, &n);
    memcpy(buf + off, optim_state(shard, i, NULL), sizeof(float) * len);
    if (parallel_allgather_chunks(k->dp, buf, n) != WT_OK) optim_destroy(&full);
  }
  if (full) optim_set_step_count(full, optim_step_count(shard));
  return full;
}

/* How many of its checkpoints the tasklet keeps: the newest run.keep, at least two (the manifest
 * may still name the previous step while this one lands); all when the directory's owner prunes. */
static int s_keep(const parallel_tasklet *k) {
  return k->cfg.owner_prunes ? INT_MAX : WT_MAX(k->cfg.run.keep, 2);
}

static int s_save_stage(parallel_tasklet *k) {
  optim *full = NULL;
  if (k->zero && !(full = s_gather_optim(k))) return WT_EIO;
  /* the .state first: a peer's store names replica 0's shard once its stage directory is
   * complete, and by then the shard is whole (peer/shards.h) */
  int rc = s_state_save(k);
  if (rc == WT_OK && k->cfg.replica == 0) {
    char dir[1200];
    s_stage_dir(k, k->cfg.stage, dir, sizeof dir);
    checkpoint_meta m = {.step = trainer_steps_done(k->t),
                         .data_pos = trainer_data_position(k->t),
                         .tokenizer = data_set_tokenizer(k->cfg.data)};
    snprintf(m.train_json, sizeof m.train_json, "%s", s_binding(k));
    rc =
        checkpoint_save(dir, trainer_model(k->t), full ? full : trainer_optim(k->t), &m, s_keep(k));
  }
  optim_destroy(&full);
  return rc;
}

/* Writes len bytes (then `tail`, tail_len bytes) to dir/name through a temporary file, fsync and
 * rename, then fsyncs dir: the file is either the old one or the complete new one. */
static int s_write_atomic_bytes(const char *dir, const char *name, const void *data, size_t len,
                                const void *tail, size_t tail_len) {
  char path[1300], tmp[1300];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  snprintf(tmp, sizeof tmp, "%s/.%s.tmp", dir, name);
  FILE *f = fopen(tmp, "wb");
  if (!f) return wt_fail(WT_EIO, "cannot create %s: %s", tmp, strerror(errno));
  int ok = fwrite(data, 1, len, f) == len && fwrite(tail, 1, tail_len, f) == tail_len &&
           fflush(f) == 0 && fsync(fileno(f)) == 0;
  ok = fclose(f) == 0 && ok;
  if (!ok || rename(tmp, path) != 0) {
    int e = errno;
    remove(tmp);
    return wt_fail(WT_EIO, "cannot write %s: %s", path, strerror(e));
  }
  int dfd = open(dir, O_RDONLY);
  if (dfd < 0 || fsync(dfd) != 0) {
    int e = errno;
    if (dfd >= 0) close(dfd);
    return wt_fail(WT_EIO, "cannot sync directory %s: %s", dir, strerror(e));
  }
  close(dfd);
  return WT_OK;
}

static int s_write_atomic(const char *dir, const char *name, const char *text) {
  return s_write_atomic_bytes(dir, name, text, strlen(text), "", 0);
}

/* ---- the tasklet's own state ------------------------------------------------------------------
 * What the stage checkpoint does not hold, per tasklet (every replica: the pieces differ between
 * replicas), in DIR/stage-<s>/replica-<r>-step-<step>.state:
 *   header   "WTTS", u32 version, u32 sections, u32 stage, u32 replica, u64 step
 *   INNER    DiLoCo: this replica's parameters and inner optimizer (u64 n, u32 buffers,
 *            u64 step count, then n floats per buffer, parameters first)
 *   DILOCO   diloco_save: θ_outer, outer momentum, outer step count, its residuals
 *   EF       the compressed ring's residuals (parallel_ef_save)
 *   SEF      the sparse all-gather's sender residual (compress_ef_save)
 *   ACT      the AC-SGD delta caches of the stage's cuts (parallel_pipeline_save_state)
 *   u32 CRC-32 of everything before it.
 * Written (temporary file, fsync, rename) before the checkpoint agreement, so a manifest naming
 * step N means every tasklet's step-N state is on disk. */
#define S_STATE_MAGIC "WTTS"
#define S_STATE_VERSION 1u
#define S_STATE_HEADER 28
enum { S_ST_INNER = 1, S_ST_DILOCO = 2, S_ST_EF = 4, S_ST_SEF = 8, S_ST_ACT = 16 };

static unsigned s_state_sections(const parallel_tasklet *k) {
  unsigned f = 0;
  if (k->outer) f |= S_ST_INNER | S_ST_DILOCO;
  if (k->ef) f |= S_ST_EF;
  if (k->sef) f |= S_ST_SEF;
  if (k->pipeline && parallel_pipeline_has_state(k->pipeline)) f |= S_ST_ACT;
  return f;
}

static void s_state_name(const parallel_tasklet *k, long step, char *out, size_t size) {
  snprintf(out, size, "replica-%d-step-%08ld.state", k->cfg.replica, step);
}

static int s_state_write_inner(parallel_tasklet *k, FILE *f) {
  size_t n;
  const float *params = gpt_stage_params_host(trainer_model(k->t), &n); /* a copy on a GPU */
  optim *o = trainer_optim(k->t);
  uint8_t h[20];
  wt_put_le64(h, n);
  wt_put_le32(h + 8, (uint32_t)optim_num_states(o));
  wt_put_le64(h + 12, (uint64_t)optim_step_count(o));
  int ok = fwrite(h, 1, sizeof h, f) == sizeof h && fwrite(params, sizeof(float), n, f) == n;
  for (int i = 0; ok && i < optim_num_states(o); i++) {
    size_t m;
    const float *b = optim_state_host(o, i, &m);
    ok = m == n && fwrite(b, sizeof(float), m, f) == m;
  }
  return ok ? WT_OK : wt_fail(WT_EIO, "cannot write the replica's parameters");
}

static int s_state_read_inner(parallel_tasklet *k, FILE *f) {
  size_t n;
  gpt_stage *s = trainer_model(k->t);
  float *params = gpt_stage_params_host(s, &n); /* on a GPU: read into the copy, then uploaded */
  optim *o = trainer_optim(k->t);
  uint8_t h[20];
  if (fread(h, 1, sizeof h, f) != sizeof h) return wt_fail(WT_ECORRUPT, "truncated");
  if (wt_get_le64(h) != n || wt_get_le32(h + 8) != (uint32_t)optim_num_states(o))
    return wt_fail(WT_EMISMATCH,
                   "the replica's state holds %llu parameters and %u optimizer buffers, this "
                   "stage has %zu and %d; resume with the same model and --optimizer",
                   (unsigned long long)wt_get_le64(h), wt_get_le32(h + 8), n, optim_num_states(o));
  long steps = (long)wt_get_le64(h + 12);
  if (steps < 0 || steps > CHECKPOINT_MAX_STEP)
    return wt_fail(WT_ECORRUPT, "optimizer step count %ld", steps);
  if (fread(params, sizeof(float), n, f) != n) return wt_fail(WT_ECORRUPT, "truncated");
  gpt_stage_params_upload(s);
  for (int i = 0; i < optim_num_states(o); i++) {
    if (fread(optim_state_host(o, i, NULL), sizeof(float), n, f) != n)
      return wt_fail(WT_ECORRUPT, "truncated");
    optim_state_upload(o, i);
  }
  optim_set_step_count(o, steps);
  return WT_OK;
}

/* Keeps this tasklet's newest `keep` state files, removes older ones. */
static void s_state_prune(const parallel_tasklet *k, const char *dir, int keep) {
  DIR *d = opendir(dir);
  if (!d) return;
  long steps[4096];
  int n = 0;
  struct dirent *e;
  char want[64];
  snprintf(want, sizeof want, "replica-%d-step-", k->cfg.replica);
  while ((e = readdir(d)) && n < (int)WT_ARRAY_LEN(steps)) {
    long st;
    char rest[16];
    if (strncmp(e->d_name, want, strlen(want)) ||
        sscanf(e->d_name + strlen(want), "%ld%15s", &st, rest) != 2 || strcmp(rest, ".state"))
      continue;
    steps[n++] = st;
  }
  closedir(d);
  for (int i = 0; i < n; i++) { /* remove every step with at least `keep` newer ones */
    int newer = 0;
    for (int j = 0; j < n; j++) newer += steps[j] > steps[i];
    if (newer < keep) continue;
    char name[96], path[1400];
    s_state_name(k, steps[i], name, sizeof name);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    unlink(path);
  }
}

static int s_state_save(parallel_tasklet *k) {
  const unsigned sections = s_state_sections(k);
  if (!sections) return WT_OK;
  char dir[1200], name[96];
  s_stage_dir(k, k->cfg.stage, dir, sizeof dir);
  mkdir(k->cfg.run.checkpoint_dir, 0755);
  if (mkdir(dir, 0755) != 0 && errno != EEXIST)
    return wt_fail(WT_EIO, "cannot create %s: %s", dir, strerror(errno));
  const long step = trainer_steps_done(k->t);
  char *buf = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&buf, &len);
  if (!m) return wt_fail(WT_EIO, "cannot buffer the tasklet state: %s", strerror(errno));
  uint8_t h[S_STATE_HEADER];
  memcpy(h, S_STATE_MAGIC, 4);
  wt_put_le32(h + 4, S_STATE_VERSION);
  wt_put_le32(h + 8, sections);
  wt_put_le32(h + 12, (uint32_t)k->cfg.stage);
  wt_put_le32(h + 16, (uint32_t)k->cfg.replica);
  wt_put_le64(h + 20, (uint64_t)step);
  int rc = fwrite(h, 1, sizeof h, m) == sizeof h ? WT_OK : WT_EIO;
  if (rc == WT_OK && (sections & S_ST_INNER)) rc = s_state_write_inner(k, m);
  if (rc == WT_OK && (sections & S_ST_DILOCO)) rc = diloco_save(k->outer, m);
  if (rc == WT_OK && (sections & S_ST_EF)) rc = parallel_ef_save(k->ef, m);
  if (rc == WT_OK && (sections & S_ST_SEF)) {
    parallel_tasklet_device_sync_residual_down(k); /* a device residual's mirror */
    rc = compress_ef_save(k->sef, m);
  }
  if (rc == WT_OK && (sections & S_ST_ACT)) rc = parallel_pipeline_save_state(k->pipeline, m);
  if (fclose(m) != 0 && rc == WT_OK) rc = wt_fail(WT_EIO, "cannot buffer the tasklet state");
  if (rc == WT_OK) {
    uint8_t crc[4];
    wt_put_le32(crc, wt_crc32(0, buf, len));
    s_state_name(k, step, name, sizeof name);
    rc = s_write_atomic_bytes(dir, name, buf, len, crc, 4);
  }
  free(buf);
  if (rc == WT_OK) s_state_prune(k, dir, s_keep(k));
  return rc;
}

static const char *s_section_names(unsigned f, char *out, size_t size) {
  snprintf(out, size, "%s%s%s%s%s", f & S_ST_DILOCO ? " DiLoCo" : "",
           f & S_ST_EF ? " ring-residuals" : "", f & S_ST_SEF ? " sparse-residuals" : "",
           f & S_ST_ACT ? " activation-caches" : "", f ? "" : " nothing");
  return out;
}

/* Reads this tasklet's state of `step` into the run (after the stage checkpoint). */
static int s_state_load(parallel_tasklet *k, long step) {
  const unsigned sections = s_state_sections(k);
  char dir[1200], name[96], path[1400];
  s_stage_dir(k, k->cfg.stage, dir, sizeof dir);
  s_state_name(k, step, name, sizeof name);
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "rb");
  /* A run that keeps nothing finds no file; one it finds holds state this run would drop. */
  if (!f && !sections) return WT_OK;
  if (!f)
    return wt_fail(WT_ENOTFOUND,
                   "no tasklet state %s (%s): this run keeps state across steps (DiLoCo, "
                   "error-feedback residuals or delta activation caches) that its checkpoint "
                   "of step %ld does not hold; resume with the options it was saved with",
                   path, strerror(errno), step);
  struct stat sb;
  size_t len = fstat(fileno(f), &sb) == 0 ? (size_t)sb.st_size : 0;
  uint8_t *buf = len >= S_STATE_HEADER + 4 ? wt_xmalloc(len) : NULL;
  int rc = buf && fread(buf, 1, len, f) == len ? WT_OK : WT_ECORRUPT;
  fclose(f);
  if (rc == WT_OK && wt_crc32(0, buf, len - 4) != wt_get_le32(buf + len - 4)) rc = WT_ECORRUPT;
  if (rc != WT_OK) {
    free(buf);
    return wt_fail(WT_ECORRUPT,
                   "tasklet state %s is truncated or damaged (CRC); restore it or "
                   "resume from an earlier run directory",
                   path);
  }
  unsigned saved = wt_get_le32(buf + 8);
  char a[96], b[96];
  if (memcmp(buf, S_STATE_MAGIC, 4) || wt_get_le32(buf + 4) != S_STATE_VERSION)
    rc = wt_fail(WT_ECORRUPT, "%s is not a tasklet state (magic or version)", path);
  else if (wt_get_le32(buf + 12) != (uint32_t)k->cfg.stage ||
           wt_get_le32(buf + 16) != (uint32_t)k->cfg.replica ||
           wt_get_le64(buf + 20) != (uint64_t)step)
    rc = wt_fail(WT_ECORRUPT, "%s names stage %u replica %u step %llu", path, wt_get_le32(buf + 12),
                 wt_get_le32(buf + 16), (unsigned long long)wt_get_le64(buf + 20));
  else if (saved != sections)
    rc = wt_fail(WT_EMISMATCH,
                 "%s holds%s but this run keeps%s; resume with the --diloco, --grad-codec and "
                 "--act-codec options the run was saved with",
                 path, s_section_names(saved, a, sizeof a), s_section_names(sections, b, sizeof b));
  FILE *m = rc == WT_OK ? fmemopen(buf + S_STATE_HEADER, len - 4 - S_STATE_HEADER, "rb") : NULL;
  if (rc == WT_OK && !m) rc = wt_fail(WT_EIO, "cannot read %s: %s", path, strerror(errno));
  if (rc == WT_OK && (sections & S_ST_INNER)) rc = s_state_read_inner(k, m);
  if (rc == WT_OK && (sections & S_ST_DILOCO)) rc = diloco_load(k->outer, m);
  if (rc == WT_OK && (sections & S_ST_EF)) rc = parallel_ef_load(k->ef, m);
  if (rc == WT_OK && (sections & S_ST_SEF)) {
    rc = compress_ef_load(k->sef, m);
    if (rc == WT_OK) parallel_tasklet_device_sync_residual_up(k);
  }
  if (rc == WT_OK && (sections & S_ST_ACT)) rc = parallel_pipeline_load_state(k->pipeline, m);
  if (rc == WT_OK && ftell(m) != (long)(len - 4 - S_STATE_HEADER))
    rc = wt_fail(WT_ECORRUPT, "%zu stray bytes", len - 4 - S_STATE_HEADER - (size_t)ftell(m));
  if (m) fclose(m);
  free(buf);
  if (rc != WT_OK && !strstr(wt_last_error(), path)) {
    char why[1024];
    snprintf(why, sizeof why, "%s", wt_last_error());
    rc = wt_fail(rc, "tasklet state %s: %s", path, why);
  }
  return rc;
}

/* Creates dir and its parents (a private directory may hold nothing of this tasklet yet: a
 * stateless run's replicas above 0 write only the manifest). */
static int s_mkdirs(const char *dir) {
  char path[1200];
  snprintf(path, sizeof path, "%s", dir);
  for (char *p = path + 1;; p++) {
    const char c = *p;
    if (c != '/' && c != 0) continue;
    *p = 0;
    if (mkdir(path, 0755) != 0 && errno != EEXIST)
      return wt_fail(WT_EIO, "cannot create %s: %s", path, strerror(errno));
    *p = c;
    if (!c) return WT_OK;
  }
}

/* The manifest: run shape, the step every stage saved, and each stage's layers and directory.
 * `parts` holds each world rank's (ok, first_layer, last_layer) as 9 bytes. */
static int s_write_manifest(parallel_tasklet *k, const uint8_t *parts) {
  const parallel_tasklet_config *c = &k->cfg;
  const gpt_config *g = &k->train.model;
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "format", S_MANIFEST_FORMAT);
  cJSON_AddNumberToObject(root, "step", (double)trainer_steps_done(k->t));
  cJSON_AddNumberToObject(root, "stages", c->run.stages);
  cJSON_AddNumberToObject(root, "replicas", c->run.replicas);
  cJSON *model = cJSON_AddObjectToObject(root, "model");
  cJSON_AddNumberToObject(model, "vocab_size", g->vocab_size);
  cJSON_AddNumberToObject(model, "max_seq", g->max_seq);
  cJSON_AddNumberToObject(model, "n_layer", g->n_layer);
  cJSON_AddNumberToObject(model, "n_head", g->n_head);
  cJSON_AddNumberToObject(model, "channels", g->channels);
  cJSON_AddItemToObject(root, "run", cJSON_Parse(s_binding(k)));
  cJSON *changes = k->run_changes[0] ? cJSON_Parse(k->run_changes) : NULL;
  if (changes) cJSON_AddItemToObject(root, "changes", changes);
  cJSON *stages = cJSON_AddArrayToObject(root, "stage");
  for (int s = 0; s < c->run.stages; s++) {
    const uint8_t *p = parts + (size_t)9 * (s * c->run.replicas); /* replica 0 of stage s */
    char dir[64], step_dir[96];
    snprintf(dir, sizeof dir, "stage-%d", s);
    snprintf(step_dir, sizeof step_dir, "%s/step-%08ld", dir, trainer_steps_done(k->t));
    cJSON *e = cJSON_CreateObject();
    cJSON_AddNumberToObject(e, "stage", s);
    cJSON_AddNumberToObject(e, "first_layer", wt_get_le32(p + 1));
    cJSON_AddNumberToObject(e, "last_layer", wt_get_le32(p + 5));
    cJSON_AddStringToObject(e, "dir", dir);
    cJSON_AddStringToObject(e, "step_dir", step_dir);
    cJSON_AddItemToArray(stages, e);
  }
  char *text = cJSON_Print(root);
  cJSON_Delete(root);
  int rc = c->private_dir ? s_mkdirs(c->run.checkpoint_dir) : WT_OK;
  if (rc == WT_OK) rc = s_write_atomic(c->run.checkpoint_dir, "manifest.json", text);
  free(text);
  return rc;
}

int parallel_tasklet_checkpoint(parallel_tasklet *k) {
  const parallel_tasklet_config *c = &k->cfg;
  const int W = c->run.stages * c->run.replicas;
  int rc = s_save_stage(k);
  char why[1024] = "";
  if (rc != WT_OK) snprintf(why, sizeof why, "%s", wt_last_error());
  /* Every tasklet learns whether every stage saved, so all of them stop on a failure. */
  uint8_t mine[9] = {rc == WT_OK}, *all = NULL;
  wt_put_le32(mine + 1, (uint32_t)gpt_stage_first(trainer_model(k->t)));
  wt_put_le32(mine + 5, (uint32_t)gpt_stage_last(trainer_model(k->t)));
  size_t *offsets = wt_xmalloc(sizeof(size_t) * (size_t)(W + 1));
  int grc = parallel_allgatherv(k->world, mine, sizeof mine, (size_t)W * 9, &all, offsets);
  int failed = -1;
  for (int w = 0; grc == WT_OK && w < W; w++) {
    if (offsets[w + 1] - offsets[w] != 9)
      grc = wt_fail(WT_ECORRUPT, "checkpoint agreement: rank %d sent %zu bytes, expected 9", w,
                    offsets[w + 1] - offsets[w]);
    else if (!all[offsets[w]] && failed < 0)
      failed = w;
  }
  if (rc != WT_OK)
    rc = wt_fail(rc, "saving stage %d in %s failed: %s", c->stage, c->run.checkpoint_dir, why);
  else if (grc != WT_OK)
    rc = grc;
  else if (failed >= 0)
    rc = wt_fail(WT_EIO,
                 "stage %d (world rank %d) could not save its checkpoint; the manifest "
                 "still names the previous step",
                 failed / c->run.replicas, failed);
  else if (parallel_comm_rank(k->world) == 0 || c->private_dir)
    rc = s_write_manifest(k, all);
  free(all);
  free(offsets);
  return rc;
}

/* ---- resume ------------------------------------------------------------------------------- */

static int s_read_text(const char *path, char **text) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return wt_fail(WT_ENOTFOUND,
                   "no run manifest %s: %s; resume a directory a multi-stage run "
                   "wrote, or start without --resume",
                   path, strerror(errno));
  size_t cap = 1 << 16, n = 0;
  *text = wt_xmalloc(cap + 1);
  n = fread(*text, 1, cap, f);
  int big = !feof(f);
  fclose(f);
  (*text)[n] = 0;
  if (big) {
    free(*text), *text = NULL;
    return wt_fail(WT_ECORRUPT, "run manifest %s is larger than 64 KiB: not a manifest", path);
  }
  return WT_OK;
}

static int s_num(const cJSON *o, const char *key, long *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!cJSON_IsNumber(v)) return WT_ECORRUPT;
  *out = (long)v->valuedouble;
  return WT_OK;
}

/* A parsed manifest: the step, per stage its layers and step directory (absolute), and the run
 * binding and recorded changes as JSON text (NULL: none; a manifest of an older wantrain). */
typedef struct {
  long step;
  int stages;
  int *first, *last;
  char (*step_dir)[1400];
  char *binding, *changes;
} s_manifest;

static void s_manifest_free(s_manifest *m) {
  free(m->first), free(m->last), free(m->step_dir);
  free(m->binding), free(m->changes);
  memset(m, 0, sizeof *m);
}

/* Reads and checks DIR/manifest.json. Returns WT_OK, WT_ENOTFOUND or WT_ECORRUPT. */
static int s_manifest_read(const char *dir, s_manifest *out) {
  char path[1200], *text = NULL;
  memset(out, 0, sizeof *out);
  snprintf(path, sizeof path, "%s/manifest.json", dir);
  WT_CHECK(s_read_text(path, &text));
  cJSON *root = cJSON_Parse(text);
  free(text);
  if (!root)
    return wt_fail(WT_ECORRUPT, "run manifest %s is not JSON; restore it or start a new run", path);
  const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
  const cJSON *list = cJSON_GetObjectItemCaseSensitive(root, "stage");
  long stages = 0;
  int rc = WT_OK;
  if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, S_MANIFEST_FORMAT) ||
      s_num(root, "step", &out->step) || s_num(root, "stages", &stages) || stages < 1 ||
      stages > 4096 || cJSON_GetArraySize(list) != stages)
    rc = wt_fail(WT_ECORRUPT,
                 "run manifest %s is malformed (format, step or stages); restore "
                 "it from a backup or start a new run",
                 path);
  const cJSON *run = cJSON_GetObjectItemCaseSensitive(root, "run");
  const cJSON *changes = cJSON_GetObjectItemCaseSensitive(root, "changes");
  if (rc == WT_OK && ((run && !cJSON_IsObject(run)) || (changes && !cJSON_IsArray(changes))))
    rc = wt_fail(WT_ECORRUPT,
                 "run manifest %s is malformed (run or changes); restore it from a backup or "
                 "start a new run",
                 path);
  if (rc == WT_OK) {
    out->binding = run ? cJSON_PrintUnformatted(run) : NULL;
    out->changes = changes ? cJSON_PrintUnformatted(changes) : NULL;
    out->stages = (int)stages;
    out->first = wt_xcalloc((size_t)stages, sizeof(int));
    out->last = wt_xcalloc((size_t)stages, sizeof(int));
    out->step_dir = wt_xcalloc((size_t)stages, sizeof *out->step_dir);
  }
  for (int s = 0; rc == WT_OK && s < stages; s++) {
    const cJSON *e = cJSON_GetArrayItem(list, s);
    const cJSON *sd = cJSON_GetObjectItemCaseSensitive(e, "step_dir");
    long first, last;
    if (!cJSON_IsString(sd) || s_num(e, "first_layer", &first) || s_num(e, "last_layer", &last) ||
        strstr(sd->valuestring, "..") || sd->valuestring[0] == '/' || first < 0 || last <= first)
      rc = wt_fail(WT_ECORRUPT, "run manifest %s: the entry of stage %d is malformed", path, s);
    else {
      out->first[s] = (int)first, out->last[s] = (int)last;
      snprintf(out->step_dir[s], sizeof out->step_dir[s], "%s/%s", dir, sd->valuestring);
    }
  }
  cJSON_Delete(root);
  if (rc != WT_OK) s_manifest_free(out);
  return rc;
}

/* Checks the manifest against this run. */
static int s_manifest_check(parallel_tasklet *k, const s_manifest *m) {
  const parallel_tasklet_config *c = &k->cfg;
  gpt_stage *s = trainer_model(k->t);
  if (m->stages != c->run.stages)
    return wt_fail(WT_EMISMATCH,
                   "run manifest in %s was written by %d stages, this run has %d; "
                   "resume with --stages %d",
                   c->run.checkpoint_dir, m->stages, c->run.stages, m->stages);
  if (m->first[c->stage] != gpt_stage_first(s) || m->last[c->stage] != gpt_stage_last(s))
    return wt_fail(WT_EMISMATCH,
                   "run manifest in %s: stage %d held layers [%d, %d), this run "
                   "gives it [%d, %d); use the same layer split",
                   c->run.checkpoint_dir, c->stage, m->first[c->stage], m->last[c->stage],
                   gpt_stage_first(s), gpt_stage_last(s));
  return WT_OK;
}

/* Loads the stage; ZeRO-1 keeps only its shard of the optimizer state. */
static int s_load_stage(parallel_tasklet *k, const char *step_dir, checkpoint_meta *m) {
  if (!k->zero) return checkpoint_load(step_dir, trainer_model(k->t), trainer_optim(k->t), m);
  gpt_stage *s = trainer_model(k->t);
  int nt;
  const gpt_tensor_info *ti = gpt_stage_tensors(s, &nt);
  optim *shard = parallel_zero_optim(k->zero), *full = optim_new(optim_get_config(shard), ti, nt);
  int rc = full ? checkpoint_load(step_dir, s, full, m) : WT_EINVAL;
  size_t off, len;
  parallel_zero_shard(k->zero, &off, &len);
  for (int i = 0; rc == WT_OK && i < optim_num_states(full); i++)
    memcpy(optim_state(shard, i, NULL), optim_state(full, i, NULL) + off, sizeof(float) * len);
  if (rc == WT_OK) optim_set_step_count(shard, optim_step_count(full));
  optim_destroy(&full);
  return rc;
}

/* A stage's checkpoints lie inside its run directory: a stage (or step) directory that is a
 * symbolic link out of it would resume another run's stage. A missing one is left to
 * checkpoint_load to report. */
static int s_inside_run(const char *dir, const char *step_dir) {
  char run[PATH_MAX], real[PATH_MAX];
  if (!realpath(dir, run) || !realpath(step_dir, real)) return WT_OK;
  size_t n = strlen(run);
  if (!strncmp(real, run, n) && real[n] == '/') return WT_OK;
  return wt_fail(WT_EMISMATCH,
                 "%s is %s, outside the run directory %s (a symbolic link): a stage's "
                 "checkpoints must lie in its run; copy them in or start a new run directory",
                 step_dir, real, run);
}

/* Appends {"step": step, "change": notes} to the changes the manifest carries on. */
static void s_record_change(parallel_tasklet *k, const char *earlier, long step,
                            const char *notes) {
  cJSON *list = earlier ? cJSON_Parse(earlier) : NULL;
  if (!cJSON_IsArray(list)) cJSON_Delete(list), list = cJSON_CreateArray();
  cJSON *e = cJSON_CreateObject();
  cJSON_AddNumberToObject(e, "step", (double)step);
  cJSON_AddStringToObject(e, "change", notes);
  cJSON_AddItemToArray(list, e);
  char *text = cJSON_PrintUnformatted(list);
  if (text && strlen(text) < sizeof k->run_changes)
    snprintf(k->run_changes, sizeof k->run_changes, "%s", text);
  free(text);
  cJSON_Delete(list);
}

/* The stage checkpoint's binding must be its manifest's (the same run); the run's recorded
 * settings must allow this run's (parallel_run_binding_check). Takes over the recorded run id
 * and keeps the recorded changes, adding this resume's. A run directory of an older wantrain
 * (no binding anywhere) resumes unchecked and is bound from its next checkpoint on. */
static int s_bind_resume(parallel_tasklet *k, const s_manifest *man, const checkpoint_meta *m) {
  const parallel_tasklet_config *c = &k->cfg;
  const char *stage = m->train_json[0] ? m->train_json : NULL;
  const int rank0 = parallel_comm_rank(k->world) == 0;
  char what[1500];
  snprintf(what, sizeof what, "stage %d checkpoint %s", c->stage, man->step_dir[c->stage]);
  if (man->binding && !stage)
    return wt_fail(WT_EMISMATCH,
                   "%s records no run binding but its manifest does: the stage directory comes "
                   "from another run; restore this run's stage-%d or start a new run directory",
                   what, c->stage);
  if (man->binding) {
    cJSON *a = cJSON_Parse(stage), *b = cJSON_Parse(man->binding);
    const char *va = NULL, *vb = NULL, *ia = NULL, *ib = NULL;
    int id = s_bind_diff(a, b, 0, 1, &ia, &ib) == 0, i = s_bind_diff(a, b, 1, 1, &va, &vb);
    int rc = WT_OK;
    if (id || i >= 0)
      rc = wt_fail(WT_EMISMATCH,
                   "%s belongs to another run: run_id %s, the manifest's %s%s%s%s%s%s%s; "
                   "restore this run's stage-%d or start a new run directory",
                   what, ia ? ia : "?", ib ? ib : "?", i >= 0 ? "; " : "",
                   i >= 0 ? s_bind[i].field : "", i >= 0 ? " was " : "", i >= 0 ? va : "",
                   i >= 0 ? ", the manifest's " : "", i >= 0 ? vb : "", c->stage);
    cJSON_Delete(a);
    cJSON_Delete(b);
    WT_CHECK(rc);
  }
  if (!stage) {
    if (rank0)
      WT_WARN("run %s records no run binding (an older wantrain wrote it): its settings "
              "cannot be checked; the next checkpoint records them",
              c->run.checkpoint_dir);
    return WT_OK;
  }
  k->run_id = parallel_run_binding_id(stage);
  k->binding[0] = 0; /* made again with the recorded id */
  char notes[512];
  WT_CHECK(parallel_run_binding_check(what, stage, s_binding(k), notes, sizeof notes));
  if (man->changes && strlen(man->changes) < sizeof k->run_changes)
    snprintf(k->run_changes, sizeof k->run_changes, "%s", man->changes);
  if (!notes[0]) return WT_OK;
  s_record_change(k, man->changes, m->step, notes);
  if (rank0)
    WT_WARN("run %s resumed at step %ld with a change a run may make: %s (the manifest records "
            "it)",
            c->run.checkpoint_dir, m->step, notes);
  return WT_OK;
}

/* A manifest for resume_step in a private directory: this stage's step directory, bound to the
 * run its own stage checkpoint records (its binding is then checked against this run's). The
 * other stages' entries are never read by this tasklet. */
static int s_manifest_of_step(parallel_tasklet *k, s_manifest *out) {
  const parallel_tasklet_config *c = &k->cfg;
  gpt_stage *st = trainer_model(k->t);
  memset(out, 0, sizeof *out);
  out->step = c->resume_step;
  out->stages = c->run.stages;
  out->first = wt_xcalloc((size_t)out->stages, sizeof(int));
  out->last = wt_xcalloc((size_t)out->stages, sizeof(int));
  out->step_dir = wt_xcalloc((size_t)out->stages, sizeof *out->step_dir);
  out->first[c->stage] = gpt_stage_first(st), out->last[c->stage] = gpt_stage_last(st);
  snprintf(out->step_dir[c->stage], sizeof out->step_dir[c->stage], "%s/stage-%d/step-%08ld",
           c->run.checkpoint_dir, c->stage, c->resume_step);
  return WT_OK;
}

int parallel_tasklet_resume(parallel_tasklet *k) {
  s_manifest man;
  if (k->cfg.private_dir && k->cfg.resume_step > 0)
    WT_CHECK(s_manifest_of_step(k, &man));
  else
    WT_CHECK(s_manifest_read(k->cfg.run.checkpoint_dir, &man));
  int rc = s_manifest_check(k, &man);
  if (rc == WT_OK) rc = s_inside_run(k->cfg.run.checkpoint_dir, man.step_dir[k->cfg.stage]);
  checkpoint_meta m;
  if (rc == WT_OK) rc = s_load_stage(k, man.step_dir[k->cfg.stage], &m);
  if (rc == WT_OK && m.step != man.step)
    rc = wt_fail(WT_ECORRUPT, "%s holds step %ld but the manifest names step %ld",
                 man.step_dir[k->cfg.stage], m.step, man.step);
  if (rc == WT_OK) rc = s_bind_resume(k, &man, &m);
  if (rc == WT_OK) rc = s_state_load(k, m.step);
  if (rc == WT_OK) trainer_set_progress(k->t, m.step, &m.data_pos);
  s_manifest_free(&man);
  return rc;
}

/* ---- a whole model from a multi-stage run ---------------------------------------------------- */

int parallel_run_is_multistage(const char *path) {
  char probe[1200];
  snprintf(probe, sizeof probe, "%s/manifest.json", path);
  return access(probe, F_OK) == 0;
}

int parallel_run_read_config(const char *path, gpt_config *cfg, checkpoint_meta *meta) {
  if (!parallel_run_is_multistage(path)) return checkpoint_read_config(path, cfg, meta);
  s_manifest man;
  WT_CHECK(s_manifest_read(path, &man));
  int rc = checkpoint_read_config(man.step_dir[0], cfg, meta);
  s_manifest_free(&man);
  return rc;
}

/* Copies every tensor of `part` into the tensor of the same name in `whole`; counts them. */
/* Copies part's tensors into dst, the host view of whole's parameters. */
static int s_copy_tensors(gpt_stage *part, gpt_stage *whole, float *dst, unsigned char *filled) {
  size_t n;
  const float *src = gpt_stage_params_host(part, &n);
  for (int i = 0; i < gpt_stage_num_tensors(part); i++) {
    const gpt_tensor_info *t = gpt_stage_tensor(part, i);
    int found = 0;
    for (int k = 0; k < gpt_stage_num_tensors(whole) && !found; k++) {
      const gpt_tensor_info *w = gpt_stage_tensor(whole, k);
      if (strcmp(w->name, t->name) || w->numel != t->numel) continue;
      memcpy(dst + w->offset, src + t->offset, sizeof(float) * t->numel);
      filled[k] = found = 1;
    }
    if (!found)
      return wt_fail(WT_EMISMATCH, "stage tensor %s has no place in the whole model", t->name);
  }
  return WT_OK;
}

int parallel_run_load_model(const char *path, gpt_stage *model, checkpoint_meta *meta) {
  if (!parallel_run_is_multistage(path)) return checkpoint_load(path, model, NULL, meta);
  const gpt_config *cfg = gpt_stage_config(model);
  if (gpt_stage_first(model) != 0 || gpt_stage_last(model) != cfg->n_layer)
    return wt_fail(WT_EINVAL, "a multi-stage run loads into a whole model only");
  s_manifest man;
  WT_CHECK(s_manifest_read(path, &man));
  unsigned char *filled = wt_xcalloc((size_t)gpt_stage_num_tensors(model), 1);
  size_t np;
  float *host = gpt_stage_params_host(model, &np); /* on a device: one copy, uploaded at the end */
  float *keep = wt_xmalloc(sizeof(float) * np);
  memcpy(keep, host, sizeof(float) * np); /* restored on failure */
  int rc = WT_OK;
  for (int s = 0; rc == WT_OK && s < man.stages; s++) {
    checkpoint_meta m;
    gpt_stage *part = gpt_stage_new(cfg, man.first[s], man.last[s], 1, cfg->max_seq);
    rc = part ? checkpoint_load(man.step_dir[s], part, NULL, &m) : WT_EINVAL;
    if (rc == WT_OK && m.step != man.step)
      rc = wt_fail(WT_ECORRUPT, "%s holds step %ld but the manifest names step %ld",
                   man.step_dir[s], m.step, man.step);
    if (rc == WT_OK) rc = s_copy_tensors(part, model, host, filled);
    if (rc == WT_OK && s == 0 && meta) *meta = m;
    gpt_stage_destroy(&part);
  }
  for (int k = 0; rc == WT_OK && k < gpt_stage_num_tensors(model); k++)
    if (!filled[k])
      rc = wt_fail(WT_ECORRUPT,
                   "run %s: no stage holds %s; the manifest's layer ranges do not "
                   "cover the model",
                   path, gpt_stage_tensor(model, k)->name);
  if (rc != WT_OK) memcpy(host, keep, sizeof(float) * np);
  gpt_stage_params_upload(model);
  free(keep);
  free(filled);
  s_manifest_free(&man);
  return rc;
}
