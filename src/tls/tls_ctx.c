/* TLS contexts and certificates; see tls_ctx.h. */
#include "tls/tls_ctx.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <stdatomic.h>
#include <sys/stat.h>

#include <openssl/bio.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "core/vhost.h"
#include "rt/file.h"
#include "rt/names.h"

/* Mozilla's server-side TLS guidelines, "intermediate" (v5.7): TLS 1.2 suites with forward
 * secrecy and AEAD only; TLS 1.3 keeps OpenSSL's three suites. DHE uses the RFC 7919 group
 * OpenSSL picks for the certificate's strength (SSL_CTX_set_dh_auto). */
static const char intermediate_ciphers[] =
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
    "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
    "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:"
    "DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384:DHE-RSA-CHACHA20-POLY1305";
static const char tls13_suites[] =
    "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";
/* Key exchange groups (--tls-groups): the hybrid post-quantum one first where the linked
 * OpenSSL has it (3.5 and later; Debian 12's 3.0 has not), as browsers and Cloudflare offer. */
static const char kx_classic[] = "X25519:P-256:P-384";
static const char kx_hybrid[] = "X25519MLKEM768:X25519:P-256:P-384";

/* ALPN in wire format, server preference first. */
static const unsigned char alpn_http1[] = "\x08http/1.1";
static const unsigned char alpn_h2_http1[] = "\x02h2\x08http/1.1";
static const unsigned char alpn_acme[] = "\x0a"
                                         "acme-tls/1"; /* RFC 8737 6.2 */

struct tls_keys {
    unsigned char secret[32];
};

struct ticket_key {
    unsigned char name[16];
    unsigned char aes[32];  /* AES-256-CBC, as OpenSSL's own ticket keys (16: AES-128-CBC) */
    unsigned char hmac[32]; /* HMAC-SHA256 */
    unsigned char aes_len, hmac_len;
};

#define TICKET_FILES_MAX 16

/* A file as stat(2) saw it: a key whose file is the same is not read again (a reload running
 * as --user may not read a key only root can; the one loaded at start is still good). */
struct file_id {
    dev_t dev;
    ino_t ino;
    off_t size;
    struct timespec mtime, ctime;
};

/* One pair loaded: kept by the set, so the next load reuses what has not changed. */
struct pair {
    char *cert_path, *key_path;
    unsigned char cert_sum[32]; /* SHA-256 of the certificate file's bytes */
    struct file_id key_id;
    X509 *leaf;
    STACK_OF(X509) * chain;
    EVP_PKEY *key;
    unsigned char names[32]; /* SHA-256 of the leaf's subject and subjectAltName */
    int group;
};

/* One OpenSSL context: the pairs that share a name set (at most one per key type). */
struct tls_group {
    SSL_CTX *ssl;
    X509 *leaf;              /* its first certificate, which SNI names are matched against */
    char *site_name;         /* the first name of the first site whose pair it holds, or NULL */
    unsigned char sum[32];   /* over its pairs' files and contents: what a reload reuses it by */
    unsigned char names[32]; /* its pairs' names_sum */
};

/* A hash index of 32-byte sums to array positions (open addressing, position + 1; 0 free). */
struct sum_index {
    uint32_t *at;
    uint32_t mask;
};

/* Every worker's certificates (issue 40): loaded once per start or reload, read by every
 * worker's context; immutable once made, freed by the last tls_certs_put (any thread). */
struct tls_certs {
    atomic_uint refs;
    struct tls_group *groups;
    int num_groups;
    bool certless; /* group 0 has no certificate and only refuses */
    struct pair *pairs;
    int num_pairs;
    struct sum_index pair_sums, group_sums; /* by pair.cert_sum and tls_group.sum: reuse */
    int reused;                             /* groups taken over from the previous set */
    /* the sites' names (issue 19), each naming the group of its site's pair: SNI looks here
     * first, exact then wildcard, as a Host is routed */
    struct names sites;
    /* the certificates' own names (subjectAltName DNS, else the CN): then here, the group
     * found confirmed by X509_check_host (a wildcard covers one label) */
    struct names leaves;
    char warnings[1024];
};

struct tls_ctx {
    unsigned refs; /* the owner's one, plus one per connection: the worker's thread only */
    struct tls_challenge challenge;
    struct tls_ondemand ondemand;
    struct tls_certs *certs; /* a reference of its own */
    BIO_METHOD *bio;
    /* The one BIO every connection's SSL reads and writes through, pointed at the connection
     * before each call into OpenSSL (tls_record_bind): the worker's thread makes one call at a
     * time, and a BIO of its own (with its lock) cost every connection 208 bytes. */
    BIO *wire;
    const struct tls_keys *keys;
    bool alpn_h2;
    unsigned rotate;
    int64_t period; /* of cur; prev is period - 1 */
    struct ticket_key cur, prev;
    struct ticket_key *file_keys; /* --ticket-key-file's, the first encrypting; or NULL */
    int num_file_keys;
};

int tls_keys_new(struct tls_keys **out)
{
    struct tls_keys *k = calloc(1, sizeof(*k));
    if (!k)
        return -ENOMEM;
    if (RAND_priv_bytes(k->secret, sizeof(k->secret)) != 1) {
        ERR_clear_error();
        free(k);
        return -EIO;
    }
    *out = k;
    return 0;
}

void tls_keys_free(struct tls_keys *keys)
{
    if (keys)
        OPENSSL_cleanse(keys->secret, sizeof(keys->secret));
    free(keys);
}

/* ---- tickets ---------------------------------------------------------------------------- */

/* The key of a period, a function of the secret and the period only, so every worker (and every
 * context a reload makes) derives the same one without sharing anything mutable. */
