/* comm — a communicator: this process's rank in a group of `size` ranks, and point-to-point
 * byte messages between ranks, over a pluggable transport.
 *
 * A transport is one `parallel_transport_ops` table (send / recv of byte buffers to a peer rank
 * with an integer tag). The collectives (parallel/collectives/collectives.h) are written ONLY
 * against this table, so the same ring all-reduce runs over in-process threads (inproc.c) and
 * over ZeroMQ (zmq.h); NCCL groups have their own collectives table (parallel/datacenter/group.h).
 *
 * Semantics every transport must give:
 *  - send(peer, tag, buf, n) queues or delivers a copy of n bytes; it may block while the peer's
 *    queue is full (bounded memory) but must make progress once the peer receives.
 *  - recv(peer, tag, buf, cap, &got) returns the OLDEST message from `peer` carrying `tag`
 *    (messages from one peer with one tag arrive in send order). A message longer than `cap` is
 *    consumed and refused with WT_EMISMATCH; a peer that has gone away gives WT_EIO; a wait
 *    longer than the transport's timeout gives WT_ETIMEOUT. None of these is a crash.
 *
 * The communicator counts the bytes it sends (for the compression experiments); barrier is
 * built from send/recv, so a transport needs only the two primitives.
 *
 * In-process transport: parallel_inproc_group_new(size) makes `size` communicators that talk
 * through mutex-protected mailboxes, one per ordered (src, dst) pair, each holding at most
 * `max_queue_bytes` (one larger message is always admitted so that progress never deadlocks).
 * parallel_inproc_run() runs a function on one thread per rank — the test harness.
 *
 *   parallel_inproc_group *g = parallel_inproc_group_new(4);
 *   int rcs[4];
 *   parallel_inproc_run(g, my_fn, my_arg, rcs);   // my_fn(parallel_comm *c, void *arg)
 *   parallel_inproc_group_destroy(&g);
 */
#ifndef WT_PARALLEL_COMM_H
#define WT_PARALLEL_COMM_H

#include <stddef.h>
#include <stdint.h>

/* A transport: a table of functions over an opaque per-rank context. */
typedef struct {
  const char *name; /* "inproc", "zmq", ... */
  /* Sends a copy of `bytes` bytes to `peer`. Returns WT_OK, WT_EIO (peer gone), WT_ETIMEOUT. */
  int (*send)(void *ctx, int peer, int tag, const void *buf, size_t bytes);
  /* Receives the next message from `peer` with `tag` into buf (capacity `cap`); *got receives
   * its length. Returns WT_OK, WT_EMISMATCH (longer than cap; consumed), WT_EIO, WT_ETIMEOUT. */
  int (*recv)(void *ctx, int peer, int tag, void *buf, size_t cap, size_t *got);
  /* Frees ctx (may be NULL when the context is owned elsewhere, e.g. by an in-process group). */
  void (*destroy)(void *ctx);
  /* Optional (NULL means 0): 1 when the transport itself guarantees that a delivered message is
   * exactly the bytes its authenticated sender sent (the AEAD tags of a sealed ZeroMQ link do), so
   * collectives can leave their payload checksum out. */
  int (*integrity)(void *ctx);
  /* Optional zero-copy paths (NULL: parallel_comm_send_owned / _recv_view fall back to send and
   * recv with a copy). send_owned sends `bytes` bytes at buf and takes buf, a wt_xmalloc'ed
   * block: the transport frees it with free() once the bytes are out, and on failure too.
   * recv_view receives as recv does, but may hand out the message in the transport's own memory:
   * *data points to the *got bytes and *handle is non-NULL until release(ctx, handle) gives
   * them back; it may instead copy into buf (capacity cap; WT_EMISMATCH beyond) and set
   * *handle = NULL. */
  int (*send_owned)(void *ctx, int peer, int tag, void *buf, size_t bytes);
  int (*recv_view)(void *ctx, int peer, int tag, void *buf, size_t cap, const void **data,
                   size_t *got, void **handle);
  void (*release)(void *ctx, void *handle);
  /* Optional (NULL: parallel_comm_send_gather joins the two pieces in one buffer and sends
   * that): sends head[0, head_bytes) followed by body[0, body_bytes) as one message, copied as
   * send does, so a transport that must pass the bytes through once anyway (a sealed link's
   * cipher) reads them where they are. */
  int (*send_gather)(void *ctx, int peer, int tag, const void *head, size_t head_bytes,
                     const void *body, size_t body_bytes);
} parallel_transport_ops;

typedef struct parallel_comm parallel_comm;

/* Wraps a transport context as a communicator. `ops` must outlive it; `ctx` is passed to the
 * ops and freed with ops->destroy (if set) by parallel_comm_destroy. Returns NULL with
 * wt_last_error() set if rank/size are out of range. */
parallel_comm *parallel_comm_new(const parallel_transport_ops *ops, void *ctx, int rank, int size);
void parallel_comm_destroy(parallel_comm **self_p);

int parallel_comm_rank(const parallel_comm *c);
int parallel_comm_size(const parallel_comm *c);
const parallel_transport_ops *parallel_comm_ops(const parallel_comm *c);
void *parallel_comm_ctx(const parallel_comm *c);

/* 1 when the transport guarantees message integrity (parallel_transport_ops.integrity), else 0. */
int parallel_comm_integrity(const parallel_comm *c);

/* Point-to-point, through the transport. A peer outside [0, size) or equal to rank is a
 * programming error (assert). Counts bytes sent. Errors as in parallel_transport_ops. */
int parallel_comm_send(parallel_comm *c, int peer, int tag, const void *buf, size_t bytes);
int parallel_comm_recv(parallel_comm *c, int peer, int tag, void *buf, size_t cap, size_t *got);

