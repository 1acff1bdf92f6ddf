/* peerd — the control loop: register, heartbeat, follow epochs (bind, start, abort), report
 * results and checkpoint shards, print progress, leave on a signal. */
#include "peer/peer.h"

#include "common/common.h"
#include "coordinator/protocol.h"
#include "kernels/kernels.h"
#include "parallel/datacenter/site.h" /* defines: PARALLEL_SITE_MAX_RANKS, parallel_site_device */
#include "parallel/runtime/tasklet.h" /* defines: parallel_tasklet_set_default_device */
#include "peer/peer_internal.h"
#include "peer/shards.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#define F(x) offsetof(peerd_config, x)
static const wt_option s_options[] = {
    {"coordinator", WT_OPT_STRING, F(coordinator), 0, 0, "",
     "the coordinator's control endpoint, tcp://HOST:PORT", 0},
    {"coordinator-key", WT_OPT_STRING, F(coordinator_key), 0, 0, "",
     "the coordinator's public key: a file (coordinator.pub) or the 40-character key", 0},
    {"token", WT_OPT_STRING, F(token), 0, 0, "", "join token from the operator", 0},
    {"device", WT_OPT_STRING, F(device), 0, 0, "cpu", "cpu or cuda:N", 0},
    {"region", WT_OPT_STRING, F(region), 0, 0, "", "region label (for emulated WANs)", 0},
    {"data-dir", WT_OPT_STRING, F(data_dir), 0, 0, "peerd-data",
     "where the key pair and downloaded data live", 0},
    {"key", WT_OPT_STRING, F(key), 0, 0, "", "key pair file (default DATA_DIR/peer.key)", 0},
    {"cache-dir", WT_OPT_STRING, F(cache_dir), 0, 0, "",
     "where the run's data URLs are downloaded (default DATA_DIR/cache)", 0},
    {"host", WT_OPT_STRING, F(host), 0, 0, "127.0.0.1", "address the other peers reach this one at",
     0},
    {"unreachable", WT_OPT_FLAG, F(unreachable), 0, 1, "0",
     "this peer accepts no inbound connection (behind NAT or a firewall): the coordinator skips "
     "its connect-back test, and every link of this peer starts here (through outboxes of "
     "reachable peers and the coordinator's relay)",
     0},
    {"flops", WT_OPT_FLOAT, F(flops), 0, 1e18, "0",
     "one GPU's FLOP/s, instead of measuring them (0 = measure); emulates a slower or faster "
     "device for the placement",
     0},
    {"gpus", WT_OPT_INT, F(gpus), 1, PARALLEL_SITE_MAX_RANKS, "1",
     "GPUs of this site: the coordinator sees one device of gpus x site-efficiency x one GPU's "
     "FLOP/s and gpus x its memory, and each assigned stage runs on gpus ranks (threads of this "
     "process; --device cpu only): tensor parallelism (the heads must split over it), times "
     "context parallelism when the run has --site-cp, or expert parallelism for an MoE model "
     "(the experts must split over it)",
     0},
    {"site-efficiency", WT_OPT_FLOAT, F(site_efficiency), 0, 1, "0",
     "with --gpus > 1 or --site, the fraction of gpus x one GPU's speed the site is reported at "
     "(tensor parallelism's all-reduces cost time); 0 = measure it at start: one stage's passes "
     "on one rank against the same passes on the site (with --site: on its processes, which "
     "must be serving)",
     0},
    {"site", WT_OPT_STRING, F(site), 0, 0, "",
     "a site file ({\"ranks\": [{\"endpoint\": \"tcp://HOST:PORT\", \"public_key\": KEY}, "
     "...]}, parallel/datacenter/site.h): this peerd is rank --site-rank of a site whose ranks are "
     "processes. Rank 0 registers with the coordinator as --gpus N does (N = the file's "
     "ranks); ranks >= 1 need no --coordinator and serve rank 0 until SIGINT/SIGTERM. "
     "--device cpu only",
     0},
    {"site-rank", WT_OPT_INT, F(site_rank), -1, PARALLEL_SITE_MAX_RANKS - 1, "-1",
     "this process's rank in --site (its entry's public_key must be this peerd's --key)", 0},
    {"site-timeout", WT_OPT_FLOAT, F(site_timeout_s), 1, 3600, "120",
     "with --site, seconds any wait inside the site may take", 0},
    {"register-timeout", WT_OPT_FLOAT, F(register_timeout_s), 1, 3600, "30",
     "seconds to wait for the coordinator's answer", 0},
    {"quiet", WT_OPT_FLAG, F(quiet), 0, 1, "0", "no progress lines", 0},
    {"precision", WT_OPT_CHOICE, F(precision), 0, 0, "fp32",
     "matmul precision; bf16: bf16 tensor-core inputs, fp32 weights, optimizer and loss (GPU)",
     "fp32|bf16"},
    {"tf32", WT_OPT_FLAG, F(tf32), 0, 1, "0", "fp32 matmuls on TF32 tensor cores (GPU)", 0},
    {"json-log", WT_OPT_STRING, F(json_log), 0, 0, "",
     "append one JSON object per training step, and one at the start and the end of each train "
     "epoch, here",
     0},
    {0}};
#undef F

const wt_option *peerd_options(void) {
  return s_options;
}

