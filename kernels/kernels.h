/* kernels — the tensor operations of the GPT on interchangeable back ends.
 *
 * A back end fills one `kernels_ops` table of function pointers (ggml_backend_i style); the
 * model calls ops only through a table and never knows which back end it runs on. Ops take raw
 * float pointers and sizes — no model types — so a CUDA table (kernels/cuda) has the same shape
 * with device pointers instead of host pointers.
 *
 * Back ends, all reached through kernels_backend(name), the one registration point:
 *   "cpu"   fast CPU path: OpenBLAS sgemm for everything matrix-shaped, OpenMP elsewhere
 *           (OpenBLAS is loaded at run time: see kernels_cpu_init)
 *   "ref"   readable reference loops (no BLAS, no threads); the fast paths are tested against it
 *   "cuda"  cuBLAS + CUDA kernels, present only in CUDA builds (NULL otherwise). kernels/cuda
 *           provides `const kernels_ops *kernels_cuda(void)` in a CMake target wt_kernels_cuda;
 *           the registry lists it when that target exists. Its buffers are device memory:
 *           the memory entries at the end of the table allocate them and copy to and from
 *           them, so callers never use a device pointer on the host.
 *
 * Conventions shared by every op:
 *   - Shapes are given as comments: (B, T, C) means B*T*C floats, row-major, C fastest.
 *     N = B*T rows where an op does not care about the batch/time split.
 *   - Backward ops ACCUMULATE (+=) into parameter gradients AND into input gradients, so the
 *     two branches of a residual connection sum in place; callers zero scratch gradients first.
 *     The one exception, documented on it, is crossentropy_backward, which writes dlogits.
 *   - Ops are deterministic: the same inputs and thread count give bitwise the same outputs,
 *     whatever else runs in the process (a layer computed in a pipeline stage must match the
 *     same layer computed in an unsplit model).
 *   - Weights of the transformer blocks are in Hugging Face Conv1D layout (in, out); the LM head
 *     reuses the token embedding (V, C), i.e. a Linear (out, in) layout: matmul takes a flag.
 */
#ifndef WT_KERNELS_H
#define WT_KERNELS_H

#include <stddef.h>

/* Weight layouts for matmul. */
typedef enum {
  KERNELS_W_IN_OUT = 0, /* weight (C, OC): out = inp @ weight          (HF Conv1D) */
  KERNELS_W_OUT_IN = 1, /* weight (OC, C): out = inp @ weight^T        (nn.Linear, tied wte) */
} kernels_wlayout;

/* Matmul precision. Buffers, weights, optimizer state, softmax and loss stay fp32 in every mode;
 * what changes is how the GEMMs (linear layers and attention) multiply:
 *   FP32  exact fp32 products (the only mode of the host back ends)
 *   TF32  tensor cores with TF32 inputs (10-bit mantissa), fp32 accumulation   (--tf32)
 *   BF16  tensor cores with inputs rounded to bf16 (8-bit mantissa), fp32 accumulation
 *         (--precision bf16: llm.c's mixed precision for the matmuls; activations are still
 *         stored in fp32)
 */
typedef enum {
  KERNELS_PREC_FP32 = 0,
  KERNELS_PREC_TF32 = 1,
  KERNELS_PREC_BF16 = 2
} kernels_precision;

/* One tensor of a flat parameter buffer for adamw_update_tensors: elements
 * [offset, offset + numel) with weight decay wd. */
typedef struct {
  size_t offset, numel;
  float wd;
} kernels_adamw_tensor;

