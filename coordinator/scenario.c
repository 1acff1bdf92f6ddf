/* scenario — the WAN the coordinator emulates: the netsim scenario it loads (and a fixed
 * assignment of its devices), the region and the device each peer emulates, and the members'
 * emulated links (netsim_emulation_row, the one home of what the transport emulates). */
#include "coordinator/coordinator_internal.h"

#include "common/common.h"

#include <stdio.h>
#include <string.h>

static int s_find(coordinator *c) {
  if (!c->cfg.scenario_name[0]) {
    c->scenario = netsim_scenario_set_get(c->scenario_set, 0);
    return WT_OK;
  }
  int rc = netsim_scenario_set_find(c->scenario_set, c->cfg.scenario_name, &c->scenario);
  if (rc != WT_OK) {
    char why[2300];
    snprintf(why, sizeof why, "%s", wt_last_error());
    wt_fail(rc, "--scenario %s: %s (--scenario-name NAME)", c->cfg.scenario, why);
  }
  return rc;
}

int coord_scenario_load(coordinator *c) {
  if (!c->cfg.scenario[0]) return WT_OK;
  WT_CHECK_NEW(c->scenario_set, netsim_scenario_set_load(c->cfg.scenario));
  WT_CHECK(s_find(c));
  const int S = c->cfg.run.stages, R = c->cfg.run.replicas;
  const int n = netsim_scenario_network(c->scenario)->n;
  if (c->cfg.assignment[0] && n != S * R)
    return wt_fail(WT_EINVAL,
                   "--assignment places %d x %d tasklets on scenario %s's devices, but it has %d",
                   S, R, netsim_scenario_name(c->scenario), n);
  if (c->cfg.assignment[0])
    WT_CHECK(netsim_assignment_load(c->cfg.assignment, S, R, &c->fixed_plan));
  return WT_OK;
}

void coord_scenario_close(coordinator *c) {
  if (c->fixed_plan) assign_plan_destroy(&c->fixed_plan);
  netsim_scenario_set_destroy(&c->scenario_set);
  c->scenario = NULL;
}

static int s_device_taken(coordinator *c, int i, int d) {
  for (int k = 0; k < c->n_peers; k++)
    if (k != i && c->peers[k].status == PEER_LIVE && c->peers[k].device_index == d) return 1;
  return 0;
}

int coord_scenario_device(coordinator *c, int i) {
  if (!c->scenario) return -1;
  const coord_peer *p = &c->peers[i];
  const int n = netsim_scenario_network(c->scenario)->n;
  if (p->device_index >= 0 && p->device_index < n &&
      netsim_scenario_region_of(c->scenario, p->device_index) == p->region_index &&
      !s_device_taken(c, i, p->device_index))
    return p->device_index;
  int first = -1;
  for (int d = 0; d < n; d++) {
    if (netsim_scenario_region_of(c->scenario, d) != p->region_index) continue;
    if (first < 0) first = d;
    if (!s_device_taken(c, i, d)) return d;
  }
  return first;
}

int coord_scenario_row(coordinator *c, int r, netsim_emulation *out) {
  int device[COORD_MAX_MEMBERS];
  for (int j = 0; j < c->n_members; j++) device[j] = c->peers[c->members[j]].device_index;
  return netsim_emulation_row(c->scenario, device, c->n_members, r, out);
}

int coord_region_index(coordinator *c, const char *label, char *why, size_t size) {
  if (!c->scenario) return -1;
  int k = netsim_scenario_region_count(c->scenario);
  for (int r = 0; r < k; r++)
    if (!strcmp(label, netsim_scenario_region_name(c->scenario, r))) return r;
  char names[512] = "";
  for (int r = 0; r < k; r++) {
    strncat(names, netsim_scenario_region_name(c->scenario, r), sizeof names - strlen(names) - 3);
    if (r + 1 < k) strcat(names, ", ");
  }
  snprintf(why, size,
           "region '%s' is not in the emulated scenario %s; start peerd with "
           "--region one of: %s",
           label, netsim_scenario_name(c->scenario), names);
  return -1;
}
