/* gpt — a GPT-2 style decoder-only transformer whose unit of placement is a layer range.
 *
 * A `gpt_stage` owns the parameters, gradients and activations of the layers [first, last) of
 * a model with cfg->n_layer transformer blocks, and nothing else: a pipeline stage of a 48-layer
 * model holds its own blocks, not all 48. Running [0,k) then [k,L) gives bitwise the same
 * logits, loss and gradients as [0,L).
 *
 * What a stage holds:
 *   first == 0          token embedding wte (V, C) and position embedding wpe (maxT, C)
 *   blocks first..last-1  ln_1, attn.c_attn (C→3C), attn.c_proj (C→C), ln_2, mlp.c_fc (C→4C),
 *                       mlp.c_proj (4C→C), each with bias (GPT-2 layout, LayerNorm eps 1e-5,
 *                       tanh-approximated GELU)
 *   last == n_layer     final LayerNorm ln_f, the LM head (tied to wte) and the cross-entropy loss
 * An MoE block (cfg->moe_layer[l]) has, in place of mlp.*, the router h.l.moe.router.weight
 * (C, E) and per expert e the MLP h.l.moe.experts.e.{c_fc,c_proj}.{weight,bias} (model/moe.h);
 * its load-balancing loss adds to the gradient (scaled like the loss) but not to
 * gpt_stage_loss, which stays the cross-entropy. MoE blocks run on host back ends only.
 *
 * Tied embedding: the LM head reuses wte. A stage that holds both ends (first == 0 and
 * last == n_layer) has one wte whose gradient collects both uses. When the two ends live in
 * different stages, each keeps its own copy of wte (initialised identically) and the caller
 * must make their gradients equal to the sum before every update with gpt_tied_grads_sum (in one
 * process) or by exchanging gpt_stage_tied_grad buffers (across processes), as Megatron-LM does.
 * So that both layouts give bitwise the same numbers, the one-stage model accumulates the two
 * uses in separate hidden buffers (over all micro-batches since the last zero_grad) and writes
 * their sum into its gradient after every backward: the same partial sums and the same single
 * addition as two stages joined by gpt_tied_grads_sum. (The copies cost 2 x V x C floats.)
 * Each stage's wte copy is the first tensor of its buffers (offset 0).
 *
 * Parameters and gradients are each one flat float32 buffer per stage, laid out tensor after
 * tensor in the order of gpt_stage_tensor(); optimizers, codecs and collectives work on them.
 *
 * Every function that takes input from outside returns a wt_status.
 */
#ifndef WT_GPT_H
#define WT_GPT_H

#include "common/config.h" /* defines: wt_option rows, WT_CONFIG_STR_MAX */
#include "model/moe.h"

#include <stddef.h>
#include <stdint.h>

/* The blocks that may be MoE blocks: 0 .. GPT_MOE_MAX_LAYERS - 1. */
#define GPT_MOE_MAX_LAYERS 128

typedef struct {
  int vocab_size; /* V: 256 for bytes, 50257 for GPT-2 tokens */
  int max_seq;    /* maxT: context length (rows of wpe) */
  int n_layer;    /* L: transformer blocks */
  int n_head;     /* NH: attention heads; must divide channels */
  int channels;   /* C: model width */
  /* The Mixture-of-Experts variant (model/moe.h): in every block l with moe_layer[l] set, the
   * MLP becomes moe_experts GPT-2 MLPs behind a top-k router. moe_experts == 0: the dense model
   * (then every moe_* field must be 0). No padding, so configs compare with memcmp. */
  int moe_experts;                             /* E */
  int moe_top_k;                               /* k in [1, E] */
  float moe_capacity;                          /* capacity factor > 0 */
  float moe_aux_weight;                        /* weight of the Switch load-balancing loss */
  unsigned char moe_layer[GPT_MOE_MAX_LAYERS]; /* 1: block l is an MoE block */
} gpt_config;

/* Returns WT_OK, or WT_EINVAL with a message naming the bad field and why. */
int gpt_config_validate(const gpt_config *cfg);

/* Sets cfg->moe_layer from `list`: "all" (every block), or block numbers and ranges separated
 * by commas ("1,3", "0-3,6"), each in [0, min(n_layer, GPT_MOE_MAX_LAYERS)). Returns WT_OK, or
 * WT_EINVAL naming the bad item (cfg unchanged). cfg->n_layer must be set. */
