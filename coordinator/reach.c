/* reach — whether a peer accepts inbound connections, and the relay of the epochs that need
 * one. At registration a peer names a port it listens on at its data host ("reach_port"); the
 * coordinator connects back to host:port with a deadline (non-blocking, checked from the loop,
 * so a silent firewall costs the loop nothing). A peer that answers binds its side of every
 * link; one that does not gets outboxes at reachable peers and a relay inbox here
 * (parallel/transport/zmq_relay.h, docs/protocol.md "Reachability and relays"). */
#include "coordinator/coordinator_internal.h"

#include "common/common.h"
#include "parallel/transport/zmq_relay.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

const char *coord_reach_name(int reach) {
  switch (reach) {
  case COORD_REACH_TESTING:
    return "testing";
  case COORD_REACH_YES:
    return "yes";
  case COORD_REACH_NO:
    return "no";
  default:
    return "untested";
  }
}

static void s_settle(coordinator *c, coord_peer *p, int reach, const char *why) {
  if (p->reach == COORD_REACH_TESTING) close(p->reach_fd);
  p->reach = reach;
  snprintf(p->reach_why, sizeof p->reach_why, "%s", why);
  if (reach == COORD_REACH_YES)
    coord_event(c, "reach", "peer %d accepts inbound connections (%s:%d)", p->id, p->host,
                p->reach_port);
  else if (p->reach_port > 0)
    coord_event(c, "reach",
                "peer %d accepts no inbound connection (%s:%d: %s): its links start at it, "
                "through outboxes and a relay",
                p->id, p->host, p->reach_port, why);
  else
    coord_event(c, "reach", "peer %d accepts no inbound connection (%s): its links start at it",
                p->id, why);
}

void coord_reach_start(coordinator *c, coord_peer *p, int port) {
  if (p->reach == COORD_REACH_TESTING) close(p->reach_fd);
  p->reach = COORD_REACH_UNTESTED, p->reach_port = port, p->reach_why[0] = 0;
  if (port <= 0 || port > 65535) return; /* no test offered: taken as reachable, as it says */
  struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST}, *ai = NULL;
  char service[16];
  snprintf(service, sizeof service, "%d", port);
  if (getaddrinfo(p->host, service, &hints, &ai) != 0) {
    /* a name would need a blocking lookup here; the peers resolve it themselves */
    snprintf(p->reach_why, sizeof p->reach_why, "host '%.60s' is not a numeric address", p->host);
    return;
  }
  int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  int rc = fd < 0 ? -1 : connect(fd, ai->ai_addr, ai->ai_addrlen);
  int err = errno;
  freeaddrinfo(ai);
  p->reach = COORD_REACH_TESTING, p->reach_fd = fd;
  p->reach_deadline = wt_now_s() + COORD_REACH_TIMEOUT_S;
  if (fd < 0) {
    p->reach = COORD_REACH_NO;
    snprintf(p->reach_why, sizeof p->reach_why, "no socket: %s", strerror(err));
  } else if (rc == 0) {
    s_settle(c, p, COORD_REACH_YES, "");
  } else if (err != EINPROGRESS) {
    s_settle(c, p, COORD_REACH_NO, strerror(err));
  }
}

void coord_reach_declared_unreachable(coordinator *c, coord_peer *p) {
  if (p->reach == COORD_REACH_TESTING) close(p->reach_fd);
  p->reach = COORD_REACH_UNTESTED, p->reach_port = 0;
  s_settle(c, p, COORD_REACH_NO, "the peer says it accepts none (peerd --unreachable)");
}

/* One pending test: done (connected or refused), or past its deadline. */
static void s_check(coordinator *c, coord_peer *p, double now) {
  struct pollfd pf = {.fd = p->reach_fd, .events = POLLOUT};
  if (poll(&pf, 1, 0) > 0) {
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(p->reach_fd, SOL_SOCKET, SO_ERROR, &err, &len);
    s_settle(c, p, err ? COORD_REACH_NO : COORD_REACH_YES, err ? strerror(err) : "");
  } else if (now > p->reach_deadline) {
    char why[64];
    snprintf(why, sizeof why, "no answer within %.0f s", COORD_REACH_TIMEOUT_S);
    s_settle(c, p, COORD_REACH_NO, why);
  }
}

void coord_reach_tick(coordinator *c) {
  const double now = wt_now_s();
  for (int i = 0; i < c->n_peers; i++) {
    coord_peer *p = &c->peers[i];
    if (p->reach != COORD_REACH_TESTING) continue;
    if (p->status != PEER_LIVE) {
      close(p->reach_fd);
      p->reach = COORD_REACH_UNTESTED;
      continue;
    }
    s_check(c, p, now);
  }
}

int coord_reach_settled(const coord_peer *p) {
  return p->reach != COORD_REACH_TESTING;
}

int coord_reachable(const coord_peer *p) {
  return p->reach != COORD_REACH_NO;
}

/* ---- the relay ------------------------------------------------------------------------------ */

