/* acme for ACME=no (make static): Debian ships no static libcurl dependencies (librtmp, libssh2,
 * GSSAPI, LDAP), so the static binary has no ACME client; --acme-email says so at start.
 * The same interface as acme.c (acme.h); nothing here runs. */
#include <errno.h>
#include <stdio.h>

#include "server/acme/acme.h"
#include "server/acme/ondemand.h"

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

bool acme_ondemand_wanted(const struct config *cfg)
{
    (void)cfg;
    return false;
}

void *acme_ondemand_add(struct acme *a, const char *name)
{
    (void)a, (void)name;
    return NULL;
}

int acme_ondemand_status(struct acme *a, void *cert, char *path, size_t cap, int64_t *retry_at)
{
    (void)a, (void)cert, (void)path, (void)cap, (void)retry_at;
    return -ENOTSUP;
}

/* ondemand.h: never made (acme_new fails first). */
int ondemand_new(struct ondemand **out, const struct config *cfg, struct acme *a, int nreaders,
                 char *why, size_t why_len)
{
    (void)out, (void)cfg, (void)a, (void)nreaders;
    snprintf(why, why_len, "acme: on demand: this build has no ACME client");
    return -ENOTSUP;
}

struct ondemand_reader *ondemand_reader(struct ondemand *od, int i)
{
    (void)od, (void)i;
    return NULL;
}

const atomic_uint *ondemand_gen(const struct ondemand *od)
{
    (void)od;
    return NULL;
}

void ondemand_poke(struct ondemand *od)
{
    (void)od;
}

int ondemand_start(struct ondemand *od)
{
    (void)od;
    return -ENOTSUP;
}

void ondemand_stop(struct ondemand *od)
{
    (void)od;
}

void ondemand_free(struct ondemand *od)
{
    (void)od;
}

int ondemand_cert(void *arg, const char *name, bool late, struct x509_st **cert,
                  struct stack_st_X509 **chain, struct evp_pkey_st **key)
{
    (void)arg, (void)name, (void)late, (void)cert, (void)chain, (void)key;
    return 1;
}

void ondemand_metrics(void *od, FILE *f)
{
    (void)od, (void)f;
}
