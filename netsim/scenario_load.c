/* scenario_load — reads and validates a scenario document (JSON via cJSON).
 *
 * Every refusal names the file, the scenario and the field, because these files are written by
 * hand and the person fixing one needs to know exactly where to look. */
#include "netsim/scenario_internal.h"

#include "common/common.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define S_MAX_DEVICES 4096
/* Any number above this is a typo; bounding it keeps every derived time finite. */
#define S_MAX_VALUE 1e15

typedef struct {
  const char *file;
  const char *scenario; /* "" while reading the constants */
} s_ctx;

static int s_fail(const s_ctx *c, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int s_fail(const s_ctx *c, const char *field, const char *fmt, ...) {
  char what[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  if (c->scenario && *c->scenario)
    return wt_fail(WT_EINVAL, "%s: scenario '%s': field '%s': %s", c->file, c->scenario, field,
                   what);
  return wt_fail(WT_EINVAL, "%s: field '%s': %s", c->file, field, what);
}

/* A number field; `required` decides whether absence is an error or leaves *out alone. */
static int s_number(const s_ctx *c, const cJSON *obj, const char *key, int required, double *out) {
  const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!item) return required ? s_fail(c, key, "missing (a number is required)") : WT_OK;
  if (!cJSON_IsNumber(item) || !isfinite(item->valuedouble))
    return s_fail(c, key, "must be a finite number");
  if (fabs(item->valuedouble) > S_MAX_VALUE)
    return s_fail(c, key, "%g is beyond %g", item->valuedouble, S_MAX_VALUE);
  *out = item->valuedouble;
  return WT_OK;
}

static int s_positive_int(const s_ctx *c, const cJSON *obj, const char *key, int required,
                          int *out) {
  double v = *out;
  WT_CHECK(s_number(c, obj, key, required, &v));
  if (v != floor(v) || v < 1 || v > S_MAX_DEVICES)
    return s_fail(c, key, "must be a whole number in [1, %d], got %g", S_MAX_DEVICES, v);
  *out = (int)v;
  return WT_OK;
}

/* An array of k numbers >= min (strictly > min when strict). */
static int s_number_row(const s_ctx *c, const cJSON *arr, const char *field, int k, double min,
                        int strict, double *out) {
  if (!cJSON_IsArray(arr)) return s_fail(c, field, "must be an array of %d numbers", k);
  if (cJSON_GetArraySize(arr) != k)
    return s_fail(c, field, "has %d entries, expected %d", cJSON_GetArraySize(arr), k);
  int i = 0;
  for (const cJSON *v = arr->child; v; v = v->next, i++) {
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
      return s_fail(c, field, "entry %d is not a finite number", i);
    if (v->valuedouble > S_MAX_VALUE)
      return s_fail(c, field, "entry %d is %g, beyond %g", i, v->valuedouble, S_MAX_VALUE);
    if (v->valuedouble < min || (strict && v->valuedouble <= min))
      return s_fail(c, field, "entry %d is %g; it must be %s %g", i, v->valuedouble,
                    strict ? ">" : ">=", min);
    out[i] = v->valuedouble;
  }
  return WT_OK;
}

/* A k×k matrix of numbers (row-major into out). */
static int s_matrix(const s_ctx *c, const cJSON *obj, const char *key, int k, double min,
                    int strict, double *out) {
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!m) return s_fail(c, key, "missing (a %d×%d matrix is required)", k, k);
  if (!cJSON_IsArray(m) || cJSON_GetArraySize(m) != k)
    return s_fail(c, key, "must be a square %d×%d matrix (an array of %d rows), got %d rows", k, k,
                  k, cJSON_IsArray(m) ? cJSON_GetArraySize(m) : 0);
  int r = 0;
  for (const cJSON *row = m->child; row; row = row->next, r++) {
    char field[96];
    snprintf(field, sizeof field, "%s[%d]", key, r);
    WT_CHECK(s_number_row(c, row, field, k, min, strict, out + (size_t)r * k));
  }
  return WT_OK;
}

