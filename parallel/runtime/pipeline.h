/* pipeline — the executor of one pipeline stage's schedule (assign/schedule.h) for one training
 * step: forward and backward passes of m micro-batches on a gpt_stage, with activations sent to
 * the next stage (its act_in) and their gradients sent back (the previous stage's grad_out),
 * optionally compressed at the cut with AC-SGD (compress/acsgd.h).
 *
 * The communicator is the replica's pipeline: rank s is stage s of S (parallel_comm_split of the
 * world). Sends do not wait for the receiver (the transports buffer or send asynchronously), so
 * a stage's next pass overlaps the transfer of what it just sent; every receive waits at most
 * the transport's deadline.
 *
 * Stored activations: the executor gives the stage (gpt_stage_set_slots) one activation slot per
 * micro-batch its schedule keeps in flight — the most forwards done whose backward has not run:
 * m in GPipe, min(m, S − s) on stage s in 1F1B — and runs each micro-batch's forward and backward
 * in its slot (gpt_stage_use_slot), so no forward runs twice. Each slot holds the activations of
 * one micro-batch (rows × T); the executor also keeps every micro-batch's input (rows × T × C
 * floats). With act_slots k below that peak, a forward that finds no free slot takes the one
 * holding the latest micro-batch, whose backward then first runs its forward again from the
 * stored input (activation recomputation, bitwise the same numbers; k = 1 keeps only the last
 * forward, as a stage without slots does). A stage of the Mixture-of-Experts model keeps one
 * forward in flight (gpt.h), so its executor always runs with one slot and recomputes.
 *
 * Activation codec at each cut (both sides must use the same one):
 *   none      float32 activations and gradients, bit-exact
 *   deltaB    AC-SGD, B in {2, 4, 8}: each sample's activation as a B-bit delta against the
 *             last one sent for that sample (both ends cache it; a sample is identified by a
 *             hash of its tokens, so it is recognised when the data repeats)
 *   direct8   each activation quantized to 8 bits on its own (the baseline without a cache)
 * With a codec on, the gradients going back are quantized directly to 8 bits. Loss scaling: the
 * last stage differentiates (1/m) × each micro-batch's mean loss, so the accumulated gradient is
 * that of the mean over the step's m micro-batches.
 *
 * On a device back end (a stage made with gpt_stage_new_on) the executor's activation and
 * gradient buffers are host memory from the back end's host_alloc (page-locked on a GPU), which
 * the stage copies to and from the device in its passes; parallel_pipeline_tied_sum downloads
 * the wte gradient, sums it on the host and uploads it again.
 *
 *   parallel_pipeline *p = parallel_pipeline_new(&cfg, stage, pipe_comm);
 *   gpt_stage_zero_grad(stage);
 *   WT_CHECK(parallel_pipeline_run(p, inputs, targets, &loss));   // one step's passes
 *   WT_CHECK(parallel_pipeline_tied_sum(p));                       // wte gradient of both ends
 */
#ifndef WT_PARALLEL_PIPELINE_H
#define WT_PARALLEL_PIPELINE_H

#include "assign/schedule.h"
#include "model/gpt.h"
#include "parallel/transport/comm.h"
#include "parallel/datacenter/site.h"

#include <stddef.h>
#include <stdio.h>

typedef struct {
  assign_schedule_kind schedule;
  int micro_batches;        /* m >= 1 */
  int rows;                 /* sequences per micro-batch (<= the stage's max_batch) */
  int seq;                  /* T */
  char act_codec[16];       /* none | delta2 | delta4 | delta8 | direct8 */
  size_t act_cache_samples; /* AC-SGD cache bound per cut, in samples (0: 4096), and at most
                               1 GiB per end; least recently sent samples are evicted beyond */
  int act_slots;            /* at most this many activation slots (0: as many as the schedule
                               keeps micro-batches in flight; fewer recompute, see above) */
  /* Tests only (tests/trust's liar harness; NULL elsewhere): sees micro-batch j's activations
   * (n floats) just before they go to the next stage, and may change them */
  void (*test_tamper_act)(void *arg, int micro_batch, float *act, size_t n);
  void *test_tamper_arg;
} parallel_pipeline_config;

typedef struct parallel_pipeline parallel_pipeline;

/* Returns WT_OK or WT_EINVAL naming an unknown activation codec. */
int parallel_pipeline_codec_check(const char *act_codec);

