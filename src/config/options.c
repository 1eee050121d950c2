/* The option table: the walk of its areas (options_*.c hold the rows and their setters), the
 * generic setters and the file's own keys; see options.h. Every rejected value gets one line naming
 * the option (and, from a file, its file, line and key), and exit status 2. */
#include "config/options.h"
#include "config/options_int.h"
#include "core/rulefile.h"

#include <arpa/inet.h>
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <curl/curlver.h> /* the versions --version names: macros only, nothing is called */
#include <ngtcp2/version.h>
#include <openssl/opensslv.h>
#ifndef RINGHTTPD_NO_HTTP3
#include <gnutls/gnutls.h>
#endif

#include "core/accept.h"
#include "core/http1.h"
#include "core/path.h"
#include "core/token.h"

/* ---- errors and values ---- */

int options_error(const struct config *cfg, const char *fmt, ...)
{
    const struct config_src *src = cfg->src;
    va_list ap;
    va_start(ap, fmt);
    fputs("ringhttpd: ", stderr);
    if (src && src->file)
        fprintf(stderr, "%s:%d: %s: ", src->file, src->line, src->key);
    vfprintf(stderr, fmt, ap);
    fputs(src && src->file ? "\n" : " (see --help)\n", stderr);
    va_end(ap);
    return 2;
}

/* Parses a decimal in [min, max]; 0 or -EINVAL. */
int options_parse_uint(const char *s, unsigned long min, unsigned long max, unsigned long *out)
{
    char *end;
    if (*s < '0' || *s > '9')
        return -EINVAL;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || *end || v < min || v > max)
        return -EINVAL;
    *out = v;
    return 0;
}

/* A byte count with an optional K, M or G suffix (powers of 1024). */
int options_parse_size(const char *s, size_t *out)
{
    char *end;
    if (*s < '0' || *s > '9')
        return -EINVAL;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    unsigned shift = 0;
    switch (token_lower((unsigned char)*end)) {
    case 'k':
        shift = 10;
        break;
    case 'm':
        shift = 20;
        break;
    case 'g':
        shift = 30;
        break;
    }
    if (shift)
        end++;
    if (errno || *end || v > (SIZE_MAX >> shift))
        return -EINVAL;
    *out = (size_t)(v << shift);
    return 0;
}

bool options_field_value_ok(const char *v)
{
    for (; *v; v++)
        if ((unsigned char)*v < 0x20 && *v != '\t')
            return false;
    return true;
}

/* The field an entry names, for the generic setters and the reload's comparison. */
void *options_field(struct config *cfg, const struct option_info *o)
{
    return (char *)cfg + o->off;
}

const void *options_cfield(const struct config *cfg, const struct option_info *o)
{
    return (const char *)cfg + o->off;
}

/* ---- generic setters: what the table's columns say ---- */

/* A flag: arg is NULL (the command line) or "true"/"false" (the file). */
int options_set_flag(struct config *cfg, const struct option_info *o, char *arg)
{
    bool on = !arg || strcmp(arg, "true") == 0;
    *(bool *)options_field(cfg, o) = on != o->invert;
    return 0;
}

/* YAML 1.1's booleans and on/off, in any case, for every on/off value (issue 36: 'compress:
 * false' was refused while 'autoindex: yes' was taken). 0 or -EINVAL. */
static int parse_bool(const char *s, bool *on)
{
    static const char *const yes[] = {"on", "true", "yes"}, *const no[] = {"off", "false", "no"};
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (strcasecmp(s, yes[i]) == 0 || strcasecmp(s, no[i]) == 0) {
            *on = strcasecmp(s, yes[i]) == 0;
            return 0;
        }
    }
    return -EINVAL;
}

int options_parse_bool(const char *s, bool *on)
{
    return parse_bool(s, on);
}

int options_set_onoff(struct config *cfg, const struct option_info *o, char *arg)
{
    bool on;
    if (parse_bool(arg, &on) != 0)
        return usage_error("--%s wants on or off (or true/false, yes/no), got '%s'", o->name, arg);
    *(bool *)options_field(cfg, o) = on;
    return 0;
}

