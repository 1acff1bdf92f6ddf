/* config — one declarative table per command: name, type, bounds, default, field, help.
 *
 * Parsing of `--name value` / `--name=value` flags, JSON config files, validation, `--help` and
 * the dump of the effective configuration all come from the same table (Redis static_configs[]
 * style), so a new option is one line and the help can never drift from the parser.
 *
 *   typedef struct { int steps; double lr; char data[WT_CONFIG_STR_MAX]; int resume; } train_cfg;
 *   static const wt_option train_options[] = {
 *     {"steps", WT_OPT_INT, offsetof(train_cfg, steps), 1, 1e9, "1000", "optimizer steps"},
 *     {"lr", WT_OPT_FLOAT, offsetof(train_cfg, lr), 0, 10, "3e-4", "peak learning rate"},
 *     {"data", WT_OPT_STRING, offsetof(train_cfg, data), 0, 0, "synthetic", "corpus"},
 *     {"resume", WT_OPT_FLAG, offsetof(train_cfg, resume), 0, 1, "0", "resume from ckpt"},
 *     {0}};
 */
#ifndef WT_CONFIG_H
#define WT_CONFIG_H

#include <stddef.h>
#include <stdio.h>

#define WT_CONFIG_STR_MAX 1024

typedef enum {
  WT_OPT_INT,    /* field is int; bounds are [min, max] */
  WT_OPT_INT64,  /* field is long long; bounds are [min, max] */
  WT_OPT_FLOAT,  /* field is double; bounds are [min, max] */
  WT_OPT_STRING, /* field is char[WT_CONFIG_STR_MAX]; bounds ignored */
  WT_OPT_CHOICE, /* field is char[WT_CONFIG_STR_MAX]; value must be one of `choices` ("a|b|c") */
  WT_OPT_FLAG,   /* field is int (0/1); on the command line takes no value: `--resume` */
} wt_option_type;

typedef struct {
  const char *name;  /* without the leading "--"; NULL ends the table */
  wt_option_type type;
  size_t offset;     /* offsetof(cfg_struct, field) */
  double min, max;   /* inclusive bounds for numbers */
  const char *def;   /* default value as text ("" for an empty string) */
  const char *help;  /* one line */
  const char *choices; /* for WT_OPT_CHOICE: "a|b|c" */
} wt_option;

/* Writes every option's default into `cfg`. Returns WT_OK, or WT_EINVAL if a default is
 * malformed (a programming error in the table, reported with the option's name). */
int wt_config_defaults(const wt_option *table, void *cfg);

/* Sets one option from text, validating type and bounds. Returns WT_OK or WT_EINVAL with a
 * message naming the option, the value and what is allowed. */
int wt_config_set(const wt_option *table, void *cfg, const char *name, const char *value);

/* Applies a JSON object file ({"steps": 100, "lr": 0.001, ...}). Unknown keys are an error.
 * Returns WT_OK, WT_ENOTFOUND (no such file) or WT_EINVAL (bad JSON / key / value). */
int wt_config_load_file(const wt_option *table, void *cfg, const char *path);

/* Applies a JSON object (a cJSON object: {"steps": 100, ...}) as a config file would be; origin
 * names it in messages ("config file x.json", "epoch 4"). Returns WT_OK or WT_EINVAL (not an
 * object, an unknown key, a value of the wrong type or out of bounds), keys before the bad one
 * applied. */
struct cJSON;
int wt_config_apply_json(const wt_option *table, void *cfg, const struct cJSON *object,
                         const char *origin);

/* Parses argv[first..argc). Flags may be `--name value` or `--name=value`; `--config FILE` (if
 * the table has a "config" option) loads the file first so that later flags override it.
 * Non-flag arguments are returned in order through `positional` (pointers into argv), at most
 * `max_positional` of them; `*n_positional` receives the count (both may be NULL/0 to refuse
 * positionals). `--help` / `-h` sets *help_requested and stops. Returns WT_OK or WT_EINVAL. */
int wt_config_parse_args(const wt_option *table, void *cfg, int argc, char **argv, int first,
                         const char **positional, int max_positional, int *n_positional,
                         int *help_requested);

/* Prints `usage` then one line per option: --name TYPE  help (default: X). */
void wt_config_print_help(FILE *out, const char *usage, const wt_option *table);

/* The effective configuration as a JSON object string (flags as true / false, so that
 * wt_config_apply_json reads it back); the caller frees it with free(). */
char *wt_config_to_json(const wt_option *table, const void *cfg);

/* Finds an option by name, or NULL. */
const wt_option *wt_config_find(const wt_option *table, const char *name);

#endif
