/* config — parsing, validation, help and JSON dump driven by one option table. */
#include "common/config.h"

#include "common/common.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

const wt_option *wt_config_find(const wt_option *table, const char *name) {
  for (const wt_option *o = table; o->name; o++)
    if (!strcmp(o->name, name)) return o;
  return NULL;
}

static int s_choice_ok(const char *choices, const char *value) {
  size_t n = strlen(value);
  for (const char *p = choices; p && *p;) {
    const char *bar = strchr(p, '|');
    size_t len = bar ? (size_t)(bar - p) : strlen(p);
    if (len == n && !strncmp(p, value, n)) return 1;
    p = bar ? bar + 1 : NULL;
  }
  return 0;
}

static int s_parse_number(const wt_option *o, const char *value, double *out) {
  char *end = NULL;
  errno = 0;
  double v = strtod(value, &end);
  if (!*value || *end || errno || isnan(v))
    return wt_fail(WT_EINVAL, "--%s: '%s' is not a number", o->name, value);
  if ((o->type == WT_OPT_INT || o->type == WT_OPT_INT64) && v != floor(v))
    return wt_fail(WT_EINVAL, "--%s: '%s' is not an integer", o->name, value);
  if (v < o->min || v > o->max)
    return wt_fail(WT_EINVAL, "--%s: %s is out of range [%g, %g]", o->name, value, o->min,
                   o->max);
  *out = v;
  return WT_OK;
}

static int s_set(const wt_option *o, void *cfg, const char *value) {
  char *field = (char *)cfg + o->offset;
  double v;
  switch (o->type) {
  case WT_OPT_INT:
    WT_CHECK(s_parse_number(o, value, &v));
    *(int *)field = (int)v;
    return WT_OK;
  case WT_OPT_INT64:
    WT_CHECK(s_parse_number(o, value, &v));
    *(long long *)field = (long long)v;
    return WT_OK;
  case WT_OPT_FLOAT:
    WT_CHECK(s_parse_number(o, value, &v));
    *(double *)field = v;
    return WT_OK;
  case WT_OPT_FLAG:
    if (!strcmp(value, "1") || !strcmp(value, "true")) *(int *)field = 1;
    else if (!strcmp(value, "0") || !strcmp(value, "false")) *(int *)field = 0;
    else return wt_fail(WT_EINVAL, "--%s: '%s' is not true/false", o->name, value);
    return WT_OK;
  case WT_OPT_CHOICE:
    if (!s_choice_ok(o->choices, value))
      return wt_fail(WT_EINVAL, "--%s: '%s' is not one of %s", o->name, value, o->choices);
    /* fall through */
  case WT_OPT_STRING:
    if (strlen(value) >= WT_CONFIG_STR_MAX)
      return wt_fail(WT_EINVAL, "--%s: value is longer than %d characters", o->name,
                     WT_CONFIG_STR_MAX - 1);
    strcpy(field, value);
    return WT_OK;
  }
  return wt_fail(WT_EINVAL, "--%s: unknown option type", o->name);
}

int wt_config_set(const wt_option *table, void *cfg, const char *name, const char *value) {
  const wt_option *o = wt_config_find(table, name);
  if (!o) return wt_fail(WT_EINVAL, "unknown option --%s (see --help)", name);
  return s_set(o, cfg, value);
}

int wt_config_defaults(const wt_option *table, void *cfg) {
  for (const wt_option *o = table; o->name; o++) {
    int rc = s_set(o, cfg, o->def ? o->def : "");
    if (rc != WT_OK) return rc;
  }
  return WT_OK;
}

/* The text of a config file's value, once its JSON type fits the option's: numbers for numeric
 * options, true/false for flags, strings for the rest (a boolean is no step count). */
