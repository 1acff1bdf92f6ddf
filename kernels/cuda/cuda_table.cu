/* cuda_table — the CUDA back end's ops table. Pointers passed to these ops are device pointers.
 * The table exists whenever the binary was built with CUDA; whether a device is present is for
 * the caller to ask (cudaGetDeviceCount), as the gpu-labelled tests do. */
#include "kernels/cuda/cuda_common.cuh"

static const kernels_ops s_cuda_table = {
    "cuda",
    cuda_encoder_forward,
    cuda_encoder_backward,
    cuda_layernorm_forward,
    cuda_layernorm_backward,
    cuda_matmul_forward,
    cuda_matmul_backward,
    cuda_attention_forward,
    cuda_attention_backward,
    cuda_gelu_forward,
    cuda_gelu_backward,
    cuda_residual_forward,
    cuda_residual_backward,
    cuda_crossentropy_forward,
    cuda_crossentropy_backward,
    cuda_adamw_update,
};

extern "C" const kernels_ops *kernels_cuda(void) { return &s_cuda_table; }
