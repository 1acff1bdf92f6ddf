/* recovery — where a DiLoCo run's members start after a loss (live recovery,
 * parallel_run_config_live_recovery): from live state, never from the checkpoint while a live
 * replica of every stage holds one.
 *
 * Between outer steps the replicas of a stage train on their own, so after a loss the members
 * hold different steps: the lost replica's pipeline stopped first, the others ran on until the
 * abort reached them, and the stages of one pipeline can be a step apart. What every replica of a
 * stage shares is the outer state (θ_outer, momentum) since the last outer step. So the epoch
 * starts at the newest step any member holds; a member whose own state of its stage is from the
 * same outer round keeps it (its inner weights) and skips the batches in between; any other
 * member — the replacement, or one whose state misses an outer step — takes a live replica's
 * outer state and starts its inner steps from the outer weights. Nobody trains a step again. */
#include "coordinator/coordinator_internal.h"

#include <string.h>

/* Whether peer q's held state can start stage st at `start`: its stage, not newer, no outer step
 * missed before `start` (one at `start` itself is taken at the start, tasklet.h). */
static int s_usable(const coordinator *c, int q, int st, long start) {
  const coord_peer *p = &c->peers[c->members[q]];
  const long H = c->cfg.run.sync.diloco;
  const long due = start / H + (start >= c->cfg.run.steps && start % H ? 1 : 0);
  return p->held_stage == st && p->held_step > 0 && p->held_step <= start &&
         p->held_outer >= (start - 1) / H && p->held_outer <= due;
}

/* Stage st's outer step count at `start`: the highest among its usable states (at an outer-step
 * boundary some may not have finished that outer step); -1 when no member holds st usably. */
static long s_stage_outer(const coordinator *c, int st, long start) {
  long best = -1;
  for (int q = 0; q < c->n_members; q++)
    if (s_usable(c, q, st, start) && c->peers[c->members[q]].held_outer > best)
      best = c->peers[c->members[q]].held_outer;
  return best;
}

static int s_agrees(const coordinator *c, int q, int st, long start, long outer) {
  return s_usable(c, q, st, start) && c->peers[c->members[q]].held_outer == outer;
}

/* Whether every stage can start at `start` from some member's state. */
static int s_covered(const coordinator *c, long start) {
  for (int st = 0; st < c->cfg.run.stages; st++)
    if (s_stage_outer(c, st, start) < 0) return 0;
  return 1;
}

/* Each member's source at `start`: itself when it holds an agreeing state of its stage, else a
 * holder of that stage (one staying in the stage first, spread over them). */
static void s_assign(coordinator *c, long start) {
  const int R = c->cfg.run.replicas, n = c->n_members;
  int next[COORD_MAX_MEMBERS] = {0};
  for (int r = 0; r < n; r++) {
    const int st = r / R;
    const long outer = s_stage_outer(c, st, start);
    c->state_from[r] = -1;
    if (s_agrees(c, r, st, start, outer)) {
      c->state_from[r] = r;
      continue;
    }
    for (int pass = 0; pass < 2 && c->state_from[r] < 0; pass++)
      for (int k = 0; k < n; k++) {
        int q = (next[st] + k) % n;
        if (s_agrees(c, q, st, start, outer) && (pass || q / R == st)) {
          c->state_from[r] = q, next[st] = q + 1;
          break;
        }
      }
  }
}

/* Logs where each member starts, so that the log shows no survivor going back. */
static void s_report(coordinator *c, long start) {
  char own[1024] = "", took[1024] = "";
  long back = 0;
  for (int r = 0; r < c->n_members; r++) {
    const coord_peer *p = &c->peers[c->members[r]];
    const int q = c->state_from[r];
    if (p->held_step > start) back += p->held_step - start;
    if (q == r)
      snprintf(own + strlen(own), sizeof own - strlen(own), "%speer %d (step %ld)",
               own[0] ? ", " : "", p->id, p->held_step);
    else
      snprintf(took + strlen(took), sizeof took - strlen(took), "%speer %d (from peer %d)",
               took[0] ? ", " : "", p->id, c->peers[c->members[q]].id);
  }
  coord_event(c, "recovery",
              "live recovery at step %ld: steps trained again: %ld; own state: %s; the outer "
              "state of a live replica: %s",
              start, back, own[0] ? own : "none", took[0] ? took : "none");
}

int coord_recovery_live_sources(coordinator *c) {
  long best = 0;
  for (int q = 0; q < c->n_members; q++) {
    const long step = c->peers[c->members[q]].held_step;
    /* a held final step (its last outer step or its checkpoint unfinished) is finished by the
     * start: the tasklets take that outer step and save the final checkpoint */
    const int allowed = step > best && step >= c->committed_step && step <= c->cfg.run.steps;
    if (allowed && s_covered(c, step)) best = step;
  }
  if (best <= 0) return 0;
  c->start_step = best;
  s_assign(c, best);
  s_report(c, best);
  return 1;
}
