/* checkpoint — atomic, digest-verified save and load of model, optimizer and run position.
 * Layout and guarantees are in checkpoint.h. */
#define _GNU_SOURCE /* renameat2 and RENAME_EXCHANGE */
#include "model/checkpoint.h"

#include "common/common.h"
#include "model/checkpoint_internal.h"
#include "model/safetensors.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *const s_files[] = {"model.safetensors", "optimizer.safetensors", "state.json"};

static int (*s_fault_hook)(const char *point);

void checkpoint_set_fault_hook(int (*hook)(const char *point)) {
  s_fault_hook = hook;
}

/* Lets a test stop a save between two of its file-system steps. */
static int s_fault(const char *point) {
  if (!s_fault_hook || !s_fault_hook(point)) return 0;
  wt_fail(WT_EIO, "checkpoint save stopped by the fault hook at \"%s\"", point);
  return 1;
}

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

/* The MoE config as metadata strings: E, k, capacity, aux weight (floats to 9 digits, which
 * read back exactly) and the MoE blocks as a comma list. */
static void s_moe_meta(const gpt_config *c, char mv[4][32], char *layers, size_t size) {
  snprintf(mv[0], 32, "%d", c->moe_experts);
  snprintf(mv[1], 32, "%d", c->moe_top_k);
  snprintf(mv[2], 32, "%.9g", c->moe_capacity);
  snprintf(mv[3], 32, "%.9g", c->moe_aux_weight);
  size_t len = 0;
  layers[0] = 0;
  for (int l = 0; l < GPT_MOE_MAX_LAYERS && len < size; l++)
    if (c->moe_layer[l])
      len += (size_t)snprintf(layers + len, size - len, "%s%d", len ? "," : "", l);
}

static int s_write_model(const char *path, gpt_stage *model, const checkpoint_meta *meta) {
  const gpt_config *c = gpt_stage_config(model);
  int n = gpt_stage_num_tensors(model);
  size_t np;
  const float *params = gpt_stage_params_host(model, &np); /* gathered from a GPU */
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
  char mv[4][32], layers[GPT_MOE_MAX_LAYERS * 4 + 1];
  const char *kv[] = {"format",         "pt",
                      "vocab_size",     v[0],
                      "max_seq",        v[1],
                      "n_layer",        v[2],
                      "n_head",         v[3],
                      "channels",       v[4],
                      "tokenizer",      checkpoint_tokenizer_name(meta->tokenizer),
                      "moe_experts",    mv[0], /* the MoE keys only for an MoE model */
                      "moe_top_k",      mv[1],
                      "moe_capacity",   mv[2],
                      "moe_aux_weight", mv[3],
                      "moe_layers",     layers};
  int n_kv = (int)WT_ARRAY_LEN(kv) / 2 - (c->moe_experts > 0 ? 0 : 5);
  s_moe_meta(c, mv, layers, sizeof layers);
  FILE *f = fopen(path, "wb");
  if (!f) {
    free(t);
    return wt_fail(WT_EIO, "cannot create %s: %s", path, strerror(errno));
  }
  int rc = safetensors_write(f, path, t, n, kv, n_kv);
  free(t);
  return s_close_synced(f, path, rc);
}

