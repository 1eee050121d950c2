/* options: every option's facts in one table (name, argument, scope, whether a reload can change
 * it, setter, --help line), the struct config the setters fill, its defaults and its memory.
 * --help, getopt's list, the check of what a site may set and the reload's "needs a restart"
 * list all come from the table, so they cannot disagree.
 * Must not: read a file, know YAML or the order of the layers (config.c does), or print
 * anything but an option's own error line and --help/--version.
 * Ownership: a struct config owns what its setters allocated; a site's strings live in its top
 * level's pool (options_strdup). Once built, a struct config is read by every thread unlocked. */
#ifndef CONFIG_OPTIONS_H
#define CONFIG_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/cors.h"
#include "core/hints.h"
#include "core/limits.h"
#include "core/logfmt.h"
#include "core/mime.h"

/* The lists a repeatable option fills. A layer's first use of one replaces what an outer layer
 * (the file under the command line, a site's parent) put there; later uses add to it. */
enum option_list {
    LIST_NONE,
    LIST_HEADERS, /* --header and --cache-control: one header block */
    LIST_ERROR_PAGES,
    LIST_REAL_IP,
    LIST_DICTIONARIES,
    LIST_REDIRECTS,
    LIST_AUTHS,
    LIST_CACHE_RULES,
    LIST_HOSTS,
    LIST_TLS_CERTS, /* in a site: its own pairs, not the process's */
    LIST_LIMIT_REQ_FOR,
    LIST_CORS,
    LIST_HINTS,
    LIST_ACME_DOMAINS,
    LIST_RULE_REDIRECTS, /* issue 39: redirects, headers, access (struct config's rule_lines) */
    LIST_RULE_HEADERS,
    LIST_RULE_ACCESS,
    LIST_DENY_UA,
    LIST_TICKET_KEYS,
    LIST_QUIC_SECRETS,
    LIST_PROXY_FROM,
    LIST_INDEX,
    LIST_FALLBACKS,
    LIST_BINDS,
    LIST_DNS_RESOLVERS,
    OPTION_LISTS
};

#define RINGHTTPD_VERSION "0.1.0"
#define CONFIG_MAX_ERROR_PAGES 16
#define CONFIG_MAX_REAL_IP 32
#define CONFIG_MAX_DICTIONARIES 8
#define CONFIG_MAX_TICKET_KEYS 16
#define CONFIG_MAX_DNS_RESOLVERS 8 /* --acme-dns-resolver */
#define CONFIG_MAX_BINDS 8 /* --bind entries: each a cleartext and a TLS listener per worker */
#define CONFIG_UNIX_PATH_MAX 107 /* sockaddr_un's sun_path, less its NUL */
#define CONFIG_MAX_RULES 32    /* per site: --redirect, --basic-auth, --cache-control-for, hosts */
#define CONFIG_MAX_OPTIONS 128 /* rows of the option table (options_init asserts it) */
/* per site and kind: redirects, headers and access lines of the YAML lists or the command
 * line (a site's files hold thousands; these are the configuration's own few) */
#define CONFIG_MAX_RULE_LINES 256
#define CONFIG_MAX_INDEX 8      /* --index names per site */
#define CONFIG_MAX_FALLBACKS 16 /* --fallback prefixes per site */

#define CONFIG_MAX_QUIC_SECRETS 4 /* --quic-secret-file: each one an AEAD open per token */
/* --quic-server-id: QUIC-LB's longest server ID, and its config rotation codepoints 0..6 */
#define CONFIG_QUIC_SID_MAX 15
#define CONFIG_QUIC_ROTATION_MAX 6

/* --quic-cc's values (issue 42): ngtcp2's controllers, mapped to its constants by server.c */
enum { CONFIG_QUIC_CC_RENO, CONFIG_QUIC_CC_CUBIC, CONFIG_QUIC_CC_BBR, CONFIG_QUIC_CC_BBR2 };

struct config_checks;

enum engine_kind { ENGINE_AUTO, ENGINE_URING, ENGINE_EPOLL };

/* How the io_uring engine sends file ranges (the epoll engine always uses sendfile). */
enum file_send { FILE_SEND_SPLICE, FILE_SEND_SENDFILE };

/* --clean-urls (issue 39): /x serves x.html; REDIRECT also sends /x.html (and /dir/index.html)
 * to the URL that serves it. */