typedef struct {
  const peerd_config *cfg;
  char pub[41], sec[41], server[41];
  void *ctx, *sock;
  void *monitor; /* the control socket's handshake events while it registers, else NULL */
  void *reach;   /* listens at --host for the coordinator's connect-back test, or NULL */
  int reach_port;
  char sid[COORD_SID_CHARS + 1];
  uint64_t seq;
  int peer_id;
  double heartbeat_s;
  int liveness;
  double last_heard, next_beat, last_print;
  double flops, memory;
  peer_work *work;
  int work_epoch;
  peer_held held;     /* this peer's stage state at its last completed step, between epochs */
  cJSON *last_result; /* repeated in heartbeats until a new epoch: a RESULT lost in a
                         coordinator restart is not lost */
  long reported_ckpt;
  data_set *data;
  char data_spec[WT_CONFIG_STR_MAX];
  int gpus;                 /* the site's ranks: --gpus, or the --site file's processes */
  parallel_site_link *link; /* --site: the site's processes, else NULL */
  FILE *log;                /* --json-log, or NULL */
  peer_shards *shards;      /* the checkpoint store under DATA_DIR/runs and its server */
  int peer_storage;         /* WELCOME said the run keeps its checkpoints on the peers */
  char shard_relay[256];    /* WELCOME's shard relay, "" when none */
  int report_shards;        /* send the store's report at the next heartbeat, changed or not */
} s_peer;

static int s_send(s_peer *p, coordinator_cmd cmd, const cJSON *body) {
  char *text = coordinator_msg_encode(cmd, p->sid, ++p->seq, body);
  if (!text) return WT_EINVAL;
  int rc = zmq_send(p->sock, text, strlen(text), ZMQ_DONTWAIT) < 0 ? WT_EIO : WT_OK;
  free(text);
  return rc;
}

static int s_keys(s_peer *p) {
  const peerd_config *c = p->cfg;
  if (mkdir(c->data_dir, 0700) != 0 && errno != EEXIST)
    return wt_fail(WT_EIO, "cannot create --data-dir %s: %s", c->data_dir, strerror(errno));
  char path[2100];
  snprintf(path, sizeof path, "%s", c->key);
  if (!path[0]) snprintf(path, sizeof path, "%s/peer.key", c->data_dir);
  int rc = parallel_zmq_keypair_load(path, p->pub, p->sec);
  if (rc == WT_ENOTFOUND) {
    WT_CHECK(parallel_zmq_keypair_new(p->pub, p->sec));
    WT_CHECK(parallel_zmq_keypair_save(path, p->pub, p->sec));
    printf("peerd: made a new key pair in %s (public key %s)\n", path, p->pub);
  } else if (rc != WT_OK) {
    return rc;
  }
  return WT_OK;
}

/* The coordinator's public key: --coordinator-key, a file or the key itself. */
static int s_coordinator_key(s_peer *p) {
  const char *k = p->cfg->coordinator_key;
  uint8_t raw[32];
  /* A readable file wins: a 40-character path is also valid Z85. */
  if (access(k, R_OK) != 0 && strlen(k) == 40 && zmq_z85_decode(raw, k)) {
    memcpy(p->server, k, 41);
  } else {
    FILE *f = fopen(k, "r");
    char line[128] = "";
    if (!f)
      return wt_fail(WT_EINVAL,
                     "--coordinator-key '%s' is neither a 40-character key nor "
                     "a readable file: %s",
                     k, strerror(errno));
    if (!fgets(line, sizeof line, f)) line[0] = 0;
    fclose(f);
    line[strcspn(line, "\r\n ")] = 0;
    if (strlen(line) != 40 || !zmq_z85_decode(raw, line))
      return wt_fail(WT_EINVAL,
                     "--coordinator-key file %s does not hold a 40-character Z85 key "
                     "(copy coordinator.pub from the coordinator's state directory)",
                     k);
    memcpy(p->server, line, 41);
  }
  return WT_OK;
}

#define S_MONITOR "inproc://peerd.control.monitor"
#define S_MONITOR_EVENTS                                                                           \
  (ZMQ_EVENT_CONNECTED | ZMQ_EVENT_HANDSHAKE_SUCCEEDED | ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |    \
   ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL | ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
/* CURVE handshakes in a row that fail before registration gives up: ZeroMQ reconnects after
 * each (100 ms, then up to 1 s), so a wrong server key is reported within a few seconds, and
 * one handshake cut by a coordinator restarting does not count as one. Only a failure within
 * S_HANDSHAKE_QUICK_S of connecting counts: a coordinator refuses a wrong key's HELLO at once,
 * while one too busy to finish handshakes lets them time out, which is no sign of a bad key. */
#define S_HANDSHAKE_FAILS 3
#define S_HANDSHAKE_QUICK_S 2.0

/* Watches the control socket's handshakes (ZeroMQ's socket monitor), so that registration
 * can tell a coordinator that cannot be reached from one that does not accept our handshake. */
static int s_monitor_start(s_peer *p) {
  if (zmq_socket_monitor(p->sock, S_MONITOR, S_MONITOR_EVENTS) != 0) goto fail;
  p->monitor = zmq_socket(p->ctx, ZMQ_PAIR);
  if (p->monitor && zmq_connect(p->monitor, S_MONITOR) == 0) return WT_OK;
fail:
  return wt_fail(WT_EIO, "cannot monitor the control socket: %s", zmq_strerror(errno));
}

static void s_monitor_stop(s_peer *p) {
  if (!p->monitor) return;
  zmq_socket_monitor(p->sock, NULL, 0);
  zmq_close(p->monitor);
  p->monitor = NULL;
}

/* One monitor event ([u16 event, u32 value][endpoint]) into *event and *value; 0 when none. */
static int s_monitor_event(s_peer *p, uint16_t *event, uint32_t *value) {
  zmq_msg_t head, addr;
  zmq_msg_init(&head);
  zmq_msg_init(&addr);
  int got = zmq_msg_recv(&head, p->monitor, ZMQ_DONTWAIT) >= 0 && zmq_msg_more(&head) &&
            zmq_msg_recv(&addr, p->monitor, 0) >= 0 && zmq_msg_size(&head) == 6;
  if (got) {
    memcpy(event, zmq_msg_data(&head), 2);
    memcpy(value, (const char *)zmq_msg_data(&head) + 2, 4);
  }
  zmq_msg_close(&head);
  zmq_msg_close(&addr);
  return got;
}

/* Counts the handshakes that failed in a row soon after connecting (connected_at: the last
 * connection's time); after S_HANDSHAKE_FAILS, fails saying why. */
static int s_handshake_check(s_peer *p, int *fails, double *connected_at) {
  uint16_t event;
  uint32_t value;
  while (s_monitor_event(p, &event, &value)) {
    if (event == ZMQ_EVENT_CONNECTED) {
      *connected_at = wt_now_s();
      continue;
    }
    if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
      *fails = 0;
      continue;
    }
    if (wt_now_s() - *connected_at > S_HANDSHAKE_QUICK_S) continue;
    if (++*fails < S_HANDSHAKE_FAILS) continue;
    if (event == ZMQ_EVENT_HANDSHAKE_FAILED_AUTH)
      return wt_fail(WT_EINVAL,
                     "the coordinator at %s refused this connection (ZAP status %u: it is at its "
                     "connection limits); try again later",
                     p->cfg->coordinator, value);
    return wt_fail(WT_EINVAL,
                   "the CURVE handshake with the coordinator at %s failed %d times in a row: "
                   "--coordinator-key %s is not that coordinator's public key (use the "
                   "coordinator.pub of its state directory)",
                   p->cfg->coordinator, *fails, p->cfg->coordinator_key);
  }
  return WT_OK;
}

