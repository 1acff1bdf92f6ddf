/* checkpoint — atomic, digest-verified save and load of model, optimizer and run position.
 * Layout and guarantees are in checkpoint.h. */
#include "model/checkpoint.h"

#include "common/common.h"
#include "model/safetensors.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CKPT_FORMAT "wantrain-checkpoint-1"
static const char *const s_files[] = {"model.safetensors", "optimizer.safetensors", "state.json"};
static const char *const s_tokenizers[] = {"synthetic", "bytes", "gpt2"};

/* ---- small file-system helpers ------------------------------------------------------------- */

/* snprintf for paths. Directory arguments are checked to be under CKPT_PATH_MAX on entry, so
 * with buffers of 2 * CKPT_PATH_MAX nothing is ever cut. */
#define CKPT_PATH_MAX 2048
__attribute__((format(printf, 3, 4))) static void s_path(char *buf, size_t size, const char *fmt,
                                                         ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, size, fmt, ap);
  va_end(ap);
}

static int s_check_len(const char *path) {
  if (strlen(path) >= CKPT_PATH_MAX)
    return wt_fail(WT_EINVAL, "checkpoint path is longer than %d characters: %.60s...",
                   CKPT_PATH_MAX - 1, path);
  return WT_OK;
}

static int s_mkdirs(const char *dir) {
  char tmp[2048];
  snprintf(tmp, sizeof tmp, "%s", dir);
  for (char *p = tmp + 1; *p; p++) {
    if (*p != '/') continue;
    *p = 0;
    mkdir(tmp, 0755);
    *p = '/';
  }
  if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
    return wt_fail(WT_EIO, "cannot create checkpoint directory %s: %s", dir, strerror(errno));
  return WT_OK;
}

/* fsync a file or directory by path: a rename is durable only once its directory is synced. */
static int s_fsync_path(const char *path) {
  int fd = open(path, O_RDONLY);
  if (fd < 0 || fsync(fd) != 0) {
    int e = errno;
    if (fd >= 0) close(fd);
    return wt_fail(WT_EIO, "cannot fsync %s: %s", path, strerror(e));
  }
  close(fd);
  return WT_OK;
}

/* Flushes, fsyncs and closes f, reporting the first error. */
static int s_close_synced(FILE *f, const char *path, int rc) {
  if (rc == WT_OK && (fflush(f) != 0 || fsync(fileno(f)) != 0))
    rc = wt_fail(WT_EIO, "cannot write %s: %s", path, strerror(errno));
  if (fclose(f) != 0 && rc == WT_OK)
    rc = wt_fail(WT_EIO, "cannot write %s: %s", path, strerror(errno));
  return rc;
}

/* Removes a flat directory (only our own files live in step directories). */
static void s_remove_tree(const char *dir) {
  DIR *d = opendir(dir);
  char path[4200];
  for (struct dirent *e; d && (e = readdir(d));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    s_path(path, sizeof path, "%s/%s", dir, e->d_name);
    unlink(path);
  }
  if (d) closedir(d);
  rmdir(dir);
}

/* ---- writing ------------------------------------------------------------------------------- */

static int s_write_model(const char *path, gpt_stage *model, const checkpoint_meta *meta) {
  const gpt_config *c = gpt_stage_config(model);
  int n = gpt_stage_num_tensors(model);
  size_t np;
  const float *params = gpt_stage_params(model, &np);
  safetensors_tensor *t = wt_xcalloc((size_t)n, sizeof *t);
  for (int i = 0; i < n; i++) {
    const gpt_tensor_info *ti = gpt_stage_tensor(model, i);
    t[i] =
        (safetensors_tensor){ti->name, ti->ndim, {ti->shape[0], ti->shape[1]}, params + ti->offset};
  }
  char v[5][16];
  snprintf(v[0], 16, "%d", c->vocab_size);
  snprintf(v[1], 16, "%d", c->max_seq);
  snprintf(v[2], 16, "%d", c->n_layer);
  snprintf(v[3], 16, "%d", c->n_head);
  snprintf(v[4], 16, "%d", c->channels);
  const char *kv[] = {"format",     "pt",
                      "vocab_size", v[0],
                      "max_seq",    v[1],
                      "n_layer",    v[2],
                      "n_head",     v[3],
                      "channels",   v[4],
                      "tokenizer",  s_tokenizers[meta->tokenizer]};
  FILE *f = fopen(path, "wb");
  if (!f) {
    free(t);
    return wt_fail(WT_EIO, "cannot create %s: %s", path, strerror(errno));
  }
  int rc = safetensors_write(f, path, t, n, kv, (int)WT_ARRAY_LEN(kv) / 2);
  free(t);
  return s_close_synced(f, path, rc);
}

