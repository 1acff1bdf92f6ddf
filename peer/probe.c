/* probe — a probe epoch's measurements of the network model (netsim/netsim.h, assign.h): the
 * one-way latency and the bandwidth of both directions of every pair, then, for every region
 * label that two or more peers give, whether they share one uplink and one downlink.
 *
 * One probe at a time. Two pairs measured at once can sit behind one uplink (the peers of a home,
 * a region's NAT) and would each read half of it, so the pairs run one after another over the
 * whole group; after each step its leader sends NEXT to every other peer, which is what starts
 * the next step. Every peer waits for every NEXT, so no wait is longer than one step.
 *
 * Sharing is then measured on purpose, not suffered by chance: in a contention round all peers of
 * one region send at once, each to a partner outside it (partners from different regions where
 * there are enough, so that no partner's own access link is what limits the round), and in a
 * second round partners send to them at once. A shared uplink gives them about its capacity
 * together; separate uplinks give each about what it measured alone. The coordinator reads that
 * (coordinator/epoch.c, s_probe_estimate).
 *
 * A step's bandwidth is the fastest-of-S_BULKS difference between round trips of b and b/2
 * bytes, which cancels the latency and a message's fixed costs; b starts at the epoch's
 * probe_bytes and grows on fast links until that difference is long enough to time. */
#include "peer/peer_internal.h"

#include "common/common.h"
#include "coordinator/protocol.h" /* defines: coordinator_field_*, reading the epoch */

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define S_TAG_PING 9001
#define S_TAG_PONG 9002
#define S_TAG_BULK 9003
#define S_TAG_ACK 9004
#define S_TAG_NEXT 9005  /* a step is over: the next one starts */
#define S_TAG_DONE 9006  /* a contention round's receiver got all it was sent */
#define S_TAG_ALPHA 9007 /* the pinger tells the other end the latency it measured */
#define S_TAG_GROW 9008  /* the next probe size, or a contention stream's message count */
#define S_PINGS 3
#define S_BULKS 2             /* pairs of bulk messages per direction and size */
#define S_MIN_DIFF_S 0.04     /* the two sizes' round trips differ by at least this */
#define S_BULK_MAX (4u << 20) /* the largest probe message */
#define S_STREAM_S 0.4        /* a contention stream lasts this long on its link alone */
#define S_STREAM_MAX 4096     /* messages of one contention stream */

typedef struct {
  peer_work *w;
  parallel_comm *c;
  size_t bytes; /* the larger bulk message */
  unsigned char *bulk;
  double ts; /* wall seconds per emulated second */
} s_probe;

/* Sends the bulk messages to `to` and returns its bandwidth, bytes per emulated second. The
 * sizes grow (up to S_BULK_MAX) until the difference of the two sizes' round trips is at least
 * S_MIN_DIFF_S: on a fast link a small message's time is mostly the scheduler's. After each
 * size a GROW message tells the receiver the next size, 0 when done. */
static int s_send_bulk(s_probe *p, int to, double *bw) {
  unsigned char ack[8];
  size_t got, size = p->bytes;
  for (;;) {
    double best[2] = {1e30, 1e30};
    for (int r = 0; r < S_BULKS; r++)
      for (int k = 0; k < 2; k++) {
        double t0 = wt_now_s();
        WT_CHECK(parallel_comm_send(p->c, to, S_TAG_BULK, p->bulk, size / (2 - k)));
        WT_CHECK(parallel_comm_recv(p->c, to, S_TAG_ACK, ack, sizeof ack, &got));
        best[k] = fmin(best[k], wt_now_s() - t0);
      }
    double transfer = best[1] - best[0];
    /* a link faster than the largest message can time (a site's LAN, loopback): the whole
     * message's rate, fixed costs included, a lower bound */
    if (size >= S_BULK_MAX && transfer < S_MIN_DIFF_S) transfer = fmax(transfer, best[1] / 2);
    *bw = (double)(size - size / 2) / (fmax(transfer, 1e-7) / p->ts);
    uint64_t next = 0;
    if (transfer < S_MIN_DIFF_S && size < S_BULK_MAX)
      next = (uint64_t)fmin(S_BULK_MAX, size * fmin(16, fmax(2, 1.5 * S_MIN_DIFF_S / transfer)));
    WT_CHECK(parallel_comm_send(p->c, to, S_TAG_GROW, &next, sizeof next));
    if (!next) return WT_OK;
    size = (size_t)next;
  }
}

static int s_recv_bulk(s_probe *p, int from) {
  unsigned char ack[8] = {0};
  size_t got;
  for (;;) {
    for (int k = 0; k < 2 * S_BULKS; k++) {
      WT_CHECK(parallel_comm_recv(p->c, from, S_TAG_BULK, p->bulk, S_BULK_MAX, &got));
      WT_CHECK(parallel_comm_send(p->c, from, S_TAG_ACK, ack, sizeof ack));
    }
    uint64_t next = 0;
    WT_CHECK(parallel_comm_recv(p->c, from, S_TAG_GROW, &next, sizeof next, &got));
    if (got != sizeof next || next == 0) return WT_OK;
    if (next > S_BULK_MAX)
      return wt_fail(WT_EINVAL, "rank %d asked for a probe of %llu bytes", from,
                     (unsigned long long)next);
  }
}

