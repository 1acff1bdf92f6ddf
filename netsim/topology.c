/* topology — random but plausible worlds for experiments, and saving a scenario as JSON.
 *
 * Regions are points on a sphere; the numbers are fitted by eye to the paper's measured AWS
 * links (11 ms / 1.1 Gbit/s between Ohio and Virginia, ~230 ms / 0.34 Gbit/s Seoul–London). */
#include "netsim/scenario_internal.h"

#include "common/common.h"
#include "common/rng.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define S_EARTH_RADIUS_KM 6371.0
#define S_FIBRE_KM_PER_S (299792.458 * 2.0 / 3.0) /* light in fibre: about 2/3 c */
#define S_ROUTING_OVERHEAD_S 0.002
#define S_INTRA_LATENCY_S 0.005
#define S_INTRA_GBPS 2.0

/* Uniform point on the unit sphere (normal vector normalised). */
static void s_random_point(wt_rng *rng, double p[3]) {
  double len = 0;
  while (len < 1e-9) {
    for (int i = 0; i < 3; i++) p[i] = wt_rng_normal(rng);
    len = sqrt(p[0] * p[0] + p[1] * p[1] + p[2] * p[2]);
  }
  for (int i = 0; i < 3; i++) p[i] /= len;
}

static double s_great_circle_km(const double a[3], const double b[3]) {
  double dot = a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
  return S_EARTH_RADIUS_KM * acos(fmax(-1.0, fmin(1.0, dot)));
}

/* Inter-region bandwidth in Gbit/s: 1.2 next door, falling towards 0.3 on the far side. */
static double s_bandwidth_gbps(wt_rng *rng, double km) {
  double noise = 0.9 + 0.2 * wt_rng_double(rng);
  return (0.3 + 0.9 * exp(-km / 5000.0)) * noise;
}

netsim_scenario *netsim_scenario_random(int n_regions, int gpus_per_region, uint64_t seed) {
  if (n_regions < 1 || gpus_per_region < 1) {
    wt_fail(WT_EINVAL,
            "a random world needs at least one region and one GPU per region (got %d x %d)",
            n_regions, gpus_per_region);
    return NULL;
  }
  char name[64];
  snprintf(name, sizeof name, "random_%dx%d_seed%llu", n_regions, gpus_per_region,
           (unsigned long long)seed);
  int k = n_regions, n = k * gpus_per_region;
  netsim_scenario *s = netsim_scenario_alloc(name, n, k);
  wt_rng rng;
  wt_rng_seed(&rng, seed);
  double *pts = wt_xmalloc(sizeof(double) * 3 * (size_t)k);
  for (int r = 0; r < k; r++) s_random_point(&rng, pts + 3 * r);
  double *lat = wt_xcalloc((size_t)k * k, sizeof(double)),
         *bw = wt_xcalloc((size_t)k * k, sizeof(double));
  for (int a = 0; a < k; a++) {
    lat[a * k + a] = S_INTRA_LATENCY_S;
    bw[a * k + a] = S_INTRA_GBPS * 1e9 / 8;
    for (int b = a + 1; b < k; b++) {
      double km = s_great_circle_km(pts + 3 * a, pts + 3 * b);
      lat[a * k + b] = lat[b * k + a] = km / S_FIBRE_KM_PER_S + S_ROUTING_OVERHEAD_S;
      bw[a * k + b] = bw[b * k + a] = s_bandwidth_gbps(&rng, km) * 1e9 / 8;
    }
  }
  for (int r = 0; r < k; r++) s->region_size[r] = gpus_per_region;
  for (int d = 0; d < n; d++) s->region_of[d] = d / gpus_per_region;
  for (int a = 0; a < n; a++)
    for (int b = 0; b < n; b++) {
      int ra = s->region_of[a], rb = s->region_of[b];
      s->net.latency_s[a * n + b] = a == b ? 0 : lat[ra * k + rb];
      s->net.bandwidth_Bps[a * n + b] = bw[ra * k + rb];
    }
  netsim_scenario_default_nics(s);
  /* The paper's GPT3-XL constants, so random worlds compare with the shipped scenarios. */
  s->c_dp_bytes = 650e6;
  s->c_pp_bytes = 471.247e6;
  s->d_pp = k;
  s->d_dp = gpus_per_region;
  free(pts);
  free(lat);
  free(bw);
  return s;
}

