/* site — a site of several GPUs presented to the WAN solvers as one device whose compute and
 * memory are the group's (assign.h). */
#include "assign/assign.h"

#include "common/common.h"

#include <math.h>

int assign_site_device(int gpus, double efficiency, double gpu_speed, double gpu_memory_bytes,
                       double *site_speed, double *site_memory_bytes) {
  if (gpus < 1 || !(efficiency > 0 && efficiency <= 1) || !(gpu_speed > 0) ||
      !isfinite(gpu_speed) || !(gpu_memory_bytes >= 0) || !isfinite(gpu_memory_bytes))
    return wt_fail(WT_EINVAL,
                   "site: %d GPUs (>= 1), efficiency %g (in (0, 1]), speed %g (> 0) and memory "
                   "%g bytes (>= 0) do not describe a site; fix the site's description",
                   gpus, efficiency, gpu_speed, gpu_memory_bytes);
  *site_speed = gpu_speed * gpus * efficiency;
  *site_memory_bytes = gpu_memory_bytes * gpus;
  return WT_OK;
}
