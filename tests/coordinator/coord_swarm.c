/* coord_swarm — many simulated peers from one process, for the coordinator's capacity bench and
 * tests: each peer is a DEALER socket with its own CURVE key pair that registers (a join token
 * or an --open coordinator) and then heartbeats at the interval the coordinator's WELCOME names,
 * as an idle peerd does. By default peers never bind a data socket: an EPOCH is counted and
 * left unanswered, which makes a swarm peer a member that stays silent in every epoch it is
 * given. With --answer 1 they take part as peerd does on the control plane (docs/coordinator.md):
 * BOUND to every EPOCH, "working" heartbeats after START, a probe epoch's RESULT with the
 * latency and bandwidth rows of the pairs it was given (peer/probe.c's rows), taken from a
 * simulated network and reported after --pair-s seconds per pair of the epoch, and a train epoch
 * worked until the end (or reported failed once aborted). The simulated network: peer i of this
 * process is in region "r<i mod --regions>", its uplink is 10·(1 + i mod 5) Mbit/s and its
 * downlink four times that; one-way latency 1 ms within a region, 10 ms + 15 ms per region
 * apart between them; a link's bandwidth is min(sender's uplink, receiver's downlink).
 * --stall I makes peer I's data links fail in the train epochs it is given: it keeps
 * heartbeating "working", and after --stall-after seconds the other members report the epoch
 * failed with the ZeroMQ transport's timeout naming it ("no message from rank R"), as peerd's
 * neighbours of a stuck peer do; peer I itself never reports.
 *
 *   coord_swarm --endpoint EP --server-key FILE [--token T] [--peers N] [--duration S]
 *               [--rate R] [--flops F] [--source IP] [--json FILE] [--answer 0|1]
 *               [--regions K] [--pair-s T] [--stall I] [--stall-after S] [--train-then S]
 *
 * --train-then S ends the run S seconds after the first train epoch started (0: at --duration).
 * --peers N (1..5000 per process: each costs two descriptors) register at --rate per second
 * (default 1000), then all heartbeat until --duration seconds after the start (default 10).
 * Loopback only. Prints "coord_swarm: N admitted" once every peer has been answered, and at the
 * end one JSON line (also written to --json):
 *   {"peers", "admitted", "refused", "refused_full", "unanswered", "dropped", "heartbeats",
 *    "acks", "epochs", "ack_p50_ms", "ack_p99_ms", "register_s", "probe_epochs",
 *    "probe_results", "train_epochs", "first_train_s", "first_train_size"}
 * "dropped" counts admitted peers the coordinator later calls unknown or dropped (a false loss
 * while they heartbeat); "refused_full" the registrations refused because it was full;
 * "unanswered" those still waiting at the end; "ack_*" the time from a heartbeat to the next
 * ACK of that peer, seen at the loop's 20 ms period (so up to 20 ms more than it took);
 * "first_train_s" the time from the start to the first START of a train epoch (-1: none) and
 * "first_train_size" that epoch's members. Exits 0
 * when it ran, 2 on bad arguments, 1 when sockets cannot be made. */
#include "common/common.h" /* defines: WT_ETIMEOUT, WT_EIO, WT_MIN/MAX */
#include "coordinator/protocol.h"
#include "tests/coordinator/coord_client.h"

#include <cjson/cJSON.h>

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <zmq.h>

#define S_MAX 5000
#define S_LOOP_MS 20 /* the loop's period: polling N sockets costs O(N), so not more often */
#define S_REGIONS(a) ((a)->regions > 0 ? (a)->regions : 1)

typedef enum { S_NEW, S_WAITING, S_ADMITTED, S_REFUSED, S_DROPPED } s_state;

/* The epoch a peer was last given (--answer): its rank, the pairs it probes, and when it
 * reports. */
typedef struct {
  int epoch, rank, size, bound, started, train;
  int *member; /* this process's peer index of each rank, -1: not one of ours */
  int (*pairs)[2], n_pairs;
  double report_at; /* when its RESULT goes out; 0: none due */
} s_epoch;

typedef struct {
  void *sock;
  char sid[COORD_SID_CHARS + 1];
  uint64_t seq;
  s_state state;
  double sent_at, next_beat, beat_sent;
  int index, id; /* in this process; the coordinator's peer id (WELCOME) */
  s_epoch ep;
} s_peer;

