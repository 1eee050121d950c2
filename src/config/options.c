/* The option table and its setters; see options.h. Every rejected value gets one line naming
 * the option (and, from a file, its file, line and key), and exit status 2. */
#include "config/options.h"
#include "core/rulefile.h"

#include <arpa/inet.h>
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
#define usage_error(...) options_error(cfg, __VA_ARGS__)

/* Parses a decimal in [min, max]; 0 or -EINVAL. */
static int parse_uint(const char *s, unsigned long min, unsigned long max, unsigned long *out)
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
static int parse_size(const char *s, size_t *out)
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

static bool valid_field_value(const char *v)
{
    for (; *v; v++)
        if ((unsigned char)*v < 0x20 && *v != '\t')
            return false;
    return true;
}

/* The field an entry names, for the generic setters and the reload's comparison. */
static void *field(struct config *cfg, const struct option_info *o)
{
    return (char *)cfg + o->off;
}

static const void *cfield(const struct config *cfg, const struct option_info *o)
{
    return (const char *)cfg + o->off;
}

/* ---- generic setters: what the table's columns say ---- */

/* A flag: arg is NULL (the command line) or "true"/"false" (the file). */
static int set_flag(struct config *cfg, const struct option_info *o, char *arg)
{
    bool on = !arg || strcmp(arg, "true") == 0;
    *(bool *)field(cfg, o) = on != o->invert;
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

static int set_onoff(struct config *cfg, const struct option_info *o, char *arg)
{
    bool on;
    if (parse_bool(arg, &on) != 0)
        return usage_error("--%s wants on or off (or true/false, yes/no), got '%s'", o->name, arg);
    *(bool *)field(cfg, o) = on;
    return 0;
}

static int set_number(struct config *cfg, const struct option_info *o, char *arg)
{
    unsigned long v;
    if (parse_uint(arg, o->min, o->max, &v) != 0)
        return usage_error("--%s wants %lu..%lu%s, got '%s'", o->name, o->min, o->max, o->wants,
                           arg);
    if (o->kind == FIELD_PORT)
        *(uint16_t *)field(cfg, o) = (uint16_t)v;
    else if (o->kind == FIELD_INT)
        *(int *)field(cfg, o) = (int)v;
    else
        *(unsigned *)field(cfg, o) = (unsigned)v;
    return 0;
}

/* A byte count in [min, max]; o->wants completes the message ("a byte count like 64M"). */
static int set_size(struct config *cfg, const struct option_info *o, char *arg)
{
    size_t v;
    if (parse_size(arg, &v) != 0 || v < o->min || v > o->max)
        return usage_error("--%s wants a byte count%s, got '%s'", o->name, o->wants, arg);
    *(size_t *)field(cfg, o) = v;
    return 0;
}

static int set_string(struct config *cfg, const struct option_info *o, char *arg)
{
    *(const char **)field(cfg, o) = arg;
    return 0;
}

/* ---- the options' own setters ---- */

/* One of the names in o->choices, each standing for a value of the int (or enum) field. */
static int set_choice(struct config *cfg, const struct option_info *o, char *arg)
{
    for (const struct option_choice *c = o->choices; c->name; c++)
        if (strcmp(arg, c->name) == 0) {
            *(int *)field(cfg, o) = c->value;
            return 0;
        }
    return usage_error("--%s wants %s, got '%s'", o->name, o->wants, arg);
}

/* --tcp-cc: a name as the kernel spells its controllers (TCP_CA_NAME_MAX is 16 with the NUL).
 * Whether this kernel has it is known only when a socket asks: server.c says so at start. */
static int set_tcp_cc(struct config *cfg, const struct option_info *o, char *arg)
{
    size_t n = strspn(arg, "abcdefghijklmnopqrstuvwxyz0123456789_");
    if (n == 0 || arg[n] != '\0' || n > 15)
        return usage_error("--%s wants a congestion control name such as cubic or bbr (see "
                           "/proc/sys/net/ipv4/tcp_available_congestion_control), got '%s'",
                           o->name, arg);
    *(const char **)field(cfg, o) = arg;
    return 0;
}

static int append_header(struct config *cfg, const char *name, size_t name_len, const char *value)
{
    size_t value_len = strlen(value);
    size_t add = name_len + 2 + value_len + 2;
    char *p = realloc(cfg->extra_headers, cfg->extra_headers_len + add + 1);
    if (!p)
        return -ENOMEM;
    cfg->extra_headers = p;
    p += cfg->extra_headers_len;
    memcpy(p, name, name_len);
    memcpy(p + name_len, ": ", 2);
    memcpy(p + name_len + 2, value, value_len);
    memcpy(p + name_len + 2 + value_len, "\r\n", 3);
    cfg->extra_headers_len += add;
    return 0;
}

static int set_cache_control(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)o;
    if (!*arg || !valid_field_value(arg))
        return usage_error("--cache-control: invalid value '%s'", arg);
    if (append_header(cfg, "Cache-Control", 13, arg) != 0)
        return 2;
    return 0;
}

static int set_header(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)o;
    const char *colon = strchr(arg, ':');
    if (!colon || colon == arg)
        return usage_error("--header wants 'Name: value', got '%s'", arg);
    for (const char *p = arg; p < colon; p++)
        if (!token_is_tchar((unsigned char)*p))
            return usage_error("--header: invalid field name in '%s'", arg);
    const char *value = colon + 1;
    while (token_is_ows(*value))
        value++;
    if (!valid_field_value(value))
        return usage_error("--header: control character in '%s'", arg);
    if (append_header(cfg, arg, (size_t)(colon - arg), value) != 0)
        return usage_error("--header: out of memory for '%s'", arg);
    return 0;
}

/* Error pages and the fallback name a URL path; it is normalised here, once, the same way a
 * request's path is, so the file they name is looked up exactly like a request for it. */
static const char *url_path_option(const struct config *cfg, const char *opt, const char *value,
                                   int *rc)
{
    char buf[PATH_MAX];
    struct path_result res;
    struct http_str target = {value, strlen(value)};
    if (value[0] != '/' || path_normalize(target, buf, sizeof(buf) - 1, &res) != 0 ||
        res.len == 0 || res.query.p) {
        *rc =
            usage_error("%s wants a file path below the root like /404.html, got '%s'", opt, value);
        return NULL;
    }
    buf[res.len] = '\0';
    char *copy = strdup(buf);
    if (!copy)
        *rc = 2;
    return copy;
}

static int set_error_page(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)o;
    const char *eq = strchr(arg, '=');
    unsigned long code;
    char num[8];
    if (!eq || (size_t)(eq - arg) >= sizeof(num))
        return usage_error("--error-page wants CODE=PATH, got '%s'", arg);
    memcpy(num, arg, (size_t)(eq - arg));
    num[eq - arg] = '\0';
    if (parse_uint(num, 400, 599, &code) != 0)
        return usage_error("--error-page: CODE must be 400..599 in '%s'", arg);
    if (cfg->num_error_pages == CONFIG_MAX_ERROR_PAGES)
        return usage_error("--error-page: at most 16, '%s' is one too many", arg);
    int rc = 0;
    const char *path = url_path_option(cfg, "--error-page", eq + 1, &rc);
    if (!path)
        return rc;
    cfg->error_pages[cfg->num_error_pages].status = (int)code;
    cfg->error_pages[cfg->num_error_pages].path = path;
    cfg->num_error_pages++;
    return 0;
}

