/* test_coord_plan_state — what a restarted coordinator takes back from its state directory
 * about the placement: the last plan's per-stage rings (its running members run them, and
 * /status must show them, not replica order) and each peer's probed access link (uplink,
 * downlink, which peers share it), so that it places on the measured network without probing
 * again. The state is written as the daemon writes it (coord_state_save_*), the coordinator
 * destroyed and opened again on the same directory. */
#include "common/common.h"
#include "common/testing.h"
#include "coordinator/coordinator_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int s_ring[8] = {0, 2, 3, 1, 0, 3, 1, 2}; /* 2 stages x 4 replicas */

static coordinator *s_open(const char *dir) {
  coordinator_config cfg;
  wt_config_defaults(coordinator_options(), &cfg);
  snprintf(cfg.state_dir, sizeof cfg.state_dir, "%.1000s", dir);
  cfg.run.stages = 2, cfg.run.replicas = 4;
  cfg.http_port = -1;
  coordinator *c = coordinator_new(&cfg);
  WT_TEST_REQUIRE(c, "coordinator_new: %s", wt_last_error());
  return c;
}

/* Eight live peers in four regions, the plan in their order, its rings and access links. */
static void s_write_state(coordinator *c) {
  for (int i = 0; i < 8; i++) {
    coord_peer *p = &c->peers[i];
    memset(p, 0, sizeof *p);
    p->id = i + 1, p->status = PEER_LIVE, p->epoch_rank = -1, p->flops = 1e9, p->gpus = 1;
    snprintf(p->key, sizeof p->key, "peer%036d", i);
    snprintf(p->region, sizeof p->region, "r%d", i / 2);
    snprintf(p->kind, sizeof p->kind, "cpu");
    p->up_Bps = 1e6 * (i / 2 + 1), p->down_Bps = 5e7, p->access_link = 2 * (i / 2) + 1;
    p->up_ratio = 1.1, p->down_ratio = 2.0;
    coord_state_save_peer(c, p);
    c->plan_members[i] = i;
  }
  c->n_peers = 8, c->next_peer_id = 9, c->n_plan = 8, c->n_rings = 8;
  memcpy(c->rings, s_ring, sizeof s_ring);
  coord_state_save_run(c);
  coord_state_save_access(c);
}

int main(void) {
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/wt-plan-state-XXXXXX",
           getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  WT_TEST_REQUIRE(mkdtemp(dir), "mkdtemp");
  coordinator *c = s_open(dir);
  s_write_state(c);
  coordinator_destroy(&c);

  c = s_open(dir);
  WT_TEST_ASSERT(c->n_plan == 8 && c->n_rings == 8, "the plan (%d) and its rings (%d) come back",
                 c->n_plan, c->n_rings);
  WT_TEST_ASSERT(!memcmp(c->rings, s_ring, sizeof s_ring), "the rings are the plan's");
  char *status = coordinator_status_json(c);
  WT_TEST_ASSERT(strstr(status, "\"rings\":[[0,2,3,1],[0,3,1,2]]"), "/status shows them: %.300s",
                 strstr(status, "\"rings\"") ? strstr(status, "\"rings\"") : status);
  int access_ok = c->n_peers == 8;
  for (int i = 0; access_ok && i < c->n_peers; i++) {
    const coord_peer *p = &c->peers[i];
    int k = p->id - 1;
    access_ok = p->up_Bps == 1e6 * (k / 2 + 1) && p->down_Bps == 5e7 &&
                p->access_link == 2 * (k / 2) + 1 && p->up_ratio == 1.1;
  }
  WT_TEST_ASSERT(access_ok, "every peer's access link comes back");
  int list[8];
  for (int i = 0; i < 8; i++) list[i] = i;
  assign_access acc;
  WT_TEST_ASSERT(coord_probe_access(c, list, 8, &acc) && acc.n_links == 4 &&
                     acc.link_of[0] == acc.link_of[1] && acc.link_of[1] != acc.link_of[2] &&
                     acc.up_Bps[acc.link_of[7]] == 4e6,
                 "the placement's problem gets one access link per region");
  coord_probe_access_free(&acc);
  free(status);
  coordinator_destroy(&c);
  char rm[1100];
  snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
  if (system(rm) != 0) fprintf(stderr, "test_coord_plan_state: could not remove %s\n", dir);
  return wt_test_finish("test_coord_plan_state");
}
