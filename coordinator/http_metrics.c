/* http_metrics — the Prometheus text rendering of a status snapshot and the schema check, both
 * read from the same cJSON object that /status serves. */
#include "coordinator/http.h"

#include "common/common.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The peer states of the schema; anything else is counted as "other". */
static const char *const s_states[] = {"joining", "probing", "standby", "training",
                                       "leaving", "lost",    "finished"};
#define S_N_STATES ((int)WT_ARRAY_LEN(s_states))

/* Writes a float the way the exposition format spells it (NaN, +Inf, -Inf). */
static void s_value(FILE *f, double v) {
  if (isnan(v))
    fputs("NaN", f);
  else if (isinf(v))
    fputs(v > 0 ? "+Inf" : "-Inf", f);
  else
    fprintf(f, "%.15g", v);
}

/* A label value: backslash, quote and newline escaped as the format requires; other control
 * bytes become '?' so a hostile label cannot forge a line, and bytes that are not UTF-8 become
 * U+FFFD. Long values are cut before a whole character. */
static void s_label(FILE *f, const char *s) {
  fputc('"', f);
  size_t n = s ? strlen(s) : 0, len = 0;
  for (size_t i = 0; i < n && i < COORDINATOR_HTTP_STR_MAX; i += len ? len : 1) {
    unsigned char c = (unsigned char)s[i];
    len = wt_utf8_seq(s + i, n - i);
    if (len > 1 && i + len <= COORDINATOR_HTTP_STR_MAX)
      fwrite(s + i, 1, len, f);
    else if (len > 1)
      break;
    else if (!len)
      fputs("\xEF\xBF\xBD", f);
    else if (c == '\\')
      fputs("\\\\", f);
    else if (c == '"')
      fputs("\\\"", f);
    else if (c == '\n')
      fputs("\\n", f);
    else if (c < 0x20 || c == 0x7f)
      fputc('?', f);
    else
      fputc(c, f);
  }
  fputc('"', f);
}

static void s_family(FILE *f, const char *name, const char *help) {
  fprintf(f, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name);
}

/* One unlabelled gauge from a numeric member, when the member is a number. */
static void s_scalar(FILE *f, const cJSON *st, const char *member, const char *name,
                     const char *help) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(st, member);
  if (!cJSON_IsNumber(v)) return;
  s_family(f, name, help);
  fprintf(f, "%s ", name);
  s_value(f, v->valuedouble);
  fputc('\n', f);
}

static void s_links(FILE *f, const cJSON *st) {
  const cJSON *links = cJSON_GetObjectItemCaseSensitive(st, "bytes_per_s");
  if (!cJSON_IsObject(links) || !links->child) return;
  s_family(f, "wantrain_link_bytes_per_second",
           "Bytes per second sent over links of each class, summed over peers.");
  for (const cJSON *l = links->child; l; l = l->next) {
    if (!cJSON_IsNumber(l) || !l->string) continue;
    fputs("wantrain_link_bytes_per_second{class=", f);
    s_label(f, l->string);
    fputs("} ", f);
    s_value(f, l->valuedouble);
    fputc('\n', f);
  }
}

static const char *s_str(const cJSON *obj, const char *member) {
  const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(obj, member));
  return s ? s : "";
}

static int s_int(const cJSON *obj, const char *member) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, member);
  return cJSON_IsNumber(v) ? v->valueint : -1;
}

/* Peers the robust sync's evidence excluded: a count, and one labelled gauge each with the
 * reason. */
static void s_excluded(FILE *f, const cJSON *st) {
  s_scalar(f, st, "peers_excluded", "wantrain_peers_excluded",
           "Peers excluded from the run for lying contributions (docs/trust.md).");
  const cJSON *ex = cJSON_GetObjectItemCaseSensitive(st, "excluded"), *e;
  if (!cJSON_IsArray(ex) || !ex->child) return;
  s_family(f, "wantrain_peer_excluded", "One per excluded peer: its id and the reason.");
  cJSON_ArrayForEach(e, ex) {
    fputs("wantrain_peer_excluded{id=", f);
    char id[32];
    snprintf(id, sizeof id, "%d", s_int(e, "id"));
    s_label(f, id);
    fputs(",reason=", f);
    s_label(f, cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "reason")));
    fputs("} 1\n", f);
  }
}