int gpt_config_set_moe_layers(gpt_config *cfg, const char *list);

/* The Mixture-of-Experts options of a command line (--moe-experts, --moe-top-k, --moe-layers,
 * --moe-capacity, --moe-aux-weight), one set of rows for every program that builds the model
 * (`wantrain train` and `launch`, the coordinator), for a member `m` of type gpt_moe_options in
 * `type`. --moe-experts 0 is the dense model. */
typedef struct {
  int experts, top_k;
  char layers[WT_CONFIG_STR_MAX];
  double capacity, aux_weight;
} gpt_moe_options;
// clang-format off
#define GPT_MOE_OPTIONS(type, m)                                                                   \
  {"moe-experts", WT_OPT_INT, offsetof(type, m.experts), 0, 65536, "0",                            \
   "Mixture of Experts: experts per MoE block (0 = a dense model; the CPU back end only)", 0},     \
  {"moe-top-k", WT_OPT_INT, offsetof(type, m.top_k), 1, 65536, "1",                                \
   "experts each token is routed to (at most --moe-experts)", 0},                                  \
  {"moe-layers", WT_OPT_STRING, offsetof(type, m.layers), 0, 0, "all",                             \
   "blocks whose MLP becomes experts: all, or numbers and ranges (\"1,3\", \"0-3\")", 0},          \
  {"moe-capacity", WT_OPT_FLOAT, offsetof(type, m.capacity), 1e-6, 1e6, "1.25",                    \
   "capacity factor: an expert takes at most this x tokens*k/experts tokens; the rest are dropped", \
   0},                                                                                             \
  {"moe-aux-weight", WT_OPT_FLOAT, offsetof(type, m.aux_weight), 0, 1e6, "0.01",                   \
   "weight of the Switch load-balancing loss", 0}
// clang-format on

/* Sets cfg's moe_* fields from the options (cfg->n_layer set; a dense model when o->experts is
 * 0). Returns WT_OK, or WT_EINVAL naming the flag: a shaping flag without --moe-experts, a
 * --moe-top-k above --moe-experts, a --moe-layers list that does not fit --layers (cfg
 * unchanged). */
int gpt_moe_options_apply(const gpt_moe_options *o, gpt_config *cfg);

/* Is block l an MoE block? */
int gpt_config_is_moe(const gpt_config *cfg, int l);

/* Total parameter count of the whole model (one copy of wte, all experts). */
size_t gpt_config_num_params(const gpt_config *cfg);
/* Parameters one token uses: the total less the experts it is not routed to (E − k of each
 * MoE block); the dense model's total. */
size_t gpt_config_num_active_params(const gpt_config *cfg);

/* Parameters of block l as one rank stores it: attention and LayerNorms, and a dense MLP or, in
 * an MoE block, `experts` experts and the router. */
size_t gpt_config_block_params(const gpt_config *cfg, int l, int experts);

/* One tensor of a stage, in flat-buffer order. */
typedef struct {
  char name[64]; /* Hugging Face GPT2Model name: "wte.weight", "h.3.attn.c_attn.weight" */
  int ndim;      /* 1 or 2 */
  int shape[2];  /* as stored in safetensors (Conv1D [in, out] layout for h.*.weight) */
  size_t offset; /* element offset in the stage's flat parameter / gradient buffer */
  size_t numel;
  int weight_decay; /* 1 for matrices (incl. embeddings), 0 for biases and LayerNorm params */
} gpt_tensor_info;

typedef struct gpt_stage gpt_stage;

struct kernels_ops;

/* Creates a stage for layers [first, last) of cfg, able to run batches of up to max_batch
 * sequences of up to max_seq tokens (T <= cfg->max_seq), on the CPU back end. Parameters are
 * zero until gpt_stage_init_weights. Returns NULL with wt_last_error() set on a bad config or
 * range, or WT_ENOMEM when the stage does not fit in the back end's memory. */
gpt_stage *gpt_stage_new(const gpt_config *cfg, int first, int last, int max_batch, int max_seq);
/* The same on kernels back end `ops` (kernels_for_device): parameters, gradients and
 * activations are allocated by its memory entries, so with a CUDA table everything lives on the
 * GPU. What crosses the stage's API stays host memory (tokens, targets, act_in/out,
 * grad_in/out, gpt_stage_logits); the flat buffers are the back end's (see below). */
gpt_stage *gpt_stage_new_on(const gpt_config *cfg, int first, int last, int max_batch, int max_seq,
                            const struct kernels_ops *ops);
