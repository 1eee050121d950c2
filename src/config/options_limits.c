/* The options of per-client limits, CORS and Early Hints: their rows of the one table (options.c
 * walks the areas in --help's order) and their own setters. See options.h; options_int.h has what
 * the areas share. */
#include "config/options.h"
#include "config/options_int.h"

#include <string.h>

#include "core/accept.h"

static int set_limit_req(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)o;
    if (limit_rate_parse(arg, &cfg->limit_req) != 0)
        return usage_error("--limit-req wants RATE[/s|/m][,burst=B][,nodelay] like "
                           "10r/s,burst=20, got '%s'",
                           arg);
    cfg->limit_req_on = true;
    return 0;
}

/* --limit-req-for, --cors, --early-hints: a rule parsed from a copy of arg (the parsers split
 * it in place; argv is applied again over a re-read file). */
static int set_edge_rule(struct config *cfg, const struct option_info *o, char *arg)
{
    char *copy = options_strdup(cfg, arg, strlen(arg));
    int *count = o->list == LIST_CORS    ? &cfg->num_cors
                 : o->list == LIST_HINTS ? &cfg->num_hints
                                         : &cfg->num_limit_req_for;
    if (!copy)
        return usage_error("--%s: out of memory for '%s'", o->name, arg);
    if (*count == CONFIG_MAX_RULES)
        return usage_error("--%s: at most 32 a site, '%s' is one too many", o->name, arg);
    if (o->list == LIST_CORS) {
        const char *end = arg + strlen(arg);
        /* an origin is scheme://host[:port]: what a browser sends in Origin has no path */
        if (end > arg && end[-1] == '/' && strstr(arg, "://"))
            return usage_error("--cors: an origin has no path, not even '/': drop the "
                               "trailing slash in '%s'",
                               arg);
        if (cors_rule_parse(copy, &cfg->cors[*count]) != 0)
            return usage_error("--cors wants 'PATTERN ORIGIN' like '/api/* https://app.example' "
                               "or '/fonts/* *', got '%s'",
                               arg);
    } else if (o->list == LIST_HINTS) {
        if (hints_rule_parse(copy, &cfg->hints[*count]) != 0)
            return usage_error("--early-hints wants 'PATTERN LINK' like '/ </style.css>; "
                               "rel=preload; as=style', got '%s'",
                               arg);
    } else {
        char *rate;
        struct config_limit_rule *r = &cfg->limit_req_for[*count];
        if (accept_pattern_split(copy, &rate) != 0 || limit_rate_parse(rate, &r->rate) != 0)
            return usage_error("--limit-req-for wants 'PATTERN RATE' like '/api/* "
                               "10r/s,burst=20,nodelay', got '%s'",
                               arg);
        r->pattern = copy;
    }
    (*count)++;
    return 0;
}

/* --limit-rate: a byte count, with nginx's optional "/s". */
static int set_rate_bytes(struct config *cfg, const struct option_info *o, char *arg)
{
    size_t n = strlen(arg);
    if (n > 2 && strcmp(arg + n - 2, "/s") == 0)
        arg[n - 2] = '\0'; /* arg is the option's own copy (argv, or the file's pool) */
    return options_set_size(cfg, o, arg);
}

static const struct option_info rows[] = {
    {.name = "limit-conn",
     .metavar = "N",
     .scope = SCOPE_PROCESS,
     .reload = true, /* the workers' guard_configure; steering goes on with it */
     FIELD(FIELD_UNSIGNED, limit_conn),
     .set = options_set_number,
     .min = 1,
     .max = 1000000,
     .wants = " connections",
     .help = "at most N open connections per client address (an IPv6\n"
             "client's /64); more are closed at accept (limit_conn)"},
    {.name = "limit-req",
     .metavar = "RATE[/s|/m][,burst=B][,nodelay]",
     SITE,
     .set = set_limit_req,
     .help = "requests per client address; past the\n"
             "burst 429 with Retry-After (limit_req)"},
    {.name = "limit-req-for",
     .metavar = "'PATTERN RATE...'",
     SITE,
     .list = LIST_LIMIT_REQ_FOR,
     .set = set_edge_rule,
     .help = "the same for URL paths matching PATTERN\n"
             "(repeatable, first match wins; --limit-req applies too)"},
    {.name = "limit-rate",
     .metavar = "BYTES[/s]",
     SITE,
     FIELD(FIELD_SIZE, limit_rate),
     .set = set_rate_bytes,
     .min = 1,
     .max = (size_t)1 << 40,
     .wants = " like 1M",
     .help = "a response's send rate per connection (limit_rate)"},
    {.name = "limit-rate-after",
     .metavar = "BYTES",
     SITE,
     FIELD(FIELD_SIZE, limit_rate_after),
     BYTES(0, (size_t)1 << 40, " like 1M"),
     .help = "sent at full speed before --limit-rate (0)"},
    {.name = "cors",
     .metavar = "'PATTERN ORIGIN|*'",
     SITE,
     .list = LIST_CORS,
     .set = set_edge_rule,
     .help = "scripts of ORIGIN (or any) may read URL paths matching\n"
             "PATTERN: preflights answered, Access-Control-Allow-Origin\n"
             "added (repeatable)"},
    {.name = "early-hints",
     .metavar = "'PATTERN LINK'",
     SITE,
     .list = LIST_HINTS,
     .set = set_edge_rule,
     .help = "a 103 Early Hints with Link: LINK before the answer to\n"
             "a GET matching PATTERN, LINK on the answer too (repeatable)"},
};
const struct option_area options_limits = {rows, sizeof(rows) / sizeof(rows[0])};
