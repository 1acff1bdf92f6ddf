/* test_coord_config — the coordinator's option handling: a --preset fills the sync options it
 * leaves unset and refuses contradicting ones naming both; a run that keeps state across steps
 * (DiLoCo, error feedback, delta activation caches) keeps its checkpoints on the peers unless it
 * names a shared --checkpoint-dir, and shared storage without one is refused; contradicting
 * checkpoint flags are refused naming both; the placement and emulation options that need a
 * scenario or a checkpoint directory name what to add. No sockets. */
#include "common/common.h"
#include "common/testing.h"
#include "coordinator/coordinator.h"

#include <string.h>

/* Parses the NULL-terminated arguments into *cfg and checks them; returns the check's status. */
static int s_check(coordinator_config *cfg, const char *const *args) {
  char *argv[32] = {"coordinator"};
  int argc = 1, help = 0;
  for (; args[argc - 1]; argc++) argv[argc] = (char *)args[argc - 1];
  const wt_option *opts = coordinator_options();
  WT_TEST_REQUIRE(wt_config_defaults(opts, cfg) == WT_OK, "defaults");
  WT_TEST_REQUIRE(wt_config_parse_args(opts, cfg, argc, argv, 1, NULL, 0, NULL, &help) == WT_OK,
                  "parse: %s", wt_last_error());
  return coordinator_config_check(cfg);
}

static void test_preset_applied(void) {
  coordinator_config c;
  const char *wan[] = {"--preset", "wan", "--checkpoint-dir", "/shared/ckpt", NULL};
  WT_TEST_REQUIRE(s_check(&c, wan) == WT_OK, "--preset wan: %s", wt_last_error());
  WT_TEST_ASSERT(c.run.sync.diloco == 100 && !strcmp(c.run.sync.grad_codec, "sign") &&
                     !strcmp(c.run.sync.grad_ef, "off"),
                 "wan: DiLoCo H=%d, codec %s, ef %s", c.run.sync.diloco, c.run.sync.grad_codec,
                 c.run.sync.grad_ef);
  WT_TEST_CLOSE(c.run.sync.outer_lr, 0.7, 1e-6, 0, "wan's outer lr");
  WT_TEST_CLOSE(c.run.sync.outer_momentum, 0.9, 1e-6, 0, "wan's outer momentum");
  WT_TEST_ASSERT(parallel_run_config_stateful(&c.run), "a DiLoCo run keeps state");
  const char *lan[] = {"--preset",         "lan",          "--diloco", "30", "--grad-codec", "int8",
                       "--checkpoint-dir", "/shared/ckpt", NULL};
  WT_TEST_REQUIRE(s_check(&c, lan) == WT_OK, "options repeating the preset's values: %s",
                  wt_last_error());
  WT_TEST_ASSERT(c.run.sync.diloco == 30 && !strcmp(c.run.sync.grad_ef, "on"), "lan: H=%d, ef %s",
                 c.run.sync.diloco, c.run.sync.grad_ef);
}

static void test_conflicts_refused(void) {
  coordinator_config c;
  const char *codec[] = {"--preset", "wan", "--grad-codec", "int8", "--checkpoint-dir", "/x", NULL};
  WT_TEST_ASSERT(s_check(&c, codec) == WT_EINVAL, "a codec contradicting the preset is refused");
  WT_TEST_ASSERT(strstr(wt_last_error(), "--preset wan") && strstr(wt_last_error(), "sign") &&
                     strstr(wt_last_error(), "int8"),
                 "the message names both: %s", wt_last_error());
  const char *h[] = {"--preset", "slow-wan", "--diloco", "50", "--checkpoint-dir", "/x", NULL};
  WT_TEST_ASSERT(s_check(&c, h) == WT_EINVAL && strstr(wt_last_error(), "--diloco"),
                 "an interval contradicting the preset is refused: %s", wt_last_error());
  const char *lr[] = {"--preset", "lan", "--outer-lr", "1", "--checkpoint-dir", "/x", NULL};
  WT_TEST_ASSERT(s_check(&c, lr) == WT_EINVAL && strstr(wt_last_error(), "--outer-lr"),
                 "an outer lr contradicting the preset is refused: %s", wt_last_error());
  const char *ef[] = {"--preset", "wan", "--grad-ef", "on", "--checkpoint-dir", "/x", NULL};
  WT_TEST_ASSERT(s_check(&c, ef) == WT_EINVAL && strstr(wt_last_error(), "--grad-ef"),
                 "error feedback contradicting the preset is refused: %s", wt_last_error());
  const char *batch[] = {"--batch", "15", "--replicas", "2", NULL};
  WT_TEST_ASSERT(s_check(&c, batch) == WT_EINVAL && strstr(wt_last_error(), "batch 15"),
                 "a batch the replicas cannot split is refused: %s", wt_last_error());
}

/* A run that keeps state across steps recovers from checkpoints: with --checkpoint-storage auto
 * (the default) they go on the peers when it names no shared directory, and into that directory
 * when it does; --checkpoint-storage shared without a directory is refused naming what to give. */
