/* sideline — members that fail an epoch in silence: one that does not bind its data socket
 * within the bind deadline, or does not start the epoch within it after START, stalls every
 * epoch it is given, and a deadline cannot tell a firewalled port from a slow peer. So such a
 * member is left out of the epochs formed in the next cfg.sideline_s seconds, doubling with each
 * exclusion in a row (at most 64 times), and then given a seat again; an epoch it completes
 * clears its record. The others' run goes on meanwhile.
 *
 * A member whose data links fail after it started looks healthy to the control plane: it still
 * heartbeats. What the coordinator sees is its neighbours' reports: their transports time out
 * waiting for it and say which rank they waited for. One such report cannot tell the stuck end
 * from the healthy one (each waits for the other), but a member two or more others time out on
 * is the common end of their failures; and one that never reports the end of an epoch it started,
 * while heartbeating, is stuck in it. Both are sidelined as a silent member is. Timeouts in an
 * epoch that lost a member accuse no one: waits chain (a member waiting on the lost one makes its
 * own neighbours wait on it), so the most timed-out member there is often an innocent link of
 * that chain, and the lost member already explains them. */
#include "coordinator/coordinator_internal.h"

#include "common/common.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define S_BACKOFF_DOUBLINGS 6

void coord_sideline(coordinator *c, int i, const char *why) {
  coord_peer *p = &c->peers[i];
  double backoff = c->cfg.sideline_s * ldexp(1, WT_MIN(p->sidelinings, S_BACKOFF_DOUBLINGS));
  p->sidelinings++;
  p->sidelined_until = wt_now_s() + backoff;
  snprintf(p->sidelined_why, sizeof p->sidelined_why, "%s", why);
  coord_event(c, "sidelined",
              "peer %d is left out of epochs for %.0f s (%d in a row), then retried: %s", p->id,
              backoff, p->sidelinings, why);
}

int coord_sideline_available(const coordinator *c, int i, double now) {
  return now >= c->peers[i].sidelined_until;
}

void coord_sideline_on_success(coordinator *c, int i) {
  coord_peer *p = &c->peers[i];
  p->sidelinings = 0, p->sidelined_until = 0, p->sidelined_why[0] = 0;
}

/* The rank a transport timeout names, or -1 (parallel/transport/zmq_transport.c's wording). */
static int s_named_rank(const char *error) {
  static const char *const marks[] = {"no message from rank ", "send to rank "};
  for (size_t k = 0; k < WT_ARRAY_LEN(marks); k++) {
    const char *at = error ? strstr(error, marks[k]) : NULL;
    int rank = -1;
    if (at && sscanf(at + strlen(marks[k]), "%d", &rank) == 1) return rank;
  }
  return -1;
}

void coord_sideline_note_failure(coordinator *c, coord_peer *reporter, int code,
                                 const char *error) {
  int rank = code == WT_ETIMEOUT ? s_named_rank(error) : -1;
  if (rank < 0 || rank >= c->n_members || rank == reporter->epoch_rank ||
      reporter->accusing_epoch == c->epoch) /* a repeated RESULT counts once */
    return;
  reporter->accusing_epoch = c->epoch;
  coord_peer *p = &c->peers[c->members[rank]];
  if (p->accused_epoch != c->epoch) p->accused_epoch = c->epoch, p->accusations = 0;
  p->accusations++;
}

/* The member most timed out on, when two or more did and no other as often; -1 otherwise. */
static int s_most_accused(const coordinator *c) {
  int best = -1, most = 1, tie = 0;
  for (int r = 0; r < c->n_members; r++) {
    const coord_peer *p = &c->peers[c->members[r]];
    int n = p->accused_epoch == c->epoch ? p->accusations : 0;
    if (n > most)
      best = r, most = n, tie = 0;
    else if (n == most && best >= 0)
      tie = 1;
  }
  return tie ? -1 : best;
}

void coord_sideline_on_epoch_over(coordinator *c) {
  char why[160];
  int accused = c->lost_member_epoch == c->epoch ? -1 : s_most_accused(c);
  for (int r = 0; r < c->n_members; r++) {
    coord_peer *p = &c->peers[c->members[r]];
    if (p->status != PEER_LIVE || p->finished) continue;
    if (r == accused)
      snprintf(why, sizeof why,
               "its data links failed after it started epoch %d (%s): %d members timed out "
               "waiting for it",
               c->epoch, c->epoch_kind, p->accusations);
    else if (p->result == 0 && p->started_epoch == c->epoch)
      snprintf(why, sizeof why,
               "it started epoch %d (%s) but never reported its end, though it heartbeats",
               c->epoch, c->epoch_kind);
    else
      continue;
    coord_sideline(c, c->members[r], why);
  }
}