static int s_json_value(const wt_option *table, const char *origin, const cJSON *item, char *buf,
                        size_t size, const char **value) {
  const wt_option *o = wt_config_find(table, item->string);
  if (!o) return wt_fail(WT_EINVAL, "%s: unknown option \"%s\" (see --help)", origin, item->string);
  const char *want = NULL;
  switch (o->type) {
  case WT_OPT_INT:
  case WT_OPT_INT64:
  case WT_OPT_FLOAT:
    if (!cJSON_IsNumber(item))
      want = "a number";
    else
      snprintf(buf, size, "%.17g", item->valuedouble);
    break;
  case WT_OPT_FLAG:
    if (!cJSON_IsBool(item))
      want = "true or false";
    else
      snprintf(buf, size, "%s", cJSON_IsTrue(item) ? "1" : "0");
    break;
  case WT_OPT_STRING:
  case WT_OPT_CHOICE:
    if (!cJSON_IsString(item))
      want = "a string";
    else
      *value = item->valuestring;
    break;
  }
  if (want)
    return wt_fail(WT_EINVAL, "%s: \"%s\" must be %s (as --%s takes), not %s", origin, item->string,
                   want, item->string,
                   cJSON_IsBool(item)     ? "a boolean"
                   : cJSON_IsNumber(item) ? "a number"
                   : cJSON_IsString(item) ? "a string"
                   : cJSON_IsNull(item)   ? "null"
                                          : "an array or object");
  return WT_OK;
}
int wt_config_load_file(const wt_option *table, void *cfg, const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return wt_fail(WT_ENOTFOUND, "config file %s: %s", path, strerror(errno));
  struct stat st;
  if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) { /* fopen accepts a directory */
    fclose(f);
    return wt_fail(WT_EINVAL, "config file %s is not a regular file; pass a JSON file", path);
  }
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  if (len < 0 || len > (1 << 24)) {
    fclose(f);
    return wt_fail(WT_EINVAL, "config file %s: unreadable or larger than 16 MiB", path);
  }
  char *text = wt_xmalloc((size_t)len + 1);
  size_t got = fread(text, 1, (size_t)len, f);
  fclose(f);
  text[got] = 0;
  cJSON *root = cJSON_Parse(text);
  free(text);
  if (!cJSON_IsObject(root)) {
    cJSON_Delete(root);
    return wt_fail(WT_EINVAL, "config file %s: not a JSON object", path);
  }
  char origin[1100];
  snprintf(origin, sizeof origin, "config file %s", path);
  int rc = wt_config_apply_json(table, cfg, root, origin);
  cJSON_Delete(root);
  return rc;
}

int wt_config_apply_json(const wt_option *table, void *cfg, const cJSON *object,
                         const char *origin) {
  if (!cJSON_IsObject(object)) return wt_fail(WT_EINVAL, "%s: not a JSON object", origin);
  int rc = WT_OK;
  for (const cJSON *item = object->child; item && rc == WT_OK; item = item->next) {
    char buf[64];
    const char *value = buf;
    rc = s_json_value(table, origin, item, buf, sizeof buf, &value);
    if (rc != WT_OK) break;
    rc = wt_config_set(table, cfg, item->string, value);
    if (rc != WT_OK) {
      char msg[1200];
      snprintf(msg, sizeof msg, "%s", wt_last_error());
      wt_fail(rc, "%s: %s", origin, msg);
    }
  }
  return rc;
}

