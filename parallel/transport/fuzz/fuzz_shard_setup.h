/* fuzz_shard_setup — the scratch store the shard fuzz targets serve from: one shard (run 1,
 * step 40, stage 1, replica 0: model.safetensors, state.json, SHA256SUMS, the .state file) under
 * a temp root, and a file beside the run directory that no answer may ever contain. Included by
 * fuzz_shard_request.c and fuzz_shard_sealed.c after shards.c. */
#ifndef WT_FUZZ_SHARD_SETUP_H
#define WT_FUZZ_SHARD_SETUP_H

#define FUZZ_SECRET "SECRET-outside-the-run-directory"

static char fuzz_root[256];

static void fuzz_write(const char *path, const char *text) {
  FILE *f = fopen(path, "wb");
  if (!f || fputs(text, f) < 0) abort();
  fclose(f);
}

static void fuzz_remove_root(void) {
  s_remove_tree(fuzz_root);
}

/* Makes the store once; removed when the fuzzer exits. */
static void fuzz_setup_store(void) {
  if (fuzz_root[0]) return;
  snprintf(fuzz_root, sizeof fuzz_root, "/tmp/fuzz-shards-XXXXXX");
  if (!mkdtemp(fuzz_root)) abort();
  atexit(fuzz_remove_root);
  char dir[512], path[600];
  snprintf(dir, sizeof dir, "%s/0000000000000001/stage-1/step-00000040", fuzz_root);
  if (s_mkdirs(dir) != WT_OK) abort();
  snprintf(path, sizeof path, "%s/model.safetensors", dir);
  fuzz_write(path, "model-bytes");
  snprintf(path, sizeof path, "%s/state.json", dir);
  fuzz_write(path, "{\"step\": 40}\n");
  snprintf(path, sizeof path, "%s/SHA256SUMS", dir);
  fuzz_write(path,
             "5c4a3dd4bc4a0ba4bd2e3e2b2dfd8f5ba3a3fd6bbff3a2cb0be69b6bd4eb1d0f  model.safetensors\n"
             "1f3a1e7f1b5c3a84e1a0a2df1f0e6b43cc6d0e7cb5e43a4e9b16e3d6b8f0c2a1  state.json\n");
  snprintf(path, sizeof path, "%s/0000000000000001/stage-1/replica-0-step-00000040.state",
           fuzz_root);
  fuzz_write(path, "WTTS-state-bytes");
  snprintf(path, sizeof path, "%s/secret", fuzz_root);
  fuzz_write(path, FUZZ_SECRET);
  snprintf(path, sizeof path, "%s/0000000000000001/secret", fuzz_root);
  fuzz_write(path, FUZZ_SECRET);
}

/* A server that is only its root, its keys and its counters: what answering needs. */
static parallel_shard_server *fuzz_server(void) {
  fuzz_setup_store();
  static parallel_shard_server s;
  snprintf(s.root, sizeof s.root, "%s", fuzz_root);
  return &s;
}

/* An answer must be well-formed, bounded, and never hold bytes from outside the shard. */
static void fuzz_check_answer(const s_answer *a) {
  if (!a->head || !cJSON_IsBool(cJSON_GetObjectItemCaseSensitive(a->head, "ok"))) abort();
  if (a->len > S_CHUNK || (a->len && !a->data)) abort();
  if (a->data && a->len >= strlen(FUZZ_SECRET) && memmem(a->data, a->len, "SECRET-", 7)) abort();
}

#endif