typedef struct {
  const char *endpoint, *token, *source, *json;
  char server[41];
  int n, answer, regions, stall;
  double duration, rate, flops, pair_s, stall_after, train_then;
} s_args;

typedef struct {
  long admitted, refused, refused_full, unanswered, dropped, heartbeats, acks, epochs;
  long probe_epochs, probe_results, train_epochs;
  double *ack_ms;
  long n_ack, cap_ack;
  double all_answered_s, t0, first_train_s;
  int first_train_size, last_probe_epoch, last_train_epoch;
  int *by_id, cap_id; /* this process's peer index by coordinator id, -1: none */
} s_counts;

static double s_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int s_send(s_peer *p, coordinator_cmd cmd, cJSON *body) {
  int rc = coord_client_send(p->sock, p->sid, ++p->seq, cmd, body);
  cJSON_Delete(body);
  return rc;
}

static int s_open(s_peer *p, void *ctx, const s_args *a) {
  char pub[41], sec[41], target[600];
  zmq_curve_keypair(pub, sec);
  if (a->source)
    snprintf(target, sizeof target, "tcp://%s:0;%s", a->source, a->endpoint + 6);
  else
    snprintf(target, sizeof target, "%s", a->endpoint);
  if (!(p->sock = coord_client_socket(ctx, a->server, target, pub, sec))) return -1;
  coordinator_sid_new(p->sid);
  cJSON *b = cJSON_CreateObject();
  cJSON_AddStringToObject(b, "token", a->token ? a->token : "");
  cJSON_AddStringToObject(b, "host", "127.0.0.1");
  if (a->regions > 0) {
    char region[32];
    snprintf(region, sizeof region, "r%d", p->index % a->regions);
    cJSON_AddStringToObject(b, "region", region);
  }
  cJSON *d = cJSON_AddObjectToObject(b, "device");
  cJSON_AddStringToObject(d, "kind", "cpu");
  cJSON_AddNumberToObject(d, "flops", a->flops);
  cJSON_AddNumberToObject(d, "memory", 1e9);
  cJSON_AddNumberToObject(d, "gpus", 1);
  s_send(p, COORD_CMD_REGISTER, b);
  p->state = S_WAITING;
  p->sent_at = s_now();
  return 0;
}

/* What peerd sends: idle, or working in the epoch it was started in. */
static void s_beat(s_peer *p, s_counts *k, double now) {
  cJSON *b = cJSON_CreateObject();
  cJSON_AddNumberToObject(b, "epoch", p->ep.started ? p->ep.epoch : -1);
  cJSON_AddStringToObject(b, "state", p->ep.started ? "working" : "idle");
  cJSON_AddNumberToObject(b, "step", 0);
  cJSON_AddNumberToObject(b, "tokens_s", 0);
  cJSON_AddNumberToObject(b, "bytes_sent", 0);
  cJSON_AddNumberToObject(b, "bytes_recv", 0);
  if (s_send(p, COORD_CMD_HEARTBEAT, b) >= 0) k->heartbeats++;
  if (p->beat_sent == 0) p->beat_sent = now;
}

static void s_ack_time(s_counts *k, double ms) {
  if (k->n_ack == k->cap_ack) {
    k->cap_ack = k->cap_ack ? 2 * k->cap_ack : 4096;
    k->ack_ms = realloc(k->ack_ms, sizeof(double) * (size_t)k->cap_ack);
  }
  k->ack_ms[k->n_ack++] = ms;
}

/* ---- the simulated network (--answer) ---- */

static double s_uplink(int i) {
  return 10e6 / 8 * (1 + i % 5);
}

static double s_latency(const s_args *a, int i, int j) {
  int ri = i % S_REGIONS(a), rj = j % S_REGIONS(a);
  return ri == rj ? 0.001 : 0.010 + 0.015 * abs(ri - rj);
}

static double s_bandwidth(int i, int j) {
  return fmin(s_uplink(i), 4 * s_uplink(j));
}

static void s_epoch_clear(s_epoch *e) {
  free(e->member);
  free(e->pairs);
  memset(e, 0, sizeof *e);
  e->epoch = -1;
}

static int s_local(const s_counts *k, int id) {
  return id >= 0 && id < k->cap_id ? k->by_id[id] : -1;
}