/* The coordinator tests whether this peer accepts inbound connections by connecting back to a
 * port it listens on at --host (a socket that takes no message: ZeroMQ accepts the connection,
 * the coordinator only needs the handshake of TCP). A peer that cannot listen offers no test. */
static void s_reach_listen(s_peer *p) {
  p->reach = zmq_socket(p->ctx, ZMQ_PULL);
  int linger = 0, hwm = 1;
  int64_t maxmsg = 1;
  zmq_setsockopt(p->reach, ZMQ_LINGER, &linger, sizeof linger);
  zmq_setsockopt(p->reach, ZMQ_RCVHWM, &hwm, sizeof hwm);
  zmq_setsockopt(p->reach, ZMQ_MAXMSGSIZE, &maxmsg, sizeof maxmsg);
  char ep[300];
  snprintf(ep, sizeof ep, "tcp://%.255s:*", p->cfg->host);
  if (zmq_bind(p->reach, ep) != 0) {
    WT_WARN("peerd: cannot listen at %s for the coordinator's reachability test (%s); the "
            "coordinator takes this peer as reachable",
            ep, zmq_strerror(errno));
    zmq_close(p->reach);
    p->reach = NULL;
    return;
  }
  size_t n = sizeof ep;
  zmq_getsockopt(p->reach, ZMQ_LAST_ENDPOINT, ep, &n);
  const char *colon = strrchr(ep, ':');
  p->reach_port = colon ? atoi(colon + 1) : 0;
}

static int s_connect(s_peer *p) {
  p->ctx = zmq_ctx_new();
  p->sock = zmq_socket(p->ctx, ZMQ_DEALER);
  int linger = 200, ivl = 100, ivl_max = 1000;
  zmq_setsockopt(p->sock, ZMQ_LINGER, &linger, sizeof linger);
  zmq_setsockopt(p->sock, ZMQ_RECONNECT_IVL, &ivl, sizeof ivl);
  zmq_setsockopt(p->sock, ZMQ_RECONNECT_IVL_MAX, &ivl_max, sizeof ivl_max);
  int64_t maxsize = COORD_MSG_MAX + 1024;
  zmq_setsockopt(p->sock, ZMQ_MAXMSGSIZE, &maxsize, sizeof maxsize);
  zmq_setsockopt(p->sock, ZMQ_CURVE_SERVERKEY, p->server, 40);
  zmq_setsockopt(p->sock, ZMQ_CURVE_PUBLICKEY, p->pub, 40);
  zmq_setsockopt(p->sock, ZMQ_CURVE_SECRETKEY, p->sec, 40);
  WT_CHECK(s_monitor_start(p));
  if (!p->cfg->unreachable) s_reach_listen(p);
  if (zmq_connect(p->sock, p->cfg->coordinator) != 0)
    return wt_fail(WT_EINVAL, "--coordinator '%s': %s (expected tcp://HOST:PORT)",
                   p->cfg->coordinator, zmq_strerror(errno));
  return WT_OK;
}

static int s_register(s_peer *p) {
  coordinator_sid_new(p->sid);
  p->seq = 0;
  cJSON *b = cJSON_CreateObject();
  cJSON_AddStringToObject(b, "token", p->cfg->token);
  cJSON_AddStringToObject(b, "region", p->cfg->region);
  cJSON_AddStringToObject(b, "host", p->cfg->host);
  if (p->cfg->unreachable)
    cJSON_AddFalseToObject(b, "reachable");
  else if (p->reach_port > 0)
    cJSON_AddNumberToObject(b, "reach_port", p->reach_port);
  if (p->held.step > 0) { /* registering again (the coordinator restarted): still holds it */
    cJSON_AddNumberToObject(b, "held_stage", p->held.stage);
    cJSON_AddNumberToObject(b, "held_step", (double)p->held.step);
    if (p->held.outer >= 0) cJSON_AddNumberToObject(b, "held_outer", (double)p->held.outer);
  }
  cJSON *d = cJSON_AddObjectToObject(b, "device");
  cJSON_AddStringToObject(d, "kind", strncmp(p->cfg->device, "cuda", 4) ? "cpu" : "cuda");
  cJSON_AddNumberToObject(d, "flops", p->flops);
  cJSON_AddNumberToObject(d, "memory", p->memory);
  cJSON_AddNumberToObject(d, "gpus", p->gpus);
  int rc = s_send(p, COORD_CMD_REGISTER, b);
  cJSON_Delete(b);
  return rc;
}

