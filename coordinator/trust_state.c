/* trust_state — a peer key's trust record in the state database (coordinator_internal.h): what
 * its stage agreed the robust sync left out, the spot checks made of it and the failures with
 * who reported them, the baselines of its own spot-check reports, and its claim's standing. A
 * restarted coordinator takes them back, so a liar's count goes on where it was instead of
 * starting afresh; the exclusion itself is its own row (trust.c). The record's JSON form and
 * its check; state.c keeps it, one meta row per key ("trust:KEY"). */
#include "coordinator/coordinator_internal.h"

#include "common/common.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void s_add_longs(cJSON *o, const char *name, const long *v, int n) {
  cJSON *a = cJSON_AddArrayToObject(o, name);
  for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v[i]));
}

static cJSON *s_record(const coordinator *c, const coord_peer *p) {
  const int R = WT_MIN(c->cfg.run.replicas, COORD_TRUST_REPLICAS);
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "flagged", (double)p->trust_flagged);
  cJSON_AddNumberToObject(o, "syncs", (double)p->trust_syncs);
  cJSON_AddNumberToObject(o, "ep_flagged", (double)p->trust_ep_flagged);
  cJSON_AddNumberToObject(o, "ep_syncs", (double)p->trust_ep_syncs);
  cJSON_AddNumberToObject(o, "epoch", p->trust_epoch);
  cJSON_AddStringToObject(o, "why", p->trust_why);
  cJSON_AddNumberToObject(o, "spot_epoch", p->spot_report_epoch);
  s_add_longs(o, "spot_report", p->spot_report, R);
  s_add_longs(o, "spot_report_checked", p->spot_report_checked, R);
  cJSON_AddNumberToObject(o, "spot_checks", (double)p->spot_checks);
  cJSON_AddNumberToObject(o, "spot_fails", (double)p->spot_fails);
  cJSON *ids = cJSON_AddArrayToObject(o, "spot_checkers");
  for (int k = 0; k < p->n_spot_checkers; k++)
    cJSON_AddItemToArray(ids, cJSON_CreateNumber(p->spot_checkers[k]));
  cJSON_AddNumberToObject(o, "claim_epoch", p->claim_epoch);
  cJSON_AddNumberToObject(o, "claim_strikes", p->claim_strikes);
  cJSON_AddNumberToObject(o, "claim_flagged", p->claim_flagged);
  cJSON_AddNumberToObject(o, "claim_steps", (double)p->claim_steps);
  cJSON_AddNumberToObject(o, "claim_measured", p->claim_measured);
  cJSON_AddNumberToObject(o, "claim_placed", p->claim_placed);
  return o;
}

char *coord_trust_record(const coordinator *c, const coord_peer *p) {
  if (!p->trust_syncs && !p->trust_ep_syncs && !p->spot_report_epoch && !p->spot_checks &&
      !p->claim_epoch)
    return NULL; /* nothing to keep yet */
  cJSON *o = s_record(c, p);
  char *text = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  return text;
}

/* A count of a record: a whole number in [0, 1e12), else -1. */
static long s_count(const cJSON *o, const char *name) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
  if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble < 1e12) ||
      v->valuedouble != floor(v->valuedouble))
    return -1;
  return (long)v->valuedouble;
}

static int s_longs(const cJSON *o, const char *name, long *out, int n) {
  const cJSON *a = cJSON_GetObjectItemCaseSensitive(o, name);
  if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != n) return 0;
  for (int i = 0; i < n; i++) {
    double v = cJSON_GetNumberValue(cJSON_GetArrayItem(a, i));
    if (!(v >= 0 && v < 1e12)) return 0;
    out[i] = (long)v;
  }
  return 1;
}

/* Fills p from the record o; 0 (p unchanged) when a field is missing or out of range. */
static int s_take(const coordinator *c, coord_peer *p, const cJSON *o) {
  const int R = WT_MIN(c->cfg.run.replicas, COORD_TRUST_REPLICAS);
  coord_peer q = *p;
  const char *why = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "why"));
  const cJSON *ids = cJSON_GetObjectItemCaseSensitive(o, "spot_checkers");
  long v[12];
  const char *names[12] = {"flagged",     "syncs",         "ep_flagged",    "ep_syncs",
                           "epoch",       "spot_epoch",    "spot_checks",   "spot_fails",
                           "claim_epoch", "claim_strikes", "claim_flagged", "claim_steps"};
  for (int i = 0; i < 12; i++)
    if ((v[i] = s_count(o, names[i])) < 0 || (i == 10 && v[i] > 1)) return 0;
  double measured = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, "claim_measured"));
  double placed = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, "claim_placed"));
  if (!why || strlen(why) >= sizeof q.trust_why || !s_longs(o, "spot_report", q.spot_report, R) ||
      !s_longs(o, "spot_report_checked", q.spot_report_checked, R) || !cJSON_IsArray(ids) ||
      cJSON_GetArraySize(ids) > (int)WT_ARRAY_LEN(q.spot_checkers) || !(measured >= 0) ||
      !(placed >= 0) || v[0] > v[1] || v[2] > v[3] || v[7] > v[6])
    return 0;
  q.trust_flagged = v[0], q.trust_syncs = v[1], q.trust_ep_flagged = v[2], q.trust_ep_syncs = v[3];
  q.trust_epoch = (int)v[4], q.spot_report_epoch = (int)v[5];
  q.spot_checks = v[6], q.spot_fails = v[7];
  q.claim_epoch = (int)v[8], q.claim_strikes = (int)v[9], q.claim_flagged = (int)v[10];
  q.claim_steps = v[11], q.claim_measured = measured, q.claim_placed = placed;
  snprintf(q.trust_why, sizeof q.trust_why, "%s", why);
  q.n_spot_checkers = 0;
  const cJSON *id;
  cJSON_ArrayForEach(id, ids) q.spot_checkers[q.n_spot_checkers++] = (int)cJSON_GetNumberValue(id);
  *p = q;
  return 1;
}

int coord_trust_record_load(const coordinator *c, coord_peer *p, const char *text) {
  cJSON *o = cJSON_Parse(text);
  int ok = o && s_take(c, p, o);
  cJSON_Delete(o);
  return ok;
}
