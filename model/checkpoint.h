/* checkpoint — everything a run needs to continue bit-exactly: model weights, optimizer state,
 * step, and the data position (its RNG state and batch count), written atomically and verified.
 *
 * A run's checkpoint directory DIR holds one sub-directory per saved step and a pointer:
 *   DIR/step-00000400/model.safetensors      weights, HF GPT2Model names and shapes, F32; the
 *                                            "__metadata__" holds the model config as strings
 *                                            (vocab_size, max_seq, n_layer, n_head, channels)
 *                                            and the tokenizer
 *   DIR/step-00000400/optimizer.safetensors  optimizer state buffers (m, v or momentum), flat,
 *                                            and its kind and step count in the metadata
 *   DIR/step-00000400/state.json             step, data position, training config echo
 *   DIR/step-00000400/SHA256SUMS             SHA-256 of the three files (`sha256sum -c` format)
 *   DIR/latest                               the name of the newest complete step directory
 *
 * Saving writes a temporary directory, fsyncs every file and the directory, renames it to its
 * final name, fsyncs DIR, and only then replaces `latest` (temp file, fsync, rename, fsync). A
 * save that fails at any point leaves `latest` and the previous step directory untouched. The
 * newest `keep` step directories are kept, older ones removed.
 *
 * Loading verifies every digest in SHA256SUMS before reading anything, then checks that the
 * config and optimizer kind match the model and optimizer it is loading into. A corrupt,
 * truncated or mismatched checkpoint is refused with a message that says what to do.
 *
 * Owner: model module (checkpoint engineer).
 */
#ifndef WT_CHECKPOINT_H
#define WT_CHECKPOINT_H

#include "model/data.h"
#include "model/gpt.h"
#include "model/optim.h"

#include <stddef.h>

/* What besides weights and optimizer buffers a checkpoint records. */
typedef struct {
  long step;                /* optimizer steps completed */
  data_position data_pos;   /* where the next training batch comes from */
  data_tokenizer tokenizer; /* how tokens print (for `wantrain sample`) */
  char train_json[4096];    /* the effective training config (informational), "" if none */
} checkpoint_meta;

/* Saves a model stage (its own tensors: the whole model, or one pipeline stage's layers, which
 * then loads only into a stage with the same layers, the tensor names being checked) and, if
 * opt is non-NULL, its optimizer, as DIR/step-<step> and makes it `latest`; keeps the newest
 * `keep` (>= 1) steps. Returns WT_OK or WT_EIO (with the failing path and errno text; the
 * previous checkpoint is intact). */
int checkpoint_save(const char *dir, gpt_stage *model, optim *opt, const checkpoint_meta *meta,
                    int keep);

/* Resolves `path` to a step directory: a step directory itself, or a run directory whose
 * `latest` names one. Writes it into out. Returns WT_OK or WT_ENOTFOUND ("no checkpoint in"). */
int checkpoint_resolve(const char *path, char *out, size_t size);

/* Reads the model config and meta of the checkpoint at `path` (see checkpoint_resolve) after
 * verifying its digests, so a caller can build a matching model. Returns WT_OK, WT_ENOTFOUND,
 * WT_ECORRUPT (digest mismatch, truncation, bad JSON) or WT_EIO. */
int checkpoint_read_config(const char *path, gpt_config *cfg, checkpoint_meta *meta);

/* Loads weights into `model` and, if opt is non-NULL, the optimizer state and step count, and
 * fills *meta. Verifies digests first; refuses with WT_EMISMATCH a checkpoint written for
 * another config or optimizer kind (both described in the message). Every check runs before
 * anything is copied, so a refused checkpoint leaves model, opt and meta unchanged. */
int checkpoint_load(const char *path, gpt_stage *model, optim *opt, checkpoint_meta *meta);

#endif