enum clean_urls { CLEAN_URLS_OFF, CLEAN_URLS_ON, CLEAN_URLS_REDIRECT };

/* --trailing-slash (issue 39): a directory's canonical URL. AUTO: /dir -> /dir/ (and a clean
 * /x.html is /x); ALWAYS: every page ends in '/' (/x -> /x/ serving x.html); NEVER: /dir/ ->
 * /dir, which serves its index. */
enum trailing_slash { SLASH_AUTO, SLASH_ALWAYS, SLASH_NEVER };

/* --fallback [PREFIX=]PATH: a missing file below PREFIX (a normalised path, "" for the whole
 * site) is answered with PATH (single-page applications); the longest prefix wins. */
struct config_fallback {
    const char *prefix; /* no leading or trailing '/' */
    size_t prefix_len;
    const char *path; /* URL path below the document root, without the leading '/' */
};

/* One --bind entry (issue 38): 'ADDR[:PORT] [tls=PORT] [proxy]' or 'unix:PATH [mode=OCTAL]
 * [owner=USER[:GROUP]] [tls] [proxy]'. Addresses are checked here (inet_pton), names when the
 * listener opens. */
struct config_bind {
    const char *host;  /* "127.0.0.1", "::1" (no brackets), NULL for "*" (both families) */
    const char *path;  /* unix:PATH's path, or NULL for an IP entry */
    int port;          /* its own cleartext port, or -1 for --port */
    int tls_port;      /* its own TLS (and HTTP/3) port, or -1 for --tls-port */
    bool proxy;        /* every connection must open with a PROXY header (nginx's proxy_protocol) */
    bool tls;          /* unix: TLS on the socket (--tls-port's certificates), not cleartext */
    int mode;          /* unix: the socket file's mode, or -1 for 0666 (nginx's) */
    const char *owner; /* unix: USER[:GROUP] to chown the socket file to, or NULL */
};

/* One --tls-cert/--tls-key pair as configured (issue 40: plain data; tls/ loads it). */
struct config_cert {
    const char *cert; /* PEM: the certificate, then its chain */
    const char *key;  /* PEM: its private key; NULL until the --tls-key after it */
    /* a site's own pair: the site's names, which SNI matches first; NULL/0 for the process's */
    const char *const *hosts;
    int num_hosts;
    int key_line;  /* its tls-key line in the file (0: command line) */
    int cert_line; /* and its tls-cert line */
};

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
    const char *dir; /* the file's directory with a trailing '/', or NULL: the working one */
    int line;
    const char *key;
    bool site; /* a site's keys: only the per-site options apply */
    unsigned char seen[OPTION_LISTS];
};