/* The normalised URL path value names, in the pool: a file's (url_path_option's rules), or with
 * prefix any path below the root, the root itself ("/", "/../") being "". */
static const char *pool_url_path(struct config *cfg, const char *opt, const char *value,
                                 bool prefix, int *rc)
{
    if (prefix) {
        char buf[PATH_MAX];
        struct path_result res;
        if (value[0] != '/' ||
            path_normalize((struct http_str){value, strlen(value)}, buf, sizeof(buf) - 1, &res) !=
                0 ||
            res.query.p) {
            *rc = usage_error("%s wants [PREFIX=]PATH, PREFIX a URL path like /app/, got '%s'", opt,
                              value);
            return NULL;
        }
        const char *kept = options_strdup(cfg, buf, res.len);
        if (!kept)
            *rc = 2;
        return kept;
    }
    char *path = (char *)url_path_option(cfg, opt, value, rc);
    if (!path)
        return NULL;
    const char *kept = options_strdup(cfg, path, strlen(path));
    free(path);
    if (!kept)
        *rc = 2;
    return kept;
}

/* [PREFIX=]PATH. One for a prefix already listed replaces it: the last one wins, as the single
 * --fallback did; a site's list replaces the one it inherited from the top level. */
static int set_fallback(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)o;
    int rc = 0;
    char *eq = arg[0] == '/' ? strchr(arg, '=') : NULL;
    const char *prefix = "";
    if (eq) {
        *eq = '\0';
        prefix = pool_url_path(cfg, "--fallback", arg, true, &rc);
        *eq = '=';
        if (!prefix)
            return rc;
    }
    const char *path = pool_url_path(cfg, "--fallback", eq ? eq + 1 : arg, false, &rc);
    if (!path)
        return rc;
    int i = 0;
    while (i < cfg->num_fallbacks && strcmp(cfg->fallbacks[i].prefix, prefix) != 0)
        i++;
    if (i == CONFIG_MAX_FALLBACKS)
        return usage_error("--fallback: at most %d prefixes, '%s' is one too many",
                           CONFIG_MAX_FALLBACKS, arg);
    cfg->fallbacks[i] = (struct config_fallback){prefix, strlen(prefix), path};
    if (i == cfg->num_fallbacks)
        cfg->num_fallbacks++;
    return 0;
}

/* --index NAME...: file names tried in a directory, in order (nginx's index); a name is one
 * path segment, so it can name no file outside the directory. Several may come in one value,
 * separated by spaces. */
static int set_index(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)o;
    int n = 0;
    /* arg is not cut in place: a reload applies the same command line again */
    for (const char *p = arg + strspn(arg, " \t"); *p; p += strspn(p, " \t")) {
        size_t len = strcspn(p, " \t");
        if (p[0] == '.' || memchr(p, '/', len) || len > NAME_MAX)
            return usage_error("--index wants file names like index.html (no '/', no leading "
                               "'.'), got '%s'",
                               arg);
        if (cfg->num_index == CONFIG_MAX_INDEX)
            return usage_error("--index: at most %d names, '%s' is one too many", CONFIG_MAX_INDEX,
                               arg);
        const char *name = options_strdup(cfg, p, len);
        if (!name || !valid_field_value(name))
            return usage_error("--index: invalid name in '%s'", arg);
        cfg->index_names[cfg->num_index++] = name;
        n++;
        p += len;
    }
    if (!n)
        return usage_error("--index wants file names like index.html, got '%s'", arg);
    return 0;
}

/* --pages: Pages-style handling. It also makes clean URLs (with the .html redirect) and the
 * root's rules files the default of a layer where clean-urls or rules-files was not given:
 * given, that value stands, wherever it came. */
static int set_pages(struct config *cfg, const struct option_info *o, char *arg)
{
    set_flag(cfg, o, arg);
    if (!options_given(cfg, "clean-urls"))
        cfg->clean_urls = cfg->pages ? CLEAN_URLS_REDIRECT : CLEAN_URLS_OFF;
    if (!options_given(cfg, "rules-files"))
        cfg->rules_files = cfg->pages;
    return 0;
}

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

/* A port word's value: 0 (the kernel's pick) to 65535. */
static int bind_port(const char *s, int *out)
{
    unsigned long v;
    if (parse_uint(s, 0, 65535, &v) != 0)
        return -EINVAL;
    *out = (int)v;
    return 0;
}

/* The address part of an IP entry, in place: "*", "*:PORT", "V4", "V4:PORT", "[V6]",
 * "[V6]:PORT" or a bare "V6" (two colons or more, no port: nginx wants brackets for one). */
static int bind_address(char *a, struct config_bind *b)
{
    char *port = NULL;
    if (a[0] == '[') {
        char *close = strchr(a, ']');
        if (!close || (close[1] && close[1] != ':'))
            return -EINVAL;
        *close = '\0';
        if (close[1] == ':')
            port = close + 2;
        a++;
    } else if (strchr(a, ':') == strrchr(a, ':') && strchr(a, ':')) { /* one colon: a port */
        port = strchr(a, ':');
        *port++ = '\0';
    }
    if (port && bind_port(port, &b->port) != 0)
        return -EINVAL;
    if (strcmp(a, "*") == 0)
        return 0; /* both families, as with no --bind */
    unsigned char buf[16];
    if (inet_pton(AF_INET, a, buf) != 1 && inet_pton(AF_INET6, a, buf) != 1)
        return -EINVAL;
    b->host = a;
    return 0;
}

/* --bind 'ADDR[:PORT] [tls=PORT] [proxy]' or 'unix:PATH [mode=0660] [owner=USER[:GROUP]]
 * [proxy]', repeatable: each entry a listener of its own (issue 38; a second -b used to replace
 * the first). Overlaps between entries are the server's to find (it knows --port). */
