/* bench-runtime — the distributed runtime (parallel/runtime/tasklet.h) against one process, with
 * the tasklets as threads over the in-process transport:
 *   1. agreement: every step's loss of S x R tasklets vs trainer_step on one process with the
 *      same global batch and seed (R·m micro-batches), SGD and AdamW, over --steps steps:
 *      the largest relative difference and the one at the last step;
 *   2. activation slots: GPipe and 1F1B on 2 and 4 stages with m = 4, each stage with one
 *      activation slot per micro-batch in flight (the default) beside one slot (act_slots 1:
 *      the forward of every micro-batch the stage no longer holds is recomputed), alternated:
 *      recomputed forwards per micro-batch and stage, median pass seconds summed over the
 *      stages per step, and median step seconds (the stages run as concurrent threads, so on a
 *      machine with fewer free cores than stages the step also holds their contention).
 * Prints a table, then one JSON line (null agreement fields with --compute-only). Run with
 * OMP_NUM_THREADS=1 (the tasklets are threads).
 *   OMP_NUM_THREADS=1 build/bin/bench-runtime [--steps N] [--repeats K] [--compute-steps N]
 *                                             [--compute-only] */
#include "common/common.h"
#include "model/trainer.h"
#include "parallel/transport/comm.h"
#include "parallel/runtime/tasklet.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_STEPS = 2000 };

typedef struct {
  parallel_tasklet_config base;
  float loss[MAX_STEPS];
  parallel_tasklet_result res[16];
} s_run;

static void s_on_step(void *arg, const parallel_tasklet_step *st) {
  s_run *r = arg;
  if (st->stage == 0 && st->replica == 0 && st->info.step <= MAX_STEPS)
    r->loss[st->info.step - 1] = st->info.loss;
}

static int s_rank(parallel_comm *world, void *arg) {
  s_run *r = arg;
  parallel_tasklet_config c = r->base;
  int w = parallel_comm_rank(world);
  c.stage = w / c.run.replicas, c.replica = w % c.run.replicas;
  c.on_step = s_on_step, c.on_step_arg = r;
  return parallel_tasklet_run(&c, world, &r->res[w]);
}

static int s_run_tasklets(s_run *r) {
  parallel_inproc_group *g = parallel_inproc_group_new(r->base.run.stages * r->base.run.replicas);
  int rc = parallel_inproc_run(g, s_rank, r, NULL);
  parallel_inproc_group_destroy(&g);
  return rc;
}

/* The benchmark's run of S stages x R replicas (GPipe until the caller says otherwise) over d. */
static parallel_tasklet_config s_model(const data_set *d, optim_kind kind, int S, int R, int steps,
                                       int m) {
  parallel_tasklet_config c = parallel_tasklet_config_default();
  parallel_run_config *run = &c.run;
  run->stages = S, run->replicas = R;
  snprintf(run->schedule, sizeof run->schedule, "gpipe");
  run->seq = 64, run->layers = 4, run->heads = 4, run->channels = 128; /* V 64: the data's */
  run->batch = 16, run->micro_batches = m, run->steps = steps, run->val_batches = 1, run->seed = 5;
  const optim_config o = optim_config_default(); /* AdamW at its defaults but for these */
  snprintf(run->optimizer, sizeof run->optimizer, "%s", kind == OPTIM_SGD ? "sgd" : "adamw");
  run->lr = kind == OPTIM_SGD ? 0.1f : 3e-3f;
  run->min_lr = o.min_lr;
  run->warmup = 10;
  run->weight_decay = 0;
  run->grad_clip = 1.0f;
  run->val_every = 0;
  c.data = d;
  return c;
}

static int s_agreement(const data_set *d, optim_kind kind, int S, int R, int steps, double *worst,
                       double *last) {
  static s_run r;
  static float ref[MAX_STEPS];
  r.base = s_model(d, kind, S, R, steps, 2);
  snprintf(r.base.run.schedule, sizeof r.base.run.schedule, "1f1b");
  trainer_config rc;
  WT_CHECK(parallel_run_trainer_config(&r.base.run, data_set_vocab_size(d), &rc));
  rc.micro_batches = R * rc.micro_batches;
  trainer *t = trainer_new(&rc, d);
  if (!t) return WT_EINVAL;
  for (int i = 0; i < steps; i++) {
    trainer_step_info info;
    WT_CHECK(trainer_step(t, &info));
    ref[i] = info.loss;
  }
  trainer_destroy(&t);
  WT_CHECK(s_run_tasklets(&r));
  *worst = 0;
  for (int i = 0; i < steps; i++) *worst = fmax(*worst, fabs(r.loss[i] - ref[i]) / ref[i]);
  *last = fabs(r.loss[steps - 1] - ref[steps - 1]) / ref[steps - 1];
  printf("%-6s %dx%d %5d steps  loss %.4f -> %.4f  max rel diff %.3g  last %.3g\n",
         kind == OPTIM_SGD ? "sgd" : "adamw", S, R, steps, ref[0], ref[steps - 1], *worst, *last);
  return WT_OK;
}

