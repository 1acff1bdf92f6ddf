/* status — the JSON snapshot of the coordinator's state that /status and /metrics are built on. */
#include "coordinator/coordinator_internal.h"

#include "common/common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static void s_num(cJSON *o, const char *name, double v) {
  if (isfinite(v)) cJSON_AddNumberToObject(o, name, v);
  else cJSON_AddNullToObject(o, name);
}

char *coordinator_status_json(coordinator *c) {
  static const char *phases[] = {"idle", "binding", "running", "draining"};
  cJSON *o = cJSON_CreateObject();
  cJSON_AddStringToObject(o, "endpoint", c->endpoint);
  cJSON_AddStringToObject(o, "public_key", c->pub);
  cJSON_AddNumberToObject(o, "epoch", c->epoch);
  cJSON_AddStringToObject(o, "epoch_kind", c->epoch_kind);
  cJSON_AddStringToObject(o, "phase", phases[c->phase]);
  cJSON_AddStringToObject(o, "run", c->run_complete == 1   ? "complete"
                                    : c->run_complete == 2 ? "stopped"
                                                           : "training");
  cJSON_AddNumberToObject(o, "stages", c->cfg.stages);
  cJSON_AddNumberToObject(o, "replicas", c->cfg.replicas);
  cJSON_AddNumberToObject(o, "steps", c->cfg.steps);
  cJSON_AddNumberToObject(o, "step", (double)c->last_step);
  s_num(o, "loss", c->last_loss);
  s_num(o, "first_loss", c->first_loss);
  cJSON_AddNumberToObject(o, "committed_step", (double)c->committed_step);
  s_num(o, "predicted_cost_ga_s", c->cost_ga);
  s_num(o, "predicted_cost_random_s", c->cost_random);
  s_num(o, "recovery_s", c->recovery_s);
  cJSON_AddNumberToObject(o, "refused", (double)c->refused);
  double tok = 0, sent = 0, recv = 0;
  cJSON *peers = cJSON_AddArrayToObject(o, "peers");
  for (int i = 0; i < c->n_peers; i++) {
    const coord_peer *p = &c->peers[i];
    cJSON *j = cJSON_CreateObject();
    cJSON_AddNumberToObject(j, "id", p->id);
    cJSON_AddStringToObject(j, "key", p->key);
    cJSON_AddStringToObject(j, "status", p->status == PEER_LIVE ? "live" : "gone");
    cJSON_AddStringToObject(j, "role", p->epoch_rank < 0 ? "standby"
                                       : !strcmp(c->epoch_kind, "probe") ? "probe" : "train");
    cJSON_AddNumberToObject(j, "stage", p->epoch_rank < 0 ? -1 : p->epoch_rank / c->cfg.replicas);
    cJSON_AddNumberToObject(j, "replica",
                            p->epoch_rank < 0 ? -1 : p->epoch_rank % c->cfg.replicas);
    cJSON_AddStringToObject(j, "region", p->region);
    cJSON_AddStringToObject(j, "device", p->kind);
    cJSON_AddNumberToObject(j, "flops", p->flops);
    cJSON_AddNumberToObject(j, "step", (double)p->step);
    s_num(j, "loss", p->loss);
    cJSON_AddNumberToObject(j, "tokens_s", p->tokens_s);
    cJSON_AddNumberToObject(j, "bytes_sent", p->bytes_sent);
    cJSON_AddNumberToObject(j, "bytes_recv", p->bytes_recv);
    cJSON_AddItemToArray(peers, j);
    if (p->status == PEER_LIVE && p->epoch_rank >= 0) {
      if (p->epoch_rank % c->cfg.replicas == 0 && p->epoch_rank / c->cfg.replicas == 0)
        tok += p->tokens_s;
      sent += p->bytes_sent, recv += p->bytes_recv;
    }
  }
  cJSON_AddNumberToObject(o, "tokens_s", tok * c->cfg.replicas);
  cJSON_AddNumberToObject(o, "bytes_sent", sent);
  cJSON_AddNumberToObject(o, "bytes_recv", recv);
  char *text = cJSON_PrintUnformatted(o);
  cJSON_Delete(o);
  return text;
}
