/* fuzz_safetensors — libFuzzer target for the safetensors reader: any bytes either parse into
 * tensors whose every read stays inside the file, or are refused with a message; never a crash,
 * an out-of-bounds read or a leak. Run by scripts/fuzz.sh.
 *
 * fuzz-sources: model/safetensors.c common/common.c
 * fuzz-libs: -lcjson -lm
 */
#include "common/common.h"
#include "model/safetensors.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  safetensors *st = safetensors_parse(data, size, "fuzz.safetensors");
  if (!st) {
    if (!*wt_last_error()) abort(); /* a refusal always says why */
    return 0;
  }
  (void)safetensors_metadata(st, "format");
  (void)safetensors_data_start(st);
  int n = safetensors_num_tensors(st);
  for (int i = 0; i < n && i < 64; i++) {
    const char *name;
    int ndim;
    int64_t shape[2];
    size_t begin, end;
    if (safetensors_tensor_info(st, i, &name, &ndim, shape, &begin, &end) != WT_OK) abort();
    if (ndim < 1 || end - begin > (1u << 24)) continue; /* only what a caller could ask for */
    size_t numel = (size_t)shape[0] * (size_t)(ndim == 2 ? shape[1] : 1);
    float *dst = malloc(numel * sizeof(float) + 1);
    /* The exact buffer the shape asks for: ASan sees any byte copied past it. */
    if (safetensors_read(st, name, ndim, shape, dst) != WT_OK) abort();
    free(dst);
  }
  safetensors_destroy(&st);
  return 0;
}
