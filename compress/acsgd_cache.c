/* acsgd_cache — slots on the heap or in an mmapped file, a sample-id map and LRU ticks. */
#include "compress/acsgd_internal.h"

#include "common/bytes.h" /* defines: wt_put_le64 / wt_get_le64, wt_crc32 */
#include "common/common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* Slots are addressed by uint32 in the message; keep a margin below ACSGD_NO_SLOT. */
#define S_MAX_CAPACITY ((size_t)1 << 30)

/* Sample ids are dataset indices, often consecutive: mix them so probes stay short. */
static size_t s_hash(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  return (size_t)x;
}

static int s_map_file(acsgd_cache *c, const char *path, size_t bytes) {
  int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
  if (fd < 0)
    return wt_fail(WT_EIO, "acsgd cache file %s: cannot create (%s); choose a writable path", path,
                   strerror(errno));
  // ftruncate makes a sparse file: disk is used only for slots actually written.
  if (ftruncate(fd, (off_t)bytes) != 0) {
    int err = errno;
    close(fd);
    return wt_fail(WT_EIO, "acsgd cache file %s: cannot size to %zu bytes (%s)", path, bytes,
                   strerror(err));
  }
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int err = errno;
  close(fd); // the mapping keeps the file alive
  if (p == MAP_FAILED)
    return wt_fail(WT_EIO, "acsgd cache file %s: mmap of %zu bytes failed (%s)", path, bytes,
                   strerror(err));
  c->data = p;
  c->map_bytes = bytes;
  return WT_OK;
}

static int s_alloc_tables(acsgd_cache *c) {
  size_t table = 16;
  while (table < 2 * c->capacity) table <<= 1; // load factor <= 1/2
  c->mask = table - 1;
  c->keys = calloc(table, sizeof *c->keys);
  c->vals = malloc(table * sizeof *c->vals);
  c->slot_sample = calloc(c->capacity, sizeof *c->slot_sample);
  c->slot_tick = calloc(c->capacity, sizeof *c->slot_tick);
  if (!c->keys || !c->vals || !c->slot_sample || !c->slot_tick)
    return wt_fail(WT_ENOMEM, "acsgd cache: no memory for the index of %zu samples", c->capacity);
  memset(c->vals, 0xff, table * sizeof *c->vals); // all ACSGD_NO_SLOT
  return WT_OK;
}

int acsgd_cache_init(acsgd_cache *c, size_t slot_floats, size_t capacity, const char *path) {
  memset(c, 0, sizeof *c);
  c->slot_floats = slot_floats;
  c->capacity = capacity;
  size_t bytes;
  if (capacity == 0 || capacity > S_MAX_CAPACITY || wt_mul_size(capacity, slot_floats, &bytes) ||
      wt_mul_size(bytes, sizeof(float), &bytes))
    return wt_fail(WT_EINVAL,
                   "acsgd cache: capacity %zu samples of %zu floats is out of range "
                   "(1..2^30 samples); lower max_samples or max_bytes",
                   capacity, slot_floats);
  int rc = s_alloc_tables(c);
  if (rc == WT_OK && path) rc = s_map_file(c, path, bytes);
  if (rc == WT_OK && !path) {
    c->data = calloc(bytes / sizeof(float), sizeof(float)); // pages appear as slots are used
    if (!c->data)
      rc = wt_fail(WT_ENOMEM,
                   "acsgd cache: cannot allocate %zu bytes; bound it "
                   "lower or give a cache file",
                   bytes);
  }
  if (rc != WT_OK) acsgd_cache_release(c);
  return rc;
}

void acsgd_cache_release(acsgd_cache *c) {
  if (c->map_bytes)
    munmap(c->data, c->map_bytes);
  else
    free(c->data);
  free(c->keys);
  free(c->vals);
  free(c->slot_sample);
  free(c->slot_tick);
  memset(c, 0, sizeof *c);
}

uint32_t acsgd_cache_find(const acsgd_cache *c, uint64_t sample_id) {
  for (size_t i = s_hash(sample_id) & c->mask;; i = (i + 1) & c->mask) {
    if (c->vals[i] == ACSGD_NO_SLOT) return ACSGD_NO_SLOT;
    if (c->keys[i] == sample_id) return c->vals[i];
  }
}

