/* diloco — DiLoCo's outer step: average the pseudo-gradients, Nesterov SGD on θ_outer. */
#include "parallel/runtime/diloco.h"

#include "common/bytes.h" /* defines: wt_put_le64 / wt_get_le64, wt_crc32 */
#include "common/common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct diloco {
  diloco_config cfg;
  size_t n;
  float *theta;    /* (n,) θ_outer */
  float *momentum; /* (n,) m */
  float *delta;    /* (n,) Δ, then Δ̄ after the all-reduce */
  long steps;
  parallel_ef *ef;  /* ring residuals, made at the first step for (n, rank, world) */
  compress_ef *sef; /* sender residual of the sparse or robust all-gather */

  parallel_robust_report report; /* the robust all-reduce's last evidence */
};

diloco_config diloco_config_default(void) {
  return (diloco_config){
      .lr = 0.7f, .momentum = 0.9f, .nesterov = 1, .codec = NULL, .error_feedback = 1, .sparse = 0};
}

int diloco_config_validate(const diloco_config *cfg) {
  if (!isfinite(cfg->lr) || cfg->lr <= 0)
    return wt_fail(WT_EINVAL, "diloco: outer lr %g must be a positive number", cfg->lr);
  if (!(cfg->momentum >= 0 && cfg->momentum < 1))
    return wt_fail(WT_EINVAL, "diloco: outer momentum %g must be in [0, 1)", cfg->momentum);
  if ((cfg->nesterov | cfg->error_feedback | cfg->sparse) & ~1)
    return wt_fail(WT_EINVAL, "diloco: nesterov, error_feedback and sparse are 0 or 1");
  return WT_OK;
}

diloco *diloco_new(size_t n_params, const diloco_config *cfg) {
  if (diloco_config_validate(cfg) != WT_OK) return NULL;
  diloco *d = wt_xcalloc(1, sizeof *d);
  d->cfg = *cfg;
  d->n = n_params;
  d->theta = wt_xcalloc(n_params + 1, sizeof(float));
  d->momentum = wt_xcalloc(n_params + 1, sizeof(float));
  d->delta = wt_xcalloc(n_params + 1, sizeof(float));
  if (cfg->codec && cfg->error_feedback && (cfg->sparse || cfg->robust))
    d->sef = compress_ef_new(n_params);
  return d;
}

void diloco_destroy(diloco **self_p) {
  if (!self_p || !*self_p) return;
  diloco *d = *self_p;
  free(d->theta);
  free(d->momentum);
  free(d->delta);
  parallel_ef_destroy(&d->ef);
  compress_ef_destroy(&d->sef);
  free(d);
  *self_p = NULL;
}

void diloco_init(diloco *d, const float *theta) {
  memcpy(d->theta, theta, d->n * sizeof(float));
  memset(d->momentum, 0, d->n * sizeof(float));
  d->steps = 0;
  if (d->ef) parallel_ef_reset(d->ef);
  if (d->sef) compress_ef_reset(d->sef);
}

/* The ring residuals belong to one (rank, world) geometry; a regrouped replica starts afresh. */
static void s_ensure_ef(diloco *d, parallel_comm *comm) {
  int rank = parallel_comm_rank(comm), world = parallel_comm_size(comm);
  if (d->ef && parallel_ef_rank(d->ef) == rank && parallel_ef_world(d->ef) == world) return;
  if (d->ef)
    WT_WARN("diloco: group changed to rank %d of %d; error-feedback residuals reset", rank, world);
  parallel_ef_destroy(&d->ef);
  d->ef = parallel_ef_new(d->n, rank, world);
}

/* Δ̄ = mean over replicas of Δ, with whichever collective the config asks for. */
static int s_average(diloco *d, parallel_comm *comm) {
  const diloco_config *c = &d->cfg;
  if (c->robust)
    return parallel_robust_allreduce(c->robust, comm, c->codec, d->sef, d->delta, d->n, &d->report);
  if (!c->codec) return parallel_allreduce(comm, d->delta, d->n, PARALLEL_OP_AVG);
  if (c->sparse)
    return parallel_allreduce_sparse(comm, c->codec, d->delta, d->n, PARALLEL_OP_AVG, d->sef);
  if (c->error_feedback) s_ensure_ef(d, comm);
  return parallel_allreduce_compressed(comm, c->codec, d->delta, d->n, PARALLEL_OP_AVG,
                                       c->error_feedback ? d->ef : NULL);
}

int diloco_outer_step(diloco *d, parallel_comm *comm, float *theta_inner) {
  for (size_t i = 0; i < d->n; i++) d->delta[i] = d->theta[i] - theta_inner[i];
  WT_CHECK(s_average(d, comm));
  const float lr = d->cfg.lr, mu = d->cfg.momentum;
  for (size_t i = 0; i < d->n; i++) {
    float m = mu * d->momentum[i] + d->delta[i];
    d->momentum[i] = m;
    d->theta[i] -= lr * (d->cfg.nesterov ? d->delta[i] + mu * m : m);
  }
  memcpy(theta_inner, d->theta, d->n * sizeof(float));
  d->steps++;
  return WT_OK;
}

const parallel_robust_report *diloco_last_report(const diloco *d) {
  return &d->report;
}