static int derive_key(const struct tls_keys *keys, int64_t period, struct ticket_key *k)
{
    unsigned char msg[24], mac[64];
    size_t mac_len;
    memcpy(msg, "ringhttpd ticket", 16);
    for (int i = 0; i < 8; i++)
        msg[16 + i] = (unsigned char)((uint64_t)period >> (56 - 8 * i));
    if (!EVP_Q_mac(NULL, "HMAC", NULL, "SHA512", NULL, keys->secret, sizeof(keys->secret), msg,
                   sizeof(msg), mac, sizeof(mac), &mac_len))
        return -EIO;
    memcpy(k->aes, mac, 32);
    memcpy(k->hmac, mac + 32, 32);
    k->aes_len = k->hmac_len = 32;
    memcpy(msg, "ringhttpd tkname", 16);
    if (!EVP_Q_mac(NULL, "HMAC", NULL, "SHA256", NULL, keys->secret, sizeof(keys->secret), msg,
                   sizeof(msg), mac, sizeof(mac), &mac_len))
        return -EIO;
    memcpy(k->name, mac, 16);
    OPENSSL_cleanse(mac, sizeof(mac));
    return 0;
}

/* One --ticket-key-file into k: 0, or -errno with the reason in why. */
static int read_ticket_file(const char *path, struct ticket_key *k, char *why, size_t why_len)
{
    unsigned char buf[81];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int rc = -errno;
        snprintf(why, why_len, "--ticket-key-file '%s': %s", path, strerror(-rc));
        return rc;
    }
    ssize_t n = read(fd, buf, sizeof(buf));
    int rc = n < 0 ? -errno : 0;
    close(fd);
    if (rc == 0 && n != 48 && n != 80)
        rc = -EINVAL;
    if (rc != 0) {
        snprintf(why, why_len,
                 "--ticket-key-file '%s': %s (48 or 80 bytes, nginx's ssl_session_ticket_key "
                 "format: `openssl rand 80 > FILE`)",
                 path, rc == -EINVAL ? "wrong size" : strerror(-rc));
        OPENSSL_cleanse(buf, sizeof(buf));
        return rc;
    }
    memcpy(k->name, buf, 16);
    if (n == 80) { /* name, HMAC key, AES key: as nginx reads it */
        memcpy(k->hmac, buf + 16, 32);
        memcpy(k->aes, buf + 48, 32);
        k->aes_len = k->hmac_len = 32;
    } else { /* name, AES-128 key, HMAC key */
        memcpy(k->aes, buf + 16, 16);
        memcpy(k->hmac, buf + 32, 16);
        k->aes_len = k->hmac_len = 16;
    }
    OPENSSL_cleanse(buf, sizeof(buf));
    return 0;
}

static int read_ticket_files(struct tls_ctx *ctx, const struct tls_settings *s, char *why,
                             size_t why_len)
{
    if (s->num_ticket_key_files <= 0)
        return 0;
    if (s->num_ticket_key_files > TICKET_FILES_MAX) {
        snprintf(why, why_len, "--ticket-key-file: at most %d files", TICKET_FILES_MAX);
        return -EINVAL;
    }
    if (!(ctx->file_keys = calloc((size_t)s->num_ticket_key_files, sizeof(*ctx->file_keys)))) {
        snprintf(why, why_len, "out of memory");
        return -ENOMEM;
    }
    ctx->num_file_keys = s->num_ticket_key_files;
    for (int i = 0; i < s->num_ticket_key_files; i++) {
        int rc = read_ticket_file(s->ticket_key_files[i], &ctx->file_keys[i], why, why_len);
        if (rc != 0)
            return rc;
    }
    return 0;
}

void tls_ctx_set_time(struct tls_ctx *ctx, int64_t wall)
{
    int64_t period = wall / ctx->rotate;
    if (ctx->num_file_keys || period == ctx->period)
        return;
    /* A failed derivation leaves keys no ticket matches, and full handshakes go on. */
    if (derive_key(ctx->keys, period, &ctx->cur) != 0 ||
        derive_key(ctx->keys, period - 1, &ctx->prev) != 0) {
        ERR_clear_error();
        memset(&ctx->cur, 0, sizeof(ctx->cur));
        memset(&ctx->prev, 0, sizeof(ctx->prev));
    }
    ctx->period = period;
}

/* The --ticket-key-file key named name, or NULL. */
static const struct ticket_key *file_key(const struct tls_ctx *ctx, const unsigned char *name)
{
    for (int i = 0; i < ctx->num_file_keys; i++)
        if (memcmp(name, ctx->file_keys[i].name, 16) == 0)
            return &ctx->file_keys[i];
    return NULL;
}

/* The connection a callback runs for is the BIO's data (tls_record_bind, before the handshake
 * step that called the callback): SSL_set_app_data would cost every connection an ex_data
 * stack, two allocations (~96 bytes) kept while it lives. Its context is the worker's: the
 * OpenSSL contexts are every worker's (struct tls_certs), so no callback argument can be. */
static struct tls_conn *conn_of(SSL *ssl)
{
    return BIO_get_data(SSL_get_rbio(ssl));
}

static int ticket_cb(SSL *ssl, unsigned char name[16], unsigned char *iv, EVP_CIPHER_CTX *cctx,
                     EVP_MAC_CTX *hctx, int enc)
{
    struct tls_ctx *ctx = conn_of(ssl)->ctx;
    const struct ticket_key *k = NULL;
    int rc = 1;
    if (ctx->num_file_keys) {
        k = enc ? &ctx->file_keys[0] : file_key(ctx, name);
        if (!k)
            return 0; /* unknown key: a full handshake */
        if (k != &ctx->file_keys[0])
            rc = 2; /* good, but issue a ticket under the first file's key */
    } else if (enc || memcmp(name, ctx->cur.name, 16) == 0) {
        k = &ctx->cur;
    } else if (memcmp(name, ctx->prev.name, 16) == 0) {
        k = &ctx->prev;
        rc = 2; /* good, but issue a ticket under the current key */
    } else {
        return 0; /* unknown key: a full handshake */
    }
    if (enc) {
        if (RAND_bytes(iv, 16) != 1)
            return -1;
        memcpy(name, k->name, 16);
    }
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
        OSSL_PARAM_construct_end(),
    };
    if (!EVP_MAC_init(hctx, k->hmac, k->hmac_len, params))
        return -1;
    const EVP_CIPHER *cipher = k->aes_len == 16 ? EVP_aes_128_cbc() : EVP_aes_256_cbc();
    if (enc ? !EVP_EncryptInit_ex(cctx, cipher, NULL, k->aes, iv)
            : !EVP_DecryptInit_ex(cctx, cipher, NULL, k->aes, iv))
        return -1;
    return rc;
}

