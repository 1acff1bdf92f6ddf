/* test_cli_usage — a bad flag or flag combination exits with status 2 and a message naming it,
 * in every program (wantrain train and launch, coordinator, peerd), before any work starts: a
 * model whose heads do not divide its width, an unknown device, a site rank without a site, a
 * run of more seats than a coordinator admits, peer labels the coordinator would refuse. */
#include "tests/cli/cli_harness.h"

/* Makes the next EXPECTs run `program` from $WT_BIN_DIR, under a deadline: a program that
 * accepts what it should refuse may wait for ever (timeout's status, 124, then fails). */
static void s_use(const char *program) {
  const char *bin = getenv("WT_BIN_DIR");
  snprintf(g_bin, sizeof g_bin, "timeout 30 %s/%s", bin && *bin ? bin : "bin", program);
}

/* A coordinator key and address that nothing listens on: peerd must stop before it connects. */
#define PEERD                                                                                      \
  "--coordinator tcp://127.0.0.1:9 --coordinator-key "                                             \
  "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA --data-dir pd --register-timeout 1 "

int main(void) {
  cli_harness_init();

  s_use("wantrain");
  EXPECT("train --steps 1 --channels 30 --heads 4", 2, "--heads 4 must divide --channels 30");
  EXPECT("launch --steps 1 --channels 30 --heads 4", 2, "--heads 4 must divide --channels 30");
  WT_TEST_ASSERT(!strstr(g_out, "processes on"), "launch started its processes:\n%s", g_out);
  EXPECT("train --steps 1 --device tpu", 2, "device 'tpu'");
  EXPECT("launch --steps 1 --device tpu", 2, "device 'tpu'");
  EXPECT("launch --steps 1 --site-ranks 2 --device cuda:0", 2, "--site-ranks 2 with --device");
  EXPECT("eval --device tpu --checkpoint none --data synthetic", 2, "device 'tpu'");
  EXPECT("sample --device tpu --checkpoint none", 2, "device 'tpu'");

  s_use("coordinator");
  EXPECT("--state-dir st --http-port -1 --stages 64 --replicas 64 --batch 64 --micro-batches 1 "
         "--layers 64 --max-peers 4000",
         2, "4096 seats, but this coordinator admits at most --max-peers 4000 peers");
  EXPECT("--state-dir st --http-port -1 --stages 16 --replicas 16 --batch 16 --micro-batches 1 "
         "--layers 16 --channels 30 --heads 4",
         2, "heads 4 do not divide channels 30");
  EXPECT("--state-dir st --http-port -1 --device tpu", 2, "unknown option --device");

  s_use("peerd");
  EXPECT(PEERD "--device tpu", 2, "--device 'tpu': expected cpu or cuda:N");
  EXPECT(PEERD "--site-rank 1", 2, "--site-rank 1 without --site FILE");
  EXPECT(PEERD "--gpus 2 --device cuda:0", 2, "--gpus 2 with --device cuda:0");
  EXPECT("--site-rank 2 --data-dir pd", 2, "--site-rank 2 without --site FILE");
  EXPECT(PEERD "--region \"$(printf 'eu\\n[warn] x')\"", 2,
         "--region \"eu\\n[warn] x\" holds a control character at byte 2");
  EXPECT(PEERD "--host \"$(printf '10.0.0.1\\377')\"", 2,
         "--host \"10.0.0.1\\xFF\" holds bytes that are not UTF-8");
  EXPECT(PEERD "--region aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", 2,
         "is 64 bytes long; a region is at most 63 bytes");
  WT_TEST_ASSERT(!strstr(g_out, "registering"), "peerd went on to register:\n%s", g_out);
  return wt_test_finish("test_cli_usage");
}
