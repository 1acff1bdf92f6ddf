/* ref_table — the reference back end's ops table (stub: filled in as ops land). */
#include "backends.h"

const kernels_ops kernels_ref_table = {.name = "ref"};
