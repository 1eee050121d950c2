/* The options of automatic HTTPS (issue 27): their rows of the one table (options.c walks the
 * areas in --help's order) and their own setters. See options.h; options_int.h has what the areas
 * share. */
#include "config/options.h"
#include "config/options_int.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

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
    if (!options_host_name_ok(arg, true)) /* a wildcard needs DNS-01: config.c's tls_check */
        return usage_error("--acme-domain wants a host name, got '%s'", arg);
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

static bool same_acme_domains(const struct config *a, const struct config *b)
{
    return options_same_list(a->acme_domains, a->num_acme_domains, b->acme_domains,
                             b->num_acme_domains);
}

/* DNS-01 (issue 40): what each names is checked when dns01_new reads it at start (a server's
 * address resolved, the key file parsed); here only its form. */
static int set_acme_dns_hook(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)o;
    if (arg[0] != '/' || access(arg, X_OK) != 0)
        return usage_error("--acme-dns-hook wants an executable by its absolute path, got '%s'",
                           arg);
    cfg->acme_dns_hook = arg;
    return 0;
}

static int set_acme_dns_server(struct config *cfg, const struct option_info *o, char *arg)
{
    if (!arg[0] || strpbrk(arg, " \t/"))
        return usage_error("--%s wants SERVER[:PORT] like 127.0.0.1:53, [::1]:5353 or "
                           "ns1.example.org, got '%s'",
                           o->name, arg);
    if (o->list == LIST_NONE) {
        cfg->acme_dns_update = arg;
        return 0;
    }
    if (cfg->num_acme_dns_resolvers == CONFIG_MAX_DNS_RESOLVERS)
        return usage_error("--acme-dns-resolver: at most %d", CONFIG_MAX_DNS_RESOLVERS);
    cfg->acme_dns_resolvers[cfg->num_acme_dns_resolvers++] = arg;
    return 0;
}

static int set_acme_dns_tsig(struct config *cfg, const struct option_info *o, char *arg)
{
    (void)o;
    if (access(arg, R_OK) != 0)
        return usage_error("--acme-dns-tsig '%s': %s", arg, strerror(errno));
    cfg->acme_dns_tsig = arg;
    return 0;
}

static bool same_acme_dns_resolvers(const struct config *a, const struct config *b)
{
    return options_same_list(a->acme_dns_resolvers, a->num_acme_dns_resolvers,
                             b->acme_dns_resolvers, b->num_acme_dns_resolvers);
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

static const struct option_info rows[] = {
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
     .set = options_set_choice,
     .choices =
         (const struct option_choice[]){{"auto", 0}, {"http-01", 1}, {"tls-alpn-01", 2}, {NULL, 0}},
     .wants = "auto, http-01 or tls-alpn-01",
     .help = "auto, http-01 or tls-alpn-01 (auto: what the CA offers)"},
    {.name = "acme-dns-hook",
     .metavar = "CMD",
     PROCESS,
     FIELD(FIELD_STRING, acme_dns_hook),
     .set = set_acme_dns_hook,
     .help = "DNS-01 (wildcards): run CMD present|cleanup FQDN VALUE\n"
             "to put the TXT record in place and take it away"},
    {.name = "acme-dns-update",
     .metavar = "SERVER[:PORT]",
     PROCESS,
     FIELD(FIELD_STRING, acme_dns_update),
     .set = set_acme_dns_server,
     .help = "DNS-01 (wildcards): RFC 2136 UPDATE of the TXT record at\n"
             "this authoritative server, signed with --acme-dns-tsig"},
    {.name = "acme-dns-tsig",
     .names_file = OPTFILE_WHOLE,
     .metavar = "FILE",
     PROCESS,
     FIELD(FIELD_STRING, acme_dns_tsig),
     .set = set_acme_dns_tsig,
     .help = "the UPDATE's TSIG key (hmac-sha256), as tsig-keygen prints"},
    {.name = "acme-dns-resolver",
     .metavar = "ADDR[:PORT]",
     PROCESS,
     .list = LIST_DNS_RESOLVERS,
     .same = same_acme_dns_resolvers,
     .set = set_acme_dns_server,
     .help = "DNS-01: see the TXT record here before the CA is asked to\n"
             "validate (repeatable; default: the UPDATE's server, else\n"
             "/etc/resolv.conf's)"},
    {.name = "acme-ask",
     .metavar = "URL",
     PROCESS,
     FIELD(FIELD_STRING, acme_ask),
     .set = set_acme_ask,
     .help = "certificates on demand (a site's acme: on-demand): a name\n"
             "found in a handshake is approved when URL?domain=NAME\n"
             "answers 2xx (answers kept 10 minutes)"},
};
const struct option_area options_acme = {rows, sizeof(rows) / sizeof(rows[0])};
