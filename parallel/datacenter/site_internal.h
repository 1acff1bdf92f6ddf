/* site_internal — what the threaded site (site.c) and the site of processes (site_remote.c)
 * share: the site's state and ONE copy of the per-rank code, which both run. Not for other
 * modules: their contract is parallel/datacenter/site.h. */
#ifndef WT_PARALLEL_SITE_INTERNAL_H
#define WT_PARALLEL_SITE_INTERNAL_H

#include "kernels/kernels.h"
#include "model/gpt.h"
#include "parallel/transport/comm.h"
#include "parallel/datacenter/mesh.h"
#include "parallel/datacenter/site.h"
#include "parallel/datacenter/tp.h"

#include <stddef.h>

/* Where each tensor of the stage sits in its flat buffers (SIZE_MAX where it holds none). */
typedef struct {
  size_t wte, wpe, lnfw, lnfb;
  size_t *blk; /* (n_local, PARALLEL_TP_TENSORS) */
} site_layout;

/* One rank's TP model of the stage: TP rank tp of the CP group's rank cp, holding the rows of its
 * CP positions (all rows with c = 1). */
typedef struct {
  parallel_mesh *mesh;
  int tp, cp;
  parallel_tp_vocab *voc;   /* first or last stage, else NULL */
  parallel_tp_block **blk;  /* (n_local) */
  float *lnf_w, *lnf_b;     /* (C) last stage: replicated */
  float *d_lnf_w, *d_lnf_b; /* (C) */
  float *act;               /* (n_local + 1, N, C): the input of each block and the output */
  float *lnf, *mean, *rstd; /* (N, C), (N), (N): the last stage's ln_f, kept for backward */
  float *d[2];              /* (N, C) backward ping-pong */
  int *tokens, *targets;    /* (N) this rank's rows of the first / last stage's ids */
  int *pos;                 /* (max_seq / c) the position of each local row in its sequence */
  gpt_stage *st;            /* an MoE site: this EP rank's stage (its experts), else NULL */
  size_t *map;              /* an MoE site: the canonical offset of each of st's tensors */
  float loss;
  char err[512];
} site_rank;

typedef struct site_runner_ops site_runner_ops;

typedef enum { SITE_LOAD, SITE_FORWARD, SITE_BACKWARD, SITE_GRADS } site_op;

/* What the current call asks of every rank (read-only while the ranks run). */
typedef struct {
  site_op op;
  const float *params; /* SITE_LOAD: the stage's host parameters */
  gpt_stage *stage;    /* SITE_LOAD, SITE_GRADS: the canonical stage */
  float *grads;        /* SITE_GRADS: the stage's host gradients */
  int round;           /* SITE_GRADS: the CP rank whose ranks add theirs in this call */
  const int *tokens, *targets;
  const float *act_in, *grad_out;
  float *act_out, *grad_in;
  int B, T;
  float loss_scale;
} site_call;

struct parallel_site {
  gpt_config cfg;
  int first, last, n_local, t, c, max_batch, max_seq, has_first, has_last;
  int ep; /* 1: an MoE site, its t ranks an EP group (t = the EP degree, c = 1) */
  const kernels_ops *k;
  parallel_inproc_group *g; /* a threaded site's group, else NULL */
  site_rank *ranks;         /* (t·c) a site of processes builds only ranks[self] */
  site_layout lay;
  site_call call;
  int B, T; /* the last forward's shape */
  float loss;
  int self; /* the rank this process runs: 0 (a threaded site runs them all) */
  const struct site_runner_ops *runner;
  struct site_remote *remote; /* the process runner's state (site_remote.c), else NULL */
};

/* Validates a site's shape (site.h's parallel_site_new rules). Returns WT_OK or WT_EINVAL /
 * WT_ENOTSUP with a message. */
int parallel_site_check(const gpt_config *cfg, int first, int last, int max_batch, int max_seq,
                        int t, int c, const kernels_ops *k);

/* A site's state without its ranks or group (the caller checked the shape); parameters as
 * parallel_site_new's. Never NULL (wt_xmalloc). */
parallel_site *parallel_site_alloc(const gpt_config *cfg, int first, int last, int max_batch,
                                   int max_seq, int tp, int cp, const kernels_ops *k);

/* Builds ranks[r] over `world` (the site's t·c ranks: world rank r = tp + t·cp). Returns WT_OK
 * or the error of the layer that could not be made. */
int parallel_site_rank_new(parallel_site *site, int r, parallel_comm *world);
void parallel_site_rank_destroy(parallel_site *site, site_rank *rk);

/* Runs site->call on rank rk (the shared rank code: load, forward, backward, gather of one CP
 * round). Returns its status; on failure rk->err holds the message. */
int parallel_site_rank_call(parallel_site *site, site_rank *rk);

/* Fills site->lay from `st`'s tensor table; WT_EINVAL when st is not the site's stage. */
int parallel_site_layout_of(parallel_site *site, gpt_stage *st);

/* Copies rows of `row` bytes between a full (B, T) array and the (B, T/c) rows at positions
 * pos[0 .. T/c) of each sequence: into the local rows (to_full = 0) or back (to_full = 1). */
void parallel_site_rows_copy(const int *pos, int c, void *dst, const void *src, int B, int T,
                             size_t row, int to_full);

/* ---- runners: how a site runs its ranks ---------------------------------------------------- */

/* One table per kind of site: its ranks as threads of this process (site.c's, the default of
 * parallel_site_alloc) or as processes (site_remote.c's, set by its constructors). site.c
 * calls only through the table. */
struct site_runner_ops {
  const char *name;
  /* Runs site->call on every rank; on failure names the rank that failed first. */
  int (*run)(parallel_site *site, const char *what);
  /* Adds every rank's gradients of the stage into g (its host gradients). */
  int (*gather_grads)(parallel_site *site, gpt_stage *stage, float *g);
  /* Rank r's MoE routing as of its last forward (gpt_stage_moe_stats's contract). */
  int (*moe_stats)(const parallel_site *site, int r, long *kept, long *dropped, double *aux,
                   int *forwards);
  void (*set_timeout)(parallel_site *site, double timeout_s);
  /* Bytes the site's ranks sent to each other so far. */
  uint64_t (*bytes)(const parallel_site *site);
  /* Releases the runner's state before the ranks are destroyed; NULL when there is none. */
  void (*close)(parallel_site *site);
};

#endif