struct config {
    const char *docroot;
    /* a root naming {host} (issue 40: "/srv/sites/{host}/public"): docroot is what comes
     * before it ("/srv/sites"), host_root what follows ("" or "/public"), NULL otherwise */
    const char *host_root;
    int docroot_fd; /* checked at start; server hands it to the first struct site (-1 then) */
    /* --bind, repeatable (issue 38); none: both families on every port */
    struct config_bind binds[CONFIG_MAX_BINDS];
    int num_binds;
    uint16_t port;
    int threads;
    enum engine_kind engine;
    unsigned keepalive_timeout; /* seconds */
    unsigned header_timeout;    /* seconds */
    unsigned body_timeout;  /* seconds an unfinished request (HTTP/2, HTTP/3) may bring nothing */
    unsigned drain_timeout; /* seconds a SIGTERM waits for responses in flight */
    unsigned max_conns;     /* per worker */
    size_t head_memory;     /* per worker: input buffers of connections, in bytes */
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
    struct config_fallback fallbacks[CONFIG_MAX_FALLBACKS];
    int num_fallbacks;
    /* Static sites (issue 39, README "Static sites"). pages: Pages-style handling, the nearest
     * 404.html up the tree (and the defaults of clean-urls and the rules files) */
    bool pages;
    int clean_urls;                            /* enum clean_urls */
    int trailing_slash;                        /* enum trailing_slash */
    const char *index_names[CONFIG_MAX_INDEX]; /* --index; none given: "index.html" */
    int num_index;
    const char *access_log;     /* file path, "-" for standard output, NULL when off */
    enum log_format log_format; /* LOG_VCOMBINED: the host first */
    struct cidr real_ip_from[CONFIG_MAX_REAL_IP]; /* trusted proxies (--real-ip-from) */
    int num_real_ip;
    /* --proxy-protocol-from: balancers whose connections open with a PROXY header (issue 38) */
    struct cidr proxy_from[CONFIG_MAX_REAL_IP];
    int num_proxy_from;
    const char *metrics_bind; /* --metrics ADDR:PORT split: the address, or NULL when off */
    uint16_t metrics_port;
    bool metrics_per_cert;      /* --metrics-per-cert: one expiry series per ACME name (issue 40) */
    bool compress;              /* on-the-fly compression (--compress on|off) */
    const char *compress_types; /* media types compressed: accept_type_listed() syntax */
    size_t compress_min;        /* smallest body compressed */
    size_t compress_max;        /* largest body compressed (and largest dictionary) */
    size_t compress_cache;      /* bytes of compressed variants each worker keeps */
    const char *tls_groups;     /* --tls-groups, or NULL for tls_default_groups() */
    /* --quic-secret-file (issue 38): Retry tokens' and stateless resets' secrets, the first
     * file's making them; read at start and on every reload */
    const char *quic_secret_files[CONFIG_MAX_QUIC_SECRETS];
    int num_quic_secret_files;
    /* --quic-server-id [ROTATION:]HEX (issue 38): the text, and its bytes and codepoint */
    const char *quic_server_id;
    uint8_t quic_sid[CONFIG_QUIC_SID_MAX];
    unsigned quic_sid_len, quic_sid_rotation;
    /* --ticket-key-file (issue 38): the first encrypts, all decrypt; read by tls_ctx_new */
    const char *ticket_key_files[CONFIG_MAX_TICKET_KEYS];
    int num_ticket_key_files;
    /* --dictionary URL path patterns ('*' wildcards, leading '/'), RFC 9842 */
    const char *dictionaries[CONFIG_MAX_DICTIONARIES];
    int num_dictionaries;
    bool http2;               /* --http2 on|off: h2c by its preface, h2 by ALPN */
    bool http3;               /* --http3 on|off: QUIC on UDP at tls_port (only with TLS) */
    unsigned http3_max_conns; /* --http3-max-conns: QUIC connections per worker */
    bool http3_gso;           /* --http3-gso on|off: UDP_SEGMENT where the kernel has it */
    bool http3_gro;           /* --http3-gro on|off: UDP_GRO where the kernel has it */
    int quic_cc;              /* --quic-cc: CONFIG_QUIC_CC_*, QUIC's congestion controller */
    const char *tcp_cc;       /* --tcp-cc: TCP_CONGESTION of the TCP listeners; NULL: the host's */
    /* HTTPS (issue 14): a second listener on the same address; pairs are checked (files read,
     * keys matched) by tls_ctx_new at start and on every reload, not here. */
    bool tls;          /* --tls-port given */
    uint16_t tls_port; /* 0 picks a free one */
    /* --tls-cert/--tls-key, the first the default: as many as memory allows (issue 40), in
     * the top level's pool (options_add_cert); a site's copy shares the array until its own
     * first pair replaces it */
    struct config_cert *tls_certs;
    int num_tls_certs, cap_tls_certs;
    int tls_min;   /* 12 (TLS 1.2 and 1.3) or 13 (--tls-min 1.3) */
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
    /* Automatic HTTPS (issue 27, src/acme/acme.h): on with --acme-email. */
    const char *acme_email;
    const char *acme_domains[CONFIG_MAX_RULES]; /* --acme-domain, without a --config file */
    int num_acme_domains;
    const char *acme_ca;      /* the directory URL; NULL: Let's Encrypt's production one */
    const char *acme_ca_root; /* a PEM file the ACME client trusts, or NULL (the system's) */
    const char *acme_state;   /* the state directory (default /var/lib/ringhttpd/acme) */
    int acme_challenge;       /* 1 http-01, 2 tls-alpn-01 (enum acme_kind); 0: both */
    /* DNS-01 (issue 40, src/server/acme/dns01.h): wildcards are ordered with either */
    const char *acme_dns_hook;   /* --acme-dns-hook CMD, or NULL */
    const char *acme_dns_update; /* --acme-dns-update SERVER[:PORT], or NULL */
    const char *acme_dns_tsig;   /* --acme-dns-tsig FILE: the UPDATE's key */
    const char *acme_dns_resolvers[CONFIG_MAX_DNS_RESOLVERS]; /* --acme-dns-resolver */
    int num_acme_dns_resolvers;
    bool acme; /* a site's "acme: off" clears it: no certificate for its names */
    /* a site's "acme: on-demand" (issue 40): a name no certificate covers that falls to the site
     * gets one in its first handshake, when --acme-ask approves it (server/acme/ondemand.h) */
    bool acme_ondemand;
    const char *acme_ask; /* --acme-ask: the approval endpoint (URL?domain=NAME), or NULL */

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
    int auth_lines[CONFIG_MAX_RULES]; /* each one's line in the file (0: command line) */
    int num_auths;
    struct config_cache_rule cache_rules[CONFIG_MAX_RULES];
    int num_cache_rules;
    /* Rules by path pattern (issue 39, core/rulefile.h; site.c compiles them with the root's
     * files): rules-files reads the root's _redirects and _headers; rule_lines are the
     * configuration's own lines by enum rulefile_kind (redirects, headers, access), each in
     * its file's syntax (a header rule a block: "PATTERN\n  Name: value\n"), with its line in
     * the file (0: the command line); deny_ua the user-agent patterns answered 403 */
    bool rules_files;
    const char *rule_lines[3][CONFIG_MAX_RULE_LINES];
    int rule_at[3][CONFIG_MAX_RULE_LINES];
    int num_rule_lines[3];
    const char *deny_ua[CONFIG_MAX_RULES];
    int num_deny_ua;
    /* Per-client limits and edge fields (issue 28). --limit-conn is the process's (a
     * connection's site is not known when it is accepted); the rest are a site's. */
    unsigned limit_conn; /* --limit-conn N: open connections per client address; 0: off */
    bool limit_req_on;   /* --limit-req given */
    struct limit_rate limit_req;
    struct config_limit_rule limit_req_for[CONFIG_MAX_RULES];
    int num_limit_req_for;
    size_t limit_rate;       /* --limit-rate: bytes per second per connection; 0: off */
    size_t limit_rate_after; /* --limit-rate-after: bytes sent at full speed first */
    struct cors_rule cors[CONFIG_MAX_RULES];
    int num_cors;
    struct hints_rule hints[CONFIG_MAX_RULES];
    int num_hints;
    const char *hosts[CONFIG_MAX_RULES]; /* a site's names: "example.org", "*.example.org" */
    int num_hosts;
    bool is_default; /* the site a Host no site names goes to */
    int line;        /* a site's line in the file, for messages */
    /* each option's line in the file, by table row (options_line); -1 when the command line
     * set it last, 0 when nothing did */
    int key_lines[CONFIG_MAX_OPTIONS];
    struct config *sites; /* the file's sites section (top level only) */
    int num_sites;
    struct config_src *src;             /* while parsing only */
    const struct config_checks *checks; /* config_parse's: who reads TLS pairs and htpasswd files */
    struct options_pool *pool;          /* the file's strings (top level only) */
    struct config *pool_owner;          /* a site's top level, whose pool holds its strings */
    int argc;                           /* the command line, applied again over a re-read file */
    char **argv;
};

