/* config: command-line options, their defaults and validation, and the --help text.
 * Must not: change after server_run starts; every thread reads it without locks. What a
 * reload re-reads (the root, the MIME table) lives in struct site (rt/site.h) instead.
 * Ownership: main owns the one struct config for the whole process lifetime. */
#ifndef CONFIG_H
#define CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/cors.h"
#include "core/hints.h"
#include "core/limits.h"
#include "core/logfmt.h"
#include "core/mime.h"
#include "tls/tls.h"

#define RINGHTTPD_VERSION "0.1.0"
#define CONFIG_MAX_ERROR_PAGES 16
#define CONFIG_MAX_REAL_IP 32
#define CONFIG_MAX_DICTIONARIES 8
#define CONFIG_MAX_RULES 32 /* per site: --redirect, --basic-auth, --cache-control-for, hosts */

enum engine_kind { ENGINE_AUTO, ENGINE_URING, ENGINE_EPOLL };

/* How the io_uring engine sends file ranges (the epoll engine always uses sendfile). */
enum file_send { FILE_SEND_SPLICE, FILE_SEND_SENDFILE };

struct error_page {
    int status;
    const char *path; /* URL path below the document root, without the leading '/' */
};

/* --redirect 'FROM TO [STATUS]': FROM is a path or a prefix ending in '*'; a TO ending in '*'
 * gets what FROM's '*' matched, and the query, appended. */
struct config_redirect {
    const char *from;
    const char *to;
    int status; /* 301, 302, 307 or 308 */
};

/* --basic-auth PREFIX=HTPASSWD: requests whose path starts with PREFIX need a user of HTPASSWD. */
struct config_auth {
    const char *prefix;
    const char *htpasswd;
};

/* --cache-control-for 'PATTERN VALUE': Cache-Control VALUE for paths matching PATTERN. */
struct config_cache_rule {
    const char *pattern;
    const char *value;
};

/* --limit-req-for 'PATTERN RATE': requests for paths matching PATTERN, per client (issue 28). */
struct config_limit_rule {
    const char *pattern;
    struct limit_rate rate;
};

/* Where the options being applied come from, for error messages: a file's line and key, or the
 * command line (file NULL). Also which repeatable options this layer has set already: the first
 * one replaces what an outer layer (the file under the command line, a site's parent) set. */
struct config_src {
    const char *file;
    int line;
    const char *key;
    bool site; /* a site's keys: only the per-site options apply */
    unsigned char seen[64];
};

struct config {
    const char *docroot;
    int docroot_fd; /* checked at start; server hands it to the first struct site (-1 then) */
    const char *bind;
    uint16_t port;
    int threads;
    enum engine_kind engine;
    unsigned keepalive_timeout; /* seconds */
    unsigned header_timeout;    /* seconds */
    unsigned drain_timeout;     /* seconds a SIGTERM waits for responses in flight */
    unsigned max_conns;         /* per worker */
    size_t head_memory;         /* per worker: input buffers of connections, in bytes */
    bool verbose;
    bool autoindex;
    unsigned autoindex_limit; /* entries a listing shows; the rest are counted in a note */
    size_t cache_size;        /* bytes of file contents each worker may hold in memory */
    size_t cache_max_file;    /* files up to this size are held in memory */
    enum file_send file_send;
    unsigned splice_pipes; /* per worker: the most file ranges spliced at once */
    size_t send_lowat;     /* TCP_NOTSENT_LOWAT of every connection; 0: the kernel's default */
    /* "Name: value\r\n" lines sent with every successful response (--header, --cache-control) */
    char *extra_headers;
    size_t extra_headers_len;
    struct mime_table mime_extra; /* moves into the first struct site, like docroot_fd */
    const char *mime_file;        /* --mime-types, re-read by a reload; a site may have its own */
    bool reuse_port;              /* --reuse-port: join listeners already on the port */
    const char *user;             /* --user USER[:GROUP], or NULL */
    bool landlock;                /* false with --no-landlock */
    struct error_page error_pages[CONFIG_MAX_ERROR_PAGES];
    int num_error_pages;
    const char *fallback;   /* URL path below the root, without the leading '/', or NULL */
    const char *access_log; /* file path, "-" for standard output, NULL when off */
    enum log_format log_format;
    struct cidr real_ip_from[CONFIG_MAX_REAL_IP]; /* trusted proxies (--real-ip-from) */
    int num_real_ip;
    const char *metrics_bind; /* --metrics ADDR:PORT split: the address, or NULL when off */
    uint16_t metrics_port;
    bool compress;              /* on-the-fly compression (--compress on|off) */
    const char *compress_types; /* media types compressed: accept_type_listed() syntax */
    size_t compress_min;        /* smallest body compressed */
    size_t compress_max;        /* largest body compressed (and largest dictionary) */
    size_t compress_cache;      /* bytes of compressed variants each worker keeps */
    /* --dictionary URL path patterns ('*' wildcards, leading '/'), RFC 9842 */
    const char *dictionaries[CONFIG_MAX_DICTIONARIES];
    int num_dictionaries;
    bool http2; /* --http2 on|off: h2c by its preface, h2 by ALPN */
    /* HTTPS (issue 14): a second listener on the same address; pairs are checked (files read,
     * keys matched) by tls_ctx_new at start and on every reload, not here. */
    bool tls;                                       /* --tls-port given */
    uint16_t tls_port;                              /* 0 picks a free one */
    struct tls_cert_files tls_certs[TLS_MAX_CERTS]; /* --tls-cert/--tls-key, the first default */
    int num_tls_certs;
    int tls_lines[TLS_MAX_CERTS]; /* each pair's tls-key line in the file (0: command line) */
    int tls_min;                  /* 12 (TLS 1.2 and 1.3) or 13 (--tls-min 1.3) */
    bool ktls;     /* --ktls on|off: responses sealed by kernel TLS where the kernel has it */
    bool tls_seal; /* --tls-seal on|off: otherwise sealed by tls.c with OpenSSL's keys */
    /* a site's own tls-cert/tls-key (issue 19): its tls_certs are its own pairs, which the
     * top level's tls_certs also list (after the process's), tagged with the site's hosts */
    bool site_tls;
    bool hsts; /* --hsts SECONDS: Strict-Transport-Security on TLS responses */
    unsigned hsts_max_age;
    char hsts_line[64]; /* its header line, "Strict-Transport-Security: ...\r\n" */
    size_t hsts_len;
    bool redirect_https; /* the cleartext port answers 308 to the https: URL */