/* A per-region value: absent (keep out[]), one number for all, or an array of k numbers. */
static int s_per_region(const s_ctx *c, const cJSON *obj, const char *key, int k, double *out) {
  const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!item) return WT_OK;
  if (cJSON_IsNumber(item)) {
    if (!(item->valuedouble > 0) || !(item->valuedouble <= S_MAX_VALUE))
      return s_fail(c, key, "must be in (0, %g], got %g", S_MAX_VALUE, item->valuedouble);
    for (int r = 0; r < k; r++) out[r] = item->valuedouble;
    return WT_OK;
  }
  return s_number_row(c, item, key, k, 0, 1, out);
}

/* The region sizes: "gpus_per_region" (region form) or "groups" (datacenter form). */
static int s_region_sizes(const s_ctx *c, const cJSON *js, const char *key, int **sizes, int *k) {
  const cJSON *arr = cJSON_GetObjectItemCaseSensitive(js, key);
  if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) < 1)
    return s_fail(c, key, "must be a non-empty array of device counts");
  *k = cJSON_GetArraySize(arr);
  *sizes = wt_xcalloc((size_t)*k, sizeof(int));
  int i = 0, total = 0;
  for (const cJSON *v = arr->child; v; v = v->next, i++) {
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 1 ||
        v->valuedouble > S_MAX_DEVICES)
      return s_fail(c, key, "entry %d must be a whole number of devices >= 1", i);
    (*sizes)[i] = (int)v->valuedouble;
    total += (*sizes)[i];
    if (total > S_MAX_DEVICES) return s_fail(c, key, "more than %d devices", S_MAX_DEVICES);
  }
  return WT_OK;
}

/* Region-level latency (s) and bandwidth (B/s) matrices, k×k, from either form. */
static int s_region_links(const s_ctx *c, const cJSON *js, int datacenter, int k, double *lat,
                          double *bw) {
  if (!datacenter) {
    WT_CHECK(s_matrix(c, js, "latency_ms", k, 0, 0, lat));
    WT_CHECK(s_matrix(c, js, "bandwidth_gbps", k, 0, 1, bw));
  } else {
    double l = 0, intra = 0, inter = 0;
    WT_CHECK(s_number(c, js, "latency_ms", 1, &l));
    WT_CHECK(s_number(c, js, "intra_gbps", 1, &intra));
    WT_CHECK(s_number(c, js, "inter_gbps", 1, &inter));
    if (l < 0) return s_fail(c, "latency_ms", "must be >= 0, got %g", l);
    if (intra <= 0) return s_fail(c, "intra_gbps", "must be > 0, got %g", intra);
    if (inter <= 0) return s_fail(c, "inter_gbps", "must be > 0, got %g", inter);
    for (int a = 0; a < k; a++)
      for (int b = 0; b < k; b++) {
        lat[a * k + b] = l;
        bw[a * k + b] = a == b ? intra : inter;
      }
  }
  for (int i = 0; i < k * k; i++) {
    lat[i] *= 1e-3;     /* ms → s */
    bw[i] *= 1e9 / 8.0; /* Gbit/s → bytes/s */
  }
  return WT_OK;
}

static int s_region_names(const s_ctx *c, const cJSON *js, netsim_scenario *s) {
  const cJSON *names = cJSON_GetObjectItemCaseSensitive(js, "regions");
  if (!names) return WT_OK;
  if (!cJSON_IsArray(names) || cJSON_GetArraySize(names) != s->n_regions)
    return s_fail(c, "regions", "must be an array of %d names", s->n_regions);
  int r = 0;
  for (const cJSON *v = names->child; v; v = v->next, r++) {
    if (!cJSON_IsString(v)) return s_fail(c, "regions", "entry %d is not a string", r);
    s->region_names[r] = wt_xstrdup(v->valuestring);
  }
  return WT_OK;
}

/* Expands region-level links and per-region values to devices; a device that is a site of
 * several GPUs gets the site's aggregate compute and memory (assign_site_device). */
