/* test_coord_forge — checkpoint reports the coordinator must not believe. An in-process
 * coordinator runs a 2 × 1 train epoch whose members are raw CURVE clients (they answer the
 * link probe, bind and start, and train nothing), beside an admitted standby. The standby's
 * reports of step 100000 for every stage, and of a real shard with its true digest, are dropped
 * and counted; so are a member's reports for another stage, a step the epoch cannot have saved,
 * another epoch, a digest that is not the SHA-256 of the shard's SHA256SUMS, and a shard that is
 * not on disk. The owners' true reports commit the step, and after a member leaves, the next
 * train epoch resumes from that step, not from a forged one. Where the coordinator cannot see
 * the checkpoint directory, the owners' digests are taken unchecked, and nobody else's. */
#include "common/common.h"
#include "common/testing.h"
#include "coordinator/coordinator.h"
#include "coordinator/protocol.h"
#include "tests/coordinator/coord_client.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <sodium.h> /* defines: crypto_hash_sha256 for the shard's digest */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zmq.h>

static char s_tmp[1024], s_ckpt[1100];
static volatile sig_atomic_t s_stop;
static void *s_zctx;
static const long s_wait_ms = 10000; /* for a reply, on a loaded machine */

typedef struct {
  coord_client_peer peer;
  int rank; /* in the current epoch, -1 = none */
} s_client;

static void *s_serve(void *arg) {
  coordinator_run(arg, &s_stop);
  return NULL;
}

/* Connects and registers with flops; waits for WELCOME. */
static void s_join(s_client *cl, coordinator *c, double flops) {
  coord_client_peer_open(&cl->peer, s_zctx, coordinator_public_key(c), coordinator_endpoint(c), 1);
  cl->rank = -1;
  coord_client_peer_sendf(
      &cl->peer, COORD_CMD_REGISTER,
      "{\"token\":\"\",\"device\":{\"kind\":\"cpu\",\"flops\":%g,\"memory\":1e9}}", flops);
}

/* One epoch's EPOCH, BOUND and START for the members `cl`; a probe is answered with a fast
 * link to everyone. Returns the epoch number and the train config of the first client (owned,
 * NULL for a probe). */
static int s_epoch(s_client **cl, int n, cJSON **train) {
  int epoch = -1;
  *train = NULL;
  for (int i = 0; i < n; i++) {
    cJSON *e = coord_client_peer_expect(&cl[i]->peer, COORD_CMD_EPOCH, s_wait_ms);
    WT_TEST_REQUIRE(e, "client %d got an epoch", i);
    epoch = coordinator_field_int(e, "epoch", -1);
    cl[i]->rank = coordinator_field_int(e, "rank", -1);
    if (i == 0) *train = cJSON_DetachItemFromObject(e, "tasklet"); /* a train epoch's seat */
    cJSON_Delete(e);
    coord_client_peer_sendf(&cl[i]->peer, COORD_CMD_BOUND,
                            "{\"epoch\":%d,\"endpoint\":\"tcp://127.0.0.1:%d\"}", epoch, 40000 + i);
  }
  for (int i = 0; i < n; i++) {
    cJSON *st = coord_client_peer_expect(&cl[i]->peer, COORD_CMD_START, s_wait_ms);
    WT_TEST_REQUIRE(st, "client %d got START", i);
    cJSON_Delete(st);
  }
  if (!*train)
    for (int i = 0; i < n; i++)
      coord_client_peer_sendf(&cl[i]->peer, COORD_CMD_RESULT,
                              "{\"epoch\":%d,\"ok\":true,\"steps\":0,\"latency_s\":[0.001,0.001],"
                              "\"bandwidth_Bps\":[1e9,1e9]}",
                              epoch);
  return epoch;
}

static long s_status_num(coordinator *c, const char *key) {
  char *text = coordinator_status_json(c);
  cJSON *o = cJSON_Parse(text);
  long v = (long)coordinator_field_num(o, key, -1);
  cJSON_Delete(o);
  free(text);
  return v;
}

/* Writes text to path; its SHA-256 into hex. */
static void s_write(const char *path, const char *text, char hex[65]) {
  FILE *f = fopen(path, "w");
  WT_TEST_REQUIRE(f && fputs(text, f) >= 0 && fclose(f) == 0, "writing %s", path);
  unsigned char d[32];
  crypto_hash_sha256(d, (const unsigned char *)text, strlen(text));
  sodium_bin2hex(hex, 65, d, sizeof d);
}