const float *diloco_last_delta(const diloco *d) {
  return d->delta;
}

float *diloco_theta_outer(diloco *d, size_t *n) {
  if (n) *n = d->n;
  return d->theta;
}

float *diloco_momentum(diloco *d, size_t *n) {
  if (n) *n = d->n;
  return d->momentum;
}

long diloco_step_count(const diloco *d) {
  return d->steps;
}
void diloco_set_step_count(diloco *d, long steps) {
  d->steps = steps;
}
parallel_ef *diloco_ef(diloco *d) {
  return d->ef;
}
compress_ef *diloco_sparse_ef(diloco *d) {
  return d->sef;
}

/* ---- checkpoint -------------------------------------------------------------------------- */

#define S_MAGIC "WTDL"
#define S_VERSION 1u
#define S_HEADER 44 /* magic, version, n, steps, flags (ring, sparse), ring rank, ring world */

int diloco_save(const diloco *d, FILE *f) {
  uint8_t h[S_HEADER], t[4];
  memcpy(h, S_MAGIC, 4);
  wt_put_le64(h + 4, S_VERSION);
  wt_put_le64(h + 12, d->n);
  wt_put_le64(h + 20, (uint64_t)d->steps);
  wt_put_le32(h + 28, (d->ef ? 1u : 0u) | (d->sef ? 2u : 0u));
  wt_put_le32(h + 32, d->ef ? (uint32_t)parallel_ef_rank(d->ef) : 0);
  wt_put_le64(h + 36, d->ef ? (uint64_t)parallel_ef_world(d->ef) : 0);
  uint32_t crc = wt_crc32(0, h, sizeof h);
  crc = wt_crc32(crc, d->theta, sizeof(float) * d->n);
  crc = wt_crc32(crc, d->momentum, sizeof(float) * d->n);
  wt_put_le32(t, crc);
  if (fwrite(h, 1, sizeof h, f) != sizeof h || fwrite(d->theta, sizeof(float), d->n, f) != d->n ||
      fwrite(d->momentum, sizeof(float), d->n, f) != d->n || fwrite(t, 1, 4, f) != 4)
    return wt_fail(WT_EIO, "diloco: could not write the outer state");
  if (d->ef) WT_CHECK(parallel_ef_save(d->ef, f));
  if (d->sef) WT_CHECK(compress_ef_save(d->sef, f));
  return WT_OK;
}

int diloco_load(diloco *d, FILE *f) {
  uint8_t h[S_HEADER], t[4];
  if (fread(h, 1, sizeof h, f) != sizeof h)
    return wt_fail(WT_ECORRUPT, "diloco: outer state truncated in its header");
  if (memcmp(h, S_MAGIC, 4) || wt_get_le64(h + 4) != S_VERSION)
    return wt_fail(WT_ECORRUPT, "diloco: not an outer state (magic or version)");
  uint32_t flags = wt_get_le32(h + 28);
  long steps = (long)wt_get_le64(h + 20);
  int ring = flags & 1, sparse = (flags >> 1) & 1;
  if (wt_get_le64(h + 12) != d->n)
    return wt_fail(WT_EMISMATCH, "diloco: outer state of %llu parameters, this one has %zu",
                   (unsigned long long)wt_get_le64(h + 12), d->n);
  int want_ring = d->cfg.codec && d->cfg.error_feedback && !d->cfg.sparse && !d->cfg.robust;
  int want_sparse = d->sef != NULL;
  if ((flags & ~3u) || (ring && !want_ring) || sparse != want_sparse || steps < 0)
    return wt_fail(WT_EMISMATCH,
                   "diloco: the outer state holds %s residuals, this run keeps %s; resume "
                   "with the codec and error feedback it was saved with",
                   ring     ? "ring"
                   : sparse ? "sparse"
                            : "no",
                   want_ring     ? "ring"
                   : want_sparse ? "sparse"
                                 : "no");
  uint32_t crc = wt_crc32(0, h, sizeof h);
  if (fread(d->theta, sizeof(float), d->n, f) != d->n ||
      fread(d->momentum, sizeof(float), d->n, f) != d->n || fread(t, 1, 4, f) != 4)
    return wt_fail(WT_ECORRUPT, "diloco: outer state truncated");
  crc = wt_crc32(crc, d->theta, sizeof(float) * d->n);
  crc = wt_crc32(crc, d->momentum, sizeof(float) * d->n);
  if (crc != wt_get_le32(t)) return wt_fail(WT_ECORRUPT, "diloco: outer state CRC mismatch");
  d->steps = steps;
  parallel_ef_destroy(&d->ef);
  if (ring) {
    uint64_t rank = wt_get_le32(h + 32), world = wt_get_le64(h + 36);
    if (world < 1 || world > 65536 || rank >= world)
      return wt_fail(WT_ECORRUPT, "diloco: residuals of rank %llu in a group of %llu",
                     (unsigned long long)rank, (unsigned long long)world);
    d->ef = parallel_ef_new(d->n, (int)rank, (int)world);
    WT_CHECK(parallel_ef_load(d->ef, f));
  }
  if (sparse) WT_CHECK(compress_ef_load(d->sef, f));
  return WT_OK;
}