/* A snapshot that lists only some of its peers counts them all in "peer_counts": those
 * counts win over the list's. */
static void s_counted_states(const cJSON *st, long counts[S_N_STATES + 1]) {
  const cJSON *pc = cJSON_GetObjectItemCaseSensitive(st, "peer_counts");
  if (!cJSON_IsObject(pc)) return;
  for (int k = 0; k <= S_N_STATES; k++) counts[k] = 0;
  for (const cJSON *v = pc->child; v; v = v->next) {
    if (!cJSON_IsNumber(v) || !v->string || v->valuedouble < 0) continue;
    int k = 0;
    while (k < S_N_STATES && strcmp(v->string, s_states[k]) != 0) k++;
    counts[k] += (long)fmin(v->valuedouble, 1e15);
  }
}

/* Admission and capacity counters, when the snapshot has them. */
static void s_admission(FILE *f, const cJSON *st) {
  s_scalar(f, st, "max_peers", "wantrain_peers_max", "Peers the coordinator holds at most.");
  s_scalar(f, st, "peers_total", "wantrain_peers_held",
           "Peers in the coordinator's table (live, and those the run still needs).");
  s_scalar(f, st, "peers_sidelined", "wantrain_peers_sidelined",
           "Live peers left out of epochs for now after missing an epoch's deadline.");
  s_scalar(f, st, "refused_full", "wantrain_registrations_refused_full",
           "Registrations refused since start because every peer slot was needed.");
  s_scalar(f, st, "handshakes_failed", "wantrain_handshakes_failed",
           "CURVE handshakes on the control socket that failed since start (wrong server key).");
  s_scalar(f, st, "handshakes_refused", "wantrain_handshakes_refused",
           "CURVE handshakes refused since start by the connection caps.");
  s_scalar(f, st, "handshakes_cut", "wantrain_handshakes_cut",
           "CURVE handshakes cut before they finished since start (reset or timed out).");
}

/* One labelled gauge per peer of `claims` with `member`, the flagged ones only when `flagged`. */
static void s_claim_family(FILE *f, const cJSON *claims, const char *name, const char *help,
                           const char *member, int flagged) {
  const cJSON *e;
  int any = 0;
  cJSON_ArrayForEach(e, claims) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(e, member);
    if (!cJSON_IsNumber(v) || (flagged && !cJSON_IsTrue(cJSON_GetObjectItem(e, "flagged"))))
      continue;
    if (!any++) s_family(f, name, help);
    fprintf(f, "%s{id=\"%d\"} ", name, s_int(e, "id"));
    s_value(f, v->valuedouble);
    fputc('\n', f);
  }
}

/* Peers' claimed FLOP/s against their measured ones: a count of those flagged, the measured
 * figure of each, and one gauge per flagged peer with the figure it is placed by. */
static void s_claims(FILE *f, const cJSON *st) {
  s_scalar(f, st, "peers_claim_flagged", "wantrain_peers_claim_flagged",
           "Peers whose claimed FLOP/s their measured compute belies (docs/trust.md).");
  const cJSON *claims = cJSON_GetObjectItemCaseSensitive(st, "claims");
  if (!cJSON_IsArray(claims)) return;
  s_claim_family(f, claims, "wantrain_peer_flops_measured",
                 "FLOP/s measured from each peer's compute time this epoch.", "flops_measured", 0);
  s_claim_family(f, claims, "wantrain_peer_claim_flagged",
                 "One per flagged peer: the FLOP/s it is placed by instead of its claim.",
                 "flops_placed", 1);
}

