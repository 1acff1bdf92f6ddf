/* fuzz_coord_msg — libFuzzer target for the control message decoder: any input is either
 * refused with a message or decoded into a well-formed envelope that re-encodes. Run by
 * scripts/fuzz.sh from valid and broken messages.
 *
 * fuzz-sources: coordinator/protocol.c common/common.c
 * fuzz-libs: -lcjson -lsodium -lm
 */
#include "coordinator/protocol.h"

#include "common/common.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, unsigned long n) {
  coordinator_msg m;
  if (coordinator_msg_decode(data, n, &m) != WT_OK) {
    assert(wt_last_error()[0] && m.body == NULL);
    return 0;
  }
  assert(m.cmd < COORD_CMD_COUNT && strlen(m.sid) == COORD_SID_CHARS && m.seq >= 1);
  char *again = coordinator_msg_encode(m.cmd, m.sid, m.seq, m.body);
  if (again) {
    coordinator_msg m2;
    assert(coordinator_msg_decode(again, strlen(again), &m2) == WT_OK && m2.cmd == m.cmd &&
           m2.seq == m.seq);
    coordinator_msg_clear(&m2);
    free(again);
  }
  coordinator_msg_clear(&m);
  return 0;
}
