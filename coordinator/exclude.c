/* exclude — members that fail an epoch in silence: one that does not bind its data socket
 * within the bind deadline, or does not start the epoch within it after START, stalls every
 * epoch it is given, and a deadline cannot tell a firewalled port from a slow peer. So such a
 * member is left out of the epochs formed in the next cfg.exclude_s seconds, doubling with each
 * exclusion in a row (at most 64 times), and then given a seat again; an epoch it completes
 * clears its record. The others' run goes on meanwhile. */
#include "coordinator/coordinator_internal.h"

#include "common/common.h"

#include <math.h>
#include <stdio.h>

#define S_BACKOFF_DOUBLINGS 6

void coord_exclude(coordinator *c, int i, const char *why) {
  coord_peer *p = &c->peers[i];
  double backoff = c->cfg.exclude_s * ldexp(1, WT_MIN(p->exclusions, S_BACKOFF_DOUBLINGS));
  p->exclusions++;
  p->excluded_until = wt_now_s() + backoff;
  snprintf(p->excluded_why, sizeof p->excluded_why, "%s", why);
  coord_event(c, "excluded",
              "peer %d is left out of epochs for %.0f s (exclusion %d in a row), then retried: %s",
              p->id, backoff, p->exclusions, why);
}

int coord_exclude_available(const coordinator *c, int i, double now) {
  return now >= c->peers[i].excluded_until;
}

void coord_exclude_on_success(coordinator *c, int i) {
  coord_peer *p = &c->peers[i];
  p->exclusions = 0, p->excluded_until = 0, p->excluded_why[0] = 0;
}