typedef struct kernels_ops {
  const char *name; /* "cpu", "ref", "cuda" */

  /* out (B,T,C) = wte[tokens[b,t]] + wpe[t].  tokens (B,T) already validated in [0, V). */
  void (*encoder_forward)(float *out, const int *tokens, const float *wte, const float *wpe, int B,
                          int T, int C);
  /* dwte (V,C) += scatter of dout rows by token; dwpe (maxT,C) += sum over b. Rows are added
   * in (b, t) order so repeated tokens accumulate deterministically. */
  void (*encoder_backward)(float *dwte, float *dwpe, const float *dout, const int *tokens, int B,
                           int T, int C);

  /* out (N,C) = (inp - mean) * rstd * weight + bias, eps 1e-5; saves mean (N) and rstd (N). */
  void (*layernorm_forward)(float *out, float *mean, float *rstd, const float *inp,
                            const float *weight, const float *bias, int N, int C);
  /* dinp (N,C) +=, dweight (C) +=, dbias (C) += */
  void (*layernorm_backward)(float *dinp, float *dweight, float *dbias, const float *dout,
                             const float *inp, const float *weight, const float *mean,
                             const float *rstd, int N, int C);

  /* out (N,OC) = inp (N,C) @ W + bias (OC; may be NULL). W is (C,OC) or (OC,C) per layout. */
  void (*matmul_forward)(float *out, const float *inp, const float *weight, const float *bias,
                         int N, int C, int OC, kernels_wlayout layout);
  /* dinp (N,C) +=; dweight (same shape as W) +=; dbias (OC) += (skipped when NULL). dinp may be
   * NULL when the input needs no gradient. */
  void (*matmul_backward)(float *dinp, float *dweight, float *dbias, const float *dout,
                          const float *inp, const float *weight, int N, int C, int OC,
                          kernels_wlayout layout);

  /* Causal multi-head self-attention. qkv (B,T,3C) holds [q | k | v] per row, head h at
   * columns h*C/NH. Writes out (B,T,C) and saves the softmax probabilities att (B,NH,T,T)
   * (entries above the diagonal are written as 0). Scale 1/sqrt(C/NH). */
  void (*attention_forward)(float *out, float *att, const float *qkv, int B, int T, int C, int NH);
  /* dqkv (B,T,3C) +=. scratch: at least B*NH*T*T floats the op may overwrite. */
  void (*attention_backward)(float *dqkv, float *scratch, const float *dout, const float *qkv,
                             const float *att, int B, int T, int C, int NH);

  /* GELU, tanh approximation (GPT-2's "gelu_new"), elementwise over n floats. */
  void (*gelu_forward)(float *out, const float *inp, size_t n);
  void (*gelu_backward)(float *dinp, const float *inp, const float *dout, size_t n); /* += */

  /* out = a + b;  da += dout, db += dout (n floats). */
  void (*residual_forward)(float *out, const float *a, const float *b, size_t n);
  void (*residual_backward)(float *da, float *db, const float *dout, size_t n);

  /* Softmax + cross-entropy fused with the logits. losses (N) = -log softmax(logits)[target];
   * lse (N) saves each row's log-sum-exp for the backward. targets already validated. */
  void (*crossentropy_forward)(float *losses, float *lse, const float *logits, const int *targets,
                               int N, int V);
  /* WRITES (=) dlogits (N,V) = (softmax(logits) - onehot(target)) * dloss, where dloss is the
   * gradient of the objective w.r.t. each row's loss (e.g. loss_scale / N). dlogits may alias
   * logits (in place). */
  void (*crossentropy_backward)(float *dlogits, const float *logits, const float *lse,
                                const int *targets, float dloss, int N, int V);

  /* One AdamW update of n elements with decoupled weight decay, in PyTorch's order:
   *   g = grad * grad_scale; p *= 1 - lr wd; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2
   *   p -= (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps)
   * bc1 = 1 - b1^t and bc2 = 1 - b2^t are passed in so the op stays stateless. */
  void (*adamw_update)(float *param, const float *grad, float *m, float *v, size_t n, float lr,
                       float b1, float b2, float eps, float wd, float bc1, float bc2,
                       float grad_scale);

  /* ---- memory. Every buffer an op of this table reads or writes comes from its alloc; the
   * host reaches device buffers only through these copies. On the host back ends they are
   * posix_memalign/memcpy/memset, so the CPU path computes exactly what it would on plain
   * host arrays. Sizes are in bytes. ---- */
  int device; /* 0: buffers are host memory (plain pointers); 1: device memory */
  /* Zeroed memory (host back ends: as kernels_cpu_alloc); NULL when it is not available. */
  void *(*alloc)(size_t bytes);
  void (*free)(void *p);                                           /* NULL is fine */
  void (*upload)(void *dst, const void *src_host, size_t bytes);   /* host -> back end */
  void (*download)(void *dst_host, const void *src, size_t bytes); /* back end -> host */
  void (*copy)(void *dst, const void *src, size_t bytes);          /* within the back end */
  void (*zero)(void *p, size_t bytes);
  /* Sum of squares of n floats in double, in an order fixed by n alone (deterministic, the
   * global gradient norm). Host back ends: 64Ki-element blocks summed in block order. */
  double (*sq_norm)(const float *x, size_t n);
  /* Bytes this back end can hold in all: physical memory, or the device's memory. */
  double (*mem_total)(void);
  /* Zeroed HOST memory for staging copies (pipeline activations, gradients for collectives,
   * checkpoints): page-locked on a GPU, so upload/download run at full bus speed and an
   * asynchronous copy may overlap computing; plain kernels_cpu_alloc on the host back ends.
   * NULL when it is not available; free with host_free. */
  void *(*host_alloc)(size_t bytes);
  void (*host_free)(void *p);
  /* Copies that overlap computing, for pipeline activations and gradients on their way to or
   * from the network. On a GPU they run on a copy stream of their own: a download starts after
   * all work queued before it and returns at once; ops queued after an upload wait for it;
   * copy_wait blocks until every such copy has finished (then a downloaded buffer may be sent,
   * an uploaded one's host memory reused). Host buffers must come from host_alloc. Host
   * tables: plain memcpy, and copy_wait has nothing to wait for. */
  void (*download_async)(void *dst_host, const void *src, size_t bytes);
  void (*upload_async)(void *dst, const void *src_host, size_t bytes);
  void (*copy_wait)(void);

  /* Device and precision: NULL on back ends with one device that computes in fp32 (cpu, ref).
   * select_device makes device `index` the calling thread's current one: 0, or -1 with *count
   * set to the devices seen and `why` to the driver's error, if any. set_precision chooses the
   * matmuls' precision for the whole process. Callers use kernels_for_device and
   * kernels_set_precision, which say what is wrong when an entry is missing. */
  int (*select_device)(int index, int *count, char *why, size_t why_len);
  void (*set_precision)(kernels_precision p);

  /* ---- fused ops: optional, NULL where a back end has none; callers then make the separate
   * calls each one names, which give the same results to the tests' tolerances. ---- */
  /* pre (N,OC) = inp @ W + bias (bias may be NULL) and out (N,OC) = gelu(pre): matmul_forward
   * then gelu_forward. inp_bf16: NULL, or a buffer as matmul_forward_keep's. */
  void (*matmul_gelu_forward)(float *out, float *pre, void *inp_bf16, const float *inp,
                              const float *weight, const float *bias, int N, int C, int OC,
                              kernels_wlayout layout);
  /* crossentropy_forward and then crossentropy_backward with dloss, in one pass over the
   * logits: writes losses (N), lse (N) and dlogits (N,V), which must not alias logits (the
   * logits stay readable, e.g. for sampling). */
  void (*crossentropy_forward_backward)(float *losses, float *lse, float *dlogits,
                                        const float *logits, const int *targets, float dloss, int N,
                                        int V);
  /* adamw_update of each of n_tensors tensors of the flat buffers (host array `tensors`,
   * disjoint ranges), each with its own weight decay, in one call. */
  void (*adamw_update_tensors)(float *param, const float *grad, float *m, float *v,
                               const kernels_adamw_tensor *tensors, int n_tensors, float lr,
                               float b1, float b2, float eps, float bc1, float bc2,
                               float grad_scale);
  /* matmul_forward, also leaving inp rounded to bf16 in inp_bf16 (N*C 2-byte values, from
   * alloc), written at every precision; matmul_backward reading that copy where the bf16
   * precision multiplies bf16 inputs, instead of rounding inp again. The caller passes the
   * inp and inp_bf16 of one forward to its backward, with neither changed in between. */
  void (*matmul_forward_keep)(float *out, void *inp_bf16, const float *inp, const float *weight,
                              const float *bias, int N, int C, int OC, kernels_wlayout layout);
  void (*matmul_backward_kept)(float *dinp, float *dweight, float *dbias, const float *dout,
                               const float *inp, const void *inp_bf16, const float *weight, int N,
                               int C, int OC, kernels_wlayout layout);
} kernels_ops;