static int set_bind(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)o;
    static const char syntax[] =
        "'ADDR[:PORT] [tls=PORT] [proxy]' (127.0.0.1, [::1]:8080, * for every address) or "
        "'unix:PATH [mode=0660] [owner=USER[:GROUP]] [tls] [proxy]'";
    if (cfg->num_binds == CONFIG_MAX_BINDS)
        return usage_error("--bind: at most %d entries; '%s' is one more", CONFIG_MAX_BINDS, arg);
    struct config_bind b = {.port = -1, .tls_port = -1, .mode = -1};
    char first[128]; /* the address as given, for its message (parsing cuts it in place) */
    snprintf(first, sizeof(first), "%.*s", (int)strcspn(arg, " \t"), arg);
    char *save = NULL, *word = strtok_r(arg, " \t", &save);
    if (!word)
        return usage_error("--bind wants %s", syntax);
    if (strncmp(word, "unix:", 5) == 0) {
        b.path = word + 5;
        if (b.path[0] != '/' || strlen(b.path) > CONFIG_UNIX_PATH_MAX)
            return usage_error("--bind unix:PATH wants an absolute path of at most %d bytes, "
                               "got '%s'",
                               CONFIG_UNIX_PATH_MAX, word);
    } else if (bind_address(word, &b) != 0) {
        return usage_error("--bind: '%s' is not an IPv4 or IPv6 address (with an optional "
                           ":PORT; a host name is not resolved); it wants %s",
                           first, syntax);
    }
    while ((word = strtok_r(NULL, " \t", &save))) {
        unsigned long mode = 0;
        char *end = NULL;
        if (strcmp(word, "proxy") == 0 || strcmp(word, "proxy_protocol") == 0)
            b.proxy = true;
        else if (!b.path && strncmp(word, "tls=", 4) == 0 && bind_port(word + 4, &b.tls_port) == 0)
            continue;
        else if (b.path && strncmp(word, "mode=", 5) == 0 && word[5] >= '0' && word[5] <= '7' &&
                 (mode = strtoul(word + 5, &end, 8), *end == '\0') && mode <= 0777)
            b.mode = (int)mode;
        else if (b.path && strncmp(word, "owner=", 6) == 0 && word[6])
            b.owner = word + 6;
        else if (b.path && strcmp(word, "tls") == 0)
            b.tls = true;
        else
            return usage_error("--bind: '%s' is not a word it knows; it wants %s", word, syntax);
    }
    cfg->binds[cfg->num_binds++] = b;
    return 0;
}

/* "ADDR:PORT", "[V6]:PORT"; the address is checked when the listener opens. */
static int set_metrics(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)o;
    char *colon = strrchr(arg, ':');
    unsigned long port;
    if (!colon || colon == arg || parse_uint(colon + 1, 0, 65535, &port) != 0 ||
        (strchr(arg, ':') != colon && (arg[0] != '[' || colon[-1] != ']')))
        return usage_error(
            "--metrics wants ADDR:PORT like 127.0.0.1:9100, [::1]:9100 or localhost:9100, got "
            "'%s'",
            arg);
    *colon = '\0';
    cfg->metrics_bind = arg;
    cfg->metrics_port = (uint16_t)port;
    return 0;
}

static int set_compress_types(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)o;
    if (!valid_field_value(arg))
        return usage_error("--compress-types: invalid list '%s'", arg);
    cfg->compress_types = arg;
    return 0;
}

static int set_dictionary(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)o;
    if (arg[0] != '/' || strchr(arg, '"') || strchr(arg, '\\') || !valid_field_value(arg))
        return usage_error("--dictionary wants a URL path pattern like /assets/*.js, "
                           "got '%s'",
                           arg);
    /* the older releases are found by listing one directory */
    if (strchr(arg, '*') && strchr(arg, '*') < strrchr(arg, '/'))
        return usage_error("--dictionary: '*' only in the last path segment, got '%s'", arg);
    if (cfg->num_dictionaries == CONFIG_MAX_DICTIONARIES)
        return usage_error("--dictionary: at most 8 patterns; '%s' is one more", arg);
    cfg->dictionaries[cfg->num_dictionaries++] = arg;
    return 0;
}

/* A secret file of a repeatable list (the first encrypts or makes tokens, the others still
 * decrypt or check): appended to files[*n], of at most max. */
static int append_secret_file(struct config *cfg, const struct option_info *o, const char **files,
                              int *n, int max, char *arg)
{
    if (!*arg)
        return usage_error("--%s wants a file", o->name);
    if (*n == max)
        return usage_error("--%s: at most %d files; '%s' is one more", o->name, max, arg);
    files[(*n)++] = arg;
    return 0;
}

/* The files are read (and their sizes checked) with the pairs, by tls_ctx_new. */
static int set_ticket_key_file(struct config *cfg, const struct option_info *o, char *arg)
{
    return append_secret_file(cfg, o, cfg->ticket_key_files, &cfg->num_ticket_key_files,
                              CONFIG_MAX_TICKET_KEYS, arg);
}

/* --quic-server-id [ROTATION:]HEX: the server ID every QUIC connection ID carries, for an L4
 * balancer (QUIC-LB's plaintext IDs: 1 to 15 bytes; AWS NLB's are 8, written 0x and 16 hex
 * digits, as its console shows them), and the config rotation codepoint of the ID's first
 * octet (0 to 6; 7 marks IDs no balancer can route). quic/cid.h lays the ID out. */
static int set_quic_server_id(struct config *cfg, const struct option_info *o, char *arg)
{
    const char *p = arg;
    unsigned rotation = 0;
    if (p[0] >= '0' && p[0] <= '9' && p[1] == ':') {
        rotation = (unsigned)(p[0] - '0');
        p += 2;
        if (rotation > CONFIG_QUIC_ROTATION_MAX)
            return usage_error("--%s: config rotation %u: QUIC-LB's are 0 to %d (7 marks IDs no "
                               "balancer can route), got '%s'",
                               o->name, rotation, CONFIG_QUIC_ROTATION_MAX, arg);
    }
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))
        p += 2;
    size_t digits = strlen(p);
    for (size_t i = 0; i < digits; i++)
        if (!isxdigit((unsigned char)p[i]))
            return usage_error("--%s wants [ROTATION:]HEX like 0x1122334455667788 (hex digits, "
                               "two a byte), got '%s'",
                               o->name, arg);
    if (digits == 0 || digits % 2 || digits / 2 > CONFIG_QUIC_SID_MAX)
        return usage_error("--%s wants 1 to %d bytes in hex (two digits a byte; AWS NLB's are "
                           "8: 16 digits), got %zu digit%s in '%s'",
                           o->name, CONFIG_QUIC_SID_MAX, digits, digits == 1 ? "" : "s", arg);
    for (size_t i = 0; i < digits / 2; i++) {
        char byte[3] = {p[2 * i], p[2 * i + 1], '\0'};
        cfg->quic_sid[i] = (uint8_t)strtoul(byte, NULL, 16);
    }
    cfg->quic_sid_len = (unsigned)(digits / 2);
    cfg->quic_sid_rotation = rotation;
    cfg->quic_server_id = arg;
    return 0;
}

/* The files are read (and their sizes checked) by the server, at start and on reload. */
static int set_quic_secret_file(struct config *cfg, const struct option_info *o, char *arg)
{
    return append_secret_file(cfg, o, cfg->quic_secret_files, &cfg->num_quic_secret_files,
                              CONFIG_MAX_QUIC_SECRETS, arg);
}

/* HTTPS (issue 14). The pairs are checked (files read, keys matched) by tls_ctx_new at start
 * and on every reload, not here; what the options need of each other, config.c's tls_check. */
static int set_tls_port(struct config *cfg, const struct option_info *o, char *arg)
{
    int rc = set_number(cfg, o, arg);
    if (rc == 0)
        cfg->tls = true;
    return rc;
}

