/* options_int: what the option table's area files (options_*.c) share with options.c: the
 * generic setters, the value parsers and the row macros. Private to src/config/.
 * Must not: be included outside src/config/ (options.h is the interface, included first).
 * Owns nothing: every row lives in its area's file, options.c walks them in order. */
#ifndef RINGHTTPD_CONFIG_OPTIONS_INT_H
#define RINGHTTPD_CONFIG_OPTIONS_INT_H

#include <stdbool.h>
#include <stddef.h>

struct config;
struct option_info;

#define usage_error(...) options_error(cfg, __VA_ARGS__)

#define FIELD(k, f) .kind = (k), .off = offsetof(struct config, f)
#define PROCESS .scope = SCOPE_PROCESS, .reload = false
#define SITE .scope = SCOPE_SITE, .reload = true
#define SECONDS(lo) .set = options_set_number, .min = (lo), .max = 86400, .wants = " seconds"
#define BYTES(lo, hi, says) .set = options_set_size, .min = (lo), .max = (hi), .wants = (says)

/* An area's rows, in --help's order; options.c walks the areas in order. */
struct option_area {
    const struct option_info *rows;
    size_t n;
};
extern const struct option_area options_net, options_files, options_log, options_compress,
    options_tls, options_acme, options_process, options_rules, options_limits;

/* A decimal in [min, max]; 0 or -EINVAL. */
int options_parse_uint(const char *s, unsigned long min, unsigned long max, unsigned long *out);
/* A byte count with an optional K, M or G suffix (powers of 1024); 0 or -EINVAL. */
int options_parse_size(const char *s, size_t *out);
/* Whether v may stand in a header field's value (no CR, LF or NUL; no other controls). */
bool options_field_value_ok(const char *v);
/* The field a row names in cfg. */
void *options_field(struct config *cfg, const struct option_info *o);
const void *options_cfield(const struct config *cfg, const struct option_info *o);
/* A host name as a site names it: letters, digits, '-', '.', with wildcard a "*." in front. */
bool options_host_name_ok(const char *h, bool wildcard);
/* For the rows' `same`: two strings (either NULL), two lists of them. */
bool options_same_string(const char *a, const char *b);
bool options_same_list(const char *const *a, int na, const char *const *b, int nb);

/* The generic setters: what a row's columns say (kind, min/max, choices). */
int options_set_flag(struct config *cfg, const struct option_info *o, char *arg);
int options_set_onoff(struct config *cfg, const struct option_info *o, char *arg);
int options_set_number(struct config *cfg, const struct option_info *o, char *arg);
int options_set_size(struct config *cfg, const struct option_info *o, char *arg);
int options_set_string(struct config *cfg, const struct option_info *o, char *arg);
int options_set_choice(struct config *cfg, const struct option_info *o, char *arg);
/* A site's name (hosts:, --canonical-host): options_host_name_ok's, lower-cased, in its list. */
int options_set_host(struct config *cfg, const struct option_info *o, char *arg);

#endif
