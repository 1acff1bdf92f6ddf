/* site_remote — a site whose ranks are processes (site.h): the site file, the control link,
 * rank 0's side of each call and the members' serve loop, around the one copy of the rank code
 * in site.c (site_internal.h). */
#include "parallel/datacenter/site.h"

#include "common/common.h"
#include "kernels/kernels.h"
#include "parallel/collectives/collectives.h" /* defines: parallel_broadcast */
#include "parallel/datacenter/cp.h"           /* defines: parallel_cp_position */
#include "parallel/datacenter/site_internal.h"
#include "parallel/transport/zmq.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define S_POLL_S 0.25 /* an idle wait's slice: how soon a stop or a lost peer is noticed */
#define S_RESEND_S                                                                                 \
  1.0 /* rank 0 repeats an unanswered OPEN this often (a member may be rebuilding                  \
         its control link and have lost the first) */
#define S_GRACE_S                                                                                  \
  3.0 /* after rank 0's own rank failed: how long it waits for the members'                        \
         reasons, which are usually already there */

/* Control messages (tag S_TAG_CTL on the control comm), one struct for all kinds. */
enum { S_OPEN = 1, S_ANSWER, S_START, S_CLOSE };
/* Data messages (on the session's data comm; below the tags comm_split maps, < 2^24). */
enum { S_TAG_CTL = 1, S_TAG_CALL, S_TAG_IN, S_TAG_STATUS, S_TAG_OUT };
#define S_OP_CLOSE 100 /* a call header that ends the session */

typedef struct {
  uint32_t type, session;
  int32_t rc; /* S_ANSWER: WT_OK, or the member's error (text) */
  gpt_config cfg;
  int32_t first, last, max_batch, max_seq, t, c;
  double timeout_s;
  char text[512];                                                  /* S_ANSWER: endpoint or error */
  char eps[PARALLEL_SITE_MAX_RANKS][PARALLEL_SITE_ENDPOINT_CHARS]; /* S_START */
} s_ctl;

typedef struct {
  int32_t op, B, T;
  float loss_scale;
} s_hdr;

/* An MoE member's routing after each call (then cfg.moe_experts int64 kept counts). */
typedef struct {
  int32_t blocks, forwards;
  int64_t dropped;
  double aux;
} s_stats;

typedef struct {
  int32_t rc;
  float loss;
  uint64_t bytes; /* the member's data comm bytes sent so far */
  char err[512];
} s_status;

struct parallel_site_link {
  parallel_site_decl decl;
  int rank;
  char pub[41], sec[41];
  const char *eps[PARALLEL_SITE_MAX_RANKS], *keys[PARALLEL_SITE_MAX_RANKS];
  double timeout_s;
  uint64_t run_id;
  uint32_t session;
  parallel_comm *ctl;
};

/* A site of processes: the session's data comm, on rank 0 and on a member. */
typedef struct site_remote {
  parallel_site_link *link;
  parallel_comm *data;
  uint32_t session;
  int broken;
  double timeout_s;
  uint64_t bytes[PARALLEL_SITE_MAX_RANKS]; /* rank 0: each member's last reported bytes */
  float *buf;                              /* rank 0: a member's rows or gradients */
  size_t buf_n;
  s_stats stats[PARALLEL_SITE_MAX_RANKS]; /* rank 0, an MoE site: each member's routing */
  long *kept;                             /* (n, E) */
  gpt_stage *canon;                       /* a member: its host copy of the stage */
  int *ids_a, *ids_b;                     /* a member: tokens, targets (B, T) */
  float *in, *out;                        /* a member: act_in / grad_out, act_out / grad_in */
} site_remote;

static site_remote *s_process_site(parallel_site *site);

/* ---- the site file --------------------------------------------------------------------------- */

static int s_bad(const char *path, const char *what) {
  return wt_fail(WT_EINVAL,
                 "site file %s: %s; expected {\"ranks\": [{\"endpoint\": \"tcp://HOST:PORT\", "
                 "\"public_key\": \"<40-character Z85 key>\"}, ...]} with 2 to %d ranks",
                 path, what, PARALLEL_SITE_MAX_RANKS);
}

static char *s_read_text(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    wt_fail(errno == ENOENT ? WT_ENOTFOUND : WT_EIO, "site file %s: %s", path, strerror(errno));
    return NULL;
  }
  size_t cap = 4096, n = 0;
  char *text = wt_xmalloc(cap);
  for (size_t got; (got = fread(text + n, 1, cap - n - 1, f)) > 0;) {
    n += got;
    if (n + 1 == cap) text = wt_xrealloc(text, cap *= 2, 1);
  }
  int err = ferror(f);
  fclose(f);
  text[n] = 0;
  if (err) {
    free(text);
    wt_fail(WT_EIO, "site file %s: read error", path);
    return NULL;
  }
  return text;
}