/* Receives one message within timeout_ms; 1 = got one into *m, 0 = none. Undecodable ones are
 * logged and dropped. */
static int s_recv(s_peer *p, long timeout_ms, coordinator_msg *m) {
  zmq_pollitem_t it = {p->sock, 0, ZMQ_POLLIN, 0};
  if (zmq_poll(&it, 1, timeout_ms) <= 0 || !(it.revents & ZMQ_POLLIN)) return 0;
  zmq_msg_t msg;
  zmq_msg_init(&msg);
  if (zmq_msg_recv(&msg, p->sock, ZMQ_DONTWAIT) < 0) {
    zmq_msg_close(&msg);
    return 0;
  }
  int rc = coordinator_msg_decode(zmq_msg_data(&msg), zmq_msg_size(&msg), m);
  zmq_msg_close(&msg);
  if (rc != WT_OK) {
    WT_WARN("peerd: dropped a control message: %s", wt_last_error());
    return 0;
  }
  p->last_heard = wt_now_s();
  return 1;
}

/* The corpus an epoch names, opened once and kept (fetched, cached and verified for URLs). */
static int s_data(s_peer *p, const cJSON *train) {
  const char *spec = coordinator_field_str(train, "data"),
             *sha = coordinator_field_str(train, "data-sha256");
  if (p->data && !strcmp(spec, p->data_spec)) return WT_OK;
  data_set_destroy(&p->data);
  if (!strcmp(spec, "synthetic") || !spec[0]) {
    data_synth_config sc = data_synth_default();
    p->data = data_set_synthetic(&sc);
  } else {
    char cache[2100];
    snprintf(cache, sizeof cache, "%s/cache", p->cfg->data_dir);
    if (p->cfg->cache_dir[0]) snprintf(cache, sizeof cache, "%s", p->cfg->cache_dir);
    p->data = data_set_open(spec, cache, sha[0] ? sha : NULL);
  }
  if (!p->data) return WT_EIO;
  snprintf(p->data_spec, sizeof p->data_spec, "%s", spec);
  return WT_OK;
}

static void s_report_failure(s_peer *p, int epoch, const char *why) {
  cJSON *b = cJSON_CreateObject();
  cJSON_AddNumberToObject(b, "epoch", epoch);
  cJSON_AddBoolToObject(b, "ok", 0);
  cJSON_AddStringToObject(b, "error", why);
  cJSON_AddNumberToObject(b, "steps", 0);
  s_send(p, COORD_CMD_RESULT, b);
  cJSON_Delete(b);
}

static void s_on_epoch(s_peer *p, const cJSON *body) {
  peer_work_destroy(&p->work);
  cJSON_Delete(p->last_result);
  p->last_result = NULL;
  int epoch = coordinator_field_int(body, "epoch", -1);
  const cJSON *train = cJSON_GetObjectItemCaseSensitive(body, "train"),
              *seat = cJSON_GetObjectItemCaseSensitive(body, "tasklet");
  /* the stage may differ from the last epoch's; what this epoch saves comes after its start */
  p->reported_ckpt = seat ? coordinator_field_int(seat, "resume_step", 0) : 0;
  if (train && s_data(p, train) != WT_OK) {
    char why[1200];
    snprintf(why, sizeof why, "data: %s", wt_last_error());
    fprintf(stderr, "peerd: epoch %d: %s\n", epoch, why);
    s_report_failure(p, epoch, why);
    return;
  }
  peer_shards_on_allow(p->shards, cJSON_GetObjectItemCaseSensitive(body, "keys"));
  p->work =
      peer_work_new(body, p->cfg->host, p->cfg->coordinator, p->pub, p->sec, p->data, &p->held);
  if (p->work && seat && !strcmp(coordinator_field_str(seat, "storage"), "peers"))
    peer_work_use_store(p->work, peer_shards_root(p->shards));
  if (p->work) p->work->site_ranks = p->gpus, p->work->site_link = p->link;
  if (p->work) p->work->log = p->log, p->work->peer_id = p->peer_id;
  if (!p->work) {
    fprintf(stderr, "peerd: epoch %d: %s\n", epoch, wt_last_error());
    s_report_failure(p, epoch, wt_last_error());
    return;
  }
  p->work_epoch = epoch;
  if (!p->cfg->quiet)
    printf("peerd %d: epoch %d: %s, rank %d of %d%s\n", p->peer_id, epoch,
           coordinator_field_str(body, "kind"), coordinator_field_int(body, "rank", 0),
           coordinator_field_int(body, "size", 0),
           !seat                                                  ? ""
           : cJSON_GetObjectItemCaseSensitive(seat, "state_from") ? " (from live replicas' state)"
           : coordinator_field_num(seat, "resume", 0) ? " (resuming from the latest checkpoint)"
                                                      : "");
  cJSON *b = cJSON_CreateObject();
  cJSON_AddNumberToObject(b, "epoch", epoch);
  cJSON_AddStringToObject(b, "endpoint", peer_work_endpoint(p->work));
  peer_work_outboxes_json(p->work, b);
  s_send(p, COORD_CMD_BOUND, b);
  cJSON_Delete(b);
}

static void s_on_start(s_peer *p, const cJSON *body) {
  if (!p->work || coordinator_field_int(body, "epoch", -1) != p->work_epoch || p->work->started)
    return;
  if (peer_work_start(p->work, body) != WT_OK) {
    fprintf(stderr, "peerd: epoch %d: %s\n", p->work_epoch, wt_last_error());
    s_report_failure(p, p->work_epoch, wt_last_error());
    peer_work_destroy(&p->work);
  }
}