/* ---- sum indices ------------------------------------------------------------------------ */

static uint32_t sum_hash(const unsigned char sum[32])
{
    uint32_t h;
    memcpy(&h, sum, sizeof(h)); /* a SHA-256 is its own hash */
    return h;
}

static int sum_index_init(struct sum_index *x, size_t n)
{
    size_t slots = vhost_slots_for(n);
    if (!(x->at = calloc(slots, sizeof(*x->at))))
        return -ENOMEM;
    x->mask = (uint32_t)slots - 1;
    return 0;
}

/* Records that position i has sum (the first of equal sums stays). */
static void sum_index_add(struct sum_index *x, const unsigned char sum[32], int i,
                          const unsigned char *(*sum_of)(const void *base, int i), const void *base)
{
    for (uint32_t k = sum_hash(sum) & x->mask;; k = (k + 1) & x->mask) {
        if (!x->at[k]) {
            x->at[k] = (uint32_t)i + 1;
            return;
        }
        if (memcmp(sum_of(base, (int)x->at[k] - 1), sum, 32) == 0)
            return;
    }
}

/* The position recorded with sum, or -1. */
static int sum_index_find(const struct sum_index *x, const unsigned char sum[32],
                          const unsigned char *(*sum_of)(const void *base, int i), const void *base)
{
    if (!x->at)
        return -1;
    for (uint32_t k = sum_hash(sum) & x->mask; x->at[k]; k = (k + 1) & x->mask)
        if (memcmp(sum_of(base, (int)x->at[k] - 1), sum, 32) == 0)
            return (int)x->at[k] - 1;
    return -1;
}

/* ---- SNI and ALPN ----------------------------------------------------------------------- */

/* The group a ClientHello's name gets: a site's own (exact, else the longest wildcard) with
 * *by_site, else a certificate naming it, else -1. O(1) in the number of certificates. */
static int sni_group(const struct tls_certs *certs, const char *name, bool *by_site)
{
    int g = names_lookup(&certs->sites, name);
    *by_site = g >= 0;
    if (g >= 0)
        return g;
    g = names_lookup(&certs->leaves, name);
    /* vhost's wildcard covers any depth, a certificate's one label (RFC 6125 6.4.3) */
    if (g >= 0 && X509_check_host(certs->groups[g].leaf, name, 0, 0, NULL) != 1)
        g = -1;
    ERR_clear_error();
    return g;
}

static int servername_cb(SSL *ssl, int *alert, void *arg)
{
    (void)arg;
    struct tls_conn *c = conn_of(ssl);
    const struct tls_certs *certs = c->ctx->certs;
    const char *name = SSL_get_servername(ssl, TLSEXT_NAMETYPE_host_name);
    if (c->acme || c->ondemand)
        return SSL_TLSEXT_ERR_OK; /* client_hello_cb gave it its certificate */
    c->by_site = false;
    c->group = 0;
    if (!name || certs->num_groups < 2) {
        if (!certs->certless)
            return SSL_TLSEXT_ERR_OK;
        *alert = SSL_AD_UNRECOGNIZED_NAME; /* no certificate yet (issue 27): say so */
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    }
    bool by_site;
    int g = sni_group(certs, name, &by_site);
    c->by_site = by_site;
    if (g < 0 && certs->certless) {
        *alert = SSL_AD_UNRECOGNIZED_NAME;
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    }
    /* An unknown name gets the default certificate, as nginx's default server does. */
    if (g > 0 && !SSL_set_SSL_CTX(ssl, certs->groups[g].ssl))
        return SSL_TLSEXT_ERR_ALERT_FATAL;
    if (g > 0)
        c->group = g;
    return SSL_TLSEXT_ERR_OK;
}

/* Whether the ClientHello's ALPN list (RFC 7301 3.1) offers acme-tls/1. */
static bool offers_acme(SSL *ssl)
{
    const unsigned char *p;
    size_t len;
    if (!SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_application_layer_protocol_negotiation, &p,
                                   &len) ||
        len < 2 || (size_t)(p[0] << 8 | p[1]) != len - 2)
        return false;
    for (size_t i = 2; i < len;) {
        size_t n = p[i];
        if (i + 1 + n > len)
            return false;
        if (n == sizeof(alpn_acme) - 2 && memcmp(p + i + 1, alpn_acme + 1, n) == 0)
            return true;
        i += 1 + n;
    }
    return false;
}

/* The host_name of the ClientHello's server_name extension (RFC 6066 3) into out. */
static bool hello_sni(SSL *ssl, char *out, size_t cap)
{
    const unsigned char *p;
    size_t len;
    if (!SSL_client_hello_get0_ext(ssl, TLSEXT_TYPE_server_name, &p, &len) || len < 5 ||
        (size_t)(p[0] << 8 | p[1]) != len - 2 || p[2] != TLSEXT_NAMETYPE_host_name)
        return false;
    size_t n = (size_t)(p[3] << 8 | p[4]);
    if (n == 0 || n + 5 > len || n >= cap || memchr(p + 5, 0, n))
        return false;
    memcpy(out, p + 5, n);
    out[n] = '\0';
    return true;
}

/* Issue 40: a name no certificate of the set covers may be one to get a certificate for now
 * (tls_ondemand): the hook says whether, and the handshake parks while it is being decided or
 * issued (SSL_CLIENT_HELLO_RETRY keeps the ClientHello; OpenSSL calls us again on the next
 * SSL_do_handshake). */
