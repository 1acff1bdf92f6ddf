/* acsgd_internal — PRIVATE to compress/acsgd*.c; the public API is compress/acsgd.h.
 *
 * The per-sample activation cache of one side of a pipeline cut:
 * `capacity` fixed-size slots, each one sample's (rows, cols) activation, on the heap or in an
 * mmapped file, plus a sample-id → slot map (open addressing, linear probing, backward-shift
 * deletion so no tombstones pile up under eviction) and a last-use tick per slot for LRU.
 */
#ifndef WT_ACSGD_INTERNAL_H
#define WT_ACSGD_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "compress/acsgd.h"

/* Writes the 40-byte header described in acsgd.h, with the CRC of itself and the payload that
 * must already follow it (acsgd_msg.c). */
void acsgd_msg_write_header(uint8_t *h, acsgd_kind kind, int bits, uint64_t sample_id, int rows,
                            int cols, uint32_t slot);

typedef struct {
  size_t slot_floats; /* rows × cols */
  size_t capacity;    /* slots */
  size_t used;        /* slots holding a sample */
  float *data;        /* (capacity, slot_floats) */
  size_t map_bytes;   /* > 0 when data is an mmapped file */
  uint64_t *slot_sample;
  uint64_t *slot_tick; /* 0: slot never used */
  uint64_t tick;
  uint64_t *keys; /* hash table of sample ids ... */
  uint32_t *vals; /* ... and their slots (ACSGD_NO_SLOT: empty) */
  size_t mask;    /* table size - 1 */
} acsgd_cache;

/* Sets up an empty cache; path NULL for the heap. Returns WT_OK, WT_EINVAL (size overflow),
 * WT_ENOMEM or WT_EIO (file). */
int acsgd_cache_init(acsgd_cache *c, size_t slot_floats, size_t capacity, const char *path);
void acsgd_cache_release(acsgd_cache *c);

/* The slot holding sample_id, or ACSGD_NO_SLOT. */
uint32_t acsgd_cache_find(const acsgd_cache *c, uint64_t sample_id);

/* A slot never used yet, or ACSGD_NO_SLOT when all are taken. */
uint32_t acsgd_cache_unused_slot(const acsgd_cache *c);

/* The least recently used slot (smallest tick); the cache must not be empty. */
uint32_t acsgd_cache_lru_slot(const acsgd_cache *c);

/* Makes `slot` hold sample_id (forgetting whatever sample it held), zeroes it and marks it used
 * now. Returns 1 if another sample was evicted, else 0. */
int acsgd_cache_assign(acsgd_cache *c, uint32_t slot, uint64_t sample_id);

/* Marks slot used now (for LRU). */
void acsgd_cache_touch(acsgd_cache *c, uint32_t slot);

float *acsgd_cache_slot(const acsgd_cache *c, uint32_t slot);

/* The cache's contents for a checkpoint (acsgd.h's acsgd_sender_save), and back into a cache of
 * the same shape (slot floats and capacity), replacing what it held. */
int acsgd_cache_save(const acsgd_cache *c, FILE *f);
int acsgd_cache_load(acsgd_cache *c, FILE *f);

#endif
