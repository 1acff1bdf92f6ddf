/* cuda_table — the CUDA back end's ops table. Pointers passed to these ops are device pointers.
 * The table exists whenever the binary was built with CUDA; whether a device is present is for
 * the caller to ask (cudaGetDeviceCount), as the gpu-labelled tests do. */
#include "kernels/cuda/cuda_internal.cuh"

static const kernels_ops s_cuda_table = {
    "cuda",
    kernels_cuda_encoder_forward,
    kernels_cuda_encoder_backward,
    kernels_cuda_layernorm_forward,
    kernels_cuda_layernorm_backward,
    kernels_cuda_matmul_forward,
    kernels_cuda_matmul_backward,
    kernels_cuda_attention_forward,
    kernels_cuda_attention_backward,
    kernels_cuda_gelu_forward,
    kernels_cuda_gelu_backward,
    kernels_cuda_residual_forward,
    kernels_cuda_residual_backward,
    kernels_cuda_crossentropy_forward,
    kernels_cuda_crossentropy_backward,
    kernels_cuda_adamw_update,
    1, /* device: buffers are GPU memory */
    kernels_cuda_alloc,
    kernels_cuda_free,
    kernels_cuda_upload,
    kernels_cuda_download,
    kernels_cuda_copy,
    kernels_cuda_zero,
    kernels_cuda_sq_norm,
    kernels_cuda_mem_total,
    kernels_cuda_host_alloc,
    kernels_cuda_host_free,
    kernels_cuda_download_async,
    kernels_cuda_upload_async,
    kernels_cuda_copy_wait,
    kernels_cuda_select,
    kernels_cuda_set_precision,
    kernels_cuda_matmul_gelu_forward,
    kernels_cuda_crossentropy_forward_backward,
    kernels_cuda_adamw_update_tensors,
    kernels_cuda_matmul_forward_keep,
    kernels_cuda_matmul_backward_kept,
};

extern "C" const kernels_ops *kernels_cuda(void) {
  return &s_cuda_table;
}