int options_set_number(struct config *cfg, const struct option_info *o, char *arg)
{
    unsigned long v;
    if (options_parse_uint(arg, o->min, o->max, &v) != 0)
        return usage_error("--%s wants %lu..%lu%s, got '%s'", o->name, o->min, o->max, o->wants,
                           arg);
    if (o->kind == FIELD_PORT)
        *(uint16_t *)options_field(cfg, o) = (uint16_t)v;
    else if (o->kind == FIELD_INT)
        *(int *)options_field(cfg, o) = (int)v;
    else
        *(unsigned *)options_field(cfg, o) = (unsigned)v;
    return 0;
}

/* A byte count in [min, max]; o->wants completes the message ("a byte count like 64M"). */
int options_set_size(struct config *cfg, const struct option_info *o, char *arg)
{
    size_t v;
    if (options_parse_size(arg, &v) != 0 || v < o->min || v > o->max)
        return usage_error("--%s wants a byte count%s, got '%s'", o->name, o->wants, arg);
    *(size_t *)options_field(cfg, o) = v;
    return 0;
}

int options_set_string(struct config *cfg, const struct option_info *o, char *arg)
{
    *(const char **)options_field(cfg, o) = arg;
    return 0;
}

/* ---- setters the areas share ---- */

/* One of the names in o->choices, each standing for a value of the int (or enum) field. */
int options_set_choice(struct config *cfg, const struct option_info *o, char *arg)
{
    for (const struct option_choice *c = o->choices; c->name; c++)
        if (strcmp(arg, c->name) == 0) {
            *(int *)options_field(cfg, o) = c->value;
            return 0;
        }
    return usage_error("--%s wants %s, got '%s'", o->name, o->wants, arg);
}

/* A host name as a site names it: letters, digits, '-', '.', an optional "*." in front. */
bool options_host_name_ok(const char *h, bool wildcard)
{
    if (wildcard && h[0] == '*' && h[1] == '.')
        h += 2;
    if (!*h || *h == '.' || strlen(h) > 253)
        return false;
    for (; *h; h++)
        if (!((*h >= 'a' && *h <= 'z') || (*h >= 'A' && *h <= 'Z') || (*h >= '0' && *h <= '9') ||
              *h == '-' || *h == '.' || *h == '_'))
            return false;
    return true;
}

/* --canonical-host, and a site's hosts. */
int options_set_host(struct config *cfg, const struct option_info *o, char *arg)
{
    for (char *p = arg; *p; p++) /* names compare case-insensitively: kept in lower case */
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p - 'A' + 'a');
    if (o->list != LIST_HOSTS) {
        if (!options_host_name_ok(arg, false))
            return usage_error("--canonical-host wants a host name like example.org, got '%s'",
                               arg);
        cfg->canonical_host = arg;
        return 0;
    }
    if (!options_host_name_ok(arg, true))
        return usage_error("hosts want names like example.org or *.example.org, got '%s'", arg);
    if (cfg->num_hosts == CONFIG_MAX_RULES)
        return usage_error("hosts: at most 32 names a site, '%s' is one too many", arg);
    cfg->hosts[cfg->num_hosts++] = arg;
    return 0;
}

static int set_help(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)cfg, (void)o, (void)arg;
    options_help(stdout);
    return CONFIG_DONE;
}

/* What the build has and what it left out (make static: HTTP3=no ACME=no), so an operator
 * can tell the image's binary from the package's before relying on a feature (issue 36): one
 * line each, "built with:" then "left out:", for people and for scripts that grep them. What
 * also needs the kernel (io_uring, kTLS, Landlock) is in the build either way; --verbose says
 * at start whether the kernel grants it. */
static int set_version(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)cfg, (void)o, (void)arg;
    printf("ringhttpd %s\n", RINGHTTPD_VERSION);
    printf("built with: HTTP/1.1, HTTP/2, TLS (OpenSSL %s), kTLS", OPENSSL_VERSION_STR);