static int on_demand(SSL *ssl, struct tls_conn *c, int *alert)
{
    const struct tls_ctx *ctx = c->ctx;
    char name[256];
    bool by_site;
    X509 *x = NULL;
    STACK_OF(X509) *chain = NULL;
    EVP_PKEY *k = NULL;
    if (!hello_sni(ssl, name, sizeof(name)) || sni_group(ctx->certs, name, &by_site) >= 0)
        return SSL_CLIENT_HELLO_SUCCESS;
    int rc = ctx->ondemand.cert(ctx->ondemand.arg, name, c->late, &x, &chain, &k);
    if (rc > 0)
        return SSL_CLIENT_HELLO_SUCCESS;
    if (rc == -EINPROGRESS && !c->late)
        return SSL_CLIENT_HELLO_RETRY;
    if (rc < 0) {
        *alert = SSL_AD_UNRECOGNIZED_NAME;
        return SSL_CLIENT_HELLO_ERROR;
    }
    /* The default pair's certificates go: a client must not be offered one that does not name
     * it beside the one that does. */
    SSL_certs_clear(ssl);
    int ok = SSL_use_cert_and_key(ssl, x, k, chain, 1);
    X509_free(x);
    EVP_PKEY_free(k);
    sk_X509_pop_free(chain, X509_free);
    if (ok != 1) {
        ERR_clear_error();
        *alert = SSL_AD_INTERNAL_ERROR;
        return SSL_CLIENT_HELLO_ERROR;
    }
    c->ondemand = true;
    c->by_site = true; /* the request must go to the site SNI names, as with a site's own pair */
    return SSL_CLIENT_HELLO_SUCCESS;
}

/* RFC 8737: a ClientHello that offers acme-tls/1 is a CA validating a name. It gets the
 * challenge certificate for its SNI name, if one is pending, and never a real one. Else a name
 * may be one for a certificate on demand. */
static int client_hello_cb(SSL *ssl, int *alert, void *arg)
{
    (void)arg;
    struct tls_conn *c = conn_of(ssl);
    const struct tls_ctx *ctx = c->ctx;
    char name[256];
    X509 *x = NULL;
    EVP_PKEY *k = NULL;
    if (!ctx->challenge.cert || !offers_acme(ssl))
        return ctx->ondemand.cert && !c->ondemand ? on_demand(ssl, c, alert)
                                                  : SSL_CLIENT_HELLO_SUCCESS;
    if (!hello_sni(ssl, name, sizeof(name)) ||
        ctx->challenge.cert(ctx->challenge.arg, name, &x, &k) != 0) {
        *alert = SSL_AD_UNRECOGNIZED_NAME;
        return SSL_CLIENT_HELLO_ERROR;
    }
    int ok = SSL_use_cert_and_key(ssl, x, k, NULL, 1);
    X509_free(x);
    EVP_PKEY_free(k);
    if (ok != 1) {
        *alert = SSL_AD_INTERNAL_ERROR;
        return SSL_CLIENT_HELLO_ERROR;
    }
    c->acme = true;
    return SSL_CLIENT_HELLO_SUCCESS;
}

static int alpn_cb(SSL *ssl, const unsigned char **out, unsigned char *out_len,
                   const unsigned char *in, unsigned in_len, void *arg)
{
    (void)arg;
    const struct tls_conn *c = conn_of(ssl);
    const struct tls_ctx *ctx = c->ctx;
    const unsigned char *ours = ctx->alpn_h2 ? alpn_h2_http1 : alpn_http1;
    unsigned ours_len = ctx->alpn_h2 ? sizeof(alpn_h2_http1) - 1 : sizeof(alpn_http1) - 1;
    if (c->acme) { /* a validation: acme-tls/1 only */
        ours = alpn_acme;
        ours_len = sizeof(alpn_acme) - 1;
    }
    unsigned char *chosen;
    if (SSL_select_next_proto(&chosen, out_len, ours, ours_len, in, in_len) !=
        OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_NOACK; /* no common protocol: go on without ALPN, as nginx */
    *out = chosen;
    return SSL_TLSEXT_ERR_OK;
}

/* ---- loading certificates --------------------------------------------------------------- */

static void warn(char *warnings, size_t cap, const char *fmt, const char *file, const ASN1_TIME *t)
{
    struct tm tm;
    char when[32] = "?";
    if (ASN1_TIME_to_tm(t, &tm))
        strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S UTC", &tm);
    size_t used = strlen(warnings);
    snprintf(warnings + used, cap - used, fmt, file, when);
}

/* What a loaded pair says about its dates, into warnings[0..cap). */
static void warn_dates(char *warnings, size_t cap, const struct pair *p)
{
    if (X509_cmp_current_time(X509_get0_notAfter(p->leaf)) < 0)
        warn(warnings, cap, "--tls-cert '%s' expired on %s; clients will refuse it\n", p->cert_path,
             X509_get0_notAfter(p->leaf));
    else if (X509_cmp_current_time(X509_get0_notBefore(p->leaf)) > 0)
        warn(warnings, cap, "--tls-cert '%s' is not valid before %s; clients will refuse it\n",
             p->cert_path, X509_get0_notBefore(p->leaf));
}

static void pair_free(struct pair *p)
{
    X509_free(p->leaf);
    sk_X509_pop_free(p->chain, X509_free);
    EVP_PKEY_free(p->key);
    free(p->cert_path);
    free(p->key_path);
}

#define PEM_MAX (1 << 20) /* a certificate chain or key file larger than this is not one */

/* A whole file into a buffer of the caller's (free it) and its identity: 0 or -errno. */
static int read_whole(const char *path, char **out, size_t *len, struct file_id *id)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC), rc = 0;
    struct stat st;
    char *buf = NULL;
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) != 0) {
        rc = -errno;
        goto out;
    }
    if (st.st_size > PEM_MAX) {
        rc = -EFBIG;
        goto out;
    }
    if (!(buf = malloc((size_t)st.st_size + 1))) {
        rc = -ENOMEM;
        goto out;
    }
    if ((rc = file_read_all(fd, buf, (uint64_t)st.st_size)) != 0)
        goto out;
    *len = (size_t)st.st_size;
    if (id)
        *id = (struct file_id){st.st_dev, st.st_ino, st.st_size, st.st_mtim, st.st_ctim};
out:
    close(fd);
    if (rc)
        free(buf);
    else
        *out = buf;
    return rc;
}

static int file_identity(const char *path, struct file_id *id)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return -errno;
    *id = (struct file_id){st.st_dev, st.st_ino, st.st_size, st.st_mtim, st.st_ctim};
    return 0;
}

