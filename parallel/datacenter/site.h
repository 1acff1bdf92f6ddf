/* site — one pipeline stage run by t tensor-parallel × c context-parallel ranks of one site
 * (several GPUs behind NVLink or InfiniBand), which the WAN machinery treats as one big device.
 *
 * A site holds the layers [first, last) of a model as t·c ranks (parallel/datacenter/tp.h) on
 * threads of this process over an in-process group — or on processes of their own, declared by a
 * site file (below: parallel_site_new_linked) — (a mesh with tp = t, cp = c; world rank = tp +
 * t·cp): every block as a parallel_tp_block, and where the stage holds an end of the model the
 * vocabulary-parallel layer (wte split by rows): first == 0 the embedding (wte and the replicated
 * wpe), last == n_layer the replicated ln_f, the LM head tied to wte and the parallel
 * cross-entropy. No rank holds all the logits. The activations that cross the stage's boundaries
 * (act_in, act_out, grad_out, grad_in of gpt.h) are the full (B, T, C) arrays, replicated on every
 * rank.
 *
 * Context parallelism (c > 1): each rank computes only the B × T/c rows of its CP positions
 * (cp.h's load-balanced split: chunks j and 2c−1−j of 2c for CP rank j), taken from the full
 * tokens / act_in / targets / grad_out; attention runs as ring attention over the CP group and
 * everything else is row-wise. TP rank 0 of each CP rank writes its rows of act_out and grad_in
 * back at their positions, so the outputs are again the full arrays in position order. The loss
 * is the mean over all B·T rows (the mean of the c ranks' means, which hold B·T/c rows each).
 * T (of every batch, and max_seq) must be a multiple of 2c.
 *
 * An MoE model (cfg->moe_experts > 0): the site's n ranks (tp = n, cp = 1) are an expert-
 * parallel group instead (parallel/datacenter/moe.h; no TP or CP for MoE). Rank p holds a gpt_stage
 * built with gpt_stage_new_ep over the site's EP group: the dense weights (and every router)
 * replicated, experts [p·E/n, (p+1)·E/n) of each MoE block; it takes rows [p·B/n, (p+1)·B/n)
 * of each micro-batch (tokens / act_in / targets / grad_out) and writes the same rows of act_out
 * and grad_in, the MoE blocks exchanging tokens by the group's all-to-all. Each rank
 * differentiates loss_scale / n times the mean over its rows, so the loss is the mean of the
 * ranks' means. Load copies the canonical stage's dense tensors and each rank's experts by name;
 * the gather adds every rank's dense gradients (the sum over the ranks) and each expert's from
 * its owner, where it is complete. E and B (max_batch and every batch) must be multiples of n.
 * Numbers: the capacity and the load-balancing loss are per rank's rows (model/moe.h's EP
 * rule), so the site equals one device that runs each rank's rows as its own micro-batch
 * (loss_scale / n each) within float rounding, drops included; with a capacity that drops
 * nothing and aux_weight 0 it equals the single-device stage on the whole micro-batch (with an
 * aux loss, its gradient differs: the mean of per-rank aux losses is not the whole batch's).
 *
 * The site's caller keeps the stage's CANONICAL gpt_stage (model/gpt.h) in host memory: its
 * parameters, gradients, optimizer, checkpoints and everything that crosses the WAN (pipeline
 * sends, the data-parallel reduce, the tied-embedding exchange) stay on that stage exactly as
 * without a site. Per step:
 *   parallel_site_load(site, stage)      every rank takes its TP shards of the stage's parameters
 *   parallel_site_forward / _backward    the micro-batches' passes, on the t·c ranks
 *   parallel_site_grads(site, stage)     the stage's gradients += the ranks' gradients, put back
 *                                        into gpt_stage layout (parallel_tp_unshard_add; the c
 *                                        CP ranks' partial sums of one shard each added once);
 *                                        the site's own gradients are zeroed
 * so rank 0 speaks for the site on the WAN.
 *
 * The ranks (of a threaded site): every call runs its part on all t·c ranks at once, as threads of
 * parallel_inproc_run over the site's in-process group, started per call (docs/parallel.md has
 * its measured cost), and returns when all have finished (the gather: c calls, one per CP rank).
 * Load and gather move no messages: the ranks are threads of one process and each reads or writes
 * its own part of the stage's host buffers. The passes' collectives are those of tp.h and cp.h
 * (counted by parallel_site_bytes; docs/parallel.md has the formula).
 *
 * Failures: every receive inside the site waits at most the group's deadline
 * (parallel_site_set_timeout, default 120 s). A rank that fails (a bad token, a corrupt message)
 * returns its error and its thread ends, which closes it, so its peers' next receives fail at
 * once instead of waiting; the call returns the failing rank's error (WT_EINVAL for a bad token
 * or target, checked on every rank before anything is sent; an MoE site checks each rank's
 * rows) with a message naming the rank. The
 * site stays usable: the next call starts from empty mailboxes.
 *
 * Numbers: equal to the single-device stage within float rounding (tp.h: atol 1e-5 + rtol 1e-4
 * in the tests), not bitwise. A site keeps one forward's activations (gpt.h's activation slots do
 * not exist here): the pipeline executor recomputes a forward whose backward is not the next pass
 * (pipeline.h, act_slots = 1).
 *
 * Limits: host kernels back ends only (the CUDA back end's state is process-wide, so t ranks
 * cannot share it in one process: WT_ENOTSUP); a dense model: n_head a multiple of t,
 * vocab_size >= t, T a multiple of 2c; an MoE model: c = 1, E and B multiples of t; no sequence
 * parallelism inside the site.
 *
 *   parallel_site *site = parallel_site_new(&cfg, first, last, rows, T, 2, 1, kernels_cpu());
 *   WT_CHECK(parallel_site_load(site, stage));
 *   WT_CHECK(parallel_site_forward(site, tokens, act_in, targets, rows, T, act_out));
 *   WT_CHECK(parallel_site_backward(site, grad_out, grad_in, 1.0f));
 *   WT_CHECK(parallel_site_grads(site, stage));   // stage gradients += the site's
 *   parallel_site_destroy(&site);
 */
