/* scenario — the scenario object: allocation, accessors and the cost-model problem it implies. */
#include "netsim/scenario_internal.h"

#include "common/common.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

netsim_scenario *netsim_scenario_alloc(const char *name, int n, int k) {
  netsim_scenario *s = wt_xcalloc(1, sizeof *s);
  s->name = wt_xstrdup(name);
  s->n_regions = k;
  s->region_names = wt_xcalloc((size_t)k, sizeof(char *));
  s->region_size = wt_xcalloc((size_t)k, sizeof(int));
  s->region_of = wt_xcalloc((size_t)n, sizeof(int));
  s->net.n = n;
  s->net.latency_s = wt_xcalloc((size_t)n * n, sizeof(double));
  s->net.bandwidth_Bps = wt_xcalloc((size_t)n * n, sizeof(double));
  s->net.compute_speed = wt_xcalloc((size_t)n, sizeof(double));
  s->nic_Bps = wt_xcalloc((size_t)n, sizeof(double));
  s->hidden = NETSIM_DEFAULT_HIDDEN;
  s->act_value_bytes = NETSIM_DEFAULT_ACT_BYTES;
  s->ref_flops = NETSIM_DEFAULT_TFLOPS * 1e12;
  for (int d = 0; d < n; d++) s->net.compute_speed[d] = 1.0;
  return s;
}

void netsim_scenario_destroy(netsim_scenario **self_p) {
  netsim_scenario *s = *self_p;
  if (!s) return;
  for (int r = 0; r < s->n_regions; r++) free(s->region_names[r]);
  free(s->region_names);
  free(s->region_size);
  free(s->region_of);
  free(s->net.latency_s);
  free(s->net.bandwidth_Bps);
  free(s->net.compute_speed);
  free(s->net.memory_bytes);
  free(s->nic_Bps);
  free(s->link_of);
  free(s->up_Bps);
  free(s->down_Bps);
  free(s->name);
  free(s);
  *self_p = NULL;
}

void netsim_scenario_default_nics(netsim_scenario *s) {
  int n = s->net.n;
  for (int d = 0; d < n; d++) {
    double best = 0;
    for (int e = 0; e < n; e++)
      if (e != d) best = WT_MAX(best, s->net.bandwidth_Bps[d * n + e]);
    /* A lone device still needs a finite NIC; its diagonal is its "within region" bandwidth. */
    if (best <= 0) best = s->net.bandwidth_Bps[d * n + d];
    s->nic_Bps[d] = best > 0 ? best : 1e9;
  }
}

const char *netsim_scenario_name(const netsim_scenario *self) {
  return self->name;
}
const assign_network *netsim_scenario_network(const netsim_scenario *self) {
  return &self->net;
}
int netsim_scenario_region_of(const netsim_scenario *self, int d) {
  return self->region_of[d];
}
int netsim_scenario_region_count(const netsim_scenario *self) {
  return self->n_regions;
}
const double *netsim_scenario_nic(const netsim_scenario *self) {
  return self->nic_Bps;
}
const assign_access *netsim_scenario_access(const netsim_scenario *self) {
  return self->access.n_links > 0 ? &self->access : NULL;
}

void netsim_scenario_set_access(netsim_scenario *s, int n_links, const int *link_of,
                                const double *up_Bps, const double *down_Bps) {
  free(s->link_of), free(s->up_Bps), free(s->down_Bps);
  s->link_of = wt_xmalloc(sizeof(int) * (size_t)s->net.n);
  s->up_Bps = wt_xmalloc(sizeof(double) * (size_t)n_links);
  s->down_Bps = wt_xmalloc(sizeof(double) * (size_t)n_links);
  memcpy(s->link_of, link_of, sizeof(int) * (size_t)s->net.n);
  memcpy(s->up_Bps, up_Bps, sizeof(double) * (size_t)n_links);
  memcpy(s->down_Bps, down_Bps, sizeof(double) * (size_t)n_links);
  s->access = (assign_access){n_links, s->link_of, s->up_Bps, s->down_Bps};
}

assign_dp_algo netsim_scenario_default_dp_algo(const netsim_scenario *self) {
  return netsim_scenario_access(self) || netsim_scenario_directed(self) ? ASSIGN_DP_RING
                                                                        : ASSIGN_DP_SHARDED_PS;
}