/* EPOCH: remember the rank, the members and the pairs; answer BOUND. */
static void s_on_epoch(s_peer *p, const coordinator_msg *m, s_counts *k) {
  s_epoch *e = &p->ep;
  s_epoch_clear(e);
  e->epoch = coordinator_field_int(m->body, "epoch", -1);
  e->rank = coordinator_field_int(m->body, "rank", -1);
  e->size = coordinator_field_int(m->body, "size", 0);
  e->train = !strcmp(coordinator_field_str(m->body, "kind"), "train");
  const cJSON *ids = cJSON_GetObjectItemCaseSensitive(m->body, "peer_ids");
  if (e->size < 1 || e->size > 4096 || cJSON_GetArraySize(ids) != e->size) return;
  e->member = calloc((size_t)e->size, sizeof(int));
  for (int r = 0; r < e->size; r++)
    e->member[r] = s_local(k, (int)cJSON_GetNumberValue(cJSON_GetArrayItem(ids, r)));
  const cJSON *pairs = cJSON_GetObjectItemCaseSensitive(m->body, "probe_pairs"), *it;
  e->pairs = calloc((size_t)cJSON_GetArraySize(pairs) + 1, sizeof *e->pairs);
  cJSON_ArrayForEach(it, pairs) {
    e->pairs[e->n_pairs][0] = (int)cJSON_GetNumberValue(cJSON_GetArrayItem(it, 0));
    e->pairs[e->n_pairs][1] = (int)cJSON_GetNumberValue(cJSON_GetArrayItem(it, 1));
    e->n_pairs++;
  }
  cJSON *b = cJSON_CreateObject();
  char endpoint[64];
  snprintf(endpoint, sizeof endpoint, "tcp://127.0.0.1:%d", 20000 + p->index);
  cJSON_AddNumberToObject(b, "epoch", e->epoch);
  cJSON_AddStringToObject(b, "endpoint", endpoint);
  s_send(p, COORD_CMD_BOUND, b);
  e->bound = 1;
}

/* START: work. A probe reports after its pairs' time; a train epoch works until the end, or,
 * with a stalled member (--stall), reports that member's timeout after --stall-after. */
static void s_on_start(s_peer *p, const coordinator_msg *m, const s_args *a, s_counts *k,
                       double now) {
  s_epoch *e = &p->ep;
  if (!e->bound || coordinator_field_int(m->body, "epoch", -1) != e->epoch) return;
  e->started = 1;
  if (!e->train) {
    e->report_at = now + a->pair_s * e->n_pairs;
    if (k->last_probe_epoch != e->epoch) k->probe_epochs++, k->last_probe_epoch = e->epoch;
    return;
  }
  if (k->last_train_epoch != e->epoch) {
    k->train_epochs++, k->last_train_epoch = e->epoch;
    if (k->first_train_s < 0) k->first_train_s = now - k->t0, k->first_train_size = e->size;
  }
  for (int r = 0; r < e->size && a->stall >= 0; r++)
    if (e->member[r] == a->stall && p->index != a->stall) e->report_at = now + a->stall_after;
}

/* The probe's rows: latency and bandwidth from this rank to each, -1 where not measured. */
static void s_probe_result(s_peer *p, const s_args *a, s_counts *k) {
  s_epoch *e = &p->ep;
  cJSON *b = cJSON_CreateObject();
  cJSON_AddNumberToObject(b, "epoch", e->epoch);
  cJSON_AddTrueToObject(b, "ok");
  cJSON_AddNumberToObject(b, "steps", 0);
  double *lat = malloc(sizeof(double) * (size_t)e->size),
         *bw = malloc(sizeof(double) * (size_t)e->size);
  for (int j = 0; j < e->size; j++) lat[j] = bw[j] = -1;
  for (int q = 0; q < e->n_pairs; q++) {
    int lo = e->pairs[q][0], hi = e->pairs[q][1], other = lo == e->rank ? hi : lo;
    if ((lo != e->rank && hi != e->rank) || other < 0 || other >= e->size) continue;
    int me = p->index, them = e->member[other] >= 0 ? e->member[other] : 0;
    lat[other] = s_latency(a, me, them);
    bw[other] = s_bandwidth(me, them);
  }
  cJSON_AddItemToObject(b, "latency_s", cJSON_CreateDoubleArray(lat, e->size));
  cJSON_AddItemToObject(b, "bandwidth_Bps", cJSON_CreateDoubleArray(bw, e->size));
  free(lat);
  free(bw);
  s_send(p, COORD_CMD_RESULT, b);
  k->probe_results++;
}

