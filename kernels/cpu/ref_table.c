/* ref_table — the reference back end's ops table (plain loops, one thread). */
#include "kernels/cpu/cpu_internal.h"

const kernels_ops kernels_ref_table = WT_KERNELS_TABLE("ref", kernels_ref);
