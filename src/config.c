/* Option parsing. Every rejected value gets one line naming the option, and exit status 2. */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/accept.h"
#include "core/http1.h"
#include "core/path.h"
#include "core/token.h"
#include "cfgfile.h"

static const char usage_text[] =
    "Usage: ringhttpd [options] [DOCROOT]\n"
    "Serve the files below DOCROOT (default: the current directory) over HTTP/1.1.\n"
    "\n"
    "  -p, --port PORT            TCP port to listen on (default 8080; 0 picks a free one)\n"
    "  -b, --bind ADDR            address to listen on (default 0.0.0.0; IPv6 literals too)\n"
    "  -t, --threads N            worker threads, one ring or epoll set each (default: CPUs)\n"
    "      --engine NAME          auto, uring or epoll (default auto: io_uring when the\n"
    "                             kernel allows it, epoll otherwise)\n"
    "      --keepalive-timeout S  close idle keep-alive connections after S seconds (15)\n"
    "      --header-timeout S     close connections whose request head takes longer (10)\n"
    "      --drain-timeout S      on SIGTERM, wait at most S seconds for responses (10)\n"
    "      --max-conns N          connections per worker (16384); when all are taken, idle\n"
    "                             keep-alive connections are closed for new ones, oldest first\n"
    "      --head-memory BYTES    input buffers of partial request heads per worker (32M;\n"
    "                             K/M/G, at least 64K); past it the oldest partial heads close\n"
    "      --autoindex            list directories that have no index.html\n"
    "      --autoindex-limit N    entries a listing shows, the rest counted in a note (10000)\n"
    "      --cache-control VALUE  Cache-Control header for successful responses\n"
    "      --header 'NAME: VALUE' extra header for successful responses (repeatable)\n"
    "      --mime-types FILE      extra types in /etc/mime.types format\n"
    "      --error-page CODE=PATH serve PATH (below DOCROOT) as the body of CODE errors\n"
    "      --fallback PATH        serve PATH with 200 when a file is missing and the client\n"
    "                             accepts text/html (single-page applications)\n"
    "      --cache-size BYTES     file contents each worker keeps in memory (64M; K/M/G)\n"
    "      --cache-max-file BYTES largest file kept in memory (256K; K/M/G)\n"
    "      --file-send MODE       how io_uring sends larger files: splice (file -> pipe ->\n"
    "                             socket as io_uring operations: the file is read off the loop)\n"
    "                             or sendfile (from the loop); default splice. epoll: sendfile\n"
    "      --splice-pipes N       most pipes per worker, for io_uring's --file-send splice and\n"
    "                             for HTTP/2 DATA frames of files on both engines (64; fewer\n"
    "                             or smaller when the pipe and fd limits say so, see -v); more\n"
    "                             concurrent downloads wait their turn, none fails\n"
    "      --send-lowat BYTES     most unsent bytes queued on a socket (TCP_NOTSENT_LOWAT,\n"
    "                             128K; K/M/G); 0 leaves the kernel's unlimited default\n"
    "      --access-log PATH      where to log one line per request: a file, - for standard\n"
    "                             output (the default), or off; SIGUSR1 reopens the file\n"
    "      --log-format FORMAT    combined (the default; Apache/nginx), common or json\n"
    "      --real-ip-from CIDR    a trusted proxy: log the client from its X-Forwarded-For\n"
    "                             (rightmost untrusted address; repeatable, up to 32)\n"
    "      --metrics ADDR:PORT    serve Prometheus metrics at http://ADDR:PORT/metrics on a\n"
    "                             listener of their own (off by default)\n"
    "      --compress on|off      compress text on the fly with br, zstd or gzip, once per\n"
    "                             file version, kept in memory (default on)\n"
    "      --compress-types LIST  media types compressed (text/*, JavaScript, JSON, XML, SVG,\n"
    "                             wasm, ttf/otf fonts: '+xml', 'text/*' forms allowed)\n"
    "      --compress-min BYTES   smaller bodies are sent as they are (1K)\n"
    "      --compress-max BYTES   larger bodies are sent as they are (16M)\n"
    "      --compress-cache BYTES compressed variants each worker keeps, LRU (32M)\n"
    "      --dictionary PATTERN   URL paths ('*' wildcards, e.g. '/assets/*.js') whose files\n"
    "                             are offered as compression dictionaries (RFC 9842) and\n"
    "                             sent as dcz deltas against an older one (repeatable, 8)\n"
    "      --http2 on|off         HTTP/2 on the cleartext port for clients that open with its\n"
    "                             preface (prior knowledge, h2c) and by ALPN over TLS (on)\n"
    "      --tls-port PORT        also serve HTTPS on PORT (same --bind address; 0 picks one)\n"
    "      --tls-cert FILE        PEM certificate chain for --tls-port; repeat --tls-cert and\n"
    "                             --tls-key for more pairs, chosen by SNI (the first is the\n"
    "                             default; ECDSA and RSA for the same names may both be given)\n"
    "      --tls-key FILE         PEM private key of the --tls-cert before it\n"
    "      --tls-min VERSION      1.2 (default: TLS 1.2 and 1.3, Mozilla's intermediate\n"
    "                             profile) or 1.3 (TLS 1.3 only, Mozilla's modern profile)\n"
    "      --ktls on|off          after the handshake, the kernel encrypts responses (files\n"
    "                             leave zero-copy) where it has the tls module (on)\n"
    "      --tls-seal on|off      without kernel TLS, ringhttpd seals the records itself\n"
    "                             with the keys OpenSSL hands over, from the plaintext where\n"
    "                             it lies (on); off: OpenSSL's SSL_write seals them\n"
    "      --hsts SECONDS         send Strict-Transport-Security: max-age=SECONDS on HTTPS\n"
    "                             responses\n"
    "      --redirect-https       the cleartext port answers every request with 308 to the\n"
    "                             same URL over https: (at --tls-port)\n"
    "      --reuse-port           share the port with the ringhttpd already serving it (for\n"
    "                             a zero-downtime restart: start the new one with this\n"
    "                             option, then SIGTERM the old); without it a port in use\n"
    "                             is an error\n"
    "      --user USER[:GROUP]    started as root: bind, then serve as USER (and GROUP, else\n"
    "                             USER's group), supplementary groups cleared\n"
    "      --no-landlock          do not confine file access with Landlock (on by default\n"
    "                             where the kernel has it: reads below DOCROOT's directory)\n"
    "      --config FILE          read options and sites from a YAML file whose keys are the\n"
    "                             long options' names, plus 'root' and 'sites'; the command\n"
    "                             line overrides it; SIGHUP re-reads it\n"
    "      --check-config FILE    check a configuration file and exit: 0, or 1 with each\n"
    "                             error's file, line and key\n"
    "      --health PATH          answer GET PATH with 200 ok (503 during --drain-delay),\n"
    "                             not logged, never a file\n"
    "      --drain-delay S        on SIGTERM, keep the listeners open S seconds more, the\n"
    "                             health path answering 503 (0)\n"
    "      --canonical-host NAME  redirect (301) requests for the site's other names to NAME\n"
    "      --redirect 'FROM TO [STATUS]'  redirect FROM (a path; '*' at its end: a prefix)\n"
    "                             to TO with 301 (or 302, 307, 308); a TO ending in '*' gets\n"
    "                             the rest of the path and the query (repeatable)\n"
    "      --basic-auth PREFIX=FILE  paths starting with PREFIX need a user and password of\n"
    "                             the htpasswd FILE (bcrypt, $5$, $6$; repeatable)\n"
    "      --auth-realm REALM     the realm 401 answers name (default \"restricted\")\n"
    "      --cache-control-for 'PATTERN VALUE'  Cache-Control VALUE for URL paths matching\n"
    "                             PATTERN ('*' wildcards; repeatable, first match wins)\n"
    "      --limit-conn N         at most N open connections per client address (an IPv6\n"
    "                             client's /64); more are closed at accept (limit_conn)\n"
    "      --limit-req RATE[/s|/m][,burst=B][,nodelay]  requests per client address; past\n"
    "                             the burst 429 with Retry-After (limit_req)\n"
    "      --limit-req-for 'PATTERN RATE...'  the same for URL paths matching PATTERN\n"
    "                             (repeatable, first match wins; --limit-req applies too)\n"
    "      --limit-rate BYTES[/s] a response's send rate per connection (limit_rate)\n"
    "      --limit-rate-after BYTES  sent at full speed before --limit-rate (0)\n"
    "      --cors 'PATTERN ORIGIN|*'  scripts of ORIGIN (or any) may read URL paths matching\n"
    "                             PATTERN: preflights answered, Access-Control-Allow-Origin\n"
    "                             added (repeatable)\n"
    "      --early-hints 'PATTERN LINK'  a 103 Early Hints with Link: LINK before the answer to\n"
    "                             a GET matching PATTERN, LINK on the answer too (repeatable)\n"
    "  -v, --verbose              print what the kernel offers at start: io_uring's setup\n"
    "                             mode, opcodes and features tried for real, and whether it\n"
    "                             has kernel TLS (the tls ULP); the pipes obtained; each\n"
    "                             compressed variant made\n"
    "  -h, --help                 print this help and exit\n"
    "      --version              print the version and exit\n";

