/* data — token corpora for training and evaluation, split into train/validation, served as
 * (B, T) batches of inputs and next-token targets from a position a checkpoint can restore.
 *
 * Four sources, one type:
 *   synthetic   the built-in corpus: a first-order Markov chain over `vocab_size` tokens in
 *               which every state has exactly `successors` possible next tokens with the SAME
 *               multiset of probabilities (a fixed, decreasing profile), placed on a random set of
 *               successors drawn from the seed. Because every row of the transition matrix has
 *               the same entropy, the conditional entropy of any token given its predecessor is
 *               exactly H(profile) whatever the start — the entropy rate, in nats, is known in
 *               closed form (data_synthetic_entropy). A GPT that has learnt the chain reaches
 *               that loss; no model can go below it on average.
 *   text file   any file, one token per byte (vocab 256).
 *   llm.c shard uint16 GPT-2 token ids after a 256 × int32 little-endian header
 *               (magic 20240520, version 1, header[2] = number of tokens); vocab 50257.
 *   URL         http://, https:// or file:// fetched with libcurl into a cache directory
 *               (data_fetch), optionally verified with SHA-256, then opened as a file.
 *
 * A path is a shard if it ends in ".bin" or starts with the shard magic; otherwise text.
 *
 * Split: the first 90% of the tokens train, the last 10% validate (at least T+1 tokens each).
 * Training batches are B windows of T+1 consecutive tokens at offsets drawn uniformly from the
 * train split with the data's own RNG; the position (RNG state + batches served) is a plain
 * struct that a checkpoint saves, so a resumed run draws exactly the batches it would have.
 * Validation batches are the first windows of the validation split at stride T, always the same.
 */
#ifndef WT_DATA_H
#define WT_DATA_H

#include "common/rng.h"
#include "model/data_synth.h" /* defines: data_synth_config */

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#define DATA_SHARD_MAGIC 20240520
#define DATA_SHARD_VERSION 1
#define DATA_GPT2_VOCAB 50257

typedef enum {
  DATA_TOKENIZER_SYNTHETIC = 0, /* token i prints as data_synthetic_alphabet[i] */
  DATA_TOKENIZER_BYTES = 1,     /* token i is the byte i */
  DATA_TOKENIZER_GPT2 = 2,      /* GPT-2 ids; printed as <id> here (text: tokenizer/bpe.h) */
} data_tokenizer;

/* Where the next training batch comes from. Plain data: copy it into a checkpoint. */
typedef struct {
  wt_rng rng;       /* draws window offsets */
  uint64_t batches; /* training batches served so far */
} data_position;

typedef struct data_set data_set;

/* Builds the synthetic corpus. Returns NULL with wt_last_error() set on a bad config. */
data_set *data_set_synthetic(const data_synth_config *cfg);

/* Opens a text file or an llm.c shard (see above). Returns NULL with wt_last_error() set when
 * the file is missing, empty, or a malformed shard (bad magic, version, size or token id). */
data_set *data_set_open_file(const char *path);

/* Opens `spec`: "synthetic" (the built-in corpus), an http(s):// or file:// URL (fetched into
 * cache_dir, see data_fetch), or a path. If sha256_hex is non-NULL and non-empty, the file's
 * SHA-256 must match it. Returns NULL with wt_last_error() set on any failure. */
data_set *data_set_open(const char *spec, const char *cache_dir, const char *sha256_hex);

void data_set_destroy(data_set **self_p);

int data_set_vocab_size(const data_set *d);
data_tokenizer data_set_tokenizer(const data_set *d);
size_t data_set_num_tokens(const data_set *d);
size_t data_set_num_train(const data_set *d); /* tokens in the train split */
size_t data_set_num_val(const data_set *d);   /* tokens in the validation split */
/* All tokens (num_tokens of them), owned by the data set. */
const uint16_t *data_set_tokens(const data_set *d);

/* Checks that both splits hold at least one window of T+1 tokens. Returns WT_OK or WT_EINVAL
 * with a message saying how long the corpus must be. */
int data_set_check_seq(const data_set *d, int T);

/* Seeds a fresh position (a run's first batch). */
void data_position_init(data_position *pos, uint64_t seed);

/* Fills inputs (B, T) and targets (B, T) (targets = inputs shifted by one) with the next
 * training batch and advances *pos. Call data_set_check_seq first. */
void data_set_next_batch(const data_set *d, data_position *pos, int B, int T, int *inputs,
                         int *targets);

/* Number of validation windows of T+1 tokens at stride T. */
size_t data_set_num_val_windows(const data_set *d, int T);

/* Fills (B, T) inputs/targets with validation windows first..first+B-1 (wrapping around the
 * validation split if first+B exceeds data_set_num_val_windows). */
void data_set_val_batch(const data_set *d, size_t first, int B, int T, int *inputs, int *targets);

/* Text of one token into buf (NUL-terminated, at most size-1 bytes). */
void data_token_text(data_tokenizer tok, int token, char *buf, size_t size);

/* Encodes text as tokens for `tok` into out (at most max), *n receives the count. Returns
 * WT_EINVAL for a character outside the synthetic alphabet or for GPT-2 (its BPE is in
 * tokenizer/bpe.h, which model does not depend on). */
int data_text_encode(data_tokenizer tok, const char *text, int *out, int max, int *n);

/* SHA-256 of a file as 64 lowercase hex characters (+ NUL) into hex. Returns WT_OK or WT_EIO. */
int data_file_sha256(const char *path, char hex[65]);

/* Fetches `url` (http://, https://, file://) into cache_dir (created if missing) and writes the
 * cached file's path into out_path. The download goes to a temporary file that only becomes the
 * cached copy once complete and, when sha256_hex is given, verified; a cached copy that matches
 * is reused without fetching. Returns WT_OK, WT_EIO (network or file error, with curl's
 * message), WT_ECORRUPT (SHA-256 mismatch; nothing is kept) or WT_EINVAL (bad URL or digest). */
int data_fetch(const char *url, const char *cache_dir, const char *sha256_hex, char *out_path,
               size_t out_size);

/* Process-wide settings of data_fetch (set them before fetching; not thread-safe): a download
 * that receives less than 1 byte/s for `stall_s` seconds (<= 0: the default, 60) is abandoned
 * with WT_ETIMEOUT; when abort_flag is non-NULL, a download in progress is abandoned with WT_EIO
 * within about a second of *abort_flag becoming nonzero (a SIGINT/SIGTERM handler sets it).
 * An abandoned download leaves nothing in the cache; temporary files of downloads that a kill
 * cut short are removed by the next fetch into the same cache once they are older than
 * 2 × stall_s + 60 s. */
void data_fetch_configure(long stall_s, const volatile sig_atomic_t *abort_flag);

/* Checks that hex is a SHA-256 digest: 64 hexadecimal digits. Returns WT_OK or WT_EINVAL with a
 * message naming --data-sha256. */
int data_sha256_check(const char *hex);

/* The default cache directory: $WANTRAIN_CACHE, else $XDG_CACHE_HOME/wantrain, else
 * $HOME/.cache/wantrain, else /tmp/wantrain-cache. Written into buf. */
void data_default_cache_dir(char *buf, size_t size);

#endif