/* Replica 0 of each stage reports every shard its tasklet saved in this epoch since the last
 * report (a heartbeat may span several checkpoints): DIR/stage-<s>/step-<n>/ for steps after the
 * epoch's start and not after the tasklet's step (a directory left by an earlier epoch is not
 * this one's), whose SHA256SUMS covers every file; the digest reported is the SHA-256 of that
 * SHA256SUMS. Only complete directories have one. The coordinator takes reports from the stage's
 * replica 0 of its running epoch only (docs/coordinator.md). */
static int s_cmp_long(const void *a, const void *b) {
  long x = *(const long *)a, y = *(const long *)b;
  return (x > y) - (x < y);
}

/* The step DIR/manifest.json names (world rank 0 writes it once every stage saved), or -1. */
static long s_manifest_step(const char *dir) {
  char path[2200];
  snprintf(path, sizeof path, "%s/manifest.json", dir);
  FILE *f = fopen(path, "rb");
  if (!f) return -1;
  char text[1 << 16];
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = 0;
  cJSON *m = cJSON_Parse(text);
  const cJSON *step = cJSON_GetObjectItemCaseSensitive(m, "step");
  long out = cJSON_IsNumber(step) ? (long)step->valuedouble : -1;
  cJSON_Delete(m);
  return out;
}

/* A shard is reported once the run manifest names its step (or a later one): a commit then
 * means the checkpoint can be resumed, even when the coordinator aborts the epoch at once (a
 * promotion) and the manifest of a step the stages saved would otherwise never be written. The
 * tasklet's last shard goes when the tasklet returned ok (finished_ok): every stage saved it and
 * rank 0 writes its manifest before returning. */
static void s_report_checkpoint(s_peer *p, int finished_ok) {
  peer_work *w = p->work;
  if (!w || !w->is_train || w->replica != 0) return;
  const char *dir = w->run.checkpoint_dir;
  if (!dir[0]) return;
  char path[2200];
  snprintf(path, sizeof path, "%s/stage-%d", dir, w->stage);
  DIR *d = opendir(path);
  if (!d) return;
  pthread_mutex_lock(&w->mu);
  long done = w->step; /* set before the tasklet saves that step */
  pthread_mutex_unlock(&w->mu);
  if (!finished_ok) done = WT_MIN(done, s_manifest_step(dir));
  long steps[64];
  int n = 0;
  for (struct dirent *e; (e = readdir(d)) && n < 64;) {
    long step;
    char tail;
    if (sscanf(e->d_name, "step-%ld%c", &step, &tail) == 1 && step > p->reported_ckpt &&
        step <= done)
      steps[n++] = step;
  }
  closedir(d);
  qsort(steps, (size_t)n, sizeof(long), s_cmp_long);
  for (int i = 0; i < n; i++) {
    char hex[65];
    snprintf(path, sizeof path, "%s/stage-%d/step-%08ld/SHA256SUMS", dir, w->stage, steps[i]);
    if (data_file_sha256(path, hex) != WT_OK) return; /* not complete yet: try next heartbeat */
    cJSON *b = cJSON_CreateObject();
    cJSON_AddNumberToObject(b, "epoch", w->epoch);
    cJSON_AddNumberToObject(b, "step", steps[i]);
    cJSON_AddNumberToObject(b, "stage", w->stage);
    cJSON_AddStringToObject(b, "digest", hex);
    s_send(p, COORD_CMD_CHECKPOINT, b);
    cJSON_Delete(b);
    p->reported_ckpt = steps[i];
  }
}

static void s_heartbeat(s_peer *p) {
  cJSON *b = cJSON_CreateObject();
  peer_work *w = p->work;
  long step = 0;
  double loss = NAN, tok = 0, sent = 0, recv = 0, intra = 0, inter = 0, inter_raw = 0;
  if (w && w->is_train) {
    pthread_mutex_lock(&w->mu);
    step = w->step, loss = w->loss, tok = w->tokens_s, sent = w->bytes_sent, recv = w->bytes_recv;
    intra = w->bytes_intra, inter = w->bytes_inter, inter_raw = w->bytes_inter_raw;
    pthread_mutex_unlock(&w->mu);
  }
  cJSON_AddNumberToObject(b, "epoch", w ? w->epoch : -1);
  cJSON_AddStringToObject(b, "state", !w ? "idle" : w->started ? "working" : "bound");
  cJSON_AddNumberToObject(b, "step", (double)step);
  if (w && isfinite(w->first_loss)) cJSON_AddNumberToObject(b, "first_loss", w->first_loss);
  if (isfinite(loss)) cJSON_AddNumberToObject(b, "loss", loss);
  cJSON_AddNumberToObject(b, "tokens_s", tok);
  cJSON_AddNumberToObject(b, "bytes_sent", sent);
  cJSON_AddNumberToObject(b, "bytes_recv", recv);
  cJSON_AddNumberToObject(b, "bytes_intra", intra);
  cJSON_AddNumberToObject(b, "bytes_inter", inter);
  cJSON_AddNumberToObject(b, "bytes_inter_raw", inter_raw);
  if (w) peer_work_trust_json(w, b);
  if (!w && p->last_result) cJSON_AddItemToObject(b, "result", cJSON_Duplicate(p->last_result, 1));
  s_send(p, COORD_CMD_HEARTBEAT, b);
  cJSON_Delete(b);
  double now = wt_now_s();
  if (!p->cfg->quiet && w && w->is_train && w->started && step > 0 && now - p->last_print >= 2) {
    p->last_print = now;
    printf("peerd %d: stage %d replica %d step %ld/%ld loss %.4f tok/s %.0f sent %.1f MB "
           "received %.1f MB\n",
           p->peer_id, w->stage, w->replica, step, w->total_steps, loss, tok, sent / 1e6,
           recv / 1e6);
    fflush(stdout);
  }
}

