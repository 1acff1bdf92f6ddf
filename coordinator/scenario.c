/* scenario — the WAN the coordinator emulates: the netsim scenario it loads and the index of a
 * peer's region in it. */
#include "coordinator/coordinator_internal.h"

#include "common/common.h"

#include <stdio.h>
#include <string.h>

int coord_scenario_load(coordinator *c) {
  if (!c->cfg.scenario[0]) return WT_OK;
  WT_CHECK_NEW(c->scenario_set, netsim_scenario_set_load(c->cfg.scenario));
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
