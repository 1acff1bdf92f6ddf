/* gen_corpus — writes seed inputs for the fuzz targets: for each codec, valid raw payloads and
 * valid wire messages of a few shapes, in the input layout of fuzz_codec.h.
 *   gen_corpus OUTDIR      creates OUTDIR/<codec>/seed-*
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "compress/codec.h"
#include "common/common.h"
#include "common/rng.h"

static int s_write(const char *dir, const char *codec, int i, size_t n, size_t block,
                   const uint8_t *body, size_t len) {
  char path[4096];
  snprintf(path, sizeof path, "%s/%s/seed-%d", dir, codec, i);
  FILE *f = fopen(path, "wb");
  if (!f) return wt_fail(WT_EIO, "cannot create %s", path);
  uint8_t head[4] = {(uint8_t)n, (uint8_t)(n >> 8), (uint8_t)block, (uint8_t)(block >> 8)};
  int ok = fwrite(head, 1, 4, f) == 4 && fwrite(body, 1, len, f) == len;
  return fclose(f) == 0 && ok ? WT_OK : wt_fail(WT_EIO, "cannot write %s", path);
}

static int s_seeds(const char *dir, const char *name) {
  static const size_t shapes[][2] = {{0, 64}, {1, 64}, {100, 7}, {257, 64}, {1000, 299}};
  char sub[4096];
  snprintf(sub, sizeof sub, "%s/%s", dir, name);
  mkdir(sub, 0755);
  wt_rng rng;
  wt_rng_seed(&rng, 1);
  for (size_t s = 0; s < WT_ARRAY_LEN(shapes); s++) {
    size_t n = shapes[s][0];
    compress_params p = compress_params_default();
    p.block = shapes[s][1];
    p.k_frac = 0.05;
    compress_codec *c = NULL;
    WT_CHECK_NEW(c, compress_codec_new(name, &p));
    float *x = wt_xmalloc((n + 1) * sizeof *x);
    for (size_t i = 0; i < n; i++) x[i] = (float)wt_rng_normal(&rng);
    size_t cap = compress_wire_max_size(c, n), len = 0;
    uint8_t *buf = wt_xmalloc(cap);
    int rc = compress_codec_encode(c, x, n, buf, cap, &len);
    if (rc == WT_OK) rc = s_write(dir, name, (int)(2 * s), n, p.block, buf, len);
    if (rc == WT_OK) rc = compress_wire_encode(c, x, n, buf, cap, &len);
    if (rc == WT_OK) rc = s_write(dir, name, (int)(2 * s + 1), n, p.block, buf, len);
    free(buf), free(x);
    compress_codec_destroy(&c);
    WT_CHECK(rc);
  }
  return WT_OK;
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: gen_corpus OUTDIR\n");
    return 2;
  }
  mkdir(argv[1], 0755);
  const char *names = compress_codec_names(), *p = names;
  while (*p) { // walk "a|b|c"
    char name[32];
    size_t k = strcspn(p, "|");
    snprintf(name, sizeof name, "%.*s", (int)k, p);
    if (s_seeds(argv[1], name) != WT_OK) {
      fprintf(stderr, "gen_corpus: %s\n", wt_last_error());
      return 1;
    }
    p += k + (p[k] == '|');
  }
  return 0;
}