/* Checks one entry; `why` receives what is wrong with it. */
static int s_entry(const cJSON *e, int r, parallel_site_decl *d, char *why, size_t cap) {
  const cJSON *ep = cJSON_GetObjectItemCaseSensitive(e, "endpoint"),
              *key = cJSON_GetObjectItemCaseSensitive(e, "public_key");
  const char *port = cJSON_IsString(ep) ? strrchr(ep->valuestring, ':') : NULL;
  if (!cJSON_IsString(ep) || strncmp(ep->valuestring, "tcp://", 6) || !port ||
      port - ep->valuestring <= 6 || !port[1] ||
      strspn(port + 1, "0123456789") != strlen(port + 1) ||
      strlen(ep->valuestring) >= PARALLEL_SITE_ENDPOINT_CHARS) {
    snprintf(why, cap, "ranks[%d].endpoint is not tcp://HOST:PORT with a port number", r);
    return WT_EINVAL;
  }
  if (!cJSON_IsString(key) || strlen(key->valuestring) != PARALLEL_ZMQ_KEY_CHARS) {
    snprintf(why, cap, "ranks[%d].public_key is not a 40-character Z85 key", r);
    return WT_EINVAL;
  }
  for (int q = 0; q < r; q++)
    if (!strcmp(d->endpoint[q], ep->valuestring) || !strcmp(d->key[q], key->valuestring)) {
      snprintf(why, cap, "ranks[%d] repeats the %s of ranks[%d]", r,
               strcmp(d->endpoint[q], ep->valuestring) ? "public_key" : "endpoint", q);
      return WT_EINVAL;
    }
  snprintf(d->endpoint[r], sizeof d->endpoint[r], "%s", ep->valuestring);
  snprintf(d->key[r], sizeof d->key[r], "%s", key->valuestring);
  return WT_OK;
}

int parallel_site_decl_load(const char *path, parallel_site_decl *decl) {
  char *text = s_read_text(path);
  if (!text) return wt_last_status();
  cJSON *root = cJSON_Parse(text);
  free(text);
  if (!root) return s_bad(path, "not valid JSON");
  const cJSON *ranks = cJSON_GetObjectItemCaseSensitive(root, "ranks");
  int n = cJSON_IsArray(ranks) ? cJSON_GetArraySize(ranks) : -1, rc = WT_OK;
  char why[256] = "";
  parallel_site_decl *d = wt_xcalloc(1, sizeof *d);
  if (n < 0)
    snprintf(why, sizeof why, "\"ranks\" is missing or not an array");
  else if (n < 2 || n > PARALLEL_SITE_MAX_RANKS)
    snprintf(why, sizeof why, "\"ranks\" has %d entries", n);
  for (int r = 0; !why[0] && r < n; r++)
    rc = s_entry(cJSON_GetArrayItem(ranks, r), r, d, why, sizeof why);
  cJSON_Delete(root);
  if (why[0]) {
    free(d);
    return s_bad(path, why);
  }
  d->n = n;
  *decl = *d;
  free(d);
  return rc;
}

/* ---- the control link ------------------------------------------------------------------------ */

static int s_ctl_open(parallel_site_link *l) {
  parallel_zmq_config zc = parallel_zmq_config_default();
  zc.rank = l->rank, zc.size = l->decl.n, zc.endpoints = l->eps, zc.run_id = l->run_id;
  zc.epoch = 0, zc.timeout_s = S_POLL_S, zc.io_threads = 1;
  zc.public_key = l->pub, zc.secret_key = l->sec, zc.peer_public_keys = l->keys;
  return (l->ctl = parallel_zmq_comm_new(&zc)) ? WT_OK : wt_last_status();
}

parallel_site_link *parallel_site_link_new(const parallel_site_decl *decl, int rank,
                                           const char *public_key, const char *secret_key,
                                           double timeout_s) {
  if (decl->n < 2 || decl->n > PARALLEL_SITE_MAX_RANKS) {
    wt_fail(WT_EINVAL, "site: a site declares 2 to %d processes, not %d", PARALLEL_SITE_MAX_RANKS,
            decl->n);
    return NULL;
  }
  if (rank < 0 || rank >= decl->n) {
    wt_fail(WT_EINVAL, "site: rank %d is not one of the site file's %d ranks (0 to %d)", rank,
            decl->n, decl->n - 1);
    return NULL;
  }
  if (!public_key || strcmp(public_key, decl->key[rank])) {
    wt_fail(WT_EINVAL,
            "site: this process's public key %s is not the site file's ranks[%d].public_key %s; "
            "put this process's key (its key file's \"public\" line) at its rank in the site "
            "file, or give it the rank whose key it holds",
            public_key ? public_key : "(none)", rank, decl->key[rank]);
    return NULL;
  }
  if (!(timeout_s > 0)) {
    wt_fail(WT_EINVAL, "site: the link's timeout must be > 0 s (got %g)", timeout_s);
    return NULL;
  }
  parallel_site_link *l = wt_xcalloc(1, sizeof *l);
  l->decl = *decl, l->rank = rank, l->timeout_s = timeout_s;
  snprintf(l->pub, sizeof l->pub, "%s", public_key);
  snprintf(l->sec, sizeof l->sec, "%s", secret_key ? secret_key : "");
  uint64_t h = 1469598103934665603ull; /* FNV-1a of the declaration: the site's run id */
  for (int r = 0; r < decl->n; r++) {
    l->eps[r] = l->decl.endpoint[r], l->keys[r] = l->decl.key[r];
    for (const char *c = l->decl.endpoint[r]; *c; c++) h = (h ^ (uint8_t)*c) * 1099511628211ull;
    for (const char *c = l->decl.key[r]; *c; c++) h = (h ^ (uint8_t)*c) * 1099511628211ull;
  }
  l->run_id = h;
  /* Sessions of a restarted rank 0 must not reuse its last run's numbers (the data comm's epoch
   * keeps an old session's messages out). */
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  l->session = (uint32_t)(ts.tv_sec * 1000 + ts.tv_nsec / 1000000) ^ ((uint32_t)getpid() << 20);
  if (s_ctl_open(l) != WT_OK) {
    char why[512];
    snprintf(why, sizeof why, "%s", wt_last_error());
    free(l);
    wt_fail(WT_EIO, "site: rank %d cannot bind its control endpoint %s: %s", rank,
            decl->endpoint[rank], why);
    return NULL;
  }
  return l;
}

