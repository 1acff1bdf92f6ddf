/* fuzz_state — libFuzzer target for the checkpoint state.json reader: any text is either
 * refused with a message naming the file, or accepted with values in range that print and
 * parse back to the same state. Run by scripts/fuzz.sh.
 *
 * fuzz-sources: model/checkpoint_state.c common/common.c
 * fuzz-libs: -lcjson -lm
 */
#include "common/common.h"
#include "model/checkpoint_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  checkpoint_meta m, back;
  memset(&m, 0, sizeof m);
  if (checkpoint_state_parse((const char *)data, size, "state.json", &m) != WT_OK) {
    if (!strstr(wt_last_error(), "state.json")) abort(); /* the message names the file */
    return 0;
  }
  if (m.step < 0 || m.step > CHECKPOINT_MAX_STEP || (unsigned)m.tokenizer > 2) abort();
  char *text = checkpoint_state_print(&m);
  memset(&back, 0, sizeof back);
  if (checkpoint_state_parse(text, strlen(text), "state.json", &back) != WT_OK) abort();
  free(text);
  if (back.step != m.step || back.data_pos.batches != m.data_pos.batches ||
      memcmp(&back.data_pos.rng, &m.data_pos.rng, sizeof m.data_pos.rng) ||
      back.tokenizer != m.tokenizer)
    abort();
  return 0;
}