void coord_relay_host(const coordinator *c, char *host, size_t cap) {
  if (c->cfg.relay_host[0]) {
    snprintf(host, cap, "%.*s", (int)cap - 1, c->cfg.relay_host);
    return;
  }
  snprintf(host, cap, "%.*s", (int)cap - 1,
           strncmp(c->endpoint, "tcp://", 6) ? "127.0.0.1" : c->endpoint + 6);
  char *colon = strrchr(host, ':');
  if (colon) *colon = 0;
}

int coord_relay_open(coordinator *c, int n_inboxes) {
  coord_relay_close(c);
  char host[256];
  coord_relay_host(c, host, sizeof host);
  c->relay = parallel_zmq_relay_new(host, n_inboxes, c->cfg.relay_port_min, c->cfg.relay_port_max);
  if (!c->relay) return WT_EIO;
  return WT_OK;
}

void coord_relay_close(coordinator *c) {
  if (!c->relay) return;
  parallel_zmq_relay_stats st = parallel_zmq_relay_stats_get(c->relay);
  c->relay_messages += st.messages, c->relay_bytes += st.bytes;
  parallel_zmq_relay_destroy(&c->relay);
  coord_event(c, "relay",
              "epoch %d's relay forwarded %llu messages; the relays forwarded %llu bytes in all",
              c->epoch, (unsigned long long)st.messages, (unsigned long long)c->relay_bytes);
}

void coord_relay_stats(const coordinator *c, double *messages, double *bytes) {
  parallel_zmq_relay_stats st = {0, 0};
  if (c->relay) st = parallel_zmq_relay_stats_get(c->relay);
  *messages = (double)(c->relay_messages + st.messages);
  *bytes = (double)(c->relay_bytes + st.bytes);
}

/* ---- an epoch's routes ------------------------------------------------------------------------
 * Only epochs with unreachable members carry them: "reachable" per rank in EPOCH (and
 * "relay_inboxes" to the member that hosts the relay, with --relay peer); "outboxes" in BOUND
 * from a reachable member (an endpoint for each unreachable rank), and the relay member's
 * "relay_in" / "relay_out" (inbox k is the k-th unreachable rank's); in START to an unreachable
 * member, each reachable rank's outbox for it, the relay inbox of every unreachable rank and
 * its own inbox's outlet. */

static int s_unreachable_members(const coordinator *c) {
  int n = 0;
  for (int r = 0; r < c->n_members; r++) n += !coord_reachable(&c->peers[c->members[r]]);
  return n;
}

static int s_member_reachable(const coordinator *c, int r) {
  return coord_reachable(&c->peers[c->members[r]]);
}

void coord_epoch_outboxes_free(coordinator *c) {
  if (c->outboxes)
    for (int r = 0; r < c->n_outboxes; r++) cJSON_Delete(c->outboxes[r]);
  free(c->outboxes);
  cJSON_Delete(c->relay_eps);
  c->outboxes = NULL, c->n_outboxes = 0, c->relay_eps = NULL, c->relay_rank = -1;
}

/* The relay's endpoints by inbox as START hands them out: {"in": [...], "out": [...]}. */
static cJSON *s_relay_eps_json(const parallel_zmq_relay *r) {
  cJSON *o = cJSON_CreateObject();
  cJSON *in = cJSON_AddArrayToObject(o, "in"), *out = cJSON_AddArrayToObject(o, "out");
  for (int k = 0; parallel_zmq_relay_in(r, k); k++) {
    cJSON_AddItemToArray(in, cJSON_CreateString(parallel_zmq_relay_in(r, k)));
    cJSON_AddItemToArray(out, cJSON_CreateString(parallel_zmq_relay_out(r, k)));
  }
  return o;
}

/* --relay peer: the reachable member with the largest probed uplink (the relay's traffic
 * leaves through it twice), the first in rank order among equals; -1 when none is reachable. */
static int s_relay_member(const coordinator *c) {
  int best = -1;
  for (int r = 0; r < c->n_members; r++)
    if (s_member_reachable(c, r) &&
        (best < 0 || c->peers[c->members[r]].up_Bps > c->peers[c->members[best]].up_Bps))
      best = r;
  return best;
}

void coord_routes_open(coordinator *c) {
  coord_routes_close(c);
  const int n_unreachable = s_unreachable_members(c);
  if (n_unreachable == 0) return;
  c->outboxes = wt_xcalloc((size_t)c->n_members, sizeof *c->outboxes);
  c->n_outboxes = c->n_members;
  if (n_unreachable < 2) return;
  c->relay_inboxes = n_unreachable;
  if (!strcmp(c->cfg.relay, "peer") && (c->relay_rank = s_relay_member(c)) >= 0) {
    coord_event(c, "relay", "epoch %d: peer %d hosts relay inboxes for %d unreachable members",
                c->epoch, c->peers[c->members[c->relay_rank]].id, n_unreachable);
    return;
  }
  if (coord_relay_open(c, n_unreachable) != WT_OK) {
    coord_event(c, "relay", "epoch %d: no relay for its %d unreachable members: %s", c->epoch,
                n_unreachable, wt_last_error());
    return;
  }
  c->relay_eps = s_relay_eps_json(c->relay);
  coord_event(c, "relay", "epoch %d: relay inboxes for %d unreachable members", c->epoch,
              n_unreachable);
}