/* A stage's shard of `step` on disk: one file and its SHA256SUMS; the digest into hex. */
static void s_shard(int stage, long step, char hex[65]) {
  char dir[1300], path[1400], text[256], sum[65];
  snprintf(dir, sizeof dir, "%s/stage-%d", s_ckpt, stage);
  mkdir(dir, 0755);
  snprintf(dir, sizeof dir, "%s/stage-%d/step-%08ld", s_ckpt, stage, step);
  mkdir(dir, 0755);
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  snprintf(text, sizeof text, "weights of stage %d at step %ld\n", stage, step);
  s_write(path, text, sum);
  snprintf(path, sizeof path, "%s/SHA256SUMS", dir);
  snprintf(text, sizeof text, "%s  model.safetensors\n", sum);
  s_write(path, text, hex);
}

/* Sends one report and waits for the coordinator to handle it (a heartbeat's ACK follows). */
static void s_report(s_client *cl, int epoch, long step, int stage, const char *digest) {
  coord_client_peer_sendf(&cl->peer, COORD_CMD_CHECKPOINT,
                          "{\"epoch\":%d,\"step\":%ld,\"stage\":%d,\"digest\":\"%s\"}", epoch, step,
                          stage, digest);
  coord_client_peer_sendf(&cl->peer, COORD_CMD_HEARTBEAT, "{\"epoch\":%d,\"step\":0}", epoch);
  cJSON *ack = coord_client_peer_expect(&cl->peer, COORD_CMD_ACK, s_wait_ms);
  WT_TEST_REQUIRE(ack, "the coordinator answers after a report");
  cJSON_Delete(ack);
}

/* The report is dropped and counted; nothing is committed. */
static void s_refused(coordinator *c, s_client *cl, int epoch, long step, int stage,
                      const char *digest, const char *what) {
  uint64_t before = coordinator_refused(c);
  s_report(cl, epoch, step, stage, digest);
  WT_TEST_ASSERT(coordinator_refused(c) == before + 1, "%s: dropped and counted", what);
  WT_TEST_ASSERT(s_status_num(c, "committed_step") == 0, "%s: nothing committed", what);
}