#ifndef RINGHTTPD_NO_HTTP3
    printf(", HTTP/3 (ngtcp2 %s, GnuTLS %s)", NGTCP2_VERSION, GNUTLS_VERSION);
#endif
#ifndef RINGHTTPD_NO_ACME
    printf(", ACME (libcurl %s)", LIBCURL_VERSION);
#endif
    printf(", io_uring, epoll, gzip, br, zstd, Landlock, systemd sockets\n");
#if defined(RINGHTTPD_NO_HTTP3) && defined(RINGHTTPD_NO_ACME)
    printf("left out: HTTP/3 (HTTP3=no), ACME (ACME=no)\n");
#elif defined(RINGHTTPD_NO_HTTP3)
    printf("left out: HTTP/3 (HTTP3=no)\n");
#elif defined(RINGHTTPD_NO_ACME)
    printf("left out: ACME (ACME=no)\n");
#else
    printf("left out: nothing\n");
#endif
    printf("io_uring, kTLS and Landlock also need the kernel: --verbose says at start\n");
    return CONFIG_DONE;
}

/* A site's "acme": on, off, or on-demand (issue 40: certificates for names found in handshakes,
 * server/acme/ondemand.h). */
static int set_acme_mode(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)o;
    bool on;
    if (strcmp(arg, "on-demand") == 0) {
        cfg->acme = cfg->acme_ondemand = true;
        return 0;
    }
    if (options_parse_bool(arg, &on) != 0)
        return usage_error("acme: wants on, off or on-demand, got '%s'", arg);
    cfg->acme = on;
    cfg->acme_ondemand = false;
    return 0;
}

/* ---- compound values, for the reload's comparison ---- */

bool options_same_string(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

bool options_same_list(const char *const *a, int na, const char *const *b, int nb)
{
    if (na != nb)
        return false;
    for (int i = 0; i < na; i++)
        if (strcmp(a[i], b[i]) != 0)
            return false;
    return true;
}

/* ---- the table ---- */

/* The rows of no area: what --help, --version and -v are, and the file's own keys. */
static const struct option_info own[] = {
    {.name = "verbose",
     .short_name = 'v',
     PROCESS,
     FIELD(FIELD_BOOL, verbose),
     .set = options_set_flag,
     .help = "print what the kernel offers at start: io_uring's setup\n"
             "mode, opcodes and features tried for real, and whether it\n"
             "has kernel TLS (the tls ULP); the pipes obtained; each\n"
             "compressed variant made"},
    {.name = "help",
     .short_name = 'h',
     .scope = SCOPE_ARGV,
     .first = true,
     .set = set_help,
     .help = "print this help and exit"},
    {.name = "version",
     .scope = SCOPE_ARGV,
     .first = true,
     .set = set_version,
     .help = "print the version and the build's features, and exit"},
    /* the file's own keys */
    {.name = "root",
     .names_file = OPTFILE_WHOLE,
     .metavar = "DIR",
     SITE,
     .file_only = true,
     FIELD(FIELD_STRING, docroot),
     .set = options_set_string},
    {.name = "hosts",
     .metavar = "NAME",
     .scope = SCOPE_SITE_OWN,
     .reload = true,
     .file_only = true,
     .list = LIST_HOSTS,
     .set = options_set_host},
    /* "acme: off": no automatic certificate for the site's names (it brings its own pair, or
     * is served over cleartext only). */
    /* "acme: on-demand" (issue 40): also certificates for names no certificate covers that fall
     * to the site, each in its first handshake, when --acme-ask (or the site's names) approves. */
    {.name = "acme",
     .metavar = "on|off|on-demand",
     SITE,
     .file_only = true,
     FIELD(FIELD_BOOL, acme),
     .set = set_acme_mode},
    {.name = "default",
     .scope = SCOPE_SITE_OWN,
     .reload = true,
     .file_only = true,
     FIELD(FIELD_BOOL, is_default),
     .set = options_set_flag},
};

/* The one table, in --help's order: each area's rows in turn (as each nginx module declares
 * its directives and the core walks the modules), the file's own keys last. A row's index is
 * its place in this walk: it keys struct config's key_lines. */
static const struct option_area own_area = {own, sizeof(own) / sizeof(own[0])};
static const struct option_area *const areas[] = {
    &options_net,  &options_files,   &options_log,   &options_compress, &options_tls,
    &options_acme, &options_process, &options_rules, &options_limits,   &own_area,
};

size_t options_count(void)
{
    size_t n = 0;
    for (size_t a = 0; a < sizeof(areas) / sizeof(areas[0]); a++)
        n += areas[a]->n;
    return n;
}

const struct option_info *options_row(size_t i)
{
    for (size_t a = 0; a < sizeof(areas) / sizeof(areas[0]); a++) {
        if (i < areas[a]->n)
            return &areas[a]->rows[i];
        i -= areas[a]->n;
    }
    return NULL;
}

/* o's place in the table: the rows of its area, after those of the areas before it. */
static size_t row_index(const struct option_info *o)
{
    size_t base = 0;
    for (size_t a = 0; a < sizeof(areas) / sizeof(areas[0]); a++) {
        if (o >= areas[a]->rows && o < areas[a]->rows + areas[a]->n)
            return base + (size_t)(o - areas[a]->rows);
        base += areas[a]->n;
    }
    assert(!"a row of no area");
    return 0;
}

const struct option_info *options_find(const char *name)
{
    const struct option_info *o;
    for (size_t i = 0; (o = options_row(i)); i++)
        if (strcmp(o->name, name) == 0)
            return o;
    return NULL;
}

int options_line(const struct config *cfg, const char *name)
{
    const struct option_info *o = options_find(name);
    int line = o ? cfg->key_lines[row_index(o)] : 0;
    return line > 0 ? line : 0;
}

bool options_given(const struct config *cfg, const char *name)
{
    const struct option_info *o = options_find(name);
    return o && cfg->key_lines[row_index(o)] != 0;
}

/* Levenshtein distance of a and b, both shorter than 64 bytes (else "far": 64). */
static size_t distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), row[64];
    if (la >= 64 || lb >= 64)
        return 64;
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (row[j] + 1 < best)
                best = row[j] + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