/* A value scaled by a factor drawn from [1 − jitter, 1 + jitter], kept to 4 significant digits in
 * the file's units so a saved world stays small (n² numbers each way). */
static double s_jittered(wt_rng *rng, double v, double jitter, double unit) {
  double x = v * (1 - jitter + 2 * jitter * wt_rng_double(rng)) * unit;
  if (x <= 0) return v;
  double scale = pow(10, 3 - floor(log10(x)));
  return round(x * scale) / scale / unit;
}

netsim_scenario *netsim_scenario_jitter(const netsim_scenario *base, double jitter, int shuffle,
                                        uint64_t seed) {
  if (!(jitter >= 0 && jitter < 1)) return NULL;
  int n = base->net.n;
  char name[128];
  snprintf(name, sizeof name, "%s_jitter%g%s", base->name, jitter, shuffle ? "_shuffled" : "");
  netsim_scenario *s = netsim_scenario_alloc(name, n, n);
  wt_rng rng;
  wt_rng_seed(&rng, seed);
  int *id = wt_xmalloc(sizeof(int) * (size_t)n); /* id[new] = device of base */
  for (int d = 0; d < n; d++) id[d] = d;
  for (int d = n - 1; shuffle && d > 0; d--) {
    int e = (int)wt_rng_below(&rng, (uint64_t)d + 1), t = id[d];
    id[d] = id[e];
    id[e] = t;
  }
  const assign_network *b = &base->net;
  for (int x = 0; x < n; x++) {
    s->region_size[x] = 1;
    s->region_of[x] = x;
    s->net.compute_speed[x] = b->compute_speed[id[x]];
    /* The diagonal is a device's link to itself: never used, but the file format requires it. */
    s->net.bandwidth_Bps[x * n + x] = b->bandwidth_Bps[id[x] * n + id[x]];
    for (int y = x + 1; y < n; y++) {
      int u = id[x], v = id[y];
      double lat = s_jittered(&rng, b->latency_s[u * n + v], jitter, 1e3);
      double bw = s_jittered(&rng, b->bandwidth_Bps[u * n + v], jitter, 8e-9);
      s->net.latency_s[x * n + y] = s->net.latency_s[y * n + x] = lat;
      s->net.bandwidth_Bps[x * n + y] = s->net.bandwidth_Bps[y * n + x] = bw;
    }
  }
  netsim_scenario_default_nics(s);
  s->d_pp = base->d_pp;
  s->d_dp = base->d_dp;
  s->c_dp_bytes = base->c_dp_bytes;
  s->c_pp_bytes = base->c_pp_bytes;
  s->hidden = base->hidden;
  s->act_value_bytes = base->act_value_bytes;
  s->ref_flops = base->ref_flops;
  free(id);
  return s;
}

/* The region-level value of a device matrix (devices are numbered region by region). */
static cJSON *s_region_matrix(const netsim_scenario *s, const double *m, double scale) {
  int n = s->net.n, k = s->n_regions;
  int *first = wt_xcalloc((size_t)k, sizeof(int));
  for (int r = 1; r < k; r++) first[r] = first[r - 1] + s->region_size[r - 1];
  cJSON *rows = cJSON_CreateArray();
  for (int a = 0; a < k; a++) {
    cJSON *row = cJSON_CreateArray();
    for (int b = 0; b < k; b++) {
      /* Within a region take a pair of distinct devices when there is one. */
      int da = first[a], db = first[b] + (a == b && s->region_size[b] > 1 ? 1 : 0);
      cJSON_AddItemToArray(row, cJSON_CreateNumber(m[da * n + db] * scale));
    }
    cJSON_AddItemToArray(rows, row);
  }
  free(first);
  return rows;
}

