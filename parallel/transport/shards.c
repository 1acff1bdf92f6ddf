/* shards — naming, digests and transfer of a run's checkpoint shards between processes
 * (shards.h). The server is one thread with a CURVE ROUTER, the ZAP handler that decides which
 * client keys may connect (shard_keys.c) and, when given a shard relay, a DEALER connected out
 * to it that answers sealed requests; a fetch is a DEALER, to the holder or to the relay, that
 * asks for the listing, then for each file in 1 MiB pieces, never past its listed size. */
#include "parallel/transport/shards.h"

#include "common/bytes.h" // defines: little-endian field access
#include "common/common.h"
#include "parallel/transport/shards_internal.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zmq.h>

#define S_CHUNK (1 << 20) /* bytes per read reply */
#define S_MAX_FILES 64    /* files of one shard: a stage directory holds a handful */

void parallel_shard_run_dir(const char *root, uint64_t run, char *out, size_t size) {
  snprintf(out, size, "%.2000s/%016llx", root, (unsigned long long)run);
}

static void s_step_rel(const parallel_shard_id *id, char *out, size_t size) {
  snprintf(out, size, "stage-%d/step-%08ld", id->stage, id->step);
}

static void s_state_rel(const parallel_shard_id *id, char *out, size_t size) {
  snprintf(out, size, "stage-%d/replica-%d-step-%08ld.state", id->stage, id->replica, id->step);
}

static int s_sha256_file(const char *path, unsigned char out[32]) {
  FILE *f = fopen(path, "rb");
  if (!f) return wt_fail(WT_ENOTFOUND, "cannot read %s: %s", path, strerror(errno));
  crypto_hash_sha256_state st;
  crypto_hash_sha256_init(&st);
  unsigned char *buf = wt_xmalloc(1 << 16);
  size_t n;
  while ((n = fread(buf, 1, 1 << 16, f)) > 0) crypto_hash_sha256_update(&st, buf, n);
  int bad = ferror(f);
  fclose(f);
  free(buf);
  if (bad) return wt_fail(WT_EIO, "cannot read %s", path);
  crypto_hash_sha256_final(&st, out);
  return WT_OK;
}

/* ---- the listing ---------------------------------------------------------------------------- */

typedef struct {
  char path[160];
  char hex[65];
  long long size; /* bytes: a fetch reads no more from a holder */
} s_entry;

static int s_entry_cmp(const void *a, const void *b) {
  return strcmp(((const s_entry *)a)->path, ((const s_entry *)b)->path);
}

/* A file name SHA256SUMS may list: one path component, no dot files. */
static int s_plain_name(const char *name) {
  return name[0] && name[0] != '.' && !strchr(name, '/') && strlen(name) < 100;
}

/* The stage directory's entries: every file SHA256SUMS lists (with its hash), and SHA256SUMS. */
static int s_stage_entries(const char *run_dir, const parallel_shard_id *id, s_entry *e, int *n) {
  char rel[96], path[2300], line[512];
  s_step_rel(id, rel, sizeof rel);
  snprintf(path, sizeof path, "%s/%s/SHA256SUMS", run_dir, rel);
  FILE *f = fopen(path, "r");
  if (!f) return wt_fail(WT_ENOTFOUND, "no shard %s/%s (%s)", run_dir, rel, strerror(errno));
  int rc = WT_OK;
  while (rc == WT_OK && fgets(line, sizeof line, f)) {
    char hex[128], name[256];
    if (sscanf(line, "%127s %255s", hex, name) != 2) continue;
    const char *nm = name[0] == '*' ? name + 1 : name;
    if (strlen(hex) != 64 || strspn(hex, "0123456789abcdef") != 64 || !s_plain_name(nm) ||
        *n >= S_MAX_FILES - 2)
      rc = wt_fail(WT_ECORRUPT, "%s: a malformed line or too many files", path);
    else {
      snprintf(e[*n].path, sizeof e[*n].path, "%.40s/%.110s", rel, nm);
      memcpy(e[*n].hex, hex, 65);
      (*n)++;
    }
  }
  fclose(f);
  if (rc != WT_OK) return rc;
  unsigned char d[32];
  WT_CHECK(s_sha256_file(path, d));
  snprintf(e[*n].path, sizeof e[*n].path, "%s/SHA256SUMS", rel);
  sodium_bin2hex(e[*n].hex, 65, d, 32);
  (*n)++;
  return WT_OK;
}

/* Each entry's size from the file under run_dir: a shard with a file missing is not held. */
static int s_sizes(const char *run_dir, s_entry *e, int n) {
  char path[2400];
  for (int i = 0; i < n; i++) {
    struct stat st;
    snprintf(path, sizeof path, "%.2048s/%.159s", run_dir, e[i].path);
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
      return wt_fail(WT_ENOTFOUND, "shard file %s is missing: %s", path, strerror(errno));
    e[i].size = (long long)st.st_size;
  }
  return WT_OK;
}

/* The shard's entries, sorted; the hashes of the stage files as SHA256SUMS states them. */
static int s_entries(const char *root, const parallel_shard_id *id, s_entry *e, int *n) {
  char run_dir[2048], rel[96], path[2300];
  parallel_shard_run_dir(root, id->run, run_dir, sizeof run_dir);
  *n = 0;
  if (id->replica == 0) WT_CHECK(s_stage_entries(run_dir, id, e, n));
  s_state_rel(id, rel, sizeof rel);
  snprintf(path, sizeof path, "%s/%s", run_dir, rel);
  unsigned char d[32];
  if (access(path, F_OK) == 0) {
    WT_CHECK(s_sha256_file(path, d));
    snprintf(e[*n].path, sizeof e[*n].path, "%s", rel);
    sodium_bin2hex(e[*n].hex, 65, d, 32);
    (*n)++;
  } else if (id->replica != 0) {
    return wt_fail(WT_ENOTFOUND, "no shard %s/%s", run_dir, rel);
  }
  WT_CHECK(s_sizes(run_dir, e, *n));
  qsort(e, (size_t)*n, sizeof *e, s_entry_cmp);
  return WT_OK;
}

static char *s_listing_text(const s_entry *e, int n) {
  size_t cap = (size_t)n * 240 + 1, len = 0;
  char *text = wt_xmalloc(cap);
  text[0] = 0;
  for (int i = 0; i < n; i++)
    len +=
        (size_t)snprintf(text + len, cap - len, "%s  %lld  %s\n", e[i].hex, e[i].size, e[i].path);
  return text;
}

static void s_text_digest(const char *text, char hex[65]) {
  unsigned char d[32];
  crypto_hash_sha256(d, (const unsigned char *)text, strlen(text));
  sodium_bin2hex(hex, 65, d, 32);
}