void parallel_site_link_destroy(parallel_site_link **self_p) {
  if (!self_p || !*self_p) return;
  parallel_comm_destroy(&(*self_p)->ctl);
  free(*self_p);
  *self_p = NULL;
}

int parallel_site_link_size(const parallel_site_link *link) {
  return link->decl.n;
}

int parallel_site_link_rank(const parallel_site_link *link) {
  return link->rank;
}

/* A control message to `peer`: WT_OK, or WT_EIO while its process is gone (the link stays:
 * a process restarted at the peer's entry makes it live again, zmq.h). */
static int s_ctl_send(parallel_site_link *l, int peer, const s_ctl *m) {
  return parallel_comm_send(l->ctl, peer, S_TAG_CTL, m, sizeof *m);
}

/* One control message from `peer` within one poll slice: WT_OK, WT_ETIMEOUT (none), or WT_EIO
 * while the peer is gone (after a short sleep, so that a loop over it does not spin). */
static int s_ctl_poll(parallel_site_link *l, int peer, s_ctl *m) {
  size_t got = 0;
  int rc = parallel_comm_recv(l->ctl, peer, S_TAG_CTL, m, sizeof *m, &got);
  if (rc == WT_OK && got != sizeof *m) return WT_ETIMEOUT; /* not ours: dropped */
  if (rc == WT_EIO) usleep(100 * 1000);
  return rc == WT_EMISMATCH ? WT_ETIMEOUT : rc;
}

/* The data transport of a session: this host (from the site file's entry), an ephemeral port. */
static parallel_zmq_transport *s_data_bind(parallel_site_link *l, uint32_t session,
                                           double timeout_s) {
  char mine[PARALLEL_SITE_ENDPOINT_CHARS];
  const char *ep = l->decl.endpoint[l->rank];
  snprintf(mine, sizeof mine, "%.*s:*", (int)(strrchr(ep, ':') - ep), ep);
  const char *eps[PARALLEL_SITE_MAX_RANKS];
  for (int r = 0; r < l->decl.n; r++) eps[r] = r == l->rank ? mine : l->eps[r];
  parallel_zmq_config zc = parallel_zmq_config_default();
  zc.rank = l->rank, zc.size = l->decl.n, zc.endpoints = eps, zc.run_id = l->run_id;
  zc.epoch = session, zc.timeout_s = timeout_s;
  zc.public_key = l->pub, zc.secret_key = l->sec, zc.peer_public_keys = l->keys;
  return parallel_zmq_transport_new(&zc);
}

/* ---- rank 0: opening a session --------------------------------------------------------------- */

/* OPEN to every member until each answered (repeated every S_RESEND_S), within the timeout.
 * eps receives the members' data endpoints. */
static int s_open(parallel_site *site, uint32_t session,
                  char (*eps)[PARALLEL_SITE_ENDPOINT_CHARS]) {
  parallel_site_link *l = site->remote->link;
  const int n = l->decl.n;
  s_ctl *m = wt_xcalloc(1, sizeof *m), *a = wt_xcalloc(1, sizeof *a);
  m->type = S_OPEN, m->session = session, m->cfg = site->cfg, m->first = site->first;
  m->last = site->last, m->max_batch = site->max_batch, m->max_seq = site->max_seq;
  m->t = site->t, m->c = site->c, m->timeout_s = site->remote->timeout_s;
  int answered[PARALLEL_SITE_MAX_RANKS] = {0}, left = n - 1, rc = WT_OK;
  double deadline = wt_now_s() + l->timeout_s, next_send = 0;
  while (left > 0 && rc == WT_OK) {
    double now = wt_now_s();
    if (now >= deadline) {
      for (int r = 1; r < n; r++)
        if (!answered[r]) {
          rc = wt_fail(WT_ETIMEOUT,
                       "site: member rank %d of %d (%s) did not answer within %.0f s; is its "
                       "peerd --site-rank %d running with this site file?",
                       r, n, l->eps[r], l->timeout_s, r);
          break;
        }
      break;
    }
    if (now >= next_send) {
      for (int r = 1; r < n; r++)
        if (!answered[r] && s_ctl_send(l, r, m) != WT_OK && wt_last_status() != WT_EIO) {
          rc = wt_fail(wt_last_status(), "site: member rank %d of %d (%s): %s", r, n, l->eps[r],
                       wt_last_error());
          break;
        }
      next_send = now + S_RESEND_S;
    }
    for (int r = 1; r < n && rc == WT_OK; r++) {
      if (answered[r] || s_ctl_poll(l, r, a) != WT_OK) continue;
      if (a->type != S_ANSWER || a->session != session) continue; /* an older session's */
      a->text[sizeof a->text - 1] = 0;
      if (a->rc != WT_OK) {
        rc = wt_fail(a->rc, "site: member rank %d of %d (%s) could not open the site: %s", r, n,
                     l->eps[r], a->text);
        break;
      }
      snprintf(eps[r], PARALLEL_SITE_ENDPOINT_CHARS, "%.255s", a->text);
      answered[r] = 1, left--;
    }
  }
  free(m), free(a);
  return rc;
}

