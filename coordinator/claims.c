/* claims — a peer's claimed FLOP/s (its REGISTER's device.flops) set against the compute it
 * measures while training (its heartbeat's "compute": steps and their forward / backward
 * seconds). A claim is judged against the other members' claims, not against an absolute: what
 * a device reaches on a small model is a fraction of its peak, alike on every honest peer. A
 * peer whose claim over its measured speed stays more than COORD_CLAIM_FACTOR times the members'
 * lower median over COORD_CLAIM_STRIKES reports in a row is flagged, once: logged as an event,
 * listed in /status and /metrics, and placed by its measured speed on the members' scale
 * (coord_claim_flops). docs/trust.md. */
#include "coordinator/coordinator_internal.h"

#include "common/common.h"
#include "model/gpt.h"                   /* defines: gpt_config_num_active_params */
#include "parallel/runtime/run_config.h" /* defines: parallel_run_config_model */

#include <math.h>
#include <stdio.h>
#include <string.h>

enum {
  COORD_CLAIM_FACTOR = 10,  /* a claim this many times the members' (claim / measured) ... */
  COORD_CLAIM_STRIKES = 3,  /* ... in this many reports in a row, each with new steps */
  COORD_CLAIM_MIN_STEPS = 2 /* the first step also warms up: a measurement needs more */
};

/* A tasklet's forward and backward FLOPs per step: 6 per active parameter and token, for its
 * stage's share of the parameters and its replica's tokens. The corpus is not the coordinator's:
 * a nominal vocabulary of 64 rows, as the placement's cost model takes. 0 when the shape does
 * not make a model. */
static double s_flops_per_step(const coordinator *c) {
  const parallel_run_config *run = &c->cfg.run;
  gpt_config g;
  if (parallel_run_config_model(run, 64, &g) != WT_OK) return 0;
  return 6.0 * (double)gpt_config_num_active_params(&g) / run->stages *
         ((double)run->batch / run->replicas * run->seq);
}

/* The lower median of v[0..n) (sorts v): with a majority of honest values, one of theirs. */
static double s_lower_median(double *v, int n) {
  for (int i = 1; i < n; i++)
    for (int j = i; j > 0 && v[j] < v[j - 1]; j--) {
      double t = v[j];
      v[j] = v[j - 1], v[j - 1] = t;
    }
  return v[(n - 1) / 2];
}

/* The members' lower median of claimed / measured this epoch; 0 with fewer than two. */
static double s_members_ratio(const coordinator *c, int epoch) {
  static double r[COORD_MAX_MEMBERS]; /* the coordinator's loop thread only */
  int n = 0;
  for (int i = 0; i < c->n_members; i++) {
    const coord_peer *q = &c->peers[c->members[i]];
    if (q->claim_epoch == epoch && q->claim_measured > 0 && q->flops > 0)
      r[n++] = q->flops / q->claim_measured;
  }
  return n >= 2 ? s_lower_median(r, n) : 0;
}

/* Takes p's measured compute from a heartbeat (or its RESULT); 0 when it has none or none new.
 * Outside input: anything out of range is dropped. */
static int s_take_compute(coordinator *c, coord_peer *p, const cJSON *body, int epoch) {
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(body, "compute");
  double steps = coordinator_field_num(m, "steps", -1), s = coordinator_field_num(m, "s", -1);
  if (!cJSON_IsObject(m) || !(steps >= COORD_CLAIM_MIN_STEPS && steps < 1e12) ||
      steps != floor(steps) || !(s > 0 && s < 1e9))
    return 0;
  if (p->claim_epoch == epoch && (long)steps <= p->claim_steps) return 0; /* nothing new */
  const double work = s_flops_per_step(c);
  if (work <= 0) return 0;
  if (p->claim_epoch != epoch) p->claim_strikes = 0;
  p->claim_epoch = epoch, p->claim_steps = (long)steps;
  p->claim_measured = work * steps / s;
  return 1;
}

static void s_flag(coordinator *c, coord_peer *p, double ratio, double members) {
  p->claim_flagged = 1;
  coord_event(c, "claim",
              "peer %d (key %.8s…) claims %.3g FLOP/s but measures %.3g FLOP/s over %ld steps: "
              "%.0f× the members' claim per measured FLOP/s, in %d reports in a row; it is placed "
              "by its measured speed (%.3g FLOP/s on the members' scale)",
              p->id, p->key, p->flops, p->claim_measured, p->claim_steps, ratio / members,
              p->claim_strikes, p->claim_measured * members);
}

void coord_claim_on_heartbeat(coordinator *c, coord_peer *p, const cJSON *body) {
  const cJSON *result = cJSON_GetObjectItemCaseSensitive(body, "result");
  int epoch = coordinator_field_int(body, "epoch", -1);
  if (!cJSON_GetObjectItemCaseSensitive(body, "compute") && cJSON_IsObject(result)) {
    body = result; /* the idle peer's last RESULT, repeated */
    epoch = coordinator_field_int(result, "epoch", -1);
  }
  if (epoch != c->epoch || p->epoch_rank < 0 || strcmp(c->epoch_kind, "train") || p->flops <= 0 ||
      !s_take_compute(c, p, body, epoch))
    return;
  const double members = s_members_ratio(c, epoch), ratio = p->flops / p->claim_measured;
  if (members <= 0) return;
  p->claim_strikes = ratio > COORD_CLAIM_FACTOR * members ? p->claim_strikes + 1 : 0;
  if (p->claim_flagged) p->claim_placed = p->claim_measured * members; /* follows the measure */
  if (!p->claim_flagged && p->claim_strikes >= COORD_CLAIM_STRIKES) {
    p->claim_placed = p->claim_measured * members;
    s_flag(c, p, ratio, members);
  }
}

double coord_claim_flops(const coord_peer *p) {
  return p->claim_flagged ? p->claim_placed : p->flops;
}

void coord_claim_status(coordinator *c, cJSON *status) {
  cJSON *claims = cJSON_AddArrayToObject(status, "claims");
  int flagged = 0;
  for (int i = 0; i < c->n_peers; i++) {
    const coord_peer *p = &c->peers[i];
    if (p->claim_epoch <= 0) continue;
    cJSON *e = cJSON_CreateObject();
    cJSON_AddNumberToObject(e, "id", p->id);
    cJSON_AddNumberToObject(e, "flops_claimed", p->flops);
    cJSON_AddNumberToObject(e, "flops_measured", p->claim_measured);
    cJSON_AddNumberToObject(e, "flops_placed", coord_claim_flops(p));
    cJSON_AddBoolToObject(e, "flagged", p->claim_flagged);
    cJSON_AddItemToArray(claims, e);
    flagged += p->claim_flagged;
  }
  cJSON_AddNumberToObject(status, "peers_claim_flagged", flagged);
}