int parallel_shard_digest(const char *root, const parallel_shard_id *id, char hex[65],
                          char **listing) {
  s_entry e[S_MAX_FILES];
  int n;
  WT_CHECK(s_entries(root, id, e, &n));
  char *text = s_listing_text(e, n);
  s_text_digest(text, hex);
  if (listing)
    *listing = text;
  else
    free(text);
  return WT_OK;
}

/* Parses a listing back into at most max entries: each line a 64-hex hash, two spaces, the size
 * in decimal, two spaces, a path of the shard (stage-<s>/step-<n>/NAME or
 * stage-<s>/replica-<r>-step-<n>.state of this id). More lines than max is malformed. */
static int s_parse_listing(const char *text, const parallel_shard_id *id, s_entry *e, int max,
                           int *n) {
  char step_rel[96], state_rel[96];
  s_step_rel(id, step_rel, sizeof step_rel);
  s_state_rel(id, state_rel, sizeof state_rel);
  *n = 0;
  for (const char *p = text; *p;) {
    const char *end = strchr(p, '\n');
    if (!end || *n >= max) return WT_ECORRUPT;
    if (end - p < 70 || p[64] != ' ' || p[65] != ' ') return WT_ECORRUPT;
    const size_t digits = strspn(p + 66, "0123456789");
    const char *path = p + 66 + digits;
    /* one spelling per size (no leading zero): the listing is compared as text */
    if (digits < 1 || digits > 15 || (digits > 1 && p[66] == '0') || path[0] != ' ' ||
        path[1] != ' ')
      return WT_ECORRUPT;
    path += 2;
    size_t len = (size_t)(end - path);
    if (len < 1 || len >= sizeof e[0].path) return WT_ECORRUPT;
    memcpy(e[*n].hex, p, 64), e[*n].hex[64] = 0;
    e[*n].size = strtoll(p + 66, NULL, 10);
    memcpy(e[*n].path, path, len), e[*n].path[len] = 0;
    path = e[*n].path;
    size_t sl = strlen(step_rel);
    int in_step = !strncmp(path, step_rel, sl) && path[sl] == '/' && s_plain_name(path + sl + 1);
    if (strspn(e[*n].hex, "0123456789abcdef") != 64 || (!in_step && strcmp(path, state_rel)))
      return WT_ECORRUPT;
    (*n)++;
    p = end + 1;
  }
  return *n > 0 ? WT_OK : WT_ECORRUPT;
}

int parallel_shard_verify(const char *root, const parallel_shard_id *id, const char *digest) {
  char hex[65], *text = NULL, run_dir[2048], path[2400];
  WT_CHECK(parallel_shard_digest(root, id, hex, &text));
  s_entry e[S_MAX_FILES];
  int n = 0, rc = WT_OK;
  if (strcmp(hex, digest))
    rc = wt_fail(WT_ECORRUPT,
                 "shard step %ld stage %d replica %d: its listing hashes to %.16s…, "
                 "not the recorded digest %.16s…",
                 id->step, id->stage, id->replica, hex, digest);
  if (rc == WT_OK && s_parse_listing(text, id, e, S_MAX_FILES, &n) != WT_OK)
    rc = wt_fail(WT_ECORRUPT, "shard step %ld stage %d replica %d: malformed listing", id->step,
                 id->stage, id->replica);
  free(text);
  parallel_shard_run_dir(root, id->run, run_dir, sizeof run_dir);
  for (int i = 0; rc == WT_OK && i < n; i++) {
    unsigned char d[32];
    char got[65];
    snprintf(path, sizeof path, "%s/%s", run_dir, e[i].path);
    rc = s_sha256_file(path, d);
    sodium_bin2hex(got, 65, d, 32);
    if (rc == WT_OK && strcmp(got, e[i].hex))
      rc = wt_fail(WT_ECORRUPT, "%s: SHA-256 mismatch (the file is corrupt)", path);
  }
  return rc;
}

static int s_id_cmp(const void *a, const void *b) {
  const parallel_shard_id *x = a, *y = b;
  if (x->step != y->step) return x->step < y->step ? 1 : -1;
  if (x->stage != y->stage) return x->stage - y->stage;
  return x->replica - y->replica;
}

static int s_has(const parallel_shard_id *out, int n, const parallel_shard_id *id) {
  for (int i = 0; i < n; i++)
    if (out[i].step == id->step && out[i].stage == id->stage && out[i].replica == id->replica)
      return 1;
  return 0;
}

int parallel_shard_list(const char *root, uint64_t run, parallel_shard_id *out, int max) {
  char run_dir[2048], path[2300];
  parallel_shard_run_dir(root, run, run_dir, sizeof run_dir);
  DIR *d = opendir(run_dir);
  int n = 0;
  for (struct dirent *e; d && (e = readdir(d));) {
    int stage;
    char tail;
    if (sscanf(e->d_name, "stage-%d%c", &stage, &tail) != 1 || stage < 0) continue;
    snprintf(path, sizeof path, "%.2000s/%.255s", run_dir, e->d_name);
    DIR *sd = opendir(path);
    for (struct dirent *f; sd && (f = readdir(sd)) && n < max;) {
      parallel_shard_id id = {.run = run, .stage = stage};
      char rest[16];
      if (sscanf(f->d_name, "step-%ld%c", &id.step, &tail) == 1)
        id.replica = 0;
      else if (sscanf(f->d_name, "replica-%d-step-%ld%15s", &id.replica, &id.step, rest) != 3 ||
               strcmp(rest, ".state") || id.replica < 0)
        continue;
      if (id.step > 0 && !s_has(out, n, &id)) out[n++] = id;
    }
    if (sd) closedir(sd);
  }
  if (d) closedir(d);
  qsort(out, (size_t)n, sizeof *out, s_id_cmp);
  return n;
}

static void s_remove_tree(const char *path) {
  DIR *d = opendir(path);
  char sub[2400];
  for (struct dirent *e; d && (e = readdir(d));) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
    struct stat st;
    if (lstat(sub, &st) == 0 && S_ISDIR(st.st_mode))
      s_remove_tree(sub);
    else
      unlink(sub);
  }
  if (d) closedir(d);
  rmdir(path);
}

void parallel_shard_remove(const char *root, const parallel_shard_id *id) {
  char run_dir[2048], rel[96], path[2300];
  parallel_shard_run_dir(root, id->run, run_dir, sizeof run_dir);
  if (id->replica == 0) {
    s_step_rel(id, rel, sizeof rel);
    snprintf(path, sizeof path, "%s/%s", run_dir, rel);
    s_remove_tree(path);
  }
  s_state_rel(id, rel, sizeof rel);
  snprintf(path, sizeof path, "%s/%s", run_dir, rel);
  unlink(path);
}