static int s_write_optim(const char *path, optim *opt) {
  safetensors_tensor t[4];
  int n = opt ? optim_num_states(opt) : 0;
  static const char *const names[] = {"state0", "state1", "state2", "state3"};
  for (int i = 0; i < n && i < 4; i++) {
    size_t len;
    const float *buf = optim_state(opt, i, &len);
    t[i] = (safetensors_tensor){names[i], 1, {(int64_t)len, 1}, buf};
  }
  char kind[16] = "none", step[32] = "0";
  if (opt) {
    snprintf(kind, sizeof kind, "%s", optim_get_config(opt)->kind == OPTIM_SGD ? "sgd" : "adamw");
    snprintf(step, sizeof step, "%ld", optim_step_count(opt));
  }
  const char *kv[] = {"kind", kind, "step_count", step};
  FILE *f = fopen(path, "wb");
  if (!f) return wt_fail(WT_EIO, "cannot create %s: %s", path, strerror(errno));
  return s_close_synced(f, path, safetensors_write(f, path, t, WT_MIN(n, 4), kv, 2));
}

static int s_write_state(const char *path, const checkpoint_meta *meta) {
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "format", CKPT_FORMAT);
  cJSON_AddNumberToObject(root, "step", (double)meta->step);
  cJSON_AddNumberToObject(root, "data_batches", (double)meta->data_pos.batches);
  cJSON *rng = cJSON_AddArrayToObject(root, "data_rng"); /* hex: u64 does not fit a double */
  for (int i = 0; i < 4; i++) {
    char hex[17];
    snprintf(hex, sizeof hex, "%016" PRIx64, meta->data_pos.rng.s[i]);
    cJSON_AddItemToArray(rng, cJSON_CreateString(hex));
  }
  cJSON_AddStringToObject(root, "tokenizer", s_tokenizers[meta->tokenizer]);
  cJSON *train = meta->train_json[0] ? cJSON_Parse(meta->train_json) : NULL;
  if (train) cJSON_AddItemToObject(root, "train", train);
  char *text = cJSON_Print(root);
  cJSON_Delete(root);
  FILE *f = fopen(path, "wb");
  int rc = WT_OK;
  if (!f)
    rc = wt_fail(WT_EIO, "cannot create %s: %s", path, strerror(errno));
  else if (fputs(text, f) == EOF || fputc('\n', f) == EOF)
    rc = wt_fail(WT_EIO, "cannot write %s: %s", path, strerror(errno));
  free(text);
  return f ? s_close_synced(f, path, rc) : rc;
}

static int s_write_sums(const char *dir) {
  char path[4200], hex[65];
  s_path(path, sizeof path, "%s/SHA256SUMS", dir);
  FILE *f = fopen(path, "wb");
  if (!f) return wt_fail(WT_EIO, "cannot create %s: %s", path, strerror(errno));
  int rc = WT_OK;
  for (size_t i = 0; i < WT_ARRAY_LEN(s_files) && rc == WT_OK; i++) {
    char file[4200];
    s_path(file, sizeof file, "%s/%s", dir, s_files[i]);
    rc = data_file_sha256(file, hex);
    if (rc == WT_OK && fprintf(f, "%s  %s\n", hex, s_files[i]) < 0)
      rc = wt_fail(WT_EIO, "cannot write %s: %s", path, strerror(errno));
  }
  return s_close_synced(f, path, rc);
}