/* The default of --compress-types. */
#define CONFIG_COMPRESS_TYPES                                                                      \
    "text/*, application/javascript, application/json, application/xml, +json, +xml, "             \
    "application/wasm, font/ttf, font/otf, application/vnd.ms-fontobject"

/* Who may set an option. */
enum option_scope {
    SCOPE_PROCESS,  /* the command line or the file's top level */
    SCOPE_SITE,     /* also each site of the file (the top level's value is the sites' default) */
    SCOPE_SITE_OWN, /* only a site of the file: its hosts, default */
    SCOPE_ARGV,     /* the command line only: --check-config, --help, --version */
};

/* Whether a value names a file: one the configuration file names relatively is found beside
 * that file, not in the working directory (issue 36); the command line's stay relative to it. */
enum option_file {
    OPTFILE_NONE,
    OPTFILE_WHOLE,    /* the value ("-" and "off" excepted: --access-log's) */
    OPTFILE_AFTER_EQ, /* what follows its first '=' (--basic-auth PREFIX=HTPASSWD) */
};

/* How a value is compared, for the reload's "needs a restart" list (and set, for flags). */
enum option_field {
    FIELD_NONE,
    FIELD_BOOL,
    FIELD_UNSIGNED, /* unsigned int */
    FIELD_INT,      /* int, or an enum */
    FIELD_PORT,     /* uint16_t */
    FIELD_SIZE,     /* size_t */
    FIELD_STRING,   /* const char *, NULL when unset */
};