static void s_expand(netsim_scenario *s, const double *lat, const double *bw, const double *tflops,
                     const double *nic, const double *mem, const double *site_gpus,
                     const double *site_eff) {
  int n = s->net.n, k = s->n_regions, d = 0;
  for (int r = 0; r < k; r++)
    for (int i = 0; i < s->region_size[r]; i++) s->region_of[d++] = r;
  for (int a = 0; a < n; a++)
    for (int b = 0; b < n; b++) {
      int ra = s->region_of[a], rb = s->region_of[b];
      s->net.latency_s[a * n + b] = a == b ? 0 : lat[ra * k + rb];
      s->net.bandwidth_Bps[a * n + b] = bw[ra * k + rb];
    }
  /* Row = from, column = to: a symmetric matrix is both directions, an asymmetric one keeps
   * them apart (the cost model and the simulator read each direction). */
  netsim_scenario_default_nics(s);
  if (mem[0] > 0) s->net.memory_bytes = wt_xcalloc((size_t)n, sizeof(double));
  for (int a = 0; a < n; a++) {
    int r = s->region_of[a];
    double speed = 0, memory = 0; /* the values were checked on parse, so this cannot fail */
    (void)assign_site_device((int)site_gpus[r], site_eff[r], tflops[r] * 1e12 / s->ref_flops,
                             mem[r] > 0 ? mem[r] * 1e9 : 0, &speed, &memory);
    s->net.compute_speed[a] = speed;
    if (s->net.memory_bytes) s->net.memory_bytes[a] = memory;
    if (nic[r] > 0) s->nic_Bps[a] = nic[r] * 1e9 / 8.0;
  }
}

typedef struct {
  double c_dp, c_pp, d_pp, d_dp, tflops, nic, mem, hidden, act_bytes, site_eff;
} s_constants;

/* A per-region access capacity: absent (out[] stays 0 = unlimited), one number for all, or an
 * array of k numbers; 0 in an array marks a region whose access is unlimited. */
static int s_per_region_capacity(const s_ctx *c, const cJSON *obj, const char *key, int k,
                                 double *out, int *given) {
  const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, key);
  if (!item) return WT_OK;
  *given = 1;
  if (cJSON_IsNumber(item)) {
    if (!(item->valuedouble > 0) || !(item->valuedouble <= S_MAX_VALUE))
      return s_fail(c, key, "must be in (0, %g] Gbit/s, got %g", S_MAX_VALUE, item->valuedouble);
    for (int r = 0; r < k; r++) out[r] = item->valuedouble;
    return WT_OK;
  }
  return s_number_row(c, item, key, k, 0, 0, out);
}

/* Access links: "uplink_gbps" / "downlink_gbps" (per region; absent or 0 = unlimited) and
 * "access": "device" (each device its own link of those capacities, the default) or "region"
 * (the devices of a region share one link: a home or a site behind one uplink). */
static int s_access_parse(const s_ctx *c, const cJSON *js, netsim_scenario *s) {
  int nr = s->n_regions, n = s->net.n, given = 0, shared = 0;
  const cJSON *mode = cJSON_GetObjectItemCaseSensitive(js, "access");
  if (mode) {
    if (!cJSON_IsString(mode) ||
        (strcmp(mode->valuestring, "device") && strcmp(mode->valuestring, "region")))
      return s_fail(c, "access",
                    "must be \"device\" (each device its own access link) or \"region\" (the "
                    "devices of a region share one)");
    shared = !strcmp(mode->valuestring, "region");
    given = 1;
  }
  double *cap = wt_xcalloc(2 * (size_t)nr, sizeof(double));
  int rc = s_per_region_capacity(c, js, "uplink_gbps", nr, cap, &given);
  if (rc == WT_OK) rc = s_per_region_capacity(c, js, "downlink_gbps", nr, cap + nr, &given);
  if (rc == WT_OK && given) {
    int links = shared ? nr : n;
    int *link_of = wt_xmalloc(sizeof(int) * (size_t)n);
    double *up = wt_xmalloc(sizeof(double) * (size_t)links);
    double *down = wt_xmalloc(sizeof(double) * (size_t)links);
    for (int d = 0; d < n; d++) {
      int r = s->region_of[d], l = shared ? r : d;
      link_of[d] = l;
      up[l] = cap[r] > 0 ? cap[r] * 1e9 / 8.0 : INFINITY; /* Gbit/s → bytes/s */
      down[l] = cap[nr + r] > 0 ? cap[nr + r] * 1e9 / 8.0 : INFINITY;
    }
    netsim_scenario_set_access(s, links, link_of, up, down);
    free(link_of);
    free(up);
    free(down);
  }
  free(cap);
  return rc;
}

