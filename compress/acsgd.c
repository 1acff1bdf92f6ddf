/* acsgd — the sender and receiver ends of an AC-SGD pipeline cut (see acsgd.h). */
#include "compress/acsgd_internal.h"

#include "common/common.h"

#include <stdlib.h>
#include <string.h>

/* Both ends hold the same things; only the sender decides, the receiver follows messages. */
typedef struct {
  acsgd_options opts;
  char *path;        /* owned copy of opts.cache_path */
  acsgd_cache cache; /* unused (capacity 0) when !opts.delta */
  float *scratch;    /* (rows, cols): the sender's delta */
  acsgd_stats stats;
} s_end;

struct acsgd_sender {
  s_end e;
};
struct acsgd_receiver {
  s_end e;
};

/* ---- shared set-up -------------------------------------------------------------------------- */

static int s_capacity(const acsgd_options *o, size_t *capacity) {
  size_t slot_bytes = (size_t)o->rows * (size_t)o->cols * sizeof(float);
  size_t cap = o->max_samples ? o->max_samples : SIZE_MAX;
  if (o->max_bytes) cap = WT_MIN(cap, o->max_bytes / slot_bytes);
  if (!o->max_samples && !o->max_bytes)
    return wt_fail(WT_EINVAL, "acsgd: the delta cache needs a bound: set max_samples or "
                              "max_bytes");
  if (cap == 0)
    return wt_fail(WT_EINVAL, "acsgd: max_bytes %zu holds no sample of %zu bytes; raise it",
                   o->max_bytes, slot_bytes);
  *capacity = cap;
  return WT_OK;
}

static int s_end_init(s_end *e, const acsgd_options *o) {
  memset(e, 0, sizeof *e);
  if (!o || o->rows <= 0 || o->cols <= 0 || (o->bits != 2 && o->bits != 4 && o->bits != 8))
    return wt_fail(WT_EINVAL,
                   "acsgd: options need rows, cols > 0 and bits 2, 4 or 8 (got "
                   "%dx%d, %d bits)",
                   o ? o->rows : 0, o ? o->cols : 0, o ? o->bits : 0);
  if (o->overflow != ACSGD_OVERFLOW_REFUSE && o->overflow != ACSGD_OVERFLOW_EVICT)
    return wt_fail(WT_EINVAL, "acsgd: unknown overflow policy %d", (int)o->overflow);
  e->opts = *o;
  e->path = o->cache_path ? wt_xstrdup(o->cache_path) : NULL;
  e->opts.cache_path = e->path;
  e->scratch = wt_xmalloc((size_t)o->rows * o->cols * sizeof(float));
  if (!o->delta) return WT_OK;
  size_t capacity = 0;
  WT_CHECK(s_capacity(o, &capacity));
  WT_CHECK(acsgd_cache_init(&e->cache, (size_t)o->rows * o->cols, capacity, e->path));
  e->stats.capacity_samples = capacity;
  e->stats.cache_bytes_capacity = capacity * (size_t)o->rows * o->cols * sizeof(float);
  return WT_OK;
}

static void s_end_release(s_end *e) {
  if (e->cache.capacity) acsgd_cache_release(&e->cache);
  free(e->scratch);
  free(e->path);
}

static void s_count(s_end *e, acsgd_kind kind, size_t bytes) {
  acsgd_stats *st = &e->stats;
  st->messages++;
  st->bytes += bytes;
  st->first += kind == ACSGD_FIRST;
  st->delta += kind == ACSGD_DELTA;
  st->plain += kind == ACSGD_PLAIN;
  st->cached_samples = e->cache.used;
  st->cache_bytes_used = e->cache.used * e->cache.slot_floats * sizeof(float);
}

static const float *s_cached(const s_end *e, uint64_t sample_id) {
  if (!e->cache.capacity) return NULL;
  uint32_t slot = acsgd_cache_find(&e->cache, sample_id);
  return slot == ACSGD_NO_SLOT ? NULL : acsgd_cache_slot(&e->cache, slot);
}

acsgd_sender *acsgd_sender_new(const acsgd_options *opts) {
  acsgd_sender *s = wt_xcalloc(1, sizeof *s);
  if (s_end_init(&s->e, opts) != WT_OK) acsgd_sender_destroy(&s);
  return s;
}

