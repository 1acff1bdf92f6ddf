/* codec_gpu — the codecs of codec.h on GPU buffers, writing and reading the same wire bytes as
 * the CPU codecs, so that a GPU peer and a CPU peer decode each other's messages.
 *
 * x, y and the payload are device pointers (cudaMalloc'd, or anything 4-byte aligned in device
 * memory); the caller copies the payload to the host to send it. Calls are asynchronous on the
 * default stream, like the kernels back end's ops: a later copy to the host waits for them.
 *
 * On the GPU: fp32, fp16, bf16, int8 and int4 (nearest-even rounding) and sign at any block
 * size; topk (a radix select: the CPU's exact k, ties to the lowest indices; n <= INT_MAX) and
 * randk (the CPU's index list, drawn on the device by compress/randk_draw.h); error feedback over any of them
 * (compress_gpu_ef_encode) and AC-SGD's row quantizer. All give bitwise the CPU's bytes and
 * decodes (decode_add: fmaf, one rounding). Stochastic rounding stays on the host (WT_ENOTSUP,
 * with a message). Builds without CUDA return WT_ENOTSUP from every call.
 *
 * Decoding checks the payload length against n and the block size before anything runs
 * (WT_ECORRUPT; nothing is written to y).
 */
#ifndef WT_COMPRESS_CODEC_GPU_H
#define WT_COMPRESS_CODEC_GPU_H

#include <stddef.h>

#include <stdint.h>

#include "compress/codec.h"

/* Whether the codec with these parameters runs on the GPU in this build (1) or not (0). */
int compress_gpu_supported(const compress_codec *c);

/* 1 when p points into a CUDA device's memory (what the calls below read and write), 0 for
 * host memory, memory of another kind, or a build without CUDA. */
int compress_gpu_is_device_memory(const void *p);

/* As compress_codec_encode, from device x[0..n) into device out[0..cap). */
int compress_gpu_encode(const compress_codec *c, const float *x, size_t n, void *out, size_t cap,
                        size_t *len);

/* As compress_codec_decode / _decode_add, from a device payload into device y[0..n). */
int compress_gpu_decode(const compress_codec *c, const void *in, size_t len, float *y, size_t n);
int compress_gpu_decode_add(const compress_codec *c, const void *in, size_t len, float alpha,
                            float *y, size_t n);

/* Error feedback (ef.h) with a residual r[0..n) in device memory that the caller
 * owns (zeroed at the start; download it to checkpoint it): r += g; payload = encode(r);
 * r -= decode(payload). Bitwise the CPU's compress_ef_encode with the same codec: same payload,
 * same residual. Refuses (WT_EINVAL) before r changes when cap is too small. */
int compress_gpu_ef_encode(const compress_codec *c, float *r, const float *g, size_t n, void *out,
                           size_t cap, size_t *len);

/* AC-SGD's per-row affine quantizer (acsgd.h: acsgd_quantize_rows / acsgd_dequantize_rows) on
 * device buffers, the same payload bytes and the same decoded bits as the CPU functions, so
 * both sides of a pipeline cut keep bitwise equal caches whichever runs on a GPU. Same
 * refusals: WT_EINVAL for bits not 2/4/8 or a row holding a NaN or Inf, WT_ECORRUPT (nothing
 * written) for a row whose lo/step is not finite or negative. */
int compress_gpu_acsgd_quantize_rows(const float *x, int rows, int cols, int bits,
                                     uint8_t *payload);
int compress_gpu_acsgd_dequantize_rows(const uint8_t *payload, int rows, int cols, int bits,
                                       float *out, int add);

#endif
