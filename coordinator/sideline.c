/* sideline — members that fail an epoch in silence: one that does not bind its data socket
 * within the bind deadline, or does not start the epoch within it after START, stalls every
 * epoch it is given, and a deadline cannot tell a firewalled port from a slow peer. So such a
 * member is left out of the epochs formed in the next cfg.sideline_s seconds, doubling with each
 * exclusion in a row (at most 64 times), and then given a seat again; an epoch it completes
 * clears its record. The others' run goes on meanwhile. */
#include "coordinator/coordinator_internal.h"

#include "common/common.h"

#include <math.h>
#include <stdio.h>

#define S_BACKOFF_DOUBLINGS 6

void coord_sideline(coordinator *c, int i, const char *why) {
  coord_peer *p = &c->peers[i];
  double backoff = c->cfg.sideline_s * ldexp(1, WT_MIN(p->sidelinings, S_BACKOFF_DOUBLINGS));
  p->sidelinings++;
  p->sidelined_until = wt_now_s() + backoff;
  snprintf(p->sidelined_why, sizeof p->sidelined_why, "%s", why);
  coord_event(c, "sidelined",
              "peer %d is left out of epochs for %.0f s (%d in a row), then retried: %s",
              p->id, backoff, p->sidelinings, why);
}

int coord_sideline_available(const coordinator *c, int i, double now) {
  return now >= c->peers[i].sidelined_until;
}

void coord_sideline_on_success(coordinator *c, int i) {
  coord_peer *p = &c->peers[i];
  p->sidelinings = 0, p->sidelined_until = 0, p->sidelined_why[0] = 0;
}
