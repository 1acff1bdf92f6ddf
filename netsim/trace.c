/* trace — the simulated timeline as Chrome trace JSON (Perfetto, chrome://tracing).
 *
 * Slices on one thread must nest, but transfers overlap freely, so each device's sends (and
 * receives) are spread over as many lanes as overlap at once: a greedy interval partition. */
#include "netsim/sim_internal.h"

#include "common/common.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#define S_TID_COMPUTE 0
#define S_TID_SEND 100
#define S_TID_RECV 200
#define S_MAX_LANES 99

typedef struct {
  char name[64];
  const char *cat;
  int pid, tid;
  double ts_s, dur_s;
} s_slice;

struct netsim_trace {
  s_slice *slices;
  int n;
  int n_devices;
  int *lanes_send, *lanes_recv; /* lanes used per device */
};

typedef struct {
  double start, end;
  int task;
} s_interval;

static int s_by_start(const void *a, const void *b) {
  const s_interval *x = a, *y = b;
  if (x->start != y->start) return x->start < y->start ? -1 : 1;
  return x->task - y->task;
}

/* Places one device's intervals (sorted) on lanes; writes each one's lane; returns lanes used. */
static int s_partition(s_interval *iv, int n, int *lane_of) {
  double lane_end[S_MAX_LANES];
  int lanes = 0;
  for (int i = 0; i < n; i++) {
    int l = 0;
    while (l < lanes && lane_end[l] > iv[i].start) l++;
    if (l == S_MAX_LANES) l = S_MAX_LANES - 1; /* pathological overlap: share the last lane */
    if (l == lanes) lanes++;
    lane_end[l] = iv[i].end;
    lane_of[i] = l;
  }
  return lanes;
}

static void s_add(netsim_trace *tr, const netsim_task *t, const char *cat, int pid, int tid,
                  double start, double end) {
  s_slice *s = &tr->slices[tr->n++];
  snprintf(s->name, sizeof s->name, "%s", t->label);
  s->cat = cat;
  s->pid = pid;
  s->tid = tid;
  s->ts_s = start;
  s->dur_s = end > start ? end - start : 0;
}

/* Sends run from ready to last byte out; receives from first byte in to arrival. */
static void s_add_transfers(netsim_trace *tr, const netsim_graph *g, int device, int recv) {
  s_interval *iv = wt_xmalloc(sizeof *iv * (size_t)(g->n ? g->n : 1));
  int n = 0;
  for (int i = 0; i < g->n; i++) {
    const netsim_task *t = &g->tasks[i];
    if (t->kind != NETSIM_TASK_XFER || (recv ? t->dst : t->device) != device) continue;
    double start = recv ? t->start_s + t->latency_s : t->start_s;
    double end = recv ? t->end_s : t->send_end_s;
    iv[n++] = (s_interval){start, end > start ? end : start, i};
  }
  qsort(iv, (size_t)n, sizeof *iv, s_by_start);
  int *lane = wt_xmalloc(sizeof(int) * (size_t)(n ? n : 1));
  int used = s_partition(iv, n, lane);
  for (int i = 0; i < n; i++)
    s_add(tr, &g->tasks[iv[i].task], recv ? "recv" : "send", device,
          (recv ? S_TID_RECV : S_TID_SEND) + lane[i], iv[i].start, iv[i].end);
  (recv ? tr->lanes_recv : tr->lanes_send)[device] = used;
  free(lane);
  free(iv);
}

netsim_trace *netsim_trace_from_graph(const netsim_graph *g, int n_devices) {
  netsim_trace *tr = wt_xcalloc(1, sizeof *tr);
  tr->slices = wt_xmalloc(sizeof(s_slice) * (size_t)(2 * g->n + 1));
  tr->n_devices = n_devices;
  tr->lanes_send = wt_xcalloc((size_t)n_devices, sizeof(int));
  tr->lanes_recv = wt_xcalloc((size_t)n_devices, sizeof(int));
  for (int i = 0; i < g->n; i++) {
    const netsim_task *t = &g->tasks[i];
    if (t->kind == NETSIM_TASK_COMPUTE)
      s_add(tr, t, "compute", t->device, S_TID_COMPUTE, t->start_s, t->end_s);
  }
  for (int d = 0; d < n_devices; d++) {
    s_add_transfers(tr, g, d, 0);
    s_add_transfers(tr, g, d, 1);
  }
  return tr;
}

static void s_meta(cJSON *events, const char *what, int pid, int tid, const char *name) {
  cJSON *e = cJSON_CreateObject();
  cJSON_AddStringToObject(e, "name", what);
  cJSON_AddStringToObject(e, "ph", "M");
  cJSON_AddNumberToObject(e, "pid", pid);
  cJSON_AddNumberToObject(e, "tid", tid);
  cJSON_AddStringToObject(cJSON_AddObjectToObject(e, "args"), "name", name);
  cJSON_AddItemToArray(events, e);
}

static void s_lane_names(const netsim_trace *tr, cJSON *events) {
  char name[48];
  for (int d = 0; d < tr->n_devices; d++) {
    snprintf(name, sizeof name, "device %d", d);
    s_meta(events, "process_name", d, 0, name);
    s_meta(events, "thread_name", d, S_TID_COMPUTE, "compute");
    for (int l = 0; l < tr->lanes_send[d]; l++) {
      snprintf(name, sizeof name, "send %d", l);
      s_meta(events, "thread_name", d, S_TID_SEND + l, name);
    }
    for (int l = 0; l < tr->lanes_recv[d]; l++) {
      snprintf(name, sizeof name, "recv %d", l);
      s_meta(events, "thread_name", d, S_TID_RECV + l, name);
    }
  }
}

char *netsim_trace_to_json(const netsim_trace *self) {
  cJSON *root = cJSON_CreateObject();
  cJSON *events = cJSON_AddArrayToObject(root, "traceEvents");
  cJSON_AddStringToObject(root, "displayTimeUnit", "ms");
  s_lane_names(self, events);
  for (int i = 0; i < self->n; i++) {
    const s_slice *s = &self->slices[i];
    cJSON *e = cJSON_CreateObject();
    cJSON_AddStringToObject(e, "name", s->name);
    cJSON_AddStringToObject(e, "cat", s->cat);
    cJSON_AddStringToObject(e, "ph", "X");
    cJSON_AddNumberToObject(e, "pid", s->pid);
    cJSON_AddNumberToObject(e, "tid", s->tid);
    cJSON_AddNumberToObject(e, "ts", s->ts_s * 1e6); /* Chrome trace times are microseconds */
    cJSON_AddNumberToObject(e, "dur", s->dur_s * 1e6);
    cJSON_AddItemToArray(events, e);
  }
  char *text = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  return text;
}

int netsim_trace_write(const netsim_trace *self, const char *path) {
  char *text = netsim_trace_to_json(self);
  FILE *f = fopen(path, "w");
  int ok = f && fputs(text, f) >= 0;
  if (f && fclose(f) != 0) ok = 0;
  free(text);
  if (!ok) return wt_fail(WT_EIO, "cannot write trace %s (check the directory exists)", path);
  return WT_OK;
}

void netsim_trace_destroy(netsim_trace **self_p) {
  netsim_trace *tr = *self_p;
  if (!tr) return;
  free(tr->slices);
  free(tr->lanes_send);
  free(tr->lanes_recv);
  free(tr);
  *self_p = NULL;
}