int parallel_shard_prune(const char *root, uint64_t run, long pinned_step, int keep) {
  enum { S_MAX = 4096 };
  parallel_shard_id *ids = wt_xmalloc(sizeof *ids * S_MAX);
  int n = parallel_shard_list(root, run, ids, S_MAX), removed = 0;
  for (int i = 0; i < n; i++) { /* newest first: count the newer steps of its (stage, replica) */
    if (ids[i].step >= pinned_step) continue;
    int newer = 0;
    for (int j = 0; j < i; j++)
      newer += ids[j].stage == ids[i].stage && ids[j].replica == ids[i].replica;
    if (newer < keep) continue;
    parallel_shard_remove(root, &ids[i]);
    removed++;
  }
  free(ids);
  return removed;
}

/* ---- the server ----------------------------------------------------------------------------- */

struct parallel_shard_server {
  void *ctx, *router, *zap, *monitor; /* monitor: failed handshakes (shards_internal.h) */
  char endpoint[256], root[2048];
  pthread_t thread;
  int started;
  atomic_int stop;
  parallel_shard_keyset allowed;
  _Atomic uint64_t served, refused;
  uint8_t pk[32], sk[32]; /* the key pair, binary: relayed requests are opened with it */
  char sk_z85[41];
  /* the relay leg: set by parallel_shard_server_relay, connected by the server's thread */
  pthread_mutex_t relay_mu;
  char relay_ep[256], relay_key[41];
  int relay_changed;
  void *relay;
  double hello_t;
};

/* An answer: its JSON head and, for a read, the bytes read. */
typedef struct {
  cJSON *head;
  char *data;
  size_t len;
} s_answer;

static void s_answer_error(s_answer *a, const char *why) {
  a->head = cJSON_CreateObject();
  cJSON_AddBoolToObject(a->head, "ok", 0);
  cJSON_AddStringToObject(a->head, "error", why);
}

static int s_request_id(const cJSON *req, parallel_shard_id *id) {
  const cJSON *run = cJSON_GetObjectItemCaseSensitive(req, "run"),
              *step = cJSON_GetObjectItemCaseSensitive(req, "step"),
              *stage = cJSON_GetObjectItemCaseSensitive(req, "stage"),
              *replica = cJSON_GetObjectItemCaseSensitive(req, "replica");
  if (!cJSON_IsString(run) || strlen(run->valuestring) != 16 ||
      strspn(run->valuestring, "0123456789abcdef") != 16 || !cJSON_IsNumber(step) ||
      !cJSON_IsNumber(stage) || !cJSON_IsNumber(replica) || step->valuedouble < 1 ||
      step->valuedouble > 1e12 || stage->valuedouble < 0 || stage->valuedouble > 4096 ||
      replica->valuedouble < 0 || replica->valuedouble > 4096)
    return WT_EINVAL;
  *id = (parallel_shard_id){.run = strtoull(run->valuestring, NULL, 16),
                            .step = (long)step->valuedouble,
                            .stage = (int)stage->valuedouble,
                            .replica = (int)replica->valuedouble};
  return WT_OK;
}

static void s_answer_list(parallel_shard_server *s, const parallel_shard_id *id, s_answer *a) {
  char hex[65], *listing = NULL;
  if (parallel_shard_digest(s->root, id, hex, &listing) != WT_OK) {
    s_answer_error(a, wt_last_error());
    return;
  }
  a->head = cJSON_CreateObject();
  cJSON_AddBoolToObject(a->head, "ok", 1);
  cJSON_AddStringToObject(a->head, "listing", listing);
  free(listing);
  s->served++;
}

static void s_answer_read(parallel_shard_server *s, const parallel_shard_id *id, const cJSON *req,
                          s_answer *a) {
  const cJSON *path = cJSON_GetObjectItemCaseSensitive(req, "path"),
              *off = cJSON_GetObjectItemCaseSensitive(req, "offset");
  char line[300], run_dir[2048], full[2400];
  s_entry e[1];
  int n = 0, fd = -1;
  /* the path must be one this shard can list: checked as a one-line listing (a path with a
   * newline in it makes two lines, refused by the bound of one entry); an offset past any file
   * a listing can give (15 digits) is malformed, not a pread */
  if (cJSON_IsString(path) && cJSON_IsNumber(off) && off->valuedouble >= 0 &&
      off->valuedouble < 1e15 && strlen(path->valuestring) < 160)
    snprintf(line, sizeof line, "%064d  0  %s\n", 0, path->valuestring);
  else
    line[0] = 0;
  const int listed = line[0] && s_parse_listing(line, id, e, 1, &n) == WT_OK;
  if (listed) {
    parallel_shard_run_dir(s->root, id->run, run_dir, sizeof run_dir);
    snprintf(full, sizeof full, "%s/%s", run_dir, e[0].path);
    fd = open(full, O_RDONLY | O_NOFOLLOW);
  }
  if (fd < 0) {
    s->refused += !listed;
    s_answer_error(a, listed ? "no such file" : "not a path of this shard");
    return;
  }
  a->data = wt_xmalloc(S_CHUNK);
  ssize_t got = pread(fd, a->data, S_CHUNK, (off_t)off->valuedouble);
  close(fd);
  if (got < 0) {
    s_answer_error(a, strerror(errno));
    free(a->data), a->data = NULL;
    return;
  }
  a->len = (size_t)got;
  a->head = cJSON_CreateObject();
  cJSON_AddBoolToObject(a->head, "ok", 1);
  cJSON_AddBoolToObject(a->head, "eof", got < S_CHUNK);
  s->served++;
}

/* "list": the listing; "read": up to S_CHUNK bytes of one of the shard's files from offset. */
static void s_answer_request(parallel_shard_server *s, const char *text, size_t len, s_answer *a) {
  *a = (s_answer){0};
  char buf[4096];
  if (len >= sizeof buf) {
    s->refused++;
    return s_answer_error(a, "request too long");
  }
  memcpy(buf, text, len), buf[len] = 0;
  cJSON *req = cJSON_Parse(buf);
  parallel_shard_id id;
  const cJSON *op = cJSON_GetObjectItemCaseSensitive(req, "op");
  if (!req || !cJSON_IsString(op) || s_request_id(req, &id) != WT_OK) {
    s->refused++;
    s_answer_error(a, "malformed request");
  } else if (!strcmp(op->valuestring, "list")) {
    s_answer_list(s, &id, a);
  } else if (!strcmp(op->valuestring, "read")) {
    s_answer_read(s, &id, req, a);
  } else {
    s->refused++;
    s_answer_error(a, "unknown op");
  }
  cJSON_Delete(req);
}

