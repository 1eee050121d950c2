/* The options of a site's rules: canonical host, redirects, rules files, headers, access,
 * authentication: their rows of the one table (options.c walks the areas in --help's order) and
 * their own setters. See options.h; options_int.h has what the areas share. */
#include "config/options.h"
#include "config/options_int.h"

#include <stdlib.h>
#include <string.h>

#include "core/rulefile.h"

/* The authority of an absolute redirect target: a host name, maybe ":PORT", then '/' or end. */
static bool url_host_ok(const char *h)
{
    size_t n = strcspn(h, "/:");
    char name[256];
    if (n == 0 || n >= sizeof(name))
        return false;
    memcpy(name, h, n);
    name[n] = '\0';
    if (!options_host_name_ok(name, false))
        return false;
    if (h[n] == ':') {
        size_t d = strspn(h + n + 1, "0123456789");
        if (d == 0 || d > 5 || (h[n + 1 + d] != '/' && h[n + 1 + d] != '\0'))
            return false;
    }
    return true;
}

/* A URL path pattern: '/' first, no byte a header or a Location would need to quote. */
static bool url_pattern_ok(const char *p)
{
    if (p[0] != '/' || strpbrk(p, "\"\\?# ") || !options_field_value_ok(p))
        return false;
    return true;
}

/* Splits "A B [C]" at runs of spaces: fields[0..n), returns n (at most max). */
static int split_fields(char *arg, char **fields, int max)
{
    int n = 0;
    for (char *save = NULL, *f = strtok_r(arg, " \t", &save); f; f = strtok_r(NULL, " \t", &save)) {
        if (n == max)
            return max + 1;
        fields[n++] = f;
    }
    return n;
}

static int set_redirect(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)o;
    char *f[3];
    unsigned long status = 301;
    char *copy = options_strdup(cfg, arg, strlen(arg)); /* the message needs the original */
    if (!copy)
        return usage_error("--redirect: out of memory for '%s'", arg);
    int n = split_fields(copy, f, 3);
    if (n < 2 || n > 3 || !url_pattern_ok(f[0]) ||
        (strchr(f[0], '*') && strchr(f[0], '*') != f[0] + strlen(f[0]) - 1))
        return usage_error("--redirect wants 'FROM TO [STATUS]', FROM a path like /old/* "
                           "('*' at the end only), got '%s'",
                           arg);
    size_t tl = strlen(f[1]);
    bool abs = strncmp(f[1], "http://", 7) == 0 || strncmp(f[1], "https://", 8) == 0;
    const char *host = abs ? strchr(f[1], ':') + 3 : NULL;
    /* A '*' only as the last byte, after a '/': what it carries can never become a host. */
    if ((!abs && f[1][0] != '/') || (!abs && f[1][1] == '/') || (abs && !url_host_ok(host)) ||
        strpbrk(f[1], "\"\\ ") || !options_field_value_ok(f[1]) ||
        (strchr(f[1], '*') && (f[1][tl - 1] != '*' || strchr(f[1], '*') != f[1] + tl - 1 ||
                               tl < 2 || f[1][tl - 2] != '/')))
        return usage_error("--redirect: TO must be a path (/new/) or an http(s) URL, with "
                           "'*' only after its last '/', in '%s'",
                           arg);
    if (n == 3 && (options_parse_uint(f[2], 301, 308, &status) != 0 ||
                   (status != 301 && status != 302 && status != 307 && status != 308)))
        return usage_error("--redirect: STATUS must be 301, 302, 307 or 308 in '%s'", arg);
    if (cfg->num_redirects == CONFIG_MAX_RULES)
        return usage_error("--redirect: at most 32 a site, '%s' is one too many", arg);
    cfg->redirects[cfg->num_redirects++] =
        (struct config_redirect){.from = f[0], .to = f[1], .status = (int)status};
    return 0;
}

static int set_basic_auth(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)o;
    char *eq = strchr(arg, '=');
    if (!eq || arg[0] != '/' || !eq[1])
        return usage_error("--basic-auth wants PREFIX=HTPASSWD like /staff/=/etc/ringhttpd/"
                           "staff.htpasswd, got '%s'",
                           arg);
    if (cfg->num_auths == CONFIG_MAX_RULES)
        return usage_error("--basic-auth: at most 32 a site, '%s' is one too many", arg);
    char *prefix = options_strdup(cfg, arg, (size_t)(eq - arg));
    if (!prefix)
        return usage_error("--basic-auth: out of memory for '%s'", arg);
    cfg->auth_lines[cfg->num_auths] = cfg->src && cfg->src->file ? cfg->src->line : 0;
    cfg->auths[cfg->num_auths++] = (struct config_auth){.prefix = prefix, .htpasswd = eq + 1};
    return 0;
}