static void s_peers(FILE *f, const cJSON *st) {
  const cJSON *peers = cJSON_GetObjectItemCaseSensitive(st, "peers");
  if (!cJSON_IsArray(peers)) return;
  long counts[S_N_STATES + 1] = {0};
  const cJSON *p;
  cJSON_ArrayForEach(p, peers) {
    const char *state = s_str(p, "state");
    int k = 0;
    while (k < S_N_STATES && strcmp(state, s_states[k]) != 0) k++;
    counts[k]++;
  }
  s_counted_states(st, counts);
  s_family(f, "wantrain_peers", "Peers known to the coordinator, by state.");
  for (int k = 0; k <= S_N_STATES; k++) {
    fputs("wantrain_peers{state=", f);
    s_label(f, k < S_N_STATES ? s_states[k] : "other");
    fprintf(f, "} %ld\n", counts[k]);
  }
  if (!peers->child) return;
  s_family(f, "wantrain_peer_info",
           "One per peer: its id, region, stage and replica (-1 = none) and state.");
  cJSON_ArrayForEach(p, peers) {
    if (!cJSON_IsObject(p)) continue;
    fputs("wantrain_peer_info{id=", f);
    s_label(f, s_str(p, "id"));
    fputs(",region=", f);
    s_label(f, s_str(p, "region"));
    fprintf(f, ",stage=\"%d\",replica=\"%d\",state=", s_int(p, "stage"), s_int(p, "replica"));
    s_label(f, s_str(p, "state"));
    fputs("} 1\n", f);
  }
}

char *coordinator_http_metrics_render(const cJSON *st) {
  if (!cJSON_IsObject(st)) {
    wt_fail(WT_EINVAL, "status snapshot is not a JSON object; the status callback must return "
                       "an object (see coordinator/http.h)");
    return NULL;
  }
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  if (!f) {
    wt_fail(WT_ENOMEM, "cannot open a memory stream for /metrics");
    return NULL;
  }
  s_scalar(f, st, "epoch", "wantrain_epoch", "Current assignment epoch.");
  s_scalar(f, st, "step", "wantrain_step", "Last committed training step.");
  s_scalar(f, st, "stages", "wantrain_stages", "Pipeline stages of the current epoch.");
  s_scalar(f, st, "replicas", "wantrain_replicas", "Data-parallel replicas of the current epoch.");
  s_scalar(f, st, "loss", "wantrain_loss", "Latest training loss.");
  s_scalar(f, st, "tokens_per_s", "wantrain_tokens_per_second",
           "Training throughput over the last interval.");
  s_links(f, st);
  s_peers(f, st);
  s_excluded(f, st);
  s_admission(f, st);
  s_claims(f, st);
  if (fclose(f) != 0) {
    free(text);
    wt_fail(WT_ENOMEM, "cannot render /metrics (out of memory)");
    return NULL;
  }
  return text;
}

/* ---- schema check ------------------------------------------------------------------------- */

static int s_need(const char *where, const char *member, int type_ok, const char *want) {
  if (!type_ok)
    return wt_fail(WT_EINVAL, "status %s\"%s\": missing or not %s", where, member, want);
  return WT_OK;
}

static int s_check_count(const cJSON *obj, const char *where, const char *member, int min) {
  const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, member);
  WT_CHECK(s_need(where, member, cJSON_IsNumber(v), "a number"));
  if (v->valuedouble != floor(v->valuedouble) || v->valuedouble < min || v->valuedouble > 9e15)
    return wt_fail(WT_EINVAL, "status %s\"%s\" = %g: want an integer >= %d", where, member,
                   v->valuedouble, min);
  return WT_OK;
}

static int s_check_string(const cJSON *obj, const char *where, const char *member) {
  const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(obj, member));
  WT_CHECK(s_need(where, member, s != NULL, "a string"));
  if (strlen(s) > COORDINATOR_HTTP_STR_MAX)
    return wt_fail(WT_EINVAL, "status %s\"%s\" is %zu bytes long; at most %d", where, member,
                   strlen(s), COORDINATOR_HTTP_STR_MAX);
  return WT_OK;
}

static int s_check_peers(const cJSON *st) {
  const cJSON *peers = cJSON_GetObjectItemCaseSensitive(st, "peers");
  WT_CHECK(s_need("", "peers", cJSON_IsArray(peers), "an array"));
  int i = 0;
  const cJSON *p;
  cJSON_ArrayForEach(p, peers) {
    char where[48];
    snprintf(where, sizeof where, "peers[%d].", i++);
    if (!cJSON_IsObject(p)) return wt_fail(WT_EINVAL, "status %s is not an object", where);
    WT_CHECK(s_check_string(p, where, "id"));
    WT_CHECK(s_check_string(p, where, "region"));
    WT_CHECK(s_check_string(p, where, "state"));
    WT_CHECK(s_check_count(p, where, "stage", -1));
    WT_CHECK(s_check_count(p, where, "replica", -1));
  }
  return WT_OK;
}