/* A site has a whole number of GPUs and keeps at most linear scaling. */
#define S_MAX_SITE_GPUS 65536

static int s_check_sites(const s_ctx *c, int nr, const double *gpus, const double *eff) {
  for (int r = 0; r < nr; r++) {
    if (gpus[r] != floor(gpus[r]) || gpus[r] < 1 || gpus[r] > S_MAX_SITE_GPUS)
      return s_fail(c, "site_gpus", "entry %d is %g; give a whole number of GPUs in 1..%d", r,
                    gpus[r], S_MAX_SITE_GPUS);
    if (!(eff[r] > 0 && eff[r] <= 1))
      return s_fail(c, "site_efficiency",
                    "entry %d is %g; give the fraction of linear scaling a site keeps, in (0, 1]",
                    r, eff[r]);
  }
  return WT_OK;
}

static int s_scenario_degrees(const s_ctx *c, const cJSON *js, const s_constants *k,
                              netsim_scenario *s) {
  s->d_pp = (int)k->d_pp;
  s->d_dp = (int)k->d_dp;
  WT_CHECK(s_positive_int(c, js, "d_pp", 0, &s->d_pp));
  WT_CHECK(s_positive_int(c, js, "d_dp", 0, &s->d_dp));
  if (s->d_pp * s->d_dp != s->net.n)
    return s_fail(c, "d_pp",
                  "d_pp × d_dp = %d × %d = %d but the scenario has %d devices "
                  "(set d_pp/d_dp in the scenario to match)",
                  s->d_pp, s->d_dp, s->d_pp * s->d_dp, s->net.n);
  return WT_OK;
}

/* The layout: region sizes from either form, checked against the optional "gpus"; allocates
 * the scenario with the constants' defaults. */
static int s_scenario_layout(const s_ctx *c, const cJSON *js, const s_constants *k, int datacenter,
                             netsim_scenario **out) {
  const char *size_key = datacenter ? "groups" : "gpus_per_region";
  if (!datacenter && !cJSON_GetObjectItemCaseSensitive(js, size_key))
    return s_fail(c, "gpus_per_region",
                  "missing (give gpus_per_region + latency_ms + bandwidth_gbps, or groups + "
                  "intra_gbps + inter_gbps + latency_ms)");
  int *sizes = NULL, nr = 0, n = 0;
  int rc = s_region_sizes(c, js, size_key, &sizes, &nr);
  for (int r = 0; rc == WT_OK && r < nr; r++) n += sizes[r];
  int gpus = n;
  if (rc == WT_OK) rc = s_positive_int(c, js, "gpus", 0, &gpus);
  if (rc == WT_OK && gpus != n)
    rc = s_fail(c, "gpus", "says %d but %s adds up to %d", gpus, size_key, n);
  if (rc == WT_OK) {
    netsim_scenario *s = netsim_scenario_alloc(c->scenario, n, nr);
    memcpy(s->region_size, sizes, (size_t)nr * sizeof(int));
    s->c_dp_bytes = k->c_dp;
    s->c_pp_bytes = k->c_pp;
    s->hidden = k->hidden;
    s->act_value_bytes = k->act_bytes;
    s->ref_flops = k->tflops * 1e12;
    *out = s;
  }
  free(sizes);
  return rc;
}