/* A contention round's transfer: messages of b bytes back to back and one ACK; the
 * rate is their bytes over the time less one round trip (2α, measured in the pairs). Round
 * trips per message would leave the link idle while the others' transfers fill it, and the
 * two-size difference of s_send_bulk does not hold when the two sizes see different sharing. */
static int s_send_stream(s_probe *p, int to, double *bw) {
  unsigned char ack[8];
  size_t got;
  /* as many messages as the link alone carries in S_STREAM_S: the senders of a round start a
   * scheduler's wake-up apart, and that must be small beside the round */
  double alone = p->w->probe_bw[to] > 0 ? p->w->probe_bw[to] * p->ts : 0;
  uint64_t count = (uint64_t)fmin(S_STREAM_MAX, fmax(4, ceil(alone * S_STREAM_S / p->bytes)));
  WT_CHECK(parallel_comm_send(p->c, to, S_TAG_GROW, &count, sizeof count));
  double t0 = wt_now_s();
  for (uint64_t k = 0; k < count; k++)
    WT_CHECK(parallel_comm_send(p->c, to, S_TAG_BULK, p->bulk, p->bytes));
  WT_CHECK(parallel_comm_recv(p->c, to, S_TAG_ACK, ack, sizeof ack, &got));
  double rtt = p->w->probe_lat[to] > 0 ? 2 * p->w->probe_lat[to] * p->ts : 0;
  double t = fmax(wt_now_s() - t0 - rtt, 1e-7);
  *bw = (double)count * p->bytes / (t / p->ts);
  return WT_OK;
}

static int s_recv_stream(s_probe *p, int from) {
  unsigned char ack[8] = {0};
  size_t got;
  uint64_t count = 0;
  WT_CHECK(parallel_comm_recv(p->c, from, S_TAG_GROW, &count, sizeof count, &got));
  if (got != sizeof count || count > S_STREAM_MAX)
    return wt_fail(WT_EINVAL, "rank %d announced an impossible contention stream", from);
  for (uint64_t k = 0; k < count; k++)
    WT_CHECK(parallel_comm_recv(p->c, from, S_TAG_BULK, p->bulk, p->bytes, &got));
  return parallel_comm_send(p->c, from, S_TAG_ACK, ack, sizeof ack);
}

static int s_cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* The pair (lo, hi), lo < hi: the fastest of S_PINGS round trips halved, then lo → hi, then
 * hi → lo. Each direction is measured by its sender. */
static int s_pair(s_probe *p, int lo, int hi) {
  peer_work *w = p->w;
  unsigned char small[64] = {0};
  size_t got;
  if (w->rank == lo) {
    double rtt[S_PINGS];
    for (int k = 0; k < S_PINGS; k++) {
      double t0 = wt_now_s();
      WT_CHECK(parallel_comm_send(p->c, hi, S_TAG_PING, small, sizeof small));
      WT_CHECK(parallel_comm_recv(p->c, hi, S_TAG_PONG, small, sizeof small, &got));
      rtt[k] = wt_now_s() - t0;
    }
    qsort(rtt, S_PINGS, sizeof(double), s_cmp);
    double alpha = rtt[0] / 2 / p->ts;
    w->probe_lat[hi] = alpha;
    WT_CHECK(parallel_comm_send(p->c, hi, S_TAG_ALPHA, &alpha, sizeof alpha));
    WT_CHECK(s_send_bulk(p, hi, &w->probe_bw[hi]));
    WT_CHECK(s_recv_bulk(p, hi));
  } else {
    for (int k = 0; k < S_PINGS; k++) {
      WT_CHECK(parallel_comm_recv(p->c, lo, S_TAG_PING, small, sizeof small, &got));
      WT_CHECK(parallel_comm_send(p->c, lo, S_TAG_PONG, small, sizeof small));
    }
    double alpha = -1;
    WT_CHECK(parallel_comm_recv(p->c, lo, S_TAG_ALPHA, &alpha, sizeof alpha, &got));
    if (got == sizeof alpha) w->probe_lat[lo] = alpha;
    WT_CHECK(s_recv_bulk(p, lo));
    WT_CHECK(s_send_bulk(p, lo, &w->probe_bw[lo]));
  }
  return WT_OK;
}

/* The end of a step: its leader tells everyone else, and everyone else waits to hear it. */
static int s_next(s_probe *p, int leader) {
  peer_work *w = p->w;
  unsigned char token[8] = {0};
  size_t got;
  if (w->rank != leader) return parallel_comm_recv(p->c, leader, S_TAG_NEXT, token, 8, &got);
  for (int r = 0; r < w->size; r++)
    if (r != leader) WT_CHECK(parallel_comm_send(p->c, r, S_TAG_NEXT, token, sizeof token));
  return WT_OK;
}