static bool same_file(const struct file_id *a, const struct file_id *b)
{
    return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
           a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec &&
           a->ctime.tv_sec == b->ctime.tv_sec && a->ctime.tv_nsec == b->ctime.tv_nsec;
}

static bool sha256(const void *a, size_t alen, const void *b, size_t blen, unsigned char out[32])
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    bool ok = md && EVP_DigestInit_ex(md, EVP_sha256(), NULL) && EVP_DigestUpdate(md, a, alen) &&
              (!blen || EVP_DigestUpdate(md, b, blen)) && EVP_DigestFinal_ex(md, out, NULL);
    EVP_MD_CTX_free(md);
    return ok;
}

/* The sum two certificates with the same names share: their subject and subjectAltName. */
static bool names_sum(X509 *x, unsigned char out[32])
{
    unsigned char *der = NULL;
    int len = i2d_X509_NAME(X509_get_subject_name(x), &der);
    if (len < 0)
        return false;
    int at = X509_get_ext_by_NID(x, NID_subject_alt_name, -1);
    const ASN1_OCTET_STRING *san = at >= 0 ? X509_EXTENSION_get_data(X509_get_ext(x, at)) : NULL;
    bool ok = sha256(der, (size_t)len, san ? ASN1_STRING_get0_data(san) : NULL,
                     san ? (size_t)ASN1_STRING_length(san) : 0, out);
    OPENSSL_free(der);
    return ok;
}

/* A pair from its files (the certificate's bytes in cert, cert_len), key identity id: 0, or
 * -errno with the file at fault in why. */
static int parse_pair(const struct tls_cert_files *f, const char *cert, size_t cert_len,
                      struct pair *p, char *why, size_t why_len)
{
    int rc = -EINVAL;
    char *kbuf = NULL;
    size_t klen;
    BIO *cb = BIO_new_mem_buf(cert, (int)cert_len), *kb = NULL;
    if (!cb) {
        rc = -ENOMEM;
        snprintf(why, why_len, "--tls-cert '%s': out of memory", f->cert);
        goto out;
    }
    if (!(p->leaf = PEM_read_bio_X509(cb, NULL, NULL, NULL))) {
        snprintf(why, why_len, "--tls-cert '%s': no PEM certificate in it", f->cert);
        goto out;
    }
    if (!(p->chain = sk_X509_new_null())) {
        rc = -ENOMEM;
        snprintf(why, why_len, "--tls-cert '%s': out of memory", f->cert);
        goto out;
    }
    X509 *x;
    while ((x = PEM_read_bio_X509(cb, NULL, NULL, NULL))) {
        if (!sk_X509_push(p->chain, x)) {
            X509_free(x);
            rc = -ENOMEM;
            snprintf(why, why_len, "--tls-cert '%s': out of memory", f->cert);
            goto out;
        }
    }
    ERR_clear_error(); /* the end of the file reads as "no start line" */
    if ((rc = read_whole(f->key, &kbuf, &klen, &p->key_id)) != 0) {
        snprintf(why, why_len, "--tls-key '%s': %s", f->key,
                 rc == -EFBIG ? "too large for a key" : strerror(-rc));
        goto out;
    }
    rc = -EINVAL;
    if (!(kb = BIO_new_mem_buf(kbuf, (int)klen)) ||
        !(p->key = PEM_read_bio_PrivateKey(kb, NULL, NULL, NULL))) {
        snprintf(why, why_len, "--tls-key '%s': no PEM private key in it (or it is encrypted)",
                 f->key);
        goto out;
    }
    if (X509_check_private_key(p->leaf, p->key) != 1) {
        snprintf(why, why_len, "--tls-key '%s' does not match the certificate in '%s'", f->key,
                 f->cert);
        goto out;
    }
    if (!names_sum(p->leaf, p->names)) {
        rc = -ENOMEM;
        snprintf(why, why_len, "--tls-cert '%s': out of memory", f->cert);
        goto out;
    }
    rc = 0;
out:
    BIO_free(cb);
    BIO_free(kb);
    if (kbuf)
        OPENSSL_cleanse(kbuf, klen);
    free(kbuf);
    ERR_clear_error();
    return rc;
}

static const unsigned char *pair_sum_of(const void *base, int i)
{
    return ((const struct pair *)base)[i].cert_sum;
}

static const unsigned char *group_sum_of(const void *base, int i)
{
    return ((const struct tls_group *)base)[i].sum;
}

/* Pair f into p: the previous set's pair when its files are the same (paths, the certificate's
 * bytes, the key file's identity), else read. 0, or -errno with the file at fault in why. */
static int load_pair(const struct tls_cert_files *f, const struct tls_certs *prev, struct pair *p,
                     char *why, size_t why_len)
{
    char *cert = NULL;
    size_t len = 0;
    *p = (struct pair){.group = -1};
    int rc = read_whole(f->cert, &cert, &len, NULL);
    if (rc != 0) {
        snprintf(why, why_len, "--tls-cert '%s': %s", f->cert,
                 rc == -EFBIG ? "too large for a certificate" : strerror(-rc));
        return rc;
    }
    if (!(p->cert_path = strdup(f->cert)) || !(p->key_path = strdup(f->key)) ||
        !sha256(cert, len, NULL, 0, p->cert_sum)) {
        rc = -ENOMEM;
        snprintf(why, why_len, "TLS: out of memory");
        goto out;
    }
    /* The same certificate bytes may be several pairs' (one file, two keys): walk them all. */
    struct file_id key_id = {0};
    int at = prev ? sum_index_find(&prev->pair_sums, p->cert_sum, pair_sum_of, prev->pairs) : -1;
    if (at >= 0 && file_identity(f->key, &key_id) == 0) {
        for (int i = at; i < prev->num_pairs; i++) {
            const struct pair *q = &prev->pairs[i];
            if (memcmp(q->cert_sum, p->cert_sum, 32) == 0 && strcmp(q->cert_path, f->cert) == 0 &&
                strcmp(q->key_path, f->key) == 0 && same_file(&q->key_id, &key_id)) {
                X509_up_ref(q->leaf);
                EVP_PKEY_up_ref(q->key);
                if (!(p->chain = X509_chain_up_ref(q->chain))) {
                    X509_free(q->leaf);
                    EVP_PKEY_free(q->key);
                    break;
                }
                p->leaf = q->leaf;
                p->key = q->key;
                p->key_id = q->key_id;
                memcpy(p->names, q->names, 32);
                goto out; /* rc 0 */
            }
        }
    }
    rc = parse_pair(f, cert, len, p, why, why_len);
out:
    free(cert);
    return rc;
}