void coord_routes_close(coordinator *c) {
  coord_relay_close(c);
  coord_epoch_outboxes_free(c);
}

void coord_routes_epoch_json(const coordinator *c, int rank, cJSON *b) {
  if (!c->outboxes) return;
  cJSON *reach = cJSON_AddArrayToObject(b, "reachable");
  for (int r = 0; r < c->n_members; r++)
    cJSON_AddItemToArray(reach, cJSON_CreateNumber(s_member_reachable(c, r)));
  if (rank == c->relay_rank) cJSON_AddNumberToObject(b, "relay_inboxes", c->relay_inboxes);
}

/* Whether BOUND's outboxes fit member `rank`: n_members entries, a tcp:// endpoint exactly for
 * each unreachable rank when it is reachable, null elsewhere. */
static int s_outboxes_ok(const coordinator *c, int rank, const cJSON *ob) {
  if (!cJSON_IsArray(ob) || cJSON_GetArraySize(ob) != c->n_members) return 0;
  const int mine = s_member_reachable(c, rank);
  for (int r = 0; r < c->n_members; r++) {
    const cJSON *e = cJSON_GetArrayItem(ob, r);
    const int want = mine && r != rank && !s_member_reachable(c, r);
    const char *ep = cJSON_GetStringValue(e);
    if (want ? !ep || strncmp(ep, "tcp://", 6) || strlen(ep) >= 256 : !cJSON_IsNull(e)) return 0;
  }
  return 1;
}

/* Whether a relay member's BOUND lists relay_inboxes tcp:// endpoints in each of a and b. */
static int s_relay_eps_ok(const coordinator *c, const cJSON *a, const cJSON *b) {
  if (cJSON_GetArraySize(a) != c->relay_inboxes || cJSON_GetArraySize(b) != c->relay_inboxes)
    return 0;
  for (int k = 0; k < c->relay_inboxes; k++)
    for (int side = 0; side < 2; side++) {
      const char *ep = cJSON_GetStringValue(cJSON_GetArrayItem(side ? b : a, k));
      if (!ep || strncmp(ep, "tcp://", 6) || strlen(ep) >= 256) return 0;
    }
  return 1;
}

int coord_routes_on_bound(coordinator *c, int rank, const cJSON *body) {
  if (!c->outboxes) return WT_OK;
  const cJSON *ob = cJSON_GetObjectItemCaseSensitive(body, "outboxes");
  if (!s_outboxes_ok(c, rank, ob))
    return wt_fail(WT_EINVAL, "its BOUND lists no outbox (or a malformed one) for each "
                              "unreachable member");
  if (rank == c->relay_rank) {
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(body, "relay_in");
    const cJSON *out = cJSON_GetObjectItemCaseSensitive(body, "relay_out");
    if (!s_relay_eps_ok(c, in, out))
      return wt_fail(WT_EINVAL,
                     "it hosts the relay, but its BOUND does not list %d relay "
                     "inboxes (relay_in, relay_out)",
                     c->relay_inboxes);
    cJSON_Delete(c->relay_eps);
    c->relay_eps = cJSON_CreateObject();
    cJSON_AddItemToObject(c->relay_eps, "in", cJSON_Duplicate(in, 1));
    cJSON_AddItemToObject(c->relay_eps, "out", cJSON_Duplicate(out, 1));
  }
  cJSON_Delete(c->outboxes[rank]);
  c->outboxes[rank] = cJSON_Duplicate(ob, 1);
  return WT_OK;
}

void coord_routes_start_json(const coordinator *c, int rank, cJSON *b) {
  if (!c->outboxes || s_member_reachable(c, rank)) return;
  cJSON *ob = cJSON_AddArrayToObject(b, "outboxes");
  for (int r = 0; r < c->n_members; r++) {
    const char *ep =
        c->outboxes[r] ? cJSON_GetStringValue(cJSON_GetArrayItem(c->outboxes[r], rank)) : NULL;
    cJSON_AddItemToArray(ob, ep ? cJSON_CreateString(ep) : cJSON_CreateNull());
  }
  if (!c->relay_eps) return;
  const cJSON *in = cJSON_GetObjectItemCaseSensitive(c->relay_eps, "in");
  const cJSON *out = cJSON_GetObjectItemCaseSensitive(c->relay_eps, "out");
  cJSON *rin = cJSON_AddArrayToObject(b, "relay_in");
  for (int r = 0, k = 0; r < c->n_members; r++)
    cJSON_AddItemToArray(rin, s_member_reachable(c, r) ? cJSON_CreateNull()
                                                       : cJSON_CreateString(cJSON_GetStringValue(
                                                             cJSON_GetArrayItem(in, k++))));
  int k = 0;
  for (int r = 0; r < rank; r++) k += !s_member_reachable(c, r);
  cJSON_AddStringToObject(b, "relay_out", cJSON_GetStringValue(cJSON_GetArrayItem(out, k)));
}