static int set_tls_cert(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)o;
    int n = cfg->num_tls_certs;
    if (n > 0 && !cfg->tls_certs[n - 1].key)
        return usage_error("--tls-cert '%s': the --tls-cert before it has no --tls-key", arg);
    if (!*arg)
        return usage_error("--tls-cert wants a file%s", "");
    struct config_cert c = {.cert = arg,
                            .cert_line = cfg->src && cfg->src->file ? cfg->src->line : 0};
    if (options_add_cert(cfg, &c) != 0)
        return usage_error("--tls-cert '%s': out of memory", arg);
    if (cfg->src && cfg->src->site)
        cfg->site_tls = true;
    return 0;
}

static int set_tls_key(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)o;
    int n = cfg->num_tls_certs;
    if (n == 0 || cfg->tls_certs[n - 1].key)
        return usage_error("--tls-key '%s' follows no --tls-cert of its own", arg);
    if (!*arg)
        return usage_error("--tls-key wants a file%s", "");
    cfg->tls_certs[n - 1].key = arg;
    cfg->tls_certs[n - 1].key_line = cfg->src && cfg->src->file ? cfg->src->line : 0;
    return 0;
}

static int set_hsts(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)o;
    unsigned long v;
    if (parse_uint(arg, 0, 315360000, &v) != 0)
        return usage_error("--hsts wants 0..315360000 seconds (0 tells browsers to "
                           "forget), got '%s'",
                           arg);
    cfg->hsts = true;
    cfg->hsts_max_age = (unsigned)v;
    cfg->hsts_len =
        (size_t)snprintf(cfg->hsts_line, sizeof(cfg->hsts_line),
                         "Strict-Transport-Security: max-age=%u\r\n", cfg->hsts_max_age);
    return 0;
}

static int set_user(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)o;
    if (!*arg || *arg == ':')
        return usage_error("--user wants USER or USER:GROUP, got '%s'", arg);
    cfg->user = arg;
    return 0;
}

/* --config and --check-config. */
static int set_config(struct config *cfg, const struct option_info *o, char *arg)
{
    if (cfg->src && cfg->src->file)
        return usage_error("a configuration file cannot name another ('%s')", arg);
    cfg->check_only = strcmp(o->name, "check-config") == 0;
    struct stat st;
    if (cfg->check_only && stat(arg, &st) == 0 && S_ISDIR(st.st_mode)) {
        /* --check-config DIR (issue 39): a site's root before it is deployed, its _redirects
         * and _headers read as a server with --rules-files would, each bad line said */
        cfg->docroot = arg;
        cfg->rules_files = true;
        return 0;
    }
    cfg->config_file = arg;
    return 0;
}

static int set_health(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)o;
    if (arg[0] != '/' || strpbrk(arg, "?#%\"") || !valid_field_value(arg))
        return usage_error("--health wants a plain URL path like /healthz, got '%s'", arg);
    cfg->health = arg;
    return 0;
}

/* A host name as a site names it: letters, digits, '-', '.', an optional "*." in front. */
static bool host_name_ok(const char *h, bool wildcard)
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
static int set_host(struct config *cfg, const struct option_info *o, char *arg)
{
    for (char *p = arg; *p; p++) /* names compare case-insensitively: kept in lower case */
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p - 'A' + 'a');
    if (o->list != LIST_HOSTS) {
        if (!host_name_ok(arg, false))
            return usage_error("--canonical-host wants a host name like example.org, got '%s'",
                               arg);
        cfg->canonical_host = arg;
        return 0;
    }
    if (!host_name_ok(arg, true))
        return usage_error("hosts want names like example.org or *.example.org, got '%s'", arg);
    if (cfg->num_hosts == CONFIG_MAX_RULES)
        return usage_error("hosts: at most 32 names a site, '%s' is one too many", arg);
    cfg->hosts[cfg->num_hosts++] = arg;
    return 0;
}

/* ---- automatic HTTPS (issue 27); what they need of each other: config.c's tls_check ---- */

static int set_acme_email(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)o;
    if (!strchr(arg, '@') || strpbrk(arg, " \t\r\n\"<>,"))
        return usage_error("--acme-email wants an address like me@example.org, got '%s'", arg);
    cfg->acme_email = arg;
    return 0;
}

static int set_acme_domain(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)o;
    if (!host_name_ok(arg, false))
        return usage_error("--acme-domain wants a host name (no wildcard), got '%s'", arg);
    if (cfg->num_acme_domains == CONFIG_MAX_RULES)
        return usage_error("--acme-domain: at most %d names", CONFIG_MAX_RULES);
    cfg->acme_domains[cfg->num_acme_domains++] = arg;
    return 0;
}

static int set_acme_ca(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)o;
    if (strncmp(arg, "https://", 8) != 0 && strncmp(arg, "http://", 7) != 0)
        return usage_error("--acme-ca wants the directory's URL (https://...), got '%s'", arg);
    cfg->acme_ca = arg;
    return 0;
}

static int set_acme_ca_root(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)o;
    if (access(arg, R_OK) != 0)
        return usage_error("--acme-ca-root '%s': %s", arg, strerror(errno));
    cfg->acme_ca_root = arg;
    return 0;
}

static int set_acme_state(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)o;
    if (arg[0] != '/')
        return usage_error("--acme-state wants an absolute directory, got '%s'", arg);
    cfg->acme_state = arg;
    return 0;
}

/* --acme-ask: caddy's convention, URL?domain=NAME; 2xx approves the name. */
static int set_acme_ask(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)o;
    if ((strncmp(arg, "http://", 7) != 0 && strncmp(arg, "https://", 8) != 0) ||
        strpbrk(arg, "?# \t\r\n"))
        return usage_error("--acme-ask wants an http:// or https:// URL without a query "
                           "(it is called as URL?domain=NAME), got '%s'",
                           arg);
    cfg->acme_ask = arg;
    return 0;
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
    if (parse_bool(arg, &on) != 0)
        return usage_error("acme: wants on, off or on-demand, got '%s'", arg);
    cfg->acme = on;
    cfg->acme_ondemand = false;
    return 0;
}