    /* Sites and the configuration file (issue 19, README "Sites and configuration file"). The
     * top-level struct is the default site too; each entry of sites is a copy of it with the
     * site's own keys applied (only per-site options may differ). */
    const char *config_file;    /* --config FILE (or --check-config FILE); re-read by SIGHUP */
    bool check_only;            /* --check-config: validate and exit */
    const char *health;         /* --health PATH: 200 "ok" while serving, 503 in a drain delay */
    unsigned drain_delay;       /* --drain-delay S: listeners stay open S seconds into a drain */
    const char *canonical_host; /* --canonical-host NAME: other Host names get a 301 to it */
    const char *auth_realm;     /* --auth-realm REALM (default "restricted") */
    struct config_redirect redirects[CONFIG_MAX_RULES];
    int num_redirects;
    struct config_auth auths[CONFIG_MAX_RULES];
    int num_auths;
    struct config_cache_rule cache_rules[CONFIG_MAX_RULES];
    int num_cache_rules;
    /* Per-client limits and edge fields (issue 28). --limit-conn is the process's (a
     * connection's site is not known when it is accepted); the rest are a site's. */
    unsigned limit_conn; /* --limit-conn N: open connections per client address; 0: off */
    bool limit_req_on;   /* --limit-req given */
    struct limit_rate limit_req;
    struct config_limit_rule limit_req_for[CONFIG_MAX_RULES];
    int num_limit_req_for;
    uint64_t limit_rate;       /* --limit-rate: bytes per second per connection; 0: off */
    uint64_t limit_rate_after; /* --limit-rate-after: bytes sent at full speed first */
    struct cors_rule cors[CONFIG_MAX_RULES];
    int num_cors;
    struct hints_rule hints[CONFIG_MAX_RULES];
    int num_hints;
    const char *hosts[CONFIG_MAX_RULES]; /* a site's names: "example.org", "*.example.org" */
    int num_hosts;
    bool is_default;      /* the site a Host no site names goes to */
    int line;             /* a site's line in the file, for messages */
    struct config *sites; /* the file's sites section (top level only) */
    int num_sites;
    struct config_src *src;    /* while parsing only */
    struct config_pool *pool;  /* the file's strings (top level only) */
    struct config *pool_owner; /* a site's top level, whose pool holds its strings */
    int argc;                  /* the command line, applied again over a re-read file */
    char **argv;
};

/* The default of --compress-types. */
#define CONFIG_COMPRESS_TYPES                                                                      \
    "text/*, application/javascript, application/json, application/xml, +json, +xml, "             \
    "application/wasm, font/ttf, font/otf, application/vnd.ms-fontobject"

/* config_parse's answer when it printed --help or --version: nothing to run, exit 0. */
#define CONFIG_DONE (-1)

/* Fills cfg from argv. Returns 0 to run, or an exit status after printing one line to stderr
 * (2 for a usage error, 1 for an unusable document root or option file), or CONFIG_DONE after
 * printing --help or --version. */
int config_parse(struct config *cfg, int argc, char **argv);

/* Reads and parses a --mime-types file into out: 0, or -errno with a one-line reason in why. */
int config_load_mime(const char *file, struct mime_table *out, char *why, size_t why_len);

/* Releases what config_parse allocated and closes the document root. */
void config_free(struct config *cfg);

/* Every option at its default (config_parse starts from this). */
void config_init(struct config *cfg);

/* For the configuration file reader (cfgfile.c). Applies key (a long option's name, or "root"
 * for DOCROOT) with value to cfg: 0, or an exit status after printing one line that names
 * cfg->src's file, line and key. value is "true"/"false" for an option that takes none. */
int config_set(struct config *cfg, const char *key, const char *value);
/* A copy of the string that lives as long as the top-level configuration; NULL without memory. */
char *config_strdup(struct config *top, const char *s, size_t len);
/* Makes site a copy of top, ready for the site's own keys: 0 or -ENOMEM. */
int config_site_init(struct config *site, struct config *top);

/* Whether cfg or any of its sites limits requests per client (--limit-req, --limit-req-for) or
 * the process limits connections (--limit-conn): the listeners then steer by client address. */
bool config_limits_clients(const struct config *cfg);

/* Whether cfg or any of its sites compresses on the fly (the workers then make compressors). */
bool config_compresses(const struct config *cfg);

/* Reads cfg->config_file again with the command line over it, into a new configuration (sites
 * and all) whose process-wide options are cfg's (a difference is reported in why, not applied).
 * 0 with *out (config_destroy frees it), or -1 with the reason in why. Reading a file prints
 * its errors on stderr too. */
int config_reread(const struct config *cfg, struct config **out, char *why, size_t why_len);
void config_destroy(struct config *cfg);

#endif
