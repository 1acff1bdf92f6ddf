/* test_checkpoint_torch — PyTorch reads the model.safetensors that checkpoint_save writes: a
 * Python script parses it the safetensors way (u64 length, JSON header, torch.frombuffer per
 * data_offsets), checks the key set against GPT2Model's state dict for the config in
 * __metadata__, and prints each tensor's sum, which must equal the sum C computes.
 * Skips (77) where /usr/bin/python3 cannot import torch. */
#include "model/checkpoint.h"
#include "common/common.h"
#include "common/testing.h"

#include <stdlib.h>

#include <string.h>

static const char *s_script =
    "import json, struct, sys, torch\n"
    "raw = open(sys.argv[1], 'rb').read()\n"
    "n = struct.unpack('<Q', raw[:8])[0]\n"
    "h = json.loads(raw[8:8 + n])\n"
    "meta = h.pop('__metadata__')\n"
    "L = int(meta['n_layer'])\n"
    "want = ['wte.weight', 'wpe.weight', 'ln_f.weight', 'ln_f.bias']\n"
    "for i in range(L):\n"
    "  for p in ['ln_1', 'attn.c_attn', 'attn.c_proj', 'ln_2', 'mlp.c_fc', 'mlp.c_proj']:\n"
    "    want += ['h.%d.%s.weight' % (i, p), 'h.%d.%s.bias' % (i, p)]\n"
    "assert sorted(want) == sorted(h), 'keys differ from GPT2Model'\n"
    "sd = {}\n"
    "for k, v in h.items():\n"
    "  b, e = v['data_offsets']\n"
    "  t = torch.frombuffer(bytearray(raw[8 + n + b:8 + n + e]), dtype=torch.float32)\n"
    "  sd[k] = t.reshape(v['shape'])\n"
    "C = int(meta['channels'])\n"
    "assert sd['h.0.attn.c_attn.weight'].shape == (C, 3 * C)\n"
    "assert sd['h.0.mlp.c_proj.weight'].shape == (4 * C, C)\n"
    "for k in sorted(sd): print(k, repr(sd[k].double().sum().item()))\n";

int main(void) {
  if (system("/usr/bin/python3 -c 'import torch' >/dev/null 2>&1") != 0) {
    printf("test_checkpoint_torch: /usr/bin/python3 with torch not available; skipped\n");
    return WT_TEST_SKIP;
  }
  char tmp[512], dir[600], script[600], cmd[2000];
  wt_test_tmpdir(tmp, sizeof tmp);
  snprintf(dir, sizeof dir, "%s/run", tmp);
  gpt_config cfg = {.vocab_size = 256, .max_seq = 32, .n_layer = 3, .n_head = 2, .channels = 16};
  gpt_stage *m = gpt_stage_new(&cfg, 0, 3, 1, 32);
  WT_TEST_REQUIRE(m, "%s", wt_last_error());
  gpt_stage_init_weights(m, 42);
  checkpoint_meta meta = {.step = 1, .tokenizer = DATA_TOKENIZER_BYTES};
  WT_TEST_REQUIRE(checkpoint_save(dir, m, NULL, &meta, 1) == WT_OK, "%s", wt_last_error());
  snprintf(script, sizeof script, "%s/read.py", tmp);
  FILE *f = fopen(script, "w");
  fputs(s_script, f);
  fclose(f);
  snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s %s/step-00000001/model.safetensors", script, dir);
  FILE *p = popen(cmd, "r");
  char name[128];
  double sum;
  int seen = 0;
  size_t np;
  const float *params = gpt_stage_params(m, &np);
  while (p && fscanf(p, "%127s %lf", name, &sum) == 2) {
    for (int i = 0; i < gpt_stage_num_tensors(m); i++) {
      const gpt_tensor_info *t = gpt_stage_tensor(m, i);
      if (strcmp(t->name, name)) continue;
      double want = 0;
      for (size_t j = 0; j < t->numel; j++) want += params[t->offset + j];
      WT_TEST_CLOSE(sum, want, 1e-9, 1e-9, name);
      seen++;
    }
  }
  int rc = p ? pclose(p) : -1;
  WT_TEST_ASSERT(rc == 0, "python reader exit status %d", rc);
  WT_TEST_ASSERT(seen == gpt_stage_num_tensors(m), "torch read %d of %d tensors", seen,
                 gpt_stage_num_tensors(m));
  gpt_stage_destroy(&m);
  if (!wt_test_failures) { /* scratch is kept when a check failed, for a look at it */
    char rm[700];
    snprintf(rm, sizeof rm, "rm -rf '%s'", tmp);
    if (system(rm) != 0) fprintf(stderr, "could not remove %s\n", tmp);
  }
  return wt_test_finish("test_checkpoint_torch");
}
