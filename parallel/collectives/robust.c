/* robust — the robust all-reduce (collectives.h): every rank's encoded contribution all-gathered,
 * each contribution checked against the group's history, the flagged ones left out, and the
 * robust aggregate of the rest computed identically on every rank. */
#include "parallel/collectives/collectives.h"

#include "common/bytes.h" /* defines: wt_crc32 */
#include "common/common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct parallel_robust {
  parallel_robust_config cfg;
  int world; /* the group the history and digests belong to (0 before the first call) */
  /* the accepted contributions' log-norms and cosines (NAN: none), a ring of cfg.history */
  double *log_norm, *cosine;
  int kept, next;
  /* each sender's last PARALLEL_ROBUST_REPLAY payload digests (CRC-32 and length) */
  uint64_t digest[PARALLEL_ROBUST_MAX_RANKS][PARALLEL_ROBUST_REPLAY];
  int digests[PARALLEL_ROBUST_MAX_RANKS];
  /* parallel_robust_keep_next: the rank whose decoded contribution the next call copies into
   * keep_out (-1: none) */
  int keep_rank;
  float *keep_out;
};

parallel_robust_config parallel_robust_config_default(parallel_robust_kind kind) {
  return (parallel_robust_config){
      .kind = kind, .history = 64, .norm_ratio = 3, .norm_k = 6, .cos_k = 4};
}

parallel_robust *parallel_robust_new(const parallel_robust_config *cfg) {
  if (cfg->kind == PARALLEL_ROBUST_NONE || (unsigned)cfg->kind > PARALLEL_ROBUST_CENTERED_CLIP) {
    wt_fail(WT_EINVAL,
            "robust all-reduce: kind %d is not one of trimmed-mean, median, "
            "centered-clip",
            (int)cfg->kind);
    return NULL;
  }
  if (cfg->history < 0 || cfg->history > 1 << 20 || !(cfg->norm_ratio >= 1) || !(cfg->norm_k > 0) ||
      !(cfg->cos_k > 0)) {
    wt_fail(WT_EINVAL,
            "robust all-reduce: history %d (0..2^20), norm_ratio %g (>= 1), norm_k %g "
            "and cos_k %g (> 0) out of range",
            cfg->history, cfg->norm_ratio, cfg->norm_k, cfg->cos_k);
    return NULL;
  }
  parallel_robust *self = wt_xcalloc(1, sizeof *self);
  self->cfg = *cfg;
  self->log_norm = wt_xcalloc((size_t)cfg->history + 1, sizeof(double));
  self->cosine = wt_xcalloc((size_t)cfg->history + 1, sizeof(double));
  return self;
}

void parallel_robust_destroy(parallel_robust **self_p) {
  if (!self_p || !*self_p) return;
  free((*self_p)->log_norm);
  free((*self_p)->cosine);
  free(*self_p);
  *self_p = NULL;
}

const parallel_robust_config *parallel_robust_get_config(const parallel_robust *self) {
  return &self->cfg;
}

void parallel_robust_flags_str(uint32_t flags, char *buf, size_t cap) {
  static const char *names[] = {"corrupt", "nonfinite", "zero", "replay", "norm", "cosine"};
  size_t at = 0;
  if (cap) buf[0] = 0;
  for (int b = 0; b < (int)WT_ARRAY_LEN(names); b++)
    if ((flags >> b) & 1u && at < cap) {
      int w = snprintf(buf + at, cap - at, "%s%s", at ? "," : "", names[b]);
      at += w > 0 ? (size_t)w : 0;
    }
}

/* ---- statistics of the history ------------------------------------------------------------ */

static void s_sort_doubles(double *v, int m) {
  for (int i = 1; i < m; i++) {
    double x = v[i];
    int j = i - 1;
    for (; j >= 0 && v[j] > x; j--) v[j + 1] = v[j];
    v[j + 1] = x;
  }
}

static double s_median_sorted(const double *v, int m) {
  return m % 2 ? v[m / 2] : 0.5 * (v[m / 2 - 1] + v[m / 2]);
}