/* The members' READY (their ranks built) on the data comm. */
static int s_ready(parallel_site *site) {
  site_remote *rem = site->remote;
  const int n = rem->link->decl.n;
  for (int r = 1; r < n; r++) {
    s_status st;
    size_t got = 0;
    if (parallel_comm_recv(rem->data, r, S_TAG_STATUS, &st, sizeof st, &got) != WT_OK)
      return wt_fail(wt_last_status(), "site: member rank %d of %d (%s) did not start: %s", r, n,
                     rem->link->eps[r], wt_last_error());
    st.err[sizeof st.err - 1] = 0;
    if (got != sizeof st || st.rc != WT_OK)
      return wt_fail(got != sizeof st ? WT_ECORRUPT : st.rc,
                     "site: member rank %d of %d (%s) could not start: %s", r, n, rem->link->eps[r],
                     got != sizeof st ? "a malformed status" : st.err);
    rem->bytes[r] = st.bytes;
  }
  return WT_OK;
}

parallel_site *parallel_site_new_linked(const gpt_config *cfg, int first, int last, int max_batch,
                                        int max_seq, int tp, int cp, const kernels_ops *k,
                                        parallel_site_link *link) {
  if (!k) k = kernels_cpu();
  if (parallel_site_check(cfg, first, last, max_batch, max_seq, tp, cp, k) != WT_OK) return NULL;
  if (!link || link->rank != 0 || tp * cp != link->decl.n) {
    wt_fail(WT_EINVAL,
            "site: %d × %d ranks on a site file of %d processes (rank %d); rank 0 "
            "opens a site of exactly the file's processes",
            tp, cp, link ? link->decl.n : 0, link ? link->rank : -1);
    return NULL;
  }
  parallel_site *site = parallel_site_alloc(cfg, first, last, max_batch, max_seq, tp, cp, k);
  site_remote *rem = s_process_site(site);
  rem->link = link, rem->timeout_s = link->timeout_s, rem->session = ++link->session;
  if (site->ep) rem->kept = wt_xcalloc((size_t)tp * cfg->moe_experts, sizeof(long));
  char(*eps)[PARALLEL_SITE_ENDPOINT_CHARS] =
      wt_xcalloc(PARALLEL_SITE_MAX_RANKS, PARALLEL_SITE_ENDPOINT_CHARS);
  const char *epp[PARALLEL_SITE_MAX_RANKS];
  parallel_zmq_transport *tr = s_data_bind(link, rem->session, rem->timeout_s);
  int rc = tr ? WT_OK : wt_last_status();
  if (rc == WT_OK) {
    snprintf(eps[0], PARALLEL_SITE_ENDPOINT_CHARS, "%s", parallel_zmq_transport_endpoint(tr));
    rc = s_open(site, rem->session, eps);
  }
  if (rc == WT_OK) {
    s_ctl *m = wt_xcalloc(1, sizeof *m);
    m->type = S_START, m->session = rem->session;
    memcpy(m->eps, eps, (size_t)link->decl.n * PARALLEL_SITE_ENDPOINT_CHARS);
    for (int r = 1; r < link->decl.n && rc == WT_OK; r++)
      if ((rc = s_ctl_send(link, r, m)) != WT_OK)
        wt_fail(rc, "site: member rank %d of %d (%s): %s", r, link->decl.n, link->eps[r],
                wt_last_error());
    free(m);
  }
  for (int r = 0; r < link->decl.n; r++) epp[r] = eps[r];
  if (rc == WT_OK && !(rem->data = parallel_zmq_transport_connect(&tr, epp))) rc = wt_last_status();
  if (rc == WT_OK) rc = parallel_site_rank_new(site, 0, rem->data);
  if (rc == WT_OK) rc = s_ready(site);
  parallel_zmq_transport_destroy(&tr);
  free(eps);
  if (rc != WT_OK) {
    char why[1024];
    snprintf(why, sizeof why, "%s", wt_last_error());
    parallel_site_destroy(&site);
    wt_fail(rc, "%s", why);
    return NULL;
  }
  return site;
}

/* ---- rank 0: the calls ----------------------------------------------------------------------- */

/* Ends the session after a failure: the ranks' mesh first (it lives on the data comm), then the
 * data comm, whose goodbye makes every member's wait fail at once. */
static void s_break(parallel_site *site) {
  site_remote *rem = site->remote;
  rem->broken = 1;
  parallel_site_rank_destroy(site, &site->ranks[site->self]);
  memset(&site->ranks[site->self], 0, sizeof site->ranks[site->self]);
  parallel_comm_destroy(&rem->data);
}

/* Sends every member the call header and the inputs its rank reads. */
static int s_send_call(parallel_site *site, int r) {
  site_remote *rem = site->remote;
  const site_call *c = &site->call;
  const int fw = c->op == SITE_FORWARD, B = fw ? c->B : site->B, T = fw ? c->T : site->T;
  const size_t BT = (size_t)B * T, C = (size_t)site->cfg.channels;
  s_hdr h = {.op = (int32_t)c->op, .B = B, .T = T, .loss_scale = c->loss_scale};
  WT_CHECK(parallel_comm_send(rem->data, r, S_TAG_CALL, &h, sizeof h));
  if (fw && site->has_first)
    WT_CHECK(parallel_comm_send(rem->data, r, S_TAG_IN, c->tokens, BT * sizeof(int)));
  if (fw && !site->has_first)
    WT_CHECK(parallel_comm_send(rem->data, r, S_TAG_IN, c->act_in, BT * C * sizeof(float)));
  if (fw && site->has_last)
    WT_CHECK(parallel_comm_send(rem->data, r, S_TAG_IN, c->targets, BT * sizeof(int)));
  if (c->op == SITE_BACKWARD && !site->has_last)
    WT_CHECK(parallel_comm_send(rem->data, r, S_TAG_IN, c->grad_out, BT * C * sizeof(float)));
  return WT_OK;
}