static int s_scenario_parse(const s_ctx *c, const cJSON *js, const s_constants *k,
                            netsim_scenario **out) {
  int datacenter = cJSON_GetObjectItemCaseSensitive(js, "groups") != NULL;
  netsim_scenario *s = NULL;
  *out = NULL;
  WT_CHECK(s_scenario_layout(c, js, k, datacenter, &s));
  int nr = s->n_regions;
  double *lat = wt_xcalloc((size_t)nr * nr, sizeof(double));
  double *bw = wt_xcalloc((size_t)nr * nr, sizeof(double));
  /* tflops | nic | memory | site_gpus | site_efficiency */
  double *per = wt_xcalloc((size_t)nr * 5, sizeof(double));
  for (int r = 0; r < nr; r++) {
    per[r] = k->tflops;
    per[nr + r] = k->nic;
    per[2 * nr + r] = k->mem;
    per[3 * nr + r] = 1;
    per[4 * nr + r] = k->site_eff;
  }
  int rc = s_region_links(c, js, datacenter, nr, lat, bw);
  if (rc == WT_OK) rc = s_region_names(c, js, s);
  if (rc == WT_OK) rc = s_per_region(c, js, "device_tflops", nr, per);
  if (rc == WT_OK) rc = s_per_region(c, js, "nic_gbps", nr, per + nr);
  if (rc == WT_OK) rc = s_per_region(c, js, "memory_gb", nr, per + 2 * nr);
  if (rc == WT_OK) rc = s_per_region(c, js, "site_gpus", nr, per + 3 * nr);
  if (rc == WT_OK) rc = s_per_region(c, js, "site_efficiency", nr, per + 4 * nr);
  if (rc == WT_OK) rc = s_check_sites(c, nr, per + 3 * nr, per + 4 * nr);
  if (rc == WT_OK) rc = s_scenario_degrees(c, js, k, s);
  if (rc == WT_OK) s_expand(s, lat, bw, per, per + nr, per + 2 * nr, per + 3 * nr, per + 4 * nr);
  if (rc == WT_OK) rc = s_access_parse(c, js, s);
  free(lat);
  free(bw);
  free(per);
  if (rc != WT_OK) netsim_scenario_destroy(&s);
  *out = s;
  return rc;
}

static int s_constants_parse(const s_ctx *c, const cJSON *root, s_constants *k) {
  const cJSON *js = cJSON_GetObjectItemCaseSensitive(root, "cost_model_constants");
  if (!cJSON_IsObject(js)) return s_fail(c, "cost_model_constants", "missing or not an object");
  *k = (s_constants){.tflops = NETSIM_DEFAULT_TFLOPS,
                     .site_eff = 1,
                     .hidden = NETSIM_DEFAULT_HIDDEN,
                     .act_bytes = NETSIM_DEFAULT_ACT_BYTES};
  int d_pp = 0, d_dp = 0;
  WT_CHECK(s_number(c, js, "c_dp_bytes_per_stage", 1, &k->c_dp));
  WT_CHECK(s_number(c, js, "c_pp_bytes_per_cut", 1, &k->c_pp));
  WT_CHECK(s_positive_int(c, js, "d_pp", 1, &d_pp));
  WT_CHECK(s_positive_int(c, js, "d_dp", 1, &d_dp));
  k->d_pp = d_pp;
  k->d_dp = d_dp;
  if (k->c_dp < 0) return s_fail(c, "c_dp_bytes_per_stage", "must be >= 0, got %g", k->c_dp);
  if (k->c_pp < 0) return s_fail(c, "c_pp_bytes_per_cut", "must be >= 0, got %g", k->c_pp);
  const char *pos[] = {"device_tflops", "nic_gbps",         "memory_gb",
                       "hidden_size",   "activation_bytes", "site_efficiency"};
  double *dst[] = {&k->tflops, &k->nic, &k->mem, &k->hidden, &k->act_bytes, &k->site_eff};
  for (size_t i = 0; i < WT_ARRAY_LEN(pos); i++) {
    WT_CHECK(s_number(c, js, pos[i], 0, dst[i]));
    if (*dst[i] < 0 || (i != 1 && i != 2 && *dst[i] == 0))
      return s_fail(c, pos[i], "must be > 0, got %g", *dst[i]);
  }
  return WT_OK;
}

static int s_read_file(const char *path, char **text) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return wt_fail(WT_ENOTFOUND,
                   "scenario file %s: %s (give an existing file with "
                   "--scenario-file)",
                   path, strerror(errno));
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  if (len < 0 || len > (64L << 20)) {
    fclose(f);
    return wt_fail(WT_EINVAL, "scenario file %s: unreadable or larger than 64 MiB", path);
  }
  *text = wt_xmalloc((size_t)len + 1);
  size_t got = fread(*text, 1, (size_t)len, f);
  fclose(f);
  (*text)[got] = 0;
  return WT_OK;
}