/* An executor for `stage` (borrowed; the executor sets its activation slots), stage index
 * parallel_comm_rank(pipe) of parallel_comm_size(pipe) (borrowed; both must outlive the executor).
 * The stage's layer range must be this rank's part of the model (first stage holds layer 0 iff rank
 * 0, last iff rank S-1). Returns NULL with wt_last_error() set on a bad config. */
parallel_pipeline *parallel_pipeline_new(const parallel_pipeline_config *cfg, gpt_stage *stage,
                                         parallel_comm *pipe);
void parallel_pipeline_destroy(parallel_pipeline **self_p);

/* Runs the stage's schedule for one step. inputs/targets: (m·rows, T) token ids of this
 * replica's part of the batch (every stage passes them: the first reads the tokens, the last the
 * targets, all hash them into AC-SGD sample ids). Gradients ACCUMULATE into the stage (zero them
 * first). *loss receives the mean loss over the m micro-batches on the last stage, 0 elsewhere.
 * Returns WT_OK, a model error, or the transport's / codec's status (WT_EIO, WT_ETIMEOUT,
 * WT_ECORRUPT, WT_EMISMATCH) with a message naming the micro-batch and the peer stage. */
int parallel_pipeline_run(parallel_pipeline *p, const int *inputs, const int *targets, float *loss);

/* Tied embedding (gpt.h): stages 0 and S-1 exchange their wte gradients and both keep
 * last + first (bitwise the same on both, as gpt_tied_grads_sum). A no-op on other stages and
 * when S = 1. Returns WT_OK or the transport's status. */
int parallel_pipeline_tied_sum(parallel_pipeline *p);

/* Forward-only evaluation of n batches of `rows` sequences (rows <= the config's rows): inputs /
 * targets (n·rows, T). Activations go across the cuts as float32 whatever the codec (the AC-SGD
 * caches are for training samples). *loss receives the mean of the n batch losses on the last
 * stage (summed in double, as trainer_val_loss), 0 elsewhere. Returns WT_OK or the transport's /
 * model's status. */
#define PARALLEL_PIPELINE_MAX_EVAL (1 << 20)
int parallel_pipeline_eval(parallel_pipeline *p, const int *inputs, const int *targets, int n,
                           int rows, float *loss);

/* The AC-SGD delta caches of this stage's cuts (the sender's toward the next stage, the
 * receiver's from the previous one; compress/acsgd.h's record each), for a checkpoint: with them
 * a resumed run encodes and decodes the same bytes as one that never stopped. Nothing is
 * written or read unless the codec is a delta codec. Returns acsgd_*_save / _load's statuses. */
int parallel_pipeline_save_state(const parallel_pipeline *p, FILE *f);
int parallel_pipeline_load_state(parallel_pipeline *p, FILE *f);

/* What crossed the cuts, for a spot check of a stage's forward (docs/trust.md).
 * _keep_sent: in the next run, micro-batch j's activations are copied into out (rows × T × C
 * floats, the caller's) as they go to the next stage — after the test hook, so as sent; the
 * last stage sends none and nothing is copied. _received: micro-batch j's activations as this
 * stage received them (decoded) in the last run, valid until the next; NULL on the first stage.
 * *n receives rows × T × C. */
void parallel_pipeline_keep_sent(parallel_pipeline *p, int micro_batch, float *out);
const float *parallel_pipeline_received(const parallel_pipeline *p, int micro_batch, size_t *n);

/* 1 if the activation codec keeps state across steps (a delta codec). */
int parallel_pipeline_has_state(const parallel_pipeline *p);

/* Seconds spent in forward / backward passes (recomputation included) since creation. */
double parallel_pipeline_compute_s(const parallel_pipeline *p);

/* Forward passes run again for a backward (activation recomputation) since creation: 0 unless
 * act_slots is below the schedule's peak (or a site runs the passes). */
long parallel_pipeline_recomputes(const parallel_pipeline *p);

/* Runs the stage's passes on `site` (parallel/datacenter/site.h; borrowed, made for this stage's
 * layers and micro-batch shape; NULL: back on the stage) from the next run on. The stage stays what
 * the caller sees: parallel_pipeline_run and _eval first load the stage's parameters into the site,
 * and a run ends by adding the site's gradients into the stage's (gradients ACCUMULATE as
 * without a site); the tied sum, checkpoints and reduces use the stage as before. A site keeps
 * one forward's activations, so the executor uses one slot and recomputes every forward whose
 * backward is not the next pass (as act_slots = 1). Returns WT_OK, or WT_ENOTSUP for a stage on
 * a device back end. */
int parallel_pipeline_set_site(parallel_pipeline *p, parallel_site *site);

#endif
