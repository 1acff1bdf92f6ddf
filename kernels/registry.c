/* registry — the one place that knows which kernels back ends this binary holds, and the one
 * parser of device names. Device selection and precision go through each table's entries. */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "kernels/cpu/cpu_internal.h"

#ifdef WT_KERNELS_HAVE_CUDA
const kernels_ops *kernels_cuda(void); /* kernels/cuda/cuda_table.cu */
#else
static const kernels_ops *kernels_cuda(void) {
  return NULL; /* not built into this binary */
}
#endif

const kernels_ops *kernels_backend(const char *name) {
  if (!name) return NULL;
  if (strcmp(name, "cpu") == 0) return &kernels_cpu_table;
  if (strcmp(name, "ref") == 0) return &kernels_ref_table;
  if (strcmp(name, "cuda") == 0) return kernels_cuda();
  return NULL;
}

/* "cuda" or "cuda:N" with N a decimal GPU index in [0, 1023]; -1 for anything else. */
static int s_cuda_index(const char *name) {
  if (strncmp(name, "cuda", 4) != 0) return -1;
  if (name[4] == '\0') return 0;
  if (name[4] != ':' || !isdigit((unsigned char)name[5]) || strlen(name + 5) > 4) return -1;
  for (const char *p = name + 5; *p; p++)
    if (!isdigit((unsigned char)*p)) return -1;
  int n = atoi(name + 5);
  return n <= 1023 ? n : -1;
}

int kernels_for_device(const char *name, const kernels_ops **ops) {
  if (!name || !ops) return wt_fail(WT_EINVAL, "no device name given; use cpu or cuda:N");
  if (strcmp(name, "cpu") == 0) {
    *ops = &kernels_cpu_table;
    return WT_OK;
  }
  int dev = s_cuda_index(name);
  if (dev < 0)
    return wt_fail(WT_EINVAL, "device '%s' is not cpu, cuda or cuda:N (N a GPU index, e.g. cuda:0)",
                   name);
  const kernels_ops *gpu = kernels_backend("cuda");
  if (!gpu)
    return wt_fail(WT_ENOTSUP,
                   "device %s: this build has no CUDA back end (configure with -DWANTRAIN_CUDA=ON "
                   "on a machine with the CUDA toolkit), or use --device cpu",
                   name);
  char why[256] = "";
  int count = 0;
  if (gpu->select_device(dev, &count, why, sizeof why) != 0)
    return wt_fail(WT_ENOTSUP,
                   "no CUDA device %d (cudaGetDeviceCount says %d%s%s): run on a machine with "
                   "that GPU and its driver, or use --device cpu",
                   dev, count, why[0] ? ": " : "", why);
  *ops = gpu;
  return WT_OK;
}

int kernels_parse_precision(const char *name, int tf32, kernels_precision *p) {
  if (name && strcmp(name, "fp32") == 0)
    *p = tf32 ? KERNELS_PREC_TF32 : KERNELS_PREC_FP32;
  else if (name && strcmp(name, "bf16") == 0)
    *p = KERNELS_PREC_BF16; /* bf16 inputs already include what TF32 would allow */
  else
    return wt_fail(WT_EINVAL, "precision '%s' is not fp32 or bf16", name ? name : "");
  return WT_OK;
}

int kernels_set_precision(const kernels_ops *ops, kernels_precision p) {
  static const char *const names[] = {"fp32", "tf32", "bf16"};
  if ((int)p < 0 || (int)p > 2) return wt_fail(WT_EINVAL, "unknown precision %d", (int)p);
  if (ops && ops->set_precision) {
    ops->set_precision(p);
    return WT_OK;
  }
  if (p != KERNELS_PREC_FP32)
    return wt_fail(WT_ENOTSUP,
                   "%s matmuls need a GPU: the %s back end computes in fp32 only; drop "
                   "--precision bf16 / --tf32, or run with --device cuda:N",
                   names[p], ops ? ops->name : "?");
  return WT_OK;
}

const kernels_ops *kernels_cpu(void) {
  return &kernels_cpu_table;
}
const kernels_ops *kernels_ref(void) {
  return &kernels_ref_table;
}