void gpt_stage_destroy(gpt_stage **self_p);

/* A stage whose MoE blocks hold only the experts of rank ep->rank of an expert-parallel group
 * of ep->size ranks ([rank·E/size, (rank+1)·E/size)) and reach the others through
 * ep->alltoall (copied; its ctx must outlive the stage). Expert tensors keep their global names
 * (h.L.moe.experts.E.c_fc.weight), so checkpoint_load puts a checkpoint of any EP degree into
 * it. ep NULL or of size 1 is gpt_stage_new_on. Every rank of the group must run forward and
 * backward together with the same B and T. Returns NULL as gpt_stage_new_on. */
gpt_stage *gpt_stage_new_ep(const gpt_config *cfg, int first, int last, int max_batch, int max_seq,
                            const struct kernels_ops *ops, const moe_exchange *ep);

/* GPT-2 initialisation (normal 0.02; residual projections, experts' c_proj included, scaled by
 * 1/sqrt(2L); LayerNorm 1/0; biases 0; the MoE router normal 0.02). Each tensor draws from an RNG
 * seeded by (seed, tensor name), so a layer gets the same weights whatever stage holds it. */
void gpt_stage_init_weights(gpt_stage *s, uint64_t seed);

const gpt_config *gpt_stage_config(const gpt_stage *s);
int gpt_stage_first(const gpt_stage *s);
int gpt_stage_last(const gpt_stage *s);

/* Flat buffers (owned by the stage; valid until destroy). *n receives the element count. They
 * are the back end's memory: device pointers on a GPU, for ops of the same table
 * (optim_new_on, sq_norm); host memory on "cpu" and "ref". */
float *gpt_stage_params(gpt_stage *s, size_t *n);
float *gpt_stage_grads(gpt_stage *s, size_t *n);
/* The same in host memory, where bytes leave (checkpoints, collectives): the buffer itself on a
 * host back end; on a device, a host copy owned by the stage, refreshed by every call. After
 * writing into that copy, *_upload puts it back (nothing to do on a host back end). */
float *gpt_stage_params_host(gpt_stage *s, size_t *n);
void gpt_stage_params_upload(gpt_stage *s);
float *gpt_stage_grads_host(gpt_stage *s, size_t *n);
void gpt_stage_grads_upload(gpt_stage *s);
int gpt_stage_num_tensors(const gpt_stage *s);
const gpt_tensor_info *gpt_stage_tensor(const gpt_stage *s, int i);
/* All of them as one array (gpt_stage_num_tensors entries, owned by the stage), e.g. for
 * optim_new. */
const gpt_tensor_info *gpt_stage_tensors(const gpt_stage *s, int *n);

/* Switches the kernels back end to one whose buffers live in the same memory (e.g. "cpu" to
 * "ref", for tests comparing back ends). Returns WT_EINVAL, changing nothing, for a back end
 * with other memory (a GPU's): make the stage on it with gpt_stage_new_on instead. */
int gpt_stage_set_kernels(gpt_stage *s, const struct kernels_ops *ops);
/* The back end the stage runs on. */
const struct kernels_ops *gpt_stage_kernels(const gpt_stage *s);

/* Forward over [first, last) for a batch of B sequences of T tokens.
 *   tokens  (B, T) int token ids        — read by the first stage (first == 0), else NULL
 *   act_in  (B, T, C) float             — read by other stages, else NULL
 *   targets (B, T) int                  — read by the last stage (last == n_layer), else NULL
 *   act_out (B, T, C) float             — written by every stage but the last, else NULL
 * The stage keeps what its backward needs. Returns WT_EINVAL for an out-of-range token or
 * target id or a batch larger than the stage was made for. */
int gpt_stage_forward(gpt_stage *s, const int *tokens, const float *act_in, const int *targets,
                      int B, int T, float *act_out);

