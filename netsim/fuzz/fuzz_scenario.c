/* fuzz_scenario — libFuzzer target for the netsim scenario loader: any document is either
 * refused with a message, or loads into scenarios whose networks can be read. The loader reads
 * a path, so each input goes through one temporary file. Run by scripts/fuzz.sh.
 *
 * fuzz-sources: netsim/[a-z]*.c assign/[a-z]*.c common/[a-z]*.c
 * fuzz-flags: -DWT_NETSIM_SOURCE_DIR="."
 * fuzz-libs: -lcjson -lz -lm
 */
#include "common/common.h"
#include "netsim/netsim.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static char s_path[64];

static void s_cleanup(void) {
  unlink(s_path);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!*s_path) {
    snprintf(s_path, sizeof s_path, "/tmp/fuzz-scenario-%d.json", (int)getpid());
    atexit(s_cleanup);
  }
  FILE *f = fopen(s_path, "wb");
  if (!f) abort();
  if (size && fwrite(data, 1, size, f) != size) abort();
  fclose(f);
  netsim_scenario_set *set = NULL;
  if (!(set = netsim_scenario_set_load(s_path))) {
    if (!*wt_last_error()) abort(); /* a refusal always says why */
    return 0;
  }
  for (int i = 0; i < netsim_scenario_set_count(set); i++) {
    const netsim_scenario *s = netsim_scenario_set_get(set, i);
    assign_problem problem;
    (void)netsim_scenario_name(s);
    (void)netsim_scenario_network(s);
    netsim_scenario_problem(s, &problem);
    for (int r = 0; r < netsim_scenario_region_count(s); r++)
      (void)netsim_scenario_region_name(s, r);
    (void)netsim_scenario_stage_flops(s);
  }
  netsim_scenario_set_destroy(&set);
  return 0;
}