/* Median and robust deviation (1.4826 · MAD: σ for normal data) of v[0..m), m >= 1. */
static void s_median_sigma(const double *v, int m, double *median, double *sigma) {
  double *t = wt_xmalloc(sizeof(double) * (size_t)m);
  memcpy(t, v, sizeof(double) * (size_t)m);
  s_sort_doubles(t, m);
  *median = s_median_sorted(t, m);
  for (int i = 0; i < m; i++) t[i] = fabs(v[i] - *median);
  s_sort_doubles(t, m);
  *sigma = 1.4826 * s_median_sorted(t, m);
  free(t);
}

/* The history's finite values of `hist` plus this step's `now[j]` for candidates j, into *out
 * (malloc'd); returns how many. */
static int s_sample(const parallel_robust *self, const double *hist, const double *now,
                    const uint8_t *cand, int world, double **out) {
  double *v = wt_xmalloc(sizeof(double) * (size_t)(self->kept + world + 1));
  int m = 0;
  for (int i = 0; i < self->kept; i++)
    if (isfinite(hist[i])) v[m++] = hist[i];
  for (int j = 0; j < world; j++)
    if (cand[j] && isfinite(now[j])) v[m++] = now[j];
  *out = v;
  return m;
}

static void s_remember(parallel_robust *self, double log_norm, double cosine) {
  if (self->cfg.history == 0) return;
  self->log_norm[self->next] = log_norm;
  self->cosine[self->next] = cosine;
  self->next = (self->next + 1) % self->cfg.history;
  if (self->kept < self->cfg.history) self->kept++;
}

/* ---- the checks --------------------------------------------------------------------------- */

typedef struct {
  int world;
  size_t n;
  float *rows;                             /* (world, n) decoded contributions */
  float *agg;                              /* (n,) */
  uint8_t cand[PARALLEL_ROBUST_MAX_RANKS]; /* still in the aggregate */
  double log_norm[PARALLEL_ROBUST_MAX_RANKS], cosine[PARALLEL_ROBUST_MAX_RANKS];
  parallel_robust_report *rep;
} s_call;

static int s_count(const s_call *k) {
  int m = 0;
  for (int j = 0; j < k->world; j++) m += k->cand[j];
  return m;
}

static void s_flag(s_call *k, int j, uint32_t why) {
  k->rep->rank[j].flags |= why;
  k->cand[j] = 0;
}

/* Decodes rank j's payload into its row and records what needs no history: corrupt, non-finite,
 * all zeros, a replay of its sender's recent bytes. */
static void s_decode(parallel_robust *self, s_call *k, const compress_codec *codec, int j,
                     const uint8_t *payload, size_t len) {
  float *row = k->rows + (size_t)j * k->n;
  parallel_robust_evidence *e = &k->rep->rank[j];
  e->norm = e->cosine = NAN;
  k->cand[j] = 1;
  int ok = codec ? compress_codec_decode(codec, payload, len, row, k->n) == WT_OK
                 : len == k->n * sizeof(float);
  if (ok && !codec && len) memcpy(row, payload, len);
  const uint64_t digest = ((uint64_t)wt_crc32(0, payload, len) << 32) ^ (uint64_t)len;
  int replay = 0;
  for (int i = 0; i < self->digests[j]; i++) replay |= self->digest[j][i] == digest;
  memmove(self->digest[j] + 1, self->digest[j], sizeof(uint64_t) * (PARALLEL_ROBUST_REPLAY - 1));
  self->digest[j][0] = digest;
  self->digests[j] = WT_MIN(self->digests[j] + 1, PARALLEL_ROBUST_REPLAY);
  if (!ok) {
    memset(row, 0, k->n * sizeof(float));
    s_flag(k, j, PARALLEL_ROBUST_FLAG_CORRUPT);
    return;
  }
  double sq = 0;
  for (size_t i = 0; i < k->n; i++) sq += (double)row[i] * row[i];
  e->norm = sqrt(sq);
  k->log_norm[j] = log(e->norm);
  if (!isfinite(sq))
    s_flag(k, j, PARALLEL_ROBUST_FLAG_NONFINITE);
  else if (sq == 0 && k->n)
    s_flag(k, j, PARALLEL_ROBUST_FLAG_ZERO);
  if (replay && sq > 0) s_flag(k, j, PARALLEL_ROBUST_FLAG_REPLAY);
}