/* A name an option's value may be, and what it stands for (set_choice). */
struct option_choice {
    const char *name;
    int value;
};

struct option_info {
    const char *name;    /* the long option, and the file's key */
    char short_name;     /* -p for --port, or 0 */
    const char *metavar; /* the value's name in --help; NULL: a flag (true/false in a file) */
    enum option_scope scope;
    bool file_only;         /* a key of the file with no command-line option: root, hosts... */
    bool reload;            /* a reload applies a new value; else it is reported and kept */
    bool first;             /* read before the file: --config, --check-config, -h, --version */
    enum option_list list;  /* repeatable: the list it fills */
    enum option_field kind; /* the field at off; FIELD_NONE: compared by same() if any */
    size_t off;
    bool invert;                         /* a flag that clears its field (--no-landlock) */
    enum option_file names_file;         /* a file name: relative to the file that sets it */
    unsigned long min, max;              /* set_number's and set_size's bounds */
    const struct option_choice *choices; /* set_choice's names, up to one with a NULL name */
    const char *wants; /* its message's account of a good value: " seconds", " like 64M"... */
    bool (*same)(const struct config *a, const struct config *b); /* for compound values */
    /* Applies arg (NULL for a flag on the command line, "true"/"false" from a file): 0, or
     * an exit status after one line naming the option (or CONFIG_DONE after --help). */
    int (*set)(struct config *cfg, const struct option_info *o, char *arg);
    const char *help; /* --help's text, lines after the first on lines of their own; NULL: none */
};

/* config_parse's answer when it printed --help or --version: nothing to run, exit 0. */
#define CONFIG_DONE (-1)

/* The table, in --help's order, its entries without a help line last: its length, and its
 * row i (NULL from options_count() on). The rows live with their setters, one file per area
 * (options_net.c, options_tls.c...); options.c joins them. */
size_t options_count(void);
const struct option_info *options_row(size_t i);

/* The entry named name (a long option or a file-only key), or NULL. */
const struct option_info *options_find(const char *name);

/* The option nearest to name by edit distance, for "did you mean": a long option, or with
 * in_file a key of the file; NULL when none is close enough to be a typo of it. */
const char *options_near(const char *name, bool in_file);

/* The line of the file that set option name in cfg last, or 0 (the command line, a default). */
int options_line(const struct config *cfg, const char *name);

/* Whether the file or the command line set option name in cfg (else it has its default). */
bool options_given(const struct config *cfg, const char *name);

/* Prints --help from the table. */
void options_help(FILE *out);

/* Applies o with arg to cfg: the site check, the layer's list rule, then o's setter. 0, or an
 * exit status after one line (CONFIG_DONE after --help or --version). */
int options_apply(struct config *cfg, const struct option_info *o, char *arg);

/* For the configuration file: applies key (a long option's name, or a file-only key) with
 * value, "true"/"false"/"yes"/"no"/"on"/"off" for a flag, copied into the pool; a file name
 * the value holds (names_file), when relative, is found in cfg->src->dir (the file's directory).
 * 0, or an exit status after printing one line that names cfg->src's file, line
 * and key. */
int options_set(struct config *cfg, const char *key, const char *value);

/* YAML 1.1's booleans and on/off, in any case (true/false, yes/no, on/off): 0 or -EINVAL. */
int options_parse_bool(const char *s, bool *on);

/* One line on stderr naming the option (with a file: its file, line and key); returns 2. */
int options_error(const struct config *cfg, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The options a reload cannot change that differ between a (the running configuration) and b
 * (a re-read one), as "port/bind" into out; false when none does. */
bool options_restart_needed(const struct config *a, const struct config *b, char *out,
                            size_t out_len);

/* Every option at its default; DOCROOT none (config.c decides what stands for it). */
void options_init(struct config *cfg);

/* A copy of s that lives as long as the top-level configuration; NULL without memory. */
char *options_strdup(struct config *top, const char *s, size_t len);

/* Appends c to cfg's pairs, the array grown in the top level's pool: 0 or -ENOMEM. */
int options_add_cert(struct config *cfg, const struct config_cert *c);

/* Makes site a copy of top, ready for the site's own keys: 0 or -ENOMEM. */
int options_site_init(struct config *site, struct config *top);

/* Releases what the setters allocated, the sites' too, and the pool (not cfg itself). */
void options_free(struct config *cfg);

#endif