static double s_median(double *x, int n) {
  for (int i = 1; i < n; i++)
    for (int k = i; k > 0 && x[k] < x[k - 1]; k--) {
      double t = x[k];
      x[k] = x[k - 1], x[k - 1] = t;
    }
  return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

/* One schedule's step with one activation slot per micro-batch in flight (slots) beside one slot
 * per stage (act_slots 1: every forward the stage no longer holds is recomputed), alternated
 * `repeats` times: medians of the stages' pass seconds summed per step, of the wall seconds per
 * step, and the recomputed forwards per micro-batch per stage. */
typedef struct {
  double compute_s[2], step_s[2], recomputes[2]; /* [0] one slot (recompute), [1] slots */
} s_slots;

static int s_compute(const data_set *d, int S, assign_schedule_kind sched, int m, int repeats,
                     int steps, s_slots *out) {
  static s_run r;
  double comp[2][32], wall[2][32];
  for (int k = 0; k < repeats; k++)
    for (int v = 0; v < 2; v++) {
      r.base = s_model(d, OPTIM_ADAMW, S, 1, steps, m);
      snprintf(r.base.run.schedule, sizeof r.base.run.schedule, "%s", assign_schedule_name(sched));
      r.base.run.act_slots = v ? 0 : 1;
      WT_CHECK(s_run_tasklets(&r));
      double sum = 0, rec = 0, sec = 0;
      for (int s = 0; s < S; s++) {
        sum += r.res[s].compute_s, rec += r.res[s].recomputes;
        sec = fmax(sec, r.res[s].pipeline_s);
      }
      comp[v][k] = sum / steps;
      wall[v][k] = sec / steps;
      out->recomputes[v] = rec / ((double)steps * S * m);
    }
  for (int v = 0; v < 2; v++) {
    out->compute_s[v] = s_median(comp[v], repeats);
    out->step_s[v] = s_median(wall[v], repeats);
  }
  printf("| %-5s | %d | %d | %.3f | %.3f | %.4f | %.4f | %.2fx | %.4f | %.4f | %.2fx |\n",
         assign_schedule_name(sched), S, m, out->recomputes[0], out->recomputes[1],
         out->compute_s[0], out->compute_s[1], out->compute_s[0] / out->compute_s[1],
         out->step_s[0], out->step_s[1], out->step_s[0] / out->step_s[1]);
  return WT_OK;
}

int main(int argc, char **argv) {
  int steps = 300, repeats = 5, csteps = 5, agreement = 1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--steps") && i + 1 < argc) steps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--repeats") && i + 1 < argc) repeats = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--compute-steps") && i + 1 < argc) csteps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--compute-only")) agreement = 0;
    else {
      fprintf(stderr, "usage: bench-runtime [--steps N] [--repeats K] [--compute-steps N] "
                      "[--compute-only]\n");
      return 2;
    }
  }
  if (steps < 1 || steps > MAX_STEPS || repeats < 1 || repeats > 32 || csteps < 1 ||
      csteps > MAX_STEPS) {
    fprintf(stderr, "bench-runtime: --steps and --compute-steps in [1, %d], --repeats in "
                    "[1, 32]\n", MAX_STEPS);
    return 2;
  }
  data_synth_config sc = data_synth_default();
  data_set *d = data_set_synthetic(&sc);
  if (!d) return 1;
  static const int shapes[][2] = {{2, 2}, {4, 1}, {1, 4}};
  double worst[2][3], last[2][3];
  s_slots sl[4];
  int rc = WT_OK;
  if (agreement) printf("agreement with one process (L4 C128 T64, batch 16, m 2 per replica, 1F1B):\n");
  for (int kind = 0; agreement && kind < 2 && rc == WT_OK; kind++)
    for (int k = 0; k < 3 && rc == WT_OK; k++)
      rc = s_agreement(d, kind, shapes[k][0], shapes[k][1], steps, &worst[kind][k], &last[kind][k]);
  printf("\nactivation slots vs one slot per stage (recomputation), L4 C128 T64, batch 16, AdamW, "
         "%d steps, median of %d alternated runs; compute = pass seconds summed over the stages "
         "per step, step = the slowest stage's pipeline seconds per step:\n\n", csteps, repeats);
  printf("| schedule | S | m | recomputes/mb (1 slot) | (slots) | compute s (1 slot) | (slots) | "
         "speed-up | step s (1 slot) | (slots) | speed-up |\n|---|---|---|---|---|---|---|---|---|"
         "---|---|\n");
  if (rc == WT_OK) rc = s_compute(d, 2, ASSIGN_SCHEDULE_GPIPE, 4, repeats, csteps, &sl[0]);
  if (rc == WT_OK) rc = s_compute(d, 2, ASSIGN_SCHEDULE_1F1B, 4, repeats, csteps, &sl[1]);
  if (rc == WT_OK) rc = s_compute(d, 4, ASSIGN_SCHEDULE_GPIPE, 4, repeats, csteps, &sl[2]);
  if (rc == WT_OK) rc = s_compute(d, 4, ASSIGN_SCHEDULE_1F1B, 4, repeats, csteps, &sl[3]);
  data_set_destroy(&d);
  if (rc != WT_OK) {
    fprintf(stderr, "bench-runtime: %s\n", wt_last_error());
    return 1;
  }
  char agree[256] = "\"adamw_max_rel\":null,\"sgd_max_rel\":null";
  if (agreement)
    snprintf(agree, sizeof agree,
             "\"adamw_max_rel\":[%.3g,%.3g,%.3g],\"sgd_max_rel\":[%.3g,%.3g,%.3g]", worst[0][0],
             worst[0][1], worst[0][2], worst[1][0], worst[1][1], worst[1][2]);
  printf("{\"bench\":\"runtime\",\"steps\":%d,%s,\"slots\":[", agreement ? steps : 0, agree);
  static const char *names[] = {"gpipe_s2", "1f1b_s2", "gpipe_s4", "1f1b_s4"};
  for (int i = 0; i < 4; i++)
    printf("%s{\"case\":\"%s\",\"recomputes_per_mb\":[%.3f,%.3f],\"compute_s\":[%.5f,%.5f],"
           "\"step_s\":[%.5f,%.5f]}",
           i ? "," : "", names[i], sl[i].recomputes[0], sl[i].recomputes[1], sl[i].compute_s[0],
           sl[i].compute_s[1], sl[i].step_s[0], sl[i].step_s[1]);
  printf("]}\n");
  return 0;
}
