/* safetensors — writer and validating reader of float32 safetensors files (cJSON header). */
#include "model/safetensors.h"

#include "common/common.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

struct safetensors {
  char path[1024];
  unsigned char *file; /* whole file */
  size_t size;
  size_t data_start; /* 8 + header length */
  cJSON *header;
};

static size_t s_numel(int ndim, const int64_t *shape) {
  size_t n = 1;
  for (int d = 0; d < ndim; d++) n *= (size_t)shape[d];
  return n;
}

/* The JSON header; tensors back to back in the order given. */
static char *s_header_json(const safetensors_tensor *t, int n, const char *const *meta,
                           int n_meta) {
  cJSON *root = cJSON_CreateObject();
  if (n_meta > 0) {
    cJSON *m = cJSON_AddObjectToObject(root, "__metadata__");
    for (int i = 0; i < n_meta; i++) cJSON_AddStringToObject(m, meta[2 * i], meta[2 * i + 1]);
  }
  size_t off = 0;
  for (int i = 0; i < n; i++) {
    cJSON *e = cJSON_AddObjectToObject(root, t[i].name);
    cJSON_AddStringToObject(e, "dtype", "F32");
    cJSON *shape = cJSON_AddArrayToObject(e, "shape");
    for (int d = 0; d < t[i].ndim; d++)
      cJSON_AddItemToArray(shape, cJSON_CreateNumber((double)t[i].shape[d]));
    size_t bytes = s_numel(t[i].ndim, t[i].shape) * sizeof(float);
    cJSON *offs = cJSON_AddArrayToObject(e, "data_offsets");
    cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)off));
    cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)(off + bytes)));
    off += bytes;
  }
  char *text = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  return text;
}

int safetensors_write(FILE *f, const char *what, const safetensors_tensor *tensors, int n,
                      const char *const *meta, int n_meta) {
  char *json = s_header_json(tensors, n, meta, n_meta);
  size_t len = strlen(json), padded = (len + 7) / 8 * 8;
  unsigned char len_le[8];
  for (int i = 0; i < 8; i++) len_le[i] = (unsigned char)((uint64_t)padded >> (8 * i));
  int ok = fwrite(len_le, 1, 8, f) == 8 && fwrite(json, 1, len, f) == len;
  for (size_t i = len; ok && i < padded; i++) ok = fputc(' ', f) != EOF;
  free(json);
  for (int i = 0; ok && i < n; i++) {
    size_t numel = s_numel(tensors[i].ndim, tensors[i].shape);
    ok = fwrite(tensors[i].data, sizeof(float), numel, f) == numel;
  }
  if (!ok || fflush(f) != 0) return wt_fail(WT_EIO, "cannot write %s: %s", what, strerror(errno));
  return WT_OK;
}

/* ---- reader -------------------------------------------------------------------------------- */

static int s_read_file(safetensors *st, const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return wt_fail(errno == ENOENT ? WT_ENOTFOUND : WT_EIO, "%s: %s", path, strerror(errno));
  struct stat sb;
  int rc = WT_OK;
  if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode)) /* a directory "reads" as LONG_MAX */
    rc = wt_fail(WT_ECORRUPT, "%s is not a regular file", path);
  else if (sb.st_size < 8)
    rc = wt_fail(WT_ECORRUPT, "%s: %lld bytes is too short for a safetensors file", path,
                 (long long)sb.st_size);
  if (rc == WT_OK) {
    st->size = (size_t)sb.st_size;
    st->file = wt_xmalloc(st->size);
    if (fread(st->file, 1, st->size, f) != st->size)
      rc = wt_fail(WT_EIO, "%s: read error: %s", path, strerror(errno));
  }
  fclose(f);
  return rc;
}

/* A JSON number that is a whole number in [0, 2^53] (where doubles are exact). */
static int s_whole(const cJSON *x) {
  return cJSON_IsNumber(x) && x->valuedouble >= 0 && x->valuedouble <= 9007199254740992.0 &&
         x->valuedouble == floor(x->valuedouble);
}

/* Checks one tensor entry: F32, a 1-D or 2-D shape of non-negative ints, offsets in the data
 * section whose length matches the shape. */
static int s_check_entry(const safetensors *st, const cJSON *e) {
  const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(e, "dtype");
  const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
  const cJSON *offs = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
  if (!cJSON_IsString(dtype) || strcmp(dtype->valuestring, "F32"))
    return wt_fail(WT_ENOTSUP, "%s: tensor %s is not F32; only float32 files are supported",
                   st->path, e->string);
  int ndim = cJSON_GetArraySize(shape);
  if (!cJSON_IsArray(shape) || ndim > 2 || !cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2)
    return wt_fail(WT_ECORRUPT, "%s: tensor %s has a malformed shape or data_offsets", st->path,
                   e->string);
  double numel = 1;
  for (int d = 0; d < ndim; d++) {
    const cJSON *x = cJSON_GetArrayItem(shape, d);
    if (!s_whole(x))
      return wt_fail(WT_ECORRUPT, "%s: tensor %s has a dimension that is not a whole number",
                     st->path, e->string);
    numel *= x->valuedouble;
  }
  if (!s_whole(cJSON_GetArrayItem(offs, 0)) || !s_whole(cJSON_GetArrayItem(offs, 1)))
    return wt_fail(WT_ECORRUPT, "%s: tensor %s has data_offsets that are not whole numbers",
                   st->path, e->string);
  double b = cJSON_GetArrayItem(offs, 0)->valuedouble,
         end = cJSON_GetArrayItem(offs, 1)->valuedouble;
  double data_size = (double)(st->size - st->data_start);
  if (b < 0 || end < b || end > data_size || end - b != numel * 4)
    return wt_fail(WT_ECORRUPT,
                   "%s: tensor %s has data_offsets [%.0f, %.0f] that do not fit its "
                   "shape or the %.0f data bytes; the file is truncated or corrupt",
                   st->path, e->string, b, end, data_size);
  return WT_OK;
}

