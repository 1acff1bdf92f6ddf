/* cpu_table — the fast CPU back end's ops table (stub: filled in as ops land). */
#include "backends.h"

const kernels_ops kernels_cpu_table = {.name = "cpu"};
