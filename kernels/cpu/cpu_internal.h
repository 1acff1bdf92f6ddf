/* cpu_internal — private to kernels/: the two CPU back ends' ops tables and their per-op
 * functions (one file per op pair under kernels/cpu/). */
#ifndef WT_KERNELS_CPU_INTERNAL_H
#define WT_KERNELS_CPU_INTERNAL_H

#include "kernels/kernels.h"
#ifdef _OPENMP
#include <omp.h>
#endif

extern const kernels_ops kernels_cpu_table; /* cpu/cpu_table.c */
extern const kernels_ops kernels_ref_table; /* cpu/ref_table.c */

/* Fast CPU ops (kernels_cpu_*) and reference ops (kernels_ref_*): see kernels.h for the
 * contract of each. */
#define WT_KERNELS_DECLARE(prefix)                                                                 \
  void prefix##_encoder_forward(float *out, const int *tokens, const float *wte, const float *wpe, \
                                int B, int T, int C);                                              \
  void prefix##_encoder_backward(float *dwte, float *dwpe, const float *dout, const int *tokens,   \
                                 int B, int T, int C);                                             \
  void prefix##_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,          \
                                  const float *weight, const float *bias, int N, int C);           \
  void prefix##_layernorm_backward(float *dinp, float *dweight, float *dbias, const float *dout,   \
                                   const float *inp, const float *weight, const float *mean,       \
                                   const float *rstd, int N, int C);                               \
  void prefix##_matmul_forward(float *out, const float *inp, const float *weight,                  \
                               const float *bias, int N, int C, int OC, kernels_wlayout layout);   \
  void prefix##_matmul_backward(float *dinp, float *dweight, float *dbias, const float *dout,      \
                                const float *inp, const float *weight, int N, int C, int OC,       \
                                kernels_wlayout layout);                                           \
  void prefix##_attention_forward(float *out, float *att, const float *qkv, int B, int T, int C,   \
                                  int NH);                                                         \
  void prefix##_attention_backward(float *dqkv, float *scratch, const float *dout,                 \
                                   const float *qkv, const float *att, int B, int T, int C,        \
                                   int NH);                                                        \
  void prefix##_gelu_forward(float *out, const float *inp, size_t n);                              \
  void prefix##_gelu_backward(float *dinp, const float *inp, const float *dout, size_t n);         \
  void prefix##_residual_forward(float *out, const float *a, const float *b, size_t n);            \
  void prefix##_residual_backward(float *da, float *db, const float *dout, size_t n);              \
  void prefix##_crossentropy_forward(float *losses, float *lse, const float *logits,               \
                                     const int *targets, int N, int V);                            \
  void prefix##_crossentropy_backward(float *dlogits, const float *logits, const float *lse,       \
                                      const int *targets, float dloss, int N, int V);              \
  void prefix##_adamw_update(float *param, const float *grad, float *m, float *v, size_t n,        \
                             float lr, float b1, float b2, float eps, float wd, float bc1,         \
                             float bc2, float grad_scale);

WT_KERNELS_DECLARE(kernels_cpu)
WT_KERNELS_DECLARE(kernels_ref)

/* C (M,N) = op(A) (M,K) @ op(B) (K,N) + beta * C, row-major, op = transpose when trans_x is 1:
 * OpenBLAS sgemm (cpu/blas.c), one call per OpenMP thread on a slice of C. Loads OpenBLAS on
 * first use; aborts with a message when it cannot be loaded (kernels_cpu_init reports that
 * earlier as a status). Same shapes and thread count give bitwise the same C. */
void kernels_cpu_sgemm(int trans_a, int trans_b, int M, int N, int K, const float *A, int lda,
                       const float *B, int ldb, float beta, float *C, int ldc);

/* Memory entries shared by both host tables (cpu/memory.c, cpu/norm.c). */
void kernels_cpu_upload(void *dst, const void *src, size_t bytes);
void kernels_cpu_download(void *dst, const void *src, size_t bytes);
void kernels_cpu_copy(void *dst, const void *src, size_t bytes);
void kernels_cpu_zero(void *p, size_t bytes);
double kernels_cpu_sq_norm(const float *x, size_t n);
double kernels_cpu_mem_total(void);
void kernels_cpu_copy_wait(void);

/* Fills a table named `name` with the ops of one prefix and the host memory entries. */
#define WT_KERNELS_TABLE(name_, prefix)                                                            \
  {                                                                                                \
    .name = name_, .encoder_forward = prefix##_encoder_forward,                                    \
    .encoder_backward = prefix##_encoder_backward,                                                 \
    .layernorm_forward = prefix##_layernorm_forward,                                               \
    .layernorm_backward = prefix##_layernorm_backward, .matmul_forward = prefix##_matmul_forward,  \
    .matmul_backward = prefix##_matmul_backward, .attention_forward = prefix##_attention_forward,  \
    .attention_backward = prefix##_attention_backward, .gelu_forward = prefix##_gelu_forward,      \
    .gelu_backward = prefix##_gelu_backward, .residual_forward = prefix##_residual_forward,        \
    .residual_backward = prefix##_residual_backward,                                               \
    .crossentropy_forward = prefix##_crossentropy_forward,                                         \
    .crossentropy_backward = prefix##_crossentropy_backward,                                       \
    .adamw_update = prefix##_adamw_update, .device = 0, .alloc = kernels_cpu_alloc,                \
    .free = kernels_cpu_free, .upload = kernels_cpu_upload, .download = kernels_cpu_download,      \
    .copy = kernels_cpu_copy, .zero = kernels_cpu_zero, .sq_norm = kernels_cpu_sq_norm,            \
    .mem_total = kernels_cpu_mem_total, .host_alloc = kernels_cpu_alloc,                           \
    .host_free = kernels_cpu_free, .download_async = kernels_cpu_download,                         \
    .upload_async = kernels_cpu_upload, .copy_wait = kernels_cpu_copy_wait                         \
  }

#endif