enum {
    OPT_ENGINE = 256,
    OPT_KEEPALIVE,
    OPT_HEADER_TIMEOUT,
    OPT_DRAIN,
    OPT_MAX_CONNS,
    OPT_HEAD_MEMORY,
    OPT_AUTOINDEX,
    OPT_AUTOINDEX_LIMIT,
    OPT_CACHE_CONTROL,
    OPT_HEADER,
    OPT_MIME_TYPES,
    OPT_ERROR_PAGE,
    OPT_FALLBACK,
    OPT_CACHE_SIZE,
    OPT_CACHE_MAX_FILE,
    OPT_FILE_SEND,
    OPT_SPLICE_PIPES,
    OPT_SEND_LOWAT,
    OPT_ACCESS_LOG,
    OPT_LOG_FORMAT,
    OPT_REAL_IP_FROM,
    OPT_METRICS,
    OPT_COMPRESS,
    OPT_COMPRESS_TYPES,
    OPT_COMPRESS_MIN,
    OPT_COMPRESS_MAX,
    OPT_COMPRESS_CACHE,
    OPT_DICTIONARY,
    OPT_HTTP2,
    OPT_TLS_PORT,
    OPT_TLS_CERT,
    OPT_TLS_KEY,
    OPT_TLS_MIN,
    OPT_KTLS,
    OPT_TLS_SEAL,
    OPT_HSTS,
    OPT_REDIRECT_HTTPS,
    OPT_REUSE_PORT,
    OPT_USER,
    OPT_NO_LANDLOCK,
    OPT_VERSION,
    /* sites (issue 19) */
    OPT_CONFIG,
    OPT_CHECK_CONFIG,
    OPT_HEALTH,
    OPT_DRAIN_DELAY,
    OPT_CANONICAL_HOST,
    OPT_REDIRECT,
    OPT_BASIC_AUTH,
    OPT_AUTH_REALM,
    OPT_CACHE_CONTROL_FOR,
    /* per-client limits and edge fields (issue 28) */
    OPT_LIMIT_CONN,
    OPT_LIMIT_REQ,
    OPT_LIMIT_REQ_FOR,
    OPT_LIMIT_RATE,
    OPT_LIMIT_RATE_AFTER,
    OPT_CORS,
    OPT_EARLY_HINTS,
    OPT_HOSTS,   /* file only: a site's names */
    OPT_DEFAULT, /* file only: the default site */
    OPT_ROOT,    /* file only: DOCROOT */
};

static const struct option long_options[] = {
    {"port", required_argument, NULL, 'p'},
    {"bind", required_argument, NULL, 'b'},
    {"threads", required_argument, NULL, 't'},
    {"engine", required_argument, NULL, OPT_ENGINE},
    {"keepalive-timeout", required_argument, NULL, OPT_KEEPALIVE},
    {"header-timeout", required_argument, NULL, OPT_HEADER_TIMEOUT},
    {"drain-timeout", required_argument, NULL, OPT_DRAIN},
    {"max-conns", required_argument, NULL, OPT_MAX_CONNS},
    {"head-memory", required_argument, NULL, OPT_HEAD_MEMORY},
    {"autoindex", no_argument, NULL, OPT_AUTOINDEX},
    {"autoindex-limit", required_argument, NULL, OPT_AUTOINDEX_LIMIT},
    {"cache-control", required_argument, NULL, OPT_CACHE_CONTROL},
    {"header", required_argument, NULL, OPT_HEADER},
    {"mime-types", required_argument, NULL, OPT_MIME_TYPES},
    {"error-page", required_argument, NULL, OPT_ERROR_PAGE},
    {"fallback", required_argument, NULL, OPT_FALLBACK},
    {"cache-size", required_argument, NULL, OPT_CACHE_SIZE},
    {"cache-max-file", required_argument, NULL, OPT_CACHE_MAX_FILE},
    {"file-send", required_argument, NULL, OPT_FILE_SEND},
    {"splice-pipes", required_argument, NULL, OPT_SPLICE_PIPES},
    {"send-lowat", required_argument, NULL, OPT_SEND_LOWAT},
    {"access-log", required_argument, NULL, OPT_ACCESS_LOG},
    {"log-format", required_argument, NULL, OPT_LOG_FORMAT},
    {"real-ip-from", required_argument, NULL, OPT_REAL_IP_FROM},
    {"metrics", required_argument, NULL, OPT_METRICS},
    {"compress", required_argument, NULL, OPT_COMPRESS},
    {"compress-types", required_argument, NULL, OPT_COMPRESS_TYPES},
    {"compress-min", required_argument, NULL, OPT_COMPRESS_MIN},
    {"compress-max", required_argument, NULL, OPT_COMPRESS_MAX},
    {"compress-cache", required_argument, NULL, OPT_COMPRESS_CACHE},
    {"dictionary", required_argument, NULL, OPT_DICTIONARY},
    {"http2", required_argument, NULL, OPT_HTTP2},
    {"tls-port", required_argument, NULL, OPT_TLS_PORT},
    {"tls-cert", required_argument, NULL, OPT_TLS_CERT},
    {"tls-key", required_argument, NULL, OPT_TLS_KEY},
    {"tls-min", required_argument, NULL, OPT_TLS_MIN},
    {"ktls", required_argument, NULL, OPT_KTLS},
    {"tls-seal", required_argument, NULL, OPT_TLS_SEAL},
    {"hsts", required_argument, NULL, OPT_HSTS},
    {"redirect-https", no_argument, NULL, OPT_REDIRECT_HTTPS},
    {"reuse-port", no_argument, NULL, OPT_REUSE_PORT},
    {"user", required_argument, NULL, OPT_USER},
    {"no-landlock", no_argument, NULL, OPT_NO_LANDLOCK},
    {"verbose", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, OPT_VERSION},
    {"config", required_argument, NULL, OPT_CONFIG},
    {"check-config", required_argument, NULL, OPT_CHECK_CONFIG},
    {"health", required_argument, NULL, OPT_HEALTH},
    {"drain-delay", required_argument, NULL, OPT_DRAIN_DELAY},
    {"canonical-host", required_argument, NULL, OPT_CANONICAL_HOST},
    {"redirect", required_argument, NULL, OPT_REDIRECT},
    {"basic-auth", required_argument, NULL, OPT_BASIC_AUTH},
    {"auth-realm", required_argument, NULL, OPT_AUTH_REALM},
    {"cache-control-for", required_argument, NULL, OPT_CACHE_CONTROL_FOR},
    {"limit-conn", required_argument, NULL, OPT_LIMIT_CONN},
    {"limit-req", required_argument, NULL, OPT_LIMIT_REQ},
    {"limit-req-for", required_argument, NULL, OPT_LIMIT_REQ_FOR},
    {"limit-rate", required_argument, NULL, OPT_LIMIT_RATE},
    {"limit-rate-after", required_argument, NULL, OPT_LIMIT_RATE_AFTER},
    {"cors", required_argument, NULL, OPT_CORS},
    {"early-hints", required_argument, NULL, OPT_EARLY_HINTS},
    {NULL, 0, NULL, 0},
};

