/* The challenge answers, one job apart from acme.c's orders: each answer into the token table
 * and, but for DNS-01, a file of the state directory for the other processes sharing it; the
 * watcher thread mirrors theirs into ours. See acme_int.h. */
#include "server/acme/acme_int.h"

#include <errno.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <time.h>
#include <unistd.h>

#include "server/acme/dns01.h"
#include "site/tokens.h"
#include "config/config.h"
#include "rt/errlog.h"

/* ---- the challenge hooks: the token table ------------------------------------------------ */

/* Several processes may share the directory and the ports (--reuse-port, or instances behind one
 * address): the CA's validation may reach one that did not order. Every answer is also a file
 * of the directory, which every process's watcher mirrors into its own table. */
static void shared_name(enum acme_kind kind, const char *host, const char *token, char *out,
                        size_t cap)
{
    if (kind == ACME_HTTP01)
        snprintf(out, cap, "http-01.%s.%s" SHARED_SUFFIX, token, host);
    else
        snprintf(out, cap, "tls-alpn-01.%s" SHARED_SUFFIX, host);
}

/* host's TLS-ALPN-01 certificate for key_auth into the table. */
static int put_alpn(struct acme *a, const char *host, const char *key_auth)
{
    unsigned char digest[32];
    X509 *x = NULL;
    EVP_PKEY *k = NULL;
    jws_alpn_digest(key_auth, strlen(key_auth), digest);
    int rc = jws_alpn_cert(host, digest, (int64_t)time(NULL), &x, &k);
    if (rc == 0)
        rc = tokens_add_alpn(a->tokens, host, x, k);
    X509_free(x);
    EVP_PKEY_free(k);
    return rc;
}

/* DNS-01: the record is the world's to see, no table or shared file; its failure gets its
 * own line (the hook's exit, the server's refusal), the order's says only that it failed. */
static int put_dns(struct acme *a, const char *host, const char *key_auth)
{
    char err[512] = "";
    int rc = dns01_present(a->dns, host, key_auth, err, sizeof(err));
    if (rc && rc != -ECANCELED)
        errlog(ERRLOG_ERROR, "acme: dns-01 for %s: %s", host, err);
    return rc;
}

int acme_answer_put(void *arg, enum acme_kind kind, const char *host, const char *token,
                    const char *key_auth)
{
    struct acme *a = arg;
    if (kind == ACME_DNS01)
        return put_dns(a, host, key_auth);
    int rc = kind == ACME_HTTP01 ? tokens_add_http(a->tokens, host, token, key_auth)
                                 : put_alpn(a, host, key_auth);
    if (rc)
        return rc;
    char name[300];
    shared_name(kind, host, token, name, sizeof(name));
    int err = store_write(&a->store, name, key_auth, strlen(key_auth), 0600);
    if (err) { /* we still answer ourselves; only another process sharing the port cannot */
        errlog(ERRLOG_WARN, "acme: cannot share the challenge answer as %s/%s: %s",
               a->cfg->acme_state, name, strerror(-err));
        return 0;
    }
    /* The other processes' watchers see the file within milliseconds (inotify); the CA may
     * connect as soon as it is told the answer is ready, so they get a head start. */
    struct timespec ts = {0, SHARED_HEADSTART_NS};
    nanosleep(&ts, NULL);
    return 0;
}

void acme_answer_drop(void *arg, enum acme_kind kind, const char *host, const char *token)
{
    struct acme *a = arg;
    char name[300];
    if (kind == ACME_DNS01) { /* the value again from the token, as the client made it */
        if (jws_key_authorization(token, a->client.thumbprint, name, sizeof(name)))
            dns01_cleanup(a->dns, host, name);
        return;
    }
    shared_name(kind, host, token, name, sizeof(name));
    store_remove(&a->store, name);
    tokens_remove(a->tokens, host, kind == ACME_HTTP01 ? token : NULL);
}

/* ---- the watcher: other processes' answers ------------------------------------------------ */

/* name's kind, host and token (NULL for TLS-ALPN-01), in buf; false when it is not ours. */
static bool shared_parse(const char *name, char *buf, size_t cap, enum acme_kind *kind,
                         const char **host, const char **token)
{
    size_t n = strlen(name), sl = strlen(SHARED_SUFFIX);
    if (n >= cap || n <= sl)
        return false;
    memcpy(buf, name, n - sl);
    buf[n - sl] = '\0';
    if (strncmp(buf, "http-01.", 8) == 0) {
        char *dot = strchr(buf + 8, '.');
        if (!dot || dot == buf + 8)
            return false;
        *dot = '\0';
        *kind = ACME_HTTP01;
        *token = buf + 8;
        *host = dot + 1;
    } else if (strncmp(buf, "tls-alpn-01.", 12) == 0) {
        *kind = ACME_ALPN01;
        *token = NULL;
        *host = buf + 12;
    } else {
        return false;
    }
    return **host != '\0';
}

static void shared_seen(void *arg, const char *name)
{
    struct acme *a = arg;
    char buf[300], *data = NULL;
    const char *host, *token;
    enum acme_kind kind;
    size_t len;
    if (!shared_parse(name, buf, sizeof(buf), &kind, &host, &token) ||
        store_read(&a->store, name, &data, &len, 255) != 0)
        goto out;
    int i = 0;
    while (i < a->nshared && strcmp(a->shared[i].file, name) != 0)
        i++;
    if (i < a->nshared && strcmp(a->shared[i].key_auth, data) == 0) {
        a->shared[i].seen = true;
        goto out;
    }
    if (i == a->nshared && a->nshared == SHARED_MAX)
        goto out;
    int rc = kind == ACME_HTTP01 ? tokens_add_http(a->tokens, host, token, data)
                                 : put_alpn(a, host, data);
    if (rc)
        goto out;
    struct shared *sh = &a->shared[i];
    snprintf(sh->file, sizeof(sh->file), "%s", name);
    snprintf(sh->key_auth, sizeof(sh->key_auth), "%s", data);
    sh->seen = true;
    if (i == a->nshared)
        a->nshared++;
out:
    free(data);
}

/* The table gets the answers now in the directory and loses those gone from it. */
static void shared_refresh(struct acme *a)
{
    for (int i = 0; i < a->nshared; i++)
        a->shared[i].seen = false;
    if (store_list(&a->store, SHARED_SUFFIX, SHARED_AGE, shared_seen, a) != 0)
        return;
    for (int i = 0; i < a->nshared;) {
        char buf[300];
        const char *host, *token;
        enum acme_kind kind;
        if (a->shared[i].seen) {
            i++;
            continue;
        }
        if (shared_parse(a->shared[i].file, buf, sizeof(buf), &kind, &host, &token))
            tokens_remove(a->tokens, host, token);
        a->shared[i] = a->shared[--a->nshared];
    }
}

void *acme_watcher_main(void *arg)
{
    struct acme *a = arg;
    char events[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    shared_refresh(a);
    for (;;) {
        struct pollfd p[2] = {{.fd = a->stopfd, .events = POLLIN},
                              {.fd = a->watch, .events = POLLIN}};
        /* inotify for promptness; a look once a second anyway, for a network volume whose
         * other writers raise no event here (and when inotify's limits are reached) */
        int n = poll(p, a->watch >= 0 ? 2 : 1, 1000);
        if (n < 0 && errno != EINTR)
            break;
        if (p[0].revents)
            break;
        if (a->watch >= 0 && p[1].revents)
            while (read(a->watch, events, sizeof(events)) > 0)
                continue; /* which file does not matter: the directory is read again */
        shared_refresh(a);
    }
    return NULL;
}
