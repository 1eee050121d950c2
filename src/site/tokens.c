/* The challenge answers; see tokens.h. */
#include "site/tokens.h"

#include <errno.h>
#include <openssl/evp.h>
#include <openssl/x509.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#define HOST_MAX 254
#define TOKEN_MAX 128
#define KEYAUTH_MAX 256

struct entry {
    char host[HOST_MAX];
    char token[TOKEN_MAX];      /* "" for a TLS-ALPN-01 certificate */
    char key_auth[KEYAUTH_MAX]; /* HTTP-01 */
    X509 *cert;                 /* TLS-ALPN-01 */
    EVP_PKEY *key;
};

struct tokens_snap {
    int n;
    struct entry e[];
};

int tokens_init(struct acme_tokens *t, int nreaders)
{
    *t = (struct acme_tokens){0};
    t->readers = calloc((size_t)nreaders, sizeof(*t->readers));
    struct tokens_snap *empty = calloc(1, sizeof(*empty));
    if (!t->readers || !empty) {
        free(t->readers);
        free(empty);
        return -ENOMEM;
    }
    t->nreaders = nreaders;
    for (int i = 0; i < nreaders; i++)
        t->readers[i].table = t;
    atomic_init(&t->cur, empty);
    pthread_mutex_init(&t->write, NULL);
    return 0;
}

static void snap_free(struct tokens_snap *s)
{
    for (int i = 0; s && i < s->n; i++) {
        X509_free(s->e[i].cert);
        EVP_PKEY_free(s->e[i].key);
    }
    free(s);
}

void tokens_fini(struct acme_tokens *t)
{
    snap_free(atomic_load(&t->cur));
    free(t->readers);
    pthread_mutex_destroy(&t->write);
}

struct tokens_reader *tokens_reader(struct acme_tokens *t, int i)
{
    return &t->readers[i];
}

/* The old snapshot is freed once no reader's hazard names it; a reader holds one for the few
 * instructions of a look-up, so the wait is short and bounded by readers, never by requests. */
static void retire(struct acme_tokens *t, struct tokens_snap *old)
{
    for (int i = 0; i < t->nreaders; i++)
        while (atomic_load(&t->readers[i].hazard) == old) {
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
    snap_free(old);
}

/* A copy of the current snapshot without the entries matching (host, token), with room for
 * one more: the writer's lock held. */
static struct tokens_snap *copy_without(struct acme_tokens *t, const char *host, const char *token)
{
    struct tokens_snap *cur = atomic_load(&t->cur);
    struct tokens_snap *s = calloc(1, sizeof(*s) + (size_t)(cur->n + 1) * sizeof(s->e[0]));
    if (!s)
        return NULL;
    for (int i = 0; i < cur->n; i++) {
        const struct entry *e = &cur->e[i];
        if (strcasecmp(e->host, host) == 0 && strcmp(e->token, token ? token : "") == 0)
            continue;
        s->e[s->n] = *e;
        if (e->cert)
            X509_up_ref(e->cert);
        if (e->key)
            EVP_PKEY_up_ref(e->key);
        s->n++;
    }
    return s;
}

static void publish(struct acme_tokens *t, struct tokens_snap *s)
{
    struct tokens_snap *old = atomic_exchange(&t->cur, s);
    retire(t, old);
}

int tokens_add_http(struct acme_tokens *t, const char *host, const char *token,
                    const char *key_auth)
{
    if (strlen(host) >= HOST_MAX || strlen(token) >= TOKEN_MAX || !*token ||
        strlen(key_auth) >= KEYAUTH_MAX)
        return -EINVAL;
    pthread_mutex_lock(&t->write);
    struct tokens_snap *s = copy_without(t, host, token);
    if (s) {
        struct entry *e = &s->e[s->n++];
        strcpy(e->host, host);
        strcpy(e->token, token);
        strcpy(e->key_auth, key_auth);
        publish(t, s);
    }
    pthread_mutex_unlock(&t->write);
    return s ? 0 : -ENOMEM;
}

int tokens_add_alpn(struct acme_tokens *t, const char *host, X509 *cert, EVP_PKEY *key)
{
    if (strlen(host) >= HOST_MAX)
        return -EINVAL;
    pthread_mutex_lock(&t->write);
    struct tokens_snap *s = copy_without(t, host, NULL);
    if (s) {
        struct entry *e = &s->e[s->n++];
        strcpy(e->host, host);
        X509_up_ref(cert);
        EVP_PKEY_up_ref(key);
        e->cert = cert;
        e->key = key;
        publish(t, s);
    }
    pthread_mutex_unlock(&t->write);
    return s ? 0 : -ENOMEM;
}

int tokens_remove(struct acme_tokens *t, const char *host, const char *token)
{
    pthread_mutex_lock(&t->write);
    struct tokens_snap *s = copy_without(t, host, token);
    if (s)
        publish(t, s);
    pthread_mutex_unlock(&t->write);
    return s ? 0 : -ENOMEM;
}

/* The current snapshot, named by r's hazard until release. */
static struct tokens_snap *acquire(struct acme_tokens *t, struct tokens_reader *r)
{
    struct tokens_snap *s;
    do {
        s = atomic_load(&t->cur);
        atomic_store(&r->hazard, s);
    } while (s != atomic_load(&t->cur));
    return s;
}

static void release(struct tokens_reader *r)
{
    atomic_store(&r->hazard, NULL);
}

/* host without ":port" and a final '.', compared to e's without case. */
static bool same_host(const char *want, const char *host, size_t len)
{
    const char *colon = host[0] == '[' ? NULL : memchr(host, ':', len);
    if (colon)
        len = (size_t)(colon - host);
    if (len && host[len - 1] == '.')
        len--;
    return len && strlen(want) == len && strncasecmp(want, host, len) == 0;
}

size_t tokens_http01(struct tokens_reader *r, const char *host, size_t host_len, const char *token,
                     size_t token_len, char *out, size_t cap)
{
    struct acme_tokens *t = r->table;
    size_t n = 0;
    if (!host || !token_len)
        return 0;
    struct tokens_snap *s = acquire(t, r);
    for (int i = 0; i < s->n; i++) {
        const struct entry *e = &s->e[i];
        if (!e->token[0] || strlen(e->token) != token_len ||
            memcmp(e->token, token, token_len) != 0 || !same_host(e->host, host, host_len))
            continue;
        size_t len = strlen(e->key_auth);
        if (len < cap) {
            memcpy(out, e->key_auth, len);
            n = len;
        }
        break;
    }
    release(r);
    return n;
}

int tokens_alpn(void *reader, const char *name, X509 **cert, EVP_PKEY **key)
{
    struct tokens_reader *r = reader;
    int rc = -ENOENT;
    if (!name)
        return rc;
    struct acme_tokens *t = r->table;
    struct tokens_snap *s = acquire(t, r);
    for (int i = 0; i < s->n; i++) {
        const struct entry *e = &s->e[i];
        if (e->token[0] || !e->cert || strcasecmp(e->host, name) != 0)
            continue;
        X509_up_ref(e->cert);
        EVP_PKEY_up_ref(e->key);
        *cert = e->cert;
        *key = e->key;
        rc = 0;
        break;
    }
    release(r);
    return rc;
}
