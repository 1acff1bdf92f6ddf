/* assignment — the JSON "assignment" object netsim prints and reads back: groups (one list of
 * devices per stage), pipelines (one list of devices per replica, stage order) and, when the plan
 * has them, rings (one list of replicas per stage, in ring order). */
#include "netsim/netsim.h"

#include "common/common.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

cJSON *netsim_assignment_to_json(const assign_plan *plan) {
  cJSON *obj = cJSON_CreateObject();
  cJSON *groups = cJSON_AddArrayToObject(obj, "groups");
  for (int s = 0; s < plan->d_pp; s++) {
    cJSON *row = cJSON_CreateArray();
    for (int r = 0; r < plan->d_dp; r++)
      cJSON_AddItemToArray(row, cJSON_CreateNumber(plan->device[s * plan->d_dp + r]));
    cJSON_AddItemToArray(groups, row);
  }
  cJSON *pipes = cJSON_AddArrayToObject(obj, "pipelines");
  for (int r = 0; r < plan->d_dp; r++) {
    cJSON *col = cJSON_CreateArray();
    for (int s = 0; s < plan->d_pp; s++)
      cJSON_AddItemToArray(col, cJSON_CreateNumber(plan->device[s * plan->d_dp + r]));
    cJSON_AddItemToArray(pipes, col);
  }
  if (plan->ring) {
    cJSON *rings = cJSON_AddArrayToObject(obj, "rings");
    for (int s = 0; s < plan->d_pp; s++) {
      cJSON *row = cJSON_CreateArray();
      for (int i = 0; i < plan->d_dp; i++)
        cJSON_AddItemToArray(row, cJSON_CreateNumber(plan->ring[s * plan->d_dp + i]));
      cJSON_AddItemToArray(rings, row);
    }
  }
  return obj;
}

/* "rings": per stage, its replicas once each in ring order, starting with replica 0. */
static int s_rings(const char *path, const cJSON *arr, assign_plan *plan) {
  int P = plan->d_pp, K = plan->d_dp;
  if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) != P)
    return wt_fail(WT_EINVAL,
                   "assignment %s: \"rings\" must be an array of %d lists (one per stage)", path,
                   P);
  int *ring = wt_xmalloc(sizeof(int) * (size_t)P * K), s = 0, rc = WT_OK;
  char *seen = wt_xmalloc((size_t)K);
  for (const cJSON *row = arr->child; row && rc == WT_OK; row = row->next, s++) {
    memset(seen, 0, (size_t)K);
    if (!cJSON_IsArray(row) || cJSON_GetArraySize(row) != K) {
      rc = wt_fail(WT_EINVAL, "assignment %s: \"rings\"[%d] must list %d replicas", path, s, K);
      break;
    }
    int i = 0;
    for (const cJSON *v = row->child; v && rc == WT_OK; v = v->next, i++) {
      double x = cJSON_IsNumber(v) ? v->valuedouble : -1;
      if (x != floor(x) || x < 0 || x >= K || seen[(int)x]++ || (i == 0 && x != 0))
        rc = wt_fail(WT_EINVAL,
                     "assignment %s: \"rings\"[%d] must hold replicas 0..%d once each, starting "
                     "with 0 (entry %d is not that)",
                     path, s, K - 1, i);
      else
        ring[s * K + i] = (int)x;
    }
  }
  free(seen);
  if (rc == WT_OK) {
    free(plan->ring);
    plan->ring = ring;
  } else
    free(ring);
  return rc;
}

/* Reads a rows×cols table of device ids into plan cells; transposed for "pipelines". */
static int s_table(const char *path, const cJSON *arr, const char *key, int rows, int cols,
                   int transposed, assign_plan *plan) {
  if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) != rows)
    return wt_fail(WT_EINVAL, "assignment %s: \"%s\" must be an array of %d lists (%s)", path, key,
                   rows, transposed ? "one per replica" : "one per stage");
  int i = 0;
  for (const cJSON *row = arr->child; row; row = row->next, i++) {
    if (!cJSON_IsArray(row) || cJSON_GetArraySize(row) != cols)
      return wt_fail(WT_EINVAL, "assignment %s: \"%s\"[%d] must list %d device ids", path, key, i,
                     cols);
    int j = 0;
    for (const cJSON *v = row->child; v; v = v->next, j++) {
      if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 0 ||
          v->valuedouble >= plan->d_pp * plan->d_dp)
        return wt_fail(WT_EINVAL, "assignment %s: \"%s\"[%d][%d] is not a device id in [0, %d)",
                       path, key, i, j, plan->d_pp * plan->d_dp);
      int cell = transposed ? j * plan->d_dp + i : i * plan->d_dp + j;
      plan->device[cell] = (int)v->valuedouble;
    }
  }
  return WT_OK;
}