/* A failed train epoch, as the ZeroMQ transport words a neighbour that stopped answering. */
static void s_failure(s_peer *p, const char *why, int code) {
  cJSON *b = cJSON_CreateObject();
  cJSON_AddNumberToObject(b, "epoch", p->ep.epoch);
  cJSON_AddFalseToObject(b, "ok");
  cJSON_AddStringToObject(b, "error", why);
  cJSON_AddNumberToObject(b, "code", code);
  cJSON_AddNumberToObject(b, "steps", 0);
  s_send(p, COORD_CMD_RESULT, b);
}

static void s_report_due(s_peer *p, const s_args *a, s_counts *k, double now) {
  s_epoch *e = &p->ep;
  if (!e->report_at || now < e->report_at) return;
  e->report_at = 0;
  if (!e->train) {
    s_probe_result(p, a, k);
  } else {
    int stalled = 0;
    while (stalled < e->size && e->member[stalled] != a->stall) stalled++;
    char why[256];
    snprintf(why, sizeof why,
             "zmq: rank %d: no message from rank %d (tcp://127.0.0.1:%d), activations, step 1 "
             "(expected up to 4096 bytes) within %.1f s; the peer is stuck, slow or dead",
             e->rank, stalled, 20000 + a->stall, a->stall_after);
    s_failure(p, why, WT_ETIMEOUT);
  }
  e->started = 0;
}

/* One message to peer p: WELCOME admits it (its first beat at a random point of the interval,
 * so the swarm's heartbeats spread out), ACK times its last beat, REFUSED refuses or drops it. */
static void s_on_message(s_peer *p, const coordinator_msg *m, const s_args *a, s_counts *k,
                         double now, double *interval) {
  const char *reason = coordinator_field_str(m->body, "reason");
  switch (m->cmd) {
  case COORD_CMD_WELCOME:
    if (p->state != S_WAITING) break;
    p->id = coordinator_field_int(m->body, "peer_id", -1);
    if (p->id >= 0 && p->id < 10000000) {
      if (p->id >= k->cap_id) {
        int cap = WT_MAX(2 * k->cap_id, p->id + 1024);
        k->by_id = realloc(k->by_id, sizeof(int) * (size_t)cap);
        for (int i = k->cap_id; i < cap; i++) k->by_id[i] = -1;
        k->cap_id = cap;
      }
      k->by_id[p->id] = p->index;
    }
    *interval = fmin(fmax(coordinator_field_num(m->body, "heartbeat_s", 1), 0.05), 60);
    p->state = S_ADMITTED;
    p->next_beat = now + *interval * (rand() / (RAND_MAX + 1.0));
    k->admitted++;
    break;
  case COORD_CMD_ACK:
    k->acks++;
    if (p->beat_sent > 0) s_ack_time(k, (now - p->beat_sent) * 1e3);
    p->beat_sent = 0;
    break;
  case COORD_CMD_REFUSED:
    if (p->state == S_ADMITTED) {
      p->state = S_DROPPED, k->dropped++;
      fprintf(stderr, "coord_swarm: an admitted peer was dropped: %s\n", reason);
    } else if (p->state == S_WAITING) {
      p->state = S_REFUSED, k->refused++;
      k->refused_full += strstr(reason, "is full") != NULL;
      if (k->refused <= 3) fprintf(stderr, "coord_swarm: refused: %s\n", reason);
    }
    break;
  case COORD_CMD_EPOCH:
    k->epochs++; /* without --answer never bound: a silent member */
    if (a->answer) s_on_epoch(p, m, k);
    break;
  case COORD_CMD_START:
    if (a->answer) s_on_start(p, m, a, k, now);
    break;
  case COORD_CMD_ABORT: /* as peerd: a started epoch reports its end, an unstarted one nothing */
    if (a->answer && p->ep.started && coordinator_field_int(m->body, "epoch", -1) == p->ep.epoch &&
        p->index != a->stall) {
      p->ep.report_at = 0, p->ep.started = 0;
      s_failure(p, "the coordinator aborted the epoch", WT_EIO);
    }
    break;
  default:
    break;
  }
}

