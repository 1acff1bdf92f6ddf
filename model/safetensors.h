/* safetensors — float32 tensors in the Hugging Face safetensors format, with cJSON.
 *
 * File layout: an 8-byte little-endian header length N, then N bytes of JSON
 *   {"__metadata__": {"key": "value", ...},
 *    "wte.weight": {"dtype": "F32", "shape": [V, C], "data_offsets": [begin, end]}, ...}
 * (padded with spaces to a multiple of 8 so the data stays aligned), then the tensor bytes.
 * Offsets are relative to the start of the data and tensors are stored back to back in the order
 * given. PyTorch (`safetensors.torch.load_file`) and the Hugging Face tools read it as is.
 *
 * Only F32 is written or read; anything else in a file is refused, as is any header whose
 * offsets do not fit the file (truncated or corrupt) — with a message naming the file.
 */
#ifndef WT_SAFETENSORS_H
#define WT_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* One tensor to write: `data` holds shape[0] (× shape[1] if ndim == 2) floats. */
typedef struct {
  const char *name;
  int ndim; /* 1 or 2 */
  int64_t shape[2];
  const float *data;
} safetensors_tensor;

/* Writes the tensors and metadata (n_meta key/value string pairs: meta[2i] = key, meta[2i+1] =
 * value) to f. Returns WT_OK or WT_EIO (with `what`, e.g. the path, in the message). Does not
 * fsync or close f. */
int safetensors_write(FILE *f, const char *what, const safetensors_tensor *tensors, int n,
                      const char *const *meta, int n_meta);

typedef struct safetensors safetensors;

/* Reads and validates a whole file. Returns NULL with wt_last_error() set when the file is
 * missing, truncated, not safetensors, or holds a dtype other than F32. Caller destroys. */
safetensors *safetensors_load(const char *path);
void safetensors_destroy(safetensors **self_p);

/* The same from `size` bytes in memory (copied); `what` names them in messages. */
safetensors *safetensors_parse(const void *data, size_t size, const char *what);

int safetensors_num_tensors(const safetensors *st);

/* The i-th tensor in header order: name (owned by st), ndim, shape, and byte offsets relative
 * to the data section. Returns WT_OK or WT_EINVAL for i out of range. */
int safetensors_tensor_info(const safetensors *st, int i, const char **name, int *ndim,
                            int64_t shape[2], size_t *begin, size_t *end);

/* Copies tensor `name` into dst after checking that its shape is (ndim, shape); with dst NULL
 * only checks (to validate a whole file before changing anything). Returns WT_OK,
 * WT_ENOTFOUND (no such tensor) or WT_EMISMATCH (other shape; both shapes in the message). */
int safetensors_read(const safetensors *st, const char *name, int ndim, const int64_t shape[2],
                     float *dst);

/* A metadata value, or NULL if absent. Owned by st. */
const char *safetensors_metadata(const safetensors *st, const char *key);

/* Size in bytes of the header length field + JSON header (where the data starts). */
size_t safetensors_data_start(const safetensors *st);

#endif