int wt_config_parse_args(const wt_option *table, void *cfg, int argc, char **argv, int first,
                         const char **positional, int max_positional, int *n_positional,
                         int *help_requested) {
  int npos = 0;
  if (help_requested) *help_requested = 0;
  /* A --config file is applied first so that flags given beside it override it. */
  for (int i = first; i < argc; i++) {
    const char *a = argv[i];
    if (!strncmp(a, "--config=", 9)) WT_CHECK(wt_config_load_file(table, cfg, a + 9));
    else if (!strcmp(a, "--config") && i + 1 < argc && wt_config_find(table, "config"))
      WT_CHECK(wt_config_load_file(table, cfg, argv[i + 1]));
  }
  for (int i = first; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      if (help_requested) *help_requested = 1;
      return WT_OK;
    }
    if (strncmp(a, "--", 2) != 0) {
      if (npos >= max_positional)
        return wt_fail(WT_EINVAL, "unexpected argument '%s' (see --help)", a);
      positional[npos++] = a;
      continue;
    }
    char name[128];
    const char *eq = strchr(a + 2, '=');
    size_t len = eq ? (size_t)(eq - a - 2) : strlen(a + 2);
    if (len == 0 || len >= sizeof name)
      return wt_fail(WT_EINVAL, "malformed option '%s' (see --help)", a);
    memcpy(name, a + 2, len);
    name[len] = 0;
    const wt_option *o = wt_config_find(table, name);
    if (!o) return wt_fail(WT_EINVAL, "unknown option --%s (see --help)", name);
    const char *value;
    if (eq) value = eq + 1;
    else if (o->type == WT_OPT_FLAG) value = "1";
    else if (i + 1 < argc) value = argv[++i];
    else return wt_fail(WT_EINVAL, "option --%s needs a value (see --help)", name);
    if (!strcmp(name, "config")) {
      WT_CHECK(s_set(o, cfg, value)); /* already loaded above; just record the path */
      continue;
    }
    WT_CHECK(s_set(o, cfg, value));
  }
  if (n_positional) *n_positional = npos;
  return WT_OK;
}

static const char *s_type_name(const wt_option *o) {
  switch (o->type) {
  case WT_OPT_INT:
  case WT_OPT_INT64: return "N";
  case WT_OPT_FLOAT: return "X";
  case WT_OPT_STRING: return "TEXT";
  case WT_OPT_CHOICE: return o->choices;
  case WT_OPT_FLAG: return "";
  }
  return "";
}

void wt_config_print_help(FILE *out, const char *usage, const wt_option *table) {
  fprintf(out, "%s\n\nOptions:\n", usage);
  for (const wt_option *o = table; o->name; o++) {
    char left[160];
    snprintf(left, sizeof left, "--%s %s", o->name, s_type_name(o));
    const char *def = o->def && *o->def ? o->def : "none";
    if (o->type == WT_OPT_FLAG) def = (o->def && !strcmp(o->def, "1")) ? "on" : "off";
    fprintf(out, "  %-34s %s (default: %s)\n", left, o->help, def);
  }
  fprintf(out, "  %-34s %s\n", "--help", "print this help and exit");
}

/* v as the shortest decimal that reads back as exactly v (cJSON's own printing may lose the
 * last bit), as a raw JSON number. */
static void s_add_exact_number(cJSON *obj, const char *name, double v) {
  char text[32];
  for (int digits = 15; digits <= 17; digits++) {
    snprintf(text, sizeof text, "%.*g", digits, v);
    if (strtod(text, NULL) == v) break;
  }
  if (!isfinite(v)) snprintf(text, sizeof text, "null");
  cJSON_AddRawToObject(obj, name, text);
}

char *wt_config_to_json(const wt_option *table, const void *cfg) {
  cJSON *root = cJSON_CreateObject();
  for (const wt_option *o = table; o->name; o++) {
    const char *field = (const char *)cfg + o->offset;
    switch (o->type) {
    case WT_OPT_INT:
      cJSON_AddNumberToObject(root, o->name, *(const int *)field);
      break;
    case WT_OPT_FLAG:
      cJSON_AddBoolToObject(root, o->name, *(const int *)field);
      break;
    case WT_OPT_INT64: cJSON_AddNumberToObject(root, o->name, (double)*(const long long *)field); break;
    case WT_OPT_FLOAT:
      s_add_exact_number(root, o->name, *(const double *)field);
      break;
    case WT_OPT_STRING:
    case WT_OPT_CHOICE: cJSON_AddStringToObject(root, o->name, field); break;
    }
  }
  char *text = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  return text;
}