static int s_write_all(const char *tmp, gpt_stage *model, optim *opt, const checkpoint_meta *m) {
  char path[4200];
  s_path(path, sizeof path, "%s/%s", tmp, s_files[0]);
  WT_CHECK(s_write_model(path, model, m));
  s_path(path, sizeof path, "%s/%s", tmp, s_files[1]);
  WT_CHECK(s_write_optim(path, opt));
  s_path(path, sizeof path, "%s/%s", tmp, s_files[2]);
  WT_CHECK(s_write_state(path, m));
  WT_CHECK(s_write_sums(tmp));
  return s_fsync_path(tmp);
}

/* Renames the finished temp directory to its final name (moving an older copy of the same step
 * aside first, since rename cannot replace a non-empty directory). */
static int s_install(const char *tmp, const char *final, const char *dir) {
  char old[4200] = "";
  struct stat st;
  if (stat(final, &st) == 0) {
    s_path(old, sizeof old, "%s.old", final);
    s_remove_tree(old);
    if (rename(final, old) != 0)
      return wt_fail(WT_EIO, "cannot move %s aside: %s", final, strerror(errno));
  }
  if (rename(tmp, final) != 0)
    return wt_fail(WT_EIO, "cannot rename %s to %s: %s", tmp, final, strerror(errno));
  WT_CHECK(s_fsync_path(dir));
  if (*old) s_remove_tree(old);
  return WT_OK;
}

static int s_set_latest(const char *dir, const char *name) {
  char tmp[4200], path[4200];
  s_path(tmp, sizeof tmp, "%s/.latest.tmp", dir);
  s_path(path, sizeof path, "%s/latest", dir);
  FILE *f = fopen(tmp, "wb");
  if (!f) return wt_fail(WT_EIO, "cannot create %s: %s", tmp, strerror(errno));
  int rc = fprintf(f, "%s\n", name) < 0 ? wt_fail(WT_EIO, "cannot write %s", tmp) : WT_OK;
  WT_CHECK(s_close_synced(f, tmp, rc));
  if (rename(tmp, path) != 0)
    return wt_fail(WT_EIO, "cannot rename %s to %s: %s", tmp, path, strerror(errno));
  return s_fsync_path(dir);
}

static int s_cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Removes all but the newest `keep` step directories (never `current`, the one just saved) and
 * leftovers of interrupted saves. */
static void s_prune(const char *dir, int keep, const char *current) {
  DIR *d = opendir(dir);
  char *names[4096], path[4200];
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));) {
    if (!strncmp(e->d_name, ".tmp-step-", 10)) {
      s_path(path, sizeof path, "%s/%s", dir, e->d_name);
      s_remove_tree(path);
    } else if (!strncmp(e->d_name, "step-", 5) && !strchr(e->d_name, '.') && n < 4096) {
      names[n++] = strdup(e->d_name);
    }
  }
  if (d) closedir(d);
  qsort(names, (size_t)n, sizeof *names, s_cmp_str); /* zero-padded: lexical = numeric */
  for (int i = 0; i < n; i++) {
    if (i < n - keep && strcmp(names[i], current) != 0) {
      s_path(path, sizeof path, "%s/%s", dir, names[i]);
      s_remove_tree(path);
    }
    free(names[i]);
  }
}

int checkpoint_save(const char *dir, gpt_stage *model, optim *opt, const checkpoint_meta *meta,
                    int keep) {
  WT_CHECK(s_check_len(dir));
  WT_CHECK(s_mkdirs(dir));
  char name[64], final[4200], tmp[4200];
  snprintf(name, sizeof name, "step-%08ld", meta->step);
  s_path(final, sizeof final, "%s/%s", dir, name);
  s_path(tmp, sizeof tmp, "%s/.tmp-%s-XXXXXX", dir, name);
  if (!mkdtemp(tmp))
    return wt_fail(WT_EIO, "cannot create a directory in %s: %s", dir, strerror(errno));
  int rc = s_write_all(tmp, model, opt, meta);
  if (rc == WT_OK) rc = s_install(tmp, final, dir);
  if (rc == WT_OK) rc = s_set_latest(dir, name);
  if (rc != WT_OK) {
    char msg[1200];
    snprintf(msg, sizeof msg, "%s", wt_last_error());
    s_remove_tree(tmp);
    return wt_fail(rc,
                   "checkpoint save of step %ld failed (%s); the previous checkpoint in %s "
                   "is unchanged",
                   meta->step, msg, dir);
  }
  s_prune(dir, keep < 1 ? 1 : keep, name);
  return WT_OK;
}

