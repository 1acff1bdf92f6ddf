/* schedule — the GPipe and 1F1B action lists of one pipeline stage (schedule.h). */
#include "assign/schedule.h"

#include <string.h>

/* The order of the passes: kind FORWARD or BACKWARD, micro-batch. */
static int s_passes(assign_schedule_kind kind, int stage, int n_stages, int m, assign_action *out) {
  int k = 0;
  if (kind == ASSIGN_SCHEDULE_GPIPE) {
    for (int j = 0; j < m; j++) out[k++] = (assign_action){ASSIGN_ACT_FORWARD, j};
    for (int j = 0; j < m; j++) out[k++] = (assign_action){ASSIGN_ACT_BACKWARD, j};
    return k;
  }
  /* 1F1B: enough forwards in flight to fill the stages below, then alternate, then drain. */
  int warm = n_stages - stage - 1 < m ? n_stages - stage - 1 : m;
  for (int j = 0; j < warm; j++) out[k++] = (assign_action){ASSIGN_ACT_FORWARD, j};
  for (int i = 0; i < m - warm; i++) {
    out[k++] = (assign_action){ASSIGN_ACT_FORWARD, warm + i};
    out[k++] = (assign_action){ASSIGN_ACT_BACKWARD, i};
  }
  for (int j = m - warm; j < m; j++) out[k++] = (assign_action){ASSIGN_ACT_BACKWARD, j};
  return k;
}

static int s_valid(assign_schedule_kind kind, int stage, int n_stages, int m) {
  return (kind == ASSIGN_SCHEDULE_GPIPE || kind == ASSIGN_SCHEDULE_1F1B) && n_stages >= 1 &&
         stage >= 0 && stage < n_stages && m >= 1;
}

int assign_schedule_passes(assign_schedule_kind kind, int stage, int n_stages, int m,
                           assign_action *out) {
  if (!s_valid(kind, stage, n_stages, m)) return -1;
  return s_passes(kind, stage, n_stages, m, out);
}

int assign_schedule_stage(assign_schedule_kind kind, int stage, int n_stages, int m,
                          assign_action *out) {
  if (!s_valid(kind, stage, n_stages, m)) return -1;
  /* The passes go to the tail of out first, then expand in place front to back: the write
   * index never passes the read index (each pass becomes at most 3 actions, read from 4m on). */
  assign_action *passes = out + 4 * m;
  int np = s_passes(kind, stage, n_stages, m, passes), k = 0;
  int first = stage == 0, last = stage == n_stages - 1;
  for (int i = 0; i < np; i++) {
    assign_action p = passes[i];
    if (p.kind == ASSIGN_ACT_FORWARD) {
      if (!first) out[k++] = (assign_action){ASSIGN_ACT_RECV_ACT, p.micro_batch};
      out[k++] = p;
      if (!last) out[k++] = (assign_action){ASSIGN_ACT_SEND_ACT, p.micro_batch};
    } else {
      if (!last) out[k++] = (assign_action){ASSIGN_ACT_RECV_GRAD, p.micro_batch};
      out[k++] = p;
      if (!first) out[k++] = (assign_action){ASSIGN_ACT_SEND_GRAD, p.micro_batch};
    }
  }
  return k;
}

const char *assign_schedule_name(assign_schedule_kind kind) {
  return kind == ASSIGN_SCHEDULE_GPIPE ? "gpipe" : kind == ASSIGN_SCHEDULE_1F1B ? "1f1b" : "?";
}

int assign_schedule_parse(const char *name) {
  if (name && !strcmp(name, "gpipe")) return ASSIGN_SCHEDULE_GPIPE;
  if (name && !strcmp(name, "1f1b")) return ASSIGN_SCHEDULE_1F1B;
  return -1;
}
