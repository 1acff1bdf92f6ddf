/* checkpoint_state — state.json of a checkpoint: the run's step, data position and tokenizer,
 * printed and read back with every field validated. Apart from the checkpoint files it is the
 * one reader of outside input here that needs no model, so the fuzz target links it alone. */
#include "model/checkpoint_internal.h"

#include "common/common.h"

#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const s_tokenizers[] = {"synthetic", "bytes", "gpt2"};

const char *checkpoint_tokenizer_name(data_tokenizer tok) {
  return (unsigned)tok < WT_ARRAY_LEN(s_tokenizers) ? s_tokenizers[tok] : "unknown";
}

int checkpoint_tokenizer_index(const char *name) {
  for (int i = 0; i < (int)WT_ARRAY_LEN(s_tokenizers); i++)
    if (name && !strcmp(name, s_tokenizers[i])) return i;
  return -1;
}

char *checkpoint_state_print(const checkpoint_meta *meta) {
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "format", CHECKPOINT_STATE_FORMAT);
  cJSON_AddNumberToObject(root, "step", (double)meta->step);
  cJSON_AddNumberToObject(root, "data_batches", (double)meta->data_pos.batches);
  cJSON *rng = cJSON_AddArrayToObject(root, "data_rng"); /* hex: u64 does not fit a double */
  for (int i = 0; i < 4; i++) {
    char hex[17];
    snprintf(hex, sizeof hex, "%016" PRIx64, meta->data_pos.rng.s[i]);
    cJSON_AddItemToArray(rng, cJSON_CreateString(hex));
  }
  cJSON_AddStringToObject(root, "tokenizer", checkpoint_tokenizer_name(meta->tokenizer));
  cJSON *train = meta->train_json[0] ? cJSON_Parse(meta->train_json) : NULL;
  if (train) cJSON_AddItemToObject(root, "train", train);
  char *text = cJSON_Print(root);
  cJSON_Delete(root);
  return text;
}

/* A JSON number that must be a whole number in [lo, hi] (doubles are exact up to 2^53). */
static int s_json_whole(const cJSON *root, const char *file, const char *key, double lo, double hi,
                        double *out) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
  if (!v)
    return wt_fail(WT_ECORRUPT, "%s: field \"%s\" is missing; use another step directory", file,
                   key);
  if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < lo ||
      v->valuedouble > hi) {
    char *text = cJSON_PrintUnformatted(v);
    int rc = wt_fail(WT_ECORRUPT,
                     "%s: field \"%s\" is %.40s, not a whole number in [%.0f, %.0f]; the "
                     "checkpoint is damaged — use another step directory",
                     file, key, text ? text : "?", lo, hi);
    free(text);
    return rc;
  }
  *out = v->valuedouble;
  return WT_OK;
}

static int s_parse_rng(const cJSON *rng, const char *file, data_position *pos) {
  int nonzero = 0;
  if (!cJSON_IsArray(rng) || cJSON_GetArraySize(rng) != 4)
    return wt_fail(WT_ECORRUPT, "%s: field \"data_rng\" is not an array of 4 hex strings", file);
  for (int i = 0; i < 4; i++) {
    const cJSON *item = cJSON_GetArrayItem(rng, i);
    const char *hex = cJSON_IsString(item) ? item->valuestring : "";
    char *end = NULL;
    pos->rng.s[i] = strtoull(hex, &end, 16);
    if (strlen(hex) != 16 || *end || hex[0] == '-' || hex[0] == '+')
      return wt_fail(WT_ECORRUPT, "%s: field \"data_rng\"[%d] is not 16 hexadecimal digits", file,
                     i);
    nonzero |= pos->rng.s[i] != 0;
  }
  if (!nonzero)
    return wt_fail(WT_ECORRUPT,
                   "%s: field \"data_rng\" is all zero, which no generator state "
                   "can be; the checkpoint is damaged",
                   file);
  return WT_OK;
}

int checkpoint_state_parse(const char *text, size_t len, const char *file, checkpoint_meta *meta) {
  cJSON *root = cJSON_ParseWithLength(text, len);
  const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(root, "format");
  const cJSON *tok = cJSON_GetObjectItemCaseSensitive(root, "tokenizer");
  double step = 0, batches = 0;
  checkpoint_meta m;
  memset(&m, 0, sizeof m);
  int rc = WT_OK;
  if (!cJSON_IsObject(root) || !cJSON_IsString(fmt) ||
      strcmp(fmt->valuestring, CHECKPOINT_STATE_FORMAT))
    rc = wt_fail(WT_ECORRUPT,
                 "%s is not a %s state file; the checkpoint is damaged or from "
                 "another program — use another step directory",
                 file, CHECKPOINT_STATE_FORMAT);
  if (rc == WT_OK) rc = s_json_whole(root, file, "step", 0, CHECKPOINT_MAX_STEP, &step);
  if (rc == WT_OK) rc = s_json_whole(root, file, "data_batches", 0, 9007199254740992.0, &batches);
  if (rc == WT_OK)
    rc = s_parse_rng(cJSON_GetObjectItemCaseSensitive(root, "data_rng"), file, &m.data_pos);
  int t = cJSON_IsString(tok) ? checkpoint_tokenizer_index(tok->valuestring) : -1;
  if (rc == WT_OK && t < 0)
    rc = wt_fail(WT_ECORRUPT, "%s: field \"tokenizer\" is not one of synthetic, bytes, gpt2", file);
  if (rc == WT_OK) {
    m.step = (long)step;
    m.data_pos.batches = (uint64_t)batches;
    m.tokenizer = (data_tokenizer)t;
    const cJSON *train = cJSON_GetObjectItemCaseSensitive(root, "train");
    char *json = cJSON_IsObject(train) ? cJSON_PrintUnformatted(train) : NULL;
    if (json && strlen(json) < sizeof m.train_json) memcpy(m.train_json, json, strlen(json) + 1);
    free(json);
    *meta = m;
  }
  cJSON_Delete(root);
  return rc;
}