int netsim_scenario_directed(const netsim_scenario *self) {
  const assign_network *net = &self->net;
  for (int i = 0; i < net->n; i++)
    for (int j = i + 1; j < net->n; j++)
      if (net->latency_s[i * net->n + j] != net->latency_s[j * net->n + i] ||
          net->bandwidth_Bps[i * net->n + j] != net->bandwidth_Bps[j * net->n + i])
        return 1;
  return 0;
}
double netsim_scenario_reference_flops(const netsim_scenario *self) {
  return self->ref_flops;
}

const char *netsim_scenario_region_name(const netsim_scenario *self, int region) {
  if (self->region_names[region]) return self->region_names[region];
  netsim_scenario *mut = (netsim_scenario *)self; /* a label cache, not observable state */
  snprintf(mut->label, sizeof mut->label, "region %d", region);
  return mut->label;
}

void netsim_scenario_problem(const netsim_scenario *self, assign_problem *problem) {
  memset(problem, 0, sizeof *problem);
  problem->net = &self->net;
  problem->d_pp = self->d_pp;
  problem->d_dp = self->d_dp;
  problem->c_dp_bytes = self->c_dp_bytes;
  problem->c_pp_bytes = self->c_pp_bytes;
  problem->dp_algo = ASSIGN_DP_SHARDED_PS;
  problem->access = netsim_scenario_access(self);
}

double netsim_scenario_stage_flops(const netsim_scenario *self) {
  /* Gradients are fp32, so c_dp/4 parameters per stage; activations are hidden values of
   * act_value_bytes per token, so c_pp / (hidden · bytes) tokens per iteration per pipeline.
   * Forward + backward of a transformer costs about 6 FLOPs per parameter per token. */
  double params = self->c_dp_bytes / 4.0;
  double tokens = self->c_pp_bytes / (self->hidden * self->act_value_bytes);
  return 6.0 * params * tokens;
}

/* The shipped dtfm-2022.json: under $WT_SOURCE_DIR when set (the tests), else beside an
 * installed program (PREFIX/share/wantrain/scenarios, when that file exists), else in the source
 * tree this binary was built from. */
const char *netsim_scenario_default_path(void) {
  static char path[4096];
  const char *root = getenv("WT_SOURCE_DIR");
  if (root && *root) {
    snprintf(path, sizeof path, "%s/netsim/scenarios/dtfm-2022.json", root);
    return path;
  }
  char exe[2048];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  char *slash = n > 0 ? (exe[n] = 0, strrchr(exe, '/')) : NULL;
  if (slash) {
    *slash = 0;
    snprintf(path, sizeof path, "%s/../share/wantrain/scenarios/dtfm-2022.json", exe);
    if (access(path, R_OK) == 0) return path;
  }
  snprintf(path, sizeof path, "%s/netsim/scenarios/dtfm-2022.json", WT_NETSIM_SOURCE_DIR);
  return path;
}

void netsim_scenario_set_destroy(netsim_scenario_set **self_p) {
  netsim_scenario_set *set = *self_p;
  if (!set) return;
  for (int i = 0; i < set->count; i++) netsim_scenario_destroy(&set->items[i]);
  free(set->items);
  free(set);
  *self_p = NULL;
}

int netsim_scenario_set_count(const netsim_scenario_set *self) {
  return self->count;
}

const netsim_scenario *netsim_scenario_set_get(const netsim_scenario_set *self, int i) {
  return self->items[i];
}

int netsim_scenario_set_find(const netsim_scenario_set *self, const char *name,
                             const netsim_scenario **out) {
  *out = NULL;
  char names[2048] = "";
  for (int i = 0; i < self->count; i++) {
    if (name && !strcmp(self->items[i]->name, name)) {
      *out = self->items[i];
      return WT_OK;
    }
    size_t used = strlen(names);
    snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "", self->items[i]->name);
  }
  if (!name || !*name) {
    if (self->count == 1) {
      *out = self->items[0];
      return WT_OK;
    }
    return wt_fail(WT_EINVAL, "the scenario file holds %d scenarios (%s); choose one by name",
                   self->count, names);
  }
  return wt_fail(WT_ENOTFOUND, "no scenario named '%s'; the file holds: %s", name, names);
}
