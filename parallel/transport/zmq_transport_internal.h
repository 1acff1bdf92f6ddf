/* zmq_transport_internal — what the ZeroMQ transport's files share: its limits, the queued and
 * received message types, the per-link and per-transport state, small helpers, and the entry
 * points of its two threads (zmq_recv.c, zmq_send.c). zmq_transport.c holds the
 * ops and the construction; the thread files never call back into it. Internal to
 * parallel/transport. */
#ifndef WT_PARALLEL_ZMQ_TRANSPORT_INTERNAL_H
#define WT_PARALLEL_ZMQ_TRANSPORT_INTERNAL_H

#include "parallel/transport/zmq.h"

#include "common/common.h"
#include "parallel/transport/zmq_aead.h"
#include "parallel/transport/zmq_protocol.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <zmq.h>

#define S_PART_BYTES ((size_t)256 << 10)  /* pacing granularity of an emulated link */
#define S_ONE_FRAME_MAX ((size_t)1 << 20) /* unshaped payloads up to this go in one frame, */
                                          /* larger ones in chunks of this (zmq_send.c) */
#define S_POLL_MS 50                      /* how often the threads look at their stop flags */
#define S_GONE_GRACE_S 0.5    /* a dropped peer's last messages may still be in flight */
#define S_HWM 16              /* messages ZeroMQ may hold per pipe */
#define S_MAX_PARTS (1 << 18) /* payload frames of one message: 64 GiB in 256 KiB parts */
#define S_MAX_FRAME ((int64_t)S_MAX_PARTS * PARALLEL_ZMQ_TAG_BYTES + 4096) /* largest frame */
#define S_MAX_SESSIONS 64 /* a peer's session randoms remembered, to refuse old hellos */
#define S_MAX_STREAMS 8   /* TCP connections per link (parallel_zmq_config.streams) */
#define S_MAX_HELD 64     /* messages a link holds back while one before them is on the way */
#define S_HOLD_S 1.0      /* how long a link waits for a missing counter before skipping it */

/* One queued outgoing message; its buffer is shared by the ZeroMQ frames that carry it. */
typedef struct s_out {
  struct s_out *next;
  uint8_t header[PARALLEL_ZMQ_HEADER_BYTES];
  uint8_t *data;
  size_t bytes, sent; /* payload bytes, and how many of them are already handed to ZeroMQ */
  int header_sent;
  int hello; /* a hello: data holds its body, the trailer its MAC, nothing is sealed; it */
             /* goes out on every stream, hello_streams of them so far */
  int hello_streams;
  int nparts;       /* payload frames (fixed when the header goes out) */
  uint8_t *trailer; /* sealed links: one tag per part (max(nparts, 1)), sent last (chunks: */
                    /* each tag after its chunk) */
  /* Sealed at enqueue (parallel_zmq_enqueue, parallel_zmq_fill): the caller's thread seals its
   * bytes straight into data under counters taken then; filling while it does (the sender
   * thread waits for it), sealed_done once it has (under l->seal_mu). */
  int presealed, filling, sealed_done;
  double start;     /* wall time the emulated serialisation starts (0 when unshaped) */
  double sec_per_byte; /* its emulated serialisation rate: the path's, or a slower uplink's */
  atomic_int refs;  /* this struct + one per frame in flight */
} s_out;

/* One received message waiting in a mailbox: its payload frames, kept as ZeroMQ messages. */
typedef struct s_in {
  struct s_in *next;
  int tag;
  size_t bytes;
  int nparts, cap_parts; /* cap_parts: room in parts while chunks are added (zmq_recv.c) */
  zmq_msg_t *parts;
  double ready_at; /* wall time the emulated downlink has delivered it (0: at once) */
} s_in;

/* A received, authenticated message a link holds until the counters before it have come
 * (several streams: zmq_recv.c): its header and payload frames. */
typedef struct {
  parallel_zmq_header h;
  zmq_msg_t *parts;
  int n;
  uint64_t bytes;
  double since; /* wall time it was held */
} s_held;

typedef struct {
  char *endpoint; /* where push connects, or what it is (an outbox, a relay) for messages */
  char *outbox;   /* this rank reachable, the peer not: the endpoint push is bound to */
  void *push;     /* sender thread: stream 0 (its monitor says whether the peer is there) */
  void
      *extra_push[S_MAX_STREAMS - 1]; /* sender thread: streams 1.. (parallel_zmq_config.streams) */
  int nstreams;                       /* 1, or t->streams on a link to a reachable peer */
  void *blocked_on;                   /* the socket whose full pipe stopped the head message */
  void *monitor; /* receiver thread: events of push */
  s_out *head, *tail;
  size_t queued_bytes;
  double link_free;             /* wall time the emulated link finishes serialising its queue */
  double alpha_w, sec_per_byte; /* emulated latency and 1/β, in wall seconds */
  int crosses_access;           /* emulated: its messages cross both ends' access links */
  s_in *ihead, *itail;
  size_t in_bytes;
  int connected, gone, said_bye, dropped_after_bye, blocked;
  double gone_at;
  const char *gone_why;
  parallel_zmq_link_stats st;
  /* Sealed links (zmq_aead.h). Under t->mu: the peer's session random as last accepted, its
   * caps and a generation that changes with it, and whether a hello must be sent. */
  uint8_t base_rx[32], base_tx[32]; /* kx keys: peer → self, self → peer */
  uint8_t peer_random[PARALLEL_ZMQ_RANDOM_BYTES], peer_caps;
  unsigned peer_gen; /* 0 until the peer's first hello */
  int hello_due;
  /* The receiver thread's own: the key of peer → self and its next acceptable counter, and the
   * session randoms seen from this peer (an old one is a replayed hello). */
  parallel_zmq_aead rx;
  uint64_t rx_next;
  /* The receiver thread's own: the chunked message being put together (its parts so far, the
   * header of its first chunk). */
  s_in *partial;
  parallel_zmq_header partial_h;
  /* The receiver thread's own (several streams): messages ahead of rx_next, by arrival. */
  s_held *held; /* S_MAX_HELD entries */
  int nheld;
  uint8_t (*seen)[PARALLEL_ZMQ_RANDOM_BYTES];
  int nseen;
  /* The key of self → peer (its cipher context used under seal_mu: by callers sealing at
   * enqueue and by the sender thread), and under t->mu the generation it was made for, the next
   * counter and how many queued messages have no counters yet (until they reach the head). */
  parallel_zmq_aead tx;
  pthread_mutex_t seal_mu;
  unsigned tx_gen;
  uint64_t tx_next;
  int uncounted;
} s_link;

