/* data_internal — what the data_*.c files share and nothing outside model/data*.c uses. */
#ifndef WT_DATA_INTERNAL_H
#define WT_DATA_INTERNAL_H

#include "model/data.h"

/* Wraps an owned token array (freed by data_set_destroy) into a data set with the train/val
 * split. Returns NULL with wt_last_error() set if any token is >= vocab_size. */
data_set *data_set_from_tokens(uint16_t *tokens, size_t n, int vocab_size, data_tokenizer tok);

/* Checks that the file's SHA-256 equals sha256_hex (64 hex digits, any case). Returns WT_OK,
 * WT_EINVAL (malformed digest), WT_EIO (unreadable) or WT_ECORRUPT (mismatch, both shown). */
int data_fetch_verify(const char *path, const char *sha256_hex);

#endif