static void s_answer_free(s_answer *a) {
  cJSON_Delete(a->head);
  free(a->data);
  *a = (s_answer){0};
}

/* One request from the ROUTER: [identity][request], answered [identity][head]([data]). */
static void s_serve_router(parallel_shard_server *s) {
  zmq_msg_t who, req;
  zmq_msg_init(&who), zmq_msg_init(&req);
  int ok = zmq_msg_recv(&who, s->router, ZMQ_DONTWAIT) >= 0 && zmq_msg_more(&who) &&
           zmq_msg_recv(&req, s->router, 0) >= 0;
  int more = ok && zmq_msg_more(&req);
  while (more) {
    zmq_msg_t x;
    zmq_msg_init(&x);
    more = zmq_msg_recv(&x, s->router, 0) >= 0 && zmq_msg_more(&x);
    zmq_msg_close(&x);
    ok = 0;
  }
  if (ok) {
    s_answer a;
    s_answer_request(s, zmq_msg_data(&req), zmq_msg_size(&req), &a);
    char *text = cJSON_PrintUnformatted(a.head);
    zmq_send(s->router, zmq_msg_data(&who), zmq_msg_size(&who), ZMQ_SNDMORE);
    zmq_send(s->router, text, strlen(text), a.data ? ZMQ_SNDMORE : 0);
    if (a.data) zmq_send(s->router, a.data, a.len, 0);
    free(text);
    s_answer_free(&a);
  } else {
    s->refused++;
  }
  zmq_msg_close(&who), zmq_msg_close(&req);
}

/* ---- the server's relay leg ----------------------------------------------------------------
 * A DEALER connected out to the relay: every few seconds an empty "hello" ([""]) so that the
 * relay knows where this holder is; requests arrive as [client key][return][sealed request] and
 * go back as [client key][return][sealed reply] (shard_relay.h; shards_internal.h has the seal's
 * layout). */

#define S_HELLO_S 2.0

static void s_relay_connect(parallel_shard_server *s) {
  pthread_mutex_lock(&s->relay_mu);
  char ep[256], key[41];
  snprintf(ep, sizeof ep, "%s", s->relay_ep);
  snprintf(key, sizeof key, "%s", s->relay_key);
  s->relay_changed = 0;
  pthread_mutex_unlock(&s->relay_mu);
  if (s->relay) zmq_close(s->relay), s->relay = NULL;
  if (!ep[0]) return;
  s->relay = zmq_socket(s->ctx, ZMQ_DEALER);
  int linger = 0;
  int64_t max = 8192;
  zmq_setsockopt(s->relay, ZMQ_LINGER, &linger, sizeof linger);
  zmq_setsockopt(s->relay, ZMQ_MAXMSGSIZE, &max, sizeof max);
  zmq_setsockopt(s->relay, ZMQ_CURVE_SERVERKEY, key, 40);
  char pub[41];
  zmq_z85_encode(pub, s->pk, 32);
  zmq_setsockopt(s->relay, ZMQ_CURVE_PUBLICKEY, pub, 40);
  zmq_setsockopt(s->relay, ZMQ_CURVE_SECRETKEY, s->sk_z85, 40);
  if (zmq_connect(s->relay, ep) != 0) {
    WT_WARN("shard server: cannot connect to the shard relay %s: %s", ep,
            zmq_strerror(zmq_errno()));
    zmq_close(s->relay), s->relay = NULL;
  }
  s->hello_t = 0;
}

static void s_relay_hello(parallel_shard_server *s) {
  double now = wt_now_s();
  if (now - s->hello_t < S_HELLO_S) return;
  s->hello_t = now;
  zmq_send(s->relay, "", 0, ZMQ_DONTWAIT);
}

/* Opens a sealed request from client `from`; 0 and the JSON text in out (len bytes), or -1. */
static int s_relay_open(parallel_shard_server *s, const uint8_t from[32], uint8_t *buf, size_t n,
                        parallel_shard_seal *seal, uint64_t *counter) {
  if (n < PARALLEL_SHARD_REQ_HEAD + 2 || n > PARALLEL_SHARD_REQ_HEAD + 4000) return -1;
  if (parallel_shard_seal_new(seal, 0, s->pk, s->sk, from, buf) != 0) return -1;
  *counter = wt_get_le64(buf + PARALLEL_SHARD_RANDOM_BYTES);
  if (parallel_zmq_aead_open(&seal->to_holder, *counter, buf, PARALLEL_SHARD_RANDOM_BYTES + 8,
                             buf + PARALLEL_SHARD_REQ_HEAD, n - PARALLEL_SHARD_REQ_HEAD,
                             buf + PARALLEL_SHARD_RANDOM_BYTES + 8) != 0) {
    parallel_shard_seal_free(seal);
    return -1;
  }
  return 0;
}

/* The answer sealed to the client: [counter][tag][head length][head][data]. */
static void s_relay_reply(parallel_shard_server *s, const uint8_t to[32], zmq_msg_t *ret,
                          const parallel_shard_seal *seal, uint64_t counter, const s_answer *a) {
  char *text = cJSON_PrintUnformatted(a->head);
  size_t hlen = strlen(text), n = 4 + hlen + a->len;
  uint8_t *out = wt_xmalloc(PARALLEL_SHARD_REP_HEAD + n);
  wt_put_le64(out, counter);
  uint8_t *body = out + PARALLEL_SHARD_REP_HEAD;
  wt_put_le32(body, (uint32_t)hlen);
  memcpy(body + 4, text, hlen);
  if (a->len) memcpy(body + 4 + hlen, a->data, a->len);
  parallel_zmq_aead_seal(&seal->to_client, counter, out, 8, body, n, out + 8);
  zmq_send(s->relay, to, 32, ZMQ_SNDMORE | ZMQ_DONTWAIT);
  zmq_send(s->relay, zmq_msg_data(ret), zmq_msg_size(ret), ZMQ_SNDMORE | ZMQ_DONTWAIT);
  zmq_send(s->relay, out, PARALLEL_SHARD_REP_HEAD + n, ZMQ_DONTWAIT);
  free(out);
  free(text);
}

/* One message from the relay: [client key][return][sealed request]. A client not allowed, or a
 * request that does not open under its key, is counted and dropped. */
