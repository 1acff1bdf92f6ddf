/* emulation — what the transport's WAN emulation paces for a group of peers placed on a
 * scenario's devices: each member's one-way latency and path bandwidth to every other, and its
 * access link (uplink, downlink, and which members sit behind the same one), all read from the
 * one network model (netsim_scenario_network, netsim_scenario_access). */
#include "netsim/netsim.h"

#include "common/common.h"

#include <math.h>
#include <string.h>

/* The device whose link stands for the link from device d to itself: another device of d's
 * region (two peers emulating one device talk over the region's own link), else any other. */
static int s_stand_in(const netsim_scenario *sc, int d) {
  const int n = netsim_scenario_network(sc)->n, region = netsim_scenario_region_of(sc, d);
  for (int e = 0; e < n; e++)
    if (e != d && netsim_scenario_region_of(sc, e) == region) return e;
  return n > 1 ? (d == 0 ? 1 : 0) : d;
}

int netsim_emulation_row(const netsim_scenario *sc, const int *device, int n, int me,
                         netsim_emulation *out) {
  const assign_network *net = netsim_scenario_network(sc);
  if (n < 1 || me < 0 || me >= n)
    return wt_fail(WT_EINVAL, "emulation: member %d of a group of %d", me, n);
  for (int j = 0; j < n; j++)
    if (device[j] < 0 || device[j] >= net->n)
      return wt_fail(WT_EINVAL, "emulation: member %d is on device %d of a scenario of %d", j,
                     device[j], net->n);
  const assign_access *acc = netsim_scenario_access(sc);
  const int dm = device[me];
  out->up_Bps = out->down_Bps = 0;
  if (acc) {
    const int k = acc->link_of[dm];
    out->up_Bps = isfinite(acc->up_Bps[k]) ? acc->up_Bps[k] : 0;
    out->down_Bps = isfinite(acc->down_Bps[k]) ? acc->down_Bps[k] : 0;
  }
  for (int j = 0; j < n; j++) {
    int from = dm, to = device[j];
    if (j != me && to == from) to = s_stand_in(sc, from);
    out->latency_s[j] = j == me ? 0 : net->latency_s[from * net->n + to];
    out->bandwidth_Bps[j] = j == me ? 0 : net->bandwidth_Bps[from * net->n + to];
    out->same_access[j] = j == me || !acc || acc->link_of[device[j]] == acc->link_of[dm];
  }
  return WT_OK;
}
