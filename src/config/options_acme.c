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
    if (!options_host_name_ok(arg, false))
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

static bool same_acme_domains(const struct config *a, const struct config *b)
{
    return options_same_list(a->acme_domains, a->num_acme_domains, b->acme_domains,
                             b->num_acme_domains);
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
};
const struct option_area options_acme = {rows, sizeof(rows) / sizeof(rows[0])};