static void s_serve_relay(parallel_shard_server *s) {
  zmq_msg_t from, ret, req;
  zmq_msg_init(&from), zmq_msg_init(&ret), zmq_msg_init(&req);
  int ok = zmq_msg_recv(&from, s->relay, ZMQ_DONTWAIT) >= 0 && zmq_msg_more(&from) &&
           zmq_msg_recv(&ret, s->relay, 0) >= 0 && zmq_msg_more(&ret) &&
           zmq_msg_recv(&req, s->relay, 0) >= 0 && !zmq_msg_more(&req) && zmq_msg_size(&from) == 32;
  while (zmq_msg_more(&req)) { /* more frames than a request has */
    zmq_msg_close(&req), zmq_msg_init(&req);
    if (zmq_msg_recv(&req, s->relay, 0) < 0) break;
  }
  parallel_shard_seal seal;
  uint64_t counter = 0;
  ok = ok && zmq_msg_size(&req) > 0 && parallel_shard_keyset_has(&s->allowed, zmq_msg_data(&from));
  ok = ok && s_relay_open(s, zmq_msg_data(&from), zmq_msg_data(&req), zmq_msg_size(&req), &seal,
                          &counter) == 0;
  if (ok) {
    s_answer a;
    s_answer_request(s, (const char *)zmq_msg_data(&req) + PARALLEL_SHARD_REQ_HEAD,
                     zmq_msg_size(&req) - PARALLEL_SHARD_REQ_HEAD, &a);
    s_relay_reply(s, zmq_msg_data(&from), &ret, &seal, counter, &a);
    s_answer_free(&a);
    parallel_shard_seal_free(&seal);
  } else {
    s->refused++;
  }
  zmq_msg_close(&from), zmq_msg_close(&ret), zmq_msg_close(&req);
}

static void *s_server_main(void *arg) {
  parallel_shard_server *s = arg;
  while (!s->stop) {
    if (s->relay_changed) s_relay_connect(s);
    if (s->relay) s_relay_hello(s);
    zmq_pollitem_t it[4] = {{s->zap, 0, ZMQ_POLLIN, 0},
                            {s->router, 0, ZMQ_POLLIN, 0},
                            {s->monitor, 0, ZMQ_POLLIN, 0},
                            {s->relay, 0, ZMQ_POLLIN, 0}};
    if (zmq_poll(it, s->relay ? 4 : 3, 100) <= 0) continue;
    if (it[0].revents & ZMQ_POLLIN) s->refused += !parallel_shard_zap_answer(s->zap, &s->allowed);
    if (it[1].revents & ZMQ_POLLIN) s_serve_router(s);
    if (it[2].revents & ZMQ_POLLIN) s->refused += parallel_shard_monitor_refused(s->monitor);
    if (s->relay && (it[3].revents & ZMQ_POLLIN)) s_serve_relay(s);
  }
  if (s->relay) zmq_close(s->relay);
  return NULL;
}

static int s_key_ok(const char *z85) {
  uint8_t k[32];
  return z85 && strlen(z85) == 40 && zmq_z85_decode(k, z85) != NULL;
}

parallel_shard_server *parallel_shard_server_new(const char *bind, const char *root,
                                                 const char *public_z85, const char *secret_z85) {
  if (!s_key_ok(public_z85) || !s_key_ok(secret_z85) || !root || !bind) {
    wt_fail(WT_EINVAL, "shard server: a key pair of two 40-character Z85 keys, a root and an "
                       "endpoint are needed");
    return NULL;
  }
  parallel_shard_server *s = wt_xcalloc(1, sizeof *s);
  snprintf(s->root, sizeof s->root, "%s", root);
  snprintf(s->sk_z85, sizeof s->sk_z85, "%s", secret_z85);
  zmq_z85_decode(s->pk, public_z85);
  zmq_z85_decode(s->sk, secret_z85);
  parallel_shard_keyset_init(&s->allowed);
  pthread_mutex_init(&s->relay_mu, NULL);
  s->ctx = zmq_ctx_new();
  s->zap = zmq_socket(s->ctx, ZMQ_REP);
  s->router = zmq_socket(s->ctx, ZMQ_ROUTER);
  int one = 1, linger = 0, maxmsg = 4096;
  int64_t max = maxmsg;
  zmq_setsockopt(s->router, ZMQ_LINGER, &linger, sizeof linger);
  zmq_setsockopt(s->zap, ZMQ_LINGER, &linger, sizeof linger);
  zmq_setsockopt(s->router, ZMQ_MAXMSGSIZE, &max, sizeof max);
  zmq_setsockopt(s->router, ZMQ_CURVE_SERVER, &one, sizeof one);
  zmq_setsockopt(s->router, ZMQ_CURVE_SECRETKEY, secret_z85, 40);
  zmq_setsockopt(s->router, ZMQ_ZAP_DOMAIN, "wantrain.shards", 15);
  size_t len = sizeof s->endpoint;
  if (zmq_bind(s->zap, "inproc://zeromq.zap.01") != 0 || zmq_bind(s->router, bind) != 0 ||
      zmq_getsockopt(s->router, ZMQ_LAST_ENDPOINT, s->endpoint, &len) != 0) {
    wt_fail(WT_EIO, "shard server: cannot bind %s: %s", bind, zmq_strerror(zmq_errno()));
    parallel_shard_server_destroy(&s);
    return NULL;
  }
  char name[64];
  snprintf(name, sizeof name, "shard-server-monitor-%p", (void *)s);
  s->monitor = parallel_shard_monitor_open(s->ctx, s->router, name);
  if (!s->monitor) {
    wt_fail(WT_EIO, "shard server: cannot monitor its socket: %s", zmq_strerror(zmq_errno()));
    parallel_shard_server_destroy(&s);
    return NULL;
  }
  if (pthread_create(&s->thread, NULL, s_server_main, s) != 0) {
    wt_fail(WT_EIO, "shard server: cannot start its thread");
    parallel_shard_server_destroy(&s);
    return NULL;
  }
  s->started = 1;
  return s;
}

const char *parallel_shard_server_endpoint(const parallel_shard_server *s) {
  return s->endpoint;
}

int parallel_shard_server_allow(parallel_shard_server *s, const char *public_z85) {
  if (parallel_shard_keyset_add(&s->allowed, public_z85) != WT_OK)
    return wt_fail(WT_EINVAL, "shard server: %s", wt_last_error());
  return WT_OK;
}

int parallel_shard_server_relay(parallel_shard_server *s, const char *relay_endpoint,
                                const char *relay_key_z85) {
  if (!relay_endpoint || strncmp(relay_endpoint, "tcp://", 6) || strlen(relay_endpoint) >= 256 ||
      !s_key_ok(relay_key_z85))
    return wt_fail(WT_EINVAL, "shard server: a relay needs a tcp:// endpoint and its Z85 key");
  pthread_mutex_lock(&s->relay_mu);
  snprintf(s->relay_ep, sizeof s->relay_ep, "%s", relay_endpoint);
  snprintf(s->relay_key, sizeof s->relay_key, "%s", relay_key_z85);
  s->relay_changed = 1;
  pthread_mutex_unlock(&s->relay_mu);
  return WT_OK;
}

