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
 * save that fails at any point leaves `latest` and the previous step directory untouched. Saving
 * a step that already exists (a resumed run told to stop at or before its saved step) swaps the
 * new directory in with RENAME_EXCHANGE, so at every instant `latest` names a complete
 * checkpoint. The newest `keep` step directories are kept, older ones removed.
 *
 * Loading verifies every digest in SHA256SUMS before reading anything, then checks every field
 * read from disk (type, range, consistency with the other files) and that the config and
 * optimizer kind match the model and optimizer it is loading into. A corrupt, truncated,
 * impossible or mismatched checkpoint is refused with a message naming the file and field and
 * saying what to do. `latest` is only a pointer: when it is missing, garbage, or names a missing
 * or incomplete step directory, loading a run directory uses the newest step directory whose
 * digests verify and says so on stderr.
 *
 * One run at a time writes a run directory: checkpoint_run_open takes an exclusive lock on
 * DIR/.lock for the run's lifetime and checks the directory before the first step.
 */
#ifndef WT_CHECKPOINT_H
#define WT_CHECKPOINT_H

#include "model/data.h"
#include "model/gpt.h"
#include "model/optim.h"

#include <stddef.h>

/* The largest step a checkpoint may record (a bound on what is read back from disk). */
#define CHECKPOINT_MAX_STEP 1000000000000L

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

/* Resolves `path` to a step directory: a step directory itself, or a run directory's step
 * directory named by `latest` — or, when `latest` is missing, garbage or names a missing or
 * incomplete step, the newest step directory whose digests verify (with a warning on stderr).
 * Writes it into out. Returns WT_OK or WT_ENOTFOUND ("no checkpoint in"). */
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

/* A run directory held by one training run (see above). */
typedef struct checkpoint_run checkpoint_run;

/* Prepares run directory `dir` for a run that will save into it, before its first step:
 * creates it (and its parents); refuses a path that is a file or a step directory (the message
 * says to pass its parent); with `fresh` set (a new run, not a resume) refuses a directory that
 * already holds a run (a `latest` file or any step-* directory); takes an exclusive flock on
 * DIR/.lock, refusing with a message naming the directory while another run holds it; and
 * checks that a file can be written there. Returns NULL with wt_last_error() set (WT_EINVAL or
 * WT_EIO). The lock lasts until checkpoint_run_close or the end of the process. */
checkpoint_run *checkpoint_run_open(const char *dir, int fresh);
void checkpoint_run_close(checkpoint_run **self_p);

/* For tests: `hook` is called with the name of each point between two file-system steps of
 * checkpoint_save ("exchange", "exchanged", "latest-tmp", "moved-aside", "moved-in",
 * "installed"), so that a test can stop a save there (e.g. _exit in a forked child, as a kill
 * would). A nonzero return at "exchange" makes the save act as on a file system without
 * RENAME_EXCHANGE; at any other point it stops the save there with WT_EIO, leaving the files as
 * they are. NULL (the default) removes the hook. */
void checkpoint_set_fault_hook(int (*hook)(const char *point));

#endif