/* The one registration point: "cpu", "ref" or "cuda". Returns NULL for an unknown name or a
 * back end not built into this binary ("cuda" in a CPU-only build). Tables are static. */
const kernels_ops *kernels_backend(const char *name);

/* The back end for a device name, the one parser of the `--device` string that every program
 * (wantrain train|eval|sample, bench-train, the runtime, peerd) takes:
 *   "cpu"             the fast CPU back end
 *   "cuda", "cuda:N"  the CUDA back end on GPU N (default 0), made the calling thread's
 *                     current device
 * Returns WT_OK with *ops set; WT_EINVAL for a malformed name (a usage error: exit 2);
 * WT_ENOTSUP when this build has no CUDA back end, or the GPU is not there (cudaGetDeviceCount
 * says how many there are, or why none can be seen), each with a message saying what to do. */
int kernels_for_device(const char *name, const kernels_ops **ops);

/* Sets the precision of back end `ops` for the rest of the process (the CUDA back end's math
 * is process-wide). Returns WT_OK, or WT_ENOTSUP for TF32/BF16 on a host back end, with a
 * message saying to drop the flag or use a GPU. */
int kernels_set_precision(const kernels_ops *ops, kernels_precision p);

/* Parses "fp32" / "bf16" (with tf32 = 1: fp32 -> TF32) for the --precision/--tf32 flags.
 * Returns WT_OK, or WT_EINVAL naming the bad value. */
