/* fake_status — a stand-in for the coordinator's state, shared by the HTTP tests: a generation
 * number the test advances, from which every value of the snapshot follows (step, epoch, loss
 * history, the peers and where they sit), so a test can tell which snapshot a page or a scrape
 * shows. Header-only; the callback checks that the server holds the caller's lock. */
#ifndef WT_TESTS_HTTP_FAKE_STATUS_H
#define WT_TESTS_HTTP_FAKE_STATUS_H

#include "coordinator/http.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>

typedef struct {
  pthread_mutex_t lock; /* guards everything below, as the coordinator's own lock would */
  int generation;       /* what the next snapshot shows; the test changes it */
  int stages, replicas;
  int unavailable;     /* 1: the callback returns NULL */
  const char *region0; /* region label of the first peer (tests put hostile text here) */
  int calls;           /* snapshots taken */
  int unlocked_calls;  /* snapshots taken without the lock held: must stay 0 */
} fake_status;

/* What generation g shows: step 1000 + 17 g, epoch 1 + g / 3, and a peer id per seat that
 * names the generation ("g<g>-s<stage>r<replica>"), so a stale page is caught. */
static inline int fake_step(int g) {
  return 1000 + 17 * g;
}
static inline int fake_epoch(int g) {
  return 1 + g / 3;
}
static inline void fake_peer_id(char *buf, size_t size, int g, int s, int r) {
  snprintf(buf, size, "g%d-s%dr%d", g, s, r);
}

/* The coordinator's own members the dashboard shows: progress of FAKE_STEPS, the checkpoint a
 * hundred steps back, iteration times, refusals, three peers' probed links (peer a to b:
 * (10 a + b) ms, (a + b) MB/s) and an event log whose newest line names the generation. */
#define FAKE_STEPS 2000
static inline int fake_checkpoint(int g) {
  return fake_step(g) / 100 * 100;
}
static inline void fake_coordinator_members(cJSON *st, int g) {
  cJSON_AddNumberToObject(st, "steps", FAKE_STEPS);
  cJSON_AddNumberToObject(st, "committed_step", fake_checkpoint(g));
  cJSON_AddStringToObject(st, "checkpoint_dir", "/ckpt");
  cJSON_AddNumberToObject(st, "eta_s", (FAKE_STEPS - fake_step(g)) * 0.5);
  cJSON_AddNumberToObject(st, "measured_iteration_s", 0.5);
  cJSON_AddNumberToObject(st, "predicted_iteration_comm_s", 0.25);
  cJSON_AddNumberToObject(st, "time_scale", 0.1);
  cJSON_AddNumberToObject(st, "predicted_cost_ga_s", 2.5);
  cJSON_AddNumberToObject(st, "predicted_cost_random_s", 5.0);
  cJSON_AddNumberToObject(st, "refused", 3 + g);
  cJSON_AddNumberToObject(st, "handshakes_failed", 7);
  /* the probe matrix of peers 1..3 (peer 4 was never probed): a to b in (10a + b) ms at
   * (a + b) MB/s */
  cJSON *probe = cJSON_AddObjectToObject(st, "probe");
  cJSON *ids = cJSON_AddArrayToObject(probe, "peers");
  cJSON *lat = cJSON_AddArrayToObject(probe, "latency_s");
  cJSON *bw = cJSON_AddArrayToObject(probe, "bandwidth_Bps");
  for (int a = 1; a <= 3; a++) {
    cJSON_AddItemToArray(ids, cJSON_CreateNumber(a));
    cJSON *lrow = cJSON_CreateArray(), *brow = cJSON_CreateArray();
    for (int b = 1; b <= 3; b++) {
      cJSON_AddItemToArray(lrow,
                           a == b ? cJSON_CreateNull() : cJSON_CreateNumber((10 * a + b) / 1000.0));
      cJSON_AddItemToArray(brow, a == b ? cJSON_CreateNull() : cJSON_CreateNumber((a + b) * 1e6));
    }
    cJSON_AddItemToArray(lat, lrow);
    cJSON_AddItemToArray(bw, brow);
  }
  cJSON *events = cJSON_AddArrayToObject(st, "events");
  const char *kinds[] = {"joined", "epoch", "checkpoint"};
  for (int k = 0; k < 3; k++) {
    char detail[64];
    snprintf(detail, sizeof detail, "g%d-event%d", g, k);
    cJSON *e = cJSON_CreateObject();
    cJSON_AddNumberToObject(e, "t", 1.7e9 + g * 3 + k);
    cJSON_AddStringToObject(e, "kind", kinds[k]);
    cJSON_AddStringToObject(e, "detail", detail);
    cJSON_AddItemToArray(events, e);
  }
}