uint64_t parallel_shard_server_served(const parallel_shard_server *s) {
  return s->served;
}

uint64_t parallel_shard_server_refused(const parallel_shard_server *s) {
  return s->refused;
}

void parallel_shard_server_destroy(parallel_shard_server **s_p) {
  parallel_shard_server *s = *s_p;
  if (!s) return;
  s->stop = 1;
  if (s->started) pthread_join(s->thread, NULL);
  if (s->monitor) zmq_close(s->monitor);
  if (s->router) zmq_close(s->router);
  if (s->zap) zmq_close(s->zap);
  if (s->ctx) zmq_ctx_term(s->ctx);
  pthread_mutex_destroy(&s->relay_mu);
  parallel_shard_keyset_free(&s->allowed);
  sodium_memzero(s->sk, sizeof s->sk), sodium_memzero(s->sk_z85, sizeof s->sk_z85);
  free(s);
  *s_p = NULL;
}

/* ---- fetching ---------------------------------------------------------------------------------
 * Straight to a holder's server, or through the shard relay with every request and reply sealed
 * end to end (shards_internal.h): the relay can drop or delay them, which costs the deadline,
 * but a change to one makes it fail to open. */

typedef struct {
  void *ctx, *sock;
  double deadline;
  int relayed;
  uint8_t holder_pk[32], random[32];
  parallel_shard_seal seal;
  uint64_t counter; /* the next request's; its reply carries it */
} s_client;

static void s_client_close(s_client *c) {
  if (c->sock) zmq_close(c->sock), c->sock = NULL;
  if (c->relayed) parallel_shard_seal_free(&c->seal);
  c->relayed = 0;
}

static int s_client_open(s_client *c, const parallel_shard_holder *h, const char *pub,
                         const char *sec, double timeout_s) {
  const char *ep = h->relay ? h->relay : h->endpoint;
  c->sock = zmq_socket(c->ctx, ZMQ_DEALER);
  int linger = 0;
  int64_t max = S_CHUNK + 65536;
  zmq_setsockopt(c->sock, ZMQ_LINGER, &linger, sizeof linger);
  zmq_setsockopt(c->sock, ZMQ_MAXMSGSIZE, &max, sizeof max);
  zmq_setsockopt(c->sock, ZMQ_CURVE_SERVERKEY, h->relay ? h->relay_key : h->public_key, 40);
  zmq_setsockopt(c->sock, ZMQ_CURVE_PUBLICKEY, pub, 40);
  zmq_setsockopt(c->sock, ZMQ_CURVE_SECRETKEY, sec, 40);
  c->deadline = wt_now_s() + timeout_s;
  if (h->relay) {
    uint8_t pk[32], sk[32];
    zmq_z85_decode(pk, pub), zmq_z85_decode(sk, sec), zmq_z85_decode(c->holder_pk, h->public_key);
    randombytes_buf(c->random, sizeof c->random);
    int bad = parallel_shard_seal_new(&c->seal, 1, pk, sk, c->holder_pk, c->random);
    sodium_memzero(sk, sizeof sk);
    if (bad)
      return wt_fail(WT_EINVAL, "holder key %.8s… is not a usable X25519 key", h->public_key);
    c->relayed = 1, c->counter = 0;
  }
  if (zmq_connect(c->sock, ep) != 0)
    return wt_fail(WT_EINVAL, "cannot connect to %s: %s", ep, zmq_strerror(zmq_errno()));
  return WT_OK;
}

static int s_wait(s_client *c) {
  zmq_pollitem_t it = {c->sock, 0, ZMQ_POLLIN, 0};
  long left = (long)((c->deadline - wt_now_s()) * 1000);
  if (left <= 0 || zmq_poll(&it, 1, left) <= 0 || !(it.revents & ZMQ_POLLIN))
    return wt_fail(WT_ETIMEOUT, c->relayed ? "no answer through the relay within the deadline"
                                           : "no answer within the deadline (down, not allowing "
                                             "this key, or not the key given for it)");
  return WT_OK;
}

/* Receives up to max parts of one message (the rest are dropped); returns how many, or -1. */
static int s_recv_parts(void *sock, zmq_msg_t *part, int max) {
  int n = 0, more = 1;
  while (more) {
    zmq_msg_t m;
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, sock, 0) < 0) {
      zmq_msg_close(&m);
      for (int i = 0; i < n; i++) zmq_msg_close(&part[i]);
      return -1;
    }
    more = zmq_msg_more(&m);
    if (n < max)
      part[n++] = m;
    else
      zmq_msg_close(&m);
  }
  return n;
}

/* A direct exchange: [request] out, [head]([data]) back. */
static int s_exchange_direct(s_client *c, const char *text, char **head, void **data, size_t *len) {
  if (zmq_send(c->sock, text, strlen(text), ZMQ_DONTWAIT) < 0)
    return wt_fail(WT_EIO, "cannot send: %s", zmq_strerror(zmq_errno()));
  WT_CHECK(s_wait(c));
  zmq_msg_t part[2];
  int n = s_recv_parts(c->sock, part, 2);
  if (n < 1) return wt_fail(WT_EIO, "receive failed: %s", zmq_strerror(zmq_errno()));
  *head = wt_xmalloc(zmq_msg_size(&part[0]) + 1);
  memcpy(*head, zmq_msg_data(&part[0]), zmq_msg_size(&part[0]));
  (*head)[zmq_msg_size(&part[0])] = 0;
  if (n == 2) {
    *len = zmq_msg_size(&part[1]);
    *data = wt_xmalloc(*len + 1);
    memcpy(*data, zmq_msg_data(&part[1]), *len);
  }
  for (int i = 0; i < n; i++) zmq_msg_close(&part[i]);
  return WT_OK;
}