static int s_scenarios_parse(const s_ctx *file_ctx, const cJSON *root, netsim_scenario_set *set) {
  s_constants k;
  WT_CHECK(s_constants_parse(file_ctx, root, &k));
  const cJSON *list = cJSON_GetObjectItemCaseSensitive(root, "scenarios");
  if (!cJSON_IsArray(list) || cJSON_GetArraySize(list) < 1)
    return s_fail(file_ctx, "scenarios", "missing, not an array, or empty");
  set->items = wt_xcalloc((size_t)cJSON_GetArraySize(list), sizeof(netsim_scenario *));
  int i = 0;
  for (const cJSON *js = list->child; js; js = js->next, i++) {
    char label[64];
    snprintf(label, sizeof label, "#%d", i);
    s_ctx c = {file_ctx->file, label};
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(js, "name");
    if (!cJSON_IsObject(js)) return s_fail(&c, "scenarios", "entry %d is not an object", i);
    if (!cJSON_IsString(name) || !*name->valuestring)
      return s_fail(&c, "name", "missing or not a non-empty string");
    c.scenario = name->valuestring;
    for (int j = 0; j < set->count; j++)
      if (!strcmp(set->items[j]->name, name->valuestring))
        return s_fail(&c, "name",
                      "scenario #%d has the same name; names must be unique (--scenario picks "
                      "one by name)",
                      j);
    WT_CHECK(s_scenario_parse(&c, js, &k, &set->items[set->count]));
    set->count++;
  }
  return WT_OK;
}

/* The key of the innermost "key": before `at` (the field a bad value belongs to), or "?". */
static void s_key_before(const char *text, const char *at, char *key, size_t cap) {
  snprintf(key, cap, "?");
  for (const char *p = at; p > text; p--) {
    if (*p != ':') continue;
    const char *q = p - 1;
    while (q > text && (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r')) q--;
    if (*q != '"') continue;
    const char *open = q - 1;
    while (open > text && *open != '"') open--;
    if (*open == '"')
      snprintf(key, cap, "%.*s", (int)WT_MIN((size_t)(q - open - 1), cap - 1), open + 1);
    return;
  }
}

/* Why cJSON stopped at `at`: NaN and Infinity are what other tools write for non-finite numbers
 * and JSON has neither, so they get a message of their own naming the field. */
static int s_parse_error(const char *path, const char *text, const char *at) {
  int line = 1;
  for (const char *p = text; p < at; p++) line += *p == '\n';
  const char *v = at + (*at == '-' || *at == '+');
  if (!strncasecmp(v, "nan", 3) || !strncasecmp(v, "inf", 3)) {
    char key[64];
    s_key_before(text, at, key, sizeof key);
    int len = (int)(v - at);
    while (len < 16 && isalpha((unsigned char)at[len])) len++;
    return wt_fail(WT_EINVAL,
                   "%s: line %d: field '%s': %.*s is not a valid value (JSON has no NaN or "
                   "Infinity); write a finite number",
                   path, line, key, len, at);
  }
  return wt_fail(WT_EINVAL,
                 "%s: line %d: not valid JSON near \"%.20s\" (the file must be one JSON object "
                 "with cost_model_constants and scenarios)",
                 path, line, at);
}

static int s_load(const char *path, netsim_scenario_set **out) {
  *out = NULL;
  char *text = NULL;
  WT_CHECK(s_read_file(path, &text));
  const char *end = NULL;
  cJSON *root = cJSON_ParseWithOpts(text, &end, 0);
  if (!root) {
    int rc = s_parse_error(path, text, end ? end : text);
    free(text);
    return rc;
  }
  free(text);
  s_ctx c = {path, ""};
  if (!cJSON_IsObject(root)) {
    cJSON_Delete(root);
    return wt_fail(WT_EINVAL,
                   "%s: not a JSON object (a document with cost_model_constants and "
                   "scenarios)",
                   path);
  }
  netsim_scenario_set *set = wt_xcalloc(1, sizeof *set);
  int rc = s_scenarios_parse(&c, root, set);
  cJSON_Delete(root);
  if (rc != WT_OK) netsim_scenario_set_destroy(&set);
  *out = set;
  return rc;
}

netsim_scenario_set *netsim_scenario_set_load(const char *path) {
  netsim_scenario_set *set = NULL;
  return s_load(path, &set) == WT_OK ? set : NULL;
}