static inline cJSON *fake_status_snapshot(void *arg) {
  fake_status *f = arg;
  f->calls++;
  if (pthread_mutex_trylock(&f->lock) != EBUSY) {
    f->unlocked_calls++;
    pthread_mutex_unlock(&f->lock);
  }
  if (f->unavailable) return NULL;
  int g = f->generation;
  cJSON *st = cJSON_CreateObject();
  cJSON_AddNumberToObject(st, "version", 1);
  cJSON_AddStringToObject(st, "run", "fake-run");
  cJSON_AddStringToObject(st, "state", "training");
  cJSON_AddNumberToObject(st, "epoch", fake_epoch(g));
  cJSON_AddNumberToObject(st, "step", fake_step(g));
  cJSON_AddNumberToObject(st, "stages", f->stages);
  cJSON_AddNumberToObject(st, "replicas", f->replicas);
  cJSON_AddNumberToObject(st, "loss", 5.0 / (1.0 + 0.01 * fake_step(g)));
  cJSON *hist = cJSON_AddArrayToObject(st, "loss_history");
  for (int k = 0; k <= 20; k++) {
    int step = fake_step(g) * k / 20;
    cJSON *pt = cJSON_CreateArray();
    cJSON_AddItemToArray(pt, cJSON_CreateNumber(step));
    cJSON_AddItemToArray(pt, cJSON_CreateNumber(5.0 / (1.0 + 0.01 * step)));
    cJSON_AddItemToArray(hist, pt);
  }
  cJSON_AddNumberToObject(st, "tokens_per_s", 2048.0 + g);
  cJSON *links = cJSON_AddObjectToObject(st, "bytes_per_s");
  cJSON_AddNumberToObject(links, "intra_region", 1.5e6);
  cJSON_AddNumberToObject(links, "inter_region", 125000.0 + g);
  cJSON *peers = cJSON_AddArrayToObject(st, "peers");
  for (int s = 0; s < f->stages; s++)
    for (int r = 0; r < f->replicas; r++) {
      char id[64];
      fake_peer_id(id, sizeof id, g, s, r);
      cJSON *p = cJSON_CreateObject();
      cJSON_AddStringToObject(p, "id", id);
      cJSON_AddStringToObject(p, "region", s == 0 && r == 0 && f->region0 ? f->region0 : "eu-west");
      cJSON_AddNumberToObject(p, "stage", s);
      cJSON_AddNumberToObject(p, "replica", r);
      cJSON_AddStringToObject(p, "state", "training");
      cJSON_AddItemToArray(peers, p);
    }
  cJSON *standby = cJSON_CreateObject();
  char id[64];
  snprintf(id, sizeof id, "g%d-standby", g);
  cJSON_AddStringToObject(standby, "id", id);
  cJSON_AddStringToObject(standby, "region", "ap-south");
  cJSON_AddNumberToObject(standby, "stage", -1);
  cJSON_AddNumberToObject(standby, "replica", -1);
  cJSON_AddStringToObject(standby, "state", "standby");
  cJSON_AddItemToArray(peers, standby);
  fake_coordinator_members(st, g);
  return st;
}

static inline void fake_status_set(fake_status *f, int generation) {
  pthread_mutex_lock(&f->lock);
  f->generation = generation;
  pthread_mutex_unlock(&f->lock);
}

#endif