static void test_stateful_checkpoint_storage(void) {
  coordinator_config c;
  const char *const stateful[][3] = {{"--preset", "wan", NULL},
                                     {"--diloco", "5", NULL},
                                     {"--grad-codec", "int8", NULL}, /* error feedback: auto = on */
                                     {"--act-codec", "delta4", NULL}};
  for (size_t i = 0; i < sizeof stateful / sizeof *stateful; i++) {
    WT_TEST_ASSERT(s_check(&c, stateful[i]) == WT_OK && !strcmp(c.checkpoint_storage, "peers") &&
                       c.checkpoint_storage_auto,
                   "%s %s without --checkpoint-dir keeps its checkpoints on the peers: %s %s",
                   stateful[i][0], stateful[i][1], c.checkpoint_storage, wt_last_error());
    WT_TEST_ASSERT(strstr(coordinator_checkpoint_storage_why(&c), "keeps state across steps"),
                   "the log says why: %s", coordinator_checkpoint_storage_why(&c));
    const char *shared[] = {stateful[i][0], stateful[i][1], "--checkpoint-storage", "shared", NULL};
    WT_TEST_ASSERT(s_check(&c, shared) == WT_EINVAL &&
                       strstr(wt_last_error(), "give --checkpoint-dir"),
                   "%s %s with shared storage and no directory is refused naming what to give: %s",
                   stateful[i][0], stateful[i][1], wt_last_error());
  }
  const char *const stateless[][7] = {
      {NULL}, {"--grad-codec", "int8", "--grad-ef", "off", NULL}, {"--act-codec", "direct8", NULL}};
  for (size_t i = 0; i < sizeof stateless / sizeof *stateless; i++) {
    WT_TEST_ASSERT(s_check(&c, stateless[i]) == WT_OK,
                   "a stateless run needs no checkpoint "
                   "dir: %s",
                   wt_last_error());
    WT_TEST_ASSERT(!parallel_run_config_stateful(&c.run) && !strcmp(c.checkpoint_storage, "shared"),
                   "stateless run %zu: %s storage", i, c.checkpoint_storage);
  }
  const char *with_dir[] = {"--diloco", "5", "--checkpoint-dir", "/shared/ckpt", NULL};
  WT_TEST_ASSERT(s_check(&c, with_dir) == WT_OK && parallel_run_config_stateful(&c.run) &&
                     !strcmp(c.checkpoint_storage, "shared"),
                 "a stateful run with a checkpoint dir shares it: %s %s", c.checkpoint_storage,
                 wt_last_error());
}

/* Checkpoints on the peers need no shared directory; the coordinator's own store only takes
 * what the peers store. */
static void test_checkpoint_storage(void) {
  coordinator_config c;
  const char *peers[] = {"--diloco", "5", "--checkpoint-storage", "peers", NULL};
  WT_TEST_ASSERT(s_check(&c, peers) == WT_OK && c.checkpoint_copies == 2,
                 "a stateful run with its checkpoints on the peers (2 copies by default): %s",
                 wt_last_error());
  const char *store[] = {"--checkpoint-store", "/srv/ckpt", NULL};
  WT_TEST_ASSERT(s_check(&c, store) == WT_OK && !strcmp(c.checkpoint_storage, "peers"),
                 "--checkpoint-store alone puts the checkpoints on the peers: %s %s",
                 c.checkpoint_storage, wt_last_error());
  const char *store_shared[] = {"--checkpoint-store", "/srv/ckpt", "--checkpoint-storage", "shared",
                                NULL};
  WT_TEST_ASSERT(s_check(&c, store_shared) == WT_EINVAL &&
                     strstr(wt_last_error(), "--checkpoint-storage peers"),
                 "--checkpoint-store with shared storage is refused naming peers: %s",
                 wt_last_error());
  const char *store_dir[] = {"--checkpoint-store", "/srv/ckpt", "--checkpoint-dir", "/shared",
                             NULL};
  WT_TEST_ASSERT(s_check(&c, store_dir) == WT_EINVAL && strstr(wt_last_error(), "give one of them"),
                 "--checkpoint-store with a shared directory is refused: %s", wt_last_error());
  const char *dir[] = {"--checkpoint-storage", "peers", "--checkpoint-dir", "/shared", NULL};
  WT_TEST_ASSERT(s_check(&c, dir) == WT_EINVAL && strstr(wt_last_error(), "give one of them"),
                 "a shared directory with peer storage is refused: %s", wt_last_error());
  const char *both[] = {"--checkpoint-storage",
                        "peers",
                        "--checkpoint-store",
                        "/srv/ckpt",
                        "--checkpoint-copies",
                        "3",
                        NULL};
  WT_TEST_ASSERT(s_check(&c, both) == WT_OK && c.checkpoint_copies == 3 &&
                     !strcmp(c.checkpoint_store, "/srv/ckpt"),
                 "peer storage with a store and 3 copies: %s", wt_last_error());
}

static void test_placement_needs(void) {
  coordinator_config c;
  const char *assignment[] = {"--assignment", "a.json", NULL};
  WT_TEST_ASSERT(s_check(&c, assignment) == WT_EINVAL &&
                     strstr(wt_last_error(), "--assignment needs --scenario"),
                 "a fixed assignment without a scenario: %s", wt_last_error());
  const char *links[] = {"--links", "scenario", NULL};
  WT_TEST_ASSERT(s_check(&c, links) == WT_EINVAL && strstr(wt_last_error(), "--scenario"),
                 "scenario links without a scenario: %s", wt_last_error());
  const char *resume[] = {"--resume", NULL};
  WT_TEST_ASSERT(s_check(&c, resume) == WT_EINVAL && strstr(wt_last_error(), "--checkpoint-dir"),
                 "--resume without the run directory: %s", wt_last_error());
  const char *none[] = {"--solver", "none", "--time-limit", "30", NULL};
  WT_TEST_ASSERT(s_check(&c, none) == WT_OK && c.run.time_limit == 30,
                 "rank order and a time limit: %s", wt_last_error());
}

int main(void) {
  test_placement_needs();
  test_preset_applied();
  test_conflicts_refused();
  test_stateful_checkpoint_storage();
  test_checkpoint_storage();
  return wt_test_finish("test_coord_config");
}
