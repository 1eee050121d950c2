/* acme for ACME=no (make static): Debian ships no static libcurl dependencies (librtmp, libssh2,
 * GSSAPI, LDAP), so the static binary has no ACME client; --acme-email says so at start.
 * The same interface as acme.c (acme.h); nothing here runs. */
#include <errno.h>
#include <stdio.h>

#include "server/acme/acme.h"

int acme_new(struct acme **out, const struct config *cfg, struct acme_tokens *tokens,
             const struct acme_hooks *hooks, char *why, size_t why_len)
{
    (void)out, (void)cfg, (void)tokens, (void)hooks;
    snprintf(why, why_len,
             "--acme-email: this build has no ACME client (made with ACME=no, as make static "
             "is; the package's binary and the container image have it)");
    return -ENOTSUP;
}

int acme_pairs(struct acme *a, struct tls_cert_files **out, int *n, int *cap)
{
    (void)a, (void)out, (void)n, (void)cap;
    return 0;
}

int acme_start(struct acme *a)
{
    (void)a;
    return -ENOTSUP;
}

void acme_free(struct acme *a)
{
    (void)a;
}

void acme_describe(struct acme *a, FILE *f)
{
    (void)a, (void)f;
}

void acme_metrics(void *a, FILE *f)
{
    (void)a, (void)f;
}

int acme_names(struct acme *a, const struct config *cfg, char *why, size_t why_len)
{
    (void)a, (void)cfg;
    snprintf(why, why_len,
             "--acme-email: this build has no ACME client (made with ACME=no, as make static "
             "is; the package's binary and the container image have it)");
    return -ENOTSUP;
}