/* The norm band: the median of the history's and this step's log-norms ± max(ln ratio, k·σ). */
static void s_check_norms(parallel_robust *self, s_call *k) {
  parallel_robust_report *r = k->rep;
  r->norm_median = NAN, r->norm_lo = 0, r->norm_hi = INFINITY;
  if (s_count(k) < 3) return;
  double *v, med, sigma;
  int m = s_sample(self, self->log_norm, k->log_norm, k->cand, k->world, &v);
  s_median_sigma(v, m, &med, &sigma);
  free(v);
  const double margin = fmax(log(self->cfg.norm_ratio), self->cfg.norm_k * sigma);
  r->norm_median = exp(med), r->norm_lo = exp(med - margin), r->norm_hi = exp(med + margin);
  for (int j = 0; j < k->world; j++)
    if (k->cand[j] && fabs(k->log_norm[j] - med) > margin) s_flag(k, j, PARALLEL_ROBUST_FLAG_NORM);
}

/* Cosines of every decoded, finite row to the aggregate (NAN where undefined). */
static void s_cosines(s_call *k) {
  double aa = 0;
  for (size_t i = 0; i < k->n; i++) aa += (double)k->agg[i] * k->agg[i];
  for (int j = 0; j < k->world; j++) {
    const float *x = k->rows + (size_t)j * k->n;
    parallel_robust_evidence *e = &k->rep->rank[j];
    double xa = 0;
    for (size_t i = 0; i < k->n && aa > 0 && isfinite(e->norm) && e->norm > 0; i++)
      xa += (double)x[i] * k->agg[i];
    e->cosine = aa > 0 && isfinite(aa) && isfinite(e->norm) && e->norm > 0
                    ? xa / (sqrt(aa) * e->norm)
                    : NAN;
    k->cosine[j] = e->cosine;
  }
}

/* The cosine band: below median − max(k·σ, median/2) of the history's and this step's cosines
 * is flagged (off when the median is not positive: no consensus to compare with). */
static int s_check_cosines(parallel_robust *self, s_call *k) {
  parallel_robust_report *r = k->rep;
  r->cos_median = NAN, r->cos_min = -INFINITY;
  if (s_count(k) < 3) return 0;
  double *v, med, sigma;
  int m = s_sample(self, self->cosine, k->cosine, k->cand, k->world, &v);
  if (m > 0) s_median_sigma(v, m, &med, &sigma);
  free(v);
  if (m == 0 || !(med > 0)) return 0;
  r->cos_median = med;
  r->cos_min = med - fmax(self->cfg.cos_k * sigma, 0.5 * med);
  /* Lowest first, and never a majority: the test compares each contribution with what the
   * others agree on, which only a majority of honest ones makes meaningful. */
  int flagged = 0;
  for (int left = (s_count(k) - 1) / 2; left > 0; left--) {
    int worst = -1;
    for (int j = 0; j < k->world; j++)
      if (k->cand[j] && !(k->cosine[j] >= r->cos_min) &&
          (worst < 0 || !(k->cosine[j] >= k->cosine[worst])))
        worst = j;
    if (worst < 0) break;
    s_flag(k, worst, PARALLEL_ROBUST_FLAG_COSINE);
    flagged = 1;
  }
  return flagged;
}

static void s_aggregate(parallel_robust *self, s_call *k) {
  parallel_robust_aggregate(self->cfg.kind, k->rows, k->world, k->n, k->cand, k->agg);
}

