/* liar — a test-only harness that makes tasklets lie, and runs S x R of them as threads over the
 * in-process transport with some of them lying. Header-only; for tests/trust (and the
 * experiments of scripts/trust-experiments.sh, built from this folder). It is the only user of
 * the tasklet's test_tamper hooks (tasklet.h); no program links it.
 *
 * The lies, each from step `from` on (a liar is honest before):
 *   nan    every third value of its contribution NaN
 *   scale  its contribution times 1000
 *   flip   its contribution negated
 *   noise  Gaussian noise of its contribution's norm instead of it
 *   zero   zeros (a free rider that skips its compute)
 *   stale  the contribution it made at step `from`, sent again every step after
 *   act    the activations it sends to the next stage replaced by noise of their RMS
 *   drift  its contribution plus noise of half its norm: well scaled and pointing mostly the
 *          right way, so only a spot check (a recompute) tells it from a gradient
 *   moments  (DiLoCo) its optimizer's first moment negated at every outer step, before it
 *          commits it: every contribution is an honest round from the state it committed, but
 *          the state it goes on from is not the one its round ended with
 * "honest" lies not at all. */
#ifndef WT_TESTS_TRUST_LIAR_H
#define WT_TESTS_TRUST_LIAR_H

#include "common/common.h"
#include "common/rng.h"
#include "parallel/runtime/tasklet.h"
#include "parallel/transport/comm.h"
#include "tests/runtime/optim_defaults.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef enum {
  LIAR_HONEST,
  LIAR_NAN,
  LIAR_SCALE,
  LIAR_FLIP,
  LIAR_NOISE,
  LIAR_ZERO,
  LIAR_STALE,
  LIAR_ACT,
  LIAR_DRIFT,
  LIAR_MOMENTS,
  LIAR_KINDS
} liar_kind;

static const char *liar_names[LIAR_KINDS] = {"honest", "nan",   "scale", "flip",  "noise",
                                             "zero",   "stale", "act",   "drift", "moments"};

static inline int liar_kind_parse(const char *name, liar_kind *kind) {
  for (int i = 0; i < LIAR_KINDS; i++)
    if (!strcmp(name, liar_names[i])) {
      *kind = (liar_kind)i;
      return WT_OK;
    }
  return wt_fail(WT_EINVAL,
                 "lie '%s' is unknown; use honest, nan, scale, flip, noise, zero, "
                 "stale, act, drift or moments",
                 name);
}

typedef struct {
  liar_kind kind;
  long from; /* the first step it lies at (1-based) */
  wt_rng rng;
  float *stale; /* the contribution kept by "stale" */
  size_t stale_n;
} liar;

static inline void liar_noise_like(liar *l, float *x, size_t n) {
  double sq = 0;
  for (size_t i = 0; i < n; i++) sq += (double)x[i] * x[i];
  const double sd = sqrt(sq / (double)(n ? n : 1));
  for (size_t i = 0; i < n; i++) x[i] = (float)(sd * wt_rng_normal(&l->rng));
}

/* The contribution hook (parallel_tasklet_tamper_fn). */
static void liar_tamper(void *arg, long step, float *x, size_t n) {
  liar *l = arg;
  if (step < l->from) return;
  switch (l->kind) {
  case LIAR_NAN:
    for (size_t i = 0; i < n; i += 3) x[i] = NAN;
    break;
  case LIAR_SCALE:
    for (size_t i = 0; i < n; i++) x[i] *= 1000;
    break;
  case LIAR_FLIP:
    for (size_t i = 0; i < n; i++) x[i] = -x[i];
    break;
  case LIAR_NOISE:
    liar_noise_like(l, x, n);
    break;
  case LIAR_DRIFT: {
    float *e = wt_xmalloc((n + 1) * sizeof *x);
    memcpy(e, x, n * sizeof *x);
    liar_noise_like(l, e, n);
    for (size_t i = 0; i < n; i++) x[i] += 0.5f * e[i];
    free(e);
    break;
  }
  case LIAR_ZERO:
    memset(x, 0, n * sizeof *x);
    break;
  case LIAR_STALE:
    if (!l->stale) {
      l->stale = wt_xmalloc(n * sizeof *x);
      l->stale_n = n;
      memcpy(l->stale, x, n * sizeof *x);
    } else if (l->stale_n == n) {
      memcpy(x, l->stale, n * sizeof *x);
    }
    break;
  default:
    break;
  }
}

