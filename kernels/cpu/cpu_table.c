/* cpu_table — the fast CPU back end's ops table. */
#include "kernels/cpu/cpu_internal.h"

const kernels_ops kernels_cpu_table = WT_KERNELS_TABLE("cpu", kernels_cpu);