/* Checks, aggregates and records: the band tests, the aggregate of what passed, the cosine test
 * against it and, when that left something out, the aggregate again. */
static void s_judge(parallel_robust *self, s_call *k) {
  s_check_norms(self, k);
  s_aggregate(self, k);
  s_cosines(k);
  if (s_check_cosines(self, k)) {
    s_aggregate(self, k);
    s_cosines(k);
  }
  k->rep->used = s_count(k);
  for (int j = 0; j < k->world; j++)
    if (k->cand[j]) s_remember(self, k->log_norm[j], k->cosine[j]);
}

/* ---- the collective ----------------------------------------------------------------------- */

/* This rank's payload: codec(x + e), or x's bytes. */
static int s_encode(const compress_codec *codec, compress_ef *ef, const float *x, size_t n,
                    uint8_t *out, size_t cap, size_t *len) {
  if (ef) return compress_ef_encode(ef, codec, x, out, cap, len);
  if (codec) return compress_codec_encode(codec, x, n, out, cap, len);
  memcpy(out, x, n * sizeof(float));
  *len = n * sizeof(float);
  return WT_OK;
}

static void s_reset_group(parallel_robust *self, int world) {
  if (self->world == world) return;
  self->world = world;
  self->kept = self->next = 0;
  memset(self->digests, 0, sizeof self->digests);
}

void parallel_robust_keep_next(parallel_robust *self, int rank, float *out) {
  self->keep_rank = rank, self->keep_out = out;
}

int parallel_robust_allreduce(parallel_robust *self, parallel_comm *c, const compress_codec *codec,
                              compress_ef *ef, float *x, size_t n, parallel_robust_report *report) {
  const int p = parallel_comm_size(c);
  if (p > PARALLEL_ROBUST_MAX_RANKS)
    return wt_fail(WT_EINVAL, "robust all-reduce: a group of %d ranks; at most %d", p,
                   PARALLEL_ROBUST_MAX_RANKS);
  if (ef && (!codec || compress_ef_size(ef) != n))
    return wt_fail(WT_EMISMATCH,
                   "robust all-reduce: a residual of %zu elements for a tensor of "
                   "%zu (and a codec)",
                   compress_ef_size(ef), n);
  s_reset_group(self, p);
  float *keep_out = self->keep_out;
  self->keep_out = NULL; /* one call only, whatever happens */
  const size_t cap = codec ? compress_codec_max_size(codec, n) : n * sizeof(float);
  uint8_t *mine = wt_xmalloc(cap + 1), *all = NULL;
  size_t len = 0, *offsets = wt_xcalloc((size_t)p + 1, sizeof *offsets);
  int rc = s_encode(codec, ef, x, n, mine, cap, &len);
  /* The limit guards memory only: a payload that announces more than fp32 would take is still
   * received and then flagged when it does not decode, so it costs its sender the step, not the
   * group its step. */
  const size_t limit = (WT_MAX(cap, n * sizeof(float)) + 64) * (size_t)p;
  if (rc == WT_OK) rc = parallel_allgatherv(c, mine, len, limit, &all, offsets);
  free(mine);
  if (rc == WT_OK) {
    parallel_robust_report local;
    s_call k = {.world = p, .n = n, .rep = report ? report : &local};
    memset(k.rep, 0, sizeof *k.rep);
    k.rep->world = p;
    k.rows = wt_xmalloc(sizeof(float) * ((size_t)p * n + 1));
    k.agg = wt_xmalloc(sizeof(float) * (n + 1));
    for (int j = 0; j < p; j++)
      s_decode(self, &k, codec, j, all + offsets[j], offsets[j + 1] - offsets[j]);
    s_judge(self, &k);
    if (keep_out && self->keep_rank >= 0 && self->keep_rank < p)
      memcpy(keep_out, k.rows + (size_t)self->keep_rank * n, n * sizeof(float));
    memcpy(x, k.agg, n * sizeof(float));
    free(k.rows);
    free(k.agg);
  }
  free(all);
  free(offsets);
  return rc;
}