/* The activation hook. */
static void liar_tamper_act(void *arg, long step, float *act, size_t n) {
  liar *l = arg;
  if (step >= l->from && l->kind == LIAR_ACT) liar_noise_like(l, act, n);
}

/* The optimizer-state hook (DiLoCo). */
static void liar_tamper_state(void *arg, long step, float *m, size_t n) {
  liar *l = arg;
  if (step >= l->from && l->kind == LIAR_MOMENTS)
    for (size_t i = 0; i < n; i++) m[i] = -m[i];
}

static void liar_init(liar *l, liar_kind kind, long from, uint64_t seed) {
  memset(l, 0, sizeof *l);
  l->kind = kind, l->from = from;
  wt_rng_seed(&l->rng, seed);
}

static void liar_attach(liar *l, parallel_tasklet_config *c) {
  if (l->kind == LIAR_HONEST) return;
  c->test_tamper_arg = l;
  if (l->kind == LIAR_ACT)
    c->test_tamper_act = liar_tamper_act;
  else if (l->kind == LIAR_MOMENTS)
    c->test_tamper_state = liar_tamper_state;
  else
    c->test_tamper = liar_tamper;
}

/* ---- a run with liars ----------------------------------------------------------------------- */

enum { LR_MAX_RANKS = 16, LR_MAX_STEPS = 512 };

typedef struct {
  parallel_tasklet_config base; /* stage / replica filled per rank */
  liar_kind lie;
  int liars; /* the liars are replicas, ..., of stage `liar_stage` */
  int liar_stage;
  long from;
  /* results */
  int rcs[LR_MAX_RANKS];
  char err[LR_MAX_RANKS][512];
  parallel_tasklet_result res[LR_MAX_RANKS];
  float loss[LR_MAX_STEPS]; /* world rank 0's loss per step */
  /* per replica of each stage, as that stage's replica 0 saw it: the steps flagged and the
   * first one (0: never) */
  int flagged[LR_MAX_RANKS][LR_MAX_RANKS];
  long first_flag[LR_MAX_RANKS][LR_MAX_RANKS];
  uint32_t flags[LR_MAX_RANKS][LR_MAX_RANKS];
  int robust_syncs[LR_MAX_RANKS];
  /* spot checks, per stage and target replica: made, failed, the first failed step (0:
   * never), and the lowest cosine a check of an honest replica saw */
  int spot_checks[LR_MAX_RANKS][LR_MAX_RANKS], spot_failed[LR_MAX_RANKS][LR_MAX_RANKS];
  long first_spot_fail[LR_MAX_RANKS][LR_MAX_RANKS];
  uint32_t spot_fail_checkers[LR_MAX_RANKS][LR_MAX_RANKS]; /* bit c: checker replica c failed it */
  long spot_second_checker[LR_MAX_RANKS][LR_MAX_RANKS]; /* a second checker failed it (0: never) */
  int spot_honest;
  double spot_seconds;  /* all checks' wall time */
  int spot_liar_passed; /* checks of a liar, at a step it lied at, that passed */
  double spot_honest_min_cos;
  double spot_honest_max_dev; /* the largest |norm ratio - 1| of those */
  double spot_honest_max_use; /* through a codec: their largest rel_error / bound */
  /* which replica each checker checked at each step, stage 0 (target + 1; 0: none) */
  unsigned char spot_plan[LR_MAX_STEPS][LR_MAX_RANKS];
  void *state[LR_MAX_RANKS]; /* the stage blob each tasklet ended with (plain sync only) */
  size_t state_bytes[LR_MAX_RANKS];
  int keep_state;
} lr_run;

static int lr_is_liar(const lr_run *h, int stage, int replica) {
  const int R = h->base.run.replicas;
  return h->lie != LIAR_HONEST && stage == h->liar_stage && replica >= R - h->liars;
}

static pthread_mutex_t lr_spot_mu = PTHREAD_MUTEX_INITIALIZER;

