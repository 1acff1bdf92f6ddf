/* backends — private to kernels/: the static ops tables each back end defines, and the
 * per-op functions of the CPU back ends (one file per op pair under kernels/cpu/). */
#ifndef WT_KERNELS_BACKENDS_H
#define WT_KERNELS_BACKENDS_H

#include "kernels.h"

extern const kernels_ops kernels_cpu_table; /* cpu/cpu_table.c */
extern const kernels_ops kernels_ref_table; /* cpu/ref_table.c */
#ifdef WT_KERNELS_HAVE_CUDA
const kernels_ops *kernels_cuda(void); /* kernels/cuda */
#endif

#endif