static float *s_buf(site_remote *rem, size_t n) {
  if (n > rem->buf_n) free(rem->buf), rem->buf = wt_xmalloc(n * sizeof(float)), rem->buf_n = n;
  return rem->buf;
}

/* Member r's status and outputs: its rows of act_out / grad_in at its CP positions, or its
 * gradients added into the stage's. */
static int s_collect(parallel_site *site, int r, s_status *st) {
  site_remote *rem = site->remote;
  const site_call *c = &site->call;
  size_t got = 0;
  WT_CHECK(parallel_comm_recv(rem->data, r, S_TAG_STATUS, st, sizeof *st, &got));
  st->err[sizeof st->err - 1] = 0;
  if (got != sizeof *st) return wt_fail(WT_ECORRUPT, "a malformed status of %zu bytes", got);
  rem->bytes[r] = st->bytes;
  if (st->rc != WT_OK) return wt_fail(st->rc, "%s", st->err);
  site->ranks[r].loss = st->loss;
  const int cpr = r / site->t, B = c->op == SITE_FORWARD ? c->B : site->B,
            T = c->op == SITE_FORWARD ? c->T : site->T;
  const size_t C = (size_t)site->cfg.channels, rows = (size_t)B * (T / site->c);
  float *full = c->op == SITE_FORWARD && !site->has_last     ? c->act_out
                : c->op == SITE_BACKWARD && !site->has_first ? c->grad_in
                                                             : NULL;
  if (full && site->ep) { /* EP rank r's rows [r·B/t, (r+1)·B/t) */
    const size_t n = (size_t)(B / site->t) * T * C;
    WT_CHECK(
        parallel_comm_recv(rem->data, r, S_TAG_OUT, full + (size_t)r * n, n * sizeof(float), &got));
    if (got != n * sizeof(float))
      return wt_fail(WT_ECORRUPT, "%zu bytes of rows, expected %zu", got, n * 4);
  } else if (full && r % site->t == 0) {
    WT_CHECK(parallel_comm_recv(rem->data, r, S_TAG_OUT, s_buf(rem, rows * C),
                                rows * C * sizeof(float), &got));
    if (got != rows * C * sizeof(float))
      return wt_fail(WT_ECORRUPT, "%zu bytes of rows, expected %zu", got, rows * C * 4);
    int *pos = wt_xcalloc((size_t)T, sizeof(int));
    for (int i = 0; i < T / site->c; i++) pos[i] = parallel_cp_position(site->c, cpr, T, i);
    parallel_site_rows_copy(pos, site->c, full, rem->buf, B, T, C * sizeof(float), 1);
    free(pos);
  }
  if (c->op == SITE_GRADS) {
    size_t n = 0;
    float *g = gpt_stage_grads_host(c->stage, &n);
    WT_CHECK(parallel_comm_recv(rem->data, r, S_TAG_OUT, s_buf(rem, n), n * sizeof(float), &got));
    if (got != n * sizeof(float))
      return wt_fail(WT_ECORRUPT, "%zu bytes of gradients, expected %zu", got, n * 4);
    /* g + 0 is g: the member's zeros elsewhere leave the threaded site's order of sums. */
    for (size_t j = 0; j < n; j++) g[j] += rem->buf[j];
  }
  if (site->ep) {
    const size_t E = (size_t)site->cfg.moe_experts, bytes = sizeof(s_stats) + E * sizeof(int64_t);
    uint8_t *msg = wt_xmalloc(bytes);
    int rc = parallel_comm_recv(rem->data, r, S_TAG_OUT, msg, bytes, &got);
    if (rc == WT_OK && got != bytes) rc = wt_fail(WT_ECORRUPT, "routing of %zu bytes", got);
    if (rc == WT_OK) {
      memcpy(&rem->stats[r], msg, sizeof(s_stats));
      for (size_t e = 0; e < E; e++) {
        int64_t v;
        memcpy(&v, msg + sizeof(s_stats) + e * sizeof v, sizeof v);
        rem->kept[(size_t)r * E + e] = (long)v;
      }
    }
    free(msg);
    return rc;
  }
  return WT_OK;
}

/* Rank 0 and a member know their own routing; the others' came with their last answers. */
static int s_process_moe_stats(const parallel_site *site, int r, long *kept, long *dropped,
                               double *aux, int *forwards) {
  if (r == site->self) return gpt_stage_moe_stats(site->ranks[r].st, kept, dropped, aux, forwards);
  const site_remote *rem = site->remote;
  const s_stats *st = &rem->stats[r];
  const size_t E = (size_t)site->cfg.moe_experts;
  if (kept) memcpy(kept, rem->kept + (size_t)r * E, E * sizeof(long));
  if (dropped) *dropped = st->dropped;
  if (aux) *aux = st->aux;
  if (forwards) *forwards = st->forwards;
  return st->blocks;
}

