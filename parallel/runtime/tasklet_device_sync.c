/* tasklet_device_sync — the sparse gradient sync (topk / randk) of a stage on a GPU, encoded on
 * the device: the GPU codec (compress/codec_gpu.h) encodes the device gradient, with the error
 * feedback residual kept on the device too, and only the payload (k indices and values, 1% of
 * the gradient at the default k) is downloaded for the all-gather. The sum of the replicas'
 * payloads is decoded on the host and uploaded once.
 *
 * The GPU codec writes the CPU codec's bytes and residual bit for bit, so this computes what the
 * host path (download the gradient, compress_ef_encode, parallel_allreduce_sparse) computes.
 * It needs the gradient in CUDA memory (a test back end that only acts as a device, such as
 * tests/runtime/hostdev.h, takes the host path).
 * The residual's copy in k->sef stays the one checkpoints save and load: it is mirrored from
 * the device before a save and back after a load. The host path runs instead where the host
 * has to see the whole gradient: robust sync, ZeRO-1, DiLoCo, spot checks or a test's tamper
 * hook, or a codec or build without GPU kernels; and, with a warning, when the device buffers
 * do not fit. */
#include "parallel/runtime/tasklet_internal.h"

#include "common/common.h"
#include "compress/codec_gpu.h"

/* Whether this tasklet's sync takes the device path (decided once, at its first sync). */
static int s_wanted(const parallel_tasklet *k, const float *g) {
  return k->ops->device && k->codec && k->sparse && compress_gpu_supported(k->codec) &&
         compress_gpu_is_device_memory(g) && !k->robust && !k->zero && !k->outer && !k->spot_row &&
         !k->cfg.test_tamper;
}

/* Device residual (from k->sef's), payload buffers and the host sum; WT_ENOMEM if short. */
static int s_setup(parallel_tasklet *k, size_t n) {
  parallel_tasklet_dsync *d = &k->dsync;
  d->cap = compress_codec_max_size(k->codec, n);
  d->payload = k->ops->alloc(d->cap ? d->cap : 1);
  d->payload_host = k->ops->host_alloc(d->cap ? d->cap : 1);
  d->sum_host = k->ops->host_alloc(n * sizeof(float));
  if (k->sef && (d->residual = k->ops->alloc(n * sizeof(float))))
    k->ops->upload(d->residual, compress_ef_residual(k->sef), n * sizeof(float));
  if (!d->payload || !d->payload_host || !d->sum_host || (k->sef && !d->residual)) {
    parallel_tasklet_device_sync_free(k);
    return wt_fail(WT_ENOMEM, "tasklet: no memory for the device-side gradient sync (%zu floats)",
                   n);
  }
  return WT_OK;
}

int parallel_tasklet_device_sync(parallel_tasklet *k, float *g, size_t n) {
  parallel_tasklet_dsync *d = &k->dsync;
  if (!d->decided) {
    d->decided = 1;
    if (s_wanted(k, g) && s_setup(k, n) != WT_OK) {
      WT_WARN("%s; stage %d replica %d syncs its gradient through the host", wt_last_error(),
              k->cfg.stage, k->cfg.replica);
    } else if (d->payload) {
      WT_INFO("tasklet: stage %d replica %d encodes its %s gradient on the device (at most %zu "
              "of its %zu bytes leave the device)",
              k->cfg.stage, k->cfg.replica, compress_codec_name(k->codec), k->dsync.cap,
              n * sizeof(float));
    }
  }
  if (!d->payload) return 0;
  size_t len = 0;
  int rc = d->residual
               ? compress_gpu_ef_encode(k->codec, d->residual, g, n, d->payload, d->cap, &len)
               : compress_gpu_encode(k->codec, g, n, d->payload, d->cap, &len);
  if (rc != WT_OK) return rc;
  k->ops->download(d->payload_host, d->payload, len);
  WT_CHECK(parallel_allreduce_sparse_payload(k->dp, k->codec, d->payload_host, len, d->sum_host, n,
                                             PARALLEL_OP_AVG));
  k->ops->upload(g, d->sum_host, n * sizeof(float));
  return 1;
}

void parallel_tasklet_device_sync_residual_down(parallel_tasklet *k) {
  if (!k->dsync.residual || !k->sef) return;
  size_t n = compress_ef_size(k->sef);
  k->ops->download(compress_ef_residual_data(k->sef), k->dsync.residual, n * sizeof(float));
}

void parallel_tasklet_device_sync_residual_up(parallel_tasklet *k) {
  if (!k->dsync.residual || !k->sef) return;
  size_t n = compress_ef_size(k->sef);
  k->ops->upload(k->dsync.residual, compress_ef_residual(k->sef), n * sizeof(float));
}

void parallel_tasklet_device_sync_free(parallel_tasklet *k) {
  parallel_tasklet_dsync *d = &k->dsync;
  if (d->payload) k->ops->free(d->payload);
  if (d->residual) k->ops->free(d->residual);
  if (d->payload_host) k->ops->host_free(d->payload_host);
  if (d->sum_host) k->ops->host_free(d->sum_host);
  d->payload = d->payload_host = NULL;
  d->residual = d->sum_host = NULL;
}
