/* coord_flood — a hostile client for the coordinator's connection limits: opens N CURVE
 * connections, each with a fresh key pair and from one loopback source address, optionally
 * sends each a registration with a bad token, holds them for a while and closes them. Bounded
 * in count (at most 5000 connections) and time (at most 60 s). Loopback only.
 *   coord_flood ENDPOINT SERVER_KEY_FILE SOURCE_IP COUNT HOLD_S [register]
 * Prints "coord_flood: N connections open" once they are all made, and exits 0; 2 on bad
 * arguments, 1 when sockets cannot be made. */
#include "coordinator/protocol.h"
#include "tests/coordinator/coord_client.h"

#include <cjson/cJSON.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <zmq.h>

#define S_MAX 5000

int main(int argc, char **argv) {
  if (argc < 6) {
    fprintf(stderr, "usage: coord_flood ENDPOINT SERVER_KEY_FILE SOURCE_IP COUNT HOLD_S "
                    "[register]\n");
    return 2;
  }
  const char *endpoint = argv[1], *source = argv[3];
  int count = atoi(argv[4]), reg = argc > 6 && !strcmp(argv[6], "register");
  double hold = atof(argv[5]);
  if (count < 1 || count > S_MAX || !(hold >= 0 && hold <= 60) ||
      strncmp(endpoint, "tcp://127.", 10) || strncmp(source, "127.", 4)) {
    fprintf(stderr, "coord_flood: loopback only, 1..%d connections, 0..60 s\n", S_MAX);
    return 2;
  }
  char server[64] = "";
  FILE *f = fopen(argv[2], "r");
  if (!f || !fgets(server, sizeof server, f) || strlen(server) < 40) {
    fprintf(stderr, "coord_flood: cannot read the server key from %s\n", argv[2]);
    return 2;
  }
  fclose(f);
  /* every socket costs this process a TCP fd and a mailbox fd */
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)(3 * count + 64)) {
    rl.rlim_cur = rl.rlim_max < (rlim_t)(3 * count + 64) ? rl.rlim_max : (rlim_t)(3 * count + 64);
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  void *ctx = zmq_ctx_new();
  zmq_ctx_set(ctx, ZMQ_MAX_SOCKETS, count + 16);
  void **socks = calloc((size_t)count, sizeof *socks);
  char target[512];
  snprintf(target, sizeof target, "tcp://%s:0;%s", source, endpoint + 6);
  int made = 0;
  for (int i = 0; i < count; i++) {
    char pub[41], sec[41];
    zmq_curve_keypair(pub, sec);
    void *s = coord_client_socket(ctx, server, target, pub, sec);
    if (!s) break;
    if (reg) { /* a registration with a token this coordinator never issued */
      char sid[COORD_SID_CHARS + 1];
      coordinator_sid_new(sid);
      cJSON *b = cJSON_Parse("{\"token\":\"wt1.bad\",\"device\":{\"kind\":\"cpu\","
                             "\"flops\":1e9,\"memory\":1e9}}");
      coord_client_send(s, sid, 1, COORD_CMD_REGISTER, b);
      cJSON_Delete(b);
    }
    socks[made++] = s;
  }
  printf("coord_flood: %d connections open\n", made);
  fflush(stdout);
  struct timespec nap = {(time_t)hold, (long)((hold - (time_t)hold) * 1e9)};
  nanosleep(&nap, NULL);
  for (int i = 0; i < made; i++) zmq_close(socks[i]);
  free(socks);
  zmq_ctx_term(ctx);
  return made == count ? 0 : 1;
}