static void s_map_put(acsgd_cache *c, uint64_t sample_id, uint32_t slot) {
  size_t i = s_hash(sample_id) & c->mask;
  while (c->vals[i] != ACSGD_NO_SLOT && c->keys[i] != sample_id) i = (i + 1) & c->mask;
  c->keys[i] = sample_id;
  c->vals[i] = slot;
}

/* Backward-shift deletion: pull later entries of the probe run into the hole when their home
 * position does not lie (cyclically) between the hole and themselves. */
static void s_map_remove(acsgd_cache *c, uint64_t sample_id) {
  size_t i = s_hash(sample_id) & c->mask;
  while (c->keys[i] != sample_id || c->vals[i] == ACSGD_NO_SLOT) {
    if (c->vals[i] == ACSGD_NO_SLOT) return;
    i = (i + 1) & c->mask;
  }
  for (size_t j = (i + 1) & c->mask; c->vals[j] != ACSGD_NO_SLOT; j = (j + 1) & c->mask) {
    size_t home = s_hash(c->keys[j]) & c->mask;
    int stays = (i <= j) ? (i < home && home <= j) : (i < home || home <= j);
    if (stays) continue;
    c->keys[i] = c->keys[j];
    c->vals[i] = c->vals[j];
    i = j;
  }
  c->vals[i] = ACSGD_NO_SLOT;
}

uint32_t acsgd_cache_unused_slot(const acsgd_cache *c) {
  // Slots are handed out in order and never freed (only reused), so the next unused is `used`.
  return c->used < c->capacity ? (uint32_t)c->used : ACSGD_NO_SLOT;
}

uint32_t acsgd_cache_lru_slot(const acsgd_cache *c) {
  uint32_t best = 0;
  for (size_t i = 1; i < c->used; i++)
    if (c->slot_tick[i] < c->slot_tick[best]) best = (uint32_t)i;
  return best;
}

int acsgd_cache_assign(acsgd_cache *c, uint32_t slot, uint64_t sample_id) {
  int evicted = 0;
  if (c->slot_tick[slot]) {
    evicted = c->slot_sample[slot] != sample_id;
    s_map_remove(c, c->slot_sample[slot]);
  } else {
    c->used++;
  }
  c->slot_sample[slot] = sample_id;
  s_map_put(c, sample_id, slot);
  memset(acsgd_cache_slot(c, slot), 0, c->slot_floats * sizeof(float));
  acsgd_cache_touch(c, slot);
  return evicted;
}

void acsgd_cache_touch(acsgd_cache *c, uint32_t slot) {
  c->slot_tick[slot] = ++c->tick;
}

float *acsgd_cache_slot(const acsgd_cache *c, uint32_t slot) {
  return c->data + (size_t)slot * c->slot_floats;
}

/* ---- checkpoint -------------------------------------------------------------------------- */

/* "WTAC", version, slot floats, capacity, used, tick (8 bytes each after the magic), then per
 * used slot its sample id and tick, then the used slots' floats; a CRC-32 of all of it last.
 * Slots in use are always 0..used-1 (acsgd_cache_unused_slot), so they are stored in order. */
#define S_MAGIC "WTAC"
#define S_VERSION 1u

static int s_write(FILE *f, const void *p, size_t n, uint32_t *crc) {
  *crc = wt_crc32(*crc, p, n);
  return fwrite(p, 1, n, f) == n ? WT_OK : wt_fail(WT_EIO, "acsgd cache: write failed");
}

static int s_read(FILE *f, void *p, size_t n, uint32_t *crc) {
  if (fread(p, 1, n, f) != n)
    return wt_fail(WT_ECORRUPT, "acsgd cache checkpoint: truncated");
  *crc = wt_crc32(*crc, p, n);
  return WT_OK;
}

int acsgd_cache_save(const acsgd_cache *c, FILE *f) {
  uint8_t h[44], e[16];
  uint32_t crc = 0;
  memcpy(h, S_MAGIC, 4);
  wt_put_le64(h + 4, S_VERSION);
  wt_put_le64(h + 12, c->slot_floats);
  wt_put_le64(h + 20, c->capacity);
  wt_put_le64(h + 28, c->used);
  wt_put_le64(h + 36, c->tick);
  WT_CHECK(s_write(f, h, 44, &crc));
  for (size_t i = 0; i < c->used; i++) {
    wt_put_le64(e, c->slot_sample[i]);
    wt_put_le64(e + 8, c->slot_tick[i]);
    WT_CHECK(s_write(f, e, 16, &crc));
  }
  if (c->used) WT_CHECK(s_write(f, c->data, sizeof(float) * c->used * c->slot_floats, &crc));
  uint8_t t[4];
  wt_put_le32(t, crc);
  return fwrite(t, 1, 4, f) == 4 ? WT_OK : wt_fail(WT_EIO, "acsgd cache: write failed");
}

