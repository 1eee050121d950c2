/* The configuration's layers, its checks and a reload's re-read; see config.h. */
#include "config/config.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config/cfgfile.h"

#define usage_error(...) options_error(cfg, __VA_ARGS__)

/* A problem with key's value at the top level: "FILE:LINE: KEY: why" when the file set it last,
 * else the command line's "why (see --help)". Returns 2. */
static int key_usage_error(struct config *cfg, const char *key, const char *why)
{
    int line = options_line(cfg, key);
    struct config_src at = {.file = cfg->config_file, .line = line, .key = key};
    cfg->src = line && cfg->config_file ? &at : NULL;
    int rc = options_error(cfg, "%s", why);
    cfg->src = NULL;
    return rc;
}

/* What the HTTPS options need of each other, once all are read; each problem named by the key
 * at fault (issue 36: from the file, they had no file:line). */
static int tls_check(struct config *cfg)
{
    int n = cfg->num_tls_certs;
    char why[PATH_MAX + 128];
    if (!cfg->tls_min)
        cfg->tls_min = 12;
    if (n > 0 && !cfg->tls_certs[n - 1].key) {
        snprintf(why, sizeof(why), "--tls-cert '%s' has no --tls-key after it",
                 cfg->tls_certs[n - 1].cert);
        return key_usage_error(cfg, "tls-cert", why);
    }
    if (cfg->acme_email && !cfg->tls)
        return key_usage_error(cfg, "acme-email", "--acme-email needs --tls-port");
    if (!cfg->acme_email && cfg->num_acme_domains)
        return key_usage_error(cfg, "acme-domain", "--acme-domain needs --acme-email");
    if (!cfg->acme_email && (cfg->acme_dns_hook || cfg->acme_dns_update))
        return key_usage_error(cfg, cfg->acme_dns_hook ? "acme-dns-hook" : "acme-dns-update",
                               "DNS-01 needs --acme-email");
    if (cfg->acme_dns_hook && cfg->acme_dns_update)
        return key_usage_error(cfg, "acme-dns-update",
                               "--acme-dns-update and --acme-dns-hook: one or the other");
    if (!cfg->acme_dns_update != !cfg->acme_dns_tsig)
        return key_usage_error(cfg, cfg->acme_dns_tsig ? "acme-dns-tsig" : "acme-dns-update",
                               "--acme-dns-update and --acme-dns-tsig go together");
    for (int i = 0; i < cfg->num_acme_domains && !cfg->acme_dns_hook && !cfg->acme_dns_update; i++)
        if (cfg->acme_domains[i][0] == '*') {
            snprintf(why, sizeof(why),
                     "--acme-domain %s: a wildcard needs DNS-01 (--acme-dns-hook or "
                     "--acme-dns-update)",
                     cfg->acme_domains[i]);
            return key_usage_error(cfg, "acme-domain", why);
        }
    if (cfg->num_acme_dns_resolvers && !cfg->acme_dns_hook && !cfg->acme_dns_update)
        return key_usage_error(cfg, "acme-dns-resolver",
                               "--acme-dns-resolver needs --acme-dns-hook or --acme-dns-update");
    if (!cfg->acme_email && cfg->acme_ask)
        return key_usage_error(cfg, "acme-ask",
                               "--acme-ask needs --acme-email (certificates on demand are ACME's)");
    if (cfg->num_acme_domains && cfg->config_file)
        return key_usage_error(cfg, "acme-domain",
                               "--acme-domain is for a command line without --config (the "
                               "file's sites name the hosts)");
    /* automatic HTTPS brings the pairs, or a file's sites may bring theirs */
    if (cfg->tls && n == 0 && !cfg->config_file && !cfg->acme_email)
        return key_usage_error(cfg, "tls-port",
                               "--tls-port needs a --tls-cert FILE --tls-key FILE pair");
    if (!cfg->tls && n > 0) {
        snprintf(why, sizeof(why), "--tls-cert '%s' needs --tls-port", cfg->tls_certs[0].cert);
        return key_usage_error(cfg, "tls-cert", why);
    }
    if (!cfg->tls && (cfg->hsts || cfg->redirect_https))
        return key_usage_error(cfg, cfg->hsts ? "hsts" : "redirect-https",
                               cfg->hsts ? "--hsts needs --tls-port"
                                         : "--redirect-https needs --tls-port");
    if (cfg->tls && cfg->tls_port != 0 && cfg->tls_port == cfg->port)
        return key_usage_error(cfg, "tls-port",
                               "--tls-port must differ from --port (both are the "
                               "same)");
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
    if (!cfg->docroot) /* the file's sites each have their own */
        return 0;
    cfg->docroot_fd = open(cfg->docroot, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (cfg->docroot_fd < 0) {
        fprintf(stderr, "ringhttpd: cannot use document root '%s': %s\n", cfg->docroot,
                strerror(errno));
        return 1;
    }
    return 0;
}

static int site_error(const struct config *top, const struct config *site, const char *fmt,
                      const char *arg)
{
    fprintf(stderr, "ringhttpd: ");
    if (top->config_file && site->line)
        fprintf(stderr, "%s:%d: site: ", top->config_file, site->line);
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    return 1;
}

/* A problem with key's value at level c: "FILE:LINE: KEY: why" with the line that set it (a
 * site's inherited value: the top level's line), else as site_error says it. Returns 1. */
static int key_error(const struct config *top, const struct config *c, const char *key, int line,
                     const char *why)
{
    if (top->config_file && line > 0)
        fprintf(stderr, "ringhttpd: %s:%d: %s: %s\n", top->config_file, line, key, why);
    else
        site_error(top, c, "%s", why);
    return 1;
}

/* Whether running (the configuration serving now) has the pair f: same files, same site. */
static bool pair_running(const struct config *running, const struct config *top,
                         const struct config *c, int at)
{
    const struct config_cert *f = &c->tls_certs[at], *guess = NULL;
    if (!running)
        return false;
    /* A reload of thousands of sites lists them as it did: the same place is looked at first,
     * so checking 10,000 sites' pairs is not 10,000 searches of 10,000 (issue 40) */
    if (c == top && at < running->num_tls_certs)
        guess = &running->tls_certs[at];
    if (c != top && c - top->sites < running->num_sites &&
        at < running->sites[c - top->sites].num_tls_certs)
        guess = &running->sites[c - top->sites].tls_certs[at];
    if (guess && strcmp(guess->cert, f->cert) == 0 && strcmp(guess->key, f->key) == 0)
        return true;
    for (int i = 0; i < running->num_tls_certs; i++) {
        const struct config_cert *r = &running->tls_certs[i];
        if (strcmp(r->cert, f->cert) == 0 && strcmp(r->key, f->key) == 0)
            return true;
    }
    return false;
}

/* One level's own TLS pairs, read as the server's start reads them: a site's tls-cert/tls-key,
 * or the process's (the top level lists the sites' pairs too: those are checked with them), so
 * that a key that does not match its certificate is named with its file, line and key. A
 * reload (running set) reads only the pairs the running configuration does not have: one
 * running as --user may not read a key that only root can, and the reload keeps those
 * contexts when it cannot read them again (server.c). */
static int check_pairs(const struct config *top, const struct config *c,
                       const struct config *running)
{
    int rc = 0;
    /* A start reads its pairs once, where it loads them (the server names the one at fault
     * with its line): reading 10,000 here too doubled a start's work (issue 40). */
    if (!running && !top->check_only)
        return 0;
    for (int i = 0; i < c->num_tls_certs && (c == top || c->site_tls); i++) {
        const struct config_cert *f = &c->tls_certs[i];
        char why[PATH_MAX + 256];
        if (!top->checks || !top->checks->pair || (c == top && f->hosts) ||
            pair_running(running, top, c, i) ||
            top->checks->pair(f->cert, f->key, why, sizeof(why)) == 0)
            continue;
        /* the pair check names the file at fault: its key, and that key's line */
        bool key = strncmp(why, "--tls-key", 9) == 0;
        rc = key_error(top, c, key ? "tls-key" : "tls-cert", key ? f->key_line : f->cert_line, why);
    }
    return rc;
}

/* An error page or fallback that names no file below the root: not an error (the built-in
 * page, or a 404, is sent; the file may be deployed later), but said at start and by
 * --check-config (issue 36), as nginx says nothing and leaves the operator guessing. */
static void warn_missing_pages(const struct config *top, const struct config *c, int root)
{
    struct stat st;
    const char *file = top->config_file;
    for (int i = 0; i < c->num_error_pages + c->num_fallbacks; i++) {
        bool fb = i >= c->num_error_pages;
        const char *path = fb ? c->fallbacks[i - c->num_error_pages].path : c->error_pages[i].path;
        const char *key = fb ? "fallback" : "error-page";
        if (!path || (fstatat(root, path, &st, 0) == 0 && S_ISREG(st.st_mode)))
            continue;
        int line = options_line(c, key);
        fprintf(stderr, "ringhttpd: ");
        if (file && line)
            fprintf(stderr, "%s:%d: %s: ", file, line, key);
        else if (file && c->line)
            fprintf(stderr, "%s:%d: site: ", file, c->line);
        fprintf(stderr, "warning: --%s '/%s' is no file below '%s'%s\n", key, path, c->docroot,
                fb ? " (missing files get 404)" : " (the built-in page is sent)");
    }
}

/* Whether the access log can be opened for appending as the start will (issue 36: the check
 * said ok, the start then failed): the file writable, or its directory when it is missing. */
static int check_access_log(struct config *cfg)
{
    const char *p = cfg->access_log;
    if (!p || strcmp(p, "-") == 0)
        return 0;
    int rc = 0;
    if (access(p, W_OK) != 0) {
        rc = errno;
        if (rc == ENOENT) { /* created at start: its directory must exist and take it */
            const char *slash = strrchr(p, '/');
            char dir[PATH_MAX];
            snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - p) + 1 : 1, slash ? p : ".");
            rc = access(dir, W_OK | X_OK) == 0 ? 0 : errno;
        }
    }
    if (!rc)
        return 0;
    char why[PATH_MAX + 128];
    snprintf(why, sizeof(why), "--access-log '%s': %s", p, strerror(rc));
    return key_error(cfg, cfg, "access-log", options_line(cfg, "access-log"), why);
}

