/* The options of the access log, metrics and whose address a connection is (real IP, PROXY
 * protocol): their rows of the one table (options.c walks the areas in --help's order) and their
 * own setters. See options.h; options_int.h has what the areas share. */
#include "config/options.h"
#include "config/options_int.h"

#include <string.h>

static int set_access_log(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)o;
    cfg->access_log = strcmp(arg, "off") == 0 ? NULL : arg;
    if (cfg->access_log && !*arg)
        return usage_error("--access-log wants a file, - or off, got '%s'", arg);
    return 0;
}

/* One more CIDR of --NAME's list at list[*n]. */
static int add_cidr(struct config *cfg, const char *name, struct cidr *list, int *n,
                    const char *arg)
{
    if (*n == CONFIG_MAX_REAL_IP)
        return usage_error("--%s: at most 32, '%s' is one too many", name, arg);
    if (cidr_parse(arg, &list[*n]) != 0)
        return usage_error("--%s wants an address or CIDR like 10.0.0.0/8, got '%s'", name, arg);
    (*n)++;
    return 0;
}

static int set_real_ip(struct config *cfg, const struct option_info *o, char *arg)
{
    return add_cidr(cfg, o->name, cfg->real_ip_from, &cfg->num_real_ip, arg);
}

static int set_proxy_from(struct config *cfg, const struct option_info *o, char *arg)
{
    return add_cidr(cfg, o->name, cfg->proxy_from, &cfg->num_proxy_from, arg);
}

/* "ADDR:PORT", "[V6]:PORT"; the address is checked when the listener opens. */
static int set_metrics(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)o;
    char *colon = strrchr(arg, ':');
    unsigned long port;
    if (!colon || colon == arg || options_parse_uint(colon + 1, 0, 65535, &port) != 0 ||
        (strchr(arg, ':') != colon && (arg[0] != '[' || colon[-1] != ']')))
        return usage_error(
            "--metrics wants ADDR:PORT like 127.0.0.1:9100, [::1]:9100 or localhost:9100, got "
            "'%s'",
            arg);
    /* A copy, not a NUL written over the colon: arg is argv's, and a reload with --config
     * parses argv again (it found "127.0.0.1" and failed every SIGHUP) */
    if (!(cfg->metrics_bind = options_strdup(cfg, arg, (size_t)(colon - arg))))
        return usage_error("out of memory");
    cfg->metrics_port = (uint16_t)port;
    return 0;
}

static bool same_metrics(const struct config *a, const struct config *b)
{
    return options_same_string(a->metrics_bind, b->metrics_bind) &&
           a->metrics_port == b->metrics_port;
}

static bool same_cidrs(const struct cidr *a, int na, const struct cidr *b, int nb)
{
    return na == nb && memcmp(a, b, (size_t)na * sizeof(a[0])) == 0;
}

static bool same_real_ip(const struct config *a, const struct config *b)
{
    return same_cidrs(a->real_ip_from, a->num_real_ip, b->real_ip_from, b->num_real_ip);
}

static bool same_proxy_from(const struct config *a, const struct config *b)
{
    return same_cidrs(a->proxy_from, a->num_proxy_from, b->proxy_from, b->num_proxy_from);
}

static const struct option_info rows[] = {
    {.name = "access-log",
     .names_file = OPTFILE_WHOLE,
     .metavar = "PATH",
     PROCESS,
     FIELD(FIELD_STRING, access_log),
     .set = set_access_log,
     .help = "where to log one line per request: a file, - for standard\n"
             "output (the default), or off; SIGUSR1 reopens the file"},
    {.name = "log-format",
     .metavar = "FORMAT",
     PROCESS,
     FIELD(FIELD_INT, log_format),
     .set = options_set_choice,
     .choices = (const struct option_choice[]){{"combined", LOG_COMBINED},
                                               {"common", LOG_COMMON},
                                               {"json", LOG_JSON},
                                               {"vcombined", LOG_VCOMBINED},
                                               {NULL, 0}},
     .wants = "combined, common, json or vcombined",
     .help = "combined (the default; Apache/nginx), common, json, or\n"
             "vcombined (combined after HOST:PORT, Apache's\n"
             "vhost_combined)"},
    {.name = "real-ip-from",
     .metavar = "CIDR",
     PROCESS,
     .list = LIST_REAL_IP,
     .same = same_real_ip,
     .set = set_real_ip,
     .help = "a trusted proxy: log the client from its X-Forwarded-For\n"
             "(rightmost untrusted address; repeatable, up to 32)"},
    {.name = "proxy-protocol-from",
     .metavar = "CIDR",
     PROCESS,
     .list = LIST_PROXY_FROM,
     .same = same_proxy_from,
     .set = set_proxy_from,
     .help = "an L4 balancer: its connections must open with a PROXY\n"
             "header (v1 or v2), whose client address is the connection's\n"
             "(repeatable, up to 32); others are served directly"},
    {.name = "metrics",
     .metavar = "ADDR:PORT",
     PROCESS,
     .same = same_metrics,
     .set = set_metrics,
     .help = "serve Prometheus metrics at http://ADDR:PORT/metrics on a\n"
             "listener of their own (off by default)"},
    {.name = "metrics-per-cert",
     PROCESS,
     FIELD(FIELD_BOOL, metrics_per_cert),
     .set = options_set_flag,
     .help = "one certificate expiry series per ACME name (by default\n"
             "only the earliest expiry and counts, for many sites)"},
};
const struct option_area options_log = {rows, sizeof(rows) / sizeof(rows[0])};