static void s_drain(s_peer *p, const s_args *a, s_counts *k, double now, double *interval) {
  for (;;) {
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    if (zmq_msg_recv(&msg, p->sock, ZMQ_DONTWAIT) < 0) {
      zmq_msg_close(&msg);
      return;
    }
    coordinator_msg m;
    if (coordinator_msg_decode(zmq_msg_data(&msg), zmq_msg_size(&msg), &m) == 0) {
      s_on_message(p, &m, a, k, now, interval);
      coordinator_msg_clear(&m);
    }
    zmq_msg_close(&msg);
  }
}

static int s_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double s_quantile(s_counts *k, double q) {
  if (!k->n_ack) return -1;
  return k->ack_ms[(long)fmin(k->n_ack - 1, floor(q * k->n_ack))];
}

static void s_report(const s_args *a, s_counts *k) {
  qsort(k->ack_ms, (size_t)k->n_ack, sizeof(double), s_cmp_double);
  char line[1024];
  snprintf(line, sizeof line,
           "{\"peers\":%d,\"admitted\":%ld,\"refused\":%ld,\"refused_full\":%ld,"
           "\"unanswered\":%ld,\"dropped\":%ld,\"heartbeats\":%ld,\"acks\":%ld,\"epochs\":%ld,"
           "\"ack_p50_ms\":%.2f,\"ack_p99_ms\":%.2f,\"register_s\":%.2f,"
           "\"probe_epochs\":%ld,\"probe_results\":%ld,\"train_epochs\":%ld,"
           "\"first_train_s\":%.2f,\"first_train_size\":%d}",
           a->n, k->admitted, k->refused, k->refused_full, k->unanswered, k->dropped, k->heartbeats,
           k->acks, k->epochs, s_quantile(k, 0.5), s_quantile(k, 0.99), k->all_answered_s,
           k->probe_epochs, k->probe_results, k->train_epochs, k->first_train_s,
           k->first_train_size);
  printf("%s\n", line);
  FILE *f = a->json ? fopen(a->json, "w") : NULL;
  if (f) {
    fprintf(f, "%s\n", line);
    fclose(f);
  }
}

static int s_parse(int argc, char **argv, s_args *a) {
  const char *keyfile = NULL;
  *a = (s_args){.n = 1,
                .duration = 10,
                .rate = 1000,
                .flops = 1e9,
                .pair_s = 0.02,
                .stall = -1,
                .stall_after = 2};
  for (int i = 1; i + 1 < argc; i += 2) {
    const char *k = argv[i], *v = argv[i + 1];
    if (!strcmp(k, "--endpoint"))
      a->endpoint = v;
    else if (!strcmp(k, "--server-key"))
      keyfile = v;
    else if (!strcmp(k, "--token"))
      a->token = v;
    else if (!strcmp(k, "--source"))
      a->source = v;
    else if (!strcmp(k, "--json"))
      a->json = v;
    else if (!strcmp(k, "--peers"))
      a->n = atoi(v);
    else if (!strcmp(k, "--duration"))
      a->duration = atof(v);
    else if (!strcmp(k, "--rate"))
      a->rate = atof(v);
    else if (!strcmp(k, "--flops"))
      a->flops = atof(v);
    else if (!strcmp(k, "--answer"))
      a->answer = atoi(v);
    else if (!strcmp(k, "--regions"))
      a->regions = atoi(v);
    else if (!strcmp(k, "--pair-s"))
      a->pair_s = atof(v);
    else if (!strcmp(k, "--stall"))
      a->stall = atoi(v);
    else if (!strcmp(k, "--stall-after"))
      a->stall_after = atof(v);
    else if (!strcmp(k, "--train-then"))
      a->train_then = atof(v);
    else
      return fprintf(stderr, "coord_swarm: unknown option %s\n", k), 2;
  }
  if (argc % 2 == 0 || !a->endpoint || !keyfile || strncmp(a->endpoint, "tcp://127.", 10) ||
      (a->source && strncmp(a->source, "127.", 4)) || a->n < 1 || a->n > S_MAX ||
      !(a->duration > 0 && a->duration <= 7200) || !(a->rate > 0) || !(a->flops > 0) ||
      a->regions < 0 || a->regions > 64 || !(a->pair_s >= 0 && a->pair_s <= 10) || a->stall < -1 ||
      a->stall >= a->n || !(a->stall_after > 0) || !(a->train_then >= 0)) {
    fprintf(stderr, "usage: coord_swarm --endpoint tcp://127.x.x.x:PORT --server-key FILE "
                    "[--token T] [--peers 1..5000] [--duration S] [--rate R] [--flops F] "
                    "[--source 127.x.x.x] [--json FILE] [--answer 0|1] [--regions 0..64] "
                    "[--pair-s T] [--stall I] [--stall-after S] [--train-then S]\n");
    return 2;
  }
  FILE *f = fopen(keyfile, "r");
  char line[128] = "";
  if (!f || !fgets(line, sizeof line, f) || strlen(line) < 40) {
    fprintf(stderr, "coord_swarm: cannot read the server key from %s\n", keyfile);
    if (f) fclose(f);
    return 2;
  }
  fclose(f);
  memcpy(a->server, line, 40);
  a->server[40] = 0;
  return 0;
}