/* What the process-wide options need that no site has: said, not refused. */
static void warn_process(const struct config *cfg)
{
    if (cfg->http3 && !cfg->tls && options_given(cfg, "http3")) {
        int line = options_line(cfg, "http3");
        fprintf(stderr, "ringhttpd: ");
        if (cfg->config_file && line)
            fprintf(stderr, "%s:%d: http3: ", cfg->config_file, line);
        fprintf(stderr, "warning: --http3 on needs --tls-port (HTTP/3 is QUIC, always "
                        "encrypted): no UDP port is opened\n");
    }
}

/* One level's own files: its root, its htpasswd files, --mime-types and TLS pairs. */
static int check_level(const struct config *top, const struct config *c,
                       const struct config *running)
{
    int rc = 0;
    int fd = c->docroot ? open(c->docroot, O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
    if (!c->docroot && c == top) {
        fprintf(stderr,
                "ringhttpd: %s: names no 'root' and no 'sites', and no DOCROOT is given: "
                "nothing to serve (the working directory is never served by default with a "
                "file)\n",
                top->config_file);
        rc = 1;
    } else if (!c->docroot) {
        rc = site_error(top, c, "no 'root' (nor one at the top level or as DOCROOT)%s", "");
    } else if (fd < 0) {
        char why[PATH_MAX + 128];
        snprintf(why, sizeof(why), "cannot use document root '%s': %s", c->docroot,
                 strerror(errno));
        rc = key_error(top, c, "root", options_line(c, "root"), why);
    } else {
        if (!c->host_root) /* with {host}, the pages are each host's own */
            warn_missing_pages(top, c, fd);
        close(fd);
    }
    for (int i = 0; i < c->num_auths && top->checks && top->checks->htpasswd; i++) {
        char why[512];
        if (top->checks->htpasswd(c->auths[i].htpasswd, why, sizeof(why)) != 0)
            rc = key_error(top, c, "basic-auth", c->auth_lines[i], why);
    }
    /* the top level's is read after the check at start: --check-config must read it too */
    if (c->mime_file && (c == top || !top->mime_file || strcmp(c->mime_file, top->mime_file))) {
        struct mime_table types = {0};
        char why[PATH_MAX + 128];
        if (config_load_mime(c->mime_file, &types, why, sizeof(why)) != 0)
            rc = key_error(top, c, "mime-types", options_line(c, "mime-types"), why);
        mime_table_free(&types);
    }
    return check_pairs(top, c, running) ? 1 : rc;
}

/* What holds the configuration together: at most one default site, no host name twice, every
 * root a directory, every htpasswd and a site's own --mime-types file readable and valid, every
 * TLS pair's key matching its certificate (on a reload, with running the configuration serving
 * now, only the pairs it does not have). 0, or 1 after printing each problem (with its file
 * line, and for a pair its key). */
static int check(struct config *cfg, const struct config *running)
{
    int rc = 0, defaults = 0;
    /* the log is the process's, kept open over a reload (which may run as --user) */
    if (!running && check_access_log(cfg))
        rc = 1;
    if (!running)
        warn_process(cfg);
    if (!cfg->num_sites)
        return check_level(cfg, cfg, running) ? 1 : rc;
    if (check_pairs(cfg, cfg, running))
        rc = 1;
    if (cfg->mime_file) {
        struct mime_table types = {0};
        char why[PATH_MAX + 128];
        if (config_load_mime(cfg->mime_file, &types, why, sizeof(why)) != 0)
            rc = key_error(cfg, cfg, "mime-types", options_line(cfg, "mime-types"), why);
        mime_table_free(&types);
    }
    for (int i = 0; i < cfg->num_sites; i++) {
        const struct config *s = &cfg->sites[i];
        defaults += s->is_default;
        if (!s->num_hosts && !s->is_default)
            rc = site_error(cfg, s, "a site needs 'hosts' (or 'default: true')%s", "");
        if (s->is_default && defaults > 1)
            rc = site_error(cfg, s, "a second 'default: true' site%s", "");
        if (check_level(cfg, s, running))
            rc = 1;
        for (int h = 0; h < s->num_hosts; h++)
            for (int j = 0; j <= i; j++)
                for (int k = 0; k < (j == i ? h : cfg->sites[j].num_hosts); k++)
                    if (strcasecmp(s->hosts[h], cfg->sites[j].hosts[k]) == 0)
                        rc = site_error(cfg, s, "host '%s' is named by an earlier site too",
                                        s->hosts[h]);
    }
    return rc;
}

/* getopt's code for table entry i: its short name, or 256 + i. */
static int option_code(size_t i)
{
    const struct option_info *o = options_row(i);
    return o->short_name ? o->short_name : 256 + (int)i;
}

static const struct option_info *option_of(int code)
{
    const struct option_info *o;
    for (size_t i = 0; (o = options_row(i)); i++)
        if (!o->file_only && option_code(i) == code)
            return o;
    return NULL;
}

/* What getopt refused, said as an operator needs it (issue 36): a flag given a value, a value
 * missing, or an unknown option with the one it is likely a typo of. */
static int unknown_option(struct config *cfg, int opt, const char *arg)
{
    const struct option_info *flag = opt == '?' && optopt ? option_of(optopt) : NULL;
    char name[64];
    if (opt == ':')
        return usage_error("option '%s' needs a value", arg);
    if (flag)
        return usage_error("--%s takes no value (give it alone to turn it on), got '%s'",
                           flag->name, arg);
    snprintf(name, sizeof(name), "%.*s", (int)strcspn(arg + strspn(arg, "-"), "="),
             arg + strspn(arg, "-"));
    const char *near = strncmp(arg, "--", 2) == 0 ? options_near(name, false) : NULL;
    if (near)
        return usage_error("unknown option '%s' (did you mean --%s?)", arg, near);
    return usage_error("unknown option '%s'", arg);
}

/* Applies the command line: with first_pass only the options read before the file (--config,
 * --check-config, -h, --version), without it the rest, which override the file. */
static int apply_argv(struct config *cfg, int argc, char **argv, bool first_pass)
{
    enum { MAX_OPTIONS = CONFIG_MAX_OPTIONS }; /* options_init asserts the table fits */
    struct config_src src = {0};
    struct option longopts[MAX_OPTIONS + 1];
    char shorts[2 * MAX_OPTIONS + 2];
    size_t k = 0, s = 0;
    const struct option_info *t;
    int opt, rc;

    assert(options_count() <= MAX_OPTIONS);
    shorts[s++] = ':'; /* a missing value is ':', told apart from an unknown option */
    for (size_t i = 0; (t = options_row(i)); i++) {
        if (t->file_only)
            continue;
        longopts[k++] = (struct option){t->name, t->metavar ? required_argument : no_argument, NULL,
                                        option_code(i)};
        if (t->short_name) {
            shorts[s++] = t->short_name;
            if (t->metavar)
                shorts[s++] = ':';
        }
    }
    longopts[k] = (struct option){0};
    shorts[s] = '\0';
    cfg->src = &src;
    opterr = 0;
    optind = 0; /* glibc: a full restart of the scan */
    while ((opt = getopt_long(argc, argv, shorts, longopts, NULL)) != -1) {
        const struct option_info *o = option_of(opt);
        if (first_pass != (o && o->first))
            continue;
        if (!o)
            rc = unknown_option(cfg, opt, argv[optind - 1]);
        else
            rc = options_apply(cfg, o, optarg);
        if (rc != 0)
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
        const char *key = site->hsts ? "hsts" : "redirect-https";
        int line = options_line(site, key) ? options_line(site, key) : site->line;
        if (!cfg->tls && (site->hsts || site->redirect_https)) {
            fprintf(stderr, "ringhttpd: %s:%d: %s: needs tls-port at the top level\n", file, line,
                    key);
            return 2;
        }
        if (!site->site_tls)
            continue;
        if (site->num_tls_certs && !site->tls_certs[site->num_tls_certs - 1].key) {
            fprintf(stderr, "ringhttpd: %s:%d: tls-cert: '%s' has no tls-key after it\n", file,
                    site->tls_certs[site->num_tls_certs - 1].cert_line,
                    site->tls_certs[site->num_tls_certs - 1].cert);
            return 2;
        }
        if (!cfg->tls) {
            fprintf(stderr,
                    "ringhttpd: %s:%d: tls-cert: a site's pair needs tls-port at the top "
                    "level\n",
                    file, site->num_tls_certs ? site->tls_certs[0].cert_line : site->line);
            return 2;
        }
        for (int k = 0; k < site->num_tls_certs; k++) {
            site->tls_certs[k].hosts = site->hosts;
            site->tls_certs[k].num_hosts = site->num_hosts;
            if (options_add_cert(cfg, &site->tls_certs[k]) != 0) {
                fprintf(stderr, "ringhttpd: out of memory\n");
                return 1;
            }
        }
    }
    if (cfg->tls && cfg->num_tls_certs == 0 && !cfg->acme_email)
        return key_usage_error(cfg, "tls-port",
                               "--tls-port needs a --tls-cert FILE --tls-key FILE pair (at the "
                               "top level, or a site's tls-cert and tls-key)");
    return 0;
}

/* A root that names {host} (issue 40), split where it does: the directory before it becomes
 * the root (checked, opened, confined as any), the rest c->host_root. 0, or 2 after one line. */
static int split_host_root(struct config *top, struct config *c)
{
    const char *root = c->docroot, *at = root ? strstr(root, "{host}") : NULL;
    if (!at)
        return 0;
    size_t pre = (size_t)(at - root);
    const char *rest = at + strlen("{host}");
    if (pre == 0 || root[pre - 1] != '/' || (*rest && *rest != '/') || strstr(rest, "{host}")) {
        char why[PATH_MAX + 160];
        snprintf(why, sizeof(why),
                 "'%s': {host} must be one whole directory name of the path, once "
                 "(/srv/sites/{host}, /srv/sites/{host}/public)",
                 root);
        key_error(top, c, "root", options_line(c, "root"), why);
        return 2;
    }
    char *dir = options_strdup(top, root, pre > 1 ? pre - 1 : 1); /* "/{host}": "/" */
    char *tail = options_strdup(top, rest, strlen(rest));
    if (!dir || !tail) {
        fprintf(stderr, "ringhttpd: out of memory\n");
        return 1;
    }
    c->docroot = dir;
    c->host_root = tail;
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
    /* The working directory is served only when nothing names a root: no file (issue 25: a
     * file emptied by a tool that truncates before it writes must not serve it on SIGHUP). */
    if (rc == 0 && !cfg->docroot && !cfg->config_file)
        cfg->docroot = ".";
    if (rc == 0) /* before the sites copy the top level: they inherit its HSTS line */
        rc = tls_check(cfg);
    if (rc == 0 && doc)
        rc = cfgfile_sites(cfg, doc);
    if (rc == 0)
        rc = tls_sites(cfg);
    for (int i = -1; rc == 0 && i < cfg->num_sites; i++)
        rc = split_host_root(cfg, i < 0 ? cfg : &cfg->sites[i]);
    cfgfile_free(doc);
    return rc;
}

int config_parse(struct config *cfg, int argc, char **argv, const struct config_checks *checks)
{
    options_init(cfg);
    cfg->checks = checks;
    cfg->argc = argc;
    cfg->argv = argv;
    int rc = parse_layers(cfg, argc, argv);
    if (rc == 0)
        rc = check(cfg, NULL);
    if (cfg->check_only && rc != CONFIG_DONE) /* the caller prints the verdict (config_ok) */
        return rc == 0 ? CONFIG_DONE : 1;
    if (rc != 0)
        return rc;
    if (cfg->mime_file && (rc = load_mime_types(cfg, cfg->mime_file)) != 0)
        return rc;
    return open_docroot(cfg);
}

void config_ok(const struct config *cfg)
{
    printf("ringhttpd: %s: ok (%d site%s)\n", config_serves(cfg),
           cfg->num_sites ? cfg->num_sites : 1, cfg->num_sites > 1 ? "s" : "");
}

void config_free(struct config *cfg)
{
    options_free(cfg);
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
    options_init(fresh);
    fresh->checks = cfg->checks;
    /* getopt and --metrics write into their arguments: the copies live in fresh's pool */
    for (int i = 0; i < cfg->argc; i++)
        if (!(argv[i] = options_strdup(fresh, cfg->argv[i], strlen(cfg->argv[i])))) {
            snprintf(why, why_len, "out of memory");
            config_destroy(fresh);
            goto out;
        }
    if (parse_layers(fresh, cfg->argc, argv) != 0 || check(fresh, cfg) != 0) {
        snprintf(why, why_len, "%s has errors (see above)", cfg->config_file);
        config_destroy(fresh);
        goto out;
    }
    char what[256];
    if (options_restart_needed(cfg, fresh, what, sizeof(what)))
        snprintf(why, why_len, "%s changed in %s: takes effect at the next restart", what,
                 cfg->config_file);
    fresh->mime_file = cfg->mime_file; /* the MIME table is re-read from the path it started with */
    *out = fresh;
    rc = 0;
out:
    free(argv);
    return rc;
}

/* Whether fresh has site a: one host name in common, or neither names any (the default). */
static bool has_site(const struct config *fresh, const struct config *a)
{
    for (int j = 0; j < fresh->num_sites; j++) {
        const struct config *b = &fresh->sites[j];
        if (!a->num_hosts && !b->num_hosts)
            return true;
        for (int h = 0; h < a->num_hosts; h++)
            for (int k = 0; k < b->num_hosts; k++)
                if (strcasecmp(a->hosts[h], b->hosts[k]) == 0)
                    return true;
    }
    return false;
}

int config_reload_keeps_a_site(const struct config *running, const struct config *fresh, char *why,
                               size_t why_len)
{
    for (int i = 0; i < running->num_sites; i++)
        if (has_site(fresh, &running->sites[i]))
            return 0;
    if (!running->num_sites)
        return 0;
    const struct config *first = &running->sites[0];
    snprintf(why, why_len,
             "%s would drop every site the running configuration has (%s%s): refused; a "
             "restart replaces them all",
             fresh->config_file, first->num_hosts ? first->hosts[0] : "the default site",
             running->num_sites > 1 ? ", ..." : "");
    return -EINVAL;
}

const char *config_serves(const struct config *cfg)
{
    return cfg->num_sites ? cfg->config_file : cfg->docroot;
}