/* The authority of an absolute redirect target: a host name, maybe ":PORT", then '/' or end. */
static bool url_host_ok(const char *h)
{
    size_t n = strcspn(h, "/:");
    char name[256];
    if (n == 0 || n >= sizeof(name))
        return false;
    memcpy(name, h, n);
    name[n] = '\0';
    if (!host_name_ok(name, false))
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
    if (p[0] != '/' || strpbrk(p, "\"\\?# ") || !valid_field_value(p))
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
        strpbrk(f[1], "\"\\ ") || !valid_field_value(f[1]) ||
        (strchr(f[1], '*') && (f[1][tl - 1] != '*' || strchr(f[1], '*') != f[1] + tl - 1 ||
                               tl < 2 || f[1][tl - 2] != '/')))
        return usage_error("--redirect: TO must be a path (/new/) or an http(s) URL, with "
                           "'*' only after its last '/', in '%s'",
                           arg);
    if (n == 3 && (parse_uint(f[2], 301, 308, &status) != 0 ||
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
    if (!*arg || strpbrk(arg, "\"\\") || !valid_field_value(arg))
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
    if (!sp || !value || !*value || !valid_field_value(value))
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
    if (!*arg || !valid_field_value(arg))
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
    return set_size(cfg, o, arg);
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

/* ---- compound values, for the reload's comparison ---- */

static bool same_string(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

static bool same_metrics(const struct config *a, const struct config *b)
{
    return same_string(a->metrics_bind, b->metrics_bind) && a->metrics_port == b->metrics_port;
}

/* a is the running configuration, whose tls-port 0 the server replaced by the port it got: a
 * file that still says 0 asks for no other. */
static bool same_tls_port(const struct config *a, const struct config *b)
{
    return a->tls == b->tls && (b->tls_port == 0 || a->tls_port == b->tls_port);
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

static bool same_list(const char *const *a, int na, const char *const *b, int nb)
{
    if (na != nb)
        return false;
    for (int i = 0; i < na; i++)
        if (strcmp(a[i], b[i]) != 0)
            return false;
    return true;
}

static bool same_binds(const struct config *a, const struct config *b)
{
    if (a->num_binds != b->num_binds)
        return false;
    for (int i = 0; i < a->num_binds; i++) {
        const struct config_bind *x = &a->binds[i], *y = &b->binds[i];
        if (!same_string(x->host, y->host) || !same_string(x->path, y->path) ||
            x->port != y->port || x->tls_port != y->tls_port || x->proxy != y->proxy ||
            x->tls != y->tls || x->mode != y->mode || !same_string(x->owner, y->owner))
            return false;
    }
    return true;
}

static bool same_ticket_keys(const struct config *a, const struct config *b)
{
    return same_list(a->ticket_key_files, a->num_ticket_key_files, b->ticket_key_files,
                     b->num_ticket_key_files);
}

static bool same_quic_secrets(const struct config *a, const struct config *b)
{
    return same_list(a->quic_secret_files, a->num_quic_secret_files, b->quic_secret_files,
                     b->num_quic_secret_files);
}

static bool same_acme_domains(const struct config *a, const struct config *b)
{
    return same_list(a->acme_domains, a->num_acme_domains, b->acme_domains, b->num_acme_domains);
}

/* ---- the table ---- */

#define FIELD(k, f) .kind = (k), .off = offsetof(struct config, f)
#define PROCESS .scope = SCOPE_PROCESS, .reload = false
#define SITE .scope = SCOPE_SITE, .reload = true
#define SECONDS(lo) .set = set_number, .min = (lo), .max = 86400, .wants = " seconds"
#define BYTES(lo, hi, says) .set = set_size, .min = (lo), .max = (hi), .wants = (says)

/* In --help's order; the file's own keys (no command-line option, no help line) last. */
static const struct option_info table[] = {
    {.name = "port",
     .short_name = 'p',
     .metavar = "PORT",
     PROCESS,
     FIELD(FIELD_PORT, port),
     .set = set_number,
     .max = 65535,
     .wants = "",
     .help = "TCP port to listen on (default 8080; 0 picks a free one)"},
    {.name = "bind",
     .short_name = 'b',
     .metavar = "ADDR",
     PROCESS,
     .list = LIST_BINDS,
     .same = same_binds,
     .set = set_bind,
     .help = "an address to listen on, repeatable: ADDR[:PORT] [tls=PORT]\n"
             "[proxy], or unix:PATH [mode=0660] [owner=USER[:GROUP]] [tls] [proxy]\n"
             "(default: every IPv4 and IPv6 address, as one [::] socket;\n"
             "an address given is that one only)"},
    {.name = "threads",
     .short_name = 't',
     .metavar = "N",
     PROCESS,
     FIELD(FIELD_INT, threads),
     .set = set_number,
     .min = 1,
     .max = 1024,
     .wants = "",
     .help = "worker threads, one ring or epoll set each (default: CPUs)"},
    {.name = "engine",
     .metavar = "NAME",
     PROCESS,
     FIELD(FIELD_INT, engine),
     .set = set_choice,
     .choices = (const struct option_choice[]){{"auto", ENGINE_AUTO},
                                               {"uring", ENGINE_URING},
                                               {"io_uring", ENGINE_URING},
                                               {"epoll", ENGINE_EPOLL},
                                               {NULL, 0}},
     .wants = "auto, uring or epoll",
     .help = "auto, uring or epoll (default auto: io_uring when the\n"
             "kernel allows it, epoll otherwise)"},
    {.name = "keepalive-timeout",
     .metavar = "S",
     PROCESS,
     FIELD(FIELD_UNSIGNED, keepalive_timeout),
     SECONDS(1),
     .help = "close idle keep-alive connections after S seconds (15)"},
    {.name = "header-timeout",
     .metavar = "S",
     PROCESS,
     FIELD(FIELD_UNSIGNED, header_timeout),
     SECONDS(1),
     .help = "close connections whose request head takes longer (10)"},
    {.name = "body-timeout",
     .metavar = "S",
     PROCESS,
     FIELD(FIELD_UNSIGNED, body_timeout),
     SECONDS(1),
     .help = "a request whose body brings nothing for S seconds (60;\n"
             "PINGs and other streams do not count): HTTP/2 answers 408,\n"
             "HTTP/3 resets the stream"},
    {.name = "drain-timeout",
     .metavar = "S",
     PROCESS,
     FIELD(FIELD_UNSIGNED, drain_timeout),
     SECONDS(1),
     .help = "on SIGTERM, wait at most S seconds for responses (10)"},
    {.name = "max-conns",
     .metavar = "N",
     PROCESS,
     FIELD(FIELD_UNSIGNED, max_conns),
     .set = set_number,
     .min = 1,
     .max = 1u << 20,
     .wants = "",
     .help = "connections per worker (16384); when all are taken, idle\n"
             "keep-alive connections are closed for new ones, oldest first"},
    {.name = "head-memory",
     .metavar = "BYTES",
     PROCESS,
     FIELD(FIELD_SIZE, head_memory),
     BYTES(64u << 10, SIZE_MAX, " of at least 64K"),
     .help = "input buffers of partial request heads per worker (32M;\n"
             "K/M/G, at least 64K); past it the oldest partial heads close"},
    {.name = "autoindex",
     SITE,
     FIELD(FIELD_BOOL, autoindex),
     .set = set_flag,
     .help = "list directories that have no index.html"},
    {.name = "autoindex-limit",
     .metavar = "N",
     SITE,
     FIELD(FIELD_UNSIGNED, autoindex_limit),
     .set = set_number,
     .min = 1,
     .max = 1u << 24,
     .wants = "",
     .help = "entries a listing shows, the rest counted in a note (10000)"},
    {.name = "cache-control",
     .metavar = "VALUE",
     SITE,
     .list = LIST_HEADERS,
     .set = set_cache_control,
     .help = "Cache-Control header for successful responses"},
    {.name = "header",
     .metavar = "'NAME: VALUE'",
     SITE,
     .list = LIST_HEADERS,
     .set = set_header,
     .help = "extra header for successful responses (repeatable)"},
    {.name = "mime-types",
     .names_file = OPTFILE_WHOLE,
     .metavar = "FILE",
     SITE,
     FIELD(FIELD_STRING, mime_file),
     .set = set_string,
     .help = "extra types in /etc/mime.types format"},
    {.name = "error-page",
     .metavar = "CODE=PATH",
     SITE,
     .list = LIST_ERROR_PAGES,
     .set = set_error_page,
     .help = "serve PATH (below DOCROOT) as the body of CODE errors"},
    {.name = "fallback",
     .metavar = "[PREFIX=]PATH",
     SITE,
     .list = LIST_FALLBACKS,
     .set = set_fallback,
     .help = "serve PATH with 200 when a file is missing and the client\n"
             "accepts text/html (single-page applications); with PREFIX\n"
             "only below it, the longest prefix first (repeatable)"},
    {.name = "pages",
     SITE,
     FIELD(FIELD_BOOL, pages),
     .set = set_pages,
     .help = "Pages-style static site: clean URLs (as --clean-urls\n"
             "redirect), the nearest 404.html up the tree for a missing\n"
             "file, the site's _redirects and _headers"},
    {.name = "clean-urls",
     .metavar = "on|off|redirect",
     SITE,
     FIELD(FIELD_INT, clean_urls),
     .set = set_choice,
     .choices = (const struct option_choice[]){{"off", CLEAN_URLS_OFF},
                                               {"false", CLEAN_URLS_OFF},
                                               {"no", CLEAN_URLS_OFF},
                                               {"on", CLEAN_URLS_ON},
                                               {"true", CLEAN_URLS_ON},
                                               {"yes", CLEAN_URLS_ON},
                                               {"redirect", CLEAN_URLS_REDIRECT},
                                               {NULL, 0}},
     .wants = "on, off or redirect",
     .help = "on: /x serves x.html when there is no file x; redirect:\n"
             "also 301 /x.html to /x and /dir/index.html to /dir/ (off)"},
    {.name = "index",
     .metavar = "NAME",
     SITE,
     .list = LIST_INDEX,
     .set = set_index,
     .help = "a directory's index file, tried in order (repeatable;\n"
             "default index.html)"},
    {.name = "trailing-slash",
     .metavar = "MODE",
     SITE,
     FIELD(FIELD_INT, trailing_slash),
     .set = set_choice,
     .choices =
         (const struct option_choice[]){
             {"auto", SLASH_AUTO}, {"always", SLASH_ALWAYS}, {"never", SLASH_NEVER}, {NULL, 0}},
     .wants = "auto, always or never",
     .help = "auto (301 /dir to /dir/), always (also /x to /x/ for a\n"
             "clean URL) or never (301 /dir/ to /dir, which serves the\n"
             "index)"},
    {.name = "cache-size",
     .metavar = "BYTES",
     PROCESS,
     FIELD(FIELD_SIZE, cache_size),
     BYTES(0, SIZE_MAX, " like 64M"),
     .help = "file contents each worker keeps in memory (64M; K/M/G)"},
    {.name = "cache-max-file",
     .metavar = "BYTES",
     PROCESS,
     FIELD(FIELD_SIZE, cache_max_file),
     BYTES(0, SIZE_MAX, " like 256K"),
     .help = "largest file kept in memory (256K; K/M/G)"},
    {.name = "file-send",
     .metavar = "MODE",
     PROCESS,
     FIELD(FIELD_INT, file_send),
     .set = set_choice,
     .choices = (const struct option_choice[]){{"splice", FILE_SEND_SPLICE},
                                               {"sendfile", FILE_SEND_SENDFILE},
                                               {NULL, 0}},
     .wants = "splice or sendfile",
     .help = "how io_uring sends larger files: splice (file -> pipe ->\n"
             "socket as io_uring operations: the file is read off the loop)\n"
             "or sendfile (from the loop); default splice. epoll: sendfile"},
    {.name = "splice-pipes",
     .metavar = "N",
     PROCESS,
     FIELD(FIELD_UNSIGNED, splice_pipes),
     .set = set_number,
     .min = 1,
     .max = 4096,
     .wants = "",
     .help = "most pipes per worker, for io_uring's --file-send splice and\n"
             "for HTTP/2 DATA frames of files on both engines (64; fewer\n"
             "or smaller when the pipe and fd limits say so, see -v); more\n"
             "concurrent downloads wait their turn, none fails"},
    {.name = "send-lowat",
     .metavar = "BYTES",
     PROCESS,
     FIELD(FIELD_SIZE, send_lowat),
     BYTES(0, INT_MAX, " like 128K (0 for none)"),
     .help = "most unsent bytes queued on a socket (TCP_NOTSENT_LOWAT,\n"
             "128K; K/M/G); 0 leaves the kernel's unlimited default"},
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
     .set = set_choice,
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
    {.name = "compress",
     .metavar = "on|off",
     SITE,
     FIELD(FIELD_BOOL, compress),
     .set = set_onoff,
     .help = "compress text on the fly with br, zstd or gzip, once per\n"
             "file version, kept in memory (default on)"},
    {.name = "compress-types",
     .metavar = "LIST",
     SITE,
     .set = set_compress_types,
     .help = "media types compressed (text/*, JavaScript, JSON, XML, SVG,\n"
             "wasm, ttf/otf fonts: '+xml', 'text/*' forms allowed)"},
    {.name = "compress-min",
     .metavar = "BYTES",
     SITE,
     FIELD(FIELD_SIZE, compress_min),
     BYTES(0, SIZE_MAX, " like 1K"),
     .help = "smaller bodies are sent as they are (1K)"},
    {.name = "compress-max",
     .metavar = "BYTES",
     SITE,
     FIELD(FIELD_SIZE, compress_max),
     BYTES(0, SIZE_MAX, " like 16M"),
     .help = "larger bodies are sent as they are (16M)"},
    /* Compression itself may be turned on or off by a reload (a worker makes its compressor
     * when it adopts a configuration that compresses); the cache its variants are kept in is
     * sized at start. */
    {.name = "compress-cache",
     .metavar = "BYTES",
     PROCESS,
     FIELD(FIELD_SIZE, compress_cache),
     BYTES(0, SIZE_MAX, " like 32M"),
     .help = "compressed variants each worker keeps, LRU (32M)"},
    {.name = "dictionary",
     .metavar = "PATTERN",
     SITE,
     .list = LIST_DICTIONARIES,
     .set = set_dictionary,
     .help = "URL paths ('*' wildcards, e.g. '/assets/*.js') whose files\n"
             "are offered as compression dictionaries (RFC 9842) and\n"
             "sent as dcz deltas against an older one (repeatable, 8)"},
    {.name = "http2",
     .metavar = "on|off",
     PROCESS,
     FIELD(FIELD_BOOL, http2),
     .set = set_onoff,
     .help = "HTTP/2 on the cleartext port for clients that open with its\n"
             "preface (prior knowledge, h2c) and by ALPN over TLS (on)"},
    {.name = "http3",
     .metavar = "on|off",
     PROCESS,
     FIELD(FIELD_BOOL, http3),
     .set = set_onoff,
     .help = "HTTP/3 (QUIC) on UDP at the --tls-port number, announced\n"
             "by Alt-Svc on HTTPS responses (on with --tls-port)"},
    {.name = "http3-max-conns",
     .metavar = "N",
     PROCESS,
     FIELD(FIELD_UNSIGNED, http3_max_conns),
     .set = set_number,
     .min = 1,
     .max = 1u << 20,
     .wants = "",
     .help = "QUIC connections per worker (1024); past half of it new\n"
             "clients must prove their address first (Retry)"},
    {.name = "http3-gso",
     .metavar = "on|off",
     PROCESS,
     FIELD(FIELD_BOOL, http3_gso),
     .set = set_onoff,
     .help = "send HTTP/3's datagrams in batches the kernel splits (UDP\n"
             "GSO) where it can (on); off: one sendmsg per datagram"},
    {.name = "http3-gro",
     .metavar = "on|off",
     PROCESS,
     FIELD(FIELD_BOOL, http3_gro),
     .set = set_onoff,
     .help = "receive a client's datagrams in trains the kernel coalesced\n"
             "(UDP GRO) where it can (on); off: one datagram per buffer"},
    /* Issue 42: the default is the measured one (README, HTTP/3; bench/pageload). */
    {.name = "quic-cc",
     .metavar = "NAME",
     PROCESS,
     FIELD(FIELD_INT, quic_cc),
     .set = set_choice,
     .choices = (const struct option_choice[]){{"bbr", CONFIG_QUIC_CC_BBR},
                                               {"bbr2", CONFIG_QUIC_CC_BBR2},
                                               {"cubic", CONFIG_QUIC_CC_CUBIC},
                                               {"reno", CONFIG_QUIC_CC_RENO},
                                               {NULL, 0}},
     .wants = "bbr, bbr2, cubic or reno",
     .help = "HTTP/3's congestion controller (ngtcp2's): bbr, bbr2, cubic\n"
             "or reno (cubic); every one is paced"},
    {.name = "tcp-cc",
     .metavar = "NAME",
     PROCESS,
     FIELD(FIELD_STRING, tcp_cc),
     .set = set_tcp_cc,
     .help = "TCP congestion control of the listeners' connections, one\n"
             "of the kernel's (tcp_available_congestion_control; default:\n"
             "the host's net.ipv4.tcp_congestion_control)"},
    {.name = "tls-port",
     .metavar = "PORT",
     PROCESS,
     FIELD(FIELD_PORT, tls_port),
     .same = same_tls_port,
     .set = set_tls_port,
     .max = 65535,
     .wants = "",
     .help = "also serve HTTPS on PORT (same --bind address; 0 picks one)"},
    /* A reload re-reads the pairs the new file names (server.c builds their contexts). */
    {.name = "tls-cert",
     .names_file = OPTFILE_WHOLE,
     .metavar = "FILE",
     SITE,
     .list = LIST_TLS_CERTS,
     .set = set_tls_cert,
     .help = "PEM certificate chain for --tls-port; repeat --tls-cert and\n"
             "--tls-key for more pairs, chosen by SNI (the first is the\n"
             "default; ECDSA and RSA for the same names may both be given)"},
    {.name = "tls-key",
     .names_file = OPTFILE_WHOLE,
     .metavar = "FILE",
     SITE,
     .set = set_tls_key,
     .help = "PEM private key of the --tls-cert before it"},
    {.name = "tls-min",
     .metavar = "VERSION",
     PROCESS,
     FIELD(FIELD_INT, tls_min),
     .set = set_choice,
     .choices = (const struct option_choice[]){{"1.2", 12}, {"1.3", 13}, {NULL, 0}},
     .wants = "1.2 or 1.3",
     .help = "1.2 (default: TLS 1.2 and 1.3, Mozilla's intermediate\n"
             "profile) or 1.3 (TLS 1.3 only, Mozilla's modern profile)"},
    /* The files (the start's list) are read again at every reload with the pairs: a fleet
     * rotates keys by rewriting them, without a restart. */
    {.name = "ticket-key-file",
     .metavar = "FILE",
     PROCESS,
     .list = LIST_TICKET_KEYS,
     .same = same_ticket_keys,
     .names_file = OPTFILE_WHOLE,
     .set = set_ticket_key_file,
     .help = "TLS session-ticket key (48 or 80 bytes, nginx's format:\n"
             "openssl rand 80 > FILE), shared by every instance behind a\n"
             "balancer so a session resumes on any; repeatable: the first\n"
             "encrypts, the others still decrypt (their bytes re-read on\n"
             "reload)"},
    {.name = "tls-groups",
     .metavar = "LIST",
     PROCESS,
     FIELD(FIELD_STRING, tls_groups),
     .set = set_string,
     .help = "key exchange groups, most preferred first (default:\n"
             "X25519MLKEM768 where OpenSSL has it, X25519:P-256:P-384)"},
    /* As --ticket-key-file: the start's list, each file's bytes re-read on every reload. */
    {.name = "quic-secret-file",
     .metavar = "FILE",
     PROCESS,
     .list = LIST_QUIC_SECRETS,
     .same = same_quic_secrets,
     .names_file = OPTFILE_WHOLE,
     .set = set_quic_secret_file,
     .help = "HTTP/3's secret for Retry tokens and stateless resets (at\n"
             "least 32 bytes: openssl rand 32 > FILE), shared by every\n"
             "instance behind a balancer; repeatable (up to 4): the first\n"
             "makes tokens, all are accepted (their bytes re-read on reload)"},
    {.name = "quic-server-id",
     .metavar = "[ROTATION:]HEX",
     PROCESS,
     FIELD(FIELD_STRING, quic_server_id),
     .set = set_quic_server_id,
     .help = "this instance's server ID (1-15 bytes in hex; AWS NLB's:\n"
             "8, 0x and 16 digits) in every QUIC connection ID it issues,\n"
             "QUIC-LB's plaintext layout, so an L4 balancer routes a\n"
             "client that moved; ROTATION: the config rotation bits, 0-6"},
    {.name = "ktls",
     .metavar = "on|off",
     PROCESS,
     FIELD(FIELD_BOOL, ktls),
     .set = set_onoff,
     .help = "after the handshake, the kernel encrypts responses (files\n"
             "leave zero-copy) where it has the tls module (on)"},
    {.name = "tls-seal",
     .metavar = "on|off",
     PROCESS,
     FIELD(FIELD_BOOL, tls_seal),
     .set = set_onoff,
     .help = "without kernel TLS, ringhttpd seals the records itself\n"
             "with the keys OpenSSL hands over, from the plaintext where\n"
             "it lies (on); off: OpenSSL's SSL_write seals them"},
    {.name = "hsts",
     .metavar = "SECONDS",
     SITE,
     .set = set_hsts,
     .help = "send Strict-Transport-Security: max-age=SECONDS on HTTPS\n"
             "responses"},
    {.name = "redirect-https",
     SITE,
     FIELD(FIELD_BOOL, redirect_https),
     .set = set_flag,
     .help = "the cleartext port answers every request with 308 to the\n"
             "same URL over https: (at --tls-port)"},
    {.name = "acme-email",
     .metavar = "ADDR",
     PROCESS,
     FIELD(FIELD_STRING, acme_email),
     .set = set_acme_email,
     .help = "automatic HTTPS: get and renew certificates by ACME\n"
             "(RFC 8555) for every non-wildcard host of every site, or\n"
             "--acme-domain names; ADDR is the account's contact"},
    {.name = "acme-domain",
     .metavar = "NAME",
     PROCESS,
     .list = LIST_ACME_DOMAINS,
     .same = same_acme_domains,
     .set = set_acme_domain,
     .help = "a name to get a certificate for (repeatable; all in one)"},
    {.name = "acme-ca",
     .metavar = "URL",
     PROCESS,
     FIELD(FIELD_STRING, acme_ca),
     .set = set_acme_ca,
     .help = "the ACME directory (Let's Encrypt's production one)"},
    {.name = "acme-ca-root",
     .names_file = OPTFILE_WHOLE,
     .metavar = "FILE",
     PROCESS,
     FIELD(FIELD_STRING, acme_ca_root),
     .set = set_acme_ca_root,
     .help = "trust this PEM for the ACME server's HTTPS (test CAs)"},
    {.name = "acme-state",
     .metavar = "DIR",
     PROCESS,
     FIELD(FIELD_STRING, acme_state),
     .set = set_acme_state,
     .help = "account key and certificates (/var/lib/ringhttpd/acme)"},
    {.name = "acme-challenge",
     .metavar = "KIND",
     PROCESS,
     FIELD(FIELD_INT, acme_challenge),
     .set = set_choice,
     .choices =
         (const struct option_choice[]){{"auto", 0}, {"http-01", 1}, {"tls-alpn-01", 2}, {NULL, 0}},
     .wants = "auto, http-01 or tls-alpn-01",
     .help = "auto, http-01 or tls-alpn-01 (auto: what the CA offers)"},
    {.name = "acme-ask",
     .metavar = "URL",
     PROCESS,
     FIELD(FIELD_STRING, acme_ask),
     .set = set_acme_ask,
     .help = "certificates on demand (a site's acme: on-demand): a name\n"
             "found in a handshake is approved when URL?domain=NAME\n"
             "answers 2xx (answers kept 10 minutes)"},
    {.name = "reuse-port",
     PROCESS,
     FIELD(FIELD_BOOL, reuse_port),
     .set = set_flag,
     .help = "share the port with the ringhttpd already serving it (for\n"
             "a zero-downtime restart: start the new one with this\n"
             "option, then SIGTERM the old); without it a port in use\n"
             "is an error"},
    {.name = "user",
     .metavar = "USER[:GROUP]",
     PROCESS,
     FIELD(FIELD_STRING, user),
     .set = set_user,
     .help = "started as root: bind, then serve as USER (and GROUP, else\n"
             "USER's group), supplementary groups cleared"},
    {.name = "no-landlock",
     PROCESS,
     FIELD(FIELD_BOOL, landlock),
     .invert = true,
     .set = set_flag,
     .help = "do not confine file access with Landlock (on by default\n"
             "where the kernel has it: reads below DOCROOT's directory)"},
    {.name = "config",
     .metavar = "FILE",
     PROCESS,
     .first = true,
     FIELD(FIELD_STRING, config_file),
     .set = set_config,
     .help = "read options and sites from a YAML file whose keys are the\n"
             "long options' names, plus 'root' and 'sites'; the command\n"
             "line overrides it; SIGHUP re-reads it"},
    {.name = "check-config",
     .metavar = "FILE",
     .scope = SCOPE_ARGV,
     .first = true,
     .set = set_config,
     .help = "check a configuration file and exit: 0, or 1 with each\n"
             "error's file, line and key"},
    {.name = "health",
     .metavar = "PATH",
     PROCESS,
     FIELD(FIELD_STRING, health),
     .set = set_health,
     .help = "answer GET PATH with 200 ok (503 during --drain-delay),\n"
             "not logged, never a file"},
    {.name = "drain-delay",
     .metavar = "S",
     PROCESS,
     FIELD(FIELD_UNSIGNED, drain_delay),
     .set = set_number,
     .max = 3600,
     .wants = " seconds",
     .help = "on SIGTERM, keep the listeners open S seconds more, the\n"
             "health path answering 503 (0)"},
    {.name = "canonical-host",
     .metavar = "NAME",
     SITE,
     .set = set_host,
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
     .set = set_flag,
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
    {.name = "limit-conn",
     .metavar = "N",
     .scope = SCOPE_PROCESS,
     .reload = true, /* the workers' guard_configure; steering goes on with it */
     FIELD(FIELD_UNSIGNED, limit_conn),
     .set = set_number,
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
    {.name = "verbose",
     .short_name = 'v',
     PROCESS,
     FIELD(FIELD_BOOL, verbose),
     .set = set_flag,
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
     .set = set_string},
    {.name = "hosts",
     .metavar = "NAME",
     .scope = SCOPE_SITE_OWN,
     .reload = true,
     .file_only = true,
     .list = LIST_HOSTS,
     .set = set_host},
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
     .set = set_flag},
};

#define NOPTIONS (sizeof(table) / sizeof(table[0]))
_Static_assert(NOPTIONS <= CONFIG_MAX_OPTIONS, "struct config's key_lines needs more rows");

const struct option_info *options_table(size_t *n)
{
    *n = NOPTIONS;
    return table;
}

const struct option_info *options_find(const char *name)
{
    for (size_t i = 0; i < NOPTIONS; i++)
        if (strcmp(table[i].name, name) == 0)
            return &table[i];
    return NULL;
}

int options_line(const struct config *cfg, const char *name)
{
    const struct option_info *o = options_find(name);
    return o && cfg->key_lines[o - table] > 0 ? cfg->key_lines[o - table] : 0;
}

bool options_given(const struct config *cfg, const char *name)
{
    const struct option_info *o = options_find(name);
    return o && cfg->key_lines[o - table] != 0;
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
    for (size_t i = 0; i < NOPTIONS; i++) {
        if (in_file ? table[i].scope == SCOPE_ARGV : table[i].file_only)
            continue;
        size_t d = distance(name, table[i].name);
        if (d < best_d) {
            best_d = d;
            best = table[i].name;
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
    for (size_t i = 0; i < NOPTIONS; i++) {
        const struct option_info *o = &table[i];
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
        cfg->key_lines[o - table] = cfg->src->file ? cfg->src->line : -1;
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
                    (o->names_file != OPTFILE_WHOLE || o->set != set_access_log ||
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
    const void *x = cfield(a, o), *y = cfield(b, o);
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
        return same_string(*(const char *const *)x, *(const char *const *)y);
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
    for (size_t i = 0; i < NOPTIONS; i++) {
        const struct option_info *o = &table[i];
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