static int s_write_optim(const char *path, optim *opt) {
  safetensors_tensor t[4];
  int n = opt ? optim_num_states(opt) : 0;
  static const char *const names[] = {"state0", "state1", "state2", "state3"};
  for (int i = 0; i < n && i < 4; i++) {
    size_t len;
    const float *buf = optim_state_host(opt, i, &len);
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
  char *text = checkpoint_state_print(meta);
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

/* Replaces an existing step directory `final` (which `latest` may name) by the finished `tmp`
 * so that `latest` always names a complete checkpoint. RENAME_EXCHANGE swaps the two in one
 * step; where the file system lacks it, `latest` first names `tmp` while the old copy moves
 * aside, and during the one rename in which it then dangles, loading falls back to the newest
 * complete step directory — which is the new `final`. */
static int s_replace(const char *tmp, const char *final, const char *dir) {
  int unsupported = s_fault("exchange");
  if (!unsupported && renameat2(AT_FDCWD, tmp, AT_FDCWD, final, RENAME_EXCHANGE) == 0) {
    if (s_fault("exchanged")) return WT_EIO;
    WT_CHECK(s_fsync_path(dir));
    s_remove_tree(tmp); /* now the old copy */
    return WT_OK;
  }
  if (!unsupported && errno != EINVAL && errno != ENOSYS && errno != ENOTSUP)
    return wt_fail(WT_EIO, "cannot exchange %s and %s: %s", tmp, final, strerror(errno));
  char old[4200];
  s_path(old, sizeof old, "%s.old", tmp); /* a `.tmp-step-` leftover if interrupted */
  WT_CHECK(s_set_latest(dir, strrchr(tmp, '/') + 1));
  if (s_fault("latest-tmp")) return WT_EIO;
  const char *final_name = strrchr(final, '/') + 1;
  /* On a failure, `latest` goes back to the old copy before the caller removes tmp. */
  if (rename(final, old) != 0) {
    int e = errno;
    s_set_latest(dir, final_name);
    return wt_fail(WT_EIO, "cannot move %s aside: %s", final, strerror(e));
  }
  if (s_fault("moved-aside")) return WT_EIO;
  if (rename(tmp, final) != 0) {
    int e = errno;
    if (rename(old, final) == 0) s_set_latest(dir, final_name);
    return wt_fail(WT_EIO, "cannot rename %s to %s: %s", tmp, final, strerror(e));
  }
  if (s_fault("moved-in")) return WT_EIO;
  WT_CHECK(s_fsync_path(dir));
  s_remove_tree(old);
  return WT_OK;
}

/* Renames the finished temp directory to its final name. */
static int s_install(const char *tmp, const char *final, const char *dir) {
  struct stat st;
  if (stat(final, &st) == 0) return s_replace(tmp, final, dir);
  if (rename(tmp, final) != 0)
    return wt_fail(WT_EIO, "cannot rename %s to %s: %s", tmp, final, strerror(errno));
  return s_fsync_path(dir);
}

static int s_cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* A step directory's name: "step-" and digits only (not a leftover of a save). */
static int s_is_step_name(const char *name) {
  if (strncmp(name, "step-", 5) != 0 || !name[5]) return 0;
  for (const char *p = name + 5; *p; p++)
    if (*p < '0' || *p > '9') return 0;
  return 1;
}

/* The step directory names in dir, sorted oldest first (zero-padded: lexical = numeric); the
 * caller frees each and the array. */
static int s_list_steps(const char *dir, char ***names_out) {
  DIR *d = opendir(dir);
  int n = 0, cap = 16;
  char **names = wt_xmalloc((size_t)cap * sizeof *names);
  for (struct dirent *e; d && (e = readdir(d));) {
    if (!s_is_step_name(e->d_name)) continue;
    if (n == cap) {
      char **more = wt_xmalloc((size_t)(cap *= 2) * sizeof *more);
      memcpy(more, names, (size_t)n * sizeof *names);
      free(names);
      names = more;
    }
    names[n++] = wt_xstrdup(e->d_name);
  }
  if (d) closedir(d);
  qsort(names, (size_t)n, sizeof *names, s_cmp_str);
  *names_out = names;
  return n;
}

static void s_free_names(char **names, int n) {
  for (int i = 0; i < n; i++) free(names[i]);
  free(names);
}

/* Removes all but the newest `keep` step directories (never `current`, the one just saved) and
 * leftovers of interrupted saves. */
static void s_prune(const char *dir, int keep, const char *current) {
  DIR *d = opendir(dir);
  char path[4200];
  for (struct dirent *e; d && (e = readdir(d));) {
    if (!strncmp(e->d_name, ".tmp-step-", 10)) {
      s_path(path, sizeof path, "%s/%s", dir, e->d_name);
      s_remove_tree(path);
    }
  }
  if (d) closedir(d);
  char **names;
  int n = s_list_steps(dir, &names);
  for (int i = 0; i < n - keep; i++) {
    if (strcmp(names[i], current) == 0) continue;
    s_path(path, sizeof path, "%s/%s", dir, names[i]);
    s_remove_tree(path);
  }
  s_free_names(names, n);
}

int checkpoint_save(const char *dir, gpt_stage *model, optim *opt, const checkpoint_meta *meta,
                    int keep) {
  if (meta->step < 0 || meta->step > CHECKPOINT_MAX_STEP)
    return wt_fail(WT_EINVAL, "checkpoint step %ld is outside [0, %.0f]", meta->step,
                   (double)CHECKPOINT_MAX_STEP);
  WT_CHECK(s_check_len(dir));
  WT_CHECK(s_mkdirs(dir));
  char name[64], final[4200], tmp[4200], latest[4200];
  snprintf(name, sizeof name, "step-%08ld", meta->step);
  s_path(final, sizeof final, "%s/%s", dir, name);
  s_path(latest, sizeof latest, "%s/latest", dir);
  int had_checkpoint = access(latest, F_OK) == 0;
  s_path(tmp, sizeof tmp, "%s/.tmp-%s-XXXXXX", dir, name);
  if (!mkdtemp(tmp))
    return wt_fail(WT_EIO, "cannot create a directory in %s: %s", dir, strerror(errno));
  int rc = s_write_all(tmp, model, opt, meta);
  if (rc == WT_OK) rc = s_install(tmp, final, dir);
  if (rc == WT_OK && s_fault("installed")) return WT_EIO;
  if (rc == WT_OK) rc = s_set_latest(dir, name);
  if (rc != WT_OK) {
    char msg[1200];
    snprintf(msg, sizeof msg, "%s", wt_last_error());
    s_remove_tree(tmp);
    return wt_fail(rc, "checkpoint save of step %ld failed (%s); %s %s", meta->step, msg,
                   had_checkpoint ? "the previous checkpoint is unchanged in"
                                  : "no checkpoint was written to",
                   dir);
  }
  s_prune(dir, keep < 1 ? 1 : keep, name);
  return WT_OK;
}

/* ---- loading ------------------------------------------------------------------------------- */

static int s_is_step_dir(const char *path) {
  char probe[4200];
  s_path(probe, sizeof probe, "%s/SHA256SUMS", path);
  return access(probe, F_OK) == 0;
}

/* Checks every file listed as required against SHA256SUMS. */
static int s_verify(const char *stepdir) {
  char path[4200], line[512], want[3][65] = {"", "", ""};
  s_path(path, sizeof path, "%s/SHA256SUMS", stepdir);
  FILE *f = fopen(path, "rb");
  if (!f)
    return wt_fail(WT_ENOTFOUND,
                   "checkpoint %s has no SHA256SUMS: it is incomplete; delete it (its run "
                   "directory then loads from the newest complete step directory)",
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
                     "is corrupt or truncated — delete %s (its run directory then loads from "
                     "the newest complete earlier step directory) or pass an earlier step "
                     "directory",
                     stepdir, s_files[i],
                     rc != WT_OK ? "is missing or unreadable, so cannot match"
                     : !*want[i] ? "is not listed with"
                                 : "does not match",
                     stepdir);
  }
  return WT_OK;
}

/* The newest step directory of run directory `dir` whose digests verify, into out. */
static int s_newest_verified(const char *dir, char *out, size_t size) {
  char **names;
  int n = s_list_steps(dir, &names), found = 0;
  for (int i = n - 1; i >= 0 && !found; i--) {
    s_path(out, size, "%s/%s", dir, names[i]);
    found = s_verify(out) == WT_OK;
  }
  s_free_names(names, n);
  return found ? WT_OK : WT_ENOTFOUND;
}

int checkpoint_resolve(const char *path, char *out, size_t size) {
  char probe[4200], why[300];
  WT_CHECK(s_check_len(path));
  if (s_is_step_dir(path)) {
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
  if (*name && !strchr(name, '/') && strcmp(name, ".") && strcmp(name, "..")) {
    s_path(out, size, "%s/%s", path, name);
    if (s_is_step_dir(out)) return WT_OK;
    snprintf(why, sizeof why, "'latest' names %.200s, which is missing or incomplete", name);
  } else {
    snprintf(why, sizeof why, "'latest' is %s", f ? "empty or malformed" : "missing");
  }
  /* `latest` is only a pointer: the step directories themselves say what is complete. */
  if (s_newest_verified(path, out, size) == WT_OK) {
    WT_WARN("%s: %s; using %s, the newest step directory whose digests verify", path, why, out);
    return WT_OK;
  }
  return wt_fail(WT_ENOTFOUND,
                 "no checkpoint in %s (neither a step directory with SHA256SUMS nor a run "
                 "directory with a complete step directory); check the path",
                 path);
}

static int s_read_state(const char *stepdir, checkpoint_meta *meta) {
  char path[4200];
  s_path(path, sizeof path, "%s/state.json", stepdir);
  FILE *f = fopen(path, "rb");
  if (!f) return wt_fail(WT_EIO, "cannot read %s: %s", path, strerror(errno));
  char *text = wt_xcalloc(1, 1 << 16);
  size_t len = fread(text, 1, (1 << 16) - 1, f);
  fclose(f);
  int rc = checkpoint_state_parse(text, len, path, meta);
  free(text);
  return rc;
}

/* A metadata value of a checkpoint's safetensors file that must be a whole number in
 * [lo, hi]; `file` is the path for the message. */
static int s_meta_long(const safetensors *st, const char *file, const char *key, long lo, long hi,
                       long *out) {
  const char *v = safetensors_metadata(st, key);
  char *end = NULL;
  errno = 0;
  long x = v ? strtol(v, &end, 10) : 0;
  if (!v || !*v || *end || errno || x < lo || x > hi)
    return wt_fail(WT_ECORRUPT,
                   "%s: metadata \"%s\" is %s%.40s%s, not a whole number in [%ld, %ld]; the "
                   "checkpoint is damaged or was not written by wantrain — use another step "
                   "directory",
                   file, key, v ? "\"" : "", v ? v : "missing", v ? "\"" : "", lo, hi);
  *out = x;
  return WT_OK;
}

static int s_meta_int(const safetensors *st, const char *file, const char *key, int *out) {
  long x = 0;
  WT_CHECK(s_meta_long(st, file, key, 1, 1L << 30, &x));
  *out = (int)x;
  return WT_OK;
}

/* A float metadata value, finite and in [lo, hi]. */
static int s_meta_float(const safetensors *st, const char *file, const char *key, double lo,
                        double hi, float *out) {
  const char *v = safetensors_metadata(st, key);
  char *end = NULL;
  errno = 0;
  double x = v ? strtod(v, &end) : 0;
  if (!v || !*v || *end || errno || !(x >= lo && x <= hi))
    return wt_fail(WT_ECORRUPT,
                   "%s: metadata \"%s\" is %.40s, not a number in [%g, %g]; the checkpoint is "
                   "damaged or was not written by wantrain — use another step directory",
                   file, key, v ? v : "missing", lo, hi);
  *out = (float)x;
  return WT_OK;
}

/* The MoE fields (all zero when the file has no "moe_experts": a dense model). */
static int s_moe_config(const safetensors *st, const char *file, gpt_config *cfg) {
  cfg->moe_experts = cfg->moe_top_k = 0;
  cfg->moe_capacity = cfg->moe_aux_weight = 0;
  memset(cfg->moe_layer, 0, sizeof cfg->moe_layer);
  if (!safetensors_metadata(st, "moe_experts")) return WT_OK;
  WT_CHECK(s_meta_int(st, file, "moe_experts", &cfg->moe_experts));
  WT_CHECK(s_meta_int(st, file, "moe_top_k", &cfg->moe_top_k));
  WT_CHECK(s_meta_float(st, file, "moe_capacity", 1e-9, 1e9, &cfg->moe_capacity));
  WT_CHECK(s_meta_float(st, file, "moe_aux_weight", 0, 1e9, &cfg->moe_aux_weight));
  const char *v = safetensors_metadata(st, "moe_layers");
  for (const char *p = v; p && *p;) {
    char *end = NULL;
    long l = strtol(p, &end, 10);
    if (end == p || l < 0 || l >= GPT_MOE_MAX_LAYERS || (*end && *end != ',')) {
      v = NULL;
      break;
    }
    cfg->moe_layer[l] = 1;
    p = *end ? end + 1 : end;
  }
  if (!v || !*v)
    return wt_fail(WT_ECORRUPT,
                   "%s: metadata \"moe_layers\" is missing or not a comma list of block "
                   "numbers; the checkpoint is damaged — use another step directory",
                   file);
  return WT_OK;
}

/* The model config in model.safetensors' metadata, checked for consistency with itself and
 * with the tokenizer that state.json recorded. */
static int s_model_config(const safetensors *st, const char *file, const checkpoint_meta *meta,
                          gpt_config *cfg) {
  WT_CHECK(s_meta_int(st, file, "vocab_size", &cfg->vocab_size));
  WT_CHECK(s_meta_int(st, file, "max_seq", &cfg->max_seq));
  WT_CHECK(s_meta_int(st, file, "n_layer", &cfg->n_layer));
  WT_CHECK(s_meta_int(st, file, "n_head", &cfg->n_head));
  WT_CHECK(s_meta_int(st, file, "channels", &cfg->channels));
  WT_CHECK(s_moe_config(st, file, cfg));
  if (gpt_config_validate(cfg) != WT_OK) {
    char msg[600];
    snprintf(msg, sizeof msg, "%s", wt_last_error());
    return wt_fail(WT_ECORRUPT, "%s: metadata describes an impossible model (%s)", file, msg);
  }
  const char *tok = safetensors_metadata(st, "tokenizer");
  if (checkpoint_tokenizer_index(tok) != (int)meta->tokenizer)
    return wt_fail(WT_ECORRUPT,
                   "%s: metadata \"tokenizer\" is %.40s but state.json says %s; the checkpoint "
                   "is damaged — use another step directory",
                   file, tok ? tok : "missing", checkpoint_tokenizer_name(meta->tokenizer));
  int V = cfg->vocab_size;
  int fits = meta->tokenizer == DATA_TOKENIZER_BYTES       ? V == 256
             : meta->tokenizer == DATA_TOKENIZER_SYNTHETIC ? V <= 64
                                                           : V >= DATA_GPT2_VOCAB;
  if (!fits)
    return wt_fail(WT_ECORRUPT,
                   "%s: metadata \"vocab_size\" %d does not fit tokenizer %s; the checkpoint "
                   "is damaged — use another step directory",
                   file, V, checkpoint_tokenizer_name(meta->tokenizer));
  return WT_OK;
}

/* Verifies and opens a checkpoint's model file. */
static int s_open(const char *path, char *stepdir, size_t size, safetensors **st,
                  checkpoint_meta *meta, gpt_config *cfg) {
  WT_CHECK(checkpoint_resolve(path, stepdir, size));
  WT_CHECK(s_verify(stepdir));
  WT_CHECK(s_read_state(stepdir, meta));
  const char *base = strrchr(stepdir, '/');
  base = base ? base + 1 : stepdir;
  if (s_is_step_name(base) && strtol(base + 5, NULL, 10) != meta->step)
    return wt_fail(WT_ECORRUPT,
                   "%s/state.json: field \"step\" is %ld but the directory is %s; the checkpoint "
                   "is damaged — use another step directory",
                   stepdir, meta->step, base);
  char file[4200];
  s_path(file, sizeof file, "%s/%s", stepdir, s_files[0]);
  *st = safetensors_load(file);
  if (!*st) return WT_ECORRUPT;
  int rc = s_model_config(*st, file, meta, cfg);
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

static int s_same_moe(const gpt_config *a, const gpt_config *b) {
  return a->moe_experts == b->moe_experts && a->moe_top_k == b->moe_top_k &&
         a->moe_capacity == b->moe_capacity && a->moe_aux_weight == b->moe_aux_weight &&
         !memcmp(a->moe_layer, b->moe_layer, sizeof a->moe_layer);
}

/* ", MoE E experts top-k K capacity F aux W in blocks L,..." or "" for a dense model. */
static void s_moe_describe(const gpt_config *c, char *buf, size_t size) {
  char mv[4][32], layers[GPT_MOE_MAX_LAYERS * 4 + 1];
  buf[0] = 0;
  if (c->moe_experts <= 0) return;
  s_moe_meta(c, mv, layers, sizeof layers);
  snprintf(buf, size, ", %s experts (top-%s, capacity %s, aux weight %s) in blocks %s", mv[0],
           mv[1], mv[2], mv[3], layers);
}

static int s_same_config(const char *stepdir, const gpt_config *a, const gpt_config *b) {
  if (a->vocab_size == b->vocab_size && a->max_seq == b->max_seq && a->n_layer == b->n_layer &&
      a->n_head == b->n_head && a->channels == b->channels && s_same_moe(a, b))
    return WT_OK;
  char ma[GPT_MOE_MAX_LAYERS * 4 + 256], mb[sizeof ma];
  s_moe_describe(a, ma, sizeof ma), s_moe_describe(b, mb, sizeof mb);
  return wt_fail(WT_EMISMATCH,
                 "checkpoint %s was written for a model with vocab %d, seq %d, "
                 "layers %d, heads %d, channels %d%s, but this run builds vocab %d, seq %d, layers "
                 "%d, heads %d, channels %d%s; pass the checkpoint's --layers/--channels/--heads/"
                 "--seq%s and data, or use another --checkpoint-dir",
                 stepdir, a->vocab_size, a->max_seq, a->n_layer, a->n_head, a->channels, ma,
                 b->vocab_size, b->max_seq, b->n_layer, b->n_head, b->channels, mb,
                 a->moe_experts || b->moe_experts ? "/--moe-*" : "");
}

/* Weights: with copy == 0 only checks every tensor's name and shape, so that a caller can
 * validate everything before changing the model. */
static int s_load_weights(const safetensors *st, gpt_stage *model, int copy) {
  size_t np;
  float *params = copy ? gpt_stage_params_host(model, &np) : NULL; /* a host copy on a GPU */
  for (int i = 0; i < gpt_stage_num_tensors(model); i++) {
    const gpt_tensor_info *ti = gpt_stage_tensor(model, i);
    int64_t shape[2] = {ti->shape[0], ti->shape[1]};
    WT_CHECK(safetensors_read(st, ti->name, ti->ndim, shape, copy ? params + ti->offset : NULL));
  }
  if (copy) gpt_stage_params_upload(model);
  return WT_OK;
}

/* The optimizer's state and step count, which cannot exceed the steps the run took. */
static int s_load_optim(const char *stepdir, optim *opt, long run_step) {
  char file[4200];
  s_path(file, sizeof file, "%s/%s", stepdir, s_files[1]);
  safetensors *st = safetensors_load(file);
  if (!st) return WT_ECORRUPT;
  const char *kind = safetensors_metadata(st, "kind");
  const char *want = optim_get_config(opt)->kind == OPTIM_SGD ? "sgd" : "adamw";
  int rc = WT_OK, n = optim_num_states(opt);
  static const char *const names[] = {"state0", "state1", "state2", "state3"};
  long step = 0;
  if (!kind || strcmp(kind, want) != 0)
    rc = wt_fail(WT_EMISMATCH,
                 "checkpoint %s holds %s optimizer state but this run uses %s; "
                 "pass --optimizer %s or use another --checkpoint-dir",
                 stepdir, kind ? kind : "no", want, kind && strcmp(kind, "none") ? kind : want);
  if (rc == WT_OK) rc = s_meta_long(st, file, "step_count", 0, run_step, &step);
  for (int pass = 0; pass < 2 && rc == WT_OK; pass++) {
    for (int i = 0; i < n && i < 4 && rc == WT_OK; i++) {
      size_t len;
      float *buf = pass ? optim_state_host(opt, i, &len) : NULL;
      if (!pass) optim_state(opt, i, &len);
      int64_t shape[2] = {(int64_t)len, 1};
      rc = safetensors_read(st, names[i], 1, shape, buf);
      if (pass && rc == WT_OK) optim_state_upload(opt, i);
    }
  }
  if (rc == WT_OK) optim_set_step_count(opt, step);
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
  if (rc == WT_OK && opt) rc = s_load_optim(stepdir, opt, m.step);
  if (rc == WT_OK) rc = s_load_weights(st, model, 1);
  if (rc == WT_OK) *meta = m;
  safetensors_destroy(&st);
  return rc;
}

/* ---- a run directory held by one run ------------------------------------------------------- */

struct checkpoint_run {
  int lock_fd; /* holds the flock on DIR/.lock until closed */
};

/* Refuses a directory that is a step directory, or, for a fresh run, one that holds a run. */
static int s_check_run_dir(const char *dir, int fresh) {
  char probe[4200];
  const char *base = strrchr(dir, '/');
  base = base ? base + 1 : dir;
  s_path(probe, sizeof probe, "%s/state.json", dir);
  if (s_is_step_dir(dir) || access(probe, F_OK) == 0 || s_is_step_name(base))
    return wt_fail(WT_EINVAL,
                   "--checkpoint-dir %s is a step directory inside a run directory; pass "
                   "the run directory that holds it (its parent)",
                   dir);
  if (!fresh) return WT_OK;
  char **names;
  int n = s_list_steps(dir, &names);
  s_path(probe, sizeof probe, "%s/latest", dir);
  int has_latest = access(probe, F_OK) == 0;
  int rc = WT_OK;
  if (n > 0 || has_latest)
    rc = wt_fail(WT_EINVAL,
                 "--checkpoint-dir %s already holds a run (%s%s); pass --resume to continue "
                 "it, or choose another directory",
                 dir, n > 0 ? names[n - 1] : "a 'latest' file",
                 n > 1 ? " and older step directories" : "");
  s_free_names(names, n);
  return rc;
}

/* Creates and removes a file, so that a directory that cannot take a checkpoint is found now
 * rather than at the first save. */
static int s_check_writable(const char *dir) {
  char probe[4200];
  s_path(probe, sizeof probe, "%s/.write-test-XXXXXX", dir);
  int fd = mkstemp(probe);
  if (fd < 0 || write(fd, "x", 1) != 1 || fsync(fd) != 0) {
    int e = errno;
    if (fd >= 0) close(fd), unlink(probe);
    return wt_fail(WT_EIO,
                   "--checkpoint-dir %s is not writable: %s; choose a directory this "
                   "user can write",
                   dir, strerror(e));
  }
  close(fd);
  unlink(probe);
  return WT_OK;
}

checkpoint_run *checkpoint_run_open(const char *dir, int fresh) {
  struct stat st;
  if (s_check_len(dir) != WT_OK) return NULL;
  int exists = stat(dir, &st) == 0;
  if (exists && !S_ISDIR(st.st_mode)) {
    wt_fail(WT_EINVAL, "--checkpoint-dir %s exists and is not a directory; choose a directory",
            dir);
    return NULL;
  }
  if (!exists && !fresh) {
    wt_fail(WT_ENOTFOUND,
            "no checkpoint in %s: the directory does not exist; check the path, or train "
            "without --resume to start a run there",
            dir);
    return NULL;
  }
  if (s_mkdirs(dir) != WT_OK || s_check_run_dir(dir, fresh) != WT_OK) return NULL;
  char path[4200];
  s_path(path, sizeof path, "%s/.lock", dir);
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    wt_fail(WT_EIO, "--checkpoint-dir %s is not writable: cannot create %s: %s", dir, path,
            strerror(errno));
    return NULL;
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int e = errno;
    close(fd);
    if (e == EWOULDBLOCK)
      wt_fail(WT_EINVAL,
              "--checkpoint-dir %s is in use by another run (it holds the lock on %s); wait "
              "for that run to end, or choose another directory",
              dir, path);
    else
      wt_fail(WT_EIO, "cannot lock %s: %s", path, strerror(e));
    return NULL;
  }
  if (s_check_writable(dir) != WT_OK) {
    close(fd);
    return NULL;
  }
  checkpoint_run *self = wt_xcalloc(1, sizeof *self);
  self->lock_fd = fd;
  return self;
}

void checkpoint_run_close(checkpoint_run **self_p) {
  if (!self_p || !*self_p) return;
  close((*self_p)->lock_fd); /* releases the flock */
  free(*self_p);
  *self_p = NULL;
}