static const char *s_region(const peer_work *w, int rank) {
  const cJSON *regions = cJSON_GetObjectItemCaseSensitive(w->body, "regions");
  const char *r = cJSON_GetStringValue(cJSON_GetArrayItem(regions, rank));
  return r ? r : "";
}

/* The members of rank g's region (in rank order) and the partners outside it, ordered so that
 * consecutive partners come from different regions: the first peer of each other region, then
 * the second of each, and so on. */
static void s_round_of(const peer_work *w, int g, int *members, int *n_members, int *partners,
                       int *n_partners) {
  const int n = w->size;
  *n_members = *n_partners = 0;
  int nth[64] = {0}; /* each rank's position within its own region */
  for (int r = 0; r < n; r++) {
    for (int q = 0; q < r; q++) nth[r] += !strcmp(s_region(w, q), s_region(w, r));
    if (!strcmp(s_region(w, r), s_region(w, g))) members[(*n_members)++] = r;
  }
  for (int level = 0; level < n; level++)
    for (int r = 0; r < n; r++)
      if (nth[r] == level && strcmp(s_region(w, r), s_region(w, g))) partners[(*n_partners)++] = r;
}

/* A contention round of the region whose first rank is g: its members i send to partner i all at
 * once (up), or the partners send to them (!up). Each sender records what it measured in
 * up_round / down_round; the receivers report to g, which ends the round. */
static int s_round(s_probe *p, int g, int up) {
  peer_work *w = p->w;
  int members[64], partners[64], k, n_partners;
  s_round_of(w, g, members, &k, partners, &n_partners);
  k = WT_MIN(k, n_partners);
  unsigned char token[8] = {0};
  size_t got;
  for (int i = 0; i < k; i++) {
    int from = up ? members[i] : partners[i], to = up ? partners[i] : members[i];
    if (w->rank == from)
      WT_CHECK(s_send_stream(p, to, up ? &w->probe_up_round[to] : &w->probe_down_round[to]));
    if (w->rank == to) {
      WT_CHECK(s_recv_stream(p, from));
      if (to != g) WT_CHECK(parallel_comm_send(p->c, g, S_TAG_DONE, token, sizeof token));
    }
  }
  if (w->rank == g)
    for (int i = 0; i < k; i++) {
      int to = up ? partners[i] : members[i];
      if (to != g) WT_CHECK(parallel_comm_recv(p->c, to, S_TAG_DONE, token, 8, &got));
    }
  return s_next(p, g);
}

int peer_probe_run(peer_work *w, parallel_comm *c) {
  const int n = w->size;
  size_t bytes = (size_t)fmin(fmax(coordinator_field_num(w->body, "probe_bytes", 0), 0), 1e9);
  if (bytes < 1024 || bytes > S_BULK_MAX) bytes = 512 * 1024;
  s_probe p = {.w = w,
               .c = c,
               .bytes = bytes,
               .bulk = wt_xcalloc(WT_MAX(bytes, S_BULK_MAX), 1),
               .ts = coordinator_field_num(w->body, "time_scale", 1)};
  double **rows[] = {&w->probe_lat, &w->probe_bw, &w->probe_up_round, &w->probe_down_round};
  for (int k = 0; k < 4; k++) {
    *rows[k] = wt_xmalloc(sizeof(double) * n);
    for (int i = 0; i < n; i++) (*rows[k])[i] = -1;
  }
  int rc = WT_OK;
  /* the pairs the coordinator asks for (those it has not measured both ways), else all */
  const cJSON *pairs = cJSON_GetObjectItemCaseSensitive(w->body, "probe_pairs"), *it;
  if (cJSON_IsArray(pairs)) {
    cJSON_ArrayForEach(it, pairs) {
      int lo = (int)cJSON_GetNumberValue(cJSON_GetArrayItem(it, 0));
      int hi = (int)cJSON_GetNumberValue(cJSON_GetArrayItem(it, 1));
      if (!(lo >= 0 && lo < hi && hi < n)) {
        rc = wt_fail(WT_EINVAL, "the coordinator sent an impossible probe pair");
        break;
      }
      if (w->rank == lo || w->rank == hi) rc = s_pair(&p, lo, hi);
      if (rc == WT_OK) rc = s_next(&p, lo);
      if (rc != WT_OK) break;
    }
  } else {
    for (int lo = 0; lo < n && rc == WT_OK; lo++)
      for (int hi = lo + 1; hi < n && rc == WT_OK; hi++) {
        if (w->rank == lo || w->rank == hi) rc = s_pair(&p, lo, hi);
        if (rc == WT_OK) rc = s_next(&p, lo);
      }
  }
  for (int g = 0; g < n && rc == WT_OK; g++) {
    int first = 1, size = 0; /* one pair of rounds per region of two or more, at its first rank */
    for (int r = 0; r < n; r++)
      if (!strcmp(s_region(w, r), s_region(w, g))) first &= r >= g, size++;
    if (!first || size < 2 || size == n) continue;
    rc = s_round(&p, g, 1);
    if (rc == WT_OK) rc = s_round(&p, g, 0);
  }
  free(p.bulk);
  return rc;
}