/* Whether this OpenSSL takes list as a group list. */
static bool groups_known(const char *list)
{
    SSL_CTX *ssl = SSL_CTX_new(TLS_server_method());
    bool ok = ssl && SSL_CTX_set1_groups_list(ssl, list) == 1;
    SSL_CTX_free(ssl);
    ERR_clear_error();
    return ok;
}

const char *tls_default_groups(void)
{
    /* Asked of the library each time: a start asks it twice or so, per context made. */
    return groups_known(kx_hybrid) ? kx_hybrid : kx_classic;
}

int tls_groups_check(const char *list, char *why, size_t why_len)
{
    if (groups_known(list))
        return 0;
    snprintf(why, why_len,
             "--tls-groups '%s': a group this OpenSSL (%s) does not know; it knows e.g. %s", list,
             OpenSSL_version(OPENSSL_VERSION), tls_default_groups());
    return -EINVAL;
}

/* An OpenSSL context for every worker: its callbacks find the worker's context through the
 * connection (conn_of). groups is what tls_default_groups said, asked once per load. */
static SSL_CTX *make_ssl_ctx(const struct tls_settings *s, const char *groups)
{
    SSL_CTX *ssl = SSL_CTX_new(TLS_server_method());
    if (!ssl)
        return NULL;
    /* SSL_MODE_RELEASE_BUFFERS: an idle connection holds no record buffers. No renegotiation,
     * no compression, no 0-RTT (max early data stays 0); tickets only, no server-side cache. */
    SSL_CTX_set_mode(ssl, SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_options(ssl, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
    SSL_CTX_clear_options(ssl, SSL_OP_CIPHER_SERVER_PREFERENCE); /* "intermediate": off */
    SSL_CTX_set_session_cache_mode(ssl, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_max_early_data(ssl, 0);
    /* One TLS 1.3 ticket per full handshake (OpenSSL sends 2): each costs an encryption, and a
     * client resumes with one; a ticket used is replaced by the resumed handshake. */
    SSL_CTX_set_num_tickets(ssl, 1);
    /* A session lives as long as its ticket key can decrypt it: two periods (a day by
     * default, Mozilla's ssl_session_timeout). */
    unsigned rotate = s->ticket_rotate ? s->ticket_rotate : TLS_TICKET_ROTATE;
    SSL_CTX_set_timeout(ssl, (long)rotate * 2);
    if (!SSL_CTX_set_min_proto_version(ssl,
                                       s->min_version == 13 ? TLS1_3_VERSION : TLS1_2_VERSION) ||
        !SSL_CTX_set_cipher_list(ssl, intermediate_ciphers) ||
        !SSL_CTX_set_ciphersuites(ssl, tls13_suites) || !SSL_CTX_set1_groups_list(ssl, groups) ||
        !SSL_CTX_set_dh_auto(ssl, 1) || !SSL_CTX_set_tlsext_ticket_key_evp_cb(ssl, ticket_cb) ||
        !SSL_CTX_set_tlsext_servername_callback(ssl, servername_cb)) {
        SSL_CTX_free(ssl);
        return NULL;
    }
    SSL_CTX_set_alpn_select_cb(ssl, alpn_cb, NULL);
    /* every context may be a worker's with automatic HTTPS: the callback asks the worker's */
    SSL_CTX_set_client_hello_cb(ssl, client_hello_cb, NULL);
    return ssl;
}

static void certs_free(struct tls_certs *c)
{
    for (int i = 0; i < c->num_groups; i++) {
        SSL_CTX_free(c->groups[i].ssl);
        X509_free(c->groups[i].leaf);
        free(c->groups[i].site_name);
    }
    free(c->groups);
    for (int i = 0; i < c->num_pairs; i++)
        pair_free(&c->pairs[i]);
    free(c->pairs);
    free(c->pair_sums.at);
    free(c->group_sums.at);
    names_free(&c->sites);
    names_free(&c->leaves);
    free(c);
}

void tls_certs_put(struct tls_certs *c)
{
    if (c && atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) == 1)
        certs_free(c);
}

const char *tls_certs_warnings(const struct tls_certs *c)
{
    return c->warnings;
}

int tls_certs_count(const struct tls_certs *c, int *reused)
{
    if (reused)
        *reused = c->reused;
    return c->num_groups - c->certless;
}

/* The certificate's own names (DNS subjectAltNames, else its subject's CN) for group g. */
static int leaf_names(struct names *n, X509 *leaf, int g)
{
    int rc = 0, pushed = 0;
    GENERAL_NAMES *gens = X509_get_ext_d2i(leaf, NID_subject_alt_name, NULL, NULL);
    for (int i = 0; gens && rc == 0 && i < sk_GENERAL_NAME_num(gens); i++) {
        const GENERAL_NAME *gn = sk_GENERAL_NAME_value(gens, i);
        if (gn->type != GEN_DNS)
            continue;
        const unsigned char *d = ASN1_STRING_get0_data(gn->d.dNSName);
        int len = ASN1_STRING_length(gn->d.dNSName);
        if (len <= 0 || len > VHOST_NAME_MAX || memchr(d, 0, (size_t)len))
            continue;
        rc = names_push(n, (const char *)d, (size_t)len, g);
        pushed++;
    }
    GENERAL_NAMES_free(gens);
    if (rc == 0 && pushed == 0) {
        char cn[VHOST_NAME_MAX + 1];
        int len =
            X509_NAME_get_text_by_NID(X509_get_subject_name(leaf), NID_commonName, cn, sizeof(cn));
        if (len > 0)
            rc = names_push(n, cn, (size_t)len, g);
    }
    ERR_clear_error();
    return rc;
}

static const unsigned char *group_names_of(const void *base, int i)
{
    return ((const struct tls_group *)base)[i].names;
}

/* sum = SHA-256(sum || data): a group's sum over its pairs, one pair at a time. */
static bool fold(unsigned char sum[32], const void *data, size_t len)
{
    unsigned char in[32];
    memcpy(in, sum, 32);
    return sha256(in, 32, data, len, sum);
}

static bool fold_pair(unsigned char sum[32], const struct pair *p)
{
    const struct file_id *k = &p->key_id;
    int64_t id[8] = {(int64_t)k->dev,  (int64_t)k->ino, (int64_t)k->size, k->mtime.tv_sec,
                     k->mtime.tv_nsec, k->ctime.tv_sec, k->ctime.tv_nsec, 0};
    return fold(sum, p->cert_sum, 32) && fold(sum, p->cert_path, strlen(p->cert_path) + 1) &&
           fold(sum, p->key_path, strlen(p->key_path) + 1) && fold(sum, id, sizeof(id));
}

/* Every pair of s into c's groups (loaded, or prev's where the files are the same). */
static int load_pairs(struct tls_certs *c, const struct tls_settings *s,
                      const struct tls_certs *prev, char *why, size_t why_len)
{
    struct sum_index by_names = {0};
    int rc = sum_index_init(&by_names, (size_t)s->num_certs);
    for (int i = 0; rc == 0 && i < s->num_certs; i++) {
        struct pair *p = &c->pairs[i];
        if ((rc = load_pair(&s->certs[i], prev, p, why, why_len)) != 0) {
            pair_free(p); /* what it had made before it failed */
            break;
        }
        c->num_pairs++;
        warn_dates(c->warnings, sizeof(c->warnings), p);
        int g = sum_index_find(&by_names, p->names, group_names_of, c->groups);
        if (g < 0) {
            g = c->num_groups++;
            struct tls_group *gr = &c->groups[g];
            X509_up_ref(p->leaf);
            gr->leaf = p->leaf;
            memcpy(gr->names, p->names, 32);
            sum_index_add(&by_names, gr->names, g, group_names_of, c->groups);
        }
        p->group = g;
        if (!fold_pair(c->groups[g].sum, p)) {
            snprintf(why, why_len, "TLS: out of memory");
            rc = -ENOMEM;
        }
    }
    free(by_names.at);
    return rc;
}

/* Each group's OpenSSL context: the previous set's when the group's pairs are the same files
 * with the same contents (a reload of 10,000 sites makes only the changed ones), else new. */
static int make_groups(struct tls_certs *c, const struct tls_settings *s,
                       const struct tls_certs *prev, char *why, size_t why_len)
{
    const char *kx = s->kx_groups ? s->kx_groups : tls_default_groups();
    int rc = 0;
    if (c->certless && !(c->groups[0].ssl = make_ssl_ctx(s, kx)))
        goto no_ctx;
    for (int g = c->certless; prev && g < c->num_groups; g++) {
        int at = sum_index_find(&prev->group_sums, c->groups[g].sum, group_sum_of, prev->groups);
        if (at >= 0 && SSL_CTX_up_ref(prev->groups[at].ssl)) {
            c->groups[g].ssl = prev->groups[at].ssl;
            c->reused++;
        }
    }
    bool *fresh = calloc((size_t)c->num_groups, sizeof(*fresh));
    if (!fresh)
        goto no_mem;
    for (int i = 0; rc == 0 && i < c->num_pairs; i++) {
        struct pair *p = &c->pairs[i];
        struct tls_group *gr = &c->groups[p->group];
        if (!gr->ssl) {
            if (!(gr->ssl = make_ssl_ctx(s, kx))) {
                free(fresh);
                goto no_ctx;
            }
            fresh[p->group] = true;
        }
        /* override 0: a second certificate of a key type the names already have is refused */
        if (fresh[p->group] &&
            SSL_CTX_use_cert_and_key(gr->ssl, p->leaf, p->key, p->chain, 0) != 1) {
            snprintf(why, why_len,
                     "--tls-cert '%s': its names already have a certificate of this key type, or "
                     "OpenSSL refuses its key",
                     p->cert_path);
            rc = -EINVAL;
        }
    }
    free(fresh);
    ERR_clear_error();
    return rc;
no_ctx:
    ERR_clear_error();
    snprintf(why, why_len, "TLS: cannot set up OpenSSL's context");
    return -ENOMEM;
no_mem:
    snprintf(why, why_len, "TLS: out of memory");
    return -ENOMEM;
}

/* The names SNI looks up: the sites' (each naming its pair's group), the certificates' own. */
static int index_names(struct tls_certs *c, const struct tls_settings *s)
{
    int rc = 0;
    for (int i = 0; rc == 0 && i < s->num_certs; i++) {
        const struct tls_cert_files *f = &s->certs[i];
        struct tls_group *gr = &c->groups[c->pairs[i].group];
        for (int h = 0; rc == 0 && h < f->num_hosts; h++) {
            const char *name = f->hosts[h];
            rc = names_push(&c->sites, name, strlen(name), c->pairs[i].group);
            /* the site's name as a route key: an exact name, or a wildcard as its ".suffix" */
            const char *key = names_last(&c->sites);
            if (rc == 0 && key && !gr->site_name &&
                !(gr->site_name = strdup(key[0] == '*' ? key + 1 : key)))
                rc = -ENOMEM;
        }
    }
    for (int g = c->certless; rc == 0 && g < c->num_groups; g++)
        rc = leaf_names(&c->leaves, c->groups[g].leaf, g);
    if (rc == 0)
        rc = names_index(&c->sites);
    if (rc == 0)
        rc = names_index(&c->leaves);
    if (rc == 0)
        rc = sum_index_init(&c->pair_sums, (size_t)c->num_pairs);
    for (int i = 0; rc == 0 && i < c->num_pairs; i++)
        sum_index_add(&c->pair_sums, c->pairs[i].cert_sum, i, pair_sum_of, c->pairs);
    if (rc == 0)
        rc = sum_index_init(&c->group_sums, (size_t)c->num_groups);
    for (int g = c->certless; rc == 0 && g < c->num_groups; g++)
        sum_index_add(&c->group_sums, c->groups[g].sum, g, group_sum_of, c->groups);
    return rc;
}

int tls_certs_new(const struct tls_settings *s, const struct tls_certs *prev,
                  struct tls_certs **out, int *bad, char *why, size_t why_len)
{
    int rc;
    if (bad)
        *bad = -1;
    if (s->num_certs < (s->certless ? 0 : 1)) {
        snprintf(why, why_len, "TLS needs a --tls-cert/--tls-key pair");
        return -EINVAL;
    }
    if (s->kx_groups && tls_groups_check(s->kx_groups, why, why_len) != 0)
        return -EINVAL;
    struct tls_certs *c = calloc(1, sizeof(*c));
    if (!c) {
        snprintf(why, why_len, "TLS: out of memory");
        return -ENOMEM;
    }
    atomic_init(&c->refs, 1);
    c->certless = s->certless;
    c->num_groups = s->certless; /* certless: group 0 has no certificate, and only refuses */
    c->pairs = calloc((size_t)s->num_certs + 1, sizeof(*c->pairs));
    c->groups = calloc((size_t)s->num_certs + 1, sizeof(*c->groups));
    if (!c->pairs || !c->groups) {
        snprintf(why, why_len, "TLS: out of memory");
        rc = -ENOMEM;
        goto fail;
    }
    if ((rc = load_pairs(c, s, prev, why, why_len)) != 0) {
        if (bad)
            *bad = c->num_pairs; /* the one it could not load */
        goto fail;
    }
    if ((rc = make_groups(c, s, prev, why, why_len)) != 0)
        goto fail;
    if ((rc = index_names(c, s)) != 0) {
        snprintf(why, why_len, "TLS: out of memory");
        goto fail;
    }
    *out = c;
    return 0;
fail:
    certs_free(c);
    return rc;
}

static void ctx_free(struct tls_ctx *ctx)
{
    tls_certs_put(ctx->certs);
    BIO_free(ctx->wire); /* the last connection's SSL has dropped its reference */
    BIO_meth_free(ctx->bio);
    OPENSSL_cleanse(&ctx->cur, sizeof(ctx->cur));
    OPENSSL_cleanse(&ctx->prev, sizeof(ctx->prev));
    if (ctx->file_keys)
        OPENSSL_cleanse(ctx->file_keys, (size_t)ctx->num_file_keys * sizeof(*ctx->file_keys));
    free(ctx->file_keys);
    free(ctx);
}

int tls_ctx_new(const struct tls_settings *s, const struct tls_keys *keys, struct tls_ctx **out,
                char *why, size_t why_len)
{
    int rc = -ENOMEM;
    struct tls_ctx *ctx = calloc(1, sizeof(*ctx));
    if (!ctx) {
        snprintf(why, why_len, "TLS: out of memory");
        return -ENOMEM;
    }
    ctx->refs = 1;
    ctx->keys = keys;
    ctx->alpn_h2 = s->alpn_h2;
    ctx->challenge = s->challenge;
    ctx->ondemand = s->ondemand;
    ctx->rotate = s->ticket_rotate ? s->ticket_rotate : TLS_TICKET_ROTATE;
    ctx->period = INT64_MIN;
    if (!(ctx->bio = tls_record_bio_method()) || !(ctx->wire = BIO_new(ctx->bio))) {
        snprintf(why, why_len, "TLS: out of memory");
        goto fail;
    }
    if (s->shared) {
        atomic_fetch_add_explicit(&s->shared->refs, 1, memory_order_relaxed);
        ctx->certs = s->shared;
    } else if ((rc = tls_certs_new(s, NULL, &ctx->certs, NULL, why, why_len)) != 0) {
        goto fail;
    }
    if ((rc = read_ticket_files(ctx, s, why, why_len)) != 0)
        goto fail;
    tls_ctx_set_time(ctx, 0);
    *out = ctx;
    return 0;
fail:
    ctx_free(ctx);
    return rc;
}

const char *tls_ctx_warnings(const struct tls_ctx *ctx)
{
    return ctx->certs->warnings;
}

void tls_ctx_put(struct tls_ctx *ctx)
{
    if (ctx && --ctx->refs == 0)
        ctx_free(ctx);
}

/* ---- a connection on the context -------------------------------------------------------- */

int tls_conn_init(struct tls_conn *c, struct tls_ctx *ctx)
{
    *c = (struct tls_conn){0};
    SSL *ssl = SSL_new(ctx->certs->groups[0].ssl);
    if (!ssl || !BIO_up_ref(ctx->wire)) {
        SSL_free(ssl);
        ERR_clear_error();
        return -ENOMEM;
    }
    SSL_set_bio(ssl, ctx->wire, ctx->wire); /* both ways: SSL takes the reference just added */
    SSL_set_accept_state(ssl);
    c->ssl = ssl;
    c->ctx = ctx;
    c->state = TLS_ST_NEW;
    ctx->refs++;
    return 0;
}

const char *tls_conn_site_name(const struct tls_conn *c)
{
    if (c->by_site)
        return SSL_get_servername(c->ssl, TLSEXT_NAMETYPE_host_name);
    return c->ctx->certs->groups[c->group].site_name;
}

bool tls_conn_only_cert(const struct tls_conn *c)
{
    return c->ctx->certs->num_groups < 2;
}

bool tls_conn_names(const struct tls_conn *c, const char *host, size_t len)
{
    X509 *leaf = c->ctx->certs->groups[c->group].leaf;
    bool ok = leaf && X509_check_host(leaf, host, len, 0, NULL) == 1;
    ERR_clear_error();
    return ok;
}

int tls_pair_check(const struct tls_cert_files *f, char *why, size_t why_len)
{
    struct pair p;
    int rc = load_pair(f, NULL, &p, why, why_len);
    pair_free(&p);
    return rc;
}
