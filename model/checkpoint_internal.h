/* checkpoint_internal — what checkpoint.c and checkpoint_state.c share (and the fuzz target of
 * the state.json reader uses); nothing outside model/ includes it. */
#ifndef WT_CHECKPOINT_INTERNAL_H
#define WT_CHECKPOINT_INTERNAL_H

#include "model/checkpoint.h"

#include <stddef.h>

#define CHECKPOINT_STATE_FORMAT "wantrain-checkpoint-1"

/* The name a checkpoint records for a tokenizer ("synthetic", "bytes", "gpt2"), and back: the
 * tokenizer of a name, or -1 for a name that is none. */
const char *checkpoint_tokenizer_name(data_tokenizer tok);
int checkpoint_tokenizer_index(const char *name);

/* The text of a state.json for meta (format, step, data position, tokenizer, and train_json as
 * the "train" object when it parses). The caller frees it. */
char *checkpoint_state_print(const checkpoint_meta *meta);

/* Parses and validates the text of a state.json (len bytes, not necessarily NUL-terminated);
 * `file` names it in messages. On WT_OK fills *meta; on WT_ECORRUPT (bad JSON, missing field,
 * wrong type or impossible value, named in the message) leaves *meta unchanged. */
int checkpoint_state_parse(const char *text, size_t len, const char *file, checkpoint_meta *meta);

#endif