#ifndef WT_PARALLEL_SITE_H
#define WT_PARALLEL_SITE_H

#include "model/gpt.h"

#include <signal.h> /* defines: sig_atomic_t */
#include <stdint.h>

struct kernels_ops;

typedef struct parallel_site parallel_site;

/* The most ranks (t·c) a site may have. */
#define PARALLEL_SITE_MAX_RANKS 64

/* A site of tp × cp ranks (tp TP ranks for each of cp CP ranks; cp = 1: no context parallelism)
 * for layers [first, last) of cfg, for batches of up to max_batch × max_seq tokens, computing
 * with kernels back end k (NULL: the CPU). Parameters start at zero (parallel_site_load them).
 * Returns NULL with wt_last_error() set: WT_EINVAL for a bad range, a TP degree that does not
 * divide the heads or max_seq not a multiple of 2·cp (cp > 1), WT_ENOTSUP for a device back end.
 * An MoE model runs its tp ranks as EP ranks: WT_EINVAL for cp > 1, or an expert count or
 * max_batch that tp does not divide. */
parallel_site *parallel_site_new(const gpt_config *cfg, int first, int last, int max_batch,
                                 int max_seq, int tp, int cp, const struct kernels_ops *k);
void parallel_site_destroy(parallel_site **self_p);

/* All ranks (tp × cp), the TP degree, the CP degree and the EP degree (an MoE site: all its
 * ranks, TP and CP 1; a dense site: 1). */
int parallel_site_ranks(const parallel_site *site);
int parallel_site_tp(const parallel_site *site);
int parallel_site_cp(const parallel_site *site);
int parallel_site_ep(const parallel_site *site);

/* Each receive inside the site waits at most timeout_s (> 0) seconds. */
void parallel_site_set_timeout(parallel_site *site, double timeout_s);

/* Every rank takes its shards of `stage`'s parameters (host memory; the stage must have the
 * site's config and layer range: WT_EINVAL otherwise). */
int parallel_site_load(parallel_site *site, gpt_stage *stage);

/* gpt_stage_forward's contract (tokens for the first stage, act_in for the others, targets for
 * the last, act_out (B, T, C) written by every stage but the last), over the t·c ranks. Returns
 * WT_OK, WT_EINVAL for a bad token, target or batch (T not a multiple of 2c with cp > 1), or the
 * failing rank's error. */
int parallel_site_forward(parallel_site *site, const int *tokens, const float *act_in,
                          const int *targets, int B, int T, float *act_out);

/* After a forward on the last stage: its mean cross-entropy (nats). */
float parallel_site_loss(const parallel_site *site);

/* gpt_stage_backward's contract for the last forward: the site's gradients +=, grad_in written
 * (every stage but the first), loss_scale as there. Returns WT_OK or the failing rank's error. */
int parallel_site_backward(parallel_site *site, const float *grad_out, float *grad_in,
                           float loss_scale);

/* stage's gradients (host memory, gpt_stage layout) += the site's gradients since the last
 * parallel_site_grads, which are then zeroed. Returns WT_OK or WT_EINVAL for another stage. */
int parallel_site_grads(parallel_site *site, gpt_stage *stage);

