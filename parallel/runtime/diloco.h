/* diloco — the outer optimizer of DiLoCo (Douillard et al. 2023) on a flat float buffer.
 *
 * Each data-parallel replica runs H inner steps of its own optimizer (AdamW in the paper) on its
 * own data — the caller does that — starting from the shared outer parameters θ_outer. Then
 * every replica calls diloco_outer_step, which
 *   1. forms the pseudo-gradient Δ = θ_outer − θ_inner,
 *   2. averages Δ over the replicas with the collectives of parallel/collectives/collectives.h:
 * plain fp32 ring all-reduce, or compressed with any codec (ring with two-stage error feedback, or
 * the sparse all-gather for top-k / rand-k), with or without error feedback, or takes their
 * robust aggregate (the robust all-reduce, which leaves a lying replica's Δ out),
 *   3. applies outer SGD with Nesterov momentum (PyTorch semantics, dampening 0):
 *          m = μ·m + Δ̄;   θ_outer −= lr·(Δ̄ + μ·m)      (plain momentum: θ_outer −= lr·m)
 *   4. copies θ_outer into θ_inner, so every replica starts the next round from the same point.
 * Communication happens once per H inner steps instead of once per step.
 *
 * Replicas stay identical: the averaged Δ̄ is bitwise the same on every rank (collectives.h), and
 * the update is the same deterministic arithmetic on the same θ_outer and m.
 *
 * Reduction to data parallelism: with H = 1, plain SGD inner steps (lr η), outer lr 1 and no
 * momentum, θ_outer − Δ̄ = mean_i(θ − η g_i) = θ − η·mean_i(g_i): synchronous data-parallel
 * SGD. In floats it agrees within a few ulps of |θ| (the subtraction θ − θ_inner is exact by
 * Sterbenz's lemma, but θ_inner = θ − η g_i was rounded once per replica), and bitwise when
 * those roundings vanish (tests/diloco/ shows both).
 *
 * State for checkpoints: θ_outer and the momentum buffer (n floats each, writable in place on
 * restore), the outer step count, and the error-feedback residuals (diloco_ef / diloco_sparse_ef,
 * saved through collectives.h / ef.h).
 *
 *   diloco_config cfg = diloco_config_default();            // lr 0.7, momentum 0.9, Nesterov
 *   diloco *d = diloco_new(n, &cfg);
 *   diloco_init(d, params);                                  // the same θ on every replica
 *   for (round) { for (h < H) inner_step(params);
 *                 WT_CHECK(diloco_outer_step(d, comm, params)); }
 *   diloco_destroy(&d);
 */
#ifndef WT_COMPRESS_DILOCO_H
#define WT_COMPRESS_DILOCO_H

#include <stddef.h>
#include <stdio.h>

#include "compress/codec.h"
#include "parallel/collectives/collectives.h"
#include "parallel/transport/comm.h"
#include "compress/ef.h"

typedef struct {
  float lr;                    /* outer learning rate; default 0.7 */
  float momentum;              /* μ in [0, 1); default 0.9 */
  int nesterov;                /* 1 (default): Nesterov momentum; 0: heavy-ball */
  const compress_codec *codec; /* NULL (default): fp32 all-reduce; else compress Δ with it.
                                * Borrowed: must outlive the diloco object. For rand-k the
                                * caller sets a new seed each round, the same on every replica
                                * (compress_codec_set_seed), else the same entries are drawn */
  int error_feedback;          /* with a codec: keep residuals of what compression dropped */
  int sparse;                  /* with a codec: the sparse all-gather (meant for topk/randk)
                                * instead of the compressed ring */
  parallel_robust *robust;     /* NULL (default): the collectives above; else Δ is averaged by
                                * the robust all-reduce (collectives.h) with this state, with
                                * the codec and a sender residual. Borrowed */
} diloco_config;

typedef struct diloco diloco;

/* lr 0.7, momentum 0.9, Nesterov, no codec, error feedback on (used once a codec is set), ring. */
diloco_config diloco_config_default(void);

/* Returns WT_OK, or WT_EINVAL naming the bad field (lr not finite or <= 0, momentum outside
 * [0, 1), flags not 0/1). */
int diloco_config_validate(const diloco_config *cfg);

/* An outer optimizer for n_params floats; θ_outer and momentum start at zero (call diloco_init).
 * Returns NULL with wt_last_error() set on a bad config. The caller owns it (diloco_destroy). */
diloco *diloco_new(size_t n_params, const diloco_config *cfg);
void diloco_destroy(diloco **self_p);

/* Sets θ_outer = theta (n_params floats) and clears momentum, residuals and the step count. */
void diloco_init(diloco *d, const float *theta);

/* One outer step on this replica (every replica of comm calls it with its θ_inner). On entry
 * theta_inner holds the parameters after the inner steps; on success it holds the new θ_outer.
 * Returns WT_OK, or the collective's status (WT_ECORRUPT, WT_EIO, ...) — then θ_outer, the
 * momentum and theta_inner are unchanged (error-feedback residuals may have advanced), so the
 * round can be retried or the replica resynced.
 * If the communicator's size or this rank changed since the last step, the ring residuals are
 * reset first (logged). */
int diloco_outer_step(diloco *d, parallel_comm *comm, float *theta_inner);

/* The averaged pseudo-gradient Δ̄ of the last successful outer step (n_params floats; owned). */
const float *diloco_last_delta(const diloco *d);

/* The robust all-reduce's evidence of the last outer step (zeroed before the first, or when the
 * config has no robust state). Owned by d. */
const parallel_robust_report *diloco_last_report(const diloco *d);

/* State for checkpoints: buffers owned by d, n_params floats, writable in place on restore. */
float *diloco_theta_outer(diloco *d, size_t *n);
float *diloco_momentum(diloco *d, size_t *n);
long diloco_step_count(const diloco *d);
void diloco_set_step_count(diloco *d, long steps);

/* Error-feedback residuals (owned by d), or NULL when not in use or before the first step:
 * the ring's per-chunk residuals, or the sparse path's one residual. */
parallel_ef *diloco_ef(diloco *d);
compress_ef *diloco_sparse_ef(diloco *d);

/* The whole outer state in one record: θ_outer, momentum, step count and whichever residuals
 * exist (header "WTDL", version, n, step count, which residuals, then the floats and a CRC-32,
 * then the residuals in collectives.h's / ef.h's formats). Load into a diloco of the same n and
 * config: it replaces θ_outer, the momentum, the step count and the residuals (the ring's made
 * for the saved rank and world). Returns WT_OK, WT_EIO on a write error, WT_ECORRUPT for a
 * truncated or damaged record, WT_EMISMATCH for another n or other residuals than this config
 * keeps; on failure to load the state is undefined: diloco_init it. */
int diloco_save(const diloco *d, FILE *f);
int diloco_load(diloco *d, FILE *f);

#endif