int kernels_parse_precision(const char *name, int tf32, kernels_precision *p);

/* Shortcuts for the always-present CPU tables. */
const kernels_ops *kernels_cpu(void);
const kernels_ops *kernels_ref(void);

/* Loads OpenBLAS (libopenblas.so.0) for the "cpu" back end; call it early in main() to learn
 * about a missing library as a status rather than as an abort at the first matmul, which loads
 * it otherwise. Call it before other threads start (the load sets environment variables for a
 * moment); later calls, and the lazy load, return the first call's result.
 *
 * The library is opened with dlopen so that its kernels can still be chosen: Debian 12's
 * OpenBLAS 0.3.21 falls back to its Prescott (SSE3) kernels, ~5x slower, on CPUs it does not
 * know (Sapphire Rapids class). When it reports such a generic core on a CPU with AVX-512 (F,
 * BW, DQ, VL), it is closed and opened again with OPENBLAS_CORETYPE=SkylakeX; a core it chose
 * itself otherwise stands. A value the user set is left alone (the override, e.g.
 * OPENBLAS_CORETYPE=Haswell); if OpenBLAS is already loaded in the process its choice stands.
 * Variables set for the load are removed after it: the host's environment does not change.
 *
 * Threads: OpenBLAS runs single-threaded and the back end splits each sgemm over its OpenMP
 * threads, so one pool serves every op. How idle OpenMP threads wait is the host's choice,
 * read by libgomp when it loads: the programs choose OMP_WAIT_POLICY=PASSIVE through
 * wt_program_init (idle threads otherwise spin on cores the other jobs need, and steps get many
 * times slower; docs/performance.md has numbers). The tests run that way.
 * Returns WT_OK, or WT_ENOTFOUND with a message naming the library and the package to
 * install. */
int kernels_cpu_init(void);

/* Zeroed host memory for float buffers: 64-byte aligned; buffers of 2 MiB or more are 2 MiB
 * aligned with transparent huge pages requested (madvise), which cuts page faults and TLB misses
 * on parameters, gradients and optimizer state. Returns NULL if the memory is not available.
 * Free with kernels_cpu_free (NULL is fine). */
void *kernels_cpu_alloc(size_t bytes);
void kernels_cpu_free(void *p);

/* The BLAS core in use, e.g. "SkylakeX" or "Prescott" (OpenBLAS' own name), loading OpenBLAS
 * if needed; "unavailable" when it cannot be loaded. Never NULL. */
const char *kernels_blas_corename(void);

/* OpenMP threads the CPU back end uses, sgemm included (OMP_NUM_THREADS; default: all
 * cores). */
int kernels_cpu_threads(void);

#endif