const char *options_near(const char *name, bool in_file)
{
    const char *best = NULL;
    size_t best_d = 64, len = strlen(name);
    const struct option_info *o;
    for (size_t i = 0; (o = options_row(i)); i++) {
        if (in_file ? o->scope == SCOPE_ARGV : o->file_only)
            continue;
        size_t d = distance(name, o->name);
        if (d < best_d) {
            best_d = d;
            best = o->name;
        }
    }
    /* a typo: a third of the name at most (two edits in "compres-types", one in "prot") */
    return best && best_d > 0 && best_d <= (len + 2) / 3 ? best : NULL;
}

/* --help: "  -p, --port PORT", the help text from column 29 (two spaces further when the
 * option is longer), its later lines indented to that column. */
void options_help(FILE *out)
{
    enum { COLUMN = 29 };
    fputs("Usage: ringhttpd [options] [DOCROOT]\n"
          "Serve the files below DOCROOT (default: the current directory) over HTTP/1.1,\n"
          "HTTP/2 and, with --tls-port, HTTPS and HTTP/3.\n"
          "\n",
          out);
    const struct option_info *o;
    for (size_t i = 0; (o = options_row(i)); i++) {
        if (!o->help)
            continue;
        int n = o->short_name ? fprintf(out, "  -%c, ", o->short_name) : fprintf(out, "      ");
        n += fprintf(out, "--%s%s%s", o->name, o->metavar ? " " : "", o->metavar ? o->metavar : "");
        fprintf(out, "%*s", n < COLUMN ? COLUMN - n : 2, "");
        for (const char *h = o->help; *h;) {
            size_t len = strcspn(h, "\n");
            fprintf(out, "%.*s\n", (int)len, h);
            h += len;
            if (*h == '\n' && *++h)
                fprintf(out, "%*s", COLUMN, "");
        }
    }
}

/* ---- applying an option ---- */

/* Whether a site of the file may set o. */
static bool site_may(const struct option_info *o)
{
    return o->scope == SCOPE_SITE || o->scope == SCOPE_SITE_OWN;
}

