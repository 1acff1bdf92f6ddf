/* bench-runtime — the distributed runtime (parallel/tasklet.h) against one process, with the
 * tasklets as threads over the in-process transport:
 *   1. agreement: every step's loss of S x R tasklets vs trainer_step on one process with the
 *      same global batch and seed (R·m micro-batches), SGD and AdamW, over --steps steps:
 *      the largest relative difference and the one at the last step;
 *   2. compute: forward passes recomputed per micro-batch and stage (the executor recomputes
 *      the forward of every micro-batch whose activations the stage no longer holds), and the
 *      seconds in passes summed over the stages beside the whole step on one process (the
 *      stages run as concurrent threads, so on a machine with fewer free cores than stages this
 *      ratio also holds their contention).
 * Prints a table, then one JSON line. Run with OMP_NUM_THREADS=1 (the tasklets are threads).
 *   OMP_NUM_THREADS=1 build/bin/bench-runtime [--steps N] [--repeats K] */
#include "common/common.h"
#include "model/trainer.h"
#include "parallel/comm.h"
#include "parallel/tasklet.h"

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
  c.stage = w / c.replicas, c.replica = w % c.replicas;
  c.on_step = s_on_step, c.on_step_arg = r;
  return parallel_tasklet_run(&c, world, &r->res[w]);
}

static int s_run_tasklets(s_run *r) {
  parallel_inproc_group *g = parallel_inproc_group_new(r->base.stages * r->base.replicas);
  int rc = parallel_inproc_run(g, s_rank, r, NULL);
  parallel_inproc_group_destroy(&g);
  return rc;
}

static trainer_config s_model(optim_kind kind, int steps, int m) {
  trainer_config c = {
      .model = {.vocab_size = 64, .max_seq = 64, .n_layer = 4, .n_head = 4, .channels = 128},
      .batch = 16,
      .micro_batches = m,
      .steps = steps,
      .val_batches = 1,
      .seed = 5};
  c.optim = optim_config_default();
  c.optim.kind = kind;
  c.optim.lr = kind == OPTIM_SGD ? 0.1f : 3e-3f;
  c.optim.warmup_steps = 10;
  c.optim.weight_decay = 0;
  c.optim.grad_clip = 1.0f;
  return c;
}

static int s_agreement(const data_set *d, optim_kind kind, int S, int R, int steps, double *worst,
                       double *last) {
  static s_run r;
  static float ref[MAX_STEPS];
  trainer_config c = s_model(kind, steps, 2), rc = c;
  rc.micro_batches = R * c.micro_batches;
  trainer *t = trainer_new(&rc, d);
  if (!t) return WT_EINVAL;
  for (int i = 0; i < steps; i++) {
    trainer_step_info info;
    WT_CHECK(trainer_step(t, &info));
    ref[i] = info.loss;
  }
  trainer_destroy(&t);
  r.base = parallel_tasklet_config_default();
  r.base.stages = S, r.base.replicas = R, r.base.schedule = ASSIGN_SCHEDULE_1F1B;
  r.base.train = c, r.base.data = d;
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

/* Compute seconds of the busiest stage relative to the whole step's passes on one process. */
static int s_compute(const data_set *d, int S, assign_schedule_kind sched, int m, int repeats,
                     double *ratio, double *recomputes) {
  static s_run r;
  double ratios[32];
  for (int k = 0; k < repeats; k++) {
    trainer_config c = s_model(OPTIM_ADAMW, 5, m);
    trainer *t = trainer_new(&c, d);
    double t0 = wt_now_s();
    for (int i = 0; i < 5; i++) WT_CHECK(trainer_step(t, NULL));
    double one = wt_now_s() - t0;
    trainer_destroy(&t);
    r.base = parallel_tasklet_config_default();
    r.base.stages = S, r.base.replicas = 1, r.base.schedule = sched;
    r.base.train = c, r.base.data = d;
    WT_CHECK(s_run_tasklets(&r));
    double sum = 0;
    *recomputes = 0;
    for (int s = 0; s < S; s++) sum += r.res[s].compute_s, *recomputes += r.res[s].recomputes;
    ratios[k] = sum / one;
  }
  *ratio = s_median(ratios, repeats);
  *recomputes /= 5.0 * S * m; /* per micro-batch per stage */
  printf("%-6s S=%d m=%d  recomputed forwards per micro-batch per stage %.3f; stage compute "
         "summed / one-process step %.2f (median of %d)\n",
         assign_schedule_name(sched), S, m, *recomputes, *ratio, repeats);
  return WT_OK;
}

int main(int argc, char **argv) {
  int steps = 300, repeats = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--steps")) steps = atoi(argv[i + 1]);
    if (!strcmp(argv[i], "--repeats")) repeats = atoi(argv[i + 1]);
  }
  if (steps < 1 || steps > MAX_STEPS || repeats < 1 || repeats > 32) {
    fprintf(stderr, "bench-runtime: --steps in [1, %d], --repeats in [1, 32]\n", MAX_STEPS);
    return 2;
  }
  data_synth_config sc = data_synth_default();
  data_set *d = data_set_synthetic(&sc);
  if (!d) return 1;
  static const int shapes[][2] = {{2, 2}, {4, 1}, {1, 4}};
  double worst[2][3], last[2][3], ratio[4], rec[4];
  int rc = WT_OK;
  printf("agreement with one process (L4 C128 T64, batch 16, m 2 per replica, 1F1B):\n");
  for (int kind = 0; kind < 2 && rc == WT_OK; kind++)
    for (int k = 0; k < 3 && rc == WT_OK; k++)
      rc = s_agreement(d, kind, shapes[k][0], shapes[k][1], steps, &worst[kind][k], &last[kind][k]);
  printf("compute per step (activation recomputation):\n");
  if (rc == WT_OK) rc = s_compute(d, 2, ASSIGN_SCHEDULE_GPIPE, 4, repeats, &ratio[0], &rec[0]);
  if (rc == WT_OK) rc = s_compute(d, 2, ASSIGN_SCHEDULE_1F1B, 4, repeats, &ratio[1], &rec[1]);
  if (rc == WT_OK) rc = s_compute(d, 4, ASSIGN_SCHEDULE_GPIPE, 4, repeats, &ratio[2], &rec[2]);
  if (rc == WT_OK) rc = s_compute(d, 4, ASSIGN_SCHEDULE_1F1B, 4, repeats, &ratio[3], &rec[3]);
  data_set_destroy(&d);
  if (rc != WT_OK) {
    fprintf(stderr, "bench-runtime: %s\n", wt_last_error());
    return 1;
  }
  printf("{\"bench\":\"runtime\",\"steps\":%d,\"adamw_max_rel\":[%.3g,%.3g,%.3g],"
         "\"sgd_max_rel\":[%.3g,%.3g,%.3g],\"compute_ratio\":{\"gpipe_s2\":%.3f,\"1f1b_s2\":%.3f,"
         "\"gpipe_s4\":%.3f,\"1f1b_s4\":%.3f},\"recomputes_per_mb\":[%.3f,%.3f,%.3f,%.3f]}\n",
         steps, worst[0][0], worst[0][1], worst[0][2], worst[1][0], worst[1][1], worst[1][2],
         ratio[0], ratio[1], ratio[2], ratio[3], rec[0], rec[1], rec[2], rec[3]);
  return 0;
}