void acsgd_sender_destroy(acsgd_sender **self_p) {
  if (!self_p || !*self_p) return;
  s_end_release(&(*self_p)->e);
  free(*self_p);
  *self_p = NULL;
}

acsgd_receiver *acsgd_receiver_new(const acsgd_options *opts) {
  acsgd_receiver *r = wt_xcalloc(1, sizeof *r);
  if (s_end_init(&r->e, opts) != WT_OK) acsgd_receiver_destroy(&r);
  return r;
}

void acsgd_receiver_destroy(acsgd_receiver **self_p) {
  if (!self_p || !*self_p) return;
  s_end_release(&(*self_p)->e);
  free(*self_p);
  *self_p = NULL;
}

/* ---- sender --------------------------------------------------------------------------------- */

/* The sender's whole policy: DELTA if cached, else FIRST into an unused slot, else (cache full)
 * FIRST into the least recently used slot (EVICT) or PLAIN (REFUSE). */
static acsgd_kind s_decide(const s_end *e, uint64_t sample_id, uint32_t *slot) {
  *slot = ACSGD_NO_SLOT;
  if (!e->opts.delta) return ACSGD_PLAIN;
  *slot = acsgd_cache_find(&e->cache, sample_id);
  if (*slot != ACSGD_NO_SLOT) return ACSGD_DELTA;
  *slot = acsgd_cache_unused_slot(&e->cache);
  if (*slot != ACSGD_NO_SLOT) return ACSGD_FIRST;
  if (e->opts.overflow == ACSGD_OVERFLOW_REFUSE) return ACSGD_PLAIN;
  *slot = acsgd_cache_lru_slot(&e->cache);
  return ACSGD_FIRST;
}

int acsgd_sender_encode(acsgd_sender *s, uint64_t sample_id, const float *a, void *out, size_t cap,
                        size_t *written, float *recon) {
  s_end *e = &s->e;
  const int rows = e->opts.rows, cols = e->opts.cols, bits = e->opts.bits;
  const size_t n = (size_t)rows * cols, need = acsgd_msg_bytes(rows, cols, bits);
  if (cap < need)
    return wt_fail(WT_EINVAL, "acsgd: output buffer of %zu bytes, message needs %zu", cap, need);
  uint32_t slot;
  acsgd_kind kind = s_decide(e, sample_id, &slot);
  const float *src = a;
  if (kind == ACSGD_DELTA) {
    const float *c = acsgd_cache_slot(&e->cache, slot);
    for (size_t i = 0; i < n; i++) e->scratch[i] = a[i] - c[i];
    src = e->scratch;
  }
  uint8_t *payload = (uint8_t *)out + ACSGD_HEADER_BYTES;
  WT_CHECK(acsgd_quantize_rows(src, rows, cols, bits, payload)); // cache untouched if it fails
  acsgd_msg_write_header(out, kind, bits, sample_id, rows, cols, slot);
  if (kind == ACSGD_FIRST) e->stats.evictions += acsgd_cache_assign(&e->cache, slot, sample_id);
  if (kind == ACSGD_DELTA) acsgd_cache_touch(&e->cache, slot);
  if (kind != ACSGD_PLAIN) {
    float *c = acsgd_cache_slot(&e->cache, slot);
    acsgd_dequantize_rows(payload, rows, cols, bits, c, 1); // our own bytes: cannot fail
    if (recon) memcpy(recon, c, n * sizeof(float));
  } else if (recon) {
    acsgd_dequantize_rows(payload, rows, cols, bits, recon, 0);
  }
  *written = need;
  s_count(e, kind, need);
  return WT_OK;
}

acsgd_stats acsgd_sender_stats(const acsgd_sender *s) {
  return s->e.stats;
}

const float *acsgd_sender_cached(const acsgd_sender *s, uint64_t sample_id) {
  return s_cached(&s->e, sample_id);
}

/* ---- receiver ------------------------------------------------------------------------------- */

