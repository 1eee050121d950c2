/* config: command-line options, their defaults and validation, and the --help text.
 * Must not: change after server_run starts; every thread reads it without locks. What a
 * reload re-reads (the root, the MIME table) lives in struct site (rt/site.h) instead.
 * Ownership: main owns the one struct config for the whole process lifetime. */
#ifndef CONFIG_H
#define CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/logfmt.h"
#include "core/mime.h"
#include "tls/tls.h"

#define RINGHTTPD_VERSION "0.1.0"
#define CONFIG_MAX_ERROR_PAGES 16
#define CONFIG_MAX_REAL_IP 32
#define CONFIG_MAX_DICTIONARIES 8

enum engine_kind { ENGINE_AUTO, ENGINE_URING, ENGINE_EPOLL };

/* How the io_uring engine sends file ranges (the epoll engine always uses sendfile). */
enum file_send { FILE_SEND_SPLICE, FILE_SEND_SENDFILE };

struct error_page {
    int status;
    const char *path; /* URL path below the document root, without the leading '/' */
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
    const char *mime_file;        /* --mime-types, re-read by a reload */
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
    int tls_min; /* 12 (TLS 1.2 and 1.3) or 13 (--tls-min 1.3) */
    bool hsts;   /* --hsts SECONDS: Strict-Transport-Security on TLS responses */
    unsigned hsts_max_age;
    char hsts_line[64]; /* its header line, "Strict-Transport-Security: ...\r\n" */
    size_t hsts_len;
    bool redirect_https; /* the cleartext port answers 308 to the https: URL */
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

#endif