static int set_auth_realm(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)o;
    if (!*arg || strpbrk(arg, "\"\\") || !options_field_value_ok(arg))
        return usage_error("--auth-realm: no quotes, backslashes or controls in '%s'", arg);
    cfg->auth_realm = arg;
    return 0;
}

static int set_cache_rule(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)o;
    const char *sp = strpbrk(arg, " \t");
    const char *value = sp;
    while (value && (*value == ' ' || *value == '\t'))
        value++;
    if (!sp || !value || !*value || !options_field_value_ok(value))
        return usage_error("--cache-control-for wants 'PATTERN VALUE' like '/assets/* "
                           "max-age=31536000', got '%s'",
                           arg);
    char *pattern = options_strdup(cfg, arg, (size_t)(sp - arg));
    if (!pattern || !url_pattern_ok(pattern))
        return usage_error("--cache-control-for: PATTERN must be a URL path in '%s'", arg);
    if (cfg->num_cache_rules == CONFIG_MAX_RULES)
        return usage_error("--cache-control-for: at most 32 a site, '%s' is one too many", arg);
    cfg->cache_rules[cfg->num_cache_rules++] =
        (struct config_cache_rule){.pattern = pattern, .value = value};
    return 0;
}

/* Issue 39's own lines (redirects, headers, access): each checked by compiling it alone, so a
 * bad one is refused here with its line in the file; a header line "PATTERN [type=T]
 * [status=any] Name: value" (or "PATTERN ! Name") becomes the block _headers would hold. */
struct rule_check {
    struct config *cfg;
    const char *opt;
    const char *arg;
    int bad;
};

static void rule_refused(void *arg, const char *name, int line, const char *why)
{
    struct rule_check *c = arg;
    struct config *cfg = c->cfg;
    (void)name;
    (void)line;
    c->bad = usage_error("--%s: %s in '%s'", c->opt, why, c->arg);
}

static int set_rule_line(struct config *cfg, const struct option_info *o, char *arg)
{
    int kind = o->list - LIST_RULE_REDIRECTS; /* enum rulefile_kind's order */
    char block[RULEFILE_MAX_LINE + 64];
    const char *text = arg;
    if (kind == RULEFILE_HEADERS) {
        /* the pattern and its options, then the one field (a ':' or a '!' begins it) */
        const char *f = arg;
        while (*f && *f != ' ' && *f != '\t')
            f++;
        while (*f == ' ' || *f == '\t') {
            const char *t = f;
            while (*t == ' ' || *t == '\t')
                t++;
            if (strncmp(t, "type=", 5) != 0 && strncmp(t, "status=any", 10) != 0) {
                f = t;
                break;
            }
            f = t;
            while (*f && *f != ' ' && *f != '\t')
                f++;
        }
        if (!*f || f == arg)
            return usage_error("--headers wants 'PATTERN [type=TYPE] [status=any] Name: value' "
                               "or 'PATTERN ! Name', got '%s'",
                               arg);
        int n = snprintf(block, sizeof(block), "%.*s\n  %s\n", (int)(f - arg), arg, f);
        if (n < 0 || (size_t)n >= sizeof(block))
            return usage_error("--headers: too long: '%s'", arg);
        text = block;
    }
    struct rule_check c = {cfg, o->name, arg, 0};
    struct rulefile_src src = {(enum rulefile_kind)kind, o->name, text, strlen(text), 1, true};
    const struct rulefile *rs;
    size_t need = rulefile_compile(&src, 1, NULL, 0, &rs, NULL, NULL);
    void *mem = malloc(need);
    if (!mem)
        return usage_error("--%s: out of memory for '%s'", o->name, arg);
    rulefile_compile(&src, 1, mem, need, &rs, rule_refused, &c);
    free(mem);
    if (c.bad)
        return c.bad;
    if (cfg->num_rule_lines[kind] == CONFIG_MAX_RULE_LINES)
        return usage_error("--%s: at most %d a site (a site's _redirects and _headers files hold "
                           "more), '%s' is one too many",
                           o->name, CONFIG_MAX_RULE_LINES, arg);
    char *copy = options_strdup(cfg, text, strlen(text));
    if (!copy)
        return usage_error("--%s: out of memory for '%s'", o->name, arg);
    int i = cfg->num_rule_lines[kind]++;
    cfg->rule_lines[kind][i] = copy;
    cfg->rule_at[kind][i] = cfg->src && cfg->src->file ? cfg->src->line : 0;
    return 0;
}