/* Does a FIRST/DELTA message fit this receiver's cache? Checked before anything is written. */
static int s_check_slot(const s_end *e, const acsgd_msg_info *m) {
  const acsgd_cache *c = &e->cache;
  if (!e->opts.delta)
    return wt_fail(WT_EMISMATCH, "acsgd: a delta message reached a receiver without a cache; "
                                 "both ends must use the same options");
  if (m->rows != e->opts.rows || m->cols != e->opts.cols || m->bits != e->opts.bits)
    return wt_fail(WT_EMISMATCH, "acsgd message: %dx%d at %d bits, this cut is %dx%d at %d",
                   m->rows, m->cols, m->bits, e->opts.rows, e->opts.cols, e->opts.bits);
  if (m->slot >= c->capacity)
    return wt_fail(WT_EMISMATCH, "acsgd message: slot %u beyond this cache's %zu", m->slot,
                   c->capacity);
  if (m->kind == ACSGD_DELTA && (!c->slot_tick[m->slot] || c->slot_sample[m->slot] != m->sample_id))
    return wt_fail(WT_EMISMATCH,
                   "acsgd message: delta for sample %llu, but slot %u does not "
                   "hold it; the two caches have diverged",
                   (unsigned long long)m->sample_id, m->slot);
  uint32_t held = acsgd_cache_find(c, m->sample_id);
  // Slots are handed out in order, so a FIRST names a used slot or the next unused one.
  if (m->kind == ACSGD_FIRST && ((!c->slot_tick[m->slot] && m->slot != c->used) ||
                                 (held != ACSGD_NO_SLOT && held != m->slot)))
    return wt_fail(WT_EMISMATCH,
                   "acsgd message: first visit of sample %llu into slot %u does "
                   "not follow the sender's slot order; the caches have diverged",
                   (unsigned long long)m->sample_id, m->slot);
  return WT_OK;
}

int acsgd_receiver_decode(acsgd_receiver *r, const void *msg, size_t len, float *out,
                          size_t out_cap, size_t *consumed, acsgd_msg_info *info) {
  s_end *e = &r->e;
  acsgd_msg_info m;
  WT_CHECK(acsgd_msg_parse(msg, len, &m));
  size_t n = (size_t)m.rows * (size_t)m.cols;
  if (n > out_cap)
    return wt_fail(WT_EMISMATCH, "acsgd message: %dx%d does not fit the %zu-float buffer", m.rows,
                   m.cols, out_cap);
  if (m.kind != ACSGD_PLAIN) WT_CHECK(s_check_slot(e, &m));
  const uint8_t *payload = (const uint8_t *)msg + ACSGD_HEADER_BYTES;
  // Decoding into `out` first validates every scale before the cache is touched.
  WT_CHECK(acsgd_dequantize_rows(payload, m.rows, m.cols, m.bits, out, 0));
  if (m.kind != ACSGD_PLAIN) {
    if (m.kind == ACSGD_FIRST)
      e->stats.evictions += acsgd_cache_assign(&e->cache, m.slot, m.sample_id);
    else
      acsgd_cache_touch(&e->cache, m.slot);
    float *c = acsgd_cache_slot(&e->cache, m.slot);
    acsgd_dequantize_rows(payload, m.rows, m.cols, m.bits, c, 1); // same code as the sender's
    memcpy(out, c, n * sizeof(float));
  }
  s_count(e, m.kind, m.total_bytes);
  if (consumed) *consumed = m.total_bytes;
  if (info) *info = m;
  return WT_OK;
}

acsgd_stats acsgd_receiver_stats(const acsgd_receiver *r) {
  return r->e.stats;
}

const float *acsgd_receiver_cached(const acsgd_receiver *r, uint64_t sample_id) {
  return s_cached(&r->e, sample_id);
}

/* ---- checkpoint -------------------------------------------------------------------------- */

int acsgd_sender_save(const acsgd_sender *s, FILE *f) {
  return s->e.opts.delta ? acsgd_cache_save(&s->e.cache, f) : WT_OK;
}
int acsgd_sender_load(acsgd_sender *s, FILE *f) {
  return s->e.opts.delta ? acsgd_cache_load(&s->e.cache, f) : WT_OK;
}
int acsgd_receiver_save(const acsgd_receiver *r, FILE *f) {
  return r->e.opts.delta ? acsgd_cache_save(&r->e.cache, f) : WT_OK;
}
int acsgd_receiver_load(acsgd_receiver *r, FILE *f) {
  return r->e.opts.delta ? acsgd_cache_load(&r->e.cache, f) : WT_OK;
}