/* One line naming the option; from a configuration file also its file, line and key. */
__attribute__((format(printf, 2, 3))) static int config_error(const struct config *cfg,
                                                              const char *fmt, ...)
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
#define usage_error(...) config_error(cfg, __VA_ARGS__)

/* The long name of the option getopt_long returned as opt, for messages. */
static const char *option_name(int opt)
{
    const struct option *o = long_options;
    while (o->name && o->val != opt)
        o++;
    return o->name ? o->name : "?";
}

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

static bool valid_field_value(const char *v)
{
    for (; *v; v++)
        if ((unsigned char)*v < 0x20 && *v != '\t')
            return false;
    return true;
}

static int add_header_option(struct config *cfg, const char *arg)
{
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

static int add_error_page(struct config *cfg, const char *arg)
{
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

/* "ADDR:PORT", "[V6]:PORT"; the address is checked when the listener opens. */
static int metrics_option(struct config *cfg, char *arg)
{
    char *colon = strrchr(arg, ':');
    unsigned long port;
    if (!colon || colon == arg || parse_uint(colon + 1, 0, 65535, &port) != 0 ||
        (strchr(arg, ':') != colon && (arg[0] != '[' || colon[-1] != ']')))
        return usage_error("--metrics wants ADDR:PORT like 127.0.0.1:9100 or [::1]:9100, got "
                           "'%s'",
                           arg);
    *colon = '\0';
    cfg->metrics_bind = arg;
    cfg->metrics_port = (uint16_t)port;
    return 0;
}

/* The HTTPS options, one at a time: 0 or an exit status after one line. */
static int tls_option(struct config *cfg, int opt, const char *arg)
{
    unsigned long v;
    int n = cfg->num_tls_certs;
    switch (opt) {
    case OPT_TLS_PORT:
        if (parse_uint(arg, 0, 65535, &v) != 0)
            return usage_error("--tls-port wants 0..65535, got '%s'", arg);
        cfg->tls = true;
        cfg->tls_port = (uint16_t)v;
        return 0;
    case OPT_TLS_CERT:
        if (n > 0 && !cfg->tls_certs[n - 1].key)
            return usage_error("--tls-cert '%s': the --tls-cert before it has no --tls-key", arg);
        if (n == TLS_MAX_CERTS)
            return usage_error("--tls-cert: at most 16 pairs; '%s' is one more", arg);
        if (!*arg)
            return usage_error("--tls-cert wants a file%s", "");
        cfg->tls_certs[cfg->num_tls_certs++] = (struct tls_cert_files){.cert = arg};
        if (cfg->src && cfg->src->site)
            cfg->site_tls = true;
        return 0;
    case OPT_TLS_KEY:
        if (n == 0 || cfg->tls_certs[n - 1].key)
            return usage_error("--tls-key '%s' follows no --tls-cert of its own", arg);
        if (!*arg)
            return usage_error("--tls-key wants a file%s", "");
        cfg->tls_certs[n - 1].key = arg;
        cfg->tls_lines[n - 1] = cfg->src && cfg->src->file ? cfg->src->line : 0;
        return 0;
    case OPT_TLS_MIN:
        if (strcmp(arg, "1.2") == 0)
            cfg->tls_min = 12;
        else if (strcmp(arg, "1.3") == 0)
            cfg->tls_min = 13;
        else
            return usage_error("--tls-min wants 1.2 or 1.3, got '%s'", arg);
        return 0;
    case OPT_KTLS:
        if (strcmp(arg, "on") != 0 && strcmp(arg, "off") != 0)
            return usage_error("--ktls wants on or off, got '%s'", arg);
        cfg->ktls = strcmp(arg, "on") == 0;
        return 0;
    case OPT_TLS_SEAL:
        if (strcmp(arg, "on") != 0 && strcmp(arg, "off") != 0)
            return usage_error("--tls-seal wants on or off, got '%s'", arg);
        cfg->tls_seal = strcmp(arg, "on") == 0;
        return 0;
    case OPT_HSTS:
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
    default: /* OPT_REDIRECT_HTTPS */
        cfg->redirect_https = true;
        return 0;
    }
}

/* What the HTTPS options need of each other, once all are read. */
static int tls_check(struct config *cfg)
{
    int n = cfg->num_tls_certs;
    if (!cfg->tls_min)
        cfg->tls_min = 12;
    if (n > 0 && !cfg->tls_certs[n - 1].key)
        return usage_error("--tls-cert '%s' has no --tls-key after it", cfg->tls_certs[n - 1].cert);
    if (cfg->tls && n == 0 && !cfg->config_file) /* a file's sites may bring theirs */
        return usage_error("--tls-port needs a --tls-cert FILE --tls-key FILE pair%s", "");
    if (!cfg->tls && n > 0)
        return usage_error("--tls-cert '%s' needs --tls-port", cfg->tls_certs[0].cert);
    if (!cfg->tls && (cfg->hsts || cfg->redirect_https))
        return usage_error("%s needs --tls-port", cfg->hsts ? "--hsts" : "--redirect-https");
    if (cfg->tls && cfg->tls_port != 0 && cfg->tls_port == cfg->port)
        return usage_error("--tls-port must differ from --port (both are %s)", "the same");
    return 0;
}

int config_load_mime(const char *file, struct mime_table *out, char *why, size_t why_len)
{
    int rc = -EIO;
    FILE *f = fopen(file, "re");
    if (!f) {
        rc = -errno;
        snprintf(why, why_len, "--mime-types: cannot open '%s': %s", file, strerror(-rc));
        return rc;
    }
    char *text = NULL;
    size_t cap = 0, len = 0, n;
    do {
        if (cap - len < 65536) {
            char *p = realloc(text, cap += 65536);
            if (!p) {
                snprintf(why, why_len, "--mime-types: out of memory reading '%s'", file);
                rc = -ENOMEM;
                goto out;
            }
            text = p;
        }
        n = fread(text + len, 1, cap - len, f);
        len += n;
    } while (n > 0);
    if (ferror(f)) {
        snprintf(why, why_len, "--mime-types: cannot read '%s'", file);
        goto out;
    }
    size_t bad_line = 0;
    if ((rc = mime_table_parse(text, len, out, &bad_line)) != 0) {
        snprintf(why, why_len, "--mime-types: '%s' line %zu is not 'type ext...'", file, bad_line);
        goto out;
    }
    rc = 0;
out:
    free(text);
    fclose(f);
    return rc;
}

static int load_mime_types(struct config *cfg, const char *file)
{
    char why[512];
    if (config_load_mime(file, &cfg->mime_extra, why, sizeof(why)) != 0) {
        fprintf(stderr, "ringhttpd: %s\n", why);
        return 1;
    }
    return 0;
}

static int open_docroot(struct config *cfg)
{
    cfg->docroot_fd = open(cfg->docroot, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (cfg->docroot_fd < 0) {
        fprintf(stderr, "ringhttpd: cannot use document root '%s': %s\n", cfg->docroot,
                strerror(errno));
        return 1;
    }
    return 0;
}

/* ---- sites (issue 19): the per-site options and the configuration file's layers ---- */

/* Options a site of the configuration file may set; the rest are the process's. */
static bool per_site(int opt)
{
    switch (opt) {
    case OPT_AUTOINDEX:
    case OPT_AUTOINDEX_LIMIT:
    case OPT_CACHE_CONTROL:
    case OPT_HEADER:
    case OPT_MIME_TYPES:
    case OPT_ERROR_PAGE:
    case OPT_FALLBACK:
    case OPT_COMPRESS_TYPES:
    case OPT_COMPRESS_MIN:
    case OPT_COMPRESS_MAX:
    case OPT_DICTIONARY:
    case OPT_CANONICAL_HOST:
    case OPT_REDIRECT:
    case OPT_BASIC_AUTH:
    case OPT_AUTH_REALM:
    case OPT_CACHE_CONTROL_FOR:
    case OPT_LIMIT_REQ:
    case OPT_LIMIT_REQ_FOR:
    case OPT_LIMIT_RATE:
    case OPT_LIMIT_RATE_AFTER:
    case OPT_CORS:
    case OPT_EARLY_HINTS:
    case OPT_HOSTS:
    case OPT_DEFAULT:
    case OPT_ROOT:
    case OPT_COMPRESS:
    case OPT_TLS_CERT:
    case OPT_TLS_KEY:
    case OPT_HSTS:
    case OPT_REDIRECT_HTTPS:
        return true;
    default:
        return false;
    }
}

/* The first use of a repeatable option in a layer replaces the list an outer layer made (as
 * nginx's add_header does); later uses in the same layer add to it. */
static int layer_begin(struct config *cfg, int opt)
{
    struct config_src *src = cfg->src;
    int group = opt == OPT_CACHE_CONTROL ? OPT_HEADER : opt; /* one header block for both */
    if (src && src->site && !per_site(opt))
        return usage_error("'%s' is the process's, not a site's (set it at the top level)",
                           src->key);
    if (!src || group < OPT_ENGINE || group - OPT_ENGINE >= (int)sizeof(src->seen) ||
        src->seen[group - OPT_ENGINE])
        return 0;
    src->seen[group - OPT_ENGINE] = 1;
    switch (group) {
    case OPT_HEADER:
        free(cfg->extra_headers);
        cfg->extra_headers = NULL;
        cfg->extra_headers_len = 0;
        break;
    case OPT_ERROR_PAGE:
        for (int i = 0; i < cfg->num_error_pages; i++)
            free((char *)cfg->error_pages[i].path);
        cfg->num_error_pages = 0;
        break;
    case OPT_REAL_IP_FROM:
        cfg->num_real_ip = 0;
        break;
    case OPT_DICTIONARY:
        cfg->num_dictionaries = 0;
        break;
    case OPT_REDIRECT:
        cfg->num_redirects = 0;
        break;
    case OPT_BASIC_AUTH:
        cfg->num_auths = 0;
        break;
    case OPT_CACHE_CONTROL_FOR:
        cfg->num_cache_rules = 0;
        break;
    case OPT_LIMIT_REQ_FOR:
        cfg->num_limit_req_for = 0;
        break;
    case OPT_CORS:
        cfg->num_cors = 0;
        break;
    case OPT_EARLY_HINTS:
        cfg->num_hints = 0;
        break;
    case OPT_HOSTS:
        cfg->num_hosts = 0;
        break;
    case OPT_TLS_CERT:
        cfg->num_tls_certs = 0;
        break; /* a site's own pairs, not the process's */
    }
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

static int host_option(struct config *cfg, int opt, char *arg)
{
    for (char *p = arg; *p; p++) /* names compare case-insensitively: kept in lower case */
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p - 'A' + 'a');
    if (opt == OPT_CANONICAL_HOST) {
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

static int redirect_option(struct config *cfg, char *arg)
{
    char *f[3];
    unsigned long status = 301;
    char *copy = config_strdup(cfg, arg, strlen(arg)); /* the message needs the original */
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

static int auth_option(struct config *cfg, char *arg)
{
    char *eq = strchr(arg, '=');
    if (!eq || arg[0] != '/' || !eq[1])
        return usage_error("--basic-auth wants PREFIX=HTPASSWD like /staff/=/etc/ringhttpd/"
                           "staff.htpasswd, got '%s'",
                           arg);
    if (cfg->num_auths == CONFIG_MAX_RULES)
        return usage_error("--basic-auth: at most 32 a site, '%s' is one too many", arg);
    char *prefix = config_strdup(cfg, arg, (size_t)(eq - arg));
    if (!prefix)
        return usage_error("--basic-auth: out of memory for '%s'", arg);
    cfg->auths[cfg->num_auths++] = (struct config_auth){.prefix = prefix, .htpasswd = eq + 1};
    return 0;
}

static int cache_rule_option(struct config *cfg, char *arg)
{
    const char *sp = strpbrk(arg, " \t");
    const char *value = sp;
    while (value && (*value == ' ' || *value == '\t'))
        value++;
    if (!sp || !value || !*value || !valid_field_value(value))
        return usage_error("--cache-control-for wants 'PATTERN VALUE' like '/assets/* "
                           "max-age=31536000', got '%s'",
                           arg);
    char *pattern = config_strdup(cfg, arg, (size_t)(sp - arg));
    if (!pattern || !url_pattern_ok(pattern))
        return usage_error("--cache-control-for: PATTERN must be a URL path in '%s'", arg);
    if (cfg->num_cache_rules == CONFIG_MAX_RULES)
        return usage_error("--cache-control-for: at most 32 a site, '%s' is one too many", arg);
    cfg->cache_rules[cfg->num_cache_rules++] =
        (struct config_cache_rule){.pattern = pattern, .value = value};
    return 0;
}

/* --limit-req-for, --cors, --early-hints: a rule parsed from a copy of arg (the parsers split
 * it in place; argv is parsed again over a re-read file). */
static int edge_rule_option(struct config *cfg, int opt, const char *arg)
{
    char *copy = config_strdup(cfg, arg, strlen(arg));
    int *count = opt == OPT_CORS          ? &cfg->num_cors
                 : opt == OPT_EARLY_HINTS ? &cfg->num_hints
                                          : &cfg->num_limit_req_for;
    if (!copy)
        return usage_error("--%s: out of memory for '%s'", option_name(opt), arg);
    if (*count == CONFIG_MAX_RULES)
        return usage_error("--%s: at most 32 a site, '%s' is one too many", option_name(opt), arg);
    if (opt == OPT_CORS) {
        if (cors_rule_parse(copy, &cfg->cors[*count]) != 0)
            return usage_error("--cors wants 'PATTERN ORIGIN' like '/api/* https://app.example' "
                               "or '/fonts/* *', got '%s'",
                               arg);
    } else if (opt == OPT_EARLY_HINTS) {
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

/* --limit-rate, --limit-rate-after: a byte count (K, M, G), the first with an optional "/s". */
static int rate_bytes_option(struct config *cfg, int opt, const char *arg, uint64_t *out)
{
    char num[32];
    size_t n = strlen(arg), v;
    if (opt == OPT_LIMIT_RATE && n > 2 && strcmp(arg + n - 2, "/s") == 0)
        n -= 2;
    if (n == 0 || n >= sizeof(num))
        return usage_error("--%s wants a byte count like 1M, got '%s'", option_name(opt), arg);
    memcpy(num, arg, n);
    num[n] = '\0';
    if (parse_size(num, &v) != 0 || (opt == OPT_LIMIT_RATE && v == 0))
        return usage_error("--%s wants a byte count like 1M, got '%s'", option_name(opt), arg);
    *out = v;
    return 0;
}

/* Applies one option (getopt's code, its value) to cfg; raw names it as given, for messages.
 * The command line and the configuration file (config_set) both come through here. */
static int apply(struct config *cfg, int opt, char *optarg, const char *raw)
{
    unsigned long v;
    int rc;

    if ((rc = layer_begin(cfg, opt)) != 0)
        return rc;
    switch (opt) {
    case 'p':
        if (parse_uint(optarg, 0, 65535, &v) != 0)
            return usage_error("--port wants 0..65535, got '%s'", optarg);
        cfg->port = (uint16_t)v;
        break;
    case 'b':
        cfg->bind = optarg;
        break;
    case 't':
        if (parse_uint(optarg, 1, 1024, &v) != 0)
            return usage_error("--threads wants 1..1024, got '%s'", optarg);
        cfg->threads = (int)v;
        break;
    case OPT_ENGINE:
        if (strcmp(optarg, "auto") == 0)
            cfg->engine = ENGINE_AUTO;
        else if (strcmp(optarg, "uring") == 0 || strcmp(optarg, "io_uring") == 0)
            cfg->engine = ENGINE_URING;
        else if (strcmp(optarg, "epoll") == 0)
            cfg->engine = ENGINE_EPOLL;
        else
            return usage_error("--engine wants auto, uring or epoll, got '%s'", optarg);
        break;
    case OPT_KEEPALIVE:
    case OPT_HEADER_TIMEOUT:
    case OPT_DRAIN:
        if (parse_uint(optarg, 1, 86400, &v) != 0)
            return usage_error("--%s wants 1..86400 seconds, got '%s'", option_name(opt), optarg);
        if (opt == OPT_KEEPALIVE)
            cfg->keepalive_timeout = (unsigned)v;
        else if (opt == OPT_HEADER_TIMEOUT)
            cfg->header_timeout = (unsigned)v;
        else
            cfg->drain_timeout = (unsigned)v;
        break;
    case OPT_MAX_CONNS:
        if (parse_uint(optarg, 1, 1u << 20, &v) != 0)
            return usage_error("--max-conns wants 1..1048576, got '%s'", optarg);
        cfg->max_conns = (unsigned)v;
        break;
    case OPT_HEAD_MEMORY:
        if (parse_size(optarg, &cfg->head_memory) != 0 || cfg->head_memory < (64u << 10))
            return usage_error("--head-memory wants a byte count of at least 64K, got '%s'",
                               optarg);
        break;
    case OPT_AUTOINDEX:
        cfg->autoindex = true;
        break;
    case OPT_AUTOINDEX_LIMIT:
        if (parse_uint(optarg, 1, 1u << 24, &v) != 0)
            return usage_error("--autoindex-limit wants 1..16777216, got '%s'", optarg);
        cfg->autoindex_limit = (unsigned)v;
        break;
    case OPT_CACHE_CONTROL:
        if (!*optarg || !valid_field_value(optarg))
            return usage_error("--cache-control: invalid value '%s'", optarg);
        if (append_header(cfg, "Cache-Control", 13, optarg) != 0)
            return 2;
        break;
    case OPT_HEADER:
        if ((rc = add_header_option(cfg, optarg)) != 0)
            return rc;
        break;
    case OPT_MIME_TYPES:
        cfg->mime_file = optarg;
        break;
    case OPT_ERROR_PAGE:
        if ((rc = add_error_page(cfg, optarg)) != 0)
            return rc;
        break;
    case OPT_FALLBACK: {
        /* The last one wins; a site's replaces the copy it inherited from the top level. */
        rc = 0;
        const char *path = url_path_option(cfg, "--fallback", optarg, &rc);
        if (!path)
            return rc;
        free((char *)cfg->fallback);
        cfg->fallback = path;
        break;
    }
    case OPT_CACHE_SIZE:
        if (parse_size(optarg, &cfg->cache_size) != 0)
            return usage_error("--cache-size wants a byte count like 64M, got '%s'", optarg);
        break;
    case OPT_CACHE_MAX_FILE:
        if (parse_size(optarg, &cfg->cache_max_file) != 0)
            return usage_error("--cache-max-file wants a byte count like 256K, got '%s'", optarg);
        break;
    case OPT_FILE_SEND:
        if (strcmp(optarg, "splice") == 0)
            cfg->file_send = FILE_SEND_SPLICE;
        else if (strcmp(optarg, "sendfile") == 0)
            cfg->file_send = FILE_SEND_SENDFILE;
        else
            return usage_error("--file-send wants splice or sendfile, got '%s'", optarg);
        break;
    case OPT_SPLICE_PIPES:
        if (parse_uint(optarg, 1, 4096, &v) != 0)
            return usage_error("--splice-pipes wants 1..4096, got '%s'", optarg);
        cfg->splice_pipes = (unsigned)v;
        break;
    case OPT_SEND_LOWAT:
        if (parse_size(optarg, &cfg->send_lowat) != 0 || cfg->send_lowat > INT_MAX)
            return usage_error("--send-lowat wants a byte count like 128K (0 for none), "
                               "got '%s'",
                               optarg);
        break;
    case OPT_ACCESS_LOG:
        cfg->access_log = strcmp(optarg, "off") == 0 ? NULL : optarg;
        if (cfg->access_log && !*optarg)
            return usage_error("--access-log wants a file, - or off, got '%s'", optarg);
        break;
    case OPT_LOG_FORMAT:
        if (strcmp(optarg, "combined") == 0)
            cfg->log_format = LOG_COMBINED;
        else if (strcmp(optarg, "common") == 0)
            cfg->log_format = LOG_COMMON;
        else if (strcmp(optarg, "json") == 0)
            cfg->log_format = LOG_JSON;
        else
            return usage_error("--log-format wants combined, common or json, got '%s'", optarg);
        break;
    case OPT_REAL_IP_FROM:
        if (cfg->num_real_ip == CONFIG_MAX_REAL_IP)
            return usage_error("--real-ip-from: at most 32, '%s' is one too many", optarg);
        if (cidr_parse(optarg, &cfg->real_ip_from[cfg->num_real_ip]) != 0)
            return usage_error("--real-ip-from wants an address or CIDR like 10.0.0.0/8, "
                               "got '%s'",
                               optarg);
        cfg->num_real_ip++;
        break;
    case OPT_METRICS:
        if ((rc = metrics_option(cfg, optarg)) != 0)
            return rc;
        break;
    case OPT_COMPRESS:
        if (strcmp(optarg, "on") == 0)
            cfg->compress = true;
        else if (strcmp(optarg, "off") == 0)
            cfg->compress = false;
        else
            return usage_error("--compress wants on or off, got '%s'", optarg);
        break;
    case OPT_COMPRESS_TYPES:
        if (!valid_field_value(optarg))
            return usage_error("--compress-types: invalid list '%s'", optarg);
        cfg->compress_types = optarg;
        break;
    case OPT_COMPRESS_MIN:
    case OPT_COMPRESS_MAX:
    case OPT_COMPRESS_CACHE: {
        size_t n;
        if (parse_size(optarg, &n) != 0)
            return usage_error("--compress-min/-max/-cache want a byte count like 1K, "
                               "got '%s'",
                               optarg);
        if (opt == OPT_COMPRESS_MIN)
            cfg->compress_min = n;
        else if (opt == OPT_COMPRESS_MAX)
            cfg->compress_max = n;
        else
            cfg->compress_cache = n;
        break;
    }
    case OPT_DICTIONARY:
        if (optarg[0] != '/' || strchr(optarg, '"') || strchr(optarg, '\\') ||
            !valid_field_value(optarg))
            return usage_error("--dictionary wants a URL path pattern like /assets/*.js, "
                               "got '%s'",
                               optarg);
        /* the older releases are found by listing one directory */
        if (strchr(optarg, '*') && strchr(optarg, '*') < strrchr(optarg, '/'))
            return usage_error("--dictionary: '*' only in the last path segment, got '%s'", optarg);
        if (cfg->num_dictionaries == CONFIG_MAX_DICTIONARIES)
            return usage_error("--dictionary: at most 8 patterns; '%s' is one more", optarg);
        cfg->dictionaries[cfg->num_dictionaries++] = optarg;
        break;
    case OPT_HTTP2:
        if (strcmp(optarg, "on") == 0)
            cfg->http2 = true;
        else if (strcmp(optarg, "off") == 0)
            cfg->http2 = false;
        else
            return usage_error("--http2 wants on or off, got '%s'", optarg);
        break;
    case OPT_TLS_PORT:
    case OPT_TLS_CERT:
    case OPT_TLS_KEY:
    case OPT_TLS_MIN:
    case OPT_KTLS:
    case OPT_TLS_SEAL:
    case OPT_HSTS:
    case OPT_REDIRECT_HTTPS:
        return tls_option(cfg, opt, optarg);
    case OPT_REUSE_PORT:
        cfg->reuse_port = true;
        break;
    case OPT_USER:
        if (!*optarg || *optarg == ':')
            return usage_error("--user wants USER or USER:GROUP, got '%s'", optarg);
        cfg->user = optarg;
        break;
    case OPT_NO_LANDLOCK:
        cfg->landlock = false;
        break;
    /* sites (issue 19) */
    case OPT_CONFIG:
    case OPT_CHECK_CONFIG:
        if (cfg->src && cfg->src->file)
            return usage_error("a configuration file cannot name another ('%s')", optarg);
        cfg->config_file = optarg;
        cfg->check_only = opt == OPT_CHECK_CONFIG;
        break;
    case OPT_HEALTH:
        if (optarg[0] != '/' || strpbrk(optarg, "?#%\"") || !valid_field_value(optarg))
            return usage_error("--health wants a plain URL path like /healthz, got '%s'", optarg);
        cfg->health = optarg;
        break;
    case OPT_DRAIN_DELAY:
        if (parse_uint(optarg, 0, 3600, &v) != 0)
            return usage_error("--drain-delay wants 0..3600 seconds, got '%s'", optarg);
        cfg->drain_delay = (unsigned)v;
        break;
    case OPT_CANONICAL_HOST:
    case OPT_HOSTS:
        return host_option(cfg, opt, optarg);
    case OPT_REDIRECT:
        return redirect_option(cfg, optarg);
    case OPT_BASIC_AUTH:
        return auth_option(cfg, optarg);
    case OPT_AUTH_REALM:
        if (!*optarg || strpbrk(optarg, "\"\\") || !valid_field_value(optarg))
            return usage_error("--auth-realm: no quotes, backslashes or controls in '%s'", optarg);
        cfg->auth_realm = optarg;
        break;
    case OPT_CACHE_CONTROL_FOR:
        return cache_rule_option(cfg, optarg);
    case OPT_LIMIT_CONN:
        if (parse_uint(optarg, 1, 1000000, &v) != 0)
            return usage_error("--limit-conn wants 1..1000000 connections, got '%s'", optarg);
        cfg->limit_conn = (unsigned)v;
        break;
    case OPT_LIMIT_REQ:
        if (limit_rate_parse(optarg, &cfg->limit_req) != 0)
            return usage_error("--limit-req wants RATE[/s|/m][,burst=B][,nodelay] like "
                               "10r/s,burst=20, got '%s'",
                               optarg);
        cfg->limit_req_on = true;
        break;
    case OPT_LIMIT_REQ_FOR:
    case OPT_CORS:
    case OPT_EARLY_HINTS:
        return edge_rule_option(cfg, opt, optarg);
    case OPT_LIMIT_RATE:
        return rate_bytes_option(cfg, opt, optarg, &cfg->limit_rate);
    case OPT_LIMIT_RATE_AFTER:
        return rate_bytes_option(cfg, opt, optarg, &cfg->limit_rate_after);
    case OPT_DEFAULT:
        cfg->is_default = true;
        break;
    case OPT_ROOT:
        cfg->docroot = optarg;
        break;
    case 'v':
        cfg->verbose = true;
        break;
    case 'h':
        fputs(usage_text, stdout);
        return CONFIG_DONE;
    case OPT_VERSION:
        printf("ringhttpd %s\n", RINGHTTPD_VERSION);
        return CONFIG_DONE;
    case ':':
        return usage_error("option '%s' needs a value", raw);
    default:
        return usage_error("unknown option '%s'", raw);
    }
    return 0;
}

void config_init(struct config *cfg)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    *cfg = (struct config){
        .docroot = ".",
        .docroot_fd = -1,
        .bind = "0.0.0.0",
        .port = 8080,
        .threads = cpus > 0 ? (int)cpus : 1,
        .engine = ENGINE_AUTO,
        .keepalive_timeout = 15,
        .header_timeout = 10,
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
        .ktls = true,
        .tls_seal = true,
        .landlock = true,
        .auth_realm = "restricted",
    };
}

/* Applies the command line: with first_pass only --config/--check-config (the file is read
 * before the rest, which overrides it), -h and --version. */
static int apply_argv(struct config *cfg, int argc, char **argv, bool first_pass)
{
    struct config_src src = {0};
    int opt, rc;
    cfg->src = &src;
    opterr = 0;
    optind = 0; /* glibc: a full restart of the scan */
    while ((opt = getopt_long(argc, argv, ":p:b:t:vh", long_options, NULL)) != -1) {
        bool early =
            opt == OPT_CONFIG || opt == OPT_CHECK_CONFIG || opt == 'h' || opt == OPT_VERSION;
        if (first_pass != early)
            continue;
        if ((rc = apply(cfg, opt, optarg, argv[optind - 1])) != 0)
            goto out;
    }
    rc = 0;
    if (!first_pass && optind < argc)
        cfg->docroot = argv[optind++];
    if (!first_pass && optind < argc)
        rc = usage_error("one DOCROOT only; unexpected '%s'", argv[optind]);
out:
    cfg->src = NULL;
    return rc;
}

/* A site's own tls-cert/tls-key pairs join the process's set (issue 19), tagged with the site's
 * names so that SNI picks them by those names; the process's pairs stay first (the first is the
 * default for no or an unknown SNI name), then the default site's, so that without a process
 * pair the default certificate is the default site's (else the first site's with a pair). */
static int tls_sites(struct config *cfg)
{
    int dflt = 0;
    for (int i = 0; i < cfg->num_sites; i++)
        if (cfg->sites[i].is_default)
            dflt = i;
    for (int n = 0; n < cfg->num_sites; n++) {
        int i = n == 0 ? dflt : n <= dflt ? n - 1 : n; /* dflt first, then the others in order */
        struct config *site = &cfg->sites[i];
        const char *file = cfg->config_file;
        if (!cfg->tls && (site->hsts || site->redirect_https)) {
            fprintf(stderr, "ringhttpd: %s:%d: %s: needs tls-port at the top level\n", file,
                    site->line, site->hsts ? "hsts" : "redirect-https");
            return 2;
        }
        if (!site->site_tls)
            continue;
        if (site->num_tls_certs && !site->tls_certs[site->num_tls_certs - 1].key) {
            fprintf(stderr, "ringhttpd: %s:%d: tls-cert: '%s' has no tls-key after it\n", file,
                    site->line, site->tls_certs[site->num_tls_certs - 1].cert);
            return 2;
        }
        if (!cfg->tls) {
            fprintf(stderr,
                    "ringhttpd: %s:%d: tls-cert: a site's pair needs tls-port at the top "
                    "level\n",
                    file, site->line);
            return 2;
        }
        for (int k = 0; k < site->num_tls_certs; k++) {
            if (cfg->num_tls_certs == TLS_MAX_CERTS) {
                fprintf(stderr, "ringhttpd: %s:%d: tls-cert: at most %d pairs in all\n", file,
                        site->line, TLS_MAX_CERTS);
                return 2;
            }
            site->tls_certs[k].hosts = site->hosts;
            site->tls_certs[k].num_hosts = site->num_hosts;
            cfg->tls_lines[cfg->num_tls_certs] = site->tls_lines[k];
            cfg->tls_certs[cfg->num_tls_certs++] = site->tls_certs[k];
        }
    }
    if (cfg->tls && cfg->num_tls_certs == 0)
        return usage_error("--tls-port needs a --tls-cert FILE --tls-key FILE pair%s", "");
    return 0;
}

/* The file's top level, then the command line over it, then the file's sites over that. */
static int parse_layers(struct config *cfg, int argc, char **argv)
{
    struct cfgfile *doc = NULL;
    int rc = apply_argv(cfg, argc, argv, true);
    if (rc != 0)
        return rc;
    if (cfg->config_file && (rc = cfgfile_load(cfg, cfg->config_file, &doc)) != 0)
        return rc;
    rc = apply_argv(cfg, argc, argv, false);
    if (rc == 0) /* before the sites copy the top level: they inherit its HSTS line */
        rc = tls_check(cfg);
    if (rc == 0 && doc)
        rc = cfgfile_sites(cfg, doc);
    if (rc == 0)
        rc = tls_sites(cfg);
    cfgfile_free(doc);
    return rc;
}

int config_parse(struct config *cfg, int argc, char **argv)
{
    config_init(cfg);
    cfg->argc = argc;
    cfg->argv = argv;
    int rc = parse_layers(cfg, argc, argv);
    if (rc == 0)
        rc = cfgfile_check(cfg, NULL);
    if (cfg->check_only && rc != CONFIG_DONE) {
        if (rc == 0)
            printf("ringhttpd: %s: ok (%d site%s)\n", cfg->config_file,
                   cfg->num_sites ? cfg->num_sites : 1, cfg->num_sites > 1 ? "s" : "");
        return rc == 0 ? CONFIG_DONE : 1;
    }
    if (rc != 0)
        return rc;
    if (cfg->mime_file && (rc = load_mime_types(cfg, cfg->mime_file)) != 0)
        return rc;
    return open_docroot(cfg);
}

/* ---- sites (issue 19): the file's interface to the options ---- */

struct config_pool {
    struct config_pool *next;
    char s[];
};

char *config_strdup(struct config *cfg, const char *s, size_t len)
{
    struct config_pool **top = cfg->pool_owner ? &cfg->pool_owner->pool : &cfg->pool;
    struct config_pool *p = malloc(sizeof(*p) + len + 1);
    if (!p)
        return NULL;
    memcpy(p->s, s, len);
    p->s[len] = '\0';
    p->next = *top;
    *top = p;
    return p->s;
}

int config_set(struct config *cfg, const char *key, const char *value)
{
    static const struct {
        const char *name;
        int opt;
        int has_arg;
    } file_only[] = {
        {"root", OPT_ROOT, required_argument},
        {"hosts", OPT_HOSTS, required_argument},
        {"default", OPT_DEFAULT, no_argument},
    };
    int opt = 0, has_arg = required_argument;
    for (size_t i = 0; i < sizeof(file_only) / sizeof(file_only[0]) && !opt; i++)
        if (strcmp(key, file_only[i].name) == 0) {
            opt = file_only[i].opt;
            has_arg = file_only[i].has_arg;
        }
    for (const struct option *o = long_options; o->name && !opt; o++)
        if (strcmp(key, o->name) == 0) {
            opt = o->val;
            has_arg = o->has_arg;
        }
    if (!opt || opt == 'h' || opt == OPT_VERSION || opt == OPT_CHECK_CONFIG)
        return usage_error("unknown key '%s' (keys are the long options' names, see --help)", key);
    if (!cfg->src->site && (opt == OPT_HOSTS || opt == OPT_DEFAULT))
        return usage_error("'%s' belongs in a site (under 'sites')", key);
    if (cfg->src->site && !per_site(opt)) /* before the value: that is not what is wrong */
        return layer_begin(cfg, opt);
    if (has_arg == no_argument) {
        bool on =
            strcmp(value, "true") == 0 || strcmp(value, "yes") == 0 || strcmp(value, "on") == 0;
        if (!on && strcmp(value, "false") != 0 && strcmp(value, "no") != 0 &&
            strcmp(value, "off") != 0)
            return usage_error("wants true or false, got '%s'", value);
        if (on)
            return apply(cfg, opt, NULL, key);
        int rc = layer_begin(cfg, opt);
        if (rc != 0)
            return rc;
        switch (opt) { /* the option's opposite: a site can turn off what its parent set */
        case OPT_AUTOINDEX:
            cfg->autoindex = false;
            break;
        case OPT_REDIRECT_HTTPS:
            cfg->redirect_https = false;
            break;
        case OPT_REUSE_PORT:
            cfg->reuse_port = false;
            break;
        case OPT_NO_LANDLOCK:
            cfg->landlock = true;
            break;
        case 'v':
            cfg->verbose = false;
            break;
        case OPT_DEFAULT:
            cfg->is_default = false;
            break;
        }
        return 0;
    }
    char *copy = config_strdup(cfg, value, strlen(value));
    if (!copy)
        return usage_error("out of memory for '%s'", key);
    return apply(cfg, opt, copy, key);
}

int config_site_init(struct config *site, struct config *top)
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
    site->fallback = NULL;
    if (top->extra_headers &&
        !(site->extra_headers = strndup(top->extra_headers, top->extra_headers_len)))
        return -ENOMEM;
    if (top->fallback && !(site->fallback = strdup(top->fallback)))
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
    free((char *)cfg->fallback);
}

void config_free(struct config *cfg)
{
    release(cfg);
    for (int i = 0; i < cfg->num_sites; i++)
        release(&cfg->sites[i]);
    free(cfg->sites);
    while (cfg->pool) {
        struct config_pool *p = cfg->pool;
        cfg->pool = p->next;
        free(p);
    }
}

void config_destroy(struct config *cfg)
{
    if (!cfg)
        return;
    config_free(cfg);
    free(cfg);
}

bool config_limits_clients(const struct config *cfg)
{
    bool any = cfg->limit_conn > 0;
    for (int i = -1; i < cfg->num_sites; i++) {
        const struct config *c = i < 0 ? cfg : &cfg->sites[i];
        any |= c->limit_req_on || c->num_limit_req_for > 0;
    }
    return any;
}

bool config_compresses(const struct config *cfg)
{
    bool any = cfg->num_sites ? false : cfg->compress;
    for (int i = 0; i < cfg->num_sites; i++)
        any |= cfg->sites[i].compress;
    return any;
}

/* The process-wide options a reload cannot change: the first group that differs, or NULL. */
static const char *restart_needed(const struct config *a, const struct config *b)
{
    if (a->port != b->port || strcmp(a->bind, b->bind) != 0)
        return "port/bind";
    if (a->threads != b->threads || a->engine != b->engine)
        return "threads/engine";
    /* Compression itself may be turned on or off (a worker makes its compressor when it adopts
     * a configuration that compresses); the cache its variants are kept in is sized at start. */
    if (a->max_conns != b->max_conns || a->cache_size != b->cache_size ||
        a->cache_max_file != b->cache_max_file || a->compress_cache != b->compress_cache)
        return "max-conns/cache-size/cache-max-file/compress-cache";
    if ((a->access_log == NULL) != (b->access_log == NULL) || a->log_format != b->log_format ||
        (a->metrics_bind == NULL) != (b->metrics_bind == NULL))
        return "access-log/log-format/metrics";
    if (a->keepalive_timeout != b->keepalive_timeout || a->header_timeout != b->header_timeout ||
        a->drain_timeout != b->drain_timeout || a->drain_delay != b->drain_delay)
        return "timeouts/drain-delay";
    if ((a->health == NULL) != (b->health == NULL) ||
        (a->health && strcmp(a->health, b->health) != 0))
        return "health";
    /* The pairs are the new file's (server.c builds the contexts from them); the listener and
     * the protocol settings are the start's. */
    if (a->tls != b->tls || a->tls_min != b->tls_min || a->http2 != b->http2)
        return "tls-port/tls-min/http2";
    return NULL;
}

int config_reread(const struct config *cfg, struct config **out, char *why, size_t why_len)
{
    struct config *fresh = calloc(1, sizeof(*fresh));
    char **argv = calloc((size_t)cfg->argc + 1, sizeof(*argv));
    int rc = -1;
    if (!fresh || !argv) {
        free(fresh);
        snprintf(why, why_len, "out of memory");
        goto out;
    }
    config_init(fresh);
    /* getopt and --metrics write into their arguments: the copies live in fresh's pool */
    for (int i = 0; i < cfg->argc; i++)
        if (!(argv[i] = config_strdup(fresh, cfg->argv[i], strlen(cfg->argv[i])))) {
            snprintf(why, why_len, "out of memory");
            config_destroy(fresh);
            goto out;
        }
    if (parse_layers(fresh, cfg->argc, argv) != 0 || cfgfile_check(fresh, cfg) != 0) {
        snprintf(why, why_len, "%s has errors (see above)", cfg->config_file);
        config_destroy(fresh);
        goto out;
    }
    const char *what = restart_needed(cfg, fresh);
    if (what)
        snprintf(why, why_len, "%s changed in %s: takes effect at the next restart", what,
                 cfg->config_file);
    fresh->mime_file = cfg->mime_file; /* the MIME table is re-read from the path it started with */
    *out = fresh;
    rc = 0;
out:
    free(argv);
    return rc;
}