/* The first use of a repeatable option in a layer replaces the list an outer layer made (as
 * nginx's add_header does); later uses in the same layer add to it. */
static void layer_begin(struct config *cfg, enum option_list list)
{
    struct config_src *src = cfg->src;
    if (!src || list == LIST_NONE || src->seen[list])
        return;
    src->seen[list] = 1;
    switch (list) {
    case LIST_HEADERS:
        free(cfg->extra_headers);
        cfg->extra_headers = NULL;
        cfg->extra_headers_len = 0;
        break;
    case LIST_ERROR_PAGES:
        for (int i = 0; i < cfg->num_error_pages; i++)
            free((char *)cfg->error_pages[i].path);
        cfg->num_error_pages = 0;
        break;
    case LIST_REAL_IP:
        cfg->num_real_ip = 0;
        break;
    case LIST_DICTIONARIES:
        cfg->num_dictionaries = 0;
        break;
    case LIST_REDIRECTS:
        cfg->num_redirects = 0;
        break;
    case LIST_AUTHS:
        cfg->num_auths = 0;
        break;
    case LIST_CACHE_RULES:
        cfg->num_cache_rules = 0;
        break;
    case LIST_HOSTS:
        cfg->num_hosts = 0;
        break;
    case LIST_ACME_DOMAINS:
        cfg->num_acme_domains = 0;
        break;
    case LIST_TLS_CERTS:
        /* a site's own pairs, not the process's: an array of its own (the copy shares top's) */
        cfg->tls_certs = NULL;
        cfg->num_tls_certs = cfg->cap_tls_certs = 0;
        break;
    case LIST_LIMIT_REQ_FOR:
        cfg->num_limit_req_for = 0;
        break;
    case LIST_CORS:
        cfg->num_cors = 0;
        break;
    case LIST_HINTS:
        cfg->num_hints = 0;
        break;
    case LIST_RULE_REDIRECTS:
    case LIST_RULE_HEADERS:
    case LIST_RULE_ACCESS:
        cfg->num_rule_lines[list - LIST_RULE_REDIRECTS] = 0;
        break;
    case LIST_DENY_UA:
        cfg->num_deny_ua = 0;
        break;
    case LIST_TICKET_KEYS:
        cfg->num_ticket_key_files = 0;
        break;
    case LIST_QUIC_SECRETS:
        cfg->num_quic_secret_files = 0;
        break;
    case LIST_PROXY_FROM:
        cfg->num_proxy_from = 0;
        break;
    case LIST_INDEX:
        cfg->num_index = 0;
        break;
    case LIST_FALLBACKS:
        cfg->num_fallbacks = 0;
        break;
    case LIST_BINDS:
        cfg->num_binds = 0;
        break;
    case LIST_DNS_RESOLVERS:
        cfg->num_acme_dns_resolvers = 0;
        break;
    case LIST_NONE:
    case OPTION_LISTS:
        break;
    }
}

int options_apply(struct config *cfg, const struct option_info *o, char *arg)
{
    if (cfg->src && cfg->src->site && !site_may(o))
        return usage_error("'%s' is the process's, not a site's (set it at the top level)",
                           cfg->src->key);
    layer_begin(cfg, o->list);
    if (cfg->src) /* the line for later checks' messages; -1: the command line's */
        cfg->key_lines[row_index(o)] = cfg->src->file ? cfg->src->line : -1;
    return o->set(cfg, o, arg);
}

/* value, or (when it names a relative file and the file has a directory) dir + value, from
 * the pool; NULL without memory. */
