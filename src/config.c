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

#include "core/http1.h"
#include "core/path.h"
#include "core/token.h"

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
    "      --splice-pipes N       most pipes per worker for --file-send splice (64; fewer or\n"
    "                             smaller when the pipe and fd limits say so, see -v); more\n"
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
    OPT_HSTS,
    OPT_REDIRECT_HTTPS,
    OPT_REUSE_PORT,
    OPT_USER,
    OPT_NO_LANDLOCK,
    OPT_VERSION,
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
    {"hsts", required_argument, NULL, OPT_HSTS},
    {"redirect-https", no_argument, NULL, OPT_REDIRECT_HTTPS},
    {"reuse-port", no_argument, NULL, OPT_REUSE_PORT},
    {"user", required_argument, NULL, OPT_USER},
    {"no-landlock", no_argument, NULL, OPT_NO_LANDLOCK},
    {"verbose", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, OPT_VERSION},
    {NULL, 0, NULL, 0},
};

__attribute__((format(printf, 1, 2))) static int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("ringhttpd: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs(" (see --help)\n", stderr);
    va_end(ap);
    return 2;
}

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
static const char *url_path_option(const char *opt, const char *value, int *rc)
{
    char buf[PATH_MAX];
    struct path_result res;
    struct http_str target = {value, strlen(value)};
    if (value[0] != '/' || path_normalize(target, buf, sizeof(buf) - 1, &res) != 0 ||
        res.len == 0 || res.query.p) {
        fprintf(stderr,
                "ringhttpd: %s wants a file path below the root like /404.html, got "
                "'%s' (see --help)\n",
                opt, value);
        *rc = 2;
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
    const char *path = url_path_option("--error-page", eq + 1, &rc);
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
        cfg->tls_certs[cfg->num_tls_certs++] = (struct tls_cert_files){arg, NULL};
        return 0;
    case OPT_TLS_KEY:
        if (n == 0 || cfg->tls_certs[n - 1].key)
            return usage_error("--tls-key '%s' follows no --tls-cert of its own", arg);
        if (!*arg)
            return usage_error("--tls-key wants a file%s", "");
        cfg->tls_certs[n - 1].key = arg;
        return 0;
    case OPT_TLS_MIN:
        if (strcmp(arg, "1.2") == 0)
            cfg->tls_min = 12;
        else if (strcmp(arg, "1.3") == 0)
            cfg->tls_min = 13;
        else
            return usage_error("--tls-min wants 1.2 or 1.3, got '%s'", arg);
        return 0;
    case OPT_HSTS:
        if (parse_uint(arg, 0, 315360000, &v) != 0)
            return usage_error("--hsts wants 0..315360000 seconds (0 tells browsers to "
                               "forget), got '%s'",
                               arg);
        cfg->hsts = true;
        cfg->hsts_max_age = (unsigned)v;
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
    if (cfg->tls && n == 0)
        return usage_error("--tls-port needs a --tls-cert FILE --tls-key FILE pair%s", "");
    if (!cfg->tls && n > 0)
        return usage_error("--tls-cert '%s' needs --tls-port", cfg->tls_certs[0].cert);
    if (!cfg->tls && (cfg->hsts || cfg->redirect_https))
        return usage_error("%s needs --tls-port", cfg->hsts ? "--hsts" : "--redirect-https");
    if (cfg->tls && cfg->tls_port != 0 && cfg->tls_port == cfg->port)
        return usage_error("--tls-port must differ from --port (both are %s)", "the same");
    if (cfg->hsts)
        cfg->hsts_len =
            (size_t)snprintf(cfg->hsts_line, sizeof(cfg->hsts_line),
                             "Strict-Transport-Security: max-age=%u\r\n", cfg->hsts_max_age);
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

int config_parse(struct config *cfg, int argc, char **argv)
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
        .landlock = true,
    };
    const char *mime_file = NULL;
    unsigned long v;
    int opt, rc;

    opterr = 0;
    while ((opt = getopt_long(argc, argv, ":p:b:t:vh", long_options, NULL)) != -1) {
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
                return usage_error("--%s wants 1..86400 seconds, got '%s'", option_name(opt),
                                   optarg);
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
            mime_file = optarg;
            break;
        case OPT_ERROR_PAGE:
            if ((rc = add_error_page(cfg, optarg)) != 0)
                return rc;
            break;
        case OPT_FALLBACK:
            rc = 0;
            if (!(cfg->fallback = url_path_option("--fallback", optarg, &rc)))
                return rc;
            break;
        case OPT_CACHE_SIZE:
            if (parse_size(optarg, &cfg->cache_size) != 0)
                return usage_error("--cache-size wants a byte count like 64M, got '%s'", optarg);
            break;
        case OPT_CACHE_MAX_FILE:
            if (parse_size(optarg, &cfg->cache_max_file) != 0)
                return usage_error("--cache-max-file wants a byte count like 256K, got '%s'",
                                   optarg);
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
        case OPT_HTTP2:
            if (strcmp(optarg, "on") == 0)
                cfg->http2 = true;
            else if (strcmp(optarg, "off") == 0)
                cfg->http2 = false;
            else
                return usage_error("--http2 wants on or off, got '%s'", optarg);
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
                return usage_error("--dictionary: '*' only in the last path segment, got '%s'",
                                   optarg);
            if (cfg->num_dictionaries == CONFIG_MAX_DICTIONARIES)
                return usage_error("--dictionary: at most 8 patterns; '%s' is one more", optarg);
            cfg->dictionaries[cfg->num_dictionaries++] = optarg;
            break;
        case OPT_TLS_PORT:
        case OPT_TLS_CERT:
        case OPT_TLS_KEY:
        case OPT_TLS_MIN:
        case OPT_HSTS:
        case OPT_REDIRECT_HTTPS:
            if ((rc = tls_option(cfg, opt, optarg)) != 0)
                return rc;
            break;
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
            return usage_error("option '%s' needs a value", argv[optind - 1]);
        default:
            return usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        cfg->docroot = argv[optind++];
    if (optind < argc)
        return usage_error("one DOCROOT only; unexpected '%s'", argv[optind]);
    if ((rc = tls_check(cfg)) != 0)
        return rc;
    cfg->mime_file = mime_file;
    if (mime_file && (rc = load_mime_types(cfg, mime_file)) != 0)
        return rc;
    return open_docroot(cfg);
}

void config_free(struct config *cfg)
{
    if (cfg->docroot_fd >= 0)
        close(cfg->docroot_fd);
    free(cfg->extra_headers);
    mime_table_free(&cfg->mime_extra);
    for (int i = 0; i < cfg->num_error_pages; i++)
        free((char *)cfg->error_pages[i].path);
    free((char *)cfg->fallback);
}