/* ---- loading ------------------------------------------------------------------------------- */

int checkpoint_resolve(const char *path, char *out, size_t size) {
  char probe[4200];
  WT_CHECK(s_check_len(path));
  s_path(probe, sizeof probe, "%s/SHA256SUMS", path);
  if (access(probe, F_OK) == 0) {
    s_path(out, size, "%s", path);
    return WT_OK;
  }
  s_path(probe, sizeof probe, "%s/latest", path);
  FILE *f = fopen(probe, "rb");
  char name[256] = "";
  if (f) {
    if (!fgets(name, sizeof name, f)) name[0] = 0;
    fclose(f);
  }
  name[strcspn(name, "\r\n")] = 0;
  if (!*name || strchr(name, '/'))
    return wt_fail(WT_ENOTFOUND,
                   "no checkpoint in %s (neither a step directory with SHA256SUMS "
                   "nor a run directory with a 'latest' file); check the path, or train without "
                   "--resume to start one",
                   path);
  s_path(out, size, "%s/%s", path, name);
  return WT_OK;
}

/* Checks every file listed as required against SHA256SUMS. */
static int s_verify(const char *stepdir) {
  char path[4200], line[512], want[3][65] = {"", "", ""};
  s_path(path, sizeof path, "%s/SHA256SUMS", stepdir);
  FILE *f = fopen(path, "rb");
  if (!f)
    return wt_fail(WT_ENOTFOUND,
                   "checkpoint %s has no SHA256SUMS: it is incomplete; delete it "
                   "and use an earlier step directory",
                   stepdir);
  while (fgets(line, sizeof line, f)) {
    char hex[128], file[256];
    if (sscanf(line, "%127s %255s", hex, file) != 2 || strlen(hex) != 64) continue;
    for (size_t i = 0; i < WT_ARRAY_LEN(s_files); i++)
      if (!strcmp(file, s_files[i])) memcpy(want[i], hex, 65);
  }
  fclose(f);
  for (size_t i = 0; i < WT_ARRAY_LEN(s_files); i++) {
    char got[65] = "";
    s_path(path, sizeof path, "%s/%s", stepdir, s_files[i]);
    int rc = data_file_sha256(path, got);
    if (!*want[i] || rc != WT_OK || strcmp(got, want[i]) != 0)
      return wt_fail(WT_ECORRUPT,
                     "checkpoint %s: %s %s its SHA-256 in SHA256SUMS; the checkpoint "
                     "is corrupt or truncated — delete %s and resume from an earlier step "
                     "directory, or train without --resume",
                     stepdir, s_files[i],
                     rc != WT_OK ? "is missing or unreadable, so cannot match"
                     : !*want[i] ? "is not listed with"
                                 : "does not match",
                     stepdir);
  }
  return WT_OK;
}

static int s_parse_u64_hex(const cJSON *item, uint64_t *out) {
  char *end = NULL;
  if (!cJSON_IsString(item)) return WT_ECORRUPT;
  *out = strtoull(item->valuestring, &end, 16);
  return *end || !*item->valuestring ? WT_ECORRUPT : WT_OK;
}