static int s_check_history(const cJSON *st) {
  const cJSON *h = cJSON_GetObjectItemCaseSensitive(st, "loss_history");
  WT_CHECK(s_need("", "loss_history", cJSON_IsArray(h), "an array"));
  int n = cJSON_GetArraySize(h);
  if (n > COORDINATOR_HTTP_LOSS_MAX)
    return wt_fail(WT_EINVAL, "status \"loss_history\" has %d points; at most %d (thin it)", n,
                   COORDINATOR_HTTP_LOSS_MAX);
  int i = 0;
  const cJSON *pt;
  cJSON_ArrayForEach(pt, h) {
    if (!cJSON_IsArray(pt) || cJSON_GetArraySize(pt) != 2 ||
        !cJSON_IsNumber(cJSON_GetArrayItem(pt, 0)) || !cJSON_IsNumber(cJSON_GetArrayItem(pt, 1)))
      return wt_fail(WT_EINVAL, "status \"loss_history\"[%d] is not a [step, loss] pair", i);
    i++;
  }
  return WT_OK;
}

static int s_check_sync(const cJSON *st) {
  const cJSON *sync = cJSON_GetObjectItemCaseSensitive(st, "sync");
  if (!sync) return WT_OK;
  WT_CHECK(s_need("", "sync", cJSON_IsObject(sync), "an object"));
  WT_CHECK(s_check_count(sync, "sync.", "diloco", 0));
  static const char *const text[] = {"preset", "grad_codec", "grad_ef", "act_codec"};
  for (size_t i = 0; i < WT_ARRAY_LEN(text); i++) WT_CHECK(s_check_string(sync, "sync.", text[i]));
  static const char *const num[] = {"outer_lr", "outer_momentum"};
  for (size_t i = 0; i < WT_ARRAY_LEN(num); i++) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(sync, num[i]);
    WT_CHECK(s_need("sync.", num[i], cJSON_IsNumber(v) && v->valuedouble >= 0, "a number >= 0"));
  }
  return WT_OK;
}

int coordinator_http_status_check(const cJSON *st) {
  if (!cJSON_IsObject(st)) return wt_fail(WT_EINVAL, "status is not a JSON object");
  const cJSON *version = cJSON_GetObjectItemCaseSensitive(st, "version");
  if (!cJSON_IsNumber(version) || version->valueint != 1)
    return wt_fail(WT_EINVAL, "status \"version\": missing or not 1");
  WT_CHECK(s_check_string(st, "", "run"));
  WT_CHECK(s_check_string(st, "", "state"));
  WT_CHECK(s_check_count(st, "", "epoch", 0));
  WT_CHECK(s_check_count(st, "", "step", 0));
  WT_CHECK(s_check_count(st, "", "stages", 0));
  WT_CHECK(s_check_count(st, "", "replicas", 0));
  const cJSON *loss = cJSON_GetObjectItemCaseSensitive(st, "loss");
  WT_CHECK(s_need("", "loss", cJSON_IsNumber(loss) || cJSON_IsNull(loss), "a number or null"));
  const cJSON *tps = cJSON_GetObjectItemCaseSensitive(st, "tokens_per_s");
  WT_CHECK(
      s_need("", "tokens_per_s", cJSON_IsNumber(tps) && tps->valuedouble >= 0, "a number >= 0"));
  const cJSON *links = cJSON_GetObjectItemCaseSensitive(st, "bytes_per_s");
  WT_CHECK(s_need("", "bytes_per_s", cJSON_IsObject(links), "an object"));
  for (const cJSON *l = links->child; l; l = l->next)
    if (!cJSON_IsNumber(l) || l->valuedouble < 0)
      return wt_fail(WT_EINVAL, "status \"bytes_per_s\".\"%s\" is not a number >= 0", l->string);
  WT_CHECK(s_check_history(st));
  WT_CHECK(s_check_sync(st));
  return s_check_peers(st);
}