static char *file_value(struct config *cfg, const struct option_info *o, const char *value)
{
    const char *dir = cfg->src->dir, *name = value;
    size_t vlen = strlen(value);
    if (o->names_file == OPTFILE_AFTER_EQ && strchr(value, '='))
        name = strchr(value, '=') + 1;
    bool relative = o->names_file != OPTFILE_NONE && dir && *dir && *name && *name != '/' &&
                    (o->names_file != OPTFILE_WHOLE || strcmp(o->name, "access-log") != 0 ||
                     (strcmp(name, "-") != 0 && strcmp(name, "off") != 0));
    if (!relative)
        return options_strdup(cfg, value, vlen);
    size_t head = (size_t)(name - value), dlen = strlen(dir);
    char *joined = malloc(vlen + dlen + 1), *out = NULL;
    if (joined) {
        memcpy(joined, value, head);
        memcpy(joined + head, dir, dlen);
        memcpy(joined + head + dlen, name, vlen - head + 1);
        out = options_strdup(cfg, joined, vlen + dlen);
        free(joined);
    }
    return out;
}

int options_set(struct config *cfg, const char *key, const char *value)
{
    const struct option_info *o = options_find(key);
    if (!o || o->scope == SCOPE_ARGV) {
        const char *near = options_near(key, true);
        if (near)
            return usage_error("unknown key '%s' (did you mean '%s'?)", key, near);
        return usage_error("unknown key '%s' (keys are the long options' names, see --help)", key);
    }
    if (!cfg->src->site && o->scope == SCOPE_SITE_OWN)
        return usage_error("'%s' belongs in a site (under 'sites')", key);
    if (cfg->src->site && !site_may(o)) /* before the value: that is not what is wrong */
        return options_apply(cfg, o, NULL);
    if (!o->metavar) {
        bool on;
        if (parse_bool(value, &on) != 0)
            return usage_error("wants true or false, got '%s'", value);
        /* "false" is the flag's opposite: a site can turn off what its parent set */
        return options_apply(cfg, o, on ? "true" : "false");
    }
    char *copy = file_value(cfg, o, value);
    if (!copy)
        return usage_error("out of memory for '%s'", key);
    return options_apply(cfg, o, copy);
}

/* ---- what a reload cannot change ---- */

static bool same_field(const struct config *a, const struct config *b, const struct option_info *o)
{
    const void *x = options_cfield(a, o), *y = options_cfield(b, o);
    switch (o->kind) {
    case FIELD_BOOL:
        return *(const bool *)x == *(const bool *)y;
    case FIELD_UNSIGNED:
        return *(const unsigned *)x == *(const unsigned *)y;
    case FIELD_INT:
        return *(const int *)x == *(const int *)y;
    case FIELD_PORT:
        return *(const uint16_t *)x == *(const uint16_t *)y;
    case FIELD_SIZE:
        return *(const size_t *)x == *(const size_t *)y;
    case FIELD_STRING:
        return options_same_string(*(const char *const *)x, *(const char *const *)y);
    case FIELD_NONE:
        break;
    }
    return true;
}

bool options_restart_needed(const struct config *a, const struct config *b, char *out,
                            size_t out_len)
{
    size_t len = 0;
    out[0] = '\0';
    const struct option_info *o;
    for (size_t i = 0; (o = options_row(i)); i++) {
        if (o->reload || (o->same ? o->same(a, b) : same_field(a, b, o)))
            continue;
        int n = snprintf(out + len, out_len - len, "%s%s", len ? "/" : "", o->name);
        if (n < 0 || (size_t)n >= out_len - len)
            break;
        len += (size_t)n;
    }
    return out[0] != '\0';
}

/* ---- a struct config's memory ---- */

void options_init(struct config *cfg)
{
    /* key_lines has a slot per row: the areas' rows are counted here, at every configuration's
     * start, since no one translation unit sees them all (the single table's static assert) */
    assert(options_count() <= CONFIG_MAX_OPTIONS);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    *cfg = (struct config){
        .docroot = NULL,
        .docroot_fd = -1,
        .port = 8080,
        .threads = cpus > 0 ? (int)cpus : 1,
        .engine = ENGINE_AUTO,
        .keepalive_timeout = 15,
        .header_timeout = 10,
        .body_timeout = 60,
        .drain_timeout = 10,
        .max_conns = 16384,
        .head_memory = 32u << 20,
        .autoindex_limit = 10000,
        .cache_size = 64u << 20,
        .cache_max_file = 256u << 10,
        .file_send = FILE_SEND_SPLICE,
        .splice_pipes = 64,
        .send_lowat = 128u << 10,
        .access_log = "-",
        .log_format = LOG_COMBINED,
        .compress = true,
        .compress_types = CONFIG_COMPRESS_TYPES,
        .compress_min = 1u << 10,
        .compress_max = 16u << 20,
        .compress_cache = 32u << 20,
        .http2 = true,
        .http3 = true,
        .http3_max_conns = 1024,
        .http3_gso = true,
        .http3_gro = true,
        .quic_cc = CONFIG_QUIC_CC_CUBIC,
        .ktls = true,
        .tls_seal = true,
        .landlock = true,
        .auth_realm = "restricted",
        .acme_state = "/var/lib/ringhttpd/acme",
        .acme = true,
    };
}