/* Access links as the file holds them: one per region ("region") or one per device with one
 * capacity per region ("device"); other layouts (built in code) are not written. */
static void s_save_access(const netsim_scenario *s, cJSON *sc) {
  const assign_access *a = netsim_scenario_access(s);
  if (!a) return;
  int n = s->net.n, k = s->n_regions, per_region = a->n_links == k, per_device = a->n_links == n;
  int *first = wt_xmalloc(sizeof(int) * (size_t)k);
  for (int r = 0; r < k; r++) first[r] = -1;
  for (int d = 0; d < n; d++) {
    int r = s->region_of[d], l = a->link_of[d];
    if (first[r] < 0) first[r] = d;
    int l0 = a->link_of[first[r]];
    per_region &= l == r;
    per_device &= l == d && a->up_Bps[l] == a->up_Bps[l0] && a->down_Bps[l] == a->down_Bps[l0];
  }
  if (per_region || per_device) {
    cJSON_AddStringToObject(sc, "access", per_region ? "region" : "device");
    cJSON *up = cJSON_AddArrayToObject(sc, "uplink_gbps"),
          *down = cJSON_AddArrayToObject(sc, "downlink_gbps");
    for (int r = 0; r < k; r++) {
      int l = a->link_of[first[r]];
      double u = a->up_Bps[l], w = a->down_Bps[l]; /* 0 in the file = unlimited */
      cJSON_AddItemToArray(up, cJSON_CreateNumber(isfinite(u) ? u * 8e-9 : 0));
      cJSON_AddItemToArray(down, cJSON_CreateNumber(isfinite(w) ? w * 8e-9 : 0));
    }
  }
  free(first);
}

int netsim_scenario_save(const netsim_scenario *s, const char *path) {
  cJSON *root = cJSON_CreateObject(), *k = cJSON_AddObjectToObject(root, "cost_model_constants");
  cJSON_AddNumberToObject(k, "c_dp_bytes_per_stage", s->c_dp_bytes);
  cJSON_AddNumberToObject(k, "c_pp_bytes_per_cut", s->c_pp_bytes);
  cJSON_AddNumberToObject(k, "d_pp", s->d_pp);
  cJSON_AddNumberToObject(k, "d_dp", s->d_dp);
  cJSON_AddNumberToObject(k, "device_tflops", s->ref_flops * 1e-12);
  cJSON *sc = cJSON_CreateObject();
  cJSON_AddItemToArray(cJSON_AddArrayToObject(root, "scenarios"), sc);
  cJSON_AddStringToObject(sc, "name", s->name);
  cJSON_AddNumberToObject(sc, "gpus", s->net.n);
  cJSON *sizes = cJSON_AddArrayToObject(sc, "gpus_per_region");
  for (int r = 0; r < s->n_regions; r++)
    cJSON_AddItemToArray(sizes, cJSON_CreateNumber(s->region_size[r]));
  cJSON_AddItemToObject(sc, "latency_ms", s_region_matrix(s, s->net.latency_s, 1e3));
  cJSON_AddItemToObject(sc, "bandwidth_gbps", s_region_matrix(s, s->net.bandwidth_Bps, 8e-9));
  s_save_access(s, sc);
  char *text = cJSON_Print(root);
  cJSON_Delete(root);
  FILE *f = fopen(path, "w");
  int ok = f && fputs(text, f) >= 0 && fputc('\n', f) != EOF;
  if (f && fclose(f) != 0) ok = 0;
  free(text);
  if (!ok) return wt_fail(WT_EIO, "cannot write scenario file %s", path);
  return WT_OK;
}
