/* schedule — pipeline schedules (GPipe, 1F1B) as data: for each stage, the ordered list of
 * actions one training step runs. The runtime's executor (parallel/runtime/pipeline.h) runs these
 * lists and netsim's simulator builds its task graph from the same lists, so what is simulated and
 * what runs cannot drift apart. Pure: no I/O, no allocation.
 *
 * A stage s of S runs m micro-batches j = 0..m-1. A forward of micro-batch j is
 *     RECV_ACT j (not on stage 0)   FORWARD j   SEND_ACT j (not on stage S-1)
 * and a backward
 *     RECV_GRAD j (not on S-1)      BACKWARD j  SEND_GRAD j (not on stage 0)
 * The schedules differ only in the order of the passes:
 *   GPipe  all m forwards, then all m backwards (in micro-batch order): m activations held.
 *   1F1B   (PipeDream-flush, Narayanan et al. 2021) w = min(S-s-1, m) warm-up forwards, then
 *          m-w pairs (forward w+i, backward i), then the w remaining backwards: at most w+1
 *          activations held, the same bubble as GPipe.
 * Both are deadlock-free when a SEND never waits for its RECV (sends are buffered or
 * asynchronous) and every RECV waits: each RECV's matching SEND comes earlier in its sender's
 * list than any action that depends on this stage.
 *
 *   assign_action acts[ASSIGN_SCHEDULE_MAX_ACTIONS(m)];
 *   int n = assign_schedule_stage(ASSIGN_SCHEDULE_1F1B, s, S, m, acts);
 *   for (int k = 0; k < n; k++) run(acts[k].kind, acts[k].micro_batch);
 */
#ifndef WT_ASSIGN_SCHEDULE_H
#define WT_ASSIGN_SCHEDULE_H

typedef enum { ASSIGN_SCHEDULE_GPIPE = 0, ASSIGN_SCHEDULE_1F1B = 1 } assign_schedule_kind;

typedef enum {
  ASSIGN_ACT_RECV_ACT = 0,  /* receive micro-batch j's activation from stage s-1 */
  ASSIGN_ACT_FORWARD = 1,   /* forward pass of micro-batch j */
  ASSIGN_ACT_SEND_ACT = 2,  /* send its output activation to stage s+1 */
  ASSIGN_ACT_RECV_GRAD = 3, /* receive the gradient of that output from stage s+1 */
  ASSIGN_ACT_BACKWARD = 4,  /* backward pass of micro-batch j */
  ASSIGN_ACT_SEND_GRAD = 5, /* send the gradient of its input activation to stage s-1 */
} assign_action_kind;

typedef struct {
  assign_action_kind kind;
  int micro_batch;
} assign_action;

/* The most actions one stage can have for m micro-batches (6 per micro-batch). */
#define ASSIGN_SCHEDULE_MAX_ACTIONS(m) (6 * (m))

/* Writes stage `stage`'s actions (of n_stages, m micro-batches) into out, which holds at least
 * ASSIGN_SCHEDULE_MAX_ACTIONS(m) entries; returns how many, or -1 (nothing written) when
 * stage is outside [0, n_stages), n_stages < 1, m < 1 or kind is unknown. */
int assign_schedule_stage(assign_schedule_kind kind, int stage, int n_stages, int m,
                          assign_action *out);

/* Only the passes (FORWARD / BACKWARD) of the same list, in order: 2m entries into out (which
 * holds at least 2m); returns 2m or -1 as above. What a simulator of compute needs. */
int assign_schedule_passes(assign_schedule_kind kind, int stage, int n_stages, int m,
                           assign_action *out);

/* "gpipe" / "1f1b" and back; parse returns -1 for an unknown name. */
const char *assign_schedule_name(assign_schedule_kind kind);
int assign_schedule_parse(const char *name);

#endif