/* Counts a checker's spot check (checkers are any replica: under a lock). */
static void lr_spot(lr_run *h, const parallel_tasklet_step *st) {
  const parallel_tasklet_spot *sp = st->spot;
  const int s = st->stage, t = sp->target;
  if (t < 0 || t >= LR_MAX_RANKS || s < 0 || s >= LR_MAX_RANKS) return;
  pthread_mutex_lock(&lr_spot_mu);
  h->spot_checks[s][t]++;
  if (s == 0 && st->info.step >= 1 && st->info.step <= LR_MAX_STEPS && sp->checker >= 0 &&
      sp->checker < LR_MAX_RANKS)
    h->spot_plan[st->info.step - 1][sp->checker] = (unsigned char)(t + 1);
  h->spot_seconds += sp->seconds;
  if (sp->failed) {
    h->spot_failed[s][t]++;
    if (!h->first_spot_fail[s][t]) h->first_spot_fail[s][t] = st->info.step;
    h->spot_fail_checkers[s][t] |= 1u << (sp->checker & 31);
    if (!h->spot_second_checker[s][t] && __builtin_popcount(h->spot_fail_checkers[s][t]) >= 2)
      h->spot_second_checker[s][t] = st->info.step;
  }
  if (lr_is_liar(h, st->stage, sp->target) && st->info.step >= h->from && !sp->failed)
    h->spot_liar_passed++;
  if (!lr_is_liar(h, st->stage, sp->target)) {
    if (!h->spot_honest++ || sp->cosine < h->spot_honest_min_cos)
      h->spot_honest_min_cos = sp->cosine;
    h->spot_honest_max_dev = fmax(h->spot_honest_max_dev, fabs(sp->norm_ratio - 1));
    if (sp->bound > 0)
      h->spot_honest_max_use = fmax(h->spot_honest_max_use, sp->rel_error / sp->bound);
  }
  pthread_mutex_unlock(&lr_spot_mu);
}

static void lr_on_step(void *arg, const parallel_tasklet_step *st) {
  lr_run *h = arg;
  if (st->spot) lr_spot(h, st);
  const long i = st->info.step - 1;
  if (st->stage == 0 && st->replica == 0 && i >= 0 && i < LR_MAX_STEPS) h->loss[i] = st->info.loss;
  if (st->replica != 0 || !st->robust) return;
  h->robust_syncs[st->stage]++;
  for (int r = 0; r < st->robust->world && r < LR_MAX_RANKS; r++) {
    uint32_t f = st->robust->rank[r].flags;
    if (!f) continue;
    h->flagged[st->stage][r]++;
    h->flags[st->stage][r] |= f;
    if (!h->first_flag[st->stage][r]) h->first_flag[st->stage][r] = st->info.step;
  }
}

static int lr_rank(parallel_comm *world, void *arg) {
  lr_run *h = arg;
  const int w = parallel_comm_rank(world);
  parallel_tasklet_config c = h->base;
  c.stage = w / c.run.replicas, c.replica = w % c.run.replicas;
  c.on_step = lr_on_step, c.on_step_arg = h;
  if (h->keep_state) c.state_out = &h->state[w], c.state_out_bytes = &h->state_bytes[w];
  liar l;
  liar_init(&l, lr_is_liar(h, c.stage, c.replica) ? h->lie : LIAR_HONEST, h->from,
            0x11a2 + (uint64_t)w);
  liar_attach(&l, &c);
  int rc = parallel_tasklet_run(&c, world, &h->res[w]);
  h->rcs[w] = rc;
  snprintf(h->err[w], sizeof h->err[w], "%s", rc == WT_OK ? "" : wt_last_error());
  free(l.stale);
  return rc;
}

/* Runs base.run.stages x base.run.replicas tasklets; returns parallel_inproc_run's status (a run
 * whose loss diverged fails, as a real one would). */
static int lr_run_all(lr_run *h) {
  const int n = h->base.run.stages * h->base.run.replicas;
  parallel_inproc_group *g = parallel_inproc_group_new(n);
  parallel_inproc_group_set_timeout(g, 60);
  for (int i = 0; i < LR_MAX_STEPS; i++) h->loss[i] = NAN;
  int rc = parallel_inproc_run(g, lr_rank, h, NULL);
  parallel_inproc_group_destroy(&g);
  return rc;
}

static void lr_free(lr_run *h) {
  for (int w = 0; w < LR_MAX_RANKS; w++) free(h->state[w]), h->state[w] = NULL;
}

#endif