/* An MoE site's routing since the last parallel_site_grads, over its EP ranks (gpt.h's
 * gpt_stage_moe_stats of each rank's stage): kept[e] (cfg->moe_experts longs) and *dropped summed
 * over the ranks' rows, *aux the mean over the ranks of their mean load-balancing loss, *forwards
 * the forwards since. Any pointer may be NULL. Returns 0 for a dense site (nothing set), else the
 * stage's number of MoE blocks. */
int parallel_site_moe_stats(const parallel_site *site, long *kept, long *dropped, double *aux,
                            int *forwards);

/* Bytes all ranks sent to each other inside the site since it was made (the TP collectives and
 * the ring attention's blocks; an MoE site's all-to-alls). */
uint64_t parallel_site_bytes(const parallel_site *site);

/* ---- a site whose ranks are processes --------------------------------------------------------
 * The same site (the same rank code, the same numbers: bitwise equal to the threaded site in the
 * tests) with each rank a process of its own, on one host or several hosts of one datacenter.
 * A SITE FILE declares the processes in rank order:
 *   {"ranks": [{"endpoint": "tcp://10.0.0.1:7100", "public_key": "<40-char Z85>"}, ...]}
 * Every process makes a parallel_site_link over it (its own rank and key pair): a CONTROL
 * communicator (zmq.h, links sealed with the file's keys, each process bound at its own endpoint).
 * Rank 0 makes the site with parallel_site_new_linked and uses it exactly as a threaded site;
 * ranks >= 1 run parallel_site_serve, which serves rank 0's sites one after another.
 *
 * The messages between rank 0 and the members (sessions, OPEN / START / READY, the per-call
 * inputs and answers, the parameter broadcast at load and the gradient gather) and what they
 * cost per step are in docs/parallel.md ("A site whose ranks are processes").
 *
 * Failures. Every wait has the site's deadline (parallel_site_set_timeout on rank 0, sent to the
 * members in OPEN). A member that fails sends its error and closes the session's data comm; one
 * that dies is seen by its connection dropping: either way rank 0's call fails within about a
 * second (not the timeout) with an error naming the member's rank and endpoint. A call that
 * fails leaves the site unusable (WT_EIO for every later call): destroy it; the next
 * parallel_site_new_linked opens a new session with the same member processes, or with a member
 * restarted at its site-file entry (the control link stays: a process back at a peer's endpoint
 * is live again, zmq.h). Until a member answers, opening fails after the link's timeout.
 *
 * An MoE model runs its t processes as EP ranks, as the threaded site does; each member also
 * sends its routing counts after every call, so parallel_site_moe_stats is the same sum.
 *
 * Limits: t·c must equal the site file's processes; parallel_site_set_timeout applies to rank 0's
 * waits (the members took the site's timeout, the link's, when it opened); host back ends only
 * (the rank code's rule, though one process per rank would lift its reason).
 *
 *   parallel_site_decl decl;                                   // every process:
 *   WT_CHECK(parallel_site_decl_load("site.json", &decl));
 *   parallel_site_link *link = parallel_site_link_new(&decl, rank, pub, sec, 120);
 *   // rank 0:
 *   parallel_site *site = parallel_site_new_linked(&cfg, first, last, B, T, 2, 1, NULL, link);
 *   ... parallel_site_load / _forward / _backward / _grads as above ...
 *   parallel_site_destroy(&site);                              // ends the session
 *   // ranks >= 1:
 *   parallel_site_serve(link, NULL, &stop);                    // until *stop
 *   parallel_site_link_destroy(&link);
 */

#define PARALLEL_SITE_ENDPOINT_CHARS 256 /* with the NUL */

/* A parsed site file: n processes, rank r at endpoint[r] with public key key[r]. */
typedef struct {
  int n;
  char endpoint[PARALLEL_SITE_MAX_RANKS][PARALLEL_SITE_ENDPOINT_CHARS];
  char key[PARALLEL_SITE_MAX_RANKS][41];
} parallel_site_decl;

/* Reads and checks a site file: valid JSON with "ranks" an array of 2..PARALLEL_SITE_MAX_RANKS
 * objects, each a "endpoint" tcp://HOST:PORT (no wildcard port) and a "public_key" of 40 Z85
 * characters, no endpoint or key twice. Returns WT_OK, WT_ENOTFOUND / WT_EIO when the file
 * cannot be read, or WT_EINVAL with a message naming the file and the field (decl unchanged). */
int parallel_site_decl_load(const char *path, parallel_site_decl *decl);

typedef struct parallel_site_link parallel_site_link;

