/* test_schedule — the pipeline schedules of assign/schedule.h: every stage runs each
 * micro-batch's forward and backward once with the right sends and receives around them, 1F1B
 * holds at most S-s activations, and an executor with buffered sends and blocking receives runs
 * every (S, m) to completion (no deadlock) for both kinds. */
#include "assign/schedule.h"
#include "common/testing.h"

enum { MAX_S = 6, MAX_M = 9 };

/* Each micro-batch's FORWARD and BACKWARD exactly once, forward first, with RECV before and SEND
 * after on the stages that have a neighbour; returns the most activations held at once. */
static int s_check_stage(assign_schedule_kind kind, int s, int S, int m) {
  assign_action a[ASSIGN_SCHEDULE_MAX_ACTIONS(MAX_M)];
  int n = assign_schedule_stage(kind, s, S, m, a);
  int expect = 2 * m + (s > 0 ? 2 * m : 0) + (s < S - 1 ? 2 * m : 0);
  WT_TEST_ASSERT(n == expect, "%s s=%d S=%d m=%d: %d actions, want %d", assign_schedule_name(kind),
                 s, S, m, n, expect);
  int fwd[MAX_M] = {0}, bwd[MAX_M] = {0}, held = 0, most = 0;
  for (int k = 0; k < n; k++) {
    int j = a[k].micro_batch;
    WT_TEST_ASSERT(j >= 0 && j < m, "micro-batch %d out of range", j);
    if (a[k].kind == ASSIGN_ACT_FORWARD) {
      fwd[j]++, held++;
      if (held > most) most = held;
      if (s > 0) WT_TEST_ASSERT(a[k - 1].kind == ASSIGN_ACT_RECV_ACT, "forward %d without recv", j);
      if (s < S - 1)
        WT_TEST_ASSERT(a[k + 1].kind == ASSIGN_ACT_SEND_ACT, "forward %d without send", j);
    }
    if (a[k].kind == ASSIGN_ACT_BACKWARD) {
      WT_TEST_ASSERT(fwd[j] == 1, "backward %d before its forward", j);
      bwd[j]++, held--;
      if (s < S - 1)
        WT_TEST_ASSERT(a[k - 1].kind == ASSIGN_ACT_RECV_GRAD, "backward %d without recv", j);
      if (s > 0) WT_TEST_ASSERT(a[k + 1].kind == ASSIGN_ACT_SEND_GRAD, "backward %d w/o send", j);
    }
  }
  for (int j = 0; j < m; j++) WT_TEST_ASSERT(fwd[j] == 1 && bwd[j] == 1, "micro-batch %d", j);
  return most;
}

/* Runs all stages' lists with buffered sends: a RECV proceeds once the matching SEND ran. */
static void s_check_runs(assign_schedule_kind kind, int S, int m) {
  static assign_action a[MAX_S][ASSIGN_SCHEDULE_MAX_ACTIONS(MAX_M)];
  int n[MAX_S], pc[MAX_S] = {0};
  int acts_sent[MAX_S][MAX_M] = {{0}}, grads_sent[MAX_S][MAX_M] = {{0}}; /* by sender */
  for (int s = 0; s < S; s++) n[s] = assign_schedule_stage(kind, s, S, m, a[s]);
  for (int progress = 1; progress;) {
    progress = 0;
    for (int s = 0; s < S; s++) {
      while (pc[s] < n[s]) {
        assign_action x = a[s][pc[s]];
        if (x.kind == ASSIGN_ACT_RECV_ACT && !acts_sent[s - 1][x.micro_batch]) break;
        if (x.kind == ASSIGN_ACT_RECV_GRAD && !grads_sent[s + 1][x.micro_batch]) break;
        if (x.kind == ASSIGN_ACT_SEND_ACT) acts_sent[s][x.micro_batch] = 1;
        if (x.kind == ASSIGN_ACT_SEND_GRAD) grads_sent[s][x.micro_batch] = 1;
        pc[s]++, progress = 1;
      }
    }
  }
  for (int s = 0; s < S; s++)
    WT_TEST_ASSERT(pc[s] == n[s], "%s S=%d m=%d: stage %d stuck at action %d of %d",
                   assign_schedule_name(kind), S, m, s, pc[s], n[s]);
}

static void test_all(void) {
  for (int S = 1; S <= MAX_S; S++)
    for (int m = 1; m <= MAX_M; m++)
      for (int kind = 0; kind < 2; kind++) {
        for (int s = 0; s < S; s++) {
          int most = s_check_stage(kind, s, S, m);
          int bound = kind == ASSIGN_SCHEDULE_GPIPE ? m : (S - s < m ? S - s : m);
          WT_TEST_ASSERT(most == bound, "%s s=%d S=%d m=%d holds %d activations, want %d",
                         assign_schedule_name(kind), s, S, m, most, bound);
        }
        s_check_runs(kind, S, m);
      }
}

/* The exact lists of a small case, written out. */
static void test_known(void) {
  assign_action a[ASSIGN_SCHEDULE_MAX_ACTIONS(3)];
  /* 1F1B, stage 0 of 2, m = 3: F0 B-pairs: F0 S0 | F1 S1 RG0 B0 | F2 S2 RG1 B1 | RG2 B2 */
  int n = assign_schedule_passes(ASSIGN_SCHEDULE_1F1B, 0, 2, 3, a);
  const char *want = "F0F1B0F2B1B2";
  char got[32] = "";
  for (int k = 0; k < n; k++) {
    char step[4];
    snprintf(step, sizeof step, "%c%d", a[k].kind == ASSIGN_ACT_FORWARD ? 'F' : 'B',
             a[k].micro_batch);
    strcat(got, step);
  }
  WT_TEST_ASSERT(!strcmp(got, want), "1f1b passes %s, want %s", got, want);
  WT_TEST_ASSERT(assign_schedule_stage(ASSIGN_SCHEDULE_GPIPE, 2, 2, 3, a) == -1, "stage >= S");
  WT_TEST_ASSERT(assign_schedule_stage(ASSIGN_SCHEDULE_GPIPE, 0, 2, 0, a) == -1, "m = 0");
  WT_TEST_ASSERT(assign_schedule_stage((assign_schedule_kind)7, 0, 2, 1, a) == -1, "bad kind");
  WT_TEST_ASSERT(assign_schedule_parse("1f1b") == ASSIGN_SCHEDULE_1F1B &&
                     assign_schedule_parse("gpipe") == ASSIGN_SCHEDULE_GPIPE &&
                     assign_schedule_parse("pipedream") == -1,
                 "names");
}

int main(void) {
  test_all();
  test_known();
  return wt_test_finish("test_schedule");
}
