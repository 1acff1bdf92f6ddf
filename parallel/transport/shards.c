/* shards — naming, digests and transfer of a run's checkpoint shards between processes
 * (shards.h). The server is one thread with a CURVE ROUTER and the ZAP handler that decides
 * which client keys may connect; a fetch is a DEALER that asks for the listing, then for each
 * file in 1 MiB pieces. */
#include "parallel/transport/shards.h"

#include "common/common.h"

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

#define S_CHUNK (1 << 20)  /* bytes per read reply */
#define S_MAX_FILES 64     /* files of one shard: a stage directory holds a handful */
#define S_MAX_ALLOWED 4096 /* client keys a server remembers */

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
  qsort(e, (size_t)*n, sizeof *e, s_entry_cmp);
  return WT_OK;
}

static char *s_listing_text(const s_entry *e, int n) {
  size_t cap = (size_t)n * 240 + 1, len = 0;
  char *text = wt_xmalloc(cap);
  text[0] = 0;
  for (int i = 0; i < n; i++)
    len += (size_t)snprintf(text + len, cap - len, "%s  %s\n", e[i].hex, e[i].path);
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

/* Parses a listing back into entries: each line a 64-hex hash, two spaces, a path of the shard
 * (stage-<s>/step-<n>/NAME or stage-<s>/replica-<r>-step-<n>.state of this id). */
static int s_parse_listing(const char *text, const parallel_shard_id *id, s_entry *e, int *n) {
  char step_rel[96], state_rel[96];
  s_step_rel(id, step_rel, sizeof step_rel);
  s_state_rel(id, state_rel, sizeof state_rel);
  *n = 0;
  for (const char *p = text; *p;) {
    const char *end = strchr(p, '\n');
    if (!end || *n >= S_MAX_FILES) return WT_ECORRUPT;
    size_t len = (size_t)(end - p);
    if (len < 67 || len - 66 >= sizeof e[0].path || p[64] != ' ' || p[65] != ' ')
      return WT_ECORRUPT;
    memcpy(e[*n].hex, p, 64), e[*n].hex[64] = 0;
    memcpy(e[*n].path, p + 66, len - 66), e[*n].path[len - 66] = 0;
    const char *path = e[*n].path;
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
  if (rc == WT_OK && s_parse_listing(text, id, e, &n) != WT_OK)
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

/* ---- the server ----------------------------------------------------------------------------- */

struct parallel_shard_server {
  void *ctx, *router, *zap;
  char endpoint[256], root[2048];
  pthread_t thread;
  int started;
  atomic_int stop;
  pthread_mutex_t mu;
  uint8_t (*allowed)[32];
  int n_allowed;
  _Atomic uint64_t served, refused;
};

static int s_allowed(parallel_shard_server *s, const uint8_t key[32]) {
  pthread_mutex_lock(&s->mu);
  int ok = 0;
  for (int i = 0; i < s->n_allowed && !ok; i++) ok = !memcmp(s->allowed[i], key, 32);
  pthread_mutex_unlock(&s->mu);
  return ok;
}

/* One ZAP request (RFC 27): version, request id, domain, address, identity, mechanism, then the
 * CURVE client key. 200 for an allowed key, 400 for the rest. */
static void s_zap_answer(parallel_shard_server *s) {
  zmq_msg_t part[8];
  int n = 0, more = 1;
  while (more && n < 8) {
    zmq_msg_init(&part[n]);
    if (zmq_msg_recv(&part[n], s->zap, 0) < 0) {
      zmq_msg_close(&part[n]);
      break;
    }
    more = zmq_msg_more(&part[n]);
    n++;
  }
  while (more) { /* more frames than a ZAP request has: drain them */
    zmq_msg_t x;
    zmq_msg_init(&x);
    if (zmq_msg_recv(&x, s->zap, 0) < 0)
      more = 0;
    else
      more = zmq_msg_more(&x);
    zmq_msg_close(&x);
  }
  int ok = n == 7 && zmq_msg_size(&part[6]) == 32 && zmq_msg_size(&part[5]) == 5 &&
           !memcmp(zmq_msg_data(&part[5]), "CURVE", 5) && s_allowed(s, zmq_msg_data(&part[6]));
  if (!ok) s->refused++;
  const char *status = ok ? "200" : "400";
  zmq_send(s->zap, "1.0", 3, ZMQ_SNDMORE);
  if (n >= 2)
    zmq_send(s->zap, zmq_msg_data(&part[1]), zmq_msg_size(&part[1]), ZMQ_SNDMORE);
  else
    zmq_send(s->zap, "", 0, ZMQ_SNDMORE);
  zmq_send(s->zap, status, 3, ZMQ_SNDMORE);
  zmq_send(s->zap, ok ? "OK" : "key not allowed", ok ? 2 : 15, ZMQ_SNDMORE);
  zmq_send(s->zap, "", 0, ZMQ_SNDMORE);
  zmq_send(s->zap, "", 0, 0);
  for (int i = 0; i < n; i++) zmq_msg_close(&part[i]);
}

static void s_reply(parallel_shard_server *s, zmq_msg_t *who, cJSON *head, const void *data,
                    size_t len) {
  char *text = cJSON_PrintUnformatted(head);
  zmq_send(s->router, zmq_msg_data(who), zmq_msg_size(who), ZMQ_SNDMORE);
  zmq_send(s->router, text, strlen(text), data ? ZMQ_SNDMORE : 0);
  if (data) zmq_send(s->router, data, len, 0);
  free(text);
}

static void s_reply_error(parallel_shard_server *s, zmq_msg_t *who, const char *why) {
  cJSON *h = cJSON_CreateObject();
  cJSON_AddBoolToObject(h, "ok", 0);
  cJSON_AddStringToObject(h, "error", why);
  s_reply(s, who, h, NULL, 0);
  cJSON_Delete(h);
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

/* "list": the listing; "read": up to S_CHUNK bytes of one of the shard's files from offset. */
static void s_serve_one(parallel_shard_server *s, zmq_msg_t *who, const char *text, size_t len) {
  char buf[4096];
  if (len >= sizeof buf) return s_reply_error(s, who, "request too long");
  memcpy(buf, text, len), buf[len] = 0;
  cJSON *req = cJSON_Parse(buf);
  parallel_shard_id id;
  const cJSON *op = cJSON_GetObjectItemCaseSensitive(req, "op");
  if (!req || !cJSON_IsString(op) || s_request_id(req, &id) != WT_OK) {
    s->refused++;
    s_reply_error(s, who, "malformed request");
    cJSON_Delete(req);
    return;
  }
  cJSON *h = cJSON_CreateObject();
  if (!strcmp(op->valuestring, "list")) {
    char hex[65], *listing = NULL;
    if (parallel_shard_digest(s->root, &id, hex, &listing) == WT_OK) {
      cJSON_AddBoolToObject(h, "ok", 1);
      cJSON_AddStringToObject(h, "listing", listing);
      s_reply(s, who, h, NULL, 0);
      s->served++;
    } else {
      s_reply_error(s, who, wt_last_error());
    }
    free(listing);
  } else if (!strcmp(op->valuestring, "read")) {
    const cJSON *path = cJSON_GetObjectItemCaseSensitive(req, "path"),
                *off = cJSON_GetObjectItemCaseSensitive(req, "offset");
    char line[300], run_dir[2048], full[2400];
    s_entry e[1];
    int n = 0;
    /* the path must be one this shard can list: checked as a one-line listing */
    if (cJSON_IsString(path) && cJSON_IsNumber(off) && off->valuedouble >= 0 &&
        strlen(path->valuestring) < 160)
      snprintf(line, sizeof line, "%064d  %s\n", 0, path->valuestring);
    else
      line[0] = 0;
    int fd = -1;
    if (line[0] && s_parse_listing(line, &id, e, &n) == WT_OK) {
      parallel_shard_run_dir(s->root, id.run, run_dir, sizeof run_dir);
      snprintf(full, sizeof full, "%s/%s", run_dir, e[0].path);
      fd = open(full, O_RDONLY | O_NOFOLLOW);
    }
    if (fd < 0) {
      s->refused += !line[0] || n == 0;
      s_reply_error(s, who, n ? "no such file" : "not a path of this shard");
    } else {
      char *data = wt_xmalloc(S_CHUNK);
      ssize_t got = pread(fd, data, S_CHUNK, (off_t)off->valuedouble);
      close(fd);
      if (got < 0) {
        s_reply_error(s, who, strerror(errno));
      } else {
        cJSON_AddBoolToObject(h, "ok", 1);
        cJSON_AddBoolToObject(h, "eof", got < S_CHUNK);
        s_reply(s, who, h, data, (size_t)got);
        s->served++;
      }
      free(data);
    }
  } else {
    s->refused++;
    s_reply_error(s, who, "unknown op");
  }
  cJSON_Delete(h);
  cJSON_Delete(req);
}

/* One request from the ROUTER: [identity][request]; anything else is dropped. */
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
  if (ok)
    s_serve_one(s, &who, zmq_msg_data(&req), zmq_msg_size(&req));
  else
    s->refused++;
  zmq_msg_close(&who), zmq_msg_close(&req);
}

static void *s_server_main(void *arg) {
  parallel_shard_server *s = arg;
  while (!s->stop) {
    zmq_pollitem_t it[2] = {{s->zap, 0, ZMQ_POLLIN, 0}, {s->router, 0, ZMQ_POLLIN, 0}};
    if (zmq_poll(it, 2, 100) <= 0) continue;
    if (it[0].revents & ZMQ_POLLIN) s_zap_answer(s);
    if (it[1].revents & ZMQ_POLLIN) s_serve_router(s);
  }
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
  pthread_mutex_init(&s->mu, NULL);
  s->allowed = wt_xcalloc(S_MAX_ALLOWED, 32);
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
  uint8_t k[32];
  if (!public_z85 || strlen(public_z85) != 40 || !zmq_z85_decode(k, public_z85))
    return wt_fail(WT_EINVAL, "shard server: %.60s is not a Z85 public key",
                   public_z85 ? public_z85 : "(null)");
  if (s_allowed(s, k)) return WT_OK;
  pthread_mutex_lock(&s->mu);
  /* the oldest key makes room when full: a run's members are far fewer */
  if (s->n_allowed == S_MAX_ALLOWED)
    memmove(s->allowed, s->allowed + 1, 32 * (S_MAX_ALLOWED - 1)), s->n_allowed--;
  memcpy(s->allowed[s->n_allowed++], k, 32);
  pthread_mutex_unlock(&s->mu);
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
  if (s->router) zmq_close(s->router);
  if (s->zap) zmq_close(s->zap);
  if (s->ctx) zmq_ctx_term(s->ctx);
  pthread_mutex_destroy(&s->mu);
  free(s->allowed);
  free(s);
  *s_p = NULL;
}

/* ---- fetching ---------------------------------------------------------------------------------
 */

typedef struct {
  void *ctx, *sock;
  double deadline;
} s_client;

static int s_client_open(s_client *c, const parallel_shard_holder *h, const char *pub,
                         const char *sec, double timeout_s) {
  c->sock = zmq_socket(c->ctx, ZMQ_DEALER);
  int linger = 0;
  int64_t max = S_CHUNK + 65536;
  zmq_setsockopt(c->sock, ZMQ_LINGER, &linger, sizeof linger);
  zmq_setsockopt(c->sock, ZMQ_MAXMSGSIZE, &max, sizeof max);
  zmq_setsockopt(c->sock, ZMQ_CURVE_SERVERKEY, h->public_key, 40);
  zmq_setsockopt(c->sock, ZMQ_CURVE_PUBLICKEY, pub, 40);
  zmq_setsockopt(c->sock, ZMQ_CURVE_SECRETKEY, sec, 40);
  c->deadline = wt_now_s() + timeout_s;
  if (zmq_connect(c->sock, h->endpoint) != 0)
    return wt_fail(WT_EINVAL, "cannot connect to %s: %s", h->endpoint, zmq_strerror(zmq_errno()));
  return WT_OK;
}

/* Sends one request and waits (until the holder's deadline) for its reply: the JSON head and,
 * for a read, the data part (malloc'd into *data). */
static int s_call(s_client *c, cJSON *req, cJSON **head, void **data, size_t *len) {
  char *text = cJSON_PrintUnformatted(req);
  int sent = zmq_send(c->sock, text, strlen(text), ZMQ_DONTWAIT);
  free(text);
  if (sent < 0) return wt_fail(WT_EIO, "cannot send: %s", zmq_strerror(zmq_errno()));
  zmq_pollitem_t it = {c->sock, 0, ZMQ_POLLIN, 0};
  long left = (long)((c->deadline - wt_now_s()) * 1000);
  if (left <= 0 || zmq_poll(&it, 1, left) <= 0 || !(it.revents & ZMQ_POLLIN))
    return wt_fail(WT_ETIMEOUT, "no answer within the deadline (down, not allowing this key, or "
                                "not the key given for it)");
  zmq_msg_t m;
  zmq_msg_init(&m);
  if (zmq_msg_recv(&m, c->sock, 0) < 0) {
    zmq_msg_close(&m);
    return wt_fail(WT_EIO, "receive failed: %s", zmq_strerror(zmq_errno()));
  }
  int more = zmq_msg_more(&m);
  *head = cJSON_ParseWithLength(zmq_msg_data(&m), zmq_msg_size(&m));
  zmq_msg_close(&m);
  if (data) *data = NULL, *len = 0;
  if (more) {
    zmq_msg_init(&m);
    if (zmq_msg_recv(&m, c->sock, 0) >= 0 && data) {
      *len = zmq_msg_size(&m);
      *data = wt_xmalloc(*len + 1);
      memcpy(*data, zmq_msg_data(&m), *len);
    }
    zmq_msg_close(&m);
  }
  const cJSON *ok = cJSON_GetObjectItemCaseSensitive(*head, "ok");
  if (!cJSON_IsTrue(ok)) {
    const cJSON *why = cJSON_GetObjectItemCaseSensitive(*head, "error");
    int rc = wt_fail(WT_ENOTFOUND, "refused: %.300s",
                     cJSON_IsString(why) ? why->valuestring : "a malformed answer");
    cJSON_Delete(*head), *head = NULL;
    if (data) free(*data), *data = NULL;
    return rc;
  }
  return WT_OK;
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

/* Fetches one file of the listing into tmp_dir/path, hashing as it goes. */
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
  int rc = WT_OK, eof = 0;
  for (double off = 0; rc == WT_OK && !eof;) {
    cJSON *req = s_request("read", id), *head = NULL;
    cJSON_AddStringToObject(req, "path", e->path);
    cJSON_AddNumberToObject(req, "offset", off);
    void *data = NULL;
    size_t len = 0;
    rc = s_call(c, req, &head, &data, &len);
    cJSON_Delete(req);
    if (rc == WT_OK) {
      eof = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(head, "eof")) || len == 0;
      crypto_hash_sha256_update(&st, data, len);
      if (fwrite(data, 1, len, f) != len) rc = wt_fail(WT_EIO, "cannot write %s", path);
      off += (double)len;
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
  if (rc == WT_OK && s_parse_listing(l->valuestring, id, e, &n) != WT_OK)
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
    int r = s_key_ok(holders[i].public_key) && holders[i].endpoint
                ? s_client_open(&c, &holders[i], public_z85, secret_z85, timeout_s)
                : wt_fail(WT_EINVAL, "no endpoint or no valid key");
    if (r == WT_OK) r = s_fetch_from(&c, root, id, digest);
    if (c.sock) zmq_close(c.sock), c.sock = NULL;
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
    snprintf(why + len, sizeof why - len, "%s%s: %.400s", len ? "; " : "",
             holders[i].endpoint ? holders[i].endpoint : "?", wt_last_error());
  }
  zmq_ctx_term(c.ctx);
  rc = any_answer ? WT_ECORRUPT : rc;
  return wt_fail(rc, "shard step %ld stage %d replica %d: no holder served it intact (%s)",
                 id->step, id->stage, id->replica, n ? why : "no holder is known");
}