static int s_parse_header(safetensors *st) {
  uint64_t hlen = 0;
  for (int i = 0; i < 8; i++) hlen |= (uint64_t)st->file[i] << (8 * i);
  if (hlen > st->size - 8)
    return wt_fail(WT_ECORRUPT,
                   "%s: header length %llu exceeds the file size %zu; the file is "
                   "truncated or not safetensors",
                   st->path, (unsigned long long)hlen, st->size);
  st->data_start = 8 + (size_t)hlen;
  st->header = cJSON_ParseWithLength((const char *)st->file + 8, (size_t)hlen);
  if (!cJSON_IsObject(st->header))
    return wt_fail(WT_ECORRUPT, "%s: the header is not a JSON object; the file is corrupt",
                   st->path);
  for (const cJSON *e = st->header->child; e; e = e->next) {
    /* A name given twice would be listed with one entry's shape and read with the other's. */
    for (const cJSON *before = st->header->child; before != e; before = before->next)
      if (!strcmp(before->string, e->string))
        return wt_fail(WT_ECORRUPT, "%s: the header names \"%s\" twice; the file is corrupt",
                       st->path, e->string);
    if (!strcmp(e->string, "__metadata__")) continue;
    WT_CHECK(s_check_entry(st, e));
  }
  return WT_OK;
}

safetensors *safetensors_load(const char *path) {
  safetensors *st = wt_xcalloc(1, sizeof *st);
  snprintf(st->path, sizeof st->path, "%s", path);
  if (s_read_file(st, path) != WT_OK || s_parse_header(st) != WT_OK) {
    safetensors_destroy(&st);
    return NULL;
  }
  return st;
}

safetensors *safetensors_parse(const void *data, size_t size, const char *what) {
  safetensors *st = wt_xcalloc(1, sizeof *st);
  snprintf(st->path, sizeof st->path, "%s", what);
  st->size = size;
  st->file = wt_xmalloc(size);
  if (size) memcpy(st->file, data, size);
  if (size < 8) {
    wt_fail(WT_ECORRUPT, "%s: %zu bytes is too short for a safetensors file", what, size);
    safetensors_destroy(&st);
  } else if (s_parse_header(st) != WT_OK) {
    safetensors_destroy(&st);
  }
  return st;
}

void safetensors_destroy(safetensors **self_p) {
  if (!self_p || !*self_p) return;
  cJSON_Delete((*self_p)->header);
  free((*self_p)->file);
  free(*self_p);
  *self_p = NULL;
}

/* Tensors are every header entry except __metadata__. */
static const cJSON *s_entry(const safetensors *st, int i) {
  for (const cJSON *e = st->header->child; e; e = e->next) {
    if (!strcmp(e->string, "__metadata__")) continue;
    if (i-- == 0) return e;
  }
  return NULL;
}

int safetensors_num_tensors(const safetensors *st) {
  int n = 0;
  while (s_entry(st, n)) n++;
  return n;
}

static void s_entry_info(const cJSON *e, int *ndim, int64_t shape[2], size_t *begin, size_t *end) {
  const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
  const cJSON *offs = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
  *ndim = cJSON_GetArraySize(sh);
  shape[0] = shape[1] = 1;
  for (int d = 0; d < *ndim; d++) shape[d] = (int64_t)cJSON_GetArrayItem(sh, d)->valuedouble;
  *begin = (size_t)cJSON_GetArrayItem(offs, 0)->valuedouble;
  *end = (size_t)cJSON_GetArrayItem(offs, 1)->valuedouble;
}

int safetensors_tensor_info(const safetensors *st, int i, const char **name, int *ndim,
                            int64_t shape[2], size_t *begin, size_t *end) {
  const cJSON *e = i >= 0 ? s_entry(st, i) : NULL;
  if (!e) return wt_fail(WT_EINVAL, "%s: no tensor %d", st->path, i);
  *name = e->string;
  s_entry_info(e, ndim, shape, begin, end);
  return WT_OK;
}

int safetensors_read(const safetensors *st, const char *name, int ndim, const int64_t shape[2],
                     float *dst) {
  const cJSON *e = cJSON_GetObjectItemCaseSensitive(st->header, name);
  if (!e || !strcmp(name, "__metadata__"))
    return wt_fail(WT_ENOTFOUND, "%s: no tensor named %s", st->path, name);
  int got_ndim;
  int64_t got[2];
  size_t begin, end;
  s_entry_info(e, &got_ndim, got, &begin, &end);
  if (got_ndim != ndim || got[0] != shape[0] || (ndim == 2 && got[1] != shape[1]))
    return wt_fail(WT_EMISMATCH,
                   "%s: tensor %s has shape [%lld, %lld] (ndim %d) but the model "
                   "needs [%lld, %lld] (ndim %d)",
                   st->path, name, (long long)got[0], (long long)(got_ndim == 2 ? got[1] : 1),
                   got_ndim, (long long)shape[0], (long long)(ndim == 2 ? shape[1] : 1), ndim);
  /* The header check tied the byte count to the stored shape, which equals the requested one. */
  if (dst) memcpy(dst, st->file + st->data_start + begin, end - begin);
  return WT_OK;
}

const char *safetensors_metadata(const safetensors *st, const char *key) {
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(st->header, "__metadata__");
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(m, key);
  return cJSON_IsString(v) ? v->valuestring : NULL;
}

size_t safetensors_data_start(const safetensors *st) {
  return st->data_start;
}