static int set_deny_ua(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)o;
    if (!*arg || !options_field_value_ok(arg))
        return usage_error("--deny-user-agent wants a pattern like 'GPTBot' or 'claude*bot', got "
                           "'%s'",
                           arg);
    if (cfg->num_deny_ua == CONFIG_MAX_RULES)
        return usage_error("--deny-user-agent: at most 32 a site, '%s' is one too many", arg);
    char *copy = options_strdup(cfg, arg, strlen(arg));
    if (!copy)
        return usage_error("--deny-user-agent: out of memory for '%s'", arg);
    cfg->deny_ua[cfg->num_deny_ua++] = copy;
    return 0;
}

static const struct option_info rows[] = {
    {.name = "canonical-host",
     .metavar = "NAME",
     SITE,
     .set = options_set_host,
     .help = "redirect (301) requests for the site's other names to NAME"},
    {.name = "redirect",
     .metavar = "'FROM TO [STATUS]'",
     SITE,
     .list = LIST_REDIRECTS,
     .set = set_redirect,
     .help = "redirect FROM (a path; '*' at its end: a prefix)\n"
             "to TO with 301 (or 302, 307, 308); a TO ending in '*' gets\n"
             "the rest of the path and the query (repeatable)"},
    {.name = "rules-files",
     SITE,
     FIELD(FIELD_BOOL, rules_files),
     .set = options_set_flag,
     .help = "apply the root's _redirects and _headers files (Netlify's\n"
             "and Cloudflare Pages' syntax; never served themselves)"},
    {.name = "redirects",
     .metavar = "'FROM TO [STATUS]'",
     SITE,
     .list = LIST_RULE_REDIRECTS,
     .set = set_rule_line,
     .help = "a _redirects line: splats, :placeholders, 200 rewrites,\n"
             "301/302/303/307/308, 404, 410, '!' to force (repeatable)"},
    {.name = "headers",
     .metavar = "'PATTERN NAME: VALUE'",
     SITE,
     .list = LIST_RULE_HEADERS,
     .set = set_rule_line,
     .help = "a _headers rule: NAME: VALUE (or ! NAME to remove it) on\n"
             "paths matching PATTERN (repeatable)"},
    {.name = "access",
     .metavar = "'PATTERN deny CIDR'",
     SITE,
     .list = LIST_RULE_ACCESS,
     .set = set_rule_line,
     .help = "403 (or close) for addresses a deny list names or an\n"
             "allow list does not, on paths matching PATTERN (repeatable)"},
    {.name = "deny-user-agent",
     .metavar = "PATTERN",
     SITE,
     .list = LIST_DENY_UA,
     .set = set_deny_ua,
     .help = "403 for a User-Agent matching PATTERN (case-insensitive,\n"
             "'*' any run; repeatable)"},
    {.name = "basic-auth",
     .names_file = OPTFILE_AFTER_EQ,
     .metavar = "PREFIX=FILE",
     SITE,
     .list = LIST_AUTHS,
     .set = set_basic_auth,
     .help = "paths starting with PREFIX need a user and password of\n"
             "the htpasswd FILE (bcrypt, $5$, $6$; repeatable)"},
    {.name = "auth-realm",
     .metavar = "REALM",
     SITE,
     .set = set_auth_realm,
     .help = "the realm 401 answers name (default \"restricted\")"},
    {.name = "cache-control-for",
     .metavar = "'PATTERN VALUE'",
     SITE,
     .list = LIST_CACHE_RULES,
     .set = set_cache_rule,
     .help = "Cache-Control VALUE for URL paths matching\n"
             "PATTERN ('*' wildcards; repeatable, first match wins)"},
};
const struct option_area options_rules = {rows, sizeof(rows) / sizeof(rows[0])};