/* This process's link as rank `rank` of the declared site, with its key pair (Z85, 40 chars;
 * public_key must be the file's entry for `rank`), binding its entry's endpoint. timeout_s (> 0)
 * bounds every wait of the control protocol. Copies what it needs of decl. Returns NULL with
 * wt_last_error() set: WT_EINVAL for a rank outside [0, n) or a key that is not the file's entry
 * (saying which), WT_EIO when the endpoint cannot be bound. */
parallel_site_link *parallel_site_link_new(const parallel_site_decl *decl, int rank,
                                           const char *public_key, const char *secret_key,
                                           double timeout_s);
void parallel_site_link_destroy(parallel_site_link **self_p);

/* The link's processes (the site file's entries) and this process's rank. */
int parallel_site_link_size(const parallel_site_link *link);
int parallel_site_link_rank(const parallel_site_link *link);

/* Rank 0: parallel_site_new's site, whose ranks are the link's processes (tp × cp must equal
 * them; rank r is TP rank r mod tp of CP rank r / tp). Opens a session with every member within
 * the link's timeout. The link is borrowed and must outlive the site; one site per link at a
 * time. Returns NULL with wt_last_error() set: parallel_site_new's errors, WT_EINVAL for another
 * process count or a link that is not rank 0's, or the error of
 * the member that could not open (naming its rank: WT_ETIMEOUT when it did not answer). */
parallel_site *parallel_site_new_linked(const gpt_config *cfg, int first, int last, int max_batch,
                                        int max_seq, int tp, int cp, const struct kernels_ops *k,
                                        parallel_site_link *link);

/* Ranks >= 1: serves rank 0's sites, one session after another, computing with kernels back end
 * k (NULL: the CPU), until *stop becomes nonzero (checked at least every half second while
 * idle). Prints one line to stdout per session opened (layers, t × c) and one to stderr per
 * session that failed (why); a failed session is not fatal. Returns WT_OK once stopped, or
 * WT_EINVAL for a link of rank 0. */
int parallel_site_serve(parallel_site_link *link, const struct kernels_ops *k,
                        const volatile sig_atomic_t *stop);

/* The one device a site of `gpus` devices is to the WAN placement: assign_site_device's
 * aggregate (gpus × efficiency × one device's FLOP/s, gpus × its memory), except that one device
 * is itself (efficiency 1: no tensor parallelism to lose time to). Returns WT_OK, or WT_EINVAL
 * for a site that cannot exist (outputs unchanged). */
int parallel_site_device(int gpus, double efficiency, double gpu_flops, double gpu_memory,
                         double *flops, double *memory);

/* ---- measuring a site's efficiency ---------------------------------------------------------
 * A site's efficiency is one device's time for a stage's forward + backward over the site's
 * time for the same passes, divided by the site's ranks: the fraction of linear scaling the
 * site keeps (assign_site_device). On a GPU site it is what the ranks' collectives cost; on a
 * CPU the ranks share one machine's cores, so a site of n ranks measures about 1/n or less. */

/* Measured efficiencies are kept in [PARALLEL_SITE_MIN_EFFICIENCY, 1]. */
#define PARALLEL_SITE_MIN_EFFICIENCY 0.01

typedef struct {
  double one_s;      /* median seconds of the passes on one gpt_stage */
  double site_s;     /* median seconds of the same passes on the site */
  double efficiency; /* one_s / (ranks × site_s), clamped to [MIN_EFFICIENCY, 1] */
} parallel_site_timing;

/* Times `reps` (1..64) forward + backward passes of one B × T micro-batch through a middle stage
 * [first, last) of cfg (neither end of the model), on a fresh gpt_stage and on `site` (made for
 * that stage) alternately, after one untimed pass of each; medians into *out. The site is
 * loaded with the stage's weights and its gradients are gathered away, so it is left as if new.
 * Returns WT_OK, WT_EINVAL (a stage with an end of the model, reps out of range, another stage
 * than the site's) or the site's error. */
int parallel_site_measure(parallel_site *site, const gpt_config *cfg, int first, int last, int B,
                          int T, int reps, parallel_site_timing *out);

/* The model a site is probed on before the run's model is known: 3 layers (the middle one is
 * timed), heads of 64 channels, at least 12 heads and a multiple of `ranks` (GPT-2 small's 768
 * channels for 1, 2, 3, 4, 6 or 12 ranks); micro-batches of PROBE_ROWS × PROBE_SEQ tokens. */
#define PARALLEL_SITE_PROBE_ROWS 2
#define PARALLEL_SITE_PROBE_SEQ 256
gpt_config parallel_site_probe_config(int ranks);

/* parallel_site_measure on a threaded site of `ranks` TP ranks on the CPU, for the middle block
 * of parallel_site_probe_config(ranks). Returns WT_OK or the first error. */
int parallel_site_probe(int ranks, int reps, parallel_site_timing *out);

#endif
