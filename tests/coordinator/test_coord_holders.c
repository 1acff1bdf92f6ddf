/* test_coord_holders — the newest restorable step outlives copies that lag, and a run whose
 * committed steps no live peer holds stops instead of waiting (coordinator/holders.c,
 * parallel_shard_prune; docs/coordinator.md "Checkpoints on the peers").
 *
 * A 2 x 1 run on peer storage, --checkpoint-copies 2, --keep 2, four live peers: peer 1 writes
 * stage 0, peer 2 stage 1, peers 3 and 4 stand by. The members copy each other's shards (the
 * coordinator asks members first): peer 2 has stage 0's copies of steps 10..40, but peer 1's
 * copies of stage 1 lag and reached step 20 only. The coordinator must pin step 20 (the newest
 * held twice everywhere) and say so in its ACK; peer 1's store, pruned by that pin, keeps stage
 * 0's step 20 (a plain "keep the newest two" would keep 30 and 40 only). Then peer 2 is lost:
 * the run must still resume, at step 20. Then peer 1 is lost too: no live peer holds a
 * committed step, so the coordinator waits at most --bind-timeout (a peer registering again
 * meanwhile does not stretch it) and then stops the run with an error naming the shards that
 * are missing. The in-process coordinator is fed the peers'
 * SHARDS reports as the daemon would be; stores are scratch directories. */
#include "common/common.h"
#include "common/testing.h"
#include "coordinator/coordinator_internal.h"
#include "parallel/transport/shards.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static char s_run[17];

static coordinator *s_open(const char *dir) {
  coordinator_config cfg;
  wt_config_defaults(coordinator_options(), &cfg);
  snprintf(cfg.state_dir, sizeof cfg.state_dir, "%.1000s", dir);
  snprintf(cfg.checkpoint_storage, sizeof cfg.checkpoint_storage, "peers");
  snprintf(cfg.solver, sizeof cfg.solver, "none");
  cfg.run.stages = 2, cfg.run.replicas = 1, cfg.run.steps = 100, cfg.run.checkpoint_every = 10;
  cfg.run.keep = 2, cfg.checkpoint_copies = 2, cfg.bind_timeout_s = 5;
  cfg.http_port = -1;
  coordinator *c = coordinator_new(&cfg);
  WT_TEST_REQUIRE(c, "coordinator_new: %s", wt_last_error());
  return c;
}

/* A fake digest per (step, stage): every copy of a shard has its writer's. */
static void s_digest(long step, int stage, char out[65]) {
  for (int i = 0; i < 64; i++) out[i] = "0123456789abcdef"[(step * 7 + stage * 3 + i) % 16];
  out[64] = 0;
}

/* Peer p reports holding (stage, step) for each step in steps[] (0-terminated), per stage. */
static void s_report(coordinator *c, coord_peer *p, const long *stage0, const long *stage1) {
  cJSON *b = cJSON_CreateObject();
  cJSON_AddStringToObject(b, "endpoint", "tcp://127.0.0.1:9");
  cJSON *held = cJSON_AddArrayToObject(b, "held");
  const long *lists[2] = {stage0, stage1};
  for (int s = 0; s < 2; s++)
    for (const long *st = lists[s]; st && *st; st++) {
      char d[65];
      s_digest(*st, s, d);
      cJSON *o = cJSON_CreateObject();
      cJSON_AddStringToObject(o, "run", s_run);
      cJSON_AddNumberToObject(o, "step", (double)*st);
      cJSON_AddNumberToObject(o, "stage", s);
      cJSON_AddNumberToObject(o, "replica", 0);
      cJSON_AddStringToObject(o, "digest", d);
      cJSON_AddItemToArray(held, o);
    }
  coord_holders_on_shards(c, p, b);
  cJSON_Delete(b);
}

/* A replica-0 shard's stage directory in a store (what parallel_shard_list names). */
static void s_make_shard(const char *root, uint64_t run, int stage, long step) {
  char path[1400];
  parallel_shard_run_dir(root, run, path, sizeof path);
  mkdir(path, 0755);
  size_t n = strlen(path);
  snprintf(path + n, sizeof path - n, "/stage-%d", stage);
  mkdir(path, 0755);
  n = strlen(path);
  snprintf(path + n, sizeof path - n, "/step-%08ld", step);
  mkdir(path, 0755);
}

/* The steps of stage `stage` in the store, newest first, 0-terminated. */
static void s_store_steps(const char *root, uint64_t run, int stage, long *out, int cap) {
  parallel_shard_id ids[64];
  int n = parallel_shard_list(root, run, ids, 64), k = 0;
  for (int i = 0; i < n && k < cap - 1; i++)
    if (ids[i].stage == stage) out[k++] = ids[i].step;
  out[k] = 0;
}

static int s_has(const long *steps, long step) {
  for (; *steps; steps++)
    if (*steps == step) return 1;
  return 0;
}

