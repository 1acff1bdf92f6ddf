/* coord_swarm — many simulated peers from one process, for the coordinator's capacity bench and
 * tests: each peer is a DEALER socket with its own CURVE key pair that registers (a join token
 * or an --open coordinator) and then heartbeats at the interval the coordinator's WELCOME names,
 * as an idle peerd does. Peers never bind a data socket: an EPOCH is counted and left
 * unanswered, which makes a swarm peer a member that stays silent in every epoch it is given.
 *
 *   coord_swarm --endpoint EP --server-key FILE [--token T] [--peers N] [--duration S]
 *               [--rate R] [--flops F] [--source IP] [--json FILE]
 *
 * --peers N (1..5000 per process: each costs two descriptors) register at --rate per second
 * (default 1000), then all heartbeat until --duration seconds after the start (default 10).
 * Loopback only. Prints "coord_swarm: N admitted" once every peer has been answered, and at the
 * end one JSON line (also written to --json):
 *   {"peers", "admitted", "refused", "refused_full", "unanswered", "dropped", "heartbeats",
 *    "acks", "epochs", "ack_p50_ms", "ack_p99_ms", "register_s"}
 * "dropped" counts admitted peers the coordinator later calls unknown or dropped (a false loss
 * while they heartbeat); "refused_full" the registrations refused because it was full;
 * "unanswered" those still waiting at the end; "ack_*" the time from a heartbeat to the next
 * ACK of that peer, seen at the loop's 20 ms period (so up to 20 ms more than it took). Exits 0
 * when it ran, 2 on bad arguments, 1 when sockets cannot be made. */
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

typedef enum { S_NEW, S_WAITING, S_ADMITTED, S_REFUSED, S_DROPPED } s_state;

typedef struct {
  void *sock;
  char sid[COORD_SID_CHARS + 1];
  uint64_t seq;
  s_state state;
  double sent_at, next_beat, beat_sent;
} s_peer;

typedef struct {
  const char *endpoint, *token, *source, *json;
  char server[41];
  int n;
  double duration, rate, flops;
} s_args;

typedef struct {
  long admitted, refused, refused_full, unanswered, dropped, heartbeats, acks, epochs;
  double *ack_ms;
  long n_ack, cap_ack;
  double all_answered_s;
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

/* What an idle peerd sends. */
static void s_beat(s_peer *p, s_counts *k, double now) {
  cJSON *b = cJSON_CreateObject();
  cJSON_AddNumberToObject(b, "epoch", -1);
  cJSON_AddStringToObject(b, "state", "idle");
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

/* One message to peer p: WELCOME admits it (its first beat at a random point of the interval,
 * so the swarm's heartbeats spread out), ACK times its last beat, REFUSED refuses or drops it. */
static void s_on_message(s_peer *p, const coordinator_msg *m, s_counts *k, double now,
                         double *interval) {
  const char *reason = coordinator_field_str(m->body, "reason");
  switch (m->cmd) {
  case COORD_CMD_WELCOME:
    if (p->state != S_WAITING) break;
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
    k->epochs++; /* never bound: a silent member */
    break;
  default:
    break;
  }
}

static void s_drain(s_peer *p, s_counts *k, double now, double *interval) {
  for (;;) {
    zmq_msg_t msg;
    zmq_msg_init(&msg);
    if (zmq_msg_recv(&msg, p->sock, ZMQ_DONTWAIT) < 0) {
      zmq_msg_close(&msg);
      return;
    }
    coordinator_msg m;
    if (coordinator_msg_decode(zmq_msg_data(&msg), zmq_msg_size(&msg), &m) == 0) {
      s_on_message(p, &m, k, now, interval);
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
           "\"ack_p50_ms\":%.2f,\"ack_p99_ms\":%.2f,\"register_s\":%.2f}",
           a->n, k->admitted, k->refused, k->refused_full, k->unanswered, k->dropped, k->heartbeats,
           k->acks, k->epochs, s_quantile(k, 0.5), s_quantile(k, 0.99), k->all_answered_s);
  printf("%s\n", line);
  FILE *f = a->json ? fopen(a->json, "w") : NULL;
  if (f) {
    fprintf(f, "%s\n", line);
    fclose(f);
  }
}

static int s_parse(int argc, char **argv, s_args *a) {
  const char *keyfile = NULL;
  *a = (s_args){.n = 1, .duration = 10, .rate = 1000, .flops = 1e9};
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
    else
      return fprintf(stderr, "coord_swarm: unknown option %s\n", k), 2;
  }
  if (argc % 2 == 0 || !a->endpoint || !keyfile || strncmp(a->endpoint, "tcp://127.", 10) ||
      (a->source && strncmp(a->source, "127.", 4)) || a->n < 1 || a->n > S_MAX ||
      !(a->duration > 0 && a->duration <= 7200) || !(a->rate > 0) || !(a->flops > 0)) {
    fprintf(stderr, "usage: coord_swarm --endpoint tcp://127.x.x.x:PORT --server-key FILE "
                    "[--token T] [--peers 1..5000] [--duration S] [--rate R] [--flops F] "
                    "[--source 127.x.x.x] [--json FILE]\n");
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
  s_counts k = {0};
  double t0 = s_now(), end = t0 + a.duration, interval = 1;
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
      if (items[i].revents & ZMQ_POLLIN) s_drain(p, &k, now, &interval);
      if (p->state == S_ADMITTED && now >= p->next_beat) {
        s_beat(p, &k, now);
        p->next_beat += interval;
        if (p->next_beat < now) p->next_beat = now + interval;
      }
      answered += p->state != S_WAITING;
    }
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
  for (int i = 0; i < opened; i++) zmq_close(peers[i].sock);
  zmq_ctx_term(ctx);
  free(peers);
  free(items);
  free(k.ack_ms);
  return failed ? 1 : 0;
}