static int s_parse_state(const cJSON *root, checkpoint_meta *meta) {
  const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
  const cJSON *step = cJSON_GetObjectItemCaseSensitive(root, "step");
  const cJSON *batches = cJSON_GetObjectItemCaseSensitive(root, "data_batches");
  const cJSON *rng = cJSON_GetObjectItemCaseSensitive(root, "data_rng");
  const cJSON *tok = cJSON_GetObjectItemCaseSensitive(root, "tokenizer");
  if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, CKPT_FORMAT) || !cJSON_IsNumber(step) ||
      !cJSON_IsNumber(batches) || cJSON_GetArraySize(rng) != 4 || !cJSON_IsString(tok))
    return WT_ECORRUPT;
  meta->step = (long)step->valuedouble;
  meta->data_pos.batches = (uint64_t)batches->valuedouble;
  for (int i = 0; i < 4; i++)
    if (s_parse_u64_hex(cJSON_GetArrayItem(rng, i), &meta->data_pos.rng.s[i]) != WT_OK)
      return WT_ECORRUPT;
  int found = 0;
  for (int i = 0; i < 3; i++)
    if (!strcmp(tok->valuestring, s_tokenizers[i])) meta->tokenizer = (data_tokenizer)i, found = 1;
  const cJSON *train = cJSON_GetObjectItemCaseSensitive(root, "train");
  char *text = train ? cJSON_PrintUnformatted(train) : NULL;
  snprintf(meta->train_json, sizeof meta->train_json, "%s", text ? text : "");
  free(text);
  return found ? WT_OK : WT_ECORRUPT;
}

static int s_read_state(const char *stepdir, checkpoint_meta *meta) {
  char path[4200];
  s_path(path, sizeof path, "%s/state.json", stepdir);
  FILE *f = fopen(path, "rb");
  if (!f) return wt_fail(WT_EIO, "cannot read %s: %s", path, strerror(errno));
  char *text = wt_xcalloc(1, 1 << 16);
  size_t len = fread(text, 1, (1 << 16) - 1, f);
  fclose(f);
  cJSON *root = cJSON_ParseWithLength(text, len);
  free(text);
  int rc = root ? s_parse_state(root, meta) : WT_ECORRUPT;
  cJSON_Delete(root);
  if (rc != WT_OK)
    return wt_fail(WT_ECORRUPT,
                   "%s is not a %s state file; the checkpoint is damaged or from "
                   "another program — use another step directory",
                   path, CKPT_FORMAT);
  return WT_OK;
}

static int s_meta_int(const safetensors *st, const char *key, int *out) {
  const char *v = safetensors_metadata(st, key);
  char *end = NULL;
  long x = v ? strtol(v, &end, 10) : 0;
  if (!v || *end || x <= 0 || x > (1L << 30))
    return wt_fail(WT_ECORRUPT,
                   "model.safetensors: metadata \"%s\" is missing or not a positive "
                   "integer; the checkpoint was not written by wantrain",
                   key);
  *out = (int)x;
  return WT_OK;
}

static int s_model_config(const safetensors *st, gpt_config *cfg) {
  WT_CHECK(s_meta_int(st, "vocab_size", &cfg->vocab_size));
  WT_CHECK(s_meta_int(st, "max_seq", &cfg->max_seq));
  WT_CHECK(s_meta_int(st, "n_layer", &cfg->n_layer));
  WT_CHECK(s_meta_int(st, "n_head", &cfg->n_head));
  return s_meta_int(st, "channels", &cfg->channels);
}

/* Verifies and opens a checkpoint's model file. */
static int s_open(const char *path, char *stepdir, size_t size, safetensors **st,
                  checkpoint_meta *meta, gpt_config *cfg) {
  WT_CHECK(checkpoint_resolve(path, stepdir, size));
  WT_CHECK(s_verify(stepdir));
  WT_CHECK(s_read_state(stepdir, meta));
  char file[4200];
  s_path(file, sizeof file, "%s/%s", stepdir, s_files[0]);
  *st = safetensors_load(file);
  if (!*st) return WT_ECORRUPT;
  int rc = s_model_config(*st, cfg);
  if (rc != WT_OK) safetensors_destroy(st);
  return rc;
}

int checkpoint_read_config(const char *path, gpt_config *cfg, checkpoint_meta *meta) {
  char stepdir[4200];
  safetensors *st = NULL;
  WT_CHECK(s_open(path, stepdir, sizeof stepdir, &st, meta, cfg));
  safetensors_destroy(&st);
  return WT_OK;
}