static void s_raise_fd_limit(int n) {
  struct rlimit rl;
  rlim_t want = (rlim_t)(2 * n + 64);
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < want) {
    rl.rlim_cur = rl.rlim_max < want ? rl.rlim_max : want;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

int main(int argc, char **argv) {
  s_args a;
  int rc = s_parse(argc, argv, &a);
  if (rc) return rc;
  s_raise_fd_limit(a.n);
  srand((unsigned)time(NULL));
  void *ctx = zmq_ctx_new();
  zmq_ctx_set(ctx, ZMQ_MAX_SOCKETS, a.n + 16);
  s_peer *peers = calloc((size_t)a.n, sizeof *peers);
  zmq_pollitem_t *items = calloc((size_t)a.n, sizeof *items);
  s_counts k = {.first_train_s = -1, .last_probe_epoch = -1, .last_train_epoch = -1};
  double t0 = s_now(), end = t0 + a.duration, interval = 1;
  k.t0 = t0;
  for (int i = 0; i < a.n; i++) peers[i].index = i, peers[i].ep.epoch = -1;
  int opened = 0, announced = 0, failed = 0;
  while (s_now() < end) {
    double now = s_now();
    for (; opened < a.n && opened < (now - t0) * a.rate + 1; opened++) {
      if (s_open(&peers[opened], ctx, &a) != 0) {
        fprintf(stderr, "coord_swarm: cannot open socket %d: %s\n", opened, zmq_strerror(errno));
        failed = 1;
        end = now;
        break;
      }
      items[opened] = (zmq_pollitem_t){peers[opened].sock, 0, ZMQ_POLLIN, 0};
    }
    double woke = s_now();
    zmq_poll(items, opened, S_LOOP_MS);
    now = s_now();
    if (now - woke < S_LOOP_MS / 1e3) { /* woken early: wait out the period, then look */
      struct timespec nap = {0, (long)((S_LOOP_MS / 1e3 - (now - woke)) * 1e9)};
      nanosleep(&nap, NULL);
      zmq_poll(items, opened, 0);
      now = s_now();
    }
    long answered = 0;
    for (int i = 0; i < opened; i++) {
      s_peer *p = &peers[i];
      if (items[i].revents & ZMQ_POLLIN) s_drain(p, &a, &k, now, &interval);
      if (a.answer) s_report_due(p, &a, &k, now);
      if (p->state == S_ADMITTED && now >= p->next_beat) {
        s_beat(p, &k, now);
        p->next_beat += interval;
        if (p->next_beat < now) p->next_beat = now + interval;
      }
      answered += p->state != S_WAITING;
    }
    if (a.train_then > 0 && k.first_train_s >= 0 && now - t0 > k.first_train_s + a.train_then)
      end = now;
    if (!announced && answered == a.n) {
      k.all_answered_s = now - t0;
      printf("coord_swarm: %ld admitted, %ld refused (%.2f s)\n", k.admitted, k.refused,
             k.all_answered_s);
      fflush(stdout);
      announced = 1;
    }
  }
  for (int i = 0; i < opened; i++) k.unanswered += peers[i].state == S_WAITING;
  s_report(&a, &k);
  for (int i = 0; i < opened; i++) zmq_close(peers[i].sock), s_epoch_clear(&peers[i].ep);
  free(k.by_id);
  zmq_ctx_term(ctx);
  free(peers);
  free(items);
  free(k.ack_ms);
  return failed ? 1 : 0;
}