static int s_process_run(parallel_site *site, const char *what) {
  site_remote *rem = site->remote;
  const int n = rem->link->decl.n;
  if (rem->broken)
    return wt_fail(WT_EIO,
                   "site %s: an earlier call of this site failed; destroy it and open a new one",
                   what);
  int rc = WT_OK, bad = -1, brc = WT_OK;
  char why[1024] = "", mwhy[1024] = "";
  for (int r = 1; r < n && bad < 0; r++)
    if ((brc = s_send_call(site, r)) != WT_OK) {
      bad = r;
      snprintf(mwhy, sizeof mwhy, "%s", wt_last_error());
    }
  if (bad < 0) { /* the members run: every rank's part, then each member's answer */
    if (site->call.op == SITE_LOAD) {
      size_t np = 0;
      gpt_stage_params_host(site->call.stage, &np);
      rc = parallel_broadcast(rem->data, (void *)site->call.params, np * sizeof(float), 0);
    }
    if (rc == WT_OK) rc = parallel_site_rank_call(site, &site->ranks[0]);
    if (rc != WT_OK) {
      snprintf(why, sizeof why, "%s", site->ranks[0].err[0] ? site->ranks[0].err : wt_last_error());
      /* The members' reasons are usually there already: don't wait the call's deadline. */
      parallel_zmq_set_timeout(rem->data, S_GRACE_S);
    }
    for (int r = 1; r < n; r++) {
      s_status st;
      int mrc = s_collect(site, r, &st);
      /* The first member that failed for a reason of its own, else the first that is gone. */
      if (mrc != WT_OK && (bad < 0 || (brc == WT_EIO && mrc != WT_EIO))) {
        bad = r, brc = mrc;
        snprintf(mwhy, sizeof mwhy, "%s", wt_last_error());
      }
    }
  }
  if (rc == WT_OK && bad < 0) return WT_OK;
  s_break(site);
  /* Rank 0's own reason first unless it only saw a member go (as the threaded site does). */
  if (rc != WT_OK && (rc != WT_EIO || bad < 0))
    return wt_fail(rc, "site %s: rank 0 of %d: %s", what, n, why);
  return wt_fail(brc, "site %s: site member rank %d of %d (%s): %s", what, bad, n,
                 rem->link->eps[bad], mwhy);
}

static void s_process_close(parallel_site *site) {
  site_remote *rem = site->remote;
  parallel_site_link *l = rem->link;
  /* Destroying a failed site must not replace the failure's message with a goodbye's. */
  const int code = wt_last_status();
  char *why = wt_xstrdup(wt_last_error());
  if (site->self == 0) {
    s_hdr h = {.op = S_OP_CLOSE};
    for (int r = 1; rem->data && r < l->decl.n; r++)
      parallel_comm_send(rem->data, r, S_TAG_CALL, &h, sizeof h);
    s_ctl *m = wt_xcalloc(1, sizeof *m); /* for members still waiting for START */
    m->type = S_CLOSE, m->session = rem->session;
    for (int r = 1; r < l->decl.n; r++) parallel_comm_send(l->ctl, r, S_TAG_CTL, m, sizeof *m);
    free(m);
  }
  parallel_site_rank_destroy(site, &site->ranks[site->self]);
  memset(&site->ranks[site->self], 0, sizeof site->ranks[site->self]);
  parallel_comm_destroy(&rem->data);
  gpt_stage_destroy(&rem->canon);
  free(rem->buf), free(rem->kept), free(rem->ids_a), free(rem->ids_b), free(rem->in),
      free(rem->out);
  free(rem);
  site->remote = NULL;
  if (code != WT_OK) wt_fail(code, "%s", why);
  free(why);
}

static void s_process_set_timeout(parallel_site *site, double timeout_s) {
  site->remote->timeout_s = timeout_s;
  if (site->remote->data) parallel_zmq_set_timeout(site->remote->data, timeout_s);
}

static uint64_t s_process_bytes(const parallel_site *site) {
  const site_remote *rem = site->remote;
  uint64_t sum = rem->data ? parallel_comm_bytes_sent(rem->data) : 0;
  for (int r = 1; r < rem->link->decl.n; r++) sum += rem->bytes[r];
  return sum;
}

/* One call gathers: each member adds its ranks' gradients into its own buffer. */
static int s_process_gather_grads(parallel_site *site, gpt_stage *stage, float *g) {
  site->call = (site_call){.op = SITE_GRADS, .stage = stage, .grads = g};
  return s_process_run(site, "gradient gather");
}

static const site_runner_ops s_process = {.name = "processes",
                                          .run = s_process_run,
                                          .gather_grads = s_process_gather_grads,
                                          .moe_stats = s_process_moe_stats,
                                          .set_timeout = s_process_set_timeout,
                                          .bytes = s_process_bytes,
                                          .close = s_process_close};

/* Makes site a site of processes: its runner and that runner's (empty) state. */
static site_remote *s_process_site(parallel_site *site) {
  site->runner = &s_process;
  return site->remote = wt_xcalloc(1, sizeof *site->remote);
}

/* ---- a member: serving sessions -------------------------------------------------------------- */

/* The member's site of session m (after START): its rank over the data comm, its stage copy. */
static int s_member_site(parallel_site_link *l, const s_ctl *m, parallel_zmq_transport **tr,
                         const kernels_ops *k, parallel_site **out) {
  WT_CHECK(
      parallel_site_check(&m->cfg, m->first, m->last, m->max_batch, m->max_seq, m->t, m->c, k));
  if (m->t * m->c != l->decl.n)
    return wt_fail(WT_EINVAL, "site: %d × %d ranks on a site file of %d processes", m->t, m->c,
                   l->decl.n);
  parallel_site *site =
      parallel_site_alloc(&m->cfg, m->first, m->last, m->max_batch, m->max_seq, m->t, m->c, k);
  site_remote *rem = s_process_site(site);
  *out = site;
  site->self = l->rank;
  rem->link = l, rem->session = m->session, rem->timeout_s = m->timeout_s;
  const char *eps[PARALLEL_SITE_MAX_RANKS];
  for (int r = 0; r < l->decl.n; r++) eps[r] = m->eps[r];
  if (!(rem->data = parallel_zmq_transport_connect(tr, eps))) return wt_last_status();
  WT_CHECK_NEW(rem->canon, gpt_stage_new(&m->cfg, m->first, m->last, m->max_batch, m->max_seq));
  WT_CHECK(parallel_site_layout_of(site, rem->canon));
  const size_t BT = (size_t)m->max_batch * m->max_seq, C = (size_t)m->cfg.channels;
  rem->ids_a = wt_xcalloc(BT, sizeof(int)), rem->ids_b = wt_xcalloc(BT, sizeof(int));
  rem->in = wt_xcalloc(BT * C, sizeof(float)), rem->out = wt_xcalloc(BT * C, sizeof(float));
  return parallel_site_rank_new(site, l->rank, rem->data);
}