struct parallel_zmq_transport {
  int rank, size;
  uint64_t run_id;
  uint32_t epoch;
  double timeout_s;
  size_t max_queue;
  int insecure, shaped, streams;
  int *reachable; /* zmq.h "Reachability": reachable[r], NULL = all */
  /* emulated access links (wall seconds per byte, 0 = unlimited) and when each is next free:
   * the uplink under mu by the senders, the downlink under mu by the receiver thread */
  double up_sec_per_byte, down_sec_per_byte, up_free, down_free;
  char *bound;
  uint8_t random[PARALLEL_ZMQ_RANDOM_BYTES]; /* this process's session random */
  uint8_t caps;                              /* parallel_zmq_aead_caps() */
  void *zctx, *pull;
  s_link *links;
  pthread_mutex_t mu;
  pthread_cond_t cv_in, cv_out, cv_send;
  pthread_t th_recv, th_send;
  int started_recv, started_send;
  atomic_int stop_recv, stop_send;
  int waiters;
  parallel_zmq_msg_context msg;
  uint64_t refused;
};

/* ---- small helpers --------------------------------------------------------------------------- */

static inline struct timespec s_abs(double wall_s) {
  /* wt_now_s is CLOCK_MONOTONIC, and so are the conds (see s_cond_init). */
  struct timespec ts;
  ts.tv_sec = (time_t)wall_s;
  ts.tv_nsec = (long)((wall_s - (double)ts.tv_sec) * 1e9);
  if (ts.tv_nsec >= 1000000000L) {
    ts.tv_sec++;
    ts.tv_nsec -= 1000000000L;
  }
  return ts;
}

static inline void s_cond_init(pthread_cond_t *cv) {
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(cv, &attr);
  pthread_condattr_destroy(&attr);
}

static inline void s_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, double wall_s) {
  struct timespec ts = s_abs(wall_s);
  pthread_cond_timedwait(cv, mu, &ts);
}

static inline void s_out_unref(s_out *m) {
  if (atomic_fetch_sub(&m->refs, 1) == 1) {
    free(m->data);
    free(m->trailer);
    free(m);
  }
}

static inline void s_free_frame(void *data, void *hint) {
  (void)data;
  s_out_unref(hint);
}

static inline void s_in_free(s_in *m) {
  for (int i = 0; i < m->nparts; i++) zmq_msg_close(&m->parts[i]);
  free(m->parts);
  free(m);
}

/* "tag 5" or "reserved tag 0x40000011" — collective tags read better in hex. */
static inline const char *s_tag_name(int tag, char *buf, size_t cap) {
  if (tag >= PARALLEL_TAG_RESERVED)
    snprintf(buf, cap, "library tag 0x%x", (unsigned)tag);
  else
    snprintf(buf, cap, "tag %d", tag);
  return buf;
}

/* Stream i of link l: its PUSH socket. */
static inline void *s_stream(const s_link *l, int i) {
  return i == 0 ? l->push : l->extra_push[i - 1];
}

/* ---- the threads and the send path's queue ------------------------------------------------- */

/* The receiver (zmq_recv.c): validates and files incoming messages, watches the PUSH sockets'
 * monitors, until t->stop_recv. */
void *parallel_zmq_recv_main(void *t);
/* The sender (zmq_send.c): drains the links' queues, pacing when shaped, until t->stop_send. */
void *parallel_zmq_send_main(void *t);

/* Appends m to l's queue with its emulated start (zmq_send.c). seal_now: its caller fills it
 * next (parallel_zmq_fill), and it is counted now when the link's key and every message ahead
 * are ready, so that fill seals it straight from the caller's bytes. Caller holds t->mu. */
void parallel_zmq_enqueue(parallel_zmq_transport *t, s_link *l, s_out *m, double ready,
                          int seal_now);
/* A message for the queue; `owned` (a wt_xmalloc'ed block of `bytes`) becomes its buffer, else
 * (NULL owned) a buffer of `bytes` is allocated for the caller to fill. Never NULL. */
s_out *parallel_zmq_out_new(const parallel_zmq_transport *t, const parallel_zmq_msg_context *ctx,
                            int kind, int tag, void *owned, size_t bytes);
/* Fills m, just queued on l by parallel_zmq_enqueue (which took its counters when it could
 * seal at once), from in[0, nin) (their lengths sum to m->bytes; none when m owns its bytes):
 * sealed straight into m's buffer when m->presealed, else copied. Then lets the sender thread
 * have it. Caller does not hold t->mu. */
void parallel_zmq_fill(parallel_zmq_transport *t, s_link *l, s_out *m, const parallel_zmq_span *in,
                       int nin);
/* A hello to l's peer: this process's session random, the peer's as last accepted (zeros
 * before) and the caps, MAC'd under l's base tx key. Caller holds t->mu. Never NULL. */
s_out *parallel_zmq_hello_new(const parallel_zmq_transport *t, const s_link *l);

#endif