/* Activation slots. A stage keeps what one forward leaves for its backward in its current
 * slot; with n slots it keeps n forwards at once, so that a pipeline with several micro-batches
 * in flight runs each backward on its own forward's activations instead of recomputing them.
 * gpt_stage_use_slot(s, k) makes slot k current: gpt_stage_forward writes it, and
 * gpt_stage_backward, gpt_stage_loss and gpt_stage_logits read it; the other slots keep their
 * contents. Parameters, gradients and the backward's scratch buffers are shared. A stage starts
 * with one slot (slot 0). Each slot costs the activations of one batch of max_batch x max_seq
 * (docs/runtime.md); numbers do not depend on which slot a pass uses.
 *   gpt_stage_set_slots: 1..GPT_MAX_SLOTS slots; growing keeps every slot's contents, shrinking
 *     drops slots >= n (the current becomes 0 if it was one of them). Returns WT_OK, WT_EINVAL,
 *     or WT_ENOMEM (nothing changed) when the new slots do not fit in the back end's memory.
 *   gpt_stage_use_slot: WT_OK, or WT_EINVAL for a slot outside [0, n). */
#define GPT_MAX_SLOTS 4096
int gpt_stage_set_slots(gpt_stage *s, int n);
int gpt_stage_num_slots(const gpt_stage *s);
int gpt_stage_use_slot(gpt_stage *s, int slot);
int gpt_stage_slot(const gpt_stage *s);

/* After a forward on the last stage: the mean cross-entropy (nats) and logits (B, T, V) in host
 * memory (copied from the device on a GPU back end), valid until the next forward. */
float gpt_stage_loss(const gpt_stage *s);
const float *gpt_stage_logits(gpt_stage *s);

/* Backward of the current slot's forward (the last forward when there is one slot). ACCUMULATES
 * (+=) parameter gradients, so several micro-batches can be summed before one update. grad_out (B,
 * T, C) — gradient w.r.t. act_out, read by every stage but the last, else NULL grad_in  (B, T, C) —
 * gradient w.r.t. act_in, written by every stage but the first, else NULL loss_scale         — the
 * last stage differentiates loss_scale × mean loss (1/micro_batches for gradient accumulation);
 * other stages use it only to scale their MoE blocks' load-balancing gradient, so pass every stage
 * the same. */
int gpt_stage_backward(gpt_stage *s, const float *grad_out, float *grad_in, float loss_scale);

/* gpt_stage_forward / gpt_stage_backward whose copies across the API (act_in and grad_out to
 * the back end, act_out and grad_in back) run on the back end's copy stream
 * (kernels_ops.upload_async / download_async), so a pass returns once its work is queued and the
 * next one can be queued behind it. The caller calls the back end's copy_wait before it reads
 * act_out or grad_in, or writes act_in or grad_out again; those buffers must come from the back
 * end's host_alloc. On host back ends the copies are plain ones, the results the same bits. */
int gpt_stage_forward_async(gpt_stage *s, const int *tokens, const float *act_in,
                            const int *targets, int B, int T, float *act_out);
int gpt_stage_backward_async(gpt_stage *s, const float *grad_out, float *grad_in, float loss_scale);

void gpt_stage_zero_grad(gpt_stage *s);

/* The MoE blocks' routing since the last gpt_stage_zero_grad, summed over this stage's MoE
 * blocks and every forward since: kept[e] (cfg->moe_experts longs) the (token, choice) pairs
 * expert e accepted from this rank, *dropped those dropped by the capacity, *aux the mean
 * load-balancing loss (unweighted; 1 is perfectly balanced) per block and forward, *forwards
 * the number of forwards. Any pointer may be NULL. Returns 0 for a dense stage (nothing set),
 * else the number of MoE blocks. */
int gpt_stage_moe_stats(const gpt_stage *s, long *kept, long *dropped, double *aux, int *forwards);

/* Copies into dst every tensor of src that dst holds under the same name, whatever the two
 * stages' layer ranges or EP degrees (host back ends). Gathers the experts of several EP ranks
 * into one stage holding them all (to save one checkpoint), or spreads them back. Returns the
 * number of tensors copied, or -1 with WT_EMISMATCH set when a same-named tensor has another
 * shape. */
int gpt_stage_copy_params(gpt_stage *dst, gpt_stage *src);

/* The gradient of this stage's copy of wte (V*C floats, inside gpt_stage_grads: back-end
 * memory), or NULL if the stage holds neither end of the model. Used to exchange
 * tied-embedding gradients across processes. */
float *gpt_stage_tied_grad(gpt_stage *s, size_t *n);

/* In one process: sets the wte gradients of `first_stage` (first == 0) and `last_stage`
 * (last == n_layer) both to their sum. A no-op if they are the same stage. Returns WT_EINVAL if
 * the stages do not hold the two ends of the same model. */
int gpt_tied_grads_sum(gpt_stage *first_stage, gpt_stage *last_stage);

#endif
