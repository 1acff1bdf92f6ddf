/* trust — the coordinator's record per peer key of what the robust sync left out of the
 * aggregate, and the exclusion of a peer past the run's rule (coordinator_internal.h). */
#include "coordinator/coordinator_internal.h"

#include "common/common.h"
#include "parallel/runtime/run_config.h" /* defines: parallel_run_config_excludes */

#include <math.h>
#include <stdio.h>
#include <string.h>

/* A count from a report: a non-negative whole number below 1e12, else -1 (refused). */
static long s_count(const cJSON *v) {
  if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble < 1e12) ||
      v->valuedouble != floor(v->valuedouble))
    return -1;
  return (long)v->valuedouble;
}

/* Takes p's report of its stage's evidence this epoch; 0 when there is none or it is malformed
 * (dropped, logged: a report is outside input). */
static int s_take_report(coordinator *c, coord_peer *p, const cJSON *t, int epoch) {
  const int R = c->cfg.run.replicas;
  const cJSON *flagged = cJSON_GetObjectItemCaseSensitive(t, "flagged");
  long syncs = s_count(cJSON_GetObjectItemCaseSensitive(t, "syncs"));
  if (syncs < 0 || !cJSON_IsArray(flagged) || cJSON_GetArraySize(flagged) != R ||
      R > COORD_TRUST_REPLICAS) {
    WT_WARN("coordinator: peer %d sent a malformed trust report (want syncs and %d counts); "
            "dropped",
            p->id, R);
    return 0;
  }
  long counts[COORD_TRUST_REPLICAS];
  for (int r = 0; r < R; r++)
    if ((counts[r] = s_count(cJSON_GetArrayItem(flagged, r))) < 0 || counts[r] > syncs) {
      WT_WARN("coordinator: peer %d's trust report counts %s flags for replica %d; dropped", p->id,
              counts[r] < 0 ? "malformed" : "more than its syncs'", r);
      return 0;
    }
  p->trust_report_epoch = epoch;
  p->trust_report_syncs = syncs;
  memcpy(p->trust_report, counts, sizeof(long) * (size_t)R);
  return 1;
}

/* The lower median of v[0..n): with a majority of honest values, a value between two of them. */
static long s_lower_median(long *v, int n) {
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
      long t = v[j];
      v[j] = v[j - 1], v[j - 1] = t;
    }
  return v[(n - 1) / 2];
}

/* Moves x's count of an earlier epoch into its run total. */
static void s_fold(coord_peer *x, int epoch) {
  if (x->trust_epoch == epoch) return;
  x->trust_flagged += x->trust_ep_flagged, x->trust_syncs += x->trust_ep_syncs;
  x->trust_ep_flagged = x->trust_ep_syncs = 0;
  x->trust_epoch = epoch;
}

static void s_exclude(coordinator *c, coord_peer *x, const char *why) {
  char meta[COORD_KEY_LEN + 16];
  snprintf(meta, sizeof meta, "excluded:%s", x->key);
  coord_state_meta_set(c, meta, why);
  int k = c->n_excluded++;
  if (k < COORD_MAX_EXCLUDED) {
    c->excluded_id[k] = x->id;
    memcpy(c->excluded_key[k], x->key, sizeof c->excluded_key[k]);
    memcpy(c->excluded_why[k], why, sizeof c->excluded_why[k]);
  }
  coord_event(c, "excluded",
              "peer %d (key %.8s…): %s; it is left out of every plan and its key "
              "refused for the rest of the run",
              x->id, x->key, why);
  char told[600];
  snprintf(told, sizeof told, "this key was excluded from the run: %s", why);
  coord_trust_tell_excluded(c, x->route, x->route_len, told);
  coord_epoch_on_lost(c, x, "it was excluded for lying contributions");
  x->status = PEER_GONE; /* the next plan is made without it, as for a lost member */
  coord_state_save_peer(c, x);
}