static void s_work_done(s_peer *p) {
  peer_work *w = p->work;
  if (!w || !w->started || !w->finished) return;
  s_report_checkpoint(p, w->rc == WT_OK); /* the last shard, saved just before it returned */
  /* what the store holds now goes before the result: the next epoch must not count a damaged
   * copy this one removed */
  cJSON *held = peer_shards_report(p->shards, 0);
  if (held) s_send(p, COORD_CMD_SHARDS, held);
  cJSON_Delete(held);
  cJSON *b = peer_work_result(w);
  s_send(p, COORD_CMD_RESULT, b);
  cJSON_Delete(p->last_result);
  p->last_result = b;
  if (!p->cfg->quiet) {
    if (w->rc == WT_OK)
      printf("peerd %d: epoch %d done%s\n", p->peer_id, w->epoch, w->is_train ? " (training)" : "");
    else
      printf("peerd %d: epoch %d ended: %s\n", p->peer_id, w->epoch, w->error);
    fflush(stdout);
  }
  peer_work_destroy(&p->work);
}

/* Waits for WELCOME (1), REFUSED or handshakes that keep failing (-1, the reason in
 * wt_last_error) or the deadline (0). */
static int s_await_welcome(s_peer *p, double deadline, const volatile sig_atomic_t *stop) {
  int fails = 0;
  double connected_at = 0;
  while (wt_now_s() < deadline && !*stop) {
    zmq_pollitem_t it[2] = {{p->sock, 0, ZMQ_POLLIN, 0}, {p->monitor, 0, ZMQ_POLLIN, 0}};
    zmq_poll(it, p->monitor ? 2 : 1, 200);
    if (p->monitor && s_handshake_check(p, &fails, &connected_at) != WT_OK) return -1;
    coordinator_msg m;
    if (!s_recv(p, 0, &m)) continue;
    int r = 0;
    if (m.cmd == COORD_CMD_WELCOME) {
      p->peer_id = coordinator_field_int(m.body, "peer_id", 0);
      p->heartbeat_s = fmin(fmax(coordinator_field_num(m.body, "heartbeat_s", 1), 0.05), 60);
      p->liveness = (int)fmin(fmax(coordinator_field_num(m.body, "liveness", 5), 2), 100);
      p->peer_storage = !strcmp(coordinator_field_str(m.body, "storage"), "peers");
      snprintf(p->shard_relay, sizeof p->shard_relay, "%s",
               coordinator_field_str(m.body, "shard_relay"));
      r = 1;
    } else if (m.cmd == COORD_CMD_REFUSED) {
      wt_fail(WT_EINVAL, "the coordinator refused this peer: %s",
              coordinator_field_str(m.body, "reason"));
      r = -1;
    }
    coordinator_msg_clear(&m);
    if (r) return r;
  }
  return 0;
}

static int s_loop(s_peer *p, const volatile sig_atomic_t *stop) {
  int warned = 0;
  while (!*stop) {
    double now = wt_now_s();
    long wait_ms = (long)fmax(1, (p->next_beat - now) * 1000);
    coordinator_msg m;
    if (s_recv(p, WT_MIN(wait_ms, 100), &m)) {
      warned = 0;
      switch (m.cmd) {
      case COORD_CMD_EPOCH:
        s_on_epoch(p, m.body);
        break;
      case COORD_CMD_START:
        s_on_start(p, m.body);
        break;
      case COORD_CMD_WELCOME: /* registered again (a restarted coordinator): its shard relay */
        if (!strcmp(coordinator_field_str(m.body, "storage"), "peers") &&
            peer_shards_serve(p->shards, p->cfg->host,
                              coordinator_field_str(m.body, "shard_relay")) != WT_OK)
          WT_WARN("peerd: cannot open the shard server: %s", wt_last_error());
        break;
      case COORD_CMD_REPLICATE:
        peer_shards_on_replicate(p->shards, m.body);
        break;
      case COORD_CMD_SHARD_ALLOW:
        peer_shards_on_allow(p->shards, cJSON_GetObjectItemCaseSensitive(m.body, "keys"));
        break;
      case COORD_CMD_ACK: /* with checkpoints on the peers: the step no store may prune */
        peer_shards_on_pin(p->shards, cJSON_GetObjectItemCaseSensitive(m.body, "pinned"));
        break;
      case COORD_CMD_ABORT:
        if (p->work && coordinator_field_int(m.body, "epoch", -1) == p->work_epoch) {
          if (!p->cfg->quiet)
            printf("peerd %d: epoch %d aborted: %s\n", p->peer_id, p->work_epoch,
                   coordinator_field_str(m.body, "reason"));
          p->work->abort = 1;
          if (!p->work->started) peer_work_destroy(&p->work);
        }
        break;
      case COORD_CMD_FINISH: { /* with an error: the coordinator stopped the run */
        char why[2048];
        snprintf(why, sizeof why, "%s", coordinator_field_str(m.body, "error"));
        coordinator_msg_clear(&m);
        if (why[0]) return wt_fail(WT_EIO, "the coordinator stopped the run: %s", why);
        if (!p->cfg->quiet) printf("peerd %d: the run is complete\n", p->peer_id);
        return WT_OK;
      }
      case COORD_CMD_REFUSED: /* dropped or forgotten by the coordinator: register again */
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m.body, "excluded"))) {
          peer_work_destroy(&p->work); /* excluded for good: registering again cannot help */
          wt_fail(WT_EINVAL, "the coordinator excluded this peer: %s",
                  coordinator_field_str(m.body, "reason"));
          coordinator_msg_clear(&m);
          return WT_EINVAL;
        }
        WT_WARN("peerd: the coordinator says: %s; registering again",
                coordinator_field_str(m.body, "reason"));
        peer_work_destroy(&p->work);
        s_register(p);
        p->report_shards = 1;
        break;
      default:
        break;
      }
      coordinator_msg_clear(&m);
    }
    s_work_done(p);
    now = wt_now_s();
    if (now >= p->next_beat) {
      s_heartbeat(p);
      s_report_checkpoint(p, 0);
      cJSON *held = peer_shards_report(p->shards, p->report_shards);
      if (held) s_send(p, COORD_CMD_SHARDS, held), p->report_shards = 0;
      cJSON_Delete(held);
      p->next_beat = now + p->heartbeat_s;
    }
    if (!warned && now - p->last_heard > p->liveness * p->heartbeat_s) {
      WT_WARN("peerd: no word from the coordinator for %.1f s; still trying (it may be "
              "restarting)",
              now - p->last_heard);
      warned = 1;
    }
  }
  /* leaving: stop the work (its comm says goodbye to the neighbours), then tell the coordinator */
  peer_work_destroy(&p->work);
  s_send(p, COORD_CMD_LEAVE, NULL);
  if (!p->cfg->quiet) printf("peerd %d: left the run\n", p->peer_id);
  return WT_OK;
}