int acsgd_cache_load(acsgd_cache *c, FILE *f) {
  uint8_t h[44], t[4];
  uint32_t crc = 0;
  WT_CHECK(s_read(f, h, 44, &crc));
  uint64_t floats = wt_get_le64(h + 12), cap = wt_get_le64(h + 20), used = wt_get_le64(h + 28);
  uint64_t tick = wt_get_le64(h + 36);
  if (memcmp(h, S_MAGIC, 4) || wt_get_le64(h + 4) != S_VERSION)
    return wt_fail(WT_ECORRUPT, "acsgd cache checkpoint: not a cache (magic or version)");
  if (floats != c->slot_floats || cap != c->capacity || used > cap)
    return wt_fail(WT_EMISMATCH,
                   "acsgd cache checkpoint: %llu slots of %llu floats (%llu used) do not fit "
                   "this cache of %zu slots of %zu floats; use the same model, sequence "
                   "length and cache bound",
                   (unsigned long long)cap, (unsigned long long)floats,
                   (unsigned long long)used, c->capacity, c->slot_floats);
  uint64_t *ids = wt_xmalloc(sizeof(uint64_t) * (used + 1));
  uint64_t *ticks = wt_xmalloc(sizeof(uint64_t) * (used + 1));
  float *data = wt_xmalloc(sizeof(float) * (used * floats + 1));
  int rc = WT_OK;
  for (uint64_t i = 0; rc == WT_OK && i < used; i++) {
    uint8_t e[16];
    rc = s_read(f, e, 16, &crc);
    ids[i] = wt_get_le64(e), ticks[i] = wt_get_le64(e + 8);
    if (rc == WT_OK && (ticks[i] == 0 || ticks[i] > tick))
      rc = wt_fail(WT_ECORRUPT, "acsgd cache checkpoint: slot %llu has tick %llu of %llu",
                   (unsigned long long)i, (unsigned long long)ticks[i],
                   (unsigned long long)tick);
  }
  if (rc == WT_OK && used) rc = s_read(f, data, sizeof(float) * used * floats, &crc);
  if (rc == WT_OK && fread(t, 1, 4, f) != 4)
    rc = wt_fail(WT_ECORRUPT, "acsgd cache checkpoint: truncated");
  if (rc == WT_OK && wt_get_le32(t) != crc)
    rc = wt_fail(WT_ECORRUPT, "acsgd cache checkpoint: CRC mismatch (damaged file)");
  if (rc == WT_OK) {
    /* Rebuild the index; a sample named twice would break it, so refuse that. */
    memset(c->vals, 0xff, (c->mask + 1) * sizeof *c->vals);
    for (uint64_t i = 0; i < used; i++) {
      if (acsgd_cache_find(c, ids[i]) != ACSGD_NO_SLOT) {
        rc = wt_fail(WT_ECORRUPT, "acsgd cache checkpoint: sample %llx is in two slots",
                     (unsigned long long)ids[i]);
        break;
      }
      s_map_put(c, ids[i], (uint32_t)i);
    }
  }
  if (rc == WT_OK) {
    memset(c->slot_sample, 0, c->capacity * sizeof *c->slot_sample);
    memset(c->slot_tick, 0, c->capacity * sizeof *c->slot_tick);
    memcpy(c->slot_sample, ids, sizeof(uint64_t) * used);
    memcpy(c->slot_tick, ticks, sizeof(uint64_t) * used);
    if (used) memcpy(c->data, data, sizeof(float) * used * floats);
    c->used = used;
    c->tick = tick;
  } else { /* the index may be half rebuilt: empty the cache */
    memset(c->vals, 0xff, (c->mask + 1) * sizeof *c->vals);
    memset(c->slot_sample, 0, c->capacity * sizeof *c->slot_sample);
    memset(c->slot_tick, 0, c->capacity * sizeof *c->slot_tick);
    c->used = 0, c->tick = 0;
  }
  free(ids), free(ticks), free(data);
  return rc;
}