/* What stage `stage`'s reporters of this epoch agree about its replica r (world rank w). */
static void s_judge(coordinator *c, int epoch, int stage, int r) {
  const int R = c->cfg.run.replicas;
  long flags[COORD_TRUST_REPLICAS], syncs[COORD_TRUST_REPLICAS];
  int n = 0, x = -1;
  for (int i = 0; i < c->n_peers; i++) {
    const coord_peer *q = &c->peers[i];
    if (q->epoch_rank / R != stage || q->epoch_rank < 0) continue;
    if (q->epoch_rank == stage * R + r) x = i;
    if (q->trust_report_epoch != epoch) continue;
    flags[n] = q->trust_report[r], syncs[n] = q->trust_report_syncs, n++;
  }
  if (x < 0 || 2 * n <= R) return; /* no majority of the stage has reported yet */
  coord_peer *p = &c->peers[x];
  coord_state_defer_peer(c, x); /* its trust record goes with the next flush */
  s_fold(p, epoch);
  p->trust_ep_flagged = WT_MAX(p->trust_ep_flagged, s_lower_median(flags, n));
  p->trust_ep_syncs = WT_MAX(p->trust_ep_syncs, s_lower_median(syncs, n));
  if (p->status == PEER_LIVE &&
      parallel_run_config_excludes(&c->cfg.run, p->trust_flagged + p->trust_ep_flagged,
                                   p->trust_syncs + p->trust_ep_syncs)) {
    char why[256];
    snprintf(why, sizeof why,
             "its contributions were left out of %ld of its %ld robust syncs (%s), past "
             "trust-flags %d",
             p->trust_flagged + p->trust_ep_flagged, p->trust_syncs + p->trust_ep_syncs,
             p->trust_why[0] ? p->trust_why : "?", c->cfg.run.trust_flags);
    s_exclude(c, p, why);
  }
}

/* Takes the failed spot checks q reports having made of its stage's replicas: what is new
 * since its last report of the epoch counts against the member checked, with q among its
 * checkers. Counts that are malformed or go backwards are dropped (logged). */
static void s_take_spot(coordinator *c, coord_peer *q, const cJSON *t, int epoch, int stage) {
  const cJSON *failed = cJSON_GetObjectItemCaseSensitive(t, "spot_failed"),
              *checked = cJSON_GetObjectItemCaseSensitive(t, "spot_checked");
  const int R = c->cfg.run.replicas;
  if (!failed) return;
  if (q->spot_report_epoch != epoch) {
    memset(q->spot_report, 0, sizeof q->spot_report);
    memset(q->spot_report_checked, 0, sizeof q->spot_report_checked);
    q->spot_report_epoch = epoch;
  }
  long counts[COORD_TRUST_REPLICAS], made[COORD_TRUST_REPLICAS];
  for (int r = 0; r < R; r++)
    if (!cJSON_IsArray(failed) || cJSON_GetArraySize(failed) != R ||
        (counts[r] = s_count(cJSON_GetArrayItem(failed, r))) < q->spot_report[r] ||
        (made[r] = checked ? s_count(cJSON_GetArrayItem(checked, r)) : counts[r]) < counts[r] ||
        made[r] < q->spot_report_checked[r]) {
      WT_WARN("coordinator: peer %d sent malformed spot-check counts; dropped", q->id);
      return;
    }
  for (int i = 0; i < c->n_peers; i++) {
    coord_peer *x = &c->peers[i];
    if (x->epoch_rank < 0 || x->epoch_rank / R != stage || x == q) continue;
    const int r = x->epoch_rank % R;
    const long fresh = counts[r] - q->spot_report[r];
    if (made[r] != q->spot_report_checked[r]) coord_state_defer_peer(c, i);
    x->spot_checks += made[r] - q->spot_report_checked[r];
    if (fresh <= 0) continue;
    x->spot_fails += fresh;
    int known = 0;
    for (int k = 0; k < x->n_spot_checkers; k++) known |= x->spot_checkers[k] == q->id;
    if (!known && x->n_spot_checkers < (int)WT_ARRAY_LEN(x->spot_checkers))
      x->spot_checkers[x->n_spot_checkers++] = q->id;
    if (x->status == PEER_LIVE &&
        parallel_run_config_spot_excludes(&c->cfg.run, x->n_spot_checkers)) {
      char why[256];
      snprintf(why, sizeof why,
               "it failed %ld spot checks made by %d peers (what it sent was not what a "
               "recompute of its step gives)",
               x->spot_fails, x->n_spot_checkers);
      s_exclude(c, x, why);
    }
  }
  memcpy(q->spot_report, counts, sizeof(long) * (size_t)R);
  memcpy(q->spot_report_checked, made, sizeof(long) * (size_t)R);
}