/* The site's efficiency, measured on the probe model (site.h) and printed: on a threaded site
 * of --gpus ranks, or on the declared site's processes (its members must be serving). */
static int s_site_efficiency(s_peer *p, double *efficiency) {
  const peerd_config *cfg = p->cfg;
  if (!cfg->quiet) {
    printf("peerd: measuring the efficiency of the site of %d ranks...\n", p->gpus);
    fflush(stdout);
  }
  parallel_site_timing t;
  int rc;
  if (p->link) {
    const gpt_config probe = parallel_site_probe_config(p->gpus);
    parallel_site *site = parallel_site_new_linked(
        &probe, 1, 2, PARALLEL_SITE_PROBE_ROWS, PARALLEL_SITE_PROBE_SEQ, p->gpus, 1, NULL, p->link);
    rc = site ? parallel_site_measure(site, &probe, 1, 2, PARALLEL_SITE_PROBE_ROWS,
                                      PARALLEL_SITE_PROBE_SEQ, 5, &t)
              : wt_last_status();
    parallel_site_destroy(&site);
  } else {
    rc = parallel_site_probe(p->gpus, 5, &t);
  }
  if (rc != WT_OK)
    return wt_fail(rc,
                   "cannot measure the site's efficiency (%s); give --site-efficiency E instead",
                   wt_last_error());
  *efficiency = t.efficiency;
  if (!cfg->quiet)
    printf("peerd: site efficiency %.3f (measured: a stage's passes take %.4f s on one rank and "
           "%.4f s on the site of %d)\n",
           t.efficiency, t.one_s, t.site_s, p->gpus);
  return WT_OK;
}

/* --site FILE --site-rank R: the site's declaration, checked against this peerd's options and
 * key, and the link to its other processes. */
static int s_site(s_peer *p) {
  const peerd_config *cfg = p->cfg;
  parallel_site_decl *decl = wt_xcalloc(1, sizeof *decl);
  int rc = parallel_site_decl_load(cfg->site, decl);
  if (rc == WT_OK && cfg->site_rank >= decl->n)
    rc = wt_fail(WT_EINVAL, "--site-rank %d: the site file %s declares ranks 0 to %d",
                 cfg->site_rank, cfg->site, decl->n - 1);
  if (rc == WT_OK && cfg->gpus != 1 && cfg->gpus != decl->n)
    rc = wt_fail(WT_EINVAL,
                 "--gpus %d with --site %s: the site's GPUs are its %d processes (one each); drop "
                 "--gpus or give %d",
                 cfg->gpus, cfg->site, decl->n, decl->n);
  if (rc == WT_OK && !(p->link = parallel_site_link_new(decl, cfg->site_rank, p->pub, p->sec,
                                                        cfg->site_timeout_s)))
    rc = wt_fail(wt_last_status(), "--site %s: %s", cfg->site, wt_last_error());
  if (rc == WT_OK) p->gpus = decl->n;
  free(decl);
  return rc;
}

/* A site member (--site-rank >= 1): serves rank 0's sites until a signal; no coordinator. */
static int s_serve(s_peer *p, const volatile sig_atomic_t *stop) {
  if (!p->cfg->quiet)
    printf("peerd: site member rank %d of %d (%s); serving the site's rank 0\n", p->cfg->site_rank,
           p->gpus, p->cfg->site);
  fflush(stdout);
  int rc = parallel_site_serve(p->link, NULL, stop);
  if (!p->cfg->quiet) printf("peerd: site member rank %d stopped\n", p->cfg->site_rank);
  return rc;
}