static int s_recv_in(parallel_site *site, void *buf, size_t bytes) {
  size_t got = 0;
  WT_CHECK(parallel_comm_recv(site->remote->data, 0, S_TAG_IN, buf, bytes, &got));
  if (got != bytes)
    return wt_fail(WT_ECORRUPT, "site: an input of %zu bytes, expected %zu", got, bytes);
  return WT_OK;
}

/* An MoE member's routing since the last gather (parallel_site_moe_stats adds it up). */
static int s_send_stats(parallel_site *site, site_rank *rk) {
  const size_t E = (size_t)site->cfg.moe_experts, bytes = sizeof(s_stats) + E * sizeof(int64_t);
  long *kept = wt_xcalloc(E, sizeof *kept), dropped = 0;
  s_stats st = {0};
  double aux = 0;
  int fw = 0;
  st.blocks = gpt_stage_moe_stats(rk->st, kept, &dropped, &aux, &fw);
  st.forwards = fw, st.dropped = dropped, st.aux = aux;
  uint8_t *msg = wt_xmalloc(bytes);
  memcpy(msg, &st, sizeof st);
  for (size_t e = 0; e < E; e++) {
    int64_t v = kept[e];
    memcpy(msg + sizeof st + e * sizeof v, &v, sizeof v);
  }
  free(kept);
  return parallel_comm_send_owned(site->remote->data, 0, S_TAG_OUT, msg, bytes);
}

/* One call of rank 0 on this member: its inputs, the rank code, the status and outputs back. */
static int s_member_call(parallel_site *site, const s_hdr *h) {
  site_remote *rem = site->remote;
  site_rank *rk = &site->ranks[site->self];
  const size_t BT = (size_t)h->B * h->T, C = (size_t)site->cfg.channels;
  const int pass = h->op == SITE_FORWARD || h->op == SITE_BACKWARD;
  if (h->op < SITE_LOAD || h->op > SITE_GRADS ||
      (pass && (h->B < 1 || h->T < 1 || h->B > site->max_batch || h->T > site->max_seq)))
    return wt_fail(WT_ECORRUPT, "site: a call header of op %d, batch %d x %d", h->op, h->B, h->T);
  site->call = (site_call){.op = (site_op)h->op, .B = h->B, .T = h->T, .loss_scale = h->loss_scale};
  site_call *c = &site->call;
  size_t np = 0;
  float *p = gpt_stage_params_host(rem->canon, &np), *g = gpt_stage_grads_host(rem->canon, NULL);
  int rc = WT_OK;
  switch (c->op) {
  case SITE_LOAD:
    rc = parallel_broadcast(rem->data, p, np * sizeof(float), 0);
    c->params = p, c->stage = rem->canon;
    break;
  case SITE_FORWARD:
    site->B = site->T = 0;
    if (site->has_first)
      rc = s_recv_in(site, rem->ids_a, BT * sizeof(int)), c->tokens = rem->ids_a;
    else
      rc = s_recv_in(site, rem->in, BT * C * sizeof(float)), c->act_in = rem->in;
    if (rc == WT_OK && site->has_last)
      rc = s_recv_in(site, rem->ids_b, BT * sizeof(int)), c->targets = rem->ids_b;
    c->act_out = site->has_last ? NULL : rem->out;
    break;
  case SITE_BACKWARD:
    if (!site->has_last)
      rc = s_recv_in(site, rem->in, BT * C * sizeof(float)), c->grad_out = rem->in;
    c->grad_in = site->has_first ? NULL : rem->out;
    break;
  case SITE_GRADS:
    memset(g, 0, np * sizeof(float));
    c->grads = g, c->round = rk->cp, c->stage = rem->canon;
    break;
  }
  if (rc == WT_OK)
    rc = parallel_site_rank_call(site, rk);
  else
    snprintf(rk->err, sizeof rk->err, "%s", wt_last_error());
  if (rc == WT_OK && c->op == SITE_FORWARD) site->B = h->B, site->T = h->T;
  s_status st = {.rc = rc, .loss = rk->loss, .bytes = parallel_comm_bytes_sent(rem->data)};
  snprintf(st.err, sizeof st.err, "%s", rc == WT_OK ? "" : rk->err);
  WT_CHECK(parallel_comm_send(rem->data, 0, S_TAG_STATUS, &st, sizeof st));
  if (rc != WT_OK) return wt_fail(rc, "%s", rk->err);
  float *full = c->op == SITE_FORWARD ? c->act_out : c->op == SITE_BACKWARD ? c->grad_in : NULL;
  if (full && site->ep) { /* this EP rank's rows */
    const size_t n = (size_t)(h->B / site->t) * h->T * C;
    WT_CHECK(
        parallel_comm_send(rem->data, 0, S_TAG_OUT, full + (size_t)rk->tp * n, n * sizeof(float)));
  } else if (full && rk->tp == 0) { /* this CP rank's rows, in local order: rank 0 places them */
    const size_t rows = (size_t)h->B * (h->T / site->c);
    float *mine = wt_xmalloc(rows * C * sizeof(float));
    parallel_site_rows_copy(rk->pos, site->c, mine, full, h->B, h->T, C * sizeof(float), 0);
    WT_CHECK(parallel_comm_send_owned(rem->data, 0, S_TAG_OUT, mine, rows * C * sizeof(float)));
  }
  if (c->op == SITE_GRADS)
    WT_CHECK(parallel_comm_send(rem->data, 0, S_TAG_OUT, g, np * sizeof(float)));
  return site->ep ? s_send_stats(site, rk) : WT_OK;
}