static int s_every_device_once(const char *path, const assign_plan *plan) {
  int n = plan->d_pp * plan->d_dp, rc = WT_OK;
  int *count = wt_xcalloc((size_t)n, sizeof(int));
  for (int i = 0; i < n; i++) count[plan->device[i]]++;
  for (int d = 0; d < n && rc == WT_OK; d++)
    if (count[d] != 1)
      rc = wt_fail(WT_EINVAL,
                   "assignment %s: device %d appears %d times; every device must "
                   "appear exactly once",
                   path, d, count[d]);
  free(count);
  return rc;
}

static int s_parse(const char *path, const cJSON *root, assign_plan *plan) {
  const cJSON *obj = root;
  /* Accept a whole compare result entry too: {"assignment": {...}}. */
  const cJSON *inner = cJSON_GetObjectItemCaseSensitive(root, "assignment");
  if (cJSON_IsObject(inner)) obj = inner;
  const cJSON *groups = cJSON_GetObjectItemCaseSensitive(obj, "groups");
  const cJSON *pipes = cJSON_GetObjectItemCaseSensitive(obj, "pipelines");
  if (!groups && !pipes)
    return wt_fail(WT_EINVAL, "assignment %s: needs \"groups\" or \"pipelines\"", path);
  if (pipes) {
    WT_CHECK(s_table(path, pipes, "pipelines", plan->d_dp, plan->d_pp, 1, plan));
    WT_CHECK(s_every_device_once(path, plan));
  }
  if (groups) {
    assign_plan *g = assign_plan_new(plan->d_pp, plan->d_dp);
    int rc = s_table(path, groups, "groups", plan->d_pp, plan->d_dp, 0, g);
    if (rc == WT_OK) rc = s_every_device_once(path, g);
    if (rc == WT_OK && pipes &&
        memcmp(g->device, plan->device, sizeof(int) * (size_t)(plan->d_pp * plan->d_dp)))
      rc = wt_fail(WT_EINVAL, "assignment %s: \"groups\" and \"pipelines\" disagree", path);
    if (rc == WT_OK && !pipes)
      memcpy(plan->device, g->device, sizeof(int) * (size_t)(plan->d_pp * plan->d_dp));
    assign_plan_destroy(&g);
    WT_CHECK(rc);
  }
  const cJSON *rings = cJSON_GetObjectItemCaseSensitive(obj, "rings");
  if (rings) WT_CHECK(s_rings(path, rings, plan));
  return WT_OK;
}

int netsim_assignment_load(const char *path, int d_pp, int d_dp, assign_plan **out) {
  *out = NULL;
  FILE *f = fopen(path, "rb");
  if (!f) return wt_fail(WT_ENOTFOUND, "assignment %s: %s", path, strerror(errno));
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = NULL;
  if (len >= 0 && len <= (16L << 20)) {
    text = wt_xmalloc((size_t)len + 1);
    text[fread(text, 1, (size_t)len, f)] = 0;
  }
  fclose(f);
  cJSON *root = text ? cJSON_Parse(text) : NULL;
  free(text);
  if (!cJSON_IsObject(root)) {
    cJSON_Delete(root);
    return wt_fail(WT_EINVAL, "assignment %s: not a JSON object", path);
  }
  assign_plan *plan = assign_plan_new(d_pp, d_dp);
  int rc = s_parse(path, root, plan);
  cJSON_Delete(root);
  if (rc != WT_OK) assign_plan_destroy(&plan);
  *out = plan;
  return rc;
}