static int s_same_config(const char *stepdir, const gpt_config *a, const gpt_config *b) {
  if (a->vocab_size == b->vocab_size && a->max_seq == b->max_seq && a->n_layer == b->n_layer &&
      a->n_head == b->n_head && a->channels == b->channels)
    return WT_OK;
  return wt_fail(WT_EMISMATCH,
                 "checkpoint %s was written for a model with vocab %d, seq %d, "
                 "layers %d, heads %d, channels %d, but this run builds vocab %d, seq %d, layers "
                 "%d, heads %d, channels %d; pass the checkpoint's --layers/--channels/--heads/"
                 "--seq and data, or use another --checkpoint-dir",
                 stepdir, a->vocab_size, a->max_seq, a->n_layer, a->n_head, a->channels,
                 b->vocab_size, b->max_seq, b->n_layer, b->n_head, b->channels);
}

/* Weights: with copy == 0 only checks every tensor's name and shape, so that a caller can
 * validate everything before changing the model. */
static int s_load_weights(const safetensors *st, gpt_stage *model, int copy) {
  size_t np;
  float *params = gpt_stage_params(model, &np);
  for (int i = 0; i < gpt_stage_num_tensors(model); i++) {
    const gpt_tensor_info *ti = gpt_stage_tensor(model, i);
    int64_t shape[2] = {ti->shape[0], ti->shape[1]};
    WT_CHECK(safetensors_read(st, ti->name, ti->ndim, shape, copy ? params + ti->offset : NULL));
  }
  return WT_OK;
}

static int s_load_optim(const char *stepdir, optim *opt) {
  char file[4200];
  s_path(file, sizeof file, "%s/%s", stepdir, s_files[1]);
  safetensors *st = safetensors_load(file);
  if (!st) return WT_ECORRUPT;
  const char *kind = safetensors_metadata(st, "kind"),
             *step = safetensors_metadata(st, "step_count");
  const char *want = optim_get_config(opt)->kind == OPTIM_SGD ? "sgd" : "adamw";
  int rc = WT_OK, n = optim_num_states(opt);
  static const char *const names[] = {"state0", "state1", "state2", "state3"};
  if (!kind || !step || strcmp(kind, want) != 0)
    rc = wt_fail(WT_EMISMATCH,
                 "checkpoint %s holds %s optimizer state but this run uses %s; "
                 "pass --optimizer %s or use another --checkpoint-dir",
                 stepdir, kind ? kind : "no", want, kind && strcmp(kind, "none") ? kind : want);
  for (int pass = 0; pass < 2 && rc == WT_OK; pass++) {
    for (int i = 0; i < n && i < 4 && rc == WT_OK; i++) {
      size_t len;
      float *buf = optim_state(opt, i, &len);
      int64_t shape[2] = {(int64_t)len, 1};
      rc = safetensors_read(st, names[i], 1, shape, pass ? buf : NULL);
    }
  }
  if (rc == WT_OK) optim_set_step_count(opt, strtol(step, NULL, 10));
  safetensors_destroy(&st);
  return rc;
}

int checkpoint_load(const char *path, gpt_stage *model, optim *opt, checkpoint_meta *meta) {
  char stepdir[4200];
  safetensors *st = NULL;
  checkpoint_meta m;
  gpt_config cfg;
  WT_CHECK(s_open(path, stepdir, sizeof stepdir, &st, &m, &cfg));
  int rc = s_same_config(stepdir, &cfg, gpt_stage_config(model));
  if (rc == WT_OK) rc = s_load_weights(st, model, 0);
  /* The optimizer checks all of its own file before writing its buffers; once it has, the
     weights (already checked) cannot fail to copy. */
  if (rc == WT_OK && opt) rc = s_load_optim(stepdir, opt);
  if (rc == WT_OK) rc = s_load_weights(st, model, 1);
  if (rc == WT_OK) *meta = m;
  safetensors_destroy(&st);
  return rc;
}
