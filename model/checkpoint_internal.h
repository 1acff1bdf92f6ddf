/* checkpoint_internal — the state.json reader on its own, for the fuzz target; nothing outside
 * model/ uses it. */
#ifndef WT_CHECKPOINT_INTERNAL_H
#define WT_CHECKPOINT_INTERNAL_H

#include "model/checkpoint.h"

#include <stddef.h>

/* Parses and validates the text of a state.json (len bytes, not necessarily NUL-terminated);
 * `file` names it in messages. On WT_OK fills *meta; on WT_ECORRUPT (bad JSON, missing field,
 * wrong type or impossible value, named in the message) leaves *meta unchanged. */
int checkpoint_state_parse(const char *text, size_t len, const char *file, checkpoint_meta *meta);

#endif