/* Opens a relayed reply [holder key][counter][tag][sealed head length, head, data]. */
static int s_open_reply(s_client *c, zmq_msg_t *part, int n, char **head, void **data,
                        size_t *len) {
  if (n != 2 || zmq_msg_size(&part[0]) != 32 || memcmp(zmq_msg_data(&part[0]), c->holder_pk, 32))
    return wt_fail(WT_ECORRUPT, "the relay sent a message that is not this holder's reply");
  uint8_t *b = zmq_msg_data(&part[1]);
  size_t bn = zmq_msg_size(&part[1]);
  if (bn == 0) return wt_fail(WT_EIO, "the relay says this holder is not connected to it");
  if (bn < PARALLEL_SHARD_REP_HEAD + 4 || wt_get_le64(b) != c->counter ||
      parallel_zmq_aead_open(&c->seal.to_client, c->counter, b, 8, b + PARALLEL_SHARD_REP_HEAD,
                             bn - PARALLEL_SHARD_REP_HEAD, b + 8) != 0)
    return wt_fail(WT_ECORRUPT, "a reply through the relay does not open under the holder's key "
                                "(altered, replayed or forged)");
  const uint8_t *body = b + PARALLEL_SHARD_REP_HEAD;
  const size_t body_n = bn - PARALLEL_SHARD_REP_HEAD, hlen = wt_get_le32(body);
  if (hlen > body_n - 4) return wt_fail(WT_ECORRUPT, "a sealed reply with a malformed head");
  *head = wt_xmalloc(hlen + 1);
  memcpy(*head, body + 4, hlen), (*head)[hlen] = 0;
  *len = body_n - 4 - hlen;
  *data = wt_xmalloc(*len + 1);
  memcpy(*data, body + 4 + hlen, *len);
  return WT_OK;
}

/* A relayed exchange: [holder key][random][counter][tag][sealed request] out to the relay. */
static int s_exchange_relayed(s_client *c, const char *text, char **head, void **data,
                              size_t *len) {
  const size_t tn = strlen(text);
  uint8_t *out = wt_xmalloc(PARALLEL_SHARD_REQ_HEAD + tn);
  memcpy(out, c->random, 32);
  wt_put_le64(out + 32, c->counter);
  memcpy(out + PARALLEL_SHARD_REQ_HEAD, text, tn);
  parallel_zmq_aead_seal(&c->seal.to_holder, c->counter, out, 40, out + PARALLEL_SHARD_REQ_HEAD, tn,
                         out + 40);
  int sent = zmq_send(c->sock, c->holder_pk, 32, ZMQ_SNDMORE | ZMQ_DONTWAIT) >= 0 &&
             zmq_send(c->sock, out, PARALLEL_SHARD_REQ_HEAD + tn, ZMQ_DONTWAIT) >= 0;
  free(out);
  if (!sent) return wt_fail(WT_EIO, "cannot send to the relay: %s", zmq_strerror(zmq_errno()));
  WT_CHECK(s_wait(c));
  zmq_msg_t part[2];
  int n = s_recv_parts(c->sock, part, 2);
  if (n < 0) return wt_fail(WT_EIO, "receive failed: %s", zmq_strerror(zmq_errno()));
  int rc = s_open_reply(c, part, n, head, data, len);
  for (int i = 0; i < n; i++) zmq_msg_close(&part[i]);
  c->counter++;
  return rc;
}

/* Sends one request and waits (until the holder's deadline) for its reply: the JSON head and,
 * for a read, the data part (malloc'd into *data). */
static int s_call(s_client *c, cJSON *req, cJSON **head, void **data, size_t *len) {
  char *text = cJSON_PrintUnformatted(req), *head_text = NULL;
  void *d = NULL;
  size_t dn = 0;
  int rc = c->relayed ? s_exchange_relayed(c, text, &head_text, &d, &dn)
                      : s_exchange_direct(c, text, &head_text, &d, &dn);
  free(text);
  *head = rc == WT_OK ? cJSON_Parse(head_text) : NULL;
  free(head_text);
  const cJSON *ok = cJSON_GetObjectItemCaseSensitive(*head, "ok");
  if (rc == WT_OK && !cJSON_IsTrue(ok)) {
    const cJSON *why = cJSON_GetObjectItemCaseSensitive(*head, "error");
    rc = wt_fail(WT_ENOTFOUND, "refused: %.300s",
                 cJSON_IsString(why) ? why->valuestring : "a malformed answer");
  }
  if (rc != WT_OK) {
    cJSON_Delete(*head), *head = NULL;
    free(d), d = NULL, dn = 0;
  }
  if (data)
    *data = d, *len = dn;
  else
    free(d);
  return rc;
}

static cJSON *s_request(const char *op, const parallel_shard_id *id) {
  cJSON *r = cJSON_CreateObject();
  char run[17];
  snprintf(run, sizeof run, "%016llx", (unsigned long long)id->run);
  cJSON_AddStringToObject(r, "op", op);
  cJSON_AddStringToObject(r, "run", run);
  cJSON_AddNumberToObject(r, "step", (double)id->step);
  cJSON_AddNumberToObject(r, "stage", id->stage);
  cJSON_AddNumberToObject(r, "replica", id->replica);
  return r;
}

static int s_mkdirs(const char *path) {
  char tmp[2400];
  snprintf(tmp, sizeof tmp, "%s", path);
  for (char *p = tmp + 1; *p; p++)
    if (*p == '/') {
      *p = 0;
      if (mkdir(tmp, 0755) != 0 && errno != EEXIST) return WT_EIO;
      *p = '/';
    }
  return mkdir(tmp, 0755) == 0 || errno == EEXIST ? WT_OK : WT_EIO;
}

/* Fetches one file of the listing into tmp_dir/path, hashing as it goes; a holder that sends
 * more bytes than the listing gives, or ends before, is refused at once. */
static int s_fetch_file(s_client *c, const parallel_shard_id *id, const s_entry *e,
                        const char *tmp_dir) {
  char path[2400], dir[2400];
  snprintf(path, sizeof path, "%.2200s/%.159s", tmp_dir, e->path);
  snprintf(dir, sizeof dir, "%s", path);
  *strrchr(dir, '/') = 0;
  if (s_mkdirs(dir) != WT_OK) return wt_fail(WT_EIO, "cannot create %s: %s", dir, strerror(errno));
  FILE *f = fopen(path, "wb");
  if (!f) return wt_fail(WT_EIO, "cannot create %s: %s", path, strerror(errno));
  crypto_hash_sha256_state st;
  crypto_hash_sha256_init(&st);
  int rc = WT_OK;
  for (long long off = 0; rc == WT_OK && off < e->size;) {
    cJSON *req = s_request("read", id), *head = NULL;
    cJSON_AddStringToObject(req, "path", e->path);
    cJSON_AddNumberToObject(req, "offset", (double)off);
    void *data = NULL;
    size_t len = 0;
    rc = s_call(c, req, &head, &data, &len);
    cJSON_Delete(req);
    const long long left = e->size - off;
    if (rc == WT_OK && (long long)len > left)
      rc = wt_fail(WT_ECORRUPT, "%s: it sent more bytes than the %lld its listing gives", e->path,
                   e->size);
    else if (rc == WT_OK && len == 0)
      rc = wt_fail(WT_ECORRUPT, "%s: it ended at byte %lld of the %lld its listing gives", e->path,
                   off, e->size);
    if (rc == WT_OK) {
      crypto_hash_sha256_update(&st, data, len);
      if (fwrite(data, 1, len, f) != len) rc = wt_fail(WT_EIO, "cannot write %s", path);
      off += (long long)len;
    }
    free(data);
    cJSON_Delete(head);
  }
  if (fflush(f) != 0 || fsync(fileno(f)) != 0)
    rc = rc == WT_OK ? wt_fail(WT_EIO, "cannot write %s", path) : rc;
  fclose(f);
  unsigned char d[32];
  char got[65];
  crypto_hash_sha256_final(&st, d);
  sodium_bin2hex(got, 65, d, 32);
  if (rc == WT_OK && strcmp(got, e->hex))
    rc = wt_fail(WT_ECORRUPT, "%s: its bytes do not match the SHA-256 its listing gives", e->path);
  return rc;
}