struct options_pool {
    struct options_pool *next;
    char s[];
};

/* len bytes that live as long as cfg's top level (aligned as malloc's, after one pointer). */
static void *pool_alloc(struct config *cfg, size_t len)
{
    struct options_pool **top = cfg->pool_owner ? &cfg->pool_owner->pool : &cfg->pool;
    struct options_pool *p = malloc(sizeof(*p) + len);
    if (!p)
        return NULL;
    p->next = *top;
    *top = p;
    return p->s;
}

char *options_strdup(struct config *cfg, const char *s, size_t len)
{
    char *p = pool_alloc(cfg, len + 1);
    if (!p)
        return NULL;
    memcpy(p, s, len);
    p[len] = '\0';
    return p;
}

int options_add_cert(struct config *cfg, const struct config_cert *c)
{
    if (cfg->num_tls_certs == cfg->cap_tls_certs) {
        /* Doubling: the old arrays stay in the pool until the configuration goes, at most as
         * much again as the last. A site's copy of its top level shares the array it had then;
         * its own first pair (LIST_TLS_CERTS) starts it on a fresh one, so neither writes the
         * other's. */
        int cap = cfg->cap_tls_certs ? 2 * cfg->cap_tls_certs : 4;
        struct config_cert *a = pool_alloc(cfg, (size_t)cap * sizeof(*a));
        if (!a)
            return -ENOMEM;
        if (cfg->num_tls_certs)
            memcpy(a, cfg->tls_certs, (size_t)cfg->num_tls_certs * sizeof(*a));
        cfg->tls_certs = a;
        cfg->cap_tls_certs = cap;
    }
    cfg->tls_certs[cfg->num_tls_certs++] = *c;
    return 0;
}

int options_site_init(struct config *site, struct config *top)
{
    *site = *top;
    site->docroot_fd = -1;
    site->sites = NULL;
    site->num_sites = 0;
    site->pool = NULL;
    site->pool_owner = top;
    site->src = NULL;
    memset(&site->mime_extra, 0, sizeof(site->mime_extra));
    site->extra_headers = NULL;
    site->num_error_pages = 0;
    if (top->extra_headers &&
        !(site->extra_headers = strndup(top->extra_headers, top->extra_headers_len)))
        return -ENOMEM;
    for (int i = 0; i < top->num_error_pages; i++) {
        site->error_pages[i] = top->error_pages[i];
        if (!(site->error_pages[i].path = strdup(top->error_pages[i].path)))
            return -ENOMEM;
        site->num_error_pages++;
    }
    return 0;
}

/* What one level holds of its own (not the pool, which is its top level's). */
static void release(struct config *cfg)
{
    if (cfg->docroot_fd >= 0)
        close(cfg->docroot_fd);
    free(cfg->extra_headers);
    mime_table_free(&cfg->mime_extra);
    for (int i = 0; i < cfg->num_error_pages; i++)
        free((char *)cfg->error_pages[i].path);
}

void options_free(struct config *cfg)
{
    release(cfg);
    for (int i = 0; i < cfg->num_sites; i++)
        release(&cfg->sites[i]);
    free(cfg->sites);
    while (cfg->pool) {
        struct options_pool *p = cfg->pool;
        cfg->pool = p->next;
        free(p);
    }
}