int main(void) {
  wt_test_tmpdir(s_tmp, sizeof s_tmp);
  snprintf(s_ckpt, sizeof s_ckpt, "%s/ckpt", s_tmp);
  mkdir(s_ckpt, 0755);
  s_zctx = zmq_ctx_new();
  coordinator_config cfg;
  wt_config_defaults(coordinator_options(), &cfg);
  snprintf(cfg.state_dir, sizeof cfg.state_dir, "%.1000s/state", s_tmp);
  snprintf(cfg.run.checkpoint_dir, sizeof cfg.run.checkpoint_dir, "%.1000s", s_ckpt);
  cfg.open = 1, cfg.run.stages = 2, cfg.run.replicas = 1, cfg.run.steps = 100,
  cfg.run.checkpoint_every = 10;
  cfg.heartbeat_s = 0.2, cfg.liveness = 100, cfg.http_port = -1;
  coordinator *c = coordinator_new(&cfg);
  WT_TEST_REQUIRE(c, "coordinator_new: %s", wt_last_error());
  pthread_t th;
  pthread_create(&th, NULL, s_serve, c);

  s_client a, b, standby;
  s_join(&a, c, 1e9);
  s_join(&b, c, 1e9);
  s_client *members[] = {&a, &b};
  cJSON *train;
  s_epoch(members, 2, &train); /* the link probe */
  int epoch = s_epoch(members, 2, &train);
  WT_TEST_REQUIRE(train, "the second epoch trains");
  cJSON_Delete(train);
  s_client *owner[2] = {a.rank == 0 ? &a : &b, a.rank == 0 ? &b : &a}; /* by stage */
  s_join(&standby, c, 1e8); /* slower: it stays a standby */
  cJSON *w = coord_client_peer_expect(&standby.peer, COORD_CMD_WELCOME, s_wait_ms);
  WT_TEST_REQUIRE(w, "the standby is admitted");
  cJSON_Delete(w);

  char d0[65], d1[65], zeros[65];
  memset(zeros, '0', 64), zeros[64] = 0;
  s_shard(0, 10, d0);
  s_shard(1, 10, d1);
  s_refused(c, &standby, epoch, 100000, 0, zeros, "the standby's step 100000 of stage 0");
  s_refused(c, &standby, epoch, 100000, 1, zeros, "the standby's step 100000 of stage 1");
  s_refused(c, &standby, epoch, 10, 0, d0, "the standby's report of a real shard");
  s_refused(c, owner[1], epoch, 10, 0, d0, "stage 1's owner reporting stage 0");
  s_refused(c, owner[0], epoch, 100000, 0, zeros, "a step past the run's end");
  s_refused(c, owner[0], epoch, 15, 0, d0, "a step off the checkpoint grid");
  s_refused(c, owner[0], epoch - 1, 10, 0, d0, "another epoch");
  s_refused(c, owner[0], epoch, 10, 0, d1, "a digest that is not the shard's");
  s_refused(c, owner[0], epoch, 20, 0, zeros, "a shard that is not on disk");
  char file[1400], gone[1500];
  snprintf(file, sizeof file, "%s/stage-0/step-%08d/model.safetensors", s_ckpt, 10);
  snprintf(gone, sizeof gone, "%s.gone", file);
  rename(file, gone);
  s_refused(c, owner[0], epoch, 10, 0, d0, "a shard whose listed file is missing");
  rename(gone, file);

  s_report(owner[0], epoch, 10, 0, d0);
  WT_TEST_ASSERT(s_status_num(c, "committed_step") == 0, "one stage of two: not complete");
  s_report(owner[1], epoch, 10, 1, d1);
  WT_TEST_ASSERT(s_status_num(c, "committed_step") == 10, "both owners' true reports commit 10");

  /* a member leaves: the next train epoch (after probing the standby) starts from step 10 */
  coord_client_peer_sendf(&owner[1]->peer, COORD_CMD_LEAVE, "{}");
  cJSON *ab = coord_client_peer_expect(&owner[0]->peer, COORD_CMD_ABORT, s_wait_ms);
  WT_TEST_REQUIRE(ab, "the other member is told to abort");
  cJSON_Delete(ab);
  coord_client_peer_sendf(
      &owner[0]->peer, COORD_CMD_RESULT,
      "{\"epoch\":%d,\"ok\":false,\"error\":\"aborted\",\"code\":%d,\"steps\":12}", epoch, WT_EIO);
  s_client *next[] = {owner[0], &standby};
  s_epoch(next, 2, &train); /* the standby's links */
  epoch = s_epoch(next, 2, &train);
  WT_TEST_REQUIRE(train, "a train epoch follows");
  long from = (long)coordinator_field_num(train, "resume_step", -1);
  WT_TEST_ASSERT(from == 10, "the next epoch resumes from step %ld, the committed 10", from);
  cJSON_Delete(train);

  /* a checkpoint directory the coordinator cannot see: digests are taken unchecked, but only
   * from the owners, for steps the epoch can have saved */
  char away[1200];
  snprintf(away, sizeof away, "%s.away", s_ckpt);
  rename(s_ckpt, away);
  s_client *now[2] = {next[0]->rank == 0 ? next[0] : next[1],
                      next[0]->rank == 0 ? next[1] : next[0]};
  uint64_t before = coordinator_refused(c);
  s_report(now[1], epoch, 20, 0, zeros);
  s_report(now[0], epoch, 10, 0, zeros);
  WT_TEST_ASSERT(coordinator_refused(c) == before + 2,
                 "unchecked: another stage's owner and a step before the epoch's start dropped");
  s_report(now[0], epoch, 20, 0, zeros);
  s_report(now[1], epoch, 20, 1, zeros);
  WT_TEST_ASSERT(coordinator_refused(c) == before + 2 && s_status_num(c, "committed_step") == 20,
                 "unchecked: the owners' reports commit step 20");

  s_stop = 1;
  pthread_join(th, NULL);
  coordinator_destroy(&c);
  s_client *all[] = {&a, &b, &standby};
  for (size_t i = 0; i < WT_ARRAY_LEN(all); i++) zmq_close(all[i]->peer.sock);
  zmq_ctx_term(s_zctx);
  char rm[1200];
  snprintf(rm, sizeof rm, "rm -rf '%s'", s_tmp);
  if (system(rm) != 0) fprintf(stderr, "test_coord_forge: could not remove %s\n", s_tmp);
  return wt_test_finish("test_coord_forge");
}