/* Moves the fetched shard from tmp (same layout) into the run directory, replacing a local copy:
 * the step directory as one rename, then the .state file. */
static int s_install(const char *run_dir, const char *tmp, const parallel_shard_id *id) {
  char rel[96], from[2400], to[2400], old[2400];
  if (id->replica == 0) {
    s_step_rel(id, rel, sizeof rel);
    snprintf(from, sizeof from, "%s/%s", tmp, rel);
    snprintf(to, sizeof to, "%s/%s", run_dir, rel);
    snprintf(old, sizeof old, "%.2300s.old", from);
    *strrchr(to, '/') = 0;
    if (s_mkdirs(to) != WT_OK) return wt_fail(WT_EIO, "cannot create %s", to);
    snprintf(to, sizeof to, "%s/%s", run_dir, rel);
    if (rename(to, old) != 0 && errno != ENOENT)
      return wt_fail(WT_EIO, "cannot move %s aside: %s", to, strerror(errno));
    if (rename(from, to) != 0)
      return wt_fail(WT_EIO, "cannot move %s to %s: %s", from, to, strerror(errno));
  }
  s_state_rel(id, rel, sizeof rel);
  snprintf(from, sizeof from, "%s/%s", tmp, rel);
  snprintf(to, sizeof to, "%s/%s", run_dir, rel);
  if (access(from, F_OK) == 0) {
    *strrchr(to, '/') = 0;
    if (s_mkdirs(to) != WT_OK) return wt_fail(WT_EIO, "cannot create %s", to);
    snprintf(to, sizeof to, "%s/%s", run_dir, rel);
    if (rename(from, to) != 0)
      return wt_fail(WT_EIO, "cannot move %s to %s: %s", from, to, strerror(errno));
  }
  return WT_OK;
}

/* One holder: the listing against the digest, every file against the listing, then install. */
static int s_fetch_from(s_client *c, const char *root, const parallel_shard_id *id,
                        const char *digest) {
  cJSON *req = s_request("list", id), *head = NULL;
  int rc = s_call(c, req, &head, NULL, NULL);
  cJSON_Delete(req);
  if (rc != WT_OK) return rc;
  const cJSON *l = cJSON_GetObjectItemCaseSensitive(head, "listing");
  s_entry e[S_MAX_FILES];
  int n = 0;
  char hex[65];
  if (!cJSON_IsString(l)) rc = wt_fail(WT_ECORRUPT, "its answer holds no listing");
  if (rc == WT_OK) s_text_digest(l->valuestring, hex);
  if (rc == WT_OK && strcmp(hex, digest))
    rc = wt_fail(WT_ECORRUPT, "its listing hashes to %.16s…, not the digest %.16s…", hex, digest);
  if (rc == WT_OK && s_parse_listing(l->valuestring, id, e, S_MAX_FILES, &n) != WT_OK)
    rc = wt_fail(WT_ECORRUPT, "its listing is malformed");
  cJSON_Delete(head);
  if (rc != WT_OK) return rc;
  char run_dir[2048], tmp[2200];
  parallel_shard_run_dir(root, id->run, run_dir, sizeof run_dir);
  if (s_mkdirs(run_dir) != WT_OK)
    return wt_fail(WT_EIO, "cannot create %s: %s", run_dir, strerror(errno));
  snprintf(tmp, sizeof tmp, "%s/.fetch-XXXXXX", run_dir);
  if (!mkdtemp(tmp))
    return wt_fail(WT_EIO, "cannot create a directory in %s: %s", run_dir, strerror(errno));
  for (int i = 0; rc == WT_OK && i < n; i++) rc = s_fetch_file(c, id, &e[i], tmp);
  if (rc == WT_OK) rc = s_install(run_dir, tmp, id);
  s_remove_tree(tmp); /* what is left: a refused fetch, or the replaced copy */
  return rc;
}

int parallel_shard_fetch(const char *root, const parallel_shard_id *id, const char *digest,
                         const parallel_shard_holder *holders, int n, const char *public_z85,
                         const char *secret_z85, double timeout_s, int *from) {
  if (!root || !id || !digest || strlen(digest) != 64 || n < 0 || (n && !holders) ||
      !s_key_ok(public_z85) || !s_key_ok(secret_z85) || timeout_s <= 0)
    return wt_fail(WT_EINVAL, "shard fetch: a root, a shard, a 64-hex digest, holders, a key "
                              "pair and a positive deadline are needed");
  char why[3000] = "";
  int rc = n ? WT_EIO : WT_ENOTFOUND, any_answer = 0;
  s_client c = {.ctx = zmq_ctx_new()};
  for (int i = 0; i < n; i++) {
    const parallel_shard_holder *h = &holders[i];
    int r = s_key_ok(h->public_key) && (h->relay ? s_key_ok(h->relay_key) : h->endpoint != NULL)
                ? s_client_open(&c, h, public_z85, secret_z85, timeout_s)
                : wt_fail(WT_EINVAL, "no endpoint or no valid key");
    if (r == WT_OK) r = s_fetch_from(&c, root, id, digest);
    s_client_close(&c);
    if (r == WT_OK) {
      if (from) *from = i;
      zmq_ctx_term(c.ctx);
      if (i > 0)
        WT_INFO("shard step %ld stage %d replica %d: fetched from holder %d after refusing: %s",
                id->step, id->stage, id->replica, i, why);
      return WT_OK;
    }
    any_answer |= r == WT_ECORRUPT;
    size_t len = strlen(why);
    snprintf(why + len, sizeof why - len, "%s%s%s: %.400s", len ? "; " : "",
             h->endpoint ? h->endpoint : "?", h->relay ? " through the relay" : "",
             wt_last_error());
  }
  zmq_ctx_term(c.ctx);
  rc = any_answer ? WT_ECORRUPT : rc;
  return wt_fail(rc, "shard step %ld stage %d replica %d: no holder served it intact (%s)",
                 id->step, id->stage, id->replica, n ? why : "no holder is known");
}