/* The same without a copy where the transport allows (parallel_transport_ops.send_owned,
 * recv_view). send_owned takes buf (from wt_xmalloc; freed by the transport or here, whatever
 * the outcome). recv_view sets *data to the message — in the transport's memory (release it
 * with parallel_comm_release(c, *handle)) or copied into buf[0..cap) (then *handle is NULL) —
 * and *got to its length. parallel_comm_release(c, NULL) does nothing. */
int parallel_comm_send_owned(parallel_comm *c, int peer, int tag, void *buf, size_t bytes);
int parallel_comm_recv_view(parallel_comm *c, int peer, int tag, void *buf, size_t cap,
                            const void **data, size_t *got, void **handle);
void parallel_comm_release(parallel_comm *c, void *handle);

/* Sends head followed by body as one message of head_bytes + body_bytes (copied; the caller may
 * change both at once), through the transport's send_gather where it has one. */
int parallel_comm_send_gather(parallel_comm *c, int peer, int tag, const void *head,
                              size_t head_bytes, const void *body, size_t body_bytes);

/* Waits until every rank has entered the barrier (dissemination algorithm, ceil(log2 size)
 * rounds of 1-byte messages). Returns WT_OK or the transport's error. */
int parallel_comm_barrier(parallel_comm *c);

/* Bytes and messages this communicator has sent since creation or the last reset. */
uint64_t parallel_comm_bytes_sent(const parallel_comm *c);
uint64_t parallel_comm_msgs_sent(const parallel_comm *c);
void parallel_comm_reset_counters(parallel_comm *c);

/* A per-communicator sequence number that every rank advances in the same order (one per
 * collective call); collectives stamp it on their messages to detect a peer that is running a
 * different collective. Returns the value before the increment. */
uint32_t parallel_comm_next_seq(parallel_comm *c);

/* Restarts the sequence at 0: every rank of a group must do it together, when the group is
 * (re)formed — e.g. parallel_inproc_run does it before each run, so a rank that gave up early in
 * one run does not leave the next run's ranks out of step. */
void parallel_comm_reset_seq(parallel_comm *c);

/* Tags at or above this value are reserved for the library (barrier, collectives). */
#define PARALLEL_TAG_RESERVED 0x40000000

/* ---- sub-communicators ---------------------------------------------------------------------- */

/* A communicator over a subset of a parent's ranks: rank i of the result is parent rank
 * ranks[i] (n distinct entries, which must include the parent's own rank), so a stage's
 * data-parallel group or a replica's pipeline can run the collectives of collectives.h among its
 * members only. Messages travel through the parent's transport with the tags mapped into a space
 * of their own per `id` (1..63): user tags t < 2^23 of the sub-communicator become parent tags
 * id·2^24 + t, its reserved tags (collectives, barrier) id·2^24 + 2^23 + (t − RESERVED). So
 * communicators with different ids never see each other's messages, as long as the parent's own
 * user tags stay below 2^24 and every member of one sub-communicator passes the same id and the
 * same ranks in the same order. Sub-communicators do not nest (the parent must not be one).
 * Bytes count on both the sub-communicator and the parent. The parent must outlive the result;
 * destroy it with parallel_comm_destroy (the parent is untouched). Returns NULL with
 * wt_last_error() set when ranks are out of range, repeated, or miss the parent's rank, or id
 * is out of range. */
parallel_comm *parallel_comm_split(parallel_comm *parent, const int *ranks, int n, int id);

#define PARALLEL_SPLIT_MAX_ID 63

/* ---- in-process transport ------------------------------------------------------------------ */

typedef struct parallel_inproc_group parallel_inproc_group;

/* Creates `size` (1..1024) communicators that exchange messages in memory. Each ordered
 * (src, dst) mailbox holds at most max_queue_bytes (default 64 MiB; see setters). Returns NULL
 * with wt_last_error() set on a bad size. */
parallel_inproc_group *parallel_inproc_group_new(int size);
void parallel_inproc_group_destroy(parallel_inproc_group **self_p);

/* Tuning for tests: a receive or a blocked send waits at most timeout_s (default 120 s) before
 * returning WT_ETIMEOUT; each mailbox holds at most max_queue_bytes. */
void parallel_inproc_group_set_timeout(parallel_inproc_group *g, double timeout_s);
void parallel_inproc_group_set_max_queue(parallel_inproc_group *g, size_t max_queue_bytes);

int parallel_inproc_group_size(const parallel_inproc_group *g);

/* The communicator of `rank` (owned by the group; valid until the group is destroyed). */
parallel_comm *parallel_inproc_group_comm(parallel_inproc_group *g, int rank);

/* Marks `rank` as gone (or back): receives waiting on it with nothing queued return WT_EIO at
 * once instead of waiting for the timeout. parallel_inproc_run does this as each rank returns,
 * so one failing rank makes its peers fail fast rather than hang. */
void parallel_inproc_group_set_closed(parallel_inproc_group *g, int rank, int closed);

/* Runs fn(comm_of_rank, arg) on one thread per rank and waits for all; rcs[rank] receives
 * each return value (rcs may be NULL). Every rank starts open and is closed as its fn returns;
 * mailboxes are emptied and sequence numbers restarted before the run. Returns WT_OK if every rank
 * returned WT_OK, else the first nonzero rank's value, or WT_EIO if a thread could not be started.
 */
typedef int (*parallel_rank_fn)(parallel_comm *c, void *arg);
int parallel_inproc_run(parallel_inproc_group *g, parallel_rank_fn fn, void *arg, int *rcs);

#endif