int main(void) {
  char dir[1024], store[1100];
  snprintf(dir, sizeof dir, "%s/wt-holders-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  WT_TEST_REQUIRE(mkdtemp(dir), "mkdtemp");
  coordinator *c = s_open(dir);
  snprintf(s_run, sizeof s_run, "%016llx", (unsigned long long)(c->run_id & 0xFFFFFFFFFFFFull));
  const uint64_t run = strtoull(s_run, NULL, 16);
  for (int i = 0; i < 4; i++) {
    coord_peer *p = &c->peers[i];
    memset(p, 0, sizeof *p);
    p->id = i + 1, p->status = PEER_LIVE, p->epoch_rank = i < 2 ? i : -1, p->flops = 1e9;
    p->gpus = 1, p->held_stage = -1;
    snprintf(p->key, sizeof p->key, "peer%036d", i);
    snprintf(p->kind, sizeof p->kind, "cpu");
  }
  c->n_peers = 4, c->next_peer_id = 5;
  /* the running train epoch (from step 0) that wrote steps 10..40, all committed */
  snprintf(c->epoch_kind, sizeof c->epoch_kind, "train");
  c->epoch = 1, c->phase = EPOCH_RUNNING, c->start_step = 0, c->committed_step = 40;

  const long all[] = {40, 30, 20, 10, 0}, lagging[] = {20, 10, 0};
  s_report(c, &c->peers[0], all, NULL); /* the writers only: nothing is held twice yet */
  s_report(c, &c->peers[1], NULL, all);
  coord_holders_check(c);
  WT_TEST_ASSERT(c->holders_pinned == 0, "no step held twice, none pinned: got %ld",
                 c->holders_pinned);
  s_report(c, &c->peers[0], all, lagging); /* peer 1: its stage 0, stage 1's copies that lag */
  s_report(c, &c->peers[1], all, all);     /* peer 2: its stage 1, stage 0's copies */
  s_report(c, &c->peers[2], NULL, NULL);
  s_report(c, &c->peers[3], NULL, NULL);
  coord_holders_check(c);
  WT_TEST_ASSERT(c->holders_pinned == 20,
                 "the pinned step is the newest held twice by every stage: 20, got %ld",
                 c->holders_pinned);
  cJSON *ack = cJSON_CreateObject();
  coord_holders_ack_json(c, ack);
  const cJSON *pin = cJSON_GetObjectItemCaseSensitive(ack, "pinned");
  WT_TEST_ASSERT(coordinator_field_int(pin, "step", -1) == 20 &&
                     coordinator_field_int(pin, "keep", -1) == 2 &&
                     !strcmp(coordinator_field_str(pin, "run"), s_run),
                 "the ACK names the pin, the run and --keep");
  cJSON_Delete(ack);

  /* peer 1's store as its tasklet (stage 0) and its copies (stage 1) left it, pruned by the pin */
  snprintf(store, sizeof store, "%s/peer1", dir);
  mkdir(store, 0755);
  for (const long *st = all; *st; st++) s_make_shard(store, run, 0, *st);
  for (const long *st = lagging; *st; st++) s_make_shard(store, run, 1, *st);
  int removed = parallel_shard_prune(store, run, c->holders_pinned, 2);
  long left0[8], left1[8];
  s_store_steps(store, run, 0, left0, 8);
  s_store_steps(store, run, 1, left1, 8);
  WT_TEST_ASSERT(removed == 1 && s_has(left0, 20) && s_has(left0, 30) && s_has(left0, 40) &&
                     !s_has(left0, 10),
                 "the store keeps stage 0 from the pinned step 20 on and removes step 10 only "
                 "(removed %d)",
                 removed);
  WT_TEST_ASSERT(s_has(left1, 20) && s_has(left1, 10), "both copies of stage 1 stay (keep 2)");
  WT_TEST_ASSERT(parallel_shard_prune(store, run, 0, 2) == 0 &&
                     parallel_shard_prune(store, run, 40, 4) == 0,
                 "no pin, or fewer than keep newer steps: nothing goes");

  /* peer 2 is lost: stage 1 survives only in peer 1's copies, stage 0 only on peer 1 */
  c->peers[1].status = PEER_GONE;
  c->phase = EPOCH_NONE, c->epoch_kind[0] = 0;
  s_report(c, &c->peers[0], left0, left1);
  char why[1024] = "";
  WT_TEST_ASSERT(coord_holders_resume_step(c) == 20, "the run resumes at step 20, got %ld",
                 coord_holders_resume_step(c));
  WT_TEST_ASSERT(coord_holders_ready(c, why, sizeof why) == 1, "a train epoch may form");

  /* peer 1 is lost too: nothing committed is held; the wait has a deadline, then the run stops */
  c->peers[0].status = PEER_GONE;
  WT_TEST_ASSERT(coord_holders_resume_step(c) == 0, "no step is held");
  WT_TEST_ASSERT(coord_holders_ready(c, why, sizeof why) == 0 && c->holders_wait_since > 0,
                 "the coordinator waits for the holders to come back");
  c->holders_wait_since -= c->cfg.bind_timeout_s + 1;
  c->peers[2].shards_due = wt_now_s() + 100; /* it registered again: its report is pending */
  WT_TEST_ASSERT(coord_holders_ready(c, why, sizeof why) == -1,
                 "and not past --bind-timeout, even while a peer that registered again has not "
                 "reported");
  WT_TEST_ASSERT(strstr(why, "step 40 lacks stage 0 replica 0 (held by peers 1 2, none live)") &&
                     strstr(why, "stage 1 replica 0 (held by peers 2, none live)"),
                 "the error names the missing shards and their last holders: %s", why);
  coord_epoch_tick(c);
  WT_TEST_ASSERT(c->run_complete == 2 && strstr(c->last_error, "step 40 lacks"),
                 "the epoch loop stops the run with that error (run_complete %d, %s)",
                 c->run_complete, c->last_error);
  coordinator_destroy(&c);
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  return wt_test_finish("test_coord_holders");
}
