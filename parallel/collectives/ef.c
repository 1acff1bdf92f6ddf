/* ef — the error-feedback state of one tensor on one rank for the compressed ring all-reduce:
 * one compress_ef per ring chunk, and its checkpoint (a small header, then ef.h's format). */
#include "parallel/collectives/collectives.h"

#include "common/common.h"

#include <stdlib.h>
#include <string.h>

#define S_MAGIC "WTPE"
#define S_VERSION 1u
#define S_HEADER 24 /* magic, version, n, world, rank */

struct parallel_ef {
  size_t n;
  int rank, world;
  compress_ef **chunks; /* [world]: chunk c covers parallel_chunk_range(n, world, c) */
};

parallel_ef *parallel_ef_new(size_t n, int rank, int world) {
  if (world < 1 || rank < 0 || rank >= world) {
    wt_fail(WT_EINVAL, "parallel_ef: rank %d out of range for world %d", rank, world);
    return NULL;
  }
  parallel_ef *self = wt_xcalloc(1, sizeof *self);
  self->n = n;
  self->rank = rank;
  self->world = world;
  self->chunks = wt_xcalloc((size_t)world, sizeof *self->chunks);
  for (int c = 0; c < world; c++) {
    size_t off, len;
    parallel_chunk_range(n, world, c, &off, &len);
    self->chunks[c] = compress_ef_new(len);
  }
  return self;
}

void parallel_ef_destroy(parallel_ef **self_p) {
  if (!self_p || !*self_p) return;
  parallel_ef *self = *self_p;
  for (int c = 0; c < self->world; c++) compress_ef_destroy(&self->chunks[c]);
  free(self->chunks);
  free(self);
  *self_p = NULL;
}

size_t parallel_ef_size(const parallel_ef *self) {
  return self->n;
}
int parallel_ef_world(const parallel_ef *self) {
  return self->world;
}
int parallel_ef_rank(const parallel_ef *self) {
  return self->rank;
}

compress_ef *parallel_ef_chunk(parallel_ef *self, int chunk) {
  return chunk >= 0 && chunk < self->world ? self->chunks[chunk] : NULL;
}

double parallel_ef_sq_norm(const parallel_ef *self) {
  double sq = 0;
  for (int c = 0; c < self->world; c++) {
    const float *r = compress_ef_residual(self->chunks[c]);
    for (size_t i = 0; i < compress_ef_size(self->chunks[c]); i++) sq += (double)r[i] * r[i];
  }
  return sq;
}

void parallel_ef_reset(parallel_ef *self) {
  for (int c = 0; c < self->world; c++) compress_ef_reset(self->chunks[c]);
}

static void s_put(uint8_t *p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint64_t s_get(const uint8_t *p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; i++) v |= (uint64_t)p[i] << (8 * i);
  return v;
}

int parallel_ef_save(const parallel_ef *self, FILE *f) {
  uint8_t h[S_HEADER];
  memcpy(h, S_MAGIC, 4);
  s_put(h + 4, S_VERSION, 4);
  s_put(h + 8, self->n, 8);
  s_put(h + 16, (uint64_t)self->world, 4);
  s_put(h + 20, (uint64_t)self->rank, 4);
  if (fwrite(h, 1, sizeof h, f) != sizeof h)
    return wt_fail(WT_EIO, "parallel_ef: could not write the checkpoint header");
  for (int c = 0; c < self->world; c++) WT_CHECK(compress_ef_save(self->chunks[c], f));
  return WT_OK;
}

int parallel_ef_load(parallel_ef *self, FILE *f) {
  uint8_t h[S_HEADER];
  if (fread(h, 1, sizeof h, f) != sizeof h)
    return wt_fail(WT_ECORRUPT, "parallel_ef: checkpoint truncated in its header");
  if (memcmp(h, S_MAGIC, 4) != 0)
    return wt_fail(WT_ECORRUPT, "parallel_ef: not a residual checkpoint (bad magic)");
  if (s_get(h + 4, 4) != S_VERSION)
    return wt_fail(WT_EMISMATCH, "parallel_ef: checkpoint version %u, this build reads %u",
                   (unsigned)s_get(h + 4, 4), S_VERSION);
  if (s_get(h + 8, 8) != self->n || s_get(h + 16, 4) != (uint64_t)self->world ||
      s_get(h + 20, 4) != (uint64_t)self->rank)
    return wt_fail(WT_EMISMATCH,
                   "parallel_ef: checkpoint is for n=%llu world=%llu rank=%llu, "
                   "not n=%zu world=%d rank=%d; reset the residuals instead",
                   (unsigned long long)s_get(h + 8, 8), (unsigned long long)s_get(h + 16, 4),
                   (unsigned long long)s_get(h + 20, 4), self->n, self->world, self->rank);
  for (int c = 0; c < self->world; c++) WT_CHECK(compress_ef_load(self->chunks[c], f));
  return WT_OK;
}