/* A session from START to its end: rank 0's CLOSE (WT_OK), a stop, or a failure (its error). */
static int s_member_session(parallel_site_link *l, const s_ctl *m, parallel_zmq_transport **tr,
                            const kernels_ops *k, const volatile sig_atomic_t *stop) {
  parallel_site *site = NULL;
  int rc = s_member_site(l, m, tr, k, &site);
  if (site && site->remote->data) {
    s_status st = {.rc = rc, .bytes = 0};
    snprintf(st.err, sizeof st.err, "%s", rc == WT_OK ? "" : wt_last_error());
    if (parallel_comm_send(site->remote->data, 0, S_TAG_STATUS, &st, sizeof st) != WT_OK && !rc)
      rc = wt_last_status();
  }
  if (rc == WT_OK)
    printf("site: rank %d serves layers [%d, %d) as TP rank %d of %d, CP rank %d of %d "
           "(session %u)\n",
           l->rank, m->first, m->last, l->rank % m->t, m->t, l->rank / m->t, m->c, m->session);
  fflush(stdout);
  while (rc == WT_OK && !*stop) {
    s_hdr h;
    size_t got = 0;
    parallel_zmq_set_timeout(site->remote->data, S_POLL_S);
    rc = parallel_comm_recv(site->remote->data, 0, S_TAG_CALL, &h, sizeof h, &got);
    if (rc == WT_ETIMEOUT) {
      rc = WT_OK;
      continue;
    }
    if (rc != WT_OK) break;
    if (got != sizeof h) {
      rc = wt_fail(WT_ECORRUPT, "site: a call header of %zu bytes", got);
      break;
    }
    if (h.op == S_OP_CLOSE) break;
    parallel_zmq_set_timeout(site->remote->data, site->remote->timeout_s);
    rc = s_member_call(site, &h);
  }
  char why[1024];
  snprintf(why, sizeof why, "%s", wt_last_error());
  parallel_site_destroy(&site); /* its goodbye ends rank 0's waits on this member */
  if (rc != WT_OK) wt_fail(rc, "%s", why);
  return rc;
}

int parallel_site_serve(parallel_site_link *link, const kernels_ops *k,
                        const volatile sig_atomic_t *stop) {
  if (link->rank == 0)
    return wt_fail(WT_EINVAL, "site: rank 0 opens the site's sessions; ranks >= 1 serve them");
  if (!k) k = kernels_cpu();
  s_ctl *m = wt_xcalloc(1, sizeof *m), *open = wt_xcalloc(1, sizeof *open);
  parallel_zmq_transport *tr = NULL; /* the pending session's, between OPEN and START */
  while (!*stop) {
    if (!link->ctl && s_ctl_open(link) != WT_OK) {
      usleep(500 * 1000);
      continue;
    }
    if (s_ctl_poll(link, 0, m) != WT_OK) continue;
    if (m->type == S_OPEN) {
      if (tr && m->session == open->session) { /* a repeated OPEN: answer again */
        s_ctl a = {.type = S_ANSWER, .session = m->session, .rc = WT_OK};
        snprintf(a.text, sizeof a.text, "%s", parallel_zmq_transport_endpoint(tr));
        s_ctl_send(link, 0, &a);
        continue;
      }
      parallel_zmq_transport_destroy(&tr);
      *open = *m;
      s_ctl *a = wt_xcalloc(1, sizeof *a);
      a->type = S_ANSWER, a->session = m->session;
      int rc =
          m->timeout_s > 0 ? WT_OK : wt_fail(WT_EINVAL, "site: a timeout of %g s", m->timeout_s);
      if (rc == WT_OK)
        rc = parallel_site_check(&m->cfg, m->first, m->last, m->max_batch, m->max_seq, m->t, m->c,
                                 k);
      if (rc == WT_OK && !(tr = s_data_bind(link, m->session, m->timeout_s))) rc = wt_last_status();
      a->rc = rc;
      snprintf(a->text, sizeof a->text, "%s",
               rc == WT_OK ? parallel_zmq_transport_endpoint(tr) : wt_last_error());
      if (rc != WT_OK)
        fprintf(stderr, "site: rank %d refused session %u: %s\n", link->rank, m->session, a->text);
      s_ctl_send(link, 0, a);
      free(a);
    } else if (m->type == S_START && tr && m->session == open->session) {
      memcpy(open->eps, m->eps, sizeof m->eps);
      for (int r = 0; r < PARALLEL_SITE_MAX_RANKS; r++) /* never read past an endpoint */
        open->eps[r][PARALLEL_SITE_ENDPOINT_CHARS - 1] = 0;
      if (s_member_session(link, open, &tr, k, stop) != WT_OK) {
        fprintf(stderr, "site: rank %d: session %u failed: %s\n", link->rank, open->session,
                wt_last_error());
        fflush(stderr);
      }
      parallel_zmq_transport_destroy(&tr);
    } else if (m->type == S_CLOSE && tr && m->session == open->session) {
      parallel_zmq_transport_destroy(&tr);
    }
  }
  parallel_zmq_transport_destroy(&tr);
  free(m), free(open);
  return WT_OK;
}