/* The reasons a report gives for replica r, kept for the peer's record. */
static void s_take_why(coordinator *c, const cJSON *t, int stage) {
  const cJSON *why = cJSON_GetObjectItemCaseSensitive(t, "why");
  const int R = c->cfg.run.replicas;
  for (int i = 0; i < c->n_peers; i++) {
    coord_peer *q = &c->peers[i];
    if (q->epoch_rank < 0 || q->epoch_rank / R != stage) continue;
    const char *s = cJSON_GetStringValue(cJSON_GetArrayItem(why, q->epoch_rank % R));
    if (s && s[0] && strlen(s) < sizeof q->trust_why &&
        strspn(s, "abcdefghijklmnopqrstuvwxyz,") == strlen(s))
      snprintf(q->trust_why, sizeof q->trust_why, "%s", s);
  }
}

void coord_trust_on_heartbeat(coordinator *c, coord_peer *p, const cJSON *body) {
  coord_claim_on_heartbeat(c, p, body);
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(body, "trust");
  const cJSON *result = cJSON_GetObjectItemCaseSensitive(body, "result");
  int epoch = coordinator_field_int(body, "epoch", -1);
  if (!t && cJSON_IsObject(result)) { /* the idle peer's last RESULT, repeated */
    t = cJSON_GetObjectItemCaseSensitive(result, "trust");
    epoch = coordinator_field_int(result, "epoch", -1);
  }
  if (!cJSON_IsObject(t) || !strcmp(c->cfg.run.robust, "none") || epoch != c->epoch ||
      p->epoch_rank < 0 || strcmp(c->epoch_kind, "train"))
    return;
  if (!s_take_report(c, p, t, epoch)) return;
  const int R = c->cfg.run.replicas, stage = p->epoch_rank / R;
  s_take_why(c, t, stage);
  for (int r = 0; r < R; r++) s_judge(c, epoch, stage, r);
  s_take_spot(c, p, t, epoch, stage);
}

void coord_trust_tell_excluded(coordinator *c, const unsigned char *route, size_t route_len,
                               const char *why) {
  coord_peer to = {0};
  memcpy(to.route, route, WT_MIN(route_len, sizeof to.route));
  to.route_len = WT_MIN(route_len, sizeof to.route);
  cJSON *b = cJSON_CreateObject();
  cJSON_AddStringToObject(b, "reason", why);
  cJSON_AddBoolToObject(b, "excluded", 1);
  coord_send(c, &to, COORD_CMD_REFUSED, b);
  cJSON_Delete(b);
}

int coord_trust_refuses(coordinator *c, const char *key, char *why, size_t size) {
  char meta[COORD_KEY_LEN + 16], reason[512];
  snprintf(meta, sizeof meta, "excluded:%s", key);
  if (!coord_state_meta_get(c, meta, reason, sizeof reason) || !reason[0]) return 0; /* 1: found */
  snprintf(why, size, "this key was excluded from the run: %s", reason);
  return 1;
}

void coord_trust_status(coordinator *c, cJSON *status) {
  coord_claim_status(c, status);
  cJSON_AddNumberToObject(status, "peers_excluded", c->n_excluded);
  cJSON *ex = cJSON_AddArrayToObject(status, "excluded");
  for (int k = 0; k < WT_MIN(c->n_excluded, COORD_MAX_EXCLUDED); k++) {
    cJSON *e = cJSON_CreateObject();
    cJSON_AddNumberToObject(e, "id", c->excluded_id[k]);
    cJSON_AddStringToObject(e, "key", c->excluded_key[k]);
    cJSON_AddStringToObject(e, "reason", c->excluded_why[k]);
    cJSON_AddItemToArray(ex, e);
  }
  cJSON *tr = cJSON_AddArrayToObject(status, "trust");
  for (int i = 0; i < c->n_peers; i++) {
    const coord_peer *p = &c->peers[i];
    const long syncs = p->trust_syncs + p->trust_ep_syncs;
    if (!syncs) continue;
    cJSON *e = cJSON_CreateObject();
    cJSON_AddNumberToObject(e, "id", p->id);
    cJSON_AddNumberToObject(e, "flagged", (double)(p->trust_flagged + p->trust_ep_flagged));
    cJSON_AddNumberToObject(e, "syncs", (double)syncs);
    cJSON_AddStringToObject(e, "why", p->trust_why);
    cJSON_AddNumberToObject(e, "spot_checks", (double)p->spot_checks);
    cJSON_AddNumberToObject(e, "spot_failed", (double)p->spot_fails);
    cJSON_AddNumberToObject(e, "spot_checkers", p->n_spot_checkers);
    cJSON_AddItemToArray(tr, e);
  }
}