int peerd_config_check(const peerd_config *cfg) {
  if (cfg->site_rank >= 0 && !cfg->site[0])
    return wt_fail(WT_EINVAL, "--site-rank %d without --site FILE: a rank is one of a site file's",
                   cfg->site_rank);
  if (cfg->site[0] && cfg->site_rank < 0)
    return wt_fail(WT_EINVAL, "--site %s needs --site-rank R: this process's entry in it",
                   cfg->site);
  if (cfg->site[0] && strncmp(cfg->device, "cpu", 4))
    return wt_fail(WT_ENOTSUP,
                   "--site with --device %s: a site's ranks run on host back ends only; use "
                   "--device cpu",
                   cfg->device);
  if (cfg->gpus > 1 && strncmp(cfg->device, "cpu", 4))
    return wt_fail(WT_ENOTSUP,
                   "--gpus %d with --device %s: a site runs its ranks as threads of one process "
                   "and the CUDA back end's state is process-wide; use --device cpu for a site",
                   cfg->gpus, cfg->device);
  if (strncmp(cfg->device, "cpu", 4) && (strncmp(cfg->device, "cuda:", 5) || !cfg->device[5]))
    return wt_fail(WT_EINVAL, "--device '%s': expected cpu or cuda:N", cfg->device);
  /* The coordinator's rule: a label it would refuse is refused here, before any work. */
  if (coordinator_label_check("region", cfg->region, COORD_REGION_MAX) != WT_OK ||
      coordinator_label_check("host", cfg->host, COORD_HOST_MAX) != WT_OK) {
    char why[1024];
    snprintf(why, sizeof why, "%s", wt_last_error());
    return wt_fail(WT_EINVAL, "--%s", why);
  }
  const int member = cfg->site[0] && cfg->site_rank > 0;
  if (!member && (!cfg->coordinator[0] || !cfg->coordinator_key[0]))
    return wt_fail(WT_EINVAL, "--coordinator tcp://HOST:PORT and --coordinator-key are required");
  return WT_OK;
}

/* --precision and --tf32 on the device's back end (the CPU's takes fp32 only). */
static int s_precision(const peerd_config *cfg) {
  kernels_precision prec;
  const kernels_ops *k = NULL;
  WT_CHECK(kernels_parse_precision(cfg->precision, cfg->tf32, &prec));
  WT_CHECK(kernels_for_device(cfg->device, &k));
  return kernels_set_precision(k, prec);
}

int peerd_run(const peerd_config *cfg, const volatile sig_atomic_t *stop) {
  WT_CHECK(peerd_config_check(cfg));
  if (strncmp(cfg->device, "cpu", 4)) {
    if (!kernels_backend("cuda"))
      return wt_fail(WT_ENOTSUP,
                     "--device %s: this peerd was built without CUDA (configure with "
                     "-DWANTRAIN_CUDA=ON on a machine with the CUDA toolkit), so it can only use "
                     "--device cpu",
                     cfg->device);
    WT_CHECK(parallel_tasklet_set_default_device(cfg->device)); /* every tasklet runs there */
  }
  WT_CHECK(s_precision(cfg));
  const int member = cfg->site[0] && cfg->site_rank > 0;
  s_peer p = {.cfg = cfg, .heartbeat_s = 1, .liveness = 5, .gpus = cfg->gpus};
  int rc = s_keys(&p);
  if (rc == WT_OK && cfg->site[0]) rc = s_site(&p);
  if (rc == WT_OK && member) {
    rc = s_serve(&p, stop);
    parallel_site_link_destroy(&p.link);
    return rc;
  }
  if (rc == WT_OK) rc = s_coordinator_key(&p);
  if (rc == WT_OK && cfg->json_log[0] && !(p.log = fopen(cfg->json_log, "a")))
    rc = wt_fail(WT_EIO, "cannot open --json-log %s: %s", cfg->json_log, strerror(errno));
  if (rc == WT_OK) {
    double measured = 0, memory = 0;
    rc = peer_device_measure(cfg->device, &measured, &memory);
    /* A site is one device of the GPUs' aggregate, which the placement plans with. */
    double efficiency = cfg->site_efficiency;
    if (rc == WT_OK && p.gpus > 1 && efficiency == 0) rc = s_site_efficiency(&p, &efficiency);
    if (rc == WT_OK)
      rc = parallel_site_device(p.gpus, efficiency, cfg->flops > 0 ? cfg->flops : measured, memory,
                                &p.flops, &p.memory);
  }
  if (rc == WT_OK) rc = s_connect(&p);
  if (rc == WT_OK) p.shards = peer_shards_new(cfg->data_dir, p.pub, p.sec, p.server);
  if (rc == WT_OK && !p.shards) rc = wt_last_status();
  p.report_shards = 1;
  if (rc == WT_OK) {
    if (!cfg->quiet)
      printf("peerd: device %s x %d, %.1f GFLOP/s (%s), %.1f GiB; registering with %s\n",
             cfg->device, p.gpus, p.flops / 1e9, cfg->flops > 0 ? "--flops" : "fp32 matmul",
             p.memory / (1 << 30), cfg->coordinator);
    s_register(&p);
    int w = s_await_welcome(&p, wt_now_s() + cfg->register_timeout_s, stop);
    s_monitor_stop(&p);
    if (w < 0)
      rc = WT_EINVAL;
    else if (w == 0 && !*stop)
      rc = wt_fail(WT_ETIMEOUT,
                   "no answer from the coordinator at %s within %.0f s; check the "
                   "address and that --coordinator-key is its public key",
                   cfg->coordinator, cfg->register_timeout_s);
  }
  /* the shard server's port opens only for a run that keeps its checkpoints here */
  if (rc == WT_OK && !*stop && p.peer_storage)
    rc = peer_shards_serve(p.shards, cfg->host, p.shard_relay);
  if (rc == WT_OK && !*stop) {
    if (!cfg->quiet) printf("peerd %d: admitted; waiting for an epoch\n", p.peer_id);
    fflush(stdout);
    p.last_heard = wt_now_s();
    rc = s_loop(&p, stop);
  }
  peer_work_destroy(&p.work);
  peer_shards_destroy(&p.shards);
  peer_held_clear(&p.held);
  cJSON_Delete(p.last_result);
  data_set_destroy(&p.data);
  if (p.log) fclose(p.log);
  s_monitor_stop(&p);
  if (p.sock) zmq_close(p.sock);
  if (p.reach) zmq_close(p.reach);
  if (p.ctx) zmq_ctx_term(p.ctx);
  parallel_site_link_destroy(&p.link);
  return rc;
}
